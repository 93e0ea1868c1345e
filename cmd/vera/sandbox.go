package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image"
	"github.com/vera-run/vera/sandboxd/placement"
	"github.com/vera-run/vera/sandboxd/policy"

	dockerimage "github.com/docker/docker/api/types/image"
	dockerclient "github.com/docker/docker/client"
	"github.com/vera-run/vera/internal/wiring"
)

// sandboxFlags are the daemon's settings, shared by `vera sandboxd` and
// `vera up`.
type sandboxFlags struct {
	image          string
	network        string
	user           string
	lab            bool
	keepContainers bool
	timeout        time.Duration
	memory         int64
	pids           int64
	cpus           float64
	concurrency    int
	createAtOnce   int
	warmPool       int
	id             string
	capacity       int
	leaseTTL       time.Duration
	workRoots      []string
	inputRoots     []string
	allowImages    []string
}

func (f *sandboxFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.image, "image", os.Getenv("VERA_SANDBOX_IMAGE"), "sandbox image; default the one `vera sandbox build` made (env VERA_SANDBOX_IMAGE)")
	fl.StringVar(&f.network, "network", envOr("VERA_SANDBOX_NETWORK", sandboxd.DefaultNetwork), "Docker network of sandboxes: bridge, none, or a network name")
	fl.StringVar(&f.user, "user", "", "container user uid:gid; default yours, so files in work dirs are yours")
	fl.BoolVar(&f.lab, "lab", false, "LAB MODE: allow runs that ask for it (sandbox.lab in their task) to run privileged as root (no isolation; trusted machines only)")
	fl.StringSliceVar(&f.workRoots, "work-root", nil, "a directory under which runs' work dirs may lie, besides DATA_DIR/runs (repeatable; a work dir must be new, empty or VERA's own for the run; VERA's keys and store never are mounted)")
	fl.StringSliceVar(&f.inputRoots, "input-root", nil, "a directory under which runs' input dirs may lie (repeatable; mounted read-only; default none: runs have no /input)")
	fl.StringSliceVar(&f.allowImages, "allow-image", nil, "an image runs may ask for besides --image (repeatable)")
	fl.BoolVar(&f.keepContainers, "keep-containers", false, "keep a run's containers after it ends")
	fl.DurationVar(&f.timeout, "tool-timeout", sandboxd.DefaultTimeout, "default timeout of one command")
	fl.Int64Var(&f.memory, "memory", sandboxd.DefaultMemory, "memory limit of a sandbox in bytes (also its swap limit)")
	fl.Int64Var(&f.pids, "pids", sandboxd.DefaultPids, "process limit of a sandbox")
	fl.Float64Var(&f.cpus, "cpus", sandboxd.DefaultCPUs, "CPU limit of a sandbox")
	fl.IntVar(&f.concurrency, "concurrency", sandboxd.DefaultConcurrency, "requests handled at once, across runs (one run's agent commands always run in order; auditor checks run side by side)")
	fl.IntVar(&f.createAtOnce, "create-concurrency", sandboxd.DefaultCreateConcurrency, "containers created and started at once")
	fl.IntVar(&f.warmPool, "warm-pool", envInt("VERA_SANDBOX_WARM_POOL", DefaultWarmPool), "ready containers kept per sandbox configuration for new runs to claim (0 disables; env VERA_SANDBOX_WARM_POOL)")
	fl.StringVar(&f.id, "id", os.Getenv("VERA_SANDBOXD_ID"), "this daemon's id among the sandbox daemons of one stream (default \""+sandboxd.DefaultDaemonID+"\"; give each daemon its own; env VERA_SANDBOXD_ID)")
	fl.IntVar(&f.capacity, "capacity", 0, "runs this daemon holds at once (0 = no limit); a run placed here keeps its containers here until it ends")
	fl.DurationVar(&f.leaseTTL, "lease-ttl", placement.DefaultLeaseTTL, "how long a daemon may go unheard before another daemon takes its runs over (the same on every daemon of a stream)")
}

// DefaultWarmPool is the warm pool's size when neither --warm-pool nor
// VERA_SANDBOX_WARM_POOL sets it.
const DefaultWarmPool = 2

