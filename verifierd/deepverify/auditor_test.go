package deepverify

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// scenario scripts the auditor's model by prompt kind: the decomposition
// and judge replies per round, the check-loop replies per check and step.
type scenario struct {
	mu        sync.Mutex
	decompose map[int]string
	checks    map[string][]string
	judge     map[int]string
	delay     time.Duration            // before every check-step reply
	delays    map[string]time.Duration // check id → before its replies, instead of delay
	// refuseFormat answers a request carrying response_format with an
	// HTTP 400 naming it, as a server without structured outputs does.
	refuseFormat bool
	// wrap, when set, rewrites every scripted reply text (prose around the
	// JSON, as from a server that ignores response_format).
	wrap func(string) string
}

var (
	decomposeHdr = regexp.MustCompile(`^AUDIT-DECOMPOSE round (\d+)`)
	checkHdr     = regexp.MustCompile(`^AUDIT-CHECK (r\d+-c\d+) step (\d+)`)
	judgeHdr     = regexp.MustCompile(`^AUDIT-JUDGE round (\d+)`)
)

func (s *scenario) reply(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuseFormat && len(req.ResponseFormat) > 0 {
		return scriptedmodel.Reply{Status: 400, ErrorMessage: "response_format is not supported by this server"}, true
	}
	r, ok := s.lookup(req.LastUserMessage())
	if ok && s.wrap != nil {
		r.Content = s.wrap(r.Content)
	}
	return r, ok
}

// lookup finds the scripted reply to a prompt; s.mu is held.
func (s *scenario) lookup(u string) (scriptedmodel.Reply, bool) {
	var n int
	if m := decomposeHdr.FindStringSubmatch(u); m != nil {
		fmt.Sscan(m[1], &n)
		r, ok := s.decompose[n]
		return scriptedmodel.Text(r), ok
	}
	if m := checkHdr.FindStringSubmatch(u); m != nil {
		fmt.Sscan(m[2], &n)
		rs := s.checks[m[1]]
		if n > len(rs) {
			return scriptedmodel.Reply{}, false
		}
		delay := s.delay
		if d, ok := s.delays[m[1]]; ok {
			delay = d
		}
		return scriptedmodel.Reply{Content: rs[n-1], Delay: delay}, true
	}
	if m := judgeHdr.FindStringSubmatch(u); m != nil {
		fmt.Sscan(m[1], &n)
		r, ok := s.judge[n]
		return scriptedmodel.Text(r), ok
	}
	return scriptedmodel.Reply{}, false
}

func countPrompts(srv *scriptedmodel.Server, prefix string) int {
	n := 0
	for _, r := range srv.Requests() {
		if strings.HasPrefix(r.LastUserMessage(), prefix) {
			n++
		}
	}
	return n
}

type harness struct {
	t       testing.TB
	b       *bus.Bus
	natsURL string
	runs    []string // every run the harness made
	srv     *scriptedmodel.Server
	sc      *scenario
	runID   string
	events  *bus.Factory
	start   bus.Event

	// record makes the model client record its calls on the bus
	// (llmbus), as in production; set it before the auditor starts.
	record bool
	// auditorModel, when set, is the auditor model of the runs newRun
	// makes afterwards.
	auditorModel *catalog.ModelConfig

	mu      sync.Mutex
	outputs map[string]string                        // command → stdout
	gates   map[string]chan struct{}                 // command → closed when it may finish
	shapes  map[string]func(f *catalog.ToolFinished) // command → changes to its result (shell state...)
}

const (
	urlPy   = "https://www.python.org/downloads/release/python-3130/"
	urlWiki = "https://en.wikipedia.org/wiki/History_of_Python"
)

func newHarness(t testing.TB, maxRounds int) *harness {
	ns, b := bustest.New(t)
	sc := &scenario{decompose: map[int]string{}, checks: map[string][]string{}, judge: map[int]string{}}
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.Rule{Name: "auditor", Func: sc.reply}))
	h := &harness{t: t, b: b, natsURL: ns.ClientURL(), srv: srv, sc: sc, events: &bus.Factory{Source: "test"},
		outputs: map[string]string{}, gates: map[string]chan struct{}{},
		shapes: map[string]func(*catalog.ToolFinished){}}
	h.newRun("run-audit", maxRounds, "/tmp/w")
	return h
}

