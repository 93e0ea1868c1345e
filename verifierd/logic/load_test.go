package logic

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const goodFile = `{
  "task_name": "repetitive_4_webarena.9_test",
  "goal": "find it",
  "input_step": 3,
  "input": [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": [{"type": "text", "text": "Go."}]}],
  "repetitive_action": "scroll(0, 200)",
  "result": {"model": "m", "completion": "<think>x</think><action>scroll(0, 200)</action>", "thinking": "x", "action": "scroll(0, 200)", "good_format": true}
}`

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	f, err := LoadFile(writeFile(t, filepath.Join(dir, "good.json"), goodFile))
	if err != nil {
		t.Fatal(err)
	}
	if f.TaskName != "repetitive_4_webarena.9_test" || f.InputStep != 3 || len(f.Input) != 2 || f.Input[1].Text() != "Go." ||
		f.Result.Thinking != "x" || !f.Result.WellFormatted() || f.Goal != "find it" {
		t.Errorf("unexpected file %+v", f)
	}

	tests := []struct {
		name    string
		content string
		is      error
		msg     string
	}{
		{"empty", "  \n", ErrMalformed, "empty"},
		{"syntax error", "{\n  \"task_name\": \"t\",\n  \"result\": {,}\n}", ErrMalformed, "line 3, column"},
		{"truncated", `{"task_name": "t", "result": {"action": "x"`, ErrMalformed, "invalid JSON"},
		{"array", `[1, 2]`, ErrMalformed, "top-level JSON value is array"},
		{"no task name", `{"result": {"action": "x"}}`, ErrMalformed, "no task_name"},
		{"task name not a string", `{"task_name": 3, "result": {}}`, ErrMalformed, `"task_name" is number, want string`},
		{"snapshot without result", `{"task_name": "t", "repetitive_action": "x"}`, ErrNoResult, "not an inference result"},
		{"null result", `{"task_name": "t", "result": null}`, ErrNoResult, "no \"result\""},
		{"result not an object", `{"task_name": "t", "result": "oops"}`, ErrMalformed, `"result" is a string`},
		{"thinking not a string", `{"task_name": "t", "result": {"thinking": ["a"]}}`, ErrMalformed, `"result.thinking" is array, want string`},
		{"input not a list", `{"task_name": "t", "input": "x", "result": {}}`, ErrMalformed, `"input" is string, want array`},
		{"failed model call", `{"task_name": "t", "result": {"model": "m", "status": "error", "error": "Max retries exceeded"}}`, ErrInferenceFailed, "Max retries exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".json"), tt.content)
			_, err := LoadFile(path)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if !strings.HasPrefix(err.Error(), path+": ") {
				t.Errorf("error does not name the file first: %v", err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q lacks %q", err, tt.msg)
			}
		})
	}

	missing := filepath.Join(dir, "missing.json")
	if _, err := LoadFile(missing); err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestWalk(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "b", "z.json"), goodFile)
	writeFile(t, filepath.Join(dir, "b", "a.json"), goodFile)
	writeFile(t, filepath.Join(dir, "a", "deep", "x.JSON"), goodFile)
	writeFile(t, filepath.Join(dir, "a", "broken.json"), `{"task_name": `)
	writeFile(t, filepath.Join(dir, "a", "notes.txt"), "not json")
	writeFile(t, filepath.Join(dir, "clear.py"), "print()")
	explicit := writeFile(t, filepath.Join(t.TempDir(), "result.data"), goodFile)
	missing := filepath.Join(dir, "nope")

	var paths []string
	var errs []string
	for e := range Walk([]string{dir, explicit, missing}) {
		paths = append(paths, e.Path)
		if e.Err != nil {
			errs = append(errs, e.Path)
		}
	}
	want := []string{
		filepath.Join(dir, "a", "broken.json"),
		filepath.Join(dir, "a", "deep", "x.JSON"),
		filepath.Join(dir, "b", "a.json"),
		filepath.Join(dir, "b", "z.json"),
		explicit,
		missing,
	}
	if !slices.Equal(paths, want) {
		t.Errorf("walk order\n got %q\nwant %q", paths, want)
	}
	if !slices.Equal(errs, []string{want[0], missing}) {
		t.Errorf("errors for %q", errs)
	}

	// Stopping early is honoured.
	n := 0
	for range Walk([]string{dir}) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("walk did not stop")
	}
}

func TestLines(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, filepath.Join(dir, "repetitive_4", "m", "good.json"), goodFile)
	bad := writeFile(t, filepath.Join(dir, "repetitive_4", "m", "snapshot.json"), `{"task_name": "t", "repetitive_action": "x"}`)
	var lines []Line
	for l := range Lines([]string{dir}) {
		lines = append(lines, l)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	if lines[0].File != good || lines[0].TaskName != "repetitive_4_webarena.9_test" || lines[0].VerifiedResult == nil || lines[0].Error != "" {
		t.Errorf("good line %+v", lines[0])
	}
	if lines[1].File != bad || lines[1].VerifiedResult != nil || !strings.Contains(lines[1].Error, bad) {
		t.Errorf("error line %+v", lines[1])
	}

	// The JSON shape the offline command writes.
	b, err := json.Marshal(lines[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m) != 3 || m["file"] == nil || m["task_name"] == nil || m["verified_result"] == nil {
		t.Errorf("line %s", b)
	}
	var vr map[string]any
	if err := json.Unmarshal(m["verified_result"], &vr); err != nil {
		t.Fatal(err)
	}
	if vr["thinking_eval"] != 0.0 || vr["action_eval"] != 0.0 || vr["verifier_type"] != "logic" {
		t.Errorf("verified_result %s", m["verified_result"])
	}
	b, _ = json.Marshal(lines[1])
	m = nil
	if err := json.Unmarshal(b, &m); err != nil || len(m) != 2 || m["error"] == nil {
		t.Errorf("error line %s", b)
	}
}
