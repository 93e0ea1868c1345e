package agents

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// callArgs returns the arguments of a native call: the tool's own argument
// and the three discipline arguments.
func callArgs(arg, val string, evidence []string, status string) string {
	if evidence == nil {
		evidence = []string{}
	}
	b, _ := json.Marshal(map[string]any{"thought": "next move", arg: val, "evidence_used": evidence, "status_update": status})
	return string(b)
}

// toolCall is a reply holding one native tool call and null content.
func toolCall(name, args string) scriptedmodel.Reply {
	return scriptedmodel.Reply{ToolCalls: []scriptedmodel.ToolCall{{Name: name, Arguments: args}}, NullContent: true}
}

// byStepReply answers the prompt of step n with replies[n].
func byStepReply(replies map[int]scriptedmodel.Reply) scriptedmodel.Rule {
	r := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		reply, ok := replies[stepOf(req.LastUserMessage())]
		return reply, ok
	})
	r.Name = "by-step-reply"
	return r
}

// nativeFourSteps is fourSteps as native tool calls.
var nativeFourSteps = map[int]scriptedmodel.Reply{
	1: toolCall("shell", callArgs("cmd", "cd /work/sub && export A=1 && ls", nil, "continuing")),
	2: toolCall("notes_append", callArgs("text", "ls shows a file (ev_0001)", []string{"ev_0001"}, "continuing")),
	3: toolCall("shell", callArgs("cmd", "cat answer.txt", nil, "continuing")),
	4: toolCall("submit", callArgs("answer", "42", []string{"ev_0002"}, "RESOLVED")),
}

var toolNamesOffered = []string{"shell", "edit", "notes_append", "submit"}

// deltaLog collects the streamed pieces the agent passes to Config.Deltas.
type deltaLog struct {
	mu     sync.Mutex
	byStep map[int][]llm.Delta
}

func (d *deltaLog) hook(runID string, step int, callID string) func(llm.Delta) {
	return func(x llm.Delta) {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.byStep == nil {
			d.byStep = map[int][]llm.Delta{}
		}
		d.byStep[step] = append(d.byStep[step], x)
	}
}

func (d *deltaLog) toolArgs(step int) (name, args string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, x := range d.byStep[step] {
		name += x.ToolName
		args += x.ToolArgs
	}
	return name, args
}

