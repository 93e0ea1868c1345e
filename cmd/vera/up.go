package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/bus/embedded"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/projector/dashboard"
)

// defaultDataDir is $VERA_DATA_DIR, else $XDG_DATA_HOME/vera, else
// ~/.local/share/vera.
func defaultDataDir() string {
	if d := os.Getenv("VERA_DATA_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "vera")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", "vera")
	}
	return ".vera"
}

// defaultHTTPListen is where `vera up` serves the dashboard and /metrics.
const defaultHTTPListen = "127.0.0.1:8844"

// upFlags are the settings of `vera up` (and `vera demo`, which is `vera
// up` with a recorded run imported).
type upFlags struct {
	dataDir, natsListen                          string
	sf                                           sandboxFlags
	vf                                           verifierFlags
	af                                           agentFlags
	noSandbox, noVerifiers, noAgent, noProjector bool
	httpListen                                   string
	metricsPublic                                bool
	dm                                           dashboardRunFlags
	tf                                           traceFlags
	kf                                           keyEnvFlags // --allow-api-key-env
}

func (f *upFlags) register(cmd *cobra.Command) {
	f.sf.register(cmd)
	f.vf.register(cmd)
	cmd.Flags().BoolVar(&f.noSandbox, "no-sandboxd", false, "do not run the sandbox daemon in this process")
	cmd.Flags().BoolVar(&f.noVerifiers, "no-verifiers", false, "do not run the verifiers in this process")
	cmd.Flags().BoolVar(&f.noAgent, "no-agent", false, "do not run the agent in this process")
	cmd.Flags().BoolVar(&f.noProjector, "no-projector", false, "do not write the runs' files (notes.md, ledgers, trace.jsonl...) from this process")
	cmd.Flags().StringVar(&f.httpListen, "http-listen", envOr("VERA_HTTP_LISTEN", defaultHTTPListen), "address of the dashboard and /metrics; port 0 picks a free one, empty = none (env VERA_HTTP_LISTEN)")
	cmd.Flags().BoolVar(&f.metricsPublic, "metrics-public", false, "serve /metrics without a token (default: it needs the dashboard's read-only token, or its full one)")
	f.af.register(cmd)
	f.dm.register(cmd)
	f.tf.register(cmd, true)
	f.kf.register(cmd)
	cmd.Flags().StringVar(&f.dataDir, "data-dir", defaultDataDir(), "where VERA keeps its data; the JetStream store is DIR/nats (env VERA_DATA_DIR)")
	cmd.Flags().StringVar(&f.natsListen, "nats-listen", envOr("VERA_NATS_LISTEN", embedded.DefaultListen), "address the embedded NATS server listens on; port 0 picks a free one (env VERA_NATS_LISTEN)")
}

// upHooks adapt `vera up` for `vera demo`.
type upHooks struct {
	// filesRoot maps a run to the directory of its files (nil: the run's
	// work dir).
	filesRoot func(runID string) (string, bool)
	// ready runs once everything is up, before "Press Ctrl-C"; dashURL is
	// the dashboard's URL with its token ("" without a dashboard).
	ready func(ctx context.Context, b *bus.Bus, w io.Writer, dashURL string) error
}

func newUpCmd(g *globals) *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run VERA in one process: embedded NATS with JetStream plus the components",
		Long: `Start VERA's embedded dev mode: a NATS server with JetStream runs inside
this process (file store under --data-dir, fsync on every write), listening on
--nats-listen so that any NATS client can subscribe to vera.run.>, and
every component joins it in the same process, each on its own connection:

  sandboxd    Docker containers of the runs, shell commands (--no-sandboxd)
  agent       the research agent (--no-agent)
  verifiers   logic verifier, VerifyFast, DeepVerifier auditor (--no-verifiers)
  projector   each run's notes.md, ledgers, trace.jsonl and logs in its work
              dir (--no-projector), and with --otlp-endpoint (or
              OTEL_EXPORTER_OTLP_ENDPOINT) each run as an OpenTelemetry
              trace, live (docs/otel.md)
  http        the dashboard and Prometheus /metrics on --http-listen

VERA's streams (VERA, VERA_DLQ and the object store VERA_BLOBS) are created
if missing. Submit work with 'vera run --nats-url ...' or from the dashboard.

With --nats-url (or NATS_URL) set, no server is started: the components run
against that server instead (see docs/deploy.md for a cluster).

Stops cleanly on Ctrl-C or SIGTERM: consumers drain, then the server shuts
down.`,
		Example: `  vera up
  vera up --data-dir /var/lib/vera --nats-listen 127.0.0.1:4333
  vera up --nats-url nats://n1:4222,nats://n2:4222,nats://n3:4222
  vera up --otlp-endpoint http://127.0.0.1:4318`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return g.up(cmd, &f, upHooks{}) },
	}
	f.register(cmd)
	return cmd
}

// connectWait is how long `vera up` waits for an external server to answer.
func connectWait(external bool) time.Duration {
	if external {
		return 30 * time.Second
	}
	return 0
}

