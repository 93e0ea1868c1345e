// Package image builds VERA's sandbox image: the Docker image of the
// container the research agent works in, with the task's inputs mounted
// read-only at /input and its workspace read-write at /work.
//
// The image holds bash, coreutils, python3 with venv and pip, curl, wget,
// ca-certificates, git, jq, procps and tini. Its environment points every
// cache (pip, npm, Playwright, XDG) under /work/.cache and puts
// /work/.venv/bin first on PATH; tini runs `sleep infinity` to keep the
// container alive, and commands run in it with docker exec.
//
// There are two ways to build it, from one recipe:
//
//   - online: the embedded Dockerfile (see Dockerfile) is built on a
//     configurable base image (DefaultBaseImage), which needs a container
//     registry;
//   - offline (Options.Offline): debootstrap installs the same packages from
//     the Debian mirror of the machine's apt sources into a directory, which
//     is streamed as a tar into `docker import` with the Dockerfile's
//     configuration (ENV, WORKDIR, ENTRYPOINT, CMD) as changes. This needs
//     root and the debootstrap package, but no registry; CI uses it.
//
// The tag, vera-sandbox:<hash>, carries a hash of the recipe (see Hash), and
// Build reuses an existing image with that tag instead of building again.
// Concurrent builds of one tag on a machine wait for each other.
//
// Docker is reached with the official client (github.com/docker/docker/client)
// configured from the environment with API version negotiation; see Connect.
package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	imagetypes "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
)

// Errors of the offline build's prerequisites.
var (
	// ErrNoDebootstrap: the offline build needs the debootstrap package.
	ErrNoDebootstrap = errors.New("debootstrap not found: apt-get install debootstrap")
	// ErrNeedRoot: debootstrap needs root.
	ErrNeedRoot = errors.New("the offline build runs debootstrap, which needs root (run as root, or build online where a registry is reachable)")
)

// Engine is the part of the Docker client that Build uses; *client.Client
// implements it.
type Engine interface {
	DaemonHost() string
	ImageInspect(ctx context.Context, imageID string, opts ...client.ImageInspectOption) (imagetypes.InspectResponse, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImageImport(ctx context.Context, source imagetypes.ImportSource, ref string, options imagetypes.ImportOptions) (io.ReadCloser, error)
}

var _ Engine = (*client.Client)(nil)

// Connect returns a Docker client configured from the environment
// (DOCKER_HOST, DOCKER_API_VERSION, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY) with
// API version negotiation, after checking that the daemon answers. The
// caller closes it.
func Connect(ctx context.Context) (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client (check DOCKER_HOST): %w", err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		cli.Close()
		return nil, unreachable(cli.DaemonHost(), err)
	}
	return cli, nil
}

// unreachable explains a failure to talk to the daemon at host.
func unreachable(host string, err error) error {
	hint := ""
	if strings.HasPrefix(host, "unix://") {
		hint = " (and make sure this user may use the socket)"
	}
	return fmt.Errorf("docker daemon not reachable at %s: start it, or set DOCKER_HOST to its address%s: %w", host, hint, err)
}

// Options select how the image is built. The zero value builds online from
// DefaultBaseImage.
type Options struct {
	// Offline builds with debootstrap from a Debian mirror and `docker
	// import`, without a container registry.
	Offline bool
	// BaseImage is the online build's base image; default DefaultBaseImage.
	BaseImage string
	// Suite is the offline build's Debian suite; default the host's
	// VERSION_CODENAME from /etc/os-release, else DefaultSuite.
	Suite string
	// Mirror is the offline build's Debian mirror; default the first deb
	// source of the host's apt configuration (/etc/apt/sources.list and
	// /etc/apt/sources.list.d/*.list and *.sources), else DefaultMirror.
	Mirror string
	// Progress receives human-readable progress lines ("debootstrap: …",
	// "import: …", "build: …"); nil discards them.
	Progress io.Writer
	// Logger receives structured logs; nil discards them.
	Logger *slog.Logger
	// KeepWorkDir keeps the offline build's temporary root filesystem
	// (its path is in Result.WorkDir) instead of removing it.
	KeepWorkDir bool

	// salt, when set (by tests), is hashed into the tag, so that a test can
	// build a fresh image next to the shared one.
	salt string
}

// WithDefaults returns opts with the defaults of the fields that apply to
// its mode filled in from the host. Tag and Build apply it themselves.
func (o Options) WithDefaults() Options {
	if o.Offline {
		if o.Suite == "" {
			o.Suite = hostSuite("/")
			if o.Suite == "" {
				o.Suite = DefaultSuite
			}
		}
		if o.Mirror == "" {
			m, err := aptMirror("/", o.Suite)
			if err != nil {
				m = DefaultMirror
			}
			o.Mirror = m
		}
		o.Mirror = strings.TrimRight(o.Mirror, "/")
	} else if o.BaseImage == "" {
		o.BaseImage = DefaultBaseImage
	}
	return o
}

