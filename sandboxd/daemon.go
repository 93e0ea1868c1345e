package sandboxd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/rundir"
	"github.com/vera-run/vera/sandboxd/placement"
	"github.com/vera-run/vera/sandboxd/policy"
)

// Durable consumer names.
const (
	ConsumerRequests = "sandboxd"
	ConsumerControl  = "sandboxd-control"
)

// Daemon is the sandbox daemon. Create it with New and run it with Run.
type Daemon struct {
	cfg    Config
	bus    *bus.Bus
	docker *client.Client
	log    *slog.Logger
	roots  *rundir.Roots // WorkRoots: where run dirs may lie

	mu   sync.Mutex
	runs map[string]*runState

	bg        sync.WaitGroup // log followers and the event watcher
	bgCtx     context.Context
	bgCancel  context.CancelFunc
	following map[string]bool  // container id → a log follower runs
	runOnBus  map[string]*bool // run id → whether the stream has it (for Docker events of runs not loaded)
	layerSize int              // whether the engine takes --storage-opt size (layerSize*), guarded by mu

	createSem  chan struct{}            // bounds containers being created and started at once
	imagesSeen map[string]time.Time     // image → when the engine was last seen to have it (guarded by mu)
	bootstraps map[string]chan struct{} // container id → closed when its /work/.venv bootstrap ended (guarded by mu)
	pool       *warmPool                // nil when Config.WarmPool is 0
	placer     *placement.Placer        // the run leases (placed.go); set once Run registered the daemon
	spoolLock  *os.File                 // the spool's lock, held for the life of the process
}

// runState is what the daemon knows of one run, rebuilt from the stream.
//
// Locking: mu guards the maps and is never held across a Docker call or a
// command (only while the run is loaded from the stream). Requests of a run
// may be handled concurrently (the auditor's; the agent's come one at a
// time): each holds active for reading while it runs, so that the end of
// the run (handleControl, holding it for writing) waits for all of them;
// boxMu serialises creating, restarting and recovering the run's
// containers, never an exec.
type runState struct {
	id string

	mu      sync.Mutex
	loaded  bool
	cfg     *catalog.RunConfig // set once by load
	started map[string]bool
	startAt map[string]time.Time // request id → its tool.started's started_at
	// startedBy: request id → the daemon its tool.started names ("" in
	// events of older daemons).
	startedBy map[string]string
	notice    string // for the requester with the run's next result (the run moved here)
	finished  map[string]bool
	inflight  map[string]bool            // request id → being handled by this daemon now
	unsent    map[string]*unsentResult   // request id → a result whose publish failed, sent again on redelivery
	requests  map[string]recordedRequest // request id → the request, for recovery
	// sessionsSeen: container name → the last session recorded on the
	// stream (by any daemon), so that a new daemon's session says it
	// replaced one.
	sessionsSeen map[string]sessionInfo

	active sync.RWMutex // read: a request is being handled; write: the run's containers are removed

	boxMu sync.Mutex
	boxes map[role]*box // guarded by boxMu

	// The run's directory (roots.go), opened once: dir, or why it is
	// refused (dirErr); work, the sandbox's tree in it, held open for the
	// /work watchdog's walk, and its path (the bind mount's source).
	dirMu    sync.Mutex
	dir      *rundir.Dir
	dirErr   error
	work     *os.File
	workPath string

	ctl         sync.Mutex // guards ended, fenced and interrupt, never held long
	ended       bool
	fenced      bool // this daemon was fenced while it held the run: nothing more runs on this state
	interrupted bool // interrupt is closed
	interrupt   chan struct{}
}

// unsentResult is the outcome of a command that ran but whose events could
// not be stored (the bus was unreachable beyond the publish budget). The
// request's redelivery to this daemon publishes it, rather than reporting
// the command as interrupted or running it again.
type unsentResult struct {
	facts []bus.Event // events to store before the result (ids derived: sent twice, stored once)
	tf    catalog.ToolFinished
}

// recordedRequest is a tool request as stored.
type recordedRequest struct {
	event bus.Event
	req   catalog.ToolRequested
}

// New makes a daemon that talks to Docker through docker (API version
// negotiated) and to the bus through b.
func New(b *bus.Bus, docker *client.Client, cfg Config) (*Daemon, error) {
	if b == nil || docker == nil {
		return nil, errors.New("sandboxd: New needs a bus and a Docker client")
	}
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	d := &Daemon{
		cfg: cfg, bus: b, docker: docker, log: cfg.Logger,
		runs: map[string]*runState{}, following: map[string]bool{}, runOnBus: map[string]*bool{},
		createSem: make(chan struct{}, cfg.CreateConcurrency), imagesSeen: map[string]time.Time{}, bootstraps: map[string]chan struct{}{},
	}
	roots, err := rundir.NewRoots(cfg.WorkRoots...)
	if err != nil {
		return nil, fmt.Errorf("sandboxd: work roots: %w", err)
	}
	d.roots = roots
	if cfg.WarmPool > 0 {
		d.pool = newWarmPool(d, cfg.WarmPool)
	}
	return d, nil
}

