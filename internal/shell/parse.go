package shell

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Markers written into Word.Value in place of expansions.
const (
	Unknown  = '\x00' // an expansion whose value is not known statically
	VarOpen  = '\x01' // VarOpen NAME VarClose: a plain variable reference
	VarClose = '\x02'
)

// MaxNesting bounds how deep substitutions are flattened; deeper ones are
// reported by Script.TooDeep.
const MaxNesting = 32

// Kind says what a Cmd is.
type Kind uint8

const (
	// Simple is a simple command: an external program, a builtin, a
	// function call or assignments alone (Words holds NAME=value words
	// first, then the command and its arguments; a declaration such as
	// export X=1 is a Simple command whose first word is export).
	Simple Kind = iota
	// ForHeader is the header of a for or select loop: Words[0] is the
	// loop variable, the rest the items (a C-style loop has no words).
	ForHeader
	// CaseHeader is the subject word of a case, then its patterns.
	CaseHeader
	// Test is a [[ … ]] test, its words in order (operators included).
	Test
	// Arith is an arithmetic command (( … )) or let; Words is empty and
	// only its substitutions matter.
	Arith
	// FuncDef is a function definition: Words[0] is its name. Its body's
	// commands follow as ordinary Cmds.
	FuncDef
	// SubshellOpen and SubshellClose bracket the commands of ( … ): a
	// reader tracking cd or variables restores its state at the close.
	SubshellOpen
	SubshellClose
)

// Word is one word of a command after quote removal.
type Word struct {
	Value  string    // literal text; unknown expansions as Unknown, $NAME (and the expansions of doc.go) as VarOpen SPEC VarClose
	Text   string    // quote-removed text with expansions kept as written
	Raw    string    // the source text
	Quoted bool      // quotes or backslashes were used
	Glob   bool      // an unquoted *, ? or [ (or an extended glob): a pattern, not a name
	Subs   []*Script // the command and process substitutions it contains
	// Splits is set when the word holds an unquoted expansion ($X, $(…),
	// $((…))): the shell splits its expanded value into words (a reader
	// that resolves $X should split the result; an assignment's value is
	// never split).
	Splits bool
	// Elems are the elements of an array assignment (a=(x y z), declare
	// -a a=(…)): the word's Value is then NAME= followed by Unknown.
	Elems []Word
	// Proc is the script of a process substitution in the word, <( … )
	// or >( … ) (the last one when there are several); ProcOut tells
	// which (>( … ) reads what the command writes into it).
	Proc    *Script
	ProcOut bool
	// split marks an unquoted $(echo …) of known output: the parser
	// splits it into words itself.
	split bool
}

// Literal reports whether the word's value is fully known.
func (w Word) Literal() bool {
	return strings.IndexByte(w.Value, Unknown) < 0 && strings.IndexByte(w.Value, VarOpen) < 0
}

// Redir is one redirection.
type Redir struct {
	Op     string // > >> >| < <> << <<- <<< >& <& &> &>>
	Fd     string // the explicit file descriptor (2 in 2>), or ""
	Target Word   // the file, descriptor, here-string or here-document delimiter
	// Body is a here-document's body as written; BodyQuoted tells that the
	// delimiter was quoted (no expansion in the body); BodySubs are the
	// substitutions of an unquoted body.
	Body       string
	HasBody    bool
	BodyQuoted bool
	BodySubs   []*Script
}

// Output reports whether the redirection opens its target for writing.
func (r Redir) Output() bool {
	switch r.Op {
	case ">", ">>", ">|", "&>", "&>>", "<>":
		return true
	case ">&":
		t := r.Target.Value
		return t != "-" && !allDigits(t)
	}
	return false
}

// StdoutFile reports whether the redirection sends standard output to a
// file (not a descriptor).
func (r Redir) StdoutFile() bool {
	switch r.Op {
	case ">", ">>", ">|":
		return r.Fd == "" || r.Fd == "1"
	case "&>", "&>>":
		return true
	case ">&":
		return (r.Fd == "" || r.Fd == "1") && r.Output()
	}
	return false
}

// Stdin reports whether the redirection replaces standard input.
func (r Redir) Stdin() bool {
	switch r.Op {
	case "<", "<>", "<&", "<<", "<<-", "<<<":
		return r.Fd == "" || r.Fd == "0"
	}
	return false
}

