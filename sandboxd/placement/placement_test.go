package placement_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/bus/embedded"
	"github.com/vera-run/vera/sandboxd/placement"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bustest.LeakIgnores...) }

const ttl = time.Second

// env is a secure bus whose placement bucket admin created.
type env struct {
	t     *testing.T
	url   string
	store auth.Store
	admin *bus.Bus
}

func newEnv(t *testing.T) *env {
	s, store, admin := bustest.NewSecure(t)
	return &env{t: t, url: s.ClientURL(), store: store, admin: admin}
}

// daemon is one placer on its own sandboxd connection.
type daemon struct {
	*placement.Placer
	bus  *bus.Bus
	kill context.CancelFunc // cancel Start's ctx without Close: a crash
}

func (e *env) placer(id string, capacity int) *daemon {
	e.t.Helper()
	return e.placerWith(placement.Options{DaemonID: id, Capacity: capacity})
}

// placerWith is a placer with options o (lease time ttl, host test-<id>
// and the test's logger unless o sets them) on the bucket as it is now.
func (e *env) placerWith(o placement.Options) *daemon {
	e.t.Helper()
	b := bustest.ConnectAs(e.t, e.url, e.store, catalog.ComponentSandboxd, bus.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := b.PlacementKV(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = ttl
	}
	if o.Host == "" {
		o.Host = "test-" + o.DaemonID
	}
	if o.Logger == nil {
		o.Logger = bustest.Logger(e.t)
	}
	p, err := placement.New(kv, o)
	if err != nil {
		e.t.Fatal(err)
	}
	return &daemon{Placer: p, bus: b}
}

// start starts d; at cleanup it is closed (a killed daemon's Close still
// marks it stopped, harmless at the end of a test).
func (e *env) start(d *daemon) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d.kill = cancel
	// Start's ctx bounds the daemon's life, not just the registration.
	if err := d.Start(ctx); err != nil {
		cancel()
		e.t.Fatalf("start %s: %v", d.ID(), err)
	}
	e.t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		_ = d.Close(cctx)
		cancel()
		<-d.Done()
	})
}

func (e *env) started(id string, capacity int) *daemon {
	e.t.Helper()
	d := e.placer(id, capacity)
	e.start(d)
	return d
}

// crash ends d's heartbeats without Close, as kill -9 would.
func (d *daemon) crash(t *testing.T) time.Time {
	t.Helper()
	d.kill()
	select {
	case <-d.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not stop", d.ID())
	}
	return time.Now()
}

// leaseOwner reads runs.<run> from the bucket as admin.
func (e *env) leaseOwner(run string) (string, bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := e.admin.PlacementKV(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	entry, err := kv.Get(ctx, "runs."+run)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", false
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var rec struct{ Daemon string }
	if err := json.Unmarshal(entry.Value(), &rec); err != nil {
		e.t.Fatal(err)
	}
	return rec.Daemon, true
}

// eventually polls cond for up to d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func runs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i)
	}
	return out
}

// viewsAgree waits until every daemon's view gives each run the owner the
// bucket holds.
func (e *env) viewsAgree(ds []*daemon, rs []string) {
	e.t.Helper()
	for _, run := range rs {
		want, ok := e.leaseOwner(run)
		if !ok {
			e.t.Fatalf("run %s has no lease", run)
		}
		for _, d := range ds {
			eventually(e.t, 5*time.Second, d.ID()+"'s view of "+run+" agrees with the bucket ("+want+")", func() bool {
				got, ok := d.Owner(run)
				return ok && got == want
			})
		}
	}
}

