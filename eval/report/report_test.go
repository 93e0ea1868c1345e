package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/vera-run/vera/eval"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (go test -update writes it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it)\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// section returns the rows of the text table under title, each split into
// its cells (tabwriter pads cells with at least two spaces, and no cell
// of the fixture holds two spaces in a row).
func section(t *testing.T, text, title string) [][]string {
	t.Helper()
	_, rest, ok := strings.Cut(text, "\n"+title+"\n")
	if !ok {
		t.Fatalf("no section %q in:\n%s", title, text)
	}
	var rows [][]string
	for _, line := range strings.Split(rest, "\n") {
		if !strings.HasPrefix(line, "  ") {
			break
		}
		rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
	}
	return rows
}

func wantRows(t *testing.T, what string, got [][]string, want ...[]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d: %q", what, len(got), len(want), got)
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("%s row %d:\n got %q\nwant %q", what, i, got[i], want[i])
		}
	}
}

func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, fixtureReport()); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	golden(t, "report.txt", b.Bytes())

	for _, line := range []string{
		"eval      01JEVALFIXTURE0000000000AA\n",
		"name      smoke\n",
		"task set  testdata/tasks.jsonl\n",
		"started   2026-11-25T20:00:00Z\n",
		"tasks     5\n",
		"scored    10/10 (1 infra)\n",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("header line %q missing", line)
		}
	}
	wantRows(t, "rounds", section(t, text, "Accuracy by verification round"),
		[]string{"profile", "first", "r1", "r2", "r3", "final"},
		[]string{"no-audit", "40.0% (2/5)", "-", "-", "-", "40.0% (2/5)"},
		[]string{"audit3", "40.0% (2/5)", "40.0% (2/5)", "60.0% (3/5)", "80.0% (4/5)", "80.0% (4/5)"},
	)
	wantRows(t, "auditor", section(t, text, "Auditor against the references"),
		[]string{"profile", "judged", "accepted right", "accepted wrong", "rejected right", "rejected wrong", "precision", "recall"},
		[]string{"audit3", "11", "3", "1", "2", "5", "75.0%", "60.0%"},
	)
	wantRows(t, "cost", section(t, text, "Cost per task (means)"),
		[]string{"profile", "steps", "tool calls", "tokens", "total tokens", "wall time"},
		[]string{"no-audit", "4.4", "3.6", "1100", "5500", "23.4s"},
		[]string{"audit3", "10.6", "8.4", "5300", "26500", "30.4s"},
	)
	wantRows(t, "tags", section(t, text, "By tag"),
		[]string{"tag", "profile", "scored", "first", "final"},
		[]string{"code", "no-audit", "2", "0.0% (0/2)", "0.0% (0/2)"},
		[]string{"code", "audit3", "2", "0.0% (0/2)", "50.0% (1/2)"},
		[]string{"math", "no-audit", "3", "33.3% (1/3)", "33.3% (1/3)"},
		[]string{"math", "audit3", "3", "33.3% (1/3)", "100.0% (3/3)"},
		[]string{"web", "no-audit", "2", "50.0% (1/2)", "50.0% (1/2)"},
		[]string{"web", "audit3", "2", "50.0% (1/2)", "100.0% (2/2)"},
	)
	wantRows(t, "infra", section(t, text, "Failed for infrastructure reasons (1)"),
		[]string{"task", "profile", "attempt", "run", "reason"},
		[]string{"t5", "no-audit", "2", "run-t5-na", "model unreachable: connection refused"},
	)

	// Deterministic: a second rendering is the same bytes.
	var again bytes.Buffer
	if err := Text(&again, fixtureReport()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again.Bytes(), b.Bytes()) {
		t.Error("two renderings of the same report differ")
	}
}

// TestTextColumnsAligned: every row of a table starts its cells at the
// same columns as the table's head.
func TestTextColumnsAligned(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, fixtureReport()); err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(b.String(), "\nAccuracy by verification round\n")
	lines := strings.SplitN(rest, "\n", 4)[:3]
	starts := func(line string) []int {
		var s []int
		for _, m := range regexp.MustCompile(`(^  |\s{2,})\S`).FindAllStringIndex(line, -1) {
			s = append(s, m[1]-1)
		}
		return s
	}
	head := starts(lines[0])
	for _, l := range lines[1:] {
		if got := starts(l); !slices.Equal(got, head) {
			t.Errorf("row %q starts cells at %v, head at %v", l, got, head)
		}
	}
}

// TestTextNoAuditorNoInfra: a report without auditor or failures says so
// instead of printing empty tables, and has no round columns.
func TestTextNoAuditorNoInfra(t *testing.T) {
	r := fixtureReport()
	r.Profiles = r.Profiles[:1]
	r.Profiles[0].Infra = 0
	var kept []int
	for i, res := range r.Results {
		if res.Profile == "no-audit" && !res.Infra {
			kept = append(kept, i)
		}
	}
	results := r.Results
	r.Results = nil
	for _, i := range kept {
		r.Results = append(r.Results, results[i])
	}
	var b bytes.Buffer
	if err := Text(&b, r); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	wantRows(t, "rounds", section(t, text, "Accuracy by verification round"),
		[]string{"profile", "first", "final"},
		[]string{"no-audit", "40.0% (2/5)", "40.0% (2/5)"},
	)
	for _, want := range []string{"Auditor against the references\n  no profile ran the auditor\n", "Failed for infrastructure reasons (0)\n  none\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q in:\n%s", want, text)
		}
	}
}

func TestJSON(t *testing.T) {
	r := fixtureReport()
	r.DashboardURL = "http://127.0.0.1:8080/"
	var b bytes.Buffer
	if err := JSON(&b, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.json", b.Bytes())

	var back eval.Report
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, r) {
		t.Errorf("the JSON does not read back as the report:\n got %+v\nwant %+v", back, r)
	}
	text := b.String()
	for _, want := range []string{
		"{\n  \"eval_id\": \"01JEVALFIXTURE0000000000AA\",\n",
		"\"by_round\": [\n        0.4,\n        0.6,\n        0.8\n      ],",
		"\"precision\": 0.75,",
		"\"recall\": 0.6",
		"\"dashboard_url\": \"http://127.0.0.1:8080/\"",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("JSON lacks %q", want)
		}
	}
	if !strings.HasSuffix(text, "}\n") {
		t.Error("JSON does not end with a newline")
	}
}