// newRun makes runID the harness's run and records its start, notes and
// evidence, as the agent would have.
func (h *harness) newRun(runID string, maxRounds int, workDir string) {
	h.t.Helper()
	h.runID = runID
	h.mu.Lock()
	h.runs = append(h.runs, runID)
	h.mu.Unlock()
	cfg := catalog.RunConfig{Task: "When was Python 3.13.0 released?", WorkDir: workDir,
		Model:   catalog.ModelConfig{BaseURL: h.srv.URL(), Name: "m"},
		Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: maxRounds, Model: h.auditorModel}}
	h.start = h.publish(catalog.RunStarted{AgentID: "a1", Config: cfg})
	h.publish(catalog.NotesAppended{Step: 1, Author: "agent", Text: "Python 3.13.0 release date: see ev_0001, ev_0002."})
	// What the clean room must not see: the agent's thoughts and its own
	// tool traffic.
	h.publish(catalog.AgentStep{Step: 1, Thought: "SECRET-THOUGHT the answer is surely 2024", Action: `{"tool":"shell","command":"curl -sL ` + urlPy + `"}`,
		ActionTool: "shell", Command: "curl -sL " + urlPy, ModelCallID: "call-agent-s0001", RequestID: "req-s0001"})
	h.publish(catalog.ToolFinished{RequestID: "req-s0001", Requester: catalog.RequesterAgent, Stdout: catalog.Output{Head: "AGENT-OUTPUT", Bytes: 12}})
	h.publish(catalog.EvidenceRecorded{EvidenceID: "ev_0001", RequestID: "req-s0001", Step: 1, Command: "curl -sL " + urlPy,
		Excerpt: "Python 3.13.0 Release Date: Oct. 7, 2024", URLs: []string{urlPy}})
	h.publish(catalog.EvidenceRecorded{EvidenceID: "ev_0002", RequestID: "req-s0002", Step: 2, Command: "curl -sL " + urlWiki,
		Excerpt: "3.13 | 2024-10-07", URLs: []string{urlWiki}})
}

func (h *harness) publish(p bus.Payload, opts ...bus.EventOption) bus.Event {
	h.t.Helper()
	ev, err := h.events.New(h.runID, p, opts...)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.b.Publish(context.Background(), ev); err != nil {
		h.t.Fatal(err)
	}
	return ev
}

func (h *harness) request(round int, answer string, evidence ...string) {
	h.publish(catalog.AuditRequested{Round: round, Answer: answer, CandidateStep: 3 * round, EvidenceIDs: evidence, ToolCalls: 2})
}

