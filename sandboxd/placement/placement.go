package placement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/vera-run/vera/bus"
)

// DefaultLeaseTTL is how long a daemon's key may stay unchanged before the
// other daemons take its runs over.
const DefaultLeaseTTL = 20 * time.Second

// Key prefixes in the placement bucket.
const (
	DaemonKeyPrefix = "daemons."
	RunKeyPrefix    = "runs."
)

var (
	// ErrFull: this daemon holds as many runs as its capacity.
	ErrFull = errors.New("this sandbox daemon is at capacity")
	// ErrFenced: this daemon has not stored a heartbeat for LeaseTTL/2
	// (or has stopped): it may not take runs.
	ErrFenced = errors.New("this sandbox daemon is fenced: it has not stored a heartbeat for half its lease TTL")
	// ErrSuperseded: a newer instance of this daemon id took its key.
	ErrSuperseded = errors.New("a newer instance of this sandbox daemon took its key")
	// ErrNotStarted: Start has not registered this daemon (or it stopped).
	ErrNotStarted = errors.New("this sandbox daemon is not registered (Start it first)")
)

// OwnedError says a run is leased to another daemon.
type OwnedError struct {
	Run   string
	Owner string // the daemon id holding the lease
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("run %s is leased to sandbox daemon %s", e.Run, e.Owner)
}

// Takeover reports a run this daemon took over: From is the dead daemon
// that held it (or this daemon's own id for a lease of a previous
// instance of it resumed after Start).
type Takeover struct{ Run, From string }

// DaemonInfo is what this process knows of one daemon.
type DaemonInfo struct {
	ID, Host, Instance string
	Capacity           int  // 0: no limit
	Running            int  // leases it holds, in this process's view
	Stopped            bool // it said it stopped (Close)
	// Alive: its leases are not up for takeover (its key changed within
	// LeaseTTL as observed here, and was not deleted). A stopped daemon
	// stays alive for LeaseTTL after its stop was observed. For this
	// daemon itself: registered and not fenced.
	Alive    bool
	LastSeen time.Time // local time its key's last change was observed
}

// Options configure a Placer.
type Options struct {
	DaemonID string        // required; [A-Za-z0-9_-]{1,64}
	Capacity int           // runs this daemon may hold at once; 0 = no limit
	LeaseTTL time.Duration // default DefaultLeaseTTL; heartbeat every LeaseTTL/5
	// MarkerTTL is how long the marker of a released lease stays in the
	// bucket; default bus.PlacementMarkerTTL (at least 1s).
	MarkerTTL time.Duration
	Host      string // informational; default the hostname
	Logger    *slog.Logger
	// PreviousEnded, when set, is asked about a live-looking instance that
	// holds this daemon's key at Start; true means it is known to have
	// ended (sandboxd: it ran on this host and its spool lock is free, so
	// it was killed), and the key is taken at once instead of after
	// LeaseTTL of silence.
	PreviousEnded func(prev DaemonInfo) bool
}

var daemonIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// daemonRecord is the value of daemons.<id>.
type daemonRecord struct {
	ID       string `json:"id"`
	Instance string `json:"instance"`
	Host     string `json:"host,omitempty"`
	Capacity int    `json:"capacity"`
	Running  int    `json:"running"`
	Beat     uint64 `json:"beat"`
	Stopped  bool   `json:"stopped,omitempty"`
}

// leaseRecord is the value of runs.<run>.
type leaseRecord struct {
	Daemon   string    `json:"daemon"`
	Instance string    `json:"instance"`
	Since    time.Time `json:"since"`
	From     string    `json:"from,omitempty"`
}

type daemonView struct {
	rec     daemonRecord
	rev     uint64
	deleted bool
	seen    time.Time // when this process observed the last change (monotonic)
}

type leaseView struct {
	rec     leaseRecord
	rev     uint64
	deleted bool // a tombstone, kept so that an older revision is not applied after it
}

