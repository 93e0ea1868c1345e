package bus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// PubAck says where an event was stored. Duplicate is true when the stream
// already held the event: one with the same id in the same run, within the
// dedup window (a retry or a second import).
type PubAck struct {
	Stream    string
	Sequence  uint64
	Duplicate bool
}

// ErrConflict is returned (wrapped in a *ConflictError) when a fenced
// publish finds that another writer appended first.
var ErrConflict = errors.New("expected last sequence conflict")

// ErrTooLarge is returned for an event above the stream's message size
// limit: put the big part in a blob and reference it.
var ErrTooLarge = errors.New("event exceeds the maximum message size")

// ConflictError describes a lost fencing race.
type ConflictError struct {
	Filter   string // subject or wildcard the expectation was about
	Expected uint64 // the sequence the publisher believed was last
	Code     int    // JetStream error code: 10071 single node, 10164 replicated
	Err      error
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("publish fenced on %s at sequence %d: another writer appended first (code %d)", e.Filter, e.Expected, e.Code)
}

// Unwrap lets errors.Is(err, ErrConflict) match.
func (e *ConflictError) Unwrap() []error { return []error{ErrConflict, e.Err} }

// PublishOption adjusts one publish.
type PublishOption func(*publishOptions)

type publishOptions struct {
	fenced      bool
	fenceSeq    uint64
	fenceFilter string
}

// ExpectLastSequence fences the publish: it succeeds only if the last event
// stored on filter (a subject or a wildcard such as vera.run.R.agent.>) has
// sequence seq (0: no event yet). An empty filter means the event's own
// subject. A lost race returns an error matching ErrConflict.
func ExpectLastSequence(filter string, seq uint64) PublishOption {
	return func(o *publishOptions) {
		o.fenced, o.fenceSeq, o.fenceFilter = true, seq, filter
	}
}

// MsgID returns the Nats-Msg-Id the bus stores event id of run runID
// under: "<runID>/<id>". The stream drops a message whose Nats-Msg-Id it
// stored within the dedup window, so deduplication is per run: the same
// event sent twice to a run is stored once, while two runs whose events
// share an id (CloudEvents ids are only unique per source, and an outside
// tool may reuse its ids in every run) each keep theirs. An id that is not
// 1-200 printable ASCII characters without spaces is replaced by its
// SHA-256 in hex, after '#' instead of '/' ("<runID>#<hex>"), so that no
// id can break the header or collide with a plain one. Run ids contain
// neither '/' nor '#', so the form is unambiguous.
//
// Outside tools that publish with their own client can send this header to
// get the same deduplication as the bus's own publishes.
func MsgID(runID, id string) string {
	if safeMsgID(id) {
		return runID + "/" + id
	}
	sum := sha256.Sum256([]byte(id))
	return runID + "#" + hex.EncodeToString(sum[:])
}

func safeMsgID(id string) bool {
	if len(id) == 0 || len(id) > 200 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}

// rawMsgID is the Nats-Msg-Id of a stored message that is not a valid
// event (import stores them back verbatim): run, subject, CloudEvents
// headers (see ceHeaders) and bytes together, in a form no event's MsgID
// takes.
func rawMsgID(runID, subject string, header nats.Header, raw []byte) string {
	return runID + "#raw-" + rawKey(subject, header, raw)
}

