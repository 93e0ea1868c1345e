package policy

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/vera-run/vera/internal/shell"
)

const (
	// WorkDir is the run's read-write work directory inside the sandbox
	// and the working directory Check assumes.
	WorkDir = "/work"
	// NotesPath is where the notes file used to be, in the work
	// directory. The notes are no longer a file in the sandbox (VERA
	// keeps notes.md outside it and shows it to the model every turn),
	// so this is an ordinary file of the model's; the notes_md rule
	// still refuses writing it, as feedback (see rules.go).
	NotesPath = WorkDir + "/notes.md"

	home       = "/root" // what ~ and $HOME are taken to be, so that rm -rf ~ stays refused whatever the user
	maxDepth   = 8       // nesting depth of scripts run by scripts (bash -c, eval, …)
	maxScripts = 256     // scripts (top level, substitutions, bash -c …) per Check
	// maxWrappers is the number of wrappers shell.Unwrap removes from one
	// command at most; a command with that many is not fully unwrapped.
	maxWrappers = 64
)

// Rule is one deny rule. The full list, with what each rule blocks and
// what it deliberately allows, is in rules.go.
type Rule struct {
	// ID is the stable identifier reported in Decision.Rule and in
	// tool.finished.
	ID string
	// Description says what the rule blocks and what it allows.
	Description string
	// Denies and Allows are documented examples; the tests check that
	// each Denies entry is denied by this rule and each Allows entry is
	// allowed.
	Denies []string
	Allows []string

	// check inspects one simple command after unwrapping.
	check func(inv *invocation) string
	// checkScript inspects a whole parsed script (a command line, a
	// substitution's body, the code of bash -c …).
	checkScript func(s *shell.Script) (match, reason string)
}

// Decision is the verdict on one command.
type Decision struct {
	// Denied is true when the command must not be executed.
	Denied bool
	// Rule is the ID of the matching rule (empty when allowed).
	Rule string
	// Reason explains, for humans, why the rule matched.
	Reason string
	// Match is the (innermost) simple command or construct that matched.
	Match string
}

// String renders the decision for logs and tool.finished.
func (d Decision) String() string {
	if !d.Denied {
		return "allowed"
	}
	return fmt.Sprintf("denied by policy rule %s: %s (in %q)", d.Rule, d.Reason, d.Match)
}

// Check decides whether command, run with bash -c in the sandbox with
// working directory /work, must be refused.
func Check(command string) Decision { return CheckIn(command, WorkDir) }

// CheckIn is Check for a command run in working directory cwd. A cwd that
// is empty or not absolute means "unknown": relative paths then never
// match a rule.
func CheckIn(command, cwd string) Decision {
	a := analyser{budget: maxScripts, loops: maxLoopBodies, top: command}
	// The command runs in bash with no positional parameters and an
	// empty directory stack.
	sc := &scope{posKnown: true, dirsKnown: true}
	if strings.HasPrefix(cwd, "/") {
		sc.cwd = path.Clean(cwd)
	}
	if d := a.source(command, sc, 0, true, false); d != nil {
		return *d
	}
	return Decision{}
}

// Rules returns the deny rules, in evaluation order.
func Rules() []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		r.Denies = slices.Clone(r.Denies)
		r.Allows = slices.Clone(r.Allows)
		out[i] = r
	}
	return out
}

// ---------------------------------------------------------------------
// Analysis.

type analyser struct {
	budget int
	// loops is how many more times a body may be read again: a for
	// loop's body with a known item, a function's body where it is
	// called.
	loops  int
	top    string          // the command being checked
	active map[string]bool // functions being read at their call
}

func denied(r *Rule, reason, match string) *Decision {
	match = strings.NewReplacer(string(shell.Unknown), "…", unknownWord, "…").Replace(match)
	match = strings.TrimSpace(match)
	if strings.HasSuffix(match, ";") && !strings.HasSuffix(match, `\;`) {
		match = strings.TrimSpace(strings.TrimSuffix(match, ";")) // a statement's terminator
	}
	if len(match) > 300 {
		match = match[:300] + "…"
	}
	if match == "" {
		match = "(empty)"
	}
	return &Decision{Denied: true, Rule: r.ID, Reason: reason, Match: match}
}

// unknownWord stands for shell.Unknown when code is re-parsed: the
// parser drops NUL bytes, and an unset variable is what an unknown value
// is to the analysis.
const unknownWord = "${__vera_unknown__}"

