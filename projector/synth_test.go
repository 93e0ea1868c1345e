package projector

import (
	"fmt"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// synthRun returns a run of roughly 14×steps+6 events covering every
// projected file and every metric.
func synthRun(tb testing.TB, runID, workDir string, steps int) []bus.Event {
	s := &bustest.Synth{TB: tb, RunID: runID, T0: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	cfg := catalog.RunConfig{Task: "Find the release date of Python 3.13.0", WorkDir: workDir,
		Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}, MaxSteps: steps + 5}
	s.Add("cli", catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "cli:alice"})
	s.Add("agent", catalog.RunStarted{AgentID: "agent-1", Version: "test", Config: cfg})
	cid := "c0ffee0123456789"
	s.Add("sandboxd", catalog.ContainerEvent{Container: "vera-" + runID, ContainerID: cid, Action: "start",
		Attributes: map[string]string{"image": "vera-sandbox:latest", "name": "vera-" + runID}, Time: s.T0})
	ev := 0
	rules := catalog.PolicyRules()
	for st := 1; st <= steps; st++ {
		call := fmt.Sprintf("call-agent-s%04d", st)
		req := fmt.Sprintf("req-s%04d", st)
		cmd := fmt.Sprintf("curl -sL https://example.org/page/%d | grep -m3 'release date'", st)
		s.Add("agent", catalog.ModelRequested{CallID: call, Scope: "agent", Purpose: "step", Step: st, Model: "m", BaseURL: "http://127.0.0.1:1", MessageCount: 3, Attempt: 1})
		finish := "stop"
		if st%5 == 0 {
			finish = "length"
		}
		s.Add("agent", catalog.ModelResponded{CallID: call, Scope: "agent", Step: st, Model: "m", Attempt: 1, LatencyMS: 120,
			Usage: catalog.TokenUsage{Prompt: 100, Completion: 20 + int64(st%7), Total: 120 + int64(st%7)}, FinishReason: finish, Text: "THOUGHT: look"})
		s.Add("agent", catalog.AgentStep{Step: st, Thought: "look it up", Action: `{"tool":"shell","args":{"cmd":"..."}}`, ActionTool: "shell", Command: cmd, ModelCallID: call, RequestID: req, StatusUpdate: "UNRESOLVED(need source)"})
		if st%3 == 0 {
			rule := rules[(st/3)%len(rules)]
			s.Add("agent", catalog.PolicyTriggered{Rule: rule, Step: st, Effect: "nudge", Message: "nudge " + rule})
		}
		s.Add("agent", catalog.ToolRequested{RequestID: req, Requester: "agent", Tool: "shell", Command: cmd, TimeoutMS: 900000, Step: st})
		s.Add("sandboxd", catalog.ToolStarted{RequestID: req, Container: "vera-" + runID, ContainerID: cid, StartedAt: s.T0.Add(time.Duration(st) * time.Second)})
		s.Add("sandboxd", catalog.ContainerEvent{Container: "vera-" + runID, ContainerID: cid, Action: "exec_start",
			Attributes: map[string]string{"execID": fmt.Sprintf("e%d", st), "note": "has space \"q\"\nnl"}, Time: s.T0.Add(time.Duration(st) * time.Second)})
		s.Add("sandboxd", catalog.ContainerLog{Container: "vera-" + runID, ContainerID: cid, Stream: "stderr", Line: fmt.Sprintf("line %d\twith tab", st), Time: s.T0.Add(time.Duration(st) * time.Second)})
		s.Add("sandboxd", catalog.ToolFinished{RequestID: req, Requester: "agent", ExitCode: st % 2, DurationMS: 42,
			Stdout: catalog.Output{Head: "Python 3.13.0 was released on October 7, 2024.", Bytes: 46}})
		ev++
		evID := fmt.Sprintf("ev_%04d", ev)
		s.Add("agent", catalog.EvidenceRecorded{EvidenceID: evID, RequestID: req, Step: st, Command: cmd, ExitCode: st % 2,
			Excerpt: "Python 3.13.0 was released on October 7, 2024.\nsecond line", URLs: []string{fmt.Sprintf("https://example.org/page/%d", st)}})
		s.Add("agent", catalog.LedgerMove{Step: st, MoveType: "fetch", Command: cmd, Outcome: "success", EvidenceID: evID, RequestID: req, Domains: []string{"example.org"}})
		if st%2 == 0 {
			s.Add("agent", catalog.LedgerQuery{Step: st, Query: "python 3.13 release date", Family: "3.13 date python release", FamilyCount: st / 2, Outcome: "success", EvidenceID: evID, RequestID: req})
		}
		s.Add("agent", catalog.NotesAppended{Step: st, Author: "agent", Text: fmt.Sprintf("- %s: step %d found a date\n  (multi-line note)", evID, st), EvidenceIDs: []string{evID}})
	}
	s.Add("agent", catalog.AuditRequested{Round: 1, Answer: "October 7, 2024", CandidateStep: steps, EvidenceIDs: []string{"ev_0001"}, ToolCalls: 0})
	s.Add("verifier.deepverify", catalog.ModelResponded{CallID: "call-judge-r1", Scope: "judge", Model: "m", Attempt: 1, Usage: catalog.TokenUsage{Total: 900}, FinishReason: "stop"})
	s.Add("verifier.deepverify", catalog.AuditJudged{Round: 1, Explanation: "needs an official source", Score: 2, RawScore: 3,
		Instructions: []string{"Fetch https://www.python.org/downloads/release/python-3130/ and quote it", "Run `grep -n 3.13 /work/notes.md`", "Check /input/spec.txt with cat /input/spec.txt"},
		BestRound:    1, BestScore: 2, DurationMS: 42500, ModelTokens: 1800})
	s.Add("verifier.deepverify", catalog.AuditFeedback{Round: 1, Score: 2, Instructions: []string{"Fetch the official page"}, Message: "Fetch the official page"})
	s.Add("agent", catalog.AuditRequested{Round: 2, Answer: "October 7, 2024", CandidateStep: steps, ToolCalls: steps})
	s.Add("verifier.deepverify", catalog.AuditJudged{Round: 2, Explanation: "verified", Score: 4, RawScore: 4, BestRound: 2, BestScore: 4, DurationMS: 7000, ModelTokens: 900})
	s.Add("verifier.deepverify", catalog.AuditFeedback{Round: 2, Score: 4, Accepted: true, Final: true})
	s.Add("sandboxd", catalog.ContainerEvent{Container: "vera-" + runID, ContainerID: cid, Action: "die", Attributes: map[string]string{"exitCode": "0"}, Time: s.T0.Add(time.Hour)})
	s.Add("agent", catalog.RunFinished{Outcome: "RESOLVED", Answer: "October 7, 2024", Steps: steps, BestAuditRound: 2, BestScore: 4, DurationMS: 61000,
		Usage: catalog.TokenUsage{Total: 1234}, Reason: "accepted by the auditor"})
	return s.Evs
}
