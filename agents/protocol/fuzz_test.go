package protocol

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vera-run/vera/bus/catalog"
)

var canonicalID = regexp.MustCompile(`^ev_[0-9]{4}[0-9]*$`)

// FuzzParse checks that Parse never panics, is deterministic, and that a
// reply without errors always yields a complete, valid turn.
func FuzzParse(f *testing.F) {
	for _, tc := range errorCases {
		f.Add(tc.reply)
	}
	for _, s := range Shapes() {
		f.Add(reply(thoughtLine, s.Example, evLine, statusLine))
	}
	for _, block := range strings.Split(SystemPrompt(), "\n\n") {
		f.Add(block)
	}
	f.Add("<think><think></think>\r\n```json\n{\"tool\":\"shell\",\n\"args\":{\"cmd\":\"a\nb\"}}\n```\nTHOUGHT -x\nEVIDENCE_USED: ev_1\nSTATUS_UPDATE: UNRESOLVED(")
	f.Add("ACTION: ```json {\"tool\":\"submit\",\"args\":{\"answer\":\"\\u0000\"}}```\n</thinking>")
	f.Add("{{{{[[[[\"\\\n" + strings.Repeat("{", 500))
	f.Fuzz(func(t *testing.T, s string) {
		turn, errs := Parse(s)
		turn2, errs2 := Parse(s)
		if !reflect.DeepEqual(turn, turn2) || !reflect.DeepEqual(errs, errs2) {
			t.Fatal("Parse is not deterministic")
		}
		known := map[Code]bool{}
		for _, c := range Codes() {
			known[c] = true
		}
		for _, e := range errs {
			if !known[e.Code] || e.Message == "" {
				t.Fatalf("bad error %#v", e)
			}
		}
		if strings.Contains(turn.Action.Raw, "\n") && utf8.ValidString(s) {
			t.Fatalf("raw action spans lines: %q", turn.Action.Raw)
		}
		for _, id := range turn.EvidenceUsed {
			if !canonicalID.MatchString(id) {
				t.Fatalf("evidence id %q not canonical", id)
			}
		}
		if len(errs) > 0 {
			return
		}
		if strings.TrimSpace(turn.Thought) == "" || turn.Action.Raw == "" || !turn.Action.Tool.Valid() {
			t.Fatalf("incomplete turn without errors: %#v", turn)
		}
		switch turn.Action.Tool {
		case catalog.ActionShell:
			if turn.Action.Cmd == "" {
				t.Fatal("shell without command")
			}
		case catalog.ActionNotesAppend:
			if strings.TrimSpace(turn.Action.Text) == "" {
				t.Fatal("notes without text")
			}
		case catalog.ActionSubmit:
			if turn.Action.Answer == "" && !ValidAnswerFile(turn.Action.AnswerFile) {
				t.Fatal("submit without answer or answer file")
			}
		case catalog.ActionEdit:
			if turn.Action.Edit == nil || !turn.Action.Edit.Op.Valid() || turn.Action.Edit.Path == "" {
				t.Fatalf("edit without op or path: %+v", turn.Action.Edit)
			}
		}
		switch turn.StatusUpdate.State {
		case StateResolved, StateContinue:
		case StateUnresolved:
			if turn.StatusUpdate.Reason == "" {
				t.Fatal("UNRESOLVED without reason")
			}
		default:
			t.Fatalf("state %q", turn.StatusUpdate.State)
		}
	})
}

// FuzzCapText checks the cap bound and UTF-8 safety.
func FuzzCapText(f *testing.F) {
	f.Add("hello world", 4)
	f.Add(strings.Repeat("日本語", 50), 7)
	f.Fuzz(func(t *testing.T, s string, n int) {
		got := CapText(s, n)
		if n <= 0 || len(s) <= n {
			if got != s {
				t.Fatal("changed text under the cap")
			}
			return
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("cut a rune: %q", got)
		}
		head, rest, ok := strings.Cut(got, "\n[... ")
		if !ok {
			t.Fatal("no marker")
		}
		_, tail, _ := strings.Cut(rest, " bytes omitted ...]\n")
		if len(head)+len(tail) > n || !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) {
			t.Fatalf("bad cap of %d: %q", n, got)
		}
	})
}

// TestParsePathological runs inputs that would be slow if Parse were not
// linear (each finishes in milliseconds; a regression shows as a timeout).
func TestParsePathological(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("{\n", 50000),
		strings.Repeat("{"+strings.Repeat("a", 1000)+"\n", 500),
		strings.Repeat("{\"\n", 50000),
		strings.Repeat("<think></think>", 20000),
		strings.Repeat("</think>x", 20000),
		strings.Repeat("```\n", 50000),
		"EVIDENCE_USED: " + strings.Repeat("ev_1 ", 50000),
	} {
		if _, errs := Parse(s); len(errs) == 0 {
			t.Errorf("no errors for %.40q…", s)
		}
	}
}

func BenchmarkParse(b *testing.B) {
	r := reply("<think>plan the next step</think>", thoughtLine, "```json", "{", `"tool": "shell",`, `"args": {"cmd": "curl -sL https://example.org | head"}`, "}", "```", evLine, statusLine)
	for b.Loop() {
		Parse(r)
	}
}
