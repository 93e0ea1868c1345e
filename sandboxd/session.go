package sandboxd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// The persistent session (sandbox.session persistent, the default).
//
// A container's commands run in a long-lived session instead of a Docker
// exec each. The session is one exec of sessionScript, the session's
// keeper: like a command's keeper in exec mode it runs ShellPath, so it is
// not dumpable and no process of the sandbox user can read its memory, its
// descriptors or its stdin. Its pipes are fifos in the container's state
// directory, a directory of sandboxd's host (see startSession): a wake-up
// fifo it reads tokens from, and the session's stdout and stderr, which
// sandboxd reads; Docker's stream carries only the nonces in (on the
// keeper's stdin, which nothing else can read) and says, by its end, that
// the keeper is gone. For each command, sandboxd writes the request
// (command, cwd, shell state, env) to a file in the state directory and
// makes the fifo the command's state report goes to (<token>.state, read
// from then on: stateFifo), records vera.tool.started, and only then
// writes the command's nonce on the keeper's stdin and its token on the
// wake-up fifo. The container sees the state directory read-only: it
// reads the request and writes into the fifos sandboxd made, and can
// create nothing there.
//
// The keeper reads the token, forks the command's shell (a subshell of its
// own, with none of its descriptors: stdin from /dev/null, stdout and
// stderr on the session's), and only then reads the nonce, which so never
// exists in the command's memory. The command's shell exports the
// request's env, cds to its cwd, evaluates its shell state (the functions,
// aliases, unexported variables, shell options and umask an earlier
// command left), and evals the command. Its EXIT trap writes the state the
// command left (cwd, exported variables, and that shell state as bash
// source) into the fifo <token>.state in the state directory (its >|
// opens the fifo sandboxd already reads; writing a fifo on a read-only
// mount is allowed, creating a file is not) and exits with the command's
// status. The keeper waits for it, and ends the command on both
// output streams with a marker carrying the nonce and the status the
// kernel reported:
//
//	stderr: "\x00vera-end:<nonce>\x00"
//	stdout: "\x00vera-end:<nonce>:<status>\x00"
//
// Everything before a marker is the command's output, byte for byte: no
// newline is added or removed. Nothing the command prints can end it early
// or set its status: a marker without the nonce is output like any other.
// The state the command reports is, by construction, the state the next
// command starts from: sandboxd records it in vera.tool.finished and the
// requester passes it back in its next request (a command that tampers
// with the report only chooses its successor's starting state, which it
// could do anyway: it can name the fifo, $__vera_out, and write into it;
// what it writes goes through a pipe to sandboxd, which keeps at most
// maxStateBytes of it, and one that keeps the fifo open past its end
// loses its report after stateWait).
//
// Every command starts from the state its request carries, never from
// what the previous command left in a process: so a session that is
// replaced (killed after a timeout it did not survive, a daemon restart, a
// container restart) loses no shell state, a replay knows each command's
// starting state from the log, a timeout never costs the session anything,
// and any idle session of a container can run any request (the auditor's
// parallel checks use several). What does not carry over is the job
// table: a background job started by one command keeps running, but the
// next command's jobs, fg and wait %1 do not see it (use its pid).
//
// Keeper argument: $1 StateMount. $0 is "vera-session:<id>" (how the
// killer finds it, and the command's shell, its only child).
var sessionScript = `set +o posix
IFS=$' \t\n'
exec 7<&0 8>&1 9>&2 </dev/null >/dev/null 2>&1
umask 022
__dir=$1
IFS= read -r -u 7 __w || exit 125
[[ $__w =~ ^[0-9a-f]{32}$ && -p $__dir/.wake-$__w && -p $__dir/.out-$__w && -p $__dir/.err-$__w ]] || exit 125
exec 6< "$__dir/.wake-$__w" 8> "$__dir/.out-$__w" 9> "$__dir/.err-$__w"
unset __w
declare -A __vera_pe=()
for __kv in ${!a@} ${!b@} ${!c@} ${!d@} ${!e@} ${!f@} ${!g@} ${!h@} ${!i@} ${!j@} ${!k@} ${!l@} ${!m@} ${!n@} ${!o@} ${!p@} ${!q@} ${!r@} ${!s@} ${!t@} ${!u@} ${!v@} ${!w@} ${!x@} ${!y@} ${!z@} ${!A@} ${!B@} ${!C@} ${!D@} ${!E@} ${!F@} ${!G@} ${!H@} ${!I@} ${!J@} ${!K@} ${!L@} ${!M@} ${!N@} ${!O@} ${!P@} ${!Q@} ${!R@} ${!S@} ${!T@} ${!U@} ${!V@} ${!W@} ${!X@} ${!Y@} ${!Z@} ${!_@}; do [[ ${!__kv@a} == *x* ]] && __vera_pe[$__kv]=${!__kv}; done
__vera_base=" ${!a@} ${!b@} ${!c@} ${!d@} ${!e@} ${!f@} ${!g@} ${!h@} ${!i@} ${!j@} ${!k@} ${!l@} ${!m@} ${!n@} ${!o@} ${!p@} ${!q@} ${!r@} ${!s@} ${!t@} ${!u@} ${!v@} ${!w@} ${!x@} ${!y@} ${!z@} ${!A@} ${!B@} ${!C@} ${!D@} ${!E@} ${!F@} ${!G@} ${!H@} ${!I@} ${!J@} ${!K@} ${!L@} ${!M@} ${!N@} ${!O@} ${!P@} ${!Q@} ${!R@} ${!S@} ${!T@} ${!U@} ${!V@} ${!W@} ${!X@} ${!Y@} ${!Z@} ${!_@} "
while IFS= read -r -u 6 __t; do
  [[ $__t =~ ^[A-Za-z0-9_-]{1,64}$ ]] || exit 125
  __f=() __n= __rc=125
  if [[ -f $__dir/$__t.req && ! -L $__dir/$__t.req ]]; then mapfile -d '' -t __f < "$__dir/$__t.req"; fi
  if (( ${#__f[@]} >= 3 )); then
    printf '[%s] $ %s\n' "$__t" "${__f[0]}" 2>/dev/null >> /tmp/.vera/console
    (
      exec </dev/null >&8 2>&9 6<&- 7<&- 8>&- 9>&-
      set +p
      __vera_cmd=${__f[0]} __vera_cwd=${__f[1]} __vera_state=${__f[2]} __vera_out=$__dir/$__t.state
      for __kv in "${__f[@]:3}"; do export -- "$__kv" 2>/dev/null; done
      unset __f __kv __t __n __rc __dir __c
      trap '` + commandTrap + `' EXIT
      cd -- "$__vera_cwd" 2>/dev/null || { printf 'vera: cwd %s is gone; starting in /work\n' "$__vera_cwd" >&2; cd /work; }
      shopt -s expand_aliases
      [[ -z $__vera_state ]] || eval "$__vera_state"
      unset __vera_state __vera_cwd
      set --
      eval "$__vera_cmd"
    ) &
    __c=$!
    IFS= read -r -u 7 __n
    wait "$__c"; __rc=$?
  else
    IFS= read -r -u 7 __n
  fi
  [[ $__n =~ ^[0-9a-f]{32}$ ]] || exit 125
  printf '\0vera-end:%s\0' "$__n" >&9
  printf '\0vera-end:%s:%s\0' "$__n" "$__rc" >&8
done
`

