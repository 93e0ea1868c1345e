package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/runcompare"
)

// Errors of Recorded.Complete.
var (
	// ErrNotRecorded: the recording has no successful reply for the call id.
	ErrNotRecorded = errors.New("replay: the recording has no reply for this model call")
	// ErrPromptDiffers: the call's prompt is not the recorded prompt.
	ErrPromptDiffers = errors.New("replay: the prompt differs from the recording")
	// ErrStopped is the error of a call refused because the re-execution
	// already diverged and stops there.
	ErrStopped = errors.New("replay: the re-execution diverged and stops")
)

// Recorded is an llm.Completer that answers model calls from a recorded
// run's model I/O (vera.model.requested and vera.model.responded): the
// call with id C gets the recorded reply of call C (its text, finish
// reason, usage and model), provided the recording has one and the prompt
// sent equals the recorded prompt. It never contacts a model.
//
// Every call it answers is passed to Recorder, as llm.Client does, so the
// new run records its model I/O like a live run.
type Recorded struct {
	// Recorder sees each answered call (one attempt); nil records nothing.
	Recorder llm.Recorder
	// ServeChangedPrompts answers a call whose prompt differs from the
	// recording with the recorded reply anyway (the divergence is still
	// reported); otherwise such a call fails with ErrPromptDiffers.
	ServeChangedPrompts bool
	// OnDivergence is told about every call that is not in the recording
	// or whose prompt differs.
	OnDivergence func(Divergence)
	// Gate, when set, is called before a call is answered; an error
	// refuses the call. Re-execution in stop mode uses it to hold the next
	// step's call until the step before it was compared with the recording.
	Gate func(ctx context.Context, req llm.Request) error

	calls  map[string]*recordedCall
	mu     sync.Mutex
	served int
}

type recordedCall struct {
	messages  []llm.Message // nil when the request was not recorded
	baseURL   string
	resp      catalog.ModelResponded
	text      string
	reasoning string
	toolCalls []llm.ToolCall // arguments read from their blobs
}

var _ llm.Completer = (*Recorded)(nil)

// NewRecorded reads the model I/O of run runID from b (blobs included).
func NewRecorded(ctx context.Context, b *bus.Bus, runID string) (*Recorded, error) {
	evs, err := b.ReadRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("read model I/O of run %s: %w", runID, err)
	}
	return newRecorded(ctx, b, index(evs))
}

