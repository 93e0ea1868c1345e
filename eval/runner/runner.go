// Package runner drives an eval on the bus: every task of a task set run
// under every profile as an ordinary VERA run, with bounded concurrency,
// a per-run timeout, resumption and retries, each run scored when it ends
// (package eval) and the eval's own events published (vera.eval.started,
// vera.eval.task_scored, vera.eval.finished) on the eval's id.
//
// # Ids
//
// An eval's id is a ULID; its events are stored under vera.run.<eval_id>.
// The run of task i (0-based, in task-set order) under profile p, attempt
// a, has the id <eval_id>-t<i:04d>-p<p>-a<a>, and its vera.task.submitted
// carries the labels eval_id, eval_task, eval_profile and eval_attempt.
// Its submission's event id is derived from the run id, so that a
// resumed eval submitting it again is deduplicated by the bus, and each
// vera.eval.task_scored has an id derived from the eval and the run, so a
// task is scored once.
//
// # Resumption
//
// Run with Resume, the runner reads what the eval already stored: the
// task set's digest must equal the recorded one, the profiles are the
// recorded ones, and a task already scored is not run again. For the
// others it looks for their latest attempt on the bus: a run that ended
// is scored as it is; a run that was submitted but did not end (the eval
// process stopped while it ran) is followed again, not restarted: VERA's
// runs live on the bus, and an agent takes it up where it stopped (with
// the embedded stack, once `vera eval --resume` started it again); it gets
// a fresh timeout, past which it is cancelled and scored as failed. Only
// tasks never submitted are submitted.
//
// # Retries
//
// With RetryFailed n, a run that failed for an infrastructure reason
// (eval.TaskScored's Infra: the model was unreachable, the sandbox
// failed, the run timed out) is run again as the next attempt, up to n
// more times; the report keeps the latest attempt.
package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
)

// DefaultTimeout bounds one run unless its profile says otherwise.
const DefaultTimeout = 30 * time.Minute

