package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

// Names of the arguments every native tool takes besides its own: the
// THOUGHT, EVIDENCE_USED and STATUS_UPDATE of the text format.
const (
	ArgThought      = "thought"
	ArgEvidenceUsed = "evidence_used"
	ArgStatusUpdate = "status_update"
)

// thoughtCap bounds a THOUGHT taken from the reply's content or reasoning
// when the call's thought argument is missing.
const thoughtCap = 4096

// ToolSpec is one function offered to the model in the native protocol
// (an OpenAI function tool).
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object. Its
	// "properties" member is a json.RawMessage, so that the properties keep
	// their order on the wire (thought first, as in the text format):
	// constrained decoders generate them in that order.
	Parameters map[string]any
}

// discipline is the schema of the three arguments every tool takes, as
// JSON members (with a leading comma) placed after the tool's own.
const (
	thoughtProp     = `"thought":{"type":"string","description":"THOUGHT: what you know so far, what you do next and why (one or two sentences)."}`
	disciplineProps = `,"evidence_used":{"type":"array","items":{"type":"string"},"description":"EVIDENCE_USED: the evidence ids (ev_0001, ev_0002, ...) your thought and this call rely on; [] for none. Cite only ids you have seen."}` +
		`,"status_update":{"type":"string","description":"STATUS_UPDATE: continuing, UNRESOLVED(<what is missing>) or RESOLVED."}`
)

// editProps are the own arguments of the edit tool (catalog.EditArgs).
const editProps = `"op":{"type":"string","enum":["view","create","str_replace","insert","undo"],"description":"view: show the file (or view_range) with line numbers; create: write a new file (file_text); str_replace: replace old_str, which must occur exactly once, with new_str; insert: insert new_str after line insert_line (0 = at the top); undo: undo your last edit of the file."}` +
	`,"path":{"type":"string","description":"Absolute path of the file, e.g. /work/analysis.py (view may also read /input). notes.md cannot be edited."}` +
	`,"view_range":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2,"description":"For view: [first, last] line numbers from 1; last -1 = to the end. Omit for the whole file."}` +
	`,"file_text":{"type":"string","description":"For create: the file's content."}` +
	`,"old_str":{"type":"string","description":"For str_replace: the exact text to replace, including whitespace; it must occur exactly once."}` +
	`,"new_str":{"type":"string","description":"For str_replace: the replacement (\"\" deletes old_str); for insert: the text to insert."}` +
	`,"insert_line":{"type":"integer","minimum":0,"description":"For insert: the line after which new_str goes (0 = before the first line)."}`

// submitProps are the own arguments of the submit tool.
const submitProps = `"answer":{"type":"string","description":"The final answer: the direct answer first, then each supporting claim with its hook and evidence id. Omit it when you give answer_file."}` +
	`,"answer_file":{"type":"string","description":"Instead of answer: the file under /work/output/ that holds the final answer, e.g. /work/output/answer.md (its whole content is the answer; it wins over answer)."}`

// Tools returns the agent's tools for the native protocol: shell,
// edit, notes_append and submit, each with its own arguments (cmd; op,
// path…; text; answer or answer_file) and the required thought,
// evidence_used and status_update.
func Tools() []ToolSpec {
	spec := func(name, desc, own string, required ...string) ToolSpec {
		props := `{` + thoughtProp + `,` + own + disciplineProps + `}`
		return ToolSpec{Name: name, Description: desc, Parameters: map[string]any{
			"type":                 "object",
			"properties":           json.RawMessage(props),
			"required":             append(append([]string{ArgThought}, required...), ArgEvidenceUsed, ArgStatusUpdate),
			"additionalProperties": false,
		}}
	}
	tool := func(name, desc, arg, argDesc string) ToolSpec {
		return spec(name, desc, strconv.Quote(arg)+`:{"type":"string","description":`+strconv.Quote(argDesc)+`}`, arg)
	}
	return []ToolSpec{
		tool(string(catalog.ActionShell), "Run one bash command in the sandbox (cwd /work; cd, export, shell functions and variables persist to later calls). Its output is recorded as evidence ev_NNNN.",
			"cmd", "The bash command to run."),
		spec(string(catalog.ActionEdit), "View, create or change one file in the sandbox (paths /work/...; view also reads /input). view shows line numbers. Its result is recorded as evidence ev_NNNN.",
			editProps, "op", "path"),
		tool(string(catalog.ActionNotesAppend), "Append markdown to notes.md (append-only; it is shown to you in full every turn). Give every finding its evidence hook.",
			"text", "The markdown to append: findings with their hooks (URL + snippet, or path + command) and evidence ids."),
		spec(string(catalog.ActionSubmit), "Submit the final answer for audit: inline (answer) or as a file under /work/output/ (answer_file).",
			submitProps),
	}
}

