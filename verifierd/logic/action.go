package logic

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ActionKind is the shape of an Action.
type ActionKind int

// Action kinds.
const (
	// ActionNone is no action at all: null, an empty string, an empty list,
	// or a string that is only a comment.
	ActionNone ActionKind = iota
	// ActionText is a web action (BrowserGym's click('12')) or OSWorld code.
	ActionText
	// ActionCalls is one or more tool calls (SWE-bench).
	ActionCalls
	// ActionJSON is any other JSON value; it is compared as JSON.
	ActionJSON
)

// ToolCall is a tool call reduced to what decides its meaning: the
// function's name and its arguments as a canonical JSON value (see
// ParseAction). The call's id and type are not part of it.
type ToolCall struct {
	Name      string
	Arguments any
}

// Action is an agent action in canonical form, ready to be compared with
// Equal. Build one with ParseAction or ParseActionText.
type Action struct {
	Kind  ActionKind
	Text  string     // ActionText: the canonical text (NormalizeActionText)
	Calls []ToolCall // ActionCalls: the calls, in order
	Value any        // ActionJSON: the canonical JSON value
	Raw   string     // the action as given, trimmed (for messages)
}

// jsonNumber is a JSON number in canonical spelling, kept apart from
// strings so that 1 and "1" stay different.
type jsonNumber string

// badJSON is tool-call arguments that are not valid JSON, compared as
// trimmed text.
type badJSON string

// SameAction reports whether two actions, as MIRAGE stores them (a JSON
// string, a tool-call object, or a list of calls), are the same action:
// see ParseAction and Action.Equal. Two absent actions are not the same
// action: an unknown action repeats nothing.
func SameAction(a, b json.RawMessage) bool {
	x, y := ParseAction(a), ParseAction(b)
	if x.Kind == ActionNone || y.Kind == ActionNone {
		return false
	}
	return x.Equal(y)
}

// Equal reports whether a and b are the same action: same kind, and the
// same canonical text, the same calls (name and arguments, in order) or
// the same JSON value.
func (a Action) Equal(b Action) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case ActionNone:
		return true
	case ActionText:
		return a.Text == b.Text
	case ActionCalls:
		if len(a.Calls) != len(b.Calls) {
			return false
		}
		for i := range a.Calls {
			if a.Calls[i].Name != b.Calls[i].Name || !reflect.DeepEqual(a.Calls[i].Arguments, b.Calls[i].Arguments) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(a.Value, b.Value)
	}
}

// IsZero reports whether a is no action.
func (a Action) IsZero() bool { return a.Kind == ActionNone }

// String renders the canonical action briefly, for reasons and logs.
func (a Action) String() string {
	switch a.Kind {
	case ActionNone:
		return "(no action)"
	case ActionText:
		return clip(strings.ReplaceAll(a.Text, "\n", "; "), 80)
	case ActionCalls:
		parts := make([]string, len(a.Calls))
		for i, c := range a.Calls {
			args, _ := json.Marshal(plainJSON(c.Arguments))
			parts[i] = c.Name + "(" + string(args) + ")"
		}
		return clip(strings.Join(parts, ", "), 80)
	default:
		v, _ := json.Marshal(plainJSON(a.Value))
		return clip(string(v), 80)
	}
}

// ParseAction reads an action as MIRAGE stores it and puts it in
// canonical form:
//
//   - null, "", [] and a string that is only a comment are ActionNone;
//   - a JSON string is an ActionText normalised by NormalizeActionText,
//     unless it is itself a JSON-encoded tool call or list of calls;
//   - an object with "function": {"name", "arguments"} (OpenAI chat), or
//     with "name" and "arguments", "input", "args" or "parameters" (other
//     APIs) is a tool call; arguments given as a string are parsed as JSON
//     (twice, if the string holds a JSON-encoded string), an empty or
//     missing one is {}; arguments that are not JSON are kept as text;
//   - an assistant message object with "tool_calls" stands for its calls;
//   - a list of one element is that element; a longer list of tool calls
//     is an ActionCalls with all of them;
//   - bytes that are not JSON at all are taken as action text.
func ParseAction(raw json.RawMessage) Action {
	raw = trimJSON(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return Action{Kind: ActionNone}
	}
	v, err := decodeJSON(raw)
	if err != nil {
		return ParseActionText(string(raw))
	}
	a := actionFromValue(v)
	if a.Raw == "" {
		a.Raw = clip(string(raw), 200)
	}
	return a
}