// TestConcurrentPlacementHasOneOwnerPerRun: three daemons race Place and
// Acquire on the same 20 runs at once; each run ends with exactly one
// owner, which every caller was told and every view shows.
func TestConcurrentPlacementHasOneOwnerPerRun(t *testing.T) {
	e := newEnv(t)
	ds := []*daemon{e.started("a", 0), e.started("b", 0), e.started("c", 0)}
	rs := runs("race", 20)
	ctx := ctxT(t, time.Minute)
	type answer struct{ daemon, run, owner string }
	answers := make(chan answer, len(ds)*len(rs))
	var wg sync.WaitGroup
	for i, d := range ds {
		for j, run := range rs {
			wg.Go(func() {
				if (i+j)%2 == 0 {
					owner, err := d.Place(ctx, run)
					if err != nil {
						t.Errorf("%s places %s: %v", d.ID(), run, err)
						return
					}
					answers <- answer{d.ID(), run, owner}
					return
				}
				var owned *placement.OwnedError
				switch err := d.Acquire(ctx, run); {
				case err == nil:
					answers <- answer{d.ID(), run, d.ID()}
				case errors.As(err, &owned):
					if owned.Run != run || owned.Owner == d.ID() {
						t.Errorf("%s acquires %s: %v", d.ID(), run, err)
					}
					answers <- answer{d.ID(), run, owned.Owner}
				default:
					t.Errorf("%s acquires %s: %v", d.ID(), run, err)
				}
			})
		}
	}
	wg.Wait()
	close(answers)
	told := map[string]map[string]bool{}
	for a := range answers {
		if told[a.run] == nil {
			told[a.run] = map[string]bool{}
		}
		told[a.run][a.owner] = true
	}
	total := 0
	for _, run := range rs {
		want, ok := e.leaseOwner(run)
		if !ok {
			t.Fatalf("run %s has no lease", run)
		}
		if len(told[run]) != 1 || !told[run][want] {
			t.Errorf("run %s: callers were told owners %v, the bucket holds %s", run, told[run], want)
		}
	}
	e.viewsAgree(ds, rs)
	for _, d := range ds {
		for _, run := range rs {
			owner, _ := d.Owner(run)
			if d.Mine(run) != (owner == d.ID()) {
				t.Errorf("%s: Mine(%s) = %v, owner %s", d.ID(), run, d.Mine(run), owner)
			}
		}
		total += d.Running()
		if got := len(d.Owned()); got != d.Running() {
			t.Errorf("%s: Owned has %d runs, Running says %d", d.ID(), got, d.Running())
		}
	}
	if total != len(rs) {
		t.Fatalf("the daemons hold %d runs in all, want %d", total, len(rs))
	}
}

