package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/forkspec"
	"github.com/vera-run/vera/internal/llm"
)

func init() { register(newForkCmd) }

// forkFlags are the settings of one `vera fork`.
type forkFlags struct {
	atStep        int
	note          string
	workDir       string
	model         string
	modelBaseURL  string
	apiKeyEnv     string
	modelSettings modelSettingsFlags
	auditor       bool
	noAuditor     bool
	auditRounds   int
	maxSteps      int

	notesInterval, stagnationLimit, failureEscalation, queryFamilyLimit int

	runID               string
	labels              map[string]string
	jsonOut             bool
	showReasoning       bool
	dataDir, natsListen string
	keys                keyEnvFlags // --allow-api-key-env
}

func (f *forkFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.IntVar(&f.atStep, "at-step", 0, "how many steps of RUN the fork reproduces before it goes on live (0 = none: the same task with the new settings from the start) (required)")
	fl.StringVar(&f.note, "note", "", "why you fork, in your words (kept in the fork's settings)")
	fl.StringVar(&f.workDir, "work-dir", "", "the fork's work dir, empty or new (default: a sibling of RUN's work dir named <its name>-fork-<the new run id's last 8 characters>)")
	fl.StringVar(&f.model, "model", "", "the agent's model from the step after the fork point (default: RUN's)")
	fl.StringVar(&f.modelBaseURL, "model-base-url", "", "its OpenAI-compatible server (default: RUN's)")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "", "NAME of the environment variable holding that server's API key (default: RUN's)")
	f.modelSettings.register(cmd, "", "the agent's model after the fork point (default: RUN's setting)", true)
	fl.BoolVar(&f.auditor, "auditor", false, "audit candidate answers with the DeepVerifier auditor (default: as RUN)")
	fl.BoolVar(&f.noAuditor, "no-auditor", false, "do not audit candidate answers (default: as RUN)")
	fl.IntVar(&f.auditRounds, "audit-rounds", 0, "audit rounds allowed (0 = the default, 3) (default: RUN's)")
	fl.IntVar(&f.maxSteps, "max-steps", 0, "step budget of the whole fork, its reproduced steps included; 0 = unlimited (default: RUN's)")
	fl.IntVar(&f.notesInterval, "notes-interval", 0, "steps between required notes appends (default: RUN's)")
	fl.IntVar(&f.stagnationLimit, "stagnation-limit", 0, "UNRESOLVED turns without new evidence before a tool is forced (default: RUN's)")
	fl.IntVar(&f.failureEscalation, "failure-escalation-limit", 0, "repeats of one failure before escalation (default: RUN's)")
	fl.IntVar(&f.queryFamilyLimit, "query-family-limit", 0, "queries of one family before a mutation is required (default: RUN's)")
	fl.StringVar(&f.runID, "run-id", "", "id of the new run (default: a fresh ULID)")
	fl.StringToStringVar(&f.labels, "label", nil, "extra labels of the fork, k=v (repeatable); forked_from and fork_at_step are always set")
	fl.BoolVar(&f.jsonOut, "json", false, "print every event of the fork as one JSON line instead of the readable view")
	fl.BoolVar(&f.showReasoning, "show-reasoning", false, "print each step's reasoning in full")
	fl.StringVar(&f.dataDir, "data-dir", defaultDataDir(), "without --nats-url: where the embedded bus keeps its store, DIR/nats (env VERA_DATA_DIR)")
	fl.StringVar(&f.natsListen, "nats-listen", "127.0.0.1:0", "without --nats-url: address of the embedded NATS server (port 0 = a free one)")
	f.keys.register(cmd)
}

