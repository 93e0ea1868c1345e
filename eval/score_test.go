package eval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// runBuilder builds one run's events as the components would store them,
// each at a given offset from t0.
type runBuilder struct {
	t      *testing.T
	runID  string
	f      *bus.Factory
	events []bus.Event
}

func newRun(t *testing.T, runID string) *runBuilder {
	return &runBuilder{t: t, runID: runID, f: &bus.Factory{Source: "test", IDs: bus.NewULIDSource(rand.New(rand.NewSource(int64(len(runID)))))}}
}

func (b *runBuilder) add(at time.Duration, p bus.Payload) bus.Event {
	b.t.Helper()
	ev, err := b.f.New(b.runID, p, bus.WithTime(t0.Add(at)))
	if err != nil {
		b.t.Fatal(err)
	}
	b.events = append(b.events, ev)
	return ev
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func blobs(m map[string][]byte) BlobReader {
	return func(_ context.Context, digest string) ([]byte, error) {
		if b, ok := m[digest]; ok {
			return b, nil
		}
		return nil, bus.ErrBlobNotFound
	}
}

// countingScorer wraps a scorer and counts its calls per answer.
type countingScorer struct {
	Scorer
	calls map[string]int
}

func (c *countingScorer) Score(ctx context.Context, t Task, answer string) (Verdict, error) {
	c.calls[answer]++
	return c.Scorer.Score(ctx, t, answer)
}

func submitted(auditor bool, rounds int) *catalog.TaskSubmitted {
	return &catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "capital?", WorkDir: "/tmp/w",
		Auditor: catalog.AuditorConfig{Enabled: auditor, MaxRounds: rounds}}, SubmittedBy: "eval:test"}
}