// Cmd is one command of a script, in source order.
type Cmd struct {
	Kind   Kind
	Words  []Word
	Redirs []Redir
	// Raw is the command's source text (with its redirections).
	Raw string
	// PipeFrom is the command whose standard output is this one's input
	// (the one before | or |&), or nil.
	PipeFrom *Cmd
	// Op is the operator that follows the command: | |& && || ; & or "".
	Op string
	// Background is set for a command run with &; Negated for ! cmd.
	Background, Negated bool
	// Subs are substitutions that belong to the command but to none of its
	// words (a C-style for loop's expressions, an arithmetic command).
	Subs []*Script
	// For a FuncDef: Decl is the whole declaration's source text. For a
	// FuncDef or a ForHeader: Body is the number of Cmds right after it
	// that are its body.
	Decl string
	Body int
}

// Args returns the words' values.
func (c *Cmd) Args() []string {
	out := make([]string, len(c.Words))
	for i, w := range c.Words {
		out[i] = w.Value
	}
	return out
}

// Texts returns the words' texts.
func (c *Cmd) Texts() []string {
	out := make([]string, len(c.Words))
	for i, w := range c.Words {
		out[i] = w.Text
	}
	return out
}

// AllSubs returns every substitution of the command: of its words, its
// redirections and its own.
func (c *Cmd) AllSubs() []*Script {
	var out []*Script
	for _, w := range c.Words {
		out = append(out, w.Subs...)
	}
	for _, r := range c.Redirs {
		out = append(out, r.Target.Subs...)
		out = append(out, r.BodySubs...)
	}
	return append(out, c.Subs...)
}

// Script is a parsed command line (or the body of a substitution).
type Script struct {
	Src  string // the script's own text
	Cmds []*Cmd
	// TooDeep is set when substitutions nested deeper than MaxNesting
	// were not flattened.
	TooDeep bool
	// Loops are the script's while and until loops, in source order.
	Loops []Loop
}

// Loop is a while or until loop of a script: its condition is the Cmds
// [Start, Start+Cond) and its body the Body Cmds that follow them.
type Loop struct {
	Until             bool
	Start, Cond, Body int
}

// ErrSyntax is wrapped by every error Parse returns for input that is not
// valid Bash.
var ErrSyntax = errors.New("not valid shell syntax")

// MaxBrackets bounds the nesting of brackets, substitutions and compound
// commands Parse accepts (counted without regard to quoting, so quoted
// brackets count too). The parser recurses once per level; far deeper
// input would exhaust the stack, and no real command comes near it.
const MaxBrackets = 1000

// ErrTooDeep is wrapped by the error Parse returns for input nested deeper
// than MaxBrackets.
var ErrTooDeep = errors.New("nested too deeply to analyse")

// Parse parses src as a Bash script.
func Parse(src string) (*Script, error) {
	if d := bracketDepth(src); d > MaxBrackets {
		return nil, fmt.Errorf("%w: %w (%d levels, limit %d)", ErrSyntax, ErrTooDeep, d, MaxBrackets)
	}
	f, src, err := parseFile(src)
	if err != nil {
		return nil, err
	}
	b := builder{src: src}
	s := &Script{Src: src}
	b.stmts(s, f.Stmts, 0)
	return s, nil
}

// parsers are reused: a Parser is reusable once done, and allocating
// one per command was a third of the cost of a short command.
var parsers = sync.Pool{New: func() any {
	return syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(false))
}}

// parseFile parses src. A here-document left open at the end of the
// input ends there, as in bash (which only warns): its delimiter is added
// and the text returned is the one parsed.
func parseFile(src string) (*syntax.File, string, error) {
	p := parsers.Get().(*syntax.Parser)
	defer parsers.Put(p)
	for range 8 {
		f, err := p.Parse(strings.NewReader(src), "")
		if err == nil {
			return f, src, nil
		}
		delim, ok := unclosedHeredoc(err)
		if !ok {
			return nil, "", fmt.Errorf("%w: %v", ErrSyntax, err)
		}
		if !strings.HasSuffix(src, "\n") {
			src += "\n"
		}
		src += delim + "\n"
	}
	return nil, "", fmt.Errorf("%w: too many unclosed here-documents", ErrSyntax)
}

