package protocol

import (
	"strings"

	"github.com/vera-run/vera/bus/catalog"
	"unicode/utf8"
)

// Code names one kind of format error. Codes are stable: they are recorded
// in vera.agent.step events and counted.
type Code string

// Format error codes, in the order Parse reports them.
const (
	// CodeEmptyReply: the reply held nothing but whitespace (or reasoning).
	CodeEmptyReply Code = "empty_reply"
	// CodeUnterminatedThink: everything after an unclosed <think> was
	// reasoning, and nothing was left.
	CodeUnterminatedThink Code = "unterminated_think"
	// CodeMissingThought: no THOUGHT line, or an empty one.
	CodeMissingThought Code = "missing_thought"
	// CodeMissingAction: no JSON action anywhere.
	CodeMissingAction Code = "missing_action"
	// CodeMultipleActions: more than one (different) action.
	CodeMultipleActions Code = "multiple_actions"
	// CodeBadJSON: the action does not parse as a JSON object.
	CodeBadJSON Code = "bad_json"
	// CodeUnknownTool: the action has no "tool", or names a tool that does
	// not exist.
	CodeUnknownTool Code = "unknown_tool"
	// CodeBadArgs: the action's arguments have the wrong type, or a shell
	// action gives two different commands.
	CodeBadArgs Code = "bad_args"
	// CodeEmptyCommand: a shell action with no or an empty command.
	CodeEmptyCommand Code = "empty_command"
	// CodeEmptyNotes: a notes_append action with no or empty text.
	CodeEmptyNotes Code = "empty_notes"
	// CodeNotesOverwrite: an attempt to overwrite, replace, edit or delete
	// notes through the notes action (notes are append-only).
	CodeNotesOverwrite Code = "notes_overwrite"
	// CodeEmptyAnswer: a submit action with no or an empty answer (and no
	// answer file).
	CodeEmptyAnswer Code = "empty_answer"
	// CodeBadAnswerFile: a submit action whose answer_file is not a clean
	// absolute path under /work/output/.
	CodeBadAnswerFile Code = "bad_answer_file"
	// CodeBadEdit: an edit action whose arguments do not make an
	// operation: an unknown op, no or a bad path, an argument the op needs
	// missing, an unknown argument, a wrong type.
	CodeBadEdit Code = "bad_edit"
	// CodeMissingEvidenceUsed: no EVIDENCE_USED line, or an empty one.
	CodeMissingEvidenceUsed Code = "missing_evidence_used"
	// CodeBadEvidenceID: EVIDENCE_USED holds a malformed id, or neither an
	// id nor "none".
	CodeBadEvidenceID Code = "bad_evidence_id"
	// CodeMissingStatusUpdate: no STATUS_UPDATE line, or an empty one.
	CodeMissingStatusUpdate Code = "missing_status_update"
	// CodeBadStatusUpdate: STATUS_UPDATE is not RESOLVED, UNRESOLVED(reason)
	// or continuing, or UNRESOLVED has no reason.
	CodeBadStatusUpdate Code = "bad_status_update"
	// CodeReasoningOnly: the reply held reasoning (reasoning_content,
	// reasoning, a <think> block, Harmony's analysis channel) and nothing
	// else: no answer text and no tool call.
	CodeReasoningOnly Code = "reasoning_only"
	// CodeUnexpectedToolCall: the text protocol got a reply that was only
	// native tool calls, with no text.
	CodeUnexpectedToolCall Code = "unexpected_tool_call"
	// CodeMissingToolCall: the native protocol got a reply with text but
	// no tool call.
	CodeMissingToolCall Code = "missing_tool_call"
	// CodeActionTooLarge: the action's command, notes text or answer is
	// bigger than MaxActionBytes (an event could not hold it).
	CodeActionTooLarge Code = "action_too_large"
)

// Codes returns every format error code, in report order.
func Codes() []Code {
	return []Code{
		CodeEmptyReply, CodeUnterminatedThink, CodeMissingThought, CodeMissingAction,
		CodeMultipleActions, CodeBadJSON, CodeUnknownTool, CodeBadArgs, CodeEmptyCommand,
		CodeEmptyNotes, CodeNotesOverwrite, CodeEmptyAnswer, CodeBadAnswerFile, CodeBadEdit, CodeMissingEvidenceUsed,
		CodeBadEvidenceID, CodeMissingStatusUpdate, CodeBadStatusUpdate,
		CodeReasoningOnly, CodeUnexpectedToolCall, CodeMissingToolCall, CodeActionTooLarge,
	}
}

