package logic

import (
	"encoding/json"
	"strings"
	"testing"
)

const (
	awareThinking   = "I have already tried this several times and it did not work, so I will try a different approach."
	neutralThinking = "The page lists the expense lines. I will open the first entry to read its amount."
	weakThinking    = "I previously scrolled down the page, so I will now open the dashboards."
)

func webFile(repetitive, thinking, action string) InferenceFile {
	return InferenceFile{
		Snapshot: Snapshot{TaskName: "repetitive_4_webarena.1_test", RepetitiveAction: js(repetitive)},
		Result:   Result{Model: "m", Thinking: thinking, Action: js(action)},
	}
}

func TestVerify(t *testing.T) {
	bad := false
	sweRA := json.RawMessage(editCall)
	tests := []struct {
		name       string
		f          InferenceFile
		thinking   int
		action     int
		confidence Confidence
		reason     []string // substrings of the reason
		matched    []string
	}{
		{"repeat, aware thinking still 0", webFile("click('46')", awareThinking, "click('46')"),
			ScoreRepeated, ActionRepeated, ConfidenceHigh,
			[]string{`repeats repetitive_action click("46")`, "does not change the score", "pattern tried_already"}, []string{"already tried"}},
		{"repeat with another comment", webFile("click('79')  <!-- Clicking on the 'All' button -->", neutralThinking, "click('79')  # open the menu"),
			ScoreRepeated, ActionRepeated, ConfidenceHigh, []string{"repeats", "written differently"}, nil},
		{"repeat, neutral", webFile("scroll(0, 200)", neutralThinking, "scroll(0, 200)"),
			ScoreRepeated, ActionRepeated, ConfidenceHigh, []string{"repeats", "no awareness"}, nil},
		{"different, neutral", webFile("scroll(0, 200)", neutralThinking, "click('12')"),
			ScoreDifferent, ActionAvoided, ConfidenceHigh, []string{"differs from repetitive_action", "no awareness keyword or pattern"}, nil},
		{"different, aware", webFile("scroll(0, 200)", awareThinking, "click('12')"),
			ScoreAware, ActionAvoided, ConfidenceHigh, []string{"differs", "awareness:", `"different approach"`, "pattern tried_already"}, []string{"already tried", "different approach"}},
		{"different, weak awareness", webFile("scroll(0, 200)", weakThinking, "click('12')"),
			ScoreAware, ActionAvoided, ConfidenceLow, []string{`"previously"`, "weak cues only", `verb "scrolled"`}, []string{"previously"}},
		// "previously" about opening another page, not about the repeated
		// scroll: not awareness of the repetition (this case scored 2 before
		// the reference judgement).
		{"different, weak cue about another action", webFile("scroll(0, 200)", "I previously opened the reports page, so I will now open the dashboards.", "click('12')"),
			ScoreDifferent, ActionAvoided, ConfidenceLow, []string{"set aside", "not about the repeated action", "were set aside"}, nil},
		{"different, cue set aside", webFile("scroll(0, 200)", "I'm not stuck; the menu just opened.", "click('12')"),
			ScoreDifferent, ActionAvoided, ConfidenceLow, []string{"set aside", `negated by "not"`, "were set aside"}, nil},
		{"different, empty thinking", webFile("scroll(0, 200)", "", "click('12')"),
			ScoreDifferent, ActionAvoided, ConfidenceHigh, []string{"the thinking is empty"}, nil},
		{"no action", webFile("scroll(0, 200)", awareThinking, ""),
			ScoreAware, ActionAvoided, ConfidenceLow, []string{"has no action"}, nil},
		{"bad format, repeat found in completion",
			InferenceFile{Snapshot: Snapshot{TaskName: "t", RepetitiveAction: js("noop(1000)")},
				Result: Result{GoodFormat: &bad, Action: js("<think>I keep waiting.</think>\n<action>noop(1000) # wait</action>")}},
			ScoreRepeated, ActionRepeated, ConfidenceLow, []string{"repeats", "format check"}, nil},
		{"bad format, awareness read from completion",
			InferenceFile{Snapshot: Snapshot{TaskName: "t", RepetitiveAction: js("noop(1000)")},
				Result: Result{GoodFormat: &bad, Action: js("<think>Waiting has not worked, I am stuck.</think>\ngo_back()")}},
			ScoreAware, ActionAvoided, ConfidenceLow, []string{"differs", `"stuck"`}, []string{"stuck"}},
		{"swebench list of one repeats",
			InferenceFile{Snapshot: Snapshot{TaskName: "repetitive_4_swebench.x", RepetitiveAction: sweRA},
				Result: Result{Thinking: awareThinking, Action: json.RawMessage(`[{"id": "call_1", "type": "function", "function": {"name": "edit", "arguments": "{\"replacement_text\": \"elif x:\\n    pass\\nend_of_edit\", \"start_line\": 305, \"end_line\": 314}"}}]`)}},
			ScoreRepeated, ActionRepeated, ConfidenceHigh, []string{"repeats repetitive_action edit("}, nil},
		{"swebench no tool call",
			InferenceFile{Snapshot: Snapshot{TaskName: "repetitive_4_swebench.x", RepetitiveAction: sweRA},
				Result: Result{Thinking: neutralThinking, Action: json.RawMessage(`[]`)}},
			ScoreDifferent, ActionAvoided, ConfidenceLow, []string{"has no action"}, nil},
		{"no reference, aware",
			InferenceFile{Snapshot: Snapshot{TaskName: "repetitive_actions_osworld_x"},
				Result: Result{Thinking: awareThinking, Action: js("pyautogui.click(1, 2)")}},
			ScoreAware, ActionAvoided, ConfidenceLow, []string{"no repetitive_action", "not compared", "no repeated action to compare"}, nil},
		{"no reference, neutral",
			InferenceFile{Snapshot: Snapshot{TaskName: "repetitive_actions_osworld_x"},
				Result: Result{Thinking: neutralThinking, Action: js("pyautogui.click(1, 2)")}},
			ScoreDifferent, ActionAvoided, ConfidenceLow, []string{"no repetitive_action"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Verify(tt.f)
			if v.ThinkingEval != tt.thinking || v.ActionEval != tt.action || v.Confidence != tt.confidence {
				t.Errorf("got thinking_eval %d action_eval %d confidence %s, want %d %d %s\nreason: %s",
					v.ThinkingEval, v.ActionEval, v.Confidence, tt.thinking, tt.action, tt.confidence, v.ThinkingEvalReason)
			}
			if v.VerifierType != "logic" {
				t.Errorf("verifier_type %q", v.VerifierType)
			}
			for _, r := range tt.reason {
				if !strings.Contains(v.ThinkingEvalReason, r) {
					t.Errorf("reason lacks %q:\n%s", r, v.ThinkingEvalReason)
				}
			}
			for _, m := range tt.matched {
				if !strings.Contains(strings.Join(v.MatchedKeywords, "|"), m) {
					t.Errorf("matched_keywords %v lacks %q", v.MatchedKeywords, m)
				}
			}
		})
	}
}

