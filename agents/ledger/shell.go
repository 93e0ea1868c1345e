package ledger

import (
	"path"
	"strings"
)

// This file holds the small shell reader behind move typing and query
// extraction: it splits a command into simple commands (segments) at
// unquoted | || && ; & and newlines, removes quotes, separates
// redirections from words and attaches here-document bodies. It does not
// expand anything: $VAR, $(…) and `…` stay in the words as written, and a
// subshell ( … ) or group { … } is read as the commands inside it. It is
// a reader for classification, not a shell: sandboxd/policy decides what
// may run.

// redirect is one redirection of a segment.
type redirect struct {
	fd     int    // 0 stdin, 1 stdout, 2 stderr, -1 both (&>)
	op     string // > >> < << <<- <<< >&
	target string // file, fd, here-document delimiter or here-string
}

// segment is one simple command.
type segment struct {
	words  []string
	redirs []redirect
	stdin  string // here-document bodies and here-strings, joined by newlines
	op     string // the operator that ended it: | || && ; & \n or ""
	piped  bool   // its stdin is the previous segment's stdout
}

type pendingDoc struct {
	seg   int // index the segment will have in segs
	delim string
	strip bool // <<- : leading tabs are removed
}

type shellReader struct {
	src     string
	i       int
	segs    []segment
	cur     segment
	word    strings.Builder
	inWord  bool
	redir   *redirect // waiting for its target word
	pending []pendingDoc
}

// parseShell splits src into segments.
func parseShell(src string) []segment {
	r := shellReader{src: src}
	r.run()
	for i := 1; i < len(r.segs); i++ {
		r.segs[i].piped = r.segs[i-1].op == "|"
	}
	return r.segs
}

func (r *shellReader) peek(k int) byte {
	if r.i+k < len(r.src) {
		return r.src[r.i+k]
	}
	return 0
}

func (r *shellReader) run() {
	src := r.src
	for r.i < len(src) {
		c := src[r.i]
		switch {
		case c == ' ' || c == '\t' || c == '\r':
			r.endWord()
			r.i++
		case c == '\n':
			r.endSeg("\n")
			r.i++
			r.readDocs()
		case c == '\\':
			if r.peek(1) == '\n' {
				r.i += 2
				continue
			}
			if r.i+1 < len(src) {
				r.word.WriteByte(src[r.i+1])
			}
			r.inWord = true
			r.i += 2
		case c == '\'':
			j := strings.IndexByte(src[r.i+1:], '\'')
			if j < 0 {
				r.word.WriteString(src[r.i+1:])
				r.i = len(src)
			} else {
				r.word.WriteString(src[r.i+1 : r.i+1+j])
				r.i += j + 2
			}
			r.inWord = true
		case c == '"':
			r.readDouble()
		case c == '$' && r.peek(1) == '(':
			r.verbatim(r.i+1, '(', ')')
		case c == '$' && r.peek(1) == '{':
			r.verbatim(r.i+1, '{', '}')
		case c == '`':
			r.backquoted()
			r.inWord = true
		case (c == '<' || c == '>') && r.peek(1) == '(':
			// Process substitution: a word of its own.
			r.endWord()
			r.verbatim(r.i+1, '(', ')')
		case c == '#' && !r.inWord:
			for r.i < len(src) && src[r.i] != '\n' {
				r.i++
			}
		case c == '|':
			switch r.peek(1) {
			case '|':
				r.endSeg("||")
				r.i += 2
			case '&':
				r.endSeg("|")
				r.i += 2
			default:
				r.endSeg("|")
				r.i++
			}
		case c == '&':
			switch r.peek(1) {
			case '&':
				r.endSeg("&&")
				r.i += 2
			case '>':
				r.endWord()
				op := ">"
				r.i += 2
				if r.peek(0) == '>' {
					op = ">>"
					r.i++
				}
				r.redir = &redirect{fd: -1, op: op}
			default:
				r.endSeg("&")
				r.i++
			}
		case c == ';':
			r.endSeg(";")
			r.i++
			for r.i < len(src) && src[r.i] == ';' {
				r.i++
			}
		case c == '(' || c == ')':
			if r.inWord {
				r.word.WriteByte(c)
				r.i++
				continue
			}
			r.endSeg(";")
			r.i++
		case c == '>' || c == '<':
			r.readRedirect(c)
		default:
			r.word.WriteByte(c)
			r.inWord = true
			r.i++
		}
	}
	r.endSeg("")
}

