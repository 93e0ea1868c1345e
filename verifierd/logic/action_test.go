package logic

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// js encodes a Go string as a JSON string, as MIRAGE stores web actions.
func js(s string) json.RawMessage { return json.RawMessage(strconv.Quote(s)) }

func TestNormalizeActionText(t *testing.T) {
	tests := []struct{ in, want string }{
		{`click('79')`, `click("79")`},
		{`  click('79')  `, `click("79")`},
		{"\n\tclick('79')\n\n", `click("79")`},
		{`click('79')  # Zoom In to explore the area`, `click("79")`},
		{`click('79')# no space before the comment`, `click("79")`},
		{`click('79')  <!-- Clicking on the 'All' button -->`, `click("79")`},
		{`click('79') <!-- Clicking "All" again -->  `, `click("79")`},
		{`click('79') <!-- unterminated comment`, `click("79")`},
		{`fill('242', '#SERIES')`, `fill("242","#SERIES")`},
		{`fill('242', '#SERIES')  # a real comment`, `fill("242","#SERIES")`},
		{`goto('https://example.com/page#anchor')`, `goto("https://example.com/page#anchor")`},
		{`fill("a1", "it's <!-- not a comment -->")`, `fill("a1","it's <!-- not a comment -->")`},
		{`fill('a1', 'say \'hi\'')`, `fill("a1","say 'hi'")`},
		{`fill('a1', r'C:\new')`, `fill("a1",r"C:\\new")`},
		{`scroll(0, 200)`, `scroll(0,200)`},
		{`scroll( 0 ,200.0 )`, `scroll(0,200)`},
		{`noop(1e3)`, `noop(1000)`},
		{`noop(1_000)`, `noop(1000)`},
		{"import pyautogui\n\n# Click on the link\npyautogui.click(169, 670)", "import pyautogui\npyautogui.click(169,670)"},
		{"  import pyautogui\n    pyautogui.click(x=97, y=400)  # click\n", "import pyautogui\npyautogui.click(x=97,y=400)"},
		{"fill('1', '''two\nlines''')", `fill("1","two\nlines")`},
		{"# only a comment", ""},
		{"<!-- only a comment -->", ""},
		{"", ""},
		{"WAIT", "WAIT"},
	}
	for _, tt := range tests {
		if got := NormalizeActionText(tt.in); got != tt.want {
			t.Errorf("NormalizeActionText(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSameActionWeb(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"identical", `click('79')`, `click('79')`, true},
		{"trailing hash comment", `click('394')  # Zoom In to explore the area around Niagara Falls`, `click('394')`, true},
		{"different hash comments", `noop(1000)  # Wait for a moment before trying again`, `noop(1000)  # Waiting for the page`, true},
		{"html comment", `click('1311')  <!-- Clicking on the "Assigned to me" link again -->`, `click('1311')`, true},
		{"html vs hash comment", `go_back()  <!-- Navigate back -->`, "go_back() # back\n", true},
		{"surrounding whitespace", "\n  scroll(0, 200)\t\n", `scroll(0, 200)`, true},
		{"inner spacing", `scroll(0,200)`, `scroll( 0, 200 )`, true},
		{"quote style", `click("79")`, `click('79')`, true},
		{"number spelling", `scroll(0, 200.0)`, `scroll(0, 200)`, true},
		{"hash inside quotes is an argument", `fill('242', '#SERIES')`, `fill('242', '')`, false},
		{"hash inside quotes kept", `fill('242', '#SERIES')`, `fill('242', '#SERIES')  # comment`, true},
		{"different bid", `click('79')`, `click('80')`, false},
		{"different function", `click('79')`, `dblclick('79')`, false},
		{"different scroll", `scroll(0, 200)`, `scroll(0, 300)`, false},
		{"case matters in strings", `fill('1', 'Cora')`, `fill('1', 'cora')`, false},
		{"word spacing matters", `fill('1', 'a b')`, `fill('1', 'ab')`, false},
		{"comment only is no action", `# nothing`, `# nothing`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SameAction(js(tt.a), js(tt.b)); got != tt.same {
				t.Errorf("SameAction(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.same)
			}
			if got := SameAction(js(tt.b), js(tt.a)); got != tt.same {
				t.Errorf("SameAction is not symmetric for %q, %q", tt.a, tt.b)
			}
		})
	}
}

const editCall = `{"type": "function", "function": {"name": "edit", "arguments": "{\"start_line\": 305, \"end_line\": 314, \"replacement_text\": \"elif x:\\n    pass\\nend_of_edit\"}"}, "id": ""}`

func TestSameActionToolCalls(t *testing.T) {
	tests := []struct {
		name string
		a, b string
		same bool
	}{
		{"identical", editCall, editCall, true},
		{"key order and spacing in arguments",
			editCall,
			`{"type": "function", "function": {"name": "edit", "arguments": "{\n  \"replacement_text\": \"elif x:\\n    pass\\nend_of_edit\",\n  \"end_line\": 314,\n  \"start_line\": 305\n}"}, "id": ""}`,
			true},
		{"id and type ignored",
			editCall,
			`{"id": "call_8c1987058167", "function": {"arguments": "{\"end_line\":314,\"start_line\":305,\"replacement_text\":\"elif x:\\n    pass\\nend_of_edit\"}", "name": "edit"}}`,
			true},
		{"one-element list equals the call",
			editCall,
			`[{"id": "call_1", "type": "function", "function": {"name": "edit", "arguments": "{\"end_line\": 314, \"start_line\": 305, \"replacement_text\": \"elif x:\\n    pass\\nend_of_edit\"}"}}]`,
			true},
		{"arguments as an object",
			editCall,
			`{"function": {"name": "edit", "arguments": {"start_line": 305, "end_line": 314, "replacement_text": "elif x:\n    pass\nend_of_edit"}}}`,
			true},
		{"arguments encoded twice",
			`{"function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}`,
			`{"function": {"name": "bash", "arguments": "\"{\\\"command\\\": \\\"ls\\\"}\""}}`,
			true},
		{"flat name and arguments",
			`{"function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}`,
			`{"type": "function_call", "name": "bash", "arguments": "{\"command\":\"ls\"}"}`,
			true},
		{"number spelling in arguments",
			`{"function": {"name": "goto", "arguments": "{\"line_number\": 100}"}}`,
			`{"function": {"name": "goto", "arguments": "{\"line_number\": 100.0}"}}`,
			true},
		{"empty arguments",
			`{"function": {"name": "submit", "arguments": ""}}`,
			`{"function": {"name": "submit", "arguments": "{}"}}`,
			true},
		{"assistant message with tool_calls",
			editCall,
			`{"role": "assistant", "content": "Let me fix it.", "tool_calls": [` + editCall + `]}`,
			true},
		{"tool call encoded as a JSON string",
			`{"function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}`,
			strconv.Quote(`{"function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}`),
			true},
		{"different argument value",
			editCall,
			`{"type": "function", "function": {"name": "edit", "arguments": "{\"start_line\": 305, \"end_line\": 315, \"replacement_text\": \"elif x:\\n    pass\\nend_of_edit\"}"}, "id": ""}`,
			false},
		{"replacement text whitespace matters",
			editCall,
			`{"type": "function", "function": {"name": "edit", "arguments": "{\"start_line\": 305, \"end_line\": 314, \"replacement_text\": \"elif x:\\n  pass\\nend_of_edit\"}"}, "id": ""}`,
			false},
		{"different function name",
			`{"function": {"name": "open", "arguments": "{\"path\": \"a.py\"}"}}`,
			`{"function": {"name": "create", "arguments": "{\"path\": \"a.py\"}"}}`,
			false},
		{"string 1 is not number 1",
			`{"function": {"name": "goto", "arguments": "{\"line_number\": 1}"}}`,
			`{"function": {"name": "goto", "arguments": "{\"line_number\": \"1\"}"}}`,
			false},
		{"two calls are not one",
			editCall,
			`[` + editCall + `, ` + editCall + `]`,
			false},
		{"two calls equal two calls in order",
			`[{"function": {"name": "a", "arguments": "{}"}}, {"function": {"name": "b", "arguments": "{}"}}]`,
			`[{"function": {"name": "a", "arguments": ""}}, {"function": {"name": "b", "arguments": "{ }"}}]`,
			true},
		{"calls in another order differ",
			`[{"function": {"name": "a", "arguments": "{}"}}, {"function": {"name": "b", "arguments": "{}"}}]`,
			`[{"function": {"name": "b", "arguments": "{}"}}, {"function": {"name": "a", "arguments": "{}"}}]`,
			false},
		{"invalid JSON arguments compared as text",
			`{"function": {"name": "bash", "arguments": "{command: ls"}}`,
			`{"function": {"name": "bash", "arguments": " {command: ls "}}`,
			true},
		{"call is not a web string", editCall, strconv.Quote("edit 305:314"), false},
		{"empty list is no action", `[]`, `[]`, false},
		{"null is no action", `null`, `null`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SameAction(json.RawMessage(tt.a), json.RawMessage(tt.b)); got != tt.same {
				t.Errorf("SameAction(\n%s,\n%s) = %v, want %v", tt.a, tt.b, got, tt.same)
			}
			if got := SameAction(json.RawMessage(tt.b), json.RawMessage(tt.a)); got != tt.same {
				t.Errorf("SameAction is not symmetric")
			}
		})
	}
}

func TestParseActionKinds(t *testing.T) {
	tests := []struct {
		raw  string
		kind ActionKind
	}{
		{``, ActionNone},
		{`null`, ActionNone},
		{`""`, ActionNone},
		{`"   "`, ActionNone},
		{`[]`, ActionNone},
		{`[null]`, ActionNone},
		{`"click('1')"`, ActionText},
		{`["click('1')"]`, ActionText},
		{editCall, ActionCalls},
		{`[` + editCall + `]`, ActionCalls},
		{`{"role": "assistant", "content": "no tool call", "tool_calls": null}`, ActionNone},
		{`{"foo": 1}`, ActionJSON},
		{`42`, ActionJSON},
		{`click('1')`, ActionText}, // not JSON at all: taken as text
	}
	for _, tt := range tests {
		if got := ParseAction(json.RawMessage(tt.raw)); got.Kind != tt.kind {
			t.Errorf("ParseAction(%s).Kind = %v, want %v", tt.raw, got.Kind, tt.kind)
		}
	}
	if s := ParseAction(json.RawMessage(editCall)).String(); !strings.HasPrefix(s, `edit({"end_line":314,"replacement_text":`) || !strings.HasSuffix(s, "…") {
		t.Errorf("String() = %s", s)
	}
}

func TestResultActionExtraction(t *testing.T) {
	f := false
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{"parsed web action", Result{Action: js("click('1')")}, `click("1")`},
		{"action tags left in the action", Result{Action: js("<action>\nclick('1')\n</action>")}, `click("1")`},
		{"code fence in the action", Result{Action: js("```python\npyautogui.click(1, 2)\n```")}, `pyautogui.click(1,2)`},
		{"bad format: completion stored as action", Result{GoodFormat: &f, Action: js("<think>I will click.</think>\n<action>click('1')")}, `click("1")`},
		{"bad format: no tags", Result{GoodFormat: &f, Action: js("<think>I will click.</think>\nclick('1')")}, `click("1")`},
		{"bad format: OSWorld reply", Result{GoodFormat: &f, Action: js("I will wait.\n\n```\nWAIT\n```")}, `WAIT`},
		{"bad format: special code inline", Result{GoodFormat: &f, Action: js("Done.\n```DONE```")}, `DONE`},
		{"bad format: action missing, completion kept", Result{GoodFormat: &f, Completion: js("<action>go_back()</action>")}, `go_back()`},
	}
	for _, tt := range tests {
		if got := resultAction(tt.r); got.Text != tt.want {
			t.Errorf("%s: action %q, want %q", tt.name, got.Text, tt.want)
		}
	}
}
