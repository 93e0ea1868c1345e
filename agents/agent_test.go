package agents

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/bus/embedded"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m, bustest.LeakIgnores...)
}

// harness is a real bus, a scripted model server and a test double of
// sandboxd on the bus (it answers vera.tool.requested with canned output).
type harness struct {
	t     testing.TB
	url   string
	bus   *bus.Bus
	model *scriptedmodel.Server

	mu      sync.Mutex
	clients []*llm.Client
}

func newHarness(t testing.TB, opts ...scriptedmodel.Option) *harness {
	t.Helper()
	return newHarnessOn(t, bustest.StartServer(t), opts...)
}

// newHarnessOn is newHarness on a given server.
func newHarnessOn(t testing.TB, srv *embedded.Server, opts ...scriptedmodel.Option) *harness {
	t.Helper()
	h := &harness{t: t, url: srv.ClientURL()}
	h.bus = bustest.Connect(t, h.url, bus.Options{Source: "test"})
	h.model = scriptedmodel.Start(t, opts...)
	t.Cleanup(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.clients {
			c.Close()
		}
	})
	return h
}

// newAgent returns an agent on its own connection (as a separate process
// would have), its model calls recorded on the bus.
func (h *harness) newAgent(id string, opts ...func(*Config)) *Agent {
	// Streams exist (h.bus made them): a stream update racing a consumer
	// creation trips the race detector inside nats-server.
	b := bustest.Connect(h.t, h.url, bus.Options{Source: "agents", ReadOnly: true})
	log := bustest.Logger(h.t)
	cfg := Config{
		ID: id,
		Models: func(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
			cfg := llmbus.Config(mc)
			cfg.Recorder = llmbus.New(b, llmbus.Options{Logger: log})
			cfg.Logger = log
			cfg.Backoff = llm.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond, Jitter: -1}
			c, err := llm.New(cfg)
			if err != nil {
				return nil, err
			}
			h.mu.Lock()
			h.clients = append(h.clients, c)
			h.mu.Unlock()
			return c, nil
		},
		Logger:       log,
		Backoff:      []time.Duration{50 * time.Millisecond},
		DrainTimeout: 5 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	a, err := New(b, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// start runs a until the returned stop is called (or the test ends).
func (h *harness) start(a *Agent) (stop func()) {
	return bustest.Start(h.t, "agent "+a.cfg.ID, a.Run)
}

// tools answers every agent tool request with answer(request).
func (h *harness) tools(answer func(catalog.ToolRequested) catalog.ToolFinished) {
	b := bustest.Connect(h.t, h.url, bus.Options{Source: "sandboxd", ReadOnly: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := b.Consume(ctx, bus.ConsumerConfig{Durable: "test-tools", Types: []string{catalog.TypeToolRequested}, DrainTimeout: time.Second},
			func(ctx context.Context, m *bus.Message) error {
				p, err := catalog.Decode(m.Event.Type, m.Event.Data)
				if err != nil {
					return bus.Permanent(err)
				}
				req := *p.(*catalog.ToolRequested)
				fin := answer(req)
				fin.RequestID, fin.Requester = req.RequestID, req.Requester
				ev, err := b.Events.New(m.Event.RunID, fin, bus.ReactionTo(m.Event, "finished"))
				if err != nil {
					return err
				}
				_, err = b.Publish(ctx, ev)
				return err
			})
		if err != nil {
			h.t.Errorf("tools: %v", err)
		}
	}()
	h.t.Cleanup(func() { cancel(); <-done })
}

func stdout(s string) catalog.Output { return catalog.Output{Head: s, Bytes: int64(len(s))} }

func echoTools(req catalog.ToolRequested) catalog.ToolFinished {
	return catalog.ToolFinished{ExitCode: 0, DurationMS: 1, Stdout: stdout("output of " + req.Command + "\n")}
}

func (h *harness) submit(runID string, cfg catalog.RunConfig) {
	h.t.Helper()
	if cfg.Task == "" {
		cfg.Task = "Find the answer and cite it."
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = "/tmp/work"
	}
	if cfg.Model.BaseURL == "" {
		cfg.Model = catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted"}
	}
	ev, err := h.bus.Events.New(runID, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.bus.Publish(context.Background(), ev); err != nil {
		h.t.Fatal(err)
	}
}

type decoded struct {
	ev bus.Event
	p  catalog.Payload
}

func (h *harness) events(runID string) []decoded {
	h.t.Helper()
	evs, err := h.bus.ReadRun(context.Background(), runID)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []decoded
	for _, ev := range evs {
		p, err := catalog.Decode(ev.Type, ev.Data)
		if err != nil {
			h.t.Fatalf("decode %s: %v", ev.Type, err)
		}
		out = append(out, decoded{ev, p})
	}
	return out
}

func ofType[T catalog.Payload](ds []decoded) []T {
	var out []T
	for _, d := range ds {
		if p, ok := d.p.(T); ok {
			out = append(out, p)
		}
	}
	return out
}

// waitFinished waits for the run's vera.run.finished.
func (h *harness) waitFinished(runID string) catalog.RunFinished {
	h.t.Helper()
	// The bound only matters when a run hangs: the end-to-end runs wait on
	// real containers, and one of them (12 steps) took over 30 s in a CI
	// run sharing the machine with the cluster chaos test.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if f := ofType[*catalog.RunFinished](h.events(runID)); len(f) > 0 {
			// Let stragglers (a second worker, late duplicates) land.
			time.Sleep(300 * time.Millisecond)
			return *f[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, d := range h.events(runID) {
		h.t.Logf("%s %.300s", d.ev.Type, d.ev.Data)
	}
	h.t.Fatalf("run %s did not finish", runID)
	return catalog.RunFinished{}
}

var stepRE = regexp.MustCompile(`\n\[step (\d+)\] ACTION:`)

// stepOf reads the step a prompt is for from its action tail.
func stepOf(prompt string) int {
	n := 0
	for _, m := range stepRE.FindAllStringSubmatch(prompt, -1) {
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	return n + 1
}

// byStep answers the prompt of step n with replies[n].
func byStep(replies map[int]string) scriptedmodel.Rule {
	r := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		text, ok := replies[stepOf(req.LastUserMessage())]
		return scriptedmodel.Text(text), ok
	})
	r.Name = "by-step"
	return r
}

func reply(action, status string) string {
	return "THOUGHT: next move\n" + action + "\nEVIDENCE_USED: none\nSTATUS_UPDATE: " + status + "\n"
}

func shell(cmd string) string {
	return fmt.Sprintf(`{"tool":"shell","args":{"cmd":%q}}`, cmd)
}

func notes(text string) string {
	return fmt.Sprintf(`{"tool":"notes_append","args":{"text":%q}}`, text)
}

func submitAns(ans string) string {
	return fmt.Sprintf(`{"tool":"submit","args":{"answer":%q}}`, ans)
}

func countBy[T any](items []T, key func(T) string) map[string]int {
	m := map[string]int{}
	for _, it := range items {
		m[key(it)]++
	}
	return m
}

// assertOnce checks that every step, request, evidence, notes append and
// run event appears exactly once.
func assertOnce(t *testing.T, ds []decoded) {
	t.Helper()
	for k, n := range countBy(ofType[*catalog.AgentStep](ds), func(s *catalog.AgentStep) string { return strconv.Itoa(s.Step) }) {
		if n != 1 {
			t.Errorf("step %s recorded %d times", k, n)
		}
	}
	for k, n := range countBy(ofType[*catalog.ToolRequested](ds), func(s *catalog.ToolRequested) string { return s.RequestID }) {
		if n != 1 {
			t.Errorf("request %s recorded %d times", k, n)
		}
	}
	for k, n := range countBy(ofType[*catalog.EvidenceRecorded](ds), func(s *catalog.EvidenceRecorded) string { return s.EvidenceID }) {
		if n != 1 {
			t.Errorf("evidence %s recorded %d times", k, n)
		}
	}
	for k, n := range countBy(ofType[*catalog.NotesAppended](ds), func(s *catalog.NotesAppended) string { return strconv.Itoa(s.Step) }) {
		if n != 1 {
			t.Errorf("notes of step %s appended %d times", k, n)
		}
	}
	for k, n := range countBy(ofType[*catalog.LedgerMove](ds), func(s *catalog.LedgerMove) string { return strconv.Itoa(s.Step) }) {
		if n != 1 {
			t.Errorf("move of step %s recorded %d times", k, n)
		}
	}
	if n := len(ofType[*catalog.RunStarted](ds)); n != 1 {
		t.Errorf("run.started %d times", n)
	}
	if n := len(ofType[*catalog.RunFinished](ds)); n != 1 {
		t.Errorf("run.finished %d times", n)
	}
}

var fourSteps = map[int]string{
	1: reply(shell("cd /work/sub && export A=1 && ls"), "continuing"),
	2: reply(notes("ls shows a file (ev_0001)"), "continuing"),
	3: reply(shell("cat answer.txt"), "continuing"),
	4: "THOUGHT: done\n" + submitAns("42") + "\nEVIDENCE_USED: ev_0002\nSTATUS_UPDATE: RESOLVED\n",
}

func cwdTools(req catalog.ToolRequested) catalog.ToolFinished {
	f := echoTools(req)
	if req.Step == 1 {
		f.CwdAfter, f.Exports = "/work/sub", map[string]string{"A": "1"}
	}
	return f
}

func TestRunResolvesWithEvidenceAndNotes(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(fourSteps)))
	h.tools(cwdTools)
	h.start(h.newAgent("a1"))
	h.submit("run1", catalog.RunConfig{})
	fin := h.waitFinished("run1")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "42" || fin.Steps != 4 {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run1")
	assertOnce(t, ds)
	started := ofType[*catalog.RunStarted](ds)[0]
	if started.AgentID != "a1" || started.Config.Policy.NotesInterval != 3 || started.Config.Sandbox.ToolTimeoutMS != DefaultToolTimeoutMS {
		t.Errorf("run.started = %+v", started)
	}
	if started.SystemPrompt == nil {
		t.Error("run.started does not record the system prompt")
	} else if text, err := h.bus.GetBlob(context.Background(), started.SystemPrompt.Digest); err != nil || string(text) != protocol.SystemPromptFor("") {
		t.Errorf("system prompt blob: %v, %d bytes, want the %d of the auto prompt", err, len(text), len(protocol.SystemPromptFor("")))
	} else if got := h.model.Requests()[0].Messages[0].Text; got != string(text) {
		t.Error("the recorded system prompt is not the one the model got")
	}
	reqs := ofType[*catalog.ToolRequested](ds)
	if len(reqs) != 2 || reqs[0].RequestID != "req-s0001" || reqs[1].RequestID != "req-s0003" {
		t.Fatalf("requests = %+v", reqs)
	}
	if reqs[1].Cwd != "/work/sub" || reqs[1].Env["A"] != "1" {
		t.Errorf("second request cwd %q env %v: cd/export must persist", reqs[1].Cwd, reqs[1].Env)
	}
	evs := ofType[*catalog.EvidenceRecorded](ds)
	if len(evs) != 2 || evs[0].EvidenceID != "ev_0001" || evs[1].EvidenceID != "ev_0002" || evs[1].Command != "cat answer.txt" {
		t.Fatalf("evidence = %+v", evs)
	}
	moves := ofType[*catalog.LedgerMove](ds)
	if len(moves) != 2 || moves[1].EvidenceID != "ev_0002" {
		t.Errorf("moves = %+v", moves)
	}
	ns := ofType[*catalog.NotesAppended](ds)
	if len(ns) != 1 || ns[0].Text != "ls shows a file (ev_0001)" || ns[0].Author != catalog.AuthorAgent {
		t.Errorf("notes = %+v", ns)
	}
	steps := ofType[*catalog.AgentStep](ds)
	if steps[3].ActionTool != catalog.ActionSubmit || len(steps[3].EvidenceUsed) != 1 {
		t.Errorf("step 4 = %+v", steps[3])
	}
	// The notes are pinned in the prompt after the append.
	got := h.model.Requests()
	if len(got) != 4 {
		t.Fatalf("%d model calls, want 4", len(got))
	}
	if !strings.Contains(got[2].LastUserMessage(), "ls shows a file (ev_0001)") {
		t.Errorf("step 3 prompt lacks the notes:\n%s", got[2].LastUserMessage())
	}
	if !strings.Contains(got[1].LastUserMessage(), "evidence: ev_0001") {
		t.Errorf("step 2 prompt lacks the observation:\n%s", got[1].LastUserMessage())
	}
	// Model I/O is recorded with the step's call id.
	var calls []string
	for _, r := range ofType[*catalog.ModelResponded](ds) {
		calls = append(calls, r.CallID)
	}
	if strings.Join(calls, ",") != "agent-s0001,agent-s0002,agent-s0003,agent-s0004" {
		t.Errorf("model calls recorded = %v", calls)
	}
	h.model.AssertNoMisses(t)
}

func TestFormatErrorIsFedBack(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: "I will look around first.\nSTATUS_UPDATE: continuing\n",
		2: reply(submitAns("fine"), "RESOLVED"),
	})))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-fmt", catalog.RunConfig{})
	fin := h.waitFinished("run-fmt")
	if fin.Outcome != catalog.OutcomeResolved {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-fmt")
	steps := ofType[*catalog.AgentStep](ds)
	if len(steps) != 2 || steps[0].FormatError == "" || steps[0].RequestID != "" {
		t.Fatalf("steps = %+v", steps)
	}
	if n := len(ofType[*catalog.ToolRequested](ds)); n != 0 {
		t.Errorf("%d tool requests after a format error", n)
	}
	reqs := h.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls", len(reqs))
	}
	p := reqs[1].LastUserMessage()
	if !strings.Contains(p, "FEEDBACK:\nFORMAT ERROR") || !strings.Contains(p, "[missing_action]") {
		t.Errorf("step 2 prompt lacks the format feedback:\n%s", p)
	}
}

