package bus

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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
}

// Record is one stored message as Read returns it. Err is set (and Event is
// partial) when the message is not a valid envelope; Raw always holds the
// bytes as stored.
type Record struct {
	Sequence uint64
	Subject  string
	Stored   time.Time
	Raw      []byte
	Event    Event
	Err      error
}

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
		oc := jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: jetstream.DeliverAllPolicy}
		switch {
		case opts.OnlyNew && opts.Follow:
			oc.DeliverPolicy = jetstream.DeliverNewPolicy
		case opts.FromSeq > 0:
			oc.DeliverPolicy, oc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, opts.FromSeq
		case !opts.FromTime.IsZero():
			t := opts.FromTime
			oc.DeliverPolicy, oc.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
		}
		cons, err := b.js.OrderedConsumer(ctx, StreamName, oc)
		if err != nil {
			yield(Record{}, fmt.Errorf("read %s: %w", StreamName, err))
			return
		}
		if !opts.Follow {
			info, err := cons.Info(ctx)
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
			rec := Record{Sequence: meta.Sequence.Stream, Subject: m.Subject(), Stored: meta.Timestamp, Raw: m.Data()}
			rec.Event, rec.Err = ParseEvent(rec.Raw)
			if !yield(rec, nil) {
				return
			}
			if !opts.Follow && meta.NumPending == 0 {
				return
			}
		}
	}
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
