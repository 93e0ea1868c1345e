package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/loadmodel"
)

func init() { register(newBenchCmd) }

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a VERA deployment under load",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newBenchLoadCmd(g))
	return cmd
}

// benchLoadFlags are the settings of `vera bench load`.
type benchLoadFlags struct {
	runs, concurrency, steps, baseline int
	modelLatency                       time.Duration
	modelListen                        string
	model                              catalog.ModelConfig
	jsonOut                            bool
	workDir                            string
	timeout                            time.Duration
	dataDir, natsListen                string
	noNetwork                          bool
	keys                               keyEnvFlags // --allow-api-key-env
}

func (f *benchLoadFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.runs, "runs", 20, "runs of the loaded phase (N)")
	fl.IntVar(&f.concurrency, "concurrency", 4, "runs in flight at once in the loaded phase (C)")
	fl.IntVar(&f.steps, "steps", 4, "steps of each run with the load model (S): S-1 shell commands, then the answer; at least 2")
	fl.IntVar(&f.baseline, "baseline", 3, "runs done one at a time first, to measure one run alone (0 = skip; the ratios are then absent)")
	fl.DurationVar(&f.modelLatency, "model-latency", 0, "the load model's wait before each reply, standing in for a model's thinking time")
	fl.StringVar(&f.modelListen, "model-listen", "127.0.0.1:0", "address of the load model server (the agents must reach it: with --nats-url on other hosts, an address they can reach)")
	fl.StringVar(&f.model.BaseURL, "model-base-url", "", "drive the runs with this OpenAI-compatible server instead of the built-in load model (its replies decide what the runs do)")
	fl.StringVar(&f.model.Name, "model", "", "model name at --model-base-url (default with the load model: "+loadmodel.DefaultModel+")")
	fl.StringVar(&f.model.APIKeyEnv, "api-key-env", "", "NAME of the environment variable holding --model-base-url's API key")
	fl.BoolVar(&f.jsonOut, "json", false, "print the figures as one JSON object")
	fl.BoolVar(&f.noNetwork, "no-network", false, "runs without network access (their sandbox configuration then differs from vera run's default, and so does sandboxd's warm pool for it)")
	fl.StringVar(&f.workDir, "work-dir", "", "directory under which each run gets its work dir (default DATA_DIR/runs/bench-<time>; with --nats-url sandboxd must see it at the same path)")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Minute, "give up on runs that have not ended this long after the bench began")
	fl.StringVar(&f.dataDir, "data-dir", defaultDataDir(), "the data dir: identities (creds), and without --nats-url the embedded bus's store (env VERA_DATA_DIR)")
	fl.StringVar(&f.natsListen, "nats-listen", "127.0.0.1:0", "without --nats-url: address of the embedded NATS server (port 0 = a free one)")
	f.keys.register(cmd)
}

func (f *benchLoadFlags) validate() error {
	switch {
	case f.runs < 1:
		return fmt.Errorf("--runs must be at least 1, got %d", f.runs)
	case f.concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, got %d", f.concurrency)
	case f.steps < 2:
		return fmt.Errorf("--steps must be at least 2 (one command, then the answer), got %d", f.steps)
	case f.baseline < 0:
		return fmt.Errorf("--baseline must be 0 or more, got %d", f.baseline)
	case f.modelLatency < 0:
		return fmt.Errorf("--model-latency must not be negative, got %s", f.modelLatency)
	case f.timeout <= 0:
		return fmt.Errorf("--timeout must be positive, got %s", f.timeout)
	case f.model.BaseURL == "" && (f.model.Name != "" || f.model.APIKeyEnv != ""):
		return errors.New("--model and --api-key-env need --model-base-url (without it the built-in load model is used)")
	case f.model.BaseURL != "" && f.model.Name == "":
		return errors.New("--model-base-url needs --model")
	case f.model.BaseURL != "" && f.modelLatency > 0:
		return errors.New("--model-latency applies to the built-in load model only, not to --model-base-url")
	}
	return nil
}

