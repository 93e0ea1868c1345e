// Package llmbus publishes the model I/O of llm.Client calls on the bus:
// its BusRecorder implements llm.Recorder with one vera.model.requested
// and one vera.model.responded event per attempt of a call (the
// catalogue's model_io).
//
// Big payloads are referenced (invariant 6): messages whose JSON encoding
// ([{role, content}, …]) and response texts longer than the threshold
// (16 KiB by default) go to the object store and the event carries a
// BlobRef (messages_blob, text_blob) instead.
//
// Ids are derived, not drawn (invariant 3): the ids of the pair for
// attempt n of call C in run R are derived from the call's CauseID (else
// from R and C) with bus.DeriveID, so redoing the call after a crash
// publishes the same ids and the stream's deduplication keeps the first
// pair (see EventIDs). A call with RunID "" (offline use) publishes
// nothing.
package llmbus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
)

// Defaults of Options.
const (
	DefaultThreshold = 16 << 10
	// DefaultPublishTimeout is longer than the bus's own publish budget
	// (bus.DefaultPublishBudget), which is what bounds a publish that
	// waits out a leader election.
	DefaultPublishTimeout = 90 * time.Second
	// maxErrorBytes caps the error text carried by vera.model.responded.
	maxErrorBytes = 4 << 10
)

// Options configure a BusRecorder.
type Options struct {
	// Threshold is the size in bytes above which the messages (as JSON)
	// or the response text go to a blob; default 16 KiB.
	Threshold int
	// PublishTimeout bounds the blob uploads and the publish of one event.
	// The caller's ctx deadline and cancellation are ignored so that the
	// result of a cancelled call is still recorded; default 90s.
	PublishTimeout time.Duration
	// Logger receives an error line for every event that could not be
	// published; default slog.Default().
	Logger *slog.Logger
	// OnError, when set, is called with every publish failure.
	OnError func(error)
}

// BusRecorder publishes model I/O events. It is safe for concurrent use.
// Recording is best effort by design of llm.Recorder (which returns
// nothing): a failure is logged, passed to OnError and counted
// (Failures); it never fails the model call.
type BusRecorder struct {
	bus      *bus.Bus
	opts     Options
	failures atomic.Int64
}

var _ llm.Recorder = (*BusRecorder)(nil)

// New returns a recorder publishing on b with the events' source, clock
// and id defaults of b.Events.
func New(b *bus.Bus, opts Options) *BusRecorder {
	if opts.Threshold <= 0 {
		opts.Threshold = DefaultThreshold
	}
	if opts.PublishTimeout <= 0 {
		opts.PublishTimeout = DefaultPublishTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &BusRecorder{bus: b, opts: opts}
}

// Failures returns the number of events that could not be published.
func (r *BusRecorder) Failures() int64 { return r.failures.Load() }

// EventIDs returns the ids of the vera.model.requested and
// vera.model.responded events of one attempt. They are derived with
// bus.DeriveID from rec.CauseID when set (the ids then carry the cause's
// timestamp), else from rec.CallID (a zero timestamp unless the call id is
// itself a ULID), and from the run id, the call id and the attempt.
func EventIDs(rec llm.CallRecord) (requested, responded string) {
	base := rec.CauseID
	if base == "" {
		base = rec.CallID // DeriveID takes its timestamp when it is a ULID
	}
	key := rec.RunID + "\x00" + rec.CallID + "\x00" + strconv.Itoa(rec.Attempt)
	return bus.DeriveID(rec.RunID, base, catalog.TypeModelRequested+"\x00"+key),
		bus.DeriveID(rec.RunID, base, catalog.TypeModelResponded+"\x00"+key)
}

// Requested publishes vera.model.requested for the attempt.
func (r *BusRecorder) Requested(ctx context.Context, rec llm.CallRecord) {
	if rec.RunID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.PublishTimeout)
	defer cancel()

	msgs := make([]catalog.Message, len(rec.Messages))
	for i, m := range rec.Messages {
		msgs[i] = catalog.Message{Role: catalog.MessageRole(m.Role), Content: m.Content}
	}
	p := catalog.ModelRequested{
		CallID:       rec.CallID,
		Scope:        catalog.ModelScope(rec.Scope),
		Purpose:      rec.Purpose,
		Step:         rec.Step,
		Round:        rec.Round,
		CheckID:      rec.CheckID,
		Model:        rec.Model,
		BaseURL:      rec.BaseURL,
		MessageCount: len(msgs),
		Params: catalog.ModelParams{Temperature: rec.Temperature, MaxTokens: rec.MaxTokens, Stream: rec.Stream,
			TopP: rec.TopP, Seed: rec.Seed, Stop: rec.Stop, ExtraBody: rec.ExtraBody},
		Attempt:        rec.Attempt,
		TimeoutMS:      rec.Timeout.Milliseconds(),
		Tools:          rec.Tools,
		ToolChoice:     rec.ToolChoice,
		ResponseFormat: rec.ResponseFormat,
	}
	encoded, err := json.Marshal(msgs)
	if err != nil {
		r.fail(rec, catalog.TypeModelRequested, fmt.Errorf("encode messages: %w", err))
		return
	}
	if len(encoded) > r.opts.Threshold {
		ref, err := r.bus.PutBlob(ctx, encoded, "application/json")
		if err != nil {
			r.fail(rec, catalog.TypeModelRequested, err)
			return
		}
		ref.Name = "messages.json"
		p.MessagesBlob = &ref
	} else {
		p.Messages = msgs
	}
	id, _ := EventIDs(rec)
	opts := []bus.EventOption{bus.WithID(id)}
	if rec.CauseID != "" {
		opts = append(opts, func(e *bus.Event) { e.CausationID = rec.CauseID })
	}
	r.publish(ctx, rec, p, opts)
}

