package agents

import (
	"context"
)

// maxCachedRuns bounds the views kept between deliveries; beyond it, idle
// entries are dropped (their runs are re-read whole when they come back).
const maxCachedRuns = 256

// runEntry is an Agent's cached view of one run and the lock that gives
// the run to one of its goroutines at a time.
//
// The view is a cache of the stream, never a memory of its own: it holds
// the fold of the run's events up to a stream sequence, and every use
// first applies what was stored since (refresh reads the run from that
// sequence on). The read starts at the cached last event itself and checks
// that the stream still holds it (sequence, subject, id); if not (the
// stream was purged or recreated), and after any error or lost fence, the
// run is re-read whole. So a decision is taken from exactly what a full
// re-read would give, at the cost of reading only the new events; a
// restarted agent starts with an empty cache.
type runEntry struct {
	lock   chan struct{}           // one slot: the goroutine advancing the run
	view   *runView                // nil: read the run whole
	stale  bool                    // read what was stored since before the next decision
	refs   int                     // goroutines holding or waiting for the entry; guarded by Agent.mu
	cancel context.CancelCauseFunc // interrupts the Advance holding the entry; guarded by Agent.mu
	origin *forkOrigin             // the run a fork reproduces, read once
}

// acquire returns run runID's entry, locked for the caller.
func (a *Agent) acquire(ctx context.Context, runID string) (*runEntry, error) {
	a.mu.Lock()
	if a.runs == nil {
		a.runs = map[string]*runEntry{}
	}
	e := a.runs[runID]
	if e == nil {
		if len(a.runs) >= maxCachedRuns {
			for id, old := range a.runs {
				if old.refs == 0 {
					delete(a.runs, id)
				}
			}
		}
		e = &runEntry{lock: make(chan struct{}, 1)}
		a.runs[runID] = e
	}
	e.refs++
	a.mu.Unlock()
	select {
	case e.lock <- struct{}{}:
		return e, nil
	case <-ctx.Done():
		a.mu.Lock()
		a.unref(runID, e, false)
		a.mu.Unlock()
		return nil, ctx.Err()
	}
}

// release unlocks the entry; an ended run's view is dropped once no
// goroutine holds the entry.
func (a *Agent) release(runID string, e *runEntry) {
	ended := e.view == nil || e.view.finished != nil || e.view.cancelled
	<-e.lock
	a.mu.Lock()
	a.unref(runID, e, ended)
	a.mu.Unlock()
}

// unref drops a reference; a.mu must be held.
func (a *Agent) unref(runID string, e *runEntry, drop bool) {
	e.refs--
	if e.refs == 0 && drop && a.runs[runID] == e {
		delete(a.runs, runID)
	}
}

// refresh returns the run's view: up to date with the stream when it was
// just read or only extended by the agent's own fenced publishes (see
// Agent.publish); otherwise, or when e.stale is set, brought up to date by
// reading what was stored since (see runEntry).
func (a *Agent) refresh(ctx context.Context, e *runEntry, runID string) (*runView, error) {
	if v := e.view; v != nil && !e.stale && !v.dirty {
		return v, nil
	}
	return a.reread(ctx, e, runID)
}

// reread brings the run's view up to date with the stream.
func (a *Agent) reread(ctx context.Context, e *runEntry, runID string) (*runView, error) {
	e.stale = false
	if v := e.view; v != nil {
		ok, err := a.readInto(ctx, v, v.lastSeq)
		if err != nil {
			e.view = nil
			return nil, err
		}
		if ok {
			v.sent, v.dirty = nil, false
			return v, nil
		}
		a.log().Info("cached run no longer matches the stream; re-reading it", "run", runID, "seq", v.lastSeq)
	}
	v, err := a.load(ctx, runID)
	if err != nil {
		e.view = nil
		return nil, err
	}
	v.origin = e.origin // a fork's original, when read already
	if v.lastSeq > 0 {
		e.view = v
	}
	return v, nil
}