// commandTrap is the EXIT trap of a command's shell in a session: it
// writes the state the command left to $__vera_out, the command's state
// fifo, which sandboxd made and reads ("vera-state-1", the
// cwd, the exported variables as K=V but those the session's own
// environment holds with the same value, and VERA_SHELL_STATE=<bash source>,
// NUL-separated, as parseState reads) and exits with the command's
// status. The shell state holds the variables that are neither exported
// nor were there before the request's state was loaded (bash's own),
// functions, aliases, set and shopt options, and the umask. It uses
// builtin so that a function the command defined under a builtin's name
// (cd, printf...) does not stand in for it. Single-quoted inside the
// keeper's script: no single quote here.
const commandTrap = `{ __vera_rc=$? __vera_f=$-; builtin set +euxv; } 2>/dev/null
__vera_x=() __vera_v=()
for __vera_n in ${!a@} ${!b@} ${!c@} ${!d@} ${!e@} ${!f@} ${!g@} ${!h@} ${!i@} ${!j@} ${!k@} ${!l@} ${!m@} ${!n@} ${!o@} ${!p@} ${!q@} ${!r@} ${!s@} ${!t@} ${!u@} ${!v@} ${!w@} ${!x@} ${!y@} ${!z@} ${!A@} ${!B@} ${!C@} ${!D@} ${!E@} ${!F@} ${!G@} ${!H@} ${!I@} ${!J@} ${!K@} ${!L@} ${!M@} ${!N@} ${!O@} ${!P@} ${!Q@} ${!R@} ${!S@} ${!T@} ${!U@} ${!V@} ${!W@} ${!X@} ${!Y@} ${!Z@} ${!_@}; do
  [[ $__vera_n == __vera_* ]] && continue
  if [[ ${!__vera_n@a} == *x* ]]; then
    [[ -n ${__vera_pe[$__vera_n]+set} && ${__vera_pe[$__vera_n]} == "${!__vera_n}" ]] || __vera_x+=("$__vera_n=${!__vera_n}")
  elif ! [[ $__vera_n == @(BASH*|FUNCNAME|LINENO|SECONDS|RANDOM|SRANDOM|EPOCH*|PIPESTATUS|GROUPS|DIRSTACK|COMP_*|HIST*|OLDPWD|PWD|_) || $__vera_base == *" $__vera_n "* ]]; then
    __vera_v+=("$__vera_n")
  fi
done
{ builtin printf "vera-state-1\0%s\0" "$PWD"
  (( ${#__vera_x[@]} )) && builtin printf "%s\0" "${__vera_x[@]}"
  builtin printf "VERA_SHELL_STATE="
  (( ${#__vera_v[@]} )) && builtin declare -p "${__vera_v[@]}"
  builtin declare -f
  builtin alias -p
  builtin shopt -p ` + shoptSaved + `
  builtin printf "shopt -s expand_aliases\n"
  builtin set +o
  builtin umask -p
  for __vera_o in e u x v; do [[ $__vera_f == *$__vera_o* ]] && builtin printf "set -%s\n" "$__vera_o"; done
  builtin printf "#vera-state-end\0"
} >| "$__vera_out" 2>/dev/null
builtin exit "$__vera_rc"`

