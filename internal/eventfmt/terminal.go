package eventfmt

import (
	"fmt"
	"strings"
)

// TerminalSafe returns s with everything a terminal would act on instead
// of print shown as an escape: C0 control characters but newline and tab
// (ESC starts cursor moves, colour, window titles and OSC 52 clipboard
// writes; CR returns to the start of the line and lets later text hide
// earlier text), DEL, the C1 controls U+0080–U+009F (some terminals read
// U+009B as CSI), and the Unicode bidirectional overrides and isolates,
// which reorder what is shown ("Trojan Source"). Model replies, command
// output and outside tools' events are written by parties a user does not
// control: every terminal view of VERA prints them through this.
func TerminalSafe(s string) string {
	i := strings.IndexFunc(s, unsafeRune)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for _, r := range s[i:] {
		switch {
		case !unsafeRune(r):
			b.WriteRune(r)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069, r == 0x200e, r == 0x200f, r == 0x061c:
		return true
	}
	return false
}