// client is the real model client against the scripted server.
func (h *harness) models() component.Models {
	cfg := llm.Config{BaseURL: h.srv.URL(), Model: "m", MaxRetries: -1}
	if h.record {
		cfg.Recorder = llmbus.New(h.b, llmbus.Options{Logger: bustest.Logger(h.t)})
	}
	c, err := llm.New(cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(c.Close)
	return func(runID string, mc catalog.ModelConfig) (llm.Completer, error) {
		h.mu.Lock()
		known := slices.Contains(h.runs, runID)
		h.mu.Unlock()
		if !known {
			return nil, fmt.Errorf("unexpected run %q", runID)
		}
		if mc.Name != "m" {
			return nil, fmt.Errorf("unexpected model %q", mc.Name)
		}
		return c, nil
	}
}

// newAuditor makes an auditor on the harness's bus; cfg's Models and
// Logger default to the harness's.
func (h *harness) newAuditor(cfg Config) *Auditor {
	h.t.Helper()
	if cfg.Models == nil {
		cfg.Models = h.models()
	}
	if cfg.Logger == nil {
		cfg.Logger = bustest.Logger(h.t)
	}
	a, err := New(h.b, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// runAuditor starts an auditor; the returned stop cancels it and waits.
func (h *harness) runAuditor() (*Auditor, func()) {
	a := h.newAuditor(Config{})
	return a, bustest.Start(h.t, "auditor", a.Run)
}

// runToolAnswerer stands in for sandboxd: it answers the auditor's tool
// requests with canned output.
func (h *harness) runToolAnswerer() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var held sync.WaitGroup
	go func() {
		done <- h.b.Consume(ctx, bus.ConsumerConfig{Durable: "test-sandbox", Types: []string{catalog.TypeToolRequested}},
			func(ctx context.Context, m *bus.Message) error {
				var d catalog.ToolRequested
				if err := m.Event.DecodeData(&d); err != nil {
					return bus.Permanent(err)
				}
				if d.Requester != catalog.RequesterAuditor {
					return nil
				}
				h.mu.Lock()
				out, ok := h.outputs[d.Command]
				gate := h.gates[d.Command]
				shape := h.shapes[d.Command]
				h.mu.Unlock()
				fin := catalog.ToolFinished{RequestID: d.RequestID, Requester: d.Requester, ExitCode: 0, DurationMS: 5,
					Stdout: catalog.Output{Head: out, Bytes: int64(len(out))}, CwdAfter: "/work"}
				if !ok {
					fin.ExitCode = 127
					fin.Stderr = catalog.Output{Head: "command not found", Bytes: 17}
				}
				if shape != nil {
					shape(&fin)
				}
				ev, err := h.events.New(m.Event.RunID, fin, bus.ReactionTo(m.Event, "finished"))
				if err != nil {
					return err
				}
				if gate == nil {
					_, err = h.b.Publish(ctx, ev)
					return err
				}
				// A slow command: answer later, without holding up the others.
				held.Add(1)
				go func() {
					defer held.Done()
					select {
					case <-gate:
						if _, err := h.b.Publish(ctx, ev); err != nil && ctx.Err() == nil {
							h.t.Errorf("publish held tool.finished: %v", err)
						}
					case <-ctx.Done():
					}
				}()
				return nil
			})
	}()
	h.t.Cleanup(func() {
		cancel()
		held.Wait()
		if err := <-done; err != nil {
			h.t.Errorf("tool answerer: %v", err)
		}
	})
}

// wait polls the run until cond holds.
func (h *harness) wait(what string, cond func(evs []bus.Event) bool) []bus.Event {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs, err := h.b.ReadRun(context.Background(), h.runID)
		if err != nil {
			h.t.Fatal(err)
		}
		if cond(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			var types []string
			for _, e := range evs {
				types = append(types, e.Type)
			}
			h.t.Fatalf("timed out waiting for %s; events: %v; model misses: %v", what, types, h.srv.Misses())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func payloads[T bus.Payload](evs []bus.Event) []T {
	var out []T
	var zero T
	for _, e := range evs {
		if e.Type == zero.EventType() {
			var d T
			if err := e.DecodeData(&d); err == nil {
				out = append(out, d)
			}
		}
	}
	return out
}

func feedbackFor(round int) func([]bus.Event) bool {
	return func(evs []bus.Event) bool {
		for _, f := range payloads[catalog.AuditFeedback](evs) {
			if f.Round == round {
				return true
			}
		}
		return false
	}
}

func judgedRound(t *testing.T, evs []bus.Event, round int) catalog.AuditJudged {
	t.Helper()
	for _, j := range payloads[catalog.AuditJudged](evs) {
		if j.Round == round {
			return j
		}
	}
	t.Fatalf("no judged round %d", round)
	return catalog.AuditJudged{}
}

func feedbackRound(t *testing.T, evs []bus.Event, round int) catalog.AuditFeedback {
	t.Helper()
	for _, f := range payloads[catalog.AuditFeedback](evs) {
		if f.Round == round {
			return f
		}
	}
	t.Fatalf("no feedback round %d", round)
	return catalog.AuditFeedback{}
}

const goodAnswer = "Python 3.13.0 was released on 2024-10-07 (" + urlPy + "; " + urlWiki + ")."

// standard scripts round n with two checks: c1 runs one command then says
// yes; c2 says yes at once; the judge gives score.
func (h *harness) standard(n int, score int, instructions ...string) {
	c1, c2 := CheckID(n, 1), CheckID(n, 2)
	h.sc.mu.Lock()
	defer h.sc.mu.Unlock()
	h.sc.decompose[n] = `{"summary":[{"step":1,"source":"ev_0001","finding":"python.org lists Release Date: Oct. 7, 2024"},{"step":2,"source":"ev_0002","finding":"Wikipedia table: 3.13 | 2024-10-07"}],
"likely_errors":[{"class":"finding_sources","justification":"only two sources"}],
"checks":[{"source":"` + urlPy + `","question":"Does python.org give Oct. 7, 2024 as the release date of 3.13.0?","load_bearing":true},
{"source":"` + urlWiki + `","question":"Does Wikipedia list 3.13 with 2024-10-07?","load_bearing":true}]}`
	h.sc.checks[c1] = []string{
		`{"command":"curl -sL ` + urlPy + ` | grep -i 'release date'"}`,
		`Here: {"verdict":"yes","evidence":"curl ... | grep: Release Date: Oct. 7, 2024","citations":["` + urlPy + `"]}`,
	}
	h.sc.checks[c2] = []string{`{"verdict":"yes","evidence":"ev_0002: 3.13 | 2024-10-07","citations":["` + urlWiki + `"]}`}
	ins := `[]`
	if len(instructions) > 0 {
		ins = `["` + strings.Join(instructions, `","`) + `"]`
	}
	h.sc.judge[n] = fmt.Sprintf(`{"explanation":"round %d","score":%d,"instructions":%s}`, n, score, ins)
	h.mu.Lock()
	h.outputs["curl -sL "+urlPy+" | grep -i 'release date'"] = "Release Date: Oct. 7, 2024\n"
	h.mu.Unlock()
}

func TestAcceptedInRoundOne(t *testing.T) {
	h := newHarness(t, 3)
	h.standard(1, 4)
	h.runToolAnswerer()
	h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback", feedbackFor(1))

	d := payloads[catalog.AuditDecomposed](evs)
	if len(d) != 1 || len(d[0].Checks) != 2 || d[0].Checks[0].CheckID != "r1-c1" || len(d[0].Summary) != 2 || len(d[0].LikelyErrors) != 1 {
		t.Fatalf("decomposed = %+v", d)
	}
	if n := len(payloads[catalog.AuditCheckStarted](evs)); n != 2 {
		t.Errorf("%d check_started, want 2", n)
	}
	var auditorReqs []catalog.ToolRequested
	for _, r := range payloads[catalog.ToolRequested](evs) {
		if r.Requester == catalog.RequesterAuditor {
			auditorReqs = append(auditorReqs, r)
		}
	}
	if len(auditorReqs) != 1 || auditorReqs[0].RequestID != "req-r1-c1-t1" || auditorReqs[0].Round != 1 || auditorReqs[0].CheckID != "r1-c1" || auditorReqs[0].Step != 3 {
		t.Errorf("auditor tool requests = %+v", auditorReqs)
	}
	checks := payloads[catalog.AuditCheck](evs)
	if len(checks) != 2 {
		t.Fatalf("checks = %+v", checks)
	}
	for _, c := range checks {
		if c.Result != catalog.CheckYes || !c.LoadBearing {
			t.Errorf("check = %+v", c)
		}
		if c.CheckID == "r1-c1" && (len(c.ToolRequestIDs) != 1 || c.ToolRequestIDs[0] != "req-r1-c1-t1") {
			t.Errorf("check r1-c1 tool ids = %v", c.ToolRequestIDs)
		}
	}
	j := judgedRound(t, evs, 1)
	if j.Score != 4 || j.RawScore != 4 || len(j.Caps) != 0 || j.BestRound != 1 || j.BestScore != 4 || j.ModelCallID == "" {
		t.Errorf("judged = %+v", j)
	}
	f := feedbackRound(t, evs, 1)
	if !f.Accepted || !f.Final || f.Score != 4 || !strings.Contains(f.Message, "ACCEPTED") {
		t.Errorf("feedback = %+v", f)
	}
	// Clean room: the prompts carry task, notes and evidence, never the
	// agent's chat.
	for _, r := range h.srv.Requests() {
		if tr := r.Transcript(); strings.Contains(tr, "SECRET-THOUGHT") || strings.Contains(tr, "AGENT-OUTPUT") {
			t.Errorf("agent chat leaked into an auditor prompt")
		}
	}
	var decomposePrompt string
	for _, r := range h.srv.Requests() {
		if strings.HasPrefix(r.LastUserMessage(), "AUDIT-DECOMPOSE") {
			decomposePrompt = r.LastUserMessage()
		}
	}
	for _, want := range []string{"When was Python 3.13.0 released?", "see ev_0001, ev_0002", "ev_0002 (step 2", "Release Date: Oct. 7, 2024", goodAnswer} {
		if !strings.Contains(decomposePrompt, want) {
			t.Errorf("decomposition prompt lacks %q", want)
		}
	}
	if got := h.srv.Count(); got != 5 {
		t.Errorf("%d model calls, want 5 (decompose, 2+1 check steps, judge)", got)
	}
	h.srv.AssertNoMisses(t)
}

func TestRejectedThenAccepted(t *testing.T) {
	h := newHarness(t, 3)
	instr := "Run `curl -sL " + urlPy + "` and quote the release date line"
	h.standard(1, 2, instr)
	h.standard(2, 3)
	h.runToolAnswerer()
	h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback 1", feedbackFor(1))
	f := feedbackRound(t, evs, 1)
	if f.Accepted || f.Final || f.Score != 2 || len(f.Instructions) != 1 || !strings.Contains(f.Message, instr) {
		t.Fatalf("feedback 1 = %+v", f)
	}
	c := InstructionConcreteness(f.Instructions[0])
	if !c.HasURL || !c.HasCmd {
		t.Errorf("instruction concreteness = %+v", c)
	}
	// The agent follows the instructions and resubmits.
	h.request(2, goodAnswer, "ev_0001", "ev_0002")
	evs = h.wait("feedback 2", feedbackFor(2))
	f = feedbackRound(t, evs, 2)
	if !f.Accepted || !f.Final || f.Score != 3 {
		t.Errorf("feedback 2 = %+v", f)
	}
	j := judgedRound(t, evs, 2)
	if j.BestRound != 2 || j.BestScore != 3 {
		t.Errorf("judged 2 = %+v", j)
	}
	var reqs []string
	for _, r := range payloads[catalog.ToolRequested](evs) {
		reqs = append(reqs, r.RequestID)
	}
	if strings.Join(reqs, ",") != "req-r1-c1-t1,req-r2-c1-t1" {
		t.Errorf("tool requests = %v", reqs)
	}
	h.srv.AssertNoMisses(t)
}

func TestScoutCaps(t *testing.T) {
	tests := []struct {
		name   string
		answer string
		edit   func(sc *scenario)
		rule   string
	}{
		{name: "unknown load-bearing check", answer: goodAnswer, rule: RuleUnknownLoadBearing,
			edit: func(sc *scenario) {
				sc.checks["r1-c2"] = []string{`{"verdict":"unknown","evidence":"the page did not load"}`}
			}},
		{name: "uncovered negative claim",
			answer: "There has been no official announcement of Python 4 (" + urlPy + "; " + urlWiki + ").",
			rule:   RuleNegativeClaimCoverage},
		{name: "single-domain citations",
			answer: "Python 3.13.0 was released on 2024-10-07 (" + urlPy + "; https://docs.python.org/3.13/whatsnew/3.13.html).",
			rule:   RuleIndependentCitations,
			edit: func(sc *scenario) {
				sc.checks["r1-c2"] = []string{`{"verdict":"yes","evidence":"docs say 3.13","citations":["https://docs.python.org/3.13/"]}`}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, 3)
			h.standard(1, 4)
			if tt.edit != nil {
				tt.edit(h.sc)
			}
			h.runToolAnswerer()
			h.runAuditor()
			h.request(1, tt.answer) // cites no ledger evidence: only its own URLs
			evs := h.wait("feedback", feedbackFor(1))
			j := judgedRound(t, evs, 1)
			if j.RawScore != 4 || j.Score != 2 || len(j.Caps) != 1 || j.Caps[0].Rule != tt.rule || j.Caps[0].Reason == "" {
				t.Fatalf("judged = %+v, want raw 4 capped to 2 by %s", j, tt.rule)
			}
			f := feedbackRound(t, evs, 1)
			if f.Accepted || f.Final || f.Score != 2 || !strings.Contains(f.Message, tt.rule) {
				t.Errorf("feedback = %+v", f)
			}
		})
	}
}

func TestBestKeptWhenLaterRoundRegresses(t *testing.T) {
	h := newHarness(t, 3)
	h.standard(1, 1, "Cite ev_0001")
	h.standard(2, 2, "Cite ev_0002")
	h.standard(3, 1, "Cite ev_0001")
	h.runToolAnswerer()
	h.runAuditor()
	for round := 1; round <= 3; round++ {
		h.request(round, fmt.Sprintf("Round %d: %s", round, goodAnswer), "ev_0001", "ev_0002")
		evs := h.wait(fmt.Sprintf("feedback %d", round), feedbackFor(round))
		f := feedbackRound(t, evs, round)
		if f.Accepted || f.Final != (round == 3) {
			t.Fatalf("feedback %d = %+v", round, f)
		}
	}
	evs := h.wait("all", feedbackFor(3))
	j := judgedRound(t, evs, 3)
	if j.Score != 1 || j.BestRound != 2 || j.BestScore != 2 {
		t.Errorf("judged 3 = %+v, want best round 2 score 2", j)
	}
	f := feedbackRound(t, evs, 3)
	if !strings.Contains(f.Message, "answer of round 2 (score 2) is kept") {
		t.Errorf("final feedback message = %q", f.Message)
	}
}

func TestRestartMidRoundRepeatsNoFinishedCheck(t *testing.T) {
	h := newHarness(t, 3)
	h.standard(1, 4)
	slow := "curl -sL " + urlWiki + " | grep 3.13"
	h.sc.mu.Lock()
	h.sc.checks["r1-c2"] = []string{`{"command":"` + slow + `"}`,
		`{"verdict":"yes","evidence":"3.13 | 2024-10-07","citations":["` + urlWiki + `"]}`}
	h.sc.mu.Unlock()
	gate := make(chan struct{})
	h.mu.Lock()
	h.outputs[slow] = "| 3.13 | 2024-10-07 |\n"
	h.gates[slow] = gate
	h.mu.Unlock()
	h.runToolAnswerer()

	_, stop1 := h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	h.wait("check r1-c1 done", func(evs []bus.Event) bool {
		for _, c := range payloads[catalog.AuditCheck](evs) {
			if c.CheckID == "r1-c1" {
				return true
			}
		}
		return false
	})
	stop1() // the auditor dies mid-round: r1-c2 waits for its command

	before := h.srv.Count()
	a2, _ := h.runAuditor()
	// A restart reconciles: nothing is missing but the pending command.
	if err := a2.Advance(context.Background(), h.runID); err != nil {
		t.Fatal(err)
	}
	if got := h.srv.Count(); got != before {
		t.Fatalf("restart made %d model calls while waiting for a tool", got-before)
	}
	close(gate)
	evs := h.wait("feedback", feedbackFor(1))

	if n := countPrompts(h.srv, "AUDIT-DECOMPOSE"); n != 1 {
		t.Errorf("%d decompositions, want 1", n)
	}
	if n := countPrompts(h.srv, "AUDIT-CHECK r1-c1"); n != 2 {
		t.Errorf("check r1-c1 asked the model %d times, want 2", n)
	}
	if n := countPrompts(h.srv, "AUDIT-CHECK r1-c2"); n != 2 {
		t.Errorf("check r1-c2 asked the model %d times, want 2", n)
	}
	if got := h.srv.Count(); got != 6 {
		t.Errorf("%d model calls in all, want 6", got)
	}
	if n := len(payloads[catalog.AuditCheck](evs)); n != 2 {
		t.Errorf("%d audit.check events, want 2", n)
	}
	if n := len(payloads[catalog.AuditJudged](evs)); n != 1 {
		t.Errorf("%d audit.judged events, want 1", n)
	}
	if f := feedbackRound(t, evs, 1); !f.Accepted {
		t.Errorf("feedback = %+v", f)
	}
}

func TestReaskOnceOnMalformedReply(t *testing.T) {
	h := newHarness(t, 3)
	h.standard(1, 4)
	var calls int
	h.sc.mu.Lock()
	h.sc.checks["r1-c2"] = nil
	h.sc.mu.Unlock()
	// r1-c2's first reply is prose; the re-ask (last user message is the
	// re-ask prompt) gets the verdict.
	h.srv.AddRules(scriptedmodel.Rule{Name: "reask", Func: func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		if !strings.Contains(req.Transcript(), "AUDIT-CHECK r1-c2") {
			return scriptedmodel.Reply{}, false
		}
		calls++
		if strings.HasPrefix(req.LastUserMessage(), "Your reply could not be parsed") {
			return scriptedmodel.Text(`{"verdict":"yes","evidence":"ok","citations":["` + urlWiki + `"]}`), true
		}
		return scriptedmodel.Text("I think the answer is probably yes."), true
	}})
	h.runToolAnswerer()
	h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback", feedbackFor(1))
	for _, c := range payloads[catalog.AuditCheck](evs) {
		if c.CheckID == "r1-c2" && c.Result != catalog.CheckYes {
			t.Errorf("check r1-c2 = %+v", c)
		}
	}
	if calls != 2 {
		t.Errorf("r1-c2 model calls = %d, want 2", calls)
	}
	if j := judgedRound(t, evs, 1); j.Score != 4 {
		t.Errorf("judged = %+v", j)
	}
}

func TestMalformedRequestDoesNotStopTheAuditor(t *testing.T) {
	h := newHarness(t, 3)
	h.standard(1, 4)
	h.runToolAnswerer()
	h.runAuditor()
	bad := h.publish(catalog.AuditRequested{Round: 0, Answer: "x"}) // dead-lettered
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback", feedbackFor(1))
	if n := len(payloads[catalog.AuditDecomposed](evs)); n != 1 {
		t.Errorf("%d decompositions, want 1", n)
	}
	// The catalogue's schema rejected it before the auditor saw it.
	s, err := h.b.JetStream().Stream(t.Context(), bus.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(t.Context(), bus.DeadLetterSubject+"."+Durable+"."+h.runID)
	if err != nil {
		t.Fatal(err)
	}
	var dl bus.DeadLetter
	if err := json.Unmarshal(m.Data, &dl); err != nil {
		t.Fatal(err)
	}
	if dl.EventID != bad.ID || !strings.HasPrefix(dl.Reason, "rejected: ") || !strings.Contains(dl.Reason, "round") {
		t.Errorf("dead letter %+v", dl)
	}
}

func TestChecksRunConcurrently(t *testing.T) {
	h := newHarness(t, 3)
	h.standard(1, 4)
	h.sc.mu.Lock()
	h.sc.decompose[1] = `{"summary":[],"likely_errors":[],"checks":[{"source":"` + urlPy + `","question":"A?"},{"source":"` + urlWiki + `","question":"B?"},{"source":"` + urlPy + `","question":"C?"}]}`
	for i := 1; i <= 3; i++ {
		h.sc.checks[CheckID(1, i)] = []string{`{"verdict":"yes","evidence":"q","citations":["` + urlWiki + `","` + urlPy + `"]}`}
	}
	h.sc.delay = 400 * time.Millisecond
	h.sc.mu.Unlock()
	h.runToolAnswerer()
	h.runAuditor()

	peak := 0
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				peak = max(peak, h.srv.InFlight())
			}
		}
	}()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback", feedbackFor(1))
	close(stop)
	<-polled
	if peak < 2 {
		t.Errorf("at most %d model call in flight: checks did not run concurrently", peak)
	}
	if n := len(payloads[catalog.AuditCheck](evs)); n != 3 {
		t.Errorf("%d checks, want 3", n)
	}
}

