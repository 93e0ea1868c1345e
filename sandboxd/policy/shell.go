package policy

import "strings"

// This file holds the light shell tokeniser: words (with quote removal),
// operators, redirections, here-documents and the bodies of command and
// process substitutions. It is linear in the length of its input; nested
// bodies are returned as strings and analysed (bounded) by the caller.

// Markers written into word values in place of expansions. Input bytes
// 0x01 and 0x02 are replaced by '?' so they cannot forge a marker; a 0x00
// in the input is kept and means "unknown", which is what it means when
// an expanded unknown value is re-tokenised inside bash -c.
const (
	markUnknown  = '\x00' // an expansion whose value is not known
	markVarOpen  = '\x01' // \x01NAME\x02: a simple variable reference,
	markVarClose = '\x02' // resolved by scope.expand
)

type tokKind uint8

const (
	tkWord  tokKind = iota // a word, quote-removed, with markers
	tkOp                   // ; ;; & && | || |& ( ) newline
	tkRedir                // > >> >| < << <<- <<< <> <& >& &> &>>
)

type token struct {
	kind       tokKind
	val        string
	fd         string // explicit fd of a redirection (2>)
	start, end int    // byte offsets in the source
	quoted     bool   // the word used quotes or backslashes
	subs       []string
	body       string // here-document body (on the << token)
	hasBody    bool
	bodyQuoted bool // delimiter was quoted: no expansion in the body
}

type pendingDoc struct {
	tok    int
	delim  string
	strip  bool
	quoted bool
}

type lexer struct {
	src      string
	pos      int
	toks     []token
	pending  []pendingDoc
	delimFor int // index of a << token waiting for its delimiter word
	buf      []byte
}

func lex(src string) []token {
	l := lexer{src: src, delimFor: -1, toks: make([]token, 0, min(len(src)/4+4, 1024))}
	l.run()
	return l.toks
}

func (l *lexer) peek(off int) byte {
	if l.pos+off < len(l.src) {
		return l.src[l.pos+off]
	}
	return 0
}

func (l *lexer) run() {
	for l.pos < len(l.src) {
		switch c := l.src[l.pos]; c {
		case ' ', '\t', '\r':
			l.pos++
		case '\n':
			l.op(1)
			l.heredocBodies()
		case '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case ';':
			n := 1
			if l.peek(1) == ';' {
				n = 2
				if l.peek(2) == '&' {
					n = 3
				}
			} else if l.peek(1) == '&' {
				n = 2
			}
			l.op(n)
		case '&':
			switch l.peek(1) {
			case '&':
				l.op(2)
			case '>':
				l.redir("", l.pos)
			default:
				l.op(1)
			}
		case '|':
			if n := l.peek(1); n == '|' || n == '&' {
				l.op(2)
			} else {
				l.op(1)
			}
		case '(', ')':
			l.op(1)
		case '<', '>':
			if l.peek(1) == '(' {
				l.word()
			} else {
				l.redir("", l.pos)
			}
		case '\\':
			if l.peek(1) == '\n' {
				l.pos += 2
				continue
			}
			l.word()
		default:
			l.word()
		}
	}
}

func (l *lexer) op(n int) {
	l.toks = append(l.toks, token{kind: tkOp, val: l.src[l.pos : l.pos+n], start: l.pos, end: l.pos + n})
	l.pos += n
	l.delimFor = -1
}

var redirOps = []string{"&>>", "&>", "<<<", "<<-", "<<", "<>", "<&", ">>", ">|", ">&", ">", "<"}

func (l *lexer) redir(fd string, start int) {
	s := l.src[l.pos:]
	op := "<"
	for _, o := range redirOps {
		if strings.HasPrefix(s, o) {
			op = o
			break
		}
	}
	l.pos += len(op)
	l.toks = append(l.toks, token{kind: tkRedir, val: op, fd: fd, start: start, end: l.pos})
	if op == "<<" || op == "<<-" {
		l.delimFor = len(l.toks) - 1
	} else {
		l.delimFor = -1
	}
}

