package agents

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// cached returns a copy of the agent's cached view of a run, without the
// per-read bookkeeping; nil when none is cached.
func cached(a *Agent, runID string) *runView {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.runs[runID]
	if e == nil || e.view == nil {
		return nil
	}
	c := *e.view
	c.sent, c.dirty = nil, false
	return &c
}

// TestCachedViewEqualsFullRead drives a run delivery by delivery and
// checks after each that the agent's cached view (extended by reads of the
// new events and by its own fenced publishes) is exactly the view a full
// re-read of the run builds; then that a cached view the stream no longer
// matches is dropped for a full read.
func TestCachedViewEqualsFullRead(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(fourSteps)))
	gate := make(chan struct{}, 8) // one token per tool result the test lets through
	h.tools(func(req catalog.ToolRequested) catalog.ToolFinished {
		<-gate
		return cwdTools(req)
	})
	t.Cleanup(func() { close(gate) })
	a := h.newAgent("a1")
	ctx := context.Background()
	const run = "run-cache"
	h.submit(run, catalog.RunConfig{})
	results := 0
	for round := 0; ; round++ {
		if err := a.Advance(ctx, run); err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			// A cached view whose last event is not what the stream holds
			// at its sequence: the next delivery reads the run whole.
			a.mu.Lock()
			a.runs[run].view.lastID = "01BOGUS"
			a.mu.Unlock()
		} else if c := cached(a, run); c != nil {
			full, err := a.load(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, full) {
				for name, pair := range viewFields(c, full) {
					if !reflect.DeepEqual(pair[0], pair[1]) {
						t.Errorf("round %d: %s of the cached view differs from a full read:\ncached %+v\nfull   %+v", round, name, pair[0], pair[1])
					}
				}
				t.FailNow()
			}
		}
		if len(ofType[*catalog.RunFinished](h.events(run))) > 0 {
			break
		}
		// Let the next tool result through (the agent's next delivery).
		gate <- struct{}{}
		results++
		deadline := time.Now().Add(10 * time.Second)
		for len(ofType[*catalog.ToolFinished](h.events(run))) < results {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no tool result %d", round, results)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	ds := h.events(run)
	assertOnce(t, ds)
	fin := ofType[*catalog.RunFinished](ds)[0]
	if fin.Outcome != catalog.OutcomeResolved || fin.Steps != 4 {
		t.Fatalf("finished = %+v", fin)
	}
	if c := cached(a, run); c != nil {
		t.Error("the view of a finished run is still cached")
	}
}

// viewFields pairs the fields of two views, by name.
func viewFields(a, b *runView) map[string][2]any {
	return map[string][2]any{
		"submitted": {a.submitted, b.submitted}, "submittedEv": {a.submittedEv, b.submittedEv},
		"started": {a.started, b.started}, "startedEv": {a.startedEv, b.startedEv}, "finished": {a.finished, b.finished},
		"last": {[]any{a.lastSeq, a.lastSubject, a.lastID}, []any{b.lastSeq, b.lastSubject, b.lastID}},
		"ids":  {a.ids, b.ids}, "steps": {a.steps, b.steps}, "byStep": {a.byStep, b.byStep},
		"requests": {a.requests, b.requests}, "results": {a.results, b.results}, "order": {a.order, b.order},
		"evidence": {a.evidence, b.evidence}, "evIDs": {a.evIDs, b.evIDs}, "notes": {a.notes, b.notes},
		"policy": {a.policy, b.policy}, "model": {a.model, b.model}, "usage": {a.usage, b.usage}, "state": {a.state, b.state},
		"audit": {[]any{a.audits, a.judged, a.fbByRnd}, []any{b.audits, b.judged, b.fbByRnd}},
	}
}
