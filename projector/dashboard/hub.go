package dashboard

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vera-run/vera/bus"
)

// hubBuffer is how many records a live subscriber may lag behind before it
// is dropped (its stream then catches up from the bus and subscribes
// again, so a slow client loses nothing). A variable so that tests can
// make lagging easy.
var hubBuffer = 1024

// hub is the one stream reader behind every live SSE stream of a server:
// it follows the whole stream from the point it started and hands each
// record to the subscribers whose filters match.
//
// A subscriber never misses a record: the hub's start sequence is fixed
// before any subscriber can join, so for a subscriber that joins when the
// hub has handed out everything up to H, the records after H reach its
// channel, and the records up to H were stored before it joined and are
// in its own catch-up read (see Server.stream).
type hub struct {
	bus *bus.Bus
	log *slog.Logger

	mu     sync.Mutex
	subs   map[*subscription]struct{}
	last   uint64 // last sequence handed out (or the start point)
	closed bool
}

type subscription struct {
	C       chan *bus.Record // closed when dropped (lagging) or the hub stops; the records are shared, read-only
	filters []string
	h       *hub
}

// newHub fixes the hub's start point: the stream's last sequence now.
func newHub(ctx context.Context, b *bus.Bus, log *slog.Logger) (*hub, error) {
	st, err := b.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		return nil, fmt.Errorf("dashboard: open stream %s: %w", bus.StreamName, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("dashboard: stream %s info: %w", bus.StreamName, err)
	}
	return &hub{bus: b, log: log, subs: map[*subscription]struct{}{}, last: info.State.LastSeq}, nil
}

// run follows the stream until ctx ends, resuming after its last record
// when the read fails, then closes every subscription.
func (h *hub) run(ctx context.Context) {
	defer h.close()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		h.mu.Lock()
		from := h.last + 1
		h.mu.Unlock()
		for rec, err := range h.bus.Read(ctx, bus.ReadOptions{FromSeq: from, Follow: true}) {
			if err != nil {
				if ctx.Err() == nil {
					h.log.Warn("dashboard: stream reader failed; resuming", "after", from-1, "err", err)
				}
				break
			}
			attempt = 0
			h.broadcast(&rec)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(time.Duration(attempt+1)*250*time.Millisecond, 5*time.Second)):
		}
	}
}

// broadcast hands rec to every matching subscriber: one record shared by
// all (a subscriber's buffer holds pointers, not copies).
func (h *hub) broadcast(rec *bus.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec.Sequence <= h.last {
		return
	}
	h.last = rec.Sequence
	for sub := range h.subs {
		if !matchAny(sub.filters, rec.Subject) {
			continue
		}
		select {
		case sub.C <- rec:
		default:
			delete(h.subs, sub)
			close(sub.C)
		}
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sub := range h.subs {
		delete(h.subs, sub)
		close(sub.C)
	}
}

// subscribe registers a subscriber for subjects matching any of filters,
// or returns nil when the hub has stopped.
func (h *hub) subscribe(filters []string) *subscription {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	sub := &subscription{C: make(chan *bus.Record, hubBuffer), filters: filters, h: h}
	h.subs[sub] = struct{}{}
	return sub
}

// cancel removes the subscription (a no-op when it was dropped).
func (s *subscription) cancel() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if _, ok := s.h.subs[s]; ok {
		delete(s.h.subs, s)
		close(s.C)
	}
}

func matchAny(filters []string, subject string) bool {
	for _, f := range filters {
		if bus.MatchSubject(f, subject) {
			return true
		}
	}
	return false
}
