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
		case "<":
			// < <(echo …): what the process substitution prints.
			stdin, has = "", false
			if p := r.Target.Proc; p != nil && !r.Target.ProcOut {
				stdin, has = Printed(p, read)
			}
		default:
			stdin, has = "", false
		}
	}
	if !redirected && c.PipeFrom != nil {
		return cmdOutput(c.PipeFrom, read)
	}
	return stdin, has
}

// cmdOutput returns what one command writes on its standard output when
// the command line shows it: an echo or printf of known words, or cat of
// a here-document, a here-string or process substitutions that print
// visibly (cat <<EOF | sh, cat <(echo …) | sh).
func cmdOutput(c *Cmd, read func(Word) string) (string, bool) {
	if c.Kind != Simple || len(c.Words) == 0 {
		return "", false
	}
	for _, r := range c.Redirs {
		if r.StdoutFile() {
			return "", false
		}
	}
	words := make([]string, len(c.Words))
	for i, w := range c.Words {
		words[i] = read(w)
	}
	if CommandName(words[0]) != "cat" {
		return Echoed(words)
	}
	if len(c.Words) == 1 || len(c.Words) == 2 && words[1] == "-" {
		return catStdin(c, read)
	}
	var b strings.Builder
	for _, w := range c.Words[1:] {
		if w.Proc == nil || w.ProcOut || w.Value != string(Unknown) {
			return "", false
		}
		out, ok := Printed(w.Proc, read)
		if !ok {
			return "", false
		}
		b.WriteString(out)
	}
	return b.String(), true
}

// Echoed returns what an echo or printf command writes, when that is
// visible in its words: echo's -n, -e and -E (escapes applied with -e)
// and printf's format applied to its arguments (see Printf).
func Echoed(words []string) (string, bool) {
	if len(words) == 0 {
		return "", false
	}
	for len(words) > 1 && (words[0] == "builtin" || words[0] == "command") {
		words = words[1:]
	}
	switch CommandName(words[0]) {
	case "echo":
		args := words[1:]
		esc, newline := false, true
		for len(args) > 0 && echoOption(args[0]) {
			for _, c := range args[0][1:] {
				switch c {
				case 'e':
					esc = true
				case 'E':
					esc = false
				case 'n':
					newline = false
				}
			}
			args = args[1:]
		}
		out := strings.Join(args, " ")
		if esc {
			var stop bool
			if out, stop = EchoEscapes(out); stop {
				return out, true
			}
		}
		if newline {
			out += "\n"
		}
		return out, true
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

// echoOption reports whether w is an option of bash's echo (-n, -e, -E
// or a cluster of them).
func echoOption(w string) bool {
	if len(w) < 2 || w[0] != '-' {
		return false
	}
	for i := 1; i < len(w); i++ {
		if w[i] != 'n' && w[i] != 'e' && w[i] != 'E' {
			return false
		}
	}
	return true
}

// Printed returns what a script writes on standard output when it shows
// it: every command is an echo or printf of known words, or cat (with
// no file operand) of a here-document or here-string, none piped,
// redirected or in the background. read gives a word's value.
func Printed(s *Script, read func(Word) string) (string, bool) {
	if s == nil || s.TooDeep || len(s.Cmds) == 0 || len(s.Cmds) > 16 {
		return "", false
	}
	var b strings.Builder
	for _, c := range s.Cmds {
		if c.Kind != Simple || c.PipeFrom != nil || c.Op == "|" || c.Op == "|&" || c.Background || len(c.Words) == 0 {
			return "", false
		}
		out, ok := cmdOutput(c, read)
		if !ok {
			return "", false
		}
		b.WriteString(out)
	}
	return b.String(), true
}

// catStdin returns the here-document or here-string cat prints.
func catStdin(c *Cmd, read func(Word) string) (string, bool) {
	in, ok := "", false
	for _, r := range c.Redirs {
		switch {
		case r.Op == "<<" || r.Op == "<<-":
			if !r.BodyQuoted && strings.ContainsAny(r.Body, "$`\\") {
				return "", false // expansions in the body
			}
			in, ok = r.Body, true
		case r.Op == "<<<":
			in, ok = read(r.Target)+"\n", true
		case r.Output() || r.Stdin():
			return "", false
		}
	}
	return in, ok
}

// Printf renders printf's format with its arguments the way bash's
// printf does for the common directives (%s %b %c %d %q %%) and the
// format's escapes (\n, \t, \xHH, \NNN octal, \uHHHH …), reusing the
// format while arguments remain. %b applies echo -e's escapes to its
// argument (\c ends the output). Other directives print their argument.
func Printf(format string, args []string) string {
	var b strings.Builder
	for pass := 0; pass < 64; pass++ {
		used := 0
		for i := 0; i < len(format); i++ {
			c := format[i]
			switch {
			case c == '\\' && i+1 < len(format):
				i = formatEscape(&b, format, i+1) - 1
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
				switch format[j] {
				case 'b':
					out, stop := EchoEscapes(arg)
					b.WriteString(out)
					if stop {
						return b.String()
					}
				case 'c':
					if arg != "" {
						b.WriteString(arg[:1])
					}
				default:
					b.WriteString(arg)
				}
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

// formatEscape writes the printf format escape starting at format[i]
// (after the backslash) and returns the index after it.
func formatEscape(b *strings.Builder, format string, i int) int {
	e := format[i]
	i++
	switch e {
	case 'a':
		b.WriteByte(7)
	case 'b':
		b.WriteByte(8)
	case 'e', 'E':
		b.WriteByte(27)
	case 'f':
		b.WriteByte(12)
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'v':
		b.WriteByte(11)
	case '\\', '"', '\'', '?':
		b.WriteByte(e)
	case '0', '1', '2', '3', '4', '5', '6', '7':
		v := int(e - '0')
		for k := 0; k < 2 && i < len(format) && format[i] >= '0' && format[i] <= '7'; k++ {
			v = v*8 + int(format[i]-'0')
			i++
		}
		b.WriteByte(byte(v))
	case 'x', 'u', 'U':
		return hexEscape(b, format, i, e)
	default:
		b.WriteByte('\\')
		b.WriteByte(e)
	}
	return i
}

// hexEscape writes \xHH, \uHHHH or \UHHHHHHHH whose digits start at
// s[i], and returns the index after them.
func hexEscape(b *strings.Builder, s string, i int, e byte) int {
	n := 2
	switch e {
	case 'u':
		n = 4
	case 'U':
		n = 8
	}
	v, k := 0, 0
	for ; k < n && i < len(s) && hexVal(s[i]) >= 0; k++ {
		v = v*16 + hexVal(s[i])
		i++
	}
	switch {
	case k == 0:
		b.WriteByte('\\')
		b.WriteByte(e)
	case e == 'x':
		b.WriteByte(byte(v))
	default:
		b.WriteRune(rune(v))
	}
	return i
}

// EchoEscapes applies the escapes of echo -e (and printf's %b): \a \b
// \e \f \n \r \t \v \\ \0NNN \xHH \uHHHH \UHHHHHHHH; \c ends
// the output (stop is then true).
func EchoEscapes(s string) (out string, stop bool) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'c':
			return b.String(), true
		case '0':
			v := 0
			for k := 0; k < 3 && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '7'; k++ {
				i++
				v = v*8 + int(s[i]-'0')
			}
			b.WriteByte(byte(v))
		case 'x', 'u', 'U':
			i = hexEscape(&b, s, i+1, e) - 1
		case 'a', 'b', 'e', 'E', 'f', 'n', 'r', 't', 'v', '\\':
			formatEscape(&b, s, i)
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return b.String(), false
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
