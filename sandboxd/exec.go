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
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// The sandbox shell. Each request is one Docker exec of two bash
// processes, neither of which depends on the user's PATH:
//
//   - the keeper (keeperScript), the exec's own process, runs ShellPath: a
//     copy of the image's bash that only root may read, so that the kernel
//     makes the keeper non-dumpable and no other process of the sandbox
//     user (the command included) can read its memory, environment or
//     descriptors. Started with -p, it ignores BASH_ENV, exported functions
//     and SHELLOPTS. It takes a nonce from its environment
//     (VERA_STATE_NONCE, which only this process's own environment holds:
//     it unsets it before anything else starts), notes the command in the
//     container's console, and starts the command's shell;
//   - the command's shell (shellScript), the image's bash by its absolute
//     path, with the request's env. It cds to the request's cwd and evals
//     the command. On exit its EXIT trap replaces it (exec, same pid, no
//     output) with a sh that only stops itself, named vera-state, whose
//     kernel-recorded working directory and environment are what the shell
//     left behind, and whose arguments carry the exit status and $PWD.
//
// The keeper waits for its child (job control, so that a stop wakes it;
// turned off again before the keeper kills the stopped child, or bash
// would signal the child's whole process group, background processes the
// command left included, on its way out). When the child stopped as
// vera-state, the keeper writes the state
// ("vera-state-1", the cwd, then the environment, NUL-separated) to
// StateMount/<nonce>, kills the stopped child and exits with the
// command's status. StateMount/<nonce> is a fifo sandboxd made before it
// started the exec and reads on the host as it is written (stateFifo):
// the state directory is mounted read-only, so the keeper creates
// nothing there, and its redirection (noclobber on, which refuses only
// an existing regular file) opens the fifo whose reader is already
// there. When the child ended in any other way (exec, killed, its own
// EXIT trap), nothing is written and sandboxd reads an empty report.
// The command cannot name the state fifo: the nonce never reaches it,
// and the directory cannot be listed. Its stdout and stderr go straight
// to the exec's and are never parsed.
//
// Keeper arguments: $0 "vera-shell:<token>" (how the killer finds it), $1
// the command, $2 the starting cwd, $3 "<the image's bash>:<its sh>", $4
// StateMount, $5 shellScript.
const keeperScript = `set +o posix
IFS=$' \t\n'
__n=${VERA_STATE_NONCE-}
unset VERA_STATE_NONCE
[[ $__n =~ ^[0-9a-f]{32}$ ]] || exit 125
__cmd=$1 __bash=${3%%:*} __sh=${3#*:} __dir=$4
printf '[%s] $ %s\n' "${0#vera-shell:}" "$__cmd" 2>/dev/null >> /tmp/.vera/console
set -m
"$__bash" -c "$5" vera-shell "$__cmd" "$2" "$__sh" &
__c=$!
exec 8>&1 9>&2 >/dev/null 2>&1
set -f
while :; do
  wait "$__c"; __rc=$?
  read -r __s < "/proc/$__c/stat" || exit "$__rc"
  __s=${__s##*) }; set -- $__s
  [[ $2 == "$$" ]] || exit "$__rc"
  [[ $1 == [Tt] ]] || continue
  __a=(); while IFS= read -r -d '' __x; do __a+=("$__x"); done < "/proc/$__c/cmdline"
  [[ ${#__a[@]} -eq 5 && ${__a[0]} == vera-state && ${__a[2]} == 'kill -STOP $$' && ${__a[3]} =~ ^[0-9]{1,3}$ ]] && break
  kill -CONT "$__c"
done
set +m
__cwd=${__a[4]}
if ! [[ $__cwd == /* && $__cwd -ef /proc/$__c/cwd ]] && cd -P "/proc/$__c/cwd" && [[ $PWD == /* && $PWD != /proc/* ]]; then __cwd=$PWD; fi
umask 022; set -C
{ printf 'vera-state-1\0%s\0' "$__cwd"
  while IFS= read -r -d '' __x; do printf '%s\0' "$__x"; done < "/proc/$__c/environ"
} > "$__dir/$__n"
kill -KILL "$__c"; wait "$__c"
exit "${__a[3]}"
`

