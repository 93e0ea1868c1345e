package wiring_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/verifierd/deepverify"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

// The canary: a variable of the components' environment that no operator
// allowed. A task naming it must never get its value sent anywhere.
const (
	canaryVar   = "VERA_CANARY_SECRET"
	canaryValue = "canary-value"
	allowFlag   = "--allow-api-key-env " + canaryVar
)

// keyServers are the scripted model servers of one scenario, one per
// party, so that each one's requests can be counted: the agent of the run
// whose model names the canary, the agent of the other runs (no key), the
// auditor, VerifyFast.
type keyServers struct {
	agentKeyed, agent, auditor, verifyFast *scriptedmodel.Server
}

func startKeyServers(t *testing.T) keyServers {
	agentReply := scriptedmodel.Text("THOUGHT: the answer is known\nACTION: {\"tool\":\"submit\",\"args\":{\"answer\":\"42\"}}\nEVIDENCE_USED: none\nSTATUS_UPDATE: RESOLVED\n")
	auditor := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		switch u := req.LastUserMessage(); {
		case strings.HasPrefix(u, "AUDIT-DECOMPOSE"):
			return scriptedmodel.Text(`{"summary":[],"likely_errors":[],"checks":[]}`), true
		case strings.HasPrefix(u, "AUDIT-JUDGE"):
			return scriptedmodel.Text(`{"explanation":"the answer stands","score":4,"instructions":[]}`), true
		}
		return scriptedmodel.Reply{}, false
	})
	vf := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		tr := req.Transcript()
		switch {
		case strings.Contains(tr, "TASK: DECOMPOSE"):
			return scriptedmodel.Text(`{"facts":["The answer is 42."],"chains":[]}`), true
		case strings.Contains(tr, "TASK: FACT_CHECK"), strings.Contains(tr, "TASK: LOGIC_CHECK"):
			return scriptedmodel.Text(`{"findings":[]}`), true
		}
		return scriptedmodel.Reply{}, false
	})
	return keyServers{
		agentKeyed: scriptedmodel.Start(t, scriptedmodel.WithFallback(agentReply)),
		agent:      scriptedmodel.Start(t, scriptedmodel.WithFallback(agentReply)),
		auditor:    scriptedmodel.Start(t, scriptedmodel.WithRules(auditor)),
		verifyFast: scriptedmodel.Start(t, scriptedmodel.WithRules(vf)),
	}
}

// lockedLog is a log sink the components write to from many goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// keyScenario runs the agent, the auditor and VerifyFast through a Set
// whose allow-list is keys, on a bus that requires authentication, and
// submits three runs: one whose agent model names the canary, one whose
// auditor model does, one whose VerifyFast profile does.
type keyScenario struct {
	t    *testing.T
	srv  keyServers
	cli  *bus.Bus // the submitter
	adm  *bus.Bus // reads everything, raw
	logs *lockedLog
}

func runKeyScenario(t *testing.T, keys *llm.KeyEnvs) *keyScenario {
	srv, store := bustest.StartSecureServer(t)
	adm := bustest.ConnectAs(t, srv.ClientURL(), store, auth.Admin, bus.Options{}) // creates the streams
	s := &keyScenario{t: t, srv: startKeyServers(t), adm: adm, logs: &lockedLog{}}
	s.cli = bustest.ConnectAs(t, srv.ClientURL(), store, catalog.ComponentCLI, bus.Options{})

	// VerifyFast's profile "canary" verifies with a model whose key is
	// the canary variable (the operator's settings file).
	settingsFile := filepath.Join(t.TempDir(), "settings.yaml")
	yaml := fmt.Sprintf("llms:\n  canary-llm:\n    base_url: %q\n    model: scripted\n    api_key_env: %s\nprofiles:\n  canary:\n    run: canary-llm\n    verify: canary-llm\n",
		s.srv.verifyFast.URL(), canaryVar)
	if err := os.WriteFile(settingsFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	settings, err := verifyfast.LoadSettings(settingsFile)
	if err != nil {
		t.Fatal(err)
	}
	set := wiring.Set{
		Logger: slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Connect: func(ctx context.Context, identity string) (*bus.Bus, error) {
			return bus.Connect(ctx, bus.Options{URL: srv.ClientURL(), CredsFile: store.Path(identity), Source: identity, ReadOnly: true})
		},
		Agent:      &agents.Config{},
		DeepVerify: &deepverify.Config{},
		VerifyFast: &verifyfast.Config{Strategy: verifyfast.DefaultStrategy(), Settings: settings},
		KeyEnvs:    keys,
	}
	ctx, cancel := context.WithCancel(context.Background())
	var sup component.Supervisor
	sup.Start(ctx)
	set.Start(ctx, &sup)
	t.Cleanup(func() { cancel(); _ = sup.Stop() })

	text := catalog.ToolProtocolText
	s.submit("run-agent", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: s.srv.agentKeyed.URL(), Name: "scripted", APIKeyEnv: canaryVar, ToolProtocol: text}})
	s.submit("run-auditor", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: s.srv.agent.URL(), Name: "scripted", ToolProtocol: text},
		Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 2,
			Model: &catalog.ModelConfig{BaseURL: s.srv.auditor.URL(), Name: "scripted", APIKeyEnv: canaryVar}}})
	s.submit("run-verifyfast", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: s.srv.agent.URL(), Name: "scripted", ToolProtocol: text},
		VerifyFast: catalog.VerifyFastConfig{Enabled: true, Profile: "canary"}})
	return s
}