// source parses and analyses shell code: the command itself (top), or
// code a command runs (bash -c, eval, a here-document fed to a shell).
// Code found by reading another language (bestEffort: awk's system(),
// a git alias …) is skipped, not refused, when it does not parse.
func (a *analyser) source(src string, sc *scope, depth int, top, bestEffort bool) *Decision {
	if depth > maxDepth {
		return denied(ruleUnparseable, fmt.Sprintf("scripts nested more than %d levels deep (bash -c, eval, …) cannot be judged", maxDepth), src)
	}
	if !top {
		src = strings.ReplaceAll(src, string(shell.Unknown), unknownWord)
	}
	s, err := shell.Parse(src)
	if err != nil {
		if bestEffort {
			return nil
		}
		detail := strings.TrimPrefix(err.Error(), shell.ErrSyntax.Error()+": ")
		why := "not valid shell syntax (" + detail + "): bash would refuse it too, and a script understood only in part cannot be judged"
		if errors.Is(err, shell.ErrTooDeep) {
			why = detail + ": a script understood only in part cannot be judged"
		}
		return denied(ruleUnparseable, why, src)
	}
	return a.script(s, sc, depth)
}

// script analyses a parsed script.
func (a *analyser) script(s *shell.Script, sc *scope, depth int) *Decision {
	if a.budget <= 0 {
		return denied(ruleUnparseable, fmt.Sprintf("more than %d scripts (substitutions, bash -c, eval …) in one command cannot be judged", maxScripts), a.top)
	}
	a.budget--
	if s.TooDeep {
		return denied(ruleUnparseable, fmt.Sprintf("substitutions nested more than %d levels deep cannot be judged", shell.MaxNesting), s.Src)
	}
	for i := range rules {
		if r := &rules[i]; r.checkScript != nil {
			if m, why := r.checkScript(s); why != "" {
				return denied(r, why, m)
			}
		}
	}
	return a.cmds(s, 0, len(s.Cmds), sc, depth)
}

// cmds analyses the commands s.Cmds[lo:hi] in order.
func (a *analyser) cmds(s *shell.Script, lo, hi int, sc *scope, depth int) *Decision {
	var saved []*scope
	for i := lo; i < hi; i++ {
		c := s.Cmds[i]
		switch c.Kind {
		case shell.SubshellOpen:
			saved = append(saved, sc)
			sc = sc.clone()
			continue
		case shell.SubshellClose:
			if len(saved) > 0 {
				sc = saved[len(saved)-1]
				saved = saved[:len(saved)-1]
			}
		case shell.FuncDef:
			// The body is read where the function is defined, with its
			// parameters unknown and in a copy of the scope (its cd does
			// not leak), and again where it is called.
			end := min(hi, i+1+c.Body)
			if len(c.Words) > 0 {
				if sc.funcs == nil {
					sc.funcs = make(map[string]*shell.Script)
				}
				sc.funcs[c.Words[0].Value] = &shell.Script{Src: s.Src, Cmds: s.Cmds[i+1 : end]}
			}
			child := sc.clone()
			child.posKnown, child.pos = false, nil
			if d := a.cmds(s, i+1, end, child, depth); d != nil {
				return d
			}
			i = end - 1
			continue
		}
		// Substitutions run before the command that contains them; their
		// cd and assignments stay inside them.
		for _, sub := range c.AllSubs() {
			if d := a.script(sub, sc.clone(), depth); d != nil {
				return d
			}
		}
		switch c.Kind {
		case shell.ForHeader:
			if d := a.loopItems(s, i, c, sc, depth); d != nil {
				return d
			}
			if len(c.Words) > 0 {
				sc.set(c.Words[0].Value, string(shell.Unknown))
			}
		case shell.Simple:
			if d := a.simple(c, sc, depth); d != nil {
				return d
			}
		case shell.SubshellClose:
			// Redirections of ( … ) > file: judged as a command without words.
			if len(c.Redirs) > 0 {
				raw := "( … )"
				for _, r := range c.Redirs {
					raw += " " + r.Fd + r.Op + " " + r.Target.Raw
				}
				if d := a.run(nil, a.redirs(c, sc), shell.Context{Dir: sc.cwd}, c, raw, sc, depth); d != nil {
					return d
				}
			}
		}
	}
	return nil
}