// Unusable reports whether c says that a reply carried nothing the
// protocol in force can use (empty_reply, unterminated_think,
// reasoning_only, unexpected_tool_call, missing_tool_call): the model or
// the server, not a detail of the format, is at fault. Such an error is
// always the only one of its reply. The agent ends a run after
// [UnusableLimit] identical ones in a row.
func (c Code) Unusable() bool {
	switch c {
	case CodeEmptyReply, CodeUnterminatedThink, CodeReasoningOnly, CodeUnexpectedToolCall, CodeMissingToolCall:
		return true
	}
	return false
}

// UnusableLimit is the number of identical unusable replies in a row
// (same code and message) after which the agent ends the run UNRESOLVED
// with that message, instead of spending the step budget.
const UnusableLimit = 3

// SummaryCode returns the code of the first error of a Summary
// ("code: message; …").
func SummaryCode(summary string) Code {
	c, _, _ := strings.Cut(summary, ":")
	return Code(c)
}

// FormatError is one thing wrong with a model reply. Message is written for
// the model: it says what was wrong and how to fix it, and goes into the
// next turn's FEEDBACK verbatim.
type FormatError struct {
	Code    Code
	Message string
}

func (e FormatError) Error() string { return string(e.Code) + ": " + e.Message }

// formatReminder closes every Feedback text.
const formatReminder = `Reply again with exactly:
THOUGHT: <what you do next and why>
<one JSON action on its own line, e.g. {"tool":"shell","args":{"cmd":"ls -la /work"}}>
EVIDENCE_USED: <ev_NNNN ids, comma-separated, or none>
STATUS_UPDATE: <continuing | UNRESOLVED(<reason>) | RESOLVED>`

// nativeReminder closes the Feedback text of the native protocol.
const nativeReminder = `Reply again with exactly one function call: shell (cmd), edit (op, path, ...), notes_append (text) or submit (answer or answer_file), each with
thought: <what you do next and why>, evidence_used: <list of ev_NNNN ids, or []>, status_update: <continuing | UNRESOLVED(<reason>) | RESOLVED>.`

// Feedback renders format errors as the FEEDBACK text of the next turn:
// a header saying that nothing ran, one line per error and a reminder of
// the format. It returns "" when errs is empty.
func Feedback(errs []FormatError) string { return FeedbackFor(catalog.ToolProtocolText, errs) }

// FeedbackFor is Feedback for the protocol of the next turn: its reminder
// shows the text format (text), the function call (native), or both
// (auto, not decided yet).
func FeedbackFor(p catalog.ToolProtocol, errs []FormatError) string {
	if len(errs) == 0 {
		return ""
	}
	reminder := formatReminder
	switch p {
	case catalog.ToolProtocolNative:
		reminder = nativeReminder
	case catalog.ToolProtocolText:
	default:
		reminder = formatReminder + "\nor, when functions are offered, " + strings.ToLower(nativeReminder[:1]) + nativeReminder[1:]
	}
	var b strings.Builder
	b.WriteString("FORMAT ERROR: your previous reply was not executed (no tool ran). Fix the following:\n")
	for _, e := range errs {
		b.WriteString("- [")
		b.WriteString(string(e.Code))
		b.WriteString("] ")
		b.WriteString(e.Message)
		b.WriteByte('\n')
	}
	b.WriteString(reminder)
	return b.String()
}

// Summary renders format errors on one line, "code: message; code: message",
// for the format_error field of vera.agent.step. It returns "" when errs is
// empty.
func Summary(errs []FormatError) string {
	parts := make([]string, len(errs))
	for i, e := range errs {
		parts[i] = strings.ReplaceAll(e.Error(), "\n", " ")
	}
	return strings.Join(parts, "; ")
}

// HasCode reports whether errs holds an error with code c.
func HasCode(errs []FormatError, c Code) bool {
	for _, e := range errs {
		if e.Code == c {
			return true
		}
	}
	return false
}

// clip shortens s to at most n bytes (at a rune boundary) for quoting in an
// error message, with "…" when cut.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
