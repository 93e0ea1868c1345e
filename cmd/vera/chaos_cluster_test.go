package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// The chaos test of issue 19: VERA on a 3-node JetStream cluster with R3
// streams, every node and every component its own process, the node that
// leads the stream killed with SIGKILL at chosen moments of a scripted run
// and restarted 5 s later. Each trial asserts that every command ran
// exactly once (counted by its side effect in /work), every effect has its
// events, the run ends RESOLVED as scripted, and the projector's live files
// equal `vera replay` of the run's export.
//
//	VERA_CHAOS_TRIALS=5 go test ./cmd/vera -run TestClusterChaos -v   # 5 rounds of the 4 scenarios
//
// Traffic stays on loopback (nodes, components) and on the Docker host
// (sandbox containers, bridge network, no address outside).

// chaosScript is the agent's side of the run: three commands, each
// appending its own line to /work/side.txt (the second takes 2 s, so that
// a kill can land mid-command), each followed by a note, then a submit.
func chaosScript() scriptedmodel.Rule {
	return byStep(map[int]string{
		1: turn(`{"tool":"shell","args":{"cmd":"echo s1 >> /work/side.txt; echo one"}}`, "none", "CONTINUE"),
		2: turn(`{"tool":"notes_append","args":{"text":"the first command said one (ev_0001)"}}`, "ev_0001", "CONTINUE"),
		3: turn(`{"tool":"shell","args":{"cmd":"sleep 2; echo s3 >> /work/side.txt; echo three"}}`, "ev_0001", "CONTINUE"),
		4: turn(`{"tool":"notes_append","args":{"text":"the second command said three (ev_0002)"}}`, "ev_0002", "CONTINUE"),
		5: turn(`{"tool":"shell","args":{"cmd":"echo s5 >> /work/side.txt; echo five"}}`, "ev_0002", "CONTINUE"),
		6: turn(`{"tool":"notes_append","args":{"text":"the third command said five (ev_0003)"}}`, "ev_0003", "CONTINUE"),
		7: turn(`{"tool":"submit","args":{"answer":"one, three, five (ev_0001, ev_0002, ev_0003)"}}`, "ev_0001, ev_0002, ev_0003", "RESOLVED"),
	}, "")
}

// chaosScenario says when to kill the stream leader.
type chaosScenario struct {
	name string
	// trigger reports whether the event (the n-th of its type in the run,
	// counting from 1) is the moment.
	trigger func(ev bus.Event, n int) bool
	// sandboxd: also kill -9 sandboxd one second after the node, and start
	// it again 3 s later.
	sandboxd bool
}

var chaosScenarios = []chaosScenario{
	{name: "after-tool-requested", trigger: func(ev bus.Event, n int) bool { return ev.Type == catalog.TypeToolRequested && n == 1 }},
	{name: "mid-command", trigger: func(ev bus.Event, n int) bool { return ev.Type == catalog.TypeToolStarted && n == 2 }},
	{name: "after-model-reply", trigger: func(ev bus.Event, n int) bool {
		var r catalog.ModelResponded
		return ev.Type == catalog.TypeModelResponded && ev.DecodeData(&r) == nil && r.Scope == catalog.ScopeAgent && r.Step == 4
	}},
	{name: "after-tool-requested+sandboxd-kill", sandboxd: true, trigger: func(ev bus.Event, n int) bool { return ev.Type == catalog.TypeToolRequested && n == 3 }},
}

// proc is a process the test starts, kills and restarts.
type proc struct {
	t    *testing.T
	name string
	args []string
	env  []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

func (p *proc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	lf, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		p.t.Fatal(err)
	}
	fmt.Fprintf(lf, "==== start %s %s\n", time.Now().Format(time.RFC3339Nano), p.name)
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); lf.Close(); close(done) }()
	p.cmd, p.done = cmd, done
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
}

