package sandboxd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// Where the sandbox shell lives in a container (see keeperScript).
const (
	// ShellPath is the keeper's bash: a copy of the image's bash that only
	// root may read, made by prepareShell in a directory only root may
	// write.
	ShellPath = "/.vera-sandbox/shell"
	// StateMount is the container's shell-state directory: a host
	// directory of sandboxd's (box.stateDir), mounted read-only, in which
	// sandboxd makes, per command, the fifo its state report is written
	// to (stateFifo), and, per session, the session's fifos and request
	// files (startSession, writeRequestFile). Reading it costs no Docker
	// call, and the container cannot create, grow or list anything in it.
	StateMount = "/.vera-sandbox/state"
)

// Bounds of a state file.
const (
	maxStateBytes = 1 << 20
	maxCwdBytes   = 4096
	stateHeader   = "vera-state-1"
)

// shellState is what the sandbox shell reports after a command.
type shellState struct {
	cwd string
	env map[string]string
	// shell is the shell state a session's command left (bash source:
	// variables, functions, aliases, options, umask), "" in exec mode;
	// shellErr says why a session's command reported none.
	shell    string
	shellErr error
}

// errNoState means the command's shell did not report its state: it was
// replaced (exec), killed, or its EXIT trap was the command's own.
var errNoState = errors.New("the shell did not report its state (the command replaced or killed its shell, or set its own EXIT trap)")

var varName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// stateWait bounds how long sandboxd waits, once a command ended, for the
// end of its state report. The process that wrote the report (the
// keeper in exec mode, the command's EXIT trap in a session) has exited
// by then, so the report ends at once; only a process the command left
// holding the fifo open (in a session the command can name it) makes
// sandboxd wait, and then the report is not carried over.
const stateWait = 2 * time.Second

// stateFifo is the channel one command reports its state on: a fifo in
// the container's state directory, which the container sees read-only.
// sandboxd makes it (mode 0622: the container user may write it, only
// sandboxd reads it) before the command can start, named by what only
// the command's keeper knows (exec mode: the nonce) or by the request's
// token (a session), and reads it as it is written: a goroutine keeps
// the first maxStateBytes+1 bytes and drops the rest, so a writer never
// waits on sandboxd longer than a pipe's round trip and a report of any
// size costs no disk and bounded memory. sandboxd holds a write end of
// its own until the command ended, so that the read end sees no end of
// file before the report's writer opened the fifo; then the report ends
// when its writers close it (see result).
//
// Nothing the container does can consume host disk through the state
// directory: it is mounted read-only, the container's writes into a fifo
// go to a pipe's kernel buffer, and every file in it is sandboxd's.
type stateFifo struct {
	path string
	r, w *os.File
	done chan struct{} // closed when the reader stopped
	buf  []byte        // the first maxStateBytes+1 bytes read
	n    int64         // every byte read
	err  error         // a read error other than the end of the report
	once sync.Once
}

// openStateFifo makes the state fifo name in dir and starts reading it.
// What was there under that name (a fifo an earlier daemon left) is
// removed first.
func openStateFifo(dir, name string) (*stateFifo, error) {
	if dir == "" {
		return nil, errors.New("shell state fifo: the container has no shell-state directory")
	}
	path := filepath.Join(dir, name)
	_ = os.Remove(path)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("shell state fifo: %w", err)
	}
	s := &stateFifo{path: path, done: make(chan struct{})}
	fail := func(err error) (*stateFifo, error) {
		if s.r != nil {
			s.r.Close()
		}
		if s.w != nil {
			s.w.Close()
		}
		_ = os.Remove(path)
		return nil, fmt.Errorf("shell state fifo: %w", err)
	}
	// Non-blocking opens: the read end opens with no writer, and the
	// write end finds its reader. Both are then served by Go's poller.
	var err error
	if s.r, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0); err != nil {
		return fail(err)
	}
	if fi, err := s.r.Stat(); err != nil {
		return fail(err)
	} else if fi.Mode().Type() != os.ModeNamedPipe {
		return fail(fmt.Errorf("%s is not the fifo just made (%s)", path, fi.Mode().Type()))
	}
	if err := s.r.Chmod(0o622); err != nil { // past the umask
		return fail(err)
	}
	if s.w, err = os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0); err != nil {
		return fail(err)
	}
	go s.read()
	return s, nil
}