// NewDockerClient connects to the Docker Engine from the environment
// (DOCKER_HOST etc.) with API version negotiation.
func NewDockerClient() (*client.Client, error) {
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return c, nil
}

// Run serves until ctx ends, then drains: commands in flight may finish
// (bounded by the consumer's drain timeout, after which they are killed and
// reported as interrupted).
func (d *Daemon) Run(ctx context.Context) error {
	d.bgCtx, d.bgCancel = context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		d.bgCancel()
		d.bg.Wait()
		d.closeSessions()
	}()
	if ok, err := d.startPlacement(ctx); err != nil || !ok {
		return err
	}
	if _, err := d.docker.Ping(ctx); err != nil {
		d.log.Error("Docker is not reachable; requests will be answered with an error until it is", "err", err)
	} else {
		d.reapOrphans(ctx)
	}
	d.bg.Add(1)
	go func() { defer d.bg.Done(); d.watchDockerEvents(d.bgCtx) }()
	if d.pool != nil {
		d.bg.Add(1)
		go func() { defer d.bg.Done(); d.pool.run(d.bgCtx) }()
	}

	errs := make(chan error, 2)
	go func() {
		errs <- d.bus.Consume(ctx, bus.ConsumerConfig{
			Durable: d.cfg.requestsDurable(), Types: []string{catalog.TypeToolRequested},
			Concurrency: d.cfg.Concurrency, ShardKey: requestShard, AckWait: 30 * time.Second, MaxDeliver: 5,
		}, component.Checked(d.handleRequest))
	}()
	go func() {
		errs <- d.bus.Consume(ctx, bus.ConsumerConfig{
			Durable: d.cfg.controlDurable(), Types: []string{catalog.TypeRunStarted, catalog.TypeRunFinished, catalog.TypeRunCancelled},
			Concurrency: 4,
		}, component.Checked(d.handleControl))
	}()
	if os.Geteuid() == 0 {
		if uid, _, ok := numericUser(d.cfg.User); ok && uid == 0 {
			d.log.Warn("sandboxd runs as root and so do its containers (--user 0:0): commands the model writes run as root in the sandbox", "user", d.cfg.User)
		} else {
			d.log.Warn("sandboxd runs as root; its containers run as the unprivileged "+d.cfg.User+", and work dirs root owns are handed to that user", "user", d.cfg.User)
		}
	}
	d.log.Info("sandboxd serving", "id", d.cfg.DaemonID, "capacity", d.cfg.Capacity, "warm_pool", d.cfg.WarmPool, "image", d.cfg.Image, "network", d.cfg.Network, "user", d.cfg.User, "lab_allowed", d.cfg.Lab,
		"work_roots", d.cfg.WorkRoots, "input_roots", d.cfg.InputRoots)
	var first error
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	d.closePlacement()
	if d.spoolLock != nil {
		_ = d.spoolLock.Close() // a daemon started next on this spool (a restart) may take it
		d.spoolLock = nil
	}
	return first
}

// closeSessions ends every session this daemon started (it is stopping):
// each keeper ends at the end of its input.
func (d *Daemon) closeSessions() {
	d.mu.Lock()
	runs := make([]*runState, 0, len(d.runs))
	for _, rs := range d.runs {
		runs = append(runs, rs)
	}
	d.mu.Unlock()
	for _, rs := range runs {
		rs.boxMu.Lock()
		for _, b := range rs.boxes {
			if b.sessions != nil {
				b.sessions.closeAll()
			}
		}
		rs.boxMu.Unlock()
	}
}

// run returns the run's state (empty until load fills it from the stream).
func (d *Daemon) run(id string) *runState {
	d.mu.Lock()
	rs := d.runs[id]
	if rs == nil {
		rs = &runState{id: id, started: map[string]bool{}, startAt: map[string]time.Time{}, startedBy: map[string]string{}, finished: map[string]bool{}, inflight: map[string]bool{}, unsent: map[string]*unsentResult{},
			requests: map[string]recordedRequest{}, sessionsSeen: map[string]sessionInfo{}, boxes: map[role]*box{}, interrupt: make(chan struct{})}
		d.runs[id] = rs
	}
	d.mu.Unlock()
	return rs
}

// forget drops an ended run's state after a while (so that the Docker
// events of its removal are still mirrored). A late request re-reads the
// run from the stream and finds it ended.
func (d *Daemon) forget(id string) {
	time.AfterFunc(time.Minute, func() {
		d.mu.Lock()
		rs := d.runs[id]
		delete(d.runs, id)
		d.mu.Unlock()
		if rs != nil {
			rs.closeDir()
		}
	})
}