// An audited run of three rounds: a blob answer, a repeated answer, the
// best round kept.
func TestReadRunAudited(t *testing.T) {
	b := newRun(t, "run-aud")
	big := strings.Repeat("é", 1500) + " Paris" // 3006 bytes, two-byte runes
	bigRef := &catalog.BlobRef{Digest: bus.Digest([]byte(big)), Size: int64(len(big)), ContentType: "text/plain"}
	b.add(0, *submitted(true, 3))
	b.add(time.Second, &catalog.RunStarted{AgentID: "a1", Config: submitted(true, 3).RunConfig})
	b.add(2*time.Second, &catalog.ModelResponded{CallID: "agent-s0001", Scope: catalog.ScopeAgent, Step: 1, Attempt: 1, Usage: catalog.TokenUsage{Prompt: 10, Completion: 5, Total: 15}})
	b.add(3*time.Second, &catalog.AgentStep{Step: 1, ActionTool: catalog.ActionShell, Command: "ls", RequestID: "req-s0001"})
	tf := b.add(4*time.Second, &catalog.ToolFinished{RequestID: "req-s0001", Requester: catalog.RequesterAgent})
	b.events = append(b.events, tf) // redelivered: the same event twice
	b.add(5*time.Second, &catalog.AgentStep{Step: 2, ActionTool: catalog.ActionSubmit, Answer: "Lyon"})
	b.add(6*time.Second, &catalog.AuditRequested{Round: 1, Answer: "Lyon", CandidateStep: 2})
	b.add(7*time.Second, &catalog.ModelResponded{CallID: "v1", Scope: catalog.ScopeVerifier, Attempt: 1, Usage: catalog.TokenUsage{Prompt: 100, Completion: 50, Total: 150}})
	b.add(8*time.Second, &catalog.ToolFinished{RequestID: "req-r1-c1-t1", Requester: catalog.RequesterAuditor})
	b.add(9*time.Second, &catalog.AuditJudged{Round: 1, Score: 2, BestRound: 1, BestScore: 2})
	b.add(10*time.Second, &catalog.AuditFeedback{Round: 1, Score: 2})
	b.add(11*time.Second, &catalog.AgentStep{Step: 3, ActionTool: catalog.ActionEdit, RequestID: "req-s0003"})
	b.add(12*time.Second, &catalog.ToolFinished{RequestID: "req-s0003", Requester: catalog.RequesterAgent})
	b.add(13*time.Second, &catalog.AgentStep{Step: 4, ActionTool: catalog.ActionSubmit, AnswerFile: "/work/output/a.md", AnswerBlob: bigRef, AnswerSHA256: sha(big)})
	b.add(14*time.Second, &catalog.ToolFinished{RequestID: "req-s0004-answer", Requester: catalog.RequesterAgent})
	b.add(15*time.Second, &catalog.AuditRequested{Round: 2, AnswerBlob: bigRef, AnswerFile: "/work/output/a.md", AnswerSHA256: sha(big), CandidateStep: 4})
	b.add(16*time.Second, &catalog.AuditJudged{Round: 2, Score: 1, BestRound: 1, BestScore: 2})
	b.add(17*time.Second, &catalog.AuditFeedback{Round: 2, Score: 1})
	b.add(18*time.Second, &catalog.AgentStep{Step: 5, ActionTool: catalog.ActionSubmit, Answer: "Lyon"})
	b.add(19*time.Second, &catalog.AuditRequested{Round: 3, Answer: "Lyon", CandidateStep: 5})
	b.add(20*time.Second, &catalog.ModelResponded{CallID: "j3", Scope: catalog.ScopeEval, Attempt: 1, Usage: catalog.TokenUsage{Prompt: 1, Completion: 1}})
	b.add(21*time.Second, &catalog.AuditJudged{Round: 3, Score: 2, BestRound: 1, BestScore: 2})
	b.add(22*time.Second, &catalog.AuditFeedback{Round: 3, Score: 2, Final: true})
	b.add(90*time.Second, &catalog.RunFinished{Outcome: catalog.OutcomeUnresolved, Reason: "the auditor did not accept an answer in 3 round(s)", Answer: "Lyon", Steps: 5, BestAuditRound: 1, BestScore: 2})

	rec, err := ReadRun(t.Context(), b.events, blobs(map[string][]byte{bigRef.Digest: []byte(big)}))
	if err != nil {
		t.Fatal(err)
	}
	if rec.RunID != "run-aud" || !rec.Auditor || !rec.Finished || rec.Cancelled || rec.Outcome != catalog.OutcomeUnresolved || !rec.HasFinal || rec.FinalAnswer != "Lyon" || rec.BestAuditRound != 1 {
		t.Errorf("record %+v", rec)
	}
	// Steps 1-5; tool calls req-s0001 (once) and req-s0003, not the
	// answer read nor the auditor's; tokens 15 + 150 + (1+1).
	if rec.Steps != 5 || rec.ToolCalls != 2 {
		t.Errorf("steps %d tool calls %d, want 5 and 2", rec.Steps, rec.ToolCalls)
	}
	if want := (catalog.TokenUsage{Prompt: 111, Completion: 56, Total: 167}); rec.Tokens != want {
		t.Errorf("tokens %+v, want %+v", rec.Tokens, want)
	}
	if rec.WallMS != 90000 {
		t.Errorf("wall %d ms, want 90000", rec.WallMS)
	}
	if len(rec.Answers) != 3 {
		t.Fatalf("%d answers", len(rec.Answers))
	}
	wantAnswers := []SubmittedAnswer{
		{Round: 1, Step: 2, Answer: "Lyon", SHA256: sha("Lyon"), Audited: true, AuditScore: 2},
		{Round: 2, Step: 4, Answer: big, SHA256: sha(big), Audited: true, AuditScore: 1},
		{Round: 3, Step: 5, Answer: "Lyon", SHA256: sha("Lyon"), Audited: true, AuditScore: 2},
	}
	for i, w := range wantAnswers {
		if rec.Answers[i] != w {
			t.Errorf("answer %d: %+v, want %+v", i+1, rec.Answers[i], w)
		}
	}

	sc := &countingScorer{Scorer: mustScorer(t, ScorerSpec{Type: ScorerContains}), calls: map[string]int{}}
	task := Task{ID: "cap", Answer: "Paris", Scorer: ScorerSpec{Type: ScorerContains}, Tags: []string{"geo"}}
	got, err := ScoreRun(t.Context(), task, rec, sc)
	if err != nil {
		t.Fatal(err)
	}
	if sc.calls["Lyon"] != 1 || sc.calls[big] != 1 || len(sc.calls) != 2 {
		t.Errorf("scorer calls %d×Lyon %d×big of %d answers; want each once", sc.calls["Lyon"], sc.calls[big], len(sc.calls))
	}
	if got.TaskID != "cap" || got.RunID != "run-aud" || got.Scorer != ScorerContains || got.Outcome != catalog.OutcomeUnresolved || got.Infra ||
		got.FinalAnswer != "Lyon" || got.FinalRound != 1 || got.Correct || got.Steps != 5 || got.ToolCalls != 2 || got.WallMS != 90000 ||
		got.Tokens.Total != 167 || len(got.Tags) != 1 || got.Tags[0] != "geo" || got.Profile != "" || got.Attempt != 0 {
		t.Errorf("scored %+v", got)
	}
	if len(got.Rounds) != 3 {
		t.Fatalf("%d rounds", len(got.Rounds))
	}
	r2 := got.Rounds[1]
	if !r2.Correct || r2.Score != 1 || r2.AnswerSHA256 != sha(big) || r2.Step != 4 || r2.AuditScore != 1 || r2.Accepted || !r2.Audited {
		t.Errorf("round 2 %+v", r2)
	}
	if len(r2.Answer) != 2000 || !utf8.ValidString(r2.Answer) || !strings.HasPrefix(big, r2.Answer) {
		t.Errorf("round 2 answer cut to %d bytes (valid UTF-8 %v)", len(r2.Answer), utf8.ValidString(r2.Answer))
	}
	if r := got.Rounds[0]; r.Correct || r.Round != 1 || r.Answer != "Lyon" || r.Reason != "does not contain the reference" {
		t.Errorf("round 1 %+v", r)
	}
}

