package protocol

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

const (
	native = catalog.ToolProtocolNative
	text   = catalog.ToolProtocolText
	auto   = catalog.ToolProtocolAuto
)

func call(name, args string) catalog.ToolCall {
	return catalog.ToolCall{ID: "call_1", Name: name, Arguments: args}
}

const shellArgs = `{"thought":"The release page should state the date.","cmd":"curl -sL https://example.org | head","evidence_used":["ev_0002"],"status_update":"UNRESOLVED(need the release page)"}`

// TestToolsSchemas: four tools, each requiring its own arguments and the
// three discipline arguments, properties in order (thought first).
func TestToolsSchemas(t *testing.T) {
	want := map[string]string{"shell": "cmd", "notes_append": "text", "submit": "answer", "edit": "op"}
	required := map[string][]string{
		"shell": {"cmd"}, "notes_append": {"text"}, "submit": nil, "edit": {"op", "path"},
	}
	props := map[string]int{"shell": 4, "notes_append": 4, "submit": 5, "edit": 10}
	callOwn := map[string]string{
		"shell": `"cmd":"y"`, "notes_append": `"text":"y"`, "submit": `"answer":"y"`,
		"edit": `"op":"view","path":"/work/a.py","view_range":[1,-1]`,
	}
	tools := Tools()
	if len(tools) != 4 {
		t.Fatalf("%d tools", len(tools))
	}
	for _, tool := range tools {
		arg, ok := want[tool.Name]
		if !ok || tool.Description == "" {
			t.Fatalf("tool %+v", tool)
		}
		raw, err := json.Marshal(tool.Parameters)
		if err != nil {
			t.Fatal(err)
		}
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		wantReq := append(append([]string{ArgThought}, required[tool.Name]...), ArgEvidenceUsed, ArgStatusUpdate)
		if schema.Type != "object" || !reflect.DeepEqual(schema.Required, wantReq) || len(schema.Properties) != props[tool.Name] {
			t.Errorf("%s schema %s", tool.Name, raw)
		}
		if i, j := strings.Index(string(raw), `"thought"`), strings.Index(string(raw), `"`+arg+`"`); i < 0 || j < i {
			t.Errorf("%s: thought is not the first property: %s", tool.Name, raw)
		}
		// A call with every required argument parses.
		args := `{"thought":"x",` + callOwn[tool.Name] + `,"evidence_used":[],"status_update":"continuing"}`
		if turn, errs := ParseReply(native, Reply{ToolCalls: []catalog.ToolCall{call(tool.Name, args)}}); len(errs) > 0 || string(turn.Action.Tool) != tool.Name {
			t.Errorf("%s: %v %+v", tool.Name, errs, turn)
		}
	}
}

func TestParseReplyNative(t *testing.T) {
	turn, errs := ParseReply(native, Reply{ToolCalls: []catalog.ToolCall{call("shell", shellArgs)}})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := Turn{
		Thought:      "The release page should state the date.",
		Action:       Action{Tool: catalog.ActionShell, Cmd: "curl -sL https://example.org | head", Raw: `{"tool":"shell","args":{"cmd":"curl -sL https://example.org | head"}}`},
		EvidenceUsed: []string{"ev_0002"},
		StatusUpdate: StatusUpdate{State: StateUnresolved, Reason: "need the release page", Raw: "UNRESOLVED(need the release page)"},
		Protocol:     native,
		ToolCallID:   "call_1",
	}
	if !reflect.DeepEqual(turn, want) {
		t.Errorf("got  %#v\nwant %#v", turn, want)
	}
	// The canonical action parses in the text format to the same action.
	if tt, errs := Parse(reply(thoughtLine, turn.Action.Raw, evLine, statusLine)); len(errs) > 0 || !sameAction(tt.Action, turn.Action) {
		t.Errorf("canonical action %s: %v", turn.Action.Raw, errs)
	}

	lenient := []struct {
		name string
		r    Reply
		chk  func(Turn) bool
	}{
		{"arguments encoded twice", Reply{ToolCalls: []catalog.ToolCall{call("shell", mustString(shellArgs))}}, func(t Turn) bool { return t.Action.Cmd != "" }},
		{"evidence as a string", Reply{ToolCalls: []catalog.ToolCall{call("submit", `{"thought":"t","answer":"42","evidence_used":"ev_1, ev_2","status_update":"RESOLVED"}`)}},
			func(t Turn) bool { return reflect.DeepEqual(t.EvidenceUsed, []string{"ev_0001", "ev_0002"}) }},
		{"evidence none", Reply{ToolCalls: []catalog.ToolCall{call("submit", `{"thought":"t","answer":"42","evidence_used":["none"],"status_update":"RESOLVED"}`)}},
			func(t Turn) bool { return t.EvidenceUsed == nil }},
		{"thought from the content", Reply{Text: "THOUGHT: from the text", ToolCalls: []catalog.ToolCall{call("shell", `{"cmd":"ls","evidence_used":[],"status_update":"continuing"}`)}},
			func(t Turn) bool { return t.Thought == "from the text" }},
		{"thought from plain content", Reply{Text: "I list the files.", ToolCalls: []catalog.ToolCall{call("shell", `{"cmd":"ls","evidence_used":[],"status_update":"continuing"}`)}},
			func(t Turn) bool { return t.Thought == "I list the files." }},
		{"thought from the reasoning", Reply{Reasoning: "Listing first.", ToolCalls: []catalog.ToolCall{call("shell", `{"cmd":"ls","evidence_used":[],"status_update":"continuing"}`)}},
			func(t Turn) bool { return t.Thought == "Listing first." }},
		{"alias and command key", Reply{ToolCalls: []catalog.ToolCall{call("bash", `{"thought":"t","command":"ls","evidence_used":[],"status_update":"continuing"}`)}},
			func(t Turn) bool { return t.Action.Tool == catalog.ActionShell && t.Action.Cmd == "ls" }},
		{"the same call twice", Reply{ToolCalls: []catalog.ToolCall{call("shell", shellArgs), call("shell", shellArgs)}}, func(t Turn) bool { return t.Action.Cmd != "" }},
	}
	for _, tc := range lenient {
		turn, errs := ParseReply(native, tc.r)
		if len(errs) > 0 || !tc.chk(turn) {
			t.Errorf("%s: %v %#v", tc.name, errs, turn)
		}
	}
}