func TestNotesGateBlocksUntilNotesAppended(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: reply(shell("ls"), "continuing"),
		2: reply(shell("cat a"), "continuing"),
		3: reply(shell("cat b"), "continuing"),
		4: reply(notes("a and b read"), "continuing"),
		5: reply(shell("cat b"), "continuing"),
		6: reply(submitAns("b"), "RESOLVED"),
	})))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-gate", catalog.RunConfig{})
	fin := h.waitFinished("run-gate")
	if fin.Outcome != catalog.OutcomeResolved || fin.Steps != 6 {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-gate")
	assertOnce(t, ds)
	var ids []string
	for _, r := range ofType[*catalog.ToolRequested](ds) {
		ids = append(ids, r.RequestID)
	}
	if strings.Join(ids, ",") != "req-s0001,req-s0002,req-s0005" {
		t.Errorf("requests = %v, want step 3 blocked", ids)
	}
	var gate *catalog.PolicyTriggered
	for _, p := range ofType[*catalog.PolicyTriggered](ds) {
		if p.Rule == catalog.RuleNotesGate {
			gate = p
		}
	}
	if gate == nil || gate.Step != 3 || gate.Effect != catalog.EffectBlock {
		t.Fatalf("notes gate = %+v", gate)
	}
	moves := ofType[*catalog.LedgerMove](ds)
	if len(moves) != 4 || moves[2].Step != 3 || moves[2].Outcome != catalog.LedgerDenied {
		t.Errorf("moves = %+v", moves)
	}
	p := h.model.Requests()[3].LastUserMessage()
	if !strings.Contains(p, "FEEDBACK:") || !strings.Contains(p, gate.Message) {
		t.Errorf("step 4 prompt lacks the gate message %q:\n%s", gate.Message, p)
	}
}

