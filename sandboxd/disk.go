package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/rundir"
)

// Disk limits. The engine here may not support a size for a container's
// writable layer (--storage-opt size needs overlay2 on xfs with pquota;
// fuse-overlayfs, btrfs without quotas and others refuse it), and /work is
// a bind mount of a host directory, which no Docker option limits. So:
//
//   - scratch space: /tmp, /var/tmp and /run/lock, the only places of an
//     image the sandbox user may write besides /work, are tmpfs mounts of
//     the scratch limit's size (the kernel enforces it: a write past it
//     fails with "No space left on device"; tmpfs pages count against the
//     container's memory limit, so the limit is at most that). The shell
//     state directory (StateMount) is mounted read-only: the container
//     writes only into fifos sandboxd made there (stateFifo);
//   - the writable layer: where the engine supports --storage-opt size,
//     the scratch limit is also the layer's size; where it does not, a
//     watchdog checks the layer's size (Docker's SizeRw) while a command
//     runs as root (lab mode: only root can write elsewhere) and kills the
//     command past the limit;
//   - /work: a watchdog per agent container (workWatch; the auditor's
//     /work is read-only) measures the run's work dir on the host (the
//     blocks its files take, so a sparse file counts for what it stores)
//     from when ensureBox made or found the container until the container
//     is replaced, its run ends or moves, or the daemon stops: every
//     diskPoll while a command runs, while /work grows and just after a
//     command ended (background processes a command left write on),
//     every workIdlePoll otherwise. When /work holds more than the limit
//     and grew since the last poll, it first kills the container's
//     background processes (backgroundKillScript: those that are part of
//     no running command, such as the writers a command left behind; the
//     sandbox user's only, outside lab mode; which of them writes cannot
//     be told, so all of them go), records that on the run
//     (vera.container.event vera_disk_limit) and tells the agent with its
//     next result (notice). If there was none to kill, the growth is the
//     running command's: it is killed. If there were, and /work still
//     grows at the next poll while a command runs, the command is killed.
//     A command that finds /work over the limit already is killed only if
//     it adds to it (removing files, the way out the error names, always
//     works), so a writer left in the background never costs the next,
//     innocent command. Whatever writes can write what it writes within a
//     poll (a diskPoll; a workIdlePoll for a background process that
//     starts writing long after its command) beyond the limit before it
//     is stopped; the edit tool refuses an edit that would pass it.
//
// Each kill is a clear tool result or notice; the daemon and other runs go
// on.

// Defaults of the limits.
const (
	DefaultWorkLimit    = 4 << 30
	DefaultScratchLimit = 1 << 30
	// diskPoll is how often the watchdogs measure during a command (and
	// the /work watchdog while /work grows).
	diskPoll = 500 * time.Millisecond
	// workIdlePoll is how often the /work watchdog measures while no
	// command runs and /work did not grow. One poll walks the work dir:
	// BenchmarkWorkPoll measures it (here about 7 ms of CPU for 3,000
	// files, 1.9 times du -s of the same tree: 0.35% of a core for the
	// watchdog of an idle run).
	workIdlePoll = 2 * time.Second
	// layerPoll is how often the writable layer is measured (Docker walks
	// the layer to answer).
	layerPoll = 3 * time.Second
)

// workLimit is the run's /work limit in bytes (0 = none).
func (d *Daemon) workLimit(rs *runState) int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.cfg != nil && rs.cfg.Sandbox.WorkLimitMB > 0 {
		return rs.cfg.Sandbox.WorkLimitMB << 20
	}
	return d.cfg.WorkLimit
}