// load rebuilds the run's state from its events. Called with rs.mu held.
func (d *Daemon) load(ctx context.Context, rs *runState) error {
	if rs.loaded {
		return nil
	}
	types := []string{catalog.TypeTaskSubmitted, catalog.TypeRunStarted, catalog.TypeToolRequested, catalog.TypeToolStarted, catalog.TypeToolFinished, catalog.TypeToolSession, catalog.TypeRunFinished, catalog.TypeRunCancelled}
	for rec, err := range d.bus.Read(ctx, bus.ReadOptions{RunID: rs.id, Types: types}) {
		if err != nil {
			return fmt.Errorf("load run %s: %w", rs.id, err)
		}
		if rec.Err != nil {
			continue
		}
		p, err := catalog.Decode(rec.Event.Type, rec.Event.Data)
		if err != nil {
			continue
		}
		switch v := p.(type) {
		case *catalog.TaskSubmitted:
			if rs.cfg == nil {
				c := v.RunConfig
				rs.cfg = &c
			}
		case *catalog.RunStarted:
			c := v.Config
			rs.cfg = &c
		case *catalog.ToolRequested:
			id := v.RequestID
			if id == "" {
				id = rec.Event.ID
			}
			if _, seen := rs.requests[id]; !seen {
				v.RequestID = id
				rs.requests[id] = recordedRequest{event: rec.Event, req: *v}
			}
		case *catalog.ToolStarted:
			rs.started[v.RequestID] = true
			rs.startAt[v.RequestID] = v.StartedAt
			rs.startedBy[v.RequestID] = v.Daemon
		case *catalog.ToolFinished:
			rs.finished[v.RequestID] = true
		case *catalog.ToolSession:
			rs.sessionsSeen[v.Container] = sessionInfo{id: v.SessionID, started: rec.Event.Time}
		case *catalog.RunFinished, *catalog.RunCancelled:
			rs.markEnded()
		}
	}
	rs.loaded = true
	return nil
}

func (rs *runState) markEnded() {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.ended = true
	rs.closeInterruptLocked()
}

// markFenced interrupts the run's commands because this daemon is fenced
// (placed.go): unlike an end, the run goes on (here once the fence
// clears, with a new state, or on another daemon).
func (rs *runState) markFenced() {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	rs.fenced = true
	rs.closeInterruptLocked()
}

func (rs *runState) closeInterruptLocked() {
	if !rs.interrupted {
		rs.interrupted = true
		close(rs.interrupt)
	}
}

func (rs *runState) isFenced() bool {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	return rs.fenced
}

func (rs *runState) isEnded() bool {
	rs.ctl.Lock()
	defer rs.ctl.Unlock()
	return rs.ended
}

func (d *Daemon) handleControl(ctx context.Context, m *bus.Message) error {
	if d.othersRun(m.Event.RunID) {
		return nil // another daemon's run
	}
	rs := d.run(m.Event.RunID)
	if m.Event.Type == catalog.TypeRunStarted {
		d.prestart(rs)
		return nil
	}
	rs.markEnded() // interrupts a command in flight
	defer d.releaseRun(ctx, rs.id)
	if m.Event.Type != catalog.TypeRunFinished && m.Event.Type != catalog.TypeRunCancelled {
		return nil
	}
	rs.active.Lock() // wait for the requests in flight to be reported
	defer rs.active.Unlock()
	var poolStates []string
	rs.boxMu.Lock()
	for _, b := range rs.boxes {
		b.work.stop() // the run is over: its /work is no longer watched
		if b.sessions != nil {
			b.sessions.closeAll()
		}
		if b.runEnv != nil && strings.HasPrefix(b.stateDir, filepath.Join(d.cfg.SpoolDir, poolSpool)+string(filepath.Separator)) {
			poolStates = append(poolStates, b.stateDir) // a claimed pool container's
		}
	}
	rs.boxMu.Unlock()
	if !d.cfg.KeepContainers {
		defer func() {
			for _, dir := range poolStates {
				_ = os.RemoveAll(dir)
			}
		}()
		if err := d.removeBoxes(ctx, rs.id); err != nil {
			d.log.Warn("remove containers of an ended run", "run", rs.id, "err", err)
			return err
		}
		rs.boxMu.Lock()
		rs.boxes = map[role]*box{}
		rs.boxMu.Unlock()
		d.removeStateDirs(rs.id)
		d.log.Info("run ended; containers removed", "run", rs.id)
	}
	d.forget(rs.id)
	return nil
}