func TestStepBudgetEndsUnresolved(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithFallback(scriptedmodel.Text(reply(shell("ls"), "UNRESOLVED(need more)"))))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-budget", catalog.RunConfig{MaxSteps: 2})
	fin := h.waitFinished("run-budget")
	if fin.Outcome != catalog.OutcomeUnresolved || fin.Reason != "step budget exhausted" || fin.Steps != 2 {
		t.Fatalf("finished = %+v", fin)
	}
	if n := h.model.Count(); n != 2 {
		t.Errorf("%d model calls, want 2", n)
	}
	assertOnce(t, h.events("run-budget"))
}

func TestModelErrorRetriedThenSuccess(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(
		scriptedmodel.Step(1, scriptedmodel.Reply{Status: 500}),
		byStep(map[int]string{1: reply(submitAns("ok"), "RESOLVED")}),
	))
	h.start(h.newAgent("a1"))
	h.submit("run-500", catalog.RunConfig{})
	fin := h.waitFinished("run-500")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "ok" {
		t.Fatalf("finished = %+v", fin)
	}
	if n := h.model.Count(); n != 2 {
		t.Errorf("%d model calls, want 2 (one retry)", n)
	}
}

func TestModelFailureFailsRun(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Status: 503}))
	h.start(h.newAgent("a1"))
	h.submit("run-fail", catalog.RunConfig{})
	fin := h.waitFinished("run-fail")
	if fin.Outcome != catalog.OutcomeFailed || !strings.Contains(fin.Reason, "model call failed") {
		t.Fatalf("finished = %+v", fin)
	}
	if n := h.model.Count(); n != 1+llm.DefaultMaxRetries {
		t.Errorf("%d model calls, want %d", n, 1+llm.DefaultMaxRetries)
	}
}