// overrides are the settings the flags change (only the flags given).
func (f *forkFlags) overrides(cmd *cobra.Command) (forkspec.Overrides, error) {
	changed := cmd.Flags().Changed
	ov := forkspec.Overrides{Model: f.model, ModelBaseURL: f.modelBaseURL, APIKeyEnv: f.apiKeyEnv}
	switch {
	case f.auditor && f.noAuditor:
		return ov, errors.New("give --auditor or --no-auditor, not both")
	case changed("auditor"):
		ov.Auditor = &f.auditor
	case changed("no-auditor"):
		off := !f.noAuditor
		ov.Auditor = &off
	}
	ints := []struct {
		flag string
		v    *int
		dst  **int
	}{
		{"audit-rounds", &f.auditRounds, &ov.AuditRounds},
		{"max-steps", &f.maxSteps, &ov.MaxSteps},
		{"notes-interval", &f.notesInterval, &ov.NotesInterval},
		{"stagnation-limit", &f.stagnationLimit, &ov.StagnationLimit},
		{"failure-escalation-limit", &f.failureEscalation, &ov.FailureEscalationLimit},
		{"query-family-limit", &f.queryFamilyLimit, &ov.QueryFamilyLimit},
	}
	for _, i := range ints {
		if changed(i.flag) {
			if *i.v < 0 {
				return ov, fmt.Errorf("--%s must be 0 or more, got %d", i.flag, *i.v)
			}
			*i.dst = i.v
		}
	}
	return ov, nil
}

func newForkCmd(g *globals) *cobra.Command {
	var f forkFlags
	var sf sandboxFlags
	var vf verifierFlags
	var af agentFlags
	cmd := &cobra.Command{
		Use:   "fork RUN --at-step N [--model NAME] [--tool-protocol P] [--auditor|--no-auditor] [--note TEXT]",
		Short: "Start a new run that reproduces the first N steps of a recorded run, then goes on live with other settings",
		Long: `Fork a recorded run at a step: a NEW run that reproduces RUN's first N steps,
then goes on live from step N+1 with the settings you change here (another
model, tool protocol, auditor, budget or policy limits). It answers "what
would have happened from here with...?" without running the start again.

  - The first N steps are not asked of a model: the agent serves RUN's
    recorded replies, step by step.
  - Their commands and edits are executed for real, in a fresh sandbox and
    a new, empty work dir, so the fork's files are its own.
  - Each reproduced step (its prompt, its action, its command's result) is
    compared with RUN's. When all N match, the agent publishes
    vera.fork.prefix (reproduced) and goes on live; at the first difference
    it publishes vera.fork.prefix with the divergence (step, kind, detail,
    recorded vs replayed) and ends the fork FAILED: a prefix that does not
    reproduce (a web page changed, a command is not deterministic) would
    make the comparison meaningless.
  - Settings apply after step N; everything you do not change is RUN's
    effective configuration (its vera.run.started): task, input dir,
    sandbox, model and policy.
  - A fork must branch before RUN's first audited answer (the step of its
    first vera.audit.requested): the recording holds the agent's replies,
    not an audit to replay. N is 0 to RUN's step count, below that step.

The fork keeps RUN's api_key_env unless --api-key-env changes it. RUN may
have been imported from anyone: without --nats-url, a fork whose model (or
auditor model) names another variable than --api-key-env's,
$VERA_API_KEY_ENV's or one given with --allow-api-key-env (without it,
OPENAI_API_KEY) stops here, exit 2, before it is submitted.

The fork's work dir is --work-dir (it must be empty or new), else a sibling
of RUN's work dir named <its name>-fork-<the new run id's last 8
characters>. Its vera.task.submitted carries fork: {from, at_step, note}
and the labels forked_from=RUN and fork_at_step=N.

Like vera run: without --nats-url (and NATS_URL) the embedded bus (store in
--data-dir/nats) and every component start in this process; with --nats-url
the fork is submitted to a running vera up, whose components must see the
work dir at the same path. The fork is followed with vera run's view, plus a
line when vera.fork.prefix arrives. Ctrl-C cancels the fork.

Exit status:
  0  RESOLVED
  1  VERA failed (no bus, a component stopped)
  2  bad flags or arguments (unknown run, step out of range, step at or
     after the first audited answer)
  3  UNRESOLVED(reason)
  4  FAILED, also when the prefix did not reproduce (the divergence is printed)
  5  cancelled`,
		Example: `  vera fork 01JNZ8Q6R2V4X7B9C3D5E7F9G1 --at-step 4 --model qwen3-32b --note "a bigger model from step 5"
  vera fork 01JNZ8Q6R2V4X7B9C3D5E7F9G1 --at-step 2 --tool-protocol text --no-auditor --work-dir ./work/fork-text
  vera fork --nats-url nats://127.0.0.1:4222 01JNZ8Q6R2V4X7B9C3D5E7F9G1 --at-step 0 --auditor --audit-rounds 5`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("at-step") {
				return usageError{errors.New("--at-step N is required: how many of the run's steps the fork reproduces")}
			}
			if f.atStep < 0 {
				return usageError{fmt.Errorf("--at-step must be 0 or more, got %d", f.atStep)}
			}
			if err := bus.ValidateRunID(args[0]); err != nil {
				return usageError{fmt.Errorf("RUN: %w", err)}
			}
			if f.runID != "" {
				if err := bus.ValidateRunID(f.runID); err != nil {
					return usageError{fmt.Errorf("--run-id: %w", err)}
				}
			}
			if err := vf.validate(); err != nil {
				return err
			}
			keys, err := f.keys.keys(f.apiKeyEnv, vf.judge.apiKeyEnv)
			if err != nil {
				return err
			}
			log, err := g.quietLogger(cmd)
			if err != nil {
				return err
			}
			return forkTask(cmd.Context(), g, cmd, args[0], f, sf, vf, af, keys, log)
		},
	}
	f.register(cmd)
	sf.register(cmd)
	vf.register(cmd)
	af.register(cmd)
	for _, name := range []string{"network", "user", "keep-containers", "memory", "pids", "cpus", "concurrency", "repetition-window", "hybrid",
		"verifyfast-settings", "verifyfast-strategy", "agent-id", "agent-concurrency", "tool-timeout"} {
		if fl := cmd.Flags().Lookup(name); fl != nil {
			fl.Hidden = true
		}
	}
	return cmd
}