// ParseActionText puts a web or OSWorld action string in canonical form.
func ParseActionText(s string) Action {
	t := NormalizeActionText(s)
	if t == "" {
		return Action{Kind: ActionNone, Raw: strings.TrimSpace(s)}
	}
	return Action{Kind: ActionText, Text: t, Raw: strings.TrimSpace(s)}
}

func actionFromValue(v any) Action {
	switch x := v.(type) {
	case nil:
		return Action{Kind: ActionNone}
	case string:
		t := strings.TrimSpace(x)
		if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			if inner, err := decodeJSON([]byte(t)); err == nil {
				if a := actionFromValue(inner); a.Kind == ActionCalls {
					return a
				}
			}
		}
		return ParseActionText(x)
	case []any:
		var parts []Action
		for _, e := range x {
			if a := actionFromValue(e); a.Kind != ActionNone {
				parts = append(parts, a)
			}
		}
		switch len(parts) {
		case 0:
			return Action{Kind: ActionNone}
		case 1:
			return parts[0]
		}
		var calls []ToolCall
		for _, p := range parts {
			if p.Kind != ActionCalls {
				return Action{Kind: ActionJSON, Value: canonicalJSON(v)}
			}
			calls = append(calls, p.Calls...)
		}
		return Action{Kind: ActionCalls, Calls: calls}
	case map[string]any:
		if c, ok := toolCallFrom(x); ok {
			return Action{Kind: ActionCalls, Calls: []ToolCall{c}}
		}
		if tc, ok := x["tool_calls"]; ok {
			return actionFromValue(tc)
		}
		return Action{Kind: ActionJSON, Value: canonicalJSON(v)}
	default:
		return Action{Kind: ActionJSON, Value: canonicalJSON(v)}
	}
}

// toolCallFrom recognises a tool call object.
func toolCallFrom(m map[string]any) (ToolCall, bool) {
	if fn, ok := m["function"].(map[string]any); ok {
		if name, ok := fn["name"].(string); ok {
			return ToolCall{Name: name, Arguments: canonicalArguments(firstOf(fn, "arguments", "parameters", "input", "args"))}, true
		}
	}
	if name, ok := m["name"].(string); ok {
		for _, k := range []string{"arguments", "input", "args", "parameters"} {
			if a, ok := m[k]; ok {
				return ToolCall{Name: name, Arguments: canonicalArguments(a)}, true
			}
		}
	}
	return ToolCall{}, false
}

func firstOf(m map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return nil
}

// canonicalArguments parses arguments given as a JSON-encoded string and
// returns their canonical JSON value.
func canonicalArguments(a any) any {
	for range 2 { // an encoded string, possibly encoded once more
		s, ok := a.(string)
		if !ok {
			break
		}
		t := strings.TrimSpace(s)
		if t == "" {
			return map[string]any{}
		}
		v, err := decodeJSON([]byte(t))
		if err != nil {
			return badJSON(t)
		}
		a = v
	}
	if a == nil {
		return map[string]any{}
	}
	return canonicalJSON(a)
}

// canonicalJSON rewrites numbers in canonical spelling, recursively.
func canonicalJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = canonicalJSON(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = canonicalJSON(e)
		}
		return l
	case json.Number:
		return jsonNumber(canonicalNumber(string(x)))
	default:
		return v
	}
}

// plainJSON undoes the private types of canonicalJSON for marshalling.
func plainJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = plainJSON(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = plainJSON(e)
		}
		return l
	case jsonNumber:
		return json.Number(x)
	case badJSON:
		return string(x)
	default:
		return v
	}
}

// canonicalNumber spells a number one way: 200, 200.0 and 2e2 are "200".
func canonicalNumber(s string) string {
	s = strings.ReplaceAll(s, "_", "")
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return strconv.FormatInt(i, 10)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f == float64(int64(f)) && f > -1e18 && f < 1e18 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return strings.ToLower(s)
}

func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailingData
	}
	return v, nil
}

func trimJSON(b json.RawMessage) json.RawMessage { return bytes.TrimSpace(b) }

