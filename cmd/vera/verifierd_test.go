package main

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// TestUpRunsTheLogicVerifier: agent steps that repeat one shell command,
// published to `vera up`'s bus, get a vera.logic.verdict.
func TestUpRunsTheLogicVerifier(t *testing.T) {
	t.Setenv("NATS_URL", "")
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", veraDataDir(t), "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--no-sandboxd", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	if !strings.Contains(upOut.String(), "verifier.logic") || !strings.Contains(upOut.String(), "verifier.deepverify") {
		t.Fatalf("banner: %s", upOut.String())
	}
	b := bustest.Connect(t, url, bus.Options{Source: catalog.ComponentAgent, CredsFile: identityFile(catalog.ComponentAgent)})
	ctx := context.Background()
	for step := 1; step <= 3; step++ {
		ev, err := b.Events.New("loop-run", catalog.AgentStep{
			Step: step, Thought: "Let me look at the page again.", Action: `{"tool":"shell","args":{"cmd":"curl -s https://example.org"}}`,
			ActionTool: catalog.ActionShell, Command: "curl -s https://example.org",
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a logic verdict", func() bool {
		evs, _ := b.ReadRun(ctx, "loop-run")
		for _, ev := range evs {
			var v catalog.LogicVerdict
			if ev.Type == catalog.TypeLogicVerdict && ev.DecodeData(&v) == nil && v.Step == 3 && v.ThinkingEval == 0 {
				return true
			}
		}
		return false
	})
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
	if _, errOut, code := runCLI(t, "verifierd", "--hybrid"); code != exitUsage || !strings.Contains(errOut, "--judge-base-url") {
		t.Errorf("--hybrid without a judge: exit %d, %s", code, errOut)
	}
}

// TestUpRunsVerifyFastOnFinalAnswers: a finished run with VerifyFast
// enabled is scored through the real model client against a scripted
// server, and the model calls are events of the run.
func TestUpRunsVerifyFastOnFinalAnswers(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		scriptedmodel.OnLastUser(`TASK: DECOMPOSE`, scriptedmodel.Reply{Content: `{"facts":["Python 3.13.0 was released on 2024-10-07"],"chains":[]}`, Times: scriptedmodel.Forever}),
		scriptedmodel.OnLastUser(`TASK: (FACT|LOGIC)_CHECK`, scriptedmodel.Reply{Content: `{"findings":[]}`, Times: scriptedmodel.Forever}),
	))
	t.Setenv("NATS_URL", "")
	addr := bustest.FreeAddr(t)
	// No agent: the test plays it. A real agent would take the task and
	// make a model call of its own on the scripted server, racing the
	// three phases counted below.
	upOut, _, stopUp := start(t, "up", "--data-dir", veraDataDir(t), "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--no-sandboxd", "--no-agent", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	b := bustest.Connect(t, "nats://"+addr, bus.Options{Source: catalog.ComponentAgent, CredsFile: identityFile(auth.Admin)}) // plays the cli and the agent
	ctx := context.Background()
	run := "vf-run"
	model := catalog.ModelConfig{BaseURL: srv.URL(), Name: "scripted"}
	for _, p := range []bus.Payload{
		catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "When was Python 3.13.0 released?", WorkDir: t.TempDir(), Model: model,
			VerifyFast: catalog.VerifyFastConfig{Enabled: true}}, SubmittedBy: "test"},
		catalog.EvidenceRecorded{EvidenceID: "ev_0001", RequestID: "req-s0001", Step: 1, Command: "curl -s https://www.python.org/downloads/release/python-3130/",
			Excerpt: "Python 3.13.0 Release Date: Oct. 7, 2024"},
		catalog.AgentStep{Step: 2, Thought: "The page states the date.", Action: `{"tool":"submit","args":{"answer":"Python 3.13.0 was released on 2024-10-07."}}`,
			ActionTool: catalog.ActionSubmit, EvidenceUsed: []string{"ev_0001"}},
		catalog.RunFinished{Outcome: catalog.OutcomeResolved, Answer: "Python 3.13.0 was released on 2024-10-07.", Steps: 2},
	} {
		ev, err := b.Events.New(run, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	var scored catalog.VerifyFastScored
	waitFor(t, "a verifyfast score", func() bool {
		evs, _ := b.ReadRun(ctx, run)
		for _, ev := range evs {
			if ev.Type == catalog.TypeVerifyFastScored && ev.DecodeData(&scored) == nil {
				return true
			}
		}
		return false
	})
	if scored.CreditScore != 5 || scored.Zone != "GOOD" {
		t.Fatalf("score %+v", scored)
	}
	evs, _ := b.ReadRun(ctx, run)
	models := 0
	for _, ev := range evs {
		if ev.Type == catalog.TypeModelResponded {
			models++
		}
	}
	if models != 3 || srv.Count() != 3 {
		t.Fatalf("%d model.responded events, %d calls; want 3 phases", models, srv.Count())
	}
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}

// TestJudgeModelSettingsFlags: the hybrid judge takes the same model
// settings as the agent, checked before anything starts.
func TestJudgeModelSettingsFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"verifierd", "--judge-temperature", "0.2"}, "need --hybrid"},
		{[]string{"verifierd", "--hybrid", "--judge-base-url", "http://127.0.0.1:9", "--judge-model", "m", "--judge-extra-body", `{"model":"x"}`}, "--judge-extra-body"},
		{[]string{"verifierd", "--hybrid", "--judge-base-url", "http://127.0.0.1:9", "--judge-model", "m", "--judge-top-p", "1.5"}, "--judge-top-p"},
	} {
		if _, errOut, code := runCLI(t, tc.args...); code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %s (want usage error naming %s)", tc.args, code, errOut, tc.want)
		}
	}
	var f verifierFlags
	cmd := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
	f.register(cmd)
	cmd.SetArgs([]string{"--hybrid", "--judge-base-url", "http://127.0.0.1:9", "--judge-model", "m", "--judge-top-p", "0.5", "--judge-seed", "3", "--judge-extra-body", `{"chat_template_kwargs":{"enable_thinking":false}}`})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	mc, err := f.judgeConfig()
	if err != nil || mc.TopP == nil || *mc.TopP != 0.5 || mc.Seed == nil || *mc.Seed != 3 || mc.ExtraBody["chat_template_kwargs"] == nil {
		t.Fatalf("judge config %+v, %v", mc, err)
	}
}