// maxLoopItems bounds how many items of a for loop its body is judged
// with, and maxLoopBodies how many such judgements (and function bodies
// read where they are called) one command gets in all (nested loops
// multiply them). Past either, the loop is read with its variable
// unknown only, as any loop over unknown items is.
const (
	maxLoopItems  = 8
	maxLoopBodies = 32
)

// loopItems judges the body of a for loop once with the variable set to
// each of its known items (for f in /work/*; do rm -rf "$f"; done is rm
// -rf of the pattern /work/*, which may name notes.md), before the loop
// is read once more with the variable unknown.
func (a *analyser) loopItems(s *shell.Script, i int, h *shell.Cmd, sc *scope, depth int) *Decision {
	if len(h.Words) < 2 || h.Body == 0 || i+1+h.Body > len(s.Cmds) {
		return nil
	}
	body := &shell.Script{Src: s.Src, Cmds: s.Cmds[i+1 : i+1+h.Body]}
	name := h.Words[0].Value
	for n, w := range h.Words[1:] {
		if n >= maxLoopItems {
			break
		}
		item := sc.expand(w.Value)
		if strings.IndexByte(item, shell.Unknown) >= 0 {
			continue
		}
		if a.loops <= 0 {
			return nil
		}
		a.loops--
		child := sc.clone()
		child.set(name, item)
		// These extra readings do not spend the budget of scripts that
		// bounds a command's own nesting.
		budget := a.budget
		d := a.script(body, child, depth)
		a.budget = budget
		if d != nil {
			return d
		}
	}
	return nil
}

// call reads the body of a function where it is called, in the caller's
// scope (its cd and assignments persist) with the call's arguments as
// its parameters. Recursion is not followed.
func (a *analyser) call(name string, body *shell.Script, args []string, sc *scope, depth int) *Decision {
	if a.loops <= 0 || a.active[name] {
		return nil
	}
	a.loops--
	if a.active == nil {
		a.active = make(map[string]bool)
	}
	a.active[name] = true
	pos, posKnown, arg0 := sc.pos, sc.posKnown, sc.arg0
	sc.setParams(append([]string{arg0}, args...))
	budget := a.budget
	d := a.script(body, sc, depth)
	a.budget = budget
	sc.pos, sc.posKnown, sc.arg0 = pos, posKnown, arg0
	delete(a.active, name)
	return d
}

// redirs returns c's redirections with their targets expanded.
func (a *analyser) redirs(c *shell.Cmd, sc *scope) []redir {
	out := make([]redir, 0, len(c.Redirs))
	for _, r := range c.Redirs {
		out = append(out, redir{Redir: r, target: sc.expand(r.Target.Value)})
	}
	return out
}

// procFiles names the process substitutions <( … ) of c's words whose
// output is visible (echo, printf, cat of a here-document) /dev/fd/N, as
// bash does, and returns the words with those names and the files'
// contents: a shell or source reading one runs that code.
func procFiles(c *shell.Cmd, sc *scope) ([]shell.Word, map[string]string) {
	var files map[string]string
	words := c.Words
	for k, w := range c.Words {
		if w.Proc == nil || w.ProcOut || strings.Count(w.Value, string(shell.Unknown)) != 1 {
			continue
		}
		out, ok := shell.Printed(w.Proc, func(w shell.Word) string { return sc.expand(w.Value) })
		if !ok {
			continue
		}
		if files == nil {
			files = make(map[string]string)
			words = slices.Clone(c.Words)
		}
		name := "/dev/fd/" + strconv.Itoa(63-len(files))
		files[name] = out
		words[k].Value = strings.Replace(w.Value, string(shell.Unknown), name, 1)
	}
	return words, files
}

