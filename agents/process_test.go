package agents

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// The child mode of the test binary: an agent process of its own, as
// `vera agent` would run it, that the test can SIGKILL.
const (
	childEnv     = "VERA_AGENT_CHILD"      // the agent id; set = child mode
	childURL     = "VERA_AGENT_NATS_URL"   // the test's NATS server
	childDurable = "VERA_AGENT_DURABLE"    // the durable consumer; default "agent"
	childHang    = "VERA_AGENT_HANG_AFTER" // a step: hang after its model call returned, before the step is published
	childMark    = "VERA_AGENT_MARK"       // a file the child writes "hang <run> <step>" to when it hangs
)

// childMain runs Agent.Run in a child process until SIGTERM or SIGKILL.
func childMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.DiscardHandler)
	if os.Getenv("VERA_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	b, err := bus.Connect(ctx, bus.Options{URL: os.Getenv(childURL), Source: "agents", ReadOnly: true, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: connect:", err)
		return 1
	}
	defer b.Close()
	var clients []*llm.Client
	a, err := New(b, Config{
		ID: os.Getenv(childEnv), Durable: os.Getenv(childDurable), Logger: log,
		Models: func(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
			cfg := llmbus.Config(mc)
			cfg.Recorder = llmbus.New(b, llmbus.Options{Logger: log})
			cfg.Logger = log
			cfg.Backoff = llm.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond, Jitter: -1}
			c, err := llm.New(cfg)
			if err == nil {
				clients = append(clients, c)
			}
			return c, err
		},
		AckWait:      2 * time.Second,
		Backoff:      []time.Duration{50 * time.Millisecond},
		DrainTimeout: 2 * time.Second,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: new agent:", err)
		return 1
	}
	if n, err := strconv.Atoi(os.Getenv(childHang)); err == nil {
		a.afterModel = func(runID string, step int) error {
			if step == n {
				_ = os.WriteFile(os.Getenv(childMark), fmt.Appendf(nil, "hang %s %d\n", runID, step), 0o644)
				<-ctx.Done() // the test kills the process here
				return ctx.Err()
			}
			return nil
		}
	}
	err = a.Run(ctx)
	for _, c := range clients {
		c.Close()
	}
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "child: agent:", err)
		return 1
	}
	return 0
}

// child is an agent process started from the test binary.
type child struct {
	t   testing.TB
	cmd *exec.Cmd
	out *lockedBuf
}

type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startChild starts an agent process on the harness's NATS server.
func (h *harness) startChild(id string, env ...string) *child {
	h.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+id, childURL+"="+h.url)
	cmd.Env = append(cmd.Env, env...)
	out := &lockedBuf{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	c := &child{t: h.t, cmd: cmd, out: out}
	h.t.Cleanup(func() { c.kill() })
	return c
}

// kill SIGKILLs the process (once) and reaps it.
func (c *child) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	_ = c.cmd.Wait()
	if s := c.out.String(); strings.TrimSpace(s) != "" {
		c.t.Logf("agent process %d output:\n%s", c.cmd.Process.Pid, s)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// callsByStep counts the model server's requests per step.
func callsByStep(srv *scriptedmodel.Server) map[int]int {
	out := map[int]int{}
	for _, r := range srv.Requests() {
		out[stepOf(r.LastUserMessage())]++
	}
	return out
}

// TestKill9ResumesWithoutDuplicates SIGKILLs agent processes at three
// points of one run and resumes it with a new process each time:
//
//  1. after the model call of step 3 returned (its reply is recorded on the
//     bus) and before step 3 is published: the next process reuses the
//     recorded reply instead of calling the model again;
//  2. while the tool of step 5 runs: the result arrives while no agent
//     runs, and the next process records its evidence and goes on;
//  3. while the model call of step 7 is in flight (the scripted server
//     holds the reply): that call is the only one made twice, since its
//     reply never arrived; its vera.model.requested is stored once (same
//     derived id).
//
// Every step, tool request, evidence, notes append, model call id and
// model event appears once; each tool request ran once.
func TestKill9ResumesWithoutDuplicates(t *testing.T) {
	steps := map[int]string{
		1: reply(shell("echo one"), "continuing"),
		2: reply(notes("one seen (ev_0001)"), "continuing"),
		3: reply(shell("echo three"), "continuing"),
		4: reply(shell("echo four"), "continuing"),
		5: reply(shell("echo five"), "continuing"),
		6: reply(notes("three, four, five seen"), "continuing"),
		7: reply(shell("echo seven"), "continuing"),
		8: "THOUGHT: done\n" + submitAns("seven") + "\nEVIDENCE_USED: ev_0005\nSTATUS_UPDATE: RESOLVED\n",
	}
	inflight := make(chan struct{})
	var once sync.Once
	seen := map[int]int{}
	rule := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		n := stepOf(req.LastUserMessage())
		text, ok := steps[n]
		seen[n]++
		r := scriptedmodel.Text(text)
		if n == 7 && seen[n] == 1 {
			r.Delay = 5 * time.Minute // ends when the killed client goes away
			once.Do(func() { close(inflight) })
		}
		return r, ok
	})
	h := newHarness(t, scriptedmodel.WithRules(rule))

	var mu sync.Mutex
	ran := map[string]int{}
	toolAt5 := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	h.tools(func(req catalog.ToolRequested) catalog.ToolFinished {
		mu.Lock()
		ran[req.RequestID]++
		mu.Unlock()
		if req.Step == 5 {
			close(toolAt5)
			<-release
		}
		return echoTools(req)
	})

	const run = "run-kill9"
	mark := filepath.Join(t.TempDir(), "mark")
	h.submit(run, catalog.RunConfig{})

	// 1. After the model call of step 3 returned.
	p1 := h.startChild("p1", childHang+"=3", childMark+"="+mark)
	waitUntil(t, "process 1 to hang after the model call of step 3", func() bool {
		data, _ := os.ReadFile(mark)
		return strings.TrimSpace(string(data)) == "hang "+run+" 3"
	})
	p1.kill()
	ds := h.events(run)
	if n := len(ofType[*catalog.AgentStep](ds)); n != 2 {
		t.Fatalf("%d steps stored at the first kill, want 2", n)
	}
	if !hasResponse(ds, CallID(3)) {
		t.Fatal("the reply of step 3 is not recorded at the first kill")
	}

	// 2. While the tool of step 5 runs.
	p2 := h.startChild("p2")
	select {
	case <-toolAt5:
	case <-time.After(60 * time.Second):
		t.Fatal("the tool of step 5 never started")
	}
	p2.kill()
	releaseOnce.Do(func() { close(release) })
	waitUntil(t, "the result of step 5", func() bool {
		for _, f := range ofType[*catalog.ToolFinished](h.events(run)) {
			if f.RequestID == RequestID(5) {
				return true
			}
		}
		return false
	})

	// 3. While the model call of step 7 is in flight.
	p3 := h.startChild("p3")
	select {
	case <-inflight:
	case <-time.After(60 * time.Second):
		t.Fatal("the model call of step 7 never started")
	}
	p3.kill()

	h.startChild("p4")
	fin := h.waitFinished(run)
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "seven" || fin.Steps != 8 {
		t.Fatalf("finished = %+v", fin)
	}
	ds = h.events(run)
	assertOnce(t, ds)
	for k := 1; k <= 8; k++ {
		want := 1
		if k == 7 {
			want = 2 // in flight at the kill: its reply never arrived
		}
		if got := callsByStep(h.model)[k]; got != want {
			t.Errorf("step %d: %d model calls, want %d", k, got, want)
		}
	}
	assertModelEventsOnce(t, ds, 8)
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 5 {
		t.Errorf("tools ran for %d requests, want 5: %v", len(ran), ran)
	}
	for id, n := range ran {
		if n != 1 {
			t.Errorf("tool request %s ran %d times", id, n)
		}
	}
}