func (s *keyScenario) submit(run string, cfg catalog.RunConfig) {
	s.t.Helper()
	cfg.Task, cfg.WorkDir, cfg.MaxSteps = "What is the answer?", s.t.TempDir(), 3
	ev, err := s.cli.Events.New(run, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "cli"})
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := s.cli.Publish(context.Background(), ev); err != nil {
		s.t.Fatal(err)
	}
}

// waitFor polls the events of run until done finds what it waits for.
func (s *keyScenario) waitFor(run, what string, done func([]bus.Event) bool) []bus.Event {
	s.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs, err := s.adm.ReadRun(context.Background(), run)
		if err != nil {
			s.t.Fatal(err)
		}
		if done(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			var types []string
			for _, e := range evs {
				types = append(types, e.Type)
			}
			s.t.Fatalf("%s: no %s; events %v\nlog:\n%s", run, what, types, s.logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func payloadsOf[T any](evs []bus.Event, typ string) []T {
	var out []T
	for _, e := range evs {
		if e.Type == typ {
			var d T
			if e.DecodeData(&d) == nil {
				out = append(out, d)
			}
		}
	}
	return out
}

func finished(evs []bus.Event) bool {
	return len(payloadsOf[catalog.RunFinished](evs, catalog.TypeRunFinished)) > 0
}

// noCanary fails when the canary's value is in any stored message (the
// VERA stream and the dead letters, read raw) or in the components' log.
func (s *keyScenario) noCanary() {
	s.t.Helper()
	ctx := context.Background()
	for _, name := range []string{bus.StreamName, bus.DeadLetterStream} {
		st, err := s.adm.JetStream().Stream(ctx, name)
		if err != nil {
			s.t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			s.t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue // deleted
			}
			if bytes.Contains(m.Data, []byte(canaryValue)) || strings.Contains(fmt.Sprint(m.Header), canaryValue) {
				s.t.Errorf("stream %s message %d (%s) holds the canary's value", name, seq, m.Subject)
			}
		}
	}
	if strings.Contains(s.logs.String(), canaryValue) {
		s.t.Errorf("the components' log holds the canary's value")
	}
}

// TestKeyVariablesOnlyFromTheAllowList: real components (the agent, the
// DeepVerifier auditor, VerifyFast) started by a Set, scripted model
// servers, a canary variable in the environment. Not allowed, a task whose
// agent model names it is refused (FAILED, the reason names the flag, no
// vera.run.started), one whose auditor model names it is not audited (the
// judgement and the final feedback say why; the run ends UNRESOLVED), one
// whose VerifyFast profile names it is not scored (phase 1 says why); none
// of those servers receives a request, and the canary's value is in no
// event, dead letter or log line. Allowed (--allow-api-key-env), the same
// three runs go through and each server sees the key.
func TestKeyVariablesOnlyFromTheAllowList(t *testing.T) {
	t.Setenv(canaryVar, canaryValue)
	t.Setenv("VERA_API_KEY_ENV", "")

	t.Run("not allowed", func(t *testing.T) {
		s := runKeyScenario(t, llm.AllowKeyEnvs(llm.DefaultKeyEnv))

		evs := s.waitFor("run-agent", "vera.run.finished", finished)
		fin := payloadsOf[catalog.RunFinished](evs, catalog.TypeRunFinished)[0]
		const want = "task refused: model: api_key_env " + canaryVar + " is not one this agent may read; start it with " + allowFlag
		if fin.Outcome != catalog.OutcomeFailed || fin.Reason != want {
			t.Errorf("run-agent finished %s %q\nwant FAILED %q", fin.Outcome, fin.Reason, want)
		}
		if n := len(payloadsOf[catalog.RunStarted](evs, catalog.TypeRunStarted)); n != 0 {
			t.Errorf("run-agent: %d vera.run.started for a refused task", n)
		}

		evs = s.waitFor("run-auditor", "vera.run.finished", finished)
		fin = payloadsOf[catalog.RunFinished](evs, catalog.TypeRunFinished)[0]
		if fin.Outcome != catalog.OutcomeUnresolved || fin.Answer != "42" {
			t.Errorf("run-auditor finished %+v, want UNRESOLVED with its answer kept", fin)
		}
		judged := payloadsOf[catalog.AuditJudged](evs, catalog.TypeAuditJudged)
		fbs := payloadsOf[catalog.AuditFeedback](evs, catalog.TypeAuditFeedback)
		if len(judged) != 1 || !strings.Contains(judged[0].Explanation, "not one this auditor may read; start it with "+allowFlag) {
			t.Errorf("run-auditor judged %+v", judged)
		}
		if len(fbs) != 1 || fbs[0].Accepted || !fbs[0].Final || !strings.Contains(fbs[0].Message, allowFlag) {
			t.Errorf("run-auditor feedback %+v", fbs)
		}

		evs = s.waitFor("run-verifyfast", "VerifyFast's phase 1", func(evs []bus.Event) bool {
			return len(payloadsOf[catalog.VerifyFastPhase](evs, catalog.TypeVerifyFastPhase)) > 0
		})
		phases := payloadsOf[catalog.VerifyFastPhase](evs, catalog.TypeVerifyFastPhase)
		if len(phases) != 1 || phases[0].Phase != 1 || !strings.Contains(phases[0].ParseError, "profile canary") ||
			!strings.Contains(phases[0].ParseError, "not one this VerifyFast scorer may read; start it with "+allowFlag) {
			t.Errorf("run-verifyfast phases %+v", phases)
		}
		time.Sleep(300 * time.Millisecond) // a retry, if there were one, would come now
		if n := len(payloadsOf[catalog.VerifyFastScored](s.waitFor("run-verifyfast", "the run", finished), catalog.TypeVerifyFastScored)); n != 0 {
			t.Errorf("run-verifyfast: %d scores without a model", n)
		}

		for name, srv := range map[string]*scriptedmodel.Server{"agent": s.srv.agentKeyed, "auditor": s.srv.auditor, "VerifyFast": s.srv.verifyFast} {
			if n := srv.Count(); n != 0 {
				t.Errorf("the %s's server received %d requests", name, n)
			}
		}
		for _, r := range s.srv.agent.Requests() {
			if r.APIKey() != "" {
				t.Errorf("the keyless agent sent a key")
			}
		}
		s.noCanary()
	})

	t.Run("allowed", func(t *testing.T) {
		s := runKeyScenario(t, llm.AllowKeyEnvs(llm.DefaultKeyEnv, canaryVar))
		evs := s.waitFor("run-agent", "vera.run.finished", finished)
		if fin := payloadsOf[catalog.RunFinished](evs, catalog.TypeRunFinished)[0]; fin.Outcome != catalog.OutcomeResolved {
			t.Errorf("run-agent finished %+v, want RESOLVED", fin)
		}
		// Audited by its model (SCOUT caps the uncited answer's score).
		evs = s.waitFor("run-auditor", "vera.run.finished", finished)
		if j := payloadsOf[catalog.AuditJudged](evs, catalog.TypeAuditJudged); len(j) == 0 || j[0].Explanation != "the answer stands" || j[0].ModelCallID == "" {
			t.Errorf("run-auditor judged %+v, want the judge model's verdict", j)
		}
		s.waitFor("run-verifyfast", "vera.verifyfast.scored", func(evs []bus.Event) bool {
			return len(payloadsOf[catalog.VerifyFastScored](evs, catalog.TypeVerifyFastScored)) > 0
		})
		for name, srv := range map[string]*scriptedmodel.Server{"agent": s.srv.agentKeyed, "auditor": s.srv.auditor, "VerifyFast": s.srv.verifyFast} {
			rs := srv.Requests()
			if len(rs) == 0 {
				t.Errorf("the %s's server received no request", name)
			}
			for _, r := range rs {
				if r.APIKey() != canaryValue {
					t.Errorf("the %s sent key %q", name, r.APIKey())
				}
			}
		}
		s.noCanary()
	})
}
