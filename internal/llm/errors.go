package llm

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
)

// Errors of Complete. Match them with errors.Is; an HTTP error from the
// server is an *APIError (errors.As).
var (
	// ErrTimeout: every attempt ran into the per-attempt timeout
	// (Config.Timeout), or the last attempt did and no retry was left.
	// The caller's own ctx deadline gives context.DeadlineExceeded instead.
	ErrTimeout = errors.New("llm: model call timed out")
	// ErrIncomplete: a streamed response ended cleanly but before any
	// finish_reason (no [DONE], a proxy cut it, the server gave up). The
	// partial text is in the returned Response.
	ErrIncomplete = errors.New("llm: model response ended before a finish_reason (stream interrupted)")
	// ErrMalformed: the server answered 200 with a body that is not a chat
	// completion (bad JSON, a bad SSE chunk, no choices).
	ErrMalformed = errors.New("llm: malformed model response")
	// ErrConnection: no HTTP response arrived (refused, reset, dropped).
	ErrConnection = errors.New("llm: connection to the model server failed")
	// ErrInvalidRequest: the Request cannot be sent (no model, an unknown
	// message role); nothing was sent.
	ErrInvalidRequest = errors.New("llm: invalid model request")
)

// APIError is an HTTP error status from the model server. It wraps the
// openai-go *openai.Error when the body could be decoded as one (its
// Request has the Authorization header redacted).
type APIError struct {
	Status  int    // HTTP status
	Type    string // error.type of the body, e.g. "requests", "server_error"
	Code    string // error.code, e.g. "rate_limit_exceeded"
	Message string // error.message (the API key, if echoed, redacted)
	// Retryable: the status is transient (408, 409, 429, 5xx) or the server
	// said so with x-should-retry.
	Retryable bool
	// RetryAfter is the wait the server asked for (Retry-After-Ms or
	// Retry-After); 0 when it asked for none.
	RetryAfter time.Duration

	err *openai.Error
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "llm: model server answered HTTP %d", e.Status)
	if t := http.StatusText(e.Status); t != "" {
		b.WriteString(" " + t)
	}
	if e.Code != "" || e.Type != "" {
		b.WriteString(" (")
		b.WriteString(strings.Trim(e.Code+" "+e.Type, " "))
		b.WriteString(")")
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	return b.String()
}

// Unwrap returns the openai-go error, if any.
func (e *APIError) Unwrap() error {
	if e.err == nil {
		return nil
	}
	return e.err
}

// secretFreeError keeps the chain of err but replaces its text, from which
// the API key was removed.
type secretFreeError struct {
	msg string
	err error
}

func (e *secretFreeError) Error() string { return e.msg }
func (e *secretFreeError) Unwrap() error { return e.err }

// redactor removes the API key from strings.
type redactor struct{ key string }

const redacted = "[REDACTED]"

func (r redactor) string(s string) string {
	if r.key == "" || !strings.Contains(s, r.key) {
		return s
	}
	return strings.ReplaceAll(s, r.key, redacted)
}

func (r redactor) error(err error) error {
	if err == nil || r.key == "" {
		return err
	}
	if msg := err.Error(); strings.Contains(msg, r.key) {
		return &secretFreeError{msg: r.string(msg), err: err}
	}
	return err
}