func newBenchLoadCmd(g *globals) *cobra.Command {
	var f benchLoadFlags
	var sf sandboxFlags
	var vf verifierFlags
	var af agentFlags
	cmd := &cobra.Command{
		Use:   "load --runs N --concurrency C [--steps 4] [--baseline 3] [--model-latency 0]",
		Short: "Push many runs through a deployment at once and measure what load costs",
		Long: `Drive N runs through VERA, C at a time, and measure what running them
together costs against one run alone.

The workload: a built-in OpenAI-compatible load model (internal/loadmodel)
plays a fixed script: steps 1 to S-1 each run one shell command in the run's
sandbox (echo "step k" | tee -a /work/load.txt), step S submits the answer
(RESOLVED). No auditor, no VerifyFast; the runs' notes interval is set to S
so that no step is spent on notes. --model-latency makes each reply wait,
as a model would. --model-base-url/--model drive the runs with a real server
instead (then its replies decide what the runs do; the same task is sent).

The deployment: with --nats-url (or NATS_URL) a running one (vera up, or
vera agent + vera sandboxd + vera verifierd ...), connected to as the cli
identity like vera run; its agents must reach the load model (--model-listen)
and its sandboxd must see --work-dir at the same path. Without --nats-url,
an embedded one in this process, as vera run starts it; its agent and
sandboxd then advance up to C runs at once (--agent-concurrency,
--sandbox-concurrency), so that they are not the limit being measured.

The phases: first --baseline runs one at a time (the "alone" figure), then
N runs with C in flight at once: a new run is submitted as soon as one ends.
Every time is taken from the bus: when the server stored the event.

The figures:
  alone median        median wall time of the baseline runs, submit → end
                      (vera.task.submitted → vera.run.finished)
  total wall          from the first submit of the loaded phase to the end
                      of its last run
  runs/s              N / total wall
  run wall p50 p99    per-run wall time (submit → end) in the loaded phase;
                      mean too
  first command       submit → the run's first vera.tool.started (sandbox
  p50 p90 p99         container up, first command started): queueing in the
                      agent, model latency of step 1, container start
  step latency        one agent step that ran a command: the step's
  p50 p99             vera.model.requested (first attempt) → that step's
                      vera.tool.finished (model reply + command); the
                      run's first such step includes the sandbox's
                      start-up, so the same is given without it ("after
                      1st command")
  outcomes            RESOLVED / UNRESOLVED / FAILED / CANCELLED counts;
                      UNFINISHED = not ended within --timeout
  commands run twice  runs where a request id had more than one
                      vera.tool.started (a command run more than once);
                      model calls requested twice: call ids with more than
                      one first attempt
  loaded / alone      mean loaded per-run wall ÷ alone median: how much
                      slower a run is when C run together (1 = no cost)
  total / ideal       total wall ÷ (ceil(N/C) × alone median), the time N
                      runs would take in waves of C at no cost (1 = ideal)

Exit status 0 when every run ended RESOLVED, 1 otherwise (the figures are
printed either way), 2 on bad flags.`,
		Example: `  vera bench load --runs 30 --concurrency 30 --steps 4 --baseline 3
  vera bench load --runs 100 --concurrency 20 --model-latency 2s --json
  vera bench load --nats-url nats://127.0.0.1:4222 --runs 50 --concurrency 10`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return usageError{err}
			}
			if err := vf.validate(); err != nil {
				return err
			}
			log, err := g.quietLogger(cmd)
			if err != nil {
				return err
			}
			// The embedded deployment advances C runs at once unless told.
			if !cmd.Flags().Changed("agent-concurrency") {
				af.concurrency = max(af.concurrency, f.concurrency)
			}
			if !cmd.Flags().Changed("sandbox-concurrency") {
				sf.concurrency = max(sf.concurrency, f.concurrency)
			}
			return benchLoad(cmd.Context(), g, cmd, f, sf, vf, af, log)
		},
	}
	f.register(cmd)
	// The embedded components' flags, as vera run has them; sandboxd's
	// --concurrency is --sandbox-concurrency here (--concurrency is C).
	tmp := &cobra.Command{}
	sf.register(tmp)
	tmp.Flags().VisitAll(func(fl *pflag.Flag) {
		if fl.Name == "concurrency" {
			cmd.Flags().Var(fl.Value, "sandbox-concurrency", "without --nats-url: commands the embedded sandboxd runs at once, across runs; unset = the larger of this default and C")
			return
		}
		fl.Hidden = fl.Name != "image" && fl.Name != "network"
		cmd.Flags().AddFlag(fl)
	})
	vf.register(cmd)
	af.register(cmd)
	for _, name := range []string{"repetition-window", "hybrid", "verifyfast-settings", "verifyfast-strategy", "agent-id"} {
		cmd.Flags().Lookup(name).Hidden = true
	}
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if strings.HasPrefix(fl.Name, "judge-") {
			fl.Hidden = true
		}
	})
	cmd.Flags().Lookup("agent-concurrency").Usage = "without --nats-url: runs the embedded agent advances at once; unset = the larger of this default and C"
	return cmd
}

