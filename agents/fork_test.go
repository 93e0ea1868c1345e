package agents

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/runcompare"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// byModelStep answers the prompt of step n of a call to model name with
// replies[name][n].
func byModelStep(replies map[string]map[int]scriptedmodel.Reply) scriptedmodel.Rule {
	r := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		reply, ok := replies[req.Model][stepOf(req.LastUserMessage())]
		return reply, ok
	})
	r.Name = "by-model-step"
	return r
}

func texts(m map[int]string) map[int]scriptedmodel.Reply {
	out := map[int]scriptedmodel.Reply{}
	for k, s := range m {
		out[k] = scriptedmodel.Text(s)
	}
	return out
}

// startSandboxd runs a real sandboxd (real containers) on the harness's
// bus; netName "" is the default bridge network.
func (h *harness) startSandboxd(t *testing.T, docker *client.Client, root, netName string, runs ...string) {
	t.Helper()
	t.Cleanup(func() { removeRunContainers(docker, runs...) })
	d, err := sandboxd.New(bustest.Connect(t, h.url, bus.Options{Source: "sandboxd", ReadOnly: true}), docker, sandboxd.Config{
		Image: imagetest.Ensure(t), WorkRoot: filepath.Join(root, "runs"), SpoolDir: filepath.Join(root, "spool"),
		Network: netName, Logger: bustest.Logger(t), Memory: 512 << 20, PidsLimit: 256,
		WorkRoots: []string{root},
	})
	if err != nil {
		t.Fatal(err)
	}
	bustest.Start(t, "sandboxd", d.Run)
}

// effective returns the configuration run runID started with.
func (h *harness) effective(runID string) catalog.RunConfig {
	h.t.Helper()
	st := ofType[*catalog.RunStarted](h.events(runID))
	if len(st) == 0 {
		h.t.Fatalf("run %s has no vera.run.started", runID)
	}
	return st[0].Config
}

// submitFork submits a fork of run from at step atStep as the CLI does:
// the original's effective configuration, changed by change, a new work
// dir and Fork set.
func (h *harness) submitFork(runID, from string, atStep int, workDir string, change func(*catalog.RunConfig)) {
	h.t.Helper()
	cfg := h.effective(from)
	cfg.WorkDir = workDir
	cfg.Fork = &catalog.ForkConfig{From: from, AtStep: atStep, Note: "test"}
	if change != nil {
		change(&cfg)
	}
	ev, err := h.bus.Events.New(runID, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test",
		Labels: map[string]string{"forked_from": from, "fork_at_step": strconv.Itoa(atStep)}})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.bus.Publish(context.Background(), ev); err != nil {
		h.t.Fatal(err)
	}
}

// forkPrefixes returns the run's vera.fork.prefix events.
func forkPrefixes(ds []decoded) []*catalog.ForkPrefix { return ofType[*catalog.ForkPrefix](ds) }

// requestsFor returns the scripted server's requests for model name.
func requestsFor(srv *scriptedmodel.Server, name string) []scriptedmodel.Request {
	var out []scriptedmodel.Request
	for _, r := range srv.Requests() {
		if r.Model == name {
			out = append(out, r)
		}
	}
	return out
}

// assertSameSteps checks that the first n steps of fork equal orig's
// (as runcompare judges, and thought and action verbatim).
func assertSameSteps(t *testing.T, orig, fork []*catalog.AgentStep, n int) {
	t.Helper()
	if len(orig) < n || len(fork) < n {
		t.Fatalf("%d original and %d fork steps, want at least %d", len(orig), len(fork), n)
	}
	for i := range n {
		if d := runcompare.Steps(*orig[i], *fork[i]); d != "" || orig[i].Thought != fork[i].Thought || orig[i].Action != fork[i].Action {
			t.Errorf("step %d: %s\noriginal %+v\nfork     %+v", i+1, d, *orig[i], *fork[i])
		}
	}
}