// unclosedHeredoc returns the delimiter of the here-document a parse
// error says is unclosed.
func unclosedHeredoc(err error) (string, bool) {
	var pe syntax.ParseError
	if !errors.As(err, &pe) {
		return "", false
	}
	const prefix = "unclosed here-document `"
	if !strings.HasPrefix(pe.Text, prefix) || !strings.HasSuffix(pe.Text, "`") {
		return "", false
	}
	d := pe.Text[len(prefix) : len(pe.Text)-1]
	if d == "" || strings.ContainsAny(d, "\n") {
		return "", false
	}
	return d, true
}

// Words splits src into words as the shell would (no expansion), for
// strings that are argument lists rather than scripts (env -S). An input
// that does not parse yields nil.
func Words(src string) []Word {
	s, err := Parse(src)
	if err != nil {
		return nil
	}
	var out []Word
	for _, c := range s.Cmds {
		if c.Kind == Simple {
			out = append(out, c.Words...)
		}
	}
	return out
}

type builder struct {
	src string
}

func (b *builder) slice(n syntax.Node) string {
	if n == nil {
		return ""
	}
	s, e := int(n.Pos().Offset()), int(n.End().Offset())
	if s < 0 || e > len(b.src) || s > e {
		return ""
	}
	return b.src[s:e]
}

func (b *builder) span(from, to syntax.Pos) string {
	s, e := int(from.Offset()), int(to.Offset())
	if !from.IsValid() || !to.IsValid() || s < 0 || e > len(b.src) || s > e {
		return ""
	}
	return b.src[s:e]
}

// stmts flattens a statement list into s.Cmds.
func (b *builder) stmts(s *Script, list []*syntax.Stmt, depth int) {
	for _, st := range list {
		b.stmt(s, st, depth)
	}
}