// heredocBodies consumes the bodies of the here-documents opened on the
// line that just ended.
func (l *lexer) heredocBodies() {
	for _, p := range l.pending {
		start := l.pos
		bodyEnd := len(l.src)
		for l.pos < len(l.src) {
			lineEnd := strings.IndexByte(l.src[l.pos:], '\n')
			next := len(l.src)
			if lineEnd < 0 {
				lineEnd = len(l.src)
			} else {
				lineEnd += l.pos
				next = lineEnd + 1
			}
			line := strings.TrimSuffix(l.src[l.pos:lineEnd], "\r")
			if p.strip {
				line = strings.TrimLeft(line, "\t")
			}
			if line == p.delim {
				bodyEnd = l.pos
				l.pos = next
				break
			}
			l.pos = next
		}
		if bodyEnd > len(l.src) || bodyEnd < start {
			bodyEnd = len(l.src)
		}
		t := &l.toks[p.tok]
		t.body, t.hasBody, t.bodyQuoted = l.src[start:bodyEnd], true, p.quoted
		if !p.quoted {
			t.subs = collectSubs(t.body)
		}
	}
	l.pending = l.pending[:0]
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func isWordEnd(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ';', '&', '|', '(', ')', '<', '>':
		return true
	}
	return false
}

// word reads one word starting at l.pos.
func (l *lexer) word() {
	src := l.src
	start := l.pos
	plain := true // the value is exactly src[start:l.pos]
	quoted := false
	var subs []string
	l.buf = l.buf[:0]
	special := func() {
		if plain {
			plain = false
			l.buf = append(l.buf[:0], src[start:l.pos]...)
		}
	}
loop:
	for l.pos < len(src) {
		c := src[l.pos]
		switch c {
		case ' ', '\t', '\r', '\n', ';', '&', '|', ')':
			break loop
		case '(':
			// Array assignment a=(…) or an extglob @(…): keep it in the word.
			if l.pos > start && strings.IndexByte("=@!?*+", src[l.pos-1]) >= 0 {
				end := findClose(src, l.pos+1)
				if !plain {
					l.buf = append(l.buf, src[l.pos:min(end+1, len(src))]...)
				}
				l.pos = min(end+1, len(src))
				continue
			}
			break loop
		case '<', '>':
			if l.pos+1 < len(src) && src[l.pos+1] == '(' { // process substitution
				special()
				end := findClose(src, l.pos+2)
				subs = append(subs, src[l.pos+2:end])
				l.buf = append(l.buf, markUnknown)
				l.pos = min(end+1, len(src))
				continue
			}
			break loop
		case '\\':
			special()
			quoted = true
			if l.pos+1 < len(src) {
				if n := src[l.pos+1]; n != '\n' {
					l.buf = appendSafe(l.buf, n)
				}
				l.pos += 2
			} else {
				l.pos++
			}
		case '\'':
			special()
			quoted = true
			end := strings.IndexByte(src[l.pos+1:], '\'')
			if end < 0 {
				end = len(src)
			} else {
				end += l.pos + 1
			}
			for i := l.pos + 1; i < end; i++ {
				l.buf = appendSafe(l.buf, src[i])
			}
			l.pos = min(end+1, len(src))
		case '"':
			special()
			quoted = true
			l.pos++
			subs = l.dquote(subs)
		case '$':
			special()
			if l.peek(1) == '\'' {
				quoted = true
			}
			subs = l.dollar(subs, false)
		case '`':
			special()
			subs = l.backtick(subs)
		case '~':
			if l.pos == start && (l.pos+1 == len(src) || src[l.pos+1] == '/' || isWordEnd(src[l.pos+1])) {
				special()
				l.buf = append(l.buf, "\x01HOME\x02"...)
			} else if !plain {
				l.buf = append(l.buf, c)
			}
			l.pos++
		case markVarOpen, markVarClose:
			special()
			l.buf = append(l.buf, '?')
			l.pos++
		default:
			if !plain {
				l.buf = append(l.buf, c)
			}
			l.pos++
		}
	}
	val := src[start:l.pos]
	if !plain {
		val = string(l.buf)
	}
	// "2>file": an unquoted all-digit word glued to a redirection is its fd.
	if !quoted && plain && l.pos < len(src) && (src[l.pos] == '<' || src[l.pos] == '>') &&
		l.peek(1) != '(' && allDigits(val) {
		l.redir(val, start)
		return
	}
	l.toks = append(l.toks, token{kind: tkWord, val: val, start: start, end: l.pos, quoted: quoted, subs: subs})
	if l.delimFor >= 0 {
		l.pending = append(l.pending, pendingDoc{
			tok: l.delimFor, delim: val, strip: l.toks[l.delimFor].val == "<<-", quoted: quoted,
		})
		l.delimFor = -1
	}
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

func appendSafe(b []byte, c byte) []byte {
	if c == markVarOpen || c == markVarClose {
		c = '?'
	}
	return append(b, c)
}

// dquote reads the inside of "…" (l.pos is just after the opening quote).
func (l *lexer) dquote(subs []string) []string {
	src := l.src
	for l.pos < len(src) {
		switch c := src[l.pos]; c {
		case '"':
			l.pos++
			return subs
		case '\\':
			if l.pos+1 < len(src) {
				switch n := src[l.pos+1]; n {
				case '$', '`', '"', '\\':
					l.buf = append(l.buf, n)
				case '\n':
				default:
					l.buf = appendSafe(append(l.buf, '\\'), n)
				}
				l.pos += 2
			} else {
				l.pos++
			}
		case '$':
			subs = l.dollar(subs, true)
		case '`':
			subs = l.backtick(subs)
		default:
			l.buf = appendSafe(l.buf, c)
			l.pos++
		}
	}
	return subs
}

func isNameStart(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isNameChar(c byte) bool  { return isNameStart(c) || (c >= '0' && c <= '9') }

func isName(s string) bool {
	if s == "" || !isNameStart(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !isNameChar(s[i]) {
			return false
		}
	}
	return true
}

// dollar handles an expansion starting at l.pos ('$').
func (l *lexer) dollar(subs []string, inDQ bool) []string {
	src := l.src
	if l.pos+1 >= len(src) {
		l.buf = append(l.buf, '$')
		l.pos++
		return subs
	}
	switch n := src[l.pos+1]; {
	case n == '(': // $( … ) and $(( … ))
		end := findClose(src, l.pos+2)
		subs = append(subs, src[l.pos+2:end])
		l.buf = append(l.buf, markUnknown)
		l.pos = min(end+1, len(src))
	case n == '{':
		end := findBrace(src, l.pos+2)
		inner := src[l.pos+2 : end]
		if isName(inner) {
			l.buf = append(append(append(l.buf, markVarOpen), inner...), markVarClose)
		} else {
			l.buf = append(l.buf, markUnknown)
			subs = append(subs, collectSubs(inner)...)
		}
		l.pos = min(end+1, len(src))
	case n == '\'' && !inDQ:
		l.pos += 2
		l.ansiC()
	case n == '"' && !inDQ:
		l.pos++ // $"…" is "…"; the caller's loop reads the quote
	case isNameStart(n):
		j := l.pos + 2
		for j < len(src) && isNameChar(src[j]) {
			j++
		}
		l.buf = append(append(append(l.buf, markVarOpen), src[l.pos+1:j]...), markVarClose)
		l.pos = j
	case n >= '0' && n <= '9', strings.IndexByte("@*#?$!-", n) >= 0:
		l.buf = append(l.buf, markUnknown)
		l.pos += 2
	default:
		l.buf = append(l.buf, '$')
		l.pos++
	}
	return subs
}

// ansiC decodes the body of $'…' (l.pos is just after the quote).
func (l *lexer) ansiC() {
	src := l.src
	for l.pos < len(src) {
		c := src[l.pos]
		if c == '\'' {
			l.pos++
			return
		}
		if c != '\\' || l.pos+1 >= len(src) {
			l.buf = appendSafe(l.buf, c)
			l.pos++
			continue
		}
		e := src[l.pos+1]
		l.pos += 2
		switch e {
		case 'n':
			l.buf = append(l.buf, '\n')
		case 't':
			l.buf = append(l.buf, '\t')
		case 'r':
			l.buf = append(l.buf, '\r')
		case 'x':
			v, k := 0, 0
			for ; k < 2 && l.pos < len(src) && hexVal(src[l.pos]) >= 0; k++ {
				v = v*16 + hexVal(src[l.pos])
				l.pos++
			}
			if k == 0 {
				l.buf = append(l.buf, '\\', 'x')
			} else {
				l.buf = appendSafe(l.buf, byte(v))
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(e - '0')
			for k := 0; k < 2 && l.pos < len(src) && src[l.pos] >= '0' && src[l.pos] <= '7'; k++ {
				v = v*8 + int(src[l.pos]-'0')
				l.pos++
			}
			l.buf = appendSafe(l.buf, byte(v))
		default:
			l.buf = appendSafe(l.buf, e)
		}
	}
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

// backtick handles `…` starting at l.pos.
func (l *lexer) backtick(subs []string) []string {
	src := l.src
	j := skipBacktick(src, l.pos)
	body := src[l.pos+1 : j]
	if strings.IndexByte(body, '\\') >= 0 {
		body = strings.NewReplacer("\\`", "`", "\\\\", "\\", "\\$", "$").Replace(body)
	}
	subs = append(subs, body)
	l.buf = append(l.buf, markUnknown)
	l.pos = min(j+1, len(src))
	return subs
}

// skipBacktick returns the index of the backtick closing the one at i, or
// len(s).
func skipBacktick(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '`':
			return j
		}
	}
	return len(s)
}

// findClose returns the index of the ')' matching an opening parenthesis
// just before i, or len(s). It understands quotes, backslashes, nested
// parentheses, $( ) inside double quotes and # comments, using an explicit
// stack so that it stays linear and never recurses.
func findClose(s string, i int) int {
	stack := make([]byte, 1, 8)
	stack[0] = 'p'
	for j := i; j < len(s); j++ {
		c := s[j]
		if stack[len(stack)-1] == 'd' {
			switch c {
			case '\\':
				j++
			case '"':
				stack = stack[:len(stack)-1]
			case '`':
				j = skipBacktick(s, j)
			case '$':
				if j+1 < len(s) && s[j+1] == '(' {
					stack = append(stack, 'p')
					j++
				}
			}
			continue
		}
		switch c {
		case '\\':
			j++
		case '\'':
			k := strings.IndexByte(s[j+1:], '\'')
			if k < 0 {
				return len(s)
			}
			j += k + 1
		case '"':
			stack = append(stack, 'd')
		case '`':
			j = skipBacktick(s, j)
		case '(':
			stack = append(stack, 'p')
		case ')':
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return j
			}
		case '#':
			if j == i || isBlank(s[j-1]) {
				k := strings.IndexByte(s[j:], '\n')
				if k < 0 {
					return len(s)
				}
				j += k
			}
		}
	}
	return len(s)
}

// findBrace returns the index of the '}' closing a ${ whose body starts at
// i, or len(s).
func findBrace(s string, i int) int {
	depth := 1
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '\'':
			k := strings.IndexByte(s[j+1:], '\'')
			if k < 0 {
				return len(s)
			}
			j += k + 1
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return len(s)
}

// collectSubs returns the bodies of the command substitutions in text that
// undergoes expansion (an unquoted here-document, the inside of ${…}).
func collectSubs(s string) []string {
	var out []string
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '$':
			if i+1 < len(s) && s[i+1] == '(' {
				end := findClose(s, i+2)
				out = append(out, s[i+2:end])
				i = end
			}
		case '`':
			j := skipBacktick(s, i)
			out = append(out, s[i+1:j])
			i = j
		}
	}
	return out
}