// Responded publishes vera.model.responded for the attempt.
func (r *BusRecorder) Responded(ctx context.Context, rec llm.CallRecord, resp llm.Response, callErr error) {
	if rec.RunID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.PublishTimeout)
	defer cancel()

	model := resp.Model
	if model == "" {
		model = rec.Model
	}
	p := catalog.ModelResponded{
		CallID:    rec.CallID,
		Scope:     catalog.ModelScope(rec.Scope),
		Step:      rec.Step,
		Round:     rec.Round,
		Model:     model,
		Attempt:   rec.Attempt,
		LatencyMS: resp.Latency.Milliseconds(),
		Usage: catalog.TokenUsage{Prompt: resp.Usage.Prompt, Completion: resp.Usage.Completion, Total: resp.Usage.Total,
			Reasoning: resp.Usage.Reasoning, Cached: resp.Usage.Cached},
		FinishReason:    resp.FinishReason,
		HTTPStatus:      rec.HTTPStatus,
		Retryable:       callErr != nil && rec.Retrying,
		ReasoningSource: resp.ReasoningSource,
		Dropped:         resp.Dropped,
	}
	for _, tc := range resp.ToolCalls {
		c := catalog.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments}
		if len(tc.Arguments) > r.opts.Threshold {
			ref, err := r.bus.PutBlob(ctx, []byte(tc.Arguments), "application/json")
			if err != nil {
				r.fail(rec, catalog.TypeModelResponded, err)
				return
			}
			ref.Name = "tool-call-arguments.json"
			c.Arguments, c.ArgumentsBlob = "", &ref
		}
		p.ToolCalls = append(p.ToolCalls, c)
	}
	if len(resp.Reasoning) > r.opts.Threshold {
		ref, err := r.bus.PutBlob(ctx, []byte(resp.Reasoning), "text/plain; charset=utf-8")
		if err != nil {
			r.fail(rec, catalog.TypeModelResponded, err)
			return
		}
		ref.Name = "reasoning.txt"
		p.ReasoningBlob = &ref
	} else {
		p.Reasoning = resp.Reasoning
	}
	if callErr != nil {
		p.Error = truncate(callErr.Error(), maxErrorBytes)
	}
	if len(resp.Text) > r.opts.Threshold {
		ref, err := r.bus.PutBlob(ctx, []byte(resp.Text), "text/plain; charset=utf-8")
		if err != nil {
			r.fail(rec, catalog.TypeModelResponded, err)
			return
		}
		ref.Name = "response.txt"
		p.TextBlob = &ref
	} else {
		p.Text = resp.Text
	}
	reqID, id := EventIDs(rec)
	r.publish(ctx, rec, p, []bus.EventOption{bus.WithID(id), func(e *bus.Event) { e.CausationID = reqID }})
}

func (r *BusRecorder) publish(ctx context.Context, rec llm.CallRecord, p bus.Payload, opts []bus.EventOption) {
	ev, err := r.bus.Events.New(rec.RunID, p, opts...)
	if err == nil {
		_, err = r.bus.Publish(ctx, ev)
	}
	if err != nil {
		r.fail(rec, p.EventType(), err)
	}
}

func (r *BusRecorder) fail(rec llm.CallRecord, typ string, err error) {
	r.failures.Add(1)
	err = fmt.Errorf("llmbus: publish %s for call %s attempt %d of run %s: %w", typ, rec.CallID, rec.Attempt, rec.RunID, err)
	r.opts.Logger.Error("model I/O event lost", "run_id", rec.RunID, "call_id", rec.CallID, "attempt", rec.Attempt, "type", typ, "err", err)
	if r.opts.OnError != nil {
		r.opts.OnError(err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// Config returns the llm.Config of a run's model settings (the
// catalogue's ModelConfig: base URL, model name, the NAME of the API key's
// environment variable, timeout_ms, 0 meaning MODEL_TIMEOUT or 150 s,
// streaming, on unless stream is false, and its idle timeout). The caller
// adds Recorder, Logger and the rest; Sampling gives the per-request part.
func Config(mc catalog.ModelConfig) llm.Config {
	return llm.Config{
		BaseURL:     mc.BaseURL,
		Model:       mc.Name,
		APIKeyEnv:   mc.APIKeyEnv,
		Timeout:     time.Duration(mc.TimeoutMS) * time.Millisecond,
		Stream:      mc.Stream == nil || *mc.Stream,
		IdleTimeout: time.Duration(mc.IdleTimeoutMS) * time.Millisecond,
	}
}

// Sampling returns the sampling and server options of a run's model
// settings, for llm.Request.Sampling.
func Sampling(mc catalog.ModelConfig) llm.Sampling {
	return llm.Sampling{Temperature: mc.Temperature, TopP: mc.TopP, MaxTokens: mc.MaxTokens, Seed: mc.Seed, Stop: mc.Stop, ExtraBody: mc.ExtraBody}
}