// runsDir is DATA_DIR/runs: where runs get their directory when they
// name none, and always one of the roots run dirs may lie under.
func runsDir(dataDir string) string { return filepath.Join(dataDir, "runs") }

// runRoots are the directories run dirs may lie under: DATA_DIR/runs and
// the operator's --work-root directories. sandboxd and the projector of
// one deployment take the same.
func runRoots(dataDir string, extra ...string) []string {
	return append([]string{runsDir(dataDir)}, extra...)
}

func (f *sandboxFlags) config(dataDir string, g *globals) sandboxd.Config {
	return sandboxd.Config{
		Image: f.image, WorkRoot: runsDir(dataDir), SpoolDir: filepath.Join(dataDir, "sandboxd", "spool"),
		WorkRoots: f.workRoots, InputRoots: f.inputRoots, AllowedImages: f.allowImages,
		// VERA's own secrets and store never go into a sandbox, whatever
		// the roots allow.
		Protected: []string{auth.DirOf(dataDir), filepath.Join(dataDir, "nats"), filepath.Join(dataDir, "dashboard.token")},
		Network:   f.network, User: f.user, Lab: f.lab, KeepContainers: f.keepContainers, DefaultTimeout: f.timeout,
		Memory: f.memory, PidsLimit: f.pids, CPUs: f.cpus, Concurrency: f.concurrency,
		CreateConcurrency: f.createAtOnce, WarmPool: f.warmPool, DaemonID: f.id, Capacity: f.capacity, LeaseTTL: f.leaseTTL,
	}
}

func newSandboxdCmd(g *globals) *cobra.Command {
	var f sandboxFlags
	var dataDir string
	cmd := &cobra.Command{
		Use:   "sandboxd",
		Short: "Run the Docker sandbox daemon alone (distributed mode)",
		Long: `Run sandboxd on its own: it consumes vera.tool.requested from the bus, runs
each command with bash in the run's Docker container (/work read-write from the
run's work dir, /input read-only), and publishes vera.tool.started and
vera.tool.finished, plus the containers' logs and Docker events. 'vera up'
runs it too; use this command to put it on the machine that has Docker.

Safe by default: containers run as your user, unprivileged, with
no-new-privileges, all capabilities dropped but a few, and pids/memory/CPU
limits. Destructive commands (rm -rf /, mkfs, dd to a disk, fork bombs,
shutdown, writes to /work/notes.md) are refused without running.

Several daemons (one per Docker host) can serve one stream: start each with
its own --id, and optionally --capacity. Each run is placed on one daemon,
which keeps its containers until the run ends; a daemon not heard from for
--lease-ttl loses its runs to the others, which re-create the containers and
report a command cut off there as interrupted, once. /work survives the move
when the work roots are on storage every daemon mounts at the same path
(docs/deploy.md). --warm-pool containers are kept ready so that a new run's
first command does not wait for one to start.

Give a daemon with an id its own identity on the bus host: 'vera auth issue
ID --role sandboxd' writes DATA_DIR/creds/ID.nk, which this command uses when
it finds it there (or pass it with --nats-creds). Its consumers are then kept
from every other identity; a daemon id without an identity of its own runs as
the shared sandboxd identity, and a reader could pull its requests.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			g.credsDataDir = dataDir
			g.sandboxDaemonCreds(dataDir, f.id, log)
			return g.runSet(ctx, wiring.Set{Sandbox: sandboxSet(f.config(dataDir, g))}, log)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&dataDir, "data-dir", defaultDataDir(), "where sandboxd keeps work dirs of ad-hoc runs and output spools (env VERA_DATA_DIR)")
	return cmd
}

// sandboxDaemonCreds picks the identity of `vera sandboxd --id id`: the
// one issued for the daemon (DATA_DIR/creds/ID.nk, `vera auth issue ID
// --role sandboxd`) when there is one and --nats-creds names none, else
// the shared sandboxd identity, with a warning that the daemon's consumers
// are then not protected from other identities.
func (g *globals) sandboxDaemonCreds(dataDir, id string, log *slog.Logger) {
	if id == "" || id == sandboxd.DefaultDaemonID {
		return
	}
	shared := g.natsCreds != "" && filepath.Base(g.natsCreds) == catalog.ComponentSandboxd+auth.SeedExt
	if g.natsCreds == "" {
		store := auth.Store{Dir: auth.DirOf(dataDir)}
		ids, _ := store.Identities() // none readable: the shared identity, as before
		if slices.ContainsFunc(ids, func(i auth.Identity) bool { return i.Name == id && i.Role == auth.RoleSandboxd }) {
			g.natsCreds = store.Path(id)
			log.Info("sandboxd runs as its own identity", "id", id, "creds", g.natsCreds)
			return
		}
		shared = g.credsFor(dataDir, catalog.ComponentSandboxd) != ""
	}
	if shared {
		log.Warn("sandbox daemon runs as the shared sandboxd identity: its consumers are not protected from other identities (a reader could pull its requests); give it its own with `vera auth issue "+id+" --role sandboxd` on the bus host",
			"id", id, "consumers", strings.Join(sandboxd.DaemonDurables(id), ","))
	}
}

func newSandboxCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sandbox",
		Short: "Build the sandbox image, run one command through the bus, or check a command against the deny rules",
	}
	cmd.AddCommand(newSandboxBuildCmd(g), newSandboxExecCmd(g), newSandboxRulesCmd(g), newSandboxCheckCmd(g))
	return cmd
}

