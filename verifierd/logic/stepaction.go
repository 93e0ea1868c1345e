package logic

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

// StepAction is the action of one VERA agent step (catalog.AgentStep) in
// canonical form, ready for Action.Equal.
type StepAction struct {
	// Tool is the tool the action names (shell, edit, notes_append,
	// submit, or another name the model wrote).
	Tool string
	// Action is the canonical action: a tool call named Tool whose
	// arguments are {"cmd": NormalizeShellCommand(command)} for shell,
	// the file operation for edit (op, path and the fields of that op,
	// texts verbatim: see editAction), {"text": …} for notes_append,
	// {"answer": …} for submit (text with runs of whitespace collapsed)
	// and the action's own arguments, with string values
	// whitespace-collapsed, for any other tool.
	Action Action
	// Canonical is Action as JSON, the form Verify reads:
	// {"name": Tool, "arguments": {…}}.
	Canonical json.RawMessage
	// Display is the action as the agent wrote it, for messages: the
	// command for shell, the edit's summary for edit ("edit str_replace
	// /work/a.py"), "tool: text" for the others.
	Display string
}

// textTool names the action of a step whose action line is neither JSON
// nor parsed by the agent; its text is compared whitespace-collapsed.
const textTool = "(text)"

// Limits of displayed texts.
const (
	maxDisplay = 500
	maxThought = 600
)

// ParseStepAction reads the action of an agent step. The raw action line
// is read first, in the shapes the agent accepts:
// {"tool":"shell","args":{"cmd":"…"}}, {"tool":"shell","command":"…"}, and
// also {"name": …, "arguments": …} with arguments as an object or a
// JSON-encoded string; when the raw line is not JSON the step's parsed
// fields (action_tool with command, notes_text or answer) are used. It
// returns false when the step carries no action: a format error (no tool
// ran), an empty action, or a shell action without a command.
func ParseStepAction(st catalog.AgentStep) (StepAction, bool) {
	if strings.TrimSpace(st.FormatError) != "" {
		return StepAction{}, false
	}
	tool, args, ok := rawStepAction(st.Action)
	if !ok {
		tool, args = string(st.ActionTool), map[string]any{}
		if tool == "" {
			if raw := strings.TrimSpace(st.Action); raw != "" {
				// Not JSON and not parsed by the agent: compare the text.
				tool, args = textTool, map[string]any{"text": raw}
			}
		}
	}
	if tool == "" {
		tool = string(st.ActionTool)
	}
	if tool == "" {
		return StepAction{}, false
	}
	fromStep := func(keys []string, field string) string {
		for _, k := range keys {
			if s, ok := args[k].(string); ok && strings.TrimSpace(s) != "" {
				return s
			}
		}
		return field
	}
	var canonArgs map[string]any
	var display string
	switch tool {
	case string(catalog.ActionShell):
		cmd := fromStep([]string{"cmd", "command"}, st.Command)
		norm := NormalizeShellCommand(cmd)
		if norm == "" {
			return StepAction{}, false
		}
		canonArgs = map[string]any{"cmd": norm}
		display = strings.TrimSpace(cmd)
	case string(catalog.ActionEdit):
		var ok bool
		canonArgs, display, ok = editAction(st, args)
		if !ok {
			return StepAction{}, false
		}
	case string(catalog.ActionNotesAppend):
		text := fromStep([]string{"text", "notes", "content"}, st.NotesText)
		canonArgs = map[string]any{"text": collapseSpace(text)}
		display = tool + ": " + strings.TrimSpace(text)
	case string(catalog.ActionSubmit):
		answer := fromStep([]string{"answer", "text"}, st.Answer)
		canonArgs = map[string]any{"answer": collapseSpace(answer)}
		display = tool + ": " + strings.TrimSpace(answer)
	default:
		canonArgs, _ = collapseStrings(args).(map[string]any)
		if canonArgs == nil {
			canonArgs = map[string]any{}
		}
		a, _ := json.Marshal(canonArgs)
		display = tool + ": " + string(a)
		if tool == textTool {
			display = strings.TrimSpace(st.Action)
		}
	}
	canon, err := json.Marshal(map[string]any{"name": tool, "arguments": canonArgs})
	if err != nil {
		return StepAction{}, false
	}
	act := ParseAction(canon)
	if act.Kind != ActionCalls {
		return StepAction{}, false
	}
	act.Raw = clip(display, maxDisplay)
	return StepAction{Tool: tool, Action: act, Canonical: canon, Display: clip(display, maxDisplay)}, true
}