// stmt flattens one statement and returns its first and last simple
// commands (for pipes).
func (b *builder) stmt(s *Script, st *syntax.Stmt, depth int) (first, last *Cmd) {
	n := len(s.Cmds)
	redirs := b.redirs(s, st.Redirs, depth)
	switch c := st.Cmd.(type) {
	case nil:
		// Redirections alone (> file): a command with no words.
		cmd := &Cmd{Kind: Simple, Redirs: redirs, Raw: b.slice(st)}
		s.Cmds = append(s.Cmds, cmd)
		redirs = nil
	case *syntax.CallExpr:
		cmd := &Cmd{Kind: Simple, Redirs: redirs, Raw: b.slice(st), Words: make([]Word, 0, len(c.Assigns)+len(c.Args))}
		for _, a := range c.Assigns {
			cmd.Words = append(cmd.Words, b.assign(s, a, depth))
		}
		for _, w := range c.Args {
			cmd.Words = b.appendWords(cmd.Words, s, w, depth)
		}
		s.Cmds = append(s.Cmds, cmd)
		redirs = nil
	case *syntax.DeclClause:
		cmd := &Cmd{Kind: Simple, Redirs: redirs, Raw: b.slice(st)}
		cmd.Words = append(cmd.Words, litWord(c.Variant.Value))
		for _, a := range c.Args {
			cmd.Words = append(cmd.Words, b.assign(s, a, depth))
		}
		s.Cmds = append(s.Cmds, cmd)
		redirs = nil
	case *syntax.BinaryCmd:
		if c.X == nil || c.Y == nil {
			break
		}
		_, xl := b.stmt(s, c.X, depth)
		op := c.Op.String()
		if xl != nil {
			xl.Op = op
		}
		yf, _ := b.stmt(s, c.Y, depth)
		if yf != nil && xl != nil && (c.Op == syntax.Pipe || c.Op == syntax.PipeAll) {
			yf.PipeFrom = xl
		}
	case *syntax.Subshell:
		s.Cmds = append(s.Cmds, &Cmd{Kind: SubshellOpen, Raw: "("})
		b.stmts(s, c.Stmts, depth)
		s.Cmds = append(s.Cmds, &Cmd{Kind: SubshellClose, Raw: ")", Redirs: redirs})
		redirs = nil
	case *syntax.Block:
		b.stmts(s, c.Stmts, depth)
	case *syntax.IfClause:
		for cl := c; cl != nil; cl = cl.Else {
			b.stmts(s, cl.Cond, depth)
			b.stmts(s, cl.Then, depth)
		}
	case *syntax.WhileClause:
		l := Loop{Until: c.Until, Start: len(s.Cmds)}
		k := len(s.Loops)
		s.Loops = append(s.Loops, l)
		b.stmts(s, c.Cond, depth)
		l.Cond = len(s.Cmds) - l.Start
		b.stmts(s, c.Do, depth)
		l.Body = len(s.Cmds) - l.Start - l.Cond
		s.Loops[k] = l
	case *syntax.ForClause:
		h := &Cmd{Kind: ForHeader, Raw: b.span(c.Pos(), c.DoPos)}
		switch l := c.Loop.(type) {
		case *syntax.WordIter:
			if l.Name != nil {
				h.Words = append(h.Words, litWord(l.Name.Value))
			}
			for _, w := range l.Items {
				h.Words = b.appendWords(h.Words, s, w, depth)
			}
		case *syntax.CStyleLoop:
			h.Subs = b.nodeSubs(s, l, depth)
		}
		s.Cmds = append(s.Cmds, h)
		start := len(s.Cmds)
		b.stmts(s, c.Do, depth)
		h.Body = len(s.Cmds) - start
	case *syntax.CaseClause:
		h := &Cmd{Kind: CaseHeader}
		if c.Word != nil {
			h.Raw = b.slice(c.Word)
			h.Words = append(h.Words, b.word(s, c.Word, depth))
		}
		for _, it := range c.Items {
			for _, p := range it.Patterns {
				h.Words = append(h.Words, b.word(s, p, depth))
			}
		}
		s.Cmds = append(s.Cmds, h)
		for _, it := range c.Items {
			b.stmts(s, it.Stmts, depth)
		}
	case *syntax.FuncDecl:
		def := &Cmd{Kind: FuncDef}
		if c.Name != nil {
			def.Words, def.Raw = []Word{litWord(c.Name.Value)}, b.slice(c.Name)
		}
		def.Decl = b.slice(c)
		s.Cmds = append(s.Cmds, def)
		if c.Body != nil {
			b.stmt(s, c.Body, depth)
		}
		def.Body = len(s.Cmds) - n - 1
	case *syntax.TestClause:
		h := &Cmd{Kind: Test, Raw: b.slice(c)}
		syntax.Walk(c.X, func(n syntax.Node) bool {
			if w, ok := n.(*syntax.Word); ok {
				h.Words = append(h.Words, b.word(s, w, depth))
				return false
			}
			return true
		})
		s.Cmds = append(s.Cmds, h)
	case *syntax.ArithmCmd:
		s.Cmds = append(s.Cmds, &Cmd{Kind: Arith, Raw: b.slice(c), Subs: b.nodeSubs(s, c.X, depth)})
	case *syntax.LetClause:
		h := &Cmd{Kind: Arith, Raw: b.slice(c)}
		for _, e := range c.Exprs {
			h.Subs = append(h.Subs, b.nodeSubs(s, e, depth)...)
		}
		s.Cmds = append(s.Cmds, h)
	case *syntax.TimeClause:
		if c.Stmt != nil {
			b.stmt(s, c.Stmt, depth)
		}
	case *syntax.CoprocClause:
		if c.Stmt != nil {
			b.stmt(s, c.Stmt, depth)
		}
	case *syntax.TestDecl:
		if c.Body != nil {
			b.stmt(s, c.Body, depth)
		}
	default:
		// A construct of another dialect: keep its substitutions visible.
		s.Cmds = append(s.Cmds, &Cmd{Kind: Arith, Raw: b.slice(st), Subs: b.nodeSubs(s, st.Cmd, depth)})
	}
	if len(redirs) > 0 {
		// Redirections of a compound command (while …; done < file, { … } > f)
		// apply to every command inside it.
		for _, c := range s.Cmds[n:] {
			if c.Kind != SubshellOpen && c.Kind != SubshellClose {
				c.Redirs = append(c.Redirs, redirs...)
			}
		}
	}
	runs := func(c *Cmd) bool { return c.Kind == Simple || c.Kind == Test || c.Kind == Arith }
	for i := n; i < len(s.Cmds); i++ {
		if runs(s.Cmds[i]) {
			first = s.Cmds[i]
			break
		}
	}
	for i := len(s.Cmds) - 1; i >= n && first != nil; i-- {
		if runs(s.Cmds[i]) {
			last = s.Cmds[i]
			break
		}
	}
	if last != nil {
		if st.Background {
			last.Op = "&"
			for _, c := range s.Cmds[n:] {
				c.Background = true
			}
		} else if st.Semicolon.IsValid() && last.Op == "" {
			last.Op = ";"
		}
	}
	if st.Negated && first != nil {
		first.Negated = true
	}
	return first, last
}