// prestart brings up the run's agent container as soon as the run starts,
// in the background, while the agent asks the model for its first step:
// the first command then finds it ready. A failure is only logged; the
// first command tries again and reports it.
func (d *Daemon) prestart(rs *runState) {
	if d.bgCtx == nil {
		return
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		ctx := d.bgCtx
		rs.active.RLock()
		defer rs.active.RUnlock()
		rs.mu.Lock()
		err := d.load(ctx, rs)
		rs.mu.Unlock()
		if err != nil || rs.isEnded() {
			return
		}
		if _, _, err := d.admit(rs); err != nil {
			return // refused: the first request says why
		}
		if ok, err := d.mine(ctx, rs); err != nil || !ok {
			return // another daemon's run (or this one is fenced: its first request waits)
		}
		if _, err := d.ensureBox(ctx, rs, roleAgent); err != nil && ctx.Err() == nil {
			d.log.Info("the run's container could not be made ahead of its first command", "run", rs.id, "err", err)
		}
	}()
}

// requestShard is the ordering key of a tool request (bus.ConsumerConfig's
// ShardKey): the agent's requests of a run share their container's key and
// run one after the other in stream order, as its shell state (cwd,
// exports) flows from one to the next; each auditor request has a key of
// its own, so that the auditor's checks run in parallel with one another
// and with the agent (the auditor sends a check's next command only after
// the previous one finished).
func requestShard(m *bus.Message) string {
	var req struct {
		RequestID string            `json:"request_id"`
		Requester catalog.Requester `json:"requester"`
	}
	_ = m.Event.DecodeData(&req) // a bad request is keyed as the agent's; handleRequest rejects it
	r := roleOf(req.Requester)
	if r != roleAuditor {
		return ContainerName(m.Event.RunID, r)
	}
	if req.RequestID == "" {
		req.RequestID = m.Event.ID
	}
	return ContainerName(m.Event.RunID, r) + "/" + req.RequestID
}

// claim registers a request as handled by this daemon now, after loading
// the run. It reports false (and nothing to do) when the request was
// answered already or is being handled by another delivery; started says
// whether a previous daemon started it.
func (d *Daemon) claim(ctx context.Context, rs *runState, id string) (ok, started bool, err error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err := d.load(ctx, rs); err != nil {
		return false, false, err
	}
	if rs.finished[id] || rs.inflight[id] {
		return false, false, nil
	}
	rs.inflight[id] = true
	return true, rs.started[id], nil
}

func (rs *runState) release(id string) {
	rs.mu.Lock()
	delete(rs.inflight, id)
	rs.mu.Unlock()
}

// handleRequest runs one vera.tool.requested at most once.
func (d *Daemon) handleRequest(ctx context.Context, m *bus.Message) error {
	return d.handleRequestEvent(ctx, m.Event)
}