func newRecorded(ctx context.Context, b *bus.Bus, rec *recording) (*Recorded, error) {
	r := &Recorded{calls: map[string]*recordedCall{}}
	for id, c := range rec.calls {
		if c.Response == nil {
			continue
		}
		rc := &recordedCall{resp: *c.Response, text: c.Response.Text}
		if c.Response.TextBlob != nil {
			data, err := b.GetBlob(ctx, c.Response.TextBlob.Digest)
			if err != nil {
				return nil, fmt.Errorf("recorded reply of %s: %w", id, err)
			}
			rc.text = string(data)
		}
		rc.reasoning = c.Response.Reasoning
		if c.Response.ReasoningBlob != nil {
			data, err := b.GetBlob(ctx, c.Response.ReasoningBlob.Digest)
			if err != nil {
				return nil, fmt.Errorf("recorded reasoning of %s: %w", id, err)
			}
			rc.reasoning = string(data)
		}
		for _, tc := range c.Response.ToolCalls {
			if tc.ArgumentsBlob != nil {
				data, err := b.GetBlob(ctx, tc.ArgumentsBlob.Digest)
				if err != nil {
					return nil, fmt.Errorf("recorded tool call arguments of %s: %w", id, err)
				}
				tc.Arguments = string(data)
			}
			rc.toolCalls = append(rc.toolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		if q := c.Request; q != nil {
			rc.baseURL = q.BaseURL
			msgs := q.Messages
			if q.MessagesBlob != nil {
				data, err := b.GetBlob(ctx, q.MessagesBlob.Digest)
				if err != nil {
					return nil, fmt.Errorf("recorded prompt of %s: %w", id, err)
				}
				if err := json.Unmarshal(data, &msgs); err != nil {
					return nil, fmt.Errorf("recorded prompt of %s: %w", id, err)
				}
			}
			rc.messages = make([]llm.Message, len(msgs))
			for i, m := range msgs {
				rc.messages[i] = llm.Message{Role: string(m.Role), Content: m.Content}
			}
		}
		r.calls[id] = rc
	}
	return r, nil
}

// Calls returns the number of recorded calls that can be served.
func (r *Recorded) Calls() int { return len(r.calls) }

// Served returns the number of calls answered so far.
func (r *Recorded) Served() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served
}

// Complete answers req from the recording.
func (r *Recorded) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return llm.Response{}, err
	}
	if r.Gate != nil {
		if err := r.Gate(ctx, req); err != nil {
			return llm.Response{}, err
		}
	}
	c, ok := r.calls[req.CallID]
	if !ok || req.CallID == "" {
		d := Divergence{Step: req.Step, Kind: KindMissingCall, CallID: req.CallID,
			Detail: fmt.Sprintf("the agent asked for model call %q (scope %s), which the recording does not have", req.CallID, req.Scope)}
		r.diverge(d)
		return llm.Response{}, fmt.Errorf("%w: %s", ErrNotRecorded, req.CallID)
	}
	if c.messages != nil {
		if pd, differs := runcompare.Prompts(c.messages, req.Messages); differs {
			d := Divergence{Step: req.Step, Kind: KindPrompt, CallID: req.CallID, Detail: pd.Detail, Recorded: pd.Recorded, Replayed: pd.Replayed}
			r.diverge(d)
			if !r.ServeChangedPrompts {
				return llm.Response{}, fmt.Errorf("%w: %s: %s", ErrPromptDiffers, req.CallID, d.Detail)
			}
		}
	}
	resp := llm.Response{
		Text: c.text, FinishReason: c.resp.FinishReason, Model: c.resp.Model, Attempts: 1,
		Latency: time.Duration(c.resp.LatencyMS) * time.Millisecond,
		Usage: llm.Usage{Prompt: c.resp.Usage.Prompt, Completion: c.resp.Usage.Completion, Total: c.resp.Usage.Total,
			Reasoning: c.resp.Usage.Reasoning, Cached: c.resp.Usage.Cached},
		Reasoning: c.reasoning, ReasoningSource: c.resp.ReasoningSource, Dropped: c.resp.Dropped,
	}
	resp.ToolCalls = slices.Clone(c.toolCalls)
	if r.Recorder != nil {
		cr := llm.CallRecord{CallID: req.CallID, RunID: req.RunID, Scope: req.Scope, Purpose: req.Purpose, CheckID: req.CheckID,
			Step: req.Step, Round: req.Round, CauseID: req.CauseID, Model: req.Model, BaseURL: c.baseURL, Messages: req.Messages,
			Sampling: req.Sampling, ResponseFormat: formatName(req.ResponseFormat), Attempt: 1}
		for _, t := range req.Tools {
			cr.Tools = append(cr.Tools, t.Name)
		}
		if len(cr.Tools) > 0 {
			cr.ToolChoice = req.ToolChoice
		}
		r.Recorder.Requested(ctx, cr)
		cr.HTTPStatus = c.resp.HTTPStatus
		r.Recorder.Responded(ctx, cr, resp, nil)
	}
	r.mu.Lock()
	r.served++
	r.mu.Unlock()
	return resp, nil
}

func (r *Recorded) diverge(d Divergence) {
	if r.OnDivergence != nil {
		r.OnDivergence(d)
	}
}

func formatName(f *llm.JSONSchema) string {
	if f == nil {
		return ""
	}
	return f.Name
}