func TestKilledAfterModelCallResumesWithoutRecalling(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(fourSteps)))
	h.tools(cwdTools)
	a := h.newAgent("a1")
	killed := make(chan struct{})
	var stopA func()
	a.afterModel = func(_ string, step int) error {
		if step != 3 {
			return nil
		}
		close(killed)
		return errors.New("killed after the model call")
	}
	stopA = h.start(a)
	h.submit("run-kill", catalog.RunConfig{})
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("step 3 never reached")
	}
	stopA()
	if n := len(ofType[*catalog.AgentStep](h.events("run-kill"))); n != 2 {
		t.Fatalf("%d steps recorded before the restart, want 2", n)
	}
	h.start(h.newAgent("a2"))
	fin := h.waitFinished("run-kill")
	if fin.Outcome != catalog.OutcomeResolved || fin.Steps != 4 {
		t.Fatalf("finished = %+v", fin)
	}
	if n := h.model.Count(); n != 4 {
		t.Errorf("%d model calls, want 4: the reply of step 3 is reused", n)
	}
	assertOnce(t, h.events("run-kill"))
}

func TestTwoWorkersOneRun(t *testing.T) {
	t.Run("own-durables", func(t *testing.T) { testTwoWorkers(t, false) })
	t.Run("shared-durable", func(t *testing.T) { testTwoWorkers(t, true) })
}

