package main

import (
	"context"
	"log/slog"
	"path/filepath"

	"github.com/docker/docker/client"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/agents/ledger"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/verifierd/deepverify"
	"github.com/vera-run/vera/verifierd/logic"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

// The settings of each component from its command-line flags: `vera up`,
// `vera run` and the single-component commands build their wiring.Set
// from these.

func agentConfig(f agentFlags) *agents.Config {
	return &agents.Config{ID: f.id, Version: version, Policy: ledger.DefaultPolicy(), Concurrency: f.concurrency}
}

func sandboxSet(cfg sandboxd.Config) *wiring.Sandbox {
	return &wiring.Sandbox{Config: cfg, Image: func(ctx context.Context, docker *client.Client) string {
		return defaultSandboxImage(ctx, docker)
	}}
}

// projectorConfig is the file projector's: runs' files under roots (the
// same as sandboxd's work roots), its state in DATA_DIR/projector, and
// root, when set, naming a trusted directory for some runs (vera demo).
func projectorConfig(dataDir string, roots []string, root func(string) (string, bool)) *projector.FilesConfig {
	return &projector.FilesConfig{Root: root, Roots: roots, StateDir: filepath.Join(dataDir, "projector")}
}

// verifierSet adds the three verifiers of f to set.
func verifierSet(set *wiring.Set, f verifierFlags, log *slog.Logger) error {
	strategy := verifyfast.DefaultStrategy()
	if f.strategy != "" {
		var err error
		if strategy, err = verifyfast.LoadStrategy(f.strategy); err != nil {
			return err
		}
	}
	var settings *verifyfast.Settings
	if f.settings != "" {
		var err error
		if settings, err = verifyfast.LoadSettings(f.settings); err != nil {
			return err
		}
	}
	set.Logic = &logic.Config{Window: f.window}
	set.VerifyFast = &verifyfast.Config{Strategy: strategy, Settings: settings}
	set.DeepVerify = &deepverify.Config{}
	if f.hybrid {
		set.Judge = func(b *bus.Bus) (*logic.Hybrid, func(), error) {
			mc, err := f.judgeConfig()
			if err != nil {
				return nil, nil, err
			}
			cfg := llmbus.Config(mc)
			cfg.Recorder, cfg.Logger = llmbus.New(b, llmbus.Options{Logger: log}), log
			c, err := llm.New(cfg)
			if err != nil {
				return nil, nil, usageError{err}
			}
			return &logic.Hybrid{Judge: c, Model: f.judge.model, Logger: log, Sampling: llmbus.Sampling(mc)}, c.Close, nil
		}
	}
	return nil
}

// runSet runs the components of set on the bus at g.natsURL until ctx ends
// (they drain) or one fails (the others stop; the error names it).
func (g *globals) runSet(ctx context.Context, set wiring.Set, log *slog.Logger) error {
	s := newStack(g, g.natsURL, log)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.start(cctx, set)
	return s.until(ctx, cancel)
}
