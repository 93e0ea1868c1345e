package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/verifierd/logic"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

// modelFlags name an OpenAI-compatible model.
type modelFlags struct {
	baseURL, model, apiKeyEnv string
}

func (m *modelFlags) register(cmd *cobra.Command, prefix, what string) {
	cmd.Flags().StringVar(&m.baseURL, prefix+"base-url", os.Getenv("VERA_MODEL_BASE_URL"), what+": OpenAI-compatible server, e.g. http://127.0.0.1:1234 (/v1 is added) (env VERA_MODEL_BASE_URL)")
	cmd.Flags().StringVar(&m.model, prefix+"model", os.Getenv("VERA_MODEL"), what+": model name (env VERA_MODEL)")
	cmd.Flags().StringVar(&m.apiKeyEnv, prefix+"api-key-env", "", what+": name of the environment variable that holds the API key (the key itself is never a flag)")
}

func (m *modelFlags) client(flagPrefix string) (*llm.Client, error) {
	if m.baseURL == "" || m.model == "" {
		return nil, usageError{fmt.Errorf("--%sbase-url and --%smodel are required", flagPrefix, flagPrefix)}
	}
	return llm.New(llm.Config{BaseURL: m.baseURL, Model: m.model, APIKeyEnv: m.apiKeyEnv})
}

func newVerifyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Run VERA's verifiers offline over recorded data",
	}
	cmd.AddCommand(newVerifyRepetitiveCmd(g))
	return cmd
}

func newVerifyRepetitiveCmd(g *globals) *cobra.Command {
	var out string
	var summary, hybrid bool
	var judge modelFlags
	cmd := &cobra.Command{
		Use:   "repetitive PATH...",
		Short: "Score MIRAGE-Bench repetitive-action results with the logic (or hybrid) verifier",
		Long: `Read MIRAGE-Bench inference-result files (a snapshot plus result{thinking,
action,…}), or folders of them, and write one JSON line per file:

  {"file": "<path as given>", "task_name": …, "verified_result":
   {"thinking_eval": 0|1|2, "action_eval": 0|1, "thinking_eval_reason": …,
    "verifier_type": "logic"|"hybrid", …}}

thinking_eval is 0 when the action repeats the repetitive_action (compared by
meaning, not bytes), 1 for a different action without awareness, 2 for
awareness and a different action. A file that cannot be read is one
{"file": …, "error": …} line; the rest still run, and the command then exits
with status 1.

--hybrid sends the uncertain cases to an LLM judge with MIRAGE's rubric
(confident cases stay with the logic verifier); the verdict says which path
decided. --summary prints MIRAGE's hallucination rate (share of 0) and
utility score (2→1, 1→0.5, 0→0) per setting and scenario.`,
		Example: `  vera verify repetitive results/ --summary --out verdicts.jsonl
  vera verify repetitive results/ --hybrid --judge-base-url http://127.0.0.1:1234 --judge-model qwen3`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, paths []string) error {
			ctx := cmd.Context()
			var h *logic.Hybrid
			if hybrid {
				c, err := judge.client("judge-")
				if err != nil {
					return err
				}
				defer c.Close()
				h = &logic.Hybrid{Judge: c, Model: judge.model}
			}
			w, commit, abort, err := openOutput(out, g.stdout)
			if err != nil {
				return err
			}
			// Lines are buffered (one write per 64 KiB, not per file);
			// with --hybrid each is flushed as soon as the judge decided.
			bw := bufio.NewWriterSize(w, 64<<10)
			enc := json.NewEncoder(bw)
			enc.SetEscapeHTML(false)
			var lines []logic.Line
			failed := 0
			prog := newProgress(g.stderr)
			// Checked and Lines read, decode and verify the files on every
			// core and yield them in order; Lines, which keeps no file,
			// is enough without the judge.
			checked := logic.Checked(paths)
			if h == nil {
				checked = func(yield func(logic.Entry, logic.Line) bool) {
					for l := range logic.Lines(paths) {
						if !yield(logic.Entry{}, l) {
							return
						}
					}
				}
			}
			for e, line := range checked {
				if h != nil && line.Error == "" {
					v, err := h.Verify(ctx, e.File)
					if err != nil {
						abort()
						return err
					}
					line.VerifiedResult = &v
				}
				if line.Error != "" {
					failed++
				}
				if err := enc.Encode(line); err != nil {
					abort()
					return err
				}
				if h != nil {
					if err := bw.Flush(); err != nil {
						abort()
						return err
					}
				}
				lines = append(lines, line)
				prog.update("%d files, %d errors", len(lines), failed)
			}
			prog.done()
			if err := bw.Flush(); err != nil {
				abort()
				return err
			}
			if err := commit(); err != nil {
				return err
			}
			if summary {
				var sw io.Writer = g.stderr
				if out != "" && out != "-" {
					sw = g.stdout
				}
				if err := logic.Summarize(lines).WriteText(sw); err != nil {
					return err
				}
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d files could not be verified (see their error lines)", failed, len(lines))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "write the JSON lines to FILE (default stdout)")
	cmd.Flags().BoolVar(&summary, "summary", false, "print hallucination rate and utility score per setting and scenario")
	cmd.Flags().BoolVar(&hybrid, "hybrid", false, "send uncertain cases to an LLM judge")
	judge.register(cmd, "judge-", "hybrid judge")
	return cmd
}

func newVerifyFastCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verifyfast",
		Short: "VerifyFast: audit LLM outputs against their context with a deterministic 1-5 score",
	}
	cmd.AddCommand(newVerifyFastBatchCmd(g), newVerifyFastReportCmd(g))
	return cmd
}

