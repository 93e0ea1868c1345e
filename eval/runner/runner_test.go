package runner_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/eval"
	"github.com/vera-run/vera/eval/evaltest"
	"github.com/vera-run/vera/eval/runner"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/verifierd/deepverify"
)

type stackT struct {
	url    string
	store  auth.Store
	cli    *bus.Bus
	model  *scriptedmodel.Server
	calls  *evaltest.Calls
	cancel context.CancelFunc
	sup    *component.Supervisor
	// sandbox, when set, adds sandboxd to the components.
	sandbox *wiring.Sandbox
}

func startStack(t *testing.T) *stackT {
	t.Helper()
	srv, store := bustest.StartSecureServer(t)
	bustest.ConnectAs(t, srv.ClientURL(), store, auth.Admin, bus.Options{})
	calls := &evaltest.Calls{}
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(evaltest.Script(calls)))
	s := &stackT{url: srv.ClientURL(), store: store, model: model, calls: calls,
		cli: bustest.ConnectAs(t, srv.ClientURL(), store, catalog.ComponentCLI, bus.Options{})}
	s.startComponents(t)
	return s
}

func (s *stackT) startComponents(t testing.TB) {
	set := wiring.Set{
		Logger: bustest.Logger(t),
		Connect: func(ctx context.Context, identity string) (*bus.Bus, error) {
			return bus.Connect(ctx, bus.Options{URL: s.url, CredsFile: s.store.Path(identity), Source: identity})
		},
		Agent:      &agents.Config{Concurrency: 8},
		DeepVerify: &deepverify.Config{Concurrency: 8},
		Sandbox:    s.sandbox,
	}
	ctx, cancel := context.WithCancel(context.Background())
	var sup component.Supervisor
	sup.Start(ctx)
	set.Start(ctx, &sup)
	s.cancel, s.sup = cancel, &sup
	t.Cleanup(s.stopComponents)
}

func (s *stackT) stopComponents() {
	if s.cancel != nil {
		s.cancel()
		_ = s.sup.Stop()
		s.cancel = nil
	}
}