// Placer is one daemon's side of the placement protocol. It is safe for
// concurrent use.
type Placer struct {
	kv       jetstream.KeyValue
	o        Options
	instance string
	log      *slog.Logger

	mu         sync.Mutex
	daemons    map[string]*daemonView
	leases     map[string]*leaseView
	pending    int // acquisitions in flight: they hold capacity
	changed    chan struct{}
	synced     bool
	watchStart time.Time
	started    bool
	registered bool
	stopped    bool // heartbeats ended (Close, Start's ctx, superseded)
	superseded bool
	selfRev    uint64
	beat       uint64
	lastStored time.Time // when the last stored heartbeat was sent
	lastEcho   time.Time // when the watch last delivered this instance's own key
	err        error

	qmu       sync.Mutex
	queue     []Takeover
	queued    chan struct{}
	takeovers chan Takeover

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// New returns a Placer on the placement bucket kv (bus.Bus.PlacementKV).
// Nothing is written before Start.
func New(kv jetstream.KeyValue, o Options) (*Placer, error) {
	if kv == nil {
		return nil, errors.New("placement: no key-value bucket")
	}
	if !daemonIDRE.MatchString(o.DaemonID) {
		return nil, fmt.Errorf("placement: daemon id %q: use 1-64 letters, digits, '_' or '-'", o.DaemonID)
	}
	if o.Capacity < 0 {
		return nil, fmt.Errorf("placement: capacity %d: want 0 (no limit) or more", o.Capacity)
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.LeaseTTL < 100*time.Millisecond {
		return nil, fmt.Errorf("placement: lease TTL %s is too short (at least 100ms)", o.LeaseTTL)
	}
	if o.MarkerTTL == 0 {
		o.MarkerTTL = bus.PlacementMarkerTTL
	}
	if o.MarkerTTL < time.Second {
		return nil, fmt.Errorf("placement: marker TTL %s is too short (at least 1s)", o.MarkerTTL)
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Placer{
		kv:        kv,
		o:         o,
		instance:  ulid.Make().String(),
		log:       o.Logger.With("daemon", o.DaemonID),
		daemons:   map[string]*daemonView{},
		leases:    map[string]*leaseView{},
		changed:   make(chan struct{}),
		queued:    make(chan struct{}, 1),
		takeovers: make(chan Takeover, 64),
		done:      make(chan struct{}),
	}, nil
}

// ID is this daemon's id.
func (p *Placer) ID() string { return p.o.DaemonID }

// Instance is this process's instance of the daemon (a ULID).
func (p *Placer) Instance() string { return p.instance }

// LeaseTTL is the lease time in force.
func (p *Placer) LeaseTTL() time.Duration { return p.o.LeaseTTL }

func (p *Placer) daemonKey(id string) string { return DaemonKeyPrefix + id }
func runKey(run string) string               { return RunKeyPrefix + run }

// Start registers this daemon in daemons.<id> and returns once it is
// registered and the leases of its id are resumed (Owned). If the key
// holds a live instance (changed within LeaseTTL as observed here, not
// stopped), Start logs that it waits and waits until that instance has
// been silent for LeaseTTL. Then, until ctx ends (or Close), it
// heartbeats every LeaseTTL/5, watches daemons.> and runs.> keeping a
// local view, and takes over the runs of dead daemons. Ending ctx without
// Close is a crash as the others see it: heartbeats stop, the key is not
// marked stopped.
func (p *Placer) Start(ctx context.Context) error {
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return errors.New("placement: Start called twice")
	}
	rctx, cancel := context.WithCancel(ctx)
	p.started, p.cancel = true, cancel
	p.mu.Unlock()

	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.watchLoop(rctx) }()

	fail := func(err error) error {
		cancel()
		p.wg.Wait()
		p.finish(nil)
		return err
	}
	if err := p.waitSynced(rctx); err != nil {
		return fail(fmt.Errorf("placement: read the placement bucket: %w", err))
	}
	if err := p.register(rctx); err != nil {
		return fail(fmt.Errorf("placement: register sandbox daemon %s: %w", p.o.DaemonID, err))
	}
	if err := p.resumeOwn(rctx, false); err != nil {
		return fail(fmt.Errorf("placement: resume the runs of sandbox daemon %s: %w", p.o.DaemonID, err))
	}
	p.log.Info("sandbox daemon registered", "instance", p.instance, "capacity", p.o.Capacity, "lease_ttl", p.o.LeaseTTL, "owned", len(p.Owned()))

	p.wg.Add(3)
	go func() { defer p.wg.Done(); p.heartbeatLoop(rctx) }()
	go func() { defer p.wg.Done(); p.takeoverLoop(rctx) }()
	go func() { defer p.wg.Done(); p.forwardTakeovers(rctx) }()
	go func() {
		p.wg.Wait()
		p.finish(nil)
	}()
	return nil
}

// finish marks the background work ended and closes Done.
func (p *Placer) finish(err error) {
	p.mu.Lock()
	p.stopped = true
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	p.broadcast()
	select {
	case <-p.done:
	default:
		close(p.done)
	}
}

// Done is closed once the placer's background work (watch, heartbeats,
// takeovers) ended: Start's ctx ended, Close, or the daemon was
// superseded (see Err).
func (p *Placer) Done() <-chan struct{} { return p.done }

// Err is why the placer stopped on its own: ErrSuperseded when a newer
// instance of this daemon took its key; nil otherwise.
func (p *Placer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Close stops heartbeating and marks the daemon stopped (stopped:true),
// keeping its leases: a restarted daemon with the same id resumes them at
// once; other daemons take them over once LeaseTTL has passed since they
// observed the stop. Close after Start's ctx ended still writes the stop.
func (p *Placer) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		started, cancel := p.started, p.cancel
		p.mu.Unlock()
		if !started {
			return
		}
		cancel()
		<-p.done
		p.closeErr = p.writeStopped(ctx)
	})
	return p.closeErr
}

