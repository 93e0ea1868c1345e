package sandboxd

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// shellWrapper runs one request. Arguments: $1 the state marker, $2 the
// command, $3 the starting cwd, $4 a file-safe request token. It records its
// pid (its process group, thanks to setsid) so that a timeout can kill the
// whole group, notes the command in the container log, evals the command
// in this shell, and on exit (whatever the command does) writes the marker,
// the cwd and the exported variables NUL-separated to the original stderr.
// Only builtins run besides the command: no extra process per call.
const shellWrapper = `exec 9>&2
__vera_mark=$1 __vera_cmd=$2
[ -d /tmp/.vera ] || mkdir -p /tmp/.vera 2>/dev/null
printf '%s\n' "$$" > "/tmp/.vera/$4.pid" 2>/dev/null
__vera_exit() {
  __vera_rc=$?
  trap - EXIT
  { printf '%s%s\0' "$__vera_mark" "$PWD"
    for __vera_v in $(compgen -e); do printf '%s=%s\0' "$__vera_v" "${!__vera_v}"; done; } >&9 2>/dev/null
  exit $__vera_rc
}
trap __vera_exit EXIT
cd -- "$3" 2>/dev/null || { printf 'vera: cwd %s is gone; starting in /work\n' "$3" >&2; cd /work; }
printf '[%s] $ %s\n' "$4" "$__vera_cmd" 2>/dev/null >> /tmp/.vera/console
eval "$__vera_cmd"
`

var safeToken = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// fileToken makes a request id safe for a file name.
func fileToken(requestID string) string {
	if safeToken.MatchString(requestID) {
		return requestID
	}
	sum := sha256.Sum256([]byte(requestID))
	return "h" + hex.EncodeToString(sum[:8])
}

// volatileVars change in every shell and are not reported as exports.
var volatileVars = map[string]bool{"PWD": true, "OLDPWD": true, "SHLVL": true, "_": true}

type execRequest struct {
	box      *box
	user     string
	command  string
	cwd      string
	env      map[string]string
	timeout  time.Duration
	token    string
	stdout   *capture
	stderr   *capture
	started  func(execID string, at time.Time) // called once the command runs
	interrup <-chan struct{}                   // closed to interrupt the command
}

type execResult struct {
	exitCode    int
	duration    time.Duration
	timedOut    bool
	interrupted bool
	state       *shellState
	err         error
}

func newMarker() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return "\x1eVERA-STATE-" + hex.EncodeToString(b) + "\x1e"
}

// execute runs one command in the box and waits for it, enforcing the
// timeout by killing the command's process group.
func (d *Daemon) execute(ctx context.Context, r execRequest) execResult {
	marker := newMarker()
	env := make([]string, 0, len(r.env))
	for k, v := range r.env {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	cwd := r.cwd
	if cwd == "" {
		cwd = WorkMount
	}
	created, err := d.docker.ContainerExecCreate(ctx, r.box.id, container.ExecOptions{
		User: r.user, Env: env, WorkingDir: WorkMount, AttachStdout: true, AttachStderr: true,
		Cmd: []string{"setsid", "-w", "bash", "-c", shellWrapper, "vera-shell", marker, r.command, cwd, r.token},
	})
	if err != nil {
		return execResult{exitCode: -1, err: dockerErr("create exec", err)}
	}
	attach, err := d.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return execResult{exitCode: -1, err: dockerErr("start exec", err)}
	}
	defer attach.Close()
	start := time.Now()
	if r.started != nil {
		r.started(created.ID, d.cfg.Clock.Now())
	}
	split := &trailerSplitter{dst: r.stderr, marker: []byte(marker), maxTrailer: 1 << 20}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(r.stdout, split, attach.Reader)
		copied <- err
	}()

	res := execResult{}
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	var copyErr error
	select {
	case copyErr = <-copied:
	case <-timer.C:
		res.timedOut = true
	case <-r.interrup:
		res.interrupted = true
	case <-ctx.Done():
		res.interrupted = true
	}
	if res.timedOut || res.interrupted {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		d.killGroup(kctx, r.box, r.token)
		cancel()
		select {
		case copyErr = <-copied:
		case <-time.After(10 * time.Second):
			attach.Close() // the stream did not end: cut it
			copyErr = <-copied
		}
	}
	res.duration = time.Since(start)
	split.flush()
	if copyErr != nil && copyErr != io.EOF && !res.timedOut && !res.interrupted {
		res.err = fmt.Errorf("read command output: %w", copyErr)
	}
	if split.found {
		if st, err := parseTrailer(split.trailer.Bytes()); err == nil {
			res.state = &st
		}
	}
	res.exitCode = -1
	if !res.timedOut && !res.interrupted {
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		info, err := d.docker.ContainerExecInspect(ictx, created.ID)
		cancel()
		switch {
		case err != nil:
			res.err = dockerErr("inspect exec", err)
		case info.Running:
			res.err = fmt.Errorf("exec %s still running after its output ended", created.ID)
		default:
			res.exitCode = info.ExitCode
		}
	}
	return res
}

