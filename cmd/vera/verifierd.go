package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus/catalog"

	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/verifierd/logic"
)

// verifierFlags configure the live verifiers, shared by `vera verifierd`
// and `vera up`.
type verifierFlags struct {
	window             int
	hybrid             bool
	judge              modelFlags
	judgeSettings      modelSettingsFlags
	settings, strategy string
}

func (f *verifierFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.window, "repetition-window", logic.DefaultWindow, "steps of the same action that make a repetition (MIRAGE's repetitive_4: 3)")
	cmd.Flags().BoolVar(&f.hybrid, "hybrid", false, "logic verifier: send uncertain cases to an LLM judge (needs --judge-base-url and --judge-model)")
	f.judge.register(cmd, "judge-", "hybrid judge")
	f.judgeSettings.register(cmd, "judge-", "the hybrid judge's model", false)
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
	if f.judgeSettings.any() && !f.hybrid {
		return usageError{errors.New("the --judge-… model settings need --hybrid")}
	}
	if _, err := f.judgeConfig(); err != nil {
		return err
	}
	return nil
}

// judgeConfig is the hybrid judge's model configuration: its endpoint and
// the --judge-… settings.
func (f *verifierFlags) judgeConfig() (catalog.ModelConfig, error) {
	mc := catalog.ModelConfig{BaseURL: f.judge.baseURL, Name: f.judge.model, APIKeyEnv: f.judge.apiKeyEnv}
	if err := f.judgeSettings.apply(&mc); err != nil {
		return mc, usageError{err}
	}
	return mc, nil
}

func newVerifierdCmd(g *globals) *cobra.Command {
	var f verifierFlags
	var kf keyEnvFlags
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
'vera up' runs the same verifiers.

The verifiers read API keys only from the variables this process may read:
the one --judge-api-key-env names, $VERA_API_KEY_ENV's, and those given with
--allow-api-key-env (without it, OPENAI_API_KEY); settings.yaml's
api_key_env entries must be among them too. A run whose auditor or VerifyFast
model (or profile) names another is not audited and no request is made:
vera.audit.judged and vera.audit.feedback (final, not accepted), or
VerifyFast's phase 1 (parse_error), say why and name the flag.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			keys, err := kf.keys(f.judge.apiKeyEnv)
			if err != nil {
				return err
			}
			set := wiring.Set{KeyEnvs: keys}
			if err := verifierSet(&set, f, log); err != nil {
				return err
			}
			return g.runSet(cmd.Context(), set, log)
		},
	}
	f.register(cmd)
	kf.register(cmd)
	return cmd
}
