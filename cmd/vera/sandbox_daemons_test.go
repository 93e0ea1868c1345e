package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// daemonsDriver plays the agent of many runs at once: it publishes each
// run's vera.run.started and then its commands one after the other, each
// once its previous one finished, and keeps every tool.started and
// tool.finished it sees.
type daemonsDriver struct {
	t     *testing.T
	b     *bus.Bus
	mu    sync.Mutex
	fin   map[string]*catalog.ToolFinished // request id → its first result
	nFin  map[string]int                   // request id → results seen
	by    map[string]string                // request id → daemon of its tool.started
	moved map[string]int                   // run → vera_run_moved events
	wake  chan struct{}
}

func newDaemonsDriver(t *testing.T, b *bus.Bus) *daemonsDriver {
	d := &daemonsDriver{t: t, b: b, fin: map[string]*catalog.ToolFinished{}, nFin: map[string]int{}, by: map[string]string{}, moved: map[string]int{}, wake: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for rec, err := range b.Read(ctx, bus.ReadOptions{Types: []string{catalog.TypeToolStarted, catalog.TypeToolFinished, catalog.TypeContainerEvent}, Follow: true}) {
			if err != nil {
				return
			}
			p, err := catalog.Decode(rec.Event.Type, rec.Event.Data)
			if err != nil {
				continue
			}
			d.mu.Lock()
			switch v := p.(type) {
			case *catalog.ToolStarted:
				d.by[v.RequestID] = v.Daemon
			case *catalog.ToolFinished:
				d.nFin[v.RequestID]++
				if d.fin[v.RequestID] == nil {
					d.fin[v.RequestID] = v
				}
			case *catalog.ContainerEvent:
				if v.Action == "vera_run_moved" {
					d.moved[rec.Event.RunID]++
				}
			}
			close(d.wake)
			d.wake = make(chan struct{})
			d.mu.Unlock()
		}
	}()
	return d
}

func (d *daemonsDriver) publish(run string, p catalog.Payload) {
	ev, err := d.b.Events.New(run, p)
	if err != nil {
		d.t.Error(err)
		return
	}
	if _, err := d.b.Publish(context.Background(), ev); err != nil {
		d.t.Error(err)
	}
}

// exec publishes one command of the run and waits for its result.
func (d *daemonsDriver) exec(run, id, cmd string, within time.Duration) *catalog.ToolFinished {
	d.publish(run, catalog.ToolRequested{RequestID: id, Requester: catalog.RequesterAgent, Tool: catalog.ToolShell, Command: cmd, TimeoutMS: 120000})
	deadline := time.After(within)
	for {
		d.mu.Lock()
		tf, wake := d.fin[id], d.wake
		d.mu.Unlock()
		if tf != nil {
			return tf
		}
		select {
		case <-wake:
		case <-deadline:
			d.t.Errorf("run %s: no result for %s within %s", run, id, within)
			return nil
		}
	}
}