// handleRequestEvent runs one request, delivered or found on the stream
// (a run taken over: runUnstarted).
func (d *Daemon) handleRequestEvent(ctx context.Context, ev bus.Event) error {
	var req catalog.ToolRequested
	if err := ev.DecodeData(&req); err != nil {
		return bus.Permanent(err)
	}
	if req.RequestID == "" {
		req.RequestID = ev.ID
	}
	if d.othersRun(ev.RunID) {
		return nil // another daemon runs it (if that one dies, the run's new owner finds the request on the stream)
	}
	rs := d.run(ev.RunID)
	rs.active.RLock()
	defer rs.active.RUnlock()
	ok, started, err := d.claim(ctx, rs, req.RequestID)
	if err != nil {
		return err // the bus failed us: retry later
	}
	if !ok {
		// Answered already (redelivery, or a replayed request), or being
		// run right now by another delivery of it, which will answer it.
		return nil
	}
	defer rs.release(req.RequestID)
	if !rs.isEnded() {
		if mine, err := d.mine(ctx, rs); err != nil {
			return err
		} else if !mine {
			return nil
		}
	}
	if rs.isFenced() {
		return errFenced // this state was dropped by a fence: redelivered, it finds a new one
	}
	log := d.log.With("run", rs.id, "request", req.RequestID)
	if u := rs.takeUnsent(req.RequestID); u != nil {
		log.Info("publishing the result of a command that ran before the bus failed us")
		return d.finishWith(ctx, rs, ev, req, u.facts, u.tf)
	}
	token := fileToken(req.RequestID)
	spool := filepath.Join(d.cfg.SpoolDir, rs.id)
	finish := func(tf catalog.ToolFinished) error { return d.finish(ctx, rs, ev, req, tf) }
	failed := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		log.Warn("request not run", "reason", msg)
		return finish(catalog.ToolFinished{ExitCode: -1, Error: msg})
	}

	if started {
		if _, elsewhere := d.startedElsewhere(rs, req.RequestID); elsewhere || d.mayHaveRun(rs.id, token) {
			return d.reportInterrupted(ctx, rs, ev, req)
		}
		// Its start was stored, but no daemon of this spool went on to
		// run it (the one that stored it died waiting for the store's
		// answer): it never ran, so it runs now, once.
		log.Info("a request whose start was stored but which never ran: running it now")
	}
	if req.Command == "" {
		return failed("empty command")
	}
	if req.Tool == catalog.ToolEdit {
		return d.handleEdit(ctx, rs, ev, req, token, spool)
	}
	if req.Tool != "" && req.Tool != catalog.ToolShell {
		return failed("unknown tool %q: only shell and edit exist", req.Tool)
	}
	if rs.isEnded() {
		return failed("the run has ended; the command was not run")
	}
	if _, _, err := d.admit(rs); err != nil {
		return failed("%v; no container was created", err)
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = WorkMount
	}
	if dec := policy.CheckIn(req.Command, cwd); dec.Denied {
		log.Warn("command denied", "rule", dec.Rule, "reason", dec.Reason)
		return finish(catalog.ToolFinished{ExitCode: -1, Denied: true, DenyRule: dec.Rule, Error: dec.Reason})
	}
	b, err := d.ensureBox(ctx, rs, roleOf(req.Requester))
	if err != nil {
		return failed("sandbox unavailable: %v", err)
	}
	timeout := d.cfg.DefaultTimeout
	if rs.cfg != nil && rs.cfg.Sandbox.ToolTimeoutMS > 0 {
		timeout = time.Duration(rs.cfg.Sandbox.ToolTimeoutMS) * time.Millisecond
	}
	if req.TimeoutMS > 0 {
		timeout = time.Duration(req.TimeoutMS) * time.Millisecond
	}
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return failed("spool: %v", err)
	}
	stdout := newCapture(filepath.Join(spool, token+".stdout"), d.cfg.HeadBytes, d.cfg.TailBytes, d.cfg.SpoolMax)
	stderr := newCapture(filepath.Join(spool, token+".stderr"), d.cfg.HeadBytes, d.cfg.TailBytes, d.cfg.SpoolMax)
	user := d.cfg.User
	if d.labFor(rs) {
		user = "0:0"
	}
	before := map[string]string{}
	for k, v := range b.env {
		before[k] = v
	}
	for k, v := range req.Env {
		before[k] = v
	}
	mode := d.sessionMode(rs)
	if strings.ContainsRune(req.Command, 0) || strings.ContainsRune(req.ShellState, 0) || strings.ContainsRune(cwd, 0) {
		return failed("the command, its cwd or its shell state holds a NUL byte, which no shell can take")
	}
	overLimit := make(chan struct{})
	watch := d.watchDisk(ctx, rs, b, user == "0:0" || strings.HasPrefix(user, "0:"), func(string) { close(overLimit) })
	d.waitBootstrap(ctx, b.id)
	er := execRequest{
		box: b, user: user, command: req.Command, cwd: cwd, env: withEnv(req.Env, b.runEnv), timeout: timeout, token: token,
		stdout: stdout, stderr: stderr, interrup: rs.interrupt, limit: overLimit,
		started: func(execID string, at time.Time) error {
			return d.recordStarted(ctx, rs, ev, req.RequestID, token, b, execID, at)
		},
	}
	var res execResult
	if mode == catalog.SessionExec {
		res = d.execute(ctx, er)
	} else {
		res = d.executeSession(ctx, sessionRequest{execRequest: er, shellState: req.ShellState,
			opened: func(s *session, prev *sessionInfo) { d.sessionOpened(ctx, rs, ev, b, s, prev) }})
	}
	limitReason := watch.reason()
	_ = stdout.close()
	_ = stderr.close()
	if res.notStarted != nil {
		// Not run: the request is retried when it is redelivered.
		log.Warn("tool.started could not be stored; the command was not started", "err", res.notStarted)
		_ = os.Remove(stdout.path)
		_ = os.Remove(stderr.path)
		return fmt.Errorf("record tool.started of %s (the command was not started): %w", req.RequestID, res.notStarted)
	}
	tf := catalog.ToolFinished{
		ExitCode: res.exitCode, DurationMS: res.duration.Milliseconds(), TimedOut: res.timedOut, Interrupted: res.interrupted,
		Stdout: d.outputOf(ctx, stdout), Stderr: d.outputOf(ctx, stderr), CwdAfter: cwd, Session: mode,
	}
	if res.err != nil {
		tf.Error = res.err.Error()
	}
	if res.timedOut {
		tf.Error = fmt.Sprintf("timed out after %s; every process the command started was killed", timeout)
	}
	if res.interrupted {
		tf.Error = "interrupted: the run ended or sandboxd stopped"
	}
	if res.limited {
		tf.Error = limitReason
	}
	if res.exitCode == 137 && !res.timedOut && !res.interrupted && !res.limited {
		tf.Error = "killed (SIGKILL): possibly by the sandbox's memory or pids limit"
	}
	if res.state != nil {
		tf.CwdAfter = res.state.cwd
		tf.Exports = exportsOf(before, res.state.env)
		if mode == catalog.SessionPersistent {
			tf.ShellStateAfter = res.state.shell
			if res.state.shellErr != nil {
				res.stateErr = res.state.shellErr // cwd and exports carried over; the rest of the state not
			}
		}
	}
	if tf.Error == "" && tf.ExitCode != 0 && strings.Contains(stderr.headString(), "No space left on device") {
		tf.Error = fmt.Sprintf("a write failed for lack of space: the sandbox's scratch space (/tmp, /var/tmp) holds at most %s; /work at most %s", mib(d.scratchLimit(rs)), mib(d.workLimit(rs)))
	}
	if res.sessionLost != "" {
		log.Warn("session given up during the command; the next command gets a new one", "reason", res.sessionLost)
		if tf.Error == "" || res.timedOut || res.interrupted {
			tf.Error += "; the session was lost (" + res.sessionLost + "); the next command starts a new one from the recorded state"
		}
	}
	var facts []bus.Event
	if res.stateErr != nil {
		// The previous state stays (cwd_after is the request's cwd, no
		// exports); the run records that this command did not report one.
		log.Warn("shell state not reported; the previous state stays", "reason", res.stateErr)
		if ev, err := d.stateNotReported(rs, ev, b, req.RequestID, cwd, res); err == nil {
			facts = append(facts, ev)
		} else {
			log.Warn("record that the shell state was not reported", "err", err)
		}
	}
	log.Info("command finished", "exit", tf.ExitCode, "duration_ms", tf.DurationMS, "timed_out", tf.TimedOut,
		"stdout_bytes", tf.Stdout.Bytes, "stderr_bytes", tf.Stderr.Bytes)
	return d.finishWith(ctx, rs, ev, req, facts, tf)
}

