package ledger

import (
	"path"
	"strings"

	sh "github.com/vera-run/vera/internal/shell"
)

// This file reads a command line for move typing and query extraction,
// through internal/shell: the line is parsed once with shell.Parse into
// a tree of steps, each a simple command after shell.Unwrap removed its
// wrappers (sudo, env, timeout, xargs …), with the commands it runs in
// turn (its command substitutions, the shell code of bash -c, eval or a
// here-document into a shell, find -exec) as its children. Every helper
// of move.go and query.go walks that tree instead of reading the text
// again.

// maxNesting bounds how deep scripts run by scripts are read: the
// substitution or nested script of a step at this depth is left unread.
const maxNesting = sh.MaxDepth

// maxSteps bounds the steps read from one command line (parallel and
// xargs -I multiply the scripts they run); what is past it is left unread.
const maxSteps = 4096

// step is one command a command line runs.
type step struct {
	// cmd is the simple command as written: its words, redirections and
	// the command piped into it. A command run by argument vector (find
	// -exec, xargs -I beyond its first item) shares its runner's cmd.
	cmd *sh.Cmd
	// name is the program that runs, past wrappers, as a lower-cased base
	// name (/usr/bin/Curl → curl); "" when there is none (assignments
	// alone, a redirection alone, a loop header) or it is not known.
	name string
	// args are its arguments with expansions as written (shell.Word.Text:
	// "$HOME/x", "$(date)"); items xargs reads from an unknown input are
	// shell.Unknown.
	args []string
	inv  sh.Invocation // what shell.Unwrap found: nested scripts, stdin
	// byArgv marks a command run by argument vector: cmd's redirections
	// and pipe belong to its runner, not to it.
	byArgv bool
	// unread marks a step that runs shell code the ledger could not read:
	// it does not parse, or it is nested past maxNesting or maxSteps.
	unread bool
	// pipeFrom is the step whose output this one reads through a pipe.
	pipeFrom *step
	// kids are the commands the step runs in turn, in order: its command
	// substitutions, then the shell code it runs, then the commands it
	// runs by argument vector.
	kids []*step
}

// reading is a command line read once.
type reading struct {
	src    string
	parsed bool    // src parses as shell (see the package doc for what an unparseable command gives)
	steps  []*step // the top-level steps, in source order
	n      int     // steps made, against maxSteps
	main   map[*sh.Cmd]*step
}

// read parses src and builds its steps.
func read(src string) *reading {
	r := &reading{src: src, main: map[*sh.Cmd]*step{}}
	s, err := sh.Parse(src)
	if err != nil {
		return r
	}
	r.parsed = true
	r.steps = r.script(s, 0)
	return r
}

// script reads the commands of a parsed script.
func (r *reading) script(s *sh.Script, depth int) []*step {
	var out []*step
	for _, c := range s.Cmds {
		if c.Kind == sh.SubshellOpen || c.Kind == sh.SubshellClose {
			continue
		}
		if r.n >= maxSteps {
			break
		}
		r.n++
		st := &step{cmd: c}
		switch c.Kind {
		case sh.Simple:
			stdin, has := stdinText(c)
			st.inv = sh.Unwrap(c.Texts(), sh.Context{Stdin: stdin, HasStdin: has})
			st.name, st.args = commandName(st.inv.Name), st.inv.Args
			r.main[c] = st
			if c.PipeFrom != nil {
				st.pipeFrom = r.main[c.PipeFrom]
			}
		case sh.Arith:
			if strings.HasPrefix(c.Raw, "let") {
				st.name = "let" // let is parsed as arithmetic; it computes
			}
		default:
			// A loop header, a case subject or a test runs nothing itself
			// but its substitutions; it stays a nameless step so that its
			// words are read (for u in https://…).
		}
		for _, sub := range c.AllSubs() {
			st.kids = append(st.kids, r.nested(st, sub, depth)...)
		}
		r.runs(st, depth)
		out = append(out, st)
	}
	return out
}

