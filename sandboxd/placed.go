package sandboxd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/sandboxd/placement"
)

// Several daemons on one stream (package placement holds the protocol).
//
// Every daemon reads every tool request and run end of the stream, on
// durable consumers of its own (sandboxd-<id>, sandboxd-control-<id>; the
// daemon with the default id keeps the names "sandboxd" and
// "sandboxd-control"). A run is placed on one daemon (a lease in the
// placement bucket): when it starts (vera.run.started, and its container
// is made right away) or at its first request. Its owner runs its
// commands; every other daemon acknowledges them and does nothing. When a
// daemon dies its leases expire (placement.DefaultLeaseTTL) and each of
// its runs is taken over by a live daemon with room, which:
//
//   - removes what is left of the run's containers on its own engine (the
//     dead daemon's, when both share one: what still runs there is killed);
//   - reports each command the dead daemon started and never finished as
//     interrupted, once (tool.started names the daemon that started it;
//     one started elsewhere is never run again), and runs the requests
//     nobody started;
//   - records the move on the run (vera.container.event vera_run_moved:
//     from, to, and whether /work came along), and tells the agent with
//     the next result (tool.finished notice), saying whether /work is as
//     it was (same host, or a work root on storage both daemons mount at
//     the same path) or starts empty (it was on the dead daemon's disk).
//
// A daemon that cannot store its heartbeat for LeaseTTL/2 is fenced: it
// interrupts its commands, removes its containers and starts nothing,
// well before another daemon may take its runs (LeaseTTL), so two daemons
// never run commands of one run at once.

// LabelDaemon names, on a sandbox container, the daemon that made it.
const LabelDaemon = "vera.daemon"

// errFenced fails a request this daemon may not run now (it lost the
// bus); it is redelivered, to this daemon or, once the run moved, acked
// by it and run by the new owner.
var errFenced = errors.New("sandboxd is fenced (it could not reach the placement bucket for half the lease time); the request waits")

// DaemonDurables names the durable consumers of the daemon with id:
// requests first, control second. The default daemon keeps the names of a
// single daemon (sandboxd, sandboxd-control); daemon X has sandboxd-X and
// sandboxd-control-X. bus/auth protects them by these names
// (auth.SandboxDaemonDurables) when X has an identity of its own.
func DaemonDurables(id string) []string {
	if id == "" || id == DefaultDaemonID {
		return []string{ConsumerRequests, ConsumerControl}
	}
	return []string{ConsumerRequests + "-" + id, ConsumerControl + "-" + id}
}

// requestsDurable and controlDurable are the daemon's consumers.
func (c *Config) requestsDurable() string { return DaemonDurables(c.DaemonID)[0] }

func (c *Config) controlDurable() string { return DaemonDurables(c.DaemonID)[1] }

// startPlacement registers the daemon in the placement bucket (waiting,
// when another live instance has its id, until that one is silent) and
// follows takeovers and its own fence until ctx ends. It returns false
// when ctx ended first.
func (d *Daemon) startPlacement(ctx context.Context) (bool, error) {
	kv, err := d.bus.PlacementKV(ctx)
	if err != nil {
		return false, fmt.Errorf("sandboxd: %w", err)
	}
	locked := d.lockSpool()
	host, _ := os.Hostname()
	where := host + ":" + d.cfg.SpoolDir
	p, err := placement.New(kv, placement.Options{
		DaemonID: d.cfg.DaemonID, Capacity: d.cfg.Capacity, LeaseTTL: d.cfg.LeaseTTL, Host: where, Logger: d.log,
		// The same host and spool, whose lock this process holds: the
		// instance there was killed (a live one would hold the lock).
		PreviousEnded: func(prev placement.DaemonInfo) bool { return locked && prev.Host == where },
	})
	if err != nil {
		return false, fmt.Errorf("sandboxd: %w", err)
	}
	started := make(chan error, 1)
	go func() { started <- p.Start(d.bgCtx) }()
	select {
	case err := <-started:
		if err != nil {
			return false, fmt.Errorf("sandboxd: %w", err)
		}
	case <-ctx.Done():
		d.bgCancel()
		<-started
		return false, nil
	}
	d.placer = p
	d.bg.Add(2)
	go func() { defer d.bg.Done(); d.followTakeovers(d.bgCtx) }()
	// Not while the daemon stops: the bus may go first (vera up), and
	// the runs stay leased to this daemon for its restart.
	go func() { defer d.bg.Done(); d.watchFence(ctx) }()
	return true, nil
}

// closePlacement marks the daemon stopped (its runs stay leased to it, for
// a restart; other daemons take them after the lease TTL).
func (d *Daemon) closePlacement() {
	if d.placer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.placer.Close(ctx); err != nil {
		d.log.Warn("placement: mark the daemon stopped", "err", err)
	}
}

