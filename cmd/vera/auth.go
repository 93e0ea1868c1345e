package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/embedded"
)

// credsFor is the credentials file of a connection with identity: the
// --nats-creds file (NATS_CREDS) when one is given, else the identity's
// seed in the data dir's creds directory when it exists there (as `vera
// up` and `vera auth init` make them), else none.
func (g *globals) credsFor(dataDir, identity string) string {
	if g.natsCreds != "" {
		return g.natsCreds
	}
	if dataDir == "" {
		dataDir = g.credsDataDir
	}
	if dataDir == "" {
		dataDir = defaultDataDir()
	}
	p := auth.Store{Dir: auth.DirOf(dataDir)}.Path(identity)
	if _, err := os.Stat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
		// Present, or present but unreadable: the connection then says why.
		return p
	}
	return ""
}

// connectAs opens a bus connection with identity's credentials, stamped
// with source.
func (g *globals) connectAs(ctx context.Context, identity, source string, readOnly bool, log *slog.Logger) (*bus.Bus, error) {
	return bus.Connect(ctx, bus.Options{
		URL: g.natsURL, CredsFile: g.credsFor("", identity), Source: source, ReadOnly: readOnly, Logger: log, Replicas: g.replicas,
	})
}

// embeddedBus is a NATS server in this process that requires
// authentication, with VERA's identities in DATA_DIR/creds.
type embeddedBus struct {
	srv   *embedded.Server
	store auth.Store
}

// startEmbedded starts the embedded server of `vera up`, `vera demo` and
// `vera run` with authentication on: the identities are made in
// DATA_DIR/creds on first start (kept afterwards), and the streams are
// created as admin.
func startEmbedded(ctx context.Context, g *globals, dataDir, listen, name string, log *slog.Logger) (*embeddedBus, error) {
	store := auth.Store{Dir: auth.DirOf(dataDir)}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir %s is not usable: %v (pass --data-dir with a writable directory)", dataDir, err)
	}
	ids, err := store.Init()
	if err != nil {
		return nil, fmt.Errorf("identities in %s: %w", store.Dir, err)
	}
	users, err := auth.NkeyUsers(ids)
	if err != nil {
		return nil, err
	}
	srv, err := embedded.Start(embedded.Options{DataDir: filepath.Join(dataDir, "nats"), Listen: listen, ServerName: name, Logger: log, Users: users})
	if err != nil {
		return nil, err
	}
	e := &embeddedBus{srv: srv, store: store}
	limits, err := g.storeLimits(filepath.Join(dataDir, "nats"), false, log)
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	admin, err := bus.Connect(ctx, bus.Options{URL: srv.ClientURL(), CredsFile: store.Path(auth.Admin), Source: "vera-up", Logger: log, Replicas: g.replicas, Limits: limits})
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	_ = admin.Close()
	// Every later connection of this process finds its identity here.
	g.credsDataDir = dataDir
	return e, nil
}

// watchIdentities reloads the server's users when `vera auth issue` or
// `vera auth revoke` changed the identities, until ctx ends.
func (e *embeddedBus) watchIdentities(ctx context.Context, log *slog.Logger) error {
	last, _ := e.store.Identities()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ids, err := e.store.Identities()
		if err != nil {
			log.Warn("identities: cannot read", "dir", e.store.Dir, "err", err)
			continue
		}
		if slices.Equal(ids, last) {
			continue
		}
		users, err := auth.NkeyUsers(ids)
		if err == nil {
			err = e.srv.SetUsers(users)
		}
		if err != nil {
			log.Warn("identities changed but could not be loaded", "err", err)
			continue
		}
		log.Info("identities reloaded", "count", len(ids))
		last = ids
	}
}