// Reply is a model reply as the agent reads it: what vera.model.responded
// records of it.
type Reply struct {
	Text            string // the answer text (reasoning markup removed by the client)
	Reasoning       string
	ReasoningSource string // reasoning_content, reasoning, think, harmony
	ToolCalls       []catalog.ToolCall
	// ToolsRefused: the server refused the tools offered, and the call was
	// answered without them (vera.model.responded dropped "tools").
	ToolsRefused bool
	FinishReason string
}

// Decide takes the auto protocol's decision from a reply, if the reply
// shows which protocol works: the server refused the tools → text; the
// reply has a tool call → native; no tool call but text that parses in the
// text format without error → text. An empty or reasoning-only reply, or
// text that does not parse, decides nothing (ok false): the next step
// offers the tools again.
func Decide(r Reply) (p catalog.ToolProtocol, reason string, ok bool) {
	switch {
	case r.ToolsRefused:
		return catalog.ToolProtocolText, "the server refused the tools (native tool calling), so the run uses VERA's text format", true
	case len(r.ToolCalls) > 0:
		return catalog.ToolProtocolNative, "the model called " + callNames(r.ToolCalls), true
	case strings.TrimSpace(r.Text) != "":
		if _, errs := Parse(r.Text); len(errs) == 0 {
			return catalog.ToolProtocolText, "the model answered in VERA's text format without calling a tool", true
		}
	}
	return "", "", false
}

// ParseReply reads a reply with protocol p:
//
//   - text: the reply's text, as Parse does. Tool calls beside a text that
//     holds the step are ignored (Turn.Notice says so); a reply with no
//     text is unusable (empty_reply, reasoning_only, unexpected_tool_call).
//   - native: the reply's single tool call (see the package
//     documentation). Text beside it is not an action: the tool call wins,
//     and Turn.Notice says so when the text held a different action.
//   - auto (not decided yet): native when the reply has a tool call, text
//     otherwise; the messages of an unusable reply name both ways.
//
// Turn.Protocol says how the reply was read (native or text).
func ParseReply(p catalog.ToolProtocol, r Reply) (Turn, []FormatError) {
	var t Turn
	var errs []FormatError
	switch p {
	case catalog.ToolProtocolNative:
		t, errs = parseNative(r, false)
	case catalog.ToolProtocolText:
		t, errs = parseText(r, false)
	default:
		if len(r.ToolCalls) > 0 {
			t, errs = parseNative(r, true)
		} else {
			t, errs = parseText(r, true)
		}
	}
	return boundTurn(t, errs)
}

// Size bounds of a turn: the step event that records it, and the tool
// request it makes, must fit in one event (the bus stores at most 1 MiB).
// The whole reply stays in the model's record (vera.model.responded,
// a blob when large).
const (
	// MaxActionBytes bounds a shell command, a notes text and an answer.
	MaxActionBytes = 128 << 10
	// MaxThoughtBytes bounds the THOUGHT kept in the step (cut in the
	// middle beyond it).
	MaxThoughtBytes = 16 << 10
	// maxRawAction bounds the raw action text kept in a step whose action
	// was refused for its size.
	maxRawAction = 4 << 10
)

// boundTurn applies the size bounds: an action bigger than
// MaxActionBytes is a format error (nothing runs, nothing is appended),
// and the THOUGHT is cut to MaxThoughtBytes.
func boundTurn(t Turn, errs []FormatError) (Turn, []FormatError) {
	t.Thought = CapText(t.Thought, MaxThoughtBytes)
	what, n := "", 0
	switch {
	case len(t.Action.Cmd) > MaxActionBytes:
		what, n = "shell command", len(t.Action.Cmd)
	case len(t.Action.Text) > MaxActionBytes:
		what, n = "notes text", len(t.Action.Text)
	case len(t.Action.Answer) > MaxActionBytes:
		what, n = "answer", len(t.Action.Answer)
	case t.Action.Edit != nil && len(t.Action.Edit.FileText)+len(t.Action.Edit.OldStr)+len(t.Action.Edit.NewStr) > MaxActionBytes:
		what, n = "edit", len(t.Action.Edit.FileText)+len(t.Action.Edit.OldStr)+len(t.Action.Edit.NewStr)
	case len(t.Action.Raw) > 2*MaxActionBytes:
		what, n = "action", len(t.Action.Raw)
	}
	if what == "" {
		return t, errs
	}
	t.Action.Raw = CapText(t.Action.Raw, maxRawAction)
	t.Action.Cmd, t.Action.Text, t.Action.Answer, t.Action.Edit, t.Action.AnswerFile = "", "", "", nil, ""
	errs = append(errs, FormatError{CodeActionTooLarge, fmt.Sprintf(
		"Your %s is %d bytes; an action may hold at most %d. Nothing ran. Write long content to a file in a few shell commands (a heredoc per part), keep notes to findings with their hooks, and keep the answer to the direct answer with its evidence ids.",
		what, n, MaxActionBytes)})
	return t, errs
}