// readDouble reads a double-quoted string.
func (r *shellReader) readDouble() {
	src := r.src
	r.i++
	r.inWord = true
	for r.i < len(src) && src[r.i] != '"' {
		c := src[r.i]
		switch {
		case c == '\\' && r.i+1 < len(src) && strings.IndexByte("\"\\$`\n", src[r.i+1]) >= 0:
			if src[r.i+1] != '\n' {
				r.word.WriteByte(src[r.i+1])
			}
			r.i += 2
		case c == '$' && r.peek(1) == '(':
			r.verbatim(r.i+1, '(', ')')
		case c == '`':
			r.backquoted()
		default:
			r.word.WriteByte(c)
			r.i++
		}
	}
	r.i++ // closing quote
}

// verbatim copies src[r.i:] up to the bracket closing the one at open into
// the current word, as written.
// backquoted copies a `…` substitution at r.i into the word verbatim (to
// the end of the command when it is not closed).
func (r *shellReader) backquoted() {
	j := strings.IndexByte(r.src[r.i+1:], '`')
	end := len(r.src)
	if j >= 0 {
		end = r.i + 1 + j + 1
	}
	r.word.WriteString(r.src[r.i:end])
	r.i = end
}

func (r *shellReader) verbatim(open int, o, c byte) {
	end := closing(r.src, open, o, c)
	r.word.WriteString(r.src[r.i:end])
	r.inWord = true
	r.i = end
}

// closing returns the index after the bracket closing src[open], skipping
// quoted text; len(src) when it is not closed.
func closing(src string, open int, o, c byte) int {
	depth := 0
	for i := open; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case '\'':
			if j := strings.IndexByte(src[i+1:], '\''); j >= 0 {
				i += j + 1
			} else {
				return len(src)
			}
		case '"':
			for i++; i < len(src) && src[i] != '"'; i++ {
				if src[i] == '\\' {
					i++
				}
			}
		case o:
			depth++
		case c:
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(src)
}

func (r *shellReader) readRedirect(c byte) {
	fd := 1
	if c == '<' {
		fd = 0
	}
	if r.inWord {
		w := r.word.String()
		if w != "" && strings.Trim(w, "0123456789") == "" && len(w) <= 2 {
			fd = int(w[0] - '0')
			if len(w) == 2 {
				fd = fd*10 + int(w[1]-'0')
			}
			r.word.Reset()
			r.inWord = false
		} else {
			r.endWord()
		}
	}
	r.i++
	op := string(c)
	switch {
	case c == '>' && (r.peek(0) == '>'):
		op = ">>"
		r.i++
	case c == '>' && r.peek(0) == '|':
		r.i++
	case c == '>' && r.peek(0) == '&':
		op = ">&"
		r.i++
	case c == '<' && r.peek(0) == '<' && r.peek(1) == '<':
		op = "<<<"
		r.i += 2
	case c == '<' && r.peek(0) == '<' && r.peek(1) == '-':
		op = "<<-"
		r.i += 2
	case c == '<' && r.peek(0) == '<':
		op = "<<"
		r.i++
	case c == '<' && (r.peek(0) == '&' || r.peek(0) == '>'):
		op = "<&"
		r.i++
	}
	r.redir = &redirect{fd: fd, op: op}
}

func (r *shellReader) endWord() {
	if !r.inWord {
		return
	}
	w := r.word.String()
	r.word.Reset()
	r.inWord = false
	if r.redir != nil {
		rd := *r.redir
		r.redir = nil
		rd.target = w
		switch rd.op {
		case "<<", "<<-":
			r.pending = append(r.pending, pendingDoc{seg: len(r.segs), delim: w, strip: rd.op == "<<-"})
		case "<<<":
			r.addStdin(len(r.segs), w)
		}
		r.cur.redirs = append(r.cur.redirs, rd)
		return
	}
	r.cur.words = append(r.cur.words, w)
}

func (r *shellReader) addStdin(seg int, text string) {
	s := &r.cur
	if seg < len(r.segs) {
		s = &r.segs[seg]
	}
	if s.stdin != "" {
		s.stdin += "\n"
	}
	s.stdin += text
}

