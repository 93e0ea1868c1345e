package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/eventfmt"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/llm"
)

func init() { register(newRunCmd) }

// Exit codes of `vera run`, besides exitOK (RESOLVED), exitFailure (VERA
// itself failed: no bus, a component stopped) and exitUsage.
const (
	exitUnresolved = 3 // the run ended UNRESOLVED(reason): budget, negative claim, auditor...
	exitRunFailed  = 4 // the run ended FAILED (the model kept failing...)
	exitCancelled  = 5 // the run was cancelled (Ctrl-C here, or by someone else)
)

// runFlags are the settings of one `vera run`.
type runFlags struct {
	task, taskFile      string
	workDir, inputDir   string
	model               catalog.ModelConfig
	modelSettings       modelSettingsFlags
	maxSteps            int
	noNetwork           bool
	toolTimeout         time.Duration
	session             string
	workLimitMB         int64
	scratchLimitMB      int64
	auditor             bool
	auditorRounds       int
	auditorModel        catalog.ModelConfig
	auditorSettings     modelSettingsFlags
	verifyFast          bool
	verifyFastProfile   string
	notesInterval       int
	stagnationLimit     int
	failureEscalation   int
	runID               string
	jsonOut             bool
	showReasoning       bool
	dataDir, natsListen string
	labels              map[string]string
	keys                keyEnvFlags // --allow-api-key-env
}

func (f *runFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.task, "task", "", "the task, as text (or --task-file)")
	fl.StringVar(&f.taskFile, "task-file", "", "read the task from this file; - reads standard input")
	fl.StringVar(&f.workDir, "work-dir", "", "the run's directory: VERA writes the run's files there (notes.md, trace.jsonl...) and its work/ is the sandbox's /work; it must be new, empty or this run's (default DATA_DIR/runs/RUN_ID)")
	fl.StringVar(&f.inputDir, "input-dir", "", "host directory mounted read-only at /input (with --nats-url, under one of sandboxd's --input-root directories)")
	fl.StringVar(&f.model.BaseURL, "model-base-url", os.Getenv("VERA_MODEL_BASE_URL"), "base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:1234 (/v1 is added) (env VERA_MODEL_BASE_URL)")
	fl.StringVar(&f.model.Name, "model", os.Getenv("VERA_MODEL"), "model name (env VERA_MODEL)")
	fl.StringVar(&f.model.APIKeyEnv, "api-key-env", os.Getenv("VERA_API_KEY_ENV"), "NAME of the environment variable holding the API key (the key is never put in events); empty = no key (env VERA_API_KEY_ENV)")
	f.modelSettings.register(cmd, "", "the agent's model", true)
	fl.IntVar(&f.maxSteps, "max-steps", envInt("MAX_STEPS", 80), "step budget of the agent; 0 = unlimited (env MAX_STEPS)")
	fl.BoolVar(&f.noNetwork, "no-network", false, "cut the sandbox off the network (by default it can reach the web with curl/wget)")
	fl.DurationVar(&f.toolTimeout, "command-timeout", 0, "timeout of one shell command of the agent (default 15m)")
	fl.StringVar(&f.session, "session", string(catalog.SessionPersistent), "how the sandbox runs shell commands: persistent (one shell session per container: functions, aliases, variables and shell options carry over from command to command) or exec (a Docker exec per command: only cd and export carry over)")
	fl.Int64Var(&f.workLimitMB, "work-limit-mb", 0, "limit on the size of /work in MiB; 0 = sandboxd's default")
	fl.Int64Var(&f.scratchLimitMB, "scratch-limit-mb", 0, "limit in MiB on what the sandbox writes outside /work (/tmp, /var/tmp and the container's own layer); 0 = sandboxd's default")
	fl.BoolVar(&f.auditor, "auditor", false, "audit candidate answers with the DeepVerifier auditor before the run may finish RESOLVED")
	fl.IntVar(&f.auditorRounds, "auditor-rounds", 0, "audit rounds allowed (default 3)")
	fl.StringVar(&f.auditorModel.BaseURL, "auditor-model-base-url", "", "the auditor's model server (default: the agent's)")
	fl.StringVar(&f.auditorModel.Name, "auditor-model", "", "the auditor's model (default: the agent's)")
	f.auditorSettings.register(cmd, "auditor-", "the auditor's model (default: the agent's setting)", false)
	fl.BoolVar(&f.verifyFast, "verifyfast", false, "score candidate answers with VerifyFast")
	fl.StringVar(&f.verifyFastProfile, "verifyfast-profile", "", "VerifyFast profile (see vera verifyfast --help)")
	fl.IntVar(&f.notesInterval, "notes-interval", envInt("NOTES_UPDATE_INTERVAL", 0), "steps between required notes appends (default 3) (env NOTES_UPDATE_INTERVAL)")
	fl.IntVar(&f.stagnationLimit, "stagnation-limit", envInt("STAGNATION_LIMIT", 0), "UNRESOLVED turns without new evidence before a tool is forced (env STAGNATION_LIMIT)")
	fl.IntVar(&f.failureEscalation, "failure-escalation-limit", envInt("FAILURE_ESCALATION_LIMIT", 0), "repeats of one failure before escalation (env FAILURE_ESCALATION_LIMIT)")
	fl.StringVar(&f.runID, "run-id", "", "id of the new run (default: a fresh ULID)")
	fl.StringToStringVar(&f.labels, "label", nil, "labels of the run for dashboards and tools, k=v (repeatable)")
	fl.BoolVar(&f.jsonOut, "json", false, "print every event of the run as one JSON line instead of the readable view")
	fl.BoolVar(&f.showReasoning, "show-reasoning", false, "print each step's reasoning in full (by default its first line and how many more there are)")
	fl.StringVar(&f.dataDir, "data-dir", defaultDataDir(), "without --nats-url: where the embedded bus keeps its store, DIR/nats (env VERA_DATA_DIR)")
	fl.StringVar(&f.natsListen, "nats-listen", "127.0.0.1:0", "without --nats-url: address of the embedded NATS server (port 0 = a free one)")
	f.keys.register(cmd)
}