// Exit codes of `vera sandbox exec` when the command did not run to an exit.
const (
	exitDenied   = 126
	exitTimedOut = 124
	exitSandbox  = 125
)

func newSandboxExecCmd(g *globals) *cobra.Command {
	var run string
	var timeout time.Duration
	var auditor, fresh bool
	cmd := &cobra.Command{
		Use:   "exec --run ID [--timeout D] [--fresh] -- COMMAND...",
		Short: "Run one command in a run's sandbox through the bus and print the result",
		Long: `Publish a vera.tool.requested for the run, wait for sandboxd's
vera.tool.finished, print the command's stdout and stderr, and exit with its
exit code. A debugging aid, and a demo of the event path: the request and
its result are on the stream like any other.

The command starts where the run's shell session is, as the agent's next
command would: the working directory, exported variables and (in a
persistent session) functions, aliases, variables and shell options that
the run's last commands — the agent's and earlier 'vera sandbox exec'
ones — left, as their results on the stream record them. So two calls on
one run share a session: 'cd /work/sub' in one, 'pwd' in the next. The
agent's own commands are not affected (it follows only its own results).
--fresh starts from a new shell at /work instead; --auditor always does.
` + "`" + `/work` + "`" + ` is the run's work/ directory on the host.

Exit status: the command's own, or 126 when a deny rule refused it, 124 when
it timed out, 125 when the sandbox could not run it.`,
		Example: `  vera sandbox exec --run r42 -- ls -la /work
  vera sandbox exec --run r42 -- 'cd /work && python3 -c "print(6*7)"'`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := bus.ValidateRunID(run); err != nil {
				return usageError{fmt.Errorf("--run: %w", err)}
			}
			b, _, err := g.openBus(cmd, catalog.ComponentCLI, false)
			if err != nil {
				return err
			}
			defer b.Close()
			ctx := cmd.Context()
			requester := catalog.RequesterCLI
			if auditor {
				requester = catalog.RequesterAuditor
			}
			var from shellSession
			if !auditor && !fresh {
				if from, err = runShellSession(ctx, b, run); err != nil {
					return err
				}
			}
			tf, err := sandboxExec(ctx, b, run, strings.Join(args, " "), requester, timeout, from)
			if err != nil {
				return err
			}
			if err := writeOutput(ctx, b, g.stdout, tf.Stdout); err != nil {
				return err
			}
			if err := writeOutput(ctx, b, g.stderr, tf.Stderr); err != nil {
				return err
			}
			switch {
			case tf.Denied:
				return exitError{exitDenied, fmt.Errorf("denied by rule %s: %s", tf.DenyRule, tf.Error)}
			case tf.TimedOut:
				return exitError{exitTimedOut, errors.New(tf.Error)}
			case tf.ExitCode < 0:
				return exitError{exitSandbox, errors.New(tf.Error)}
			case tf.ExitCode != 0:
				return exitError{tf.ExitCode, nil}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "the run whose sandbox runs the command (required)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "kill the command after this long (default: the run's or sandboxd's)")
	cmd.Flags().BoolVar(&auditor, "auditor", false, "run as the auditor (its container mounts /work read-only; a fresh shell each time)")
	cmd.Flags().BoolVar(&fresh, "fresh", false, "start from a new shell at /work, not from the run's shell session")
	return cmd
}

// shellSession is where a command starts: what earlier commands left.
type shellSession struct {
	cwd        string
	env        map[string]string
	shellState string
}

// runShellSession folds the run's shell session from its stored results,
// in stream order, the way the agent folds its own (agents' shellEnv):
// the last reported cwd and shell state, and every export (later ones
// winning), of the agent's and the cli's shell commands; answer-file
// reads run in a fresh shell of their own and are left out. A run with
// no results yet gives a new shell at /work.
func runShellSession(ctx context.Context, b *bus.Bus, run string) (shellSession, error) {
	var s shellSession
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: run, Types: []string{catalog.TypeToolFinished}}) {
		if err != nil {
			return s, fmt.Errorf("read the run's shell session: %w", err)
		}
		var tf catalog.ToolFinished
		if rec.Err != nil || rec.Event.DecodeData(&tf) != nil {
			continue
		}
		if tf.Requester != catalog.RequesterAgent && tf.Requester != catalog.RequesterCLI {
			continue
		}
		if tf.Requester == catalog.RequesterAgent && agents.IsAnswerRead(tf.RequestID) {
			continue
		}
		if tf.CwdAfter != "" {
			s.cwd = tf.CwdAfter
		}
		if tf.ShellStateAfter != "" {
			s.shellState = tf.ShellStateAfter
		}
		for k, v := range tf.Exports {
			if s.env == nil {
				s.env = map[string]string{}
			}
			s.env[k] = v
		}
	}
	return s, nil
}

