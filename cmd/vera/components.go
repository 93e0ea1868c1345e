package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/docker/docker/client"
	"github.com/spf13/cobra"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/agents/ledger"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
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

// verifierSet adds the three verifiers of f to set. The hybrid judge's
// client reads only the key variables of set.KeyEnvs as it is now (set it
// first).
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
		keys := set.KeyEnvs
		if keys == nil {
			keys = llm.DefaultKeyEnvs(nil)
		}
		keys = keys.For(wiring.KeyEnvsWho(catalog.ComponentLogic))
		set.Judge = func(b *bus.Bus) (*logic.Hybrid, func(), error) {
			mc, err := f.judgeConfig()
			if err != nil {
				return nil, nil, err
			}
			cfg := llmbus.Config(mc)
			cfg.Recorder, cfg.Logger, cfg.KeyEnvs = llmbus.New(b, llmbus.Options{Logger: log}), log, keys
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

// keyEnvFlags is --allow-api-key-env: the environment variables that the
// model clients of this process may read as API keys. Model settings come
// in tasks (and profiles files, recorded runs), which whoever may submit
// writes; a variable nobody named here is never read, so a task cannot
// have any other variable of this machine sent to a server it picks.
type keyEnvFlags struct {
	allow []string
}

func (k *keyEnvFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&k.allow, "allow-api-key-env", nil,
		"NAME of an environment variable that the model clients of this process may read as an API key (repeatable, or comma-separated); "+
			"a run, profile or recorded model naming any other is refused before a request is made. Always allowed: the variables this "+
			"command's own --…api-key-env flags and $VERA_API_KEY_ENV name; without this flag, "+llm.DefaultKeyEnv+" too")
}

// keys returns the allow-list: the --allow-api-key-env names (without any,
// OPENAI_API_KEY), the variable $VERA_API_KEY_ENV names, and own, the
// variables this command's own api-key-env flags name (the person typed
// them). A given name that is not a variable name (a pasted key) is a
// usage error that does not repeat it.
func (k *keyEnvFlags) keys(own ...string) (*llm.KeyEnvs, error) {
	var names []string
	for _, n := range k.allow {
		if n == "" {
			continue
		}
		if !catalog.ValidEnvName(n) {
			return nil, usageError{fmt.Errorf("--allow-api-key-env must name environment variables (letters, digits, _), never hold a key (%d characters given, not shown)", len(n))}
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		names = append(names, llm.DefaultKeyEnv)
	}
	names = append(names, os.Getenv("VERA_API_KEY_ENV"))
	names = append(names, own...)
	return llm.AllowKeyEnvs(names...), nil
}

// namedModel is one model configuration and what names it in an error.
type namedModel struct {
	what string
	mc   catalog.ModelConfig
}

// runModels lists the model configurations of a run that its components
// may call: the agent's, the auditor's, VerifyFast's (its own, or its
// profile's verify model in settings).
func runModels(cfg catalog.RunConfig, settings *verifyfast.Settings) []namedModel {
	out := []namedModel{{"model", cfg.Model}}
	if cfg.Auditor.Model != nil {
		out = append(out, namedModel{"auditor model", *cfg.Auditor.Model})
	}
	if cfg.VerifyFast.Model != nil {
		out = append(out, namedModel{"verifyfast model", *cfg.VerifyFast.Model})
	} else if p := cfg.VerifyFast.Profile; p != "" && settings != nil {
		if pr, ok := settings.Profiles[p]; ok {
			if l, ok := settings.LLMs[pr.Verify]; ok {
				out = append(out, namedModel{"verifyfast profile " + p, catalog.ModelConfig{BaseURL: l.BaseURL, Name: l.Model, APIKeyEnv: l.APIKeyEnv}})
			}
		}
	}
	return out
}

// checkKeys refuses, before anything is published, model settings that
// name an API key variable keys does not allow (the components of this
// process would refuse the run, and the person should learn it here):
// a usage error naming the setting (prefixed by where) and the flag.
func checkKeys(keys *llm.KeyEnvs, where string, models []namedModel) error {
	for _, m := range models {
		if err := keys.Check(m.mc.APIKeyEnv); err != nil {
			return usageError{fmt.Errorf("%s%s: %w", where, m.what, err)}
		}
	}
	return nil
}

// verifyFastSettings loads --verifyfast-settings for a local check (nil
// when none is given or it does not load: starting the verifiers reports
// that).
func verifyFastSettings(f verifierFlags) *verifyfast.Settings {
	if f.settings == "" {
		return nil
	}
	s, err := verifyfast.LoadSettings(f.settings)
	if err != nil {
		return nil
	}
	return s
}