func testTwoWorkers(t *testing.T, shared bool) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(fourSteps)))
	h.tools(cwdTools)
	a, b := h.newAgent("a1"), h.newAgent("a2")
	if !shared {
		// Different durables: each worker sees every event and acts on
		// it; only the fence keeps them apart.
		a = h.newAgent("a1", func(c *Config) { c.Durable = "agent-a" })
		b = h.newAgent("a2", func(c *Config) { c.Durable = "agent-b" })
	}
	h.start(a)
	h.start(b)
	for i := range 3 {
		h.submit("run-two-"+strconv.Itoa(i), catalog.RunConfig{})
	}
	for i := range 3 {
		run := "run-two-" + strconv.Itoa(i)
		fin := h.waitFinished(run)
		if fin.Outcome != catalog.OutcomeResolved || fin.Steps != 4 {
			t.Fatalf("%s finished = %+v", run, fin)
		}
		ds := h.events(run)
		assertOnce(t, ds)
		if n := len(ofType[*catalog.AgentStep](ds)); n != 4 {
			t.Errorf("%s: %d steps", run, n)
		}
	}
	// Racing workers may both call the model for a step; never more.
	if n := h.model.Count(); n > 2*12 {
		t.Errorf("%d model calls for 12 steps", n)
	}
	t.Logf("%d model calls for 12 steps", h.model.Count())
}

