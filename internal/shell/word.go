package shell

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// word converts a syntax word: quotes removed, expansions marked.
func (b *builder) word(s *Script, w *syntax.Word, depth int) Word {
	out := Word{Raw: b.slice(w)}
	if len(w.Parts) == 0 {
		return out
	}
	if len(w.Parts) == 1 {
		// The common case, a bare literal: no copy.
		if l, ok := w.Parts[0].(*syntax.Lit); ok && strings.IndexByte(l.Value, '\\') < 0 &&
			!strings.HasPrefix(l.Value, "~") && safe(l.Value) == l.Value {
			out.Value, out.Text, out.Glob = l.Value, l.Value, hasGlob(l.Value)
			return out
		}
	}
	var val, text strings.Builder
	for i, part := range w.Parts {
		b.part(s, &out, &val, &text, part, false, i == 0, depth)
	}
	out.Value, out.Text = val.String(), text.String()
	if _, ok := w.Parts[0].(*syntax.CmdSubst); ok && len(w.Parts) == 1 && strings.IndexByte(out.Value, Unknown) < 0 {
		out.split = true // an unquoted $(echo a b) is split into words
	}
	return out
}

// substValue returns what a command substitution prints when that is
// visible (see Printed: echo or printf of known words, cat of a
// here-document); trailing newlines are removed, as the shell does.
func substValue(s *Script) (string, bool) {
	out, ok := Printed(s, func(w Word) string { return w.Value })
	if !ok {
		return "", false
	}
	return strings.TrimRight(out, "\n"), true
}

// isPwd reports a substitution that runs pwd alone.
func isPwd(s *Script) bool {
	if len(s.Cmds) != 1 || s.Cmds[0].Kind != Simple || len(s.Cmds[0].Redirs) > 0 {
		return false
	}
	args := s.Cmds[0].Args()
	if len(args) == 0 || args[0] != "pwd" {
		return false
	}
	for _, a := range args[1:] {
		if a != "-L" && a != "-P" {
			return false
		}
	}
	return true
}

func (b *builder) part(s *Script, out *Word, val, text *strings.Builder, part syntax.WordPart, inDQ, first bool, depth int) {
	switch p := part.(type) {
	case *syntax.Lit:
		v := p.Value
		if inDQ {
			v = unescapeDouble(v)
		} else {
			if strings.IndexByte(v, '\\') >= 0 {
				out.Quoted = true
			}
			if hasGlob(v) {
				out.Glob = true
			}
			if first && strings.HasPrefix(v, "~") {
				v = b.tilde(v, val, text)
			}
			v = unescapeBare(v)
		}
		val.WriteString(safe(v))
		text.WriteString(v)
	case *syntax.SglQuoted:
		out.Quoted = true
		v := p.Value
		if p.Dollar {
			v = ansiC(v)
		}
		val.WriteString(safe(v))
		text.WriteString(v)
	case *syntax.DblQuoted:
		out.Quoted = true
		for _, q := range p.Parts {
			b.part(s, out, val, text, q, true, false, depth)
		}
	case *syntax.ParamExp:
		out.Splits = out.Splits || !inDQ
		text.WriteString(b.slice(p))
		if spec, ok := b.paramSpec(s, out, p, depth); ok {
			val.WriteString(string(VarOpen) + spec + string(VarClose))
		} else {
			val.WriteByte(Unknown)
			out.Subs = append(out.Subs, b.nodeSubs(s, p, depth)...)
		}
	case *syntax.CmdSubst:
		out.Splits = out.Splits || !inDQ
		text.WriteString(b.slice(p))
		sub := b.sub(s, b.span(posAfter(p.Left, p.Backquotes), p.Right), p.Stmts, depth)
		out.Subs = append(out.Subs, sub)
		if isPwd(sub) {
			val.WriteString(string(VarOpen) + "PWD" + string(VarClose)) // $(pwd)
		} else if v, ok := substValue(sub); ok {
			// $(echo …) and $(printf …) print what their words say.
			val.WriteString(v)
		} else {
			val.WriteByte(Unknown)
		}
	case *syntax.ProcSubst:
		text.WriteString(b.slice(p))
		val.WriteByte(Unknown)
		sub := b.sub(s, b.span(posAfter(p.OpPos, false), p.Rparen), p.Stmts, depth)
		out.Subs = append(out.Subs, sub)
		if !inDQ {
			out.Proc, out.ProcOut = sub, p.Op == syntax.CmdOut
		}
	case *syntax.ArithmExp:
		out.Splits = out.Splits || !inDQ
		text.WriteString(b.slice(p))
		val.WriteByte(Unknown)
		out.Subs = append(out.Subs, b.nodeSubs(s, p.X, depth)...)
	case *syntax.ExtGlob:
		out.Glob = true
		raw := b.slice(p)
		val.WriteString(safe(raw))
		text.WriteString(raw)
	default:
		raw := b.slice(part)
		val.WriteByte(Unknown)
		text.WriteString(raw)
		out.Subs = append(out.Subs, b.nodeSubs(s, part, depth)...)
	}
}

// tilde writes the tilde prefix of an unquoted word's first literal: ~
// and ~/… are $HOME, ~+ is $PWD, ~- is $OLDPWD, ~root is /root; another
// user's home is not known. It returns the rest of the literal.
func (b *builder) tilde(v string, val, text *strings.Builder) string {
	end := strings.IndexByte(v, '/')
	if end < 0 {
		end = len(v)
	}
	prefix := v[1:end]
	switch {
	case prefix == "":
		val.WriteString(string(VarOpen) + "HOME" + string(VarClose))
	case prefix == "+":
		val.WriteString(string(VarOpen) + "PWD" + string(VarClose))
	case prefix == "-":
		val.WriteString(string(VarOpen) + "OLDPWD" + string(VarClose))
	case prefix == "root":
		val.WriteString("/root")
	case IsName(strings.ReplaceAll(strings.ReplaceAll(prefix, "-", "_"), ".", "_")):
		val.WriteByte(Unknown) // ~user: that user's home
	default:
		return v // not a tilde prefix (~\x, ~$y): literal text
	}
	text.WriteString(v[:end])
	return v[end:]
}