// scratchLimit is the run's scratch limit in bytes, at most the memory
// limit (tmpfs pages are the container's memory).
func (d *Daemon) scratchLimit(rs *runState) int64 {
	rs.mu.Lock()
	lim := d.cfg.ScratchLimit
	if rs.cfg != nil && rs.cfg.Sandbox.ScratchLimitMB > 0 {
		lim = rs.cfg.Sandbox.ScratchLimitMB << 20
	}
	rs.mu.Unlock()
	if d.cfg.Memory > 0 && lim > d.cfg.Memory {
		lim = d.cfg.Memory
	}
	return lim
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// usedBytes is what a directory tree takes on disk (allocated blocks),
// walked without following a link or leaving its filesystem
// (rundir.UsedBytes).
func usedBytes(root string) (int64, error) {
	f, err := os.Open(root)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return rundir.UsedBytes(f)
}

// workUsed is what the run's /work takes, walked from the descriptor the
// run state holds: whatever the sandbox puts in /work — a link to the
// host's /, a tree deeper than rundir.MaxDepth, another filesystem — the
// walk stays in the tree (a tree too deep to measure counts as over any
// limit).
func (d *Daemon) workUsed(rs *runState) (int64, error) {
	if _, err := d.workDir(rs, false); err != nil {
		return 0, err
	}
	rs.dirMu.Lock()
	defer rs.dirMu.Unlock()
	if rs.work == nil {
		return 0, fmt.Errorf("run %s: /work is closed", rs.id)
	}
	used, err := rundir.UsedBytes(rs.work)
	if errors.Is(err, rundir.ErrTooDeep) {
		return math.MaxInt64 / 2, nil
	}
	return used, err
}

// diskWatch watches a command's disk use until stop is called; over a
// limit, it calls kill once with the reason.
type diskWatch struct {
	stop   func()
	reason func() string
}

// watchDisk starts the watchdogs that apply to a command in box b: it
// tells the box's /work watchdog that a command runs, and watches the
// writable layer of a root command.
func (d *Daemon) watchDisk(ctx context.Context, rs *runState, b *box, root bool, kill func(reason string)) diskWatch {
	var once sync.Once
	killOnce := func(reason string) { once.Do(func() { kill(reason) }) }
	cmd := b.work.begin(killOnce)
	layerLim := int64(0)
	if root && !d.storageOptOK() {
		layerLim = d.scratchLimit(rs)
	}
	var layerReason string
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	if layerLim == 0 {
		cancel()
		close(done)
	} else {
		go func() {
			defer close(done)
			tick := time.NewTicker(layerPoll)
			defer tick.Stop()
			for {
				select {
				case <-wctx.Done():
					return
				case <-tick.C:
				}
				info, _, err := d.docker.ContainerInspectWithRaw(wctx, b.id, true)
				if err == nil && info.SizeRw != nil && *info.SizeRw > layerLim {
					layerReason = fmt.Sprintf("disk limit: the container's writable layer holds %s, more than the scratch limit of %s; the command was killed.", mib(*info.SizeRw), mib(layerLim))
					killOnce(layerReason)
					return
				}
			}
		}()
	}
	var (
		endOnce sync.Once
		reason  string
	)
	end := func() string {
		endOnce.Do(func() {
			cancel()
			<-done
			reason = b.work.end(cmd)
			if reason == "" {
				reason = layerReason
			}
		})
		return reason
	}
	return diskWatch{stop: func() { end() }, reason: end}
}

// workWatch is the /work watchdog of one agent container (see Disk
// limits above). It runs from when ensureBox made or found the container
// until the container is replaced, its run ends or moves, or the daemon
// stops.
type workWatch struct {
	d      *Daemon
	rs     *runState
	b      *box
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{} // a command began: measure now

	mu    sync.Mutex
	cmds  map[*workCmd]bool // the commands running in the container
	ended bool              // a command ended since the last poll
}

// workCmd is a command the /work watchdog watches.
type workCmd struct {
	kill   func(reason string)
	base   int64  // what /work held as the command began; -1 until measured
	reason string // why it was killed, "" if it was not
}

// watchWork starts the /work watchdog of an agent container, or returns
// nil (another role: its /work is read-only; no limit; no daemon
// running).
func (d *Daemon) watchWork(rs *runState, b *box) *workWatch {
	if b.role != roleAgent || d.workLimit(rs) <= 0 || d.bgCtx == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(d.bgCtx)
	w := &workWatch{d: d, rs: rs, b: b, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1), cmds: map[*workCmd]bool{}}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		w.run(ctx)
	}()
	return w
}

// stop ends the watchdog and waits for it.
func (w *workWatch) stop() {
	if w == nil {
		return
	}
	w.cancel()
	<-w.done
}

// begin registers a command: until end, the watchdog measures every
// diskPoll and may call kill (once) with the reason.
func (w *workWatch) begin(kill func(reason string)) *workCmd {
	if w == nil {
		return nil
	}
	c := &workCmd{kill: kill, base: -1}
	w.mu.Lock()
	w.cmds[c] = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return c
}

