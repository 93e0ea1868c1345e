package shell

import (
	"bytes"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Canonical writes src in one canonical form, so that two spellings of one
// command compare equal. It changes only what the shell itself ignores:
// whitespace and line continuations between words and around operators,
// a newline or ';' that ends a command, comments, and quoting that
// changes nothing. A word whose parts are all literal (quoted text without
// expansions, escaped or bare characters) is written once: bare when made
// only of letters, digits and _ . / : , + @ % -, else in single quotes (in
// double quotes when it holds a single quote) — so grep 'foo', grep "foo"
// and grep foo are one command, and "a b", 'a b', a\ b and 'a'" b" are one
// word. Quoting that matters stays: a quoted reserved word ('if' is not
// if), quoted globs, tildes, braces and = stay quoted while bare ones stay
// bare, and double-quoted text with expansions keeps its quotes.
// Substitutions are canonicalised by the same rules; here-document bodies
// are kept verbatim. The result is meant for comparison, not for running.
func Canonical(src string) (string, error) {
	out, err := canonical(src)
	if err != nil {
		return "", err
	}
	// The printer's form of a few odd inputs (an empty here-document
	// delimiter) reads back differently; such input has no canonical form.
	if again, err := canonical(out); err != nil || again != out {
		return "", fmt.Errorf("%w: %q has no stable canonical form", ErrSyntax, src)
	}
	return out, nil
}

func canonical(src string) (string, error) {
	if d := bracketDepth(src); d > MaxBrackets {
		return "", fmt.Errorf("%w: %w", ErrSyntax, ErrTooDeep)
	}
	p := syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(false))
	f, err := p.Parse(strings.NewReader(src), "")
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CallExpr:
			for i, w := range x.Args {
				canonWord(w, i == 0 && len(x.Assigns) == 0)
			}
		case *syntax.Redirect:
			if x.Word != nil && x.Hdoc == nil {
				canonWord(x.Word, false)
			}
			return x.Hdoc == nil
		}
		return true
	})
	var b bytes.Buffer
	if err := syntax.NewPrinter(syntax.SingleLine(true)).Print(&b, f); err != nil {
		return "", fmt.Errorf("printing %q: %w", src, err)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

// reserved are the words that are keywords in command position.
var reserved = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true, "done": true,
	"case": true, "esac": true, "while": true, "until": true, "for": true, "in": true, "select": true,
	"function": true, "time": true, "coproc": true, "{": true, "}": true, "!": true, "[[": true, "]]": true,
}

// canonWord rewrites a word made only of literal parts as one part.
func canonWord(w *syntax.Word, first bool) {
	var val strings.Builder
	quoted := false
	for _, part := range w.Parts {
		switch p := part.(type) {
		case *syntax.Lit:
			if hasGlob(p.Value) || strings.ContainsAny(p.Value, "{}~=") {
				return // bare pattern characters keep their meaning as written
			}
			if strings.IndexByte(p.Value, '\\') >= 0 {
				quoted = true
			}
			val.WriteString(unescapeBare(p.Value))
		case *syntax.SglQuoted:
			if p.Dollar {
				return
			}
			quoted = true
			val.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return
			}
			quoted = true
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return
				}
				val.WriteString(unescapeDouble(l.Value))
			}
		default:
			return
		}
	}
	v := val.String()
	pos := w.Pos()
	switch {
	case v != "" && bare(v) && !(quoted && first && reserved[v]):
		w.Parts = []syntax.WordPart{&syntax.Lit{ValuePos: pos, ValueEnd: pos, Value: v}}
	case strings.IndexByte(v, '\'') < 0:
		w.Parts = []syntax.WordPart{&syntax.SglQuoted{Left: pos, Right: pos, Value: v}}
	case !strings.ContainsAny(v, "$`\\\"!"):
		w.Parts = []syntax.WordPart{&syntax.DblQuoted{Left: pos, Right: pos, Parts: []syntax.WordPart{&syntax.Lit{ValuePos: pos, ValueEnd: pos, Value: v}}}}
	default:
		// Keep the word as written: no one quoting holds it.
	}
}

// bare reports whether v can be written without quotes and mean itself.
func bare(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '_' || c == '.' || c == '/' || c == ':' || c == ',' || c == '+' || c == '@' || c == '%' || c == '-' ||
			(c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z') {
			continue
		}
		return false
	}
	return true
}