// keyEnvs is the allow-list of the API key variables of the components a
// task command runs in this process: --allow-api-key-env, and the
// variables its --api-key-env and --judge-api-key-env name.
func (f *runFlags) keyEnvs(vf verifierFlags) (*llm.KeyEnvs, error) {
	return f.keys.keys(f.model.APIKeyEnv, vf.judge.apiKeyEnv)
}

// config turns the flags into the run's configuration.
func (f *runFlags) config(stdin io.Reader) (catalog.RunConfig, error) {
	task := f.task
	switch {
	case task != "" && f.taskFile != "":
		return catalog.RunConfig{}, errors.New("give the task with --task or --task-file, not both")
	case f.taskFile == "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return catalog.RunConfig{}, fmt.Errorf("read the task from standard input: %w", err)
		}
		task = string(b)
	case f.taskFile != "":
		b, err := os.ReadFile(f.taskFile)
		if err != nil {
			return catalog.RunConfig{}, fmt.Errorf("read the task: %w", err)
		}
		task = string(b)
	}
	task = strings.TrimSpace(task)
	if task == "" {
		return catalog.RunConfig{}, errors.New("no task: give --task TEXT or --task-file FILE")
	}
	if f.model.BaseURL == "" || f.model.Name == "" {
		return catalog.RunConfig{}, errors.New("--model-base-url and --model are required (or VERA_MODEL_BASE_URL and VERA_MODEL)")
	}
	if f.maxSteps < 0 {
		return catalog.RunConfig{}, fmt.Errorf("--max-steps must be 0 (unlimited) or more, got %d", f.maxSteps)
	}
	if f.runID != "" {
		if _, err := bus.Subject(f.runID, catalog.TypeTaskSubmitted); err != nil {
			return catalog.RunConfig{}, fmt.Errorf("--run-id: %w", err)
		}
	}
	var work string
	if f.workDir != "" {
		var err error
		if work, err = filepath.Abs(f.workDir); err != nil {
			return catalog.RunConfig{}, fmt.Errorf("--work-dir: %w", err)
		}
	}
	sandbox, err := f.sandboxConfig()
	if err != nil {
		return catalog.RunConfig{}, err
	}
	model := f.model
	if err := f.modelSettings.apply(&model); err != nil {
		return catalog.RunConfig{}, err
	}
	cfg := catalog.RunConfig{
		Task:     task,
		WorkDir:  work,
		Model:    model,
		MaxSteps: f.maxSteps,
		Sandbox:  sandbox,
		Policy: catalog.PolicyConfig{NotesInterval: f.notesInterval, StagnationLimit: f.stagnationLimit,
			FailureEscalationLimit: f.failureEscalation},
	}
	if f.inputDir != "" {
		in, err := filepath.Abs(f.inputDir)
		if err != nil {
			return catalog.RunConfig{}, fmt.Errorf("--input-dir: %w", err)
		}
		if st, err := os.Stat(in); err != nil || !st.IsDir() {
			return catalog.RunConfig{}, fmt.Errorf("--input-dir %s is not a directory", in)
		}
		cfg.InputDir = in
	}
	if !f.auditor && (f.auditorSettings.any() || f.auditorModel.BaseURL != "" || f.auditorModel.Name != "") {
		return catalog.RunConfig{}, errors.New("the --auditor-* settings need --auditor")
	}
	if f.auditor {
		cfg.Auditor = catalog.AuditorConfig{Enabled: true, MaxRounds: f.auditorRounds}
		if f.auditorModel.BaseURL != "" || f.auditorModel.Name != "" || f.auditorSettings.any() {
			// The agent's model and settings, with the auditor's own.
			m := model
			if f.auditorModel.BaseURL != "" {
				m.BaseURL = f.auditorModel.BaseURL
			}
			if f.auditorModel.Name != "" {
				m.Name = f.auditorModel.Name
			}
			if err := f.auditorSettings.apply(&m); err != nil {
				return catalog.RunConfig{}, err
			}
			cfg.Auditor.Model = &m
		}
	}
	if f.verifyFast {
		cfg.VerifyFast = catalog.VerifyFastConfig{Enabled: true, Profile: f.verifyFastProfile}
	}
	// Before anything is published: the task is an event everyone who
	// reads the bus sees, exports and replays.
	if err := cfg.ValidateSecrets(); err != nil {
		return catalog.RunConfig{}, fmt.Errorf("--api-key-env / --model-base-url: %w", err)
	}
	return cfg, nil
}