// shellScript is the command's shell. Arguments: $1 the command, $2 the
// starting cwd, $3 the image's sh (for the state report: the smallest
// shell starts fastest).
const shellScript = `__vera_cmd=$1 __vera_sh=$3
trap '__vera_rc=$?; trap - EXIT; exec -a vera-state "$__vera_sh" -c "kill -STOP \$\$" "$__vera_rc" "$PWD" </dev/null >/dev/null 2>&1' EXIT
cd -- "$2" 2>/dev/null || { printf 'vera: cwd %s is gone; starting in /work\n' "$2" >&2; cd /work; }
set --
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
	box     *box
	user    string
	command string
	cwd     string
	env     map[string]string
	timeout time.Duration
	token   string
	stdout  *capture
	stderr  *capture
	// started records the start of the command, after its exec is
	// created and before it is started. An error leaves the command
	// unstarted: execute returns at once with notStarted set.
	started  func(execID string, at time.Time) error
	interrup <-chan struct{} // closed to interrupt the command
	limit    <-chan struct{} // closed when the command passed a disk limit
}

type execResult struct {
	exitCode    int
	duration    time.Duration
	timedOut    bool
	interrupted bool
	notStarted  error // the start could not be recorded: the command never ran
	state       *shellState
	stateErr    error // why state is nil when the command ran to an exit
	err         error
	sessionLost string // a session was given up during the command: why
	limited     bool   // killed at a disk limit
}

// nonceVar passes a command's nonce to its keeper. Only the keeper's own
// initial environment (/proc/<keeper>/environ, which the keeper's
// non-dumpable state keeps from every other process of the sandbox user)
// ever holds it: the keeper unsets it before it starts the command's
// shell. (Passing it on stdin would keep it as private, at 5 ms more per
// exec: Docker's stdin plumbing.)
const nonceVar = "VERA_STATE_NONCE"

// newNonce names one command's state file; only sandboxd and the command's
// keeper know it.
func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// killSince is how long before creating a command's exec its processes are
// looked for, should its keeper be gone when it is killed: a margin for the
// precision of the container's clocks (process start times are in ticks of
// 10 ms, /proc/uptime in 10 ms), never for skew between sandboxd and the
// container, which share the host's clock.
const killSince = 500 * time.Millisecond

// execute runs one command in the box and waits for it, enforcing the
// timeout by killing every process the command started.
func (d *Daemon) execute(ctx context.Context, r execRequest) execResult {
	nonce := newNonce()
	env := make([]string, 0, len(r.env)+1)
	for k, v := range r.env {
		if k != nonceVar {
			env = append(env, k+"="+v)
		}
	}
	sort.Strings(env)
	env = append(env, nonceVar+"="+nonce)
	cwd := r.cwd
	if cwd == "" {
		cwd = WorkMount
	}
	since := time.Now()
	created, err := d.docker.ContainerExecCreate(ctx, r.box.id, container.ExecOptions{
		User: r.user, Env: env, WorkingDir: WorkMount, AttachStdout: true, AttachStderr: true,
		Cmd: []string{ShellPath, "-p", "-c", keeperScript, "vera-shell:" + r.token, r.command, cwd, r.box.bash + ":" + r.box.sh, StateMount, shellScript},
	})
	if err != nil {
		return execResult{exitCode: -1, err: dockerErr("create exec", err)}
	}
	// The state fifo, read from now on: the keeper writes its report into
	// it (the exec is not started yet; one never started is dropped with
	// its container).
	sf, err := openStateFifo(r.box.stateDir, nonce)
	if err != nil {
		return execResult{exitCode: -1, err: err}
	}
	defer sf.close()
	// No effect before its record: the exec exists but runs nothing until
	// it is started, and it is started only once its tool.started is
	// stored. (An exec never started is dropped with its container.)
	if r.started != nil {
		if err := r.started(created.ID, d.cfg.Clock.Now()); err != nil {
			return execResult{exitCode: -1, notStarted: err}
		}
	}
	attach, err := d.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return execResult{exitCode: -1, err: dockerErr("start exec", err)}
	}
	defer attach.Close()
	start := time.Now()
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(r.stdout, r.stderr, attach.Reader)
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
	case <-r.limit:
		res.limited = true
	case <-ctx.Done():
		res.interrupted = true
	}
	if res.timedOut || res.interrupted || res.limited {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		d.killCommand(kctx, r.box, "vera-shell:"+r.token, since.Add(-killSince))
		cancel()
		select {
		case copyErr = <-copied:
		case <-time.After(10 * time.Second):
			attach.Close() // the stream did not end: cut it
			copyErr = <-copied
		}
	}
	res.duration = time.Since(start)
	if copyErr != nil && copyErr != io.EOF && !res.timedOut && !res.interrupted && !res.limited {
		res.err = fmt.Errorf("read command output: %w", copyErr)
	}
	res.exitCode = -1
	if !res.timedOut && !res.interrupted && !res.limited {
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
			st, err := sf.result(stateWait)
			if err != nil {
				res.stateErr = err
			} else {
				res.state = &st
			}
		}
	}
	return res
}

// killScript kills every process a command started, using only bash
// builtins. Arguments: $1 what names the command (see below), $2 when the command's exec
// was created, in microseconds since the epoch (minus a margin).
//
// A process belongs to the command when, following parent links up, it
// reaches the command's keeper: in exec mode the exec's own process, whose
// $0 ($1 here: "vera-shell:<token>") names the token; in a session ($1:
// "vera-session:<id>"), the session keeper's only child, the command's
// shell. Docker's execs are the only processes with parent 0 besides
// the container's init, and nothing in the container can make one or put
// itself under another's, so a process under another exec (a concurrent
// command, this killer, an operator's docker exec) is never the command's.
// A process that reaches init instead (it was orphaned: double fork,
// setsid and exit, a killed keeper) belongs to no exec any more; it is
// the command's when it started no earlier than the command: start times
// are the kernel's and no process can change its own. The command's
// start is its keeper's start time, or, when the keeper is gone already,
// the daemon's clock at exec creation. Start times count clock ticks
// (10 ms): an orphan that started in the keeper's own tick is the
// command's only if its pid is above the keeper's, since a pid namespace
// hands out pids in increasing order (a background job of the previous
// command, which can have started in the same tick when commands follow
// each other within milliseconds, is not; the order could only be wrong
// if the namespace's pids wrapped around within that one tick). What this also kills: an orphan
// that another command still running in the same container (the
// auditor's, which run concurrently) started after this one, and a child
// that a process left behind by an earlier command started after this
// command did.
//
// It repeats until no such process is left (processes fork while it
// kills), and exits 3 if some still are after 50 rounds. A zombie whose
// threads are not all gone is live (see scanProcs) and killed through
// one of its live threads.
const killScript = `t=$1 since=$2 me=$$ keeper= thr= sk=
for d in /proc/[0-9]*; do
  read -r s 2>/dev/null < "$d/stat" || continue
  s=${s##*) }; set -f; set -- $s; set +f
  [[ $2 == 0 && ${d#/proc/} != 1 && ${d#/proc/} != "$me" ]] || continue
  a=(); while IFS= read -r -d '' x; do a+=("$x"); done 2>/dev/null < "$d/cmdline"
  [[ ${#a[@]} -gt 4 && ${a[4]} == "$t" ]] || continue
  if [[ $t == vera-session:* ]]; then sk=${d#/proc/}; else keeper=${d#/proc/}; thr=${20}; fi
done
if [[ -n $sk ]]; then
  for d in /proc/[0-9]*; do
    read -r s 2>/dev/null < "$d/stat" || continue
    s=${s##*) }; set -f; set -- $s; set +f
    [[ $2 == "$sk" ]] && { keeper=${d#/proc/}; thr=${20}; }
  done
fi
if [[ -z $thr ]]; then
  [[ $since =~ ^[0-9]+$ ]] || exit 0
  read -r up _ < /proc/uptime || exit 2
  up=${up//./}
  if [[ -n ${EPOCHREALTIME:-} ]]; then now=${EPOCHREALTIME//[.,]/}; else printf -v now '%(%s)T' -1; now=$(( now * 1000000 + 1000000 )); fi
  thr=$(( (since - (now - 10#$up * 10000)) / 10000 ))
fi
for round in {1..50}; do
  kill=()
` + scanProcs + `
  for p in "${!pp[@]}"; do
    [[ $p == 1 || $p == "$me" ]] && continue
    q=$p
    while :; do
      [[ $q == 1 ]] && { root=1; break; }
      par=${pp[q]-}
      [[ -z $par ]] && { root=1; break; }
      [[ $par == 0 ]] && { root=$q; break; }
      q=$par
    done
    if [[ $root == 1 ]]; then (( st[p] > thr || (st[p] == thr && p > keeper) )) && kill+=("${tid[p]:-$p}")
    elif [[ $root == "$keeper" ]]; then kill+=("${tid[p]:-$p}")
    elif [[ -n $keeper ]]; then
      q=$p
      while [[ -n ${pp[q]-} && $q != 0 && $q != "$keeper" ]]; do q=${pp[q]}; done
      [[ $q == "$keeper" ]] && kill+=("${tid[p]:-$p}")
    fi
  done
  (( ${#kill[@]} )) || exit 0
  kill -KILL "${kill[@]}" 2>/dev/null
done
exit 3`

// scanProcs reads the container's processes into pp (pid → parent pid),
// st (pid → start time, in clock ticks since boot) and tid (pid → the
// thread to kill it through, for a zombie leader), bash builtins only.
// A process whose leader is a zombie (state Z or X) is dead only when
// every thread of it is: a leader that ended with the raw exit syscall
// leaves its other threads running (ps shows "Zl"), and the process goes
// on until they end. Such a process is live; its parent and start time
// are those the leader's stat still holds, and it is killed through one
// of its live threads (a SIGKILL to any thread ends the whole group).
const scanProcs = `  pp=() st=() tid=()
  for d in /proc/[0-9]*; do
    read -r s 2>/dev/null < "$d/stat" || continue
    s=${s##*) }; set -f; set -- $s; set +f
    p=${d#/proc/}
    if [[ $1 == [ZX] ]]; then
      lt=
      for td in "$d"/task/[0-9]*; do
        read -r ts 2>/dev/null < "$td/stat" || continue
        ts=${ts##*) }
        [[ ${ts%% *} == [ZX] ]] || { lt=${td##*/}; break; }
      done
      [[ -n $lt ]] || continue
      tid[p]=$lt
    fi
    pp[p]=$2 st[p]=${20}
  done`

// killCommand kills every process a command started (see killScript).
// The killer is itself a process in the container, so when the command
// exhausted the pids limit (a fork bomb) the container's limit is raised
// for a moment to let it in, then restored. If even that fails, the
// container is restarted: /work survives, the processes do not.
func (d *Daemon) killCommand(ctx context.Context, b *box, marker string, since time.Time) {
	kill := func() error {
		kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := d.execArgs(kctx, b.id, "0:0", "bash", "-c", killScript, "vera-kill", marker, strconv.FormatInt(since.UnixMicro(), 10))
		return err
	}
	err := kill()
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
				err = kill()
			}
			// Restored on a context of its own: the attempts may have
			// spent ctx, and a container left with the raised limit
			// would keep it for the rest of the run.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			if _, uerr := d.docker.ContainerUpdate(uctx, b.id, container.UpdateConfig{Resources: container.Resources{PidsLimit: &limit}}); uerr != nil {
				d.log.Error("restore the pids limit", "container", b.name, "limit", limit, "err", uerr)
			}
			cancel()
			if err == nil {
				return
			}
		}
	}
	d.log.Error("cannot kill the command's processes; restarting the container", "container", b.name, "err", err)
	timeout := 5
	// The attempts above may have spent ctx's time (a fork bomb refills
	// every pid the raised limit frees): the restart gets its own.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
	defer cancel()
	if rerr := d.docker.ContainerRestart(rctx, b.id, container.StopOptions{Timeout: &timeout}); rerr != nil {
		d.log.Error("restart container", "container", b.name, "err", rerr)
	}
}

// execSimple runs a short helper bash script and returns its combined
// output.
func (d *Daemon) execSimple(ctx context.Context, containerID, user, script string) (string, error) {
	return d.execArgs(ctx, containerID, user, "bash", "-c", script)
}

// execArgs runs a helper command (found on the container's own PATH: a
// helper exec never has the user's env) and returns its combined output.
func (d *Daemon) execArgs(ctx context.Context, containerID, user string, cmd ...string) (string, error) {
	var out bytes.Buffer
	code, err := d.execHelper(ctx, containerID, user, nil, &out, &out, cmd...)
	if err != nil {
		return out.String(), err
	}
	if code != 0 {
		return out.String(), fmt.Errorf("exit %d: %s", code, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// execIO runs a helper in the container with stdin (nil = none) and
// returns its stdout, stderr and exit code.
func (d *Daemon) execIO(ctx context.Context, containerID, user string, stdin []byte, cmd ...string) (stdout, stderr []byte, code int, err error) {
	var out, errb bytes.Buffer
	code, err = d.execHelper(ctx, containerID, user, stdin, &out, &errb, cmd...)
	if err != nil {
		return nil, nil, -1, err
	}
	return out.Bytes(), errb.Bytes(), code, nil
}

// execHelper runs a helper exec in the container, with stdin when not
// nil, copies its output to stdout and stderr, and returns its exit code.
func (d *Daemon) execHelper(ctx context.Context, containerID, user string, stdin []byte, stdout, stderr io.Writer, cmd ...string) (int, error) {
	created, err := d.docker.ContainerExecCreate(ctx, containerID, container.ExecOptions{
		User: user, AttachStdin: stdin != nil, AttachStdout: true, AttachStderr: true, Cmd: cmd,
	})
	if err != nil {
		return -1, dockerErr("create exec", err)
	}
	attach, err := d.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return -1, dockerErr("start exec", err)
	}
	defer attach.Close()
	// The output stream is a hijacked connection that ctx does not reach:
	// close it when ctx ends, or a helper that hangs (a kill in a
	// container a fork bomb filled) would hold its caller for as long as
	// it hangs, whatever ctx's deadline.
	stop := context.AfterFunc(ctx, func() { attach.Close() })
	defer stop()
	if stdin != nil {
		go func() {
			_, _ = attach.Conn.Write(stdin)
			_ = attach.CloseWrite()
		}()
	}
	if _, err := stdcopy.StdCopy(stdout, stderr, attach.Reader); err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("read exec output: %w", context.Cause(ctx))
		}
		return -1, fmt.Errorf("read exec output: %w", err)
	}
	info, err := d.docker.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return -1, dockerErr("inspect exec", err)
	}
	return info.ExitCode, nil
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