// TestSandboxDaemonsShareRunsAndTakeOver: three `vera sandboxd`
// processes (distinct ids, one Docker engine) share 30 runs of four
// commands; one is killed with SIGKILL while commands run. Every run's
// commands run on one daemon until its daemon dies, then on one other;
// no command runs twice; each command cut off by the kill is reported
// interrupted exactly once, and the agent's next result says the run
// moved; the killed daemon, restarted, takes none of the runs others hold.
func TestSandboxDaemonsShareRunsAndTakeOver(t *testing.T) {
	if testing.Short() {
		t.Skip("three sandbox daemons: skipped in -short mode")
	}
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	dir := t.TempDir()
	data := veraDataDir(t)
	addr := bustest.FreeAddr(t)
	upOut, upErr, _ := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--no-sandboxd", "--no-agent", "--no-verifiers", "--no-projector", "--http-listen", "", "--log-level", "warn")
	waitForLong(t, "vera up", 60*time.Second, func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	_ = upErr
	url := "nats://" + addr
	store := auth.Store{Dir: auth.DirOf(data)}
	admin := bustest.Connect(t, url, bus.Options{Source: "daemons-test", CredsFile: store.Path(auth.Admin)})

	bin := filepath.Join(dir, "vera")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build vera: %v\n%s", err, out)
	}
	prefix := fmt.Sprintf("sdt%d", time.Now().UnixNano()%1e6)
	ids := []string{prefix + "-a", prefix + "-b", prefix + "-c"}
	// The first two daemons run as identities of their own (vera auth
	// issue ID --role sandboxd; the running vera up takes them within a
	// second), the third as the shared sandboxd identity.
	creds := map[string]string{ids[2]: store.Path(catalog.ComponentSandboxd)}
	for _, id := range ids[:2] {
		if _, path, err := store.Issue(id, auth.RoleSandboxd); err != nil {
			t.Fatal(err)
		} else {
			creds[id] = path
		}
	}
	for _, id := range ids[:2] {
		waitForLong(t, "vera up takes identity "+id, 30*time.Second, func() bool {
			b, err := bus.Connect(context.Background(), bus.Options{URL: url, CredsFile: creds[id], Source: id, ReadOnly: true})
			if err == nil {
				b.Close()
			}
			return err == nil
		})
	}
	daemons := map[string]*proc{}
	for _, id := range ids {
		p := &proc{t: t, name: id, env: []string{"VERA_LOG_LEVEL=info"}, log: filepath.Join(dir, id+".log"), args: []string{bin, "sandboxd",
			"--nats-url", url, "--nats-creds", creds[id], "--data-dir", filepath.Join(dir, id),
			"--id", id, "--capacity", "15", "--lease-ttl", "3s", "--warm-pool", "1", "--image", img, "--work-root", os.TempDir(),
			"--memory", "268435456", "--concurrency", "16"}}
		p.start()
		t.Cleanup(p.kill)
		daemons[id] = p
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, id := range ids {
				t.Logf("---- %s\n%s", id, daemons[id].tail(30))
			}
		}
		list, _ := docker.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandboxd.LabelManaged+"=true"))})
		for _, c := range list {
			if strings.HasPrefix(c.Labels[sandboxd.LabelDaemon], prefix) || strings.HasPrefix(c.Labels[sandboxd.LabelPool], prefix) {
				_ = docker.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
			}
		}
	})
	waitForLong(t, "three daemons serving", 90*time.Second, func() bool {
		for _, id := range ids {
			if daemons[id].count("sandboxd serving") == 0 {
				return false
			}
		}
		return true
	})

	if n := daemons[ids[2]].count("shared sandboxd identity"); n != 1 {
		t.Errorf("the daemon without an identity of its own warned %d times that its consumers are not protected, want 1", n)
	}
	if n := daemons[ids[0]].count("shared sandboxd identity"); n != 0 {
		t.Errorf("a daemon with its own identity warned %d times", n)
	}

	drv := newDaemonsDriver(t, admin)
	const runs, steps = 30, 4
	workRoot := filepath.Join(os.TempDir(), prefix)
	t.Cleanup(func() { os.RemoveAll(workRoot) })
	runID := func(i int) string { return fmt.Sprintf("%s-r%02d", prefix, i) }
	reqID := func(i, k int) string { return fmt.Sprintf("%s-s%d", runID(i), k) }
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := runID(i)
			drv.publish(run, catalog.RunStarted{AgentID: "test", Config: catalog.RunConfig{Task: "t", WorkDir: filepath.Join(workRoot, run)}})
			for k := 1; k <= steps; k++ {
				// Each command appends its own line to /work/log.txt: a
				// command run twice shows twice.
				drv.exec(run, reqID(i, k), fmt.Sprintf("echo %s >> /work/log.txt; sleep 2", reqID(i, k)), 4*time.Minute)
			}
		}()
	}
	// Kill the daemon with the most commands started, once at least a
	// third of all commands were started, while its commands run.
	var victim string
	waitForLong(t, "a third of the commands started", 4*time.Minute, func() bool {
		drv.mu.Lock()
		defer drv.mu.Unlock()
		if len(drv.by) < runs*steps/3 {
			return false
		}
		count := map[string]int{}
		for req, by := range drv.by {
			if drv.fin[req] == nil {
				count[by]++
			}
		}
		for id, n := range count {
			if victim == "" || n > count[victim] {
				victim = id
			}
		}
		return victim != "" && count[victim] > 0
	})
	killedAt := time.Now()
	daemons[victim].kill()
	t.Logf("killed %s with SIGKILL", victim)
	wg.Wait()
	takeover := time.Since(killedAt)

	// Restart the killed daemon: it must take none of its former runs
	// back (other daemons hold them now).
	daemons[victim].start()
	waitForLong(t, "the killed daemon back", 90*time.Second, func() bool { return daemons[victim].count("sandboxd serving") >= 2 })

	drv.mu.Lock()
	defer drv.mu.Unlock()
	perDaemon := map[string]int{}
	moved, interrupted := 0, 0
	for i := range runs {
		run := runID(i)
		var seq []string
		for k := 1; k <= steps; k++ {
			id := reqID(i, k)
			tf := drv.fin[id]
			if tf == nil {
				t.Errorf("%s: no result", id)
				continue
			}
			if n := drv.nFin[id]; n != 1 {
				t.Errorf("%s: %d results, want exactly 1", id, n)
			}
			by := drv.by[id]
			if tf.Interrupted {
				interrupted++
				if by != victim && by != "" {
					t.Errorf("%s interrupted but started on %s, not on the killed %s", id, by, victim)
				}
				if !strings.Contains(tf.Error, "moved to sandboxd") {
					t.Errorf("%s: interrupted without saying the run moved: %q", id, tf.Error)
				}
			} else if tf.ExitCode != 0 {
				t.Errorf("%s: exit %d %s", id, tf.ExitCode, tf.Error)
			}
			if by != "" && (len(seq) == 0 || seq[len(seq)-1] != by) {
				seq = append(seq, by)
			}
			perDaemon[by]++
		}
		switch {
		case len(seq) == 1:
		case len(seq) == 2 && seq[0] == victim:
			moved++
			if drv.moved[run] != 1 {
				t.Errorf("run %s moved from %s to %s: %d vera_run_moved events, want 1", run, seq[0], seq[1], drv.moved[run])
			}
		default:
			t.Errorf("run %s: its commands ran on %v (want one daemon, or the killed one then one other)", run, seq)
		}
		// No command ran twice.
		b, err := os.ReadFile(filepath.Join(workRoot, run, "work", "log.txt"))
		if err != nil {
			t.Errorf("run %s: %v", run, err)
			continue
		}
		lines := strings.Fields(string(b))
		seen := map[string]bool{}
		for _, l := range lines {
			if seen[l] {
				t.Errorf("run %s: %s ran twice", run, l)
			}
			seen[l] = true
		}
		for k := 1; k <= steps; k++ {
			if tf := drv.fin[reqID(i, k)]; tf != nil && !tf.Interrupted && !seen[reqID(i, k)] {
				t.Errorf("run %s: %s finished but its line is missing", run, reqID(i, k))
			}
		}
	}
	var spread []string
	for id, n := range perDaemon {
		spread = append(spread, fmt.Sprintf("%s=%d", id, n))
	}
	sort.Strings(spread)
	t.Logf("commands per daemon %v; runs moved %d; interrupted %d; all commands done %.1fs after the kill", spread, moved, interrupted, takeover.Seconds())
	if moved == 0 {
		t.Errorf("no run moved off the killed daemon %s", victim)
	}
	for _, id := range ids {
		if perDaemon[id] == 0 {
			t.Errorf("daemon %s ran no command: the runs were not shared", id)
		}
	}
	if interrupted == 0 {
		t.Errorf("no command was reported interrupted though %s was killed while its commands ran", victim)
	}

	// After its restart the killed daemon ran nothing: each moved run's
	// next command runs on its new daemon.
	drv.mu.Unlock()
	for i := range runs {
		run := runID(i)
		id := reqID(i, steps+1)
		tf := drv.exec(run, id, "true", 2*time.Minute)
		drv.mu.Lock()
		by := drv.by[id]
		drv.mu.Unlock()
		if tf != nil && by == victim {
			t.Errorf("run %s: the restarted %s ran %s, but the run had moved", run, victim, id)
		}
	}
	for i := range runs {
		drv.publish(runID(i), catalog.RunFinished{Outcome: catalog.OutcomeResolved})
	}
	drv.mu.Lock()
}
