package logic

import (
	"strings"
)

// NormalizeShellCommand writes a shell command in a canonical form, so
// that two spellings of one command compare equal. It changes only what
// the shell itself ignores:
//
//   - whitespace between words and around operators is irrelevant:
//     "ls  -la|wc  -l" and "ls -la | wc -l" are one command; a line
//     continuation (backslash-newline) joins lines as the shell does;
//   - a newline that ends a command is a ';', a trailing ';' and
//     separators after |, &&, || and & disappear;
//   - '# …' comments outside quotes are dropped;
//   - quotes that change nothing are normalised: the literal parts of a
//     word (quoted text without expansions, escaped characters, bare
//     characters the shell never interprets) are joined and written once:
//     bare when made only of letters, digits and _ . / : , + @ % -, else
//     in single quotes. So grep 'foo', grep "foo" and grep foo are one
//     command, and "a b", 'a b', a\ b and 'a'" b" are one word. Quoting
//     that matters stays: double-quoted text holding $, a backquote or a
//     backslash is kept as written, a quoted reserved word ('if' is not
//     if) keeps its quotes, and quoted =, ~, globs or braces stay quoted
//     while bare ones stay bare;
//   - a digit glued to a redirection (2>file) stays glued, since 2 >file
//     means something else;
//   - here-document bodies and delimiters, $(…), ${…}, $'…' and
//     backquoted commands are kept verbatim.
//
// The result is meant for comparison, not for running.
func NormalizeShellCommand(s string) string {
	lx := shellLexer{s: s}
	lx.run()
	return lx.render()
}

type shellTokKind int

const (
	tokWord shellTokKind = iota
	tokOp
	tokSep     // ; or a newline that ends a command
	tokHeredoc // a here-document body, with its closing delimiter line
)

type shellTok struct {
	kind shellTokKind
	text string
	glue bool // an IO number glued to the redirection that follows
}

type heredoc struct {
	delim     string
	stripTabs bool
}

type shellLexer struct {
	s       string
	i       int
	toks    []shellTok
	pending []heredoc // here-documents whose bodies start at the next newline
	delimOp string    // "<<" or "<<-" when the next word is a here-document delimiter
}

// shellOps are the shell's operators, longest first.
var shellOps = []string{
	"&>>", "<<<", "<<-", ";;&",
	"&&", "||", ";;", ";&", "<<", ">>", "<&", ">&", "<>", ">|", "&>", "|&",
	"|", "&", ";", "<", ">", "(", ")",
}

func isShellOpByte(c byte) bool {
	switch c {
	case '|', '&', ';', '<', '>', '(', ')':
		return true
	}
	return false
}

func (lx *shellLexer) run() {
	for lx.i < len(lx.s) {
		c := lx.s[lx.i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v':
			lx.i++
		case c == '\\' && lx.i+1 < len(lx.s) && lx.s[lx.i+1] == '\n':
			lx.i += 2 // line continuation
		case c == '\n':
			lx.i++
			lx.newline()
		case c == '#':
			for lx.i < len(lx.s) && lx.s[lx.i] != '\n' {
				lx.i++
			}
		case isShellOpByte(c):
			op := ""
			for _, o := range shellOps {
				if strings.HasPrefix(lx.s[lx.i:], o) {
					op = o
					break
				}
			}
			lx.i += len(op)
			if op == ";" {
				lx.sep()
				continue
			}
			lx.toks = append(lx.toks, shellTok{kind: tokOp, text: op})
			if op == "<<" || op == "<<-" {
				lx.delimOp = op
			}
		default:
			lx.word()
		}
	}
	for len(lx.toks) > 0 && lx.toks[len(lx.toks)-1].kind == tokSep {
		lx.toks = lx.toks[:len(lx.toks)-1]
	}
}

