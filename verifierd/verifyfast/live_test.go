package verifyfast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/llm/schematest"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

const (
	liveTask     = "Find the official release date of Python 3.13.0 and quote the source."
	liveAnswer   = "Python 3.13.0 was released on 7 October 2024 (ev_0001, ev_0002)."
	verifyModel  = "verify-model"
	agentModel   = "agent-model"
	uncitedMark  = "UNCITED-EVIDENCE-MARKER"
	unusableMark = "UNUSABLE-FACT-CHECK"
)

// liveModel answers the three phases by the task marker of the system
// prompt. The fact check finds one low error; the logic check a
// reasonable inference (not an error): score 4, GOOD. An answer containing
// unusableMark gets fact-check replies that are never JSON.
func liveModel(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
	pm := phaseRE.FindStringSubmatch(req.Transcript())
	if pm == nil {
		return scriptedmodel.Reply{}, false
	}
	var content string
	switch pm[1] {
	case "DECOMPOSE":
		content = mustJSON(map[string]any{"facts": []string{"Python 3.13.0 was released on 7 October 2024."}, "chains": []string{}})
	case "FACT_CHECK":
		content = mustJSON(map[string]any{"findings": []sf{low("unsupported", "released on 7 October 2024", "Release Date: Oct. 7, 2024")}})
		if strings.Contains(req.Transcript(), unusableMark) {
			content = "I cannot tell without browsing."
		}
	case "LOGIC_CHECK":
		content = mustJSON(map[string]any{"findings": []sf{inference("the release page is the official source", "Release Date: Oct. 7, 2024")}})
	}
	return scriptedmodel.Reply{Content: content, Usage: &scriptedmodel.Usage{PromptTokens: 50, CompletionTokens: 10}}, true
}

// liveEnv is a real bus, the scripted model server and a Live whose
// Models makes real llm clients publishing model I/O events.
type liveEnv struct {
	t    *testing.T
	b    *bus.Bus
	srv  *scriptedmodel.Server
	logs *lockedBuffer

	mu      sync.Mutex
	clients []catalog.ModelConfig

	stop func()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLiveEnv(t *testing.T) *liveEnv {
	t.Helper()
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(liveModel)))
	_, b := bustest.New(t)
	return &liveEnv{t: t, b: b, srv: srv, logs: &lockedBuffer{}}
}

func (e *liveEnv) completer(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
	e.mu.Lock()
	e.clients = append(e.clients, mc)
	e.mu.Unlock()
	quiet := slog.New(slog.DiscardHandler)
	cfg := llmbus.Config(mc)
	cfg.MaxRetries = -1
	cfg.Timeout = 20 * time.Second
	cfg.Logger = quiet
	cfg.Recorder = llmbus.New(e.b, llmbus.Options{Logger: quiet})
	return llm.New(cfg)
}

func (e *liveEnv) completerCalls() []catalog.ModelConfig {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]catalog.ModelConfig(nil), e.clients...)
}

// live is the Live configuration of the tests: the env's models, its
// logs, a short backoff.
func (e *liveEnv) live() Config {
	return Config{
		Models:  e.completer,
		Logger:  slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Backoff: []time.Duration{50 * time.Millisecond},
	}
}

