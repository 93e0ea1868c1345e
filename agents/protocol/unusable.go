package protocol

import (
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

// unusable is the error of a reply that carries nothing protocol p can
// use: no text (text protocol), no tool call (native), neither (auto). It
// says what the server sent and what to change, for the model (FEEDBACK)
// and for the operator (the reason of a run ended after UnusableLimit of
// them). Its text depends only on p and the reply's shape, so that the
// same fault gives the same message every time.
func unusable(p catalog.ToolProtocol, r Reply) FormatError {
	cut := ""
	if r.FinishReason == "length" {
		cut = " The reply was cut at the token limit (finish_reason length): raise max_tokens."
	}
	var want string
	switch p {
	case catalog.ToolProtocolNative:
		want = "Call exactly one function (shell, notes_append or submit) with its thought, evidence_used and status_update arguments."
	case catalog.ToolProtocolText:
		want = "Write THOUGHT, one JSON action, EVIDENCE_USED and STATUS_UPDATE as text."
	default:
		want = "Call exactly one function (shell, notes_append or submit) with its thought, evidence_used and status_update arguments, or write THOUGHT, one JSON action, EVIDENCE_USED and STATUS_UPDATE as text."
	}
	switch {
	case len(r.ToolCalls) > 0 && strings.TrimSpace(r.Text) == "":
		// Only a text-protocol reply gets here with tool calls.
		return FormatError{CodeUnexpectedToolCall, "The server sent a native tool call (" + callList(r.ToolCalls) + ") and no text, but this run reads VERA's text format. " + want + cut +
			" If this repeats, the model calls tools natively: run with --tool-protocol native or auto."}
	case strings.TrimSpace(r.Text) != "":
		// Only a native-protocol reply gets here with text.
		return FormatError{CodeMissingToolCall, "The server sent text but no tool call, though the functions were offered. " + want + cut +
			" If this repeats, the server does not pass the tools to the model (llama.cpp's server needs --jinja): run with --tool-protocol text or auto."}
	case strings.TrimSpace(r.Reasoning) != "":
		src := r.ReasoningSource
		if src == "" {
			src = "reasoning"
		}
		return FormatError{CodeReasoningOnly, "The server sent only reasoning (" + src + ") and no answer: nothing after the reasoning. " + want + cut +
			" If this repeats, the model spends its whole reply on reasoning: raise max_tokens, or turn thinking off (e.g. extra_body {\"chat_template_kwargs\":{\"enable_thinking\":false}})" + serverHint(p) + "."}
	default:
		return FormatError{CodeEmptyReply, "The server sent an empty reply: no text, no reasoning and no tool call. " + want + cut +
			" If this repeats, check the server's chat template" + serverHint(p) + "."}
	}
}

// serverHint is what to change on the server or in VERA's settings when a
// protocol keeps getting nothing it can use.
func serverHint(p catalog.ToolProtocol) string {
	switch p {
	case catalog.ToolProtocolNative:
		return "; llama.cpp's server needs --jinja for tool calls, or run with --tool-protocol text"
	case catalog.ToolProtocolText:
		return "; a model that only calls tools needs --tool-protocol native or auto"
	default:
		return "; llama.cpp's server needs --jinja for tool calls, or run with --tool-protocol text"
	}
}
