package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/verifierd/logic"
)

// verifierFlags configure the live verifiers, shared by `vera verifierd`
// and `vera up`.
type verifierFlags struct {
	window int
	hybrid bool
	judge  modelFlags
}

func (f *verifierFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.window, "repetition-window", logic.DefaultWindow, "steps of the same action that make a repetition (MIRAGE's repetitive_4: 3)")
	cmd.Flags().BoolVar(&f.hybrid, "hybrid", false, "logic verifier: send uncertain cases to an LLM judge (needs --judge-base-url and --judge-model)")
	f.judge.register(cmd, "judge-", "hybrid judge")
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
		return bus.Connect(ctx, bus.Options{URL: url, CredsFile: g.natsCreds, Source: source, Logger: log, Replicas: g.replicas, ConnectWait: 30 * time.Second})
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
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		live := &logic.Live{Bus: logicBus, Window: f.window, Hybrid: h, Logger: log}
		if err := live.Run(ctx); err != nil {
			errs <- err
		}
	}()
	wg.Wait()
	close(errs)
	return errors.Join(<-errs)
}

func newVerifierdCmd(g *globals) *cobra.Command {
	var f verifierFlags
	cmd := &cobra.Command{
		Use:   "verifierd",
		Short: "Run the live verifiers alone (distributed mode)",
		Long: `Run VERA's verifiers as bus consumers: the logic verifier watches every
vera.agent.step and, when an action repeats the previous ones (--repetition-
window steps, default 3), publishes a vera.logic.verdict with MIRAGE's 0/1/2
score (0: repeated without noticing, 1: a different action without
awareness, 2: aware and different), which the agent's repetition nudge and
the dashboard use. With --hybrid, uncertain cases go to an LLM judge whose
model calls are events too. 'vera up' runs the same verifiers.`,
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