// start runs a Live configured by cfg until the test ends or stop is
// called.
func (e *liveEnv) start(cfg Config) {
	e.t.Helper()
	l, err := New(e.b, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.stop = bustest.Start(e.t, "Live.Run", l.Run)
}

// pub publishes a payload on a run and returns the stored event and its
// stream sequence.
func (e *liveEnv) pub(runID string, p bus.Payload, opts ...bus.EventOption) (bus.Event, uint64) {
	e.t.Helper()
	ev, err := e.b.Events.New(runID, p, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return ev, e.pubEvent(ev)
}

func (e *liveEnv) pubEvent(ev bus.Event) uint64 {
	e.t.Helper()
	ack, err := e.b.Publish(context.Background(), ev)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

func (e *liveEnv) config(enabled bool) catalog.RunConfig {
	return catalog.RunConfig{
		Task:    liveTask,
		WorkDir: "/tmp/work",
		Model:   catalog.ModelConfig{BaseURL: e.srv.URL(), Name: agentModel},
		VerifyFast: catalog.VerifyFastConfig{
			Enabled: enabled,
			Model:   &catalog.ModelConfig{BaseURL: e.srv.URL(), Name: verifyModel},
		},
	}
}

// publishEvidence records ev_0001 (an excerpt), ev_0002 (only an output
// blob) and ev_0003 (never cited).
func (e *liveEnv) publishEvidence(runID string) {
	e.t.Helper()
	e.pub(runID, catalog.EvidenceRecorded{
		EvidenceID: "ev_0001", RequestID: "req-s0004", Step: 4,
		Command: "curl -sL https://www.python.org/downloads/release/python-3130/ | grep -i -m1 'release date'",
		Excerpt: "Release Date: Oct. 7, 2024", URLs: []string{"https://www.python.org/downloads/release/python-3130/"},
	})
	ref, err := e.b.PutBlob(context.Background(), []byte("PEP 719 schedule\n3.13.0 final: 2024-10-07\n"), "text/plain; charset=utf-8")
	if err != nil {
		e.t.Fatal(err)
	}
	e.pub(runID, catalog.EvidenceRecorded{
		EvidenceID: "ev_0002", RequestID: "req-s0006", Step: 6,
		Command: "curl -sL https://peps.python.org/pep-0719/", OutputBlob: &ref,
	})
	e.pub(runID, catalog.EvidenceRecorded{EvidenceID: "ev_0003", RequestID: "req-s0007", Step: 7, Command: "echo", Excerpt: uncitedMark})
}

// publishAuditedRun publishes a whole run whose answer goes to the
// auditor: task, evidence, the submit step citing ev_0001, ev_0002 and the
// unknown ev_0042, and vera.audit.requested (round 1, step 9, without
// evidence_ids). It returns the answer event and its sequence.
func (e *liveEnv) publishAuditedRun(runID string, cfg catalog.RunConfig, answer string) (bus.Event, uint64) {
	e.t.Helper()
	e.pub(runID, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"})
	e.publishEvidence(runID)
	e.pub(runID, catalog.AgentStep{
		Step: 9, Thought: "The release page and PEP 719 agree.", Action: `{"tool":"submit"}`,
		ActionTool: catalog.ActionSubmit, Answer: answer,
		EvidenceUsed: []string{"ev_0001", "ev_0002"}, UnknownEvidence: []string{"ev_0042"},
		ModelCallID: "call-agent-s0009",
	})
	return e.pub(runID, catalog.AuditRequested{Round: 1, Answer: answer, CandidateStep: 9, ToolCalls: 6})
}

func (e *liveEnv) events(runID string, types ...string) []bus.Event {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []bus.Event
	for rec, err := range e.b.Read(ctx, bus.ReadOptions{RunID: runID, Types: types}) {
		if err != nil {
			e.t.Fatal(err)
		}
		if rec.Err == nil {
			out = append(out, rec.Event)
		}
	}
	return out
}

func (e *liveEnv) verifyFastEvents(runID string) []bus.Event {
	return e.events(runID, catalog.TypeVerifyFastPhase, catalog.TypeVerifyFastScored)
}

// waitFor polls until cond holds.
func (e *liveEnv) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s\nlogs:\n%s", what, e.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitScored waits for the scored event of an answer and returns it.
func (e *liveEnv) waitScored(runID, aid string) (bus.Event, catalog.VerifyFastScored) {
	e.t.Helper()
	var ev bus.Event
	e.waitFor("the scored event of "+aid, func() bool {
		for _, x := range e.events(runID, catalog.TypeVerifyFastScored) {
			if x.ID == ScoredEventID(runID, aid) {
				ev = x
				return true
			}
		}
		return false
	})
	var sc catalog.VerifyFastScored
	if err := ev.DecodeData(&sc); err != nil {
		e.t.Fatal(err)
	}
	return ev, sc
}

// waitConsumed waits until the consumer has acknowledged (or
// dead-lettered) every event up to stream sequence seq.
func (e *liveEnv) waitConsumed(seq uint64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("the consumer to ack up to %d", seq), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := e.b.JetStream().Consumer(ctx, bus.StreamName, DefaultLiveDurable)
		if err != nil {
			return false
		}
		info, err := c.Info(ctx)
		return err == nil && info.AckFloor.Stream >= seq && info.NumAckPending == 0
	})
}

// phases returns the phase events of an answer, by phase.
func (e *liveEnv) phases(runID, aid string) map[int]catalog.VerifyFastPhase {
	e.t.Helper()
	out := map[int]catalog.VerifyFastPhase{}
	for _, ev := range e.events(runID, catalog.TypeVerifyFastPhase) {
		var vp catalog.VerifyFastPhase
		if err := ev.DecodeData(&vp); err != nil {
			e.t.Fatal(err)
		}
		if vp.AnswerEventID != aid {
			continue
		}
		if ev.ID != PhaseEventID(ev.RunID, aid, Phase(vp.Phase)) || ev.CausationID != aid || ev.Source != catalog.ComponentVerifyFast {
			e.t.Errorf("phase %d event: id %s causation %s source %s", vp.Phase, ev.ID, ev.CausationID, ev.Source)
		}
		if _, dup := out[vp.Phase]; dup {
			e.t.Errorf("phase %d published twice", vp.Phase)
		}
		out[vp.Phase] = vp
	}
	return out
}

// replay deletes the durable consumer and runs a new Live over the whole
// stream, waiting until it has consumed everything up to seq.
func (e *liveEnv) replay(seq uint64) {
	e.t.Helper()
	e.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.b.JetStream().DeleteConsumer(ctx, bus.StreamName, DefaultLiveDurable); err != nil {
		e.t.Fatal(err)
	}
	e.start(e.live())
	e.waitConsumed(seq)
}

func TestLiveScoresAnAuditedAnswerAgainstItsEvidence(t *testing.T) {
	e := newLiveEnv(t)
	e.start(e.live())
	ans, seq := e.publishAuditedRun("run-a", e.config(true), liveAnswer)
	aid := ans.ID

	scEv, sc := e.waitScored("run-a", aid)
	want := catalog.VerifyFastScored{AnswerEventID: aid, Profile: "", HighCount: 0, LowCount: 1, CreditScore: 4, Zone: catalog.ZoneGood, DurationMS: sc.DurationMS}
	if sc != want {
		t.Errorf("scored = %+v, want %+v", sc, want)
	}
	if scEv.CausationID != aid || scEv.Source != catalog.ComponentVerifyFast {
		t.Errorf("scored event causation %q source %q", scEv.CausationID, scEv.Source)
	}

	ph := e.phases("run-a", aid)
	if len(ph) != 3 {
		t.Fatalf("phase events: %+v", ph)
	}
	if p := ph[1]; p.Name != catalog.PhaseDecompose || len(p.Facts) != 1 || p.ParseError != "" || p.ModelCallID != "call-verifyfast-"+aid+"-p1" {
		t.Errorf("phase 1 = %+v", p)
	}
	if p := ph[2]; p.Name != catalog.PhaseFactCheck || len(p.Errors) != 1 || p.Errors[0].Severity != catalog.SeverityLow ||
		p.Errors[0].Level != catalog.LevelUnsupported || p.Errors[0].Kind != catalog.KindFact || p.Errors[0].Quote == "" {
		t.Errorf("phase 2 = %+v", p)
	}
	if p := ph[3]; p.Name != catalog.PhaseLogicCheck || len(p.Errors) != 0 || p.ParseError != "" {
		t.Errorf("phase 3 = %+v (a reasonable inference is no error)", p)
	}

	// What the model saw: the task and the cited evidence only.
	reqs := e.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model requests = %d, want 3", len(reqs))
	}
	for _, r := range reqs {
		if r.Model != verifyModel {
			t.Errorf("model %q, want the run's verifyfast model", r.Model)
		}
		tr := r.Transcript()
		for _, s := range []string{
			"TASK:\n" + liveTask,
			"EVIDENCE CITED BY THE ANSWER (3 items, 2 found in the run's evidence ledger)",
			"[ev_0001]\ncommand: curl -sL https://www.python.org/downloads/release/python-3130/",
			"urls: https://www.python.org/downloads/release/python-3130/",
			"output:\nRelease Date: Oct. 7, 2024",
			"[ev_0002]", "output:\nPEP 719 schedule\n3.13.0 final: 2024-10-07", // from the blob
			"[ev_0042]\nnot found in the run's evidence ledger",
			liveAnswer,
		} {
			if !strings.Contains(tr, s) {
				t.Errorf("request %d lacks %q:\n%s", r.Index, s, tr)
			}
		}
		if strings.Contains(tr, uncitedMark) {
			t.Errorf("request %d carries evidence the answer does not cite", r.Index)
		}
	}

	// The model I/O events correlate with the answer.
	mreqs := e.events("run-a", catalog.TypeModelRequested)
	if len(mreqs) != 3 {
		t.Fatalf("model.requested events = %d", len(mreqs))
	}
	calls := map[string]bool{}
	for _, ev := range mreqs {
		var mr catalog.ModelRequested
		if err := ev.DecodeData(&mr); err != nil {
			t.Fatal(err)
		}
		if ev.CausationID != aid || mr.Scope != catalog.ScopeVerifyFast || mr.Step != 9 || mr.Round != 1 || mr.Model != verifyModel {
			t.Errorf("model.requested: causation %s, %+v", ev.CausationID, mr)
		}
		calls[mr.CallID+"/"+mr.Purpose] = true
	}
	for _, c := range []string{"p1/decompose_facts", "p2/fact_check", "p3/logic_check"} {
		if !calls["call-verifyfast-"+aid+"-"+c] {
			t.Errorf("no model call %s in %v", c, calls)
		}
	}

	// Replay from scratch: nothing new, no model call.
	before := len(e.verifyFastEvents("run-a"))
	e.replay(seq)
	if got := len(e.verifyFastEvents("run-a")); got != before {
		t.Errorf("replay published %d new events", got-before)
	}
	if n := e.srv.Count(); n != 3 {
		t.Errorf("replay made %d model calls", n-3)
	}
	if n := len(e.completerCalls()); n != 1 {
		t.Errorf("Models called %d times, want 1", n)
	}
	// Skipped because scored, not re-scored from the phases and deduplicated.
	if !strings.Contains(e.logs.String(), "already scored") || strings.Contains(e.logs.String(), "scored from its stored phase events") {
		t.Errorf("replay did not skip the scored answer:\n%s", e.logs.String())
	}
	e.srv.AssertNoMisses(t)
}

func TestLiveRedeliveredAnswerIsScoredOnce(t *testing.T) {
	e := newLiveEnv(t)
	e.start(e.live())
	ans, _ := e.publishAuditedRun("run-a", e.config(true), liveAnswer)
	e.waitScored("run-a", ans.ID)
	// The same event again after the dedup window (a re-import, an
	// outside tool re-publishing) is a new stream message with the same id.
	raw, err := ans.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	subj, _ := ans.NATSSubject()
	ack, err := e.b.PublishRaw(context.Background(), subj, ans.ID+"-again", raw)
	if err != nil {
		t.Fatal(err)
	}
	e.waitConsumed(ack.Sequence)
	if n := len(e.verifyFastEvents("run-a")); n != 4 {
		t.Errorf("verifyfast events = %d, want 4", n)
	}
	if n := e.srv.Count(); n != 3 {
		t.Errorf("model calls = %d, want 3", n)
	}
}

func TestLiveSkipsWhatIsNotToBeScored(t *testing.T) {
	e := newLiveEnv(t)
	e.start(e.live())

	// VerifyFast disabled.
	e.publishAuditedRun("run-disabled", e.config(false), liveAnswer)
	// No configuration on the stream at all.
	e.pub("run-noconfig", catalog.AuditRequested{Round: 1, Answer: liveAnswer, CandidateStep: 1})
	// Cancelled before the answer was handled.
	cfg := e.config(true)
	e.pub("run-cancelled", catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"})
	e.pub("run-cancelled", catalog.RunCancelled{RequestedBy: "test"})
	e.pub("run-cancelled", catalog.AuditRequested{Round: 1, Answer: liveAnswer, CandidateStep: 1})
	// A run that ends without an answer.
	e.pub("run-unresolved", catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"})
	_, seq := e.pub("run-unresolved", catalog.RunFinished{Outcome: catalog.OutcomeUnresolved, Reason: "no official source found", Steps: 12})

	e.waitConsumed(seq)
	for _, run := range []string{"run-disabled", "run-noconfig", "run-cancelled", "run-unresolved"} {
		if evs := e.verifyFastEvents(run); len(evs) != 0 {
			t.Errorf("%s: %d verifyfast events", run, len(evs))
		}
	}
	if n := e.srv.Count(); n != 0 {
		t.Errorf("model calls = %d", n)
	}
	if n := len(e.completerCalls()); n != 0 {
		t.Errorf("Models called %d times", n)
	}
}

func TestLiveDeadLettersMalformedAnswersAndGoesOn(t *testing.T) {
	e := newLiveEnv(t)
	e.start(e.live())
	cfg := e.config(true)

	e.pub("run-bad", catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"})
	bad, err := e.b.Events.NewRaw("run-bad", catalog.TypeAuditRequested, json.RawMessage(`{"round":"first","answer":42}`))
	if err != nil {
		t.Fatal(err)
	}
	e.pubEvent(bad)
	empty, _ := e.pub("run-bad", catalog.AuditRequested{Round: 2, CandidateStep: 3})

	ans, _ := e.publishAuditedRun("run-good", cfg, liveAnswer)
	e.waitScored("run-good", ans.ID)

	dl := e.deadLetters("run-bad", 2)
	if dl[0].EventID != bad.ID || !strings.Contains(dl[0].Reason, "invalid") || dl[0].Consumer != DefaultLiveDurable {
		t.Errorf("dead letter = %+v", dl[0])
	}
	if dl[1].EventID != empty.ID || !strings.Contains(dl[1].Reason, "no answer") {
		t.Errorf("dead letter = %+v", dl[1])
	}
	if evs := e.verifyFastEvents("run-bad"); len(evs) != 0 {
		t.Errorf("run-bad: %d verifyfast events", len(evs))
	}
}

// deadLetters waits for n dead letters of the consumer about a run.
func (e *liveEnv) deadLetters(runID string, n int) []bus.DeadLetter {
	e.t.Helper()
	var out []bus.DeadLetter
	e.waitFor(fmt.Sprintf("%d dead letters", n), func() bool {
		out = out[:0]
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := e.b.JetStream().OrderedConsumer(ctx, bus.DeadLetterStream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{bus.DeadLetterSubject + "." + DefaultLiveDurable + "." + runID},
		})
		if err != nil {
			return false
		}
		batch, err := c.FetchNoWait(100)
		if err != nil {
			return false
		}
		for m := range batch.Messages() {
			var dl bus.DeadLetter
			if err := json.Unmarshal(m.Data(), &dl); err != nil {
				e.t.Fatal(err)
			}
			out = append(out, dl)
		}
		return len(out) >= n
	})
	return out
}

func TestLiveModelUnreachable(t *testing.T) {
	e := newLiveEnv(t)
	lc := e.live()
	lc.MaxDeliver = 2
	e.start(lc)

	down := e.config(true)
	down.VerifyFast.Model = &catalog.ModelConfig{BaseURL: "http://" + bustest.FreeAddr(t) + "/v1", Name: verifyModel}
	ans, _ := e.publishAuditedRun("run-down", down, liveAnswer)

	// Retried once, then the failure is recorded: phase 1 with the
	// reason, no score.
	e.waitFor("the recorded failure", func() bool { return len(e.phases("run-down", ans.ID)) > 0 })
	ph := e.phases("run-down", ans.ID)
	if len(ph) != 1 || !strings.Contains(ph[1].ParseError, "model call failed") {
		t.Errorf("phase events = %+v", ph)
	}
	if got := ph[1].ModelCallID; got != "call-verifyfast-"+ans.ID+"-d2-p1" {
		t.Errorf("call id %q", got)
	}
	if n := len(e.completerCalls()); n != 2 {
		t.Errorf("Models called %d times, want 2 (two deliveries)", n)
	}
	if !strings.Contains(e.logs.String(), "VerifyFast audit failed; no score published") {
		t.Errorf("failure not logged:\n%s", e.logs.String())
	}

	// The consumer goes on.
	good, seq := e.publishAuditedRun("run-up", e.config(true), liveAnswer)
	e.waitScored("run-up", good.ID)
	e.waitConsumed(seq)
	if evs := e.events("run-down", catalog.TypeVerifyFastScored); len(evs) != 0 {
		t.Errorf("a failed audit was scored: %+v", evs)
	}

	// A replay does not try the failed answer again.
	calls := len(e.completerCalls())
	e.replay(seq)
	if n := len(e.completerCalls()); n != calls {
		t.Errorf("replay retried: %d more clients", n-calls)
	}
}

func TestLiveUnusableRepliesPublishParseErrorsAndNoScore(t *testing.T) {
	e := newLiveEnv(t)
	e.start(e.live())
	ans, seq := e.publishAuditedRun("run-a", e.config(true), liveAnswer+" "+unusableMark)
	e.waitFor("three phase events", func() bool { return len(e.phases("run-a", ans.ID)) == 3 })
	e.waitConsumed(seq)

	ph := e.phases("run-a", ans.ID)
	if ph[1].ParseError != "" || ph[3].ParseError != "" || len(ph[1].Facts) != 1 {
		t.Errorf("phases 1 and 3 should have worked: %+v %+v", ph[1], ph[3])
	}
	if p := ph[2]; !strings.Contains(p.ParseError, "no usable reply after 2 attempts") || len(p.Errors) != 0 ||
		p.ModelCallID != "call-verifyfast-"+ans.ID+"-p2-ask2" {
		t.Errorf("phase 2 = %+v", p)
	}
	if evs := e.events("run-a", catalog.TypeVerifyFastScored); len(evs) != 0 {
		t.Errorf("scored despite a failed phase: %+v", evs)
	}
	if n := e.srv.Count(); n != 4 {
		t.Errorf("model calls = %d, want 4 (fact check asked twice)", n)
	}
	e.replay(seq)
	if n := e.srv.Count(); n != 4 {
		t.Errorf("replay made %d model calls", n-4)
	}
	if evs := e.events("run-a", catalog.TypeVerifyFastScored); len(evs) != 0 {
		t.Errorf("replay scored a failed audit: %+v", evs)
	}
}

func TestLiveFinalAnswerWithoutAuditor(t *testing.T) {
	e := newLiveEnv(t)
	e.start(e.live())
	cfg := e.config(true)

	// Auditor disabled: the submit step cites nothing and the run
	// finishes with the answer.
	e.pub("run-final", catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"})
	e.publishEvidence("run-final")
	e.pub("run-final", catalog.AgentStep{Step: 2, Action: `{"tool":"shell"}`, ActionTool: catalog.ActionShell, Command: "ls", EvidenceUsed: []string{"ev_0001"}})
	e.pub("run-final", catalog.AgentStep{Step: 3, Action: `{"tool":"submit"}`, ActionTool: catalog.ActionSubmit, Answer: liveAnswer})
	fin, _ := e.pub("run-final", catalog.RunFinished{Outcome: catalog.OutcomeResolved, Answer: liveAnswer, Steps: 3})

	_, sc := e.waitScored("run-final", fin.ID)
	if sc.CreditScore != 4 || sc.AnswerEventID != fin.ID {
		t.Errorf("scored = %+v", sc)
	}
	for _, r := range e.srv.Requests() {
		tr := r.Transcript()
		if !strings.Contains(tr, "EVIDENCE CITED BY THE ANSWER: none. The answer cites no evidence; the task above is the whole context.") ||
			strings.Contains(tr, "[ev_0001]") {
			t.Errorf("context should be the task alone:\n%s", tr)
		}
	}
	for _, ev := range e.events("run-final", catalog.TypeModelRequested) {
		var mr catalog.ModelRequested
		_ = ev.DecodeData(&mr)
		if mr.Step != 3 || mr.Round != 0 || ev.CausationID != fin.ID {
			t.Errorf("model.requested: step %d round %d causation %s", mr.Step, mr.Round, ev.CausationID)
		}
	}

	// Auditor enabled: the run finishes with the audited answer, which is
	// scored once, as its audit round.
	ans, _ := e.publishAuditedRun("run-audited", cfg, liveAnswer)
	_, seq := e.pub("run-audited", catalog.RunFinished{Outcome: catalog.OutcomeResolved, Answer: liveAnswer, Steps: 9, BestAuditRound: 1, BestScore: 4})
	e.waitScored("run-audited", ans.ID)
	e.waitConsumed(seq)
	if n := len(e.events("run-audited", catalog.TypeVerifyFastScored)); n != 1 {
		t.Errorf("scored events = %d, want 1", n)
	}
	if n := e.srv.Count(); n != 6 {
		t.Errorf("model calls = %d, want 6", n)
	}
}

func TestLiveScoresFromStoredPhasesWithoutModel(t *testing.T) {
	e := newLiveEnv(t)
	e.start(e.live())
	cfg := e.config(true)
	e.pub("run-a", catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"})
	ans, err := e.b.Events.New("run-a", catalog.AuditRequested{Round: 1, Answer: liveAnswer, CandidateStep: 1})
	if err != nil {
		t.Fatal(err)
	}
	// A previous instance published the phases and died before the score.
	for _, vp := range []catalog.VerifyFastPhase{
		{AnswerEventID: ans.ID, Phase: 1, Name: catalog.PhaseDecompose, Facts: []string{"x"}, DurationMS: 10},
		{AnswerEventID: ans.ID, Phase: 2, Name: catalog.PhaseFactCheck, DurationMS: 20, Errors: []catalog.VerifyFastError{
			{Kind: catalog.KindFact, Level: catalog.LevelContradiction, Severity: catalog.SeverityHigh, Claim: "a", Quote: "b", Reason: "c"},
		}},
		{AnswerEventID: ans.ID, Phase: 3, Name: catalog.PhaseLogicCheck, DurationMS: 30},
	} {
		ev, err := e.b.Events.New("run-a", vp, bus.ReactionTo(ans, PhasePurpose(Phase(vp.Phase))))
		if err != nil {
			t.Fatal(err)
		}
		e.pubEvent(ev)
	}
	e.pubEvent(ans)
	_, sc := e.waitScored("run-a", ans.ID)
	if sc.CreditScore != 2 || sc.Zone != catalog.ZoneBad || sc.HighCount != 1 || sc.DurationMS != 40 {
		t.Errorf("scored = %+v", sc)
	}
	if n := e.srv.Count(); n != 0 {
		t.Errorf("model calls = %d", n)
	}
}

func TestLiveUsesTheProfileModel(t *testing.T) {
	e := newLiveEnv(t)
	lc := e.live()
	lc.Settings = testSettings(t, e.srv.URL())
	e.start(lc)
	cfg := e.config(true)
	cfg.VerifyFast = catalog.VerifyFastConfig{Enabled: true, Profile: "cross-verify"}
	ans, _ := e.publishAuditedRun("run-a", cfg, liveAnswer)
	_, sc := e.waitScored("run-a", ans.ID)
	if sc.Profile != "cross-verify" || sc.CreditScore != 4 {
		t.Errorf("scored = %+v", sc)
	}
	for _, r := range e.srv.Requests() {
		if r.Model != qwenModel || r.MaxTokens == nil || *r.MaxTokens != 1000 {
			t.Errorf("request: model %q max_tokens %v, want the profile's verify llm and settings defaults", r.Model, r.MaxTokens)
		}
	}
	for _, ph := range e.phases("run-a", ans.ID) {
		if ph.Profile != "cross-verify" {
			t.Errorf("phase %d profile %q", ph.Phase, ph.Profile)
		}
	}
}

// The run's own VerifyFast model settings replace settings.yaml's
// defaults option by option; every call requests its phase's schema and
// the model I/O events record it.
func TestLiveSamplingAndStructuredOutputs(t *testing.T) {
	e := newLiveEnv(t)
	lc := e.live()
	lc.Settings = testSettings(t, e.srv.URL())
	topP := 0.5
	lc.Settings.Defaults.TopP = &topP
	lc.Settings.Defaults.ExtraBody = map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}
	e.start(lc)
	cfg := e.config(true)
	temp, seed := 0.4, int64(9)
	cfg.VerifyFast.Model.Temperature, cfg.VerifyFast.Model.Seed = &temp, &seed
	ans, _ := e.publishAuditedRun("run-a", cfg, liveAnswer)
	e.waitScored("run-a", ans.ID)
	reqs := e.srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, r := range reqs {
		if r.Temperature == nil || *r.Temperature != temp || r.MaxTokens == nil || *r.MaxTokens != 1000 || r.TopP == nil || *r.TopP != topP ||
			r.Seed == nil || *r.Seed != seed || string(r.Members["chat_template_kwargs"]) != `{"enable_thinking":false}` {
			t.Errorf("temperature %v max_tokens %v top_p %v seed %v kwargs %s", r.Temperature, r.MaxTokens, r.TopP, r.Seed, r.Members["chat_template_kwargs"])
		}
		if name, strict, _ := schematest.Sent(t, r.ResponseFormat); name != wantFormat(t, r).Name || !strict {
			t.Errorf("response_format %s strict %v", name, strict)
		}
	}
	formats := map[string]string{}
	for _, ev := range e.events("run-a", catalog.TypeModelRequested) {
		var d catalog.ModelRequested
		if err := ev.DecodeData(&d); err != nil {
			t.Fatal(err)
		}
		formats[d.Purpose] = d.ResponseFormat
		if d.Params.TopP == nil || *d.Params.TopP != topP || d.Params.Seed == nil || *d.Params.Seed != seed {
			t.Errorf("%s: recorded params %+v", d.Purpose, d.Params)
		}
	}
	want := map[string]string{"decompose_facts": decompositionSchema.Name, "fact_check": findingsSchema.Name, "logic_check": findingsSchema.Name}
	if !reflect.DeepEqual(formats, want) {
		t.Errorf("recorded response formats %v, want %v", formats, want)
	}
}

func TestNewNeedsBusAndModels(t *testing.T) {
	models := func(string, catalog.ModelConfig) (llm.Completer, error) { return nil, nil }
	if _, err := New(nil, Config{Models: models}); err == nil {
		t.Error("New without a bus succeeded")
	}
	_, b := bustest.New(t)
	if _, err := New(b, Config{}); err == nil {
		t.Error("New without Models succeeded")
	}

	c := Config{Models: models}
	if err := c.SetDefaults(); err != nil {
		t.Fatal(err)
	}
	if c.Concurrency != DefaultLiveConcurrency || c.Durable != DefaultLiveDurable || c.MaxDeliver != bus.DefaultMaxDeliver ||
		len(c.Backoff) != len(bus.DefaultBackoff) || c.MaxRepairs != 0 || c.Source != catalog.ComponentVerifyFast || c.Logger == nil {
		t.Errorf("defaults: %+v", c)
	}
	if DefaultLiveDurable != component.Durable(catalog.ComponentVerifyFast, "") {
		t.Errorf("DefaultLiveDurable %q is not the convention's name", DefaultLiveDurable)
	}
	cfg := Config{Models: models, MaxRepairs: -1}
	l, err := New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger != nil || cfg.Durable != "" || cfg.Backoff != nil || cfg.MaxDeliver != 0 {
		t.Errorf("New changed the caller's Config: %+v", cfg)
	}
	if l.Name() != catalog.ComponentVerifyFast || !slices.Contains(l.Consumes(), catalog.TypeAuditRequested) ||
		!slices.Contains(l.Consumes(), catalog.TypeRunFinished) || !slices.Contains(l.Produces(), catalog.TypeVerifyFastScored) ||
		!slices.Equal(l.Produces(), catalog.ProducedBy(catalog.ComponentVerifyFast)) {
		t.Errorf("name %q consumes %v produces %v", l.Name(), l.Consumes(), l.Produces())
	}
}

func TestFormatContext(t *testing.T) {
	got := formatContext("  the task \n", nil)
	if got != "TASK:\nthe task\n\nEVIDENCE CITED BY THE ANSWER: none. The answer cites no evidence; the task above is the whole context.\n" {
		t.Errorf("no evidence:\n%s", got)
	}
	big := strings.Repeat("é", MaxEvidenceBytes) // 2 bytes a rune
	got = formatContext("t", []citedItem{
		{ID: "ev_0001", Found: true, Command: "cat\nfile", ExitCode: 1, Paths: []string{"/work/a"}, Output: big},
		{ID: "ev_0002", Found: true, Command: "x", Note: "the output blob is not in the object store"},
		{ID: "ev_0003", Found: true, Command: "true"},
		{ID: "ev_0009"},
	})
	for _, s := range []string{
		"(4 items, 3 found in the run's evidence ledger)",
		"[ev_0001]\ncommand: cat file\nexit code: 1\npaths: /work/a\noutput:\n",
		fmt.Sprintf("[… %d more bytes not shown]", len(big)-MaxEvidenceBytes),
		"[ev_0002]\ncommand: x\nexit code: 0\noutput: (the output blob is not in the object store)\n",
		"[ev_0003]\ncommand: true\nexit code: 0\noutput: (empty)\n",
		"[ev_0009]\nnot found in the run's evidence ledger\n",
	} {
		if !strings.Contains(got, s) {
			t.Errorf("context lacks %q:\n%.600s", s, got)
		}
	}
	if !utf8.ValidString(got) {
		t.Error("a rune was cut in half")
	}

	// The evidence budget: items beyond it are omitted.
	var items []citedItem
	for i := range MaxContextEvidenceBytes/MaxEvidenceBytes + 2 {
		items = append(items, citedItem{ID: fmt.Sprintf("ev_%04d", i+1), Found: true, Output: strings.Repeat("x", MaxEvidenceBytes)})
	}
	got = formatContext("t", items)
	if n := strings.Count(got, "omitted: the context's evidence limit was reached"); n != 2 {
		t.Errorf("omitted %d items, want 2", n)
	}
}

func TestCallID(t *testing.T) {
	for _, c := range []struct {
		delivery, ask int
		p             Phase
		want          string
	}{
		{1, 1, PhaseDecompose, "call-verifyfast-A-p1"},
		{1, 2, PhaseFactCheck, "call-verifyfast-A-p2-ask2"},
		{3, 1, PhaseLogicCheck, "call-verifyfast-A-d3-p3"},
	} {
		if got := CallID("A", c.delivery, c.p, c.ask); got != c.want {
			t.Errorf("CallID = %q, want %q", got, c.want)
		}
	}
	if PhaseEventID("r", "01JNZ8Q6V3K4T5M2R8X9Y0ABCD", PhaseFactCheck) != bus.DeriveID("r", "01JNZ8Q6V3K4T5M2R8X9Y0ABCD", "verifyfast-phase-2") {
		t.Error("PhaseEventID is not ReactionTo's id")
	}
}

func TestLiveUsesTheAuditRequestsEvidenceIDs(t *testing.T) {
	e := newLiveEnv(t)
	e.start(e.live())
	e.pub("run-a", catalog.TaskSubmitted{RunConfig: e.config(true), SubmittedBy: "test"})
	e.publishEvidence("run-a")
	e.pub("run-a", catalog.AgentStep{Step: 5, Action: `{"tool":"submit"}`, ActionTool: catalog.ActionSubmit, Answer: liveAnswer, EvidenceUsed: []string{"ev_0001"}})
	ans, _ := e.pub("run-a", catalog.AuditRequested{Round: 2, Answer: liveAnswer, CandidateStep: 5, EvidenceIDs: []string{"ev_0003", "ev_0003"}})
	e.waitScored("run-a", ans.ID)
	for _, r := range e.srv.Requests() {
		tr := r.Transcript()
		if !strings.Contains(tr, "(1 item, 1 found in the run's evidence ledger)") || !strings.Contains(tr, uncitedMark) || strings.Contains(tr, "[ev_0001]") {
			t.Errorf("the context should hold the evidence_ids of the request:\n%s", tr)
		}
	}
	for _, ev := range e.events("run-a", catalog.TypeModelRequested) {
		var mr catalog.ModelRequested
		_ = ev.DecodeData(&mr)
		if mr.Round != 2 || mr.Step != 5 {
			t.Errorf("model.requested round %d step %d", mr.Round, mr.Step)
		}
	}
}

func TestLiveDeadLettersWhenNoModelClientCanBeMade(t *testing.T) {
	e := newLiveEnv(t)
	lc := e.live()
	lc.Models = func(string, catalog.ModelConfig) (llm.Completer, error) {
		return nil, errors.New(`environment variable "NO_SUCH_KEY" is not set`)
	}
	e.start(lc)
	ans, _ := e.publishAuditedRun("run-a", e.config(true), liveAnswer)
	dl := e.deadLetters("run-a", 1)
	if dl[0].EventID != ans.ID || !strings.Contains(dl[0].Reason, "model client for verify-model") || !strings.Contains(dl[0].Reason, "NO_SUCH_KEY") {
		t.Errorf("dead letter = %+v", dl[0])
	}
	if n := e.srv.Count(); n != 0 {
		t.Errorf("model calls = %d", n)
	}
}
