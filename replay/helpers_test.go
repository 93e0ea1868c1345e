package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/projector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bustest.LeakIgnores...) }

// synthRun returns a run feeding every projected file and most metrics:
// steps shell steps, a repeated command from step 2 on (so that the logic
// verifier has repetitions to judge), an audit round and the end.
func synthRun(tb testing.TB, runID, workDir string, steps int) []bus.Event {
	s := &bustest.Synth{TB: tb, RunID: runID, T0: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	cfg := catalog.RunConfig{Task: "Find the release date of Python 3.13.0", WorkDir: workDir,
		Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}, MaxSteps: steps + 5}
	s.Add("cli", catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "cli:alice"})
	s.Add("agent", catalog.RunStarted{AgentID: "agent-1", Version: "test", Config: cfg})
	cid := "c0ffee0123456789"
	s.Add("sandboxd", catalog.ContainerEvent{Container: "vera-" + runID, ContainerID: cid, Action: "start",
		Attributes: map[string]string{"image": "vera-sandbox:latest"}, Time: s.T0})
	for st := 1; st <= steps; st++ {
		call := agents.CallID(st)
		req := agents.RequestID(st)
		cmd := "curl -sL https://example.org/page | grep -m3 'release date'"
		if st == 1 {
			cmd = "curl -sL https://example.org/first"
		}
		s.Add("agent", catalog.ModelRequested{CallID: call, Scope: "agent", Purpose: "step", Step: st, Model: "m", BaseURL: "http://127.0.0.1:1", MessageCount: 1,
			Messages: []catalog.Message{{Role: "user", Content: fmt.Sprintf("prompt %d", st)}}, Attempt: 1})
		s.Add("agent", catalog.ModelResponded{CallID: call, Scope: "agent", Step: st, Model: "m", Attempt: 1, LatencyMS: 120,
			Usage: catalog.TokenUsage{Prompt: 100, Completion: 20, Total: 120}, FinishReason: "stop", Text: "THOUGHT: look"})
		action := fmt.Sprintf(`{"tool":"shell","args":{"cmd":%q}}`, cmd)
		s.Add("agent", catalog.AgentStep{Step: st, Thought: "look it up", Action: action, ActionTool: "shell", Command: cmd, ModelCallID: call, RequestID: req, StatusUpdate: "UNRESOLVED(need source)"})
		if st == 3 {
			s.Add("verifier.logic", catalog.LogicVerdict{Step: 3, ThinkingEval: 0, ActionEval: 0, ThinkingEvalReason: "old verifier", VerifierType: "logic", DecidedBy: "logic", Window: 2, Action: cmd})
		}
		s.Add("agent", catalog.ToolRequested{RequestID: req, Requester: "agent", Tool: "shell", Command: cmd, TimeoutMS: 900000, Step: st})
		s.Add("sandboxd", catalog.ToolStarted{RequestID: req, Container: "vera-" + runID, ContainerID: cid, StartedAt: s.T0.Add(time.Duration(st) * time.Second)})
		s.Add("sandboxd", catalog.ContainerLog{Container: "vera-" + runID, ContainerID: cid, Stream: "stderr", Line: fmt.Sprintf("line %d\twith tab", st), Time: s.T0.Add(time.Duration(st) * time.Second)})
		s.Add("sandboxd", catalog.ToolFinished{RequestID: req, Requester: "agent", ExitCode: 0, DurationMS: 42,
			Stdout: catalog.Output{Head: "Python 3.13.0 was released on October 7, 2024.", Bytes: 46}})
		evID := fmt.Sprintf("ev_%04d", st)
		s.Add("agent", catalog.EvidenceRecorded{EvidenceID: evID, RequestID: req, Step: st, Command: cmd, Excerpt: "Python 3.13.0 was released on October 7, 2024.", URLs: []string{"https://example.org/page"}})
		s.Add("agent", catalog.LedgerMove{Step: st, MoveType: "fetch", Command: cmd, Outcome: "success", EvidenceID: evID, RequestID: req, Domains: []string{"example.org"}})
		s.Add("agent", catalog.LedgerQuery{Step: st, Query: "python 3.13 release date", Family: "3.13 date python release", FamilyCount: st, Outcome: "success", EvidenceID: evID, RequestID: req})
		s.Add("agent", catalog.NotesAppended{Step: st, Author: "agent", Text: fmt.Sprintf("- %s: step %d found a date", evID, st), EvidenceIDs: []string{evID}})
	}
	s.Add("agent", catalog.AuditRequested{Round: 1, Answer: "October 7, 2024 (ev_0001)", CandidateStep: steps, EvidenceIDs: []string{"ev_0001"}, ToolCalls: steps})
	s.Add("verifier.deepverify", catalog.AuditJudged{Round: 1, Explanation: "old", Score: 2, RawScore: 2, BestRound: 1, BestScore: 2, DurationMS: 4000, ModelTokens: 100})
	s.Add("verifier.deepverify", catalog.AuditFeedback{Round: 1, Score: 2, Final: true, Message: "old"})
	s.Add("sandboxd", catalog.ContainerEvent{Container: "vera-" + runID, ContainerID: cid, Action: "die", Attributes: map[string]string{"exitCode": "0"}, Time: s.T0.Add(time.Hour)})
	s.Add("agent", catalog.RunFinished{Outcome: "RESOLVED", Answer: "October 7, 2024", Steps: steps, DurationMS: 61000, Usage: catalog.TokenUsage{Total: 1234}})
	return s.Evs
}