func (p *Placer) writeStopped(ctx context.Context) error {
	p.mu.Lock()
	if !p.registered || p.superseded {
		p.mu.Unlock()
		return nil
	}
	p.registered = false
	rev := p.selfRev
	p.beat++
	rec := daemonRecord{ID: p.o.DaemonID, Instance: p.instance, Host: p.o.Host, Capacity: p.o.Capacity, Running: p.runningLocked(), Beat: p.beat, Stopped: true}
	p.mu.Unlock()
	data, _ := json.Marshal(rec)
	key := p.daemonKey(p.o.DaemonID)
	for attempt := 1; ; attempt++ {
		_, err := p.kv.Update(ctx, key, data, rev)
		if err == nil {
			p.log.Info("sandbox daemon stopped; its leases stay until it restarts or LeaseTTL passes", "instance", p.instance)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt > 3 {
			return fmt.Errorf("placement: mark sandbox daemon %s stopped: %w", p.o.DaemonID, err)
		}
		// A heartbeat stored although its reply was lost: the key holds
		// this instance at a newer revision.
		e, gerr := p.kv.Get(ctx, key)
		if gerr != nil {
			return fmt.Errorf("placement: mark sandbox daemon %s stopped: %w", p.o.DaemonID, gerr)
		}
		var cur daemonRecord
		if json.Unmarshal(e.Value(), &cur) != nil || cur.Instance != p.instance {
			return nil // a newer instance holds the key
		}
		rev = e.Revision()
	}
}

// Takeovers delivers the runs this daemon took over from dead daemons,
// each once. The channel is buffered; behind it an unbounded queue keeps
// takeovers a slow reader has not taken yet, in order, so the watch and
// takeover work never block on it and none is dropped while the placer
// runs. Takeovers not yet delivered when the placer stops are dropped
// (Owned lists every run held). It is closed when the placer stops
// (after a Start that succeeded).
func (p *Placer) Takeovers() <-chan Takeover { return p.takeovers }

func (p *Placer) enqueueTakeover(t Takeover) {
	p.qmu.Lock()
	p.queue = append(p.queue, t)
	p.qmu.Unlock()
	select {
	case p.queued <- struct{}{}:
	default:
	}
}

func (p *Placer) forwardTakeovers(ctx context.Context) {
	defer close(p.takeovers)
	for {
		p.qmu.Lock()
		var next *Takeover
		if len(p.queue) > 0 {
			t := p.queue[0]
			next = &t
		}
		p.qmu.Unlock()
		if next == nil {
			select {
			case <-p.queued:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case p.takeovers <- *next:
			p.qmu.Lock()
			p.queue = p.queue[1:]
			p.qmu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

// ---- local view ----

// broadcast wakes every waiter on the view.
func (p *Placer) broadcast() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// waitChange waits until the view changes, d passes or ctx ends. ch is
// p.changed as read under the lock with the condition.
func waitChange(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

func (p *Placer) waitSynced(ctx context.Context) error {
	for {
		p.mu.Lock()
		synced, ch := p.synced, p.changed
		p.mu.Unlock()
		if synced {
			return nil
		}
		if err := waitChange(ctx, ch, time.Second); err != nil {
			return err
		}
	}
}

func (p *Placer) watchLoop(ctx context.Context) {
	for attempt := 1; ctx.Err() == nil; attempt++ {
		w, err := p.kv.WatchFiltered(ctx, []string{DaemonKeyPrefix + ">", RunKeyPrefix + ">"})
		if err != nil {
			p.log.Warn("placement: watch the placement bucket: retrying", "attempt", attempt, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(min(50*time.Millisecond<<min(attempt-1, 5), time.Second)):
			}
			continue
		}
		attempt = 0
		p.mu.Lock()
		if p.watchStart.IsZero() {
			p.watchStart = time.Now()
		}
		p.mu.Unlock()
		p.consume(ctx, w)
		_ = w.Stop()
	}
}

// consume applies a watcher's entries until it ends or ctx does. The
// initial values replace the view: a key absent from them is gone.
func (p *Placer) consume(ctx context.Context, w jetstream.KeyWatcher) {
	initial := map[string]bool{}
	inInitial := true
	check := time.NewTicker(p.o.LeaseTTL / 5)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-check.C:
			if p.watchStalled() {
				p.log.Warn("placement: the watch has not delivered this daemon's own heartbeats for the lease TTL; watching again")
				return
			}
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				if inInitial {
					inInitial = false
					p.dropAbsent(initial)
				}
				continue
			}
			if inInitial {
				initial[e.Key()] = true
			}
			p.apply(e)
		}
	}
}

// watchStalled reports whether heartbeats are stored but the watch has
// not delivered one for LeaseTTL (after a server restart, an ordered
// consumer notices its loss only after missing heartbeats for seconds).
func (p *Placer) watchStalled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	return p.registered && !p.stopped && now.Sub(p.lastEcho) > p.o.LeaseTTL && now.Sub(p.lastStored) < p.o.LeaseTTL/2
}

// viewFreshLocked reports whether the watch delivered this daemon's own
// heartbeat within LeaseTTL/2: only then does "no change observed for
// LeaseTTL" mean the other daemon is silent and not that the watch is
// behind.
func (p *Placer) viewFreshLocked(now time.Time) bool {
	return now.Sub(p.lastEcho) < p.o.LeaseTTL/2
}

func (p *Placer) dropAbsent(present map[string]bool) {
	p.mu.Lock()
	now := time.Now()
	for id, dv := range p.daemons {
		if !present[p.daemonKey(id)] && !dv.deleted {
			dv.deleted, dv.seen = true, now
		}
	}
	for run, lv := range p.leases {
		if !present[runKey(run)] {
			lv.deleted = true
		}
	}
	p.synced = true
	p.mu.Unlock()
	p.broadcast()
}

func (p *Placer) apply(e jetstream.KeyValueEntry) {
	deleted := e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge
	key := e.Key()
	p.mu.Lock()
	switch {
	case strings.HasPrefix(key, DaemonKeyPrefix):
		id := strings.TrimPrefix(key, DaemonKeyPrefix)
		var rec daemonRecord
		if !deleted && json.Unmarshal(e.Value(), &rec) != nil {
			p.log.Warn("placement: unreadable daemon key", "key", key)
			break
		}
		if id == p.o.DaemonID && !deleted && rec.Instance == p.instance {
			p.lastEcho = time.Now()
		}
		p.setDaemonLocked(id, rec, e.Revision(), deleted)
	case strings.HasPrefix(key, RunKeyPrefix):
		run := strings.TrimPrefix(key, RunKeyPrefix)
		var rec leaseRecord
		if !deleted && json.Unmarshal(e.Value(), &rec) != nil {
			p.log.Warn("placement: unreadable lease key", "key", key)
			break
		}
		p.setLeaseLocked(run, rec, e.Revision(), deleted)
	}
	p.mu.Unlock()
	p.broadcast()
}

// setDaemonLocked applies a revision of daemons.<id>; older revisions
// than the one known are ignored, and only a new revision counts as a
// change (a watch restarted re-delivers the current one).
func (p *Placer) setDaemonLocked(id string, rec daemonRecord, rev uint64, deleted bool) {
	dv := p.daemons[id]
	if dv != nil && rev <= dv.rev {
		return
	}
	if dv == nil {
		dv = &daemonView{}
		p.daemons[id] = dv
	}
	dv.rec, dv.rev, dv.deleted, dv.seen = rec, rev, deleted, time.Now()
	if id == p.o.DaemonID && p.registered && !deleted && rec.Instance != p.instance && rev > p.selfRev {
		p.supersededLocked(rec.Instance)
	}
}

func (p *Placer) setLeaseLocked(run string, rec leaseRecord, rev uint64, deleted bool) {
	lv := p.leases[run]
	if lv != nil && rev <= lv.rev {
		return
	}
	if lv == nil {
		lv = &leaseView{}
		p.leases[run] = lv
	}
	lv.rec, lv.rev, lv.deleted = rec, rev, deleted
}

func (p *Placer) supersededLocked(by string) {
	if p.superseded {
		return
	}
	p.superseded = true
	p.stopped = true
	if p.err == nil {
		p.err = ErrSuperseded
	}
	p.log.Error("placement: a newer instance of this sandbox daemon took its key; stopping", "instance", p.instance, "newer", by)
	if p.cancel != nil {
		p.cancel()
	}
}

// deadLocked reports whether daemon id is dead as observed here.
func (p *Placer) deadLocked(id string, now time.Time) bool {
	dv := p.daemons[id]
	if dv == nil {
		return !p.watchStart.IsZero() && now.Sub(p.watchStart) >= p.o.LeaseTTL
	}
	return dv.deleted || now.Sub(dv.seen) >= p.o.LeaseTTL
}

func (p *Placer) runningLocked() int {
	n := 0
	for _, lv := range p.leases {
		if !lv.deleted && lv.rec.Daemon == p.o.DaemonID {
			n++
		}
	}
	return n
}

func (p *Placer) fencedLocked(now time.Time) bool {
	return !p.registered || p.stopped || p.superseded || now.Sub(p.lastStored) > p.o.LeaseTTL/2
}

// hasRoomLocked reports whether one more run fits (pending acquisitions
// included).
func (p *Placer) hasRoomLocked() bool {
	return p.o.Capacity == 0 || p.runningLocked()+p.pending < p.o.Capacity
}

// loadLocked is the load fraction in [0, 1] the staggers grow with.
func (p *Placer) loadLocked() float64 {
	n := float64(p.runningLocked() + p.pending)
	if p.o.Capacity == 0 {
		return n / (n + 16)
	}
	return min(n/float64(p.o.Capacity), 1)
}

// Owner returns the daemon a run is leased to, in the local view.
func (p *Placer) Owner(run string) (owner string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lv := p.leases[run]
	if lv == nil || lv.deleted {
		return "", false
	}
	return lv.rec.Daemon, true
}

// Mine reports whether the run is leased to this instance of this daemon
// and the daemon is not fenced: whether it may start the run's commands.
func (p *Placer) Mine(run string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	lv := p.leases[run]
	return lv != nil && !lv.deleted && lv.rec.Daemon == p.o.DaemonID && lv.rec.Instance == p.instance && !p.fencedLocked(time.Now())
}

// Owned returns the runs leased to this instance, sorted (for a
// restarted daemon's recovery: after Start, the runs it resumed).
func (p *Placer) Owned() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for run, lv := range p.leases {
		if !lv.deleted && lv.rec.Daemon == p.o.DaemonID && lv.rec.Instance == p.instance {
			out = append(out, run)
		}
	}
	slices.Sort(out)
	return out
}

// Running is the number of runs leased to this daemon.
func (p *Placer) Running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// Fenced is true once this daemon has not managed to store a heartbeat
// for LeaseTTL/2 (and before it registered, after it stopped, and for
// good once superseded): it must stop starting commands and interrupt
// running ones, as others may take its runs after LeaseTTL. It clears
// when a heartbeat is stored again and the daemon's leases were read
// back; runs taken over meanwhile are no longer Mine.
func (p *Placer) Fenced() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fencedLocked(time.Now())
}

