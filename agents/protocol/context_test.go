package protocol

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/vera-run/vera/bus/catalog"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// render shows messages as text for golden files.
func render(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintf(&b, "=== %s ===\n%s\n", m.Role, m.Content)
	}
	return b.String()
}

// goldenContext exercises every section: constraints (one multi-line, one
// blank), more tail entries than K, a rendered tool result, an observation
// above the cap with multi-byte text at the cuts, an empty observation and
// feedback from format errors.
func goldenContext() Context {
	_, errs := Parse("THOUGHT: fetch it\nEVIDENCE_USED: none")
	big := strings.Repeat("é", 1500) + "\n--middle--\n" + strings.Repeat("ü", 1500)
	var tail []TailEntry
	for i := 1; i <= 5; i++ {
		tail = append(tail, TailEntry{Step: i, Action: fmt.Sprintf(`{"tool":"shell","args":{"cmd":"echo %d"}}`, i), Observation: fmt.Sprintf("exit_code: 0\nstdout:\n%d", i)})
	}
	tail = append(tail,
		TailEntry{Step: 6, Action: `{"tool":"shell","args":{"cmd":"curl -sL https://www.python.org/downloads/release/python-3130/ | grep -i 'release date'"}}`,
			Observation: RenderObservation("ev_0004", catalog.ToolFinished{
				ExitCode: 0, Stdout: catalog.Output{Head: "<p><strong>Release Date:</strong> Oct. 7, 2024</p>\n", Bytes: 51}, CwdAfter: "/work",
			})},
		TailEntry{Step: 7, Action: `{"tool":"shell","args":{"cmd":"cat big.txt"}}`, Observation: big},
		TailEntry{Step: 8, Action: "(format error: missing_action)", Observation: ""},
		TailEntry{Step: 9, Action: `{"tool":"notes_append","args":{"text":"- date (ev_0004)"}}`, Observation: "appended to notes.md"},
	)
	return Context{
		SystemPrompt:  "You are VERA (golden test prompt).",
		Task:          "When was Python 3.13.0 released?\nCite the official page.\n",
		Notes:         "# Notes\n\n- ev_0004: curl python.org release page\n",
		NewNotes:      "- date: Oct. 7, 2024 (ev_0004)\n",
		NewNotesSince: 9,
		OpenConstraints: []string{
			"Negative claim: check >= 2 official domains and >= 1 independent domain before concluding.",
			"  ",
			"Query family \"python 3.13 release date\" used 3 times:\nmutate the query.",
		},
		Tail:     tail,
		Feedback: Feedback(errs),
	}
}

func TestBuildGolden(t *testing.T) {
	got := render(Build(goldenContext(), Options{}))
	path := filepath.Join("testdata", "build.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestBuildGolden -update)", err)
	}
	if got != string(want) {
		t.Errorf("Build output differs from %s (run with -update if intended):\n%s", path, got)
	}
	if again := render(Build(goldenContext(), Options{})); again != got {
		t.Error("Build is not deterministic")
	}
}

func TestBuildOrderAndSections(t *testing.T) {
	msgs := Build(goldenContext(), Options{})
	if len(msgs) != 2 || msgs[0].Role != catalog.RoleSystem || msgs[1].Role != catalog.RoleUser {
		t.Fatalf("messages %#v", msgs)
	}
	u := msgs[1].Content
	if !strings.HasPrefix(u, HeaderTask+"\n") {
		t.Errorf("user message must start with %q", HeaderTask)
	}
	last := -1
	for _, h := range []string{HeaderTask, HeaderNotes, fmt.Sprintf(HeaderTail, DefaultTailK), fmt.Sprintf(HeaderNewNotes, 9), HeaderConstraints, HeaderFeedback} {
		i := strings.Index(u, h)
		if i <= last {
			t.Fatalf("section %q at %d, after %d", h, i, last)
		}
		last = i
	}
	for _, step := range []string{"[step 1]", "[step 2]", "[step 3]"} {
		if strings.Contains(u, step) {
			t.Errorf("%s is older than the last %d entries", step, DefaultTailK)
		}
	}
	for _, step := range []string{"[step 4]", "[step 9]"} {
		if !strings.Contains(u, step) {
			t.Errorf("%s missing", step)
		}
	}

	// No constraints, no feedback, no tail: no such sections.
	m := Build(Context{Task: "t"}, Options{})
	if m[0].Content != SystemPrompt() {
		t.Error("empty SystemPrompt must default to the embedded prompt")
	}
	want := "PRIMARY TASK:\nt\n\nPINNED notes.md:\n(empty)\n\nACTION TAIL (last 6):\n(no actions yet)"
	if m[1].Content != want {
		t.Errorf("minimal user message:\n%q\nwant\n%q", m[1].Content, want)
	}
}

func TestBuildNeverClipsTaskOrNotes(t *testing.T) {
	var nb strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&nb, "- note %05d: finding with hook (ev_%04d)\n", i, i+1)
	}
	notes := strings.TrimRight(nb.String(), "\n")
	task := strings.Repeat("Find the official source and quote it. ", 2000)
	obs := strings.Repeat("x", 100000)
	c := Context{Task: task, Notes: notes, Tail: []TailEntry{{Step: 1, Action: "a", Observation: obs}}}
	u := Build(c, Options{ObservationCap: 100, TailK: 1})[1].Content
	if !strings.Contains(u, "PRIMARY TASK:\n"+task+"\n\n") {
		t.Error("task clipped")
	}
	if !strings.Contains(u, "PINNED notes.md:\n"+notes+"\n\n") {
		t.Error("notes clipped")
	}
	if strings.Contains(u, strings.Repeat("x", 101)) || !strings.Contains(u, "[... 99900 bytes omitted ...]") {
		t.Error("observation not capped to 100 bytes")
	}
}

