package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/projector/dashboard"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

var stepRE = regexp.MustCompile(`\n\[step (\d+)\] ACTION:`)

// byStep answers the agent's prompt of step n with replies[n] (the step
// is read from the prompt's action tail), else with fallback.
func byStep(replies map[int]string, fallback string) scriptedmodel.Rule {
	return scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		n := 0
		for _, m := range stepRE.FindAllStringSubmatch(req.LastUserMessage(), -1) {
			k, _ := strconv.Atoi(m[1])
			n = max(n, k)
		}
		text, ok := replies[n+1]
		if !ok {
			text, ok = fallback, fallback != ""
		}
		return scriptedmodel.Text(text), ok
	})
}

func turn(action, evidence, status string) string {
	return "THOUGHT: next move\n" + action + "\nEVIDENCE_USED: " + evidence + "\nSTATUS_UPDATE: " + status + "\n"
}

// TestRunDoesTheWholeJob is `vera run` with no --nats-url: one command
// starts the embedded bus and every component, runs a real command in a
// real sandbox for a scripted model, follows the run to RESOLVED, and
// leaves the run's files in the work dir.
func TestRunDoesTheWholeJob(t *testing.T) {
	dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: turn(`{"tool":"shell","args":{"cmd":"echo 42 > /work/answer.txt && cat /work/answer.txt"}}`, "none", "continuing"),
		2: turn(`{"tool":"notes_append","args":{"text":"answer.txt holds 42 (ev_0001)"}}`, "ev_0001", "continuing"),
		3: turn(`{"tool":"submit","args":{"answer":"42"}}`, "ev_0001", "RESOLVED"),
	}, "")))
	work := filepath.Join(t.TempDir(), "work")
	data := t.TempDir()
	var runID string
	t.Cleanup(func() {
		if runID != "" {
			removeContainers(t, runID)
		}
	})
	out, errOut, code := runCLI(t, "run", "--task", "What number is in answer.txt?", "--work-dir", work,
		"--model-base-url", model.URL(), "--model", "scripted", "--image", img, "--data-dir", data, "--no-network")
	if m := regexp.MustCompile(`run (\S+) submitted`).FindStringSubmatch(out); m != nil {
		runID = m[1]
	}
	t.Logf("vera run:\n%s", out)
	if code != 0 {
		t.Fatalf("vera run exited %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"started by ", "step 1", "$ echo 42 > /work/answer.txt", "→ exit 0", "evidence ev_0001: 42",
		"notes += answer.txt holds 42", "submits: 42", "RESOLVED after 3 steps", "answer:\n42"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The sandbox wrote into the work dir; the projector wrote the run's files.
	if b, err := os.ReadFile(filepath.Join(work, "work", "answer.txt")); err != nil || string(b) != "42\n" {
		t.Errorf("answer.txt = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(work, "notes.md")); err != nil || !strings.Contains(string(b), "answer.txt holds 42 (ev_0001)") {
		t.Errorf("notes.md = %q, %v", b, err)
	}
	trace, err := os.ReadFile(filepath.Join(work, "trace.jsonl"))

	if err != nil || !strings.Contains(string(trace), `"type":"vera.run.finished"`) {
		t.Errorf("trace.jsonl lacks the end of the run (%v):\n%.2000s", err, trace)
	}
	// The stream is kept in the data dir: `vera up` on it later sees the run.
	if _, err := os.Stat(filepath.Join(data, "nats", "jetstream")); err != nil {
		t.Errorf("no store in the data dir: %v", err)
	}
}

// TestRunExitCodes: an exhausted step budget is UNRESOLVED (3), and the
// run goes against a `vera up` given with --nats-url.
func TestRunExitCodesAgainstVeraUp(t *testing.T) {
	t.Setenv("NATS_URL", "")
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(byStep(nil,
		turn(`{"tool":"notes_append","args":{"text":"still thinking"}}`, "none", "UNRESOLVED(need more)"))))
	addr := bustest.FreeAddr(t)
	upOut, _, stopUp := start(t, "up", "--data-dir", veraDataDir(t), "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--no-sandboxd", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	if !strings.Contains(upOut.String(), "agent") {
		t.Fatalf("vera up does not run the agent:\n%s", upOut.String())
	}
	out, errOut, code := runCLI(t, "run", "--nats-url", "nats://"+addr, "--task", "Think twice.", "--work-dir", t.TempDir(),
		"--model-base-url", model.URL(), "--model", "scripted", "--max-steps", "2")
	if code != exitUnresolved || !strings.Contains(out, "UNRESOLVED(step budget exhausted) after 2 steps") {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, exitUnresolved, out, errOut)
	}
	// Ctrl-C while the model thinks: the run is cancelled for everyone
	// (vera.run.cancelled, the model call interrupted) and vera run exits 5.
	slow := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "THOUGHT: x", Delay: time.Minute}))
	runOut, runErr, stopRun := start(t, "run", "--nats-url", "nats://"+addr, "--task", "Think slowly.", "--work-dir", t.TempDir(),
		"--model-base-url", slow.URL(), "--model", "scripted")
	waitFor(t, "the model call", func() bool { return slow.Count() > 0 })
	if code := stopRun(); code != exitCancelled {
		t.Errorf("interrupted vera run exited %d, want %d\n%s\n%s", code, exitCancelled, runOut, runErr)
	}
	if !strings.Contains(runErr.String(), "cancelled") {
		t.Errorf("stderr: %s", runErr)
	}
	id := regexp.MustCompile(`run (\S+) submitted`).FindStringSubmatch(runOut.String())
	if id == nil {
		t.Fatalf("no run id in %q", runOut)
	}
	tail, _, _ := runCLI(t, "events", "tail", "--nats-url", "nats://"+addr, "--run", id[1], "--no-follow")
	if !strings.Contains(tail, "run.cancelled") {
		t.Errorf("no vera.run.cancelled on the stream:\n%s", tail)
	}

	// --json prints the envelopes.
	out, _, code = runCLI(t, "run", "--nats-url", "nats://"+addr, "--task", "Think once.", "--work-dir", t.TempDir(),
		"--model-base-url", model.URL(), "--model", "scripted", "--max-steps", "1", "--json")
	if code != exitUnresolved || !strings.Contains(out, `"type":"vera.agent.step"`) || strings.Contains(out, "step 1  ") {
		t.Errorf("--json: exit %d\n%s", code, out)
	}
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Setenv("NATS_URL", "")
	full := t.TempDir() // a directory VERA did not make, not empty
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "--work-dir", t.TempDir(), "--model-base-url", "http://127.0.0.1:1", "--model", "m"},
		{"run", "--task", "x", "--work-dir", full, "--model-base-url", "http://127.0.0.1:1", "--model", "m", "--data-dir", t.TempDir()},
		{"run", "--task", "x", "--work-dir", t.TempDir()},
		{"run", "--task", "x", "--task-file", "f", "--work-dir", t.TempDir(), "--model-base-url", "http://127.0.0.1:1", "--model", "m"},
		{"run", "--task", "x", "--work-dir", t.TempDir(), "--model-base-url", "http://127.0.0.1:1", "--model", "m", "--max-steps", "-1"},
		{"run", "--task", "x", "--work-dir", t.TempDir(), "--model-base-url", "http://127.0.0.1:1", "--model", "m", "--run-id", "a.b"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	out, _, code := runCLI(t, "run", "--help")
	if code != 0 || !strings.Contains(out, "Exit status:") || !strings.Contains(out, fmt.Sprintf("%d  UNRESOLVED", exitUnresolved)) {
		t.Errorf("help: %d\n%s", code, out)
	}
}

