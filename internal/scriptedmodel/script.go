package scriptedmodel

import (
	"fmt"
	"net/http"
	"regexp"
	"time"
)

// ToolCall is a native tool call of a scripted reply.
type ToolCall struct {
	ID        string // default call_<index>_<n>
	Name      string
	Arguments string // JSON text, sent as is
}

// Forever, used as [Reply.Times], lets a rule answer any number of requests.
const Forever = -1

// Usage is the token accounting reported for a reply.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}

// Reply is one scripted answer.
//
// The zero Reply answers 200 with empty content and finish_reason "stop".
type Reply struct {
	// Content is the assistant message text.
	Content string
	// FinishReason defaults to "stop" (and is forced to "length" by Truncate).
	FinishReason string
	// Model is the model name reported in the response; by default the
	// requested model is echoed (or "scripted-model" if the request named
	// none). It is also listed by GET /v1/models.
	Model string
	// Usage overrides the token counts. When nil, counts are estimated
	// roughly (about four characters per token) from the prompt and from the
	// content actually delivered.
	Usage *Usage

	// Delay is waited before anything is written. It ends early, without a
	// response, when the client disconnects or the server is closed.
	Delay time.Duration
	// ChunkDelay is waited between streamed events.
	ChunkDelay time.Duration
	// StreamChunks is the number of pieces the content is split into when
	// streaming (default: up to 4, never more than the content's runes).
	StreamChunks int

	// Status, when 400 or more, makes the reply an error with an
	// OpenAI-shaped body {"error":{"message","type","param","code"}}, for
	// streaming and non-streaming requests alike. Other non-zero values
	// replace the status code of a successful reply.
	Status int
	// ErrorMessage, ErrorType and ErrorCode override the error body fields,
	// whose defaults depend on Status (429 gives type "requests" and code
	// "rate_limit_exceeded", 5xx give type "server_error", and so on).
	ErrorMessage string
	ErrorType    string
	ErrorCode    string
	// RetryAfter, when positive, sets the "Retry-After-Ms" header (which
	// openai-go prefers) and "Retry-After" (whole seconds, rounded up).
	RetryAfter time.Duration
	// Header holds extra response headers, e.g. "x-should-retry".
	Header http.Header

	// Malformed breaks the protocol: a non-streaming reply is a 200
	// application/json body cut in the middle of the JSON (or, with an error
	// Status, an HTML page instead of the JSON error); a streaming reply
	// sends the role chunk and the first content chunk, then a "data:" event
	// that is not valid JSON, and ends without "[DONE]".
	Malformed bool
	// Truncate cuts the content and reports finish_reason "length". The
	// content is cut to TruncateAt runes when set, else to about
	// max_completion_tokens (or max_tokens) × 4 runes when the request set
	// one, else to half its runes.
	Truncate   bool
	TruncateAt int
	// Disconnect drops the connection instead of completing the reply: a
	// non-streaming reply closes it before any byte of the response, a
	// streaming reply after the role chunk and half of the content chunks.
	Disconnect bool

	// ToolCalls are native tool calls of the reply (message.tool_calls;
	// streamed as tool_calls deltas, the arguments split into pieces).
	// FinishReason then defaults to "tool_calls".
	ToolCalls []ToolCall
	// Reasoning is sent in the message member ReasoningField (default
	// "reasoning_content"; "reasoning" as Ollama and LM Studio send it),
	// streamed before the content.
	Reasoning      string
	ReasoningField string
	// NullContent sends "content": null (with ToolCalls or Reasoning, as
	// servers do when the model wrote no text).
	NullContent bool
	// ReasoningTokens is reported as completion_tokens_details.reasoning_tokens.
	ReasoningTokens int

	// RawBody, when set, is written as the whole response body, verbatim,
	// with RawContentType (default application/json) and Status (default
	// 200, an error status included): a server family's exact wire format
	// (see [Fixtures]). With WriteChunk > 0 it is written and flushed
	// WriteChunk bytes at a time, so that SSE events are split at arbitrary
	// byte boundaries.
	RawBody        []byte
	RawContentType string
	WriteChunk     int

	// Times is how many requests the rule carrying this reply answers:
	// 0 means 1, [Forever] means unlimited. It is ignored for step rules
	// (which answer one call index), for the fallback, and for the replies
	// returned by a Rule.Func (a Func rule answers whenever it returns true).
	Times int
}

// Text is shorthand for a successful reply with the given content.
func Text(content string) Reply { return Reply{Content: content} }