func TestBuildCaps(t *testing.T) {
	obs := strings.Repeat("a", 3000) + strings.Repeat("z", 3000)
	act := `{"tool":"shell","args":{"cmd":"` + strings.Repeat("b", 5000) + `"}}`
	u := Build(Context{Task: "t", Tail: []TailEntry{{Step: 1, Action: act, Observation: obs}}}, Options{})[1].Content
	if !strings.Contains(u, strings.Repeat("a", DefaultObservationCap/2)+"\n[... 3952 bytes omitted ...]\n"+strings.Repeat("z", DefaultObservationCap/2)) {
		t.Error("observation not capped to head+tail of 2 KiB")
	}
	if strings.Count(u, "b") > DefaultActionCap {
		t.Error("action not capped")
	}
	u = Build(Context{Task: "t", Tail: []TailEntry{{Step: 1, Action: act, Observation: obs}}}, Options{ObservationCap: 10000, ActionCap: 10000})[1].Content
	if !strings.Contains(u, obs) || !strings.Contains(u, act) {
		t.Error("caps above the size must keep everything")
	}
}

func TestCapText(t *testing.T) {
	if CapText("hello", 5) != "hello" || CapText("hello", 0) != "hello" || CapText("hello", -1) != "hello" {
		t.Error("no cap expected")
	}
	if got := CapText("abcdefghij", 4); got != "ab\n[... 6 bytes omitted ...]\nij" {
		t.Errorf("got %q", got)
	}
	s := strings.Repeat("日本語", 100)
	for n := 1; n < 40; n++ {
		got := CapText(s, n)
		if !utf8.ValidString(got) {
			t.Fatalf("n=%d: invalid UTF-8 %q", n, got)
		}
		head, _, _ := strings.Cut(got, "\n[...")
		_, tail, _ := strings.Cut(got, "omitted ...]\n")
		if len(head)+len(tail) > n {
			t.Errorf("n=%d: kept %d bytes", n, len(head)+len(tail))
		}
	}
}

func TestRenderObservation(t *testing.T) {
	got := RenderObservation("ev_0009", catalog.ToolFinished{
		ExitCode: -1, TimedOut: true, DurationMS: 900000,
		Stdout: catalog.Output{Head: "first\n", Tail: "last\n", Bytes: 20000, Truncated: true},
		Stderr: catalog.Output{Head: "AAEC", Bytes: 3, Encoding: "base64"},
	})
	want := "evidence: ev_0009\nexit_code: -1 (timed out after 900s; output so far below)\nstdout:\nfirst\n[... 19989 bytes omitted ...]\nlast\nstderr: (3 bytes of binary output, not shown)"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	got = RenderObservation("", catalog.ToolFinished{ExitCode: -1, Denied: true, DenyRule: "notes_md", Error: ""})
	if got != "exit_code: -1 (refused by the sandbox, rule notes_md; nothing ran)\nstdout: (empty)\nstderr: (empty)" {
		t.Errorf("denied: %q", got)
	}
}

// TestTailPages: the tail's window moves by pages, so that for TailPage
// steps in a row each prompt begins with the whole previous one but its
// last sections.
func TestTailPages(t *testing.T) {
	for _, tc := range []struct{ n, k, page, start int }{
		{0, 6, 0, 0}, {6, 6, 0, 0}, {7, 6, 0, 3}, {9, 6, 0, 3}, {10, 6, 0, 6}, {12, 6, 0, 6}, {13, 6, 0, 9},
		{7, 6, 1, 1}, {8, 6, 1, 2}, // page 1: the sliding window
		{7, 6, 6, 6}, {12, 6, 6, 6}, {13, 6, 6, 12},
		{3, 1, 0, 2},
	} {
		got := TailStart(tc.n, Options{TailK: tc.k, TailPage: tc.page})
		if got != tc.start {
			t.Errorf("TailStart(%d, K=%d, page=%d) = %d, want %d", tc.n, tc.k, tc.page, got, tc.start)
		}
		if shown := tc.n - got; tc.n > 0 && (shown < 1 || shown > tc.k) {
			t.Errorf("n=%d K=%d page=%d shows %d entries", tc.n, tc.k, tc.page, shown)
		}
	}
	var tail []TailEntry
	prev := ""
	for n := 1; n <= 20; n++ {
		tail = append(tail, TailEntry{Step: n, Action: fmt.Sprintf("act %d", n), Observation: fmt.Sprintf("obs %d", n)})
		u := Build(Context{Task: "t", Notes: "pinned", NewNotes: fmt.Sprintf("new at %d", n), NewNotesSince: n, Feedback: "fb"}, Options{})[1].Content
		tailEnd := strings.Index(u, "\n\n"+fmt.Sprintf(HeaderNewNotes, n))
		pageTurn := TailStart(n, Options{}) != TailStart(n-1, Options{})
		if prevEnd := strings.Index(prev, "\n\nNOTES ADDED"); prev != "" && !pageTurn && !strings.HasPrefix(u[:tailEnd], prev[:prevEnd]) {
			t.Fatalf("step %d: the prompt does not extend the previous one within a page:\n%s\n---\n%s", n, prev, u)
		}
		prev = u
	}
}