// sandboxConfig checks the sandbox flags of the run and returns its
// sandbox settings.
func (f *runFlags) sandboxConfig() (catalog.SandboxConfig, error) {
	mode := catalog.SessionMode(strings.ToLower(strings.TrimSpace(f.session)))
	if mode == "" {
		mode = catalog.SessionPersistent
	}
	if !mode.Valid() {
		return catalog.SandboxConfig{}, fmt.Errorf("--session must be persistent or exec, got %q", f.session)
	}
	if f.workLimitMB < 0 {
		return catalog.SandboxConfig{}, fmt.Errorf("--work-limit-mb must be 0 (sandboxd's default) or more, got %d", f.workLimitMB)
	}
	if f.scratchLimitMB < 0 {
		return catalog.SandboxConfig{}, fmt.Errorf("--scratch-limit-mb must be 0 (sandboxd's default) or more, got %d", f.scratchLimitMB)
	}
	if f.toolTimeout < 0 {
		return catalog.SandboxConfig{}, fmt.Errorf("--command-timeout must not be negative, got %s", f.toolTimeout)
	}
	return catalog.SandboxConfig{Network: !f.noNetwork, ToolTimeoutMS: f.toolTimeout.Milliseconds(), Session: mode,
		WorkLimitMB: f.workLimitMB, ScratchLimitMB: f.scratchLimitMB}, nil
}

