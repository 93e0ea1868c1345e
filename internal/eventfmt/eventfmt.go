// Package eventfmt renders bus events as one human-readable line, for
// `vera events tail` and other terminal views.
package eventfmt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/vera-run/vera/bus"
)

// Line renders ev as
//
//	15:04:05.000 run-1 tool.requested [agent] command="ls /work" requester=agent
//
// with the data's top-level members in document order, long values cut to
// width/4 characters and the whole line to width (0: 200).
func Line(ev bus.Event, width int) string {
	if width <= 0 {
		width = 200
	}
	var b strings.Builder
	b.WriteString(ev.Time.Local().Format("15:04:05.000"))
	b.WriteByte(' ')
	b.WriteString(ev.RunID)
	b.WriteByte(' ')
	b.WriteString(strings.TrimPrefix(ev.Type, "vera."))
	b.WriteString(" [")
	b.WriteString(ev.Source)
	b.WriteByte(']')
	switch {
	case len(ev.Data) > 0:
		for _, kv := range members(ev.Data, max(width/4, 24)) {
			b.WriteByte(' ')
			b.WriteString(kv)
		}
	case len(ev.DataBase64) > 0:
		fmt.Fprintf(&b, " <%d bytes of %s>", len(ev.DataBase64), ev.DataContentType)
	}
	return cut(TerminalSafe(b.String()), width)
}

// Malformed renders a stored message that is not a valid envelope.
func Malformed(seq uint64, subject string, raw []byte, err error, width int) string {
	if width <= 0 {
		width = 200
	}
	preview := strings.ToValidUTF8(string(bytes.TrimSpace(raw)), "?")
	preview = strings.Join(strings.Fields(preview), " ")
	return cut(TerminalSafe(fmt.Sprintf("MALFORMED seq=%d %s: %v: %s", seq, subject, err, preview)), width)
}

func members(data []byte, valueWidth int) []string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return []string{cut(strings.Join(strings.Fields(string(data)), " "), valueWidth)}
	}
	var out []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			break
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			break
		}
		v := string(raw)
		switch {
		case v == "null" || v == `""` || v == "[]" || v == "{}" || v == "false" || v == "0":
			continue // zero values say nothing in a one-line view
		case strings.HasPrefix(v, `"`):
			var s string
			_ = json.Unmarshal(raw, &s)
			s = strings.Join(strings.Fields(s), " ")
			v = cut(s, valueWidth)
			if strings.ContainsAny(v, " =\"") || v == "" {
				v = fmt.Sprintf("%q", v)
			}
		default:
			var compact bytes.Buffer
			if json.Compact(&compact, raw) == nil {
				v = compact.String()
			}
			v = cut(v, valueWidth)
		}
		out = append(out, fmt.Sprintf("%v=%s", k, v))
	}
	return out
}

func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:max(n-1, 1)]) + "…"
}