// sep records the end of a command, unless the command line is already
// at a command boundary or continues after an operator.
func (lx *shellLexer) sep() {
	if len(lx.toks) == 0 {
		return
	}
	last := lx.toks[len(lx.toks)-1]
	switch {
	case last.kind == tokSep, last.kind == tokHeredoc:
		return
	case last.kind == tokOp:
		switch last.text {
		case "|", "||", "&&", "&", "|&", "(", ";;", ";&", ";;&":
			return
		}
	}
	lx.toks = append(lx.toks, shellTok{kind: tokSep, text: ";"})
}

// newline ends a command and reads the bodies of pending here-documents.
func (lx *shellLexer) newline() {
	if len(lx.pending) == 0 {
		lx.sep()
		return
	}
	for _, h := range lx.pending {
		var body strings.Builder
		for lx.i < len(lx.s) {
			end := strings.IndexByte(lx.s[lx.i:], '\n')
			var line string
			if end < 0 {
				line, lx.i = lx.s[lx.i:], len(lx.s)
			} else {
				line, lx.i = lx.s[lx.i:lx.i+end], lx.i+end+1
			}
			line = strings.TrimSuffix(line, "\r")
			if h.stripTabs {
				line = strings.TrimLeft(line, "\t")
			}
			if line == h.delim {
				break
			}
			body.WriteString(line)
			body.WriteByte('\n')
		}
		lx.toks = append(lx.toks, shellTok{kind: tokHeredoc, text: "\n" + body.String() + h.delim + "\n"})
	}
	lx.pending = nil
}

// word reads one word: bare characters, quoted parts, escapes and
// substitutions up to unquoted whitespace or an operator. Runs of literal
// text (safe bare characters, quoted literal parts, escaped characters)
// are written as one canonical literal, so 'a'"b" and ab are one word.
func (lx *shellLexer) word() {
	var out, value, lit strings.Builder
	litQuoted := false // lit holds a quoted part (so '' is an empty word)
	flush := func() {
		if lit.Len() > 0 || litQuoted {
			out.WriteString(quoteLiteral(lit.String()))
		}
		lit.Reset()
		litQuoted = false
	}
	verbatim := func(v string) {
		flush()
		out.WriteString(v)
		value.WriteString(v)
	}
	literal := func(v string, quoted bool) {
		lit.WriteString(v)
		value.WriteString(v)
		litQuoted = litQuoted || quoted
	}
	digits := true
	quoted := false // a part was quoted or escaped
	start := lx.i
	for lx.i < len(lx.s) {
		c := lx.s[lx.i]
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v' || isShellOpByte(c) {
			break
		}
		digits = digits && c >= '0' && c <= '9'
		switch c {
		case '\'':
			quoted = true
			end := strings.IndexByte(lx.s[lx.i+1:], '\'')
			if end < 0 {
				verbatim(lx.s[lx.i:]) // unterminated: keep as written
				lx.i = len(lx.s)
				continue
			}
			literal(lx.s[lx.i+1:lx.i+1+end], true)
			lx.i += end + 2
		case '"':
			quoted = true
			from := lx.i
			lx.i = skipDoubleQuoted(lx.s, lx.i+1)
			raw := lx.s[from:lx.i]
			inner := raw[1:]
			if len(raw) >= 2 && strings.HasSuffix(raw, `"`) && !strings.ContainsAny(inner[:len(inner)-1], "$`\\") {
				literal(inner[:len(inner)-1], true)
			} else {
				verbatim(raw)
			}
		case '\\':
			if lx.i+1 >= len(lx.s) {
				verbatim(`\`)
				lx.i++
				continue
			}
			e := lx.s[lx.i+1]
			lx.i += 2
			if e == '\n' {
				continue // line continuation inside a word
			}
			quoted = true
			literal(lx.s[lx.i-1:lx.i], true)
		case '$':
			end := skipDollar(lx.s, lx.i)
			verbatim(lx.s[lx.i:end])
			lx.i = end
		case '`':
			end := skipBackquote(lx.s, lx.i+1)
			verbatim(lx.s[lx.i:end])
			lx.i = end
		default:
			if isShellSafe(c) {
				literal(lx.s[lx.i:lx.i+1], false)
			} else {
				verbatim(lx.s[lx.i : lx.i+1])
			}
			lx.i++
		}
	}
	flush()
	tok := shellTok{kind: tokWord, text: out.String()}
	if tok.text == "" {
		return
	}
	if digits && lx.i < len(lx.s) && (lx.s[lx.i] == '<' || lx.s[lx.i] == '>') {
		tok.glue = true // 2>file: an IO number
	}
	if quoted && reservedWords[tok.text] {
		// A quoted reserved word is an ordinary word: keep its quotes.
		tok.text = "'" + tok.text + "'"
	}
	if lx.delimOp != "" {
		// A here-document delimiter: quoting it changes how the body is
		// read, so it stays as written. One that spans lines is left as a
		// plain word.
		if d := value.String(); !strings.ContainsAny(d, "\n") {
			tok.text = lx.s[start:lx.i]
			lx.pending = append(lx.pending, heredoc{delim: d, stripTabs: lx.delimOp == "<<-"})
		}
		lx.delimOp = ""
	}
	lx.toks = append(lx.toks, tok)
}

var reservedWords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "case": true, "esac": true,
	"for": true, "select": true, "while": true, "until": true, "do": true, "done": true, "in": true,
	"function": true, "time": true, "coproc": true,
}