// TestComponentsAsSeparateCommands: the distributed layout, each component
// its own command on one bus — `vera up` with only the bus and the
// verifiers, `vera agent`, `vera projector` — and `vera run` against it.
func TestComponentsAsSeparateCommands(t *testing.T) {
	t.Setenv("NATS_URL", "")
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: turn(`{"tool":"notes_append","args":{"text":"nothing to fetch"}}`, "none", "CONTINUE"),
		2: turn(`{"tool":"submit","args":{"answer":"done"}}`, "none", "RESOLVED"),
	}, "")))
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", veraDataDir(t), "--nats-listen", addr, "--http-listen", "", "--no-sandboxd",
		"--no-agent", "--no-projector", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	if c := upOut.String(); strings.Contains(c, "agent,") || strings.Contains(c, "projector") || strings.Contains(c, "dashboard") {
		t.Errorf("vera up runs what it was told not to:\n%s", c)
	}
	_, agentErr, stopAgent := start(t, "agent", "--nats-url", url, "--agent-id", "agent-2", "--log-level", "warn")
	_, projErr, stopProj := start(t, "projector", "--nats-url", url, "--metrics-listen", "127.0.0.1:0", "--work-root", os.TempDir(), "--log-level", "warn")
	waitFor(t, "the projector's metrics address", func() bool { return strings.Contains(projErr.String(), "/metrics") })

	work := t.TempDir()
	out, errOut, code := runCLI(t, "run", "--nats-url", url, "--task", "Say done.", "--work-dir", work,
		"--model-base-url", model.URL(), "--model", "scripted")
	if code != 0 || !strings.Contains(out, "started by agent-2") {
		t.Fatalf("vera run exited %d\n%s\n%s\nagent: %s", code, out, errOut, agentErr)
	}
	waitFor(t, "notes.md from vera projector", func() bool {
		b, err := os.ReadFile(filepath.Join(work, "notes.md"))
		return err == nil && string(b) == "nothing to fetch\n"
	})
	m := regexp.MustCompile(`metrics at (http://\S+/metrics)`).FindStringSubmatch(projErr.String())
	if m == nil {
		t.Fatalf("no metrics URL: %s", projErr)
	}
	// /metrics needs the read-only token, which vera projector made in
	// its data dir (the default one, as the identities').
	readToken, err := os.ReadFile(filepath.Join(defaultDataDir(), dashboard.ReadTokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the run in the metrics", func() bool {
		req, _ := http.NewRequest("GET", m[1], nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(readToken)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `vera_events_total{type="vera.run.finished"} 1`)
	})
	for name, stop := range map[string]func() int{"agent": stopAgent, "projector": stopProj, "up": stopUp} {
		if code := stop(); code != 0 {
			t.Errorf("vera %s exited %d", name, code)
		}
	}
}
