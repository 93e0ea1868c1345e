package component_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/docker/docker/api/types/container"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/component/componenttest"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/projector/traces"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
	"github.com/vera-run/vera/verifierd/deepverify"
	"github.com/vera-run/vera/verifierd/logic"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

// TestConformance runs the component suite against every component; a new
// component is one more line here.
func TestConformance(t *testing.T) {
	for name, subject := range map[string]func(t *testing.T) componenttest.Subject{
		catalog.ComponentAgent:      agentSubject,
		catalog.ComponentSandboxd:   sandboxdSubject,
		catalog.ComponentLogic:      logicSubject,
		catalog.ComponentDeepVerify: deepVerifySubject,
		catalog.ComponentVerifyFast: verifyFastSubject,
		catalog.ComponentProjector:  projectorSubject,
		"projector.otel":            tracesSubject,
	} {
		t.Run(name, func(t *testing.T) { componenttest.Run(t, subject(t)) })
	}
}

// publish stores p in run runID as pub.
func publish(t testing.TB, pub *bus.Bus, runID string, p bus.Payload) bus.Event {
	t.Helper()
	ev, err := pub.Events.New(runID, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pub.Publish(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

// has reports whether run runID holds an event of type typ.
func has(t testing.TB, r *bus.Bus, runID, typ string) bool {
	t.Helper()
	for rec, err := range r.Read(context.Background(), bus.ReadOptions{RunID: runID, Types: []string{typ}}) {
		if err != nil {
			t.Fatal(err)
		}
		_ = rec
		return true
	}
	return false
}

// recordingModels is a component.Models whose clients record their calls
// on b; cleanup closes them.
func recordingModels(t testing.TB, b *bus.Bus) (component.Models, func()) {
	var mu sync.Mutex
	var clients []*llm.Client
	rec := llmbus.New(b, llmbus.Options{Logger: bustest.Logger(t)})
	models := func(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
		cfg := llmbus.Config(mc)
		cfg.Recorder, cfg.Logger = rec, bustest.Logger(t)
		c, err := llm.New(cfg)
		if err == nil {
			mu.Lock()
			clients = append(clients, c)
			mu.Unlock()
		}
		return c, err
	}
	return models, func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range clients {
			c.Close()
		}
		clients = nil
	}
}

func agentSubject(t *testing.T) componenttest.Subject {
	// Every step submits; with a budget of two steps the run finishes
	// either way, with no tool call.
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text(
		"THOUGHT: done\n"+`{"tool":"submit","args":{"answer":"42"}}`+"\nEVIDENCE_USED: none\nSTATUS_UPDATE: RESOLVED\n")))
	return componenttest.Subject{
		New: func(t testing.TB, b *bus.Bus) (component.Component, func()) {
			models, cleanup := recordingModels(t, b)
			a, err := agents.New(b, agents.Config{ID: "conformance", Models: models, Logger: bustest.Logger(t),
				Backoff: []time.Duration{50 * time.Millisecond}, DrainTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return a, cleanup
		},
		Trigger: func(t testing.TB, pub *bus.Bus, runID string) {
			publish(t, pub, runID, catalog.TaskSubmitted{SubmittedBy: "conformance", RunConfig: catalog.RunConfig{
				Task: "What is six times seven?", WorkDir: "/tmp/conformance", MaxSteps: 2,
				Model: catalog.ModelConfig{BaseURL: srv.URL(), Name: "scripted"}}})
		},
		Reacted: func(t testing.TB, r *bus.Bus, runID string) bool { return has(t, r, runID, catalog.TypeRunFinished) },
		BadType: catalog.TypeTaskSubmitted,
		BadData: []componenttest.BadData{
			{Data: `{"task":"","work_dir":"/tmp/w","model":{"base_url":"http://127.0.0.1:1","name":"m"},"max_steps":0,"auditor":{"enabled":false,"max_rounds":0},"sandbox":{"network":false,"lab":false},"submitted_by":"x"}`, Want: "/task"},
			{Data: `{"task":"t","work_dir":"/tmp/w","model":{"base_url":"http://127.0.0.1:1","name":"m"},"max_steps":-3,"auditor":{"enabled":false,"max_rounds":0},"sandbox":{"network":false,"lab":false},"submitted_by":"x"}`, Want: "/max_steps"},
			{Type: catalog.TypeToolFinished, Data: `{"request_id":"req-s0001","requester":"root","exit_code":0,"duration_ms":1,"stdout":{"bytes":0},"stderr":{"bytes":0}}`, Want: "/requester"},
		},
	}
}

func logicSubject(t *testing.T) componenttest.Subject {
	return componenttest.Subject{
		New: func(t testing.TB, b *bus.Bus) (component.Component, func()) {
			l, err := logic.New(b, logic.Config{Logger: bustest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			return l, nil
		},
		Trigger: func(t testing.TB, pub *bus.Bus, runID string) {
			for i := 1; i <= 3; i++ {
				publish(t, pub, runID, catalog.AgentStep{Step: i, Thought: "list the files", Action: `{"tool":"shell","command":"ls"}`,
					ActionTool: "shell", Command: "ls", ModelCallID: fmt.Sprintf("call-agent-s%04d", i)})
			}
		},
		Reacted: func(t testing.TB, r *bus.Bus, runID string) bool { return has(t, r, runID, catalog.TypeLogicVerdict) },
		BadType: catalog.TypeAgentStep,
		BadData: []componenttest.BadData{
			{Data: `{"step":0,"thought":"t","action":"{}","model_call_id":"c"}`, Want: "/step"},
			{Data: `{"step":"two","thought":"t","action":"{}","model_call_id":"c"}`, Want: "/step"},
		},
	}
}

var vfPhase = regexp.MustCompile(`TASK: (DECOMPOSE|FACT_CHECK|LOGIC_CHECK)`)

func verifyFastSubject(t *testing.T) componenttest.Subject {
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		switch m := vfPhase.FindStringSubmatch(req.Transcript()); {
		case m == nil:
			return scriptedmodel.Reply{}, false
		case m[1] == "DECOMPOSE":
			return scriptedmodel.Text(`{"facts":["Six times seven is 42."],"chains":[]}`), true
		default:
			return scriptedmodel.Text(`{"findings":[]}`), true
		}
	})))
	return componenttest.Subject{
		New: func(t testing.TB, b *bus.Bus) (component.Component, func()) {
			models, cleanup := recordingModels(t, b)
			l, err := verifyfast.New(b, verifyfast.Config{Models: models, Logger: bustest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			return l, cleanup
		},
		Trigger: func(t testing.TB, pub *bus.Bus, runID string) {
			publish(t, pub, runID, catalog.RunStarted{AgentID: "a", Config: catalog.RunConfig{Task: "What is six times seven?", WorkDir: "/tmp/w",
				Model: catalog.ModelConfig{BaseURL: srv.URL(), Name: "m"}, VerifyFast: catalog.VerifyFastConfig{Enabled: true}}})
			publish(t, pub, runID, catalog.RunFinished{Outcome: catalog.OutcomeResolved, Answer: "42", Steps: 1})
		},
		Reacted: func(t testing.TB, r *bus.Bus, runID string) bool {
			return has(t, r, runID, catalog.TypeVerifyFastScored)
		},
		BadType: catalog.TypeAuditRequested,
		BadData: []componenttest.BadData{
			{Data: `{"round":0,"answer":"42","candidate_step":1,"tool_calls":0}`, Want: "/round"},
			{Type: catalog.TypeRunFinished, Data: `{"outcome":"MAYBE","reason":"","steps":1}`, Want: "/outcome"},
		},
	}
}

var (
	dvDecompose = regexp.MustCompile(`^AUDIT-DECOMPOSE round (\d+)`)
	dvJudge     = regexp.MustCompile(`^AUDIT-JUDGE round (\d+)`)
)

func deepVerifySubject(t *testing.T) componenttest.Subject {
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		u := req.LastUserMessage()
		switch {
		case dvDecompose.MatchString(u):
			return scriptedmodel.Text(`{"summary":[],"likely_errors":[],"checks":[]}`), true
		case dvJudge.MatchString(u):
			return scriptedmodel.Text(`{"explanation":"the answer stands","score":4,"instructions":[]}`), true
		}
		return scriptedmodel.Reply{}, false
	})))
	return componenttest.Subject{
		New: func(t testing.TB, b *bus.Bus) (component.Component, func()) {
			models, cleanup := recordingModels(t, b)
			a, err := deepverify.New(b, deepverify.Config{Models: models, Logger: bustest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			return a, cleanup
		},
		Trigger: func(t testing.TB, pub *bus.Bus, runID string) {
			publish(t, pub, runID, catalog.RunStarted{AgentID: "a", Config: catalog.RunConfig{Task: "What is six times seven?", WorkDir: "/tmp/w",
				Model: catalog.ModelConfig{BaseURL: srv.URL(), Name: "m"}, Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 1}}})
			publish(t, pub, runID, catalog.AuditRequested{Round: 1, Answer: "42", CandidateStep: 1})
		},
		Reacted: func(t testing.TB, r *bus.Bus, runID string) bool { return has(t, r, runID, catalog.TypeAuditFeedback) },
		BadType: catalog.TypeAuditRequested,
		BadData: []componenttest.BadData{
			{Data: `{"round":1,"answer":"42","candidate_step":-1,"tool_calls":0}`, Want: "/candidate_step"},
			{Data: `{"round":1,"answer":"42","candidate_step":1,"tool_calls":0,"evidence_ids":["e1"]}`, Want: "/evidence_ids"},
		},
	}
}

