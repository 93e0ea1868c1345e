// Package live carries the pieces of a model reply while it streams in,
// so that a person watching a run (`vera run`, the dashboard) sees the
// step being generated, without making those pieces part of the record.
//
// # Why not events
//
// The record of a model call is vera.model.responded: the whole reply,
// its reasoning and tool calls, stored once in the VERA stream, exported
// and replayed. A streamed reply arrives as hundreds or thousands of
// chunks; an event per chunk (or per batch of chunks) would multiply the
// stored events of a run by hundreds, slow every reader, export and
// replay, and add nothing the responded event does not already hold.
// Replay and re-execution must see exactly the recorded reply, whether or
// not it was streamed.
//
// So the pieces travel on core NATS, not JetStream: a [Publisher]
// batches a call's deltas (every [DefaultInterval] or [DefaultMaxBytes],
// whichever comes first) and publishes each batch as a small JSON
// [Piece] on vera.live.<run_id>.model ([Subject]). That subject is
// outside the VERA stream's subjects (vera.run.>) and the dead-letter
// stream's (vera.dlq.>), so nothing stores it. Live pieces are lossy by
// design: a viewer that is slow, disconnected or late misses pieces
// (Piece.Seq shows the gap) and sees the final reply when
// vera.model.responded arrives; nobody may treat them as the reply.
//
// # Who may publish and read them
//
// bus/auth lets only the agent identity (and admin) publish on
// vera.live.*.model. Reading follows the rule of the run's events: every
// identity that may read a run's events (the components, cli, dashboard,
// reader, ext) may subscribe to its live pieces, since they hold nothing
// the run's vera.model.responded will not hold moments later. A model's
// reasoning can hold secrets of the task; whoever may not see them must
// not be given a reading identity at all.
//
// # The end of a reply
//
// The function [Publisher.Deltas] returns takes the llm.Delta pieces of
// one call (llm.Request.OnDelta). A zero llm.Delta, which the model
// client never passes on, means the reply ended: what is pending is
// published at once with Done set. A caller that never
// sends it loses nothing but promptness: pending text is flushed within
// the interval anyway, and viewers end a reply at its
// vera.model.responded.
package live

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/internal/llm"
)

// Subjects and defaults.
const (
	// SubjectRoot is the root of live subjects: vera.live.<run_id>.<what>.
	// It is outside every stream's subjects (bus.SubjectRoot is
	// vera.run, bus.DeadLetterSubject vera.dlq).
	SubjectRoot = "vera.live"
	// ModelToken is the last token of the subject of a model reply's
	// pieces.
	ModelToken = "model"

	DefaultInterval = 100 * time.Millisecond // longest a piece waits before it is published
	DefaultMaxBytes = 4 << 10                // a batch this big is published at once
)

// Subject returns the subject of run runID's live model pieces,
// vera.live.<run_id>.model.
func Subject(runID string) (string, error) {
	if err := bus.ValidateRunID(runID); err != nil {
		return "", fmt.Errorf("live subject: %w", err)
	}
	return SubjectRoot + "." + runID + "." + ModelToken, nil
}

// Filter returns the subject filter of runID's live model pieces; ""
// (or "*") is every run's.
func Filter(runID string) (string, error) {
	if runID == "" || runID == "*" {
		return SubjectRoot + ".*." + ModelToken, nil
	}
	return Subject(runID)
}

// Piece is one batch of a streamed reply, published as JSON.
type Piece struct {
	// RunID is taken from the subject on receipt; it is not in the body.
	RunID  string `json:"-"`
	CallID string `json:"call_id"` // the model call (vera.model.requested's call_id)
	Step   int    `json:"step"`    // the agent step
	// Seq numbers the pieces of a call from 1: a viewer that sees a gap
	// missed pieces.
	Seq       int    `json:"seq"`
	Content   string `json:"content,omitempty"`   // answer text since the last piece
	Reasoning string `json:"reasoning,omitempty"` // reasoning text since the last piece
	ToolName  string `json:"tool_name,omitempty"` // the name of a tool call that started
	ToolArgs  string `json:"tool_args,omitempty"` // tool call arguments since the last piece
	Done      bool   `json:"done,omitempty"`      // the reply ended
}

// Options configure a Publisher.
type Options struct {
	Interval time.Duration // default DefaultInterval
	MaxBytes int           // default DefaultMaxBytes
	Logger   *slog.Logger
}

// Publisher publishes the live pieces of model replies on one
// connection. It is safe for concurrent use; Deltas may be called for
// many calls at once.
type Publisher struct {
	nc     *nats.Conn
	opts   Options
	closed atomic.Bool
	warned atomic.Bool
}

// NewPublisher publishes on nc, which the caller keeps open while the
// publisher is used.
func NewPublisher(nc *nats.Conn, opts Options) *Publisher {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Publisher{nc: nc, opts: opts}
}

// Deltas returns the sink of one call's streamed pieces (an
// agents.Config.Deltas): nil when runID is not a valid run id (a call
// outside any run has no one watching).
func (p *Publisher) Deltas(runID string, step int, callID string) func(llm.Delta) {
	subj, err := Subject(runID)
	if err != nil {
		return nil
	}
	s := &callStream{p: p, subject: subj, callID: callID, step: step}
	return s.add
}

// Close stops publishing: pieces still pending are dropped (the record
// is vera.model.responded).
func (p *Publisher) Close() { p.closed.Store(true) }