// shoptSaved are the shopt options a session's state keeps: those a
// command may set on purpose (not bash's compatibility levels nor the
// read-only ones).
const shoptSaved = "autocd cdable_vars cdspell checkhash dotglob execfail extdebug extglob extquote failglob force_fignore globasciiranges globskipdots globstar gnu_errfmt huponexit inherit_errexit lastpipe localvar_inherit localvar_unset nocaseglob nocasematch noexpand_translation nullglob patsub_replacement shift_verbose sourcepath varredir_close xpg_echo"

// maxShellState bounds the shell state a command reports (it travels in an
// environment variable, whose kernel limit is 128 KiB, and in two events).
const maxShellState = 100 << 10

// shellStateVar names the shell state in a session command's state
// report; it is never an export.
const shellStateVar = "VERA_SHELL_STATE"

// session is one live session keeper in a container.
type session struct {
	id      string // vera-session:<id> names the keeper's process
	execID  string
	box     *box
	started time.Time

	conn   types.HijackedResponse
	wake   *os.File // the session's wake-up fifo (see startSession)
	stdout *markerWriter
	stderr *markerWriter
	dead   chan struct{} // closed when the session's output stream ended
	err    error         // why, set before dead is closed
}

// sessionPool holds a box's sessions: idle ones ready for a command.
type sessionPool struct {
	mu   sync.Mutex
	idle []*session
	all  map[*session]bool
	// staleKilled is closed once the keepers an earlier daemon left in
	// the box were killed; nil before the first session starts.
	staleKilled chan struct{}
	// starting holds the ids of sessions whose keeper is being started:
	// a kill of stale keepers spares them as it spares those in all.
	starting map[string]bool
	prev     *sessionInfo
}

// sessionInfo is what a new session needs to know of the one before it.
type sessionInfo struct {
	id      string
	started time.Time
	reason  string // why it ended, when it did under this daemon
}

func newSessionPool() *sessionPool {
	return &sessionPool{all: map[*session]bool{}, starting: map[string]bool{}}
}

// take returns an idle live session, or nil.
func (p *sessionPool) take() *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		s := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		select {
		case <-s.dead:
			delete(p.all, s)
			p.prev = &sessionInfo{id: s.id, started: s.started, reason: s.deathReason()}
		default:
			return s
		}
	}
	return nil
}

// live reports whether an idle session is alive (so its container runs).
func (p *sessionPool) live() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.idle {
		select {
		case <-s.dead:
		default:
			return true
		}
	}
	return false
}

// put returns a session after a command; a dead one is dropped.
func (p *sessionPool) put(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-s.dead:
		delete(p.all, s)
		p.prev = &sessionInfo{id: s.id, started: s.started, reason: s.deathReason()}
		return
	default:
	}
	p.idle = append(p.idle, s)
}