// TestForkReproducesPrefixThenGoesLive: a run whose commands write files
// in /work is forked at step 3 with another model. The fork's first three
// steps are served from the recording (the model server sees no request
// for them) and its commands run again in its own sandbox, so its /work
// holds the files the original's had at step 3; vera.fork.prefix says
// reproduced; step 4 is asked live of the new model and differs.
func TestForkReproducesPrefixThenGoesLive(t *testing.T) {
	docker := dockertest.Client(t)
	const orig, fork = "fork-live-orig", "fork-live-fork"
	h := newHarness(t, scriptedmodel.WithRules(byModelStep(map[string]map[int]scriptedmodel.Reply{
		"scripted": texts(map[int]string{
			1: reply(shell("echo alpha > /work/a.txt"), "continuing"),
			2: reply(shell("cd /work && cat a.txt >> b.txt && cat b.txt"), "continuing"),
			3: reply(notes("a.txt and b.txt hold alpha (ev_0002)"), "continuing"),
			4: reply(shell("echo beta >> /work/b.txt"), "continuing"),
			5: reply(submitAns("beta"), "RESOLVED"),
		}),
		"scripted-b": texts(map[int]string{
			4: reply(shell("echo gamma > /work/c.txt && cat /work/b.txt"), "continuing"),
			5: reply(submitAns("gamma"), "RESOLVED"),
		}),
	})))
	root := t.TempDir()
	h.startSandboxd(t, docker, root, "", orig, fork)
	h.start(h.newAgent("a1"))

	h.submit(orig, catalog.RunConfig{WorkDir: filepath.Join(root, "work-orig"), Sandbox: catalog.SandboxConfig{ToolTimeoutMS: 60_000}})
	if fin := h.waitFinished(orig); fin.Outcome != catalog.OutcomeResolved || fin.Answer != "beta" || fin.Steps != 5 {
		t.Fatalf("original finished = %+v", fin)
	}
	before := len(h.model.Requests())

	forkWork := filepath.Join(root, "work-fork")
	h.submitFork(fork, orig, 3, forkWork, func(c *catalog.RunConfig) { c.Model.Name = "scripted-b" })
	fin := h.waitFinished(fork)
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "gamma" || fin.Steps != 5 {
		t.Fatalf("fork finished = %+v", fin)
	}
	ds, ods := h.events(fork), h.events(orig)
	assertOnce(t, ds)

	// The prefix was reproduced, and said so once.
	fp := forkPrefixes(ds)
	if len(fp) != 1 || !fp[0].Reproduced || fp[0].From != orig || fp[0].AtStep != 3 || fp[0].StepsCompared != 3 || fp[0].CommandsCompared != 2 || fp[0].Divergence != nil {
		t.Fatalf("fork prefix = %+v", fp)
	}
	steps, osteps := ofType[*catalog.AgentStep](ds), ofType[*catalog.AgentStep](ods)
	assertSameSteps(t, osteps, steps, 3)
	if steps[3].Command == osteps[3].Command || !strings.Contains(steps[3].Command, "gamma") {
		t.Errorf("step 4 = %q, want the new model's command (the original ran %q)", steps[3].Command, osteps[3].Command)
	}

	// The model was asked for steps 4 and 5 only, by the new name.
	reqs := requestsFor(h.model, "scripted-b")
	if len(reqs) != 2 || stepOf(reqs[0].LastUserMessage()) != 4 || stepOf(reqs[1].LastUserMessage()) != 5 {
		t.Errorf("%d live requests of the fork (steps %v), want steps 4 and 5", len(reqs), callsByStep(h.model))
	}
	if after := len(h.model.Requests()); after != before+2 {
		t.Errorf("%d model requests during the fork, want 2", after-before)
	}
	// Its served calls are recorded as its own, with its prompts.
	calls := map[string]int{}
	for _, r := range ofType[*catalog.ModelResponded](ds) {
		calls[r.CallID]++
	}
	for _, id := range []string{"agent-s0001", "agent-s0002", "agent-s0003", "agent-s0004", "agent-s0005"} {
		if calls[id] != 1 {
			t.Errorf("call %s recorded %d times in the fork", id, calls[id])
		}
	}

	// The fork's /work (its run dir's work/) holds the prefix's files,
	// then its own.
	for name, want := range map[string]string{"a.txt": "alpha\n", "b.txt": "alpha\n", "c.txt": "gamma\n"} {
		got, err := os.ReadFile(filepath.Join(forkWork, "work", name))
		if err != nil || string(got) != want {
			t.Errorf("fork's %s = %q (%v), want %q", name, got, err, want)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(root, "work-orig", "work", "b.txt")); string(got) != "alpha\nbeta\n" {
		t.Errorf("original's b.txt = %q", got)
	}
	h.model.AssertNoMisses(t)
}

// TestForkPrefixDoesNotReproduce: the original's first step fetched a web
// page that has changed since; the fork's re-run of that command gives
// another result, so the fork stops there: vera.fork.prefix not
// reproduced (tool_result at step 1), the run FAILED with the reason, and
// no live model call.
func TestForkPrefixDoesNotReproduce(t *testing.T) {
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	netName := dockertest.Network(t, docker)
	dockertest.WebServer(t, docker, img, netName, []dockertest.Page{{Host: "pages.example", Path: "/x.html", Body: "version one"}})
	const orig, fork = "fork-web-orig", "fork-web-fork"
	h := newHarness(t, scriptedmodel.WithRules(byModelStep(map[string]map[int]scriptedmodel.Reply{
		"scripted": texts(map[int]string{
			1: reply(shell("curl -s --max-time 10 http://pages.example/x.html"), "continuing"),
			2: "THOUGHT: done\n" + submitAns("version one") + "\nEVIDENCE_USED: ev_0001\nSTATUS_UPDATE: RESOLVED\n",
		}),
		"scripted-b": texts(map[int]string{2: reply(submitAns("whatever"), "RESOLVED")}),
	})))
	root := t.TempDir()
	h.startSandboxd(t, docker, root, netName, orig, fork)
	h.start(h.newAgent("a1"))
	sb := catalog.SandboxConfig{Network: true, ToolTimeoutMS: 60_000}
	h.submit(orig, catalog.RunConfig{WorkDir: filepath.Join(root, "work-orig"), Sandbox: sb})
	if fin := h.waitFinished(orig); fin.Outcome != catalog.OutcomeResolved || fin.Answer != "version one" {
		t.Fatalf("original finished = %+v", fin)
	}

	// The page changes: its server is replaced by one serving other text.
	list, err := docker.ContainerList(context.Background(), container.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, c := range list {
		// The test's own web server, not the original run's sandbox
		// container (named vera-fork-web-orig, on the same network), which
		// sandboxd removes on its own after the run ends.
		if _, on := c.NetworkSettings.Networks[netName]; on && c.Labels["vera.test"] == "true" && slices.ContainsFunc(c.Names, func(n string) bool { return strings.Contains(n, "-web-") }) {
			if err := docker.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}); err != nil {
				t.Fatal(err)
			}
			removed++
		}
	}
	if removed != 1 {
		t.Fatalf("removed %d web servers, want 1", removed)
	}
	dockertest.WebServer(t, docker, img, netName, []dockertest.Page{{Host: "pages.example", Path: "/x.html", Body: "version two"}})
	before := len(h.model.Requests())

	h.submitFork(fork, orig, 1, filepath.Join(root, "work-fork"), func(c *catalog.RunConfig) { c.Model.Name = "scripted-b" })
	fin := h.waitFinished(fork)
	ds := h.events(fork)
	fp := forkPrefixes(ds)
	if len(fp) != 1 || fp[0].Reproduced || fp[0].Divergence == nil {
		t.Fatalf("fork prefix = %+v", fp)
	}
	d := fp[0].Divergence
	if d.Step != 1 || d.Kind != ForkKindToolResult || !strings.Contains(d.Detail, "stdout") ||
		!strings.Contains(d.Recorded, "version one") || !strings.Contains(d.Replayed, "version two") {
		t.Errorf("divergence = %+v", *d)
	}
	if fp[0].StepsCompared != 1 || fp[0].CommandsCompared != 0 {
		t.Errorf("compared %d steps and %d commands, want 1 and 0", fp[0].StepsCompared, fp[0].CommandsCompared)
	}
	wantReason := "fork of run " + orig + " at step 1: the prefix did not reproduce at step 1 (tool_result): command result differs: stdout"
	if fin.Outcome != catalog.OutcomeFailed || fin.Reason != wantReason || fin.Steps != 1 {
		t.Errorf("fork finished = %+v, want FAILED (%s)", fin, wantReason)
	}
	if n := len(h.model.Requests()) - before; n != 0 {
		t.Errorf("%d model requests during the fork, want none", n)
	}
	if n := len(ofType[*catalog.AgentStep](ds)); n != 1 {
		t.Errorf("%d fork steps, want 1", n)
	}
}