func mustString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

var replyErrorCases = []struct {
	name string
	p    catalog.ToolProtocol
	r    Reply
	want []Code
	msg  []string // substrings of the first error's message
}{
	{"text: empty", text, Reply{}, []Code{CodeEmptyReply}, []string{"empty reply", "THOUGHT", "native or auto"}},
	{"text: cut empty", text, Reply{FinishReason: "length"}, []Code{CodeEmptyReply}, []string{"max_tokens"}},
	{"text: reasoning only", text, Reply{Reasoning: "long thinking", ReasoningSource: "reasoning_content"}, []Code{CodeReasoningOnly}, []string{"only reasoning (reasoning_content)", "enable_thinking"}},
	{"text: tool call only", text, Reply{ToolCalls: []catalog.ToolCall{call("shell", shellArgs)}}, []Code{CodeUnexpectedToolCall}, []string{"native tool call (shell)", "--tool-protocol native or auto"}},
	{"native: text only", native, Reply{Text: reply(thoughtLine, shellJSON, evLine, statusLine)}, []Code{CodeMissingToolCall}, []string{"no tool call", "--jinja", "--tool-protocol text or auto"}},
	{"native: empty", native, Reply{}, []Code{CodeEmptyReply}, []string{"Call exactly one function", "--jinja"}},
	{"native: reasoning only", native, Reply{Reasoning: "r", ReasoningSource: "harmony"}, []Code{CodeReasoningOnly}, []string{"(harmony)"}},
	{"auto: empty", auto, Reply{}, []Code{CodeEmptyReply}, []string{"Call exactly one function", "or write THOUGHT"}},
	{"native: two calls", native, Reply{ToolCalls: []catalog.ToolCall{call("shell", shellArgs), call("submit", `{"answer":"x"}`)}}, []Code{CodeMultipleActions}, []string{"2 tool calls (shell, submit)"}},
	{"native: bad arguments", native, Reply{ToolCalls: []catalog.ToolCall{call("shell", `{"cmd":"ls"`)}}, []Code{CodeMissingThought, CodeBadJSON, CodeMissingEvidenceUsed, CodeMissingStatusUpdate}, []string{"thought argument"}},
	{"native: unknown function", native, Reply{ToolCalls: []catalog.ToolCall{call("browser", `{"thought":"t","url":"x","evidence_used":[],"status_update":"continuing"}`)}}, []Code{CodeUnknownTool}, []string{`"browser"`}},
	{"native: empty command", native, Reply{ToolCalls: []catalog.ToolCall{call("shell", `{"thought":"t","cmd":" ","evidence_used":[],"status_update":"continuing"}`)}}, []Code{CodeEmptyCommand}, []string{"cmd argument"}},
	{"native: notes overwrite", native, Reply{ToolCalls: []catalog.ToolCall{call("notes_append", `{"thought":"t","text":"x","mode":"w","evidence_used":[],"status_update":"continuing"}`)}}, []Code{CodeNotesOverwrite}, []string{"append-only"}},
	{"native: answer too large", native, Reply{ToolCalls: []catalog.ToolCall{call("submit", `{"thought":"t","answer":"`+strings.Repeat("a", MaxActionBytes+1)+`","evidence_used":[],"status_update":"RESOLVED"}`)}}, []Code{CodeActionTooLarge}, []string{"answer is 131073 bytes", "Nothing ran"}},
	{"text: command too large", text, Reply{Text: reply(thoughtLine, `{"tool":"shell","args":{"cmd":"echo `+strings.Repeat("a", MaxActionBytes)+`"}}`, evLine, statusLine)}, []Code{CodeActionTooLarge}, []string{"shell command is 131077 bytes"}},
	{"native: missing discipline", native, Reply{ToolCalls: []catalog.ToolCall{call("shell", `{"cmd":"ls"}`)}}, []Code{CodeMissingThought, CodeMissingEvidenceUsed, CodeMissingStatusUpdate}, []string{"thought"}},
	{"native: bad evidence and status", native, Reply{ToolCalls: []catalog.ToolCall{call("shell", `{"thought":"t","cmd":"ls","evidence_used":["ev_x"],"status_update":"done"}`)}}, []Code{CodeBadEvidenceID, CodeBadStatusUpdate}, []string{"evidence_used"}},
	{"native: unresolved without reason", native, Reply{ToolCalls: []catalog.ToolCall{call("shell", `{"thought":"t","cmd":"ls","evidence_used":[],"status_update":"UNRESOLVED"}`)}}, []Code{CodeBadStatusUpdate}, []string{"reason"}},
}

