package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// TestBenchLoad runs `vera bench load` end to end on an embedded
// deployment (real NATS, real Docker sandboxes, the built-in load model)
// and checks its JSON report against what the runs must have done.
func TestBenchLoad(t *testing.T) {
	dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	data := veraDataDir(t)
	out, errOut, code := runCLIFor(t, 10*time.Minute, "bench", "load", "--runs", "6", "--concurrency", "3", "--steps", "3",
		"--baseline", "1", "--json", "--data-dir", data, "--image", img, "--model-latency", "50ms")
	t.Logf("vera bench load:\n%s\nstderr:\n%s", out, lastLines(errOut, 15))
	if code != 0 {
		t.Fatalf("vera bench load exited %d", code)
	}
	var rep benchReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("the report is not JSON: %v", err)
	}
	if rep.Runs != 6 || rep.Concurrency != 3 || rep.Steps != 3 || rep.BaselineRuns != 1 || rep.Deployment != "embedded" {
		t.Errorf("settings: %+v", rep)
	}
	if rep.Outcomes["RESOLVED"] != 6 || len(rep.Outcomes) != 1 || rep.BaselineOutcomes["RESOLVED"] != 1 {
		t.Errorf("outcomes %v, baseline %v; want 6 and 1 RESOLVED", rep.Outcomes, rep.BaselineOutcomes)
	}
	if rep.RunsCommandTwice != 0 || rep.ModelCallsTwice != 0 {
		t.Errorf("%d runs ran a command twice, %d model calls requested twice", rep.RunsCommandTwice, rep.ModelCallsTwice)
	}
	// Every figure counts what it should: 6 runs, 2 command steps each.
	if rep.RunWall.Count != 6 || rep.FirstCommand.Count != 6 || rep.StepLatency.Count != 12 || rep.LaterStepLatency.Count != 6 {
		t.Errorf("counts: run wall %d, first command %d, steps %d, later steps %d; want 6, 6, 12, 6", rep.RunWall.Count, rep.FirstCommand.Count, rep.StepLatency.Count, rep.LaterStepLatency.Count)
	}
	for name, p := range map[string]benchPercentiles{"run wall": rep.RunWall, "first command": rep.FirstCommand, "step": rep.StepLatency, "later step": rep.LaterStepLatency} {
		if !(0 < p.P50 && p.P50 <= p.P90 && p.P90 <= p.P99) {
			t.Errorf("%s percentiles out of order: %+v", name, p)
		}
	}
	// A step waits for the model's 50 ms; the first command comes after
	// it, and a run after its first command.
	if rep.StepLatency.P50 < 50 || rep.FirstCommand.P50 < 50 || rep.RunWall.P50 <= rep.FirstCommand.P50 {
		t.Errorf("implausible times: step p50 %v, first command p50 %v, run p50 %v", rep.StepLatency.P50, rep.FirstCommand.P50, rep.RunWall.P50)
	}
	if rep.AloneMedianMS <= 0 || rep.LoadedOverAlone <= 0 || rep.TotalOverIdeal <= 0 || rep.RunsPerSecond <= 0 {
		t.Errorf("ratios: alone %v, loaded/alone %v, total/ideal %v, runs/s %v", rep.AloneMedianMS, rep.LoadedOverAlone, rep.TotalOverIdeal, rep.RunsPerSecond)
	}
	if want := 2 * rep.AloneMedianMS; rep.IdealMS < want*0.999 || rep.IdealMS > want*1.001 {
		t.Errorf("ideal %v, want ceil(6/3) × alone = %v", rep.IdealMS, want)
	}
	// The commands ran in the runs' work dirs, once each.
	dirs, _ := filepath.Glob(filepath.Join(rep.WorkDir, "*", "work", "load.txt"))
	if len(dirs) != 7 {
		t.Errorf("%d load.txt files under %s, want 7 (1 baseline + 6 runs)", len(dirs), rep.WorkDir)
	}
	for _, f := range dirs {
		if b, _ := os.ReadFile(f); string(b) != "step 1\nstep 2\n" {
			t.Errorf("%s = %q", f, b)
		}
	}

	// Flag mistakes are usage errors that say what is wrong.
	for _, args := range [][]string{{"--runs", "0"}, {"--steps", "1"}, {"--model", "x"}, {"--concurrency", "0"}} {
		_, errOut, code := runCLI(t, append([]string{"bench", "load"}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, args[0]) {
			t.Errorf("bench load %v: exit %d, %q", args, code, errOut)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// The runs of TestTwoAgentsTwoVerifiers: three agent steps (a command, a
// note, an answer citing two domains), and an auditor that plans one
// check, answers it from the record and accepts (score 4, no SCOUT cap:
// two domains support the answer).
const (
	twoURL1 = "https://alpha.example/report"
	twoURL2 = "https://beta.example/confirm"
)

var (
	twoRunRE = regexp.MustCompile(`(?m)^PRIMARY TASK:\n(?:Distributed|Throughput) run (\d+)`)
	twoDecRE = regexp.MustCompile(`^AUDIT-DECOMPOSE round (\d+)`)
	twoChkRE = regexp.MustCompile(`^AUDIT-CHECK (\S+) step (\d+)`)
	twoJdgRE = regexp.MustCompile(`^AUDIT-JUDGE round (\d+)`)
)

// twoCallKey names a model call by what it is for: the run (from its
// task), and the agent's step or the auditor's part.
func twoCallKey(req scriptedmodel.Request) string {
	u := req.LastUserMessage()
	run := "?"
	if m := twoRunRE.FindStringSubmatch(u); m != nil {
		run = m[1]
	} else if m := regexp.MustCompile(`(?:Distributed|Throughput) run (\d+)`).FindStringSubmatch(u); m != nil {
		run = m[1]
	}
	switch {
	case twoDecRE.MatchString(u):
		return run + " decompose " + twoDecRE.FindStringSubmatch(u)[1]
	case twoChkRE.MatchString(u):
		m := twoChkRE.FindStringSubmatch(u)
		return run + " check " + m[1] + " step " + m[2]
	case twoJdgRE.MatchString(u):
		return run + " judge " + twoJdgRE.FindStringSubmatch(u)[1]
	}
	n := 0
	for _, m := range stepRE.FindAllStringSubmatch(u, -1) {
		var k int
		fmt.Sscan(m[1], &k)
		n = max(n, k)
	}
	return fmt.Sprintf("%s agent step %d", run, n+1)
}

func twoScript(latency time.Duration) scriptedmodel.Rule {
	agent := map[int]string{
		1: turn(`{"tool":"shell","args":{"cmd":"echo distributed | tee -a /work/d.txt"}}`, "none", "continuing"),
		2: turn(`{"tool":"notes_append","args":{"text":"d.txt says distributed (ev_0001)"}}`, "ev_0001", "continuing"),
		3: turn(`{"tool":"submit","args":{"answer":"distributed, as `+twoURL1+` and `+twoURL2+` report"}}`, "ev_0001", "RESOLVED"),
	}
	reply := func(s string) scriptedmodel.Reply { return scriptedmodel.Reply{Content: s, Delay: latency} }
	return scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		u := req.LastUserMessage()
		switch {
		case twoDecRE.MatchString(u):
			return reply(`{"summary":[{"step":1,"source":"/work/d.txt","finding":"distributed"}],"likely_errors":[],
"checks":[{"source":"` + twoURL1 + `","question":"Do both reports say distributed?","load_bearing":true}]}`), true
		case twoChkRE.MatchString(u):
			return reply(`{"command":"","verdict":"yes","evidence":"both say distributed","citations":["` + twoURL1 + `","` + twoURL2 + `"]}`), true
		case twoJdgRE.MatchString(u):
			return reply(`{"explanation":"Two independent reports agree.","score":4,"instructions":[]}`), true
		}
		n := 0
		for _, m := range stepRE.FindAllStringSubmatch(u, -1) {
			var k int
			fmt.Sscan(m[1], &k)
			n = max(n, k)
		}
		r, ok := agent[n+1]
		return reply(r), ok
	})
}

// twoKeyEnv names the API key variable of the runs: each process gets its
// own value, so the model server's request log says which process made
// each call (Authorization: Bearer <process>).
const twoKeyEnv = "VERA_TWO_TEST_KEY"

// TestTwoAgentsTwoVerifiers: one bus and sandboxd (vera up --no-agent
// --no-verifiers), two `vera agent` and two `vera verifierd` processes on
// the same stream, 12 audited runs at once. Every run ends RESOLVED;
// no model call, audit part or command is done twice; both agents and
// both verifier processes did some of the work. Then the same workload
// (without the auditor) with one agent process and with two, the ratio
// logged.
func TestTwoAgentsTwoVerifiers(t *testing.T) {
	docker := dockertest.Client(t)
	_ = docker
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	dir := t.TempDir()
	data := veraDataDir(t)
	bin := filepath.Join(dir, "vera")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build vera: %v\n%s", err, out)
	}
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, upErr, _ := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "", "--no-agent", "--no-verifiers",
		"--image", img, "--work-root", dir, "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })

	model := scriptedmodel.Start(t, scriptedmodel.WithRules(twoScript(100*time.Millisecond)))
	component := func(name string, args ...string) *proc {
		p := &proc{t: t, name: name, args: append([]string{bin}, args...), log: filepath.Join(dir, name+".log"),
			env: []string{"VERA_DATA_DIR=" + data, "NATS_URL=" + url, "VERA_LOG_LEVEL=info", twoKeyEnv + "=" + name}}
		p.start()
		t.Cleanup(p.kill)
		return p
	}
	// The runs name twoKeyEnv: each process must be allowed to read it.
	agent1 := component("agent-1", "agent", "--agent-id", "agent-1", "--allow-api-key-env", twoKeyEnv)
	agent2 := component("agent-2", "agent", "--agent-id", "agent-2", "--allow-api-key-env", twoKeyEnv)
	ver1 := component("verifier-1", "verifierd", "--allow-api-key-env", twoKeyEnv)
	ver2 := component("verifier-2", "verifierd", "--allow-api-key-env", twoKeyEnv)
	procs := []*proc{agent1, agent2, ver1, ver2}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("---- %s\n%s", p.name, p.tail(20))
			}
			t.Logf("---- vera up\n%s", lastLines(upErr.String(), 20))
		}
	})
	for _, p := range procs {
		waitFor(t, p.name+" consuming", func() bool { return p.count("consumer started") > 0 })
	}

	cli := bustest.ConnectAs(t, url, auth.Store{Dir: auth.DirOf(data)}, catalog.ComponentCLI, bus.Options{})
	const runs = 12
	ids, wall := twoSubmit(t, cli, dir, model.URL(), "Distributed", 0, runs, true)
	t.Logf("%d audited runs on 2 agents and 2 verifierd: %s", runs, wall.Round(time.Millisecond))

	// What each run did, from its events.
	byAgent := map[string]int{}
	for _, id := range ids {
		var started catalog.RunStarted
		var fin catalog.RunFinished
		calls, starts, judged, checks := map[string]int{}, map[string]int{}, map[int]int{}, map[string]int{}
		for rec, err := range cli.Read(context.Background(), bus.ReadOptions{RunID: id}) {
			if err != nil {
				t.Fatal(err)
			}
			ev := rec.Event
			switch ev.Type {
			case catalog.TypeRunStarted:
				ev.DecodeData(&started)
			case catalog.TypeRunFinished:
				ev.DecodeData(&fin)
			case catalog.TypeModelRequested:
				var m catalog.ModelRequested
				ev.DecodeData(&m)
				calls[fmt.Sprintf("%s attempt %d", m.CallID, m.Attempt)]++
			case catalog.TypeToolStarted:
				var m catalog.ToolStarted
				ev.DecodeData(&m)
				starts[m.RequestID]++
			case catalog.TypeAuditJudged:
				var m catalog.AuditJudged
				ev.DecodeData(&m)
				judged[m.Round]++
			case catalog.TypeAuditCheck:
				var m catalog.AuditCheck
				ev.DecodeData(&m)
				checks[fmt.Sprintf("r%d %s", m.Round, m.CheckID)]++
			}
		}
		byAgent[started.AgentID]++
		if fin.Outcome != catalog.OutcomeResolved || fin.BestScore != 4 {
			t.Errorf("run %s: %s (%s), best score %d; want RESOLVED at 4", id, fin.Outcome, fin.Reason, fin.BestScore)
		}
		if len(starts) != 1 || len(judged) != 1 || len(checks) != 1 || len(calls) != 6 {
			t.Errorf("run %s: %d commands, %d judged rounds, %d checks, %d model calls; want 1, 1, 1, 6 (3 agent + 3 auditor)", id, len(starts), len(judged), len(checks), len(calls))
		}
		for what, m := range map[string]map[string]int{"model call": calls, "command start": starts, "check": checks} {
			for k, n := range m {
				if n != 1 {
					t.Errorf("run %s: %s %s happened %d times", id, what, k, n)
				}
			}
		}
		for r, n := range judged {
			if n != 1 {
				t.Errorf("run %s: round %d judged %d times", id, r, n)
			}
		}
	}

	// The model server's log: every call once, and who made it.
	perKey, byProc := map[string]int{}, map[string]map[string]int{}
	for _, req := range model.Requests() {
		perKey[twoCallKey(req)]++
		who := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		kind := "auditor"
		if strings.Contains(twoCallKey(req), " agent step ") {
			kind = "agent"
		}
		if byProc[who] == nil {
			byProc[who] = map[string]int{}
		}
		byProc[who][kind]++
	}
	if len(perKey) != runs*6 {
		t.Errorf("%d distinct model calls, want %d", len(perKey), runs*6)
	}
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("model call %q made %d times", k, n)
		}
	}
	model.AssertNoMisses(t)
	t.Logf("runs started by agent: %v; model calls by process: %v", byAgent, byProc)
	for _, a := range []string{"agent-1", "agent-2"} {
		if byAgent[a] == 0 || byProc[a]["agent"] == 0 {
			t.Errorf("%s did no work: started %d runs, made %d agent calls", a, byAgent[a], byProc[a]["agent"])
		}
		if byProc[a]["auditor"] != 0 {
			t.Errorf("%s made %d auditor calls", a, byProc[a]["auditor"])
		}
	}
	for _, v := range []string{"verifier-1", "verifier-2"} {
		if byProc[v]["auditor"] == 0 {
			t.Errorf("%s did no audit work (model calls by process: %v)", v, byProc)
		}
		if byProc[v]["agent"] != 0 {
			t.Errorf("%s made %d agent calls", v, byProc[v]["agent"])
		}
	}
	if t.Failed() {
		return
	}

	// Throughput: the same 8 runs (no auditor) on one agent process, then
	// on two.
	const tRuns = 8
	stopProc(t, agent2)
	_, one := twoSubmit(t, cli, dir, model.URL(), "Throughput", 100, tRuns, false)
	agent2.start()
	waitFor(t, "agent-2 consuming again", func() bool { return agent2.count("consumer started") > 1 })
	_, two := twoSubmit(t, cli, dir, model.URL(), "Throughput", 200, tRuns, false)
	t.Logf("throughput, %d runs of 3 steps at 100 ms per model reply, --agent-concurrency 4 per process: 1 agent %s, 2 agents %s: 2 agents do it in %.2f× the time of 1",
		tRuns, one.Round(time.Millisecond), two.Round(time.Millisecond), two.Seconds()/one.Seconds())
}