// TestForkChangesToolProtocol: a fork may change the tool protocol. Its
// prefix is rendered and parsed with the original's protocol (so it
// reproduces), and its first live call offers its own (tools offered or
// not, and its system prompt).
func TestForkChangesToolProtocol(t *testing.T) {
	for _, tc := range []struct {
		name       string
		orig, fork catalog.ToolProtocol
	}{
		{"text-to-native", catalog.ToolProtocolText, catalog.ToolProtocolNative},
		{"native-to-text", catalog.ToolProtocolNative, catalog.ToolProtocolText},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := func(p catalog.ToolProtocol, text string, call scriptedmodel.Reply) scriptedmodel.Reply {
				if p == catalog.ToolProtocolNative {
					return call
				}
				return scriptedmodel.Text(text)
			}
			replies := func(p catalog.ToolProtocol) map[int]scriptedmodel.Reply {
				return map[int]scriptedmodel.Reply{
					1: as(p, reply(shell("ls /work"), "continuing"), toolCall("shell", callArgs("cmd", "ls /work", nil, "continuing"))),
					2: as(p, reply(shell("cat /work/x"), "continuing"), toolCall("shell", callArgs("cmd", "cat /work/x", nil, "continuing"))),
					3: as(p, reply(submitAns("done"), "RESOLVED"), toolCall("submit", callArgs("answer", "done", nil, "RESOLVED"))),
				}
			}
			live := replies(tc.fork)
			h := newHarness(t, scriptedmodel.WithRules(byModelStep(map[string]map[int]scriptedmodel.Reply{
				"scripted":   replies(tc.orig),
				"scripted-b": {3: live[3]},
			})))
			h.tools(echoTools)
			h.start(h.newAgent("a1"))
			orig, fork := "proto-orig-"+tc.name, "proto-fork-"+tc.name
			h.submit(orig, catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: tc.orig}})
			if fin := h.waitFinished(orig); fin.Outcome != catalog.OutcomeResolved {
				t.Fatalf("original finished = %+v", fin)
			}
			h.submitFork(fork, orig, 2, "/tmp/work-fork", func(c *catalog.RunConfig) {
				c.Model.Name, c.Model.ToolProtocol = "scripted-b", tc.fork
			})
			fin := h.waitFinished(fork)
			if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "done" || fin.Steps != 3 {
				t.Fatalf("fork finished = %+v", fin)
			}
			ds := h.events(fork)
			assertOnce(t, ds)
			if fp := forkPrefixes(ds); len(fp) != 1 || !fp[0].Reproduced || fp[0].StepsCompared != 2 || fp[0].CommandsCompared != 2 {
				t.Fatalf("fork prefix = %+v", fp)
			}
			steps := ofType[*catalog.AgentStep](ds)
			assertSameSteps(t, ofType[*catalog.AgentStep](h.events(orig)), steps, 2)
			for _, st := range steps {
				want := tc.orig
				if st.Step == 3 {
					want = tc.fork
				}
				if st.Protocol != want || st.FormatError != "" {
					t.Errorf("step %d: protocol %s, format error %q; want %s", st.Step, st.Protocol, st.FormatError, want)
				}
			}
			reqs := requestsFor(h.model, "scripted-b")
			if len(reqs) != 1 {
				t.Fatalf("%d live requests, want 1 (step 3)", len(reqs))
			}
			offered := len(reqs[0].Tools) > 0
			if offered != (tc.fork == catalog.ToolProtocolNative) {
				t.Errorf("the live call offered tools %v, want them offered only for native", reqs[0].Tools)
			}
			if sys := reqs[0].Messages[0].Text; sys != protocol.SystemPromptFor(tc.fork) {
				t.Errorf("the live call's system prompt is not the %s one", tc.fork)
			}
			h.model.AssertNoMisses(t)
		})
	}
}