// drop forgets a session that was closed.
func (p *sessionPool) drop(s *session, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.all, s)
	p.prev = &sessionInfo{id: s.id, started: s.started, reason: reason}
}

// closeAll ends every session of the pool (the box is going away).
func (p *sessionPool) closeAll() {
	p.mu.Lock()
	all := p.all
	p.all, p.idle = map[*session]bool{}, nil
	p.mu.Unlock()
	for s := range all {
		s.close(errors.New("the container was removed"))
	}
}

func (s *session) deathReason() string {
	if s.err != nil {
		return s.err.Error()
	}
	return "its keeper ended"
}

// close cuts the session's stream; the keeper ends at the end of its
// input.
func (s *session) close(why error) {
	s.conn.Close()
	<-s.dead
	if s.err == nil {
		s.err = why
	}
}

// startSession starts a session keeper in the box. The first one of a box
// under this daemon first kills the keepers an earlier daemon left; the
// others wait for that.
func (d *Daemon) startSession(ctx context.Context, b *box, user string) (*session, error) {
	p := b.sessions
	p.mu.Lock()
	first := p.staleKilled == nil
	if first {
		p.staleKilled = make(chan struct{})
	}
	killed := p.staleKilled
	p.mu.Unlock()
	if first {
		d.killStaleSessions(ctx, b.id, p)
		close(killed)
	} else {
		// A session started meanwhile (the auditor's checks start
		// several at once) waits: the killer spares only the keepers
		// the pool knows, so one started during the kill would die.
		select {
		case <-killed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	id := newNonce()[:16]
	p.mu.Lock()
	p.starting[id] = true
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.starting, id)
		p.mu.Unlock()
	}()
	created, err := d.docker.ContainerExecCreate(ctx, b.id, container.ExecOptions{
		User: user, WorkingDir: WorkMount, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Cmd: []string{ShellPath, "-p", "-c", sessionScript, "vera-session:" + id, StateMount},
	})
	if err != nil {
		return nil, dockerErr("create session exec", err)
	}
	d.noteSessionExec(b, created.ID)
	// The session's pipes: fifos in the container's state directory,
	// which is a directory of this host, so that a command's wake-up and
	// its output cost no trip through Docker's stream (2-3 ms each way).
	// Docker's stream carries the nonces in, and its end says the keeper
	// is gone. wake: sandboxd writes, the keeper reads (0644: nobody else
	// may write it); out and err: the keeper and its commands write,
	// sandboxd reads (0622: nobody else may read them). Opened read-write
	// here, so that no open blocks and the keeper finds its peer.
	tag := newNonce()
	var fifos [3]*os.File
	var paths [3]string
	cleanup := func() {
		for i, f := range fifos {
			if f != nil {
				f.Close()
			}
			if paths[i] != "" {
				_ = os.Remove(paths[i])
			}
		}
	}
	for i, kind := range []struct {
		name string
		mode uint32
	}{{"wake", 0o644}, {"out", 0o622}, {"err", 0o622}} {
		paths[i] = filepath.Join(b.stateDir, "."+kind.name+"-"+tag)
		_ = os.Remove(paths[i])
		if err := syscall.Mkfifo(paths[i], kind.mode); err != nil {
			cleanup()
			return nil, fmt.Errorf("session fifo: %w", err)
		}
		if err := os.Chmod(paths[i], os.FileMode(kind.mode)); err != nil { // past the umask
			cleanup()
			return nil, fmt.Errorf("session fifo: %w", err)
		}
		f, err := os.OpenFile(paths[i], os.O_RDWR, 0)
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("session fifo: %w", err)
		}
		fifos[i] = f
	}
	conn, err := d.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		cleanup()
		return nil, dockerErr("start session exec", err)
	}
	if _, err := conn.Conn.Write([]byte(tag + "\n")); err != nil {
		cleanup()
		conn.Close()
		return nil, fmt.Errorf("start session: %w", err)
	}
	s := &session{id: id, execID: created.ID, box: b, started: time.Now(), conn: conn, wake: fifos[0],
		stdout: &markerWriter{stdout: true}, stderr: &markerWriter{}, dead: make(chan struct{})}
	var readers sync.WaitGroup
	for _, r := range []struct {
		f *os.File
		w *markerWriter
	}{{fifos[1], s.stdout}, {fifos[2], s.stderr}} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			_, _ = io.Copy(r.w, r.f)
		}()
	}
	go func() {
		// The keeper's own stdout and stderr (nothing, unless bash itself
		// complains) until it ends.
		var msg bytes.Buffer
		_, err := stdcopy.StdCopy(&msg, &msg, io.LimitReader(conn.Reader, 64<<10))
		if err == nil {
			err = errors.New("its keeper ended")
		} else {
			err = fmt.Errorf("its stream failed: %w", err)
		}
		if m := strings.TrimSpace(msg.String()); m != "" {
			err = fmt.Errorf("%w (%s)", err, truncate(m, 200))
		}
		if s.err == nil {
			s.err = err
		}
		cleanup() // ends the readers
		readers.Wait()
		s.stdout.abort()
		s.stderr.abort()
		close(s.dead)
	}()
	p.mu.Lock()
	p.all[s] = true
	p.mu.Unlock()
	return s, nil
}