// rawStepAction decodes the raw action line: its tool and arguments.
func rawStepAction(raw string) (string, map[string]any, bool) {
	raw = strings.TrimSpace(raw)
	if !strings.HasPrefix(raw, "{") {
		return "", nil, false
	}
	v, err := decodeJSON([]byte(raw))
	if err != nil {
		return "", nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return "", nil, false
	}
	tool, _ := m["tool"].(string)
	if tool == "" {
		tool, _ = m["name"].(string)
	}
	var args map[string]any
	for _, k := range []string{"args", "arguments", "input", "parameters"} {
		switch a := m[k].(type) {
		case map[string]any:
			args = a
		case string:
			if inner, err := decodeJSON([]byte(strings.TrimSpace(a))); err == nil {
				args, _ = inner.(map[string]any)
			}
		}
		if args != nil {
			break
		}
	}
	// Arguments given beside the tool ({"tool":"shell","command":"…"})
	// count too; nested ones win.
	merged := map[string]any{}
	for k, v := range m {
		switch k {
		case "tool", "name", "args", "arguments", "input", "parameters":
			continue
		}
		merged[k] = v
	}
	for k, v := range args {
		merged[k] = v
	}
	return strings.TrimSpace(tool), merged, true
}

// collapseSpace trims s and collapses its runs of whitespace.
func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// collapseStrings applies collapseSpace to every string of a JSON value.
func collapseStrings(v any) any {
	switch x := v.(type) {
	case string:
		return collapseSpace(x)
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = collapseStrings(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = collapseStrings(e)
		}
		return l
	default:
		return v
	}
}

// editAction is the canonical form of an edit step: its operation (the
// step's parsed edit, else the arguments of its raw action line) as
// {"op", "path"} plus the fields that op uses, texts kept verbatim (an
// edit that differs only in indentation is another edit). Viewing the same
// range of a file again, or making the same replacement again, is the same
// action; str_replace of different texts in one file is not. It returns
// false when neither gives an operation and a path: such steps compare
// equal to nothing.
func editAction(st catalog.AgentStep, raw map[string]any) (map[string]any, string, bool) {
	e := st.Edit
	if e == nil {
		e = editFromArgs(raw)
	}
	if e == nil || strings.TrimSpace(string(e.Op)) == "" || strings.TrimSpace(e.Path) == "" {
		return nil, "", false
	}
	op, file := strings.TrimSpace(string(e.Op)), strings.TrimSpace(e.Path)
	args := map[string]any{"op": op, "path": file}
	switch catalog.EditOp(op) {
	case catalog.EditView:
		if len(e.ViewRange) > 0 {
			r := make([]any, len(e.ViewRange))
			for i, n := range e.ViewRange {
				r[i] = n
			}
			args["view_range"] = r
		}
	case catalog.EditCreate:
		args["file_text"] = e.FileText
	case catalog.EditStrReplace:
		args["old_str"], args["new_str"] = e.OldStr, e.NewStr
	case catalog.EditInsert:
		args["insert_line"], args["new_str"] = e.InsertLine, e.NewStr
	case catalog.EditUndo:
	default: // an op the catalogue does not know: keep every field
		args["file_text"], args["old_str"], args["new_str"], args["insert_line"] = e.FileText, e.OldStr, e.NewStr, e.InsertLine
	}
	display := strings.TrimSpace(st.Command)
	if !strings.HasPrefix(display, "edit ") {
		display = "edit " + op + " " + file
	}
	return args, display, true
}

// editFromArgs reads an edit from the arguments of a raw action line
// ({"tool":"edit","args":{"op":…,"path":…}}; "command" names the op in
// the shape of Anthropic's text editor tool).
func editFromArgs(args map[string]any) *catalog.EditArgs {
	str := func(keys ...string) string {
		for _, k := range keys {
			if s, ok := args[k].(string); ok {
				return s
			}
		}
		return ""
	}
	num := func(v any) (int, bool) {
		switch n := v.(type) {
		case json.Number:
			i, err := strconv.Atoi(n.String())
			return i, err == nil
		case float64:
			return int(n), true
		}
		return 0, false
	}
	e := &catalog.EditArgs{Op: catalog.EditOp(str("op", "command")), Path: str("path", "file"),
		FileText: str("file_text"), OldStr: str("old_str"), NewStr: str("new_str")}
	if n, ok := num(args["insert_line"]); ok {
		e.InsertLine = n
	}
	if r, ok := args["view_range"].([]any); ok {
		for _, v := range r {
			if n, ok := num(v); ok {
				e.ViewRange = append(e.ViewRange, n)
			}
		}
	}
	return e
}