// benchRun is what the bench saw of one run.
type benchRun struct {
	id string
	submitted, firstStart,
	ended time.Time // stored times on the bus
	outcome   string
	starts    map[string]int // vera.tool.started per request id
	calls     map[string]int // first attempts per model call id
	modelAt   map[int]time.Time
	stepOfReq map[string]int
	steps     map[int]time.Duration // model.requested → tool.finished per command step
	done      chan struct{}
	closed    bool
}

// benchWatch follows the bench's runs on the bus (one reader for all).
type benchWatch struct {
	mu   sync.Mutex
	runs map[string]*benchRun
}

func (w *benchWatch) add(id string) *benchRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := &benchRun{id: id, starts: map[string]int{}, calls: map[string]int{}, modelAt: map[int]time.Time{},
		stepOfReq: map[string]int{}, steps: map[int]time.Duration{}, done: make(chan struct{})}
	w.runs[id] = r
	return r
}

var benchTypes = []string{catalog.TypeTaskSubmitted, catalog.TypeModelRequested, catalog.TypeToolRequested,
	catalog.TypeToolStarted, catalog.TypeToolFinished, catalog.TypeRunFinished, catalog.TypeRunCancelled}

// follow reads the bench's events until ctx ends.
func (w *benchWatch) follow(ctx context.Context, b *bus.Bus, from time.Time) error {
	for rec, err := range b.Read(ctx, bus.ReadOptions{Types: benchTypes, FromTime: from, Follow: true}) {
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("follow the runs: %w", err)
		}
		if rec.Err != nil {
			continue
		}
		w.mu.Lock()
		r := w.runs[rec.Event.RunID]
		if r != nil {
			r.observe(rec)
		}
		w.mu.Unlock()
	}
	return nil
}

func (r *benchRun) observe(rec bus.Record) {
	at := rec.Stored
	switch rec.Event.Type {
	case catalog.TypeTaskSubmitted:
		r.submitted = at
	case catalog.TypeModelRequested:
		var m catalog.ModelRequested
		if rec.Event.DecodeData(&m) == nil && m.Attempt == 1 {
			r.calls[m.CallID]++
			if m.Scope == catalog.ScopeAgent {
				if _, ok := r.modelAt[m.Step]; !ok {
					r.modelAt[m.Step] = at
				}
			}
		}
	case catalog.TypeToolRequested:
		var m catalog.ToolRequested
		if rec.Event.DecodeData(&m) == nil && m.Requester == catalog.RequesterAgent {
			r.stepOfReq[m.RequestID] = m.Step
		}
	case catalog.TypeToolStarted:
		var m catalog.ToolStarted
		if rec.Event.DecodeData(&m) == nil {
			r.starts[m.RequestID]++
			if r.firstStart.IsZero() {
				r.firstStart = at
			}
		}
	case catalog.TypeToolFinished:
		var m catalog.ToolFinished
		if rec.Event.DecodeData(&m) == nil && m.Requester == catalog.RequesterAgent {
			if step, ok := r.stepOfReq[m.RequestID]; ok {
				if began, ok := r.modelAt[step]; ok {
					r.steps[step] = at.Sub(began)
					delete(r.stepOfReq, m.RequestID) // once per step
				}
			}
		}
	case catalog.TypeRunFinished:
		var m catalog.RunFinished
		if rec.Event.DecodeData(&m) == nil {
			r.end(at, string(m.Outcome))
		}
	case catalog.TypeRunCancelled:
		r.end(at, "CANCELLED")
	}
}

