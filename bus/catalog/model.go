package catalog

// Model call types.
const (
	TypeModelRequested = "vera.model.requested"
	TypeModelResponded = "vera.model.responded"
)

// ModelParams are the sampling parameters of a model call.
type ModelParams struct {
	Temperature *float64       `json:"temperature,omitempty" jsonschema:"minimum=0" jsonschema_description:"Sampling temperature; absent = the server default."`
	MaxTokens   int            `json:"max_tokens,omitempty" jsonschema:"minimum=0" jsonschema_description:"Completion token limit; 0 = the server default."`
	Stream      bool           `json:"stream,omitempty" jsonschema_description:"Whether the response was requested as a stream."`
	TopP        *float64       `json:"top_p,omitempty" jsonschema_description:"Nucleus sampling mass; absent = the server default."`
	Seed        *int64         `json:"seed,omitempty" jsonschema_description:"Sampling seed; absent = none."`
	Stop        []string       `json:"stop,omitempty" jsonschema_description:"Stop sequences."`
	ExtraBody   map[string]any `json:"extra_body,omitempty" jsonschema_description:"Server-specific members merged into the request body."`
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
	// Native tools and structured output, as sent in this attempt.
	Tools          []string `json:"tools,omitempty" jsonschema_description:"Names of the tools offered as OpenAI tools (native tool calling); absent = none (the text protocol)."`
	ToolChoice     string   `json:"tool_choice,omitempty" jsonschema_description:"tool_choice sent with the tools: auto, required or none; empty = not sent."`
	ResponseFormat string   `json:"response_format,omitempty" jsonschema_description:"Name of the JSON Schema the reply was constrained to (response_format json_schema); empty = free text."`
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
	// What the reply carried beside its text.
	Reasoning       string     `json:"reasoning,omitempty" jsonschema_description:"The model's reasoning, separated from the answer, inline when small; else see reasoning_blob."`
	ReasoningBlob   *BlobRef   `json:"reasoning_blob,omitempty" jsonschema_description:"The reasoning when too big to be inline."`
	ReasoningSource string     `json:"reasoning_source,omitempty" jsonschema_description:"Where the reasoning came from: reasoning_content or reasoning (a member of the message, as vLLM, llama.cpp, LM Studio and Ollama send it), think (a <think> block in the content) or harmony (gpt-oss's analysis channel in the content)."`
	ToolCalls       []ToolCall `json:"tool_calls,omitempty" jsonschema_description:"Native tool calls of the reply, in order."`
	Dropped         []string   `json:"dropped,omitempty" jsonschema_description:"Request features the server refused, so that this attempt was sent again without them: tools, response_format."`
}

// ToolCall is one native tool call of a model reply.
type ToolCall struct {
	ID            string   `json:"id,omitempty" jsonschema_description:"Id the server gave the call."`
	Name          string   `json:"name" jsonschema_description:"Function name."`
	Arguments     string   `json:"arguments" jsonschema_description:"Arguments as the JSON text the server sent (kept byte for byte, valid or not); empty when they are in arguments_blob."`
	ArgumentsBlob *BlobRef `json:"arguments_blob,omitempty" jsonschema_description:"The arguments when too big to be inline."`
}

// EventType implements Payload.
func (ModelResponded) EventType() string { return TypeModelResponded }
