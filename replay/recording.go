package replay

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// recording is a run's events folded into what replay compares.
type recording struct {
	config          catalog.RunConfig
	submitted       *catalog.TaskSubmitted
	steps           []catalog.AgentStep // in stream order, first event per step
	stepByN         map[int]catalog.AgentStep
	verdicts        map[int]catalog.LogicVerdict
	audits          map[int]catalog.AuditRequested
	auditOrder      []int
	judged          map[int]catalog.AuditJudged
	feedback        map[int]catalog.AuditFeedback
	hasAuditRequest bool
	calls           map[string]*modelCall
	requests        map[string]catalog.ToolRequested
	results         map[string]catalog.ToolFinished
	finished        *catalog.RunFinished
	cancelled       *catalog.RunCancelled
}

// modelCall is a recorded model call: its successful response and the
// request of that attempt.
type modelCall struct {
	CallID   string
	Request  *catalog.ModelRequested
	Response *catalog.ModelResponded
	attempts map[int]*catalog.ModelRequested
}

// index folds events (stream order).
func index(evs []bus.Event) *recording {
	r := &recording{
		stepByN: map[int]catalog.AgentStep{}, verdicts: map[int]catalog.LogicVerdict{},
		audits: map[int]catalog.AuditRequested{}, judged: map[int]catalog.AuditJudged{},
		feedback: map[int]catalog.AuditFeedback{}, calls: map[string]*modelCall{},
		requests: map[string]catalog.ToolRequested{}, results: map[string]catalog.ToolFinished{},
	}
	haveStarted := false
	call := func(id string) *modelCall {
		c := r.calls[id]
		if c == nil {
			c = &modelCall{CallID: id, attempts: map[int]*catalog.ModelRequested{}}
			r.calls[id] = c
		}
		return c
	}
	for i := range evs {
		ev := &evs[i]
		p, err := catalog.Decode(ev.Type, ev.Data)
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *catalog.TaskSubmitted:
			if r.submitted == nil {
				r.submitted = d
				if !haveStarted {
					r.config = d.RunConfig
				}
			}
		case *catalog.RunStarted:
			r.config, haveStarted = d.Config, true
		case *catalog.AgentStep:
			if _, dup := r.stepByN[d.Step]; !dup {
				r.stepByN[d.Step] = *d
				r.steps = append(r.steps, *d)
			}
		case *catalog.LogicVerdict:
			if _, dup := r.verdicts[d.Step]; !dup {
				r.verdicts[d.Step] = *d
			}
		case *catalog.AuditRequested:
			r.hasAuditRequest = true
			if _, dup := r.audits[d.Round]; !dup {
				r.audits[d.Round] = *d
				r.auditOrder = append(r.auditOrder, d.Round)
			}
		case *catalog.AuditJudged:
			r.judged[d.Round] = *d
		case *catalog.AuditFeedback:
			r.feedback[d.Round] = *d
		case *catalog.ModelRequested:
			c := call(d.CallID)
			c.attempts[d.Attempt] = d
		case *catalog.ModelResponded:
			if d.Error == "" {
				c := call(d.CallID)
				c.Response = d
				c.Request = c.attempts[d.Attempt]
			}
		case *catalog.ToolRequested:
			if _, dup := r.requests[d.RequestID]; !dup {
				r.requests[d.RequestID] = *d
			}
		case *catalog.ToolFinished:
			if _, dup := r.results[d.RequestID]; !dup {
				r.results[d.RequestID] = *d
			}
		case *catalog.RunFinished:
			if r.finished == nil {
				r.finished = d
			}
		case *catalog.RunCancelled:
			if r.cancelled == nil {
				r.cancelled = d
			}
		}
	}
	return r
}

func absDir(d string) (string, error) {
	a, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("directory %s: %w", d, err)
	}
	return a, nil
}

// readRecording reads run runID of src, which must hold it, and indexes it.
func readRecording(ctx context.Context, src *bus.Bus, runID string) (*recording, error) {
	if err := checkRun(ctx, src, runID); err != nil {
		return nil, err
	}
	evs, err := src.ReadRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	return index(evs), nil
}

// newReplayRun returns the id of a new replay run (given, else a fresh
// one) and its work dir (see workDir).
func newReplayRun(given, workDirOpt, out string) (runID, dir string, err error) {
	runID = given
	if runID == "" {
		runID = NewRunID()
	}
	if err := bus.ValidateRunID(runID); err != nil {
		return "", "", err
	}
	dir, err = workDir(workDirOpt, out, runID)
	return runID, dir, err
}

// reporting fills in a discarding logger and a silent progress function.
func reporting(log *slog.Logger, progress func(string, ...any)) (*slog.Logger, func(string, ...any)) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if progress == nil {
		progress = func(string, ...any) {}
	}
	return log, progress
}