// parseText reads a reply in the text format.
func parseText(r Reply, auto bool) (Turn, []FormatError) {
	if strings.TrimSpace(r.Text) == "" {
		t := Turn{Protocol: catalog.ToolProtocolText}
		mode := catalog.ToolProtocolText
		if auto {
			mode = catalog.ToolProtocolAuto
		}
		return t, []FormatError{unusable(mode, r)}
	}
	t, errs := Parse(r.Text)
	t.Protocol = catalog.ToolProtocolText
	if len(r.ToolCalls) > 0 {
		t.Notice = fmt.Sprintf("Your previous reply also held a native tool call (%s); it was ignored: this run reads VERA's text format, so the action is the JSON line of your text.", callList(r.ToolCalls))
	}
	return t, errs
}

// parseNative reads a reply's tool call.
func parseNative(r Reply, auto bool) (Turn, []FormatError) {
	t := Turn{Protocol: catalog.ToolProtocolNative}
	calls := dedupeCalls(r.ToolCalls)
	switch {
	case len(calls) == 0:
		mode := catalog.ToolProtocolNative
		if auto {
			mode = catalog.ToolProtocolAuto
		}
		return t, []FormatError{unusable(mode, r)}
	case len(calls) > 1:
		return t, []FormatError{{CodeMultipleActions, fmt.Sprintf("Found %d tool calls (%s); call exactly one function per reply. You will see its result before you choose the next.", len(calls), callList(calls))}}
	}
	tc := calls[0]
	t.ToolCallID = tc.ID
	var errs []FormatError

	args, aerr := decodeArguments(tc.Arguments)
	// The discipline arguments come out of args; what is left is the
	// action's own.
	thought, hasThought := takeString(args, ArgThought)
	evRaw, hasEvidence := take(args, ArgEvidenceUsed)
	status, hasStatus := takeString(args, ArgStatusUpdate)

	// THOUGHT: the argument, else the reply's content, else its reasoning.
	t.Thought = strings.TrimSpace(thought)
	if t.Thought == "" || !hasThought {
		t.Thought = fallbackThought(r)
	}
	if t.Thought == "" {
		errs = append(errs, FormatError{CodeMissingThought, fmt.Sprintf("The %s call has no thought argument. Put what you know, what you do next and why in its thought argument.", clip(tc.Name, 60))})
	}

	// Action
	if aerr != nil {
		t.Action = Action{Raw: canonicalBroken(tc)}
		errs = append(errs, FormatError{CodeBadJSON, fmt.Sprintf("The arguments of the %s call are not a JSON object (%v): %s. Send the arguments as one JSON object, e.g. {\"thought\":\"…\",\"cmd\":\"ls -la /work\",\"evidence_used\":[],\"status_update\":\"continuing\"}.", clip(tc.Name, 60), aerr, clip(oneLine(tc.Arguments), 160))})
	} else {
		raw := canonicalCall(tc.Name, args)
		obj := map[string]json.RawMessage{"tool": mustJSON(tc.Name), "args": mustJSON(args)}
		a, ferr := buildAction(decoded{obj: obj, raw: raw, compact: raw})
		t.Action = a
		if ferr != nil {
			errs = append(errs, nativeMessage(*ferr, tc.Name))
		}
	}

	// EVIDENCE_USED
	if !hasEvidence {
		errs = append(errs, FormatError{CodeMissingEvidenceUsed, "The call has no evidence_used argument. Give the ids of the evidence you rely on as a list, e.g. \"evidence_used\":[\"ev_0003\"], or [] for none."})
	} else {
		ids, eerr := evidenceArgument(evRaw)
		t.EvidenceUsed = ids
		if eerr != nil {
			errs = append(errs, *eerr)
		}
	}

	// STATUS_UPDATE
	if !hasStatus || strings.TrimSpace(status) == "" {
		errs = append(errs, FormatError{CodeMissingStatusUpdate, "The call has no status_update argument. Give \"status_update\": \"continuing\", \"UNRESOLVED(<what is missing>)\" or \"RESOLVED\"."})
	} else {
		su, serr := parseStatus(status)
		t.StatusUpdate = su
		if serr != nil {
			msg := fmt.Sprintf("status_update must be \"continuing\", \"UNRESOLVED(<reason>)\" or \"RESOLVED\"; got %q.", clip(status, 120))
			if serr.Code == CodeBadStatusUpdate && su.State == StateUnresolved {
				msg = "UNRESOLVED needs a reason saying what is missing, e.g. \"status_update\": \"UNRESOLVED(no official source for the date yet)\"."
			}
			errs = append(errs, FormatError{serr.Code, msg})
		}
	}

	// Text beside the call that holds another action: the call wins.
	if strings.TrimSpace(r.Text) != "" && t.Action.Tool != "" {
		if tt, _ := Parse(r.Text); tt.Action.Raw != "" && !sameAction(tt.Action, t.Action) {
			t.Notice = fmt.Sprintf("Your previous reply held both a tool call (%s) and a different action in its text (%s); the tool call ran and the text action was ignored. Call exactly one function per reply and put your reasoning in its thought argument.", clip(t.Action.Raw, 200), clip(tt.Action.Raw, 200))
		}
	}
	return t, errs
}