func publish(tb testing.TB, b *bus.Bus, evs []bus.Event) {
	tb.Helper()
	if _, err := b.PublishBatch(context.Background(), evs); err != nil {
		tb.Fatal(err)
	}
}

func readFiles(tb testing.TB, dir string, names []string) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			tb.Fatal(err)
		}
		if data == nil {
			data = []byte{}
		}
		out[name] = data
	}
	return out
}

func sameFiles(tb testing.TB, what string, want, got map[string][]byte) {
	tb.Helper()
	for name, w := range want {
		if !bytes.Equal(w, got[name]) {
			tb.Errorf("%s: %s differs (want %d bytes, got %d)\n--- want\n%s\n--- got\n%s", what, name, len(w), len(got[name]), w, got[name])
		}
	}
}

func lastSeq(tb testing.TB, b *bus.Bus, runID string) uint64 {
	tb.Helper()
	f, _ := bus.FilterSubject(runID, "")
	seq, err := b.LastSequence(context.Background(), f)
	if err != nil {
		tb.Fatal(err)
	}
	return seq
}

// waitFor polls cond every 50ms for up to d.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitProjected waits until the live file projector has projected every
// stored event of run runID into dir: trace.jsonl has one line per event.
func waitProjected(tb testing.TB, b *bus.Bus, runID, dir string) {
	tb.Helper()
	want := countEvents(tb, b, runID)
	waitFor(tb, time.Minute, "the live projection of "+runID, func() bool {
		data, err := os.ReadFile(filepath.Join(dir, projector.FileTrace))
		return err == nil && bytes.Count(data, []byte("\n")) == want
	})
}

var eventsTotalRE = regexp.MustCompile(`(?m)^vera_events_total\{[^}]*\} (\d+)$`)

// metricsText waits until m has folded n events and returns its snapshot.
func metricsText(tb testing.TB, m *projector.Metrics, n int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	waitFor(tb, time.Minute, fmt.Sprintf("metrics of %d events", n), func() bool {
		buf.Reset()
		if err := m.WriteText(&buf); err != nil {
			tb.Fatal(err)
		}
		sum := 0
		for _, mm := range eventsTotalRE.FindAllStringSubmatch(buf.String(), -1) {
			k, _ := strconv.Atoi(mm[1])
			sum += k
		}
		return sum == n
	})
	return buf.Bytes()
}

func countEvents(tb testing.TB, b *bus.Bus, runID string) int {
	tb.Helper()
	evs, err := b.ReadRun(context.Background(), runID)
	if err != nil {
		tb.Fatal(err)
	}
	return len(evs)
}

