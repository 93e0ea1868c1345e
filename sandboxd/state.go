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
	// StateMount is where a command's keeper writes its shell state, one
	// file named by the command's nonce; the directory is a host directory
	// of sandboxd's (box.stateDir), so reading it costs no Docker call.
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

// readState reads and validates the state file a command's keeper wrote.
// The name is the command's nonce, which the command never sees; still,
// the directory is writable from the container, so only a regular file
// of bounded size is read.
func readState(path string) (shellState, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return shellState{}, errNoState
	}
	if err != nil {
		return shellState{}, fmt.Errorf("shell state: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxStateBytes {
		return shellState{}, fmt.Errorf("shell state is not a regular file of at most %d bytes (%s, %d bytes)", maxStateBytes, fi.Mode().Type(), fi.Size())
	}
	f, err := os.Open(path)
	if err != nil {
		return shellState{}, fmt.Errorf("shell state: %w", err)
	}
	defer f.Close()
	if fi2, err := f.Stat(); err != nil || !os.SameFile(fi, fi2) {
		return shellState{}, fmt.Errorf("shell state changed while being read")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStateBytes+1))
	if err != nil {
		return shellState{}, fmt.Errorf("shell state: %w", err)
	}
	return parseState(data)
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

// stateSource is the host directory mounted at StateMount in a container,
// "" if none.
func stateSource(info container.InspectResponse) string {
	for _, m := range info.Mounts {
		if m.Destination == StateMount && m.Type == mount.TypeBind {
			return m.Source
		}
	}
	return ""
}

// makeStateDir makes the host directory a container's keepers write their
// state files to: SpoolDir/<run>/<container>.state, mode 1733 (anyone may
// create a file, nobody but its owner, sandboxd, may list it), so that any
// container user can write it and, when sandboxd is root, the commands
// cannot list it.
func (d *Daemon) makeStateDir(runID, name string) (string, error) {
	dir := filepath.Join(d.cfg.SpoolDir, runID, name+".state")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("shell state dir: %w", err)
	}
	if err := os.Chmod(dir, os.ModeSticky|0o733); err != nil {
		return "", fmt.Errorf("shell state dir: %w", err)
	}
	return dir, nil
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