func projectorSubject(t *testing.T) componenttest.Subject {
	root := t.TempDir()
	dir := func(runID string) string { return filepath.Join(root, runID) }
	files := []string{"trace.jsonl", "notes.md", "evidence_ledger.jsonl", "move_ledger.jsonl"}
	return componenttest.Subject{
		New: func(t testing.TB, b *bus.Bus) (component.Component, func()) {
			f, err := projector.NewFiles(b, projector.FilesConfig{Logger: bustest.Logger(t),
				Root: func(runID string) (string, bool) { return dir(runID), true }})
			if err != nil {
				t.Fatal(err)
			}
			return f, nil
		},
		Trigger: func(t testing.TB, pub *bus.Bus, runID string) {
			publish(t, pub, runID, catalog.TaskSubmitted{SubmittedBy: "conformance", RunConfig: catalog.RunConfig{
				Task: "t", WorkDir: dir(runID), Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}}})
			publish(t, pub, runID, catalog.NotesAppended{Step: 1, Author: "agent", Text: "a note"})
			publish(t, pub, runID, catalog.RunFinished{Outcome: catalog.OutcomeUnresolved, Steps: 1})
		},
		Reacted: func(t testing.TB, r *bus.Bus, runID string) bool {
			b, err := os.ReadFile(filepath.Join(dir(runID), "trace.jsonl"))
			return err == nil && strings.Count(string(b), "\n") >= 3 && strings.Contains(string(b), catalog.TypeRunFinished)
		},
		Snapshot: func(t testing.TB, runID string) string {
			return componenttest.DigestFiles(func(n string) ([]byte, error) { return os.ReadFile(filepath.Join(dir(runID), n)) }, files...)
		},
		BadType: catalog.TypeNotesAppended,
		BadData: []componenttest.BadData{
			{Data: `{"step":1,"author":"mallory","text":"x"}`, Want: "/author"},
		},
	}
}

