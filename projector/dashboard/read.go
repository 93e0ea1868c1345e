package dashboard

import (
	"context"
	"fmt"
	"iter"

	"github.com/vera-run/vera/bus"
)

// directRead yields the records stored from sequence from on that match
// runID and any of types (every type when empty), in stream order, by
// direct gets: it creates no JetStream consumer, however many requests
// read at once. Several types are read one subject filter each and merged
// by sequence, so that a read costs one get per matching record, not one
// per record of the run or stream.
//
// The merged read stops at the stream's last sequence as it was before
// any of its reads began: each filter's reader sees the stream at its own
// moment, so past that point one reader may already yield a record that
// another, having looked earlier, missed; merged, the later record would
// move a caller's resume point past the earlier one. Up to that sequence
// every reader sees all there is; what comes after is the live feed's.
func directRead(ctx context.Context, b *bus.Bus, runID string, types []string, from uint64) iter.Seq2[bus.Record, error] {
	if len(types) <= 1 {
		return b.Read(ctx, bus.ReadOptions{RunID: runID, Types: types, FromSeq: from, Direct: true})
	}
	return func(yield func(bus.Record, error) bool) {
		st, err := b.JetStream().Stream(ctx, bus.StreamName)
		if err != nil {
			yield(bus.Record{}, fmt.Errorf("open stream %s: %w", bus.StreamName, err))
			return
		}
		info, err := st.Info(ctx)
		if err != nil {
			yield(bus.Record{}, fmt.Errorf("stream %s info: %w", bus.StreamName, err))
			return
		}
		end := info.State.LastSeq
		type head struct {
			next func() (bus.Record, error, bool)
			rec  bus.Record
			ok   bool
		}
		heads := make([]*head, 0, len(types))
		for _, t := range types {
			next, stop := iter.Pull2(b.Read(ctx, bus.ReadOptions{RunID: runID, Types: []string{t}, FromSeq: from, Direct: true}))
			defer stop()
			heads = append(heads, &head{next: next})
		}
		advance := func(h *head) bool {
			rec, err, ok := h.next()
			if err != nil {
				yield(bus.Record{}, err)
				return false
			}
			h.rec, h.ok = rec, ok
			return true
		}
		for _, h := range heads {
			if !advance(h) {
				return
			}
		}
		for {
			var low *head
			for _, h := range heads {
				if h.ok && (low == nil || h.rec.Sequence < low.rec.Sequence) {
					low = h
				}
			}
			if low == nil || low.rec.Sequence > end {
				return
			}
			rec := low.rec
			if !yield(rec, nil) {
				return
			}
			// Overlapping patterns (vera.model.* and vera.model.requested)
			// hold the same record: it goes out once.
			for _, h := range heads {
				if h.ok && h.rec.Sequence == rec.Sequence && !advance(h) {
					return
				}
			}
		}
	}
}