// A crash can leave a round anywhere; here the stream holds the
// decomposition and r1-c1's result as a dead auditor left them. A new
// auditor finishes the round without redoing either.
func TestResumesFromRecordedPartialRound(t *testing.T) {
	h := newHarness(t, 3)
	h.standard(1, 4)
	req := h.publish(catalog.AuditRequested{Round: 1, Answer: goodAnswer, CandidateStep: 3, EvidenceIDs: []string{"ev_0001", "ev_0002"}})
	dead := &bus.Factory{Source: catalog.ComponentDeepVerify}
	for _, p := range []struct {
		payload bus.Payload
		purpose string
	}{
		{catalog.AuditDecomposed{Round: 1, Checks: []catalog.AuditCheckPlan{
			{CheckID: "r1-c1", Source: urlPy, Question: "A?", LoadBearing: true},
			{CheckID: "r1-c2", Source: urlWiki, Question: "B?", LoadBearing: true}}}, "decomposed"},
		{catalog.AuditCheckStarted{Round: 1, CheckID: "r1-c1", Question: "A?"}, "check_started:r1-c1"},
		{catalog.AuditCheck{Round: 1, CheckID: "r1-c1", Source: urlPy, Question: "A?", LoadBearing: true, Result: catalog.CheckYes,
			Evidence: "Release Date: Oct. 7, 2024", Citations: []string{urlPy}}, "check:r1-c1"},
	} {
		ev, err := dead.New(h.runID, p.payload, bus.ReactionTo(req, p.purpose))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.b.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
	h.runToolAnswerer()
	a := h.newAuditor(Config{})
	if err := a.Advance(context.Background(), h.runID); err != nil { // as on the redelivery of audit.requested
		t.Fatal(err)
	}
	evs := h.wait("feedback", feedbackFor(1))
	if n := countPrompts(h.srv, "AUDIT-DECOMPOSE") + countPrompts(h.srv, "AUDIT-CHECK r1-c1"); n != 0 {
		t.Errorf("%d model calls redid finished work", n)
	}
	if n := countPrompts(h.srv, "AUDIT-CHECK r1-c2"); n != 1 {
		t.Errorf("r1-c2 asked %d times, want 1", n)
	}
	if n := len(payloads[catalog.AuditCheckStarted](evs)); n != 2 {
		t.Errorf("%d check_started, want 2", n)
	}
	if n := len(payloads[catalog.AuditDecomposed](evs)); n != 1 {
		t.Errorf("%d decomposed, want 1", n)
	}
	if f := feedbackRound(t, evs, 1); !f.Accepted {
		t.Errorf("feedback = %+v", f)
	}
	// Advancing again changes nothing.
	before := len(evs)
	if err := a.Advance(context.Background(), h.runID); err != nil {
		t.Fatal(err)
	}
	after, err := h.b.ReadRun(context.Background(), h.runID)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != before {
		t.Errorf("a second Advance appended %d events", len(after)-before)
	}
}

func TestNewChecksAndShape(t *testing.T) {
	models := func(string, catalog.ModelConfig) (llm.Completer, error) { return nil, nil }
	if _, err := New(nil, Config{Models: models}); err == nil {
		t.Error("New without a bus succeeded")
	}
	if _, err := New(&bus.Bus{}, Config{}); err == nil {
		t.Error("New without Models succeeded")
	}
	c := Config{Models: models}
	if err := c.SetDefaults(); err != nil {
		t.Fatal(err)
	}
	if c.MaxCheckSteps != DefaultMaxCheckSteps || c.Source != catalog.ComponentDeepVerify || c.ToolTimeout != DefaultToolTimeout ||
		c.Concurrency != DefaultConcurrency || c.AckWait != bus.DefaultAckWait || c.Durable != Durable || c.Logger == nil || c.Clock != nil {
		t.Errorf("defaults: %+v", c)
	}
	if Durable != component.Durable(catalog.ComponentDeepVerify, "") {
		t.Errorf("Durable %q is not the convention's name", Durable)
	}
	cfg := Config{Models: models, MaxCheckSteps: 2}
	a, err := New(&bus.Bus{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger != nil || cfg.Source != "" || cfg.Durable != "" {
		t.Errorf("New changed the caller's Config: %+v", cfg)
	}
	if a.Name() != catalog.ComponentDeepVerify || !slices.Contains(a.Consumes(), catalog.TypeAuditRequested) ||
		!slices.Contains(a.Consumes(), catalog.TypeToolFinished) || !slices.Contains(a.Produces(), catalog.TypeAuditFeedback) ||
		!slices.Equal(a.Produces(), catalog.ProducedBy(catalog.ComponentDeepVerify)) {
		t.Errorf("name %q consumes %v produces %v", a.Name(), a.Consumes(), a.Produces())
	}
}