// TestNativeRunEndToEnd: tool_protocol native, streamed and not: the
// tools go out with their schemas on every call, the calls come back as
// steps (protocol native, the server's call id, the canonical action),
// the run's sampling settings are sent, and a streamed call's pieces reach
// Config.Deltas.
func TestNativeRunEndToEnd(t *testing.T) {
	for _, stream := range []bool{true, false} {
		name := map[bool]string{true: "streamed", false: "not-streamed"}[stream]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, scriptedmodel.WithRules(byStepReply(nativeFourSteps)))
			h.tools(cwdTools)
			var deltas deltaLog
			h.start(h.newAgent("a1", func(c *Config) { c.Deltas = deltas.hook }))
			temp, seed := 0.2, int64(7)
			h.submit("run-native", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted",
				ToolProtocol: catalog.ToolProtocolNative, Stream: &stream, Temperature: &temp, Seed: &seed, MaxTokens: 512}})
			fin := h.waitFinished("run-native")
			if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "42" || fin.Steps != 4 {
				t.Fatalf("finished = %+v", fin)
			}
			ds := h.events("run-native")
			assertOnce(t, ds)
			if n := len(ofType[*catalog.AgentProtocol](ds)); n != 0 {
				t.Errorf("%d vera.agent.protocol events for a run set to native", n)
			}
			steps := ofType[*catalog.AgentStep](ds)
			for _, st := range steps {
				if st.Protocol != catalog.ToolProtocolNative || st.ToolCallID == "" || st.Thought != "next move" || st.FormatError != "" {
					t.Errorf("step %d = %+v", st.Step, st)
				}
			}
			if want := `{"tool":"shell","args":{"cmd":"cd /work/sub && export A=1 && ls"}}`; steps[0].Action != want || steps[0].StatusUpdate != "CONTINUE" {
				t.Errorf("step 1 action %s status %s, want %s", steps[0].Action, steps[0].StatusUpdate, want)
			}
			if !slices.Equal(steps[3].EvidenceUsed, []string{"ev_0002"}) || steps[3].ActionTool != catalog.ActionSubmit {
				t.Errorf("step 4 = %+v", steps[3])
			}
			reqs := ofType[*catalog.ToolRequested](ds)
			if len(reqs) != 2 || reqs[1].Cwd != "/work/sub" || reqs[1].Env["A"] != "1" {
				t.Errorf("requests = %+v", reqs)
			}
			if ns := ofType[*catalog.NotesAppended](ds); len(ns) != 1 || ns[0].Text != "ls shows a file (ev_0001)" {
				t.Errorf("notes = %+v", ns)
			}
			got := h.model.Requests()
			if len(got) != 4 {
				t.Fatalf("%d model calls, want 4", len(got))
			}
			for i, r := range got {
				if !slices.Equal(r.Tools, toolNamesOffered) || r.ToolChoice != nil || r.Stream != stream {
					t.Errorf("call %d: tools %v, tool_choice %s, stream %v", i+1, r.Tools, r.ToolChoice, r.Stream)
				}
				if r.Messages[0].Text != protocol.SystemPromptFor(catalog.ToolProtocolNative) {
					t.Errorf("call %d: the system prompt is not the native one", i+1)
				}
				if r.Temperature == nil || *r.Temperature != 0.2 || r.Seed == nil || *r.Seed != 7 {
					t.Errorf("call %d: sampling not sent: temperature %v seed %v", i+1, r.Temperature, r.Seed)
				}
				// The schema's properties keep their order: thought first.
				if !strings.Contains(string(r.Body), `"properties":{"thought":`) {
					t.Errorf("call %d: the tools' properties lost their order: %.600s", i+1, r.Body)
				}
			}
			if !strings.Contains(got[2].LastUserMessage(), `[step 2] ACTION: {"tool":"notes_append","args":{"text":"ls shows a file (ev_0001)"}}`) {
				t.Errorf("step 3 prompt lacks the canonical action of step 2:\n%s", got[2].LastUserMessage())
			}
			name, args := deltas.toolArgs(1)
			if stream && (name != "shell" || !strings.Contains(args, "cd /work/sub")) {
				t.Errorf("streamed deltas of step 1: tool %q args %q", name, args)
			}
			// The record holds the tool calls as the server sent them.
			for _, r := range ofType[*catalog.ModelResponded](ds) {
				if len(r.ToolCalls) != 1 {
					t.Errorf("%s recorded %d tool calls", r.CallID, len(r.ToolCalls))
				}
			}
			h.model.AssertNoMisses(t)
		})
	}
}

// protocolEvent returns the run's vera.agent.protocol, its place among
// the run's events, and the place of the step that it was decided at.
func protocolEvent(t *testing.T, ds []decoded) (catalog.AgentProtocol, int, int) {
	t.Helper()
	var p *catalog.AgentProtocol
	at := -1
	for i, d := range ds {
		if x, ok := d.p.(*catalog.AgentProtocol); ok {
			if p != nil {
				t.Errorf("a second vera.agent.protocol: %+v", x)
				continue
			}
			p, at = x, i
		}
	}
	if p == nil {
		t.Fatal("no vera.agent.protocol")
	}
	for i, d := range ds {
		if x, ok := d.p.(*catalog.AgentStep); ok && x.Step == p.Step {
			return *p, at, i
		}
	}
	return *p, at, -1
}