// ---------------------------------------------------------------------
// Parsing tokens into simple commands.

type itemKind uint8

const (
	itemCmd   itemKind = iota
	itemOpen           // ( : a subshell starts
	itemClose          // )
)

type redirNode struct {
	tok    *token // the operator token (carries a here-document body)
	target *token // the word after it, if any
}

type cmdNode struct {
	words      []*token
	redirs     []redirNode
	start, end int
	pipeFrom   *cmdNode // the command piping into this one
}

type item struct {
	kind itemKind
	cmd  *cmdNode
}

func isOp(t *token, v string) bool { return t.kind == tkOp && t.val == v }

// parse groups tokens into simple commands. Function definitions
// (name() and function name()) are dropped as commands: their bodies
// follow as ordinary commands.
func parse(toks []token) []item {
	items := make([]item, 0, 4)
	var cur, pipeFrom *cmdNode
	begin := func(t *token) {
		if cur == nil {
			cur = &cmdNode{start: t.start, pipeFrom: pipeFrom}
			pipeFrom = nil
		}
	}
	flush := func(sep string) {
		pipeFrom = nil
		if cur != nil {
			items = append(items, item{kind: itemCmd, cmd: cur})
			if sep == "|" || sep == "|&" {
				pipeFrom = cur
			}
		}
		cur = nil
	}
	for i := 0; i < len(toks); i++ {
		t := &toks[i]
		switch t.kind {
		case tkWord:
			begin(t)
			cur.words = append(cur.words, t)
			cur.end = t.end
		case tkRedir:
			begin(t)
			r := redirNode{tok: t}
			cur.end = t.end
			if i+1 < len(toks) && toks[i+1].kind == tkWord {
				i++
				r.target = &toks[i]
				cur.end = toks[i].end
			}
			cur.redirs = append(cur.redirs, r)
		case tkOp:
			switch t.val {
			case "(":
				if cur != nil && len(cur.redirs) == 0 && i+1 < len(toks) && isOp(&toks[i+1], ")") &&
					(len(cur.words) == 1 || (len(cur.words) == 2 && cur.words[0].val == "function")) {
					cur = nil // function definition header
					i++
					continue
				}
				flush("")
				items = append(items, item{kind: itemOpen})
			case ")":
				flush("")
				items = append(items, item{kind: itemClose})
			default:
				flush(t.val)
			}
		}
	}
	flush("")
	return items
}
