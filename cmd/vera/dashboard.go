package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/projector/dashboard"
)

func init() { register(newDashboardCmd) }

func newDashboardCmd(g *globals) *cobra.Command {
	var listen, dataDir, token string
	var allowedHosts []string
	var runs dashboardRunFlags
	var noMetrics, metricsPublic bool
	var maxStreams int
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the live dashboard alone, against a running bus",
		Long: `Serve VERA's live dashboard (the one vera up serves) against the bus at
--nats-url: a session picker, new sessions and runs, the live event stream,
Model I/O, container logs, notes.md, evidence, verifier results and metrics.

It listens on loopback by default. Every action that changes something (new
session, start or cancel a run) needs the token printed at start; it is also
written to DATA_DIR/dashboard.token (mode 0600). Reading (the API and the
live feed) needs that token or the read-only one in
DATA_DIR/dashboard.read-token (mode 0600), which cannot change anything.
Prometheus' /metrics takes either token too, as "Authorization: Bearer
<token>" (--metrics-public serves it without one). Open the printed URL:
the token travels in its #fragment, which the browser never sends to the
server. At most --max-streams live feeds are served at once; one more is
answered 503 with Retry-After.

Runs started from the page use the model and settings given here; their work
dirs are DATA_DIR/runs/<run_id>/work. See docs/dashboard.md.`,
		Example: `  vera dashboard
  vera dashboard --listen 127.0.0.1:9000 --base-url http://127.0.0.1:1234 --model qwen3
  vera dashboard --nats-url nats://n1:4222 --data-dir /var/lib/vera`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if maxStreams < 1 {
				return usageError{fmt.Errorf("--max-streams must be 1 or more")}
			}
			if runs.maxSteps < 0 || runs.auditRounds < 0 {
				return usageError{fmt.Errorf("--max-steps and --audit-rounds must be 0 or more")}
			}
			tmpl, err := runs.template()
			if err != nil {
				return err
			}
			if err := runs.checkTraceUI(); err != nil {
				return usageError{err}
			}
			ctx := cmd.Context()
			g.credsDataDir = dataDir // its identity is in DATA_DIR/creds
			b, err := g.connect(ctx, catalog.ComponentDashboard, false, log)
			if err != nil {
				return err
			}
			defer b.Close()

			var m *projector.Metrics
			var wg sync.WaitGroup
			mctx, stopMetrics := context.WithCancel(ctx)
			defer func() { stopMetrics(); wg.Wait() }()
			if !noMetrics {
				m = projector.NewMetrics(b, log)
				wg.Go(func() {
					if err := m.Run(mctx); err != nil {
						log.Error("dashboard metrics stopped", "err", err)
					}
				})
			}
			d, err := dashboard.New(dashboard.Options{
				Bus: b, Metrics: m, MetricsPublic: metricsPublic, DataDir: dataDir, Token: token, Template: tmpl, AllowedHosts: allowedHosts, MaxStreams: maxStreams, TraceURL: runs.traceUI, Logger: log,
			})
			if err != nil {
				return err
			}
			var lc net.ListenConfig
			ln, err := lc.Listen(ctx, "tcp", listen)
			if err != nil {
				return fmt.Errorf("dashboard: listen on %s: %w", listen, err)
			}
			addr := ln.Addr().(*net.TCPAddr)
			if !addr.IP.IsLoopback() {
				log.Warn("the dashboard listens beyond loopback over plain HTTP: its tokens cross the network in clear; prefer loopback and an SSH tunnel", "addr", addr.String())
			}
			w := g.stdout
			fmt.Fprintf(w, "VERA dashboard: http://%s/#token=%s\n", addr.String(), d.Token())
			fmt.Fprintf(w, "  token:  %s (also in %s)\n", d.Token(), d.TokenFile())
			fmt.Fprintf(w, "  read:   a read-only token is in %s\n", filepath.Join(dataDir, dashboard.ReadTokenFileName))
			if m != nil {
				fmt.Fprintf(w, "  metrics: http://%s/metrics (%s)\n", addr.String(), metricsAccess(metricsPublic, dataDir))
			}
			fmt.Fprintf(w, "  runs:   work dirs under %s\n", filepath.Join(dataDir, "runs"))
			fmt.Fprintln(w, "Press Ctrl-C to stop.")
			return d.Serve(ctx, ln)
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", envOr("VERA_DASHBOARD_LISTEN", dashboard.DefaultAddr), "address to serve the dashboard on; keep it on loopback (env VERA_DASHBOARD_LISTEN)")
	f.StringVar(&dataDir, "data-dir", defaultDataDir(), "VERA's data dir: the token file and the work dirs of runs started here (env VERA_DATA_DIR)")
	f.StringVar(&token, "token", "", "token for changes (default: a random one); prefer the token file to this flag, which other users can see in ps")
	f.StringSliceVar(&allowedHosts, "allowed-host", nil, "extra Host name the dashboard answers to on loopback (repeatable)")
	runs.model.register(cmd, "", "agent model of runs started from the dashboard")
	runs.settings.register(cmd, "", "agent model of runs started from the dashboard (the page can override it)", true)
	f.IntVar(&runs.maxSteps, "max-steps", 0, "step budget of runs started from the dashboard (0 = unlimited); the page can override it")
	f.BoolVar(&runs.auditor, "auditor", true, "audit candidate answers with the DeepVerifier auditor")
	f.IntVar(&runs.auditRounds, "audit-rounds", 0, "auditor rounds per run (0 = the default)")
	f.BoolVar(&runs.verifyFast, "verifyfast", false, "score candidate answers with VerifyFast")
	f.BoolVar(&runs.network, "network", true, "let the sandbox reach the network (curl/wget)")
	f.BoolVar(&noMetrics, "no-metrics", false, "do not fold the stream into the metrics panel")
	f.BoolVar(&metricsPublic, "metrics-public", false, "serve /metrics without a token (default: it needs the read-only token or the full one)")
	f.IntVar(&maxStreams, "max-streams", dashboard.DefaultMaxStreams, "live feeds (SSE) served at once; one more gets 503 with Retry-After")
	runs.registerTraceUI(cmd)
	return cmd
}