// TestFenceRejectsStaleDecision: a decision taken from a history that has
// grown since it was read (another worker's step, a late verdict) is
// refused with bus.ErrConflict; the same event published again after the
// winner's identical one is a duplicate, not a second copy.
func TestFenceRejectsStaleDecision(t *testing.T) {
	h := newHarness(t)
	a := h.newAgent("a1")
	h.submit("run-fence", catalog.RunConfig{})
	ctx := context.Background()
	v, err := a.load(ctx, "run-fence")
	if err != nil {
		t.Fatal(err)
	}
	stale := *v
	stale.ids = map[string]bool{}
	step := catalog.AgentStep{Step: 1, Thought: "x", Action: "{}", ModelCallID: CallID(1)}
	id := bus.DeriveID(v.runID, v.submittedEv.ID, "step")
	if err := a.publish(ctx, v, step, id, v.submittedEv.ID, a.fence(v)); err != nil {
		t.Fatalf("first fenced publish: %v", err)
	}
	// The same decision again (a retry, or a second worker that decided
	// identically): a duplicate, stored once.
	again := stale
	again.ids = map[string]bool{}
	if err := a.publish(ctx, &again, step, id, v.submittedEv.ID, a.fence(&again)); err != nil {
		t.Fatalf("identical fenced publish: %v", err)
	}
	// A different decision from the stale history loses.
	other := stale
	other.ids = map[string]bool{}
	step.Thought = "y"
	err = a.publish(ctx, &other, step, bus.DeriveID(v.runID, v.submittedEv.ID, "other"), v.submittedEv.ID, a.fence(&other))
	if !errors.Is(err, bus.ErrConflict) {
		t.Fatalf("stale fenced publish: err = %v, want ErrConflict", err)
	}
	if n := len(ofType[*catalog.AgentStep](h.events("run-fence"))); n != 1 {
		t.Errorf("%d steps stored, want 1", n)
	}
}

// TestStagnationForcesTool: UNRESOLVED without new evidence for
// StagnationLimit steps fires vera.policy.stagnation (force_tool), whose
// message reaches the next prompt; the budget then ends the run
// UNRESOLVED, not FAILED.
func TestStagnationForcesTool(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: reply(notes("plan: look for the page"), "UNRESOLVED(no source yet)"),
		2: reply(notes("still planning"), "UNRESOLVED(no source yet)"),
		3: reply(notes("more planning"), "UNRESOLVED(no source yet)"),
		4: reply(shell("curl -sL 'https://duckduckgo.com/html/?q=python+3.13+release+date'"), "UNRESOLVED(no source yet)"),
	})))
	h.tools(echoTools)
	a := h.newAgent("a1")
	h.start(a)
	h.submit("run-stag", catalog.RunConfig{MaxSteps: 4})
	fin := h.waitFinished("run-stag")
	if fin.Outcome != catalog.OutcomeUnresolved || fin.Reason != "step budget exhausted" || fin.Steps != 4 {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-stag")
	assertOnce(t, ds)
	var stag *catalog.PolicyTriggered
	for _, p := range ofType[*catalog.PolicyTriggered](ds) {
		if p.Rule == catalog.RuleStagnation && stag == nil {
			stag = p // it fires again at every later step while it lasts
		}
	}
	if stag == nil || stag.Step != 3 || stag.Effect != catalog.EffectForceTool {
		t.Fatalf("stagnation = %+v", stag)
	}
	if p := h.model.Requests()[3].LastUserMessage(); !strings.Contains(p, stag.Message) {
		t.Errorf("step 4 prompt lacks the stagnation message %q:\n%s", stag.Message, p)
	}
	qs := ofType[*catalog.LedgerQuery](ds)
	if len(qs) != 1 || qs[0].EvidenceID != "ev_0001" || qs[0].RequestID != "req-s0004" || qs[0].Family == "" {
		t.Errorf("query ledger = %+v", qs)
	}
	if n := len(ofType[*catalog.NotesAppended](ds)); n != 3 {
		t.Errorf("%d notes appends, want 3", n)
	}

	// Advancing a finished run again (a redelivery, a replay) adds nothing.
	before := len(ds)
	if err := a.Advance(context.Background(), "run-stag"); err != nil {
		t.Fatal(err)
	}
	if after := len(h.events("run-stag")); after != before {
		t.Errorf("re-advancing a finished run stored %d more events", after-before)
	}
}