// Options configure Run.
type Options struct {
	// EvalID is the eval's id; empty: a new ULID. Resume needs it.
	EvalID string
	// Name is the eval's name for people; empty: the task set's.
	Name string
	// TaskSet and TaskSetSHA256 name the task set file and its digest.
	TaskSet       string
	TaskSetSHA256 string
	Tasks         []eval.Task
	// Profiles are the run settings; with Resume, nil means the recorded
	// ones (and given ones must equal them).
	Profiles []catalog.EvalProfile
	// Concurrency is the number of runs at once; default 4.
	Concurrency int
	// Timeout bounds one run when its profile has no timeout_ms; default
	// DefaultTimeout.
	Timeout time.Duration
	// WorkRoot holds the runs' work dirs: WorkRoot/<run id>. Required.
	WorkRoot string
	// Resume goes on with the eval EvalID (see the package documentation).
	Resume bool
	// RetryFailed is how many more attempts a run that failed for an
	// infrastructure reason gets.
	RetryFailed int
	// ScorerFor returns the scorer of a task's scorer spec. Required.
	ScorerFor func(eval.ScorerSpec) (eval.Scorer, error)
	// SubmittedBy names who started the eval ("cli:alice").
	SubmittedBy string
	// Progress, when set, is told about every change (from one goroutine
	// at a time).
	Progress func(Progress)
	Logger   *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Progress is the state of an eval as it runs.
type Progress struct {
	Expected int // tasks × profiles
	Scored   int // scored, this invocation and earlier ones
	Running  int
	Correct  int // of the scored: final answer correct
	Infra    int // of the scored: failed for an infrastructure reason
	// Last is the task just scored (zero before the first).
	Last catalog.EvalTaskScored
	// Event names what happened: "started", "submitted", "resumed",
	// "scored", "retry".
	Event string
	RunID string
}

// Result is what Run did.
type Result struct {
	EvalID      string
	Report      eval.Report
	Submitted   int // runs submitted by this invocation
	Followed    int // runs of an earlier invocation followed to their end
	Rescored    int // runs of an earlier invocation that had ended, scored now
	Interrupted bool
	Duration    time.Duration
}

// RunID is the id of the run of task index task, profile index profile,
// attempt attempt (from 1) of eval evalID.
func RunID(evalID string, task, profile, attempt int) string {
	return fmt.Sprintf("%s-t%04d-p%d-a%d", evalID, task, profile, attempt)
}

type job struct {
	task    int
	profile int
	attempt int
}

// Run runs the eval on b and returns its report. Cancelling ctx stops it:
// the runs in flight are left to end on the bus (a later Resume scores
// them), vera.eval.finished says interrupted, and Run returns the report
// of what was scored with Result.Interrupted set and ctx's error.
func Run(ctx context.Context, b *bus.Bus, opts Options) (*Result, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	log := opts.Logger
	begin := opts.Now()
	res := &Result{EvalID: opts.EvalID}

	prior, err := readEval(ctx, b, opts.EvalID)
	if err != nil {
		return nil, err
	}
	if opts.Resume {
		if prior.started == nil {
			return nil, fmt.Errorf("eval %s: nothing recorded on the bus (no vera.eval.started): check the id, or start it without --resume", opts.EvalID)
		}
		if prior.started.TaskSetSHA256 != opts.TaskSetSHA256 {
			return nil, fmt.Errorf("eval %s ran task set %s (sha256 %s); %s has sha256 %s: resume it with the same task set", opts.EvalID, prior.started.TaskSet, short(prior.started.TaskSetSHA256), opts.TaskSet, short(opts.TaskSetSHA256))
		}
		if opts.Profiles == nil {
			opts.Profiles = prior.started.Profiles
		} else if !sameProfiles(opts.Profiles, prior.started.Profiles) {
			return nil, fmt.Errorf("eval %s ran profiles %s with other settings; resume it without --profiles (the recorded ones are used)", opts.EvalID, profileNames(prior.started.Profiles))
		}
		if opts.Name == "" {
			opts.Name = prior.started.Name
		}
	} else if prior.started != nil {
		return nil, fmt.Errorf("eval %s already exists on the bus: resume it with --resume, or give another id", opts.EvalID)
	}
	if len(opts.Profiles) == 0 {
		return nil, errors.New("eval: no profiles")
	}
	if opts.Name == "" {
		opts.Name = opts.TaskSet
	}
	started := catalog.EvalStarted{
		Name: opts.Name, TaskSet: opts.TaskSet, TaskSetSHA256: opts.TaskSetSHA256, Tasks: len(opts.Tasks),
		Profiles: opts.Profiles, Concurrency: opts.Concurrency, Resumed: opts.Resume, SubmittedBy: opts.SubmittedBy,
	}
	startedID := bus.DeriveID(opts.EvalID, opts.EvalID, "eval/started/"+strconv.Itoa(prior.starts))
	if err := publish(ctx, b, opts.EvalID, started, startedID); err != nil {
		return nil, fmt.Errorf("eval %s: %w", opts.EvalID, err)
	}
	startedAt := begin
	if prior.startedAt != nil {
		startedAt = *prior.startedAt
	}

	// What is already scored, by task and profile: the latest attempt.
	scored := map[[2]int]catalog.EvalTaskScored{}
	taskIdx := map[string]int{}
	for i, t := range opts.Tasks {
		taskIdx[t.ID] = i
	}
	profIdx := map[string]int{}
	for i, p := range opts.Profiles {
		profIdx[p.Name] = i
	}
	for _, s := range prior.scored {
		ti, ok1 := taskIdx[s.TaskID]
		pi, ok2 := profIdx[s.Profile]
		if !ok1 || !ok2 {
			continue
		}
		k := [2]int{ti, pi}
		if old, ok := scored[k]; !ok || s.Attempt >= old.Attempt {
			scored[k] = s
		}
	}

	// The watcher of run ends, started before anything is submitted.
	ends, err := watchEnds(ctx, b)
	if err != nil {
		return nil, err
	}
	defer ends.stop()

	var jobs []job
	for ti := range opts.Tasks {
		for pi := range opts.Profiles {
			k := [2]int{ti, pi}
			if s, ok := scored[k]; ok {
				if s.Infra && s.Attempt <= opts.RetryFailed {
					jobs = append(jobs, job{task: ti, profile: pi, attempt: s.Attempt + 1})
				}
				continue
			}
			j := job{task: ti, profile: pi, attempt: 1}
			if opts.Resume {
				// The latest attempt already on the bus, if any.
				for a := 1; ; a++ {
					exists, err := runExists(ctx, b, RunID(opts.EvalID, ti, pi, a))
					if err != nil {
						return nil, err
					}
					if !exists {
						break
					}
					j.attempt = a
				}
			}
			jobs = append(jobs, j)
		}
	}

	st := &state{opts: &opts, b: b, ends: ends, log: log, res: res,
		progress: Progress{Expected: len(opts.Tasks) * len(opts.Profiles)}}
	for _, s := range scored {
		st.count(s)
	}
	st.report(Progress{Event: "started"})

	work := make(chan job)
	var wg sync.WaitGroup
	for range opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				st.do(ctx, j)
			}
		}()
	}
