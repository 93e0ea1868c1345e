package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/rundir"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/projector"
)

// taskBus is the bus of a command that runs tasks (vera run, vera fork,
// vera eval): a running deployment's when --nats-url (or NATS_URL) is
// given, else an embedded server in this process, whose components
// start with startComponents.
type taskBus struct {
	*bus.Bus
	url      string
	external bool
	g        *globals
	dataDir  string
	log      *slog.Logger

	stack    *stack
	cancel   context.CancelFunc
	shutdown func()
}

// externalBus reports whether cmd runs against a running deployment
// (--nats-url or NATS_URL) rather than an embedded one.
func externalBus(cmd *cobra.Command) bool {
	return cmd.Flags().Changed("nats-url") || os.Getenv("NATS_URL") != ""
}

// openTaskBus connects as the cli identity; name names the embedded
// server.
func openTaskBus(ctx context.Context, g *globals, cmd *cobra.Command, dataDir, natsListen, name string, log *slog.Logger) (*taskBus, error) {
	t := &taskBus{external: externalBus(cmd), url: g.natsURL, g: g, dataDir: dataDir, log: log, shutdown: func() {}}
	if !t.external {
		eb, err := startEmbedded(ctx, g, dataDir, natsListen, name, log)
		if err != nil {
			return nil, fmt.Errorf("%w\n(is `vera up` running on this data dir? then add --nats-url nats://127.0.0.1:4222)", err)
		}
		t.shutdown, t.url = eb.srv.Shutdown, eb.srv.ClientURL()
	} else {
		g.credsDataDir = dataDir
	}
	b, err := bus.Connect(ctx, bus.Options{URL: t.url, CredsFile: g.credsFor(dataDir, catalog.ComponentCLI), Source: catalog.ComponentCLI, Logger: log, ConnectWait: connectWait(t.external), Replicas: g.replicas})
	if err != nil {
		t.shutdown()
		return nil, err
	}
	t.Bus = b
	return t, nil
}

// startComponents starts every component in this process on the
// embedded bus (nothing with --nats-url). The operator named the task's
// dirs on the command line: they are sandboxd's roots too. The components'
// model clients read only the key variables keys allows.
func (t *taskBus) startComponents(ctx context.Context, sf sandboxFlags, vf verifierFlags, af agentFlags, keys *llm.KeyEnvs, workRoots, inputRoots []string) error {
	if t.external {
		return nil
	}
	scfg := sf.config(t.dataDir, t.g)
	scfg.WorkRoots = append(scfg.WorkRoots, workRoots...)
	scfg.InputRoots = append(scfg.InputRoots, inputRoots...)
	roots := runRoots(t.dataDir, append(append([]string(nil), sf.workRoots...), workRoots...)...)
	set := wiring.Set{Sandbox: sandboxSet(scfg), Agent: agentConfig(af), Projector: projectorConfig(t.dataDir, roots, nil), KeyEnvs: keys}
	if err := verifierSet(&set, vf, t.log); err != nil {
		return err
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.stack, t.cancel = newStack(t.g, t.url, t.log), cancel
	t.stack.start(cctx, set)
	return nil
}

// claimRunDir makes (or claims, when it is empty) the run's directory
// before its task is submitted, so that a directory VERA may not use
// stops the command with one line before anything runs. The person
// typed it, so in this process's own deployment it is one of the roots;
// with --nats-url the deployment's components judge it against theirs.
func (t *taskBus) claimRunDir(dir, runID string, sf sandboxFlags) error {
	if t.external {
		return nil
	}
	roots, err := rundir.NewRoots(runRoots(t.dataDir, append(append([]string(nil), sf.workRoots...), dir)...)...)
	if err != nil {
		return err
	}
	d, err := rundir.Open(roots, dir, runID, true)
	if err != nil {
		if errors.Is(err, rundir.ErrRefused) {
			return usageError{fmt.Errorf("work dir: %w", err)}
		}
		return fmt.Errorf("work dir: %w", err)
	}
	return d.Close()
}

// submit publishes the task of run runID (what names it in an error),
// only if the run id is unused: the task is the run's first event.
func (t *taskBus) submit(ctx context.Context, runID string, sub catalog.TaskSubmitted, what string) error {
	ev, err := t.Events.New(runID, sub)
	if err != nil {
		return err
	}
	if _, err := t.Publish(ctx, ev, bus.ExpectLastSequence(bus.SubjectRoot+"."+runID+".>", 0)); err != nil {
		if errors.Is(err, bus.ErrConflict) {
			return usageError{fmt.Errorf("run %s already exists: pick another --run-id", runID)}
		}
		return fmt.Errorf("submit %s: %w", what, err)
	}
	return nil
}

// close stops the components, the connection and the embedded server.
func (t *taskBus) close() {
	if t.stack != nil {
		t.cancel()
		if err := t.stack.wait(); err != nil {
			t.log.Warn("components stopped with errors", "err", err)
		}
	}
	t.Bus.Close()
	t.shutdown()
}

// followToEnd follows run runID (followRun) and turns its end into the
// command's exit: Ctrl-C cancels the run for everyone (by requestedBy),
// and the outcome gives the exit code of vera run.
func (t *taskBus) followToEnd(ctx context.Context, runID, requestedBy string, w io.Writer, o followOptions) error {
	o.external = t.external
	fin, err := followRun(ctx, t.Bus, runID, w, t.g.stderr, o, t.stack)
	if err == nil && !t.external {
		// The run's files are written by the projector in this process:
		// let it catch up before the components stop.
		waitConsumerIdle(ctx, t.Bus, projector.FilesDurable, 15*time.Second, t.log)
	}
	if err != nil {
		if ctx.Err() != nil {
			pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer pcancel()
			cev, cerr := t.Events.New(runID, catalog.RunCancelled{RequestedBy: requestedBy, Reason: "interrupted (Ctrl-C)"})
			if cerr == nil {
				_, cerr = t.Publish(pctx, cev)
			}
			if cerr != nil {
				return exitError{code: exitCancelled, err: fmt.Errorf("interrupted; cancelling run %s failed: %w", runID, cerr)}
			}
			fmt.Fprintf(t.g.stderr, "\nrun %s cancelled\n", runID)
			return exitError{code: exitCancelled}
		}
		return err
	}
	switch {
	case fin == nil:
		fmt.Fprintf(t.g.stderr, "run %s was cancelled\n", runID)
		return exitError{code: exitCancelled}
	case fin.Outcome == catalog.OutcomeResolved:
		return nil
	case fin.Outcome == catalog.OutcomeUnresolved:
		return exitError{code: exitUnresolved}
	default:
		return exitError{code: exitRunFailed}
	}
}