// NormalizeActionText writes a web action or a snippet of Python action
// code in a canonical form, so that two spellings of one action compare
// equal:
//
//   - '# …' comments up to the end of the line and '<!-- … -->' comments
//     are dropped, but not inside string literals: fill('242', '#SERIES')
//     keeps its argument;
//   - whitespace is dropped except one space between two words and one
//     line break between two lines; blank lines, indentation and
//     surrounding whitespace disappear;
//   - string literals ('…', "…", triple-quoted, with Python prefixes and
//     escapes) are rewritten with one quoting style;
//   - numbers are spelled canonically (200.0 is 200).
//
// Text like '// …' is not a comment in Python and is kept.
func NormalizeActionText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	var (
		pendingSpace, pendingNewline bool
		lastWord                     bool   // the last emitted rune is a word rune
		lastIdent                    string // the last token, if an identifier
	)
	emit := func(tok string, startsWord, endsWord bool) {
		if b.Len() > 0 {
			if pendingNewline {
				b.WriteByte('\n')
			} else if pendingSpace && lastWord && startsWord {
				b.WriteByte(' ')
			}
		}
		pendingSpace, pendingNewline = false, false
		b.WriteString(tok)
		lastWord = endsWord
		lastIdent = ""
	}
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n' || c == '\r':
			pendingNewline = true
			lastIdent = ""
			i++
		case c == ' ' || c == '\t' || c == '\f' || c == '\v':
			pendingSpace = true
			lastIdent = ""
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' && s[i] != '\r' {
				i++
			}
		case c == '<' && strings.HasPrefix(s[i:], "<!--"):
			if end := strings.Index(s[i+4:], "-->"); end >= 0 {
				i += 4 + end + 3
			} else {
				i = len(s)
			}
			pendingSpace = true
			lastIdent = ""
		case c == '\'' || c == '"':
			prefix := ""
			if !pendingSpace && !pendingNewline {
				prefix = lastIdent
			}
			lit, n := readPyString(s[i:], isRawPrefix(prefix))
			i += n
			emit(strconv.Quote(lit), false, false)
		case c >= '0' && c <= '9':
			j := scanNumber(s, i)
			emit(canonicalNumber(s[i:j]), true, true)
			i = j
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case unicode.IsSpace(r):
				pendingSpace = true
				lastIdent = ""
				i += size
			case r == '_' || unicode.IsLetter(r):
				j := i + size
				for j < len(s) {
					r2, n2 := utf8.DecodeRuneInString(s[j:])
					if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) {
						break
					}
					j += n2
				}
				ident := s[i:j]
				emit(ident, true, true)
				lastIdent = ident
				i = j
			default:
				emit(s[i:i+size], false, false)
				i += size
			}
		}
	}
	return b.String()
}

// isRawPrefix reports whether an identifier right before a quote is a
// Python string prefix that makes the literal raw (r, rb, br, rf, fr).
func isRawPrefix(p string) bool {
	if p == "" || len(p) > 2 {
		return false
	}
	raw := false
	for _, r := range strings.ToLower(p) {
		switch r {
		case 'r':
			raw = true
		case 'b', 'u', 'f':
		default:
			return false
		}
	}
	return raw
}

// scanNumber returns the end of the number literal starting at s[i].
func scanNumber(s string, i int) int {
	j := i
	for j < len(s) {
		c := s[j]
		switch {
		case c >= '0' && c <= '9', c == '.', c == '_', c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			j++
		case (c == '+' || c == '-') && j > i && (s[j-1] == 'e' || s[j-1] == 'E') && !strings.ContainsAny(s[i:j], "xXbBoO"):
			j++
		default:
			return j
		}
	}
	return j
}

// readPyString reads the Python string literal at the start of s (which
// begins with a quote) and returns its value and length. An unterminated
// literal runs to the end of its line (or of s, if triple-quoted).
func readPyString(s string, raw bool) (string, int) {
	q := s[0]
	delim := s[:1]
	if len(s) >= 3 && s[1] == q && s[2] == q {
		delim = s[:3]
	}
	triple := len(delim) == 3
	var b strings.Builder
	i := len(delim)
	for i < len(s) {
		c := s[i]
		if strings.HasPrefix(s[i:], delim) {
			return b.String(), i + len(delim)
		}
		if !triple && (c == '\n' || c == '\r') {
			return b.String(), i
		}
		if c == '\\' && i+1 < len(s) {
			e := s[i+1]
			if raw {
				b.WriteByte('\\')
				b.WriteByte(e)
				i += 2
				continue
			}
			switch e {
			case '\\', '\'', '"':
				b.WriteByte(e)
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '\n':
				// line continuation
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
			i += 2
			continue
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), len(s)
}

// clip shortens s to at most n runes, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