feed:
	for _, j := range jobs {
		select {
		case work <- j:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	res.Interrupted = ctx.Err() != nil

	// The report, from the eval's events as stored.
	after, err := readEval(context.WithoutCancel(ctx), b, opts.EvalID)
	if err != nil {
		return nil, err
	}
	res.Report = eval.Summarize(started, opts.EvalID, startedAt, opts.Tasks, after.scored)
	res.Duration = opts.Now().Sub(begin)
	fin := catalog.EvalFinished{Scored: len(res.Report.Results), Expected: res.Report.Expected, Interrupted: res.Interrupted,
		DurationMS: res.Duration.Milliseconds(), Summary: Summary(res.Report)}
	for _, r := range res.Report.Results {
		if r.Infra {
			fin.Infra++
		}
	}
	if err := publish(context.WithoutCancel(ctx), b, opts.EvalID, fin, bus.DeriveID(opts.EvalID, startedID, "eval/finished")); err != nil {
		return res, fmt.Errorf("eval %s: %w", opts.EvalID, err)
	}
	if res.Interrupted {
		return res, ctx.Err()
	}
	if st.err != nil {
		return res, st.err
	}
	return res, nil
}

func (o *Options) defaults() error {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.EvalID == "" {
		if o.Resume {
			return errors.New("eval: resuming needs the eval's id")
		}
		o.EvalID = bus.NewULIDSource(nil).NewID(o.Now())
	}
	if err := bus.ValidateRunID(o.EvalID); err != nil {
		return fmt.Errorf("eval id: %w", err)
	}
	if len(o.Tasks) == 0 {
		return errors.New("eval: no tasks")
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 4
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.WorkRoot == "" {
		return errors.New("eval: WorkRoot is required (the runs' work dirs go there)")
	}
	if o.ScorerFor == nil {
		return errors.New("eval: ScorerFor is required")
	}
	if o.RetryFailed < 0 {
		o.RetryFailed = 0
	}
	if o.SubmittedBy == "" {
		o.SubmittedBy = "cli"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// state is shared by the workers of one Run.
type state struct {
	opts *Options
	b    *bus.Bus
	ends *endWatcher
	log  *slog.Logger
	res  *Result

	mu       sync.Mutex
	progress Progress
	err      error // the first error that is not a run's own
}

func (s *state) count(t catalog.EvalTaskScored) {
	s.progress.Scored++
	if t.Correct {
		s.progress.Correct++
	}
	if t.Infra {
		s.progress.Infra++
	}
}

// report passes the progress, updated with p's event, to Options.Progress.
func (s *state) report(p Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress.Event, s.progress.RunID, s.progress.Last = p.Event, p.RunID, p.Last
	if s.opts.Progress != nil {
		s.opts.Progress(s.progress)
	}
}

func (s *state) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	s.log.Error("eval", "err", err)
}

func (s *state) running(d int) {
	s.mu.Lock()
	s.progress.Running += d
	s.mu.Unlock()
}

// do runs one job to its score, retrying infrastructure failures.
func (s *state) do(ctx context.Context, j job) {
	for {
		sc, err := s.attempt(ctx, j)
		if err != nil {
			if ctx.Err() == nil {
				s.fail(err)
			}
			return
		}
		if !sc.Infra || j.attempt > s.opts.RetryFailed || ctx.Err() != nil {
			return
		}
		j = job{task: j.task, profile: j.profile, attempt: j.attempt + 1}
		s.report(Progress{Event: "retry", RunID: RunID(s.opts.EvalID, j.task, j.profile, j.attempt)})
	}
}

// attempt submits (or resumes) one run, waits for its end and scores it.
func (s *state) attempt(ctx context.Context, j job) (catalog.EvalTaskScored, error) {
	o := s.opts
	t, p := o.Tasks[j.task], o.Profiles[j.profile]
	runID := RunID(o.EvalID, j.task, j.profile, j.attempt)
	s.running(1)
	defer s.running(-1)

	evs, err := s.b.ReadRun(ctx, runID)
	if err != nil {
		return catalog.EvalTaskScored{}, fmt.Errorf("read run %s: %w", runID, err)
	}
	switch {
	case ended(evs):
		s.add(&s.res.Rescored)
	case len(evs) > 0:
		s.add(&s.res.Followed)
		s.report(Progress{Event: "resumed", RunID: runID})
	default:
		if err := s.submit(ctx, j, t, p, runID); err != nil {
			return catalog.EvalTaskScored{}, err
		}
		s.add(&s.res.Submitted)
		s.report(Progress{Event: "submitted", RunID: runID})
	}
	if !ended(evs) {
		timeout := o.Timeout
		if p.TimeoutMS > 0 {
			timeout = time.Duration(p.TimeoutMS) * time.Millisecond
		}
		if err := s.wait(ctx, runID, timeout); err != nil {
			return catalog.EvalTaskScored{}, err
		}
		if evs, err = s.b.ReadRun(ctx, runID); err != nil {
			return catalog.EvalTaskScored{}, fmt.Errorf("read run %s: %w", runID, err)
		}
	}
	rec, err := eval.ReadRun(ctx, evs, func(ctx context.Context, digest string) ([]byte, error) { return s.b.GetBlob(ctx, digest) })
	if err != nil {
		return catalog.EvalTaskScored{}, fmt.Errorf("run %s: %w", runID, err)
	}
	scorer, err := o.ScorerFor(t.Scorer)
	if err != nil {
		return catalog.EvalTaskScored{}, fmt.Errorf("task %s: scorer: %w", t.ID, err)
	}
	sc, err := eval.ScoreRun(ctx, t, rec, scorer)
	if err != nil {
		return catalog.EvalTaskScored{}, fmt.Errorf("score task %s (run %s): %w", t.ID, runID, err)
	}
	sc.TaskID, sc.Profile, sc.RunID, sc.Attempt = t.ID, p.Name, runID, j.attempt
	if err := publish(ctx, s.b, o.EvalID, sc, bus.DeriveID(o.EvalID, runID, "eval/task_scored")); err != nil {
		return catalog.EvalTaskScored{}, fmt.Errorf("eval %s: %w", o.EvalID, err)
	}
	s.mu.Lock()
	s.count(sc)
	s.mu.Unlock()
	s.report(Progress{Event: "scored", RunID: runID, Last: sc})
	return sc, nil
}

// add counts one in a counter of the result (read once the workers are
// done).
func (s *state) add(n *int) {
	s.mu.Lock()
	*n++
	s.mu.Unlock()
}

// submit publishes the run's vera.task.submitted.
func (s *state) submit(ctx context.Context, j job, t eval.Task, p catalog.EvalProfile, runID string) error {
	o := s.opts
	cfg := catalog.RunConfig{
		Task: t.Task, WorkDir: workDir(o.WorkRoot, runID), InputDir: t.InputDir,
		Model: p.Model, MaxSteps: p.MaxSteps, Auditor: p.Auditor, Sandbox: p.Sandbox, VerifyFast: p.VerifyFast, Policy: p.Policy,
	}
	sub := catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: o.SubmittedBy, Labels: map[string]string{
		eval.LabelEvalID: o.EvalID, eval.LabelEvalTask: t.ID, eval.LabelEvalProfile: p.Name, eval.LabelEvalAttempt: strconv.Itoa(j.attempt),
	}}
	ev, err := s.b.Events.New(runID, sub, bus.WithID(bus.DeriveID(runID, o.EvalID, "eval/submit")))
	if err != nil {
		return fmt.Errorf("run %s: %w", runID, err)
	}
	if _, err := s.b.Publish(ctx, ev); err != nil {
		return fmt.Errorf("submit run %s: %w", runID, err)
	}
	return nil
}

// wait waits for the run's end; past timeout it cancels the run and waits
// for the agent to end it.
func (s *state) wait(ctx context.Context, runID string, timeout time.Duration) error {
	ch := s.ends.wait(runID)
	// The run may have ended before the watcher was asked.
	if evs, err := s.b.ReadRun(ctx, runID); err == nil && ended(evs) {
		return nil
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
	}
	ev, err := s.b.Events.New(runID, catalog.RunCancelled{RequestedBy: "eval", Reason: fmt.Sprintf("%s: the run did not end within the eval's timeout of %s", TimeoutReason, timeout)})
	if err != nil {
		return err
	}
	if _, err := s.b.Publish(ctx, ev); err != nil {
		return fmt.Errorf("cancel run %s: %w", runID, err)
	}
	// The cancellation ends it (ended); the agent stops deciding.
	return nil
}

// TimeoutReason starts the reason of the cancellation of a run past the
// eval's timeout.
const TimeoutReason = "eval timeout"

// ended reports whether the run ended: vera.run.finished, or
// vera.run.cancelled (after which nothing more is decided for it).
func ended(evs []bus.Event) bool {
	for _, e := range evs {
		if e.Type == catalog.TypeRunFinished || e.Type == catalog.TypeRunCancelled {
			return true
		}
	}
	return false
}

func runExists(ctx context.Context, b *bus.Bus, runID string) (bool, error) {
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: runID, Types: []string{catalog.TypeTaskSubmitted}, Direct: true}) {
		if err != nil {
			return false, fmt.Errorf("read run %s: %w", runID, err)
		}
		if rec.Err == nil {
			return true, nil
		}
	}
	return false, nil
}