// Rule makes a reply conditional. All the conditions that are set must hold.
// See the package documentation for the order of precedence between rules.
type Rule struct {
	// Name labels the rule in Request.Rule and in diagnostics.
	Name string

	// Call, when non-zero, matches only the Nth chat request received by the
	// server (counting from 1, retries included).
	Call int
	// Model matches the request's "model" exactly.
	Model string
	// LastUser is matched against the text of the last message with role
	// "user".
	LastUser *regexp.Regexp
	// Transcript is matched against all messages, each rendered as
	// "<role>: <text>\n" in order (see [Request.Transcript]).
	Transcript *regexp.Regexp
	// Func, evaluated last, decides whether the rule applies and returns the
	// reply to use in place of Reply. It runs while the script is locked: it
	// may call Requests or Count, but must not add rules.
	Func func(req Request) (Reply, bool)

	// Reply is the answer when the conditions hold.
	Reply Reply
}

// Step returns a rule answering the nth chat request (counting from 1).
func Step(n int, r Reply) Rule {
	if n <= 0 {
		panic(fmt.Sprintf("scriptedmodel: Step(%d): call index counts from 1", n))
	}
	return Rule{Call: n, Reply: r}
}

// OnModel returns a rule answering requests for the given model.
func OnModel(model string, r Reply) Rule { return Rule{Model: model, Reply: r} }

// OnLastUser returns a rule answering requests whose last user message
// matches the regular expression pattern (it panics if pattern is invalid).
func OnLastUser(pattern string, r Reply) Rule {
	return Rule{LastUser: regexp.MustCompile(pattern), Reply: r}
}

// OnTranscript returns a rule answering requests whose transcript (all
// messages, "<role>: <text>\n" each) matches the regular expression pattern
// (it panics if pattern is invalid).
func OnTranscript(pattern string, r Reply) Rule {
	return Rule{Transcript: regexp.MustCompile(pattern), Reply: r}
}

// OnFunc returns a rule that lets f decide whether to answer a request and
// with what.
func OnFunc(f func(req Request) (Reply, bool)) Rule { return Rule{Func: f} }

type tier int

const (
	tierStep tier = iota
	tierConditional
	tierSequence
)

func (r Rule) tier() tier {
	switch {
	case r.Call != 0:
		return tierStep
	case r.Model != "" || r.LastUser != nil || r.Transcript != nil || r.Func != nil:
		return tierConditional
	default:
		return tierSequence
	}
}

// describe names the rule for diagnostics; seq is its position in the
// sequence tier (1-based) when it belongs to it.
func (r Rule) describe(seq int) string {
	if r.Name != "" {
		return r.Name
	}
	var d string
	add := func(s string) {
		if d != "" {
			d += " "
		}
		d += s
	}
	if r.Call != 0 {
		add(fmt.Sprintf("step %d", r.Call))
	}
	if r.Model != "" {
		add(fmt.Sprintf("model %q", r.Model))
	}
	if r.LastUser != nil {
		add(fmt.Sprintf("last-user /%s/", r.LastUser))
	}
	if r.Transcript != nil {
		add(fmt.Sprintf("transcript /%s/", r.Transcript))
	}
	if r.Func != nil {
		add("func")
	}
	if d == "" {
		d = fmt.Sprintf("sequence #%d", seq)
	}
	return d
}

// scriptedRule is a Rule plus its remaining budget.
type scriptedRule struct {
	Rule
	label     string
	remaining int // < 0: unlimited
	used      int
}

func newScriptedRule(r Rule, seq int) *scriptedRule {
	sr := &scriptedRule{Rule: r, label: r.describe(seq)}
	switch {
	case r.tier() == tierStep:
		sr.remaining = 1
	case r.Func != nil:
		sr.remaining = -1
	case r.Reply.Times < 0:
		sr.remaining = -1
	case r.Reply.Times == 0:
		sr.remaining = 1
	default:
		sr.remaining = r.Reply.Times
	}
	return sr
}

// conditionsHold evaluates every condition but Func.
func (sr *scriptedRule) conditionsHold(req *Request) bool {
	if sr.Call != 0 && sr.Call != req.Index {
		return false
	}
	if sr.Model != "" && sr.Model != req.Model {
		return false
	}
	if sr.LastUser != nil && !sr.LastUser.MatchString(req.LastUserMessage()) {
		return false
	}
	if sr.Transcript != nil && !sr.Transcript.MatchString(req.Transcript()) {
		return false
	}
	return true
}

// try reports the reply this rule gives to req, consuming its budget.
func (sr *scriptedRule) try(req *Request) (Reply, bool) {
	if sr.remaining == 0 || !sr.conditionsHold(req) {
		return Reply{}, false
	}
	reply := sr.Reply
	if sr.Func != nil {
		r, ok := sr.Func(req.clone())
		if !ok {
			return Reply{}, false
		}
		reply = r
	}
	if sr.remaining > 0 {
		sr.remaining--
	}
	sr.used++
	return reply, true
}