// sameAction reports whether two parsed actions do the same thing.
func sameAction(a, b Action) bool {
	return a.Tool == b.Tool && a.Cmd == b.Cmd && a.Text == b.Text && a.Answer == b.Answer &&
		a.AnswerFile == b.AnswerFile && reflect.DeepEqual(a.Edit, b.Edit)
}

// fallbackThought is the THOUGHT of a call that has none: the THOUGHT of
// the reply's text (or the whole text), else its reasoning, capped.
func fallbackThought(r Reply) string {
	if text := strings.TrimSpace(r.Text); text != "" {
		if tt, _ := Parse(text); tt.Thought != "" {
			return CapText(tt.Thought, thoughtCap)
		}
		if stripped, _ := stripThink(normalizeNewlines(text)); strings.TrimSpace(stripped) != "" {
			return CapText(strings.TrimSpace(stripped), thoughtCap)
		}
	}
	return CapText(strings.TrimSpace(r.Reasoning), thoughtCap)
}

// decodeArguments reads a call's arguments as a JSON object. Empty
// arguments are an empty object; arguments that are a JSON string holding
// an object (some servers encode them twice) are decoded once more.
func decodeArguments(s string) (map[string]json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return map[string]json.RawMessage{}, nil
	}
	var obj map[string]json.RawMessage
	err := json.Unmarshal([]byte(s), &obj)
	if err != nil {
		if fixed, changed := escapeControlInStrings(s); changed && json.Unmarshal([]byte(fixed), &obj) == nil {
			err = nil
		}
	}
	if err != nil {
		var inner string
		if json.Unmarshal([]byte(s), &inner) == nil && strings.HasPrefix(strings.TrimSpace(inner), "{") {
			return decodeArguments(inner)
		}
		return nil, fmt.Errorf("%s", err2msg(err))
	}
	if obj == nil {
		return nil, fmt.Errorf("null is not an object")
	}
	return obj, nil
}

// take removes and returns args[key]; null counts as absent.
func take(args map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	r, ok := args[key]
	if !ok {
		return nil, false
	}
	delete(args, key)
	if string(bytes.TrimSpace(r)) == "null" {
		return nil, false
	}
	return r, true
}

// takeString removes args[key] and returns it as a string (a non-string
// value counts as absent).
func takeString(args map[string]json.RawMessage, key string) (string, bool) {
	r, ok := take(args, key)
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(r, &s) != nil {
		return "", false
	}
	return s, true
}

// evidenceArgument reads evidence_used: a list of ids (or one string of
// comma-separated ids, as in the text format); an empty list, "" or "none"
// mean none.
func evidenceArgument(r json.RawMessage) ([]string, *FormatError) {
	var list []any
	if json.Unmarshal(r, &list) == nil {
		var parts []string
		for _, it := range list {
			s, ok := it.(string)
			if !ok {
				return nil, &FormatError{CodeBadEvidenceID, fmt.Sprintf("evidence_used must be a list of id strings such as \"ev_0003\"; got %s.", clip(string(r), 120))}
			}
			if s = strings.TrimSpace(s); s != "" {
				parts = append(parts, s)
			}
		}
		if len(parts) == 0 {
			return nil, nil
		}
		return evidenceValue(strings.Join(parts, ", "))
	}
	var s string
	if json.Unmarshal(r, &s) == nil {
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		return evidenceValue(s)
	}
	return nil, &FormatError{CodeBadEvidenceID, fmt.Sprintf("evidence_used must be a list of ids such as [\"ev_0003\"], or []; got %s.", clip(string(r), 120))}
}