// count is the number of lines of the process's log (all its starts)
// that contain s.
func (p *proc) count(s string) int {
	b, _ := os.ReadFile(p.log)
	return bytes.Count(b, []byte(s))
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// chaosCluster is three nats-server processes with VERA's authorization.
type chaosCluster struct {
	t       *testing.T
	nodes   []*proc
	clients []string
	admin   *bus.Bus
}

func (c *chaosCluster) urls() string {
	us := make([]string, len(c.clients))
	for i, a := range c.clients {
		us[i] = "nats://" + a
	}
	return strings.Join(us, ",")
}

func startChaosCluster(t *testing.T, dir, data string) *chaosCluster {
	t.Helper()
	bin := filepath.Join(dir, "nats-server")
	build := exec.Command("go", "build", "-o", bin, "github.com/nats-io/nats-server/v2")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build nats-server: %v\n%s", err, out)
	}
	authConf := filepath.Join(auth.DirOf(data), "nats-auth.conf")
	if _, err := os.Stat(authConf); err != nil {
		t.Fatalf("vera auth init made no %s: %v", authConf, err)
	}
	c := &chaosCluster{t: t}
	var routes []string
	for i := 0; i < 3; i++ {
		c.clients = append(c.clients, bustest.FreeAddr(t))
		routes = append(routes, bustest.FreeAddr(t))
	}
	// The nodes' configs are the shipped ones (deploy/cluster), with this
	// machine's loopback ports and temporary stores for the host names,
	// ports and paths, and the identities' nats-auth.conf beside them.
	authData, err := os.ReadFile(authConf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats-auth.conf"), authData, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("n%d", i+1)
		shipped, err := os.ReadFile(filepath.Join("..", "..", "deploy", "cluster", "node"+strconv.Itoa(i+1)+".conf"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := string(shipped)
		replace := func(old, new string) {
			if !strings.Contains(cfg, old) {
				t.Fatalf("deploy/cluster/node%d.conf no longer has %q", i+1, old)
			}
			cfg = strings.ReplaceAll(cfg, old, new)
		}
		replace("listen: 0.0.0.0:4222", "listen: "+c.clients[i])
		replace("listen: 0.0.0.0:6222", "listen: "+routes[i])
		replace(`store_dir: "/var/lib/vera/nats"`, fmt.Sprintf("store_dir: %q", filepath.Join(dir, name)))
		for k := range routes {
			replace(fmt.Sprintf("nats-route://n%d:6222", k+1), "nats-route://"+routes[k])
		}
		replace(`include "nats-auth.conf"`, `include "nats-auth.conf"`)
		conf := filepath.Join(dir, name+".conf")
		if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		p := &proc{t: t, name: name, args: []string{bin, "-c", conf}, log: filepath.Join(dir, name+".log")}
		p.start()
		t.Cleanup(p.kill)
		c.nodes = append(c.nodes, p)
	}
	return c
}

// leader is the server name leading the VERA stream, or "".
func (c *chaosCluster) leader(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	s, err := c.admin.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		return ""
	}
	info := s.CachedInfo()
	if info == nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// chaosTrial is what one trial saw.
type chaosTrial struct {
	scenario      string
	killed        string
	failover      time.Duration
	ranTwice      int
	missing       int
	unanswered    int
	lostStarts    int
	interrupted   int
	filesDiffer   []string
	outcome       string
	notTriggered  bool
	runExit       int
	modelRequests int
}

func TestClusterChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster chaos test skipped in -short mode")
	}
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	_ = docker
	t.Setenv("NATS_URL", "")
	dir := t.TempDir()
	data := veraDataDir(t)
	if _, errOut, code := runCLI(t, "auth", "init", "--data-dir", data); code != 0 {
		t.Fatalf("vera auth init: %s", errOut)
	}
	bin := filepath.Join(dir, "vera")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build vera: %v\n%s", err, out)
	}
	c := startChaosCluster(t, dir, data)
	urls := c.urls()

	// VERA's streams as R3, created by admin (vera up with no component),
	// once the cluster has a meta leader.
	deadline := time.Now().Add(60 * time.Second)
	for {
		upOut, upErr, stopUp := start(t, "up", "--nats-url", urls, "--replicas", "3", "--data-dir", data,
			"--no-sandboxd", "--no-agent", "--no-verifiers", "--no-projector", "--http-listen", "", "--log-level", "warn")
		ok := false
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
			if strings.Contains(upOut.String(), "Press Ctrl-C") {
				ok = true
				break
			}
		}
		stopUp()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("vera up --replicas 3 never came up:\n%s\n%s", upOut.String(), upErr.String())
		}
	}
	c.admin = bustest.Connect(t, urls, bus.Options{Source: "chaos-test", CredsFile: auth.Store{Dir: auth.DirOf(data)}.Path(auth.Admin), ReadOnly: true})
	ctx := context.Background()
	if s, err := c.admin.JetStream().Stream(ctx, bus.StreamName); err != nil || s.CachedInfo().Config.Replicas != 3 {
		t.Fatalf("stream VERA is not R3: %v", err)
	}

	model := scriptedmodel.Start(t, scriptedmodel.WithRules(chaosScript()))
	env := []string{"VERA_DATA_DIR=" + data, "NATS_URL=" + urls, "VERA_LOG_LEVEL=info"}
	component := func(name string, args ...string) *proc {
		p := &proc{t: t, name: name, args: append([]string{bin}, args...), env: env, log: filepath.Join(dir, name+".log")}
		p.start()
		t.Cleanup(p.kill)
		return p
	}
	sbx := component("sandboxd", "sandboxd", "--image", img, "--work-root", os.TempDir(), "--memory", "536870912")
	agent := component("agent", "agent")
	projector := component("projector", "projector", "--metrics-listen", "", "--work-root", os.TempDir())
	procs := append([]*proc{sbx, agent, projector}, c.nodes...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("---- %s (last lines of %s)\n%s", p.name, p.log, p.tail(40))
			}
		}
	})

	rounds := 1
	if v, err := strconv.Atoi(os.Getenv("VERA_CHAOS_TRIALS")); err == nil && v > 0 {
		rounds = v
	}
	var results []chaosTrial
	for r := 0; r < rounds; r++ {
		for _, sc := range chaosScenarios {
			runID := fmt.Sprintf("chaos-%d-%s", r, strings.ReplaceAll(sc.name, "+", "-"))
			marks := map[*proc]int{}
			for _, p := range []*proc{sbx, agent, projector} {
				marks[p] = p.count("publish stored after retries")
			}
			res := chaosRun(t, c, bin, env, model.URL(), runID, sc, sbx)
			results = append(results, res)
			var retried []string
			for _, p := range []*proc{sbx, agent, projector} {
				retried = append(retried, fmt.Sprintf("%s %d", p.name, p.count("publish stored after retries")-marks[p]))
			}
			t.Logf("%-34s killed %-3s failover %5.1fs · run exit %d %s · ran twice %d · missing %d · unanswered %d · lost tool.started %d · interrupted %d · files differing %v · publishes stored after retries: %s",
				sc.name, res.killed, res.failover.Seconds(), res.runExit, res.outcome, res.ranTwice, res.missing, res.unanswered, res.lostStarts, res.interrupted, res.filesDiffer, strings.Join(retried, ", "))
			if t.Failed() {
				return
			}
		}
	}
	var fo []time.Duration
	twice, lost := 0, 0
	for _, r := range results {
		fo = append(fo, r.failover)
		twice += r.ranTwice
		lost += r.missing + r.unanswered + r.lostStarts + len(r.filesDiffer)
	}
	slices.Sort(fo)
	t.Logf("%d trials: %d commands run twice, %d lost effects or events; failover (kill → new stream leader) min %.1fs, median %.1fs, max %.1fs",
		len(results), twice, lost, fo[0].Seconds(), fo[len(fo)/2].Seconds(), fo[len(fo)-1].Seconds())
}

