package runner

import (
	"context"
	"fmt"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
)

// RescoreOptions configure Rescore.
type RescoreOptions struct {
	// From is the eval rescored; Started and Scored are what it stored
	// (ReadEval).
	From    string
	Started catalog.EvalStarted
	Scored  []catalog.EvalTaskScored
	// EvalID is the new eval's id.
	EvalID        string
	TaskSet       string
	TaskSetSHA256 string
	// Tasks are the task set with the scorers to apply, matched to the
	// scored runs by task id.
	Tasks     []eval.Task
	ScorerFor func(eval.ScorerSpec) (eval.Scorer, error)
	// Reverify, when set, re-verifies each run first (vera replay
	// --reverify: a copy of the run whose answers today's auditor judges
	// again) and returns the copy's id, which is then scored instead.
	Reverify func(ctx context.Context, runID string) (string, error)
	// Progress, when set, is told about each run scored.
	Progress func(done, total int, s catalog.EvalTaskScored)
	Now      func() time.Time
}

// Rescore scores the runs of a finished eval again with other scorers
// (or references), and stores the result as a new eval whose
// vera.eval.task_scored events name the original runs: no agent runs.
// With Reverify, each run's answers are first judged again by today's
// auditor (a re-verified copy of the run, which is what is scored: the
// answers are the recorded ones, the auditor's verdicts are new, so the
// accuracy by round and the auditor's precision and recall change, the
// first and final answers do not).
// It is idempotent: the new eval's event ids derive from its id and the
// runs.
func Rescore(ctx context.Context, b *bus.Bus, opts RescoreOptions) (eval.Report, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	begin := opts.Now()
	byID := map[string]eval.Task{}
	for _, t := range opts.Tasks {
		byID[t.ID] = t
	}
	latest := map[[2]string]catalog.EvalTaskScored{}
	for _, s := range opts.Scored {
		k := [2]string{s.TaskID, s.Profile}
		if old, ok := latest[k]; !ok || s.Attempt >= old.Attempt {
			latest[k] = s
		}
	}
	for k := range latest {
		if _, ok := byID[k[0]]; !ok {
			return eval.Report{}, fmt.Errorf("eval %s scored task %q, which %s lacks: rescore with the same task ids", opts.From, k[0], opts.TaskSet)
		}
	}
	started := opts.Started
	started.Name = "rescore of " + opts.From + " (" + opts.Started.Name + ")"
	started.TaskSet, started.TaskSetSHA256, started.Resumed = opts.TaskSet, opts.TaskSetSHA256, false
	startedID := bus.DeriveID(opts.EvalID, opts.EvalID, "eval/started/0")
	if err := publish(ctx, b, opts.EvalID, started, startedID); err != nil {
		return eval.Report{}, err
	}
	var out []catalog.EvalTaskScored
	total := len(latest)
	for _, t := range opts.Tasks {
		for _, p := range opts.Started.Profiles {
			old, ok := latest[[2]string{t.ID, p.Name}]
			if !ok {
				continue
			}
			runID := old.RunID
			if opts.Reverify != nil {
				var err error
				if runID, err = opts.Reverify(ctx, old.RunID); err != nil {
					return eval.Report{}, fmt.Errorf("re-verify run %s (task %s, profile %s): %w", old.RunID, t.ID, p.Name, err)
				}
			}
			evs, err := b.ReadRun(ctx, runID)
			if err != nil {
				return eval.Report{}, fmt.Errorf("read run %s: %w", runID, err)
			}
			rec, err := eval.ReadRun(ctx, evs, func(ctx context.Context, d string) ([]byte, error) { return b.GetBlob(ctx, d) })
			if err != nil {
				return eval.Report{}, fmt.Errorf("run %s: %w", old.RunID, err)
			}
			sc, err := opts.ScorerFor(t.Scorer)
			if err != nil {
				return eval.Report{}, fmt.Errorf("task %s: scorer: %w", t.ID, err)
			}
			s, err := eval.ScoreRun(ctx, t, rec, sc)
			if err != nil {
				return eval.Report{}, fmt.Errorf("score task %s (run %s): %w", t.ID, old.RunID, err)
			}
			s.TaskID, s.Profile, s.RunID, s.Attempt = t.ID, p.Name, runID, old.Attempt
			if err := publish(ctx, b, opts.EvalID, s, bus.DeriveID(opts.EvalID, runID, "eval/task_scored")); err != nil {
				return eval.Report{}, err
			}
			out = append(out, s)
			if opts.Progress != nil {
				opts.Progress(len(out), total, s)
			}
		}
	}
	r := eval.Summarize(started, opts.EvalID, begin, opts.Tasks, out)
	fin := catalog.EvalFinished{Scored: len(r.Results), Expected: r.Expected, DurationMS: opts.Now().Sub(begin).Milliseconds(), Summary: Summary(r)}
	if err := publish(ctx, b, opts.EvalID, fin, bus.DeriveID(opts.EvalID, startedID, "eval/finished")); err != nil {
		return r, err
	}
	return r, nil
}
