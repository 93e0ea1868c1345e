// Package llm is the model client VERA's components share: one call to an
// OpenAI-compatible /v1/chat/completions server. The agent and the
// verifiers depend on the small Completer interface below; the production
// implementation (openai-go, retries, timeouts, model I/O events) lives in
// this package too, and tests use a scripted server speaking the real
// protocol (internal/scriptedmodel), never a double of this interface in
// production code.
//
// The production implementation is [Client] ([New] with a [Config]): base
// URL normalised by [NormalizeBaseURL], the API key read from the
// environment variable the config names (never carried in configs, events,
// errors or logs), a per-attempt timeout (MODEL_TIMEOUT, default 150 s),
// retries with backoff on 429/5xx/connection errors/timeouts, JSON or SSE
// streaming. A [Recorder] sees every attempt; package llmbus turns that
// into vera.model.requested / vera.model.responded events.
package llm

import (
	"context"
	"time"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"` // system, user, assistant
	Content string `json:"content"`
}

// Sampling holds the sampling and server options of a call; zero values
// are not sent (the server's defaults apply).
type Sampling struct {
	Temperature *float64
	TopP        *float64
	MaxTokens   int
	Seed        *int64
	Stop        []string
	// ExtraBody members are merged into the request body as given (e.g.
	// {"chat_template_kwargs": {"enable_thinking": false}}).
	ExtraBody map[string]any
}

// Tool is a function offered to the model for native tool calling.
type Tool struct {
	Name        string
	Description string
	Parameters  map[string]any // JSON Schema of the arguments object
}

// ToolCall is one native tool call of a reply.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // the JSON text as sent, valid or not
}

// JSONSchema constrains a reply to a JSON document (response_format
// json_schema, which OpenAI, vLLM, llama.cpp's server, Ollama and LM
// Studio all accept).
type JSONSchema struct {
	Name   string         // a-z, A-Z, 0-9, _ and -; at most 64
	Schema map[string]any // the JSON Schema of the document
	Strict bool           // OpenAI's strict mode (a restricted schema dialect)
}

// Feature names a request feature a server may refuse (Response.Dropped).
const (
	FeatureTools          = "tools"
	FeatureResponseFormat = "response_format"
)

// Delta is a piece of a reply as it streams in (Request.OnDelta).
type Delta struct {
	Content   string // answer text
	Reasoning string // reasoning text (reasoning_content / reasoning)
	ToolName  string // a tool call's name, when it starts
	ToolArgs  string // a piece of a tool call's arguments
}

// Request is one completion call.
type Request struct {
	Model    string    // model name at the server
	Messages []Message // the whole prompt
	Sampling

	// Tools are offered as OpenAI tools; ToolChoice ("auto", "required",
	// "none" or "" for not sent) goes with them.
	Tools      []Tool
	ToolChoice string
	// ResponseFormat asks for a JSON document of the schema.
	ResponseFormat *JSONSchema
	// Optional lets the client drop Tools and ResponseFormat when the
	// server refuses them (an HTTP 400, 404, 422 or 501 naming them, or a
	// 400 when they were the only extra): the attempt is sent again
	// without them, and Response.Dropped says so. The client remembers a
	// refusal per model name: later Optional calls do not send the feature
	// at all (and still list it in Dropped). Without Optional such a
	// refusal is the call's error.
	Optional bool

	// OnDelta, when set and the client streams, is called with every piece
	// of the reply as it arrives, on the calling goroutine. It is for
	// display only: the Response is the record.
	OnDelta func(Delta)

	// Where the call belongs, for the model request/response events.
	RunID string // "" when the call belongs to no run (offline batch)
	Scope string // agent, verifier, judge, verifyfast, logic
	Step  int
	Round int
	// CallID identifies the call; calls with the same id are the same call
	// (a retry after a crash reuses the recorded response). "" = new id.
	CallID string

	// Purpose says what the call is for within its scope (step, decompose,
	// check, judge, …) and CheckID names the audit check of a per-check
	// auditor call; both are copied into the model request event.
	Purpose string
	CheckID string
	// CauseID is the id of the event the call reacts to (optional). The
	// model I/O events are caused by it and their ids are derived from it,
	// so that redoing the call after a crash lands on the same event ids.
	CauseID string
}

// Usage counts tokens as the server reports them.
type Usage struct {
	Prompt, Completion, Total int64
	Reasoning                 int64 // completion_tokens_details.reasoning_tokens
	Cached                    int64 // prompt_tokens_details.cached_tokens
}

// Reasoning sources (Response.ReasoningSource).
const (
	ReasoningContent = "reasoning_content" // message member (vLLM, llama.cpp, DeepSeek)
	ReasoningMember  = "reasoning"         // message member (Ollama, LM Studio, OpenRouter, vLLM ≥ 0.10)
	ReasoningThink   = "think"             // <think>…</think> in the content
	ReasoningHarmony = "harmony"           // gpt-oss analysis channel markup in the content
)

// Response is a completed call.
type Response struct {
	// Text is the answer: the content without reasoning markup (<think>
	// blocks, Harmony channels), which goes to Reasoning.
	Text            string
	Reasoning       string
	ReasoningSource string // one of the Reasoning* constants; "" = none
	ToolCalls       []ToolCall
	// Dropped lists the features (FeatureTools, FeatureResponseFormat) the
	// server refused, so that the call succeeded without them.
	Dropped []string

	FinishReason string // stop, length, tool_calls, …; "" when the stream ended early
	Usage        Usage
	Model        string        // as the server reports it
	Latency      time.Duration // of the successful attempt
	Attempts     int           // 1 + retries
}

// Completer is what components need of a model.
type Completer interface {
	Complete(ctx context.Context, req Request) (Response, error)
}