func (s *stateFifo) read() {
	defer close(s.done)
	b := make([]byte, 32<<10)
	for {
		n, err := s.r.Read(b)
		if n > 0 {
			if room := maxStateBytes + 1 - len(s.buf); room > 0 {
				s.buf = append(s.buf, b[:min(n, room)]...)
			}
			s.n += int64(n)
		}
		if err != nil {
			if err != io.EOF {
				s.err = err
			}
			return
		}
	}
}

// result ends the report once the command ended (its keeper or trap,
// the report's writer, has exited): sandboxd closes its own write end,
// reads what is left up to the end of file, waiting at most wait for
// other writers to close theirs, and validates the report. The fifo is
// removed.
func (s *stateFifo) result(wait time.Duration) (shellState, error) {
	s.w.Close()
	t := time.NewTimer(wait)
	defer t.Stop()
	held := false
	select {
	case <-s.done:
	case <-t.C:
		held = true
		_ = s.r.SetReadDeadline(time.Now())
		<-s.done
	}
	s.close()
	switch {
	case held:
		return shellState{}, fmt.Errorf("the shell state report did not end within %s of the command's end (a process the command left holds its fifo open): not carried over", wait)
	case s.err != nil:
		return shellState{}, fmt.Errorf("shell state: %w", s.err)
	case s.n == 0:
		return shellState{}, errNoState
	case s.n > maxStateBytes:
		return shellState{}, fmt.Errorf("the shell state report is larger than %d bytes (%d bytes): not carried over", maxStateBytes, s.n)
	}
	return parseState(s.buf)
}

// close stops reading and removes the fifo; a writer still holding it
// gets EPIPE. Safe to call more than once, and after result.
func (s *stateFifo) close() {
	s.once.Do(func() {
		_ = os.Remove(s.path)
		s.w.Close()
		s.r.Close() // ends the reader's Read
		<-s.done
	})
}

// parseState reads "vera-state-1\0cwd\0K=V\0K=V\0…". The cwd must be an
// absolute path of valid UTF-8; entries whose name is not a shell variable
// name or whose value is not valid UTF-8 (both could not pass through the
// event log faithfully) are left out.
func parseState(b []byte) (shellState, error) {
	if len(b) > maxStateBytes {
		return shellState{}, fmt.Errorf("shell state larger than %d bytes", maxStateBytes)
	}
	parts := bytes.Split(b, []byte{0})
	if len(parts) < 3 || string(parts[0]) != stateHeader || len(parts[len(parts)-1]) != 0 {
		return shellState{}, fmt.Errorf("malformed shell state (%d bytes)", len(b))
	}
	cwd := parts[1]
	if len(cwd) == 0 || cwd[0] != '/' || len(cwd) > maxCwdBytes || !utf8.Valid(cwd) {
		return shellState{}, fmt.Errorf("shell state has an invalid cwd %q", truncate(string(cwd), 200))
	}
	st := shellState{cwd: string(cwd), env: map[string]string{}}
	for _, kv := range parts[2 : len(parts)-1] {
		k, v, ok := bytes.Cut(kv, []byte{'='})
		if ok && string(k) == shellStateVar && !utf8.Valid(v) {
			st.shellErr = errors.New("the shell state is not valid UTF-8 (a variable holds binary data): not carried over")
			continue
		}
		if !ok || !varName.Match(k) || !utf8.Valid(v) {
			continue
		}
		if string(k) == shellStateVar {
			st.shell, st.shellErr = checkShellState(string(v))
			continue
		}
		st.env[string(k)] = string(v)
	}
	return st, nil
}

