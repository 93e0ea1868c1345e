// Package scriptedmodel is a TEST-ONLY fake of an OpenAI-compatible
// chat-completions server.
//
// VERA's agent and verifiers talk to any OpenAI-compatible
// /v1/chat/completions endpoint through the openai-go client. No language model
// runs on our machines, so tests point the real, unmodified client at a
// [Server] from this package: it listens on 127.0.0.1 (never on any other
// address), speaks the real wire protocol over real HTTP (JSON replies and
// text/event-stream streaming replies shaped exactly like OpenAI's), and
// answers from a script written by the test.
//
// Production code must never import this package; it exists only for tests
// and refuses to start outside a test binary ([testing.Testing] must report
// true).
//
// # Script
//
// A script is a set of [Rule]s, each carrying a [Reply]. A Rule's conditions
// (all of the non-zero ones must hold) are: the call index (the Nth chat
// request received by the server, counting from 1), the model name, a regular
// expression over the last user message, a regular expression over the whole
// transcript, and an arbitrary function. Rules fall into three tiers by the
// conditions they set, and every request is answered by the first applicable
// source in this order of precedence:
//
//  1. step rules (Rule.Call != 0), which answer only the request with that
//     call index (their other conditions must hold too);
//  2. conditional rules (Model, LastUser, Transcript or Func set, Call
//     unset), tried in the order they were added; the first whose conditions
//     hold and whose budget is not exhausted answers;
//  3. the sequence: rules without any condition (see [WithReplies]),
//     consumed in order, each answering Reply.Times requests before the next
//     one takes over;
//  4. the fallback reply ([WithFallback]), which answers any number of
//     requests;
//  5. otherwise the request is a miss: the server answers 500 with an
//     OpenAI-shaped error (and "x-should-retry: false", so that openai-go does
//     not retry a scripting mistake) and records it; see
//     [Server.AssertNoMisses].
//
// # Replies
//
// A [Reply] can carry content, a finish reason, token usage, latency
// (Delay before the response, ChunkDelay between streamed chunks), an HTTP
// error status with an OpenAI-shaped error body and Retry-After headers, a
// malformed body, a truncated answer (finish_reason "length"), or a dropped
// connection. Requests with "stream": true get a Server-Sent Events stream of
// chat.completion.chunk objects, a final chunk carrying finish_reason, a usage
// chunk when stream_options.include_usage is set, and "data: [DONE]".
//
// # Recording
//
// Every chat request is recorded ([Server.Requests]) with its parsed body,
// its headers (including Authorization, so tests can check the API key was
// sent), the time it was received and the rule that answered it. The server
// itself never logs request headers.
//
// All methods are safe for concurrent use. Delays end early when the client
// goes away or the server is closed, and [Server.Close] returns only once
// every connection and handler goroutine has finished.
package scriptedmodel