func TestParseReplyErrors(t *testing.T) {
	for _, tc := range replyErrorCases {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := ParseReply(tc.p, tc.r)
			if got := codes(errs); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("codes %v, want %v (%v)", got, tc.want, errs)
			}
			for _, m := range tc.msg {
				if !strings.Contains(errs[0].Message, m) {
					t.Errorf("message %q lacks %q", errs[0].Message, m)
				}
			}
			if errs[0].Code.Unusable() && len(errs) != 1 {
				t.Errorf("an unusable reply has other errors: %v", errs)
			}
			// The same fault gives the same message (the three-in-a-row rule).
			if _, again := ParseReply(tc.p, tc.r); Summary(again) != Summary(errs) {
				t.Errorf("not deterministic: %q vs %q", Summary(again), Summary(errs))
			}
		})
	}
}

// TestToolCallAndTextDisagree: in native mode the tool call wins and the
// notice says the text action was ignored; in text mode the text wins and
// the notice says the tool call was ignored.
func TestToolCallAndTextDisagree(t *testing.T) {
	r := Reply{
		Text:      reply(thoughtLine, `{"tool":"submit","args":{"answer":"42"}}`, evLine, "STATUS_UPDATE: RESOLVED"),
		ToolCalls: []catalog.ToolCall{call("shell", shellArgs)},
	}
	turn, errs := ParseReply(native, r)
	if len(errs) > 0 || turn.Action.Tool != catalog.ActionShell || !strings.Contains(turn.Notice, "the tool call ran and the text action was ignored") {
		t.Errorf("native: %v %+v", errs, turn)
	}
	turn, errs = ParseReply(text, r)
	if len(errs) > 0 || turn.Action.Tool != catalog.ActionSubmit || !strings.Contains(turn.Notice, "native tool call (shell); it was ignored") {
		t.Errorf("text: %v %+v", errs, turn)
	}
	// auto, not decided: the tool call decides native, and wins.
	if p, _, ok := Decide(r); !ok || p != native {
		t.Errorf("Decide = %v %v", p, ok)
	}
	// The same action in both: no notice.
	same := Reply{Text: reply(thoughtLine, shellJSON, evLine, statusLine), ToolCalls: r.ToolCalls}
	if turn, _ := ParseReply(native, same); turn.Notice != "" {
		t.Errorf("notice for agreeing text: %q", turn.Notice)
	}
}

func TestDecide(t *testing.T) {
	good := reply(thoughtLine, shellJSON, evLine, statusLine)
	for _, tc := range []struct {
		name string
		r    Reply
		want catalog.ToolProtocol
		ok   bool
	}{
		{"refused", Reply{ToolsRefused: true, Text: good}, text, true},
		{"tool call", Reply{ToolCalls: []catalog.ToolCall{call("shell", shellArgs)}}, native, true},
		{"text format", Reply{Text: good}, text, true},
		{"prose", Reply{Text: "Sure, let me look."}, "", false},
		{"empty", Reply{}, "", false},
		{"reasoning only", Reply{Reasoning: "hmm"}, "", false},
	} {
		p, why, ok := Decide(tc.r)
		if p != tc.want || ok != tc.ok || (ok && why == "") {
			t.Errorf("%s: %q %q %v", tc.name, p, why, ok)
		}
	}
}

