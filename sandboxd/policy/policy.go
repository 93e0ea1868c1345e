package policy

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

const (
	// WorkDir is the run's read-write work directory inside the sandbox
	// and the working directory Check assumes.
	WorkDir = "/work"
	// NotesPath is the run's notes file: append-only and owned by the
	// projector, written only through the notes-append action.
	NotesPath = "/work/notes.md"

	home       = "/root" // $HOME of the sandbox user (the container runs as root)
	maxDepth   = 8       // nesting depth of scripts analysed
	maxScripts = 256     // scripts (top level, substitutions, bash -c …) per Check
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
	// checkScript inspects the tokens of a whole script.
	checkScript func(src string, toks []token) (match, reason string)
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
	a := analyser{budget: maxScripts}
	sc := &scope{}
	if strings.HasPrefix(cwd, "/") {
		sc.cwd = path.Clean(cwd)
	}
	if d := a.script(command, sc, 0); d != nil {
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
	return string(markUnknown)
}

// expand replaces variable markers by their values (or by markUnknown).
func (s *scope) expand(v string) string {
	if strings.IndexByte(v, markVarOpen) < 0 {
		return v
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(v, markVarOpen)
		if i < 0 {
			break
		}
		j := strings.IndexByte(v[i:], markVarClose)
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

// resolveDir resolves a cd target against cwd; "" means unknown.
func resolveDir(d, cwd string) string {
	if d == "" || strings.IndexByte(d, markUnknown) >= 0 {
		return ""
	}
	if d[0] != '/' {
		if cwd == "" {
			return ""
		}
		d = cwd + "/" + d
	}
	return path.Clean(d)
}

type analyser struct {
	budget int
}

func denied(r *Rule, reason, match string) *Decision {
	match = strings.TrimSpace(strings.ReplaceAll(match, string(markUnknown), "…"))
	if len(match) > 300 {
		match = match[:300] + "…"
	}
	return &Decision{Denied: true, Rule: r.ID, Reason: reason, Match: match}
}

// script analyses a shell script (the command, a substitution body, the
// argument of bash -c, …).
func (a *analyser) script(src string, sc *scope, depth int) *Decision {
	if depth > maxDepth || a.budget <= 0 {
		return nil
	}
	a.budget--
	toks := lex(src)
	for i := range rules {
		if r := &rules[i]; r.checkScript != nil {
			if m, why := r.checkScript(src, toks); why != "" {
				return denied(r, why, m)
			}
		}
	}
	var saved []*scope
	for _, it := range parse(toks) {
		switch it.kind {
		case itemOpen:
			saved = append(saved, sc)
			sc = sc.clone()
		case itemClose:
			if len(saved) > 0 {
				sc = saved[len(saved)-1]
				saved = saved[:len(saved)-1]
			}
		case itemCmd:
			if d := a.simple(src, it.cmd, sc, depth); d != nil {
				return d
			}
		}
	}
	return nil
}

func (a *analyser) subs(list []string, sc *scope, depth int) *Decision {
	for _, s := range list {
		if d := a.script(s, sc.clone(), depth+1); d != nil {
			return d
		}
	}
	return nil
}

// simple analyses one simple command.
func (a *analyser) simple(src string, c *cmdNode, sc *scope, depth int) *Decision {
	// Substitutions run before the command itself.
	for _, w := range c.words {
		if d := a.subs(w.subs, sc, depth); d != nil {
			return d
		}
	}
	for _, r := range c.redirs {
		if d := a.subs(r.tok.subs, sc, depth); d != nil {
			return d
		}
		if r.target != nil {
			if d := a.subs(r.target.subs, sc, depth); d != nil {
				return d
			}
		}
	}

	words := make([]string, len(c.words))
	for i, w := range c.words {
		words[i] = sc.expand(w.val)
	}
	words = stripKeywords(words, sc)
	n := 0
	for n < len(words) && isAssignment(words[n]) {
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

	inv := invocation{cwd: sc.cwd}
	for _, r := range c.redirs {
		rd := redir{op: r.tok.val}
		if r.target != nil {
			rd.target = sc.expand(r.target.val)
		}
		inv.redirs = append(inv.redirs, rd)
		switch rd.op {
		case "<<", "<<-":
			inv.stdin, inv.hasStdin = r.tok.body, r.tok.hasBody
		case "<<<":
			inv.stdin, inv.hasStdin = rd.target+"\n", true
		case "<", "<>", "<&":
			if r.tok.fd == "" || r.tok.fd == "0" {
				inv.stdin, inv.hasStdin = "", false
			}
		}
	}
	if !inv.hasStdin && c.pipeFrom != nil && len(c.redirs) == 0 {
		inv.stdin, inv.hasStdin = echoed(c.pipeFrom, sc)
	}
	if len(words) > 0 {
		sc.builtin(words)
	}
	return a.invoke(words, inv, src[c.start:c.end], sc, depth)
}

// stripKeywords removes reserved words that prefix a command (if, then,
// do, {, !, …). Headers of for/select/case and [[ … ]] are not commands.
func stripKeywords(words []string, sc *scope) []string {
	for len(words) > 0 {
		switch words[0] {
		case "if", "then", "else", "elif", "do", "while", "until", "{", "}", "!", "fi", "done", "esac":
			words = words[1:]
		case "function":
			if len(words) <= 2 {
				return nil
			}
			words = words[2:]
		case "for", "select":
			if len(words) > 1 {
				sc.set(words[1], string(markUnknown))
			}
			return nil
		case "case", "[[", "coproc":
			return nil
		default:
			return words
		}
	}
	return words
}

func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	name := strings.TrimSuffix(w[:eq], "+")
	if i := strings.IndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
		name = name[:i]
	}
	return isName(name)
}

func (s *scope) assign(w string) {
	name, val, _ := strings.Cut(w, "=")
	if strings.HasSuffix(name, "+") || strings.IndexByte(name, '[') >= 0 {
		name = strings.TrimSuffix(name, "+")
		if i := strings.IndexByte(name, '['); i > 0 {
			name = name[:i]
		}
		val = string(markUnknown)
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
				if strings.IndexByte(s.cwd, markUnknown) >= 0 {
					s.cwd = ""
				}
			}
		case args[0] == "-" || strings.HasPrefix(args[0], "+"):
			s.cwd = ""
		default:
			s.cwd = resolveDir(args[0], s.cwd)
		}
	case "popd":
		s.cwd = ""
	case "export", "declare", "typeset", "local", "readonly":
		for _, a := range args {
			if !strings.HasPrefix(a, "-") && isAssignment(a) {
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
			if isName(a) {
				s.set(a, string(markUnknown))
			}
		}
	}
}

// echoed returns what a piped-in echo/printf writes, if that is visible.
func echoed(c *cmdNode, sc *scope) (string, bool) {
	words := make([]string, 0, len(c.words))
	for _, w := range c.words {
		words = append(words, sc.expand(w.val))
	}
	if len(words) == 0 {
		return "", false
	}
	switch commandName(words[0]) {
	case "echo":
		args := words[1:]
		for len(args) > 0 && (args[0] == "-n" || args[0] == "-e" || args[0] == "-E" || args[0] == "-ne" || args[0] == "-en") {
			args = args[1:]
		}
		return strings.Join(args, " ") + "\n", true
	case "printf":
		if len(words) > 1 && words[1] == "-v" {
			return "", false
		}
		return strings.ReplaceAll(strings.Join(words[1:], " "), `\n`, "\n"), true
	}
	return "", false
}

// ---------------------------------------------------------------------
// Invocations: a simple command after wrappers are unwrapped.

type redir struct {
	op     string
	target string
}

// isOutput reports whether the redirection opens its target for writing.
func (r redir) isOutput() bool {
	switch r.op {
	case ">", ">>", ">|", "&>", "&>>", "<>":
		return true
	case ">&":
		return r.target != "-" && !allDigits(r.target)
	}
	return false
}

type invocation struct {
	name     string   // command name (/bin/rm → rm)
	args     []string // expanded arguments
	redirs   []redir
	stdin    string // what the command reads on stdin, when visible
	hasStdin bool
	cwd      string // "" if unknown
}

// abs resolves p against the invocation's working directory.
func (inv *invocation) abs(p string) (string, bool) {
	if p == "" || strings.IndexByte(p, markUnknown) >= 0 {
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

// commandName normalises argv[0]: an absolute path is reduced to its base
// name (/usr/bin/rm → rm). Relative paths (./reboot) are kept: they are
// programs of the work tree, not the system's.
func commandName(w string) string {
	if w == "" || strings.IndexByte(w, markUnknown) >= 0 {
		return ""
	}
	if w[0] == '/' {
		return path.Base(path.Clean(w))
	}
	return w
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
