package traces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
)

// Durable is the live trace projector's durable consumer.
const Durable = "projector-otel"

// LiveConfig configures the live trace projector.
type LiveConfig struct {
	// Sink receives the spans (required).
	Sink *Sink
	// Options say what the spans hold.
	Options Options
	// Hold is how long an ended span waits for late events before it is
	// exported (see the package doc); default 2s, negative = none.
	Hold time.Duration
	// MaxRuns bounds the runs kept in memory; the least recently active
	// run beyond it is forgotten, and rebuilt from the stream should it
	// have more events. Default 10000.
	MaxRuns int
	// Durable is the consumer's name; default "projector-otel".
	Durable string
	// Concurrency is the number of events handled at once (of different
	// runs); default 16.
	Concurrency int
	// Now is the wall clock (for the hold); default time.Now.
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// SetDefaults fills in the defaults and checks the settings.
func (c *LiveConfig) SetDefaults() error {
	if c.Sink == nil {
		return errors.New("traces: the live projector needs a sink")
	}
	if c.Hold == 0 {
		c.Hold = 2 * time.Second
	}
	if c.Hold < 0 {
		c.Hold = 0
	}
	if c.MaxRuns <= 0 {
		c.MaxRuns = 10000
	}
	if c.Durable == "" {
		c.Durable = Durable
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = component.Logger(c.Logger, catalog.ComponentProjector).With("projector", "otel")
	return nil
}

// Live is the trace projector as a component: the durable consumer
// "projector-otel", exporting each run's spans as they end.
type Live struct {
	bus *bus.Bus
	cfg LiveConfig

	mu   sync.Mutex
	runs map[string]*liveRun
	tick uint64
}

type liveRun struct {
	p       *Projection
	lastSeq uint64
	touched uint64 // Live.tick of the last event, for eviction
}

// NewLive returns the live trace projector reading b.
func NewLive(b *bus.Bus, cfg LiveConfig) (*Live, error) {
	if b == nil {
		return nil, errors.New("traces: NewLive needs a bus")
	}
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	return &Live{bus: b, cfg: cfg, runs: map[string]*liveRun{}}, nil
}

// Name is the projector's catalogue name.
func (l *Live) Name() string { return catalog.ComponentProjector }

// Consumes is every type: the projector is an observer.
func (l *Live) Consumes() []string { return catalog.ConsumedBy(catalog.ComponentProjector) }

// Produces is empty: spans go to the OTLP backend, not the bus.
func (l *Live) Produces() []string { return catalog.ProducedBy(catalog.ComponentProjector) }

// Run consumes until ctx ends, then exports what is held and flushes the
// sink (it does not shut it down: the caller owns it).
func (l *Live) Run(ctx context.Context) error {
	tickCtx, stopTicks := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	if l.cfg.Hold > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(max(l.cfg.Hold/4, 20*time.Millisecond))
			defer t.Stop()
			for {
				select {
				case <-tickCtx.Done():
					return
				case <-t.C:
					l.release(tickCtx, false)
				}
			}
		}()
	}
	err := component.Consume(ctx, l.bus, bus.ConsumerConfig{Durable: l.cfg.Durable, Concurrency: l.cfg.Concurrency}, l.Handle)
	stopTicks()
	wg.Wait()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), exportTimeout)
	defer cancel()
	l.release(fctx, true)
	if ferr := l.cfg.Sink.Flush(fctx); ferr != nil {
		l.cfg.Logger.Warn("flush spans", "err", ferr)
	}
	return err
}

// Handle folds one delivered event. Events of one run come in stream order
// (bus.Consume shards by run).
func (l *Live) Handle(ctx context.Context, m *bus.Message) error {
	ev := m.Event
	l.mu.Lock()
	r := l.runs[ev.RunID]
	l.mu.Unlock()
	if r == nil {
		var err error
		if r, err = l.start(ctx, ev, m.Sequence); err != nil {
			return err
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.Sequence <= r.lastSeq {
		return nil // delivered again: already folded
	}
	r.lastSeq = m.Sequence
	l.tick++
	r.touched = l.tick
	if !r.p.Add(ev) {
		l.cfg.Logger.Debug("event after its run's trace was exported", "run", ev.RunID, "type", ev.Type, "id", ev.ID)
		return nil
	}
	if l.cfg.Hold == 0 {
		l.emit(ctx, r.p, r.p.Take(nil))
	}
	return nil
}

// start returns the state of a run first seen at ev (sequence seq): new
// when ev opens the run, else rebuilt from the run's earlier events (a
// restart, an eviction): what ended before seq counts as exported.
func (l *Live) start(ctx context.Context, ev bus.Event, seq uint64) (*liveRun, error) {
	r := &liveRun{p: NewProjection(ev.RunID, l.cfg.Options, l.cfg.Now)}
	if ev.Type != catalog.TypeTaskSubmitted {
		for rec, err := range l.bus.Read(ctx, bus.ReadOptions{RunID: ev.RunID}) {
			if err != nil {
				return nil, fmt.Errorf("rebuild the trace of run %s: %w", ev.RunID, err)
			}
			if rec.Sequence >= seq {
				break
			}
			if rec.Err == nil {
				r.p.Add(rec.Event)
			}
			r.lastSeq = rec.Sequence
		}
		r.p.Take(nil) // ended before the restart: exported then
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur := l.runs[ev.RunID]; cur != nil {
		return cur, nil
	}
	l.runs[ev.RunID] = r
	l.evict()
	return r, nil
}

// evict forgets the least recently active runs beyond MaxRuns. Caller
// holds l.mu.
func (l *Live) evict() {
	for len(l.runs) > l.cfg.MaxRuns {
		var oldest string
		var at uint64
		for id, r := range l.runs {
			if oldest == "" || r.touched < at {
				oldest, at = id, r.touched
			}
		}
		delete(l.runs, oldest)
	}
}

// release exports the spans whose hold is over (all held ones when all).
func (l *Live) release(ctx context.Context, all bool) {
	now := l.cfg.Now()
	ready := func(s *Span) bool { return all || now.Sub(s.heldSince) >= l.cfg.Hold }
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.runs {
		if spans := r.p.Take(ready); len(spans) > 0 {
			l.emit(ctx, r.p, spans)
		}
	}
}

// emit hands spans to the sink. Caller holds l.mu.
func (l *Live) emit(ctx context.Context, p *Projection, spans []*Span) {
	if len(spans) == 0 {
		return
	}
	l.cfg.Sink.Emit(ctx, p.TraceID(), spans)
}
