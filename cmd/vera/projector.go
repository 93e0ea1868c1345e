package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/projector/dashboard"
)

func init() { register(newProjectorCmd) }

// defaultMetricsListen is where /metrics is served when no dashboard does.
const defaultMetricsListen = "127.0.0.1:9464"

// runMetrics folds the stream into m and samples the bus health until ctx
// ends.
func runMetrics(ctx context.Context, m *projector.Metrics) error {
	errs := make(chan error, 1)
	go func() { errs <- m.RunHealth(ctx, 15*time.Second) }()
	err := m.Run(ctx)
	return errors.Join(err, <-errs)
}

// serveHTTP serves h on ln until ctx ends, then shuts down gracefully.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errs := make(chan error, 1)
	go func() { errs <- srv.Serve(ln) }()
	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "addr", ln.Addr().String(), "err", err)
		srv.Close()
	}
	if err := <-errs; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// listen opens addr with an error that says what to do when it is taken.
func listen(addr, flag string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (pick another address with %s, or port 0 for a free one)", addr, err, flag)
	}
	return ln, nil
}

func newProjectorCmd(g *globals) *cobra.Command {
	var metricsListen, dataDir string
	var noFiles, metricsPublic bool
	var workRoots []string
	var tf traceFlags
	cmd := &cobra.Command{
		Use:   "projector",
		Short: "Run the projectors alone: each run's files and the Prometheus /metrics",
		Long: `Run VERA's read models as consumers of the bus, for a distributed
deployment:

  files    each run's notes.md, evidence.jsonl, move_ledger.jsonl,
           query_ledger.jsonl, trace.jsonl, container.log,
           container_events.log and session.log, written into the run's
           directory (its work_dir, beside the sandbox's /work in work/),
           crash-safe and idempotent (durable consumer "projector-files").
           Only run dirs under DATA_DIR/runs and the --work-root
           directories are written, the same roots sandboxd has: this
           process must see them at the paths the tasks name, as the
           same user as sandboxd. Its progress is kept in
           DATA_DIR/projector;
  metrics  every dra_* metric of the VERA spec, folded from the whole stream
           at start (so a restart gives the same values), plus the bus's
           health (consumer lag, redeliveries, dead letters), served at
           http://<metrics-listen>/metrics to a request that carries the
           read-only token of DATA_DIR/dashboard.read-token (made, mode
           0600, if missing; the dashboard's full token in
           DATA_DIR/dashboard.token is taken too) as "Authorization:
           Bearer <token>" — Prometheus: authorization: {credentials_file:
           DATA_DIR/dashboard.read-token}; --metrics-public serves it to
           anyone;
  traces   with --otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT), each run
           as an OpenTelemetry trace in the GenAI conventions, exported
           live over OTLP (durable consumer "projector-otel"; docs/otel.md).`,
		Example: `  vera projector --nats-url nats://127.0.0.1:4222
  vera projector --metrics-listen 0.0.0.0:9464 --no-files
  vera projector --no-files --otlp-endpoint http://127.0.0.1:4318`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			// /metrics takes the tokens of DATA_DIR's token files, read
			// on each request; the read-only one is made if missing.
			protect := metricsListen != "" && !metricsPublic
			if protect {
				if _, err := dashboard.EnsureReadToken(dataDir); err != nil {
					return err
				}
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			b, err := g.connect(ctx, catalog.ComponentProjector, false, log)
			if err != nil {
				return err
			}
			defer b.Close()
			s := newStack(g, g.natsURL, log)
			set := wiring.Set{Traces: tf.set()}
			if !noFiles {
				set.Projector = projectorConfig(dataDir, runRoots(dataDir, workRoots...), nil)
			}
			if set.Traces != nil {
				fmt.Fprintf(g.stderr, "vera projector: traces to OTLP %s\n", set.Traces.Exporter.Describe())
			}
			if set.Projector != nil || set.Traces != nil {
				s.start(ctx, set)
			}
			if metricsListen != "" {
				ln, err := listen(metricsListen, "--metrics-listen")
				if err != nil {
					return err
				}
				m := projector.NewMetrics(b, log)
				h := m.Handler()
				if protect {
					h = dashboard.RequireToken(h, dashboard.FileTokens(dataDir))
				}
				s.addFunc(ctx, "metrics", func(ctx context.Context) error { return runMetrics(ctx, m) })
				s.addFunc(ctx, "metrics http", func(ctx context.Context) error {
					mux := http.NewServeMux()
					mux.Handle("/metrics", h)
					return serveHTTP(ctx, ln, mux, log)
				})
				fmt.Fprintf(g.stderr, "vera projector: metrics at http://%s/metrics (%s)\n", ln.Addr(), metricsAccess(metricsPublic, dataDir))
			}
			return s.until(ctx, cancel)
		},
	}
	cmd.Flags().StringVar(&metricsListen, "metrics-listen", envOr("VERA_METRICS_LISTEN", defaultMetricsListen), "address of the Prometheus /metrics endpoint; empty = none (env VERA_METRICS_LISTEN)")
	cmd.Flags().BoolVar(&metricsPublic, "metrics-public", false, "serve /metrics without a token (default: it needs the read-only token of DATA_DIR/dashboard.read-token)")
	cmd.Flags().BoolVar(&noFiles, "no-files", false, "do not write the runs' files (metrics only)")
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "DATA_DIR: runs' directories under DATA_DIR/runs, the projection state in DATA_DIR/projector, /metrics' read-only token in DATA_DIR/dashboard.read-token (env VERA_DATA_DIR)")
	cmd.Flags().StringSliceVar(&workRoots, "work-root", nil, "a directory under which runs' directories may lie, besides DATA_DIR/runs (repeatable; give sandboxd's)")
	tf.register(cmd, true)
	return cmd
}
