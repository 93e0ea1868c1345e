package bus

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadInactiveThreshold is how long the server keeps the consumer of a
// Read once its reader stopped pulling.
const ReadInactiveThreshold = 5 * time.Second

// ReadOptions select what Read returns.
type ReadOptions struct {
	RunID    string    // one run; empty for every run
	Types    []string  // type patterns as in ConsumerConfig.Types; empty for all
	FromSeq  uint64    // start at this stream sequence (inclusive)
	FromTime time.Time // or at the first event stored at or after this time
	// Follow keeps reading new events as they are stored, until ctx ends.
	// Without it Read stops at the last event stored when it began.
	Follow bool
	// OnlyNew (with Follow) skips what is stored and reads only events
	// stored from now on.
	OnlyNew bool
	// Direct (without Follow or FromTime) reads by direct gets, one message
	// each, and creates no consumer: for readers that many clients can
	// start at once (the dashboard's catch-up reads), whose consumers
	// would otherwise add up on the stream.
	Direct bool
}

// Record is one stored message as Read returns it. Err is set (and Event is
// partial) when the message is not a valid envelope; Raw always holds the
// bytes as stored. A CloudEvent stored in binary mode (attributes in
// headers, see ParseStoredMsg) is read as the same Event; its Raw is its
// data alone, and Envelope gives its structured form.
type Record struct {
	Sequence uint64
	Subject  string
	Stored   time.Time
	Header   nats.Header // the message's headers as stored
	Raw      []byte
	Event    Event
	Err      error
}

// Envelope returns the record's envelope as JSON: Raw for a structured
// message (and for a malformed one, which has no envelope), the event's
// structured form (Event.Marshal) for a binary-mode one.
func (r *Record) Envelope() ([]byte, error) { return envelopeOf(&r.Event, r.Raw, r.Err) }

// Read returns the stored events in stream order through an ordered
// consumer. The sequence ends early with an error if the server fails or ctx
// ends (a Follow read ends with nil error when ctx is cancelled).
func (b *Bus) Read(ctx context.Context, opts ReadOptions) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		cfg := ConsumerConfig{Durable: "read", Types: opts.Types, RunID: opts.RunID}
		filters, err := cfg.filters()
		if err != nil {
			yield(Record{}, err)
			return
		}
		if slices.ContainsFunc(opts.Types, func(t string) bool { return strings.HasPrefix(t, "vera."+ExtArea+".") }) {
			// Outside types share their subjects: the type is checked here.
			all := yield
			yield = func(r Record, err error) bool {
				if err == nil && r.Err == nil && !cfg.wants(r.Event.Type) {
					return true
				}
				return all(r, err)
			}
		}
		if opts.Direct && !opts.Follow && opts.FromTime.IsZero() {
			b.readAllDirect(ctx, opts.RunID, filters, max(opts.FromSeq, 1), yield)
			return
		}
		if !opts.Follow && opts.FromSeq > 0 && len(filters) == 1 {
			// A short catch-up read (the agent's, after each decision):
			// message gets by sequence cost a round trip each, an ordered
			// consumer several before its first message.
			next, done := b.readDirect(ctx, filters[0], opts.FromSeq, yield)
			if done {
				return
			}
			opts.FromSeq = next
		}
		// An ordered consumer is not deleted when its read stops: without a
		// short inactivity threshold every read would leave one on the
		// stream for jetstream's default of five minutes, and busy readers
		// (a projector reading its run per event) would pile them up
		// toward the stream's limit.
		oc := jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: jetstream.DeliverAllPolicy, InactiveThreshold: ReadInactiveThreshold}
		switch {
		case opts.OnlyNew && opts.Follow:
			oc.DeliverPolicy = jetstream.DeliverNewPolicy
		case opts.FromSeq > 0:
			oc.DeliverPolicy, oc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, opts.FromSeq
		case !opts.FromTime.IsZero():
			t := opts.FromTime
			oc.DeliverPolicy, oc.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
		}
		// A consumer create or info request can go unanswered while a
		// cluster elects a leader or a node recovers: each attempt has its
		// own timeout (retryAPI), so a read does not hang until ctx ends.
		var cons jetstream.Consumer
		err = b.retryAPI(ctx, "read "+StreamName+": create ordered consumer", func(actx context.Context) error {
			var err error
			cons, err = b.js.OrderedConsumer(actx, StreamName, oc)
			return err
		})
		if err != nil && !opts.Follow && len(filters) == 1 && opts.FromTime.IsZero() &&
			(errors.Is(err, jetstream.ErrMaximumConsumersLimit) || isAPIErrorCode(err, int(jetstream.JSErrCodeMaximumConsumersLimit))) {
			// Another client used up the stream's consumers: a read that
			// ends can still be done by direct gets, one message each, so
			// a component's handler does not fail for it.
			b.log.Warn("no consumer to be had (limit reached); reading by direct gets", "filter", filters[0])
			seq := max(opts.FromSeq, 1)
			for {
				next, done := b.readDirect(ctx, filters[0], seq, yield)
				if done {
					return
				}
				seq = next
			}
		}
		if err != nil {
			yield(Record{}, fmt.Errorf("read %s: %w", StreamName, err))
			return
		}
		if !opts.Follow {
			var info *jetstream.ConsumerInfo
			err := b.retryAPI(ctx, "read "+StreamName+": consumer info", func(actx context.Context) error {
				var err error
				info, err = cons.Info(actx)
				return err
			})
			if err != nil {
				yield(Record{}, fmt.Errorf("read %s: %w", StreamName, err))
				return
			}
			if info.NumPending == 0 {
				return
			}
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(1000))
		if err != nil {
			yield(Record{}, fmt.Errorf("read %s: %w", StreamName, err))
			return
		}
		defer it.Stop()
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		for {
			m, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) && ctx.Err() != nil {
					if !opts.Follow {
						yield(Record{}, fmt.Errorf("read %s: %w", StreamName, ctx.Err()))
					}
					return
				}
				yield(Record{}, fmt.Errorf("read %s: %w", StreamName, err))
				return
			}
			meta, err := m.Metadata()
			if err != nil {
				yield(Record{}, fmt.Errorf("read %s: %w", StreamName, err))
				return
			}
			rec := Record{Sequence: meta.Sequence.Stream, Subject: m.Subject(), Stored: meta.Timestamp, Header: m.Headers(), Raw: m.Data()}
			rec.Event, rec.Err = ParseStoredMsg(rec.Subject, rec.Header, rec.Raw)
			if !yield(rec, nil) {
				return
			}
			if !opts.Follow && meta.NumPending == 0 {
				return
			}
		}
	}
}

