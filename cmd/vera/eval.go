package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
	"github.com/vera-run/vera/eval/report"
	"github.com/vera-run/vera/eval/runner"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/rundir"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/replay"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

func init() { register(newEvalCmd) }

// evalFlags are the settings of one `vera eval`.
type evalFlags struct {
	run          runFlags // the base profile: model, budget, sandbox, policy
	profiles     []string
	profilesFile string
	concurrency  int
	timeout      time.Duration
	out          string
	workRoot     string
	evalID       string
	name         string
	resume       string
	retryFailed  int
	judge        catalog.ModelConfig
	dashboardURL string
	quiet        bool
}

func newEvalCmd(g *globals) *cobra.Command {
	var f evalFlags
	var sf sandboxFlags
	var vf verifierFlags
	var af agentFlags
	cmd := &cobra.Command{
		Use:   "eval TASKS.jsonl --profiles no-audit,audit3 --model-base-url URL --model NAME",
		Short: "Run a task set under one or more profiles and measure what verification buys",
		Long: `Run every task of a task set under every profile as an ordinary VERA run
(labelled eval_id, eval_task, eval_profile), score every answer each run
submitted — one per audit round — against the task's reference, and report
per profile: the accuracy of the first answer, after each verification round
and final; how often the auditor accepted a wrong answer or rejected a right
one (its precision and recall); steps, tool calls, tokens and wall time per
task; and the same per tag. The eval's own events (vera.eval.started,
vera.eval.task_scored, vera.eval.finished) are stored on the bus under its
id, so the dashboard and outside tools can follow it, and it can be exported,
re-rendered (vera eval report) and re-scored (vera eval rescore).

The task set is JSONL, one task per line:
  {"id":"go122","task":"When was Go 1.22 released?","answer":"2024-02-06","scorer":"contains","tags":["dates"]}
Fields: id, task, answer (the reference), scorer (exact, contains, regex —
answer is then the pattern —, numeric {"type":"numeric","tolerance":0.5} or
judge {"type":"judge","rubric":"..."}, scored by a model: --scorer-model),
optional input_dir (mounted at /input; relative to the file) and tags. Every
line is checked before anything runs; bad lines are reported by number.

Profiles: no-audit (auditor off) and auditN (auditor on, N rounds) are
built in and apply to the model and settings given by the flags; a YAML file
(--profiles-file) defines others:
  defaults: {model: {base_url: http://127.0.0.1:1234, name: qwen3-14b}, max_steps: 12}
  profiles:
    audit3: {auditor: {enabled: true, max_rounds: 3}}
    big:    {model: {name: qwen3-32b}}

Accuracy "after round r" is the accuracy had the round cap been r: the
answer the auditor accepted by round r, else the best-scored of rounds 1..r
(what the agent keeps at the cap), else, for a run that ended sooner, its
final answer.

Runs go --concurrency at a time, each bounded by --timeout (then cancelled
and scored as failed). Ctrl-C stops the eval; runs in flight go on on the
bus. --resume EVAL_ID goes on: tasks already scored are not run again, runs
that were cut off are followed to their end (the agent takes them up from
the stream; they are not restarted), and only tasks never submitted are
submitted. --retry-failed N runs a task again, up to N times, when its run
failed for an infrastructure reason (model unreachable, sandbox error,
timeout).

Without --nats-url the embedded bus and every component run in this
process, as with vera run. --out DIR receives report.txt, report.json and
report.html (self-contained, with charts).

API keys: the model clients of this process (the embedded components, and
the judge scorer, which runs here even with --nats-url) read only the
variable --api-key-env names, $VERA_API_KEY_ENV's and those given with
--allow-api-key-env (without it, OPENAI_API_KEY). A profile (of
--profiles-file, or a resumed eval's) or a judge naming another stops the
eval, exit 2, before anything is published.

Exit status: 0 every task scored, 1 VERA failed, 2 bad flags or task set,
5 interrupted.`,
		Example: `  vera eval tasks.jsonl --profiles no-audit,audit3 --model-base-url http://127.0.0.1:1234 --model qwen3-14b --out eval-out
  vera eval tasks.jsonl --resume 01JX0Q6R2V4X7B9C3D5E7F9G1H
  vera eval report 01JX0Q6R2V4X7B9C3D5E7F9G1H --format html -o report.html
  vera eval compare 01JX0Q6R2V4X7B9C3D5E7F9G1H 01JX1A...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.quietLogger(cmd)
			if err != nil {
				return err
			}
			return runEval(cmd.Context(), g, cmd, args[0], f, sf, vf, af, log)
		},
	}
	f.run.register(cmd)
	sf.register(cmd)
	vf.register(cmd)
	af.register(cmd)
	for _, name := range []string{"task", "task-file", "work-dir", "input-dir", "run-id", "label", "json", "show-reasoning", "auditor", "auditor-rounds",
		"network", "user", "keep-containers", "memory", "pids", "cpus", "concurrency", "repetition-window", "hybrid",
		"verifyfast-settings", "verifyfast-strategy", "agent-id", "agent-concurrency", "tool-timeout"} {
		if fl := cmd.Flags().Lookup(name); fl != nil {
			fl.Hidden = true
		}
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.profiles, "profiles", []string{"no-audit"}, "profiles to run every task with, comma-separated: no-audit, auditN (N rounds) or names from --profiles-file")
	fl.StringVar(&f.profilesFile, "profiles-file", "", "YAML file defining profiles (see above)")
	fl.IntVar(&f.concurrency, "eval-concurrency", 4, "runs at once")
	fl.DurationVar(&f.timeout, "timeout", runner.DefaultTimeout, "wall-time limit of one run (a profile's timeout_ms overrides it)")
	fl.StringVar(&f.out, "out", "", "write report.txt, report.json and report.html into this directory")
	fl.StringVar(&f.workRoot, "runs-dir", "", "where the runs' directories go, one per run (default: DATA_DIR/runs/evals/<eval id>); with --nats-url, it must lie under a --work-root of the deployment (DATA_DIR/runs always is one)")
	fl.StringVar(&f.evalID, "eval-id", "", "id of the new eval (default: a fresh ULID)")
	fl.StringVar(&f.name, "name", "", "a name for the eval (default: the task set's file name)")
	fl.StringVar(&f.resume, "resume", "", "go on with this eval (its id): scored tasks are kept, cut-off runs followed, the rest run")
	fl.IntVar(&f.retryFailed, "retry-failed", 0, "run a task again, up to this many times, when its run failed for an infrastructure reason")
	fl.Lookup("retry-failed").NoOptDefVal = "1"
	fl.StringVar(&f.judge.BaseURL, "scorer-model-base-url", "", "model server of the judge scorer (default: the agent's)")
	fl.StringVar(&f.judge.Name, "scorer-model", "", "model of the judge scorer (default: the agent's)")
	fl.StringVar(&f.dashboardURL, "dashboard-url", "", "base URL of the dashboard, for links from the HTML report to each run")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress line")
	cmd.AddCommand(newEvalReportCmd(g), newEvalCompareCmd(g), newEvalRescoreCmd(g), newEvalExportCmd(g))
	return cmd
}

// baseProfile turns the run flags into the profile the built-in profiles
// apply to.
func (f *evalFlags) baseProfile(stdin io.Reader, workRoot string, resume bool) (catalog.EvalProfile, error) {
	rf := f.run
	rf.task, rf.taskFile, rf.workDir = "eval", "", workRoot
	// A profiles file may name the model itself: the flags then need not.
	// So may a resumed eval, which runs the recorded profiles.
	noModel := (f.profilesFile != "" || resume) && rf.model.BaseURL == "" && rf.model.Name == ""
	if noModel {
		rf.model.BaseURL, rf.model.Name = "http://127.0.0.1", "from-the-profiles-file"
	}
	cfg, err := rf.config(stdin)
	if err != nil {
		return catalog.EvalProfile{}, err
	}
	if noModel {
		cfg.Model.BaseURL, cfg.Model.Name = "", ""
	}
	return catalog.EvalProfile{Model: cfg.Model, MaxSteps: cfg.MaxSteps, Policy: cfg.Policy, Sandbox: cfg.Sandbox, VerifyFast: cfg.VerifyFast}, nil
}

func runEval(ctx context.Context, g *globals, cmd *cobra.Command, taskFile string, f evalFlags,
	sf sandboxFlags, vf verifierFlags, af agentFlags, log *slog.Logger) error {
	tasks, digest, err := eval.ParseTaskFile(taskFile)
	if err != nil {
		return usageError{err}
	}
	evalID := f.evalID
	resume := f.resume != ""
	if resume {
		if f.evalID != "" && f.evalID != f.resume {
			return usageError{errors.New("--eval-id and --resume name different evals")}
		}
		evalID = f.resume
	}
	if evalID == "" {
		evalID = bus.NewULIDSource(nil).NewID(time.Now())
	}
	if err := bus.ValidateRunID(evalID); err != nil {
		return usageError{fmt.Errorf("eval id: %w", err)}
	}
	workRoot := f.workRoot
	if workRoot == "" {
		workRoot = filepath.Join(runsDir(f.run.dataDir), "evals", evalID)
	}
	if workRoot, err = filepath.Abs(workRoot); err != nil {
		return usageError{err}
	}
	if err := os.MkdirAll(workRoot, 0o755); err != nil {
		return fmt.Errorf("create the work root: %w", err)
	}
	base, err := f.baseProfile(cmd.InOrStdin(), workRoot, resume)
	if err != nil {
		return usageError{err}
	}
	var profiles []catalog.EvalProfile
	if !resume || cmd.Flags().Changed("profiles") || f.profilesFile != "" {
		var fileProfiles map[string]catalog.EvalProfile
		if f.profilesFile != "" {
			r, err := os.Open(f.profilesFile)
			if err != nil {
				return usageError{fmt.Errorf("--profiles-file: %w", err)}
			}
			fileProfiles, _, err = eval.ParseProfiles(r, f.profilesFile)
			r.Close()
			if err != nil {
				return usageError{err}
			}
		}
		if profiles, err = eval.ResolveProfiles(f.profiles, fileProfiles, base); err != nil {
			return usageError{err}
		}
	}
	judge := base.Model
	if judge.Name == "" && len(profiles) > 0 {
		judge = profiles[0].Model
	}
	if f.judge.BaseURL != "" {
		judge.BaseURL = f.judge.BaseURL
	}
	if f.judge.Name != "" {
		judge.Name = f.judge.Name
	}
	// The key variables the model clients of this process may read: the
	// embedded components' (they run the profiles) and the judge
	// scorer's, which runs here even with --nats-url. A profile or judge
	// naming another stops the eval before anything is published.
	keys, err := f.run.keyEnvs(vf)
	if err != nil {
		return err
	}
	keys = keys.For("vera eval")
	if !externalBus(cmd) {
		if err := checkProfileKeys(keys, profiles, verifyFastSettings(vf)); err != nil {
			return err
		}
	}
	if err := checkJudgeKeys(keys, tasks, judge); err != nil {
		return err
	}

	b, err := openTaskBus(ctx, g, cmd, f.run.dataDir, f.run.natsListen, "vera-eval", log)
	if err != nil {
		return err
	}
	defer b.close()
	// A task set never chooses what is mounted: its input dirs must lie
	// under the --input-root directories the person typed.
	if !b.external {
		if err := checkEvalInputs(tasks, sf.inputRoots); err != nil {
			return err
		}
	}
	external, url := b.external, b.url

	if resume && (judge.Name == "" || (len(profiles) == 0 && !external)) {
		if started, _, _, ok, err := runner.ReadEval(ctx, b.Bus, evalID); err == nil && ok && len(started.Profiles) > 0 {
			if judge.Name == "" {
				// The recorded profiles' first model, as on the first run.
				judge = started.Profiles[0].Model
				if f.judge.BaseURL != "" {
					judge.BaseURL = f.judge.BaseURL
				}
				if f.judge.Name != "" {
					judge.Name = f.judge.Name
				}
				if err := checkJudgeKeys(keys, tasks, judge); err != nil {
					return err
				}
			}
			if len(profiles) == 0 && !external {
				// The recorded profiles run again here.
				if err := checkProfileKeys(keys, started.Profiles, verifyFastSettings(vf)); err != nil {
					return err
				}
			}
		}
	}
	if err := b.startComponents(ctx, sf, vf, af, keys, []string{workRoot}, nil); err != nil {
		return err
	}
	for _, t := range tasks {
		if t.Scorer.Type == eval.ScorerJudge && (judge.Name == "" || judge.BaseURL == "") {
			return usageError{fmt.Errorf("task %s is scored by a judge model: give --scorer-model and --scorer-model-base-url (or the agent's --model and --model-base-url)", t.ID)}
		}
	}
	models := wiring.NewRecordingModels(b.Bus, log, keys)
	defer models.Close()
	submittedBy := "cli"
	if u := os.Getenv("USER"); u != "" {
		submittedBy = "cli:" + u
	}
	w := g.stdout
	bar := newEvalProgress(g.stderr, !f.quiet && isTerminal(g.stderr))
	fmt.Fprintf(w, "eval %s: %d tasks × %s, %d at a time (work dirs under %s)\n", evalID, len(tasks), profileList(profiles, resume), f.concurrency, workRoot)
	if external {
		fmt.Fprintf(w, "  bus %s (watch: vera events tail --run %s)\n", url, evalID)
	}
	name := f.name
	if name == "" && !resume {
		name = filepath.Base(taskFile)
	}
	res, runErr := runner.Run(ctx, b.Bus, runner.Options{
		EvalID: evalID, Name: name, TaskSet: taskFile, TaskSetSHA256: digest, Tasks: tasks, Profiles: profiles,
		Concurrency: f.concurrency, Timeout: f.timeout, WorkRoot: workRoot, Resume: resume, RetryFailed: f.retryFailed,
		ScorerFor: scorers(models, judge, evalID), SubmittedBy: submittedBy, Progress: bar.update, Logger: log,
	})
	bar.done()
	if res == nil {
		if ctx.Err() != nil {
			return exitError{code: exitCancelled, err: runErr}
		}
		return runErr
	}
	res.Report.DashboardURL = f.dashboardURL
	if err := report.Text(w, res.Report); err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%d runs submitted, %d followed, %d scored from earlier runs, in %s\n", res.Submitted, res.Followed, res.Rescored, res.Duration.Round(time.Millisecond))
	if f.out != "" {
		if err := writeEvalReports(f.out, res.Report); err != nil {
			return err
		}
		fmt.Fprintf(w, "report: %s\n", filepath.Join(f.out, "report.html"))
	}
	if res.Interrupted {
		fmt.Fprintf(g.stderr, "eval interrupted: go on with vera eval %s --resume %s\n", taskFile, evalID)
		return exitError{code: exitCancelled}
	}
	return runErr
}

func profileList(ps []catalog.EvalProfile, resume bool) string {
	if len(ps) == 0 && resume {
		return "the recorded profiles"
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// writeEvalReports writes report.txt, report.json and report.html.
func writeEvalReports(dir string, r eval.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for name, render := range map[string]func(io.Writer, eval.Report) error{
		"report.txt": report.Text, "report.json": report.JSON, "report.html": report.HTML,
	} {
		if err := writeFileWith(filepath.Join(dir, name), func(w io.Writer) error { return render(w, r) }); err != nil {
			return err
		}
	}
	return nil
}

func writeFileWith(path string, write func(io.Writer) error) error {
	w, commit, abort, err := openOutput(path, nil)
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		abort()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := commit(); err != nil {
		return err
	}
	return os.Chmod(path, 0o644) // a report, for whoever may read the directory
}

// evalProgress draws the eval's progress line on a terminal, and prints
// one line per scored task otherwise.
type evalProgress struct {
	w     io.Writer
	tty   bool
	start time.Time
}

func newEvalProgress(w io.Writer, tty bool) *evalProgress {
	return &evalProgress{w: w, tty: tty, start: time.Now()}
}

func (p *evalProgress) update(pr runner.Progress) {
	if p.tty {
		width := 30
		filled := 0
		if pr.Expected > 0 {
			filled = pr.Scored * width / pr.Expected
		}
		fmt.Fprintf(p.w, "\r\x1b[K[%s%s] %d/%d scored · %d running · %d correct · %d infra · %s",
			strings.Repeat("#", filled), strings.Repeat(".", width-filled), pr.Scored, pr.Expected, pr.Running, pr.Correct, pr.Infra,
			time.Since(p.start).Round(time.Second))
		return
	}
	if pr.Event == "scored" {
		mark := "wrong"
		if pr.Last.Correct {
			mark = "correct"
		}
		if pr.Last.Infra {
			mark = "infra failure"
		}
		fmt.Fprintf(p.w, "[%d/%d] %s × %s: %s (%s, %d rounds, run %s)\n", pr.Scored, pr.Expected, pr.Last.TaskID, pr.Last.Profile, mark,
			outcomeText(pr.Last.Outcome), len(pr.Last.Rounds), pr.Last.RunID)
	}
}

func outcomeText(o catalog.Outcome) string {
	if o == "" {
		return "did not end"
	}
	return string(o)
}

func (p *evalProgress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// loadReport reads an eval's report from the bus (an eval id) or from a
// report.json file.
func loadReport(ctx context.Context, g *globals, cmd *cobra.Command, ref string) (eval.Report, error) {
	if st, err := os.Stat(ref); err == nil && !st.IsDir() {
		data, err := os.ReadFile(ref)
		if err != nil {
			return eval.Report{}, err
		}
		var r eval.Report
		if err := json.Unmarshal(data, &r); err != nil {
			return eval.Report{}, fmt.Errorf("%s: not a report.json: %w", ref, err)
		}
		return r, nil
	}
	if err := bus.ValidateRunID(ref); err != nil {
		return eval.Report{}, usageError{fmt.Errorf("%s is neither a file nor an eval id", ref)}
	}
	b, _, err := g.openBus(cmd, catalog.ComponentCLI, true)
	if err != nil {
		return eval.Report{}, err
	}
	defer b.Close()
	started, at, scored, ok, err := runner.ReadEval(ctx, b, ref)
	if err != nil {
		return eval.Report{}, err
	}
	if !ok {
		return eval.Report{}, fmt.Errorf("eval %s: not on the bus (no vera.eval.started)", ref)
	}
	r := eval.SummarizeRecorded(started, ref, at, scored)
	return r, nil
}

func newEvalReportCmd(g *globals) *cobra.Command {
	var format, out, dashboardURL string
	cmd := &cobra.Command{
		Use:   "report EVAL_ID|report.json",
		Short: "Render an eval's report again, from its events on the bus or a report.json",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := loadReport(cmd.Context(), g, cmd, args[0])
			if err != nil {
				return err
			}
			if dashboardURL != "" {
				r.DashboardURL = dashboardURL
			}
			render := map[string]func(io.Writer, eval.Report) error{"text": report.Text, "json": report.JSON, "html": report.HTML}[format]
			if render == nil {
				return usageError{fmt.Errorf("--format %q: want text, json or html", format)}
			}
			if out == "" || out == "-" {
				return render(g.stdout, r)
			}
			return writeFileWith(out, func(w io.Writer) error { return render(w, r) })
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "text, json or html")
	cmd.Flags().StringVarP(&out, "output", "o", "", "write to this file instead of standard output")
	cmd.Flags().StringVar(&dashboardURL, "dashboard-url", "", "base URL of the dashboard, for links to each run")
	return cmd
}

func newEvalCompareCmd(g *globals) *cobra.Command {
	var html string
	cmd := &cobra.Command{
		Use:   "compare A B",
		Short: "Put two evals side by side (eval ids or report.json files), with the per-task differences",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := loadReport(cmd.Context(), g, cmd, args[0])
			if err != nil {
				return err
			}
			b, err := loadReport(cmd.Context(), g, cmd, args[1])
			if err != nil {
				return err
			}
			c := report.Compare(a, b)
			if err := report.CompareText(g.stdout, c); err != nil {
				return err
			}
			if html != "" {
				return writeFileWith(html, func(w io.Writer) error { return report.CompareHTML(w, c) })
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&html, "html", "", "also write the comparison as a self-contained HTML page")
	return cmd
}

func newEvalRescoreCmd(g *globals) *cobra.Command {
	var out, judgeURL, judgeName, apiKeyEnv string
	var reverify, noSandbox bool
	var auditorURL, auditorName string
	var timeout time.Duration
	var sf sandboxFlags
	var kf keyEnvFlags
	cmd := &cobra.Command{
		Use:   "rescore EVAL_ID TASKS.jsonl",
		Short: "Score a finished eval's runs again: changed scorers, or a newer auditor (--reverify)",
		Long: `Score every run of a finished eval again, with the scorers and references of
TASKS.jsonl (same task ids; a changed scorer, tolerance or reference is the
point), and store the result as a new eval (vera.eval.* events whose runs
are the original's), printed and comparable with vera eval compare. No
agent runs.

With --reverify, each run is first re-verified as vera replay --reverify
does: a copy of the run (labels replay_of, replay_mode=reverify) whose
submitted answers today's auditor judges again (--auditor-model to change
its model; the auditor's commands run in the sandbox unless --no-sandbox).
The copy is what is scored: the answers are the recorded ones, the verdicts
are new, so the accuracy by round and the auditor's precision and recall
are today's auditor's; the first and final answers are unchanged.`,
		Example: `  vera eval rescore 01JX0Q6R2V4X7B9C3D5E7F9G1H tasks-v2.jsonl
  vera eval rescore 01JX0Q6R2V4X7B9C3D5E7F9G1H tasks.jsonl --reverify --auditor-model qwen3-32b --auditor-model-base-url http://127.0.0.1:1234`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := g.quietLogger(cmd)
			if err != nil {
				return err
			}
			tasks, digest, err := eval.ParseTaskFile(args[1])
			if err != nil {
				return usageError{err}
			}
			if !reverify && (auditorURL != "" || auditorName != "" || noSandbox) {
				return usageError{errors.New("--auditor-model, --auditor-model-base-url and --no-sandbox go with --reverify")}
			}
			// The judge scorer and the re-verifying auditor run here, on
			// models the recorded eval names: they read only the key
			// variables allowed here.
			keys, err := kf.keys(apiKeyEnv)
			if err != nil {
				return err
			}
			keys = keys.For("vera eval rescore")
			ctx := cmd.Context()
			var b *bus.Bus
			if reverify {
				// The re-verified copies hold the events of several
				// components: admin's, as for vera replay --reverify.
				b, err = g.connectAs(ctx, auth.Admin, catalog.ComponentCLI, false, log)
			} else {
				b, _, err = g.openBus(cmd, catalog.ComponentCLI, false)
			}
			if err != nil {
				return err
			}
			defer b.Close()
			started, _, scored, ok, err := runner.ReadEval(ctx, b, args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("eval %s: not on the bus (no vera.eval.started)", args[0])
			}
			judge := catalog.ModelConfig{BaseURL: judgeURL, Name: judgeName, APIKeyEnv: apiKeyEnv}
			if judge.Name == "" && len(started.Profiles) > 0 {
				judge = started.Profiles[0].Model
			}
			if err := checkJudgeKeys(keys, tasks, judge); err != nil {
				return err
			}
			models := wiring.NewRecordingModels(b, log, keys)
			defer models.Close()
			key := digest
			if reverify {
				key += "/reverify/" + auditorURL + "/" + auditorName + "/" + time.Now().UTC().Format(time.RFC3339Nano)
			}
			newID := bus.DeriveID(args[0], args[0], "eval/rescore/"+key)
			opts := runner.RescoreOptions{
				From: args[0], EvalID: newID, TaskSet: args[1], TaskSetSHA256: digest, Tasks: tasks, Started: started, Scored: scored,
				ScorerFor: scorers(models, judge, newID),
				Progress: func(done, total int, s catalog.EvalTaskScored) {
					fmt.Fprintf(g.stderr, "[%d/%d] %s × %s: correct %v (run %s)\n", done, total, s.TaskID, s.Profile, s.Correct, s.RunID)
				},
			}
			if reverify {
				ro := replay.ReverifyOptions{Dest: b, Audit: replay.AuditAlways, Timeout: timeout, Logger: log}
				if auditorURL != "" || auditorName != "" {
					m := judge
					if len(started.Profiles) > 0 {
						m = started.Profiles[0].Model
					}
					if auditorURL != "" {
						m.BaseURL = auditorURL
					}
					if auditorName != "" {
						m.Name = auditorName
					}
					if err := checkKeys(keys, "", []namedModel{{"the auditor's model", m}}); err != nil {
						return err
					}
					ro.AuditModel = &m
				}
				if !noSandbox {
					sb, closeSB, err := replaySandbox(ctx, sf)
					if err != nil {
						fmt.Fprintf(g.stderr, "the auditor's commands will not run: %v\n", err)
					} else {
						defer closeSB()
						ro.Sandbox = sb
					}
				}
				opts.Reverify = func(ctx context.Context, runID string) (string, error) {
					if ro.AuditModel == nil {
						// Each run's recorded auditor model.
						if err := checkRecordedKeys(ctx, b, runID, keys, true); err != nil {
							return "", err
						}
					}
					o := ro
					work, err := os.MkdirTemp("", "vera-reverify-")
					if err != nil {
						return "", err
					}
					o.WorkDir = work
					res, err := replay.Reverify(ctx, b, runID, o)
					if err != nil {
						return "", err
					}
					return res.NewRun, nil
				}
			}
			r, err := runner.Rescore(ctx, b, opts)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "rescored eval %s as eval %s\n", args[0], newID)
			if err := report.Text(g.stdout, r); err != nil {
				return err
			}
			if out != "" {
				return writeEvalReports(out, r)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "write report.txt, report.json and report.html into this directory")
	fl.StringVar(&judgeURL, "scorer-model-base-url", "", "model server of the judge scorer (default: the eval's first profile's)")
	fl.StringVar(&judgeName, "scorer-model", "", "model of the judge scorer (default: the eval's first profile's)")
	fl.StringVar(&apiKeyEnv, "scorer-api-key-env", "", "NAME of the environment variable holding the judge's API key")
	fl.BoolVar(&reverify, "reverify", false, "judge every run's answers again with today's auditor first (vera replay --reverify), and score those copies")
	fl.StringVar(&auditorURL, "auditor-model-base-url", "", "--reverify: the auditor's model server (default: each run's)")
	fl.StringVar(&auditorName, "auditor-model", "", "--reverify: the auditor's model (default: each run's)")
	fl.BoolVar(&noSandbox, "no-sandbox", false, "--reverify: do not run the auditor's commands")
	fl.DurationVar(&timeout, "timeout", replay.DefaultTimeout, "--reverify: how long to wait for the auditor on one run")
	fl.StringVar(&sf.image, "image", os.Getenv("VERA_SANDBOX_IMAGE"), "--reverify: sandbox image; default the one `vera sandbox build` made (env VERA_SANDBOX_IMAGE)")
	fl.StringVar(&sf.network, "network", envOr("VERA_SANDBOX_NETWORK", sandboxd.DefaultNetwork), "--reverify: Docker network of the auditor's sandboxes")
	kf.register(cmd)
	return cmd
}

func newEvalExportCmd(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "export EVAL_ID -o FILE",
		Short: "Export an eval and every run it scored into one file, for vera events import elsewhere",
		Long: `Write the eval's own events and those of every run it scored (every
attempt) into one export file, in vera events export's format: vera events
import loads it into another bus, where vera eval report, compare and
rescore work on it as here.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError{errors.New("-o FILE is required")}
			}
			b, _, err := g.openBus(cmd, catalog.ComponentCLI, true)
			if err != nil {
				return err
			}
			defer b.Close()
			ctx := cmd.Context()
			_, _, scored, ok, err := runner.ReadEval(ctx, b, args[0])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("eval %s: not on the bus (no vera.eval.started)", args[0])
			}
			runs := []string{args[0]}
			seen := map[string]bool{args[0]: true}
			for _, s := range scored {
				if !seen[s.RunID] {
					seen[s.RunID] = true
					runs = append(runs, s.RunID)
				}
			}
			var total bus.ExportStats
			err = writeFileWith(out, func(w io.Writer) error {
				for _, run := range runs {
					st, err := b.Export(ctx, w, bus.ExportOptions{RunID: run})
					if err != nil {
						return fmt.Errorf("export run %s: %w", run, err)
					}
					total.Events += st.Events
					total.Blobs += st.Blobs
				}
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "exported eval %s and %d runs: %d events, %d blobs → %s\n", args[0], len(runs)-1, total.Events, total.Blobs, out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the export file")
	return cmd
}

// scorers returns an eval's scorers (eval.NewScorer): a judge's calls go
// through models' client of judge and are recorded on the eval runID. The
// runner calls it from several workers at once.
func scorers(models *wiring.RecordingModels, judge catalog.ModelConfig, runID string) func(eval.ScorerSpec) (eval.Scorer, error) {
	return func(spec eval.ScorerSpec) (eval.Scorer, error) {
		var c llm.Completer
		if spec.Type == eval.ScorerJudge {
			m, err := models.Get(runID, judge)
			if err != nil {
				return nil, err
			}
			c = onRun{m, runID}
		}
		return eval.NewScorer(spec, c, judge.Name)
	}
}

// onRun records a judge's model calls on the eval's id: they are the
// eval's model I/O, like a run's.
type onRun struct {
	llm.Completer
	runID string
}

func (o onRun) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	req.RunID = o.runID
	return o.Completer.Complete(ctx, req)
}

// checkProfileKeys refuses profiles whose model settings name an API key
// variable keys does not allow (the components would refuse their runs).
func checkProfileKeys(keys *llm.KeyEnvs, profiles []catalog.EvalProfile, settings *verifyfast.Settings) error {
	for _, p := range profiles {
		cfg := catalog.RunConfig{Model: p.Model, Auditor: p.Auditor, VerifyFast: p.VerifyFast}
		if err := checkKeys(keys, "profile "+p.Name+" ", runModels(cfg, settings)); err != nil {
			return err
		}
	}
	return nil
}

// checkJudgeKeys refuses a judge scorer model (when a task is scored by
// one) whose api_key_env keys does not allow: the judge runs in this
// process.
func checkJudgeKeys(keys *llm.KeyEnvs, tasks []eval.Task, judge catalog.ModelConfig) error {
	for _, t := range tasks {
		if t.Scorer.Type == eval.ScorerJudge {
			return checkKeys(keys, "", []namedModel{{"the judge scorer's model", judge}})
		}
	}
	return nil
}

// checkEvalInputs refuses a task set whose tasks name input dirs outside
// the input roots; nothing has run yet.
func checkEvalInputs(tasks []eval.Task, inputRoots []string) error {
	dirs := map[string]string{}
	for _, t := range tasks {
		if t.InputDir != "" {
			dirs["task "+t.ID] = t.InputDir
		}
	}
	return checkInputDirs(dirs, inputRoots)
}

// checkInputDirs refuses input dirs (by what names them) that lie outside
// the input roots after resolving links, listing them and the flag that
// allows them: a task set or a recorded run never chooses what is mounted
// into the sandbox, the person typing the command does.
func checkInputDirs(dirs map[string]string, inputRoots []string) error {
	roots, err := rundir.NewRoots(inputRoots...)
	if err != nil {
		return usageError{fmt.Errorf("--input-root: %w", err)}
	}
	var bad []string
	for who, dir := range dirs {
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s: input_dir %s: %v", who, dir, err))
			continue
		}
		if !roots.Contains(real) {
			bad = append(bad, fmt.Sprintf("%s: input_dir %s", who, dir))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	const most = 10
	more := ""
	if len(bad) > most {
		more = fmt.Sprintf("\n  … and %d more", len(bad)-most)
		bad = bad[:most]
	}
	return usageError{fmt.Errorf("input dirs outside the input roots (nothing ran): the directory holding them must be named with --input-root DIR (mounted read-only at /input):\n  %s%s",
		strings.Join(bad, "\n  "), more)}
}