// TestAutoDecidesNative: tool_protocol auto (the default) offers the tools
// (optional) with the auto prompt; the model calls one, so the run is
// native from then on, recorded once before step 1.
func TestAutoDecidesNative(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStepReply(nativeFourSteps)))
	h.tools(cwdTools)
	h.start(h.newAgent("a1"))
	h.submit("run-auto-native", catalog.RunConfig{})
	fin := h.waitFinished("run-auto-native")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "42" {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-auto-native")
	assertOnce(t, ds)
	p, at, step1 := protocolEvent(t, ds)
	if p.Requested != catalog.ToolProtocolAuto || p.Protocol != catalog.ToolProtocolNative || p.Step != 1 || p.ModelCallID != "agent-s0001" || !strings.Contains(p.Reason, "shell") {
		t.Errorf("decision = %+v", p)
	}
	if at > step1 {
		t.Errorf("vera.agent.protocol (event %d) after step 1 (event %d)", at, step1)
	}
	for _, st := range ofType[*catalog.AgentStep](ds) {
		if st.Protocol != catalog.ToolProtocolNative || st.FormatError != "" {
			t.Errorf("step %d = %+v", st.Step, st)
		}
	}
	for i, r := range h.model.Requests() {
		if !slices.Equal(r.Tools, toolNamesOffered) || r.Messages[0].Text != protocol.SystemPromptFor(catalog.ToolProtocolAuto) {
			t.Errorf("call %d: tools %v, or not the auto prompt", i+1, r.Tools)
		}
	}
}

// TestAutoDecidesText: a model answering in the text format, and a server
// refusing the tools with a 400, both make an auto run text from then on:
// no tools after the decision.
func TestAutoDecidesText(t *testing.T) {
	refuse := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		return scriptedmodel.Reply{Status: 400, ErrorMessage: "tools are not supported"}, len(req.Tools) > 0
	})
	for _, tc := range []struct {
		name   string
		rules  []scriptedmodel.Rule
		reason string
		calls  int
	}{
		{"model answers text", []scriptedmodel.Rule{byStep(fourSteps)}, "text format", 4},
		{"server refuses tools", []scriptedmodel.Rule{refuse, byStep(fourSteps)}, "refused the tools", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, scriptedmodel.WithRules(tc.rules...))
			h.tools(cwdTools)
			h.start(h.newAgent("a1"))
			h.submit("run-auto-text", catalog.RunConfig{})
			fin := h.waitFinished("run-auto-text")
			if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "42" || fin.Steps != 4 {
				t.Fatalf("finished = %+v", fin)
			}
			ds := h.events("run-auto-text")
			assertOnce(t, ds)
			p, at, step1 := protocolEvent(t, ds)
			if p.Protocol != catalog.ToolProtocolText || p.Step != 1 || !strings.Contains(p.Reason, tc.reason) || at > step1 {
				t.Errorf("decision = %+v (event %d, step 1 at %d)", p, at, step1)
			}
			for _, st := range ofType[*catalog.AgentStep](ds) {
				if st.Protocol != catalog.ToolProtocolText || st.FormatError != "" {
					t.Errorf("step %d = %+v", st.Step, st)
				}
			}
			reqs := h.model.Requests()
			if len(reqs) != tc.calls {
				t.Fatalf("%d model calls, want %d", len(reqs), tc.calls)
			}
			if !slices.Equal(reqs[0].Tools, toolNamesOffered) {
				t.Errorf("the first call offered %v", reqs[0].Tools)
			}
			for i, r := range reqs[tc.calls-3:] {
				if len(r.Tools) != 0 {
					t.Errorf("call %d after the decision offered tools %v", tc.calls-3+i+1, r.Tools)
				}
			}
			if tc.calls == 5 {
				resp := ofType[*catalog.ModelResponded](ds)
				var dropped bool
				for _, r := range resp {
					dropped = dropped || (r.CallID == "agent-s0001" && r.Error == "" && slices.Contains(r.Dropped, llm.FeatureTools))
				}
				if !dropped {
					t.Errorf("the first step's response does not record the dropped tools: %+v", resp)
				}
			}
		})
	}
}

