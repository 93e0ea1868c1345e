package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/verifierd/deepverify"
	"github.com/vera-run/vera/verifierd/logic"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

// verifierFlags configure the live verifiers, shared by `vera verifierd`
// and `vera up`.
type verifierFlags struct {
	window             int
	hybrid             bool
	judge              modelFlags
	settings, strategy string
}

func (f *verifierFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.window, "repetition-window", logic.DefaultWindow, "steps of the same action that make a repetition (MIRAGE's repetitive_4: 3)")
	cmd.Flags().BoolVar(&f.hybrid, "hybrid", false, "logic verifier: send uncertain cases to an LLM judge (needs --judge-base-url and --judge-model)")
	f.judge.register(cmd, "judge-", "hybrid judge")
	cmd.Flags().StringVar(&f.settings, "verifyfast-settings", "", "VerifyFast settings.yaml (profiles and their models); runs name a profile")
	cmd.Flags().StringVar(&f.strategy, "verifyfast-strategy", "", "VerifyFast strategy.yaml (default: the spec's formula)")
}

// validate reports flag mistakes before anything starts.
func (f *verifierFlags) validate() error {
	if f.window < 2 {
		return usageError{errors.New("--repetition-window must be at least 2")}
	}
	if f.hybrid && (f.judge.baseURL == "" || f.judge.model == "") {
		return usageError{errors.New("--hybrid needs --judge-base-url and --judge-model")}
	}
	return nil
}

// runVerifiers runs the live verifiers until ctx ends. Every one gets its
// own bus connection, so each drains and closes on its own.
func runVerifiers(ctx context.Context, g *globals, url string, f verifierFlags, log *slog.Logger) error {
	var h *logic.Hybrid
	connect := func(source string) (*bus.Bus, error) {
		return bus.Connect(ctx, bus.Options{URL: url, CredsFile: g.credsFor("", source), Source: source, Logger: log, Replicas: g.replicas, ConnectWait: 30 * time.Second})
	}
	logicBus, err := connect(catalog.ComponentLogic)
	if err != nil {
		return err
	}
	defer logicBus.Close()
	if f.hybrid {
		c, err := llm.New(llm.Config{BaseURL: f.judge.baseURL, Model: f.judge.model, APIKeyEnv: f.judge.apiKeyEnv,
			Recorder: llmbus.New(logicBus, llmbus.Options{Logger: log}), Logger: log})
		if err != nil {
			return usageError{err}
		}
		defer c.Close()
		h = &logic.Hybrid{Judge: c, Model: f.judge.model, Logger: log}
	}
	vfBus, err := connect(catalog.ComponentVerifyFast)
	if err != nil {
		return err
	}
	defer vfBus.Close()
	strategy := verifyfast.DefaultStrategy()
	if f.strategy != "" {
		if strategy, err = verifyfast.LoadStrategy(f.strategy); err != nil {
			return err
		}
	}
	var settings *verifyfast.Settings
	if f.settings != "" {
		if settings, err = verifyfast.LoadSettings(f.settings); err != nil {
			return err
		}
	}
	recorder := llmbus.New(vfBus, llmbus.Options{Logger: log})
	dvBus, err := connect(catalog.ComponentDeepVerify)
	if err != nil {
		return err
	}
	defer dvBus.Close()
	dvRecorder := llmbus.New(dvBus, llmbus.Options{Logger: log})

	var wg sync.WaitGroup
	errs := make(chan error, 3)
	run := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	lv, err := logic.New(logicBus, logic.Config{Window: f.window, Hybrid: h, Logger: log})
	if err != nil {
		return fmt.Errorf("logic verifier: %w", err)
	}
	vf, err := verifyfast.New(vfBus, verifyfast.Config{
		Strategy: strategy, Settings: settings, Logger: log,
		// The model of each run comes from its config; its calls are
		// events of the run.
		Models: func(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
			cfg := llmbus.Config(mc)
			cfg.Recorder, cfg.Logger = recorder, log
			return llm.New(cfg)
		},
	})
	if err != nil {
		return fmt.Errorf("verifyfast: %w", err)
	}
	auditorModels := newModelClients(dvRecorder, log)
	defer auditorModels.close()
	auditor, err := deepverify.New(dvBus, deepverify.Config{Logger: log, Models: auditorModels.get})
	if err != nil {
		return fmt.Errorf("deepverify auditor: %w", err)
	}
	run("logic verifier", lv.Run)
	run("verifyfast", vf.Run)
	run("deepverify auditor", auditor.Run)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func newVerifierdCmd(g *globals) *cobra.Command {
	var f verifierFlags
	cmd := &cobra.Command{
		Use:   "verifierd",
		Short: "Run the live verifiers alone (distributed mode)",
		Long: `Run VERA's verifiers as bus consumers. The logic verifier watches every
vera.agent.step and, when an action repeats the previous ones (--repetition-
window steps, default 3), publishes a vera.logic.verdict with MIRAGE's 0/1/2
score (0: repeated without noticing, 1: a different action without
awareness, 2: aware and different), which the agent's repetition nudge and
the dashboard use. With --hybrid, uncertain cases go to an LLM judge whose
model calls are events too. VerifyFast scores each candidate final answer
(vera.audit.requested, or vera.run.finished with an answer) of runs that
enable it, against the evidence the answer cites, and publishes its three
phases and the 1-5 credit score. The DeepVerifier auditor audits the answers
of runs that enable it (vera.audit.requested): a clean-room decomposition, up
to three checks verified with shell commands in the run's read-only auditor
container, a 1-4 judgement capped by SCOUT gating, and feedback to the agent.
'vera up' runs the same verifiers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			return runVerifiers(cmd.Context(), g, g.natsURL, f, log)
		},
	}
	f.register(cmd)
	return cmd
}