func profiles(t *testing.T, modelURL string) []catalog.EvalProfile {
	t.Helper()
	base := catalog.EvalProfile{Model: catalog.ModelConfig{BaseURL: modelURL, Name: "scripted", ToolProtocol: catalog.ToolProtocolText}, MaxSteps: 6}
	ps, err := eval.ResolveProfiles([]string{"no-audit", "audit3"}, nil, base)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func options(t *testing.T, s *stackT, path string) runner.Options {
	tasks, digest, err := eval.ParseTaskFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return runner.Options{
		TaskSet: path, TaskSetSHA256: digest, Tasks: tasks, Profiles: profiles(t, s.model.URL()),
		Concurrency: 8, Timeout: 2 * time.Minute, WorkRoot: t.TempDir(),
		ScorerFor: func(spec eval.ScorerSpec) (eval.Scorer, error) { return eval.NewScorer(spec, nil, "") },
		Logger:    bustest.Logger(t),
	}
}

// TestEvalRoundByRound: 20 tasks × {no-audit, audit3}; every figure of
// the report equals the one computed by hand from the script.
func TestEvalRoundByRound(t *testing.T) {
	s := startStack(t)
	path := evaltest.WriteTaskSet(t)
	opts := options(t, s, path)
	var mu sync.Mutex
	var last runner.Progress
	opts.Progress = func(p runner.Progress) { mu.Lock(); last = p; mu.Unlock() }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, s.cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Submitted != 40 || last.Scored != 40 || last.Expected != 40 {
		t.Fatalf("submitted %d, progress %+v", res.Submitted, last)
	}
	evaltest.CheckReport(t, res.Report)

	// The eval's events are on the bus, and say the same.
	started, _, scored, ok, err := runner.ReadEval(ctx, s.cli, res.EvalID)
	if err != nil || !ok || started.Tasks != evaltest.NTasks || len(scored) != 40 {
		t.Fatalf("eval events: ok %v, %d tasks, %d scored, err %v", ok, started.Tasks, len(scored), err)
	}
	evs, err := s.cli.ReadRun(ctx, res.EvalID)
	if err != nil {
		t.Fatal(err)
	}
	if evs[len(evs)-1].Type != catalog.TypeEvalFinished {
		t.Fatalf("last eval event %s", evs[len(evs)-1].Type)
	}
	// Each run carries the eval's labels.
	run, err := s.cli.ReadRun(ctx, runner.RunID(res.EvalID, 5, 1, 1))
	if err != nil || len(run) == 0 {
		t.Fatal(err)
	}
	p, _ := catalog.Decode(run[0].Type, run[0].Data)
	sub := p.(*catalog.TaskSubmitted)
	if sub.Labels[eval.LabelEvalID] != res.EvalID || sub.Labels[eval.LabelEvalTask] != "item-06" || sub.Labels[eval.LabelEvalProfile] != "audit3" {
		t.Fatalf("labels %v", sub.Labels)
	}
	for k, n := range s.calls.Counts() {
		if want := evaltest.Asked(k[1]); n != want {
			t.Errorf("task %d step %d asked %d times, want %d", k[0], k[1], n, want)
		}
	}
}

// TestEvalResume: the eval stops after some tasks were scored, with runs
// in flight (its context ends, as when its process is stopped; the
// components go on, as under vera up), then --resume goes on: every task
// × profile is scored exactly once, no run is submitted twice, no model
// call is made twice, and the report is the full one.
func TestEvalResume(t *testing.T) {
	s := startStack(t)
	path := evaltest.WriteTaskSet(t)
	opts := options(t, s, path)
	opts.Concurrency = 4
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts.Progress = func(p runner.Progress) {
		if p.Event == "scored" && p.Scored >= 12 {
			cancel()
		}
	}
	res, err := runner.Run(ctx, s.cli, opts)
	if err == nil || res == nil || !res.Interrupted {
		t.Fatalf("first invocation: err %v, result %+v", err, res)
	}
	first := len(res.Report.Results)
	if first < 12 || first >= 40 {
		t.Fatalf("%d scored before the stop", first)
	}
	evalID := res.EvalID

	// A second invocation without --resume is refused: the eval exists.
	again := opts
	again.EvalID, again.Progress = evalID, nil
	if _, err := runner.Run(context.Background(), s.cli, again); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("a second eval with the same id: %v", err)
	}
	// The task set must be the same.
	other := opts
	other.EvalID, other.Resume, other.Progress, other.TaskSetSHA256 = evalID, true, nil, strings.Repeat("0", 64)
	if _, err := runner.Run(context.Background(), s.cli, other); err == nil || !strings.Contains(err.Error(), "same task set") {
		t.Fatalf("a resume with another task set: %v", err)
	}

	resume := opts
	resume.EvalID, resume.Resume, resume.Progress, resume.Profiles = evalID, true, nil, nil
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel2()
	res2, err := runner.Run(ctx2, s.cli, resume)
	if err != nil {
		t.Fatal(err)
	}
	if res2.Submitted+res2.Followed+res2.Rescored != 40-first {
		t.Errorf("resume: %d submitted + %d followed + %d scored from earlier runs, want %d in all", res2.Submitted, res2.Followed, res2.Rescored, 40-first)
	}
	evaltest.CheckReport(t, res2.Report)

	// Exactly one score per task and profile, one submission per run, no
	// second attempt, each model call once per profile.
	_, _, scored, _, err := runner.ReadEval(ctx2, s.cli, evalID)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sc := range scored {
		k := sc.TaskID + "/" + sc.Profile
		if seen[k] || sc.Attempt != 1 {
			t.Errorf("%s scored twice or attempt %d", k, sc.Attempt)
		}
		seen[k] = true
	}
	if len(seen) != 40 {
		t.Errorf("%d tasks × profiles scored, want 40", len(seen))
	}
	for ti := range evaltest.NTasks {
		for pi := range 2 {
			evs, err := s.cli.ReadRun(ctx2, runner.RunID(evalID, ti, pi, 1))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range evs {
				if e.Type == catalog.TypeTaskSubmitted {
					n++
				}
			}
			if n != 1 {
				t.Errorf("run t%d p%d: %d submissions", ti, pi, n)
			}
			if evs2, _ := s.cli.ReadRun(ctx2, runner.RunID(evalID, ti, pi, 2)); len(evs2) != 0 {
				t.Errorf("run t%d p%d has a second attempt", ti, pi)
			}
		}
	}
	for k, n := range s.calls.Counts() {
		if want := evaltest.Asked(k[1]); n != want {
			t.Errorf("task %d step %d asked %d times, want %d", k[0], k[1], n, want)
		}
	}
}

// TestEvalRetryFailed: a run whose model is unreachable fails for an
// infrastructure reason; --retry-failed runs it again as attempt 2, and
// the report keeps the latest attempt.
func TestEvalRetryFailed(t *testing.T) {
	s := startStack(t)
	path := evaltest.WriteTaskSet(t)
	opts := options(t, s, path)
	opts.Tasks = opts.Tasks[:2]
	// A profile whose model server does not answer, and one that works.
	dead := opts.Profiles[0]
	dead.Name = "dead"
	dead.Model.BaseURL = "http://127.0.0.1:1" // nothing listens on port 1
	dead.Model.TimeoutMS = 2000
	opts.Profiles = []catalog.EvalProfile{dead, opts.Profiles[0]}
	opts.RetryFailed = 1
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := runner.Run(ctx, s.cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Report.Results {
		switch r.Profile {
		case "dead":
			if !r.Infra || r.Attempt != 2 || r.Correct || r.Outcome != catalog.OutcomeFailed {
				t.Errorf("dead profile: %+v", r)
			}
		default:
			if r.Infra || r.Attempt != 1 || !r.Correct {
				t.Errorf("working profile: %+v", r)
			}
		}
	}
	if p := res.Report.Profiles[0]; p.Infra != 2 || p.FinalAccuracy != 0 {
		t.Errorf("dead profile report: %+v", p)
	}
}