func newAuthCmd(g *globals) *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Identities and permissions on the bus: list, issue for your own tools, generate nats.conf",
		Long: `Every connection to VERA's bus has its own NATS identity (an nkey), and
every identity publishes only what it must: each component exactly the event
types the catalogue lists it as producing (vera events types), 'reader' only
reads, 'ext' reads and publishes its own outside events on vera.extin.*.<its name>, 'admin' may do
everything (create streams, import runs). The NATS server enforces it.

'vera up' makes the identities on its first start, in DATA_DIR/creds: one
seed file per identity, NAME.nk (mode 0600, directory 0700), which the vera
commands on this machine find by themselves and which the nats CLI takes
as-is: nats --nkey DATA_DIR/creds/reader.nk sub 'vera.run.>'.

For an outside NATS server or cluster, 'vera auth init' makes the same
identities and writes DATA_DIR/creds/nats-auth.conf, the server's
authorization block (public keys and permissions), to include from its
config (see nats.conf and docs/deploy.md).`,
		Example: `  vera auth list
  vera auth issue mytool --role ext       # a key for your own tool
  vera auth init --data-dir ./.vera        # for nats-server -c nats.conf`,
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", defaultDataDir(), "VERA's data dir; identities are in DIR/creds (env VERA_DATA_DIR)")
	store := func() auth.Store { return auth.Store{Dir: auth.DirOf(dataDir)} }

	initCmd := &cobra.Command{
		Use:   "init",
		Short: "Make the built-in identities (kept if present) and the server's authorization block",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := store()
			ids, err := s.Init()
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%d identities in %s\n", len(ids), s.Dir)
			fmt.Fprintf(g.stdout, "server authorization block: %s\n", s.ConfPath())
			fmt.Fprintf(g.stdout, "  include it from the server's config (nats.conf does), then each process uses\n")
			fmt.Fprintf(g.stdout, "  its own: vera agent --nats-creds %s ...\n", s.Path("agent"))
			return nil
		},
	}
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List the identities and what each may publish",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := store()
			ids, err := s.Identities()
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				return fmt.Errorf("no identities in %s (they are made by `vera up` or `vera auth init`)", s.Dir)
			}
			tw := tabwriter.NewWriter(g.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tFILE\tMAY")
			for _, id := range ids {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", id.Name, id.Role, s.Path(id.Name), auth.Describe(id))
			}
			return tw.Flush()
		},
	}
	var role string
	issueCmd := &cobra.Command{
		Use:   "issue NAME",
		Short: "Issue an identity for your own tool (--role reader or ext) or for a sandbox daemon (--role sandboxd)",
		Long: `Issue a new identity for an outside tool, or for a sandbox daemon. Its
seed is written to DATA_DIR/creds/NAME.nk (mode 0600); hand that file to the
tool (nats --nkey FILE, or nats.go's nats.NkeyOptionFromSeed) or the daemon
(vera sandboxd --id NAME --nats-creds FILE). A running 'vera up' on this data
dir takes it within a second; an outside server takes it when its config is
reloaded (the authorization block is rewritten).

Roles:
  reader    read only
  ext       read, and publish the tool's own events (vera.ext.* types) on
            vera.extin.<run id>.NAME: stored as vera.run.<run id>.ext.NAME,
            at most 1,024 of at most 16 KiB per run
  sandboxd  a sandbox daemon started with --id NAME: what sandboxd may do,
            and its consumers (sandboxd-NAME, sandboxd-control-NAME) kept
            from every other identity`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := auth.Role(role)
			if r != auth.RoleReader && r != auth.RoleExt && r != auth.RoleSandboxd {
				return usageError{fmt.Errorf("--role %q: want reader, ext or sandboxd", role)}
			}
			if err := auth.ValidateIssued(args[0], r); err != nil {
				return usageError{err}
			}
			id, path, err := store().Issue(args[0], r)
			if err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "issued %s (%s: %s)\n  seed: %s\n", id.Name, id.Role, auth.Describe(id), path)
			if r == auth.RoleSandboxd {
				fmt.Fprintf(g.stdout, "  use:  vera sandboxd --id %s --nats-creds %s ...   (copy the seed to the daemon's host; on this one --data-dir finds it)\n", id.Name, path)
			} else {
				fmt.Fprintf(g.stdout, "  try:  nats --nkey %s sub 'vera.run.>'\n", path)
			}
			return nil
		},
	}
	issueCmd.Flags().StringVar(&role, "role", string(auth.RoleReader), "reader (read only), ext (read, publish its outside events on vera.extin.*.NAME) or sandboxd (a sandbox daemon named NAME)")
	revokeCmd := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke an issued identity (a running vera up disconnects it within a second)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := store().Revoke(args[0]); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "revoked %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(initCmd, listCmd, issueCmd, revokeCmd)
	return cmd
}

func init() { register(newAuthCmd) }
