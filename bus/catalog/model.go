package catalog

// Model call types.
const (
	TypeModelRequested = "vera.model.requested"
	TypeModelResponded = "vera.model.responded"
)

// ModelParams are the sampling parameters of a model call.
type ModelParams struct {
	Temperature *float64 `json:"temperature,omitempty" jsonschema:"minimum=0" jsonschema_description:"Sampling temperature; absent = the server default."`
	MaxTokens   int      `json:"max_tokens,omitempty" jsonschema:"minimum=0" jsonschema_description:"Completion token limit; 0 = the server default."`
	Stream      bool     `json:"stream,omitempty" jsonschema_description:"Whether the response was requested as a stream."`
}

// ModelRequested records one attempt of a model call as sent.
type ModelRequested struct {
	CallID       string      `json:"call_id" jsonschema:"minLength=1" jsonschema_description:"Id of the logical call, the same for every attempt; derived from the cause (e.g. call-agent-s0007 for the agent's step 7) so that a retried publish lands on the same id."`
	Scope        ModelScope  `json:"scope" jsonschema_description:"Which part of VERA made the call; the scope label of dra_model_tokens_total."`
	Purpose      string      `json:"purpose,omitempty" jsonschema_description:"What the call is for within its scope, e.g. step, decompose, check, judge, decompose_facts, fact_check, logic_check."`
	Step         int         `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step the call belongs to (for verifiers: the candidate step); 0 = none."`
	Round        int         `json:"round,omitempty" jsonschema:"minimum=0" jsonschema_description:"Audit round, for auditor calls."`
	CheckID      string      `json:"check_id,omitempty" jsonschema_description:"Audit check, for per-check auditor calls."`
	Model        string      `json:"model" jsonschema_description:"Model name sent."`
	BaseURL      string      `json:"base_url" jsonschema_description:"Endpoint base URL the call went to."`
	Messages     []Message   `json:"messages,omitempty" jsonschema_description:"The messages sent, inline when small; else see messages_blob."`
	MessagesBlob *BlobRef    `json:"messages_blob,omitempty" jsonschema_description:"The messages sent, as a JSON array of {role, content}, when too big to be inline."`
	MessageCount int         `json:"message_count" jsonschema:"minimum=0" jsonschema_description:"Number of messages sent, inline or not."`
	Params       ModelParams `json:"params,omitzero" jsonschema_description:"Sampling parameters."`
	Attempt      int         `json:"attempt" jsonschema:"minimum=1" jsonschema_description:"Attempt number of this call, from 1."`
	TimeoutMS    int64       `json:"timeout_ms,omitempty" jsonschema:"minimum=0" jsonschema_description:"Timeout of this attempt."`
}

// EventType implements Payload.
func (ModelRequested) EventType() string { return TypeModelRequested }

// ModelResponded records the result of one attempt of a model call.
type ModelResponded struct {
	CallID       string     `json:"call_id" jsonschema:"minLength=1" jsonschema_description:"Id of the logical call (as in vera.model.requested)."`
	Scope        ModelScope `json:"scope" jsonschema_description:"Scope of the call (copied from the request, so that metrics need no join)."`
	Step         int        `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step of the call (copied from the request)."`
	Round        int        `json:"round,omitempty" jsonschema:"minimum=0" jsonschema_description:"Audit round, for auditor calls."`
	Model        string     `json:"model" jsonschema_description:"Model name reported by the server (else the one sent)."`
	Attempt      int        `json:"attempt" jsonschema:"minimum=1" jsonschema_description:"Attempt this result belongs to."`
	LatencyMS    int64      `json:"latency_ms" jsonschema:"minimum=0" jsonschema_description:"Time from sending the request to the end of the response."`
	Usage        TokenUsage `json:"usage" jsonschema_description:"Token counts reported by the server; zeros when it reported none."`
	FinishReason string     `json:"finish_reason,omitempty" jsonschema_description:"finish_reason reported by the server: stop, length (counted by dra_model_finish_reason_length_total), tool_calls, content_filter..."`
	Text         string     `json:"text,omitempty" jsonschema_description:"The response text, inline when small; else see text_blob."`
	TextBlob     *BlobRef   `json:"text_blob,omitempty" jsonschema_description:"The response text when too big to be inline."`
	Error        string     `json:"error,omitempty" jsonschema_description:"Transport or server error of this attempt; empty on success."`
	HTTPStatus   int        `json:"http_status,omitempty" jsonschema_description:"HTTP status of the response; 0 when no response arrived."`
	Retryable    bool       `json:"retryable,omitempty" jsonschema_description:"True when the error is transient and another attempt follows (a new vera.model.requested with attempt+1)."`
}

// EventType implements Payload.
func (ModelResponded) EventType() string { return TypeModelResponded }