// checkShellState validates the shell state a session's command reported.
func checkShellState(v string) (string, error) {
	if rest, ok := strings.CutPrefix(v, "#vera-state-too-big "); ok {
		return "", fmt.Errorf("the shell state (%s bytes of variables, functions and aliases) is larger than %d bytes: not carried over", strings.TrimSpace(rest), maxShellState)
	}
	if !strings.HasSuffix(v, "#vera-state-end\n") && !strings.HasSuffix(v, "#vera-state-end") {
		return "", errors.New("the shell state was cut short (no end line): not carried over")
	}
	if len(v) > maxShellState+64 {
		return "", fmt.Errorf("the shell state is larger than %d bytes: not carried over", maxShellState)
	}
	return v, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// setupScript prepares a container for the sandbox shell, as root, once
// per container: it finds the image's bash (4 or newer) and sh on the
// image's own PATH, copies bash to ShellPath readable by root only (a
// process running a binary it cannot read is not dumpable), and makes
// /tmp/.vera for the console. It prints "<bash>:<sh>", absolute paths.
const setupScript = `b=$(command -v bash 2>/dev/null) || b=
case $b in /*) ;; *) echo "the image has no bash on its PATH" >&2; exit 3 ;; esac
"$b" -c '[ "${BASH_VERSINFO[0]}" -ge 4 ]' 2>/dev/null || { echo "$b is not bash 4 or newer" >&2; exit 3; }
s=$(command -v sh 2>/dev/null) || s=
case $s in /*) ;; *) echo "the image has no sh on its PATH" >&2; exit 3 ;; esac
case $b$s in *:*) echo "a path with a colon: $b $s" >&2; exit 3 ;; esac
set -e
d=${0%/*}
mkdir -p "$d"
chmod 0755 "$d"
cp "$b" "$d/shell.new"
chmod 0711 "$d/shell.new"
mv -f "$d/shell.new" "$0"
[ -d /tmp/.vera ] || { mkdir -p /tmp/.vera; chmod 1777 /tmp/.vera; }
printf '%s:%s\n' "$b" "$s"`

// prepareShell runs setupScript in a container and returns the absolute
// paths of the image's bash and sh. Images other than sandboxd's own may
// be used (--allow-image): it says clearly what such an image lacks.
func (d *Daemon) prepareShell(ctx context.Context, containerID string) (bash, sh string, err error) {
	out, err := d.execArgs(ctx, containerID, "0:0", "sh", "-c", setupScript, ShellPath)
	if err != nil {
		return "", "", fmt.Errorf("cannot prepare the sandbox shell (the image needs sh, bash 4 or newer, mkdir, cp, chmod and mv): %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	bash, sh, _ = strings.Cut(strings.TrimSpace(lines[len(lines)-1]), ":")
	if !strings.HasPrefix(bash, "/") || !strings.HasPrefix(sh, "/") {
		return "", "", fmt.Errorf("cannot prepare the sandbox shell: unexpected output %q", truncate(out, 200))
	}
	return bash, sh, nil
}

// stateSource is the host directory mounted read-only at StateMount in a
// container, "" if none. A container with none, or with a read-write one
// (made by an older sandboxd: its keepers wrote their reports as regular
// files, and its commands could fill the host's disk through it), is
// recreated by ensureBox.
func stateSource(info container.InspectResponse) string {
	if src, rw, ok := stateMountOf(info); ok && !rw {
		return src
	}
	return ""
}

// stateMountOf is the bind mount at StateMount: its host source and
// whether it is writable.
func stateMountOf(info container.InspectResponse) (src string, rw, ok bool) {
	for _, m := range info.Mounts {
		if m.Destination == StateMount && m.Type == mount.TypeBind {
			return m.Source, m.RW, true
		}
	}
	return "", false, false
}

// makeStateDir makes the host directory mounted read-only at StateMount
// in a container: SpoolDir/<run>/<container>.state, mode 0711, owned by
// sandboxd. Only sandboxd creates files in it (the container's mount is
// read-only); any container user may open a file in it by name (the
// fifos it must write are mode 0622), and, when sandboxd runs as root
// (or as another user than the container's), none may list it, so the
// names sandboxd gives the fifos (the nonces, the sessions' tags) stay
// secret.
func (d *Daemon) makeStateDir(runID, name string) (string, error) {
	dir := filepath.Join(d.cfg.SpoolDir, runID, name+".state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("shell state dir: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return "", fmt.Errorf("shell state dir: %w", err)
	}
	return dir, nil
}

// removeOldStateDir removes the state directory a container made by an
// older sandboxd wrote into (read-write: what its commands put there
// stays on the host's disk otherwise), once that container is removed.
// Only a directory of this daemon's spool is removed (RemoveAll follows
// no link).
func (d *Daemon) removeOldStateDir(src string) {
	rel, err := filepath.Rel(d.cfg.SpoolDir, filepath.Clean(src))
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") || !strings.HasSuffix(src, ".state") {
		return
	}
	if err := os.RemoveAll(src); err != nil {
		d.log.Warn("remove an old shell state dir", "dir", src, "err", err)
	}
}

// removeStateDirs removes the state directories of a run's containers.
func (d *Daemon) removeStateDirs(runID string) {
	dirs, _ := filepath.Glob(filepath.Join(d.cfg.SpoolDir, runID, "*.state"))
	for _, dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			d.log.Warn("remove shell state dir", "dir", dir, "err", err)
		}
	}
}