// lockSpool takes an exclusive lock on the spool dir for the life of the
// process and reports whether it got it: a daemon that held it before
// on this spool is gone (a lock ends with its process).
func (d *Daemon) lockSpool() bool {
	f, err := os.OpenFile(filepath.Join(d.cfg.SpoolDir, "daemon.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		d.log.Warn("another sandboxd uses this spool dir; give each daemon its own (--data-dir)", "spool", d.cfg.SpoolDir)
		return false
	}
	d.spoolLock = f // held until the process ends
	return true
}

// mine reports whether this daemon runs the run's commands: it holds the
// run's lease, placing the run first when nobody does (waiting while every
// daemon is full). ok false means another daemon does (or nobody may now:
// err says why).
func (d *Daemon) mine(ctx context.Context, rs *runState) (bool, error) {
	runID := rs.id
	if d.placer == nil || d.placer.Mine(runID) {
		return true, nil
	}
	if d.placer.Fenced() {
		return false, errFenced
	}
	// Waiting for room ends with the run (its end waits for this request).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-rs.interrupt:
			cancel()
		case <-ctx.Done():
		}
	}()
	owner, err := d.placer.Place(ctx, runID)
	if err != nil && rs.isEnded() {
		return false, nil
	}
	if err != nil {
		if errors.Is(err, placement.ErrFenced) {
			return false, errFenced
		}
		return false, fmt.Errorf("place run %s: %w", runID, err)
	}
	if owner != d.cfg.DaemonID {
		return false, nil
	}
	if !d.placer.Mine(runID) {
		return false, errFenced
	}
	return true, nil
}

// othersRun reports, from the local view and without loading the run,
// that another daemon holds the run.
func (d *Daemon) othersRun(runID string) bool {
	if d.placer == nil {
		return false
	}
	owner, ok := d.placer.Owner(runID)
	return ok && owner != d.cfg.DaemonID
}

// releaseRun ends this daemon's lease of an ended run.
func (d *Daemon) releaseRun(ctx context.Context, runID string) {
	if d.placer == nil || !d.placer.Mine(runID) {
		return
	}
	if err := d.placer.Release(ctx, runID); err != nil {
		d.log.Warn("placement: release the lease of an ended run", "run", runID, "err", err)
	}
}

// followTakeovers takes over, one by one as they come, the runs this
// daemon's placer took from dead daemons.
func (d *Daemon) followTakeovers(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case t, ok := <-d.placer.Takeovers():
			if !ok {
				return
			}
			d.bg.Add(1)
			go func() { defer d.bg.Done(); d.takeOver(ctx, t) }()
		}
	}
}

// takeOver makes this daemon the run's sandbox after its daemon died.
func (d *Daemon) takeOver(ctx context.Context, t placement.Takeover) {
	log := d.log.With("run", t.Run, "from", t.From)
	log.Warn("taking over a run whose sandbox daemon stopped (its lease expired)")
	rs := d.freshRun(t.Run)
	rs.active.RLock()
	if err := d.removeBoxes(ctx, t.Run); err != nil {
		log.Warn("remove the run's old containers on this engine", "err", err)
	}
	rs.mu.Lock()
	err := d.load(ctx, rs)
	rs.mu.Unlock()
	if err != nil {
		rs.active.RUnlock()
		log.Warn("takeover: load the run", "err", err)
		return
	}
	if rs.isEnded() {
		rs.active.RUnlock()
		d.releaseRun(ctx, t.Run)
		return
	}
	work := "kept"
	notice := fmt.Sprintf("the run moved from sandboxd %s, which stopped (its lease expired), to sandboxd %s; the container was made again, so background processes and files outside /work are gone", t.From, d.cfg.DaemonID)
	if _, err := d.workDir(rs, false); errors.Is(err, os.ErrNotExist) {
		work = "lost"
		notice += "; /work was not on this daemon's storage and starts EMPTY: files made before the move are gone"
	} else if err == nil {
		notice += "; /work is as it was"
	}
	rs.setNotice(notice)
	now := d.cfg.Clock.Now()
	if err := d.publishFact(ctx, rs.id, now, "moved|"+t.From+"|"+d.cfg.DaemonID+"|"+rs.id, catalog.ContainerEvent{
		Container: ContainerName(rs.id, roleAgent), Action: "vera_run_moved", Time: now,
		Attributes: map[string]string{"from": t.From, "to": d.cfg.DaemonID, "work": work, "reason": "lease expired"},
	}); err != nil {
		log.Warn("record the move", "err", err)
	}
	rs.active.RUnlock()
	d.recoverRun(ctx, rs) // what the dead daemon started: interrupted, once
	d.runUnstarted(ctx, rs)
	d.prestart(rs)
	log.Info("run taken over", "work", work)
}