// Without the auditor: the submit step the run finished with is the one
// round; an accepted answer of an audited run is its final round.
func TestReadRunNoAuditorAndAccepted(t *testing.T) {
	b := newRun(t, "run-plain")
	b.add(0, *submitted(false, 0))
	b.add(time.Second, &catalog.AgentStep{Step: 1, ActionTool: catalog.ActionSubmit, Answer: "41"})
	b.add(2*time.Second, &catalog.AgentStep{Step: 2, ActionTool: catalog.ActionShell, RequestID: "req-s0002"})
	b.add(3*time.Second, &catalog.ToolFinished{RequestID: "req-s0002", Requester: catalog.RequesterAgent, ExitCode: 1})
	b.add(4*time.Second, &catalog.AgentStep{Step: 3, ActionTool: catalog.ActionSubmit, Answer: "It is 42."})
	b.add(5500*time.Millisecond, &catalog.RunFinished{Outcome: catalog.OutcomeResolved, Answer: "It is 42.", Steps: 3})
	rec, err := ReadRun(t.Context(), b.events, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Auditor || len(rec.Answers) != 1 || rec.Answers[0] != (SubmittedAnswer{Round: 1, Step: 3, Answer: "It is 42.", SHA256: sha("It is 42.")}) {
		t.Fatalf("record %+v", rec)
	}
	task := Task{ID: "n", Answer: "42", Scorer: ScorerSpec{Type: ScorerNumeric}}
	got, err := ScoreRun(t.Context(), task, rec, mustScorer(t, task.Scorer))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Correct || got.FinalRound != 1 || len(got.Rounds) != 1 || !got.Rounds[0].Correct || got.Rounds[0].Reason != "found 42" || got.Rounds[0].Audited ||
		got.WallMS != 5500 || got.ToolCalls != 1 || got.Steps != 3 || got.Infra {
		t.Errorf("scored %+v", got)
	}

	// Audited, accepted at round 2 (its answer repeated round 1's text).
	a := newRun(t, "run-acc")
	a.add(0, *submitted(true, 3))
	a.add(time.Second, &catalog.AuditRequested{Round: 1, Answer: "Paris", CandidateStep: 1})
	a.add(2*time.Second, &catalog.AuditJudged{Round: 1, Score: 2, BestRound: 1, BestScore: 2})
	a.add(3*time.Second, &catalog.AuditFeedback{Round: 1, Score: 2})
	a.add(4*time.Second, &catalog.AuditRequested{Round: 2, Answer: "Paris", CandidateStep: 2})
	a.add(5*time.Second, &catalog.AuditJudged{Round: 2, Score: 4, BestRound: 2, BestScore: 4})
	a.add(6*time.Second, &catalog.AuditFeedback{Round: 2, Score: 4, Accepted: true, Final: true})
	a.add(7*time.Second, &catalog.RunFinished{Outcome: catalog.OutcomeResolved, Answer: "Paris", Steps: 2, BestAuditRound: 2, BestScore: 4})
	rec, err = ReadRun(t.Context(), a.events, nil)
	if err != nil {
		t.Fatal(err)
	}
	task = Task{ID: "c", Answer: "paris"}
	got, err = ScoreRun(t.Context(), task, rec, mustScorer(t, ScorerSpec{Type: ScorerExact}))
	if err != nil {
		t.Fatal(err)
	}
	if got.FinalRound != 2 || !got.Correct || !got.Rounds[1].Accepted || got.Rounds[0].Accepted || got.Rounds[1].AuditScore != 4 || got.Scorer != ScorerExact {
		t.Errorf("scored %+v", got)
	}
	// Best round 0 (not recorded): the latest matching round.
	rec.BestAuditRound = 0
	if got, _ := ScoreRun(t.Context(), task, rec, mustScorer(t, ScorerSpec{Type: ScorerExact})); got.FinalRound != 2 {
		t.Errorf("final round %d, want 2 (the latest with the final answer)", got.FinalRound)
	}
}

// How a run's end decides Infra, Outcome and Reason.
func TestScoreRunEnds(t *testing.T) {
	task := Task{ID: "t", Answer: "x"}
	sc := mustScorer(t, ScorerSpec{Type: ScorerExact})
	cases := []struct {
		name    string
		end     []bus.Payload
		infra   bool
		outcome catalog.Outcome
		reason  string
		wall    int64
	}{
		{"cancelled by the eval", []bus.Payload{&catalog.RunCancelled{RequestedBy: "eval", Reason: "eval timeout 10m0s"}}, true, "", "cancelled: eval timeout 10m0s", 30000},
		{"cancelled", []bus.Payload{&catalog.RunCancelled{RequestedBy: "cli"}}, true, "", "cancelled", 30000},
		{"never finished", nil, true, "", "the run did not finish", 20000},
		{"model call failed", []bus.Payload{&catalog.RunFinished{Outcome: catalog.OutcomeFailed, Reason: "model call failed: llm: connection refused"}}, true, catalog.OutcomeFailed, "model call failed: llm: connection refused", 30000},
		{"model client", []bus.Payload{&catalog.RunFinished{Outcome: catalog.OutcomeFailed, Reason: "model client: llm: variable KEY is not set"}}, true, catalog.OutcomeFailed, "", 30000},
		{"sandbox", []bus.Payload{&catalog.RunFinished{Outcome: catalog.OutcomeFailed, Reason: "Docker daemon unavailable"}}, true, catalog.OutcomeFailed, "", 30000},
		{"task refused", []bus.Payload{&catalog.RunFinished{Outcome: catalog.OutcomeFailed, Reason: "task refused: a secret in the run's settings"}}, false, catalog.OutcomeFailed, "", 30000},
		{"step budget", []bus.Payload{&catalog.RunFinished{Outcome: catalog.OutcomeUnresolved, Reason: "step budget exhausted"}}, false, catalog.OutcomeUnresolved, "step budget exhausted", 30000},
		{"resolved, timeout in the reason text", []bus.Payload{&catalog.RunFinished{Outcome: catalog.OutcomeUnresolved, Reason: "the site timed out"}}, false, catalog.OutcomeUnresolved, "", 30000},
		{"finished after a cancel", []bus.Payload{&catalog.RunFinished{Outcome: catalog.OutcomeUnresolved, Reason: "finalization stop"}, &catalog.RunCancelled{RequestedBy: "cli"}}, false, catalog.OutcomeUnresolved, "finalization stop", 30000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newRun(t, "run-end")
			b.add(0, *submitted(false, 0))
			b.add(20*time.Second, &catalog.AgentStep{Step: 1, ActionTool: catalog.ActionShell, RequestID: "req-s0001"})
			for i, p := range c.end {
				b.add(30*time.Second+time.Duration(i)*time.Second, p)
			}
			rec, err := ReadRun(t.Context(), b.events, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ScoreRun(t.Context(), task, rec, sc)
			if err != nil {
				t.Fatal(err)
			}
			if got.Infra != c.infra || got.Outcome != c.outcome || (c.reason != "" && got.Reason != c.reason) || got.WallMS != c.wall {
				t.Errorf("infra %v outcome %q reason %q wall %d; want %v %q %q %d", got.Infra, got.Outcome, got.Reason, got.WallMS, c.infra, c.outcome, c.reason, c.wall)
			}
			if got.Correct || got.FinalRound != 0 || len(got.Rounds) != 0 || got.FinalAnswer != "" {
				t.Errorf("a run without an answer scored %+v", got)
			}
		})
	}
}

func TestReadRunErrors(t *testing.T) {
	ref := &catalog.BlobRef{Digest: bus.Digest([]byte("gone")), Size: 4}
	b := newRun(t, "run-err")
	b.add(0, *submitted(false, 0))
	b.add(time.Second, &catalog.RunFinished{Outcome: catalog.OutcomeResolved, AnswerBlob: ref, Steps: 1})
	if _, err := ReadRun(t.Context(), b.events, blobs(nil)); err == nil || !errors.Is(err, bus.ErrBlobNotFound) || !strings.Contains(err.Error(), "final answer") {
		t.Errorf("missing blob: %v", err)
	}
	if _, err := ReadRun(t.Context(), b.events, nil); err == nil {
		t.Error("a blob answer without a blob reader: no error")
	}
	if _, err := ReadRun(t.Context(), nil, nil); err == nil {
		t.Error("no events: no error")
	}
	bad := newRun(t, "run-bad")
	ev := bad.add(0, *submitted(false, 0))
	ev.Type, ev.Data = catalog.TypeRunFinished, []byte(`{"outcome": 5}`)
	if _, err := ReadRun(t.Context(), []bus.Event{ev}, nil); err == nil || !errors.Is(err, catalog.ErrInvalidData) {
		t.Errorf("undecodable data: %v", err)
	}
}

// A scorer error (a judge that failed) fails the scoring.
func TestScoreRunScorerError(t *testing.T) {
	rec := RunRecord{RunID: "r", Finished: true, Outcome: catalog.OutcomeResolved, HasFinal: true, FinalAnswer: "a",
		Answers: []SubmittedAnswer{{Round: 1, Answer: "a"}}}
	_, err := ScoreRun(t.Context(), Task{ID: "t", Answer: "("}, rec, mustScorer(t, ScorerSpec{Type: ScorerRegex}))
	if err == nil || !strings.Contains(err.Error(), "task t: score the answer of round 1") {
		t.Errorf("error %v", err)
	}
}

func TestCutAnswer(t *testing.T) {
	if s := strings.Repeat("a", 2000); CutAnswer(s) != s {
		t.Error("a 2000-byte answer was cut")
	}
	s := strings.Repeat("a", 1999) + "€" // the euro sign straddles byte 2000
	if got := CutAnswer(s); got != strings.Repeat("a", 1999) {
		t.Errorf("cut to %d bytes", len(got))
	}
}
