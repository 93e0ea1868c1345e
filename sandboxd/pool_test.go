package sandboxd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/rundir"
	"github.com/vera-run/vera/sandboxd"
)

// poolContainers lists the containers of the warm pool of daemon id:
// ready ones (named vera.pool.…) and claimed ones (named after a run).
func poolContainers(t testing.TB, docker *client.Client, id string) (ready, claimed []container.Summary) {
	t.Helper()
	list, err := docker.ContainerList(context.Background(), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", sandboxd.LabelPool+"="+id))})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		if strings.HasPrefix(strings.TrimPrefix(c.Names[0], "/"), "vera.pool.") {
			ready = append(ready, c)
		} else {
			claimed = append(claimed, c)
		}
	}
	return ready, claimed
}

func removePool(t testing.TB, docker *client.Client, id string) {
	ready, claimed := poolContainers(t, docker, id)
	for _, c := range append(ready, claimed...) {
		_ = docker.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	}
}

// waitPool waits until the daemon's pool has want containers ready (each
// has a file "ready" in its pool directory, beside its /work).
func waitPool(t testing.TB, f *fixture, want int) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		done, _ := filepath.Glob(filepath.Join(f.cfg.WorkRoot, ".vera-pool", "*", "ready"))
		if len(done) >= want {
			time.Sleep(100 * time.Millisecond) // from the file to the pool's list
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("warm pool: %d containers ready, want %d", len(done), want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// submit publishes the run's vera.run.started with its work dir.
func (f *fixture) started(run, workDir string) {
	f.t.Helper()
	ev, err := f.b.Events.New(run, catalog.RunStarted{AgentID: "test", Config: catalog.RunConfig{Task: "t", WorkDir: workDir, Sandbox: catalog.SandboxConfig{Network: true}}})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.b.Publish(context.Background(), ev); err != nil {
		f.t.Fatal(err)
	}
}

// TestWarmPoolClaim: a run claims a ready pool container, whose /work
// becomes the run dir's work/ (a rename into a run dir that has no /work
// yet: nothing is exchanged or moved into a tree that exists), the
// container is named after the run, the pool is refilled, the run's end
// removes its container and the daemon's stop removes the pool's. A run
// whose /work holds files already (a run dir VERA made for it earlier)
// keeps them: it gets a new container on its own /work, not a pool one.
func TestWarmPoolClaim(t *testing.T) {
	id := "p" + fmt.Sprint(time.Now().UnixNano()%1e9)
	var f *fixture
	f = newFixtureOpts(t, func(c *sandboxd.Config) { c.WarmPool = 2; c.DaemonID = id }, true)
	t.Cleanup(func() { removePool(t, f.docker, id) })
	waitPool(t, f, 2)

	// Run a: no run dir yet. Run b: its run dir (VERA's, marked for b)
	// has a /work holding a file and a .venv of its own.
	a, b := f.run("a"), f.run("b")
	dirB := filepath.Join(f.root, "runs", "given-b")
	roots, err := rundir.NewRoots(filepath.Join(f.root, "runs"))
	if err != nil {
		t.Fatal(err)
	}
	rd, err := rundir.Open(roots, dirB, b, true)
	if err != nil {
		t.Fatal(err)
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 65532, 65532
	}
	workB, wf, err := rd.Work(true, uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	wf.Close()
	rd.Close()
	if err := os.MkdirAll(filepath.Join(workB, ".venv"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(workB, "keep.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		for _, p := range []string{filepath.Join(workB, ".venv"), filepath.Join(workB, "keep.txt")} {
			if err := os.Chown(p, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.started(b, dirB)
	ra := f.exec(a, req{cmd: `echo "run=$VERA_RUN_ID"; ls -d /work/.venv; echo made > /work/out.txt`})
	rb := f.exec(b, req{cmd: `echo "run=$VERA_RUN_ID"; cat /work/keep.txt; echo made > /work/out.txt`})
	if ra.ExitCode != 0 || !strings.Contains(ra.Stdout.Head, "run="+a) || !strings.Contains(ra.Stdout.Head, "/work/.venv") {
		t.Fatalf("run a: %+v", ra)
	}
	if rb.ExitCode != 0 || !strings.Contains(rb.Stdout.Head, "run="+b) || !strings.Contains(rb.Stdout.Head, "mine") {
		t.Fatalf("run b (its own /work): %+v", rb)
	}
	for run, dir := range map[string]string{a: f.workDir(a), b: workB} {
		if got, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(got) != "made\n" {
			t.Errorf("run %s: the container's /work is not its work dir %s: %q %v", run, dir, got, err)
		}
	}
	if _, err := os.Stat(filepath.Join(workB, "keep.txt")); err != nil {
		t.Errorf("run b's own file is gone: %v", err)
	}
	// Run a served by a pool container named after it; run b by a
	// container of its own.
	_, claimed := poolContainers(t, f.docker, id)
	names := map[string]string{}
	for _, c := range claimed {
		names[strings.TrimPrefix(c.Names[0], "/")] = c.ID
	}
	if len(claimed) != 1 || names[sandboxd.ContainerName(a, "agent")] == "" {
		t.Fatalf("claimed pool containers %v, want run a's container only", names)
	}
	// The pool is refilled.
	waitPool(t, f, 2)

	// The run's end removes its container; the daemon's stop the pool's.
	ev, _ := f.b.Events.New(a, catalog.RunFinished{Outcome: catalog.OutcomeResolved})
	if _, err := f.b.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		_, claimed := poolContainers(t, f.docker, id)
		if len(claimed) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run a ended but %d claimed containers remain", len(claimed))
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.stop()
	ready, _ := poolContainers(t, f.docker, id)
	if len(ready) != 0 {
		t.Fatalf("the daemon stopped but %d pool containers remain", len(ready))
	}
	if left, _ := filepath.Glob(filepath.Join(f.cfg.WorkRoot, ".vera-pool", "*")); len(left) != 0 {
		t.Errorf("pool directories left: %v", left)
	}
}

// TestWarmPoolClaimsAreExclusive: more runs at once than the pool holds;
// every run gets a container of its own (pool or new), and no container
// serves two runs.
func TestWarmPoolClaimsAreExclusive(t *testing.T) {
	id := "x" + fmt.Sprint(time.Now().UnixNano()%1e9)
	f := newFixtureOpts(t, func(c *sandboxd.Config) { c.WarmPool = 3; c.DaemonID = id }, true)
	t.Cleanup(func() { removePool(t, f.docker, id) })
	waitPool(t, f, 3)
	const n = 6
	var wg sync.WaitGroup
	results := make([]catalog.ToolFinished, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := f.run(fmt.Sprint("r", i))
			results[i] = f.exec(run, req{cmd: `echo "$VERA_RUN_ID" >> /tmp/owners; sort -u /tmp/owners | wc -l; hostname`})
		}()
	}
	wg.Wait()
	hosts := map[string]int{}
	for i, r := range results {
		lines := strings.Fields(r.Stdout.Head)
		if r.ExitCode != 0 || len(lines) != 2 || lines[0] != "1" {
			t.Fatalf("run %d: a container served more than one run, or failed: %+v", i, r)
		}
		hosts[lines[1]]++
	}
	if len(hosts) != n {
		t.Fatalf("%d runs ran in %d containers: %v", n, len(hosts), hosts)
	}
	_, claimed := poolContainers(t, f.docker, id)
	if len(claimed) < 3 {
		t.Errorf("only %d runs claimed a pool container of the 3 ready", len(claimed))
	}
}

// TestWarmPoolReapsWhatAKilledDaemonLeft: unclaimed pool containers with
// the daemon's id (left by a process killed before it could remove them)
// are removed when a daemon with that id starts; claimed ones, and other
// daemons' pools, are not touched.
func TestWarmPoolReapsWhatAKilledDaemonLeft(t *testing.T) {
	id := "k" + fmt.Sprint(time.Now().UnixNano()%1e9)
	other := id + "-other"
	f := newFixtureOpts(t, func(c *sandboxd.Config) { c.WarmPool = 1; c.DaemonID = id }, false)
	t.Cleanup(func() { removePool(t, f.docker, id); removePool(t, f.docker, other) })
	ctx := context.Background()
	spool := f.cfg.SpoolDir
	mk := func(owner, name string) string {
		c, err := f.docker.ContainerCreate(ctx, &container.Config{Image: f.image, Cmd: []string{"sleep", "600"},
			Labels: map[string]string{sandboxd.LabelManaged: "true", sandboxd.LabelPool: owner, sandboxd.LabelPoolSpool: spool}}, nil, nil, nil, name)
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	stale := mk(id, "vera.pool."+id+".deadbeef")
	theirs := mk(other, "vera.pool."+other+".cafe")
	// A pool container a run claimed before the kill (named after its
	// run), with its shell-state directory: both stay.
	claimedState := filepath.Join(spool, ".pool", "vera.pool."+id+".c1a1.state")
	if err := os.MkdirAll(claimedState, 0o755); err != nil {
		t.Fatal(err)
	}
	claimedRun := f.run("claimed")
	c, err := f.docker.ContainerCreate(ctx, &container.Config{Image: f.image, Cmd: []string{"sleep", "600"},
		Labels: map[string]string{sandboxd.LabelManaged: "true", sandboxd.LabelPool: id, sandboxd.LabelPoolSpool: spool}},
		&container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeBind, Source: claimedState, Target: "/.vera-sandbox/state"}}}, nil, nil, sandboxd.ContainerName(claimedRun, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true}) })
	f.start()
	waitPool(t, f, 1)
	if _, err := f.docker.ContainerInspect(ctx, c.ID); err != nil {
		t.Errorf("a claimed pool container was reaped: %v", err)
	}
	if _, err := os.Stat(claimedState); err != nil {
		t.Errorf("a claimed pool container's shell-state directory was removed: %v", err)
	}
	if _, err := f.docker.ContainerInspect(ctx, stale); !client.IsErrNotFound(err) {
		t.Errorf("the stale pool container of this daemon's id was not reaped (err %v)", err)
	}
	if _, err := f.docker.ContainerInspect(ctx, theirs); err != nil {
		t.Errorf("another daemon's pool container was touched: %v", err)
	}
}