// sandboxExec publishes one request, starting from session from, and
// waits for its result.
func sandboxExec(ctx context.Context, b *bus.Bus, run, command string, requester catalog.Requester, timeout time.Duration, from shellSession) (catalog.ToolFinished, error) {
	ev, err := b.Events.New(run, catalog.ToolRequested{
		Requester: requester, Tool: catalog.ToolShell, Command: command, TimeoutMS: timeout.Milliseconds(),
		Cwd: from.cwd, Env: from.env, ShellState: from.shellState,
	})
	if err != nil {
		return catalog.ToolFinished{}, err
	}
	// The request id is the event id: unique, and known before publishing.
	var req catalog.ToolRequested
	_ = ev.DecodeData(&req)
	req.RequestID = "cli-" + ev.ID
	if ev, err = b.Events.New(run, req, bus.WithID(ev.ID)); err != nil {
		return catalog.ToolFinished{}, err
	}
	ack, err := b.Publish(ctx, ev)
	if err != nil {
		return catalog.ToolFinished{}, err
	}
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: run, Types: []string{catalog.TypeToolFinished}, FromSeq: ack.Sequence, Follow: true}) {
		if err != nil {
			return catalog.ToolFinished{}, err
		}
		var tf catalog.ToolFinished
		if rec.Err != nil || rec.Event.DecodeData(&tf) != nil || tf.RequestID != req.RequestID {
			continue
		}
		return tf, nil
	}
	return catalog.ToolFinished{}, fmt.Errorf("no result for %s: %w", req.RequestID, ctx.Err())
}

