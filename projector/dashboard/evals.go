package dashboard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
)

// Eval states.
const (
	EvalRunning     = "running"     // vera.eval.started, no vera.eval.finished since
	EvalFinished    = "finished"    // vera.eval.finished, every task and profile run
	EvalInterrupted = "interrupted" // vera.eval.finished with interrupted: --resume goes on
)

const evalTypePrefix = "vera.eval."

// evalTypes are the events an eval publishes under its own id.
var evalTypes = []string{catalog.TypeEvalStarted, catalog.TypeEvalTaskScored, catalog.TypeEvalFinished}

// EvalSummary is one eval as the Evals list shows it.
type EvalSummary struct {
	EvalID  string `json:"eval_id"`
	Name    string `json:"name"`
	TaskSet string `json:"task_set,omitempty"`
	// StartedAt is the time of its first vera.eval.started; Resumes
	// counts the later ones (vera eval --resume).
	StartedAt time.Time `json:"started_at"`
	Resumes   int       `json:"resumes,omitempty"`
	Tasks     int       `json:"tasks"`
	Profiles  []string  `json:"profiles"`
	// Expected is tasks × profiles; Scored the tasks × profiles scored so
	// far (each once, whatever its attempts), Infra those whose latest
	// attempt failed for an infrastructure reason.
	Expected int    `json:"expected"`
	Scored   int    `json:"scored"`
	Infra    int    `json:"infra"`
	State    string `json:"state"`
	// FinishedAt is the time of the last vera.eval.finished, when the
	// eval is not running.
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// EvalList is the answer of GET /api/evals, newest first. LastSeq is the
// last stream sequence it reflects (the same as the session list's):
// follow GET /api/events?types=vera.eval.*&after=LastSeq to hear of
// changes.
type EvalList struct {
	Evals   []EvalSummary `json:"evals"`
	LastSeq uint64        `json:"last_seq"`
}

// EvalDetail is the answer of GET /api/evals/{id}: the eval's
// eval.Report (its figures, computed by eval.Summarize as vera eval
// report does) and its progress. LastSeq is the stream sequence of its
// last event read: follow GET /api/runs/{id}/events?types=vera.eval.*
// &after=LastSeq to hear of changes.
type EvalDetail struct {
	eval.Report
	State string `json:"state"`
	// Scored counts the tasks × profiles scored (Report.Results), Infra
	// those of them that failed for an infrastructure reason.
	Scored  int `json:"scored"`
	Infra   int `json:"infra"`
	Resumes int `json:"resumes,omitempty"`
	// Finished is the last vera.eval.finished, when the eval is not
	// running.
	Finished   *catalog.EvalFinished `json:"finished,omitempty"`
	FinishedAt time.Time             `json:"finished_at,omitzero"`
	LastSeq    uint64                `json:"last_seq"`
}

// evalEntry is an eval as the index folds it: its summary and, to count
// each task × profile once, the latest attempt of each.
type evalEntry struct {
	EvalSummary
	seen    bool // a vera.eval.started was read
	seq     uint64
	latest  map[evalKey]evalAttempt
	running bool
}

type evalKey struct{ task, profile string }

type evalAttempt struct {
	attempt int
	infra   bool
}

// foldEval folds one eval event into the index. The caller holds mu.
func (x *sessionIndex) foldEval(rec bus.Record) {
	ev := rec.Event
	e := x.evals[ev.RunID]
	if e == nil {
		e = &evalEntry{EvalSummary: EvalSummary{EvalID: ev.RunID}, latest: map[evalKey]evalAttempt{}}
		x.evals[ev.RunID] = e
	}
	switch ev.Type {
	case catalog.TypeEvalStarted:
		var d catalog.EvalStarted
		if err := ev.DecodeData(&d); err != nil {
			return
		}
		e.running = true
		if e.seen {
			e.Resumes++
			return
		}
		e.seen, e.seq = true, rec.Sequence
		e.Name, e.TaskSet, e.StartedAt, e.Tasks = d.Name, d.TaskSet, ev.Time, d.Tasks
		e.Profiles = make([]string, len(d.Profiles))
		for i, p := range d.Profiles {
			e.Profiles[i] = p.Name
		}
		e.Expected = d.Tasks * len(d.Profiles)
	case catalog.TypeEvalTaskScored:
		var d catalog.EvalTaskScored
		if err := ev.DecodeData(&d); err != nil {
			return
		}
		k := evalKey{d.TaskID, d.Profile}
		if cur, ok := e.latest[k]; !ok || d.Attempt >= cur.attempt {
			e.latest[k] = evalAttempt{attempt: d.Attempt, infra: d.Infra}
		}
	case catalog.TypeEvalFinished:
		var d catalog.EvalFinished
		if err := ev.DecodeData(&d); err != nil {
			return
		}
		e.running = false
		e.FinishedAt = ev.Time
		e.State = EvalFinished
		if d.Interrupted {
			e.State = EvalInterrupted
		}
	}
}

// listEvals returns the evals (those with a vera.eval.started), newest
// first.
func (x *sessionIndex) listEvals(ctx context.Context) ([]EvalSummary, uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.refresh(ctx); err != nil {
		return nil, 0, err
	}
	out := make([]EvalSummary, 0, len(x.evals))
	for _, e := range x.evals {
		if !e.seen {
			continue
		}
		s := e.EvalSummary
		s.Profiles = slices.Clone(e.Profiles)
		s.Scored, s.Infra = 0, 0
		for k, a := range e.latest {
			if slices.Contains(e.Profiles, k.profile) {
				s.Scored++
				if a.infra {
					s.Infra++
				}
			}
		}
		if e.running {
			s.State, s.FinishedAt = EvalRunning, time.Time{}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b EvalSummary) int {
		return cmp.Or(b.StartedAt.Compare(a.StartedAt), strings.Compare(b.EvalID, a.EvalID))
	})
	return out, x.last, nil
}

func (s *Server) handleEvals(w http.ResponseWriter, r *http.Request) {
	list, last, err := s.sessions.listEvals(r.Context())
	if err != nil {
		s.log.Warn("dashboard: list evals", "err", err)
		httpError(w, http.StatusBadGateway, "list evals: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, EvalList{Evals: list, LastSeq: last})
}

// maxCachedEvals bounds the evals whose events the server keeps to answer
// GET /api/evals/{id} by reading only what is new.
const maxCachedEvals = 16

// evalCache holds the events of the evals asked for lately, each read
// incrementally (by direct gets: no consumer), the least recently asked
// for dropped beyond maxCachedEvals.
type evalCache struct {
	mu    sync.Mutex
	evals map[string]*cachedEval
}

// cachedEval is what an eval stored, as vera eval report reads it: its
// first vera.eval.started and every vera.eval.task_scored, plus its last
// vera.eval.finished.
type cachedEval struct {
	mu        sync.Mutex // serialises reads of this eval
	used      time.Time  // guarded by evalCache.mu
	last      uint64
	started   *catalog.EvalStarted
	startedAt time.Time
	starts    int
	running   bool
	scored    []catalog.EvalTaskScored
	finished  *catalog.EvalFinished
	finAt     time.Time
}

var errNoEval = errors.New("no such eval")

// entry returns the cache entry of id, making room for it.
func (c *evalCache) entry(id string) *cachedEval {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.evals == nil {
		c.evals = map[string]*cachedEval{}
	}
	e := c.evals[id]
	if e == nil {
		for len(c.evals) >= maxCachedEvals {
			var oldID string
			for k, v := range c.evals {
				if oldID == "" || v.used.Before(c.evals[oldID].used) {
					oldID = k
				}
			}
			delete(c.evals, oldID)
		}
		e = &cachedEval{}
		c.evals[id] = e
	}
	e.used = time.Now()
	return e
}

func (c *evalCache) forget(id string, e *cachedEval) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.evals[id] == e {
		delete(c.evals, id)
	}
}

// evalDetail reads what eval id stored since the last time it was asked
// for and computes its report.
func (s *Server) evalDetail(ctx context.Context, id string) (EvalDetail, error) {
	e := s.evalCache.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case s.catchUps <- struct{}{}:
	case <-ctx.Done():
		return EvalDetail{}, ctx.Err()
	}
	err := e.read(ctx, s.opts.Bus, id)
	<-s.catchUps
	if err != nil {
		return EvalDetail{}, err
	}
	if e.started == nil {
		s.evalCache.forget(id, e)
		return EvalDetail{}, errNoEval
	}
	rep := eval.SummarizeRecorded(*e.started, id, e.startedAt, e.scored)
	d := EvalDetail{Report: rep, Scored: len(rep.Results), Resumes: e.starts - 1, LastSeq: e.last, State: EvalRunning}
	for _, r := range rep.Results {
		if r.Infra {
			d.Infra++
		}
	}
	if !e.running && e.finished != nil {
		f := *e.finished
		d.Finished, d.FinishedAt, d.State = &f, e.finAt, EvalFinished
		if f.Interrupted {
			d.State = EvalInterrupted
		}
	}
	return d, nil
}

// read folds the eval's events stored after e.last. The caller holds
// e.mu.
func (e *cachedEval) read(ctx context.Context, b *bus.Bus, id string) error {
	for rec, err := range directRead(ctx, b, id, evalTypes, e.last+1) {
		if err != nil {
			return fmt.Errorf("read eval %s: %w", id, err)
		}
		e.last = max(e.last, rec.Sequence)
		if rec.Err != nil {
			continue
		}
		p, err := catalog.Decode(rec.Event.Type, rec.Event.Data)
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *catalog.EvalStarted:
			e.starts++
			e.running = true
			if e.started == nil {
				e.started, e.startedAt = d, rec.Event.Time
			}
		case *catalog.EvalTaskScored:
			e.scored = append(e.scored, *d)
		case *catalog.EvalFinished:
			e.running = false
			e.finished, e.finAt = d, rec.Event.Time
		}
	}
	return nil
}

func (s *Server) handleEval(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := bus.ValidateRunID(id); err != nil {
		httpError(w, http.StatusBadRequest, "bad eval id: %v", err)
		return
	}
	d, err := s.evalDetail(r.Context(), id)
	switch {
	case errors.Is(err, errNoEval):
		httpError(w, http.StatusNotFound, "eval %s: no vera.eval.started on the bus", id)
		return
	case err != nil:
		s.log.Warn("dashboard: read eval", "eval", id, "err", err)
		httpError(w, http.StatusBadGateway, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}