// readAllDirect yields every stored message on filters from seq on by
// direct gets. Several filters are read as the run's (or the stream's)
// whole subject space, keeping the messages that match one of them.
func (b *Bus) readAllDirect(ctx context.Context, runID string, filters []string, seq uint64, yield func(Record, error) bool) {
	filter := filters[0]
	if len(filters) > 1 {
		run := runID
		if run == "" {
			run = "*"
		}
		filter = SubjectRoot + "." + run + ".>"
	}
	keep := func(Record, error) bool { return true }
	if len(filters) > 1 {
		keep = func(rec Record, err error) bool {
			if err != nil {
				return yield(rec, err)
			}
			for _, f := range filters {
				if MatchSubject(f, rec.Subject) {
					return yield(rec, nil)
				}
			}
			return true
		}
	} else {
		keep = yield
	}
	for {
		next, done := b.readDirect(ctx, filter, seq, keep)
		if done {
			return
		}
		seq = next
	}
}

// MatchSubject reports whether a NATS subject matches a filter with the
// wildcards * (one token) and > (one or more trailing tokens), without
// allocating.
func MatchSubject(filter, subject string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		if ft == ">" {
			return subject != ""
		}
		st, srest, smore := strings.Cut(subject, ".")
		if ft != "*" && ft != st {
			return false
		}
		if !fmore || !smore {
			return fmore == smore
		}
		filter, subject = frest, srest
	}
}

// directReadMax bounds the messages a catch-up read gets one by one
// before it hands over to an ordered consumer.
const directReadMax = 32

// readDirect yields the messages on filter from sequence seq on, one get
// each, until none is left (done) or directReadMax were read (then next is
// where an ordered consumer should go on). An error is yielded (done).
func (b *Bus) readDirect(ctx context.Context, filter string, seq uint64, yield func(Record, error) bool) (next uint64, done bool) {
	s, err := b.streamHandle(ctx)
	if err != nil {
		yield(Record{}, fmt.Errorf("read %s: %w", StreamName, err))
		return 0, true
	}
	for range directReadMax {
		m, err := b.getMsg(ctx, s, seq, filter)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, true
		}
		if err != nil {
			yield(Record{}, fmt.Errorf("read %s at %d: %w", StreamName, seq, err))
			return 0, true
		}
		rec := Record{Sequence: m.Sequence, Subject: m.Subject, Stored: m.Time, Header: m.Header, Raw: m.Data}
		rec.Event, rec.Err = ParseStoredMsg(rec.Subject, rec.Header, rec.Raw)
		if !yield(rec, nil) {
			return 0, true
		}
		seq = m.Sequence + 1
	}
	return seq, false
}

// msgGetAttempt bounds one message get. The stream's leader answers it;
// while a cluster elects one, or when the request or its answer is lost
// with a route that closed as a node restarted, it goes unanswered.
// Waiting for it until ctx ends would hang a read for as long as its
// caller allows (CI's cluster chaos test saw a run read time out after its
// 4 minutes); asked again, the new leader answers.
const msgGetAttempt = 3 * time.Second

// msgGetter is what getMsg needs of a stream.
type msgGetter interface {
	GetMsg(ctx context.Context, seq uint64, opts ...jetstream.GetMsgOpt) (*jetstream.RawStreamMsg, error)
}

// getMsg is the message on filter at or after seq, asked again while
// requests go unanswered, until ctx ends.
func (b *Bus) getMsg(ctx context.Context, s msgGetter, seq uint64, filter string) (*jetstream.RawStreamMsg, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, msgGetAttempt)
		m, err := s.GetMsg(actx, seq, jetstream.WithGetMsgSubject(filter))
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return m, err
		}
		b.log.Debug("message get unanswered; asking again", "stream", StreamName, "seq", seq, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(backoff(attempt)):
		}
	}
}

// streamHandle returns the handle of stream VERA, looked up once.
func (b *Bus) streamHandle(ctx context.Context) (jetstream.Stream, error) {
	b.streamMu.Lock()
	defer b.streamMu.Unlock()
	if b.stream != nil {
		return b.stream, nil
	}
	var s jetstream.Stream
	err := b.retryAPI(ctx, "look up stream "+StreamName, func(actx context.Context) error {
		var err error
		s, err = b.js.Stream(actx, StreamName)
		return err
	})
	if err != nil {
		return nil, err
	}
	b.stream = s
	return s, nil
}

// ReadRun is Read for one run from its start, collected into a slice of
// valid events (malformed messages are skipped).
func (b *Bus) ReadRun(ctx context.Context, runID string) ([]Event, error) {
	var out []Event
	for rec, err := range b.Read(ctx, ReadOptions{RunID: runID}) {
		if err != nil {
			return out, err
		}
		if rec.Err == nil {
			out = append(out, rec.Event)
		}
	}
	return out, nil
}
