package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/bus/embedded"
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

func newUpCmd(g *globals) *cobra.Command {
	var dataDir, listen string
	var sf sandboxFlags
	var vf verifierFlags
	var noSandbox, noVerifiers bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run VERA in one process: embedded NATS with JetStream plus the components",
		Long: `Start VERA's embedded dev mode: a NATS server with JetStream runs inside
this process (file store under --data-dir, fsync on every write), listening on
--nats-listen so that any NATS client can subscribe to vera.run.>. The
components that exist join it in the same process; VERA's streams (VERA,
VERA_DLQ and the object store VERA_BLOBS) are created if missing.

With --nats-url (or NATS_URL) set, no server is started: the components run
against that server instead (see docs/deploy.md for a cluster).

Stops cleanly on Ctrl-C or SIGTERM: consumers drain, then the server shuts
down.`,
		Example: `  vera up
  vera up --data-dir /var/lib/vera --nats-listen 127.0.0.1:4333
  vera up --nats-url nats://n1:4222,nats://n2:4222,nats://n3:4222`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			if err := vf.validate(); err != nil {
				return err
			}
			ctx := cmd.Context()
			external := cmd.Flags().Changed("nats-url") || os.Getenv("NATS_URL") != ""
			url := g.natsURL
			var srv *embedded.Server
			if !external {
				srv, err = embedded.Start(embedded.Options{DataDir: filepath.Join(dataDir, "nats"), Listen: listen, ServerName: "vera", Logger: log})
				if err != nil {
					return err
				}
				defer func() {
					srv.Shutdown()
					log.Info("NATS server stopped")
				}()
				url = srv.ClientURL()
			}
			b, err := bus.Connect(ctx, bus.Options{URL: url, CredsFile: g.natsCreds, Source: "vera-up", Logger: log, ConnectWait: connectWait(external), Replicas: g.replicas})
			if err != nil {
				return err
			}
			defer b.Close()

			w := g.stdout
			if srv != nil {
				fmt.Fprintf(w, "VERA bus up: NATS with JetStream at %s (store %s, fsync always)\n", url, filepath.Join(dataDir, "nats"))
			} else {
				fmt.Fprintf(w, "VERA up on the external NATS at %s\n", url)
			}
			fmt.Fprintf(w, "  streams: %s (vera.run.>), %s (vera.dlq.>), object store %s\n", bus.StreamName, bus.DeadLetterStream, bus.BlobBucket)
			fmt.Fprintf(w, "  watch:   vera events tail --nats-url %s\n", url)
			fmt.Fprintf(w, "  or:      nats sub --server %s 'vera.run.>'\n", url)
			var components []string
			var comps sync.WaitGroup
			done := make(chan error, 1)
			if !noSandbox {
				components = append(components, "sandboxd")
				go func() {
					sb, err := bus.Connect(ctx, bus.Options{URL: url, CredsFile: g.natsCreds, Source: catalog.ComponentSandboxd, Logger: log, Replicas: g.replicas})
					if err != nil {
						done <- err
						return
					}
					defer sb.Close()
					done <- runSandboxd(ctx, sb, sf.config(dataDir, g), log)
				}()
			} else {
				close(done)
			}
			if !noVerifiers {
				components = append(components, "verifiers (logic, verifyfast, deepverify)")
				comps.Add(1)
				go func() {
					defer comps.Done()
					if err := runVerifiers(ctx, g, url, vf, log); err != nil {
						log.Error("verifiers stopped", "err", err)
					}
				}()
			}

			fmt.Fprintf(w, "  components: %s (the agent and the dashboard join as they are built)\n", strings.Join(components, ", "))
			fmt.Fprintln(w, "Press Ctrl-C to stop.")

			<-ctx.Done()
			if err := <-done; err != nil {
				log.Warn("sandboxd stopped with an error", "err", err)
			}
			comps.Wait()
			log.Info("shutting down")
			if err := b.Close(); err != nil && !errors.Is(err, bus.ErrNoServer) {
				log.Warn("close bus", "err", err)
			}
			return nil
		},
	}
	sf.register(cmd)
	vf.register(cmd)
	cmd.Flags().BoolVar(&noSandbox, "no-sandboxd", false, "do not run the sandbox daemon in this process")
	cmd.Flags().BoolVar(&noVerifiers, "no-verifiers", false, "do not run the verifiers in this process")
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "where VERA keeps its data; the JetStream store is DIR/nats (env VERA_DATA_DIR)")
	cmd.Flags().StringVar(&listen, "nats-listen", envOr("VERA_NATS_LISTEN", embedded.DefaultListen), "address the embedded NATS server listens on; port 0 picks a free one (env VERA_NATS_LISTEN)")
	return cmd
}

// connectWait is how long `vera up` waits for an external server to answer.
func connectWait(external bool) time.Duration {
	if external {
		return 30 * time.Second
	}
	return 0
}