// forkConfig reads the original and builds the fork's task (see
// forkspec.Build), with the fork's work dir created.
func forkConfig(ctx context.Context, b *bus.Bus, cmd *cobra.Command, original, newID string, f forkFlags) (catalog.TaskSubmitted, forkspec.Original, error) {
	orig, err := forkspec.Read(ctx, b, original)
	switch {
	case errors.Is(err, forkspec.ErrUnknownRun) || errors.Is(err, forkspec.ErrNotStarted) || errors.Is(err, forkspec.ErrInvalid):
		return catalog.TaskSubmitted{}, orig, usageError{err}
	case err != nil:
		return catalog.TaskSubmitted{}, orig, err
	}
	if err := orig.CheckAtStep(f.atStep); err != nil {
		return catalog.TaskSubmitted{}, orig, usageError{fmt.Errorf("--at-step: %w", err)}
	}
	ov, err := f.overrides(cmd)
	if err != nil {
		return catalog.TaskSubmitted{}, orig, usageError{err}
	}
	work := f.workDir
	if work == "" {
		work = forkspec.DefaultWorkDir(orig.Started.Config.WorkDir, newID)
	}
	if work, err = filepath.Abs(work); err != nil {
		return catalog.TaskSubmitted{}, orig, usageError{fmt.Errorf("--work-dir: %w", err)}
	}
	by := "cli"
	if u := os.Getenv("USER"); u != "" {
		by = "cli:" + u
	}
	sub, err := forkspec.Build(orig, forkspec.Spec{AtStep: f.atStep, Note: f.note, WorkDir: work, SubmittedBy: by, Labels: f.labels, Overrides: ov})
	if err != nil {
		return catalog.TaskSubmitted{}, orig, usageError{err}
	}
	if err := f.modelSettings.apply(&sub.Model); err != nil {
		return catalog.TaskSubmitted{}, orig, usageError{err}
	}
	if err := sub.ValidateSecrets(); err != nil {
		return catalog.TaskSubmitted{}, orig, usageError{err}
	}
	// The prefix re-runs the original's commands from an empty /work: the
	// fork's run dir must be new or empty (taskBus.claimRunDir).
	if ents, err := os.ReadDir(work); err == nil && len(ents) > 0 {
		return catalog.TaskSubmitted{}, orig, usageError{fmt.Errorf("the fork's work dir %s is not empty: the reproduced steps must start from an empty /work (give --work-dir a new directory)", work)}
	}
	return sub, orig, nil
}

