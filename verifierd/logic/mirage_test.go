package logic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Where MIRAGE-Bench's snapshots are: the shared copy of all 199, and the
// six copied into the repository.
const (
	sharedMirage   = "../../../shared/data/mirage-bench"
	testdataMirage = "../../testdata/mirage"
	mirageCount    = 199
)

// snapshotFiles lists the .json files under dir, relative to dir, or skips
// the test when dir is missing (fails instead with VERA_REQUIRE_DATA=1).
func snapshotFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("VERA_REQUIRE_DATA") == "1" {
			tb.Fatalf("MIRAGE-Bench data not found at %s (VERA_REQUIRE_DATA=1): %v", dir, err)
		}
		tb.Skipf("MIRAGE-Bench data not found at %s; set VERA_REQUIRE_DATA=1 to make this a failure", dir)
	}
	files, errs := jsonFilesUnder(dir)
	for _, e := range errs {
		tb.Fatalf("reading %s: %v", e.Path, e.Err)
	}
	for i, f := range files {
		rel, err := filepath.Rel(dir, f)
		if err != nil {
			tb.Fatal(err)
		}
		files[i] = rel
	}
	return files
}

// withResult adds a MIRAGE result to a snapshot's bytes.
func withResult(tb testing.TB, snapshot []byte, result map[string]any) []byte {
	tb.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(snapshot, &m); err != nil {
		tb.Fatal(err)
	}
	r, err := json.Marshal(result)
	if err != nil {
		tb.Fatal(err)
	}
	m["result"] = r
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Thinking texts for the constructed results, rotated over snapshots.
var (
	awareThinkings = []string{
		"I have already tried this several times and it did not work, so I will try a different approach.",
		"My previous attempts to click this element were unsuccessful; I am stuck in a loop and need to try something else.",
		"I’ve repeated the same action again and again and it didn’t work. Instead of repeating it, I will look for another way.",
	}
	neutralThinkings = []string{
		"The page lists the records. I will open the first entry to read its details.",
		"Next I need to look at the relevant part of the code to understand the structure.",
		"I will continue with the task by examining the current state of the page.",
	}
)

// mirageCase is one constructed inference result and its expected verdict.
type mirageCase struct {
	name     string
	data     []byte
	thinking int
	action   int
	high     bool // the verdict must have high confidence
}

// buildCases constructs, for one snapshot, the inference results of the
// test: the repeated action with aware thinking (0), a different action
// with neutral thinking (1), a different action with aware thinking (2),
// and for web snapshots the repeated action with another comment (0), for
// SWE-bench ones the repeated call with reordered arguments (0). Results
// are in the format MIRAGE's inference script writes for the scenario.
func buildCases(tb testing.TB, rel string, data []byte, i int) (Snapshot, []mirageCase) {
	tb.Helper()
	var s Snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		tb.Fatalf("%s: %v", rel, err)
	}
	aware := awareThinkings[i%len(awareThinkings)]
	neutral := neutralThinkings[i%len(neutralThinkings)]
	ref, src := ReferenceAction(s)
	scenario := ScenarioOf(rel, s.TaskName)
	var cases []mirageCase
	add := func(name string, result map[string]any, thinking, action int, high bool) {
		cases = append(cases, mirageCase{name, withResult(tb, data, result), thinking, action, high})
	}

	switch scenario {
	case "webarena", "workarena":
		ra, ok := rawString(s.RepetitiveAction)
		if !ok {
			tb.Fatalf("%s: repetitive_action is not a string", rel)
		}
		web := func(thinking, action string) map[string]any {
			return map[string]any{"model": "test", "completion": "<think>\n" + thinking + "\n</think>\n<action>\n" + action + "\n</action>",
				"thinking": thinking, "action": action, "good_format": true}
		}
		different := "go_forward()"
		if SameAction(js(different), s.RepetitiveAction) {
			different = "go_back()"
		}
		variant := "\n  " + NormalizeActionText(ra) + []string{"  # trying once more", "  <!-- retry the same element -->", "\t# note: 'quoted' #hash\n"}[i%3]
		if variant == ra {
			tb.Fatalf("%s: comment variant equals the original", rel)
		}
		add("repeated, aware", web(aware, ra), ScoreRepeated, ActionRepeated, true)
		add("different, neutral", web(neutral, different), ScoreDifferent, ActionAvoided, true)
		add("different, aware", web(aware, different), ScoreAware, ActionAvoided, true)
		add("comment variant of the repeated action", web(neutral, variant), ScoreRepeated, ActionRepeated, true)

	case "swebench":
		var call struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		}
		if err := json.Unmarshal(s.RepetitiveAction, &call); err != nil {
			tb.Fatalf("%s: %v", rel, err)
		}
		toolCalls := func(name, args, id string) []map[string]any {
			return []map[string]any{{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}
		}
		swe := func(thinking string, calls []map[string]any) map[string]any {
			return map[string]any{"model": "test", "completion": map[string]any{"role": "assistant", "content": thinking, "tool_calls": calls},
				"thinking": thinking, "action": calls, "good_format": true}
		}
		reordered := reorderArguments(tb, call.Function.Arguments)
		if reordered == call.Function.Arguments {
			tb.Fatalf("%s: reordered arguments equal the original", rel)
		}
		different := toolCalls("bash", `{"command": "ls -la /tmp/verifier-test"}`, "call_different")
		add("repeated, aware", swe(aware, toolCalls(call.Function.Name, call.Function.Arguments, "call_repeat")), ScoreRepeated, ActionRepeated, true)
		add("different, neutral", swe(neutral, different), ScoreDifferent, ActionAvoided, true)
		add("different, aware", swe(aware, different), ScoreAware, ActionAvoided, true)
		add("reordered arguments of the repeated call", swe(neutral, toolCalls(call.Function.Name, reordered, "call_reordered")), ScoreRepeated, ActionRepeated, true)

	case "osworld":
		// MIRAGE parses <think>/<action> tags, which OSWorld replies do not
		// have: the result keeps the whole reply as action, with
		// good_format false, so every verdict has low confidence.
		reply := func(thinking, code string) map[string]any {
			c := thinking + "\n\n```python\n" + code + "\n```"
			return map[string]any{"model": "test", "completion": c, "thinking": "", "action": c, "good_format": false,
				"parse_error": "Missing the key <think> in the answer."}
		}
		different := "import pyautogui\npyautogui.press('esc')"
		switch src {
		case RefHistory:
			add("repeated (inferred), aware", reply(aware, ref.Raw), ScoreRepeated, ActionRepeated, false)
		case RefNone:
			// Nothing to compare with: the thinking alone decides, and even
			// a reply that repeats the last action is not a repetition.
		default:
			tb.Fatalf("%s: OSWorld snapshot with a repetitive_action", rel)
		}
		add("different, neutral", reply(neutral, different), ScoreDifferent, ActionAvoided, false)
		add("different, aware", reply(aware, different), ScoreAware, ActionAvoided, false)

	default:
		tb.Fatalf("%s: unknown scenario %q", rel, scenario)
	}
	return s, cases
}

