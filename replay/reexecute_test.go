package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// recordNotesRun records a real agent run (notes and a submit, no
// command) and returns its export file. A threshold > 0 puts bigger model
// I/O in blobs.
func recordNotesRun(t *testing.T, runID string, threshold int) string {
	t.Helper()
	srv, b := bustest.New(t)
	model := scriptedAgentModel(t, notesOnlyReplies())
	startAgent(t, srv.ClientURL(), threshold)
	submitTask(t, b, runID, catalog.RunConfig{Task: "What is the answer?", WorkDir: filepath.Join(t.TempDir(), "w"),
		Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted"}, MaxSteps: 10})
	if fin := waitFinished(t, b, runID, time.Minute); fin.Outcome != catalog.OutcomeResolved {
		t.Fatalf("recording finished %+v", fin)
	}
	return exportRun(t, b, runID)
}

// tamper rewrites the data of the events of an export file for which edit
// returns true.
func tamper(t *testing.T, path string, edit func(ev *bus.Event, data map[string]any) (keep, changed bool)) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	n := 0
	for _, line := range bytes.SplitAfter(raw, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		ev, err := bus.ParseEvent(bytes.TrimSpace(line))
		if err != nil {
			t.Fatal(err)
		}
		var data map[string]any
		_ = json.Unmarshal(ev.Data, &data)
		keep, changed := edit(&ev, data)
		if !keep {
			n++
			continue
		}
		if changed {
			n++
			ev.Data, _ = json.Marshal(data)
			line, _ = ev.Marshal()
			line = append(line, '\n')
		}
		out.Write(line)
	}
	if n == 0 {
		t.Fatal("nothing tampered with")
	}
	p := filepath.Join(t.TempDir(), "tampered.jsonl")
	if err := os.WriteFile(p, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func reexecuteFile(t *testing.T, path, runID string, opts ReexecuteOptions) *ReexecuteResult {
	t.Helper()
	s, err := OpenFile(context.Background(), path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := countEvents(t, s.Bus, runID)
	opts.Logger = bustest.Logger(t)
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	if opts.WorkDir == "" && opts.Out == "" {
		opts.WorkDir = t.TempDir()
	}
	res, err := Reexecute(context.Background(), s.Bus, runID, opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := countEvents(t, s.Bus, runID); n != before {
		t.Errorf("the recording changed: %d events, was %d", n, before)
	}
	var text bytes.Buffer
	res.WriteText(&text)
	t.Logf("\n%s", text.String())
	return res
}

func TestReexecuteUnchangedRecording(t *testing.T) {
	const runID = "rec-exec"
	path := recordNotesRun(t, runID, 256) // model I/O in blobs
	out := filepath.Join(t.TempDir(), "out")
	res := reexecuteFile(t, path, runID, ReexecuteOptions{StopOnDivergence: true, Out: out})
	if res.Diverged() || res.Stopped != "" || len(res.Incomplete) > 0 {
		t.Fatalf("divergences %+v, stopped %q, incomplete %v", res.Divergences, res.Stopped, res.Incomplete)
	}
	if res.Steps != 3 || res.RecordedSteps != 3 || res.Served != 3 || res.End == nil || res.End.Outcome != catalog.OutcomeResolved || res.End.Answer != "42" {
		t.Errorf("result = %+v", res)
	}
	files := readFiles(t, out, []string{projector.FileNotes})
	if got := string(files[projector.FileNotes]); got != "- plan: answer from what is known\n- the answer is 42\n" {
		t.Errorf("notes.md of the re-execution = %q", got)
	}
}

func TestReexecuteTamperedStep(t *testing.T) {
	const runID = "rec-tamper"
	path := recordNotesRun(t, runID, 0)
	bad := tamper(t, path, func(ev *bus.Event, d map[string]any) (bool, bool) {
		if ev.Type == catalog.TypeAgentStep && d["step"] == 2.0 {
			d["notes_text"] = "- the answer is 43"
			return true, true
		}
		return true, false
	})

	t.Run("stop", func(t *testing.T) {
		res := reexecuteFile(t, bad, runID, ReexecuteOptions{StopOnDivergence: true})
		if len(res.Divergences) != 1 || res.Divergences[0].Step != 2 || res.Divergences[0].Kind != KindAction ||
			!strings.Contains(res.Divergences[0].Detail, "notes text") {
			t.Fatalf("divergences = %+v", res.Divergences)
		}
		if res.Stopped == "" || res.End == nil || !res.End.Cancelled || res.Steps != 2 {
			t.Errorf("stopped %q, end %+v, steps %d", res.Stopped, res.End, res.Steps)
		}
	})
	t.Run("continue", func(t *testing.T) {
		res := reexecuteFile(t, bad, runID, ReexecuteOptions{})
		if len(res.Divergences) != 1 || res.Divergences[0].Kind != KindAction || res.Stopped != "" ||
			res.End == nil || res.End.Outcome != catalog.OutcomeResolved || res.Steps != 3 {
			t.Fatalf("result = %+v", res)
		}
		js, err := json.Marshal(res)
		if err != nil || !bytes.Contains(js, []byte(`"kind":"action"`)) {
			t.Errorf("JSON report: %s %v", js, err)
		}
	})
}

func TestReexecuteMissingCallAndChangedPrompt(t *testing.T) {
	const runID = "rec-missing"
	path := recordNotesRun(t, runID, 0) // prompts inline, to tamper with
	missing := tamper(t, path, func(ev *bus.Event, d map[string]any) (bool, bool) {
		return !(ev.Type == catalog.TypeModelResponded && d["call_id"] == "agent-s0003"), false
	})
	res := reexecuteFile(t, missing, runID, ReexecuteOptions{StopOnDivergence: true})
	if len(res.Divergences) != 1 || res.Divergences[0].Kind != KindMissingCall || res.Divergences[0].Step != 3 || res.Divergences[0].CallID != "agent-s0003" ||
		res.Stopped == "" || res.End == nil || res.End.Outcome != catalog.OutcomeFailed {
		t.Fatalf("divergences = %+v", res.Divergences)
	}

	// A recorded prompt that differs (as after a change of the prompt
	// assembly): step 2's call is refused in stop mode.
	changed := tamper(t, path, func(ev *bus.Event, d map[string]any) (bool, bool) {
		if ev.Type != catalog.TypeModelRequested || d["call_id"] != "agent-s0002" {
			return true, false
		}
		msgs := d["messages"].([]any)
		m := msgs[len(msgs)-1].(map[string]any)
		m["content"] = m["content"].(string) + "\nan older prompt"
		return true, true
	})
	res = reexecuteFile(t, changed, runID, ReexecuteOptions{StopOnDivergence: true})
	if len(res.Divergences) != 1 || res.Divergences[0].Kind != KindPrompt || res.Divergences[0].Step != 2 || res.Steps != 1 ||
		res.End == nil || res.End.Outcome != catalog.OutcomeFailed {
		t.Fatalf("result = %+v", res)
	}
	res = reexecuteFile(t, changed, runID, ReexecuteOptions{})
	if len(res.Divergences) != 1 || res.Divergences[0].Kind != KindPrompt || res.Steps != 3 || res.End.Outcome != catalog.OutcomeResolved {
		t.Fatalf("continue: result = %+v", res)
	}
}

// TestReexecuteWithSandbox records a run whose commands run in a real
// container, then re-executes its export: the commands run again and
// nothing diverges. Skipped without Docker or the sandbox image unless
// VERA_REQUIRE_DOCKER=1.
func TestReexecuteWithSandbox(t *testing.T) {
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Cleanup(func() {
		ctx := context.Background()
		list, _ := docker.ContainerList(ctx, container.ListOptions{All: true})
		for _, c := range list {
			if c.Labels[sandboxd.LabelManaged] == "true" && (strings.HasPrefix(c.Labels[sandboxd.LabelRun], "rec-sbx") || strings.Contains(strings.Join(c.Names, ","), "replay")) {
				_ = docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
		}
	})
	const runID = "rec-sbx"
	srv, b := bustest.New(t)
	root := t.TempDir()
	cfg := sandboxd.Config{Image: img, Memory: 512 << 20, PidsLimit: 256, Logger: bustest.Logger(t), WorkRoots: []string{os.TempDir()}}
	rcfg := cfg
	rcfg.WorkRoot, rcfg.SpoolDir = filepath.Join(root, "runs"), filepath.Join(root, "spool")
	d, err := sandboxd.New(bustest.Connect(t, srv.ClientURL(), bus.Options{Source: "sandboxd", ReadOnly: true}), docker, rcfg)
	if err != nil {
		t.Fatal(err)
	}
	bustest.Start(t, "sandboxd", d.Run)
	model := scriptedAgentModel(t, []string{
		agentReply("make a file", `{"tool":"shell","args":{"cmd":"mkdir -p sub && cd sub && echo 42 > answer.txt && pwd"}}`),
		agentReply("read it", `{"tool":"shell","args":{"cmd":"cat answer.txt"}}`),
		agentReply("done", `{"tool":"submit","args":{"answer":"42 (ev_0002)"}}`),
	})
	startAgent(t, srv.ClientURL(), 0)
	submitTask(t, b, runID, catalog.RunConfig{Task: "What number is in answer.txt?", WorkDir: filepath.Join(root, "work"),
		Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted"}, MaxSteps: 10})
	if fin := waitFinished(t, b, runID, 3*time.Minute); fin.Outcome != catalog.OutcomeResolved {
		t.Fatalf("recording finished %+v", fin)
	}
	path := exportRun(t, b, runID)
	res := reexecuteFile(t, path, runID, ReexecuteOptions{StopOnDivergence: true, Timeout: 3 * time.Minute,
		Sandbox: &Sandbox{Docker: docker, Config: cfg}})
	if res.Diverged() || res.Steps != 3 || res.End == nil || res.End.Answer != "42 (ev_0002)" {
		t.Fatalf("result = %+v", res)
	}
	if data, err := os.ReadFile(filepath.Join(res.WorkDir, "work", "sub", "answer.txt")); err != nil || string(data) != "42\n" {
		t.Errorf("the re-executed command's file: %q, %v", data, err)
	}
}

// TestReexecuteFork: a fork (its first steps served by the agent from
// its original's recording) re-executes from its own recording alone:
// the export holds only the fork, whose served calls are recorded as its
// own.
func TestReexecuteFork(t *testing.T) {
	const orig, fork = "rec-fork-orig", "rec-fork"
	srv, b := bustest.New(t)
	model := scriptedAgentModel(t, notesOnlyReplies())
	startAgent(t, srv.ClientURL(), 0)
	submitTask(t, b, orig, catalog.RunConfig{Task: "What is the answer?", WorkDir: filepath.Join(t.TempDir(), "w"),
		Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted"}, MaxSteps: 10})
	if fin := waitFinished(t, b, orig, time.Minute); fin.Outcome != catalog.OutcomeResolved {
		t.Fatalf("original finished %+v", fin)
	}
	var cfg catalog.RunConfig
	evs, err := b.ReadRun(context.Background(), orig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		var st catalog.RunStarted
		if ev.Type == catalog.TypeRunStarted && ev.DecodeData(&st) == nil {
			cfg = st.Config
		}
	}
	cfg.WorkDir = filepath.Join(t.TempDir(), "fork")
	cfg.Fork = &catalog.ForkConfig{From: orig, AtStep: 2}
	submitTask(t, b, fork, cfg)
	if fin := waitFinished(t, b, fork, time.Minute); fin.Outcome != catalog.OutcomeResolved || fin.Answer != "42" {
		t.Fatalf("fork finished %+v", fin)
	}
	if n := len(model.Requests()); n != 4 {
		t.Fatalf("%d model requests, want 4 (3 of the original, step 3 of the fork)", n)
	}
	res := reexecuteFile(t, exportRun(t, b, fork), fork, ReexecuteOptions{StopOnDivergence: true})
	if res.Diverged() || res.Stopped != "" || len(res.Incomplete) > 0 {
		t.Fatalf("divergences %+v, stopped %q, incomplete %v", res.Divergences, res.Stopped, res.Incomplete)
	}
	if res.Steps != 3 || res.Served != 3 || res.End == nil || res.End.Outcome != catalog.OutcomeResolved || res.End.Answer != "42" {
		t.Errorf("result = %+v", res)
	}
}