// TestTaskWithASecretIsRefusedNotEchoed: a task whose api_key_env holds a
// pasted key, or whose model URL holds a password (an outside publisher
// that skipped VERA's own checks), is refused: no vera.run.started echoes
// it, no model is called, and the reason does not repeat it.
func TestTaskWithASecretIsRefusedNotEchoed(t *testing.T) {
	h := newHarness(t)
	h.start(h.newAgent("a1"))
	const key, pw = "sk-live-0123456789abcdefPASTED", "hunter2-secret"
	cases := map[string]catalog.ModelConfig{
		"run-key": {BaseURL: h.model.URL(), Name: "scripted", APIKeyEnv: key},
		"run-pw":  {BaseURL: strings.Replace(h.model.URL(), "http://", "http://me:"+pw+"@", 1), Name: "scripted"},
	}
	for run, m := range cases {
		h.submit(run, catalog.RunConfig{Model: m})
		fin := h.waitFinished(run)
		if fin.Outcome != catalog.OutcomeFailed || !strings.Contains(fin.Reason, "task refused") {
			t.Errorf("%s: finished %+v, want FAILED (task refused)", run, fin)
		}
		for _, d := range h.events(run) {
			if d.ev.Type == catalog.TypeRunStarted {
				t.Errorf("%s: vera.run.started was published", run)
			}
			if d.ev.Type == catalog.TypeTaskSubmitted {
				continue // the outside publisher's own event
			}
			if raw, _ := d.ev.Marshal(); strings.Contains(string(raw), key) || strings.Contains(string(raw), pw) {
				t.Errorf("%s: %s repeats the secret: %s", run, d.ev.Type, raw)
			}
		}
	}
	if n := h.model.Count(); n != 0 {
		t.Errorf("%d model calls for refused tasks", n)
	}
}

// TestLedgerLinesSurviveALostRace: an event of another component stored
// between a result's evidence and its ledger lines makes their fenced
// publish lose the race; the agent re-reads and still publishes them
// (CI once saw a move line missing for this reason).
func TestLedgerLinesSurviveALostRace(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(fourSteps)))
	h.tools(cwdTools)
	a := h.newAgent("a1")
	var once sync.Once
	a.beforeLedger = func(runID, requestID string) {
		once.Do(func() {
			ev, err := h.bus.Events.New(runID, catalog.ContainerLog{Container: "c", ContainerID: "c", Stream: catalog.StreamStdout, Line: "in between", Time: time.Now()})
			if err == nil {
				_, err = h.bus.Publish(context.Background(), ev)
			}
			if err != nil {
				t.Errorf("publish between: %v", err)
			}
		})
	}
	h.start(a)
	h.submit("run1", catalog.RunConfig{})
	if fin := h.waitFinished("run1"); fin.Outcome != catalog.OutcomeResolved {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run1")
	assertOnce(t, ds)
	moves := ofType[*catalog.LedgerMove](ds)
	if len(moves) != 2 || moves[0].EvidenceID != "ev_0001" || moves[1].EvidenceID != "ev_0002" {
		t.Errorf("moves = %+v", moves)
	}
}