// paramSpec returns how a parameter expansion is written between VarOpen
// and VarClose, when a reader tracking values can resolve it:
//   - NAME for $NAME and ${NAME};
//   - a positional or special parameter: 0-9…, @, * and #;
//   - NAME[i] for ${NAME[i]} with i a number, @ or *;
//   - !NAME for ${!NAME} (the variable NAME names);
//   - any of these followed by one of the operators :- - := = :+ + :? ?
//     and the Value of its word, which may hold markers in turn
//     (${X:-/} is VarOpen "X:-/" VarClose).
//
// Other expansions (${#X}, ${X%.c}, ${X/a/b} …) are not resolvable.
func (b *builder) paramSpec(s *Script, out *Word, p *syntax.ParamExp, depth int) (string, bool) {
	if p.Param == nil || p.Length || p.Width || p.Slice != nil || p.Repl != nil || p.Names != 0 ||
		p.Flags != nil || p.NestedParam != nil || len(p.Modifiers) > 0 || p.IsSet {
		return "", false
	}
	name := p.Param.Value
	switch {
	case IsName(name):
	case allDigits(name) || name == "@" || name == "*" || name == "#":
		if p.Excl || p.Index != nil {
			return "", false
		}
	default:
		return "", false
	}
	spec := name
	if p.Excl {
		if p.Index != nil {
			return "", false
		}
		spec = "!" + name
	}
	if p.Index != nil {
		idx := b.slice(p.Index)
		if idx != "@" && idx != "*" && !allDigits(idx) {
			return "", false
		}
		spec += "[" + idx + "]"
	}
	if p.Exp == nil {
		return spec, true
	}
	switch p.Exp.Op {
	case syntax.DefaultUnset, syntax.DefaultUnsetOrNull, syntax.AssignUnset, syntax.AssignUnsetOrNull,
		syntax.AlternateUnset, syntax.AlternateUnsetOrNull, syntax.ErrorUnset, syntax.ErrorUnsetOrNull:
	default:
		return "", false
	}
	spec += p.Exp.Op.String()
	if p.Exp.Word != nil && len(p.Exp.Word.Parts) > 0 {
		w := b.word(s, p.Exp.Word, depth)
		out.Subs = append(out.Subs, w.Subs...)
		if w.Glob {
			out.Glob = true
		}
		spec += w.Value
	}
	return spec, true
}

// IsName reports whether s is a valid shell variable name.
func IsName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// hasGlob reports an unescaped glob character in unquoted literal text.
func hasGlob(v string) bool {
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '\\':
			i++
		case '*', '?', '[':
			return true
		}
	}
	return false
}

// HasGlob reports whether a word value contains glob characters.
func HasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// unescapeBare removes the backslashes of unquoted text.
func unescapeBare(v string) string {
	if strings.IndexByte(v, '\\') < 0 {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			i++
			if v[i] == '\n' {
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// unescapeDouble removes the backslashes that escape $ ` " \ and newline
// inside double quotes.
func unescapeDouble(v string) string {
	if strings.IndexByte(v, '\\') < 0 {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '$', '`', '"', '\\':
				i++
			case '\n':
				i++
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}

// ansiC decodes the body of $'…'.
func ansiC(src string) string {
	if strings.IndexByte(src, '\\') < 0 {
		return src
	}
	var b []byte
	for i := 0; i < len(src); {
		c := src[i]
		if c != '\\' || i+1 >= len(src) {
			b = append(b, c)
			i++
			continue
		}
		e := src[i+1]
		i += 2
		switch e {
		case 'n':
			b = append(b, '\n')
		case 't':
			b = append(b, '\t')
		case 'r':
			b = append(b, '\r')
		case 'a':
			b = append(b, 7)
		case 'b':
			b = append(b, 8)
		case 'e', 'E':
			b = append(b, 27)
		case 'f':
			b = append(b, 12)
		case 'v':
			b = append(b, 11)
		case 'x':
			v, k := 0, 0
			for ; k < 2 && i < len(src) && hexVal(src[i]) >= 0; k++ {
				v = v*16 + hexVal(src[i])
				i++
			}
			if k == 0 {
				b = append(b, '\\', 'x')
			} else {
				b = append(b, byte(v))
			}
		case 'u', 'U':
			n := 4
			if e == 'U' {
				n = 8
			}
			v, k := 0, 0
			for ; k < n && i < len(src) && hexVal(src[i]) >= 0; k++ {
				v = v*16 + hexVal(src[i])
				i++
			}
			if k == 0 {
				b = append(b, '\\', e)
			} else {
				b = append(b, string(rune(v))...)
			}
		case 'c':
			if i < len(src) {
				b = append(b, src[i]&0x1f)
				i++
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for k := 0; k < 2 && i < len(src) && src[i] >= '0' && src[i] <= '7'; k++ {
				v = v*8 + int(src[i]-'0')
				i++
			}
			b = append(b, byte(v))
		case '\\', '\'', '"', '?':
			b = append(b, e)
		default:
			b = append(b, '\\', e)
		}
	}
	return string(b)
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c|0x20 >= 'a' && c|0x20 <= 'f':
		return int(c|0x20-'a') + 10
	}
	return -1
}