func (r *shellReader) endSeg(op string) {
	r.endWord()
	r.redir = nil
	if len(r.cur.words) == 0 && len(r.cur.redirs) == 0 && r.cur.stdin == "" {
		// An empty command: keep a pipe visible to the previous segment.
		if op == "|" && len(r.segs) > 0 {
			r.segs[len(r.segs)-1].op = op
		}
		return
	}
	r.cur.op = op
	r.segs = append(r.segs, r.cur)
	r.cur = segment{}
}

// readDocs reads the bodies of the here-documents opened on the line just
// ended.
func (r *shellReader) readDocs() {
	for _, d := range r.pending {
		var body []string
		for r.i < len(r.src) {
			j := strings.IndexByte(r.src[r.i:], '\n')
			line := r.src[r.i:]
			if j >= 0 {
				line = r.src[r.i : r.i+j]
				r.i += j + 1
			} else {
				r.i = len(r.src)
			}
			if d.strip {
				line = strings.TrimLeft(line, "\t")
			}
			if strings.TrimRight(line, "\r") == d.delim {
				break
			}
			body = append(body, line)
		}
		r.addStdin(d.seg, strings.Join(body, "\n"))
	}
	r.pending = r.pending[:0]
}

// Words that start a compound command or modify the next one and are
// skipped to find the command name.
var shellKeywords = map[string]bool{
	"if": true, "then": true, "else": true, "elif": true, "do": true,
	"while": true, "until": true, "!": true, "{": true, "}": true, "time": true,
}

// wrappers run their arguments as a command; the value says which of
// their options take a value.
var wrappers = map[string]string{
	"sudo": "ugCDhpRrT", "env": "uCS", "nohup": "", "nice": "n", "timeout": "sk",
	"stdbuf": "ioe", "command": "", "exec": "a", "builtin": "", "xargs": "IiLlnPsdEa",
	"ionice": "cnp", "chronic": "", "unbuffer": "", "caffeinate": "",
}

// command returns the lower-cased base name of seg's command and its
// arguments, past keywords, variable assignments and wrappers such as
// sudo, env, timeout and xargs.
func command(words []string) (string, []string) {
	for len(words) > 0 {
		w := words[0]
		switch {
		case shellKeywords[w]:
			words = words[1:]
			continue
		case isAssignment(w):
			words = words[1:]
			continue
		}
		name := strings.ToLower(path.Base(w))
		valued, ok := wrappers[name]
		if !ok {
			return name, words[1:]
		}
		words = words[1:]
		for len(words) > 0 {
			a := words[0]
			if name == "timeout" && !strings.HasPrefix(a, "-") && strings.Trim(a, "0123456789.smhd") == "" {
				words = words[1:] // the duration
				break
			}
			if name == "nice" && strings.HasPrefix(a, "-") && strings.Trim(a[1:], "0123456789") == "" && len(a) > 1 {
				words = words[1:]
				continue
			}
			if !strings.HasPrefix(a, "-") || a == "-" {
				if name == "env" && isAssignment(a) {
					words = words[1:]
					continue
				}
				break
			}
			words = words[1:]
			if a == "--" {
				break
			}
			if !strings.HasPrefix(a, "--") && len(a) == 2 && strings.IndexByte(valued, a[1]) >= 0 && len(words) > 0 {
				words = words[1:]
			}
		}
	}
	return "", nil
}

func isAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	for i := 0; i < eq; i++ {
		c := w[i]
		if c != '_' && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// stdoutFiles returns the files seg's standard output is redirected to,
// ignoring /dev/* and fd duplications.
func (s segment) stdoutFiles() []string {
	var out []string
	for _, r := range s.redirs {
		if (r.fd == 1 || r.fd == -1) && (r.op == ">" || r.op == ">>") && r.target != "" && !strings.HasPrefix(r.target, "/dev/") {
			out = append(out, r.target)
		}
	}
	return out
}

// hasStdinDoc reports whether seg reads a here-document or here-string.
func (s segment) hasStdinDoc() bool {
	for _, r := range s.redirs {
		if r.op == "<<" || r.op == "<<-" || r.op == "<<<" {
			return true
		}
	}
	return false
}

// hasStdinFile reports whether seg's stdin is redirected from a file.
func (s segment) hasStdinFile() bool {
	for _, r := range s.redirs {
		if r.op == "<" && r.fd == 0 {
			return true
		}
	}
	return false
}