// writeOutput prints a captured stream whole: from its blob when the event
// holds only its head and tail.
func writeOutput(ctx context.Context, b *bus.Bus, w io.Writer, o catalog.Output) error {
	if o.Truncated && o.Blob != nil {
		data, err := b.GetBlob(ctx, o.Blob.Digest)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	data := []byte(o.Head + o.Tail)
	if o.Encoding == "base64" {
		head, _ := base64.StdEncoding.DecodeString(o.Head)
		tail, _ := base64.StdEncoding.DecodeString(o.Tail)
		data = append(head, tail...)
	}
	_, err := w.Write(data)
	return err
}

// exitError makes the CLI exit with a given code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func newSandboxBuildCmd(g *globals) *cobra.Command {
	var opts image.Options
	var keep bool
	cmd := &cobra.Command{
		Use:   "build [--offline]",
		Short: "Build the sandbox image (reused when its recipe has not changed)",
		Long: `Build VERA's sandbox image: Debian with bash, coreutils, python3 (venv, pip),
curl, wget, ca-certificates, git and jq, /work/.venv first on PATH and caches
under /work/.cache.

Two paths, one recipe:
  (default)   docker build from the repository's Dockerfile on --base-image
              (needs a registry that has the base image)
  --offline   debootstrap from the Debian mirror in this machine's apt sources,
              then docker import (no registry needed; needs root and the
              debootstrap and debian-archive-keyring packages)

The tag is vera-sandbox:<hash of the recipe>; if an image with that tag
exists it is reused at once.`,
		Example: `  vera sandbox build --offline
  vera sandbox build --base-image debian:bookworm-slim`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			cli, err := image.Connect(ctx)
			if err != nil {
				return err
			}
			defer cli.Close()
			opts.Progress = g.stderr
			opts.Logger = log
			opts.KeepWorkDir = keep
			res, err := image.Build(ctx, cli, opts)
			if err != nil {
				return err
			}
			how := "built"
			if res.Reused {
				how = "already present, reused"
			}
			fmt.Fprintf(g.stderr, "sandbox image %s (%s, %s in %s)\n", res.Tag, how, humanBytes(res.Size), res.Duration.Round(time.Millisecond))
			fmt.Fprintln(g.stdout, res.Tag)
			return nil
		},
	}
	cmd.Flags().BoolVar(&opts.Offline, "offline", false, "build with debootstrap and docker import, without a registry")
	cmd.Flags().StringVar(&opts.BaseImage, "base-image", "", "base image of the Dockerfile build (default "+image.DefaultBaseImage+")")
	cmd.Flags().StringVar(&opts.Suite, "suite", "", "Debian suite of the offline build (default: this machine's)")
	cmd.Flags().StringVar(&opts.Mirror, "mirror", "", "Debian mirror of the offline build (default: this machine's apt sources)")
	cmd.Flags().BoolVar(&keep, "keep-rootfs", false, "keep the offline build's root filesystem directory")
	return cmd
}

// defaultSandboxImage is the image `vera sandbox build` makes on this
// machine: the offline one if it exists, else the online one.
func defaultSandboxImage(ctx context.Context, docker interface {
	ImageInspect(context.Context, string, ...dockerclient.ImageInspectOption) (dockerimage.InspectResponse, error)
}) string {
	offline := image.Tag(image.Options{Offline: true})
	online := image.Tag(image.Options{})
	for _, tag := range []string{offline, online} {
		if _, err := docker.ImageInspect(ctx, tag); err == nil {
			return tag
		}
	}
	return offline
}

func newSandboxRulesCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rules",
		Short: "List the deny rules sandboxd applies before running a command",
		Long: `List the rules that make sandboxd refuse a command without running it
(vera.tool.finished then says denied, with the rule's id). They are a guard
rail against obvious destruction, not a security boundary: the container's
isolation is the boundary. The rules live in sandboxd/policy/rules.go.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, r := range policy.Rules() {
				fmt.Fprintf(g.stdout, "%s\n  %s\n", r.ID, r.Description)
				if len(r.Denies) > 0 {
					fmt.Fprintf(g.stdout, "  denies, e.g.: %s\n", strings.Join(r.Denies[:min(3, len(r.Denies))], "  |  "))
				}
				if len(r.Allows) > 0 {
					fmt.Fprintf(g.stdout, "  allows, e.g.: %s\n", strings.Join(r.Allows[:min(3, len(r.Allows))], "  |  "))
				}
			}
			return nil
		},
	}
}