// simple analyses one simple command.
func (a *analyser) simple(c *shell.Cmd, sc *scope, depth int) *Decision {
	cwords, files := procFiles(c, sc)
	words := sc.expandAll(cwords)
	n := 0
	for n < len(words) && shell.IsAssignment(words[n]) {
		n++
	}
	// env is what the command sees: the scope with its own assignments
	// (CDPATH=/ cd etc).
	env := sc
	argv := words // with its own assignments, which Unwrap reads
	if n == len(words) {
		a.assignAll(cwords, words, sc)
		words, argv = nil, nil
	} else {
		if n > 0 {
			env = sc.clone()
			for _, w := range words[:n] {
				env.assign(w, nil, false)
			}
		}
		words = words[n:]
	}
	ctx := shell.Context{Dir: sc.cwd, Files: files}
	ctx.Stdin, ctx.HasStdin = stdinOf(c, sc)
	if !ctx.HasStdin && sc.hasStdin && c.PipeFrom == nil && !redirectsStdin(c) {
		ctx.Stdin, ctx.HasStdin = sc.stdin, true // the script's own standard input
	}
	redirs := a.redirs(c, sc)
	var fn *shell.Script
	alias, used := "", []string(nil)
	if len(words) > 0 {
		fn = sc.funcs[words[0]]
		if k := firstCommandWord(cwords); k >= 0 && !cwords[k].Quoted && cwords[k].Value == words[0] {
			alias, used = expandAliases(words, sc)
		}
		bw := words
		for len(bw) > 1 && (bw[0] == "builtin" || bw[0] == "command") {
			bw = bw[1:]
		}
		switch bw[0] {
		case "declare", "typeset", "local", "readonly", "export":
			a.assignAll(cwords, bw, sc)
		default:
			sc.builtin(bw, env, ctx.Stdin, ctx.HasStdin)
		}
	}
	if d := a.run(argv, redirs, ctx, c, c.Raw, sc, depth); d != nil {
		return d
	}
	if alias != "" {
		// An alias defined earlier in the command line: its text
		// replaces the command word (bash expands aliases only with
		// expand_aliases, but the line shows what it is meant to run).
		// As in bash, an alias is not expanded again in its own text.
		hidden := make(map[string]string, len(used))
		for _, u := range used {
			hidden[u] = sc.aliases[u]
			delete(sc.aliases, u)
		}
		d := a.source(alias, sc, depth+1, false, false)
		for u, text := range hidden {
			if sc.aliases == nil {
				sc.aliases = make(map[string]string)
			}
			sc.aliases[u] = text
		}
		if d != nil {
			return d
		}
	}
	if fn != nil {
		return a.call(words[0], fn, words[1:], sc, depth)
	}
	return nil
}

// assignAll applies the assignments of an assignment-only command or a
// declaration (declare, local, export …), arrays included.
func (a *analyser) assignAll(cwords []shell.Word, words []string, sc *scope) {
	arrays := map[string][]string{}
	for _, w := range cwords {
		if w.Elems != nil {
			name, _, _ := strings.Cut(w.Value, "=")
			arrays[strings.TrimSuffix(name, "+")] = sc.expandAll(w.Elems)
		}
	}
	for _, w := range words {
		if strings.HasPrefix(w, "-") || !shell.IsAssignment(w) {
			continue
		}
		name, _, _ := strings.Cut(w, "=")
		elems, isArray := arrays[strings.TrimSuffix(name, "+")]
		sc.assign(w, elems, isArray)
	}
}

// firstCommandWord returns the index of the first word that is not an
// assignment, or -1.
func firstCommandWord(words []shell.Word) int {
	for k, w := range words {
		if !shell.IsAssignment(w.Value) {
			return k
		}
	}
	return -1
}

// expandAliases returns the command line an alias defined earlier makes
// of words: its text for the command word, then for the next word too
// when the text ends in a blank (alias s='sudo '); "" when the command
// word is no alias. used are the aliases expanded.
func expandAliases(words []string, sc *scope) (line string, used []string) {
	if len(sc.aliases) == 0 {
		return "", nil
	}
	var b strings.Builder
	seen := map[string]bool{}
	i := 0
	for i < len(words) && len(seen) < 8 {
		text, ok := sc.aliases[words[i]]
		if !ok || seen[words[i]] {
			break
		}
		seen[words[i]] = true
		used = append(used, words[i])
		b.WriteString(text)
		i++
		if !strings.HasSuffix(text, " ") && !strings.HasSuffix(text, "\t") {
			break
		}
	}
	if i == 0 {
		return "", nil
	}
	for _, w := range words[i:] {
		b.WriteString(" " + shell.Quote(w))
	}
	return b.String(), used
}

// stdinOf returns what c reads on standard input when the command line
// shows it (a here-document, a here-string, or what a piped-in echo or
// printf writes), with the variables known at that point.
func stdinOf(c *shell.Cmd, sc *scope) (string, bool) {
	return shell.CmdStdinWith(c, func(w shell.Word) string { return sc.expand(w.Value) })
}

func redirectsStdin(c *shell.Cmd) bool {
	for _, r := range c.Redirs {
		if r.Stdin() {
			return true
		}
	}
	return false
}