// rawKey names a message by its subject, its CloudEvents headers (none for
// a message that is not in binary mode: then the key is that of subject
// and bytes alone, as before headers were kept) and its bytes.
func rawKey(subject string, header nats.Header, raw []byte) string {
	h := sha256.New()
	h.Write([]byte(subject))
	h.Write([]byte{0})
	h.Write(raw)
	if len(header) > 0 {
		h.Write([]byte{0})
		for _, k := range slices.Sorted(maps.Keys(header)) {
			for _, v := range header[k] {
				h.Write([]byte(k + ": " + v + "\n"))
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// subjectRun is the run token of a subject under vera.run., or "".
func subjectRun(subject string) string {
	rest, ok := strings.CutPrefix(subject, SubjectRoot+".")
	if !ok {
		return ""
	}
	run, _, _ := strings.Cut(rest, ".")
	return run
}

func (b *Bus) message(ev *Event) (*nats.Msg, error) {
	if err := ev.Validate(); err != nil {
		return nil, err
	}
	subj, err := ev.NATSSubject()
	if err != nil {
		return nil, err
	}
	if isExtType(ev.Type) && b.opts.ExtInbound {
		// An outside tool's events go through VERA_EXT, counted per run
		// and identity.
		if subj, err = ExtInSubject(ev.RunID, b.opts.Identity); err != nil {
			return nil, err
		}
	}
	data, err := ev.Marshal()
	if err != nil {
		return nil, err
	}
	if len(data) > int(b.opts.MaxMsgSize) {
		return nil, fmt.Errorf("%w: %s %s is %d bytes, limit %d", ErrTooLarge, ev.Type, ev.ID, len(data), b.opts.MaxMsgSize)
	}
	return eventMsg(subj, data), nil
}

// eventMsg is the NATS message of a structured-mode envelope: its bytes
// on its subject, marked with the header Content-Type:
// application/cloudevents+json as the CloudEvents NATS protocol binding
// marks structured mode. (Dead letters and other non-events are not
// marked.)
func eventMsg(subject string, envelope []byte) *nats.Msg {
	h := make(nats.Header, 2) // room for Nats-Msg-Id
	h[HeaderContentType] = []string{ContentTypeCloudEvents}
	return &nats.Msg{Subject: subject, Data: envelope, Header: h}
}

func (o publishOptions) jsOpts(id, subject string) []jetstream.PublishOpt {
	opts := []jetstream.PublishOpt{jetstream.WithMsgID(id), jetstream.WithRetryAttempts(0)}
	if o.fenced {
		if o.fenceFilter == "" || o.fenceFilter == subject {
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(o.fenceSeq))
		} else {
			opts = append(opts, jetstream.WithExpectLastSequenceForSubject(o.fenceSeq, o.fenceFilter))
		}
	}
	return opts
}

// Publish stores ev on its subject and waits for the stream's ack. The run
// and event id go out as Nats-Msg-Id (see MsgID), so retries after a
// timeout or a leader change cannot append it twice to its run, and
// another run's event with the same id is not mistaken for it.
func (b *Bus) Publish(ctx context.Context, ev Event, opts ...PublishOption) (PubAck, error) {
	msg, err := b.message(&ev)
	if err != nil {
		return PubAck{}, fmt.Errorf("publish %s: %w", ev.Type, err)
	}
	var po publishOptions
	for _, o := range opts {
		o(&po)
	}
	return b.publishMsg(ctx, msg, MsgID(ev.RunID, ev.ID), po)
}

// PublishRaw stores bytes as they are on subject (no envelope check), with
// msgID deduplicated like an event id within the subject's run: the
// Nats-Msg-Id is MsgID(run, msgID) for a subject vera.run.<run>.…, and
// msgID itself on any other subject.
func (b *Bus) PublishRaw(ctx context.Context, subject, msgID string, data []byte) (PubAck, error) {
	if run := subjectRun(subject); run != "" {
		msgID = MsgID(run, msgID)
	}
	return b.publishMsg(ctx, &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}, msgID, publishOptions{})
}

// publishMsg publishes msg with id as its Nats-Msg-Id, retrying a
// retryable failure until the publish budget is spent.
func (b *Bus) publishMsg(ctx context.Context, msg *nats.Msg, id string, po publishOptions) (PubAck, error) {
	jsOpts := po.jsOpts(id, msg.Subject)
	began := time.Now()
	var lastErr error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			wait := backoff(attempt)
			if time.Since(began)+wait > b.opts.PublishBudget {
				return PubAck{}, fmt.Errorf("publish %s: not stored after %d attempts in %s (publish budget %s): %w",
					msg.Subject, attempt, time.Since(began).Round(time.Millisecond), b.opts.PublishBudget, lastErr)
			}
			log := b.log.Debug
			if attempt%5 == 1 {
				log = b.log.Warn // one line when it starts, then every fifth attempt
			}
			log("publish retry", "subject", msg.Subject, "id", id, "attempt", attempt, "wait", wait, "since", time.Since(began).Round(time.Millisecond), "err", lastErr)
			select {
			case <-ctx.Done():
				return PubAck{}, fmt.Errorf("publish %s: %w (last error: %v)", msg.Subject, ctx.Err(), lastErr)
			case <-time.After(wait):
			}
		}
		wctx, stop := b.denied.watch(ctx, msg.Subject)
		actx, cancel := context.WithTimeout(wctx, b.opts.PublishTimeout)
		ack, err := b.js.PublishMsg(actx, msg, jsOpts...)
		cancel()
		denied := deniedCause(wctx)
		stop()
		if denied != nil {
			return PubAck{}, Permanent(fmt.Errorf("publish %s as %s: %w", msg.Subject, b.opts.Name, denied))
		}
		if err == nil {
			if attempt > 0 {
				b.log.Info("publish stored after retries", "subject", msg.Subject, "id", id, "attempts", attempt+1, "after", time.Since(began).Round(time.Millisecond))
			}
			return PubAck{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
		}
		if ce := conflict(err, po); ce != nil {
			// The server checks the expected sequence before deduplication,
			// so a retry of a publish that did land looks like a conflict.
			// If the last event on the fence is ours (the same Nats-Msg-Id:
			// the same run and event id), it is a duplicate.
			if ack, ok := b.alreadyStored(ctx, msg.Subject, id, po); ok {
				return ack, nil
			}
			return PubAck{}, ce
		}
		if lerr := b.limitError(msg.Subject, err); lerr != nil {
			return PubAck{}, lerr
		}
		if ctx.Err() != nil || !retryable(err) {
			return PubAck{}, fmt.Errorf("publish %s: %w", msg.Subject, err)
		}
		lastErr = err
	}
}

// PublishBatch publishes events asynchronously and waits for every ack.
// Events that fail with a retryable error are sent again (same run and id,
// so the same Nats-Msg-Id: nothing doubles). The acks come back in the
// order of evs.
func (b *Bus) PublishBatch(ctx context.Context, evs []Event) ([]PubAck, error) {
	msgs := make([]*nats.Msg, len(evs))
	ids := make([]string, len(evs))
	for i := range evs {
		m, err := b.message(&evs[i])
		if err != nil {
			return nil, fmt.Errorf("publish batch item %d (%s): %w", i, evs[i].Type, err)
		}
		msgs[i], ids[i] = m, MsgID(evs[i].RunID, evs[i].ID)
	}
	return b.publishAsync(ctx, msgs, ids)
}

// publishAsync publishes msgs, ids[i] being the Nats-Msg-Id of msgs[i].
func (b *Bus) publishAsync(ctx context.Context, msgs []*nats.Msg, ids []string) ([]PubAck, error) {
	acks := make([]PubAck, len(msgs))
	pending := make([]int, len(msgs))
	for i := range pending {
		pending[i] = i
	}
	var lastErr error
	began := time.Now()
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > 0 {
			wait := backoff(attempt)
			if time.Since(began)+wait > b.opts.PublishBudget {
				return acks, fmt.Errorf("publish batch: %d of %d events not stored after %d attempts in %s (publish budget %s): %w",
					len(pending), len(msgs), attempt, time.Since(began).Round(time.Millisecond), b.opts.PublishBudget, lastErr)
			}
			select {
			case <-ctx.Done():
				return acks, fmt.Errorf("publish batch: %w", ctx.Err())
			case <-time.After(wait):
			}
		}
		futures := make([]jetstream.PubAckFuture, len(pending))
		var failed []int
		for k, i := range pending {
			f, err := b.js.PublishMsgAsync(msgs[i], jetstream.WithMsgID(ids[i]))
			if err != nil {
				if !retryable(err) && !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
					return acks, fmt.Errorf("publish batch item %d: %w", i, err)
				}
				lastErr = err
				failed = append(failed, i)
				continue
			}
			futures[k] = f
		}
		for k, i := range pending {
			f := futures[k]
			if f == nil {
				continue
			}
			select {
			case ack := <-f.Ok():
				acks[i] = PubAck{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}
			case err := <-f.Err():
				if lerr := b.limitError(msgs[i].Subject, err); lerr != nil {
					return acks, fmt.Errorf("publish batch item %d: %w", i, lerr)
				}
				if !retryable(err) {
					return acks, fmt.Errorf("publish batch item %d: %w", i, err)
				}
				lastErr = err
				failed = append(failed, i)
			case <-ctx.Done():
				return acks, fmt.Errorf("publish batch: %w", ctx.Err())
			}
		}
		pending = failed
	}
	return acks, nil
}

