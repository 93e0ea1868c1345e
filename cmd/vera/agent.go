package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/internal/wiring"
)

func init() { register(newAgentCmd) }

// agentFlags configure the agent consumer.
type agentFlags struct {
	id          string
	concurrency int
}

func (f *agentFlags) register(cmd *cobra.Command) {
	host, _ := os.Hostname()
	cmd.Flags().StringVar(&f.id, "agent-id", envOr("VERA_AGENT_ID", fmt.Sprintf("agent@%s:%d", host, os.Getpid())),
		"instance id of this agent worker, recorded in vera.run.started (env VERA_AGENT_ID)")
	cmd.Flags().IntVar(&f.concurrency, "agent-concurrency", envInt("VERA_AGENT_CONCURRENCY", 4), "runs the agent advances at once (env VERA_AGENT_CONCURRENCY)")
}

func newAgentCmd(g *globals) *cobra.Command {
	var f agentFlags
	var kf keyEnvFlags
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the VERA research agent alone, as a consumer of the bus",
		Long: `Run the research agent as an independent consumer of the bus, for a
distributed deployment: it reads vera.task.submitted, vera.tool.finished,
vera.logic.verdict and vera.audit.feedback and writes the run's steps, model
I/O, tool requests, notes, evidence, ledger and policy events. It never calls
the sandbox or a verifier: sandboxd and the verifiers must run somewhere on
the same bus (vera sandboxd, vera verifierd, or vera up).

Several agents may run at once: they share the durable consumer "agent", and
every decision is fenced on the run's stream, so only one acts for a run.
Kill one (even with kill -9) and another, or a restarted one, goes on from
the stream without repeating a model call or a tool request.

Each run's model (base URL, name, the NAME of the API key variable) comes
from its task; the key itself is read from this process's environment, and
only from a variable this process may read: one given with
--allow-api-key-env (without it, OPENAI_API_KEY) or named by
$VERA_API_KEY_ENV. A task naming any other is refused before a request is
made: the run ends FAILED with a reason naming the flag that allows it.`,
		Example: `  vera agent --nats-url nats://127.0.0.1:4222
  OPENAI_API_KEY=... vera agent --nats-url nats://nats.internal:4222 --agent-id agent-2
  GROQ_KEY=... vera agent --nats-url nats://nats.internal:4222 --allow-api-key-env GROQ_KEY,OPENAI_API_KEY`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.concurrency < 1 {
				return usageError{fmt.Errorf("--agent-concurrency must be at least 1, got %d", f.concurrency)}
			}
			keys, err := kf.keys()
			if err != nil {
				return err
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			log.Info("agent consuming", "url", g.natsURL, "agent_id", f.id, "api_key_envs", keys.String())
			fmt.Fprintf(g.stderr, "vera agent %s consuming on %s (Ctrl-C to stop)\n", f.id, g.natsURL)
			return g.runSet(cmd.Context(), wiring.Set{Agent: agentConfig(f), KeyEnvs: keys}, log)
		},
	}
	f.register(cmd)
	kf.register(cmd)
	return cmd
}