// forkTask reads the original, submits the fork and follows it (see
// newForkCmd). Its bus and component handling is runTask's (taskBus); it
// reads the original on the same connection before it submits.
func forkTask(ctx context.Context, g *globals, cmd *cobra.Command, original string, f forkFlags,
	sf sandboxFlags, vf verifierFlags, af agentFlags, keys *llm.KeyEnvs, log *slog.Logger) error {
	b, err := openTaskBus(ctx, g, cmd, f.dataDir, f.natsListen, "vera-fork", log)
	if err != nil {
		return err
	}
	defer b.close()

	runID := f.runID
	if runID == "" {
		runID = b.Options().IDs.NewID(b.Options().Clock.Now())
	}
	sub, orig, err := forkConfig(ctx, b.Bus, cmd, original, runID, f)
	if err != nil {
		return err
	}
	cfg := sub.RunConfig
	if !b.external {
		// The original's model settings come from the record: this
		// process's components would refuse a key variable they may not
		// read; say so before anything is published.
		if err := checkKeys(keys.For("vera fork"), "the fork's ", runModels(cfg, verifyFastSettings(vf))); err != nil {
			return err
		}
	}
	if err := b.claimRunDir(cfg.WorkDir, runID, sf); err != nil {
		return err
	}
	// The original's input dir comes from the record (which may have been
	// imported from anyone): it is mounted only under the --input-root
	// directories typed here.
	if cfg.InputDir != "" && !b.external {
		if err := checkInputDirs(map[string]string{"the fork (the original run's input dir)": cfg.InputDir}, sf.inputRoots); err != nil {
			return err
		}
	}
	if err := b.startComponents(ctx, sf, vf, af, keys, []string{cfg.WorkDir}, nil); err != nil {
		return err
	}

	if err := b.submit(ctx, runID, sub, "the fork"); err != nil {
		return err
	}
	w := g.stdout
	if !f.jsonOut {
		fmt.Fprintf(w, "run %s submitted: a fork of run %s at step %d of %d: %s\n", runID, original, cfg.Fork.AtStep, orig.Steps, oneLine(cfg.Task, 100))
		fmt.Fprintf(w, "  steps 1-%d from the recording (commands re-run, each step compared), then live\n", cfg.Fork.AtStep)
		fmt.Fprintf(w, "  work dir %s · model %s at %s · max steps %s · auditor %s\n", cfg.WorkDir, cfg.Model.Name, cfg.Model.BaseURL, stepsText(cfg.MaxSteps), onOff(cfg.Auditor.Enabled))
		if set := modelSettingsText(cfg.Model); set != "" {
			fmt.Fprintf(w, "  model settings: %s\n", set)
		}
		if cfg.Fork.Note != "" {
			fmt.Fprintf(w, "  note: %s\n", oneLine(cfg.Fork.Note, 200))
		}
		if b.external {
			fmt.Fprintf(w, "  bus %s (watch: vera events tail --run %s)\n", b.url, runID)
		}
	}
	return b.followToEnd(ctx, runID, sub.SubmittedBy, w, followOptions{jsonOut: f.jsonOut, showReasoning: f.showReasoning, statusLine: isTerminal(g.stderr)})
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// forkPrefixText is the view's lines for a vera.fork.prefix.
func forkPrefixText(d *catalog.ForkPrefix) string {
	if d.Reproduced {
		return fmt.Sprintf("prefix reproduced: %d steps, %d commands compared; live from step %d", d.StepsCompared, d.CommandsCompared, d.AtStep+1)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "prefix did not reproduce (%d steps, %d commands compared)", d.StepsCompared, d.CommandsCompared)
	if v := d.Divergence; v != nil {
		fmt.Fprintf(&sb, ": step %d differs (%s): %s", v.Step, v.Kind, oneLine(v.Detail, 300))
		if v.Recorded != "" || v.Replayed != "" {
			fmt.Fprintf(&sb, "\n  recorded: %s\n  replayed: %s", oneLine(v.Recorded, 300), oneLine(v.Replayed, 300))
		}
	}
	return sb.String()
}
