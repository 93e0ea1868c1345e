package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/replay"
)

// TestReplayCLI replays an export file and the same run on its bus,
// re-verifies it, and checks the errors people meet.
func TestReplayCLI(t *testing.T) {
	ctx := context.Background()
	srv, b := bustest.New(t)
	dir := t.TempDir()
	const run = "cli-replay"
	cfg := catalog.RunConfig{Task: "What is the answer?", WorkDir: filepath.Join(dir, "work"), Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}}
	var prev bus.Event
	for _, p := range []bus.Payload{
		catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"},
		catalog.RunStarted{AgentID: "a", Config: cfg},
		catalog.AgentStep{Step: 1, Thought: "note it", Action: `{"tool":"notes_append","args":{"text":"- 42"}}`, ActionTool: "notes_append", NotesText: "- 42", ModelCallID: "agent-s0001"},
		catalog.NotesAppended{Step: 1, Author: "agent", Text: "- 42"},
		catalog.RunFinished{Outcome: "RESOLVED", Answer: "42", Steps: 1},
	} {
		ev, err := b.Events.New(run, p, bus.CausedBy(prev))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
		prev = ev
	}
	var exp bytes.Buffer
	if _, err := b.Export(ctx, &exp, bus.ExportOptions{RunID: run}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "run.jsonl")
	os.WriteFile(file, exp.Bytes(), 0o644)

	out := filepath.Join(dir, "out")
	stdout, stderr, code := runCLI(t, "replay", file, "--out", out)
	if code != 0 || !strings.Contains(stdout, "replayed run "+run+" (5 events)") {
		t.Fatalf("replay FILE: code %d\n%s\n%s", code, stdout, stderr)
	}
	notes, _ := os.ReadFile(filepath.Join(out, "notes.md"))
	if string(notes) != "- 42\n" {
		t.Errorf("notes.md = %q", notes)
	}
	if _, err := os.Stat(filepath.Join(out, replay.MetricsFile)); err != nil {
		t.Error(err)
	}
	if _, stderr, code := runCLI(t, "replay", file, "--out", out); code != exitUsage || !strings.Contains(stderr, "--force") {
		t.Errorf("non-empty --out: code %d, %s", code, stderr)
	}
	if _, _, code := runCLI(t, "replay", file, "--out", out, "--force"); code != 0 {
		t.Errorf("--force: code %d", code)
	}

	out2 := filepath.Join(dir, "out2")
	if _, stderr, code := runCLI(t, "replay", "--run", run, "--nats-url", srv.ClientURL(), "--out", out2); code != 0 {
		t.Fatalf("replay --run: code %d: %s", code, stderr)
	}
	for _, name := range replay.OutputFiles() {
		a, _ := os.ReadFile(filepath.Join(out, name))
		b2, _ := os.ReadFile(filepath.Join(out2, name))
		if !bytes.Equal(a, b2) {
			t.Errorf("%s differs between the file and the bus replay", name)
		}
	}

	// Re-verify on the bus: a new run, the original untouched.
	before, _ := b.ReadRun(ctx, run)
	stdout, stderr, code = runCLI(t, "replay", "--run", run, "--nats-url", srv.ClientURL(), "--reverify", "--no-audit", "--json")
	if code != 0 {
		t.Fatalf("--reverify: code %d: %s", code, stderr)
	}
	var res replay.ReverifyResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil || res.NewRun == "" || !res.Copied || len(res.Steps) != 1 {
		t.Fatalf("--reverify --json: %v\n%s", err, stdout)
	}
	after, _ := b.ReadRun(ctx, run)
	if len(after) != len(before) {
		t.Errorf("original run changed: %d events, was %d", len(after), len(before))
	}
	if evs, _ := b.ReadRun(ctx, res.NewRun); len(evs) != 5 {
		t.Errorf("new run holds %d events, want the 5 copied", len(evs))
	}

	// Re-execute needs a model call the recording has: it has one step.
	stdout, stderr, code = runCLI(t, "replay", file, "--reexecute", "--work-dir", filepath.Join(dir, "rx"))
	if code != exitDiverged || !strings.Contains(stdout, "missing_call") {
		t.Errorf("--reexecute without recorded model I/O: code %d\n%s\n%s", code, stdout, stderr)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"replay", "--out", out2}, exitUsage, "FILE or --run"},
		{[]string{"replay", file}, exitUsage, "--out"},
		{[]string{"replay", file, "--reverify", "--reexecute"}, exitUsage, "do not go together"},
		{[]string{"replay", filepath.Join(dir, "nope.jsonl"), "--out", filepath.Join(dir, "o3")}, exitFailure, "no such file"},
		{[]string{"replay", "--run", "nope", "--nats-url", srv.ClientURL(), "--out", filepath.Join(dir, "o4")}, exitFailure, "unknown run nope"},
	} {
		_, stderr, code := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