// TestNativeSeveralToolCallsIsFormatError: two tool calls in one reply run
// nothing; the next prompt's FEEDBACK names them and reminds the function
// call format.
func TestNativeSeveralToolCallsIsFormatError(t *testing.T) {
	two := scriptedmodel.Reply{NullContent: true, ToolCalls: []scriptedmodel.ToolCall{
		{Name: "shell", Arguments: callArgs("cmd", "ls", nil, "continuing")},
		{Name: "submit", Arguments: callArgs("answer", "x", nil, "RESOLVED")},
	}}
	h := newHarness(t, scriptedmodel.WithRules(byStepReply(map[int]scriptedmodel.Reply{
		1: two,
		2: toolCall("submit", callArgs("answer", "fine", nil, "RESOLVED")),
	})))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-two-calls", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: catalog.ToolProtocolNative}})
	fin := h.waitFinished("run-two-calls")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "fine" {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-two-calls")
	steps := ofType[*catalog.AgentStep](ds)
	if len(steps) != 2 || !strings.HasPrefix(steps[0].FormatError, "multiple_actions: Found 2 tool calls (shell, submit)") || steps[0].RequestID != "" {
		t.Fatalf("steps = %+v", steps)
	}
	if n := len(ofType[*catalog.ToolRequested](ds)); n != 0 {
		t.Errorf("%d tool requests", n)
	}
	p := h.model.Requests()[1].LastUserMessage()
	if !strings.Contains(p, "FEEDBACK:\nFORMAT ERROR") || !strings.Contains(p, "[multiple_actions] Found 2 tool calls") || !strings.Contains(p, "exactly one function call") {
		t.Errorf("step 2 prompt lacks the feedback:\n%s", p)
	}
}

// TestNativeToolCallWinsOverText: a reply with a tool call (shell) and a
// different action in its text (submit) runs the tool call; the next
// prompt says the text action was ignored.
func TestNativeToolCallWinsOverText(t *testing.T) {
	both := toolCall("shell", callArgs("cmd", "ls", nil, "continuing"))
	both.NullContent = false
	both.Content = reply(submitAns("too early"), "RESOLVED")
	h := newHarness(t, scriptedmodel.WithRules(byStepReply(map[int]scriptedmodel.Reply{
		1: both,
		2: toolCall("submit", callArgs("answer", "after ls", []string{"ev_0001"}, "RESOLVED")),
	})))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-both", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: catalog.ToolProtocolNative}})
	fin := h.waitFinished("run-both")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "after ls" || fin.Steps != 2 {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-both")
	steps := ofType[*catalog.AgentStep](ds)
	if steps[0].ActionTool != catalog.ActionShell || steps[0].Command != "ls" || steps[0].RequestID == "" || steps[0].Thought != "next move" {
		t.Errorf("step 1 = %+v", steps[0])
	}
	if p := h.model.Requests()[1].LastUserMessage(); !strings.Contains(p, "FEEDBACK:\nYour previous reply held both a tool call") || !strings.Contains(p, "the text action was ignored") {
		t.Errorf("step 2 prompt lacks the notice:\n%s", p)
	}
}

// TestUnusableRepliesEndRun: three identical unusable replies in a row end
// the run UNRESOLVED with the error's message (what the server sent, what
// to change) instead of spending the step budget.
func TestUnusableRepliesEndRun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		proto catalog.ToolProtocol
		reply scriptedmodel.Reply
		want  []string
	}{
		{"empty reply, text", catalog.ToolProtocolText, scriptedmodel.Reply{}, []string{"empty_reply: The server sent an empty reply", "--tool-protocol native or auto"}},
		{"reasoning only, text", catalog.ToolProtocolText, scriptedmodel.Reply{Reasoning: "Let me think about the page first.", NullContent: true},
			[]string{"reasoning_only: The server sent only reasoning (reasoning_content)", "max_tokens", "enable_thinking"}},
		{"think block only, text", catalog.ToolProtocolText, scriptedmodel.Text("<think>I should look at the page"),
			[]string{"reasoning_only: The server sent only reasoning (think)"}},
		{"tool call only, text", catalog.ToolProtocolText, toolCall("shell", callArgs("cmd", "ls", nil, "continuing")),
			[]string{"unexpected_tool_call: The server sent a native tool call (shell) and no text", "--tool-protocol native or auto"}},
		{"text only, native", catalog.ToolProtocolNative, scriptedmodel.Text(reply(shell("ls"), "continuing")),
			[]string{"missing_tool_call: The server sent text but no tool call", "--jinja", "--tool-protocol text or auto"}},
		{"empty reply, auto", catalog.ToolProtocolAuto, scriptedmodel.Reply{}, []string{"empty_reply", "--jinja"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, scriptedmodel.WithFallback(tc.reply))
			h.tools(echoTools)
			h.start(h.newAgent("a1"))
			h.submit("run-unusable", catalog.RunConfig{MaxSteps: 20, Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: tc.proto}})
			fin := h.waitFinished("run-unusable")
			if fin.Outcome != catalog.OutcomeUnresolved || fin.Steps != protocol.UnusableLimit || !strings.Contains(fin.Reason, "last 3 replies were unusable") {
				t.Fatalf("finished = %+v", fin)
			}
			for _, w := range tc.want {
				if !strings.Contains(fin.Reason, w) {
					t.Errorf("reason %q lacks %q", fin.Reason, w)
				}
			}
			if n := h.model.Count(); n != protocol.UnusableLimit {
				t.Errorf("%d model calls, want %d", n, protocol.UnusableLimit)
			}
			ds := h.events("run-unusable")
			assertOnce(t, ds)
			if n := len(ofType[*catalog.AgentProtocol](ds)); n != 0 {
				t.Errorf("an unusable reply decided the protocol (%d events)", n)
			}
			// The feedback of step 2 carries the same message.
			steps := ofType[*catalog.AgentStep](ds)
			if p := h.model.Requests()[1].LastUserMessage(); !strings.Contains(p, strings.SplitN(steps[0].FormatError, ": ", 2)[1]) {
				t.Errorf("step 2 prompt lacks the message of step 1's error:\n%s", p)
			}
		})
	}
}