// Daemons lists the daemons this process knows of, by id.
func (p *Placer) Daemons() []DaemonInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	running := map[string]int{}
	for _, lv := range p.leases {
		if !lv.deleted {
			running[lv.rec.Daemon]++
		}
	}
	var out []DaemonInfo
	for id, dv := range p.daemons {
		if dv.deleted {
			continue
		}
		alive := !p.deadLocked(id, now)
		if id == p.o.DaemonID && dv.rec.Instance == p.instance {
			alive = !p.fencedLocked(now)
		}
		out = append(out, DaemonInfo{
			ID: id, Host: dv.rec.Host, Instance: dv.rec.Instance,
			Capacity: dv.rec.Capacity, Running: running[id], Stopped: dv.rec.Stopped,
			Alive: alive, LastSeen: dv.seen,
		})
	}
	slices.SortFunc(out, func(a, b DaemonInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// ---- registration and heartbeats ----

func (p *Placer) record(stopped bool) daemonRecord {
	p.beat++
	return daemonRecord{ID: p.o.DaemonID, Instance: p.instance, Host: p.o.Host, Capacity: p.o.Capacity, Running: p.runningLocked(), Beat: p.beat, Stopped: stopped}
}

// requestTimeout bounds one key-value request of the protocol.
func (p *Placer) requestTimeout() time.Duration { return max(p.o.LeaseTTL/4, 50*time.Millisecond) }

func (p *Placer) register(ctx context.Context) error {
	key := p.daemonKey(p.o.DaemonID)
	announced := false
	for attempt := 1; ; attempt++ {
		now := time.Now()
		p.mu.Lock()
		dv := p.daemons[p.o.DaemonID]
		ch := p.changed
		var prev uint64 // 0: create
		switch {
		case dv == nil || dv.deleted:
		case dv.rec.Stopped || now.Sub(dv.seen) >= p.o.LeaseTTL:
			prev = dv.rev
		case p.o.PreviousEnded != nil && p.o.PreviousEnded(DaemonInfo{ID: dv.rec.ID, Host: dv.rec.Host, Instance: dv.rec.Instance, Capacity: dv.rec.Capacity, Running: dv.rec.Running}):
			p.log.Info("placement: the previous instance of this daemon ended (killed); taking its key at once", "previous_instance", dv.rec.Instance)
			prev = dv.rev
		default:
			wait := p.o.LeaseTTL - now.Sub(dv.seen)
			other := dv.rec.Instance
			p.mu.Unlock()
			if !announced {
				announced = true
				p.log.Warn("placement: another instance of this sandbox daemon is alive; waiting until it has been silent for the lease TTL", "other_instance", other, "lease_ttl", p.o.LeaseTTL)
			}
			if err := waitChange(ctx, ch, wait); err != nil {
				return err
			}
			continue
		}
		rec := p.record(false)
		p.mu.Unlock()
		data, _ := json.Marshal(rec)
		sent := time.Now()
		actx, cancel := context.WithTimeout(ctx, p.requestTimeout())
		var rev uint64
		var err error
		if prev == 0 {
			rev, err = p.kv.Create(actx, key, data)
		} else {
			rev, err = p.kv.Update(actx, key, data, prev)
		}
		cancel()
		if err == nil {
			p.mu.Lock()
			p.selfRev, p.registered, p.lastStored, p.lastEcho = rev, true, sent, time.Now()
			p.setDaemonLocked(p.o.DaemonID, rec, rev, false)
			p.mu.Unlock()
			p.broadcast()
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// The key changed since this view: wait for the watch.
			if err := waitChange(ctx, ch, p.o.LeaseTTL/10); err != nil {
				return err
			}
			continue
		}
		p.log.Warn("placement: register: retrying", "attempt", attempt, "err", err)
		if err := sleep(ctx, min(50*time.Millisecond<<min(attempt-1, 5), time.Second)); err != nil {
			return err
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Placer) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(p.o.LeaseTTL / 5)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := p.heartbeat(ctx)
		switch {
		case errors.Is(err, ErrSuperseded):
			return
		case err != nil && ctx.Err() == nil:
			if !failing {
				p.log.Warn("placement: heartbeat not stored", "err", err)
			}
			failing = true
		case err == nil && failing:
			failing = false
			p.log.Info("placement: heartbeats stored again")
		}
	}
}

// heartbeat stores one heartbeat. After a fence, the daemon's own leases
// are read back before the fence clears.
func (p *Placer) heartbeat(ctx context.Context) error {
	key := p.daemonKey(p.o.DaemonID)
	p.mu.Lock()
	if p.superseded {
		p.mu.Unlock()
		return ErrSuperseded
	}
	rec := p.record(false)
	prev := p.selfRev
	p.mu.Unlock()
	data, _ := json.Marshal(rec)
	sent := time.Now()
	actx, cancel := context.WithTimeout(ctx, p.requestTimeout())
	defer cancel()
	rev, err := p.kv.Update(actx, key, data, prev)
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		// Either an earlier heartbeat was stored although its reply was
		// lost, or a newer instance took the key, or it was deleted.
		e, gerr := p.kv.Get(actx, key)
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			rev, err = p.kv.Create(actx, key, data)
		case gerr != nil:
			return fmt.Errorf("read daemon key after a conflict: %w", gerr)
		default:
			var cur daemonRecord
			if json.Unmarshal(e.Value(), &cur) == nil && cur.Instance != p.instance {
				p.mu.Lock()
				p.supersededLocked(cur.Instance)
				p.mu.Unlock()
				p.broadcast()
				return ErrSuperseded
			}
			rev, err = p.kv.Update(actx, key, data, e.Revision())
		}
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.selfRev = rev
	wasFenced := time.Since(p.lastStored) > p.o.LeaseTTL/2
	p.mu.Unlock()
	if wasFenced {
		// Runs may have been taken over while this daemon was silent: read
		// its leases back before it may act on them again.
		rctx, rcancel := context.WithTimeout(ctx, p.o.LeaseTTL)
		err := p.refreshOwn(rctx)
		rcancel()
		if err != nil {
			return fmt.Errorf("read back own leases after a fence: %w", err)
		}
	}
	p.mu.Lock()
	p.lastStored = sent
	p.mu.Unlock()
	p.broadcast()
	return nil
}

// refreshOwn reads the leases this daemon holds in its view from the
// bucket.
func (p *Placer) refreshOwn(ctx context.Context) error {
	p.mu.Lock()
	var runs []string
	for run, lv := range p.leases {
		if !lv.deleted && lv.rec.Daemon == p.o.DaemonID {
			runs = append(runs, run)
		}
	}
	p.mu.Unlock()
	for _, run := range runs {
		if err := p.readLease(ctx, run); err != nil {
			return err
		}
	}
	return nil
}

// readLease reads runs.<run> into the view.
func (p *Placer) readLease(ctx context.Context, run string) error {
	e, err := p.kv.Get(ctx, runKey(run))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		p.mu.Lock()
		if lv := p.leases[run]; lv != nil {
			lv.deleted = true
		}
		p.mu.Unlock()
		p.broadcast()
		return nil
	}
	if err != nil {
		return fmt.Errorf("read lease of run %s: %w", run, err)
	}
	var rec leaseRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return fmt.Errorf("read lease of run %s: %w", run, err)
	}
	p.mu.Lock()
	p.setLeaseLocked(run, rec, e.Revision(), false)
	p.mu.Unlock()
	p.broadcast()
	return nil
}