// stepRE finds the steps of the action tail in an agent prompt.
var stepRE = regexp.MustCompile(`\n\[step (\d+)\] ACTION:`)

// promptStep is the step an agent prompt asks for: one after the last
// step of its action tail.
func promptStep(req scriptedmodel.Request) int {
	n := 0
	for _, m := range stepRE.FindAllStringSubmatch(req.LastUserMessage(), -1) {
		k, _ := strconv.Atoi(m[1])
		n = max(n, k)
	}
	return n + 1
}

// agentReply is a well-formed agent reply with the given action JSON.
func agentReply(thought, action string) string {
	return "THOUGHT: " + thought + "\n" + action + "\nEVIDENCE_USED: none\nSTATUS_UPDATE: continuing\n"
}

// scriptedAgentModel answers agent step n with replies[n-1].
func scriptedAgentModel(tb testing.TB, replies []string) *scriptedmodel.Server {
	return scriptedmodel.Start(tb, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		n := promptStep(req)
		if n < 1 || n > len(replies) {
			return scriptedmodel.Reply{}, false
		}
		return scriptedmodel.Text(replies[n-1]), true
	})))
}

// startAgent runs the real agent on the bus at url with model clients
// recording on the bus, until the test ends. A threshold > 0 puts bigger
// prompts and replies in blobs.
func startAgent(tb testing.TB, url string, threshold int) {
	tb.Helper()
	log := bustest.Logger(tb)
	// Read-only: the streams exist, and updating them while consumers are
	// created is a data race inside nats-server.
	ab := bustest.Connect(tb, url, bus.Options{Source: catalog.ComponentAgent, ReadOnly: true})
	var mu sync.Mutex
	var clients []*llm.Client
	a, err := agents.New(ab, agents.Config{ID: "test-agent", Version: "test", Logger: log,
		Models: func(_ string, mc catalog.ModelConfig) (llm.Completer, error) {
			cfg := llmbus.Config(mc)
			cfg.Recorder = llmbus.New(ab, llmbus.Options{Logger: log, Threshold: threshold})
			cfg.Logger = log
			c, err := llm.New(cfg)
			if err == nil {
				mu.Lock()
				clients = append(clients, c)
				mu.Unlock()
			}
			return c, err
		}})
	if err != nil {
		tb.Fatal(err)
	}
	stop := bustest.Start(tb, "agent", a.Run)
	tb.Cleanup(func() {
		stop()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range clients {
			c.Close()
		}
	})
}

// submitTask publishes a task for run runID.
func submitTask(tb testing.TB, b *bus.Bus, runID string, cfg catalog.RunConfig) {
	tb.Helper()
	ev, err := b.Events.New(runID, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "test"})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := b.Publish(context.Background(), ev); err != nil {
		tb.Fatal(err)
	}
}

// waitFinished waits for the run's vera.run.finished and returns it.
func waitFinished(tb testing.TB, b *bus.Bus, runID string, d time.Duration) catalog.RunFinished {
	tb.Helper()
	var fin catalog.RunFinished
	waitFor(tb, d, "the end of run "+runID, func() bool {
		evs, err := b.ReadRun(context.Background(), runID)
		if err != nil {
			tb.Fatal(err)
		}
		for _, ev := range evs {
			if ev.Type == catalog.TypeRunFinished {
				return ev.DecodeData(&fin) == nil
			}
		}
		return false
	})
	return fin
}

// exportRun writes run runID of b to a file and returns its path.
func exportRun(tb testing.TB, b *bus.Bus, runID string) string {
	tb.Helper()
	var buf bytes.Buffer
	if _, err := b.Export(context.Background(), &buf, bus.ExportOptions{RunID: runID}); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(tb.TempDir(), runID+".jsonl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

func notesOnlyReplies() []string {
	return []string{
		agentReply("write down the plan", `{"tool":"notes_append","args":{"text":"- plan: answer from what is known"}}`),
		agentReply("note the answer", `{"tool":"notes_append","args":{"text":"- the answer is 42"}}`),
		agentReply("done", `{"tool":"submit","args":{"answer":"42"}}`),
	}
}

var _ = strings.TrimSpace
