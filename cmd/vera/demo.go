package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
)

func init() { register(newDemoCmd) }

// demoRun is the recorded example run (see demo/README.md).
//
//go:embed demo/example-run.jsonl
var demoRun []byte

// demoRunID reads the run id of the bundled run.
func demoRunID() (string, error) {
	line, _, _ := bytes.Cut(demoRun, []byte("\n"))
	var ev bus.Event
	if err := ev.UnmarshalJSON(line); err != nil {
		return "", fmt.Errorf("bundled demo run: %w", err)
	}
	return ev.RunID, nil
}

func newDemoCmd(g *globals) *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start VERA with a recorded example run and open the dashboard",
		Long: `Start everything 'vera up' starts (embedded bus, sandboxd, agent,
verifiers, projector, dashboard) and import a bundled example run, so that the
dashboard has something to show on a fresh machine: a research run whose
answer the DeepVerifier auditor first caps (one domain only), then accepts
after the agent follows its corrective instruction.

The run was recorded from a real run of the system against VERA's scripted
model server (there is no LLM in it); see cmd/vera/demo/README.md. Its
files (notes.md, trace.jsonl, ...) are written to DATA_DIR/demo/<run_id>.
Importing is idempotent: a second 'vera demo' on the same data dir adds
nothing.

To start your own runs from the dashboard, give the model:
  vera demo --base-url http://127.0.0.1:1234 --model qwen3-14b`,
		Example: `  vera demo
  vera demo --data-dir /tmp/vera-demo --http-listen 127.0.0.1:0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			runID, err := demoRunID()
			if err != nil {
				return err
			}
			dir := filepath.Join(f.dataDir, "demo", runID)
			return g.up(cmd, &f, upHooks{
				filesRoot: func(id string) (string, bool) { return dir, id == runID },
				ready: func(ctx context.Context, b *bus.Bus, w io.Writer, dashURL string) error {
					st, err := b.Import(ctx, bytes.NewReader(demoRun), bus.ImportOptions{})
					if err != nil {
						return fmt.Errorf("import the demo run: %w", err)
					}
					fmt.Fprintf(w, "  demo run %s: %d events imported (%d already there)\n", runID, st.Imported, st.Existing)
					fmt.Fprintf(w, "  its files: %s\n", dir)
					if dashURL != "" {
						fmt.Fprintf(w, "\nOpen the dashboard: %s\n", dashURL)
					}
					return nil
				},
			})
		},
	}
	f.register(cmd)
	return cmd
}
