package protocol

import (
	"strconv"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// TestPromptMentionsEveryAcceptedShape keeps the system prompt and the
// parser in step: every shape and alias the parser accepts is named in the
// prompt, and every action the prompt shows parses.
func TestPromptMentionsEveryAcceptedShape(t *testing.T) {
	p := SystemPrompt()
	if len(p) < 2000 {
		t.Fatalf("system prompt is only %d bytes", len(p))
	}
	tools := map[catalog.ActionTool]bool{}
	for _, sh := range Shapes() {
		if !strings.Contains(p, sh.Example) {
			t.Errorf("prompt lacks the %s example %s", sh.Name, sh.Example)
		}
		turn, errs := Parse(reply(thoughtLine, sh.Example, evLine, statusLine))
		if len(errs) > 0 || turn.Action.Tool != sh.Tool {
			t.Errorf("shape %s: tool %q, errors %v", sh.Name, turn.Action.Tool, errs)
		}
		tools[sh.Tool] = true
	}
	for _, tool := range []catalog.ActionTool{catalog.ActionShell, catalog.ActionEdit, catalog.ActionNotesAppend, catalog.ActionSubmit} {
		if !tools[tool] {
			t.Errorf("Shapes has no example of %s", tool)
		}
	}
	for name, tool := range toolNames {
		if !strings.Contains(p, strconv.Quote(name)) {
			t.Errorf("prompt does not name the accepted tool name %q (%s)", name, tool)
		}
		args := `{"cmd":"ls","text":"x","answer":"y"}`
		if tool == catalog.ActionEdit {
			args = `{"op":"view","path":"/work/a.py"}`
		}
		turn, errs := Parse(reply(thoughtLine, `{"tool":"`+name+`","args":`+args+`}`, evLine, statusLine))
		if len(errs) > 0 || turn.Action.Tool != tool {
			t.Errorf("alias %q: tool %q, errors %v", name, turn.Action.Tool, errs)
		}
	}
	// The argument keys and recovery forms the parser accepts.
	for _, want := range []string{
		`"args":{"cmd":`, `"command":"`, `"args":{"command":`, `"args":{"text":`, `"args":{"answer":`, `"args":{"answer_file":`,
		`"op":"view"`, `"op":"create"`, `"op":"str_replace"`, "insert_line", "undo", `"view_range"`, "line numbers", "/work/output/",
		"ACTION:", "```json", "<think>",
		"THOUGHT:", "EVIDENCE_USED:", "STATUS_UPDATE:", "none", "ev_0001", "ev_1",
		"continuing", "UNRESOLVED(<reason>)", "RESOLVED", `"mode":"w"`,
	} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt does not mention %q", want)
		}
	}
	// Every action line shown in the prompt parses.
	n := 0
	for _, l := range strings.Split(p, "\n") {
		if !strings.HasPrefix(l, `{"tool"`) {
			continue
		}
		n++
		if _, errs := Parse(reply(thoughtLine, l, evLine, statusLine)); len(errs) > 0 {
			t.Errorf("prompt action %s does not parse: %v", l, errs)
		}
	}
	if n < len(Shapes()) {
		t.Errorf("only %d action lines in the prompt", n)
	}
}

// TestPromptExamplesParse parses every "Example N" reply of the prompt.
func TestPromptExamplesParse(t *testing.T) {
	p := SystemPrompt()
	seen := map[catalog.ActionTool]bool{}
	n := 0
	for _, block := range strings.Split(p, "\n\n") {
		if !strings.HasPrefix(block, "Example ") {
			continue
		}
		n++
		body := block[strings.IndexByte(block, '\n')+1:]
		turn, errs := Parse(body)
		if len(errs) > 0 {
			t.Errorf("example %q: %v", block[:strings.IndexByte(block, '\n')], errs)
		}
		seen[turn.Action.Tool] = true
	}
	if n != 4 || len(seen) != 4 {
		t.Errorf("want 4 examples covering the 4 tools, got %d covering %v", n, seen)
	}
}

// TestPromptCoversTheSpec checks the topics the spec requires.
func TestPromptCoversTheSpec(t *testing.T) {
	p := SystemPrompt()
	for _, want := range []string{
		"/work", "/input", "read-only", "read-write", "curl", "wget", "pip install", "/work/.venv",
		"evidence hook", "URL", "snippet", "path", "command",
		"Notes gate", "append-only", "PINNED notes.md", "ACTION TAIL",
		"OPEN CONSTRAINTS", "FEEDBACK",
		"at least 2 official domains", "at least 1 independent domain", "no official announcement found",
		"mutate", "auditor", "format error", "NOTHING runs",
	} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt does not mention %q", want)
		}
	}
	if strings.Contains(p, "\r") {
		t.Error("prompt has CR characters")
	}
}
