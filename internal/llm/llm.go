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

// Request is one completion call.
type Request struct {
	Model       string    // model name at the server
	Messages    []Message // the whole prompt
	Temperature *float64  // nil: the server's default
	MaxTokens   int       // 0: the server's default

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
}

// Response is a completed call.
type Response struct {
	Text         string
	FinishReason string // stop, length, …; "" when the stream ended early
	Usage        Usage
	Model        string        // as the server reports it
	Latency      time.Duration // of the successful attempt
	Attempts     int           // 1 + retries
}

// Completer is what components need of a model.
type Completer interface {
	Complete(ctx context.Context, req Request) (Response, error)
}