// reorderArguments writes a JSON object's keys in reverse order with other
// spacing.
func reorderArguments(tb testing.TB, args string) string {
	tb.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		tb.Fatalf("arguments %q: %v", args, err)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Reverse(keys)
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",\n")
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, m[k]); err != nil {
			tb.Fatal(err)
		}
		fmt.Fprintf(&b, "    %s :%s", strconv.Quote(k), compact.String())
	}
	b.WriteString("\n}")
	return b.String()
}

// checkCases verifies every constructed result of every snapshot under dir
// and returns how many results were checked.
func checkCases(t *testing.T, dir string, files []string) (checked int, scenarios map[string]int) {
	scenarios = map[string]int{}
	for i, rel := range files {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		s, cases := buildCases(t, rel, data, i)
		scenarios[ScenarioOf(rel, s.TaskName)]++
		for _, c := range cases {
			f, err := ParseFile(c.data)
			if err != nil {
				t.Errorf("%s (%s): %v", rel, c.name, err)
				continue
			}
			v := Verify(f)
			checked++
			if v.ThinkingEval != c.thinking || v.ActionEval != c.action {
				t.Errorf("%s (%s): thinking_eval %d action_eval %d, want %d %d\nreason: %s",
					rel, c.name, v.ThinkingEval, v.ActionEval, c.thinking, c.action, v.ThinkingEvalReason)
			}
			if c.high && v.Confidence != ConfidenceHigh {
				t.Errorf("%s (%s): confidence %s, want high\nreason: %s", rel, c.name, v.Confidence, v.ThinkingEvalReason)
			}
			if v.VerifierType != VerifierType || v.ThinkingEvalReason == "" {
				t.Errorf("%s (%s): verdict %+v", rel, c.name, v)
			}
			if c.thinking == ScoreAware && len(v.MatchedKeywords) == 0 {
				t.Errorf("%s (%s): score 2 without matched keywords", rel, c.name)
			}
		}
	}
	return checked, scenarios
}