// ---- leases ----

func (p *Placer) leaseRecord(from string) []byte {
	data, _ := json.Marshal(leaseRecord{Daemon: p.o.DaemonID, Instance: p.instance, Since: time.Now().UTC(), From: from})
	return data
}

// Acquire leases an unplaced run to this daemon (kv.Create on
// runs.<run>). It returns nil if the run is now, or was already, leased
// to this daemon; *OwnedError if another daemon holds it; ErrFull if this
// daemon is at capacity (checked before creating); ErrFenced while
// fenced; ErrNotStarted before Start.
func (p *Placer) Acquire(ctx context.Context, run string) error {
	if err := bus.ValidateRunID(run); err != nil {
		return fmt.Errorf("placement: %w", err)
	}
	p.mu.Lock()
	if !p.registered || p.stopped {
		p.mu.Unlock()
		return ErrNotStarted
	}
	if p.fencedLocked(time.Now()) {
		p.mu.Unlock()
		return ErrFenced
	}
	if lv := p.leases[run]; lv != nil && !lv.deleted {
		p.mu.Unlock()
		if lv.rec.Daemon == p.o.DaemonID {
			return nil
		}
		return &OwnedError{Run: run, Owner: lv.rec.Daemon}
	}
	if !p.hasRoomLocked() {
		p.mu.Unlock()
		return ErrFull
	}
	p.pending++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.pending--
		p.mu.Unlock()
		p.broadcast()
	}()

	data := p.leaseRecord("")
	for attempt := 1; ; attempt++ {
		rev, err := p.kv.Create(ctx, runKey(run), data)
		if err == nil {
			var rec leaseRecord
			_ = json.Unmarshal(data, &rec)
			p.mu.Lock()
			p.setLeaseLocked(run, rec, rev, false)
			p.mu.Unlock()
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("placement: lease run %s: %w", run, err)
		}
		if err := p.readLease(ctx, run); err != nil {
			return fmt.Errorf("placement: lease run %s: %w", run, err)
		}
		if owner, ok := p.Owner(run); ok {
			if owner == p.o.DaemonID {
				return nil
			}
			return &OwnedError{Run: run, Owner: owner}
		}
		if attempt >= 3 {
			return fmt.Errorf("placement: lease run %s: the lease keeps changing", run)
		}
		// Released in between: try again.
	}
}