// MaxBraceWords bounds the words one brace expansion is read as; a word
// that would expand to more ({1..100000}), or has more than 8 brace
// groups, is kept as written.
const MaxBraceWords = 64

// appendWords appends the words w becomes: its brace expansion
// ({rm,-rf,/} is three words, as in bash), each split into fields when
// the shell splits it. A word with substitutions is not brace-expanded
// (each copy would run them again).
func (b *builder) appendWords(words []Word, s *Script, w *syntax.Word, depth int) []Word {
	if alts := braceWords(w); alts != nil {
		raw := b.slice(w)
		for _, a := range alts {
			x := b.word(s, a, depth)
			x.Raw = raw
			words = appendWord(words, x)
		}
		return words
	}
	return appendWord(words, b.word(s, w, depth))
}

// braceWords returns the words an unquoted brace expansion in w gives,
// or nil when there is none (or too many).
func braceWords(w *syntax.Word) []*syntax.Word {
	groups := 0
	for _, p := range w.Parts {
		switch x := p.(type) {
		case *syntax.Lit:
			groups += strings.Count(x.Value, "{")
		case *syntax.SglQuoted, *syntax.ParamExp:
		case *syntax.DblQuoted:
			for _, q := range x.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					if _, ok := q.(*syntax.ParamExp); !ok {
						return nil
					}
				}
			}
		default:
			return nil
		}
	}
	if groups == 0 || groups > 8 {
		return nil
	}
	return expandBraces(w)
}

// expandBraces brace-expands w, or returns nil.
func expandBraces(w *syntax.Word) []*syntax.Word {
	cp := *w
	cp.Parts = slices.Clone(w.Parts)
	if !syntax.SplitBraces(&cp) {
		return nil
	}
	var out []*syntax.Word
	for ew, err := range expand.BracesSeq(nil, &cp) {
		if err != nil || len(out) >= MaxBraceWords {
			return nil
		}
		out = append(out, ew)
	}
	return out
}

// appendWord appends w to words, split into fields when the shell splits
// it (an unquoted $(echo a b) of known output).
func appendWord(words []Word, w Word) []Word {
	if !w.split {
		return append(words, w)
	}
	for i, f := range strings.Fields(w.Value) {
		part := Word{Value: f, Text: f, Raw: w.Raw, Quoted: w.Quoted, Glob: HasGlob(f)}
		if i == 0 {
			part.Subs = w.Subs
		}
		words = append(words, part)
	}
	return words
}

func litWord(v string) Word {
	return Word{Value: safe(v), Text: v, Raw: v}
}

// assign renders an assignment as the NAME=value word a shell shows.
func (b *builder) assign(s *Script, a *syntax.Assign, depth int) Word {
	if a.Naked && a.Name == nil {
		return b.word(s, a.Value, depth)
	}
	name := ""
	if a.Name != nil {
		name = a.Name.Value
	}
	if a.Naked {
		return litWord(name)
	}
	w := Word{Raw: b.slice(a)}
	lhs := name
	if a.Index != nil {
		lhs += "[" + b.slice(a.Index) + "]"
	}
	if a.Append {
		lhs += "+"
	}
	lhs += "="
	switch {
	case a.Array != nil:
		w.Value = lhs + string(Unknown)
		w.Text = lhs + b.slice(a.Array)
		w.Elems = []Word{}
		for _, e := range a.Array.Elems {
			if e.Value == nil {
				continue
			}
			if e.Index != nil && b.slice(e.Index) != strconv.Itoa(len(w.Elems)) || len(w.Elems) >= MaxBraceWords {
				w.Elems = nil // [i]=v out of order: not a plain list
				break
			}
			w.Elems = b.appendWords(w.Elems, s, e.Value, depth)
		}
		w.Subs = b.nodeSubs(s, a.Array, depth)
	case a.Value != nil:
		v := b.word(s, a.Value, depth)
		v.Splits = false // NAME=$X assigns the value whole
		v.Value = lhs + v.Value
		v.Text = lhs + v.Text
		v.Raw = w.Raw
		return v
	default:
		w.Value, w.Text = lhs, lhs
	}
	return w
}