func publish(ctx context.Context, b *bus.Bus, evalID string, p bus.Payload, id string) error {
	ev, err := b.Events.New(evalID, p, bus.WithID(id))
	if err != nil {
		return err
	}
	if _, err := b.Publish(ctx, ev); err != nil {
		return fmt.Errorf("publish %s: %w", p.EventType(), err)
	}
	return nil
}

// recordedEval is what an eval stored so far.
type recordedEval struct {
	started   *catalog.EvalStarted // the first
	startedAt *time.Time
	starts    int // vera.eval.started events
	scored    []catalog.EvalTaskScored
}

func readEval(ctx context.Context, b *bus.Bus, evalID string) (recordedEval, error) {
	var r recordedEval
	evs, err := b.ReadRun(ctx, evalID)
	if err != nil {
		return r, fmt.Errorf("read eval %s: %w", evalID, err)
	}
	for _, e := range evs {
		p, err := catalog.Decode(e.Type, e.Data)
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *catalog.EvalStarted:
			r.starts++
			if r.started == nil {
				r.started = d
				t := e.Time
				r.startedAt = &t
			}
		case *catalog.EvalTaskScored:
			r.scored = append(r.scored, *d)
		}
	}
	return r, nil
}

// ReadEval reads the eval evalID from b: its first vera.eval.started,
// when it started, and every vera.eval.task_scored. ok is false when the
// bus holds no such eval.
func ReadEval(ctx context.Context, b *bus.Bus, evalID string) (started catalog.EvalStarted, startedAt time.Time, scored []catalog.EvalTaskScored, ok bool, err error) {
	r, err := readEval(ctx, b, evalID)
	if err != nil || r.started == nil {
		return catalog.EvalStarted{}, time.Time{}, nil, false, err
	}
	return *r.started, *r.startedAt, r.scored, true, nil
}