func TestSystemPromptFor(t *testing.T) {
	if SystemPromptFor(text) != SystemPrompt() {
		t.Error("the text prompt changed")
	}
	a := SystemPromptFor(auto)
	if SystemPromptFor("") != a || !strings.HasPrefix(a, SystemPrompt()) || !strings.Contains(a, "# 12. Function calls") {
		t.Error("the auto prompt is not the text prompt followed by section 12")
	}
	n := SystemPromptFor(native)
	for _, want := range []string{"# 2. Replies: one function call", "# 3. Functions", "evidence_used", "status_update", "# 4. Evidence", "# 10. The auditor", "# 11. Examples", "shell({"} {
		if !strings.Contains(n, want) {
			t.Errorf("native prompt lacks %q", want)
		}
	}
	for _, gone := range []string{"THOUGHT: <one line", `{"tool":"shell","args"`} {
		if strings.Contains(n, gone) {
			t.Errorf("native prompt still describes the text format: %q", gone)
		}
	}
	// Every example call of the native prompt parses as a call.
	seen := 0
	for _, l := range strings.Split(n, "\n") {
		name, args, ok := strings.Cut(l, "({")
		if !ok || !strings.HasSuffix(l, "})") {
			continue
		}
		seen++
		args = "{" + strings.TrimSuffix(args, ")")
		if _, errs := ParseReply(native, Reply{ToolCalls: []catalog.ToolCall{call(name, args)}}); len(errs) > 0 {
			t.Errorf("example %s: %v", name, errs)
		}
	}
	if seen != 4 {
		t.Errorf("%d example calls in the native prompt, want 4", seen)
	}
}

func TestFeedbackFor(t *testing.T) {
	errs := []FormatError{{CodeMissingToolCall, "m"}}
	if Feedback(errs) != FeedbackFor(text, errs) || !strings.Contains(Feedback(errs), "STATUS_UPDATE: <continuing") {
		t.Error("text feedback changed")
	}
	if fb := FeedbackFor(native, errs); !strings.Contains(fb, "exactly one function call") || strings.Contains(fb, "THOUGHT: <") {
		t.Errorf("native feedback: %s", fb)
	}
	if fb := FeedbackFor(auto, errs); !strings.Contains(fb, "exactly one function call") || !strings.Contains(fb, "THOUGHT: <") {
		t.Errorf("auto feedback: %s", fb)
	}
	if SummaryCode(Summary(errs)) != CodeMissingToolCall || !CodeMissingToolCall.Unusable() || CodeMissingThought.Unusable() {
		t.Error("SummaryCode / Unusable")
	}
}

// FuzzParseReplyNative: any tool call, with any text beside it, parses
// without panicking, to the same turn twice; an unusable error is alone.
func FuzzParseReplyNative(f *testing.F) {
	f.Add("shell", shellArgs, "")
	f.Add("submit", `"{\"answer\":\"x\"}"`, "THOUGHT: t\n{\"tool\":\"shell\",\"command\":\"ls\"}")
	f.Add("notes_append", `{"text":null,"evidence_used":[1,{}],"status_update":5}`, "")
	f.Add("", "", "")
	f.Add("bash", `{"cmd":"a\u0026b","n":1e400}`, "<think>")
	f.Fuzz(func(t *testing.T, name, args, content string) {
		r := Reply{Text: content, ToolCalls: []catalog.ToolCall{{ID: "c", Name: name, Arguments: args}}}
		for _, p := range []catalog.ToolProtocol{native, text, auto} {
			t1, e1 := ParseReply(p, r)
			t2, e2 := ParseReply(p, r)
			if !reflect.DeepEqual(t1, t2) || Summary(e1) != Summary(e2) {
				t.Fatalf("%s: not deterministic", p)
			}
			if len(e1) > 0 && e1[0].Code.Unusable() && len(e1) != 1 {
				t.Fatalf("%s: unusable error with others: %v", p, e1)
			}
			if p == native && len(e1) == 0 && (t1.Action.Tool == "" || t1.Thought == "" || !json.Valid([]byte(t1.Action.Raw))) {
				t.Fatalf("accepted a call without tool, thought or valid action: %#v", t1)
			}
		}
	})
}