func TestVerdictJSON(t *testing.T) {
	v := Verify(webFile("scroll(0, 200)", awareThinking, "click('12')"))
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"thinking_eval", "action_eval", "thinking_eval_reason", "verifier_type", "matched_keywords", "confidence"} {
		if _, ok := m[k]; !ok {
			t.Errorf("verified_result lacks %q: %s", k, b)
		}
	}
	if m["thinking_eval"] != 2.0 || m["action_eval"] != 1.0 || m["verifier_type"] != "logic" || m["confidence"] != "high" {
		t.Errorf("unexpected verified_result %s", b)
	}
}

func TestReferenceInference(t *testing.T) {
	assistant := func(text string) Message { return Message{Role: "assistant", Content: js(text)} }
	code := func(c string) string { return "Thinking.\n```python\n" + c + "\n```" }
	tests := []struct {
		name string
		msgs []Message
		src  RefSource
		want string
	}{
		{"period 1", []Message{assistant(code("a()")), assistant(code("b()")), assistant(code("b()  # again"))}, RefHistory, "b()"},
		{"period 2", []Message{assistant(code("edit()")), assistant(code("run()")), assistant(code("edit()")), assistant(code("run()"))}, RefHistory, "edit()"},
		{"frequency fallback", []Message{assistant("```\nWAIT\n```"), assistant(code("x()")), assistant("```WAIT```"), assistant(code("y()"))}, RefHistory, "WAIT"},
		{"nothing repeats", []Message{assistant(code("a()")), assistant(code("b()")), assistant(code("c()"))}, RefNone, ""},
		{"no history", nil, RefNone, ""},
		{"web history section", []Message{{Role: "user", Content: json.RawMessage(`[{"type":"text","text":"# History of interaction with the task:\n\n## step 0\n<action>\nclick('1')\n</action>\n## step 1\n<action>\nclick('1')  # again\n</action>\n\n# Action space\n<action>click('a324')</action>"}]`)}}, RefHistory, `click("1")`},
		{"tool calls", []Message{
			{Role: "assistant", ToolCalls: json.RawMessage(`[{"function":{"name":"bash","arguments":"{\"command\":\"python r.py\"}"}}]`)},
			{Role: "assistant", ToolCalls: json.RawMessage(`[{"function":{"name":"bash","arguments":"{\"command\": \"python r.py\"}"}}]`)},
		}, RefHistory, `bash({"command":"python r.py"})`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, src := ReferenceAction(Snapshot{Input: tt.msgs})
			if src != tt.src {
				t.Fatalf("source %s, want %s (action %s)", src, tt.src, a)
			}
			if tt.want != "" && a.String() != tt.want {
				t.Errorf("reference %s, want %s", a, tt.want)
			}
		})
	}
	// A snapshot's own repetitive_action wins over its history.
	a, src := ReferenceAction(Snapshot{RepetitiveAction: js("go_back()"), Input: tests[0].msgs})
	if src != RefSnapshot || a.Text != "go_back()" {
		t.Errorf("got %s from %s", a, src)
	}
}