func sameProfiles(a, b []catalog.EvalProfile) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func profileNames(ps []catalog.EvalProfile) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return fmt.Sprint(names)
}

func short(d string) string {
	if len(d) > 12 {
		return d[:12]
	}
	return d
}

func workDir(root, runID string) string { return filepath.Join(root, runID) }

// endWatcher follows the ends of runs (vera.run.finished and
// vera.run.cancelled) and wakes their waiters.
type endWatcher struct {
	mu      sync.Mutex
	waiters map[string][]chan struct{}
	done    map[string]bool
	cancel  context.CancelFunc
	stopped chan struct{}
}

func watchEnds(ctx context.Context, b *bus.Bus) (*endWatcher, error) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &endWatcher{waiters: map[string][]chan struct{}{}, done: map[string]bool{}, cancel: cancel, stopped: make(chan struct{})}
	go func() {
		defer close(w.stopped)
		for rec, err := range b.Read(wctx, bus.ReadOptions{Types: []string{catalog.TypeRunFinished, catalog.TypeRunCancelled}, Follow: true, OnlyNew: true}) {
			if err != nil {
				if wctx.Err() == nil {
					slog.Default().Warn("eval: watching run ends", "err", err)
				}
				return
			}
			if rec.Err != nil {
				continue
			}
			w.mu.Lock()
			w.done[rec.Event.RunID] = true
			for _, ch := range w.waiters[rec.Event.RunID] {
				close(ch)
			}
			delete(w.waiters, rec.Event.RunID)
			w.mu.Unlock()
		}
	}()
	// A run that ends before the reader is in place is not missed: a
	// waiter registers, then reads the run (state.wait).
	return w, nil
}

func (w *endWatcher) wait(runID string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if w.done[runID] {
		close(ch)
		return ch
	}
	w.waiters[runID] = append(w.waiters[runID], ch)
	return ch
}

func (w *endWatcher) stop() {
	w.cancel()
	<-w.stopped
}

// Summary is the report's accuracy table as plain text (the summary of
// vera.eval.finished).
func Summary(r eval.Report) string {
	out := "profile  scored  first  "
	rounds := 0
	for _, p := range r.Profiles {
		rounds = max(rounds, len(p.ByRound))
	}
	for i := 1; i <= rounds; i++ {
		out += "r" + strconv.Itoa(i) + "  "
	}
	out += "final\n"
	for _, p := range r.Profiles {
		out += fmt.Sprintf("%s  %d  %.3f  ", p.Name, p.Scored, p.FirstAccuracy)
		for i := range rounds {
			if i < len(p.ByRound) {
				out += fmt.Sprintf("%.3f  ", p.ByRound[i])
			} else {
				out += "-  "
			}
		}
		out += fmt.Sprintf("%.3f\n", p.FinalAccuracy)
	}
	return out
}