// sessionKillScript kills, as root, session keepers with everything under
// them. $1 says which: "except" every keeper but those whose ids follow
// (this daemon's live sessions: the others are an earlier daemon's, whose
// streams are gone; a command one was running is reported interrupted by
// recovery, never run again), "only" the keepers whose ids follow (a
// session given up). Processes a command detached are not under its
// keeper: they are killed by start time (killScript). It looks again
// until nothing is left (20 rounds at most).
const sessionKillScript = `mode=$1; shift
declare -A ids=()
for id in "$@"; do ids[vera-session:$id]=1; done
for round in {1..20}; do
  declare -A pp=() doomed=()
  for d in /proc/[0-9]*; do
    read -r s 2>/dev/null < "$d/stat" || continue
    s=${s##*) }; set -f; set -- $s; set +f
    p=${d#/proc/}; pp[$p]=$2
    [[ $2 == 0 && $p != 1 ]] || continue
    a=(); while IFS= read -r -d '' x; do a+=("$x"); done 2>/dev/null < "$d/cmdline"
    [[ ${#a[@]} -gt 4 && ${a[4]} == vera-session:* ]] || continue
    if [[ -n ${ids[${a[4]}]-} ]]; then named=1; else named=; fi
    [[ ($mode == only && -n $named) || ($mode == except && -z $named) ]] && doomed[$p]=1
  done
  (( ${#doomed[@]} )) || exit 0
  kill=()
  for p in "${!pp[@]}"; do
    q=$p
    while [[ -n ${pp[$q]-} && $q != 0 && -z ${doomed[$q]-} ]]; do q=${pp[$q]}; done
    [[ -n ${doomed[$q]-} ]] && kill+=("$p")
  done
  kill -KILL "${kill[@]}" 2>/dev/null
  unset pp doomed
done
exit 3`

// killStaleSessions runs sessionKillScript in the box's container,
// keeping this daemon's live sessions and those being started.
func (d *Daemon) killStaleSessions(ctx context.Context, containerID string, pool *sessionPool) {
	args := []string{"bash", "-c", sessionKillScript, "vera-stale", "except"}
	if pool != nil {
		pool.mu.Lock()
		for s := range pool.all {
			args = append(args, s.id)
		}
		for id := range pool.starting {
			args = append(args, id)
		}
		pool.mu.Unlock()
	}
	kctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := d.execArgs(kctx, containerID, "0:0", args...); err != nil {
		d.log.Warn("kill stale sessions", "container", containerID, "err", err)
	}
}

// markerWriter is one of a session's output streams: it passes a
// command's bytes to its capture until the command's end marker, and
// drops what arrives between commands (output of background jobs after
// their command ended).
type markerWriter struct {
	stdout bool

	mu      sync.Mutex
	sink    *capture
	marker  []byte // "\x00vera-end:<nonce>" + (":" on stdout, "\x00" on stderr)
	pending []byte // bytes that may be the start of the marker
	trailer []byte // stdout: "<status>:<how>" being read
	inTrail bool
	done    chan endMark
	dropped int64
}

// endMark is what a stream's marker said.
type endMark struct {
	status  int
	aborted bool // the stream ended before the marker
}

// expect routes the stream to c until the marker of nonce; the marker is
// sent on the returned channel.
func (w *markerWriter) expect(nonce string, c *capture) <-chan endMark {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.sink = c
	w.marker = []byte("\x00vera-end:" + nonce)
	if w.stdout {
		w.marker = append(w.marker, ':')
	} else {
		w.marker = append(w.marker, 0)
	}
	w.pending, w.trailer, w.inTrail = nil, nil, false
	w.done = make(chan endMark, 1)
	return w.done
}

