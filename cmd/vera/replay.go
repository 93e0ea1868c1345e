package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/replay"
	"github.com/vera-run/vera/sandboxd"
)

func init() { register(newReplayCmd) }

// exitDiverged is the exit status of `vera replay --reexecute` when the
// re-execution departed from the recording.
const exitDiverged = 3

func newReplayCmd(g *globals) *cobra.Command {
	var (
		run, out, save, newRun, workDir, onDivergence string
		force, reverify, reexecute, asJSON            bool
		noAudit, noSandbox                            bool
		window                                        int
		timeout                                       time.Duration
		model                                         modelFlags
		sf                                            sandboxFlags
		kf                                            keyEnvFlags
	)
	cmd := &cobra.Command{
		Use:   "replay [FILE] [--run ID] [--out DIR] [--reverify | --reexecute]",
		Short: "Rebuild, re-verify or re-execute a recorded run",
		Long: `Replay a recorded run: an export file (vera events export), or --run ID on the
bus. Without --nats-url a FILE is loaded into a private in-process NATS server
(its store in a temporary directory, removed afterwards); with --nats-url it is
imported into that bus (idempotently) and replay runs are stored there.

Plain replay writes into --out DIR every file the projector makes (notes.md,
evidence.jsonl, move_ledger.jsonl, query_ledger.jsonl, trace.jsonl,
container.log, container_events.log, session.log) and metrics.prom, with the
projector's own code: byte-identical to the live projection of the run.
It only reads the bus.

--reverify runs the current verifiers over the recording and writes their
verdicts as events of a NEW run (a fresh id; its task is labelled replay_of
and replay_mode; the original is never touched): the logic verifier over every
agent step and, when a model is given (--model-base-url and --model) or the
recording enabled its auditor, the DeepVerifier auditor over the candidate
answers (a recording without audit requests gets one per submitted answer).
The auditor's commands run in the sandbox when Docker is reachable. It prints
the verdict of every step (recorded and replayed) and the audit scores.

--reexecute runs the agent again on the recorded task, in a new run: model
replies come from the recorded model I/O (by call id, only when the prompt is
the recorded one), commands really run in the sandbox (Docker and the sandbox
image are needed when the recording ran commands). It reports where the new
run diverges from the recording: a model call the recording lacks, a changed
prompt, a changed step, a different command result or end. With
--on-divergence stop (the default) the run is stopped at the first divergence.
Exit status 3 when it diverged.

The auditor of --reverify reads no other API key variable than the one
--model-api-key-env names, $VERA_API_KEY_ENV's and those of
--allow-api-key-env (without it, OPENAI_API_KEY): a recording whose auditor
model names another (a recording may come from anyone) stops the command
before the auditor starts.

The verifiers and the agent of --reverify and --reexecute run on a private
scratch bus holding only the new run; the new run is then copied to the bus
(when there is one), to --save FILE and, with --out, projected into DIR (also
the new run's work dir).`,
		Example: `  vera replay run.jsonl --out replayed/
  vera replay --run 01JD7Q0G7W9C6S4ZKX3N2B5M8E --out replayed/
  vera replay run.jsonl --reverify --model-base-url http://127.0.0.1:1234 --model qwen3
  vera replay --run r42 --reexecute --on-divergence continue --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			file := ""
			if len(args) == 1 {
				file = args[0]
			}
			switch {
			case file == "" && run == "":
				return usageError{errors.New("name a recorded run: an export FILE or --run ID")}
			case reverify && reexecute:
				return usageError{errors.New("--reverify and --reexecute do not go together")}
			case !reverify && !reexecute && out == "":
				return usageError{errors.New("--out DIR is required (where the files go)")}
			case onDivergence != "stop" && onDivergence != "continue":
				return usageError{fmt.Errorf("--on-divergence %q: want stop or continue", onDivergence)}
			case (model.baseURL == "") != (model.model == ""):
				return usageError{errors.New("--model-base-url and --model go together")}
			}
			if run != "" {
				if err := bus.ValidateRunID(run); err != nil {
					return usageError{fmt.Errorf("--run: %w", err)}
				}
			}
			if newRun != "" {
				if err := bus.ValidateRunID(newRun); err != nil {
					return usageError{fmt.Errorf("--new-run: %w", err)}
				}
			}
			keys, err := kf.keys(model.apiKeyEnv)
			if err != nil {
				return err
			}
			keys = keys.For("vera replay")
			log, err := g.quietLogger(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			say := func(format string, a ...any) { fmt.Fprintf(g.stderr, "vera replay: "+format+"\n", a...) }
			if out != "" {
				if err := replay.PrepareOut(out, force); err != nil {
					if errors.Is(err, replay.ErrNotEmpty) {
						return usageError{err}
					}
					return err
				}
			}

			// The recording.
			external := cmd.Flags().Changed("nats-url") || os.Getenv("NATS_URL") != ""
			var dest *bus.Bus
			var sess *replay.Session
			switch {
			case file != "" && !external:
				say("loading %s into a private NATS server", file)
				p := newProgress(g.stderr)
				sess, err = replay.OpenFile(ctx, file, replay.OpenOptions{Logger: log, Progress: func(st bus.ImportStats) {
					p.update("importing: %d lines, %d events, %d blobs", st.Lines, st.Imported, st.Blobs)
				}})
				p.done()
			default:
				readOnly := file == "" && !reverify && !reexecute
				// Re-verifying or re-executing onto this bus publishes the
				// events of several components: admin's.
				identity := auth.Admin
				if readOnly {
					identity = auth.Reader
				}
				b, cerr := g.connectAs(ctx, identity, catalog.ComponentCLI, readOnly, log)
				if cerr != nil {
					return cerr
				}
				defer b.Close()
				if !readOnly {
					dest = b
				}
				if file != "" {
					say("importing %s into the bus at %s", file, g.natsURL)
					sess, err = replay.OpenFile(ctx, file, replay.OpenOptions{Bus: b, Logger: log})
				} else {
					sess, err = replay.OpenBus(ctx, b, run)
				}
			}
			if err != nil {
				return err
			}
			defer sess.Close()
			runID, err := sess.RunID(run)
			if err != nil {
				return err
			}

			var saveW io.Writer
			if save != "" {
				f, err := os.Create(save)
				if err != nil {
					return fmt.Errorf("--save: %w", err)
				}
				defer f.Close()
				saveW = f
			}
			if (reverify || reexecute) && dest == nil && save == "" && out == "" {
				say("note: the replay run lives only in the private bus: keep it with --out DIR or --save FILE")
			}

			switch {
			case reverify:
				opts := replay.ReverifyOptions{NewRunID: newRun, WorkDir: workDir, Out: out, Dest: dest, Save: saveW,
					Window: window, Timeout: timeout, Logger: log, Progress: say}
				if noAudit {
					opts.Audit = replay.AuditNever
				}
				if model.baseURL != "" {
					opts.AuditModel = &catalog.ModelConfig{BaseURL: model.baseURL, Name: model.model, APIKeyEnv: model.apiKeyEnv}
					if err := checkKeys(keys, "", []namedModel{{"--model-api-key-env", *opts.AuditModel}}); err != nil {
						return err
					}
				} else if !noAudit {
					// The recording's own auditor model: the auditor
					// would send that variable to that server.
					if err := checkRecordedKeys(ctx, sess.Bus, runID, keys, false); err != nil {
						return err
					}
				}
				if !noAudit && !noSandbox {
					sb, closeSB, err := replaySandbox(ctx, sf)
					if err != nil {
						say("the auditor's commands will not run: %v", err)
					} else {
						defer closeSB()
						opts.Sandbox = sb
					}
				}
				res, err := replay.Reverify(ctx, sess.Bus, runID, opts)
				if err != nil {
					return err
				}
				if err := closeSave(saveW); err != nil {
					return err
				}
				return writeResult(g.stdout, asJSON, res, res.WriteText)
			case reexecute:
				opts := replay.ReexecuteOptions{NewRunID: newRun, WorkDir: workDir, Out: out, Dest: dest, Save: saveW,
					StopOnDivergence: onDivergence == "stop", Window: window, Timeout: timeout, Logger: log, Progress: say}
				sb, closeSB, err := replaySandbox(ctx, sf)
				if err != nil {
					say("no sandbox: %v (a recording that ran commands cannot be re-executed)", err)
				} else {
					defer closeSB()
					opts.Sandbox = sb
				}
				res, err := replay.Reexecute(ctx, sess.Bus, runID, opts)
				if err != nil {
					return err
				}
				if err := closeSave(saveW); err != nil {
					return err
				}
				if err := writeResult(g.stdout, asJSON, res, res.WriteText); err != nil {
					return err
				}
				if res.Diverged() {
					return exitError{exitDiverged, nil}
				}
				return nil
			}
			say("rebuilding run %s into %s", runID, out)
			res, err := replay.Rebuild(ctx, sess.Bus, runID, out, replay.RebuildOptions{Force: true, Logger: log})
			if err != nil {
				return err
			}
			return writeResult(g.stdout, asJSON, res, func(w io.Writer) error {
				fmt.Fprintf(w, "replayed run %s (%d events) into %s\n", res.RunID, res.Events, res.Dir)
				for _, name := range replay.OutputFiles() {
					fmt.Fprintf(w, "  %-22s %d bytes\n", name, res.Files[name])
				}
				if res.Malformed > 0 {
					fmt.Fprintf(w, "  %d stored message(s) were not valid events (counted in vera_events_malformed_total)\n", res.Malformed)
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&run, "run", "", "the run to replay: on the bus, or which run of a FILE holding several")
	f.StringVar(&out, "out", "", "directory that receives the projected files and metrics.prom (for --reverify/--reexecute: those of the new run, also its work dir)")
	f.BoolVar(&force, "force", false, "write into a non-empty --out directory")
	f.BoolVar(&reverify, "reverify", false, "run the current verifiers over the recording; verdicts go to a new run")
	f.BoolVar(&reexecute, "reexecute", false, "run the agent again with the recorded model replies and real commands; report divergences")
	f.StringVar(&onDivergence, "on-divergence", "stop", "--reexecute: stop at the first divergence, or continue while the recording can answer")
	f.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.StringVar(&save, "save", "", "--reverify/--reexecute: also write the new run as an export FILE")
	f.StringVar(&newRun, "new-run", "", "--reverify/--reexecute: id of the new run (default a fresh ULID)")
	f.StringVar(&workDir, "work-dir", "", "--reverify/--reexecute: work dir of the new run (default --out, else a new temporary directory)")
	f.BoolVar(&noAudit, "no-audit", false, "--reverify: run the logic verifier only")
	f.BoolVar(&noSandbox, "no-sandbox", false, "--reverify: do not run the auditor's commands")
	f.IntVar(&window, "repetition-window", 0, "logic verifier: steps of the same action that make a repetition (default its own, 3)")
	f.DurationVar(&timeout, "timeout", replay.DefaultTimeout, "--reverify/--reexecute: how long to wait for the verifiers or the run")
	model.register(cmd, "model-", "--reverify auditor model (default the recorded run's)")
	f.StringVar(&sf.image, "image", os.Getenv("VERA_SANDBOX_IMAGE"), "sandbox image; default the one `vera sandbox build` made (env VERA_SANDBOX_IMAGE)")
	f.StringVar(&sf.network, "network", envOr("VERA_SANDBOX_NETWORK", sandboxd.DefaultNetwork), "Docker network of sandboxes: bridge, none, or a network name")
	f.BoolVar(&sf.lab, "lab", false, "LAB MODE: run sandboxes privileged as root (no isolation; trusted machines only)")
	kf.register(cmd)
	return cmd
}

// checkRecordedKeys refuses (a usage error) a recorded run whose auditor
// model (its agent's when it has none) names an API key variable keys
// does not allow: re-verifying it would send that variable to the server
// the recording names. It reads the run's vera.task.submitted and
// vera.run.started; a run whose auditor is off is not audited unless
// always (replay.AuditAlways).
func checkRecordedKeys(ctx context.Context, b *bus.Bus, runID string, keys *llm.KeyEnvs, always bool) error {
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: runID, Types: []string{catalog.TypeTaskSubmitted, catalog.TypeRunStarted}, Direct: true}) {
		if err != nil {
			return fmt.Errorf("read run %s: %w", runID, err)
		}
		if rec.Err != nil {
			continue
		}
		var cfg catalog.RunConfig
		switch rec.Event.Type {
		case catalog.TypeTaskSubmitted:
			var d catalog.TaskSubmitted
			if rec.Event.DecodeData(&d) != nil {
				continue
			}
			cfg = d.RunConfig
		case catalog.TypeRunStarted:
			var d catalog.RunStarted
			if rec.Event.DecodeData(&d) != nil {
				continue
			}
			cfg = d.Config
		default:
			continue
		}
		if !always && !cfg.Auditor.Enabled {
			continue
		}
		m := namedModel{"model (the auditor's: the run has no auditor model)", cfg.Model}
		if cfg.Auditor.Model != nil {
			m = namedModel{"auditor model", *cfg.Auditor.Model}
		}
		if err := checkKeys(keys, "recorded run "+runID+": ", []namedModel{m}); err != nil {
			return err
		}
	}
	return nil
}

// replaySandbox connects to Docker for a replay's commands.
func replaySandbox(ctx context.Context, sf sandboxFlags) (*replay.Sandbox, func(), error) {
	docker, err := sandboxd.NewDockerClient()
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := docker.Ping(pctx); err != nil {
		docker.Close()
		return nil, nil, fmt.Errorf("Docker is not reachable: %w", err)
	}
	img := sf.image
	if img == "" {
		img = defaultSandboxImage(ctx, docker)
	}
	if _, err := docker.ImageInspect(ctx, img); err != nil {
		docker.Close()
		return nil, nil, fmt.Errorf("sandbox image %s: %w (build it with `vera sandbox build`)", img, err)
	}
	cfg := sandboxd.Config{Image: img, Network: sf.network, Lab: sf.lab}
	return &replay.Sandbox{Docker: docker, Config: cfg}, func() { docker.Close() }, nil
}

func closeSave(w io.Writer) error {
	if f, ok := w.(*os.File); ok {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
	}
	return nil
}

// writeResult prints v as indented JSON, or with text.
func writeResult(w io.Writer, asJSON bool, v any, text func(io.Writer) error) error {
	if !asJSON {
		return text(w)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