// evidenceValue is parseEvidence with messages that name the argument.
func evidenceValue(v string) ([]string, *FormatError) {
	ids, err := parseEvidence(v)
	if err != nil {
		err = &FormatError{err.Code, fmt.Sprintf("evidence_used must list ids such as \"ev_0003\" (the number shown with the observation), or be [] for none; got %q.", clip(v, 120))}
	}
	return ids, err
}

// nativeMessage rewrites an action error of the text format for a call.
func nativeMessage(e FormatError, name string) FormatError {
	n := clip(name, 60)
	switch e.Code {
	case CodeUnknownTool:
		e.Message = fmt.Sprintf("Unknown function %q. The functions are shell (run a command), edit (view or change a file), notes_append (add to notes.md) and submit (final answer).", n)
	case CodeEmptyCommand:
		e.Message = "The shell call has no command. Put it in the cmd argument, e.g. \"cmd\":\"ls -la /work\"."
	case CodeEmptyNotes:
		e.Message = "The notes_append call has no text. Put the markdown to append in the text argument."
	case CodeEmptyAnswer:
		e.Message = "The submit call has no answer. Put the final answer, with its evidence hooks, in the answer argument, or the path of the file under /work/output/ that holds it in answer_file."
	case CodeBadEdit:
		if msg, _, ok := strings.Cut(e.Message, ` e.g. {"tool":"edit"`); ok {
			e.Message = msg + ` e.g. "op":"str_replace","path":"/work/a.py","old_str":"x = 1","new_str":"x = 2".`
		}
	case CodeBadArgs:
		e.Message = fmt.Sprintf("The arguments of the %s call have the wrong type: cmd, text, answer and answer_file are strings, evidence_used a list of ids, thought and status_update strings.", n)
	}
	return e
}

// canonicalCall is the step's action for a tool call:
// {"tool":NAME,"args":{…}} with the call's own arguments (thought,
// evidence_used and status_update are the step's other fields), on one
// line, members in key order, strings re-encoded without escapes other
// than JSON's own (so "&&" reads as written).
func canonicalCall(name string, args map[string]json.RawMessage) string {
	vals := make(map[string]any, len(args))
	for k, v := range args {
		d := json.NewDecoder(bytes.NewReader(v))
		d.UseNumber()
		var x any
		if d.Decode(&x) != nil {
			x = v // cannot happen: v came out of a valid object
		}
		vals[k] = x
	}
	return `{"tool":` + encodeJSON(name) + `,"args":` + encodeJSON(vals) + `}`
}

// encodeJSON encodes v on one line without HTML escaping.
func encodeJSON(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil { // strings, numbers and maps of them always encode
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// canonicalBroken is the action of a call whose arguments do not parse:
// the arguments text as a JSON string.
func canonicalBroken(tc catalog.ToolCall) string {
	return `{"tool":` + encodeJSON(tc.Name) + `,"arguments":` + encodeJSON(tc.Arguments) + `}`
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil { // strings and maps of raw JSON always encode
		panic(err)
	}
	return b
}

// dedupeCalls drops calls identical (name and arguments) to an earlier
// one, as the text format counts the same action written twice once.
func dedupeCalls(calls []catalog.ToolCall) []catalog.ToolCall {
	if len(calls) < 2 {
		return calls
	}
	var out []catalog.ToolCall
	seen := map[string]bool{}
	for _, c := range calls {
		key := c.Name + "\x00" + strings.TrimSpace(c.Arguments)
		if !seen[key] {
			seen[key] = true
			out = append(out, c)
		}
	}
	return out
}

// callList names calls: "shell, submit".
func callList(calls []catalog.ToolCall) string {
	names := make([]string, len(calls))
	for i, c := range calls {
		names[i] = clip(c.Name, 40)
		if names[i] == "" {
			names[i] = "(unnamed)"
		}
	}
	return strings.Join(names, ", ")
}

// callNames describes the calls of a reply for a decision's reason.
func callNames(calls []catalog.ToolCall) string {
	if len(calls) == 1 {
		return "the " + callList(calls) + " tool"
	}
	return "tools (" + callList(calls) + ")"
}
