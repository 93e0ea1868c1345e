// Package jsontext follows JSON text byte by byte, telling the bytes of
// string literals from the structure around them, for the readers that pick
// JSON out of model replies (the agent's output protocol, llm's JSON
// replies) before a real decoder sees it.
package jsontext

// Class is what one byte of JSON text is.
type Class uint8

// The classes of Scanner.Step.
const (
	Structure Class = iota // outside every string: brackets, commas, blanks, literals
	Quote                  // the quote that opens or closes a string
	Content                // a plain byte inside a string
	Escape                 // a backslash inside a string, or the byte it escapes
)

// Scanner classifies the bytes of a JSON text fed to Step in order and
// keeps the bracket depth ({ and [ count up, } and ] down; brackets inside
// strings do not count). The zero value starts outside any string at depth
// 0. It does not validate: it only follows quotes, escapes and brackets.
type Scanner struct {
	inStr, esc bool
	depth      int
}

// Step classifies c and updates the depth.
func (s *Scanner) Step(c byte) Class {
	if s.inStr {
		switch {
		case s.esc:
			s.esc = false
			return Escape
		case c == '\\':
			s.esc = true
			return Escape
		case c == '"':
			s.inStr = false
			return Quote
		}
		return Content
	}
	switch c {
	case '"':
		s.inStr = true
		return Quote
	case '{', '[':
		s.depth++
	case '}', ']':
		s.depth--
	}
	return Structure
}

// Depth is the bracket depth after the bytes stepped so far.
func (s *Scanner) Depth() int { return s.depth }