// stagger waits the load-based delay before this daemon competes for a
// run: load fraction × LeaseTTL/10, plus up to 5 ms of jitter. The load
// is re-read as it changes (this daemon's other acquisitions count), so a
// daemon that got busier meanwhile waits longer. It returns early, with
// false, when abort reports true.
func (p *Placer) stagger(ctx context.Context, abort func() bool) (bool, error) {
	start := time.Now()
	jitter := time.Duration(rand.Int64N(int64(5 * time.Millisecond)))
	for {
		p.mu.Lock()
		want := time.Duration(p.loadLocked()*float64(p.o.LeaseTTL/10)) + jitter
		ch := p.changed
		p.mu.Unlock()
		if abort != nil && abort() {
			return false, nil
		}
		elapsed := time.Since(start)
		if elapsed >= want {
			return true, nil
		}
		if err := waitChange(ctx, ch, want-elapsed); err != nil {
			return false, err
		}
	}
}

// Place blocks until the run is placed on some daemon and returns its
// owner. When this daemon has room it waits its load-based stagger (so
// the least loaded daemon usually wins) and tries Acquire; when it is
// full or fenced it waits until it has room again or another daemon
// placed the run. ctx bounds it. The owner returned may be a daemon that
// has since died: its runs are then taken over (Takeovers).
func (p *Placer) Place(ctx context.Context, run string) (owner string, err error) {
	if err := bus.ValidateRunID(run); err != nil {
		return "", fmt.Errorf("placement: %w", err)
	}
	placed := func() bool { _, ok := p.Owner(run); return ok }
	for attempt := 1; ; attempt++ {
		if owner, ok := p.Owner(run); ok {
			return owner, nil
		}
		p.mu.Lock()
		if p.stopped {
			p.mu.Unlock()
			return "", ErrNotStarted
		}
		ch := p.changed
		ready := p.registered && !p.fencedLocked(time.Now()) && p.hasRoomLocked()
		p.mu.Unlock()
		if !ready {
			if err := waitChange(ctx, ch, p.o.LeaseTTL/10); err != nil {
				return "", fmt.Errorf("placement: place run %s: %w", run, err)
			}
			continue
		}
		if ok, err := p.stagger(ctx, placed); err != nil {
			return "", fmt.Errorf("placement: place run %s: %w", run, err)
		} else if !ok {
			continue
		}
		err := p.Acquire(ctx, run)
		var owned *OwnedError
		switch {
		case err == nil:
			return p.o.DaemonID, nil
		case errors.As(err, &owned):
			return owned.Owner, nil
		case errors.Is(err, ErrFull), errors.Is(err, ErrFenced):
		case errors.Is(err, ErrNotStarted):
			return "", err
		case ctx.Err() != nil:
			return "", fmt.Errorf("placement: place run %s: %w", run, ctx.Err())
		default:
			p.log.Warn("placement: place run: retrying", "run", run, "attempt", attempt, "err", err)
			if err := sleep(ctx, min(50*time.Millisecond<<min(attempt-1, 5), time.Second)); err != nil {
				return "", fmt.Errorf("placement: place run %s: %w", run, err)
			}
		}
	}
}