// TestForkRefusals: a fork that cannot be taken ends FAILED at once,
// with the reason, and calls no model: after the original's first
// audited answer (the auditor's replies are not served again), past the
// original's last step, of a run that does not exist, of itself.
func TestForkRefusals(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byModelStep(map[string]map[int]scriptedmodel.Reply{
		"scripted": texts(map[int]string{
			1: reply(shell("ls"), "continuing"),
			2: "THOUGHT: done\n" + submitAns("42") + "\nEVIDENCE_USED: ev_0001\nSTATUS_UPDATE: RESOLVED\n",
		}),
	})))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	const orig = "refuse-orig"
	h.submit(orig, catalog.RunConfig{Auditor: catalog.AuditorConfig{Enabled: true}})
	waitUntil(t, "the original's audit request", func() bool { return len(ofType[*catalog.AuditRequested](h.events(orig))) > 0 })
	before := len(h.model.Requests())

	for _, tc := range []struct {
		run, from string
		at        int
		reason    string
	}{
		{"refuse-audited", orig, 2, "fork of run refuse-orig at step 2 refused: run refuse-orig submitted an answer to the auditor at step 2 (audit round 1): a fork must branch before it (at step 1 or earlier), since the auditor's replies are not served again"},
		{"refuse-past-end", orig, 3, "fork of run refuse-orig at step 3 refused: run refuse-orig has 2 step(s), fewer than 3"},
		{"refuse-missing", "no-such-run", 1, "fork of run no-such-run at step 1 refused: run no-such-run does not exist"},
		{"refuse-self", "refuse-self", 0, "fork of run refuse-self at step 0 refused: a run cannot fork itself"},
	} {
		cfg := h.effective(orig)
		cfg.Fork = &catalog.ForkConfig{From: tc.from, AtStep: tc.at}
		ev, err := h.bus.Events.New(tc.run, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.bus.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		fin := h.waitFinished(tc.run)
		if fin.Outcome != catalog.OutcomeFailed || fin.Reason != tc.reason || fin.Steps != 0 {
			t.Errorf("%s: finished = %+v, want FAILED (%s)", tc.run, fin, tc.reason)
		}
		ds := h.events(tc.run)
		if n := len(ofType[*catalog.ModelRequested](ds)) + len(ofType[*catalog.AgentStep](ds)) + len(forkPrefixes(ds)); n != 0 {
			t.Errorf("%s: %d model requests, steps or prefix events, want none", tc.run, n)
		}
	}
	if n := len(h.model.Requests()) - before; n != 0 {
		t.Errorf("%d model requests for the refused forks, want none", n)
	}
	// A fork before the audited answer is taken.
	h.submitFork("refuse-ok", orig, 1, "/tmp/work-ok", nil)
	waitUntil(t, "the fork's audit request", func() bool { return len(ofType[*catalog.AuditRequested](h.events("refuse-ok"))) > 0 })
	if fp := forkPrefixes(h.events("refuse-ok")); len(fp) != 1 || !fp[0].Reproduced {
		t.Errorf("fork at step 1: prefix %+v", fp)
	}
}

