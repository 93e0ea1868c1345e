package policy

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/vera-run/vera/internal/shell"
)

const (
	// WorkDir is the run's read-write work directory inside the sandbox
	// and the working directory Check assumes.
	WorkDir = "/work"
	// NotesPath is the run's notes file: append-only and owned by the
	// projector, written only through the notes-append action.
	NotesPath = "/work/notes.md"

	home       = "/root" // $HOME of the sandbox user (the container runs as root)
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
	sc := &scope{}
	if strings.HasPrefix(cwd, "/") {
		sc.cwd = path.Clean(cwd)
	}
	if d := a.source(command, sc, 0, true); d != nil {
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

// scope is the shell state the analysis tracks: working directory ("" if
// unknown) and variables assigned literally.
type scope struct {
	cwd  string
	vars map[string]string
}

func (s *scope) clone() *scope {
	n := &scope{cwd: s.cwd}
	if len(s.vars) > 0 {
		n.vars = maps.Clone(s.vars)
	}
	return n
}

func (s *scope) set(name, val string) {
	if s.vars == nil {
		s.vars = make(map[string]string)
	}
	s.vars[name] = val
}

func (s *scope) lookup(name string) string {
	if name == "PWD" && s.cwd != "" {
		return s.cwd
	}
	if v, ok := s.vars[name]; ok {
		return v
	}
	if name == "HOME" {
		return home
	}
	return string(shell.Unknown)
}

// expand replaces the variable markers of a shell.Word value by their
// values (or by shell.Unknown).
func (s *scope) expand(v string) string {
	if strings.IndexByte(v, shell.VarOpen) < 0 {
		return v
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(v, shell.VarOpen)
		if i < 0 {
			break
		}
		j := strings.IndexByte(v[i:], shell.VarClose)
		if j < 0 {
			break
		}
		b.WriteString(v[:i])
		b.WriteString(s.lookup(v[i+1 : i+j]))
		v = v[i+j+1:]
	}
	b.WriteString(v)
	return b.String()
}

// expandAll expands words with the variables known, splitting the value
// of an unquoted expansion into words as the shell does (X="rm -rf /";
// $X runs rm).
func (s *scope) expandAll(words []shell.Word) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		v := s.expand(w.Value)
		if w.Splits && v != w.Value {
			out = append(out, strings.Fields(v)...)
			continue
		}
		out = append(out, v)
	}
	return out
}

func (s *scope) assign(w string) {
	name, val, _ := strings.Cut(w, "=")
	if strings.HasSuffix(name, "+") || strings.IndexByte(name, '[') >= 0 {
		name = strings.TrimSuffix(name, "+")
		if i := strings.IndexByte(name, '['); i > 0 {
			name = name[:i]
		}
		val = string(shell.Unknown)
	}
	s.set(name, val)
}

// builtin applies the effect of cd, export, unset, read … on the scope.
func (s *scope) builtin(words []string) {
	args := words[1:]
	switch words[0] {
	case "cd", "pushd":
		for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' {
			if args[0] == "--" {
				args = args[1:]
				break
			}
			args = args[1:]
		}
		switch {
		case len(args) == 0:
			if words[0] == "cd" {
				s.cwd = s.lookup("HOME")
				if strings.IndexByte(s.cwd, shell.Unknown) >= 0 {
					s.cwd = ""
				}
			}
		case args[0] == "-" || strings.HasPrefix(args[0], "+"):
			s.cwd = ""
		default:
			s.cwd = shell.ResolveDir(args[0], s.cwd)
		}
	case "popd":
		s.cwd = ""
	case "export", "declare", "typeset", "local", "readonly":
		for _, a := range args {
			if !strings.HasPrefix(a, "-") && shell.IsAssignment(a) {
				s.assign(a)
			}
		}
	case "unset":
		for _, a := range args {
			if s.vars != nil {
				delete(s.vars, a)
			}
		}
	case "read", "mapfile", "readarray", "getopts":
		for _, a := range args {
			if shell.IsName(a) {
				s.set(a, string(shell.Unknown))
			}
		}
	}
}

type analyser struct {
	budget int
	loops  int    // loop bodies still to be judged with a known item
	top    string // the command being checked
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
func (a *analyser) source(src string, sc *scope, depth int, top bool) *Decision {
	if depth > maxDepth {
		return denied(ruleUnparseable, fmt.Sprintf("scripts nested more than %d levels deep (bash -c, eval, …) cannot be judged", maxDepth), src)
	}
	if !top {
		src = strings.ReplaceAll(src, string(shell.Unknown), unknownWord)
	}
	s, err := shell.Parse(src)
	if err != nil {
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
	var saved []*scope
	for i, c := range s.Cmds {
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
// with, and maxLoopBodies how many such judgements one command gets in
// all (nested loops multiply them). Past either, the loop is read with
// its variable unknown only, as any loop over unknown items is.
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

// redirs returns c's redirections with their targets expanded.
func (a *analyser) redirs(c *shell.Cmd, sc *scope) []redir {
	out := make([]redir, 0, len(c.Redirs))
	for _, r := range c.Redirs {
		out = append(out, redir{Redir: r, target: sc.expand(r.Target.Value)})
	}
	return out
}

// simple analyses one simple command.
func (a *analyser) simple(c *shell.Cmd, sc *scope, depth int) *Decision {
	words := sc.expandAll(c.Words)
	n := 0
	for n < len(words) && shell.IsAssignment(words[n]) {
		n++
	}
	if n == len(words) {
		for _, w := range words {
			sc.assign(w)
		}
		words = nil
	} else {
		words = words[n:]
	}
	ctx := shell.Context{Dir: sc.cwd}
	ctx.Stdin, ctx.HasStdin = stdinOf(c, sc)
	redirs := a.redirs(c, sc)
	if len(words) > 0 {
		sc.builtin(words)
	}
	return a.run(words, redirs, ctx, c, c.Raw, sc, depth)
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
	u := shell.Unwrap(argv, ctx)
	if len(u.Wrappers) >= maxWrappers {
		return denied(ruleUnparseable, fmt.Sprintf("%d or more wrappers (sudo, env, nice …) around one command cannot be judged", maxWrappers), raw)
	}
	inv := &invocation{
		name: u.Name, args: u.Args, redirs: redirs, stdin: u.Stdin, hasStdin: u.HasStdin, cwd: u.Dir,
		cmd: c, scripts: u.Scripts,
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
		child := sc
		if !n.Same {
			child = sc.clone()
			child.cwd = u.Dir
		}
		if d := a.source(n.Src, child, depth+1, false); d != nil {
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