func (r *benchRun) end(at time.Time, outcome string) {
	if r.closed {
		return
	}
	r.ended, r.outcome, r.closed = at, outcome, true
	close(r.done)
}

// benchPercentiles are figures in milliseconds.
type benchPercentiles struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
}

// percentiles by nearest rank.
func percentiles(ds []time.Duration) benchPercentiles {
	if len(ds) == 0 {
		return benchPercentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return ms(s[max(0, min(i, len(s)-1))])
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return benchPercentiles{Count: len(s), Mean: ms(sum / time.Duration(len(s))), P50: at(0.50), P90: at(0.90), P99: at(0.99)}
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }

// benchReport is what vera bench load prints (--json: as is).
type benchReport struct {
	Deployment       string  `json:"deployment"` // embedded, or the NATS URL
	Model            string  `json:"model"`      // load model, or the server
	ModelLatencyMS   float64 `json:"model_latency_ms"`
	Runs             int     `json:"runs"`
	Concurrency      int     `json:"concurrency"`
	Steps            int     `json:"steps"`
	AgentConcurrency int     `json:"agent_concurrency,omitempty"`
	SandboxdConc     int     `json:"sandboxd_concurrency,omitempty"`

	BaselineRuns     int            `json:"baseline_runs"`
	AloneMedianMS    float64        `json:"alone_median_ms"`
	BaselineOutcomes map[string]int `json:"baseline_outcomes,omitempty"`

	TotalWallMS      float64          `json:"total_wall_ms"`
	RunsPerSecond    float64          `json:"runs_per_second"`
	RunWall          benchPercentiles `json:"run_wall"`
	FirstCommand     benchPercentiles `json:"submit_to_first_command"`
	StepLatency      benchPercentiles `json:"step_latency"`
	LaterStepLatency benchPercentiles `json:"step_latency_after_first_command"`
	Outcomes         map[string]int   `json:"outcomes"`
	RunsCommandTwice int              `json:"runs_with_a_command_run_twice"`
	ModelCallsTwice  int              `json:"model_calls_requested_twice"`
	LoadedOverAlone  float64          `json:"loaded_mean_over_alone_median,omitempty"`
	IdealMS          float64          `json:"ideal_ms,omitempty"`
	TotalOverIdeal   float64          `json:"total_over_ideal,omitempty"`
	WorkDir          string           `json:"work_dir"`
}

// benchLoad runs the bench (see newBenchLoadCmd).
func benchLoad(ctx context.Context, g *globals, cmd *cobra.Command, f benchLoadFlags, sf sandboxFlags, vf verifierFlags, af agentFlags, log *slog.Logger) error {
	model := f.model
	rep := benchReport{Runs: f.runs, Concurrency: f.concurrency, Steps: f.steps, BaselineRuns: f.baseline, ModelLatencyMS: ms(f.modelLatency)}
	if model.BaseURL == "" {
		lm, err := loadmodel.Start(loadmodel.Config{Addr: f.modelListen, Steps: f.steps, Latency: f.modelLatency})
		if err != nil {
			return fmt.Errorf("start the load model: %w", err)
		}
		defer lm.Close()
		model = catalog.ModelConfig{BaseURL: lm.URL(), Name: loadmodel.DefaultModel}
		rep.Model = "load model at " + lm.URL()
	} else {
		rep.Model = model.Name + " at " + model.BaseURL
	}
	if err := model.Validate("--model-base-url"); err != nil {
		return usageError{err}
	}
	keys, err := f.keys.keys(f.model.APIKeyEnv, vf.judge.apiKeyEnv)
	if err != nil {
		return err
	}

	b, err := openTaskBus(ctx, g, cmd, f.dataDir, f.natsListen, "vera-bench", log)
	if err != nil {
		return err
	}
	defer b.close()
	root := f.workDir
	if root == "" {
		root = filepath.Join(f.dataDir, "runs", "bench-"+time.Now().UTC().Format("20060102T150405Z"))
	}
	if root, err = filepath.Abs(root); err != nil {
		return fmt.Errorf("--work-dir: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("create the work dir: %w", err)
	}
	rep.WorkDir = root
	if b.external {
		rep.Deployment = b.url
	} else {
		rep.Deployment = "embedded"
		rep.AgentConcurrency, rep.SandboxdConc = af.concurrency, sf.concurrency
		if err := b.startComponents(ctx, sf, vf, af, keys, []string{root}, nil); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	w := &benchWatch{runs: map[string]*benchRun{}}
	// Runs still going when the bench stops early (Ctrl-C, --timeout, an
	// error) are cancelled for everyone, as vera run does.
	defer func() {
		w.mu.Lock()
		var open []string
		for id, r := range w.runs {
			if !r.closed {
				open = append(open, id)
			}
		}
		w.mu.Unlock()
		pctx, pcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer pcancel()
		for _, id := range open {
			ev, err := b.Events.New(id, catalog.RunCancelled{RequestedBy: "cli:bench", Reason: "vera bench load stopped before the run ended"})
			if err == nil {
				_, err = b.Publish(pctx, ev)
			}
			if err != nil {
				log.Warn("cancelling an unfinished bench run failed", "run", id, "err", err)
			}
		}
		if len(open) > 0 {
			fmt.Fprintf(g.stderr, "vera bench load: cancelled %d unfinished runs\n", len(open))
		}
	}()
	followErr := make(chan error, 1)
	go func() { followErr <- w.follow(ctx, b.Bus, time.Now().Add(-time.Second)) }()
	failed := make(<-chan struct{})
	if b.stack != nil {
		failed = b.stack.Failed()
	}

	prog := &benchProgress{w: g.stderr, term: isTerminal(g.stderr)}
	submit := func(phase string, i int) (*benchRun, error) {
		id := b.Options().IDs.NewID(b.Options().Clock.Now())
		r := w.add(id)
		cfg := catalog.RunConfig{
			Task:    fmt.Sprintf("VERA load benchmark, %s run %d: run the load script's commands, then submit.", phase, i+1),
			WorkDir: filepath.Join(root, id), Model: model, MaxSteps: f.steps + 4,
			// As `vera run` by default (network on): the configuration
			// sandboxd keeps warm containers for unless told otherwise.
			Sandbox: catalog.SandboxConfig{Session: catalog.SessionPersistent, Network: !f.noNetwork},
			Policy:  catalog.PolicyConfig{NotesInterval: f.steps},
		}
		if err := os.MkdirAll(cfg.WorkDir, 0o755); err != nil {
			return nil, fmt.Errorf("create the run's work dir: %w", err)
		}
		sub := catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "cli:bench", Labels: map[string]string{"bench": "load", "bench_phase": phase}}
		if err := b.submit(ctx, id, sub, "a bench run"); err != nil {
			return nil, err
		}
		return r, nil
	}
	wait := func(r *benchRun) error {
		select {
		case <-r.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case err := <-followErr:
			if err == nil {
				err = errors.New("the bus reader stopped")
			}
			return err
		case <-failed:
			return fmt.Errorf("a component stopped: %w", b.stack.err())
		}
	}

	// Phase 1: one at a time.
	var alone []time.Duration
	rep.BaselineOutcomes = map[string]int{}
	for i := range f.baseline {
		prog.set(fmt.Sprintf("baseline %d/%d", i+1, f.baseline))
		r, err := submit("baseline", i)
		if err != nil {
			return err
		}
		if err := wait(r); err != nil {
			return fmt.Errorf("baseline run %s: %w", r.id, err)
		}
		w.mu.Lock()
		alone = append(alone, r.ended.Sub(r.submitted))
		rep.BaselineOutcomes[r.outcome]++
		w.mu.Unlock()
	}
	if len(alone) > 0 {
		rep.AloneMedianMS = median(alone)
	}

	// Phase 2: N runs, C in flight.
	slots := make(chan struct{}, f.concurrency)
	var loaded []*benchRun
	var mu sync.Mutex
	ended := 0
	var stopErr error
	var wg sync.WaitGroup
	began := time.Now()
	for i := range f.runs {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		mu.Lock()
		if stopErr != nil {
			mu.Unlock()
			break
		}
		mu.Unlock()
		r, err := submit("loaded", i)
		if err != nil {
			return err
		}
		mu.Lock()
		loaded = append(loaded, r)
		prog.set(fmt.Sprintf("loaded: %d submitted, %d ended, %d in flight", len(loaded), ended, len(loaded)-ended))
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := wait(r)
			mu.Lock()
			if err != nil && stopErr == nil && !errors.Is(err, context.DeadlineExceeded) {
				stopErr = err
			}
			if err == nil {
				ended++
			}
			prog.set(fmt.Sprintf("loaded: %d submitted, %d ended, %d in flight", len(loaded), ended, len(loaded)-ended))
			mu.Unlock()
			<-slots
		}()
	}
	wg.Wait()
	prog.done()
	if stopErr != nil {
		return stopErr
	}
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}

	w.mu.Lock()
	var last time.Time
	var walls, firsts, steps, later []time.Duration
	rep.Outcomes = map[string]int{}
	for _, r := range loaded {
		if !r.closed {
			rep.Outcomes["UNFINISHED"]++
			continue
		}
		rep.Outcomes[r.outcome]++
		walls = append(walls, r.ended.Sub(r.submitted))
		if !r.firstStart.IsZero() {
			firsts = append(firsts, r.firstStart.Sub(r.submitted))
		}
		firstStep := math.MaxInt
		for k := range r.steps {
			firstStep = min(firstStep, k)
		}
		for k, d := range r.steps {
			steps = append(steps, d)
			if k != firstStep {
				later = append(later, d)
			}
		}
		if r.ended.After(last) {
			last = r.ended
		}
		for _, n := range r.starts {
			if n > 1 {
				rep.RunsCommandTwice++
				break
			}
		}
		for _, n := range r.calls {
			if n > 1 {
				rep.ModelCallsTwice++
			}
		}
	}
	var first time.Time
	for _, r := range loaded {
		if first.IsZero() || (!r.submitted.IsZero() && r.submitted.Before(first)) {
			first = r.submitted
		}
	}
	w.mu.Unlock()
	total := time.Since(began)
	if !last.IsZero() && !first.IsZero() && rep.Outcomes["UNFINISHED"] == 0 {
		total = last.Sub(first)
	}
	rep.TotalWallMS = ms(total)
	if total > 0 {
		rep.RunsPerSecond = math.Round(float64(len(walls))/total.Seconds()*1000) / 1000
	}
	rep.RunWall, rep.FirstCommand, rep.StepLatency, rep.LaterStepLatency = percentiles(walls), percentiles(firsts), percentiles(steps), percentiles(later)
	if rep.AloneMedianMS > 0 && rep.RunWall.Count > 0 {
		rep.LoadedOverAlone = round3(rep.RunWall.Mean / rep.AloneMedianMS)
		waves := (f.runs + f.concurrency - 1) / f.concurrency
		rep.IdealMS = ms(time.Duration(float64(waves) * rep.AloneMedianMS * float64(time.Millisecond)))
		rep.TotalOverIdeal = round3(rep.TotalWallMS / rep.IdealMS)
	}

	if f.jsonOut {
		enc := json.NewEncoder(g.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("write the report: %w", err)
		}
	} else {
		rep.print(g.stdout)
	}
	if rep.Outcomes[string(catalog.OutcomeResolved)] != f.runs || len(walls) != f.runs {
		return exitError{code: exitFailure, err: fmt.Errorf("%d of %d loaded runs did not end RESOLVED", f.runs-rep.Outcomes[string(catalog.OutcomeResolved)], f.runs)}
	}
	return nil
}

