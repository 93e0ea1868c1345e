package traces_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector/traces"
)

// demoRun reads the demo's recorded run (cmd/vera/demo): a real audited
// run of the whole system.
func demoRun(t testing.TB) (string, []bus.Event) {
	t.Helper()
	x := demoExport(t)
	return x.Order[0], x.Runs[x.Order[0]]
}

func demoExport(t testing.TB) bus.ExportEvents {
	t.Helper()
	f, err := os.Open("../../cmd/vera/demo/example-run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, err := bus.ReadExportEvents(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Order) != 1 {
		t.Fatalf("demo file holds %d runs", len(x.Order))
	}
	return x
}

func attr(s *traces.Span, key string) (attribute.Value, bool) {
	for _, kv := range s.Attrs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func evAttr(e traces.SpanEvent, key string) (attribute.Value, bool) {
	for _, kv := range e.Attrs {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func byName(spans []*traces.Span, name string) []*traces.Span {
	var out []*traces.Span
	for _, s := range spans {
		if s.Name == name || strings.HasPrefix(s.Name, name+" ") {
			out = append(out, s)
		}
	}
	return out
}

func TestProjectDemo(t *testing.T) {
	run, evs := demoRun(t)
	spans := traces.Project(run, evs, traces.Options{})

	// Counts from the stream itself.
	calls, tools, rounds, checks := map[string]bool{}, map[string]bus.Event{}, 0, 0
	var judged []catalog.AuditJudged
	for _, ev := range evs {
		switch ev.Type {
		case catalog.TypeModelRequested:
			var d catalog.ModelRequested
			json.Unmarshal(ev.Data, &d)
			calls[d.CallID] = true
		case catalog.TypeToolRequested:
			var d catalog.ToolRequested
			json.Unmarshal(ev.Data, &d)
			tools[d.RequestID] = ev
		case catalog.TypeAuditRequested:
			rounds++
		case catalog.TypeAuditCheckStarted:
			checks++
		case catalog.TypeAuditJudged:
			var d catalog.AuditJudged
			json.Unmarshal(ev.Data, &d)
			judged = append(judged, d)
		}
	}
	if got, want := len(spans), 1+len(calls)+len(tools)+rounds+checks; got != want {
		t.Fatalf("%d spans, want %d (root + %d calls + %d tools + %d rounds + %d checks)", got, want, len(calls), len(tools), rounds, checks)
	}

	ids := map[[8]byte]*traces.Span{}
	for _, s := range spans {
		if _, dup := ids[s.ID]; dup {
			t.Fatalf("span id %x twice", s.ID)
		}
		ids[s.ID] = s
		if !s.Ended() || s.End.Before(s.Start) {
			t.Errorf("%s: start %v end %v", s.Name, s.Start, s.End)
		}
		if _, ok := attr(s, "vera.unfinished"); ok {
			t.Errorf("%s is unfinished in a finished run", s.Name)
		}
	}
	var root *traces.Span
	for _, s := range spans {
		if s.Parent == ([8]byte{}) {
			if root != nil {
				t.Fatal("two roots")
			}
			root = s
		} else if _, ok := ids[s.Parent]; !ok {
			t.Errorf("%s has a parent %x that is not in the trace", s.Name, s.Parent)
		}
	}
	if root.Name != "invoke_agent vera" || root.ID != bus.RootSpanID(run) {
		t.Fatalf("root = %s %x", root.Name, root.ID)
	}
	for key, want := range map[string]string{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "vera", "gen_ai.conversation.id": run, "vera.outcome": "RESOLVED", "gen_ai.provider.name": "openai_compatible"} {
		if v, ok := attr(root, key); !ok || v.AsString() != want {
			t.Errorf("root %s = %v, want %q", key, v.Emit(), want)
		}
	}
	var finished time.Time
	for _, ev := range evs {
		if ev.Type == catalog.TypeRunFinished {
			finished = ev.Time
		}
	}
	if !root.Start.Equal(evs[0].Time) || !root.End.Equal(finished) {
		t.Errorf("root spans %v..%v, want task.submitted..run.finished %v..%v", root.Start, root.End, evs[0].Time, finished)
	}

	for _, s := range byName(spans, "chat") {
		if v, _ := attr(s, "gen_ai.operation.name"); v.AsString() != "chat" {
			t.Errorf("%s: operation %q", s.Name, v.AsString())
		}
		if _, ok := attr(s, "gen_ai.response.finish_reasons"); !ok {
			t.Errorf("%s has no finish reasons", s.Name)
		}
		if _, ok := attr(s, "gen_ai.input.messages"); ok {
			t.Errorf("%s records messages without the content opt-in", s.Name)
		}
		if s.Kind.String() != "client" {
			t.Errorf("%s kind %v", s.Name, s.Kind)
		}
	}
	for id, ev := range tools {
		s, ok := ids[bus.SpanID(run, ev.ID)]
		if !ok {
			t.Fatalf("no span for tool request %s", id)
		}
		if v, _ := attr(s, "gen_ai.tool.call.id"); s.Name != "execute_tool shell" || v.AsString() != id {
			t.Errorf("tool span %s call id %q, want execute_tool shell %s", s.Name, v.AsString(), id)
		}
		if _, ok := attr(s, "vera.tool.exit_code"); !ok {
			t.Errorf("tool span %s has no exit code", id)
		}
		if !s.Start.Equal(ev.Time) {
			t.Errorf("tool span %s starts %v, its request was at %v", id, s.Start, ev.Time)
		}
		if _, ok := attr(s, "gen_ai.tool.call.arguments"); ok {
			t.Errorf("tool span %s records the command without the content opt-in", id)
		}
	}
	verifiers := byName(spans, "invoke_agent deepverifier")
	if len(verifiers) != rounds {
		t.Fatalf("%d auditor spans, want %d", len(verifiers), rounds)
	}
	for i, s := range verifiers {
		var evals []traces.SpanEvent
		for _, e := range s.Events {
			if e.Name == "gen_ai.evaluation.result" {
				evals = append(evals, e)
			}
		}
		if len(evals) != 1 {
			t.Fatalf("round span %d has %d evaluation events", i+1, len(evals))
		}
		r, _ := attr(s, "vera.audit.round")
		want := judged[r.AsInt64()-1]
		if v, _ := evAttr(evals[0], "gen_ai.evaluation.score.value"); v.AsFloat64() != float64(want.Score) {
			t.Errorf("round %d score %v, want %d", r.AsInt64(), v.AsFloat64(), want.Score)
		}
		if v, _ := evAttr(evals[0], "gen_ai.evaluation.name"); v.AsString() != "vera.deepverifier" {
			t.Errorf("evaluation name %q", v.AsString())
		}
		if v, _ := evAttr(evals[0], "gen_ai.evaluation.explanation"); v.AsString() != want.Explanation {
			t.Errorf("explanation %q, want %q", v.AsString(), want.Explanation)
		}
	}
	for _, s := range byName(spans, "verify_check") {
		if p := ids[s.Parent]; p == nil || p.Name != "invoke_agent deepverifier" {
			t.Errorf("%s is not under an auditor round", s.Name)
		}
	}

	// The same run projected again: the same spans, ids and times.
	again := traces.Project(run, evs, traces.Options{})
	for i := range spans {
		a, b := spans[i], again[i]
		if a.ID != b.ID || a.Parent != b.Parent || a.Name != b.Name || !a.Start.Equal(b.Start) || !a.End.Equal(b.End) || len(a.Attrs) != len(b.Attrs) || len(a.Events) != len(b.Events) {
			t.Fatalf("second projection differs at span %d: %s %x vs %s %x", i, a.Name, a.ID, b.Name, b.ID)
		}
	}
}

func TestContentIsOptIn(t *testing.T) {
	run, evs := demoRun(t)
	spans := traces.Project(run, evs, traces.Options{Content: true})
	found := map[string]bool{}
	for _, s := range spans {
		for _, k := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"} {
			if v, ok := attr(s, k); ok {
				if k != "gen_ai.tool.call.arguments" && k != "gen_ai.tool.call.result" {
					var msgs []map[string]any
					if err := json.Unmarshal([]byte(v.AsString()), &msgs); err != nil || len(msgs) == 0 {
						t.Errorf("%s %s is not the conventions' message array: %v", s.Name, k, err)
					}
				}
				found[k] = true
			}
		}
		for _, e := range s.Events {
			if _, ok := evAttr(e, "vera.thought"); ok {
				found["vera.thought"] = true
			}
		}
	}
	for _, k := range []string{"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "vera.thought"} {
		if !found[k] {
			t.Errorf("with content on, no span holds %s", k)
		}
	}
}

// synthRun is a small run with all three verifiers' verdicts, a retried
// model call, a denied command and a policy event.
func synthRun(t *testing.T) *bustest.Synth {
	s := &bustest.Synth{TB: t, RunID: "synth-otel", T0: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	model := catalog.ModelConfig{BaseURL: "https://api.openai.com/v1", Name: "gpt-x"}
	s.Add("cli", catalog.TaskSubmitted{SubmittedBy: "cli", RunConfig: catalog.RunConfig{Task: "t", WorkDir: "/tmp/w", Model: model,
		Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 2}}, Labels: map[string]string{"team": "a"}})
	s.Add("agent", catalog.RunStarted{AgentID: "a1", Config: catalog.RunConfig{Task: "t", WorkDir: "/tmp/w", Model: model,
		Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 2, StopScore: 3}}})
	s.Add("agent", catalog.ModelRequested{CallID: "call-agent-s0001", Scope: catalog.ScopeAgent, Step: 1, Model: "gpt-x", BaseURL: model.BaseURL, Attempt: 1, MessageCount: 2})
	s.Add("agent", catalog.ModelResponded{CallID: "call-agent-s0001", Scope: catalog.ScopeAgent, Step: 1, Model: "gpt-x", Attempt: 1, Error: "429 Too Many Requests", HTTPStatus: 429, Retryable: true})
	s.Add("agent", catalog.ModelRequested{CallID: "call-agent-s0001", Scope: catalog.ScopeAgent, Step: 1, Model: "gpt-x", BaseURL: model.BaseURL, Attempt: 2, MessageCount: 2})
	s.Add("agent", catalog.ModelResponded{CallID: "call-agent-s0001", Scope: catalog.ScopeAgent, Step: 1, Model: "gpt-x-2026", Attempt: 2, FinishReason: "stop",
		Usage: catalog.TokenUsage{Prompt: 100, Completion: 20, Total: 120}, Text: "THOUGHT: x"})
	s.Add("agent", catalog.AgentStep{Step: 1, Thought: "x", Action: `{"tool":"shell"}`, ActionTool: "shell", Command: "rm -rf /", ModelCallID: "call-agent-s0001", RequestID: "req-s0001"})
	s.Add("agent", catalog.ToolRequested{RequestID: "req-s0001", Requester: catalog.RequesterAgent, Tool: "shell", Command: "rm -rf /", Step: 1})
	s.Add("sandboxd", catalog.ToolFinished{RequestID: "req-s0001", Requester: catalog.RequesterAgent, ExitCode: -1, Denied: true, DenyRule: "destructive"})
	s.Add("verifier.logic", catalog.LogicVerdict{Step: 1, ThinkingEval: 1, ActionEval: 1, ThinkingEvalReason: "Different action.", VerifierType: "logic", DecidedBy: "logic"})
	s.Add("agent", catalog.PolicyTriggered{Rule: catalog.RuleStagnation, Step: 1, Effect: catalog.EffectForceTool})
	s.Add("agent", catalog.AuditRequested{Round: 1, Answer: "42", CandidateStep: 1})
	s.Add("verifier.deepverify", catalog.AuditJudged{Round: 1, Explanation: "supported", Score: 4, RawScore: 4, BestRound: 1, BestScore: 4})
	s.Add("verifier.deepverify", catalog.AuditFeedback{Round: 1, Score: 4, Accepted: true, Final: true})
	s.Add("agent", catalog.RunFinished{Outcome: catalog.OutcomeResolved, Answer: "42", Steps: 1})
	return s
}

func TestEvaluationsOfTheThreeVerifiers(t *testing.T) {
	s := synthRun(t)
	// VerifyFast scores the final answer: the run.finished event.
	final := s.Evs[len(s.Evs)-1]
	s.Add("verifier.verifyfast", catalog.VerifyFastScored{AnswerEventID: final.ID, Profile: "default", CreditScore: 5, Zone: "GOOD"})
	spans := traces.Project(s.RunID, s.Evs, traces.Options{})

	evals := map[string]*traces.Span{}
	for _, sp := range spans {
		for _, e := range sp.Events {
			if e.Name == "gen_ai.evaluation.result" {
				n, _ := evAttr(e, "gen_ai.evaluation.name")
				evals[n.AsString()] = sp
			}
		}
	}
	if sp := evals["vera.logic"]; sp == nil || sp.Name != "chat gpt-x" {
		t.Errorf("logic verdict on %v, want the chat span of the judged step", sp)
	}
	if sp := evals["vera.deepverifier"]; sp == nil || sp.Name != "invoke_agent deepverifier" {
		t.Errorf("auditor verdict on %v, want the round's span", sp)
	}
	if sp := evals["vera.verifyfast"]; sp == nil || sp.Name != "invoke_agent vera" {
		t.Errorf("VerifyFast verdict on %v, want the run's span (it scored the final answer)", sp)
	}

	chat := byName(spans, "chat")
	if len(chat) != 1 {
		t.Fatalf("%d chat spans for one call with two attempts", len(chat))
	}
	c := chat[0]
	if v, _ := attr(c, "vera.attempts"); v.AsInt64() != 2 {
		t.Errorf("attempts %d", v.AsInt64())
	}
	if v, _ := attr(c, "gen_ai.usage.input_tokens"); v.AsInt64() != 100 {
		t.Errorf("input tokens %d", v.AsInt64())
	}
	if v, _ := attr(c, "gen_ai.provider.name"); v.AsString() != "openai" {
		t.Errorf("provider %q", v.AsString())
	}
	if v, _ := attr(c, "server.address"); v.AsString() != "api.openai.com" {
		t.Errorf("server.address %q", v.AsString())
	}
	if v, _ := attr(c, "gen_ai.response.model"); v.AsString() != "gpt-x-2026" {
		t.Errorf("response model %q", v.AsString())
	}
	if c.Status != codes.Unset {
		t.Errorf("a call that succeeded on retry has status %v", c.Status)
	}
	tool := byName(spans, "execute_tool")[0]
	if v, _ := attr(tool, "vera.tool.denied"); !v.AsBool() || tool.Status != codes.Error {
		t.Errorf("denied command: denied=%v status=%v", v.AsBool(), tool.Status)
	}
	if v, _ := attr(tool, "error.type"); v.AsString() != "denied" {
		t.Errorf("error.type %q", v.AsString())
	}
	root := byName(spans, "invoke_agent vera")[0]
	var policy bool
	for _, e := range root.Events {
		if e.Name == catalog.TypePolicyStagnation {
			policy = true
		}
	}
	if !policy {
		t.Error("the policy event is not on the root span")
	}
	if v, _ := attr(root, "vera.label.team"); v.AsString() != "a" {
		t.Errorf("label %q", v.AsString())
	}
}

func TestLateEventsAfterTake(t *testing.T) {
	s := synthRun(t)
	p := traces.NewProjection(s.RunID, traces.Options{}, nil)
	// Fold up to the model's final reply, take what ended (the chat
	// span), then the step: it goes on the root, not on a span that is
	// gone.
	var i int
	for i = 0; s.Evs[i].Type != catalog.TypeAgentStep; i++ {
		p.Add(s.Evs[i])
	}
	taken := p.Take(nil)
	if len(taken) != 1 || !strings.HasPrefix(taken[0].Name, "chat") {
		t.Fatalf("took %d spans", len(taken))
	}
	for ; i < len(s.Evs); i++ {
		p.Add(s.Evs[i])
	}
	rest := p.Take(nil)
	root := byName(rest, "invoke_agent vera")
	if len(root) != 1 {
		t.Fatalf("the root was not taken at the end: %d spans", len(rest))
	}
	var late bool
	for _, e := range root[0].Events {
		if e.Name == catalog.TypeAgentStep {
			late = true
		}
	}
	if !late {
		t.Error("the step that came after its chat span was taken is not on the root")
	}
	if !p.Done() {
		t.Error("not done after the root was taken")
	}
	if p.Add(s.Evs[0]) {
		t.Error("an event after the trace was complete was folded")
	}
	if spans := p.Take(nil); len(spans) != 0 {
		t.Errorf("an event after the trace was complete made %d spans", len(spans))
	}
}

func TestUnfinishedRun(t *testing.T) {
	s := synthRun(t)
	// Cut after the tool request: the run and the command never ended.
	var cut []bus.Event
	for _, ev := range s.Evs {
		cut = append(cut, ev)
		if ev.Type == catalog.TypeToolRequested {
			break
		}
	}
	spans := traces.Project(s.RunID, cut, traces.Options{})
	for _, sp := range spans {
		if sp.Name == "chat gpt-x" {
			continue
		}
		if v, ok := attr(sp, "vera.unfinished"); !ok || !v.AsBool() {
			t.Errorf("%s is not marked unfinished", sp.Name)
		}
		if !sp.End.Equal(cut[len(cut)-1].Time) {
			t.Errorf("%s ends %v, want the last event's time", sp.Name, sp.End)
		}
	}
}

// TestEveryTypeIsMapped: docs/otel.md has a row for every catalogue type.
func TestEveryTypeIsMapped(t *testing.T) {
	doc, err := os.ReadFile("../../docs/otel.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range catalog.Types() {
		if !strings.Contains(string(doc), "\n| `"+typ+"` |") {
			t.Errorf("docs/otel.md has no row for %s", typ)
		}
	}
}

// TestExtFloodIsBounded: an outside tool that floods a run with vera.ext.*
// events cannot push VERA's own events off the run span.
func TestExtFloodIsBounded(t *testing.T) {
	s := synthRun(t)
	evs := s.Evs[:len(s.Evs)-1]
	last := s.Evs[len(s.Evs)-1]
	for i := range traces.MaxExtEvents + 50 {
		ev := evs[0]
		ev.ID = fmt.Sprintf("ext-%d", i)
		ev.Type, ev.Source = "vera.ext.flood.ping", "mallory"
		ev.Data = json.RawMessage(`{"n":1,"text":"` + strings.Repeat("x", 5000) + `"}`)
		evs = append(evs, ev)
	}
	evs = append(evs, last)
	root := byName(traces.Project(s.RunID, evs, traces.Options{}), "invoke_agent vera")[0]
	ext := 0
	for _, e := range root.Events {
		if e.Name == "vera.ext.flood.ping" {
			ext++
			if v, _ := evAttr(e, "vera.text"); len(v.AsString()) > 1100 {
				t.Fatalf("an outside string of %d bytes was kept whole", len(v.AsString()))
			}
		}
	}
	if ext != traces.MaxExtEvents {
		t.Errorf("%d outside events on the run span, want the cap %d", ext, traces.MaxExtEvents)
	}
	if v, _ := attr(root, "vera.ext_events_dropped"); v.AsInt64() != 50 {
		t.Errorf("vera.ext_events_dropped = %d, want 50", v.AsInt64())
	}
	if v, _ := attr(root, "vera.outcome"); v.AsString() != "RESOLVED" {
		t.Error("the run's own end is lost after the flood")
	}
}

// TestProjectFromEqualsProject: folding while reading gives what folding
// a slice gives, and a read error is returned.
func TestProjectFromEqualsProject(t *testing.T) {
	run, evs := demoRun(t)
	seq := func(yield func(bus.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
	got, n, err := traces.ProjectFrom(run, seq, traces.Options{})
	if err != nil || n != len(evs) {
		t.Fatalf("ProjectFrom: %d events, %v", n, err)
	}
	want := traces.Project(run, evs, traces.Options{})
	if len(got) != len(want) {
		t.Fatalf("%d spans, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].ID != want[i].ID || len(got[i].Events) != len(want[i].Events) || len(got[i].Attrs) != len(want[i].Attrs) {
			t.Fatalf("span %d differs: %s vs %s", i, got[i].Name, want[i].Name)
		}
	}
	failing := func(yield func(bus.Event, error) bool) {
		yield(evs[0], nil)
		yield(bus.Event{}, fmt.Errorf("connection lost"))
	}
	if _, _, err := traces.ProjectFrom(run, failing, traces.Options{}); err == nil || !strings.Contains(err.Error(), "connection lost") {
		t.Fatalf("a read error: %v", err)
	}
}

// TestContentFromBlobs: with content on and a blob reader, the messages
// and texts that events carry as blobs are in the spans too; a blob that
// cannot be read is named, not fatal.
func TestContentFromBlobs(t *testing.T) {
	blobs := map[string][]byte{}
	ref := func(b []byte, ct string) *catalog.BlobRef {
		d := bus.Digest(b)
		blobs[d] = b
		return &catalog.BlobRef{Digest: d, Size: int64(len(b)), ContentType: ct}
	}
	msgs, _ := json.Marshal([]catalog.Message{{Role: "system", Content: strings.Repeat("règles ", 60000)}, {Role: "user", Content: "the task"}})
	reply := []byte(strings.Repeat("THOUGHT: long ", 3000))
	s := &bustest.Synth{TB: t, RunID: "blobs", T0: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	model := catalog.ModelConfig{BaseURL: "http://127.0.0.1:1234", Name: "m"}
	s.Add("cli", catalog.TaskSubmitted{SubmittedBy: "cli", RunConfig: catalog.RunConfig{Task: "t", WorkDir: "/w", Model: model}})
	s.Add("agent", catalog.ModelRequested{CallID: "c1", Scope: catalog.ScopeAgent, Step: 1, Model: "m", BaseURL: model.BaseURL, Attempt: 1,
		MessageCount: 2, MessagesBlob: ref(msgs, "application/json")})
	s.Add("agent", catalog.ModelResponded{CallID: "c1", Scope: catalog.ScopeAgent, Step: 1, Model: "m", Attempt: 1, FinishReason: "stop",
		TextBlob: ref(reply, "text/plain; charset=utf-8")})
	s.Add("agent", catalog.RunFinished{Outcome: catalog.OutcomeResolved, Steps: 1, AnswerBlob: ref([]byte("a long answer"), "text/plain; charset=utf-8")})

	read := func(d string) ([]byte, error) {
		if b, ok := blobs[d]; ok {
			return b, nil
		}
		return nil, fmt.Errorf("no blob %s", d)
	}
	spans := traces.Project(s.RunID, s.Evs, traces.Options{Content: true, Blob: read})
	chat := byName(spans, "chat")[0]
	in, _ := attr(chat, "gen_ai.input.messages")
	var got []map[string]any
	if err := json.Unmarshal([]byte(in.AsString()), &got); err != nil || len(got) != 2 || got[1]["role"] != "user" {
		t.Errorf("input messages from the blob: %v (%v)", got, err)
	}
	if out, _ := attr(chat, "gen_ai.output.messages"); !strings.Contains(out.AsString(), "THOUGHT: long") {
		t.Error("the reply stored as a blob is not the output message")
	}
	if out, _ := attr(byName(spans, "invoke_agent vera")[0], "gen_ai.output.messages"); !strings.Contains(out.AsString(), "a long answer") {
		t.Error("the answer stored as a blob is not the run's output message")
	}
	if n := len(in.AsString()); n > traces.MaxContentBytes+1024 || !strings.Contains(in.AsString(), "cut:") {
		t.Errorf("input messages of %d bytes from a %d-byte blob: not cut to %d", n, len(msgs), traces.MaxContentBytes)
	}
	if !utf8.ValidString(in.AsString()) {
		t.Error("cutting broke a UTF-8 character")
	}

	inline := traces.Project(s.RunID, s.Evs, traces.Options{Content: true})
	if _, ok := attr(byName(inline, "chat")[0], "gen_ai.input.messages"); ok {
		t.Error("input messages without a blob reader")
	}
	failed := traces.Project(s.RunID, s.Evs, traces.Options{Content: true, Blob: func(string) ([]byte, error) { return nil, fmt.Errorf("store unreachable") }})
	if v, ok := attr(byName(failed, "chat")[0], "vera.blob_error"); !ok || !strings.Contains(v.AsString(), "store unreachable") {
		t.Error("an unreadable blob is not named on its span")
	}
	// Without the content opt-in the reader is never asked.
	traces.Project(s.RunID, s.Evs, traces.Options{Blob: func(string) ([]byte, error) { t.Fatal("blob read without content"); return nil, nil }})
}

// TestGenericEventAttributes: an event without its own mapping keeps its
// scalar members and its arrays of one scalar type; other values are left
// out.
func TestGenericEventAttributes(t *testing.T) {
	s := synthRun(t)
	evs := s.Evs[:len(s.Evs)-1]
	ev := evs[0]
	ev.ID, ev.Type, ev.Source = "ext-1", "vera.ext.acme.scanned", "acme"
	ev.Data = json.RawMessage(`{"name":"x","n":3,"ratio":0.5,"ok":true,"tags":["a","b"],"nums":[1,2.5],"flags":[true,false],"mixed":[1,"a"],"obj":{"k":1},"none":null,"empty":[]}`)
	evs = append(evs, ev, s.Evs[len(s.Evs)-1])
	root := byName(traces.Project(s.RunID, evs, traces.Options{}), "invoke_agent vera")[0]
	var got traces.SpanEvent
	for _, e := range root.Events {
		if e.Name == "vera.ext.acme.scanned" {
			got = e
		}
	}
	want := map[string]string{
		"vera.name": "x", "vera.n": "3", "vera.ratio": "0.5", "vera.ok": "true",
		"vera.tags": `["a","b"]`, "vera.nums": "[1,2.5]", "vera.flags": "[true false]",
		"vera.source": "acme", "vera.event_id": "ext-1",
	}
	for _, kv := range got.Attrs {
		k := string(kv.Key)
		w, ok := want[k]
		if !ok {
			t.Errorf("unexpected attribute %s = %s", k, kv.Value.Emit())
			continue
		}
		if kv.Value.Emit() != w {
			t.Errorf("%s = %s, want %s", k, kv.Value.Emit(), w)
		}
		delete(want, k)
	}
	for k := range want {
		t.Errorf("attribute %s missing", k)
	}
}

// TestNativeToolCallAndReasoning: a native tool-calling reply with
// reasoning gives the conventions' reasoning and tool_call parts (content
// on), the reasoning token count and the call's sampling parameters.
func TestNativeToolCallAndReasoning(t *testing.T) {
	s := &bustest.Synth{TB: t, RunID: "native-otel", T0: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	model := catalog.ModelConfig{BaseURL: "http://127.0.0.1:8000/v1", Name: "qwen3"}
	s.Add("cli", catalog.TaskSubmitted{SubmittedBy: "cli", RunConfig: catalog.RunConfig{Task: "t", WorkDir: "/tmp/w", Model: model}})
	topP, seed := 0.9, int64(7)
	s.Add("agent", catalog.ModelRequested{CallID: "call-agent-s0001", Scope: catalog.ScopeAgent, Step: 1, Model: "qwen3", BaseURL: model.BaseURL, Attempt: 1, MessageCount: 2,
		Params: catalog.ModelParams{TopP: &topP, Seed: &seed, Stop: []string{"END"}, Stream: true}, Tools: []string{"shell", "notes_append", "submit"}, ToolChoice: "required"})
	s.Add("agent", catalog.ModelResponded{CallID: "call-agent-s0001", Scope: catalog.ScopeAgent, Step: 1, Model: "qwen3", Attempt: 1, FinishReason: "tool_calls",
		Usage: catalog.TokenUsage{Prompt: 100, Completion: 40, Total: 140, Reasoning: 25}, Reasoning: "List the input first.", ReasoningSource: "reasoning_content",
		ToolCalls: []catalog.ToolCall{{ID: "call_1", Name: "shell", Arguments: `{"cmd":"ls /input"}`}}})
	spans := traces.Project(s.RunID, s.Evs, traces.Options{Content: true})
	chat := byName(spans, "chat qwen3")
	if len(chat) != 1 {
		t.Fatalf("%d chat spans", len(chat))
	}
	c := chat[0]
	for key, want := range map[string]string{
		"gen_ai.request.top_p":                 "0.9",
		"gen_ai.request.seed":                  "7",
		"gen_ai.request.stop_sequences":        `["END"]`,
		"gen_ai.usage.reasoning.output_tokens": "25",
		"vera.model.tools":                     `["shell","notes_append","submit"]`,
		"vera.model.tool_calls":                `["shell"]`,
		"vera.model.reasoning_source":          "reasoning_content",
	} {
		if v, ok := attr(c, key); !ok || v.Emit() != want {
			t.Errorf("%s = %q (present %v), want %q", key, v.Emit(), ok, want)
		}
	}
	out, ok := attr(c, "gen_ai.output.messages")
	if !ok {
		t.Fatal("no gen_ai.output.messages")
	}
	var msgs []struct {
		Parts []struct {
			Type, Content, Name string
			Arguments           map[string]any
		}
	}
	if err := json.Unmarshal([]byte(out.AsString()), &msgs); err != nil || len(msgs) != 1 || len(msgs[0].Parts) != 2 ||
		msgs[0].Parts[0].Type != "reasoning" || msgs[0].Parts[0].Content != "List the input first." ||
		msgs[0].Parts[1].Type != "tool_call" || msgs[0].Parts[1].Name != "shell" || msgs[0].Parts[1].Arguments["cmd"] != "ls /input" {
		t.Fatalf("output messages %s (%v)", out.AsString(), err)
	}
	// Without content, neither the reasoning nor the arguments leave.
	for _, s := range traces.Project(s.RunID, s.Evs, traces.Options{}) {
		if v, ok := attr(s, "gen_ai.output.messages"); ok {
			t.Fatalf("content off, output messages %s", v.AsString())
		}
	}
}

// TestEvalIsATraceOfItsOwn: an eval's events make a "vera eval" root span
// (not an agent invocation), with the judge's model call under it; an
// interrupted eval's root stays open for its resumption, a finished one
// ends.
func TestEvalIsATraceOfItsOwn(t *testing.T) {
	f := bus.Factory{Source: "cli"}
	const evalID = "01JEVALTRACE00000000000000"
	t0 := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	mk := func(d time.Duration, p bus.Payload) bus.Event {
		ev, err := f.New(evalID, p, bus.WithTime(t0.Add(d)))
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	started := mk(0, catalog.EvalStarted{Name: "e", TaskSet: "t.jsonl", TaskSetSHA256: strings.Repeat("a", 64), Tasks: 1, Concurrency: 1, SubmittedBy: "cli"})
	req := mk(time.Second, catalog.ModelRequested{CallID: "eval-judge-x-1", Scope: catalog.ScopeEval, Purpose: "eval-judge", Model: "m", Attempt: 1})
	resp := mk(2*time.Second, catalog.ModelResponded{CallID: "eval-judge-x-1", Scope: catalog.ScopeEval, Attempt: 1, Model: "m"})
	scored := mk(3*time.Second, catalog.EvalTaskScored{TaskID: "x", Profile: "p", RunID: "r", Attempt: 1, Scorer: "judge", Correct: true})
	interrupted := mk(4*time.Second, catalog.EvalFinished{Scored: 1, Expected: 2, Interrupted: true})
	finished := mk(5*time.Second, catalog.EvalFinished{Scored: 2, Expected: 2})

	spans := traces.Project(evalID, []bus.Event{started, req, resp, scored, interrupted}, traces.Options{})
	var root *traces.Span
	for _, s := range spans {
		if s.Name == "vera eval" {
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no vera eval root span in %d spans", len(spans))
	}
	if v, ok := attr(root, "vera.unfinished"); !ok || !v.AsBool() {
		t.Error("an interrupted eval's root span should be left open (unfinished in a projection of what is stored)")
	}
	chat := false
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "chat ") && s.Parent == root.ID {
			chat = true
		}
	}
	if !chat {
		t.Error("the judge's call is not a chat span under the eval's root")
	}
	spans = traces.Project(evalID, []bus.Event{started, req, resp, scored, interrupted, finished}, traces.Options{})
	for _, s := range spans {
		if s.Name == "vera eval" {
			if v, ok := attr(s, "vera.unfinished"); ok && v.AsBool() {
				t.Error("a finished eval's root span is marked unfinished")
			}
			if !s.End.Equal(finished.Time) {
				t.Errorf("root ends at %v, want %v", s.End, finished.Time)
			}
		}
	}
}
