package eventfmt

import (
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
)

func TestTerminalSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, é, 日本\n\tindented":     "plain text, é, 日本\n\tindented",
		"\x1b]52;c;cm0gLXJmIH4=\x07":        `\x1b]52;c;cm0gLXJmIH4=\x07`,
		"rm -rf /\rls -la":                  `rm -rf /\x0dls -la`,
		"\x1b[2J\x1b[Hcleared":              `\x1b[2J\x1b[Hcleared`,
		"csi\u009b31m":                      `csi\u009b31m`,
		"del\x7f":                           `del\x7f`,
		"access\u202e\u2066 // admin\u2069": `access\u202e\u2066 // admin\u2069`,
	} {
		if got := TerminalSafe(in); got != want {
			t.Errorf("TerminalSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLineIsTerminalSafe: an outside tool's event whose text holds escape
// sequences is shown with them escaped.
func TestLineIsTerminalSafe(t *testing.T) {
	ev := bus.Event{Time: time.Unix(0, 0), RunID: "r", Type: "vera.ext.acme.note", Source: "ext",
		Data: []byte(`{"text":"hi \u001b]0;pwned\u0007 \u009b2J"}`)}
	line := Line(ev, 200)
	for _, r := range line {
		if unsafeRune(r) {
			t.Fatalf("line holds %U: %q", r, line)
		}
	}
	if got := Malformed(1, "vera.run.r.x", []byte("\x1b[31mred\r"), nil, 200); got != TerminalSafe(got) {
		t.Fatalf("malformed line not safe: %q", got)
	}
}