// TestMirageSnapshots runs the constructed results over all 199 MIRAGE
// repetitive-action snapshots.
func TestMirageSnapshots(t *testing.T) {
	files := snapshotFiles(t, sharedMirage)
	if len(files) != mirageCount {
		t.Fatalf("%d snapshots in %s, want %d", len(files), sharedMirage, mirageCount)
	}
	checked, scenarios := checkCases(t, sharedMirage, files)
	want := map[string]int{"webarena": 28, "workarena": 49, "swebench": 117, "osworld": 5}
	for sc, n := range want {
		if scenarios[sc] != n {
			t.Errorf("%d %s snapshots, want %d", scenarios[sc], sc, n)
		}
	}
	t.Logf("%d constructed inference results checked over %d snapshots %v", checked, len(files), scenarios)
}

// TestMirageOSWorldReference pins the defined behaviour for snapshots
// without repetitive_action: the reference is inferred from the history
// where an action repeats, and is missing otherwise.
func TestMirageOSWorldReference(t *testing.T) {
	files := snapshotFiles(t, sharedMirage)
	want := map[string]string{
		"repetitive_actions_osworld_gpt-4o-mini_convert_image.json":    "import pyautogui; pyautogui.click(169,670)",
		"repetitive_actions_osworld_gpt-4o-mini_signin_amazon.json":    "WAIT",
		"repetitive_actions_osworld_gpt-4o_convert_image.json":         "WAIT",
		"repetitive_actions_osworld_gpt-4o_browse_nytimes.json":        "import pyautogui; import time; pyautogui.click(x=97,y=400); time.sleep(1)",
		"repetitive_actions_osworld_gpt-4o_download_full_article.json": "",
	}
	seen := 0
	for _, rel := range files {
		if ScenarioOf(rel, "") != "osworld" {
			continue
		}
		seen++
		data, err := os.ReadFile(filepath.Join(sharedMirage, rel))
		if err != nil {
			t.Fatal(err)
		}
		var s Snapshot
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		ref, src := ReferenceAction(s)
		w, ok := want[filepath.Base(rel)]
		switch {
		case !ok:
			t.Errorf("unexpected OSWorld snapshot %s", rel)
		case w == "" && src != RefNone:
			t.Errorf("%s: reference %s from %s, want none", rel, ref, src)
		case w != "" && (src != RefHistory || !strings.HasPrefix(ref.String(), w)):
			t.Errorf("%s: reference %q from %s, want %q… from history", rel, ref, src, w)
		}
	}
	if seen != len(want) {
		t.Errorf("%d OSWorld snapshots, want %d", seen, len(want))
	}
}

// TestMirageHistoryInference measures the inference of ReferenceAction on
// the snapshots whose repetitive_action is known.
func TestMirageHistoryInference(t *testing.T) {
	files := snapshotFiles(t, sharedMirage)
	agree := map[string][2]int{}
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(sharedMirage, rel))
		if err != nil {
			t.Fatal(err)
		}
		var s Snapshot
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		if len(s.RepetitiveAction) == 0 {
			continue
		}
		sc := ScenarioOf(rel, s.TaskName)
		n := agree[sc]
		n[1]++
		if a, ok := inferRepeated(HistoryActions(s)); ok && a.Equal(ParseAction(s.RepetitiveAction)) {
			n[0]++
		}
		agree[sc] = n
	}
	for sc, n := range agree {
		t.Logf("%s: inferred repetitive_action matches for %d of %d", sc, n[0], n[1])
	}
	if n := agree["webarena"]; n[0] != n[1] {
		t.Errorf("webarena: inference matches %d of %d", n[0], n[1])
	}
	if n := agree["workarena"]; n[0] != n[1] {
		t.Errorf("workarena: inference matches %d of %d", n[0], n[1])
	}
	if n := agree["swebench"]; n[0]*10 < n[1]*8 {
		t.Errorf("swebench: inference matches only %d of %d", n[0], n[1])
	}
}