// isShellSafe reports whether the shell gives c no special meaning in any
// position of a word.
func isShellSafe(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	switch c {
	case '_', '.', '/', ':', ',', '+', '@', '%', '-':
		return true
	}
	return false
}

// quoteLiteral writes a literal string the canonical way: bare when
// quoting changes nothing, else in single quotes, else in double quotes.
func quoteLiteral(v string) string {
	if v == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(v) && safe; i++ {
		safe = isShellSafe(v[i])
	}
	switch {
	case safe:
		return v
	case !strings.Contains(v, "'"):
		return "'" + v + "'"
	default:
		return `"` + v + `"` // v holds no $, `, \ or " (see the callers)
	}
}

// skipDoubleQuoted returns the index just after the closing quote of a
// double-quoted string whose content starts at i (or len(s) when it is
// unterminated).
func skipDoubleQuoted(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case '"':
			return i + 1
		case '\\':
			i += 2
		case '$':
			i = skipDollar(s, i)
		case '`':
			i = skipBackquote(s, i+1)
		default:
			i++
		}
	}
	return len(s)
}

// skipDollar returns the end of the expansion starting with the '$' at i:
// $(…) and $((…)) with nesting, ${…}, $'…', or a lone '$'.
func skipDollar(s string, i int) int {
	if i+1 >= len(s) {
		return i + 1
	}
	switch s[i+1] {
	case '(':
		return skipParens(s, i+2)
	case '{':
		depth := 1
		for j := i + 2; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '{':
				depth++
			case '}':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(s)
	case '\'':
		for j := i + 2; j < len(s); j++ {
			switch s[j] {
			case '\\':
				j++
			case '\'':
				return j + 1
			}
		}
		return len(s)
	}
	return i + 1
}

// skipParens returns the index after the ')' closing a '(' just before i,
// skipping quoted text and nested parentheses.
func skipParens(s string, i int) int {
	depth := 1
	for i < len(s) {
		switch s[i] {
		case '\\':
			i += 2
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return len(s)
			}
			i += end + 2
		case '"':
			i = skipDoubleQuoted(s, i+1)
		case '`':
			i = skipBackquote(s, i+1)
		case '(':
			depth++
			i++
		case ')':
			depth--
			i++
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return len(s)
}

// skipBackquote returns the index after the backquote closing a command
// substitution whose content starts at i.
func skipBackquote(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case '\\':
			i += 2
		case '`':
			return i + 1
		default:
			i++
		}
	}
	return len(s)
}

func (lx *shellLexer) render() string {
	var b strings.Builder
	for k, t := range lx.toks {
		if k > 0 {
			prev := lx.toks[k-1]
			if !prev.glue && prev.kind != tokHeredoc && t.kind != tokSep && t.kind != tokHeredoc {
				b.WriteByte(' ')
			}
		}
		b.WriteString(t.text)
	}
	return b.String()
}