// tracesSubject is the live trace projector, exporting to an in-memory
// exporter (the SDK's own, from its tracetest package).
func tracesSubject(t *testing.T) componenttest.Subject {
	exp := tracetest.NewInMemoryExporter()
	spans := func(runID string) []string {
		var out []string
		for _, s := range exp.GetSpans() {
			if s.SpanContext.TraceID() == trace.TraceID(bus.TraceID(runID)) {
				out = append(out, fmt.Sprintf("%s %s %s", s.SpanContext.SpanID(), s.Parent.SpanID(), s.Name))
			}
		}
		slices.Sort(out)
		return out
	}
	return componenttest.Subject{
		New: func(t testing.TB, b *bus.Bus) (component.Component, func()) {
			sink, err := traces.NewSink(exp, traces.SinkOptions{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			l, err := traces.NewLive(b, traces.LiveConfig{Sink: sink, Hold: 50 * time.Millisecond, Logger: bustest.Logger(t)})
			if err != nil {
				t.Fatal(err)
			}
			// The in-memory exporter outlives the sink: its spans are
			// read after the component stopped.
			return l, func() { sink.Flush(context.Background()) }
		},
		Trigger: func(t testing.TB, pub *bus.Bus, runID string) {
			publish(t, pub, runID, catalog.TaskSubmitted{SubmittedBy: "conformance", RunConfig: catalog.RunConfig{
				Task: "t", WorkDir: t.TempDir(), Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}}})
			publish(t, pub, runID, catalog.ToolRequested{RequestID: "req-s0001", Requester: catalog.RequesterAgent, Tool: "shell", Command: "true", Step: 1})
			publish(t, pub, runID, catalog.ToolFinished{RequestID: "req-s0001", Requester: catalog.RequesterAgent})
			publish(t, pub, runID, catalog.NotesAppended{Step: 1, Author: "agent", Text: "a note"})
			publish(t, pub, runID, catalog.RunFinished{Outcome: catalog.OutcomeUnresolved, Steps: 1})
		},
		Reacted: func(t testing.TB, r *bus.Bus, runID string) bool {
			return slices.ContainsFunc(spans(runID), func(s string) bool { return strings.HasSuffix(s, " invoke_agent vera") })
		},
		// A backend keys spans by trace and span id: the set of them must
		// not change when the events are delivered again (the spans are
		// then exported again, with the same ids).
		Snapshot: func(t testing.TB, runID string) string { return strings.Join(slices.Compact(spans(runID)), "\n") },
		BadType:  catalog.TypeNotesAppended,
		BadData: []componenttest.BadData{
			{Data: `{"step":1,"author":"mallory","text":"x"}`, Want: "/author"},
		},
	}
}

func sandboxdSubject(t *testing.T) componenttest.Subject {
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	root := t.TempDir()
	t.Cleanup(func() {
		ctx := context.Background()
		list, _ := docker.ContainerList(ctx, container.ListOptions{All: true})
		for _, c := range list {
			for _, n := range c.Names {
				if strings.HasPrefix(n, "/vera-conf-") {
					_ = docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
				}
			}
		}
	})
	return componenttest.Subject{
		New: func(t testing.TB, b *bus.Bus) (component.Component, func()) {
			// A client per instance, closed with it: its idle connections
			// to the engine are not the component's goroutines.
			docker := dockertest.Client(t)
			d, err := sandboxd.New(b, docker, sandboxd.Config{Image: img, WorkRoot: filepath.Join(root, "runs"), SpoolDir: filepath.Join(root, "spool"),
				Logger: bustest.Logger(t), Memory: 256 << 20, PidsLimit: 128, WorkRoots: []string{root}})
			if err != nil {
				t.Fatal(err)
			}
			return d, func() { docker.Close() }
		},
		Trigger: func(t testing.TB, pub *bus.Bus, runID string) {
			work := filepath.Join(root, "work", runID)
			if err := os.MkdirAll(work, 0o755); err != nil {
				t.Fatal(err)
			}
			publish(t, pub, runID, catalog.TaskSubmitted{SubmittedBy: "conformance", RunConfig: catalog.RunConfig{
				Task: "t", WorkDir: work, Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}}})
			publish(t, pub, runID, catalog.ToolRequested{RequestID: "req-s0001", Requester: catalog.RequesterAgent, Tool: catalog.ToolShell,
				Command: "echo conformance", TimeoutMS: 30_000, Step: 1})
		},
		Reacted: func(t testing.TB, r *bus.Bus, runID string) bool { return has(t, r, runID, catalog.TypeToolFinished) },
		BadType: catalog.TypeToolRequested,
		BadData: []componenttest.BadData{
			{Data: `{"request_id":"req-s0001","requester":"root","tool":"shell","command":"id","timeout_ms":1000,"step":1}`, Want: "/requester"},
			{Data: `{"request_id":"req-s0001","requester":"agent","tool":"shell","command":"id","timeout_ms":-1,"step":1}`, Want: "/timeout_ms"},
		},
		Timeout: 120 * time.Second,
	}
}