// Result describes the image Build produced or found.
type Result struct {
	// Tag is the image's tag, Tag(opts).
	Tag string
	// ID is the image ID ("sha256:…").
	ID string
	// Size is the image's size in bytes as the daemon reports it.
	Size int64
	// Reused is true when an image with Tag existed and nothing was built.
	Reused bool
	// Offline is true when the image was built (or, if Reused, tagged for)
	// the offline path.
	Offline bool
	// Duration is how long Build took.
	Duration time.Duration
	// WorkDir is the offline build's kept root filesystem directory, when
	// Options.KeepWorkDir is set.
	WorkDir string
}

// Build returns the sandbox image for opts, building it unless an image with
// Tag(opts) exists. See the package documentation for the two build paths.
func Build(ctx context.Context, cli Engine, opts Options) (Result, error) {
	start := time.Now()
	o := opts.WithDefaults()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	progress := newLineWriter(o.Progress)
	hash := Hash(o)
	tag := Repository + ":" + hash
	res := Result{Tag: tag, Offline: o.Offline}
	log = log.With("tag", tag, "offline", o.Offline)

	found := func() (bool, error) {
		img, err := cli.ImageInspect(ctx, tag)
		if err == nil {
			res.ID, res.Size, res.Reused = img.ID, img.Size, true
			res.Duration = time.Since(start)
			log.Info("sandbox image exists, reusing it", "id", img.ID)
			progress.printf("image: reusing %s (%s)", tag, shortID(img.ID))
			return true, nil
		}
		if cerrdefs.IsNotFound(err) {
			return false, nil
		}
		if client.IsErrConnectionFailed(err) {
			err = unreachable(cli.DaemonHost(), err)
		}
		return false, fmt.Errorf("sandbox image: looking for %s: %w", tag, err)
	}
	if ok, err := found(); ok || err != nil {
		return res, err
	}

	// Another process (a parallel test binary, a second `vera sandbox
	// build`) may be building the same tag: wait for it, then look again.
	unlock, err := lockTag(ctx, hash, func() {
		progress.printf("image: waiting for another build of %s", tag)
	})
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("sandbox image %s: %w", tag, err)
	case err != nil:
		// The lock only saves duplicate work; build without it.
		log.Warn("building without the build lock", "err", err)
	default:
		defer unlock()
	}
	if ok, err := found(); ok || err != nil {
		return res, err
	}

	if o.Offline {
		log.Info("building sandbox image offline", "suite", o.Suite, "mirror", o.Mirror)
		progress.printf("image: building %s offline with debootstrap (suite %s, mirror %s)", tag, o.Suite, o.Mirror)
		res.WorkDir, err = buildOffline(ctx, cli, o, hash, progress, log)
	} else {
		log.Info("building sandbox image", "base", o.BaseImage)
		progress.printf("image: building %s from the Dockerfile on %s", tag, o.BaseImage)
		err = buildOnline(ctx, cli, o, hash, progress)
	}
	if err != nil {
		return res, fmt.Errorf("building sandbox image %s: %w", tag, err)
	}
	img, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		return res, fmt.Errorf("building sandbox image %s: the image is missing after the build: %w", tag, err)
	}
	res.ID, res.Size = img.ID, img.Size
	res.Duration = time.Since(start)
	log.Info("built sandbox image", "id", img.ID, "size", img.Size, "duration", res.Duration)
	progress.printf("image: built %s (%s, %s) in %s", tag, shortID(img.ID), humanSize(img.Size), res.Duration.Round(time.Second))
	return res, nil
}