// Release ends the lease of a run that ended: it deletes runs.<run> if
// this daemon holds it (compare-and-set on its revision). No error if
// the lease is gone; *OwnedError if another daemon holds it (nothing is
// deleted then).
func (p *Placer) Release(ctx context.Context, run string) error {
	if err := bus.ValidateRunID(run); err != nil {
		return fmt.Errorf("placement: %w", err)
	}
	for attempt := 1; ; attempt++ {
		p.mu.Lock()
		lv := p.leases[run]
		var rev uint64
		var owner string
		known := lv != nil && !lv.deleted
		if known {
			rev, owner = lv.rev, lv.rec.Daemon
		}
		p.mu.Unlock()
		if !known || attempt > 1 {
			if err := p.readLease(ctx, run); err != nil {
				return fmt.Errorf("placement: release run %s: %w", run, err)
			}
			p.mu.Lock()
			lv = p.leases[run]
			known = lv != nil && !lv.deleted
			if known {
				rev, owner = lv.rev, lv.rec.Daemon
			}
			p.mu.Unlock()
			if !known {
				return nil
			}
		}
		if owner != p.o.DaemonID {
			return &OwnedError{Run: run, Owner: owner}
		}
		err := p.dropLease(ctx, run, rev)
		if err == nil {
			p.mu.Lock()
			if lv := p.leases[run]; lv != nil && lv.rev == rev {
				lv.deleted = true
			}
			p.mu.Unlock()
			p.broadcast()
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) || attempt >= 3 {
			return fmt.Errorf("placement: release run %s: %w", run, err)
		}
	}
}

// ---- takeover ----

func (p *Placer) takeoverLoop(ctx context.Context) {
	t := time.NewTicker(max(p.o.LeaseTTL/10, 10*time.Millisecond))
	defer t.Stop()
	for {
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		p.takeOverDead(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-ch:
		}
	}
}

type candidate struct {
	run  string
	from string
	rev  uint64
}

// candidatesLocked are the leases to take: those of dead daemons, and
// those of this daemon's id held by a previous instance.
func (p *Placer) candidatesLocked(now time.Time) []candidate {
	var out []candidate
	for run, lv := range p.leases {
		if lv.deleted {
			continue
		}
		switch {
		case lv.rec.Daemon == p.o.DaemonID:
			if lv.rec.Instance != p.instance {
				out = append(out, candidate{run, lv.rec.Daemon, lv.rev})
			}
		case p.deadLocked(lv.rec.Daemon, now):
			out = append(out, candidate{run, lv.rec.Daemon, lv.rev})
		}
	}
	slices.SortFunc(out, func(a, b candidate) int { return strings.Compare(a.run, b.run) })
	return out
}