// TestUnusableStreakIsBrokenByAnotherReply: two unusable replies, a usable
// one, then two more: the run goes on (the rule counts identical errors in
// a row).
func TestUnusableStreakIsBrokenByAnotherReply(t *testing.T) {
	empty := scriptedmodel.Reply{}
	h := newHarness(t, scriptedmodel.WithRules(byStepReply(map[int]scriptedmodel.Reply{
		1: empty, 2: empty,
		3: scriptedmodel.Text(reply(shell("ls"), "continuing")),
		4: empty, 5: empty,
		6: scriptedmodel.Text(reply(submitAns("done"), "RESOLVED")),
	})))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-streak", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: catalog.ToolProtocolText}})
	fin := h.waitFinished("run-streak")
	if fin.Outcome != catalog.OutcomeResolved || fin.Steps != 6 {
		t.Fatalf("finished = %+v", fin)
	}
}

// TestNativeKilledAfterModelCallResumes: a worker killed between a model
// call and its step (native, and auto before its decision) is replaced by
// one that reuses the recorded reply (its tool calls) instead of asking the
// model again, and records the same step and decision once.
func TestNativeKilledAfterModelCallResumes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		proto  catalog.ToolProtocol
		killAt int
	}{
		{"native", catalog.ToolProtocolNative, 3},
		{"auto", catalog.ToolProtocolAuto, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, scriptedmodel.WithRules(byStepReply(nativeFourSteps)))
			h.tools(cwdTools)
			a := h.newAgent("a1")
			killed := make(chan struct{})
			a.afterModel = func(_ string, step int) error {
				if step != tc.killAt {
					return nil
				}
				close(killed)
				return errors.New("killed after the model call")
			}
			stopA := h.start(a)
			h.submit("run-native-kill", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: tc.proto}})
			select {
			case <-killed:
			case <-time.After(30 * time.Second):
				t.Fatal("the kill step was never reached")
			}
			stopA()
			if n := len(ofType[*catalog.AgentStep](h.events("run-native-kill"))); n != tc.killAt-1 {
				t.Fatalf("%d steps recorded before the restart, want %d", n, tc.killAt-1)
			}
			h.start(h.newAgent("a2"))
			fin := h.waitFinished("run-native-kill")
			if fin.Outcome != catalog.OutcomeResolved || fin.Steps != 4 || fin.Answer != "42" {
				t.Fatalf("finished = %+v", fin)
			}
			if n := h.model.Count(); n != 4 {
				t.Errorf("%d model calls, want 4: the reply of step %d is reused", n, tc.killAt)
			}
			ds := h.events("run-native-kill")
			assertOnce(t, ds)
			responded := map[string]catalog.ModelResponded{}
			for _, r := range ofType[*catalog.ModelResponded](ds) {
				responded[r.CallID] = *r
			}
			for _, st := range ofType[*catalog.AgentStep](ds) {
				r := responded[st.ModelCallID]
				if st.Protocol != catalog.ToolProtocolNative || len(r.ToolCalls) != 1 || st.ToolCallID != r.ToolCalls[0].ID {
					t.Errorf("step %d (protocol %s, call %s) does not act on its recorded tool call %+v", st.Step, st.Protocol, st.ToolCallID, r.ToolCalls)
				}
			}
			if tc.proto == catalog.ToolProtocolAuto {
				if p, _, _ := protocolEvent(t, ds); p.Protocol != catalog.ToolProtocolNative || p.Step != 1 {
					t.Errorf("decision = %+v", p)
				}
			}
		})
	}
}