// finish publishes the request's result, with an id derived from the
// request event so that reporting twice stores it once.
func (d *Daemon) finish(ctx context.Context, rs *runState, cause bus.Event, req catalog.ToolRequested, tf catalog.ToolFinished) error {
	return d.finishWith(ctx, rs, cause, req, nil, tf)
}

// finishWith publishes facts (events about the command, stored before its
// result) and then the result. When the bus cannot store them within the
// publish budget the handler fails, so that the request is redelivered;
// the result is kept, and the redelivery publishes it instead of treating
// the command as cut off.
func (d *Daemon) finishWith(ctx context.Context, rs *runState, cause bus.Event, req catalog.ToolRequested, facts []bus.Event, tf catalog.ToolFinished) error {
	tf.RequestID, tf.Requester = req.RequestID, req.Requester
	if n := rs.takeNotice(); n != "" && req.Requester != catalog.RequesterAuditor {
		tf.Notice = n
	} else if n != "" {
		rs.setNotice(n) // for the agent, not the auditor
	}
	ev, err := d.bus.Events.New(rs.id, tf, bus.ReactionTo(cause, "finished"))
	if err != nil {
		return bus.Permanent(err)
	}
	keep := func(err error) error {
		rs.mu.Lock()
		rs.unsent[req.RequestID] = &unsentResult{facts: facts, tf: tf}
		rs.mu.Unlock()
		return err
	}
	// On disk too, until stored: a daemon that dies while the bus keeps
	// the result waiting (a failover) leaves it to its successor, which
	// publishes it instead of reporting the command interrupted.
	resultPath := filepath.Join(d.cfg.SpoolDir, rs.id, fileToken(req.RequestID)+".result")
	if err := saveResult(resultPath, facts, tf); err != nil {
		d.log.Warn("spool the result", "request", req.RequestID, "err", err)
	}
	for _, f := range facts {
		if _, err := d.bus.Publish(ctx, f); err != nil {
			return keep(fmt.Errorf("publish %s of %s: %w", f.Type, req.RequestID, err))
		}
	}
	if _, err := d.bus.Publish(ctx, ev); err != nil {
		return keep(fmt.Errorf("publish tool.finished of %s: %w", req.RequestID, err))
	}
	rs.mu.Lock()
	rs.finished[req.RequestID] = true
	delete(rs.unsent, req.RequestID)
	rs.mu.Unlock()
	token := fileToken(req.RequestID)
	spool := filepath.Join(d.cfg.SpoolDir, rs.id)
	_ = os.Remove(filepath.Join(spool, token+".stdout"))
	_ = os.Remove(filepath.Join(spool, token+".stderr"))
	_ = os.Remove(resultPath)
	_ = os.Remove(filepath.Join(spool, token+".running"))
	return nil
}