func backoff(attempt int) time.Duration {
	d := 50 * time.Millisecond << min(attempt-1, 5)
	return min(d, 2*time.Second)
}

func retryable(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) ||
		errors.Is(err, jetstream.ErrAsyncPublishTimeout) ||
		errors.Is(err, nats.ErrConnectionReconnecting) ||
		errors.Is(err, nats.ErrDisconnected) ||
		isAPIErrorCode(err, 10008) // JetStream cluster temporarily unavailable
}

func isAPIErrorCode(err error, code int) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && int(apiErr.ErrorCode) == code
}

func conflict(err error, po publishOptions) *ConflictError {
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return nil
	}
	switch apiErr.ErrorCode {
	case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
		filter := po.fenceFilter
		if filter == "" {
			filter = "(own subject)"
		}
		return &ConflictError{Filter: filter, Expected: po.fenceSeq, Code: int(apiErr.ErrorCode), Err: err}
	}
	return nil
}

func (b *Bus) alreadyStored(ctx context.Context, subject, id string, po publishOptions) (PubAck, bool) {
	filter := po.fenceFilter
	if filter == "" {
		filter = subject
	}
	stream, err := b.js.Stream(ctx, StreamName)
	if err != nil {
		return PubAck{}, false
	}
	last, err := stream.GetLastMsgForSubject(ctx, filter)
	if err != nil || last.Header.Get(jetstream.MsgIDHeader) != id {
		return PubAck{}, false
	}
	return PubAck{Stream: StreamName, Sequence: last.Sequence, Duplicate: true}, true
}

// LastSequence returns the sequence of the last event stored on filter (a
// subject or wildcard), or 0 when there is none. Use it with
// ExpectLastSequence to fence a writer.
func (b *Bus) LastSequence(ctx context.Context, filter string) (uint64, error) {
	stream, err := b.js.Stream(ctx, StreamName)
	if err != nil {
		return 0, fmt.Errorf("open stream %s: %w", StreamName, err)
	}
	msg, err := stream.GetLastMsgForSubject(ctx, filter)
	if err != nil {
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		return 0, fmt.Errorf("last sequence on %s: %w", filter, err)
	}
	return msg.Sequence, nil
}