func (p *Placer) takeOverDead(ctx context.Context) {
	p.mu.Lock()
	if now := time.Now(); p.fencedLocked(now) || !p.viewFreshLocked(now) {
		p.mu.Unlock()
		return
	}
	cands := p.candidatesLocked(time.Now())
	p.mu.Unlock()
	for _, c := range cands {
		if ctx.Err() != nil {
			return
		}
		if c.from == p.o.DaemonID {
			p.resumeLease(ctx, c, true)
			continue
		}
		// still reports whether c is still a lease of a dead daemon this
		// daemon has room for.
		still := func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			lv := p.leases[c.run]
			now := time.Now()
			return lv != nil && !lv.deleted && lv.rev == c.rev && p.deadLocked(c.from, now) &&
				!p.fencedLocked(now) && p.viewFreshLocked(now) && p.hasRoomLocked()
		}
		if !still() {
			continue
		}
		ok, err := p.stagger(ctx, func() bool { return !still() })
		if err != nil || !ok {
			continue
		}
		p.mu.Lock()
		now := time.Now()
		if lv := p.leases[c.run]; lv == nil || lv.deleted || lv.rev != c.rev || !p.deadLocked(c.from, now) ||
			!p.hasRoomLocked() || p.fencedLocked(now) || !p.viewFreshLocked(now) {
			p.mu.Unlock()
			continue
		}
		p.pending++
		p.mu.Unlock()
		data := p.leaseRecord(c.from)
		actx, cancel := context.WithTimeout(ctx, p.requestTimeout())
		rev, err := p.kv.Update(actx, runKey(c.run), data, c.rev)
		cancel()
		p.mu.Lock()
		p.pending--
		if err == nil {
			var rec leaseRecord
			_ = json.Unmarshal(data, &rec)
			p.setLeaseLocked(c.run, rec, rev, false)
		}
		p.mu.Unlock()
		p.broadcast()
		switch {
		case err == nil:
			p.log.Info("placement: took over run of a dead sandbox daemon", "run", c.run, "from", c.from)
			p.enqueueTakeover(Takeover{Run: c.run, From: c.from})
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
			// Another daemon won it (or the owner came back and released).
		default:
			p.log.Warn("placement: take over run", "run", c.run, "from", c.from, "err", err)
		}
	}
}

// resumeOwn rewrites every lease of this daemon's id held by a previous
// instance to this instance. Transient errors are retried until ctx
// ends; a lease another daemon took first stays with it.
func (p *Placer) resumeOwn(ctx context.Context, report bool) error {
	for attempt := 1; ; attempt++ {
		p.mu.Lock()
		var cands []candidate
		for _, c := range p.candidatesLocked(time.Now()) {
			if c.from == p.o.DaemonID {
				cands = append(cands, c)
			}
		}
		p.mu.Unlock()
		if len(cands) == 0 {
			return nil
		}
		for _, c := range cands {
			p.resumeLease(ctx, c, report)
		}
		if err := sleep(ctx, min(50*time.Millisecond<<min(attempt-1, 5), time.Second)); err != nil {
			return err
		}
	}
}

func (p *Placer) resumeLease(ctx context.Context, c candidate, report bool) {
	p.mu.Lock()
	lv := p.leases[c.run]
	if lv == nil || lv.deleted || lv.rev != c.rev {
		p.mu.Unlock()
		return
	}
	prev := lv.rec
	p.mu.Unlock()
	rec := leaseRecord{Daemon: p.o.DaemonID, Instance: p.instance, Since: prev.Since, From: prev.From}
	data, _ := json.Marshal(rec)
	actx, cancel := context.WithTimeout(ctx, p.requestTimeout())
	defer cancel()
	rev, err := p.kv.Update(actx, runKey(c.run), data, c.rev)
	switch {
	case err == nil:
		p.mu.Lock()
		p.setLeaseLocked(c.run, rec, rev, false)
		p.mu.Unlock()
		p.broadcast()
		p.log.Info("placement: resumed run of a previous instance", "run", c.run)
		if report {
			p.enqueueTakeover(Takeover{Run: c.run, From: p.o.DaemonID})
		}
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch):
		// Taken by another daemon first, or released: read it back.
		if rerr := p.readLease(actx, c.run); rerr != nil {
			p.log.Warn("placement: resume run", "run", c.run, "err", rerr)
		}
	default:
		p.log.Warn("placement: resume run", "run", c.run, "err", err)
	}
}

// dropLease removes runs.<run> at revision rev: a purge whose marker the
// bucket drops after MarkerTTL. On a bucket made before markers had a TTL
// (no per-message TTLs: its admin has not run EnsureStreams since), a
// plain delete, whose marker stays.
func (p *Placer) dropLease(ctx context.Context, run string, rev uint64) error {
	err := p.kv.Purge(ctx, runKey(run), jetstream.LastRevision(rev), jetstream.PurgeTTL(p.o.MarkerTTL))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeMessageTTLDisabled {
		return p.kv.Delete(ctx, runKey(run), jetstream.LastRevision(rev))
	}
	return err
}

// errCodeMessageTTLDisabled is the JetStream error "per-message TTL is
// disabled" (nats-server's JSMessageTTLDisabledErr).
const errCodeMessageTTLDisabled jetstream.ErrorCode = 10166