// TestForkRestartMidPrefix: an agent that stops in the middle of a
// fork's prefix (its served reply of step 2 recorded, the step not) is
// followed by another, which takes step 2 from the recorded reply and
// completes the fork: one vera.fork.prefix, every step once, no model
// request for the prefix.
func TestForkRestartMidPrefix(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byModelStep(map[string]map[int]scriptedmodel.Reply{
		"scripted": texts(fourSteps),
		"scripted-b": texts(map[int]string{
			4: "THOUGHT: done\n" + submitAns("43") + "\nEVIDENCE_USED: ev_0002\nSTATUS_UPDATE: RESOLVED\n",
		}),
	})))
	h.tools(cwdTools)
	const orig, fork = "restart-orig", "restart-fork"
	a1 := h.newAgent("a1")
	killed, stopping := make(chan struct{}), make(chan struct{})
	a1.afterModel = func(runID string, step int) error {
		if runID != fork || step != 2 {
			return nil
		}
		close(killed)
		<-stopping // the agent stops here
		return context.Canceled
	}
	stop1 := h.start(a1)
	h.submit(orig, catalog.RunConfig{})
	if fin := h.waitFinished(orig); fin.Outcome != catalog.OutcomeResolved {
		t.Fatalf("original finished = %+v", fin)
	}
	before := len(h.model.Requests())
	h.submitFork(fork, orig, 3, "/tmp/work-fork", func(c *catalog.RunConfig) { c.Model.Name = "scripted-b" })
	select {
	case <-killed:
	case <-time.After(time.Minute):
		t.Fatal("the fork's step 2 was never served")
	}
	stopped := make(chan struct{})
	go func() { stop1(); close(stopped) }()
	time.Sleep(200 * time.Millisecond) // the consumer stops fetching
	close(stopping)
	<-stopped
	ds := h.events(fork)
	if n := len(ofType[*catalog.AgentStep](ds)); n != 1 {
		t.Fatalf("%d fork steps before the restart, want 1", n)
	}
	if !hasResponse(ds, "agent-s0002") {
		t.Fatal("the served reply of step 2 is not recorded")
	}
	h.start(h.newAgent("a2"))
	fin := h.waitFinished(fork)
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "43" || fin.Steps != 4 {
		t.Fatalf("fork finished = %+v", fin)
	}
	ds = h.events(fork)
	assertOnce(t, ds)
	assertModelEventsOnce(t, ds, 4)
	if fp := forkPrefixes(ds); len(fp) != 1 || !fp[0].Reproduced || fp[0].StepsCompared != 3 || fp[0].CommandsCompared != 2 {
		t.Fatalf("fork prefix = %+v", fp)
	}
	assertSameSteps(t, ofType[*catalog.AgentStep](h.events(orig)), ofType[*catalog.AgentStep](ds), 3)
	if reqs := requestsFor(h.model, "scripted-b"); len(reqs) != 1 || stepOf(reqs[0].LastUserMessage()) != 4 {
		t.Errorf("%d live requests of the fork, want one, for step 4", len(reqs))
	}
	if n := len(h.model.Requests()) - before; n != 1 {
		t.Errorf("%d model requests during the fork, want 1", n)
	}
}