// twoSubmit submits n runs at once (tasks "<kind> run <first+i>"), waits
// for them all to end, and returns their ids and the wall time from the
// first submit to the last end (times stored on the bus).
func twoSubmit(t *testing.T, cli *bus.Bus, dir, modelURL, kind string, first, n int, audited bool) ([]string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ids := make([]string, n)
	want := map[string]bool{}
	for i := range ids {
		ids[i] = cli.Options().IDs.NewID(time.Now())
		want[ids[i]] = true
		t.Cleanup(func() { removeContainers(t, ids[i]) })
	}
	var (
		mu         sync.Mutex
		begin, end time.Time
		done       = map[string]bool{}
	)
	ready := make(chan struct{})
	finished := make(chan struct{})
	from := time.Now().Add(-time.Second)
	go func() {
		defer close(finished)
		close(ready)
		for rec, err := range cli.Read(ctx, bus.ReadOptions{Types: []string{catalog.TypeTaskSubmitted, catalog.TypeRunFinished}, FromTime: from, Follow: true}) {
			if err != nil {
				return
			}
			if rec.Err != nil || !want[rec.Event.RunID] {
				continue
			}
			mu.Lock()
			switch rec.Event.Type {
			case catalog.TypeTaskSubmitted:
				if begin.IsZero() || rec.Stored.Before(begin) {
					begin = rec.Stored
				}
			case catalog.TypeRunFinished:
				done[rec.Event.RunID] = true
				if rec.Stored.After(end) {
					end = rec.Stored
				}
			}
			all := len(done) == n
			mu.Unlock()
			if all {
				return
			}
		}
	}()
	<-ready
	for i, id := range ids {
		work := filepath.Join(dir, "work", id)
		cfg := catalog.RunConfig{Task: fmt.Sprintf("%s run %d: write d.txt and report.", kind, first+i), WorkDir: work,
			Model:    catalog.ModelConfig{BaseURL: modelURL, Name: "scripted", APIKeyEnv: twoKeyEnv},
			MaxSteps: 8, Sandbox: catalog.SandboxConfig{Session: catalog.SessionPersistent}}
		if audited {
			cfg.Auditor = catalog.AuditorConfig{Enabled: true, MaxRounds: 2}
		}
		os.MkdirAll(work, 0o755)
		ev, err := cli.Events.New(id, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "cli:test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-finished:
	case <-ctx.Done():
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	if len(done) != n {
		t.Fatalf("%d of %d %s runs ended", len(done), n, kind)
	}
	return ids, end.Sub(begin)
}

// stopProc stops p as a service manager would (SIGTERM), so that its
// consumer's pulls end with it, and waits until it has exited.
func stopProc(t *testing.T, p *proc) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop within 30 s of SIGTERM", p.name)
		p.cmd.Process.Kill()
		<-p.done
	}
	p.cmd = nil
}