// run unwraps argv, applies the rules to the command that finally runs
// and analyses the code and commands it runs in turn.
func (a *analyser) run(argv []string, redirs []redir, ctx shell.Context, c *shell.Cmd, raw string, sc *scope, depth int) *Decision {
	ctx.GitAliases = sc.gitAliases
	u := shell.Unwrap(argv, ctx)
	if name, val, ok := shell.GitAlias(u.Name, u.Args); ok && len(sc.gitAliases) < maxArray {
		if sc.gitAliases == nil {
			sc.gitAliases = make(map[string]string)
		}
		sc.gitAliases[name] = val
	}
	if len(u.Wrappers) >= maxWrappers {
		return denied(ruleUnparseable, fmt.Sprintf("%d or more wrappers (sudo, env, nice …) around one command cannot be judged", maxWrappers), raw)
	}
	inv := &invocation{
		name: u.Name, args: u.Args, redirs: redirs, stdin: u.Stdin, hasStdin: u.HasStdin, cwd: u.Dir,
		cmd: c, scripts: u.Scripts, writes: u.Writes,
	}
	if in, ok := shell.InlineCode(u.Name, u.Args, u.Context); ok {
		inv.inline = &in
	}
	if d := a.apply(inv, raw); d != nil {
		return d
	}
	if inv.name == "" && len(inv.args) > 0 {
		if d := a.unknownHead(inv, raw); d != nil {
			return d
		}
	}
	for _, n := range u.Scripts {
		// The code reads what the command reads, unless that is the
		// code itself (bash <<< 'code').
		in, hasIn := u.Stdin, u.HasStdin && n.Src != u.Stdin
		child := sc
		if !n.Same {
			child = sc.clone()
			child.cwd = u.Dir
			child.setParams(n.Args)
			for _, e := range u.Env {
				child.assign(e, nil, false)
			}
		} else {
			for _, e := range u.Env {
				sc.assign(e, nil, false) // X=1 eval …: seen by the code
			}
		}
		saved, savedHas := child.stdin, child.hasStdin
		child.stdin, child.hasStdin = in, hasIn
		d := a.source(n.Src, child, depth+1, false, n.BestEffort)
		child.stdin, child.hasStdin = saved, savedHas
		if d != nil {
			return d
		}
	}
	execs := u.Execs
	if u.Name == "find" {
		execs = findExecs(inv, execs)
	}
	for _, e := range execs {
		if d := a.run(e.Argv, nil, shell.Context{Dir: e.Dir}, c, raw, sc, depth+1); d != nil {
			return d
		}
	}
	if inv.inline != nil {
		if d := a.inlineCode(inv, raw, sc, depth); d != nil {
			return d
		}
	}
	return nil
}

// ruleUnparseable and ruleRmRoot are rules the analyser reports itself.
var (
	ruleUnparseable = ruleByID("unparseable")
	ruleRmRoot      = ruleByID("rm_root")
)

func ruleByID(id string) *Rule {
	for i := range rules {
		if rules[i].ID == id {
			return &rules[i]
		}
	}
	panic("policy: no rule " + id)
}

func (a *analyser) apply(inv *invocation, raw string) *Decision {
	for i := range rules {
		r := &rules[i]
		if r.check == nil {
			continue
		}
		if why := r.check(inv); why != "" {
			return denied(r, why, raw)
		}
	}
	return nil
}

// ---------------------------------------------------------------------
// Invocations: a simple command after wrappers are unwrapped.

type redir struct {
	shell.Redir
	target string // Target.Value with variables expanded
}

type invocation struct {
	name     string   // command name (/bin/rm → rm), "" if none or unknown
	args     []string // expanded arguments
	redirs   []redir
	stdin    string // what the command reads on stdin, when visible
	hasStdin bool
	cwd      string // "" if unknown

	cmd     *shell.Cmd     // the simple command as written
	scripts []shell.Nested // shell code it runs
	writes  []string       // files its own script writes (sed w, awk print >)
	inline  *shell.Inline  // an interpreter's program, if name is one
}

// abs resolves p against the invocation's working directory.
func (inv *invocation) abs(p string) (string, bool) {
	if p == "" || strings.IndexByte(p, shell.Unknown) >= 0 {
		return "", false
	}
	if p[0] != '/' {
		if inv.cwd == "" {
			return "", false
		}
		p = inv.cwd + "/" + p
	}
	return path.Clean(p), true
}