// recordStarted stores a request's vera.tool.started, notes it in the
// run's state and marks it running on the spool (markRunning): after it,
// and only after it, the request may take effect. The id derives from the
// request: a redelivery that stores it again (the first ack was lost)
// stores it once.
func (d *Daemon) recordStarted(ctx context.Context, rs *runState, cause bus.Event, requestID, token string, b *box, execID string, at time.Time) error {
	ev, err := d.bus.Events.New(rs.id, catalog.ToolStarted{RequestID: requestID, Container: b.name, ContainerID: b.id, ExecID: execID, StartedAt: at, Daemon: d.cfg.DaemonID}, bus.ReactionTo(cause, "started"))
	if err == nil {
		_, err = d.bus.Publish(ctx, ev)
	}
	if err != nil {
		return err
	}
	rs.mu.Lock()
	rs.started[requestID] = true
	rs.mu.Unlock()
	return d.markRunning(rs.id, token)
}

// markRunning notes on disk, once a request's vera.tool.started is
// stored and before the command can run, that it may run: a successor
// daemon that finds the start stored but no such mark (the daemon died
// waiting for the store's answer) knows the command never ran, and runs
// it instead of reporting it interrupted. The mark outlives the process,
// not a crash of the machine (the container's effects would not either,
// unless synced).
func (d *Daemon) markRunning(runID, token string) error {
	path := filepath.Join(d.cfg.SpoolDir, runID, token+".running")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("mark the command running: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("mark the command running: %w", err)
	}
	return f.Close()
}

// mayHaveRun reports whether a request whose start is stored may have run
// (its mark is on disk, or its result, or its output).
func (d *Daemon) mayHaveRun(runID, token string) bool {
	dir := filepath.Join(d.cfg.SpoolDir, runID)
	for _, ext := range []string{".running", ".result", ".stdout", ".stderr"} {
		if _, err := os.Lstat(filepath.Join(dir, token+ext)); err == nil {
			return true
		}
	}
	return false
}

// spooledResult is a result kept on disk until the bus stored it.
type spooledResult struct {
	Facts []bus.Event          `json:"facts,omitempty"`
	Tool  catalog.ToolFinished `json:"tool_finished"`
}

func saveResult(path string, facts []bus.Event, tf catalog.ToolFinished) error {
	b, err := json.Marshal(spooledResult{Facts: facts, Tool: tf})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// loadResult reads a result a previous daemon could not store.
func loadResult(path string) (*unsentResult, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var r spooledResult
	if json.Unmarshal(b, &r) != nil {
		return nil, false
	}
	return &unsentResult{facts: r.Facts, tf: r.Tool}, true
}

// reportInterrupted answers a request that a previous daemon started and
// never finished: what is left of it is killed, and it is reported as
// interrupted with the output spooled before the crash. It is never run
// again. Called by the request's claimant.
func (d *Daemon) reportInterrupted(ctx context.Context, rs *runState, cause bus.Event, req catalog.ToolRequested) error {
	token := fileToken(req.RequestID)
	if u, ok := loadResult(filepath.Join(d.cfg.SpoolDir, rs.id, token+".result")); ok {
		d.log.Info("publishing the result of a command that ran to its end before the previous daemon stopped", "run", rs.id, "request", req.RequestID)
		return d.finishWith(ctx, rs, cause, req, u.facts, u.tf)
	}
	rs.mu.Lock()
	since := rs.startAt[req.RequestID]
	rs.mu.Unlock()
	if since.IsZero() {
		since = time.Now() // unknown: only what is still under its keeper
	} else {
		since = since.Add(-2 * time.Second) // started_at is noted just after the exec started
	}
	d.killLeftover(ctx, rs.id, roleOf(req.Requester), token, since)
	stdout, stderr := d.spooled(ctx, filepath.Join(d.cfg.SpoolDir, rs.id), token)
	d.log.Warn("request was cut off by a daemon crash; reported as interrupted, not run again", "run", rs.id, "request", req.RequestID)
	msg := "sandboxd stopped after the command's start was recorded (it ran in part, in full or not at all); it was not run again"
	if by, elsewhere := d.startedElsewhere(rs, req.RequestID); elsewhere {
		msg = "sandboxd " + by + " stopped after the command's start was recorded (it ran in part, in full or not at all); the run moved to sandboxd " + d.cfg.DaemonID + ", which did not run it again"
	}
	return d.finish(ctx, rs, cause, req, catalog.ToolFinished{ExitCode: -1, Interrupted: true, Stdout: stdout, Stderr: stderr, Error: msg})
}

// recoverRun reports, right at start, every request of the run that a
// crashed daemon left started but unfinished (rather than when its message
// is redelivered, after the ack wait).
func (d *Daemon) recoverRun(ctx context.Context, rs *runState) {
	rs.active.RLock()
	defer rs.active.RUnlock()
	rs.mu.Lock()
	if err := d.load(ctx, rs); err != nil {
		rs.mu.Unlock()
		d.log.Warn("recover run", "run", rs.id, "err", err)
		return
	}
	var cut []recordedRequest
	for id := range rs.started {
		by := rs.startedBy[id]
		if r, ok := rs.requests[id]; ok && !rs.finished[id] && !rs.inflight[id] && ((by != "" && by != d.cfg.DaemonID) || d.mayHaveRun(rs.id, fileToken(id))) {
			cut = append(cut, r) // (one that never ran is run when redelivered)
		}
	}
	rs.mu.Unlock()
	for _, r := range cut {
		if ok, _, err := d.claim(ctx, rs, r.req.RequestID); err != nil || !ok {
			continue
		}
		if err := d.reportInterrupted(ctx, rs, r.event, r.req); err != nil {
			d.log.Warn("report interrupted request", "run", rs.id, "request", r.req.RequestID, "err", err)
		}
		rs.release(r.req.RequestID)
	}
}

// outputOf turns a closed capture into the event's Output, storing the
// whole stream as a blob when it does not fit inline.
func (d *Daemon) outputOf(ctx context.Context, c *capture) catalog.Output {
	if !c.truncated() {
		return c.output(nil)
	}
	ref, err := d.bus.PutBlobFileDigest(ctx, c.path, c.spooledDigest(), "application/octet-stream")
	if err != nil {
		d.log.Warn("store output blob", "err", err)
		return c.output(nil)
	}
	ref.Name = filepath.Base(c.path)
	return c.output(&ref)
}

// spooled rebuilds the outputs of a command from its spool files.
func (d *Daemon) spooled(ctx context.Context, dir, token string) (stdout, stderr catalog.Output) {
	read := func(name string) catalog.Output {
		path := filepath.Join(dir, token+"."+name)
		f, err := os.Open(path)
		if err != nil {
			return catalog.Output{}
		}
		defer f.Close()
		c := newCapture("", d.cfg.HeadBytes, d.cfg.TailBytes, 0)
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			c.Write(buf[:n])
			if err != nil {
				break
			}
		}
		c.path = path
		return d.outputOf(ctx, c)
	}
	return read("stdout"), read("stderr")
}

