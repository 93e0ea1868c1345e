package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/sandboxd/policy"
)

// sandboxCheckResult is the --json output of `vera sandbox check`.
type sandboxCheckResult struct {
	Command string `json:"command"`
	Cwd     string `json:"cwd"`
	Denied  bool   `json:"denied"`
	Rule    string `json:"rule,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Match   string `json:"match,omitempty"`
}

func newSandboxCheckCmd(g *globals) *cobra.Command {
	var asJSON bool
	var cwd string
	cmd := &cobra.Command{
		Use:   "check [--json] [--cwd DIR] -- COMMAND...",
		Short: "Say whether sandboxd's deny rules refuse a command, without running it",
		Long: `Apply sandboxd's deny rules to a shell command and print the decision:
"allowed", or "denied" with the rule's id, its reason and the part of the
command that matched. Nothing is run and no bus or Docker is needed.

It is meant for users writing their own rules or checking how a command
will be judged. The check is static: the command is parsed as bash
(mvdan.cc/sh), wrappers such as sudo, env, xargs and bash -c are unwrapped
and literal cd and variable assignments are followed, but nothing is
expanded against a file system and values known only at run time ($(…)
output, variables set elsewhere) are unknown. A command that does not parse
as shell is denied (rule unparseable). See 'vera sandbox rules' for the
rules and docs/sandbox.md for what the rules cannot see.

The words after -- are joined with spaces into one command line, as
'vera sandbox exec' does; quote the command as one argument to keep its
quoting intact.

Exit status: 0 allowed, 126 denied (as 'vera sandbox exec' would report
it), 2 when no command is given.`,
		Example: `  vera sandbox check -- 'rm -rf /work/build'
  vera sandbox check -- 'echo x > /work/n?tes.md'
  vera sandbox check --json --cwd /tmp -- 'rm -rf *'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			command := strings.Join(args, " ")
			if strings.TrimSpace(command) == "" {
				return usageError{errors.New("no command to check: vera sandbox check -- COMMAND")}
			}
			d := policy.CheckIn(command, cwd)
			if asJSON {
				enc := json.NewEncoder(g.stdout)
				enc.SetIndent("", "  ")
				err := enc.Encode(sandboxCheckResult{Command: command, Cwd: cwd, Denied: d.Denied, Rule: d.Rule, Reason: d.Reason, Match: d.Match})
				if err != nil {
					return err
				}
			} else if d.Denied {
				fmt.Fprintf(g.stdout, "denied\n  rule:   %s\n  reason: %s\n  match:  %s\n", d.Rule, d.Reason, d.Match)
			} else {
				fmt.Fprintln(g.stdout, "allowed")
			}
			if d.Denied {
				return exitError{exitDenied, nil}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the decision as a JSON object")
	cmd.Flags().StringVar(&cwd, "cwd", policy.WorkDir, "working directory the command is judged in (relative paths resolve against it)")
	return cmd
}
