// Command vera is VERA's one binary: it starts the embedded bus (`vera up`),
// and inspects, exports and imports the event stream (`vera events …`).
// It only parses flags and wires packages together.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/internal/eventfmt"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // bad flags or arguments
)

var version = "dev"

type usageError struct{ error }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "vera: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "vera: %v\n", err)
	var ue usageError
	if errors.As(err, &ue) {
		return exitUsage
	}
	return exitFailure
}

// globals are the flags every command shares.
type globals struct {
	natsURL   string
	natsCreds string
	// credsDataDir is the data dir whose creds directory holds this
	// process's identities (see credsFor); "" is the default data dir.
	credsDataDir string
	replicas     int
	maxStore     string // --max-store: the total size VERA's streams may take
	logLevel     string
	logFormat    string
	stdout       io.Writer
	stderr       io.Writer
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   "vera",
		Short: "VERA: a research agent in a Docker sandbox, checked by verifiers, on a NATS JetStream event bus",
		Long: `VERA runs an LLM research agent in a Docker sandbox and checks it. Every
shell command, model call, note, piece of evidence and verifier verdict is a
CloudEvents event on the NATS JetStream stream VERA, on the subject
vera.run.<run_id>.<area>.<event>: watch it live, subscribe from your own
tools, export a run to a file and import it elsewhere.

Start here:
  vera demo                everything in one process, with a recorded run in the
                           dashboard (http://127.0.0.1:8844)
  vera run --task TEXT --work-dir DIR --model-base-url URL --model NAME
                           do one task, following it in the terminal
  vera up                  everything in one process: the embedded bus (NATS +
                           JetStream on 127.0.0.1:4222), sandboxd, the agent, the
                           verifiers, the projector and the dashboard
  vera events tail         watch events live (in another terminal)
  vera replay FILE --out DIR
                           rebuild a recorded run's files and metrics`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&g.natsURL, "nats-url", envOr("NATS_URL", bus.DefaultURL), "NATS server URL(s), comma-separated (env NATS_URL)")
	pf.StringVar(&g.natsCreds, "nats-creds", os.Getenv("NATS_CREDS"), "NATS credentials: a .creds file or an nkey seed (NAME.nk) used by every connection of this command; default: each connection's own identity from DATA_DIR/creds (env NATS_CREDS; see vera auth)")
	pf.IntVar(&g.replicas, "replicas", envInt("VERA_REPLICAS", 1), "replicas of VERA's streams when they are created: 1, or 3 on a cluster (env VERA_REPLICAS)")
	pf.StringVar(&g.maxStore, "max-store", os.Getenv("VERA_MAX_STORE"), "the most VERA's streams may hold on disk, e.g. 20GB or 500MiB (events 70%, blobs 20%, dead letters 5%, outside tools' events 5%); applied when this command creates or checks the streams as admin; default with the embedded server: what is stored plus half the free space of the data dir's disk (env VERA_MAX_STORE)")
	pf.StringVar(&g.logLevel, "log-level", envOr("VERA_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env VERA_LOG_LEVEL)")
	pf.StringVar(&g.logFormat, "log-format", envOr("VERA_LOG_FORMAT", "text"), "log format: text or json (env VERA_LOG_FORMAT)")

	root.AddCommand(newUpCmd(g), newEventsCmd(g), newSandboxdCmd(g), newSandboxCmd(g), newVerifyCmd(g), newVerifyFastCmd(g), newVerifierdCmd(g))
	for _, c := range registered {
		root.AddCommand(c(g))
	}
	return root
}

// registered holds the subcommands that files of this package add with
// register from an init function (one file per subcommand, so that they
// can be written apart).
var registered []func(*globals) *cobra.Command

func register(c func(*globals) *cobra.Command) { registered = append(registered, c) }

func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", g.logLevel)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(g.logFormat) {
	case "text":
		return slog.New(slog.NewTextHandler(g.stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(g.stderr, opts)), nil
	}
	return nil, usageError{fmt.Errorf("--log-format %q: want text or json", g.logFormat)}
}

// connect opens the bus for a command, stamped with source, as identity
// source (a component, or cli), or as the reader identity when readOnly.
// Read-only commands do not create streams.
func (g *globals) connect(ctx context.Context, source string, readOnly bool, log *slog.Logger) (*bus.Bus, error) {
	identity := source
	if readOnly {
		identity = auth.Reader
	}
	return g.connectAs(ctx, identity, source, readOnly, log)
}

// openBus is the start of every short command: its logger (quiet unless
// asked) and a bus connection the caller closes.
func (g *globals) openBus(cmd *cobra.Command, source string, readOnly bool) (*bus.Bus, *slog.Logger, error) {
	log, err := g.quietLogger(cmd)
	if err != nil {
		return nil, nil, err
	}
	b, err := g.connect(cmd.Context(), source, readOnly, log)
	return b, log, err
}

// quietLogger is the logger for short CLI commands: warnings and errors only
// unless --log-level asks for more.
func (g *globals) quietLogger(cmd *cobra.Command) (*slog.Logger, error) {
	if !cmd.Flags().Changed("log-level") && os.Getenv("VERA_LOG_LEVEL") == "" {
		g.logLevel = "warn"
	}
	return g.logger()
}

// isTerminal reports whether w is a character device (progress lines are
// only drawn there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress draws a status line on a terminal at most every 200ms.
type progress struct {
	w    io.Writer
	on   bool
	last time.Time
}

func newProgress(w io.Writer) *progress { return &progress{w: w, on: isTerminal(w)} }

func (p *progress) update(format string, args ...any) {
	if !p.on || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	fmt.Fprint(p.w, "\r\033[K"+eventfmt.TerminalSafe(fmt.Sprintf(format, args...)))
}

func (p *progress) done() {
	if p.on && !p.last.IsZero() {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// clear erases the status line so that a normal line can be printed.
func (p *progress) clear() {
	if p.on && !p.last.IsZero() {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