// release stops routing (the command is over, or given up).
func (w *markerWriter) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sink != nil && len(w.pending) > 0 {
		_, _ = w.sink.Write(w.pending)
	}
	w.sink, w.pending, w.done = nil, nil, nil
}

// abort ends a pending expectation: the stream is gone.
func (w *markerWriter) abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done != nil {
		if w.sink != nil && len(w.pending) > 0 {
			_, _ = w.sink.Write(w.pending)
		}
		w.done <- endMark{aborted: true}
		w.sink, w.pending, w.done = nil, nil, nil
	}
}

func (w *markerWriter) Write(p []byte) (int, error) {
	n := len(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(p) > 0 {
		if w.done == nil {
			w.dropped += int64(len(p))
			return n, nil
		}
		if w.inTrail {
			i := bytes.IndexByte(p, 0)
			if i < 0 {
				if len(w.trailer)+len(p) > 64 {
					// Not a marker the keeper wrote: impossible, as
					// only the keeper knows the nonce. Treat as output.
					w.sink.Write(w.marker)
					w.sink.Write(w.trailer)
					w.inTrail, w.trailer = false, nil
					continue
				}
				w.trailer = append(w.trailer, p...)
				return n, nil
			}
			w.trailer = append(w.trailer, p[:i]...)
			p = p[i+1:]
			w.finish(parseTrailer(string(w.trailer)))
			continue
		}
		buf := append(w.pending, p...)
		p = nil
		if i := bytes.Index(buf, w.marker); i >= 0 {
			w.sink.Write(buf[:i])
			rest := buf[i+len(w.marker):]
			w.pending = nil
			if w.stdout {
				w.inTrail, w.trailer = true, nil
				p = rest
				continue
			}
			w.finish(endMark{})
			p = rest
			continue
		}
		// Keep the longest suffix that could start the marker.
		keep := 0
		for k := min(len(w.marker)-1, len(buf)); k > 0; k-- {
			if bytes.HasPrefix(w.marker, buf[len(buf)-k:]) {
				keep = k
				break
			}
		}
		w.sink.Write(buf[:len(buf)-keep])
		w.pending = append([]byte(nil), buf[len(buf)-keep:]...)
	}
	return n, nil
}

// finish delivers the marker and stops routing.
func (w *markerWriter) finish(m endMark) {
	w.done <- m
	w.sink, w.pending, w.done, w.inTrail, w.trailer = nil, nil, nil, false, nil
}

func parseTrailer(s string) endMark {
	n, err := strconv.Atoi(s)
	if err != nil {
		n = -1
	}
	return endMark{status: n}
}

// writeRequestFile writes a session request: command, cwd, shell state,
// then the env, NUL-separated, to the container's state directory (what
// an earlier daemon left there under that name is removed first; the
// container sees the directory read-only, so it can neither make nor
// replace the file).
func writeRequestFile(dir, token, command, cwd, state string, env map[string]string) (string, error) {
	path := filepath.Join(dir, token+".req")
	var b bytes.Buffer
	for _, f := range []string{command, cwd, state} {
		b.WriteString(f)
		b.WriteByte(0)
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !varName.MatchString(k) || strings.ContainsRune(env[k], 0) {
			continue
		}
		b.WriteString(k + "=" + env[k])
		b.WriteByte(0)
	}
	_ = os.Remove(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", fmt.Errorf("session request file: %w", err)
	}
	if _, err := f.Write(b.Bytes()); err != nil {
		f.Close()
		return "", fmt.Errorf("session request file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("session request file: %w", err)
	}
	return path, nil
}

// sessionRequest is a command for a session: an execRequest plus the shell
// state to start from.
type sessionRequest struct {
	execRequest
	shellState string
	// opened is called once a new session was started for this command,
	// before the command's tool.started is recorded.
	opened func(s *session, prev *sessionInfo)
}

// markerWait bounds how long a session's markers may take after its
// command's processes were killed; past it the session is given up.
const markerWait = 10 * time.Second

// executeSession runs one command in a session of the box: an idle one, or
// a new one. Its guarantees are execute's: the start is recorded before
// the command can run (the keeper gets its line only after), the timeout
// kills every process the command started, and the output is exact.
func (d *Daemon) executeSession(ctx context.Context, r sessionRequest) execResult {
	s := r.box.sessions.take()
	if s == nil {
		var err error
		if s, err = d.startSession(ctx, r.box, r.user); err != nil {
			return execResult{exitCode: -1, err: err}
		}
		r.box.sessions.mu.Lock()
		prev := r.box.sessions.prev
		r.box.sessions.mu.Unlock()
		if r.opened != nil {
			r.opened(s, prev)
		}
	}
	keep := false
	defer func() {
		if keep {
			r.box.sessions.put(s)
		}
	}()
	cwd := r.cwd
	if cwd == "" {
		cwd = WorkMount
	}
	reqPath, err := writeRequestFile(r.box.stateDir, r.token, r.command, cwd, r.shellState, r.env)
	if err != nil {
		keep = true
		return execResult{exitCode: -1, err: err}
	}
	defer os.Remove(reqPath)
	nonce := newNonce()
	// The fifo the command's EXIT trap reports its state to, read from
	// now on (whatever was there under its name is not this command's).
	sf, err := openStateFifo(r.box.stateDir, r.token+".state")
	if err != nil {
		keep = true
		return execResult{exitCode: -1, err: err}
	}
	defer sf.close()
	outDone := s.stdout.expect(nonce, r.stdout)
	errDone := s.stderr.expect(nonce, r.stderr)
	release := func() { s.stdout.release(); s.stderr.release() }
	since := time.Now()
	if r.started != nil {
		if err := r.started(s.execID, d.cfg.Clock.Now()); err != nil {
			release()
			keep = true
			return execResult{exitCode: -1, notStarted: err}
		}
	}
	start := time.Now()
	// The nonce on the keeper's stdin (Docker's stream: only the keeper
	// reads it, and needs it only when the command ends), then the token
	// on the wake-up fifo (a pipe on this host: the command starts a few
	// milliseconds sooner than through Docker's stream).
	_, err = s.conn.Conn.Write([]byte(nonce + "\n"))
	if err == nil {
		_, err = s.wake.Write([]byte(r.token + "\n"))
	}
	if err != nil {
		release()
		r.box.sessions.drop(s, "its input failed")
		s.close(fmt.Errorf("write to the session: %w", err))
		return execResult{exitCode: -1, duration: time.Since(start), err: fmt.Errorf("the session's input failed before the command started: %w", err)}
	}
	res := execResult{}
	var out, errm endMark
	gotOut, gotErr := false, false
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	wait := func(until <-chan time.Time) bool {
		for !(gotOut && gotErr) {
			select {
			case out = <-outDone:
				gotOut = true
			case errm = <-errDone:
				gotErr = true
			case <-until:
				return false
			case <-timer.C:
				res.timedOut = true
				return false
			case <-r.interrup:
				res.interrupted = true
				return false
			case <-r.limit:
				res.limited = true
				return false
			case <-ctx.Done():
				res.interrupted = true
				return false
			}
		}
		return true
	}
	finished := wait(nil)
	if !finished {
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		d.killCommand(kctx, r.box, "vera-session:"+s.id, since.Add(-killSince))
		cancel()
		// The keeper ends the command with its markers once its shell is
		// gone; the timer is spent, the other cases cannot fire twice.
		r.interrup, r.limit, ctx = nil, nil, context.WithoutCancel(ctx)
		timer.Stop()
		finished = wait(time.After(markerWait))
	}
	res.duration = time.Since(start)
	release()
	if !finished {
		res.exitCode = -1
		res.sessionLost = "the session did not end the command after its processes were killed"
		r.box.sessions.drop(s, res.sessionLost)
		s.close(errors.New(res.sessionLost))
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		_, _ = d.execArgs(kctx, r.box.id, "0:0", "bash", "-c", sessionKillScript, "vera-kill", "only", s.id)
		cancel()
		if !res.timedOut && !res.interrupted && !res.limited {
			res.err = errors.New(res.sessionLost)
		}
		res.stateErr = errors.New("the session was given up: " + res.sessionLost)
		return res
	}
	if out.aborted || errm.aborted {
		// The keeper is gone (the command killed it, kill 0 included, or
		// the container stopped): what the command started since it began
		// is killed like at a timeout.
		kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		d.killCommand(kctx, r.box, "vera-session:"+s.id, since.Add(-killSince))
		cancel()
		res.exitCode = -1
		res.sessionLost = s.deathReason()
		if !res.timedOut && !res.interrupted && !res.limited {
			res.err = fmt.Errorf("the session ended during the command (%s): the command killed its session's keeper (kill $$ or kill 0 in a session names the keeper), or it was killed", s.deathReason())
		}
		res.stateErr = errors.New("the session ended during the command: " + s.deathReason())
		return res
	}
	keep = true
	res.exitCode = out.status
	if res.timedOut || res.interrupted || res.limited {
		res.exitCode = -1
		return res
	}
	st, err := sf.result(stateWait)
	if err != nil {
		res.stateErr = err
		return res
	}
	res.state = &st
	return res
}

// sessionMode is the run's session setting (persistent unless exec).
func (d *Daemon) sessionMode(rs *runState) catalog.SessionMode {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.cfg != nil && rs.cfg.Sandbox.Session == catalog.SessionExec {
		return catalog.SessionExec
	}
	return catalog.SessionPersistent
}

// sessionOpened records a new session (vera.tool.session) before the
// command that needed it starts, saying whether it replaced one and what
// that lost. Its id derives from the request, so a redelivery that opens
// another session records the first only.
func (d *Daemon) sessionOpened(ctx context.Context, rs *runState, cause bus.Event, b *box, s *session, prev *sessionInfo) {
	rs.mu.Lock()
	seen, wasSeen := rs.sessionsSeen[b.name]
	rs.sessionsSeen[b.name] = sessionInfo{id: s.id, started: s.started}
	rs.mu.Unlock()
	ts := catalog.ToolSession{Container: b.name, SessionID: s.id, Action: "started"}
	var before time.Time
	switch {
	case prev != nil:
		ts.Action, before = "restarted", prev.started
		ts.Reason = "the previous session (" + prev.id + ") ended: " + prev.reason
	case wasSeen:
		ts.Action, before = "restarted", seen.started
		ts.Reason = "sandboxd restarted: the previous session (" + seen.id + ") ended with the daemon that ran it"
	case b.role == roleAuditor:
		ts.Reason = "first auditor command, or one running beside another (each runs in a session of its own)"
	default:
		ts.Reason = "first command of the container"
	}
	if ts.Action == "restarted" {
		ts.Reason += "; every command starts from the shell state its request carries, so no shell state was lost"
		if up, ok := d.containerStartedAt(ctx, b); ok && !before.IsZero() && up.After(before) {
			ts.Lost = append(ts.Lost, "the processes of earlier commands (background jobs): the container restarted at "+up.UTC().Format(time.RFC3339))
		}
	}
	ev, err := d.bus.Events.New(rs.id, ts, bus.ReactionTo(cause, "session"))
	if err == nil {
		_, err = d.bus.Publish(ctx, ev)
	}
	if err != nil {
		d.log.Warn("record the new session", "container", b.name, "session", s.id, "err", err)
	}
	d.log.Info("session started", "container", b.name, "session", s.id, "action", ts.Action, "reason", ts.Reason)
}

// containerStartedAt is when the box's container last started.
func (d *Daemon) containerStartedAt(ctx context.Context, b *box) (time.Time, bool) {
	info, err := d.docker.ContainerInspect(ctx, b.id)
	if err != nil || info.State == nil {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, info.State.StartedAt)
	return t, err == nil
}

// sessionExecsFile lists, one per line, the Docker exec ids of a run's
// session keepers (<spool>/<run>/sessions), so that any daemon, a later
// one included, knows them.
const sessionExecsFile = "sessions"

// noteSessionExec records a session keeper's exec id. A keeper's end is
// not mirrored as a vera.container.event (exec_die): it ends when its
// daemon stops, which is no reaction to any event of the run; the next
// session's vera.tool.session records it instead.
func (d *Daemon) noteSessionExec(b *box, execID string) {
	if b.stateDir == "" {
		return
	}
	f, err := os.OpenFile(filepath.Join(filepath.Dir(b.stateDir), sessionExecsFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err == nil {
		_, err = f.WriteString(execID + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		d.log.Warn("record a session's exec id", "container", b.name, "err", err)
	}
}

// isSessionExec reports whether an exec of the run is a session keeper.
func (d *Daemon) isSessionExec(runID, execID string) bool {
	if execID == "" || runID == "." || runID == ".." || strings.ContainsAny(runID, "/\\") {
		return false
	}
	b, err := os.ReadFile(filepath.Join(d.cfg.SpoolDir, runID, sessionExecsFile))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if line == execID {
			return true
		}
	}
	return false
}
