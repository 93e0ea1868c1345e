package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/internal/modelcheck"
)

func init() { register(newModelCmd) }

func newModelCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Check what a model server can do for VERA",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newModelCheckCmd(g))
	return cmd
}

func newModelCheckCmd(g *globals) *cobra.Command {
	var (
		cfg    modelcheck.Config
		asJSON bool
	)
	var checks strings.Builder
	for _, c := range modelcheck.Checks {
		fmt.Fprintf(&checks, "  %-11s %s\n", c.Name, wrapText(c.Description, 62, strings.Repeat(" ", 14)))
	}
	cmd := &cobra.Command{
		Use:   "check --base-url URL --model NAME [--api-key-env VAR] [--timeout D] [--json]",
		Short: "Send one request per capability to a model server and print what works",
		Long: `Send one request per capability to an OpenAI-compatible server (OpenAI,
vLLM, llama.cpp's llama-server, Ollama's /v1, LM Studio, …) through the same
client VERA runs with, and print a table: capability, works (yes, partial,
no, skipped) and what was seen, followed by the model settings to use
(tool_protocol, stream). No bus, sandbox or Docker is needed.

The checks, in order:
` + checks.String() + `
When the basic completion does not work the other checks are skipped and
the command fails. Each request is retried once on a transient error and
bounded by --timeout. docs/models.md says how to start each server family
so that everything works (llama-server --jinja, vLLM's tool and reasoning
parsers, …).

Exit status: 0 when the basic completion works (even if other capabilities
do not), 1 when it does not, 2 for bad flags.`,
		Example: `  vera model check --base-url http://127.0.0.1:8080 --model qwen3
  vera model check --base-url http://127.0.0.1:11434/v1 --model qwen3:8b --json
  vera model check --base-url https://api.openai.com/v1 --model gpt-4.1-mini --api-key-env OPENAI_API_KEY`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.BaseURL == "" || cfg.Model == "" {
				return usageError{errors.New("vera model check needs --base-url and --model")}
			}
			if cfg.Timeout < 0 {
				return usageError{fmt.Errorf("--timeout %s: must not be negative", cfg.Timeout)}
			}
			rep, err := modelcheck.Run(cmd.Context(), cfg)
			if err != nil {
				return usageError{err}
			}
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(rep); err != nil {
					return err
				}
			} else if err := rep.WriteTable(g.stdout); err != nil {
				return err
			}
			if !rep.CompletionWorks() {
				res, _ := rep.Result(modelcheck.CheckCompletion)
				return exitError{exitFailure, fmt.Errorf("model %s at %s: the basic completion does not work: %s", rep.Model, rep.BaseURL, res.Detail)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.BaseURL, "base-url", os.Getenv("VERA_MODEL_BASE_URL"), "base URL of the OpenAI-compatible server, e.g. http://127.0.0.1:8080 (/v1 is added) (env VERA_MODEL_BASE_URL)")
	f.StringVar(&cfg.Model, "model", os.Getenv("VERA_MODEL"), "model name at the server (env VERA_MODEL)")
	f.StringVar(&cfg.APIKeyEnv, "api-key-env", os.Getenv("VERA_API_KEY_ENV"), "NAME of the environment variable holding the API key (never the key itself); empty: no key (env VERA_API_KEY_ENV)")
	f.DurationVar(&cfg.Timeout, "timeout", 0, "bound of each request, e.g. 90s (0: MODEL_TIMEOUT, else 150s)")
	f.BoolVar(&asJSON, "json", false, "print the report as a JSON object instead of a table")
	return cmd
}

// wrapText breaks s into lines of at most width bytes, continuation lines
// starting with indent.
func wrapText(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0:
		case n+1+len(w) > width:
			b.WriteString("\n" + indent)
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