func (p *Publisher) publish(subject string, piece *Piece) {
	if p.closed.Load() {
		return
	}
	data, err := json.Marshal(piece)
	if err == nil {
		err = p.nc.Publish(subject, data)
	}
	if err != nil && !p.warned.Swap(true) {
		p.opts.Logger.Warn("live: publishing a reply's pieces failed; viewers see replies when they end", "subject", subject, "err", err)
	}
}

// callStream batches the pieces of one call.
type callStream struct {
	p       *Publisher
	subject string
	callID  string
	step    int

	mu                          sync.Mutex
	content, reasoning, toolArg strings.Builder // the text since the last publish
	toolName                    string
	size                        int
	seq                         int
	timer                       *time.Timer
	done                        bool
}

func (s *callStream) add(d llm.Delta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return
	}
	if d == (llm.Delta{}) {
		s.done = true
		s.flushLocked(true)
		return
	}
	if d.ToolName != "" && s.toolName != "" {
		// A second tool call starts within one batch: publish the
		// first's name with what came before.
		s.flushLocked(false)
	}
	s.content.WriteString(d.Content)
	s.reasoning.WriteString(d.Reasoning)
	if d.ToolName != "" {
		s.toolName = d.ToolName
	}
	s.toolArg.WriteString(d.ToolArgs)
	s.size += len(d.Content) + len(d.Reasoning) + len(d.ToolArgs) + len(d.ToolName)
	switch {
	case s.size >= s.p.opts.MaxBytes:
		s.flushLocked(false)
	case s.timer == nil:
		s.timer = time.AfterFunc(s.p.opts.Interval, s.flushTimer)
	}
}

func (s *callStream) flushTimer() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = nil
	if s.size > 0 {
		s.flushLocked(false)
	}
}

// flushLocked publishes what is pending, and the end of the reply when
// done (with s.mu held).
func (s *callStream) flushLocked(done bool) {
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if s.size == 0 && !done {
		return
	}
	s.seq++
	s.p.publish(s.subject, &Piece{CallID: s.callID, Step: s.step, Seq: s.seq,
		Content: s.content.String(), Reasoning: s.reasoning.String(), ToolName: s.toolName, ToolArgs: s.toolArg.String(), Done: done})
	s.content.Reset()
	s.reasoning.Reset()
	s.toolArg.Reset()
	s.toolName, s.size = "", 0
}

// Subscribe calls fn with every live model piece of runID ("" for every
// run), on the subscription's goroutine, until the subscription is
// unsubscribed; a message that is not a piece the agent published
// (FromAgent) is skipped. It only sees what is published from now on.
func Subscribe(nc *nats.Conn, runID string, fn func(Piece)) (*nats.Subscription, error) {
	filter, err := Filter(runID)
	if err != nil {
		return nil, err
	}
	sub, err := nc.Subscribe(filter, func(m *nats.Msg) {
		if !FromAgent(m) {
			return
		}
		p, err := Decode(m.Subject, m.Data)
		if err == nil {
			fn(p)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", filter, err)
	}
	return sub, nil
}

// FromAgent reports whether m can be a live piece as the agent publishes
// it: a core publish, with no reply subject and no headers. Only the
// agent's identity may publish on a live subject (bus/auth), but the
// server does not check a push consumer's deliver subject against its
// creator's permissions: any identity that may create a consumer can have
// stored events delivered onto a live subject. Such a delivery always
// carries a $JS.ACK reply subject (or, for a heartbeat or flow control,
// status headers), which the agent's pieces never do.
func FromAgent(m *nats.Msg) bool {
	return m.Reply == "" && len(m.Header) == 0
}

// Decode reads a piece published on subject.
func Decode(subject string, data []byte) (Piece, error) {
	var p Piece
	if err := json.Unmarshal(data, &p); err != nil {
		return Piece{}, fmt.Errorf("live piece on %s: %w", subject, err)
	}
	if p.CallID == "" || p.Seq < 1 {
		return Piece{}, fmt.Errorf("live piece on %s: no call_id or seq", subject)
	}
	p.RunID = runOf(subject)
	return p, nil
}

// runOf is the run id of a live subject, "" when it is not one.
func runOf(subject string) string {
	rest, ok := strings.CutPrefix(subject, SubjectRoot+".")
	if !ok {
		return ""
	}
	run, _, _ := strings.Cut(rest, ".")
	return run
}

// Reply gathers the pieces of one call as a viewer sees them.
type Reply struct {
	CallID, RunID string
	Step          int
	Content       string
	Reasoning     string
	ToolArgs      string
	ToolNames     []string
	LastSeq       int
	Missed        bool // a piece was lost (a gap in Seq, or joined late)
	Done          bool
}

// Add folds p into r (p is of r's call).
func (r *Reply) Add(p Piece) {
	if r.CallID == "" {
		r.CallID, r.RunID, r.Step = p.CallID, p.RunID, p.Step
	}
	if p.Seq != r.LastSeq+1 {
		r.Missed = true
	}
	if p.Seq > r.LastSeq {
		r.LastSeq = p.Seq
	}
	r.Content += p.Content
	r.Reasoning += p.Reasoning
	r.ToolArgs += p.ToolArgs
	if p.ToolName != "" {
		r.ToolNames = append(r.ToolNames, p.ToolName)
	}
	r.Done = r.Done || p.Done
}
