package dashboard

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vera-run/vera/bus"
)

// Bounds of one live subscriber's queue: a stream more than hubBuffer
// records or subscriberBytes bytes behind is dropped from the hub (it then
// catches up from the bus by direct gets and subscribes again, so a slow
// client loses nothing, holds no consumer and cannot make the others wait).
// Variables so that tests can make lagging easy.
var (
	hubBuffer             = 1024
	subscriberBytes int64 = 1 << 20
)

// hubIdle is how long a hub started for the handler alone (without Serve)
// runs without subscribers before it stops.
var hubIdle = 10 * time.Second

// recordOverhead is what a queued record costs besides its bytes.
const recordOverhead = 256

// hub is the one stream reader behind every live SSE stream of a server:
// it follows the whole stream from the point it started (one ordered
// consumer) and hands each record to the subscribers whose filters match.
// However many streams are open, and whatever their filters, the dashboard
// holds this one consumer on the stream.
//
// A subscriber never misses a record: the hub's start sequence is fixed
// before any subscriber can join, so for a subscriber that joins when the
// hub has handed out everything up to H, the records after H reach its
// channel, and the records up to H were stored before it joined and are
// in its own catch-up read (see Server.stream).
type hub struct {
	bus  *bus.Bus
	log  *slog.Logger
	idle time.Duration // > 0: stop after this long without a subscriber

	mu         sync.Mutex
	subs       map[*subscription]struct{}
	last       uint64 // last sequence handed out (or the start point)
	closed     bool
	emptySince time.Time

	dropped atomic.Int64 // subscribers dropped for lagging

	cancel context.CancelFunc
	done   chan struct{} // closed when the hub's goroutines have ended
}

type subscription struct {
	C       chan *bus.Record // closed when dropped (lagging) or the hub stops; the records are shared, read-only
	filters []string
	h       *hub
	queued  atomic.Int64 // bytes of the records in C (see received)
}

// startHub fixes the hub's start point (the stream's last sequence now)
// and starts following the stream until parent ends, stop is called, or,
// with idle > 0, it has had no subscriber for that long.
func startHub(parent context.Context, b *bus.Bus, log *slog.Logger, idle time.Duration) (*hub, error) {
	ictx, icancel := context.WithTimeout(parent, 10*time.Second)
	defer icancel()
	st, err := b.JetStream().Stream(ictx, bus.StreamName)
	if err != nil {
		return nil, fmt.Errorf("dashboard: open stream %s: %w", bus.StreamName, err)
	}
	info, err := st.Info(ictx)
	if err != nil {
		return nil, fmt.Errorf("dashboard: stream %s info: %w", bus.StreamName, err)
	}
	ctx, cancel := context.WithCancel(parent)
	h := &hub{bus: b, log: log, idle: idle, subs: map[*subscription]struct{}{}, last: info.State.LastSeq,
		emptySince: time.Now(), cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() { h.run(ctx) })
	if idle > 0 {
		wg.Go(func() { h.watchIdle(ctx) })
	}
	go func() { wg.Wait(); close(h.done) }()
	return h, nil
}

// stop ends the hub and waits for its goroutines.
func (h *hub) stop() {
	h.cancel()
	<-h.done
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

// watchIdle stops the hub once it has had no subscriber for h.idle.
func (h *hub) watchIdle(ctx context.Context) {
	t := time.NewTicker(max(h.idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		idle := len(h.subs) == 0 && time.Since(h.emptySince) >= h.idle
		if idle {
			h.closed = true // no one subscribes from now on
		}
		h.mu.Unlock()
		if idle {
			h.cancel()
			return
		}
	}
}

// broadcast hands rec to every matching subscriber: one record shared by
// all (a subscriber's buffer holds pointers, not copies). A subscriber
// whose queue is full, in records or bytes, is dropped.
func (h *hub) broadcast(rec *bus.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rec.Sequence <= h.last {
		return
	}
	h.last = rec.Sequence
	size := recordSize(rec)
	for sub := range h.subs {
		if !matchAny(sub.filters, rec.Subject) {
			continue
		}
		q := sub.queued.Load()
		if len(sub.C) == cap(sub.C) || (q > 0 && q+size > subscriberBytes) {
			h.dropped.Add(1)
			h.drop(sub)
			continue
		}
		sub.queued.Add(size)
		sub.C <- rec // room checked above; only broadcast sends, under mu
	}
}

func recordSize(rec *bus.Record) int64 { return int64(len(rec.Raw)) + recordOverhead }

// drop removes sub and closes its channel. The caller holds mu.
func (h *hub) drop(sub *subscription) {
	delete(h.subs, sub)
	close(sub.C)
	if len(h.subs) == 0 {
		h.emptySince = time.Now()
	}
}

func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sub := range h.subs {
		h.drop(sub)
	}
}

// subscribe registers a subscriber for subjects matching any of filters,
// or returns nil when the hub has stopped.
func (h *hub) subscribe(filters []string) *subscription {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	sub := &subscription{C: make(chan *bus.Record, hubBuffer), filters: filters, h: h}
	h.subs[sub] = struct{}{}
	return sub
}

// received accounts for a record taken from C.
func (s *subscription) received(rec *bus.Record) { s.queued.Add(-recordSize(rec)) }

// cancel removes the subscription (a no-op when it was dropped).
func (s *subscription) cancel() {
	s.h.mu.Lock()
	defer s.h.mu.Unlock()
	if _, ok := s.h.subs[s]; ok {
		s.h.drop(s)
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

// subscribe subscribes to the server's hub: Serve's, or, when the handler
// is used without Serve, one started here that stops once it has been
// idle for hubIdle (or at Close). It fails only when no hub can be had
// (the bus is down, or the server is closed).
func (s *Server) subscribe(ctx context.Context, filters []string) (*subscription, error) {
	for ctx.Err() == nil {
		h := s.hub.Load()
		if h == nil {
			var err error
			if h, err = s.handlerHub(); err != nil {
				return nil, err
			}
		}
		if sub := h.subscribe(filters); sub != nil {
			return sub, nil
		}
		s.hub.CompareAndSwap(h, nil) // it stopped: start another
	}
	return nil, ctx.Err()
}

// handlerHub returns the current hub or starts one for the handler used
// without Serve.
func (s *Server) handlerHub() (*hub, error) {
	s.hubMu.Lock()
	defer s.hubMu.Unlock()
	if h := s.hub.Load(); h != nil {
		return h, nil
	}
	if s.closed {
		return nil, errClosed
	}
	h, err := startHub(context.Background(), s.opts.Bus, s.log, hubIdle)
	if err != nil {
		return nil, err
	}
	s.hub.Store(h)
	running := s.handlerHubs[:0]
	for _, old := range s.handlerHubs { // forget the ones that stopped idle
		select {
		case <-old.done:
		default:
			running = append(running, old)
		}
	}
	s.handlerHubs = append(running, h)
	return h, nil
}

// Close stops what the handler started when used without Serve (the
// shared stream reader) and waits for it; open streams end. Serve stops
// its own. After Close, the handler serves no live stream.
func (s *Server) Close() error {
	s.hubMu.Lock()
	s.closed = true
	hubs := s.handlerHubs
	s.handlerHubs = nil
	s.hubMu.Unlock()
	for _, h := range hubs {
		s.hub.CompareAndSwap(h, nil)
		h.stop()
	}
	return nil
}