// up runs VERA in this process (see newUpCmd) until ctx ends.
func (g *globals) up(cmd *cobra.Command, f *upFlags, hooks upHooks) error {
	log, err := g.logger()
	if err != nil {
		return err
	}
	if err := f.vf.validate(); err != nil {
		return err
	}
	keys, err := f.kf.keys(f.dm.model.apiKeyEnv, f.vf.judge.apiKeyEnv)
	if err != nil {
		return err
	}
	tmpl, err := f.dm.template()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	external := cmd.Flags().Changed("nats-url") || os.Getenv("NATS_URL") != ""
	url := g.natsURL
	g.credsDataDir = f.dataDir
	var eb *embeddedBus
	if !external {
		eb, err = startEmbedded(ctx, g, f.dataDir, f.natsListen, "vera", log)
		if err != nil {
			return err
		}
		defer func() {
			eb.srv.Shutdown()
			log.Info("NATS server stopped")
		}()
		url = eb.srv.ClientURL()
	}
	// The process's own connection is admin's: it creates the streams
	// and imports the demo's recorded run.
	var limits bus.StoreLimits // the embedded server's streams got theirs when it started
	if external {
		if limits, err = g.storeLimits("", true, log); err != nil {
			return err
		}
	}
	b, err := bus.Connect(ctx, bus.Options{URL: url, CredsFile: g.credsFor(f.dataDir, auth.Admin), Source: "vera-up", Logger: log, ConnectWait: connectWait(external), Replicas: g.replicas, Limits: limits})
	if err != nil {
		return err
	}
	defer b.Close()

	w := g.stdout
	if eb != nil {
		fmt.Fprintf(w, "VERA bus up: NATS with JetStream at %s (store %s, fsync always)\n", url, filepath.Join(f.dataDir, "nats"))
		fmt.Fprintf(w, "  identities: %s (authentication required; `vera auth list`)\n", eb.store.Dir)
	} else {
		fmt.Fprintf(w, "VERA up on the external NATS at %s\n", url)
	}
	fmt.Fprintf(w, "  streams: %s (vera.run.>), %s (vera.dlq.>), object store %s\n", bus.StreamName, bus.DeadLetterStream, bus.BlobBucket)
	fmt.Fprintf(w, "  watch:   vera events tail --nats-url %s\n", url)
	if eb != nil {
		fmt.Fprintf(w, "  or:      nats sub --server %s --nkey %s 'vera.run.>'\n", url, eb.store.Path(auth.Reader))
	} else {
		fmt.Fprintf(w, "  or:      nats sub --server %s 'vera.run.>'\n", url)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newStack(g, url, log)
	set := wiring.Set{KeyEnvs: keys}
	if !f.noSandbox {
		set.Sandbox = sandboxSet(f.sf.config(f.dataDir, g))
	}
	if !f.noAgent {
		set.Agent = agentConfig(f.af)
	}
	if !f.noVerifiers {
		if err := verifierSet(&set, f.vf, log); err != nil {
			return err
		}
	}
	if !f.noProjector {
		set.Projector = projectorConfig(f.dataDir, runRoots(f.dataDir, f.sf.workRoots...), hooks.filesRoot)
		if set.Traces = f.tf.set(); set.Traces != nil {
			fmt.Fprintf(w, "  traces:    OTLP %s\n", set.Traces.Exporter.Describe())
		}
	}
	s.start(cctx, set)
	dashURL := ""
	if f.httpListen != "" {
		ln, err := listen(f.httpListen, "--http-listen")
		if err != nil {
			cancel()
			s.wait()
			return err
		}
		// The metrics read (as reader); the dashboard starts and cancels
		// runs (as the dashboard).
		mb, err := s.connect(cctx, auth.Reader)
		if err != nil {
			ln.Close()
			cancel()
			s.wait()
			return err
		}
		defer mb.Close()
		db, err := s.connect(cctx, catalog.ComponentDashboard)
		if err != nil {
			ln.Close()
			cancel()
			s.wait()
			return err
		}
		defer db.Close()
		m := projector.NewMetrics(mb, log)
		d, err := dashboard.New(dashboard.Options{Bus: db, Metrics: m, MetricsPublic: f.metricsPublic, DataDir: f.dataDir, Template: tmpl, TraceURL: f.dm.traceUI, Logger: log})
		if err != nil {
			ln.Close()
			cancel()
			s.wait()
			return err
		}
		s.addFunc(cctx, "metrics", func(ctx context.Context) error { return runMetrics(ctx, m) })
		s.addFunc(cctx, "dashboard", func(ctx context.Context) error { return d.Serve(ctx, ln) })
		dashURL = fmt.Sprintf("http://%s/#token=%s", ln.Addr(), d.Token())
		fmt.Fprintf(w, "  dashboard: %s\n", dashURL)
		fmt.Fprintf(w, "             (changes need the token; it is also in %s)\n", d.TokenFile())
		fmt.Fprintf(w, "  metrics:   http://%s/metrics (%s)\n", ln.Addr(), metricsAccess(f.metricsPublic, f.dataDir))
	}
	fmt.Fprintf(w, "  components: %s\n", strings.Join(s.components(), ", "))
	if eb != nil {
		// Not a component: it reloads the server's users when `vera auth
		// issue` or `revoke` changed them.
		s.addFunc(cctx, "identities", func(ctx context.Context) error { return eb.watchIdentities(ctx, log) })
	}
	if hooks.ready != nil {
		if err := hooks.ready(cctx, b, w, dashURL); err != nil {
			cancel()
			s.wait()
			return err
		}
	}
	fmt.Fprintln(w, "Press Ctrl-C to stop.")

	err = s.until(ctx, cancel)
	log.Info("shutting down")
	if cerr := b.Close(); cerr != nil && !errors.Is(cerr, bus.ErrNoServer) {
		log.Warn("close bus", "err", cerr)
	}
	return err
}