// runs reads the shell code and the argument vectors st runs.
func (r *reading) runs(st *step, depth int) {
	for _, n := range st.inv.Scripts {
		if depth+1 > maxNesting || r.n >= maxSteps {
			st.unread = true
			continue
		}
		s, err := sh.Parse(n.Src)
		if err != nil {
			st.unread = true
			continue
		}
		st.kids = append(st.kids, r.nested(st, s, depth)...)
	}
	for _, e := range st.inv.Execs {
		if depth+1 > maxNesting || r.n >= maxSteps {
			st.unread = true
			continue
		}
		r.n++
		inv := sh.Unwrap(e.Argv, sh.Context{Dir: e.Dir})
		k := &step{cmd: st.cmd, name: commandName(inv.Name), args: inv.Args, inv: inv, byArgv: true}
		r.runs(k, depth+1)
		st.kids = append(st.kids, k)
	}
}

// nested reads a script st runs (a substitution, which shell.Parse has
// parsed with its command, or nested shell code) one level deeper, and
// marks st unread where the bounds leave some of it unread.
func (r *reading) nested(st *step, s *sh.Script, depth int) []*step {
	if s.TooDeep {
		st.unread = true // substitutions nested past shell.MaxNesting
	}
	if depth+1 > maxNesting || r.n >= maxSteps {
		st.unread = true
		return nil
	}
	return r.script(s, depth+1)
}

// commandName lower-cases the base name of a program (shell.CommandName
// keeps relative paths such as ./curl; the ledger types them by name).
func commandName(n string) string {
	if n == "" {
		return ""
	}
	return strings.ToLower(path.Base(n))
}

// stdinText is shell.CmdStdin with expansions as written: what c reads on
// standard input when the line shows it (a here-document's body, a
// here-string, the output of an echo or printf piped into it).
func stdinText(c *sh.Cmd) (string, bool) {
	return sh.CmdStdinWith(c, func(w sh.Word) string { return w.Text })
}

// walk calls fn for every step in order: each step before the commands
// it runs. fn returns false to stop.
func (r *reading) walk(fn func(*step) bool) {
	var visit func([]*step) bool
	visit = func(steps []*step) bool {
		for _, s := range steps {
			if !fn(s) || !visit(s.kids) {
				return false
			}
		}
		return true
	}
	visit(r.steps)
}

// texts returns the text the step shows as written: its words and the
// here-documents and here-strings it reads (none for a command run by
// argument vector, whose words are its runner's).
func (s *step) texts() []string {
	if s.byArgv {
		return nil
	}
	out := s.cmd.Texts()
	for _, rd := range s.cmd.Redirs {
		switch {
		case rd.HasBody:
			out = append(out, rd.Body)
		case rd.Op == "<<<":
			out = append(out, rd.Target.Text)
		}
	}
	return out
}

// stdoutFiles returns the files the step's standard output is redirected
// to, ignoring /dev/* and descriptor duplications.
func (s *step) stdoutFiles() []string {
	if s.byArgv {
		return nil
	}
	var out []string
	for _, rd := range s.cmd.Redirs {
		if t := rd.Target.Text; rd.StdoutFile() && t != "" && !strings.HasPrefix(t, "/dev/") {
			out = append(out, t)
		}
	}
	return out
}

// hasStdinDoc reports whether the step reads a here-document or a
// here-string.
func (s *step) hasStdinDoc() bool {
	if s.byArgv {
		return false
	}
	for _, rd := range s.cmd.Redirs {
		if rd.Op == "<<" || rd.Op == "<<-" || rd.Op == "<<<" {
			return true
		}
	}
	return false
}

// hasStdinFile reports whether the step's standard input is redirected
// from a file.
func (s *step) hasStdinFile() bool {
	if s.byArgv {
		return false
	}
	for _, rd := range s.cmd.Redirs {
		if rd.Op == "<" && rd.Stdin() {
			return true
		}
	}
	return false
}

// piped reports whether the step reads another command's output.
func (s *step) piped() bool { return !s.byArgv && s.cmd.PipeFrom != nil }

// runsCode reports whether the step is a wrapper of shell code (bash -c,
// eval, su -c, a shell reading a here-document …): what it does is what
// its nested steps do.
func (s *step) runsCode() bool { return len(s.inv.Scripts) > 0 }

// inline returns the program an interpreter step runs (python -c, also
// glued as -c'…', node -e, perl -e, a here-document on stdin …); false
// when the step is not an interpreter.
func (s *step) inline() (sh.Inline, bool) {
	name := s.name
	if name == "py" { // the Python launcher
		name = "python"
	}
	return sh.InlineCode(name, s.args, s.inv.Context)
}