func newVerifyFastBatchCmd(g *globals) *cobra.Command {
	var profiles []string
	var concurrency int
	var out, settingsPath, strategyPath, cacheDir string
	var resume, noCache bool
	cmd := &cobra.Command{
		Use:   "batch DATA.jsonl",
		Short: "Audit a JSONL test set with every selected profile and write results JSONL",
		Long: `Run VerifyFast over a test set. Each line of DATA.jsonl is an item:
{"id", "tag", "context_input", "model_output", "expected_credit_score", …}.
Every line is validated first; bad lines are reported by number and skipped.

For each item and profile (settings.yaml: a "run" and a "verify" model;
strategy.yaml: thresholds, with per-profile overrides) the audit runs Phase 1
(decomposition), then Phases 2 and 3 (fact and logic checks) in parallel, and
Phase 4 scores the errors with the deterministic formula. A model reply that
is not the requested JSON is asked again once; an item that still fails is
written as failed with its reason, never scored by a guess.

Items run concurrently; a 429 slows the whole batch down. Every model reply
is cached on disk (keyed by model, prompt and parameters), so a rerun, or a
--resume after a crash, repeats no call. Results are written line by line
with their "profile"; then the report is printed ('vera verifyfast report'
re-renders it).`,
		Example: `  vera verifyfast batch verify_fast_20.jsonl --out results.jsonl
  vera verifyfast batch verify_fast_20.jsonl --profiles kimi-full,cross-verify --concurrency 8 --out results.jsonl --resume`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			settings := verifyfast.DefaultSettings()
			if settingsPath != "" {
				s, err := verifyfast.LoadSettings(settingsPath)
				if err != nil {
					return err
				}
				settings = s
			}
			strategy := verifyfast.DefaultStrategy()
			if strategyPath != "" {
				s, err := verifyfast.LoadStrategy(strategyPath)
				if err != nil {
					return err
				}
				strategy = s
			}
			if _, err := settings.SelectProfiles(profiles); err != nil {
				return usageError{err}
			}
			items, bad, err := verifyfast.LoadItems(args[0])
			if err != nil {
				return err
			}
			for _, le := range bad {
				fmt.Fprintf(g.stderr, "%s: skipped %v\n", args[0], le)
			}
			if len(items) == 0 {
				return fmt.Errorf("no valid items in %s", args[0])
			}
			if resume && out == "" {
				return usageError{errors.New("--resume needs --out")}
			}
			var clients []*llm.Client
			defer func() {
				for _, c := range clients {
					c.Close()
				}
			}()
			cfg := verifyfast.BatchConfig{
				Items: items, Profiles: profiles, Settings: settings, Strategy: strategy,
				Concurrency: concurrency, OutPath: out, Resume: resume, Progress: verifyfast.ProgressBar(g.stderr),
				Completers: func(name string) (llm.Completer, error) {
					e, ok := settings.LLMs[name]
					if !ok {
						return nil, fmt.Errorf("unknown llm %q in settings", name)
					}
					c, err := llm.New(llm.Config{BaseURL: e.BaseURL, Model: e.Model, APIKeyEnv: e.APIKeyEnv})
					if err != nil {
						return nil, fmt.Errorf("llm %s: %w", name, err)
					}
					clients = append(clients, c)
					return c, nil
				},
			}
			if out == "" {
				cfg.Out = g.stdout
			}
			if !noCache {
				if cacheDir == "" {
					cacheDir = filepath.Join(defaultDataDir(), "verifyfast-cache")
				}
				c, err := verifyfast.OpenCache(cacheDir)
				if err != nil {
					return err
				}
				cfg.Cache = c
			}
			st, err := verifyfast.RunBatch(ctx, cfg)
			fmt.Fprintf(g.stderr, "verifyfast: %d results written (%d scored, %d failed), %d already present, %d unfinished\n",
				st.Written, st.Scored, st.Failed, st.Skipped, st.Unfinished)
			if err != nil {
				return err
			}
			if out != "" {
				f, err := os.Open(out)
				if err != nil {
					return err
				}
				defer f.Close()
				results, badLines := verifyfast.ReadResults(f)
				rep := verifyfast.BuildReport(results)
				rep.SkippedLines = badLines
				return rep.WriteText(g.stdout)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&profiles, "profiles", nil, "profiles to run, comma-separated (default: all in settings)")
	f.IntVar(&concurrency, "concurrency", 4, "items audited at once")
	f.StringVarP(&out, "out", "o", "", "results JSONL file (default stdout)")
	f.BoolVar(&resume, "resume", false, "skip the results --out already holds and append")
	f.StringVar(&settingsPath, "settings", "", "settings.yaml (default: the built-in example, a local server at 127.0.0.1:1234)")
	f.StringVar(&strategyPath, "strategy", "", "strategy.yaml (default: the built-in, the spec's formula)")
	f.StringVar(&cacheDir, "cache-dir", "", "model reply cache (default DATA_DIR/verifyfast-cache)")
	f.BoolVar(&noCache, "no-cache", false, "do not cache model replies")
	return cmd
}

func newVerifyFastReportCmd(g *globals) *cobra.Command {
	var html string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "report RESULTS.jsonl",
		Short: "Render a VerifyFast results file: zone confusion matrix, accuracy, cross-band rate",
		Long: `Read a VerifyFast results file and print, per profile: the 3x3 zone confusion
matrix (rows expected zone, columns actual; BAD 1-2, MID 3, GOOD 4-5), zone
accuracy, cross-band confusion rate (BAD<->GOOD, target < 5%), exact match,
±1 match, per-tag results, tokens used and failed items. Lines that cannot be
read are reported and skipped.`,
		Example: `  vera verifyfast report results.jsonl
  vera verifyfast report results.jsonl --html report.html
  vera verifyfast report results.jsonl --json | jq .profiles`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			results, bad := verifyfast.ReadResults(f)
			rep := verifyfast.BuildReport(results)
			rep.SkippedLines = bad
			if len(results) == 0 {
				return errors.New("no readable results in " + args[0])
			}
			if html != "" {
				w, commit, abort, err := openOutput(html, g.stdout)
				if err != nil {
					return err
				}
				if err := rep.WriteHTML(w); err != nil {
					abort()
					return err
				}
				if err := commit(); err != nil {
					return err
				}
				fmt.Fprintf(g.stderr, "wrote %s\n", html)
			}
			if asJSON {
				return rep.WriteJSON(g.stdout)
			}
			if html == "" || html != "-" {
				return rep.WriteText(g.stdout)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&html, "html", "", "also write a self-contained HTML page to FILE")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON instead of text")
	return cmd
}