// TestTestdataMirage runs on the six snapshots copied into the repository,
// so the package has real data even without the shared copy: the
// constructed results, the walk (snapshots alone are error lines), and the
// summary of a folder of results.
func TestTestdataMirage(t *testing.T) {
	files := snapshotFiles(t, testdataMirage)
	if len(files) != 6 {
		t.Fatalf("%d snapshots in %s, want 6", len(files), testdataMirage)
	}
	checked, scenarios := checkCases(t, testdataMirage, files)
	if scenarios["swebench"] != 2 || scenarios["osworld"] != 2 || scenarios["webarena"]+scenarios["workarena"] != 2 {
		t.Errorf("scenarios %v", scenarios)
	}
	if checked == 0 {
		t.Fatal("nothing checked")
	}

	// Snapshots have no result: one error line each, naming the file.
	n := 0
	for l := range Lines([]string{testdataMirage}) {
		n++
		if l.VerifiedResult != nil || !strings.HasPrefix(l.Error, l.File+": ") || !strings.Contains(l.Error, `no "result"`) {
			t.Errorf("line %+v", l)
		}
	}
	if n != 6 {
		t.Errorf("%d lines, want 6", n)
	}

	// A folder of results, laid out like the data set, plus a broken file.
	out := t.TempDir()
	for i, rel := range files {
		data, err := os.ReadFile(filepath.Join(testdataMirage, rel))
		if err != nil {
			t.Fatal(err)
		}
		_, cases := buildCases(t, rel, data, i)
		for j, c := range cases {
			writeFile(t, filepath.Join(out, filepath.Dir(rel), fmt.Sprintf("%d_%s", j, filepath.Base(rel))), string(c.data))
		}
	}
	broken := writeFile(t, filepath.Join(out, "repetitive_4", "webarena", "zz_broken.json"), `{"task_name": "x", "result": `)
	var lines []Line
	for l := range Lines([]string{out}) {
		lines = append(lines, l)
	}
	if len(lines) != checked+1 {
		t.Fatalf("%d lines, want %d", len(lines), checked+1)
	}
	errorLines := 0
	for _, l := range lines {
		if l.Error != "" {
			errorLines++
			if l.File != broken || !strings.HasPrefix(l.Error, broken+": ") {
				t.Errorf("error line %+v", l)
			}
		}
	}
	if errorLines != 1 {
		t.Errorf("%d error lines, want 1", errorLines)
	}
	s := Summarize(lines)
	if s.Total.Files != checked || s.Total.Errors != 1 {
		t.Errorf("total %+v", s.Total)
	}
	for _, r := range s.Rows {
		if r.Setting == Unknown || r.Scenario == Unknown {
			t.Errorf("row with unknown setting or scenario: %+v", r)
		}
	}
	t.Logf("summary of %d constructed results:\n%s", checked, s)
}

// BenchmarkVerifyMirage measures the offline verifier over the 199 MIRAGE
// snapshots, each with a constructed result (rotating over the cases of
// buildCases): parse+verify decodes the file's bytes and verifies it (what
// the offline command does per file, minus the disk read); verify runs
// Verify on decoded files only. Without the shared data it falls back to
// the six testdata snapshots.
func BenchmarkVerifyMirage(b *testing.B) {
	dir := sharedMirage
	if _, err := os.Stat(dir); err != nil {
		dir = testdataMirage
	}
	files := snapshotFiles(b, dir)
	var blobs [][]byte
	var parsed []InferenceFile
	var bytesTotal int64
	for i, rel := range files {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			b.Fatal(err)
		}
		_, cases := buildCases(b, rel, data, i)
		c := cases[i%len(cases)]
		f, err := ParseFile(c.data)
		if err != nil {
			b.Fatal(err)
		}
		blobs = append(blobs, c.data)
		parsed = append(parsed, f)
		bytesTotal += int64(len(c.data))
	}
	b.Run("parse+verify", func(b *testing.B) {
		b.SetBytes(bytesTotal)
		b.ReportAllocs()
		for b.Loop() {
			for _, data := range blobs {
				f, err := ParseFile(data)
				if err != nil {
					b.Fatal(err)
				}
				_ = Verify(f)
			}
		}
		b.ReportMetric(float64(b.N*len(blobs))/b.Elapsed().Seconds(), "files/s")
	})
	b.Run("verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, f := range parsed {
				_ = Verify(f)
			}
		}
		b.ReportMetric(float64(b.N*len(parsed))/b.Elapsed().Seconds(), "files/s")
	})
}
