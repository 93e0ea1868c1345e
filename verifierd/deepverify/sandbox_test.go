package deepverify

// Tests with the real sandbox: sandboxd runs in the test process against
// Docker and the sandbox image (imagetest.Ensure); they skip when Docker or
// the image is missing, or fail under VERA_REQUIRE_DOCKER=1. The runs have
// no network (their containers get network "none").

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/rundir"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// helperEnv makes the test binary a child auditor process (see TestMain).
const helperEnv = "VERA_DEEPVERIFY_HELPER"

// startSandbox runs a real sandboxd on the harness's bus until the test
// ends; the containers of the harness's runs are removed afterwards.
func (h *harness) startSandbox() {
	h.t.Helper()
	docker := imagetest.Client(h.t)
	img := imagetest.Ensure(h.t)
	root := h.t.TempDir()
	h.t.Cleanup(func() { // after sandboxd stopped (cleanups run last first)
		ctx := context.Background()
		for _, run := range h.runs {
			list, _ := docker.ContainerList(ctx, container.ListOptions{All: true,
				Filters: filters.NewArgs(filters.Arg("label", sandboxd.LabelRun+"="+run))})
			for _, c := range list {
				_ = docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
			}
		}
	})
	d, err := sandboxd.New(h.b, docker, sandboxd.Config{Image: img, WorkRoot: filepath.Join(root, "runs"),
		SpoolDir: filepath.Join(root, "spool"), Logger: bustest.Logger(h.t), Memory: 512 << 20, PidsLimit: 256,
		WorkRoots: []string{os.TempDir()}}) // the runs' work dirs are temporary directories
	if err != nil {
		h.t.Fatal(err)
	}
	bustest.Start(h.t, "sandboxd", d.Run)
}

// dockerRun gives the harness a fresh run whose run dir is a temporary
// directory, with a run id unique on the machine (containers are named by
// it); it returns the run's /work on the host (the run dir's work/), made
// as sandboxd makes it, so that the test can put the agent's files there.
func (h *harness) dockerRun(maxRounds int) string {
	h.t.Helper()
	runDir := filepath.Join(h.t.TempDir(), "run")
	runID := fmt.Sprintf("dv-%d", time.Now().UnixNano())
	roots, err := rundir.NewRoots(filepath.Dir(runDir))
	if err != nil {
		h.t.Fatal(err)
	}
	d, err := rundir.Open(roots, runDir, runID, true)
	if err != nil {
		h.t.Fatal(err)
	}
	defer d.Close()
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 65532, 65532 // sandboxd.SandboxUser
	}
	work, f, err := d.Work(true, uid, gid)
	if err != nil {
		h.t.Fatal(err)
	}
	f.Close()
	h.newRun(runID, maxRounds, runDir)
	return work
}

func toolFinished(evs []bus.Event, requestID string) *catalog.ToolFinished {
	for _, f := range payloads[catalog.ToolFinished](evs) {
		if f.RequestID == requestID {
			return &f
		}
	}
	return nil
}

