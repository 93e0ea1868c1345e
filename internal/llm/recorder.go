package llm

import (
	"context"
	"time"
)

// Recorder is told about every ATTEMPT of every call, so that a caller can
// publish the model request and response events (vera.model.requested and
// vera.model.responded; see package llmbus) without this package knowing
// the bus:
//
//   - Requested is called just before an attempt is sent;
//   - Responded is called once the attempt is over, with its Response
//     (Attempts = the attempt number, Latency of that attempt) and its error
//     (nil on success). rec.Retrying says whether another attempt follows
//     (it is decided before Responded is called; only a cancellation of
//     ctx during the wait can still end the call after Retrying was
//     reported); rec.HTTPStatus is the status received (0 when none
//     arrived).
//
// Each Requested is followed by exactly one Responded with the same
// CallID and Attempt, also when ctx was cancelled (Responded then gets a
// done ctx: publish with context.WithoutCancel). Calls that fail before
// anything is sent (ErrInvalidRequest) are not recorded. The record's
// Messages slice is shared with the caller's Request: do not modify it.
//
// Recorder methods are called synchronously on the calling goroutine and
// must be safe for concurrent use when the Client is shared.
type Recorder interface {
	Requested(ctx context.Context, rec CallRecord)
	Responded(ctx context.Context, rec CallRecord, resp Response, err error)
}

// CallRecord describes one attempt of a call.
type CallRecord struct {
	CallID  string // Request.CallID, or the id New made for it
	RunID   string // "" for offline use: nothing should be published
	Scope   string
	Purpose string
	CheckID string
	Step    int
	Round   int
	CauseID string // Request.CauseID

	Model   string // the model name sent
	BaseURL string // normalised, password redacted

	Messages []Message
	Sampling
	Stream bool
	// Tools offered in this attempt (names), the tool_choice sent, and the
	// name of the response_format schema; empty when not sent (also when
	// an earlier attempt's refusal dropped them).
	Tools          []string
	ToolChoice     string
	ResponseFormat string

	Attempt int           // from 1
	Timeout time.Duration // of this attempt; 0 = none

	// Set for Responded only.
	HTTPStatus int  // status of the response; 0 when none arrived
	Retrying   bool // another attempt of this call follows
}

// RecorderFunc adapts two functions to Recorder (either may be nil).
type RecorderFunc struct {
	OnRequested func(ctx context.Context, rec CallRecord)
	OnResponded func(ctx context.Context, rec CallRecord, resp Response, err error)
}

// Requested calls OnRequested.
func (f RecorderFunc) Requested(ctx context.Context, rec CallRecord) {
	if f.OnRequested != nil {
		f.OnRequested(ctx, rec)
	}
}

// Responded calls OnResponded.
func (f RecorderFunc) Responded(ctx context.Context, rec CallRecord, resp Response, err error) {
	if f.OnResponded != nil {
		f.OnResponded(ctx, rec, resp, err)
	}
}