// metricsAccess says, for a start-up line, who may read /metrics.
func metricsAccess(public bool, dataDir string) string {
	if public {
		return "public: no token needed (--metrics-public)"
	}
	return "needs the read-only token in " + filepath.Join(dataDir, dashboard.ReadTokenFileName) + " as Authorization: Bearer <token>"
}

// dashboardRunFlags are the settings of runs started from a dashboard
// (`vera dashboard` registers all of them; `vera up`, whose --network names
// the sandboxes' Docker network, registers the model, the budget and the
// auditor, and keeps the network on), and the dashboard's trace UI link
// (--trace-ui-url, registered by both).
type dashboardRunFlags struct {
	model       modelFlags
	settings    modelSettingsFlags
	maxSteps    int
	auditor     bool
	auditRounds int
	verifyFast  bool
	network     bool
	traceUI     string // dashboard.Options.TraceURL
}

// registerTraceUI adds --trace-ui-url.
func (f *dashboardRunFlags) registerTraceUI(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.traceUI, "trace-ui-url", os.Getenv("VERA_TRACE_UI_URL"),
		"link each run on the dashboard to its trace in this tracing UI: a URL with {trace_id} where the run's trace id goes "+
			"(any UI whose trace page URL contains the trace id, e.g. http://127.0.0.1:16686/trace/{trace_id} for Jaeger, "+
			"a Grafana Explore URL for Tempo), or a Jaeger UI base URL (/trace/{trace_id} is appended); empty = no links (env VERA_TRACE_UI_URL)")
}

// checkTraceUI checks --trace-ui-url.
func (f *dashboardRunFlags) checkTraceUI() error {
	if _, err := dashboard.TraceURLTemplate(f.traceUI); err != nil {
		return fmt.Errorf("--trace-ui-url: %w", err)
	}
	return nil
}

// register adds the flags `vera up` takes.
func (f *dashboardRunFlags) register(cmd *cobra.Command) {
	f.model.register(cmd, "", "agent model of runs started from the dashboard")
	f.settings.register(cmd, "", "agent model of runs started from the dashboard (the page can override it)", true)
	cmd.Flags().IntVar(&f.maxSteps, "max-steps", envInt("MAX_STEPS", 80), "step budget of runs started from the dashboard; 0 = unlimited (env MAX_STEPS)")
	cmd.Flags().BoolVar(&f.auditor, "auditor", false, "audit the answers of runs started from the dashboard with the DeepVerifier auditor")
	f.registerTraceUI(cmd)
	f.network = true
}

// template is the configuration of a run started from the dashboard,
// checked (a usage error names the flag at fault).
func (f *dashboardRunFlags) template() (catalog.RunConfig, error) {
	model := catalog.ModelConfig{BaseURL: f.model.baseURL, Name: f.model.model, APIKeyEnv: f.model.apiKeyEnv}
	if err := f.settings.apply(&model); err != nil {
		return catalog.RunConfig{}, usageError{err}
	}
	t := catalog.RunConfig{
		Model:    model,
		MaxSteps: f.maxSteps,
		Auditor:  catalog.AuditorConfig{Enabled: f.auditor, MaxRounds: f.auditRounds},
		Sandbox:  catalog.SandboxConfig{Network: f.network},
	}
	if f.verifyFast {
		t.VerifyFast = catalog.VerifyFastConfig{Enabled: true}
	}
	if err := t.ValidateSecrets(); err != nil {
		return catalog.RunConfig{}, usageError{fmt.Errorf("--api-key-env / --base-url: %w", err)}
	}
	return t, nil
}