func hasResponse(ds []decoded, callID string) bool {
	for _, r := range ofType[*catalog.ModelResponded](ds) {
		if r.CallID == callID && r.Error == "" {
			return true
		}
	}
	return false
}

// assertModelEventsOnce checks that the agent's model calls agent-s0001 …
// agent-s<steps> each have one successful vera.model.responded, and that
// no model event is stored twice for one call and attempt.
func assertModelEventsOnce(t *testing.T, ds []decoded, steps int) {
	t.Helper()
	req := map[string]int{}
	for _, r := range ofType[*catalog.ModelRequested](ds) {
		req[r.CallID+"#"+strconv.Itoa(r.Attempt)]++
	}
	resp := map[string]int{}
	ok := map[string]int{}
	for _, r := range ofType[*catalog.ModelResponded](ds) {
		resp[r.CallID+"#"+strconv.Itoa(r.Attempt)]++
		if r.Error == "" {
			ok[r.CallID]++
		}
	}
	for k, n := range req {
		if n != 1 {
			t.Errorf("vera.model.requested %s stored %d times", k, n)
		}
	}
	for k, n := range resp {
		if n != 1 {
			t.Errorf("vera.model.responded %s stored %d times", k, n)
		}
	}
	for k := 1; k <= steps; k++ {
		if n := ok[CallID(k)]; n != 1 {
			t.Errorf("call %s: %d successful responses recorded, want 1", CallID(k), n)
		}
	}
	if len(ok) != steps {
		t.Errorf("%d agent calls answered, want %d", len(ok), steps)
	}
}

// TestTwoProcessesOneWriter runs two agent processes with different
// durable consumers on the same runs: both see every event and both act;
// only the fence (expected last sequence on the run) keeps them apart.
// Every step, request, evidence and model event is stored once.
func TestTwoProcessesOneWriter(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(fourSteps)))
	var mu sync.Mutex
	ran := map[string]int{}
	h.tools(func(req catalog.ToolRequested) catalog.ToolFinished {
		mu.Lock()
		ran[req.RequestID+"@"+req.Command]++
		mu.Unlock()
		return cwdTools(req)
	})
	h.startChild("pa", childDurable+"=agent-a")
	h.startChild("pb", childDurable+"=agent-b")
	const runs = 4
	for i := range runs {
		h.submit("run-2p-"+strconv.Itoa(i), catalog.RunConfig{})
	}
	for i := range runs {
		run := "run-2p-" + strconv.Itoa(i)
		fin := h.waitFinished(run)
		if fin.Outcome != catalog.OutcomeResolved || fin.Steps != 4 || fin.Answer != "42" {
			t.Fatalf("%s finished = %+v", run, fin)
		}
		ds := h.events(run)
		assertOnce(t, ds)
		assertModelEventsOnce(t, ds, 4)
		if n := len(ofType[*catalog.EvidenceRecorded](ds)); n != 2 {
			t.Errorf("%s: %d evidence lines, want 2", run, n)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for k, n := range ran {
		if n != runs {
			t.Errorf("tool request %s ran %d times over %d runs, want once per run", k, n, runs)
		}
	}
	// Racing processes may both call the model for a step; never more.
	if n := h.model.Count(); n > 2*4*runs {
		t.Errorf("%d model calls for %d steps", n, 4*runs)
	}
	t.Logf("%d model calls for %d steps", h.model.Count(), 4*runs)
}