// runUnstarted handles, in stream order, the run's requests that no daemon
// started: they were delivered to this daemon while another held the run.
func (d *Daemon) runUnstarted(ctx context.Context, rs *runState) {
	rs.mu.Lock()
	var todo []recordedRequest
	for id, r := range rs.requests {
		if !rs.started[id] && !rs.finished[id] && !rs.inflight[id] {
			todo = append(todo, r)
		}
	}
	rs.mu.Unlock()
	slices.SortFunc(todo, func(a, b recordedRequest) int { return strings.Compare(a.event.ID, b.event.ID) })
	for _, r := range todo {
		if err := d.handleRequestEvent(ctx, r.event); err != nil {
			d.log.Warn("takeover: a request not run yet", "run", rs.id, "request", r.req.RequestID, "err", err)
		}
	}
}

// freshRun drops what the daemon knew of the run and returns a new state,
// to be loaded from the stream.
func (d *Daemon) freshRun(id string) *runState {
	d.mu.Lock()
	delete(d.runs, id)
	d.mu.Unlock()
	return d.run(id)
}

// watchFence interrupts everything this daemon runs when it becomes
// fenced (see placement.Placer.Fenced).
func (d *Daemon) watchFence(ctx context.Context) {
	t := time.NewTicker(max(d.placer.LeaseTTL()/20, 50*time.Millisecond))
	defer t.Stop()
	fenced := false
	var since time.Time // when the placer first said fenced
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := d.placer.Fenced()
		if !now {
			since = time.Time{}
			if fenced {
				fenced = false
				d.log.Info("placement: heartbeats stored again; serving the runs still leased to this daemon")
			}
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		// With another daemon alive, it may take this one's runs LeaseTTL
		// after the last heartbeat: stop now, at half of it. Alone, no
		// daemon can take them before a full LeaseTTL of silence (one
		// that starts now waits that long): stop then, so that a stall
		// of a few seconds on a busy machine costs nothing.
		if !fenced && (d.othersAlive() || time.Since(since) >= d.placer.LeaseTTL()/2) {
			fenced = true
			d.fence(ctx)
		}
	}
}

// othersAlive reports whether this daemon sees another live daemon.
func (d *Daemon) othersAlive() bool {
	for _, info := range d.placer.Daemons() {
		if info.ID != d.cfg.DaemonID && info.Alive {
			return true
		}
	}
	return false
}

// fence stops every command and container of this daemon: its runs may
// move to another daemon after the lease TTL.
func (d *Daemon) fence(ctx context.Context) {
	d.mu.Lock()
	runs := make([]*runState, 0, len(d.runs))
	for id, rs := range d.runs {
		runs = append(runs, rs)
		delete(d.runs, id) // a later request loads the run afresh
	}
	d.mu.Unlock()
	d.log.Error("placement: fenced (no heartbeat stored for half the lease TTL): interrupting every command and removing this daemon's containers; its runs may move to another daemon", "runs", len(runs))
	for _, rs := range runs {
		rs.markFenced() // interrupts a command in flight (reported interrupted, not run again)
	}
	for _, rs := range runs {
		rs.boxMu.Lock()
		for _, b := range rs.boxes {
			if b.sessions != nil {
				b.sessions.closeAll()
			}
		}
		rs.boxes = map[role]*box{}
		rs.boxMu.Unlock()
		if err := d.removeBoxes(context.WithoutCancel(ctx), rs.id); err != nil {
			d.log.Warn("fenced: remove containers", "run", rs.id, "err", err)
		}
	}
}

// startedElsewhere reports whether another daemon recorded the request's
// start.
func (d *Daemon) startedElsewhere(rs *runState, id string) (by string, ok bool) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	by = rs.startedBy[id]
	return by, by != "" && by != d.cfg.DaemonID
}

// setNotice keeps a notice for the requester, sent with the run's next
// result.
func (rs *runState) setNotice(s string) {
	rs.mu.Lock()
	rs.notice = s
	rs.mu.Unlock()
}

// takeNotice returns the notice and forgets it.
func (rs *runState) takeNotice() string {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	n := rs.notice
	rs.notice = ""
	return n
}

// ownsContainer reports whether a container whose run is alive should stay
// on this engine: its run is this daemon's, or it was made by another
// daemon (sharing the engine) that may own it.
func (d *Daemon) ownsContainer(labels map[string]string, runID string) bool {
	if d.placer == nil || d.placer.Mine(runID) {
		return true
	}
	return labels[LabelDaemon] != d.cfg.DaemonID
}
