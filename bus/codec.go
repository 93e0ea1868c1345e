package bus

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// The envelope is encoded and decoded by hand: it is on every hot path
// (publish, consume, replay) and encoding/json's reflection and double
// validation cost more than the rest of the bus put together. The codec is
// strict (invalid JSON anywhere is an error) and fuzz-tested against
// encoding/json for equivalence.

// MarshalJSON encodes the envelope compactly, members in a fixed order.
func (e Event) MarshalJSON() ([]byte, error) {
	return e.appendJSON(make([]byte, 0, 384+len(e.Data)+len(e.DataBase64)*4/3))
}

func (e *Event) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"specversion":`...)
	b = appendString(b, e.SpecVersion)
	b = append(b, `,"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"source":`...)
	b = appendString(b, e.Source)
	b = append(b, `,"type":`...)
	b = appendString(b, e.Type)
	b = append(b, `,"subject":`...)
	b = appendString(b, e.Subject)
	b = append(b, `,"time":"`...)
	if y := e.Time.Year(); y < 0 || y > 9999 {
		return nil, fmt.Errorf("encode event %s: time %v outside years 0-9999", e.ID, e.Time)
	}
	b = e.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if e.DataContentType != "" {
		b = append(b, `,"datacontenttype":`...)
		b = appendString(b, e.DataContentType)
	}
	if e.DataSchema != "" {
		b = append(b, `,"dataschema":`...)
		b = appendString(b, e.DataSchema)
	}
	b = append(b, `,"runid":`...)
	b = appendString(b, e.RunID)
	if e.CausationID != "" {
		b = append(b, `,"causationid":`...)
		b = appendString(b, e.CausationID)
	}
	if e.Traceparent != "" {
		b = append(b, `,"traceparent":`...)
		b = appendString(b, e.Traceparent)
	}
	if e.Tracestate != "" {
		b = append(b, `,"tracestate":`...)
		b = appendString(b, e.Tracestate)
	}
	if len(e.Data) > 0 {
		b = append(b, `,"data":`...)
		if isCompact(e.Data) {
			b = append(b, e.Data...)
		} else {
			var buf bytes.Buffer
			if err := json.Compact(&buf, e.Data); err != nil {
				return nil, fmt.Errorf("encode event %s data: %w", e.ID, err)
			}
			b = append(b, buf.Bytes()...)
		}
	}
	if len(e.DataBase64) > 0 {
		b = append(b, `,"data_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, e.DataBase64)
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

// isCompact reports whether raw has no insignificant whitespace (checked
// coarsely: no whitespace byte at all).
func isCompact(raw []byte) bool {
	for _, c := range raw {
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way encoding/json does
// (HTML-safe escapes, invalid UTF-8 replaced by U+FFFD).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// UnmarshalJSON decodes an envelope strictly.
func (e *Event) UnmarshalJSON(data []byte) error { return decodeEnvelope(data, e) }

var errSyntax = errors.New("invalid JSON")

type scanner struct {
	data []byte
	pos  int
	// whole is data as one string, made on first use: plain strings are
	// sliced from it, so an envelope costs one allocation, not one a field.
	whole string
}

func (s *scanner) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", errSyntax, what, s.pos)
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\n', '\t', '\r':
			s.pos++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// str scans a string token and returns its raw bytes (quotes included) and
// whether it contains escapes or non-ASCII that need the slow decode.
func (s *scanner) str() (raw []byte, plain bool, err error) {
	start := s.pos
	if s.peek() != '"' {
		return nil, false, s.fail("expected string")
	}
	s.pos++
	plain = true
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.data[start:s.pos], plain, nil
		case c == '\\':
			plain = false
			s.pos++
			if s.pos >= len(s.data) {
				return nil, false, s.fail("unterminated escape")
			}
			switch s.data[s.pos] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos++
			case 'u':
				if s.pos+5 > len(s.data) {
					return nil, false, s.fail("short \\u escape")
				}
				for _, h := range s.data[s.pos+1 : s.pos+5] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return nil, false, s.fail("bad \\u escape")
					}
				}
				s.pos += 5
			default:
				return nil, false, s.fail("bad escape")
			}
		case c < 0x20:
			return nil, false, s.fail("control character in string")
		case c >= utf8.RuneSelf:
			plain = false
			s.pos++
		default:
			s.pos++
		}
	}
	return nil, false, s.fail("unterminated string")
}

func (s *scanner) stringValue() (string, error) {
	raw, plain, err := s.str()
	if err != nil {
		return "", err
	}
	if plain {
		if s.whole == "" {
			s.whole = string(s.data)
		}
		end := s.pos - 1
		return s.whole[end-(len(raw)-2) : end], nil
	}
	var out string
	if err := json.Unmarshal(raw, &out); err != nil {
		return "", fmt.Errorf("%w: %v", errSyntax, err)
	}
	return out, nil
}

func (s *scanner) literal(word string) error {
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		return s.fail("invalid literal")
	}
	s.pos += len(word)
	return nil
}

func (s *scanner) number() error {
	start := s.pos
	if s.peek() == '-' {
		s.pos++
	}
	switch c := s.peek(); {
	case c == '0':
		s.pos++
	case c >= '1' && c <= '9':
		for c := s.peek(); c >= '0' && c <= '9'; c = s.peek() {
			s.pos++
		}
	default:
		return s.fail("invalid number")
	}
	if s.peek() == '.' {
		s.pos++
		if c := s.peek(); c < '0' || c > '9' {
			return s.fail("invalid number")
		}
		for c := s.peek(); c >= '0' && c <= '9'; c = s.peek() {
			s.pos++
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.pos++
		if c := s.peek(); c == '+' || c == '-' {
			s.pos++
		}
		if c := s.peek(); c < '0' || c > '9' {
			return s.fail("invalid number")
		}
		for c := s.peek(); c >= '0' && c <= '9'; c = s.peek() {
			s.pos++
		}
	}
	if s.pos == start {
		return s.fail("invalid number")
	}
	return nil
}

// value scans any JSON value, validating it, up to depth 10000.
func (s *scanner) value(depth int) error {
	if depth > 10000 {
		return s.fail("nesting too deep")
	}
	s.ws()
	switch c := s.peek(); {
	case c == '{':
		s.pos++
		s.ws()
		if s.peek() == '}' {
			s.pos++
			return nil
		}
		for {
			s.ws()
			if _, _, err := s.str(); err != nil {
				return err
			}
			s.ws()
			if s.peek() != ':' {
				return s.fail("expected ':'")
			}
			s.pos++
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.ws()
			switch s.peek() {
			case ',':
				s.pos++
			case '}':
				s.pos++
				return nil
			default:
				return s.fail("expected ',' or '}'")
			}
		}
	case c == '[':
		s.pos++
		s.ws()
		if s.peek() == ']' {
			s.pos++
			return nil
		}
		for {
			if err := s.value(depth + 1); err != nil {
				return err
			}
			s.ws()
			switch s.peek() {
			case ',':
				s.pos++
			case ']':
				s.pos++
				return nil
			default:
				return s.fail("expected ',' or ']'")
			}
		}
	case c == '"':
		_, _, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	default:
		return s.fail("unexpected character")
	}
}

func decodeEnvelope(data []byte, e *Event) error {
	*e = Event{}
	s := &scanner{data: data}
	s.ws()
	if s.peek() != '{' {
		return s.fail("envelope is not a JSON object")
	}
	s.pos++
	s.ws()
	if s.peek() == '}' {
		s.pos++
	} else {
		for {
			s.ws()
			key, plain, err := s.str()
			if err != nil {
				return err
			}
			var name string
			if plain {
				name = memberName(key[1 : len(key)-1])
			} else if name, err = unquoteKey(key); err != nil {
				return err
			}
			s.ws()
			if s.peek() != ':' {
				return s.fail("expected ':'")
			}
			s.pos++
			s.ws()
			if err := e.decodeMember(s, name); err != nil {
				return err
			}
			s.ws()
			if s.peek() == ',' {
				s.pos++
				continue
			}
			if s.peek() == '}' {
				s.pos++
				break
			}
			return s.fail("expected ',' or '}'")
		}
	}
	s.ws()
	if s.pos != len(s.data) {
		return s.fail("data after the envelope")
	}
	return nil
}

// unquoteKey decodes a member key with escapes or non-ASCII (a separate
// function, so that the name of a plain key does not escape to the heap).
func unquoteKey(key []byte) (string, error) {
	var name string
	if err := json.Unmarshal(key, &name); err != nil {
		return "", fmt.Errorf("%w: %v", errSyntax, err)
	}
	return name, nil
}

// memberName returns the name of a member key: one of the envelope's own
// names without allocating (a switch on string(k) does not copy k), any
// other as a new string.
func memberName(k []byte) string {
	switch string(k) {
	case "specversion":
		return "specversion"
	case "id":
		return "id"
	case "source":
		return "source"
	case "type":
		return "type"
	case "subject":
		return "subject"
	case "time":
		return "time"
	case "datacontenttype":
		return "datacontenttype"
	case "dataschema":
		return "dataschema"
	case "runid":
		return "runid"
	case "causationid":
		return "causationid"
	case "traceparent":
		return "traceparent"
	case "tracestate":
		return "tracestate"
	case "data":
		return "data"
	case "data_base64":
		return "data_base64"
	}
	return string(k)
}

// stringAttr returns the field of the context attribute name that holds
// a string (specversion, id, … tracestate), or nil for any other name: the
// one table of both modes' readers (decodeMember, readBinary).
func (e *Event) stringAttr(name string) *string {
	switch name {
	case "specversion":
		return &e.SpecVersion
	case "id":
		return &e.ID
	case "source":
		return &e.Source
	case "type":
		return &e.Type
	case "subject":
		return &e.Subject
	case "datacontenttype":
		return &e.DataContentType
	case "dataschema":
		return &e.DataSchema
	case "runid":
		return &e.RunID
	case "causationid":
		return &e.CausationID
	case "traceparent":
		return &e.Traceparent
	case "tracestate":
		return &e.Tracestate
	}
	return nil
}

func (e *Event) decodeMember(s *scanner, name string) error {
	if dst := e.stringAttr(name); dst != nil {
		if s.peek() == 'n' {
			*dst = ""
			return s.literal("null")
		}
		v, err := s.stringValue()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		*dst = v
		return nil
	}
	switch name {
	case "time":
		if s.peek() == 'n' {
			e.Time = time.Time{}
			return s.literal("null")
		}
		v, err := s.stringValue()
		if err != nil {
			return err
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return fmt.Errorf("%w: time: %v", errSyntax, err)
		}
		e.Time = t
		return nil
	case "data":
		start := s.pos
		if err := s.value(0); err != nil {
			return err
		}
		e.Data = json.RawMessage(s.data[start:s.pos])
		if string(e.Data) == "null" {
			e.Data = nil
		}
		return nil
	case "data_base64":
		if s.peek() == 'n' {
			e.DataBase64 = nil
			return s.literal("null")
		}
		v, err := s.stringValue()
		if err != nil {
			return err
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			return fmt.Errorf("%w: data_base64: %v", errSyntax, err)
		}
		e.DataBase64 = b
		return nil
	default:
		// Other extension attributes are allowed and ignored.
		return s.value(0)
	}
}