func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return ms(s[n/2])
	}
	return ms((s[n/2-1] + s[n/2]) / 2)
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func (r benchReport) print(w io.Writer) {
	fmt.Fprintf(w, "vera bench load: %d runs, %d in flight, %d steps each (%d commands), model %s, latency %s\n",
		r.Runs, r.Concurrency, r.Steps, r.Steps-1, r.Model, time.Duration(r.ModelLatencyMS*float64(time.Millisecond)))
	dep := r.Deployment
	if dep == "embedded" {
		dep = fmt.Sprintf("embedded (agent concurrency %d, sandboxd concurrency %d)", r.AgentConcurrency, r.SandboxdConc)
	}
	fmt.Fprintf(w, "  deployment          %s\n", dep)
	if r.BaselineRuns > 0 {
		fmt.Fprintf(w, "  alone (median of %d) %s\n", r.BaselineRuns, fmtMS(r.AloneMedianMS))
	}
	fmt.Fprintf(w, "  total wall          %s   (%.3f runs/s)\n", fmtMS(r.TotalWallMS), r.RunsPerSecond)
	fmt.Fprintf(w, "  run wall            p50 %s  p99 %s  mean %s\n", fmtMS(r.RunWall.P50), fmtMS(r.RunWall.P99), fmtMS(r.RunWall.Mean))
	fmt.Fprintf(w, "  submit → 1st command p50 %s  p90 %s  p99 %s\n", fmtMS(r.FirstCommand.P50), fmtMS(r.FirstCommand.P90), fmtMS(r.FirstCommand.P99))
	fmt.Fprintf(w, "  step latency        p50 %s  p99 %s   (%d steps: model.requested → the step's tool.finished)\n", fmtMS(r.StepLatency.P50), fmtMS(r.StepLatency.P99), r.StepLatency.Count)
	fmt.Fprintf(w, "    after 1st command p50 %s  p99 %s   (%d steps: the container already running)\n", fmtMS(r.LaterStepLatency.P50), fmtMS(r.LaterStepLatency.P99), r.LaterStepLatency.Count)
	var outs []string
	for _, k := range []string{"RESOLVED", "UNRESOLVED", "FAILED", "CANCELLED", "UNFINISHED"} {
		if n := r.Outcomes[k]; n > 0 || k == "RESOLVED" || k == "FAILED" {
			outs = append(outs, fmt.Sprintf("%s %d", k, n))
		}
	}
	fmt.Fprintf(w, "  outcomes            %s\n", strings.Join(outs, " · "))
	fmt.Fprintf(w, "  run twice           %d runs with a command started twice, %d model calls requested twice\n", r.RunsCommandTwice, r.ModelCallsTwice)
	if r.IdealMS > 0 {
		fmt.Fprintf(w, "  loaded / alone      %.2f× (mean loaded run wall ÷ alone median)\n", r.LoadedOverAlone)
		fmt.Fprintf(w, "  total / ideal       %.2f× (ideal = ceil(%d/%d) × alone = %s)\n", r.TotalOverIdeal, r.Runs, r.Concurrency, fmtMS(r.IdealMS))
	}
	fmt.Fprintf(w, "  work dirs           %s\n", r.WorkDir)
}

func fmtMS(v float64) string {
	d := time.Duration(v * float64(time.Millisecond))
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	default:
		return d.Round(100 * time.Microsecond).String()
	}
}

// benchProgress is the progress line on stderr: redrawn on a terminal,
// else a line when it changes at most every 5 s.
type benchProgress struct {
	mu   sync.Mutex
	w    io.Writer
	term bool
	last time.Time
	text string
}

func (p *benchProgress) set(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s == p.text {
		return
	}
	p.text = s
	if p.term {
		fmt.Fprintf(p.w, "\r\033[K%s", s)
		return
	}
	if time.Since(p.last) >= 5*time.Second {
		p.last = time.Now()
		fmt.Fprintf(p.w, "bench: %s\n", s)
	}
}

func (p *benchProgress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.term {
		fmt.Fprint(p.w, "\r\033[K")
	} else if p.text != "" {
		fmt.Fprintf(p.w, "bench: %s\n", p.text)
	}
}