// TestAuditorCannotWriteToWork: the auditor's container mounts /work
// read-only. A check whose command writes there gets a failed tool result
// (and may still read what the agent wrote), the file never reaches the
// host's work dir, and the check loop sees the failure.
func TestAuditorCannotWriteToWork(t *testing.T) {
	h := newHarness(t, 1)
	work := h.dockerRun(1)
	if err := os.WriteFile(filepath.Join(work, "answer.txt"), []byte("agent wrote this\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.standard(1, 2)
	cmd := `cat /work/answer.txt; echo tampered > /work/tamper.txt`
	h.sc.mu.Lock()
	h.sc.decompose[1] = `{"summary":[],"likely_errors":[],"checks":[{"source":"/work/answer.txt","question":"Can the auditor change the work dir?","load_bearing":true}]}`
	h.sc.checks["r1-c1"] = []string{`{"command":"` + cmd + `"}`,
		`{"verdict":"no","evidence":"writing /work/tamper.txt failed: Read-only file system"}`}
	h.sc.mu.Unlock()
	h.startSandbox()
	h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback", feedbackFor(1))

	tf := toolFinished(evs, RequestID(1, 1, 1))
	if tf == nil {
		t.Fatal("no tool.finished for the auditor's command")
	}
	if tf.Requester != catalog.RequesterAuditor || tf.ExitCode == 0 || !strings.Contains(tf.Stderr.Head, "Read-only file system") {
		t.Errorf("auditor's write to /work: exit %d, stderr %q, requester %s; want a failure saying Read-only file system",
			tf.ExitCode, tf.Stderr.Head, tf.Requester)
	}
	if tf.Stdout.Head != "agent wrote this\n" {
		t.Errorf("auditor's read of /work: stdout %q", tf.Stdout.Head)
	}
	if _, err := os.Stat(filepath.Join(work, "tamper.txt")); !os.IsNotExist(err) {
		t.Errorf("the auditor's file reached the host's work dir (stat: %v)", err)
	}
	for _, st := range payloads[catalog.ToolStarted](evs) {
		if st.RequestID == RequestID(1, 1, 1) && st.Container != sandboxd.ContainerName(h.runID, "auditor") {
			t.Errorf("the auditor's command ran in %s", st.Container)
		}
	}
	var seen bool
	for _, r := range h.srv.Requests() {
		u := r.LastUserMessage()
		if strings.HasPrefix(u, "AUDIT-CHECK r1-c1 step 2") && strings.Contains(u, "Read-only file system") {
			seen = true
		}
	}
	if !seen {
		t.Error("the check's next step was not shown the failed write")
	}
	h.srv.AssertNoMisses(t)
}

// TestKill9MidRoundResumesWithoutRepeatingFinishedChecks runs the auditor in
// a child process (the test binary, see helperAuditor) with a real bus, a
// real sandboxd and the scripted model; it is killed with SIGKILL after one
// check finished and while another's command runs. A second child finishes
// the round: every check is recorded once, and nothing a finished check did
// (model calls, commands) is done again.
func TestKill9MidRoundResumesWithoutRepeatingFinishedChecks(t *testing.T) {
	h := newHarness(t, 3)
	h.dockerRun(3)
	h.standard(1, 4)
	h.sc.mu.Lock()
	h.sc.decompose[1] = `{"summary":[],"likely_errors":[],"checks":[` +
		`{"source":"` + urlPy + `","question":"Quick?"},{"source":"` + urlWiki + `","question":"Slow?"},{"source":"` + urlPy + `","question":"Slower?"}]}`
	for i, command := range []string{"echo quick", "sleep 3; echo slow-two", "sleep 4; echo slow-three"} {
		h.sc.checks[CheckID(1, i+1)] = []string{`{"command":"` + command + `"}`,
			`{"verdict":"yes","evidence":"` + command + `","citations":["` + urlPy + `","` + urlWiki + `"]}`}
	}
	h.sc.mu.Unlock()
	h.startSandbox()

	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"=auditor", "NATS_URL="+h.natsURL)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		})
		return cmd
	}
	first := start()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("r1-c1 recorded while r1-c2's command runs", func(evs []bus.Event) bool {
		done := false
		for _, c := range payloads[catalog.AuditCheck](evs) {
			done = done || c.CheckID == "r1-c1"
		}
		started := false
		for _, s := range payloads[catalog.ToolStarted](evs) {
			started = started || s.RequestID == RequestID(1, 2, 1)
		}
		return done && started && toolFinished(evs, RequestID(1, 2, 1)) == nil
	})
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if n := len(payloads[catalog.AuditJudged](evs)); n != 0 {
		t.Fatalf("the round was judged before the kill")
	}
	c1Calls := countPrompts(h.srv, "AUDIT-CHECK r1-c1")
	t.Logf("killed with %d check(s) recorded, %d model calls made", len(payloads[catalog.AuditCheck](evs)), h.srv.Count())

	start()
	evs = h.wait("feedback after the restart", feedbackFor(1))

	perCheck := map[string]int{}
	for _, c := range payloads[catalog.AuditCheck](evs) {
		perCheck[c.CheckID]++
	}
	for i := 1; i <= 3; i++ {
		if id := CheckID(1, i); perCheck[id] != 1 {
			t.Errorf("check %s recorded %d times, want 1", id, perCheck[id])
		}
	}
	if len(perCheck) != 3 {
		t.Errorf("checks recorded: %v", perCheck)
	}
	if n := countPrompts(h.srv, "AUDIT-DECOMPOSE"); n != 1 {
		t.Errorf("%d decompositions, want 1", n)
	}
	if n := countPrompts(h.srv, "AUDIT-CHECK r1-c1"); n != 2 || n != c1Calls {
		t.Errorf("finished check r1-c1: %d model calls in all, %d at the kill; want 2 and 2", n, c1Calls)
	}
	requested, started := map[string]int{}, map[string]int{}
	for _, r := range payloads[catalog.ToolRequested](evs) {
		requested[r.RequestID]++
	}
	for _, s := range payloads[catalog.ToolStarted](evs) {
		started[s.RequestID]++
	}
	for i := 1; i <= 3; i++ {
		id := RequestID(1, i, 1)
		if requested[id] != 1 || started[id] != 1 {
			t.Errorf("%s requested %d times, started %d times; want once each", id, requested[id], started[id])
		}
	}
	if len(requested) != 3 {
		t.Errorf("tool requests: %v", requested)
	}
	if tf := toolFinished(evs, RequestID(1, 2, 1)); tf == nil || tf.ExitCode != 0 || tf.Stdout.Head != "slow-two\n" {
		t.Errorf("r1-c2's command, which ran through the kill: %+v", tf)
	}
	if f := feedbackRound(t, evs, 1); !f.Accepted || f.Score != 4 {
		t.Errorf("feedback = %+v", f)
	}
	h.srv.AssertNoMisses(t)
}

// helperAuditor is the child side of the kill test: an auditor on the bus
// at NATS_URL until SIGTERM (or SIGKILL). Its AckWait is short, so that
// what it was handling when killed comes back to its successor quickly.
func helperAuditor() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	b, err := bus.Connect(ctx, bus.Options{URL: os.Getenv("NATS_URL"), Source: catalog.ComponentDeepVerify, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper auditor:", err)
		return 2
	}
	defer b.Close()
	var mu sync.Mutex
	clients := map[string]*llm.Client{}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	a, err := New(b, Config{Logger: log, AckWait: 2 * time.Second,
		Models: func(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
			mu.Lock()
			defer mu.Unlock()
			if c := clients[mc.ClientKey()]; c != nil {
				return c, nil
			}
			c, err := llm.New(llm.Config{BaseURL: mc.BaseURL, Model: mc.Name, MaxRetries: -1})
			if err != nil {
				return nil, err
			}
			clients[mc.ClientKey()] = c
			return c, nil
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper auditor:", err)
		return 2
	}
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "helper auditor:", err)
		return 1
	}
	return 0
}