// end unregisters a command and returns why it was killed ("" if not).
func (w *workWatch) end(c *workCmd) string {
	if w == nil || c == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.cmds, c)
	w.ended = true
	return c.reason
}

// current reports whether the watchdog's run is still this daemon's and
// going on (a run that ended, moved or was fenced loses its containers).
func (w *workWatch) current() bool {
	if w.rs.isEnded() || w.rs.isFenced() {
		return false
	}
	w.d.mu.Lock()
	defer w.d.mu.Unlock()
	return w.d.runs[w.rs.id] == w.rs
}

func (w *workWatch) run(ctx context.Context) {
	defer close(w.done)
	last := int64(-1) // what /work held at the last poll
	stopped := false  // background writers were killed at the last poll
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.wake:
		}
		if !w.current() {
			return
		}
		used, err := w.d.workUsed(w.rs)
		w.mu.Lock()
		busy, ended := len(w.cmds) > 0, w.ended
		w.ended = false
		w.mu.Unlock()
		grew := false
		if err == nil {
			grew = last >= 0 && used > last
			stopped = w.check(ctx, used, grew, stopped)
			last = used
		}
		next := workIdlePoll
		if busy || grew || ended {
			next = diskPoll
		}
		t.Reset(next)
	}
}

// check acts on one measure of /work; it returns whether it killed
// background writers (see Disk limits above).
func (w *workWatch) check(ctx context.Context, used int64, grew, stopped bool) bool {
	lim := w.d.workLimit(w.rs)
	w.mu.Lock()
	var cmds []*workCmd
	for c := range w.cmds {
		if c.base < 0 {
			c.base = used // the command just began
		}
		cmds = append(cmds, c)
	}
	w.mu.Unlock()
	if lim <= 0 || used <= lim || !grew {
		return false
	}
	if len(cmds) == 0 || !stopped {
		n, err := w.d.killBackground(ctx, w.rs, w.b)
		if err != nil && ctx.Err() == nil {
			w.d.log.Warn("disk limit: kill the background processes writing /work", "run", w.rs.id, "container", w.b.name, "err", err)
		}
		if n > 0 {
			w.stoppedWriters(ctx, used, lim, n)
			return true
		}
	}
	// Nothing in the background to stop (or it was stopped at the last
	// poll and /work still grows): the running command adds to /work.
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range cmds {
		if w.cmds[c] && c.reason == "" && used > c.base {
			c.reason = fmt.Sprintf("disk limit: /work holds %s, more than its limit of %s; the command was killed. Remove files to free space (du -sh /work/* shows what takes it).", mib(used), mib(lim))
			c.kill(c.reason)
		}
	}
	return false
}

// stoppedWriters records that background processes writing /work were
// killed at its limit: on the run (vera.container.event vera_disk_limit)
// and for the agent, with its next result (notice).
func (w *workWatch) stoppedWriters(ctx context.Context, used, lim int64, n int) {
	d, rs, b := w.d, w.rs, w.b
	procs := "1 background process"
	if n > 1 {
		procs = fmt.Sprintf("%d background processes", n)
	}
	rs.addNotice(fmt.Sprintf("disk limit: /work holds %s, more than its limit of %s, and kept growing outside any command: %s (left running by an earlier command, e.g. with & or nohup) were killed. Remove files to free space (du -sh /work/* shows what takes it); a command that adds to /work while it is over its limit is killed.", mib(used), mib(lim), procs))
	d.log.Warn("disk limit: /work over its limit; killed the background processes writing to it", "run", rs.id, "container", b.name, "used", used, "limit", lim, "killed", n)
	t := d.cfg.Clock.Now()
	ev := catalog.ContainerEvent{
		Container: b.name, ContainerID: b.id, Action: "vera_disk_limit", Time: t,
		Attributes: map[string]string{
			"used": strconv.FormatInt(used, 10), "limit": strconv.FormatInt(lim, 10), "killed": strconv.Itoa(n),
			"reason": "background processes (part of no running command) kept writing /work past its limit",
		},
	}
	// Published beside the watchdog, which polls on meanwhile (a bus
	// that does not answer holds only this).
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = d.publishFact(pctx, rs.id, t, "disk|"+b.id+"|"+t.UTC().Format(time.RFC3339Nano), ev)
	}()
}