// killScript kills the process group recorded for a request, using only
// bash builtins (one new process in all), and reports whether any member
// survived.
func killScript(token string) string {
	return fmt.Sprintf(`read -r p < /tmp/.vera/%s.pid 2>/dev/null; [ -n "$p" ] || exit 0
for i in 1 2 3 4 5 6 7 8 9 10; do
  kill -KILL -- -"$p" "$p" 2>/dev/null || exit 0
  kill -0 -- -"$p" 2>/dev/null || exit 0
done
exit 3`, token)
}

// killGroup kills a command's whole process group. The killer is itself a
// process in the container, so when the command exhausted the pids limit
// (a fork bomb) the container's limit is raised for a moment to let it in,
// then restored. If even that fails, the container is restarted: /work
// survives, the processes do not.
func (d *Daemon) killGroup(ctx context.Context, b *box, token string) {
	_, err := d.execSimple(ctx, b.id, "0:0", killScript(token))
	if err == nil {
		return
	}
	d.log.Warn("kill: first attempt failed; raising the pids limit briefly", "container", b.name, "err", err)
	info, ierr := d.docker.ContainerInspect(ctx, b.id)
	if ierr == nil && info.HostConfig != nil && info.HostConfig.PidsLimit != nil && *info.HostConfig.PidsLimit > 0 {
		limit := *info.HostConfig.PidsLimit
		raised := limit + 64
		if _, uerr := d.docker.ContainerUpdate(ctx, b.id, container.UpdateConfig{Resources: container.Resources{PidsLimit: &raised}}); uerr == nil {
			for attempt := 0; attempt < 5 && err != nil; attempt++ {
				_, err = d.execSimple(ctx, b.id, "0:0", killScript(token))
			}
			if _, uerr := d.docker.ContainerUpdate(ctx, b.id, container.UpdateConfig{Resources: container.Resources{PidsLimit: &limit}}); uerr != nil {
				d.log.Warn("restore pids limit", "container", b.name, "err", uerr)
			}
			if err == nil {
				return
			}
		}
	}
	d.log.Error("cannot kill the command's processes; restarting the container", "container", b.name, "err", err)
	timeout := 5
	if rerr := d.docker.ContainerRestart(ctx, b.id, container.StopOptions{Timeout: &timeout}); rerr != nil {
		d.log.Error("restart container", "container", b.name, "err", rerr)
	}
}

// execSimple runs a short helper command and returns its combined output.
func (d *Daemon) execSimple(ctx context.Context, containerID, user, script string) (string, error) {
	created, err := d.docker.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		User: user, AttachStdout: true, AttachStderr: true, Cmd: []string{"bash", "-c", script},
	})
	if err != nil {
		return "", dockerErr("create exec", err)
	}
	attach, err := d.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return "", dockerErr("start exec", err)
	}
	defer attach.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, attach.Reader); err != nil {
		return out.String(), err
	}
	info, err := d.docker.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return out.String(), dockerErr("inspect exec", err)
	}
	if info.ExitCode != 0 {
		return out.String(), fmt.Errorf("exit %d: %s", info.ExitCode, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// exportsOf returns the variables whose value after the command differs
// from what the command started with.
func exportsOf(before map[string]string, after map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range after {
		if volatileVars[k] || strings.HasPrefix(k, "__vera_") {
			continue
		}
		if old, ok := before[k]; !ok || old != v {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
