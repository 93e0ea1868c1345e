package sandboxd_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/sandboxd"
)

func TestMissingImageIsAClearResult(t *testing.T) {
	f := newFixture(t, func(c *sandboxd.Config) { c.Image = "vera-sandbox:does-not-exist" })
	tf := f.exec(f.run("noimg"), req{cmd: "true"})
	if tf.ExitCode != -1 || !strings.Contains(tf.Error, "vera sandbox build") {
		t.Fatalf("%s", summarize(tf))
	}
}

func TestDockerDownIsAClearResultAndTheDaemonKeepsServing(t *testing.T) {
	_, b := bustest.New(t)
	dead, err := client.NewClientWithOpts(client.WithHost("unix://"+filepath.Join(t.TempDir(), "no-docker.sock")), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	root := t.TempDir()
	d, err := sandboxd.New(b, dead, sandboxd.Config{Image: "any", WorkRoot: filepath.Join(root, "runs"), SpoolDir: filepath.Join(root, "spool"), Logger: bustest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() { cancel(); <-done }()
	f := &fixture{t: t, b: b}
	for i, run := range []string{"down-a", "down-b"} {
		tf := f.exec(run, req{cmd: "true", id: "r" + string(rune('0'+i))})
		if tf.ExitCode != -1 || !strings.Contains(tf.Error, "Docker is not reachable") {
			t.Fatalf("run %s: %s", run, summarize(tf))
		}
	}
}

func TestGoneContainerIsRecreated(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("gone")
	f.exec(run, req{cmd: "echo keep > /work/kept.txt"})
	if err := f.docker.ContainerRemove(context.Background(), sandboxd.ContainerName(run, "agent"), container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	tf := f.exec(run, req{cmd: "cat /work/kept.txt"})
	if tf.ExitCode != 0 || tf.Stdout.Head != "keep\n" {
		t.Fatalf("after the container vanished: %s", summarize(tf))
	}
}

func TestLabModeIsPrivilegedAndSaysSo(t *testing.T) {
	f := newFixture(t, func(c *sandboxd.Config) { c.Lab = true })
	// The daemon's --lab alone changes no run: unprivileged.
	plain := f.run("nolab")
	if tf := f.exec(plain, req{cmd: "id -u"}); tf.Stdout.Head == "0\n" {
		t.Fatalf("a run that did not ask for lab mode runs as root: %s", summarize(tf))
	}
	// A run that asks for it, on a daemon that allows it, gets it.
	run := f.run("lab")
	ev, _ := f.b.Events.New(run, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "t", WorkDir: filepath.Join(t.TempDir(), "w"),
		Sandbox: catalog.SandboxConfig{Lab: true}}, SubmittedBy: "test"})
	if _, err := f.b.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	tf := f.exec(run, req{cmd: "id -u"})
	switch {
	case tf.Stdout.Head == "0\n":
		info, err := f.docker.ContainerInspect(context.Background(), sandboxd.ContainerName(run, "agent"))
		if err != nil || !info.HostConfig.Privileged {
			t.Fatalf("not privileged: %v", err)
		}
	case strings.Contains(tf.Error, "operation not permitted"):
		// This engine (itself confined) refuses privileged containers: the
		// refusal must come back as a clear result, which it did.
		t.Logf("engine refuses privileged containers; reported as: %s", tf.Error)
	default:
		t.Fatalf("lab mode: %s", summarize(tf))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs, _ := f.b.ReadRun(context.Background(), run)
		for _, ev := range evs {
			var e catalog.ContainerEvent
			if ev.Type == catalog.TypeContainerEvent && ev.DecodeData(&e) == nil && e.Action == "vera_lab_mode" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no vera_lab_mode event on the run")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestDefaultIsolation(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("iso")
	f.exec(run, req{cmd: "true"})
	info, err := f.docker.ContainerInspect(context.Background(), sandboxd.ContainerName(run, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	h := info.HostConfig
	if h.Privileged || len(h.CapDrop) != 1 || h.CapDrop[0] != "ALL" || h.PidsLimit == nil || *h.PidsLimit != 256 ||
		h.Memory != 512<<20 || h.NanoCPUs == 0 || !strings.Contains(strings.Join(h.SecurityOpt, ","), "no-new-privileges") {
		t.Fatalf("host config: privileged=%v capdrop=%v pids=%v mem=%d cpus=%d secopt=%v", h.Privileged, h.CapDrop, h.PidsLimit, h.Memory, h.NanoCPUs, h.SecurityOpt)
	}
	tf := f.exec(run, req{cmd: "grep -E '^(NoNewPrivs|CapEff)' /proc/self/status"})
	if !strings.Contains(tf.Stdout.Head, "NoNewPrivs:\t1") {
		t.Fatalf("%s", summarize(tf))
	}
}

// TestRunsExecuteInParallelAndInOrder: two runs sleep at once; within a
// run, requests run one after the other in stream order.
func TestRunsExecuteInParallelAndInOrder(t *testing.T) {
	f := newFixture(t, nil)
	a, b := f.run("par-a"), f.run("par-b")
	f.exec(a, req{cmd: "true"}) // containers up first
	f.exec(b, req{cmd: "true"})
	start := time.Now()
	var wg sync.WaitGroup
	for _, run := range []string{a, b} {
		wg.Add(1)
		go func(run string) {
			defer wg.Done()
			f.exec(run, req{cmd: "sleep 3"})
		}(run)
	}
	wg.Wait()
	if el := time.Since(start); el > 5500*time.Millisecond {
		t.Errorf("two 3s commands in different runs took %s: not parallel", el)
	}
	for i := 0; i < 5; i++ {
		f.request(a, req{cmd: "echo " + string(rune('0'+i)) + " >> /work/order", id: "ord" + string(rune('0'+i))})
	}
	tf := f.result(a, "ord4", time.Minute)
	if tf.ExitCode != 0 {
		t.Fatal(summarize(tf))
	}
	tf = f.exec(a, req{cmd: "tr -d '\\n' < /work/order"})
	if tf.Stdout.Head != "01234" {
		t.Fatalf("order %q", tf.Stdout.Head)
	}
}

// TestAuditorRequestsRunConcurrently: the auditor's requests of one run run
// at the same time, with each other and with the agent's: three auditor
// `sleep 1` and an agent `sleep 1` take about one second, not four. Three
// auditor requests arriving at once on a fresh run share one new container.
func TestAuditorRequestsRunConcurrently(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("audpar")
	ids := []string{"cold-1", "cold-2", "cold-3"}
	for _, id := range ids {
		f.request(run, req{id: id, cmd: "cat /etc/hostname", requester: catalog.RequesterAuditor})
	}
	hosts := map[string]bool{}
	for _, id := range ids {
		tf := f.result(run, id, 2*time.Minute)
		if tf.ExitCode != 0 {
			t.Fatalf("%s: %s", id, summarize(tf))
		}
		hosts[tf.Stdout.Head] = true
	}
	if len(hosts) != 1 {
		t.Fatalf("three requests on a fresh run ran in %d containers: %v", len(hosts), hosts)
	}
	f.exec(run, req{cmd: "true"}) // the agent's container up too

	start := time.Now()
	ids = []string{"aud-1", "aud-2", "aud-3", "agent-1"}
	for _, id := range ids {
		r := req{id: id, cmd: "sleep 1", requester: catalog.RequesterAuditor}
		if id == "agent-1" {
			r.requester = catalog.RequesterAgent
		}
		f.request(run, r)
	}
	for _, id := range ids {
		if tf := f.result(run, id, time.Minute); tf.ExitCode != 0 {
			t.Fatalf("%s: %s", id, summarize(tf))
		}
	}
	el := time.Since(start)
	t.Logf("four 1 s commands (three auditor, one agent) of one run took %s", el.Round(time.Millisecond))
	if el > 2*time.Second {
		t.Errorf("four 1 s commands of one run took %s: the auditor's requests were serialised", el)
	}
	if n := f.count(run, catalog.TypeToolStarted); n != 8 {
		t.Errorf("%d tool.started, want 8 (one per request)", n)
	}
}

// TestNoCommandBeforeItsStartIsStored: while the stream refuses the
// request's vera.tool.started, the command does not run (no side effect,
// no result); once the stream takes it again, the redelivered request
// runs the command exactly once, its start stored before its result.
func TestNoCommandBeforeItsStartIsStored(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("order")
	ctx := context.Background()
	// The run's tool.started subject holds one event already (another
	// request's), and the stream then refuses a second message on any
	// subject: the request below is stored (its subject is empty) but its
	// start cannot be, as when a stream cannot store during an election.
	restore := refuseSecondOnSubject(t, f, run, catalog.ToolStarted{RequestID: "other", Container: "c", StartedAt: time.Now()})
	js := f.b.JetStream()

	f.request(run, req{id: "once", cmd: "echo ran >> /work/count.txt"})
	count := filepath.Join(f.workDir(run), "count.txt")
	// Wait until sandboxd has tried (and failed) to store the start at
	// least twice: the request was delivered and redelivered.
	waitRedelivered(t, js)
	if data, err := os.ReadFile(count); err == nil {
		t.Fatalf("the command ran although its start could not be stored: count.txt = %q", data)
	}
	if n := f.count(run, catalog.TypeToolFinished); n != 0 {
		t.Fatalf("%d tool.finished while the start could not be stored", n)
	}

	restore()
	tf := f.result(run, "once", 2*time.Minute)
	if tf.ExitCode != 0 {
		t.Fatalf("after the stream recovered: %s", summarize(tf))
	}
	data, err := os.ReadFile(count)
	if err != nil || string(data) != "ran\n" {
		t.Fatalf("count.txt = %q, %v; want the command run exactly once", data, err)
	}
	evs, err := f.b.ReadRun(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var startedAt, finishedAt, starts int
	for i, ev := range evs {
		var ts catalog.ToolStarted
		var tfin catalog.ToolFinished
		switch {
		case ev.Type == catalog.TypeToolStarted && ev.DecodeData(&ts) == nil && ts.RequestID == "once":
			starts++
			startedAt = i
		case ev.Type == catalog.TypeToolFinished && ev.DecodeData(&tfin) == nil && tfin.RequestID == "once":
			finishedAt = i
		}
	}
	if starts != 1 || startedAt >= finishedAt {
		t.Fatalf("tool.started stored %d times, at %d, tool.finished at %d", starts, startedAt, finishedAt)
	}
}

// TestResultKeptWhenItCannotBeStored: a command that ran but whose
// vera.tool.finished the stream refuses is neither run again nor reported
// as interrupted when its request is redelivered: the result it had is
// stored once the stream takes it.
func TestResultKeptWhenItCannotBeStored(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("keep")
	restore := refuseSecondOnSubject(t, f, run, catalog.ToolFinished{RequestID: "other", ExitCode: 0})
	js := f.b.JetStream()

	f.request(run, req{id: "kept", cmd: "echo ran >> /work/count.txt; echo out; exit 7"})
	count := filepath.Join(f.workDir(run), "count.txt")
	waitRedelivered(t, js)
	restore()
	tf := f.result(run, "kept", 2*time.Minute)
	if tf.ExitCode != 7 || tf.Interrupted || tf.Stdout.Head != "out\n" {
		t.Fatalf("the kept result was not the command's: %s", summarize(tf))
	}
	if data, err := os.ReadFile(count); err != nil || string(data) != "ran\n" {
		t.Fatalf("count.txt = %q, %v; want the command run exactly once", data, err)
	}
}

// TestDockerEventsWhileDownAreRecorded: what happens to a run's container
// while sandboxd is stopped (here: paused and unpaused by an operator) is
// recorded when it starts again, from the last Docker event it recorded.
//
// Docker itself may report a quick pause/unpause twice: its own pause
// handler logs the event, and containerd's "paused" notice, when it arrives
// after the unpause, finds the container unpaused and logs it again (moby
// daemon/monitor.go). So the record is compared with what Docker reports
// for the container, not with one of each.
func TestDockerEventsWhileDownAreRecorded(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("down")
	f.exec(run, req{cmd: "true"})
	f.stop()
	ctx := context.Background()
	name := sandboxd.ContainerName(run, "agent")
	if err := f.docker.ContainerPause(ctx, name); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := f.docker.ContainerUnpause(ctx, name); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // Docker's "since" has one-second steps: the restart is clearly later
	f.start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		recorded := map[string]int{}
		evs, err := f.b.ReadRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			var ce catalog.ContainerEvent
			if ev.Type == catalog.TypeContainerEvent && ev.DecodeData(&ce) == nil {
				recorded[ce.Action]++
			}
		}
		reported := dockerActions(t, f.docker, name)
		if reported["pause"] == 0 || reported["unpause"] == 0 {
			t.Fatalf("Docker reports no pause/unpause of %s: %v", name, reported)
		}
		if recorded["pause"] == reported["pause"] && recorded["unpause"] == reported["unpause"] {
			if recorded["create"] != 1 || recorded["start"] != 1 {
				t.Fatalf("events before the stop were recorded again or lost: %v (Docker reports %v)", recorded, reported)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pause/unpause while sandboxd was down not recorded as Docker reports them: recorded %v, Docker %v", recorded, reported)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// dockerActions counts the events Docker reports for one container, from
// its kept history up to now.
func dockerActions(t *testing.T, docker *client.Client, name string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, errs := docker.Events(ctx, events.ListOptions{
		Since:   "0",
		Until:   strconv.FormatInt(time.Now().Unix()+1, 10),
		Filters: filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("container", name)),
	})
	got := map[string]int{}
	for {
		select {
		case m := <-msgs:
			action, _, _ := strings.Cut(string(m.Action), ":")
			got[action]++
		case err := <-errs:
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatalf("read Docker's events of %s: %v", name, err)
			}
			return got
		}
	}
}

// waitRedelivered waits until sandboxd's request consumer (made by the
// daemon as it starts: it may not exist yet) has redelivered a request.
func waitRedelivered(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for {
		var last any = "no consumer yet"
		if cons, err := js.Consumer(ctx, bus.StreamName, sandboxd.ConsumerRequests); err == nil {
			ci, err := cons.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ci.NumRedelivered > 0 {
				return
			}
			last = ci
		} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request was never redelivered: %+v", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitConsumers waits until the stream has the named consumers.
func waitConsumers(t *testing.T, js jetstream.JetStream, names ...string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(time.Minute)
	for _, name := range names {
		for {
			_, err := js.Consumer(ctx, bus.StreamName, name)
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrConsumerNotFound) {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("consumer %s never created", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// refuseSecondOnSubject stores p on run, then limits the stream to one
// message per subject with new ones refused, so that an event of p's type
// for run can no longer be stored while other, empty subjects still can.
// The returned restore (also run at cleanup) lifts the limit; it may be
// called early.
func refuseSecondOnSubject(t *testing.T, f *fixture, run string, p bus.Payload) (restore func()) {
	t.Helper()
	ctx := context.Background()
	js := f.b.JetStream()
	// nats-server's stream update and a consumer being created at the same
	// moment race inside the server (fileStore.UpdateConfig against
	// ConsumerStore, seen by -race in CI): limit the stream only once the
	// daemon has created its consumers.
	waitConsumers(t, js, sandboxd.ConsumerRequests, sandboxd.ConsumerControl)
	ev, err := f.b.Events.New(run, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orig := info.Config
	limited := orig
	limited.MaxMsgsPerSubject, limited.Discard, limited.DiscardNewPerSubject = 1, jetstream.DiscardNew, true
	if _, err := js.UpdateStream(ctx, limited); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			if _, err := js.UpdateStream(ctx, orig); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}
