package logic

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// sameRaw compares the fast path's sub-slices with encoding/json's
// copies, which keep the bytes as they are.
func sameRaw(a, b json.RawMessage) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

func sameFileJSON(tb testing.TB, a, b fileJSON) bool {
	tb.Helper()
	if a.TaskName != b.TaskName || a.Goal != b.Goal || a.InputStep != b.InputStep || len(a.Input) != len(b.Input) ||
		!sameRaw(a.RepetitiveAction, b.RepetitiveAction) || !sameRaw(a.Result, b.Result) {
		return false
	}
	for i := range a.Input {
		x, y := a.Input[i], b.Input[i]
		if x.Role != y.Role || x.ToolCallID != y.ToolCallID || x.Name != y.Name ||
			!sameRaw(x.Content, y.Content) || !sameRaw(x.ToolCalls, y.ToolCalls) {
			return false
		}
	}
	return true
}

// TestFastParseEqualsEncodingJSON: on every MIRAGE snapshot with a
// generated result, the fast path decodes what encoding/json decodes, and
// the verdicts are the same.
func TestFastParseEqualsEncodingJSON(t *testing.T) {
	files := snapshotFiles(t, sharedMirage)
	for i, rel := range files {
		data, err := os.ReadFile(filepath.Join(sharedMirage, rel))
		if err != nil {
			t.Fatal(err)
		}
		data = withResult(t, data, map[string]any{"model": "m", "thinking": "I am stuck.", "action": []any{i, "x"}, "good_format": true})
		fast, ok := fastParse(data)
		if !ok {
			t.Fatalf("%s: fast path refused a well-formed file", rel)
		}
		var slow fileJSON
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatal(err)
		}
		if !sameFileJSON(t, fast, slow) {
			t.Fatalf("%s: fast path and encoding/json disagree", rel)
		}
		if n := len(fast.Input); n == 0 || fast.Input[n-1].Text() != slow.Input[n-1].Text() {
			t.Fatalf("%s: texts of the last message differ", rel)
		}
	}
}

// TestFastParseShapes covers the JSON the fast path meets rarely: escapes,
// nesting, null, spacing, keys it must leave to encoding/json.
func TestFastParseShapes(t *testing.T) {
	for _, doc := range []string{
		`{"task_name":"t","result":{"action":"x"}}`,
		" {\n \"task_name\" : \"t\\\"q\\\\\" ,\t\"input\": [ {\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\\\\\"}]} , {\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": [1, {\\\"b\\\": \\\"]}\\\"}]}\"}}]} ],\n \"result\": {\"action\": [\"]\", \"}\"]} }\n",
		`{"task_name":"t","input":null,"repetitive_action":null,"input_step":3,"goal":"g\u00e9","result":{"thinking":"x","action":"y","good_format":false}}`,
		`{"task_n\u0061me":"t","result":{}}`,
		`{"extra":{"deep":[[[{"x":"}"}]]],"n":-1.5e3,"b":true},"task_name":"t","result":{}}`,
		`{"task_name":"t","input":[],"result":{}}`,
	} {
		fast, ok := fastParse([]byte(doc))
		var slow fileJSON
		if err := json.Unmarshal([]byte(doc), &slow); err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		if ok && !sameFileJSON(t, fast, slow) {
			t.Errorf("fast path differs from encoding/json on %s:\n%+v\n%+v", doc, fast, slow)
		}
		a, errA := ParseFile([]byte(doc))
		if errA != nil {
			t.Errorf("%s: %v", doc, errA)
			continue
		}
		if a.TaskName != slow.TaskName {
			t.Errorf("%s: task %q, want %q", doc, a.TaskName, slow.TaskName)
		}
	}
	// Keys encoding/json would match case-insensitively go to it.
	if _, ok := fastParse([]byte(`{"Task_Name":"t","result":{}}`)); ok {
		t.Error("fast path accepted a key spelt in upper case")
	}
	f, err := ParseFile([]byte(`{"Task_Name":"t","result":{}}`))
	if err != nil || f.TaskName != "t" {
		t.Errorf("upper-case key: %+v %v", f.Snapshot, err)
	}
}

// TestParseFileTruncated: every prefix of a real file is malformed (or
// refused as a snapshot without result), never a panic, never a verdict.
func TestParseFileTruncated(t *testing.T) {
	files := snapshotFiles(t, testdataMirage)
	data, err := os.ReadFile(filepath.Join(testdataMirage, files[0]))
	if err != nil {
		t.Fatal(err)
	}
	data = withResult(t, data, map[string]any{"model": "m", "thinking": "t", "action": "click('1')"})
	step := max(1, len(data)/2000)
	for n := 0; n < len(data)-1; n += step {
		if _, err := ParseFile(data[:n]); err == nil || !errors.Is(err, ErrMalformed) {
			t.Fatalf("prefix of %d bytes: err %v", n, err)
		}
	}
	if _, err := ParseFile(data); err != nil {
		t.Fatal(err)
	}
}

// TestLinesOrderAndEarlyStop: Lines yields in Walk's order whatever the
// number of workers, and stops cleanly when the consumer does.
func TestLinesOrderAndEarlyStop(t *testing.T) {
	dir := t.TempDir()
	cases := generateCases(t, testdataMirage, devPool, devSeed)
	writeCases(t, dir, cases)
	broken := writeFile(t, filepath.Join(dir, "repetitive_4", "webarena", "k0_broken.json"), `{"task_name": "x", "result": `)
	goroutines := runtime.NumGoroutine()
	var want []Line
	defer func(w int) { Workers = w }(Workers)
	Workers = 1
	// Checked keeps each file; Lines reuses read buffers: their lines
	// must agree (a line holding bytes of a reused buffer would not).
	for _, l := range Checked([]string{dir, filepath.Join(dir, "missing")}) {
		want = append(want, l)
	}
	if len(want) != len(cases)+2 || want[len(want)-1].Error == "" {
		t.Fatalf("%d lines, last %+v", len(want), want[len(want)-1])
	}
	for _, w := range []int{1, 2, 3, 8} {
		Workers = w
		var got []Line
		for l := range Lines([]string{dir, filepath.Join(dir, "missing")}) {
			got = append(got, l)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%d workers: lines differ from one worker's", w)
		}
		n := 0
		for range Lines([]string{dir}) {
			n++
			if n == 3 {
				break
			}
		}
	}
	found := false
	for _, l := range want {
		found = found || l.File == broken && l.Error != ""
	}
	if !found {
		t.Error("no error line for the broken file")
	}
	// The stopped iterations leave no goroutine behind.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("%d goroutines after the stopped walks, %d before", n, goroutines)
	}
}
