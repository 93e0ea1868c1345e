package shell

import (
	"regexp"
	"strings"
)

// MaxDepth bounds how deep Walk follows scripts run by scripts.
const MaxDepth = 8

// Visit is one command Walk reaches.
type Visit struct {
	Cmd   *Cmd       // the simple command as written (for an Exec, the command that runs it)
	Inv   Invocation // what runs after wrappers are removed
	Depth int        // 0 at the top level; +1 in a substitution or a nested script
	// Nested is set for a command that another command runs by argument
	// vector (find -exec, xargs -I for items after the first).
	Nested bool
}

// Walk calls fn for every simple command of s, in the order the shell
// would start them: substitutions before the command that contains them,
// then the command, then the shell code and argument vectors it runs
// (bash -c, eval, a shell reading a here-document, find -exec …), parsed
// and walked in turn, up to MaxDepth. Nested code that does not parse is
// given to onError (if not nil) and skipped. fn returns false to stop.
func Walk(s *Script, fn func(Visit) bool, onError func(src string, err error)) {
	w := walker{fn: fn, onError: onError}
	w.script(s, "", 0)
}

type walker struct {
	fn      func(Visit) bool
	onError func(string, error)
	stopped bool
}

func (w *walker) script(s *Script, dir string, depth int) {
	for _, c := range s.Cmds {
		if w.stopped {
			return
		}
		for _, sub := range c.AllSubs() {
			if depth+1 <= MaxDepth {
				w.script(sub, dir, depth+1)
			}
		}
		if c.Kind != Simple || len(c.Words) == 0 {
			continue
		}
		stdin, has := CmdStdin(c)
		inv := Unwrap(c.Args(), Context{Dir: dir, Stdin: stdin, HasStdin: has})
		if !w.visit(Visit{Cmd: c, Inv: inv, Depth: depth}) {
			return
		}
		if inv.Name == "cd" && len(inv.Args) > 0 && depth == 0 {
			dir = ResolveDir(inv.Args[len(inv.Args)-1], dir)
		}
		if depth+1 > MaxDepth {
			continue
		}
		for _, n := range inv.Scripts {
			ns, err := Parse(n.Src)
			if err != nil {
				if w.onError != nil {
					w.onError(n.Src, err)
				}
				continue
			}
			w.script(ns, inv.Dir, depth+1)
		}
		for _, e := range inv.Execs {
			ei := Unwrap(e.Argv, Context{Dir: e.Dir})
			if !w.visit(Visit{Cmd: c, Inv: ei, Depth: depth + 1, Nested: true}) {
				return
			}
		}
	}
}

func (w *walker) visit(v Visit) bool {
	if !w.fn(v) {
		w.stopped = true
	}
	return !w.stopped
}

// CmdStdin returns what c reads on standard input when the command line
// shows it: a here-document, a here-string, or the output of an echo or
// printf piped into it, with words read as their Value.
func CmdStdin(c *Cmd) (string, bool) {
	return CmdStdinWith(c, func(w Word) string { return w.Value })
}

// CmdStdinWith is CmdStdin with the reading of a word chosen by the
// caller (its Text, or its Value with the variables the caller knows).
// An input redirection other than a here-document or here-string hides
// what it reads, and overrides a pipe.
func CmdStdinWith(c *Cmd, read func(Word) string) (string, bool) {
	stdin, has, redirected := "", false, false
	for _, r := range c.Redirs {
		if !r.Stdin() {
			continue
		}
		redirected = true
		switch r.Op {
		case "<<", "<<-":
			stdin, has = r.Body, true
		case "<<<":
			stdin, has = read(r.Target)+"\n", true
		default:
			stdin, has = "", false
		}
	}
	if !redirected && c.PipeFrom != nil {
		words := make([]string, len(c.PipeFrom.Words))
		for i, w := range c.PipeFrom.Words {
			words[i] = read(w)
		}
		return Echoed(words)
	}
	return stdin, has
}

// Echoed returns what an echo or printf command writes, when that is
// visible in its words.
func Echoed(words []string) (string, bool) {
	if len(words) == 0 {
		return "", false
	}
	switch CommandName(words[0]) {
	case "echo":
		args := words[1:]
		for len(args) > 0 && (args[0] == "-n" || args[0] == "-e" || args[0] == "-E" || args[0] == "-ne" || args[0] == "-en") {
			args = args[1:]
		}
		return strings.Join(args, " ") + "\n", true
	case "printf":
		args := words[1:]
		if len(args) > 0 && args[0] == "--" {
			args = args[1:]
		}
		if len(args) == 0 || args[0] == "-v" {
			return "", false
		}
		return Printf(args[0], args[1:]), true
	}
	return "", false
}

// Printf renders printf's format with its arguments the way printf does
// for the common directives (%s %b %d %c %%) and escapes, reusing the
// format while arguments remain. Other directives print their argument.
func Printf(format string, args []string) string {
	var b strings.Builder
	for pass := 0; pass < 64; pass++ {
		used := 0
		for i := 0; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '\\' && i+1 < len(format):
				i++
				switch format[i] {
				case 'n':
					b.WriteByte('\n')
				case 't':
					b.WriteByte('\t')
				case '\\':
					b.WriteByte('\\')
				default:
					b.WriteByte('\\')
					b.WriteByte(format[i])
				}
			case c == '%' && i+1 < len(format):
				j := i + 1
				for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
					j++
				}
				if j >= len(format) {
					b.WriteString(format[i:])
					i = len(format)
					continue
				}
				if format[j] == '%' {
					b.WriteByte('%')
					i = j
					continue
				}
				arg := ""
				if used < len(args) {
					arg = args[used]
				}
				used++
				if format[j] == 'b' {
					arg = ansiC(arg)
				}
				b.WriteString(arg)
				i = j
			default:
				b.WriteByte(c)
			}
		}
		args = args[min(used, len(args)):]
		if used == 0 || len(args) == 0 {
			break
		}
	}
	return b.String()
}

// urlInText finds http(s) URLs in free text.
var urlInText = regexp.MustCompile(`https?://[^\s'"<>\x60\\{}|^\x00-\x1f]+`)

// TextURLs returns the http(s) URLs written in text. Parentheses belong
// to a URL when they are balanced in it (…/wiki/Python_(language)); an
// unbalanced closing one is the text's ("(see https://x.example/a)").
func TextURLs(text string) []string {
	urls := urlInText.FindAllString(text, -1)
	for i, u := range urls {
		if open := strings.IndexByte(u, '('); open >= 0 && strings.IndexByte(u[open:], ')') < 0 {
			u = u[:open] // an opening parenthesis never closed: the text's
		}
		for strings.HasSuffix(u, ")") && strings.Count(u, "(") < strings.Count(u, ")") {
			u = u[:len(u)-1]
		}
		if j := strings.IndexByte(u, ')'); j >= 0 && strings.Count(u[:j], "(") == 0 {
			u = u[:j] // "x.example/a)b": the text closes a parenthesis
		}
		urls[i] = u
	}
	return urls
}