// buildOnline builds the Dockerfile with the build API.
func buildOnline(ctx context.Context, cli Engine, o Options, hash string, progress *lineWriter) error {
	tag := Repository + ":" + hash
	base := o.BaseImage
	resp, err := cli.ImageBuild(ctx, bytes.NewReader(BuildContext()), build.ImageBuildOptions{
		Tags:        []string{tag},
		BuildArgs:   map[string]*string{"BASE_IMAGE": &base},
		Labels:      labels(hash),
		Remove:      true,
		ForceRemove: true,
		Version:     build.BuilderV1,
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out := progress.prefixed("build")
	err = readMessages(resp.Body, func(m jsonmessage.JSONMessage) {
		switch {
		case m.Stream != "":
			// Output of the build steps, in chunks that need not end lines.
			_, _ = out.Write([]byte(m.Stream))
		case m.Status != "" && m.Progress == nil:
			// Status lines ("Pulling fs layer", "Pull complete"), without the
			// progress bars in between.
			_, _ = out.Write([]byte(messageText(m) + "\n"))
		}
	})
	out.Flush()
	if err != nil {
		return fmt.Errorf("%w; last output:\n%s", err, out.Tail())
	}
	return nil
}

// readMessages decodes a JSON message stream (the answer of /build and
// /images/create) until EOF, calling fn for every message. The first
// message carrying an error ends the reading and is returned: the operation
// failed although the HTTP status was 200. A stream cut short is an error.
func readMessages(r io.Reader, fn func(jsonmessage.JSONMessage)) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonmessage.JSONMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading the docker message stream: %w", err)
		}
		if m.Error != nil {
			if m.Error.Message == "" {
				m.Error.Message = m.ErrorMessage //nolint:staticcheck // older daemons fill only this
			}
			return m.Error
		}
		if m.ErrorMessage != "" { //nolint:staticcheck // older daemons fill only this
			return &jsonmessage.JSONError{Message: m.ErrorMessage} //nolint:staticcheck
		}
		fn(m)
	}
}

// messageText is a status message as one line: "<id>: <status>".
func messageText(m jsonmessage.JSONMessage) string {
	if m.ID != "" {
		return m.ID + ": " + m.Status
	}
	return m.Status
}

// lockTag takes an exclusive lock for building the recipe hash on this
// machine (a flock on a file in the temporary directory), calling waiting
// once if it has to wait. The returned function releases it and removes the
// lock file.
func lockTag(ctx context.Context, hash string, waiting func()) (func(), error) {
	path := filepath.Join(os.TempDir(), "vera-sandbox-"+hash+".lock")
	told := false
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return nil, fmt.Errorf("build lock: %w", err)
		}
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			// The holder before us removes the file before unlocking: if
			// the path no longer names the file we locked, lock again.
			held, err1 := f.Stat()
			now, err2 := os.Stat(path)
			if err1 == nil && err2 == nil && os.SameFile(held, now) {
				return func() {
					_ = os.Remove(path)
					_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
					f.Close()
				}, nil
			}
			f.Close()
			continue
		}
		f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return nil, fmt.Errorf("build lock %s: %w", path, err)
		}
		if !told {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for build lock %s: %w", path, context.Cause(ctx))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// lineWriter writes whole progress lines to an io.Writer (or nowhere), and
// splits what is written to it into lines with a prefix. It is safe for
// concurrent use.
type lineWriter struct {
	mu  sync.Mutex
	out io.Writer
}

func newLineWriter(w io.Writer) *lineWriter {
	if w == nil {
		w = io.Discard
	}
	return &lineWriter{out: w}
}

func (lw *lineWriter) printf(format string, args ...any) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	_, _ = fmt.Fprintf(lw.out, format+"\n", args...)
}

// prefixed returns a writer that emits every line written to it as
// "<prefix>: <line>" and remembers the last lines for error messages.
func (lw *lineWriter) prefixed(prefix string) *prefixWriter {
	return &prefixWriter{lw: lw, prefix: prefix}
}

type prefixWriter struct {
	lw      *lineWriter
	prefix  string
	mu      sync.Mutex
	partial []byte
	tail    []string
}

const tailLines = 20

func (pw *prefixWriter) Write(p []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.partial = append(pw.partial, p...)
	for {
		i := strings.IndexAny(string(pw.partial), "\r\n")
		if i < 0 {
			break
		}
		pw.emit(string(pw.partial[:i]))
		pw.partial = pw.partial[i+1:]
	}
	return len(p), nil
}

// Flush emits a last unterminated line.
func (pw *prefixWriter) Flush() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if len(pw.partial) > 0 {
		pw.emit(string(pw.partial))
		pw.partial = nil
	}
}

// ansiEscape matches the colour codes the classic builder puts around a
// step's stderr.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

func (pw *prefixWriter) emit(line string) {
	line = ansiEscape.ReplaceAllString(line, "")
	if strings.TrimSpace(line) == "" {
		return
	}
	pw.lw.printf("%s: %s", pw.prefix, line)
	pw.tail = append(pw.tail, line)
	if len(pw.tail) > tailLines {
		pw.tail = pw.tail[len(pw.tail)-tailLines:]
	}
}

// Tail returns the last lines written.
func (pw *prefixWriter) Tail() string {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return strings.Join(pw.tail, "\n")
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

func humanSize(n int64) string {
	return fmt.Sprintf("%.0f MB", float64(n)/1e6)
}
