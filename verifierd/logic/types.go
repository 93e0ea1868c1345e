package logic

import (
	"encoding/json"
	"strings"
)

// Snapshot is one MIRAGE-Bench test case: the messages shown to the agent
// at step InputStep of a task, and the action it had been repeating.
type Snapshot struct {
	TaskName  string    `json:"task_name"`
	Goal      string    `json:"goal"`
	InputStep int       `json:"input_step"`
	Input     []Message `json:"input"`
	// RepetitiveAction is a string for web tasks, an OpenAI tool-call
	// object for SWE-bench tasks, and absent for OSWorld tasks.
	RepetitiveAction json.RawMessage `json:"repetitive_action,omitempty"`
}

// Message is one chat message of a snapshot's input.
type Message struct {
	Role string `json:"role"`
	// Content is a string or a list of content parts ({"type": "text",
	// "text": …} or images); see Text.
	Content    json.RawMessage `json:"content,omitempty"`
	ToolCalls  json.RawMessage `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Name       string          `json:"name,omitempty"`
}

// Text returns the message's text: the content string, or its text parts
// joined. Images and other parts are skipped.
func (m Message) Text() string { return contentText(m.Content) }

// contentText extracts the text of a chat content value: a string, a list
// of parts whose "text" fields are joined, or an object with a "content"
// field (an assistant message, as MIRAGE stores SWE-bench completions).
func contentText(raw json.RawMessage) string {
	raw = trimJSON(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	case '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(raw, &parts) == nil {
			var b strings.Builder
			for _, p := range parts {
				if p.Type == "" || p.Type == "text" {
					b.WriteString(p.Text)
				}
			}
			return b.String()
		}
	case '{':
		var msg struct {
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &msg) == nil {
			return contentText(msg.Content)
		}
	}
	return ""
}

// Result is what MIRAGE's inference script adds to a snapshot: the model's
// reply and its parsed thinking and action.
type Result struct {
	Model string `json:"model"`
	// Completion is the raw reply: a string for web and OSWorld tasks, the
	// assistant message object for SWE-bench tasks.
	Completion json.RawMessage `json:"completion,omitempty"`
	Thinking   string          `json:"thinking"`
	// Action is a string for web and OSWorld tasks and a list of OpenAI
	// tool calls for SWE-bench tasks; when the reply could not be parsed
	// MIRAGE stores the whole completion here and sets GoodFormat false.
	Action     json.RawMessage `json:"action"`
	GoodFormat *bool           `json:"good_format,omitempty"`
	ParseError string          `json:"parse_error,omitempty"`
}

// WellFormatted reports whether MIRAGE parsed the reply; a missing
// good_format (older result files) counts as parsed.
func (r Result) WellFormatted() bool { return r.GoodFormat == nil || *r.GoodFormat }

// InferenceFile is one MIRAGE inference-result file: a snapshot and the
// agent's result for it.
type InferenceFile struct {
	Snapshot
	Result Result `json:"result"`
}

// Confidence says whether a Verdict is certain enough to stand alone.
type Confidence string

// Confidence levels.
const (
	ConfidenceHigh Confidence = "high"
	ConfidenceLow  Confidence = "low"
)

// VerifierType is the verifier_type of a verdict decided by logic alone.
const VerifierType = "logic"

// VerifierTypeHybrid is the verifier_type of a Hybrid verdict on which the
// LLM judge was consulted (decided_by llm or logic-fallback).
const VerifierTypeHybrid = "hybrid"

// Values of Verdict.DecidedBy: which path of the Hybrid verifier decided.
// Verify alone leaves DecidedBy empty.
const (
	// DecidedByLogic: the keywords, patterns and action comparison decided
	// (a confident case, or one the judge could not change).
	DecidedByLogic = "logic"
	// DecidedByLLM: the logic verdict had low confidence and the LLM judge
	// decided.
	DecidedByLLM = "llm"
	// DecidedByLogicFallback: the judge was asked but failed twice (an
	// error or an unusable reply each time); the logic verdict stands and
	// the reason says why the judge failed.
	DecidedByLogicFallback = "logic-fallback"
)

// Scores of thinking_eval, as in MIRAGE's repetitive-action rubric.
const (
	ScoreRepeated  = 0 // the action repeats repetitive_action
	ScoreDifferent = 1 // a different action, no awareness
	ScoreAware     = 2 // awareness and a different action
)

// Values of action_eval: whether the action avoided the repetition.
const (
	ActionRepeated = 0
	ActionAvoided  = 1
)

// Verdict is MIRAGE's verified_result for one inference result, plus the
// keywords that counted and a confidence for hybrid verification.
type Verdict struct {
	ThinkingEval       int      `json:"thinking_eval"`
	ActionEval         int      `json:"action_eval"`
	ThinkingEvalReason string   `json:"thinking_eval_reason"`
	VerifierType       string   `json:"verifier_type"`
	MatchedKeywords    []string `json:"matched_keywords,omitempty"`
	// Confidence is the logic verdict's confidence, also on a verdict the
	// Hybrid's judge decided (whose confidence was therefore low).
	Confidence Confidence `json:"confidence"`
	// DecidedBy is set by Hybrid: DecidedByLogic, DecidedByLLM or
	// DecidedByLogicFallback.
	DecidedBy string `json:"decided_by,omitempty"`
	// ModelCallID is the call id of the judge's call that decided, when
	// DecidedBy is DecidedByLLM and the call had an id.
	ModelCallID string `json:"model_call_id,omitempty"`
}