func newRunCmd(g *globals) *cobra.Command {
	var f runFlags
	var sf sandboxFlags
	var vf verifierFlags
	var af agentFlags
	cmd := &cobra.Command{
		Use:   "run --task TEXT --work-dir DIR --model-base-url URL --model NAME",
		Short: "Run one task with the VERA agent and follow it until it ends",
		Long: `Submit a task and follow the run in the terminal: every step, command,
piece of evidence and verifier verdict as it happens, with a live status line,
until the run ends.

Without --nats-url (and NATS_URL) this one command does the whole job: it
starts the embedded bus (store in --data-dir/nats, on a free loopback port)
and every component in this process (sandboxd, the agent, the verifiers and
the projector that writes the run's files into --work-dir). With --nats-url
it only submits and follows: the components must already run on that bus
(vera up, or vera agent + vera sandboxd + ...), and must see --work-dir at
the same path.

The agent works in a Docker sandbox with two tools: shell (bash commands)
and edit (view, create, str_replace, insert and undo on files under /work),
and may submit its answer as a file under /work/output/. --session picks how
shell commands run: persistent (the default; one shell session per
container, so functions, aliases, variables and shell options carry over
from one command to the next) or exec (a fresh Docker exec per command; only
cd and export carry over). --work-limit-mb and --scratch-limit-mb bound the
disk the sandbox may fill in /work and outside it (0 = sandboxd's defaults).

The model is any OpenAI-compatible server (LM Studio, llama.cpp, vLLM,
Ollama, a hosted API). The API key, if one is needed, is read from the
environment variable named by --api-key-env; it never appears in events.
The components started here read no other key variable than that one,
$VERA_API_KEY_ENV's and those given with --allow-api-key-env (without it,
OPENAI_API_KEY): a model setting naming another (a VerifyFast profile's)
stops the command before anything is published.

Ctrl-C cancels the run (vera.run.cancelled) and exits.

Exit status:
  0  RESOLVED: the agent submitted an answer (accepted by the auditor, when
     --auditor is on)
  1  VERA failed (no bus, a component stopped)
  2  bad flags
  3  UNRESOLVED(reason): step budget spent, negative-claim protocol
     concluded, finalization stop, or the auditor accepted no answer
  4  FAILED: the model could not be reached after retries
  5  cancelled`,
		Example: `  vera run --task "Which version of Go added range-over-func?" \
    --work-dir ./work/go-rangefunc --model-base-url http://127.0.0.1:1234 --model qwen3-14b
  vera run --task-file task.md --work-dir ./work/t1 --input-dir ./data \
    --model-base-url https://api.openai.com --model gpt-4.1 --api-key-env OPENAI_API_KEY --auditor
  vera run --nats-url nats://127.0.0.1:4222 --task "..." --work-dir ./work/t2 --model-base-url ... --model ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(cmd.InOrStdin())
			if err != nil {
				return usageError{err}
			}
			if err := vf.validate(); err != nil {
				return err
			}
			keys, err := f.keyEnvs(vf)
			if err != nil {
				return err
			}
			if !externalBus(cmd) {
				// This process's components would refuse the run: say so
				// before anything is published.
				if err := checkKeys(keys.For("vera run"), "", runModels(cfg, verifyFastSettings(vf))); err != nil {
					return err
				}
			}
			log, err := g.quietLogger(cmd)
			if err != nil {
				return err
			}
			return runTask(cmd.Context(), g, cmd, f, cfg, sf, vf, af, keys, log)
		},
	}
	f.register(cmd)
	sf.register(cmd)
	vf.register(cmd)
	af.register(cmd)
	// The embedded components' own flags are rarely needed here.
	for _, name := range []string{"network", "user", "keep-containers", "memory", "pids", "cpus", "concurrency", "repetition-window", "hybrid",
		"verifyfast-settings", "verifyfast-strategy", "agent-id", "agent-concurrency", "tool-timeout"} {
		if fl := cmd.Flags().Lookup(name); fl != nil {
			fl.Hidden = true
		}
	}
	return cmd
}

// runTask submits the task and follows the run (see newRunCmd).
func runTask(ctx context.Context, g *globals, cmd *cobra.Command, f runFlags, cfg catalog.RunConfig,
	sf sandboxFlags, vf verifierFlags, af agentFlags, keys *llm.KeyEnvs, log *slog.Logger) error {
	b, err := openTaskBus(ctx, g, cmd, f.dataDir, f.natsListen, "vera-run", log)
	if err != nil {
		return err
	}
	defer b.close()
	runID := f.runID
	if runID == "" {
		runID = b.Options().IDs.NewID(b.Options().Clock.Now())
	}
	if cfg.WorkDir == "" {
		cfg.WorkDir = filepath.Join(runsDir(f.dataDir), runID)
	}
	if err := b.claimRunDir(cfg.WorkDir, runID, sf); err != nil {
		return err
	}
	var inputs []string
	if cfg.InputDir != "" {
		inputs = append(inputs, cfg.InputDir)
	}
	if err := b.startComponents(ctx, sf, vf, af, keys, []string{cfg.WorkDir}, inputs); err != nil {
		return err
	}
	sub := catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "cli", Labels: f.labels}
	if u := os.Getenv("USER"); u != "" {
		sub.SubmittedBy = "cli:" + u
	}
	if err := b.submit(ctx, runID, sub, "the task"); err != nil {
		return err
	}
	w := g.stdout
	if !f.jsonOut {
		fmt.Fprintf(w, "run %s submitted: %s\n", runID, oneLine(cfg.Task, 100))
		fmt.Fprintf(w, "  work dir %s · model %s at %s · max steps %s\n", cfg.WorkDir, cfg.Model.Name, cfg.Model.BaseURL, stepsText(cfg.MaxSteps))
		if set := modelSettingsText(cfg.Model); set != "" {
			fmt.Fprintf(w, "  model settings: %s\n", set)
		}
		if b.external {
			fmt.Fprintf(w, "  bus %s (watch: vera events tail --run %s)\n", b.url, runID)
		}
	}
	return b.followToEnd(ctx, runID, sub.SubmittedBy, w, followOptions{jsonOut: f.jsonOut, showReasoning: f.showReasoning, statusLine: isTerminal(g.stderr)})
}

// followOptions say how followRun prints a run.
type followOptions struct {
	jsonOut       bool // every event as a JSON line, no readable view
	external      bool // the components run elsewhere (for the hint when none starts the run)
	showReasoning bool // each step's reasoning whole
	// statusLine draws the status line on errw (a terminal), with the
	// live end of the agent's reply unless jsonOut.
	statusLine bool
}

// followRun prints the run's events until it finishes (returns its
// vera.run.finished) or is cancelled (returns nil). On a terminal, the
// status line shows the end of the agent's reply while it is generated
// (its live pieces, internal/live).
func followRun(ctx context.Context, b *bus.Bus, runID string, w, errw io.Writer, o followOptions, s *stack) (*catalog.RunFinished, error) {
	jsonOut, external := o.jsonOut, o.external
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	view := &runPrinter{w: w, prog: &progress{w: errw, on: o.statusLine}, start: time.Now(), blobs: b, showReasoning: o.showReasoning}
	if !jsonOut && o.statusLine {
		// Lossy by design: a piece missed only delays the line.
		if sub, err := live.Subscribe(b.Conn(), runID, view.livePiece); err == nil {
			defer func() { _ = sub.Unsubscribe() }()
		}
	}
	if s != nil {
		go func() {
			select {
			case <-s.Failed():
				cancel()
			case <-rctx.Done():
			}
		}()
	}
	// Warn once when nothing takes the run.
	hint := time.AfterFunc(15*time.Second, func() {
		if !view.started.Load() {
			msg := "no agent has started the run yet"
			if external {
				msg += ": is an agent consuming on this bus (vera up, or vera agent)?"
			}
			fmt.Fprintf(errw, "vera run: %s\n", msg)
		}
	})
	defer hint.Stop()
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	go func() {
		for {
			select {
			case <-rctx.Done():
				return
			case <-ticker.C:
				view.status()
			}
		}
	}()
	for rec, err := range b.Read(rctx, bus.ReadOptions{RunID: runID, Follow: true}) {
		if err != nil {
			if s != nil && ctx.Err() == nil {
				select {
				case <-s.Failed():
					return nil, s.err()
				default:
				}
			}
			return nil, err
		}
		if rec.Err != nil {
			if jsonOut {
				continue
			}
			view.line("%s", eventfmt.Malformed(rec.Sequence, rec.Subject, rec.Raw, rec.Err, 200))
			continue
		}
		if jsonOut {
			if err := writeRecord(w, &rec); err != nil {
				return nil, err
			}
		} else {
			view.event(ctx, rec.Event)
		}
		switch rec.Event.Type {
		case catalog.TypeRunFinished:
			p, err := catalog.Decode(rec.Event.Type, rec.Event.Data)
			if err != nil {
				return nil, fmt.Errorf("decode vera.run.finished: %w", err)
			}
			view.prog.done()
			return p.(*catalog.RunFinished), nil
		case catalog.TypeRunCancelled:
			view.prog.done()
			return nil, nil
		}
	}
	return nil, ctx.Err()
}

func stepsText(n int) string {
	if n == 0 {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// oneLine squeezes s onto one line of at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// waitConsumerIdle waits until the durable consumer has nothing pending or
// acknowledging, or timeout passes.
func waitConsumerIdle(ctx context.Context, b *bus.Bus, durable string, timeout time.Duration, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if ok, err := b.ConsumerDrained(ctx, durable); err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
			log.Warn("consumer did not catch up", "consumer", durable, "timeout", timeout)
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