// TestCapacity: a full daemon refuses Acquire with ErrFull; its Place
// waits and returns the daemon that took the run, or its own id once a
// release makes room.
func TestCapacity(t *testing.T) {
	e := newEnv(t)
	a, b := e.started("a", 2), e.started("b", 0)
	ctx := ctxT(t, time.Minute)
	for _, run := range []string{"r1", "r2"} {
		if err := a.Acquire(ctx, run); err != nil {
			t.Fatalf("a acquires %s: %v", run, err)
		}
	}
	if err := a.Acquire(ctx, "r1"); err != nil {
		t.Fatalf("a acquires r1 again: %v, want nil (already its own)", err)
	}
	if err := a.Acquire(ctx, "r3"); !errors.Is(err, placement.ErrFull) {
		t.Fatalf("a (2 of 2) acquires r3: %v, want ErrFull", err)
	}
	if _, ok := e.leaseOwner("r3"); ok {
		t.Fatal("a full daemon's refused Acquire left a lease")
	}
	if a.Running() != 2 {
		t.Fatalf("a runs %d, want 2", a.Running())
	}

	placed := make(chan string, 1)
	go func() {
		owner, err := a.Place(ctx, "r3")
		if err != nil {
			t.Error(err)
		}
		placed <- owner
	}()
	select {
	case owner := <-placed:
		t.Fatalf("a full daemon's Place returned %q at once", owner)
	case <-time.After(300 * time.Millisecond):
	}
	if err := b.Acquire(ctx, "r3"); err != nil {
		t.Fatal(err)
	}
	select {
	case owner := <-placed:
		if owner != "b" {
			t.Fatalf("Place on the full daemon returned %q, want b", owner)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Place on the full daemon did not return when b placed the run")
	}

	// A release makes room: a's waiting Place takes the run itself.
	go func() {
		owner, err := a.Place(ctx, "r4")
		if err != nil {
			t.Error(err)
		}
		placed <- owner
	}()
	time.Sleep(200 * time.Millisecond)
	if err := a.Release(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	select {
	case owner := <-placed:
		if owner != "a" {
			t.Fatalf("Place after a release returned %q, want a", owner)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Place did not return after a release made room")
	}
	if a.Running() != 2 || !slices.Equal(a.Owned(), []string{"r2", "r4"}) {
		t.Fatalf("a runs %d: %v, want r2 and r4", a.Running(), a.Owned())
	}
}

// TestSpread: three daemons of capacity 10 place 30 runs, each daemon
// calling Place for every run at once: no daemon exceeds its capacity.
// A second round of 15 runs on empty daemons shows how the load-based
// stagger spreads them (logged).
func TestSpread(t *testing.T) {
	e := newEnv(t)
	ds := []*daemon{e.started("a", 10), e.started("b", 10), e.started("c", 10)}
	spread := func(prefix string, n int) map[string]int {
		rs := runs(prefix, n)
		ctx := ctxT(t, time.Minute)
		var wg sync.WaitGroup
		for _, d := range ds {
			for _, run := range rs {
				wg.Go(func() {
					if _, err := d.Place(ctx, run); err != nil {
						t.Errorf("%s places %s: %v", d.ID(), run, err)
					}
				})
			}
		}
		wg.Wait()
		got := map[string]int{}
		for _, run := range rs {
			owner, ok := e.leaseOwner(run)
			if !ok {
				t.Fatalf("run %s not placed", run)
			}
			got[owner]++
		}
		e.viewsAgree(ds, rs)
		return got
	}
	full := spread("spread", 30)
	t.Logf("30 runs on 3 daemons of capacity 10: %v", full)
	for _, d := range ds {
		if full[d.ID()] > 10 || d.Running() > 10 {
			t.Errorf("%s holds %d runs (%d in its view), capacity 10", d.ID(), full[d.ID()], d.Running())
		}
	}
	for _, d := range ds {
		for _, run := range d.Owned() {
			if err := d.Release(ctxT(t, 10*time.Second), run); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, d := range ds {
		eventually(t, 5*time.Second, d.ID()+" sees every run released", func() bool {
			for _, o := range ds {
				for _, info := range d.Daemons() {
					if info.ID == o.ID() && info.Running != 0 {
						return false
					}
				}
			}
			return true
		})
	}
	half := spread("half", 15)
	t.Logf("15 runs on 3 empty daemons of capacity 10: %v", half)
	for id, n := range half {
		if n > 10 {
			t.Errorf("%s holds %d runs, capacity 10", id, n)
		}
	}
}

// TestDeadDaemonsRunsAreTakenOverOnce: a daemon stops heartbeating
// (crash); after LeaseTTL without a change of its key, as each survivor
// observes it, the survivors take all its runs over, each exactly once.
func TestDeadDaemonsRunsAreTakenOverOnce(t *testing.T) {
	e := newEnv(t)
	a := e.started("a", 0)
	b, c := e.started("b", 0), e.started("c", 0)
	ctx := ctxT(t, time.Minute)
	rs := runs("dead", 8)
	for _, run := range rs {
		if err := a.Acquire(ctx, run); err != nil {
			t.Fatal(err)
		}
	}
	e.viewsAgree([]*daemon{a, b, c}, rs)
	killed := a.crash(t)

	type got struct {
		by   *daemon
		tk   placement.Takeover
		when time.Time
	}
	taken := make(chan got, 64)
	for _, d := range []*daemon{b, c} {
		go func() {
			for tk := range d.Takeovers() {
				taken <- got{d, tk, time.Now()}
			}
		}()
	}
	seen := map[string]string{}
	deadline := time.After(15 * time.Second)
	for len(seen) < len(rs) {
		select {
		case g := <-taken:
			if prev, dup := seen[g.tk.Run]; dup {
				t.Fatalf("run %s taken over twice (%s, then %s)", g.tk.Run, prev, g.by.ID())
			}
			seen[g.tk.Run] = g.by.ID()
			if g.tk.From != "a" {
				t.Errorf("takeover of %s from %q, want a", g.tk.Run, g.tk.From)
			}
			// Not before LeaseTTL since the taker observed a's last
			// heartbeat (and so not before 0.8 LeaseTTL after the crash:
			// heartbeats are LeaseTTL/5 apart).
			var lastSeen time.Time
			for _, info := range g.by.Daemons() {
				if info.ID == "a" {
					lastSeen = info.LastSeen
					if info.Alive {
						t.Errorf("%s still thinks a is alive after taking its run", g.by.ID())
					}
				}
			}
			if lastSeen.IsZero() || g.when.Sub(lastSeen) < ttl {
				t.Errorf("%s took %s %s after it last saw a change of a's key, before LeaseTTL %s", g.by.ID(), g.tk.Run, g.when.Sub(lastSeen), ttl)
			}
			if since := g.when.Sub(killed); since < ttl*8/10-50*time.Millisecond {
				t.Errorf("%s took %s only %s after a crashed", g.by.ID(), g.tk.Run, since)
			}
		case <-deadline:
			t.Fatalf("only %d of %d runs taken over: %v", len(seen), len(rs), seen)
		}
	}
	t.Logf("a's runs taken over by: %v (all of them %s after the crash)", seen, time.Since(killed))
	// No second takeover of any run.
	select {
	case g := <-taken:
		t.Fatalf("run %s taken over again by %s", g.tk.Run, g.by.ID())
	case <-time.After(2 * ttl):
	}
	for _, run := range rs {
		owner, _ := e.leaseOwner(run)
		if owner != seen[run] {
			t.Errorf("run %s: the bucket says %s, the takeover %s", run, owner, seen[run])
		}
	}
	e.viewsAgree([]*daemon{b, c}, rs)
	for _, d := range []*daemon{b, c} {
		for _, run := range rs {
			if d.Mine(run) != (seen[run] == d.ID()) {
				t.Errorf("%s: Mine(%s) = %v, taken by %s", d.ID(), run, d.Mine(run), seen[run])
			}
		}
	}
}

// TestRestartAfterCrashWaitsAndOwnsNothingTaken: a restarted daemon (same
// id, new instance) after a crash waits until the old instance has been
// silent for LeaseTTL, and does not get back the runs taken over
// meanwhile.
func TestRestartAfterCrashWaitsAndOwnsNothingTaken(t *testing.T) {
	e := newEnv(t)
	a, b := e.started("a", 0), e.started("b", 0)
	ctx := ctxT(t, time.Minute)
	rs := runs("crash", 4)
	for _, run := range rs {
		if err := a.Acquire(ctx, run); err != nil {
			t.Fatal(err)
		}
	}
	e.viewsAgree([]*daemon{a, b}, rs)
	a.crash(t)
	for range rs {
		select {
		case <-b.Takeovers():
		case <-time.After(10 * time.Second):
			t.Fatal("b did not take a's runs over")
		}
	}
	again := e.placer("a", 0)
	if again.Instance() == a.Instance() {
		t.Fatal("a restarted daemon has the same instance")
	}
	start := time.Now()
	e.start(again)
	if waited := time.Since(start); waited < ttl*9/10 {
		t.Fatalf("restart after a crash registered after %s, want a wait of LeaseTTL (%s) of observed silence", waited, ttl)
	}
	if got := again.Owned(); len(got) != 0 {
		t.Fatalf("restarted a owns %v, taken over by b", got)
	}
	for _, run := range rs {
		if again.Mine(run) {
			t.Errorf("restarted a: Mine(%s)", run)
		}
		if owner, _ := again.Owner(run); owner != "b" {
			t.Errorf("restarted a sees %s on %q, want b", run, owner)
		}
	}
	// b sees a alive again, and keeps its runs.
	eventually(t, 5*time.Second, "b sees the restarted a alive", func() bool {
		for _, info := range b.Daemons() {
			if info.ID == "a" {
				return info.Alive && info.Instance == again.Instance()
			}
		}
		return false
	})
	if b.Running() != len(rs) {
		t.Fatalf("b runs %d, want %d", b.Running(), len(rs))
	}
}

// TestRestartWhileAliveWaits: a second instance of a live daemon waits
// as long as the first one heartbeats, and registers once the first has
// been silent for LeaseTTL.
func TestRestartWhileAliveWaits(t *testing.T) {
	e := newEnv(t)
	a := e.started("a", 0)
	again := e.placer("a", 0)
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started := make(chan error, 1)
	go func() { started <- again.Start(sctx) }()
	select {
	case err := <-started:
		t.Fatalf("a second instance registered while the first heartbeats: %v", err)
	case <-time.After(2 * ttl):
	}
	crashed := a.crash(t)
	if err := <-started; err != nil {
		t.Fatalf("second instance after the first stopped: %v", err)
	}
	if waited := time.Since(crashed); waited < ttl*8/10-50*time.Millisecond {
		t.Fatalf("second instance registered %s after the first crashed, before LeaseTTL", waited)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if err := again.Close(cctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-again.Done()
}

// TestSupersededInstanceStops: an instance whose key another instance of
// its id took stops for good, fenced, with ErrSuperseded.
func TestSupersededInstanceStops(t *testing.T) {
	e := newEnv(t)
	a := e.started("a", 0)
	ctx := ctxT(t, time.Minute)
	if err := a.Acquire(ctx, "sup-1"); err != nil {
		t.Fatal(err)
	}
	kv, err := a.bus.PlacementKV(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "daemons.a", []byte(`{"id":"a","instance":"01OTHERINSTANCE0000000000","beat":1}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a superseded instance keeps running")
	}
	if !errors.Is(a.Err(), placement.ErrSuperseded) || !a.Fenced() || a.Mine("sup-1") {
		t.Fatalf("superseded: Err %v, Fenced %v, Mine %v", a.Err(), a.Fenced(), a.Mine("sup-1"))
	}
	if err := a.Acquire(ctx, "sup-2"); err == nil {
		t.Fatal("a superseded instance acquired a run")
	}
}

// TestRestartAfterCloseResumesAtOnce: a daemon closed cleanly keeps its
// leases; its next instance registers without waiting and owns them; a
// survivor takes none over.
func TestRestartAfterCloseResumesAtOnce(t *testing.T) {
	e := newEnv(t)
	a, b := e.started("a", 0), e.started("b", 0)
	ctx := ctxT(t, time.Minute)
	rs := runs("close", 3)
	for _, run := range rs {
		if err := a.Acquire(ctx, run); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !a.Fenced() || a.Mine(rs[0]) {
		t.Fatal("a closed daemon is not fenced")
	}
	eventually(t, 5*time.Second, "b sees a stopped", func() bool {
		for _, info := range b.Daemons() {
			if info.ID == "a" {
				return info.Stopped
			}
		}
		return false
	})
	again := e.placer("a", 0)
	start := time.Now()
	e.start(again)
	if waited := time.Since(start); waited > ttl/2 {
		t.Fatalf("restart after Close took %s", waited)
	}
	if got := again.Owned(); !slices.Equal(got, rs) {
		t.Fatalf("restarted a owns %v, want %v", got, rs)
	}
	for _, run := range rs {
		if !again.Mine(run) {
			t.Errorf("restarted a: not Mine(%s)", run)
		}
	}
	select {
	case tk := <-b.Takeovers():
		t.Fatalf("b took %v over from a daemon that restarted", tk)
	case <-time.After(2 * ttl):
	}
	for _, run := range rs {
		if owner, _ := e.leaseOwner(run); owner != "a" {
			t.Fatalf("run %s on %q after a's restart, want a", run, owner)
		}
	}
}

// TestClosedDaemonsRunsAreTakenOverAfterTTL: without a restart, the runs
// of a closed daemon go to the others once LeaseTTL has passed since the
// stop was observed.
func TestClosedDaemonsRunsAreTakenOverAfterTTL(t *testing.T) {
	e := newEnv(t)
	a, b := e.started("a", 0), e.started("b", 0)
	ctx := ctxT(t, time.Minute)
	if err := a.Acquire(ctx, "closed-1"); err != nil {
		t.Fatal(err)
	}
	e.viewsAgree([]*daemon{a, b}, []string{"closed-1"})
	if err := a.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	select {
	case tk := <-b.Takeovers():
		if tk.Run != "closed-1" || tk.From != "a" {
			t.Fatalf("takeover %v", tk)
		}
		if since := time.Since(closed); since < ttl*9/10 {
			t.Fatalf("b took the run of a closed daemon %s after the stop, before LeaseTTL", since)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b never took the closed daemon's run")
	}
}

// TestFencedWhenHeartbeatsCannotBeStored: a daemon whose connection is
// gone is fenced within about LeaseTTL/2 of its last stored heartbeat;
// Mine turns false, and its runs go to another daemon after LeaseTTL.
func TestFencedWhenHeartbeatsCannotBeStored(t *testing.T) {
	e := newEnv(t)
	a, b := e.started("a", 0), e.started("b", 0)
	ctx := ctxT(t, time.Minute)
	if err := a.Acquire(ctx, "fence-1"); err != nil {
		t.Fatal(err)
	}
	if a.Fenced() || !a.Mine("fence-1") {
		t.Fatal("a fresh daemon is fenced")
	}
	a.bus.Conn().Close()
	cut := time.Now()
	eventually(t, 5*time.Second, "a fenced", a.Fenced)
	fenced := time.Since(cut)
	// The last stored heartbeat was at most LeaseTTL/5 before the cut.
	if fenced > ttl/2+100*time.Millisecond || fenced < ttl/2-ttl/5-50*time.Millisecond {
		t.Fatalf("a fenced %s after its connection closed, want about LeaseTTL/2 (%s)", fenced, ttl/2)
	}
	if a.Mine("fence-1") {
		t.Fatal("a fenced daemon says the run is its own")
	}
	if err := a.Acquire(ctx, "fence-2"); !errors.Is(err, placement.ErrFenced) {
		t.Fatalf("a fenced daemon acquires: %v, want ErrFenced", err)
	}
	select {
	case tk := <-b.Takeovers():
		if tk.Run != "fence-1" {
			t.Fatalf("takeover %v", tk)
		}
		if since := time.Since(cut); since < ttl*8/10-50*time.Millisecond {
			t.Fatalf("b took the run %s after a was cut off, before LeaseTTL", since)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("b never took the fenced daemon's run")
	}
}

// TestFenceClearsAfterAnOutage: the server stops for longer than
// LeaseTTL/2 and starts again on the same store; the daemons are fenced
// during the outage, unfenced once they store heartbeats again, and
// then each run is Mine for exactly the daemon the bucket says holds it.
func TestFenceClearsAfterAnOutage(t *testing.T) {
	store := auth.Store{Dir: filepath.Join(t.TempDir(), "creds")}
	ids, err := store.Init()
	if err != nil {
		t.Fatal(err)
	}
	users, err := auth.NkeyUsers(ids)
	if err != nil {
		t.Fatal(err)
	}
	opts := embedded.Options{DataDir: t.TempDir(), Listen: bustest.FreeAddr(t), ServerName: "test", Users: users}
	s, err := embedded.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	admin := bustest.ConnectAs(t, s.ClientURL(), store, auth.Admin, bus.Options{})
	e := &env{t: t, url: s.ClientURL(), store: store, admin: admin}
	a, b := e.started("a", 0), e.started("b", 0)
	ctx := ctxT(t, time.Minute)
	rs := runs("outage", 4)
	for i, run := range rs {
		d := a
		if i%2 == 1 {
			d = b
		}
		if err := d.Acquire(ctx, run); err != nil {
			t.Fatal(err)
		}
	}
	e.viewsAgree([]*daemon{a, b}, rs)

	s.Shutdown()
	eventually(t, 5*time.Second, "both daemons fenced during the outage", func() bool { return a.Fenced() && b.Fenced() })
	for _, run := range rs {
		if a.Mine(run) || b.Mine(run) {
			t.Fatalf("run %s is Mine during the outage", run)
		}
	}
	time.Sleep(ttl / 2)
	s, err = embedded.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "both daemons unfenced after the outage", func() bool { return !a.Fenced() && !b.Fenced() })
	// Let any takeover decided on a stale view happen, then compare.
	time.Sleep(2 * ttl)
	for _, run := range rs {
		owner, ok := e.leaseOwner(run)
		if !ok {
			t.Fatalf("run %s lost its lease", run)
		}
		eventually(t, 5*time.Second, "Mine("+run+") matches the bucket's "+owner, func() bool {
			return a.Mine(run) == (owner == "a") && b.Mine(run) == (owner == "b")
		})
	}
	t.Logf("after the outage: %d runs on a, %d on b", a.Running(), b.Running())
}

// TestReleaseDeletesOnlyOwnLease: Release removes this daemon's lease and
// refuses another daemon's; releasing a run with no lease is no error.
func TestReleaseDeletesOnlyOwnLease(t *testing.T) {
	e := newEnv(t)
	a, b := e.started("a", 0), e.started("b", 0)
	ctx := ctxT(t, time.Minute)
	if err := a.Acquire(ctx, "rel-a"); err != nil {
		t.Fatal(err)
	}
	if err := b.Acquire(ctx, "rel-b"); err != nil {
		t.Fatal(err)
	}
	var owned *placement.OwnedError
	if err := b.Release(ctx, "rel-a"); !errors.As(err, &owned) || owned.Owner != "a" || owned.Run != "rel-a" {
		t.Fatalf("b releases a's run: %v, want OwnedError by a", err)
	}
	if owner, ok := e.leaseOwner("rel-a"); !ok || owner != "a" {
		t.Fatalf("after b's release of a's run: %q %v", owner, ok)
	}
	if err := a.Release(ctx, "rel-a"); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.leaseOwner("rel-a"); ok {
		t.Fatal("a's released lease is still there")
	}
	if err := a.Release(ctx, "rel-a"); err != nil {
		t.Fatalf("releasing a released run: %v", err)
	}
	if err := a.Release(ctx, "never-placed"); err != nil {
		t.Fatalf("releasing a run never placed: %v", err)
	}
	eventually(t, 5*time.Second, "b sees rel-a released", func() bool { _, ok := b.Owner("rel-a"); return !ok })
	// A released run can be placed again.
	if owner, err := b.Place(ctx, "rel-a"); err != nil || owner != "b" {
		t.Fatalf("placing a released run again: %q %v", owner, err)
	}
	if owner, _ := e.leaseOwner("rel-b"); owner != "b" {
		t.Fatalf("b's own lease: %q", owner)
	}
}

func TestNewChecksOptions(t *testing.T) {
	e := newEnv(t)
	kv, err := e.admin.PlacementKV(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []placement.Options{{}, {DaemonID: "a.b"}, {DaemonID: "a", Capacity: -1}, {DaemonID: "a", LeaseTTL: time.Millisecond}, {DaemonID: "a", MarkerTTL: 500 * time.Millisecond}} {
		if _, err := placement.New(kv, o); err == nil {
			t.Errorf("New accepted %+v", o)
		}
	}
	p, err := placement.New(kv, placement.Options{DaemonID: "ok"})
	if err != nil || p.LeaseTTL() != placement.DefaultLeaseTTL {
		t.Fatalf("defaults: %v %v", p, err)
	}
	if err := p.Acquire(context.Background(), "x"); !errors.Is(err, placement.ErrNotStarted) {
		t.Fatalf("Acquire before Start: %v", err)
	}
	if err := p.Acquire(context.Background(), "bad.run"); err == nil {
		t.Fatal("Acquire accepted a bad run id")
	}
}

// TestPreviousEndedSkipsTheWait: a restart whose PreviousEnded hook says
// the instance holding the key ended (sandboxd: same host and spool, and
// the spool's lock was free) registers at once and resumes its runs; one
// whose hook says no waits LeaseTTL as usual.
func TestPreviousEndedSkipsTheWait(t *testing.T) {
	e := newEnv(t)
	a := e.started("a", 0)
	ctx := ctxT(t, time.Minute)
	rs := runs("ended", 3)
	for _, run := range rs {
		if err := a.Acquire(ctx, run); err != nil {
			t.Fatal(err)
		}
	}
	a.crash(t)
	restart := func(ended bool) (*daemon, time.Duration) {
		b := bustest.ConnectAs(t, e.url, e.store, catalog.ComponentSandboxd, bus.Options{})
		kv, err := b.PlacementKV(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var asked []placement.DaemonInfo
		p, err := placement.New(kv, placement.Options{DaemonID: "a", LeaseTTL: ttl, Host: "test-a", Logger: bustest.Logger(t),
			PreviousEnded: func(prev placement.DaemonInfo) bool { asked = append(asked, prev); return ended }})
		if err != nil {
			t.Fatal(err)
		}
		d := &daemon{Placer: p, bus: b}
		start := time.Now()
		e.start(d)
		if len(asked) == 0 || asked[0].Host != "test-a" {
			t.Fatalf("PreviousEnded asked %v, want the previous instance of host test-a", asked)
		}
		return d, time.Since(start)
	}
	again, waited := restart(true)
	if waited > ttl/2 {
		t.Fatalf("restart whose previous instance is known ended waited %s (lease TTL %s)", waited, ttl)
	}
	if got := again.Owned(); len(got) != len(rs) {
		t.Fatalf("restarted a owns %v, want its %d runs", got, len(rs))
	}
	again.crash(t)
	_, waited = restart(false)
	if waited < ttl*9/10 {
		t.Fatalf("restart with PreviousEnded false waited only %s, want LeaseTTL (%s)", waited, ttl)
	}
}

// TestReleasedLeaseMarkerExpires: a released run's lease is purged with a
// TTL: the marker is there for a while (every daemon sees the release),
// then gone, so the bucket does not keep one marker for every run ever
// run. A bucket without per-message TTLs (made before them, its admin not
// run since) still gets a plain delete.
func TestReleasedLeaseMarkerExpires(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t, time.Minute)
	m := e.placerWith(placement.Options{DaemonID: "m", MarkerTTL: time.Second})
	e.start(m)
	other := e.started("o", 0)
	if err := m.Acquire(ctx, "mark-1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "o sees mark-1 placed", func() bool { _, ok := other.Owner("mark-1"); return ok })
	if err := m.Release(ctx, "mark-1"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "o sees mark-1 released", func() bool { _, ok := other.Owner("mark-1"); return !ok })
	stream, err := e.admin.JetStream().Stream(ctx, "KV_"+bus.PlacementBucket)
	if err != nil {
		t.Fatal(err)
	}
	subject := "$KV." + bus.PlacementBucket + ".runs.mark-1"
	marker, err := stream.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatalf("the release's marker: %v", err)
	}
	if op, ttlHdr := marker.Header.Get("KV-Operation"), marker.Header.Get("Nats-TTL"); op != "PURGE" || ttlHdr != "1s" {
		t.Fatalf("marker KV-Operation %q Nats-TTL %q, want PURGE and 1s", op, ttlHdr)
	}
	eventually(t, 10*time.Second, "the marker expires", func() bool {
		_, err := stream.GetLastMsgForSubject(ctx, subject)
		return errors.Is(err, jetstream.ErrMsgNotFound)
	})
	// The run can be placed again, and released on a bucket without
	// per-message TTLs (as one made by an older version) with a delete.
	if err := m.Acquire(ctx, "mark-1"); err != nil {
		t.Fatalf("placing a released run again: %v", err)
	}
	if err := e.admin.JetStream().DeleteKeyValue(ctx, bus.PlacementBucket); err != nil {
		t.Fatal(err)
	}
	old := e.admin.Options().PlacementKVConfig()
	old.LimitMarkerTTL = 0
	if _, err := e.admin.JetStream().CreateKeyValue(ctx, old); err != nil {
		t.Fatal(err)
	}
	m2 := e.placerWith(placement.Options{DaemonID: "m2", MarkerTTL: time.Second})
	e.start(m2)
	if err := m2.Acquire(ctx, "mark-2"); err != nil {
		t.Fatal(err)
	}
	if err := m2.Release(ctx, "mark-2"); err != nil {
		t.Fatalf("release on a bucket without per-message TTLs: %v", err)
	}
	ostream, err := e.admin.JetStream().Stream(ctx, "KV_"+bus.PlacementBucket)
	if err != nil {
		t.Fatal(err)
	}
	if msg, err := ostream.GetLastMsgForSubject(ctx, "$KV."+bus.PlacementBucket+".runs.mark-2"); err != nil || msg.Header.Get("KV-Operation") != "DEL" {
		t.Fatalf("release on an old bucket: %v %v, want a delete marker", msg, err)
	}
}