// chaosRun runs one trial and checks it.
func chaosRun(t *testing.T, c *chaosCluster, bin string, env []string, modelURL, runID string, sc chaosScenario, sbx *proc) chaosTrial {
	t.Helper()
	res := chaosTrial{scenario: sc.name}
	t.Cleanup(func() { removeContainers(t, runID) })
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	work := filepath.Join(t.TempDir(), "work")

	// The trigger: follow the run and kill the stream leader at the moment.
	fired := make(chan struct{})
	var chaosDone sync.WaitGroup
	go func() {
		counts := map[string]int{}
		for rec, err := range c.admin.Read(ctx, bus.ReadOptions{RunID: runID, Follow: true}) {
			if err != nil {
				return
			}
			if rec.Err != nil {
				continue
			}
			counts[rec.Event.Type]++
			if sc.trigger(rec.Event, counts[rec.Event.Type]) {
				close(fired)
				return
			}
		}
	}()
	chaosDone.Add(1)
	go func() {
		defer chaosDone.Done()
		select {
		case <-fired:
		case <-ctx.Done():
			return
		}
		leader := c.leader(ctx)
		idx := slices.IndexFunc(c.nodes, func(p *proc) bool { return p.name == leader })
		if idx < 0 {
			t.Errorf("%s: no stream leader to kill (%q)", sc.name, leader)
			return
		}
		node := c.nodes[idx]
		node.kill()
		killedAt := time.Now()
		res.killed = leader
		if sc.sandboxd {
			time.Sleep(time.Second)
			sbx.kill()
		}
		for time.Since(killedAt) < 60*time.Second {
			if l := c.leader(ctx); l != "" && l != leader {
				res.failover = time.Since(killedAt)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if sc.sandboxd {
			time.Sleep(time.Until(killedAt.Add(4 * time.Second)))
			sbx.start()
		}
		time.Sleep(time.Until(killedAt.Add(5 * time.Second)))
		node.start()
	}()

	cmd := exec.CommandContext(ctx, bin, "run", "--run-id", runID, "--task", "Run the three commands and report what they said.",
		"--work-dir", work, "--model-base-url", modelURL, "--model", "scripted", "--max-steps", "12")
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	res.runExit = cmd.ProcessState.ExitCode()
	chaosDone.Wait()
	select {
	case <-fired:
	default:
		res.notTriggered = true
		t.Errorf("%s: the moment never came (run exit %d: %v)\n%s\n%s", sc.name, res.runExit, err, out.String(), errOut.String())
		return res
	}
	if res.failover == 0 {
		t.Errorf("%s: no new stream leader within 60 s of killing %s", sc.name, res.killed)
	}
	if strings.Contains(out.String(), "RESOLVED") {
		res.outcome = "RESOLVED"
	}
	if res.runExit != 0 || res.outcome != "RESOLVED" {
		t.Errorf("%s: vera run exit %d, want 0 and RESOLVED\nstdout:\n%s\nstderr:\n%s", sc.name, res.runExit, out.String(), errOut.String())
	}

	// Every command ran exactly once: its line is in side.txt once.
	side, _ := os.ReadFile(filepath.Join(work, "work", "side.txt"))
	lines := map[string]int{}
	for sc := bufio.NewScanner(bytes.NewReader(side)); sc.Scan(); {
		lines[sc.Text()]++
	}
	for _, want := range []string{"s1", "s3", "s5"} {
		switch n := lines[want]; {
		case n == 0:
			res.missing++
		case n > 1:
			res.ranTwice += n - 1
		}
	}
	if res.missing+res.ranTwice != 0 || len(lines) != 3 {
		t.Errorf("%s: side effects %q: %d missing, %d run twice", sc.name, side, res.missing, res.ranTwice)
	}

	// Every effect has its events: each request one tool.started and one
	// tool.finished, not interrupted.
	//
	// bus.Read uses direct gets, which any replica of an R3 stream may
	// answer, so a read right after a node restarted can come from a
	// replica still catching up. vera run saw vera.run.finished, so a read
	// without it is such a stale read: read again (and count them).
	var evs []bus.Event
	for stale := 0; ; stale++ {
		var err error
		evs, err = c.admin.ReadRun(ctx, runID)
		if err != nil {
			t.Fatalf("%s: read run: %v", sc.name, err)
		}
		if slices.ContainsFunc(evs, func(ev bus.Event) bool { return ev.Type == catalog.TypeRunFinished }) {
			if stale > 0 {
				t.Logf("%s: %d stale reads of the run (no vera.run.finished) before a complete one", sc.name, stale)
			}
			break
		}
		if stale == 300 {
			t.Fatalf("%s: 30 s of reads of the run lack the vera.run.finished that vera run reported", sc.name)
		}
		time.Sleep(100 * time.Millisecond)
	}
	requested, started, finished := map[string]int{}, map[string]int{}, map[string]int{}
	for _, ev := range evs {
		switch ev.Type {
		case catalog.TypeToolRequested:
			var r catalog.ToolRequested
			if ev.DecodeData(&r) == nil {
				requested[r.RequestID]++
			}
		case catalog.TypeToolStarted:
			var r catalog.ToolStarted
			if ev.DecodeData(&r) == nil {
				started[r.RequestID]++
			}
		case catalog.TypeToolFinished:
			var r catalog.ToolFinished
			if ev.DecodeData(&r) == nil {
				finished[r.RequestID]++
				if r.Interrupted {
					res.interrupted++
				}
			}
		case catalog.TypeModelRequested:
			res.modelRequests++
		}
	}
	if len(requested) != 3 {
		t.Errorf("%s: %d tool requests, want 3", sc.name, len(requested))
	}
	for id := range requested {
		if finished[id] != 1 {
			res.unanswered++
		}
		if started[id] != 1 {
			res.lostStarts++
		}
	}
	if res.unanswered+res.lostStarts+res.interrupted != 0 {
		t.Errorf("%s: started %v, finished %v, %d interrupted", sc.name, started, finished, res.interrupted)
	}

	// The live files equal the replay of the export, once the projector
	// has projected every event of the run (container removal included).
	var stored int
	waitForLong(t, "the projector to catch up", 90*time.Second, func() bool {
		n, err := c.admin.ReadRun(ctx, runID)
		if err != nil {
			return false
		}
		trace, _ := os.ReadFile(filepath.Join(work, "trace.jsonl"))
		if bytes.Count(trace, []byte("\n")) == len(n) && len(n) == stored {
			return true
		}
		stored = len(n)
		time.Sleep(time.Second) // stable for a second: the run's last Docker events are in
		return false
	})
	// A Docker event of the run's end can still come after that second
	// (the engine is slow under load): the export then holds an event
	// the live files do not yet. A live projection that lags catches up;
	// a real difference stays: compare again until they agree, for a
	// while.
	for deadline := time.Now().Add(60 * time.Second); ; {
		res.filesDiffer = nil
		export := filepath.Join(t.TempDir(), runID+".jsonl")
		if _, errOut, code := runCLI(t, "events", "export", "--nats-url", c.urls(), "--run", runID, "-o", export); code != 0 {
			t.Fatalf("%s: export: %s", sc.name, errOut)
		}
		replayed := filepath.Join(t.TempDir(), "replay")
		if _, errOut, code := runCLI(t, "replay", export, "--out", replayed); code != 0 {
			t.Fatalf("%s: replay: %s", sc.name, errOut)
		}
		files, _ := os.ReadDir(replayed)
		for _, f := range files {
			if f.Name() == "metrics.prom" {
				continue
			}
			want, _ := os.ReadFile(filepath.Join(replayed, f.Name()))
			got, _ := os.ReadFile(filepath.Join(work, f.Name()))
			if !bytes.Equal(want, got) {
				res.filesDiffer = append(res.filesDiffer, f.Name())
				if time.Now().After(deadline) {
					wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
					for i := 0; i < max(len(wl), len(gl)); i++ {
						var w, g string
						if i < len(wl) {
							w = wl[i]
						}
						if i < len(gl) {
							g = gl[i]
						}
						if w != g {
							t.Logf("%s: %s line %d (of %d replayed, %d live):\nreplayed %.300s\nlive     %.300s", sc.name, f.Name(), i+1, len(wl), len(gl), w, g)
							break
						}
					}
				}
			}
		}
		if len(res.filesDiffer) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if len(res.filesDiffer) > 0 {
		t.Errorf("%s: live files differ from the replay of the export: %v", sc.name, res.filesDiffer)
	}
	return res
}

// waitForLong is waitFor with its own bound.
func waitForLong(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
