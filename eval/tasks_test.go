package eval

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseTasksGood(t *testing.T) {
	in := `# a task set
{"id": "t1", "task": "What is 2+2?", "answer": "4"}

   # indented comment
{"id": "t.2_b-c", "task": "Population?", "answer": "1,234.5", "scorer": {"type": "numeric", "tolerance": 0.5, "rel_tolerance": 0.01}, "tags": ["num", "geo"]}
{"id": "t3", "task": "Name it", "answer": "^foo\\d+$", "scorer": "regex", "input_dir": "data/t3"}
{"id": "t4", "task": "Explain", "answer": "Paris", "scorer": {"type": "judge", "rubric": "names the capital"}}
{"id": "t5", "task": "Case", "answer": "ABC", "scorer": {"type": "contains", "case_sensitive": true}}` // no final newline
	got, err := ParseTasks(strings.NewReader(in), "set.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := []Task{
		{Line: 2, ID: "t1", Task: "What is 2+2?", Answer: "4", Scorer: ScorerSpec{Type: ScorerExact}},
		{Line: 5, ID: "t.2_b-c", Task: "Population?", Answer: "1,234.5", Scorer: ScorerSpec{Type: ScorerNumeric, Tolerance: 0.5, RelTolerance: 0.01}, Tags: []string{"num", "geo"}},
		{Line: 6, ID: "t3", Task: "Name it", Answer: `^foo\d+$`, Scorer: ScorerSpec{Type: ScorerRegex}, InputDir: "data/t3"},
		{Line: 7, ID: "t4", Task: "Explain", Answer: "Paris", Scorer: ScorerSpec{Type: ScorerJudge, Rubric: "names the capital"}},
		{Line: 8, ID: "t5", Task: "Case", Answer: "ABC", Scorer: ScorerSpec{Type: ScorerContains, CaseSensitive: true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}

// Every bad line is reported, each with its line number, in one error.
func TestParseTasksReportsEveryBadLine(t *testing.T) {
	lines := []string{
		`{"id": "ok1", "task": "x", "answer": "y"}`,                             // 1
		`{"id": "b2", "task": "x", "answer": "y", "scorer": "exactt"}`,          // 2
		`{"id": "b3", "task": "x", "answer": "y", "anwser": "z"}`,               // 3
		`{"task": "x", "answer": "y"}`,                                          // 4
		`{"id": "bad id!", "task": "x", "answer": "y"}`,                         // 5
		`{"id": "b6", "task": "x", "answer": "(unclosed", "scorer": "regex"}`,   // 6
		`{"id": "b7", "task": "x", "answer": "about ten", "scorer": "numeric"}`, // 7
		`{"id": "ok1", "task": "x", "answer": "y"}`,                             // 8
		`not json`, // 9
		`{"id": "b10", "task": "", "answer": ""}`,                                                   // 10
		`{"id": "b11", "task": "x", "answer": "1", "scorer": {"type": "exact", "tolerance": 1}}`,    // 11
		`{"id": "b12", "task": "x", "answer": "1", "scorer": {"type": "numeric", "tolerance": -1}}`, // 12
		`{"id": "b13", "task": "x", "answer": "1", "scorer": {"tipe": "numeric"}}`,                  // 13
		`{"id": "b14", "task": "x", "answer": "1", "tags": ["a", ""]}`,                              // 14
		`{"id": "b15", "task": "x", "answer": "1", "tags": "a"}`,                                    // 15
		`{"id": "b16", "task": "x", "answer": "1"} {"id": "b17"}`,                                   // 16
		`{"id": "b17", "task": "x", "answer": "1", "scorer": 3}`,                                    // 17
		`{"id": "b18", "task": "x", "answer": "1", "scorer": {"type": "judge", "rubric": " "}}`,     // 18
		`{"id": "b19", "task": "x", "answer": "1", "input_dir": ""}`,                                // 19
	}
	_, err := ParseTasks(strings.NewReader(strings.Join(lines, "\n")+"\n"), "tasks.jsonl")
	if err == nil {
		t.Fatal("no error")
	}
	var le LineErrors
	if !errors.As(err, &le) {
		t.Fatalf("error %T, want LineErrors", err)
	}
	want := []string{
		`tasks.jsonl:2: scorer "exactt": want exact, contains, regex, numeric or judge`,
		`tasks.jsonl:3: unknown member "anwser"`,
		`tasks.jsonl:4: id missing`,
		`tasks.jsonl:5: id "bad id!": want 1-64 letters, digits, '.', '_' or '-'`,
		`tasks.jsonl:6: answer: not a valid regular expression (RE2) for the regex scorer: error parsing regexp: missing closing ): ` + "`(unclosed`",
		`tasks.jsonl:7: answer "about ten": the numeric scorer needs a number: not a number`,
		`tasks.jsonl:8: id "ok1" is already used on line 1`,
		`tasks.jsonl:9: not a JSON object: invalid character 'o' in literal null (expecting 'u') (at byte 2)`,
		`tasks.jsonl:10: task missing or empty`,
		`tasks.jsonl:10: answer is empty`,
		`tasks.jsonl:11: scorer: tolerance applies to numeric, not exact`,
		`tasks.jsonl:12: scorer: tolerance -1: want 0 or more`,
		`tasks.jsonl:13: scorer: unknown member "tipe"`,
		`tasks.jsonl:14: tags[1] is empty`,
		`tasks.jsonl:15: tags: want []string, got a JSON string`,
		`tasks.jsonl:16: more after the JSON object (one task per line)`,
		`tasks.jsonl:17: scorer: want a kind (exact, contains, regex, numeric or judge) or an object {"type": …}`,
		`tasks.jsonl:18: scorer: rubric is empty (leave it out for the default)`,
		`tasks.jsonl:19: input_dir is empty (leave it out for no input)`,
	}
	got := strings.Split(err.Error(), "\n")
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(le) != len(want) || le[0].Line != 2 || le[len(le)-1].Line != 19 {
		t.Errorf("LineErrors %d, lines %d..%d", len(le), le[0].Line, le[len(le)-1].Line)
	}
}

func TestParseTasksEmpty(t *testing.T) {
	for _, in := range []string{"", "\n\n", "# only a comment\n  \n"} {
		_, err := ParseTasks(strings.NewReader(in), "e.jsonl")
		if err == nil || !strings.Contains(err.Error(), "no tasks") || !strings.HasPrefix(err.Error(), "e.jsonl: ") {
			t.Errorf("%q: error %v, want e.jsonl: no tasks", in, err)
		}
	}
}

func TestParseTasksLongLine(t *testing.T) {
	long := `{"id": "big", "task": "x", "answer": "` + strings.Repeat("a", 200<<10) + `"}` + "\r\n"
	got, err := ParseTasks(strings.NewReader(long+`{"id": "t2", "task": "x", "answer": "y"}`), "l.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(got[0].Answer) != 200<<10 || got[1].Line != 2 {
		t.Fatalf("got %d tasks, answer %d bytes, line %d", len(got), len(got[0].Answer), got[1].Line)
	}
}

func TestParseNumber(t *testing.T) {
	good := map[string]float64{
		"1,234.5": 1234.5, "12%": 12, "-3e2": -300, "$40": 40, "-$1,000": -1000, " 7 ": 7,
		"0.5": 0.5, ".5": 0.5, "+2": 2, "1,000,000": 1e6, "12 %": 12, "\u22124": -4,
	}
	for in, want := range good {
		got, err := ParseNumber(in)
		if err != nil || got != want {
			t.Errorf("ParseNumber(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "1,23", "12,34.5", "Inf", "NaN", "0x10", "1 000", "--1", "1e999", "5 kg"} {
		if v, err := ParseNumber(in); err == nil {
			t.Errorf("ParseNumber(%q) = %v, want an error", in, v)
		}
	}
}

func TestParseTaskFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "inputs", "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	content := `{"id": "rel", "task": "x", "answer": "y", "input_dir": "inputs/a"}
{"id": "abs", "task": "x", "answer": "y", "input_dir": "` + abs + `"}
{"id": "none", "task": "x", "answer": "y"}
`
	path := filepath.Join(dir, "set.jsonl")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	tasks, sum, err := ParseTaskFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte(content))
	if sum != hex.EncodeToString(h[:]) {
		t.Errorf("digest %s, want %x", sum, h)
	}
	if tasks[0].InputDir != filepath.Join(dir, "inputs", "a") || tasks[1].InputDir != abs || tasks[2].InputDir != "" {
		t.Errorf("input dirs %q %q %q", tasks[0].InputDir, tasks[1].InputDir, tasks[2].InputDir)
	}

	bad := `{"id": "gone", "task": "x", "answer": "y", "input_dir": "missing"}
{"id": "ok", "task": "x", "answer": "y", "input_dir": "inputs/a"}
{"id": "file", "task": "x", "answer": "y", "input_dir": "afile"}
`
	bpath := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bpath, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = ParseTaskFile(bpath)
	want := bpath + `:1: input_dir "missing": ` + filepath.Join(dir, "missing") + " does not exist\n" +
		bpath + `:3: input_dir "afile": ` + filepath.Join(dir, "afile") + " is not a directory"
	if err == nil || err.Error() != want {
		t.Fatalf("error\n%v\nwant\n%s", err, want)
	}
	if _, _, err := ParseTaskFile(filepath.Join(dir, "nope.jsonl")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