func (b *builder) redirs(s *Script, list []*syntax.Redirect, depth int) []Redir {
	var out []Redir
	for _, r := range list {
		rd := Redir{Op: r.Op.String()}
		if r.N != nil {
			rd.Fd = r.N.Value
		}
		if r.Word != nil {
			rd.Target = b.word(s, r.Word, depth)
		}
		if r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc {
			rd.HasBody, rd.BodyQuoted = true, rd.Target.Quoted
		}
		if r.Hdoc != nil {
			rd.Body = heredocBody(b.slice(r.Hdoc), rd.Target.Value)
			rd.BodyQuoted = rd.Target.Quoted
			if !rd.BodyQuoted {
				rd.BodySubs = b.nodeSubs(s, r.Hdoc, depth)
			}
		}
		out = append(out, rd)
	}
	return out
}

// nodeSubs returns the substitutions inside n, parsed.
func (b *builder) nodeSubs(s *Script, n syntax.Node, depth int) []*Script {
	var out []*Script
	if n == nil {
		return nil
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		switch x := n.(type) {
		case *syntax.CmdSubst:
			out = append(out, b.sub(s, b.span(posAfter(x.Left, x.Backquotes), x.Right), x.Stmts, depth))
			return false
		case *syntax.ProcSubst:
			out = append(out, b.sub(s, b.span(posAfter(x.OpPos, false), x.Rparen), x.Stmts, depth))
			return false
		}
		return true
	})
	return out
}

// posAfter returns the position after an opening $( ( or `.
func posAfter(p syntax.Pos, backquote bool) syntax.Pos {
	if backquote {
		return syntax.NewPos(p.Offset()+1, p.Line(), p.Col()+1)
	}
	return syntax.NewPos(p.Offset()+2, p.Line(), p.Col()+2)
}

func (b *builder) sub(parent *Script, src string, list []*syntax.Stmt, depth int) *Script {
	s := &Script{Src: src}
	if depth+1 > MaxNesting {
		parent.TooDeep = true
		s.TooDeep = true
		return s
	}
	b.stmts(s, list, depth+1)
	if s.TooDeep {
		parent.TooDeep = true
	}
	return s
}

// bracketDepth over-estimates the nesting depth of src: every ( { [ `
// and compound-command keyword opens a level, every ) } ] fi done esac
// closes one; quoting is ignored. A run of && || | also counts, since the
// parser recurses once per operator of a chain.
func bracketDepth(src string) int {
	depth, deepest, chain := 0, 0, 0
	word := func(w string) {
		switch w {
		case "if", "while", "until", "for", "case", "select", "function", "coproc":
			depth++
		case "fi", "done", "esac":
			depth = max(depth-1, 0)
		}
	}
	start := -1
	for i := 0; i < len(src); i++ {
		c := src[i]
		isWord := c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z')
		if isWord {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			word(src[start:i])
			start = -1
		}
		switch c {
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth = max(depth-1, 0) // a closer in quotes must not hide real depth
		case '`':
			depth++ // opening and closing alike: an over-estimate
		case '|', '&':
			if i+1 < len(src) && src[i+1] == c {
				i++
			}
			chain++
		case '\n', ';':
			chain = 0
		}
		deepest = max(deepest, depth+chain)
	}
	if start >= 0 {
		word(src[start:])
	}
	return deepest
}

// heredocBody cuts the closing delimiter line off a here-document's text.
func heredocBody(text, delim string) string {
	if text == delim || strings.TrimLeft(text, "\t") == delim {
		return ""
	}
	if i := strings.LastIndexByte(text, '\n'); i >= 0 && strings.TrimLeft(text[i+1:], "\t") == delim {
		return text[:i+1]
	}
	return text
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// safe replaces the marker bytes VarOpen and VarClose in input text.
func safe(s string) string {
	if strings.IndexByte(s, VarOpen) < 0 && strings.IndexByte(s, VarClose) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == VarOpen || r == VarClose {
			return '?'
		}
		return r
	}, s)
}