// killLeftover kills what is left of a command whose daemon died: its
// processes may still run in the container. since is when it started, or
// earlier.
func (d *Daemon) killLeftover(ctx context.Context, runID string, r role, token string, since time.Time) {
	name := ContainerName(runID, r)
	info, err := d.docker.ContainerInspect(ctx, name)
	if err != nil || info.State == nil || !info.State.Running {
		return
	}
	// In a session, the command ran under a keeper of the daemon that
	// died: that keeper's tree goes (this daemon's own sessions stay).
	var pool *sessionPool
	if rs := d.run(runID); rs != nil {
		rs.boxMu.Lock()
		if b := rs.boxes[r]; b != nil {
			pool = b.sessions
		}
		rs.boxMu.Unlock()
	}
	d.killStaleSessions(ctx, info.ID, pool)
	d.killCommand(ctx, &box{name: name, id: info.ID}, "vera-shell:"+token, since)
}

// stateNotReported builds the event that records on the run that a
// command's shell did not report its state (vera.container.event, action
// vera_state_not_reported), with an id derived from the request so that
// reporting twice stores it once.
func (d *Daemon) stateNotReported(rs *runState, cause bus.Event, b *box, requestID, cwd string, res execResult) (bus.Event, error) {
	t := d.cfg.Clock.Now()
	return d.bus.Events.New(rs.id, catalog.ContainerEvent{
		Container: b.name, ContainerID: b.id, Action: "vera_state_not_reported", Time: t,
		Attributes: map[string]string{"request_id": requestID, "exit_code": fmt.Sprint(res.exitCode), "reason": res.stateErr.Error(), "cwd_kept": cwd},
	}, bus.ReactionTo(cause, "state-not-reported"), bus.WithTime(t))
}

// maxNotice bounds the notices kept for a run's next result.
const maxNotice = 8 << 10

// addNotice adds a notice to those kept for the requester's next result
// (setNotice replaces them); past maxNotice, a new one is dropped.
func (rs *runState) addNotice(s string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case rs.notice == "":
		rs.notice = s
	case len(rs.notice)+len(s) < maxNotice:
		rs.notice += "; also: " + s
	}
}

// withEnv returns env with extra's variables it does not set.
func withEnv(env, extra map[string]string) map[string]string {
	if len(extra) == 0 {
		return env
	}
	out := make(map[string]string, len(env)+len(extra))
	for k, v := range extra {
		out[k] = v
	}
	for k, v := range env {
		out[k] = v
	}
	return out
}

// takeUnsent returns and forgets the kept result of a request, if any.
func (rs *runState) takeUnsent(id string) *unsentResult {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	u := rs.unsent[id]
	delete(rs.unsent, id)
	return u
}