// backgroundKillScript kills, as root, the container's background
// processes and prints how many it killed, bash builtins only. A
// background process is one whose parent links lead to the container's
// init (pid 1): it was orphaned (its command ended, or it detached with
// setsid, nohup or a double fork), so it is part of no running command.
// Spared: init, the container's own main process (the oldest child of
// init: nothing can start earlier, and no process can change its start
// time) and what runs under it, and everything under an exec (parent 0:
// a running command's keeper, a session's keeper, sandboxd's helpers, an
// operator's docker exec, this killer). $1, when not empty, is the only
// uid whose processes are killed (the sandbox user's, outside lab mode).
// Zombie leaders with live threads are live (scanProcs). It repeats until
// none is left (50 rounds at most).
const backgroundKillScript = `uid=$1 me=$$
declare -A killed=()
for round in {1..50}; do
  kill=()
` + scanProcs + `
  main=
  for p in "${!pp[@]}"; do
    [[ ${pp[p]} == 1 && $p != 1 ]] || continue
    if [[ -z $main ]] || (( st[p] < st[main] || (st[p] == st[main] && p < main) )); then main=$p; fi
  done
  for p in "${!pp[@]}"; do
    [[ $p == 1 || $p == "$me" || $p == "$main" ]] && continue
    q=$p n=0
    while [[ -n ${pp[q]-} && ${pp[q]} != 0 && ${pp[q]} != 1 && $q != "$main" ]] && (( n++ < 4096 )); do q=${pp[q]}; done
    [[ ${pp[q]-} == 1 && $q != "$main" ]] || continue
    if [[ -n $uid ]]; then
      u=
      while read -r k v _; do [[ $k == Uid: ]] && { u=$v; break; }; done 2>/dev/null < "/proc/$p/status"
      [[ $u == "$uid" ]] || continue
    fi
    kill+=("${tid[p]:-$p}"); killed[$p]=1
  done
  (( ${#kill[@]} )) || break
  kill -KILL "${kill[@]}" 2>/dev/null
done
printf '%d\n' "${#killed[@]}"`

// killBackground kills the background processes of the box's container
// (backgroundKillScript): the sandbox user's only, outside lab mode. It
// returns how many it killed.
func (d *Daemon) killBackground(ctx context.Context, rs *runState, b *box) (int, error) {
	uid := ""
	rs.mu.Lock()
	lab := d.labFor(rs)
	rs.mu.Unlock()
	if !lab {
		if u, _, ok := numericUser(d.cfg.User); ok {
			uid = strconv.Itoa(u)
		}
	}
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := d.execArgs(kctx, b.id, "0:0", "bash", "-c", backgroundKillScript, "vera-kill-bg", uid)
	lines := strings.Fields(out)
	n := 0
	if len(lines) > 0 {
		n, _ = strconv.Atoi(lines[len(lines)-1])
	}
	return n, err
}

// storageOptOK reports whether the engine takes a size for a container's
// writable layer (learnt when the first container is created).
func (d *Daemon) storageOptOK() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.layerSize == layerSizeOK
}

// Whether the engine supports --storage-opt size.
const (
	layerSizeUnknown = iota
	layerSizeOK
	layerSizeNo
)

// scratchMounts are the tmpfs mounts of a sandbox: every directory of the
// image the sandbox user may write besides /work.
func scratchMounts(limit int64) map[string]string {
	if limit <= 0 {
		return nil
	}
	opt := fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,mode=1777", limit)
	return map[string]string{"/tmp": opt, "/var/tmp": opt, "/run/lock": "rw,noexec,nosuid,nodev,size=1048576,mode=1777"}
}

// isStorageOptUnsupported tells an engine's refusal of --storage-opt size.
func isStorageOptUnsupported(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "storage-opt") || strings.Contains(s, "storage opt") || strings.Contains(s, "quota")
}

// applyLayerLimit sets the writable layer's size when the engine may
// support it.
func (d *Daemon) applyLayerLimit(host *container.HostConfig, limit int64) {
	d.mu.Lock()
	state := d.layerSize
	d.mu.Unlock()
	if state != layerSizeNo && limit > 0 {
		host.StorageOpt = map[string]string{"size": fmt.Sprintf("%d", limit)}
	}
}

// noteLayerSize records whether the engine took the layer size.
func (d *Daemon) noteLayerSize(ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if ok {
		d.layerSize = layerSizeOK
	} else {
		d.layerSize = layerSizeNo
	}
}