// TestNativeToolsRefusedFailsWithAdvice: a run set to native on a server
// that refuses tools fails at once (a 400 is not retried) and says what to
// change.
func TestNativeToolsRefusedFailsWithAdvice(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Status: 400, ErrorMessage: "tools are not supported"}))
	h.start(h.newAgent("a1"))
	h.submit("run-native-refused", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: catalog.ToolProtocolNative}})
	fin := h.waitFinished("run-native-refused")
	if fin.Outcome != catalog.OutcomeFailed || !strings.Contains(fin.Reason, "tools are not supported") || !strings.Contains(fin.Reason, "--tool-protocol text or auto") {
		t.Fatalf("finished = %+v", fin)
	}
	if n := h.model.Count(); n != 1 {
		t.Errorf("%d model calls, want 1", n)
	}
}

// TestNativeThoughtFromReasoning: a call without a thought argument takes
// its THOUGHT from the reply's reasoning, here big enough to be recorded
// as a blob (read back from the object store), capped.
func TestNativeThoughtFromReasoning(t *testing.T) {
	reasoning := "I list the files first. " + strings.Repeat("Then I weigh every source I know of. ", 600)
	noThought := `{"cmd":"ls","evidence_used":[],"status_update":"continuing"}`
	r1 := scriptedmodel.Reply{NullContent: true, Reasoning: reasoning, ToolCalls: []scriptedmodel.ToolCall{{Name: "shell", Arguments: noThought}}}
	h := newHarness(t, scriptedmodel.WithRules(byStepReply(map[int]scriptedmodel.Reply{
		1: r1,
		2: toolCall("submit", callArgs("answer", "done", []string{"ev_0001"}, "RESOLVED")),
	})))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-reasoning", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: catalog.ToolProtocolNative}})
	if fin := h.waitFinished("run-reasoning"); fin.Outcome != catalog.OutcomeResolved {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-reasoning")
	var blob bool
	for _, r := range ofType[*catalog.ModelResponded](ds) {
		blob = blob || (r.CallID == "agent-s0001" && r.ReasoningBlob != nil)
	}
	if !blob {
		t.Fatal("the reasoning of step 1 was not recorded as a blob")
	}
	st := ofType[*catalog.AgentStep](ds)[0]
	if st.FormatError != "" || !strings.HasPrefix(st.Thought, "I list the files first.") || len(st.Thought) > 4200 || !strings.Contains(st.Thought, "bytes omitted") {
		t.Errorf("step 1: thought of %d bytes %.80q, format error %q", len(st.Thought), st.Thought, st.FormatError)
	}
}
