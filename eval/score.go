package eval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// MaxAnswerBytes is how much of an answer EvalRoundScore.Answer and
// EvalTaskScored.FinalAnswer keep (cut on a rune boundary).
const MaxAnswerBytes = 2000

// RunRecord is what scoring needs of a finished (or abandoned) run, read
// from its events by ReadRun.
type RunRecord struct {
	RunID string
	// Auditor reports whether the run had the auditor on (its
	// vera.run.started configuration, else its vera.task.submitted one).
	Auditor bool
	// Answers are the answers the run submitted, in order: with the
	// auditor, one per vera.audit.requested (by round); without, the one
	// submit step whose answer the run finished with.
	Answers []SubmittedAnswer

	// Finished: the run has a vera.run.finished; Cancelled: it has a
	// vera.run.cancelled and no vera.run.finished.
	Finished  bool
	Cancelled bool
	Outcome   catalog.Outcome
	// Reason is the run.finished reason, or the cancellation's.
	Reason string
	// HasFinal: the run finished with an answer (FinalAnswer, whole).
	HasFinal       bool
	FinalAnswer    string
	FinalSHA256    string // lowercase hex SHA-256 of FinalAnswer
	BestAuditRound int

	// Steps counts the agent's steps (distinct vera.agent.step numbers).
	Steps int
	// ToolCalls counts the agent's finished tool calls (shell and edit),
	// the reads of answer files excepted.
	ToolCalls int
	// Tokens sums the usage of every vera.model.responded of the run,
	// whatever its scope (agent, auditor, VerifyFast, logic).
	Tokens catalog.TokenUsage
	// Submitted is the time of vera.task.submitted; Ended that of
	// vera.run.finished or vera.run.cancelled, else of the run's last
	// event. WallMS is Ended − Submitted (0 without a submission).
	Submitted, Ended time.Time
	WallMS           int64
}

// SubmittedAnswer is one answer a run submitted.
type SubmittedAnswer struct {
	Round int // from 1
	Step  int // the agent step that submitted it
	// Answer is the whole answer; SHA256 its digest in lowercase hex (the
	// event's answer_sha256 when it carried one, else computed).
	Answer string
	SHA256 string
	// The auditor's decision on it, when audited (vera.audit.judged and
	// vera.audit.feedback of its round).
	Audited    bool
	AuditScore int
	Accepted   bool
}

// BlobReader reads a blob by digest ("sha256:…"), e.g. (*bus.Bus).GetBlob.
type BlobReader func(ctx context.Context, digest string) ([]byte, error)

// ReadRun extracts what scoring needs from one run's stored events, in
// stream order (as bus.Bus.Read returns them for the run). The run is the
// first event's run id; events of another run id are skipped, an event
// repeated with the same id counts once, and types the catalogue does not
// know are skipped. Answers too big to ride in their event are read with
// blob (for example (*bus.Bus).GetBlob); a blob that cannot be read is an
// error, as is an event whose data does not decode, or no event at all.
//
// The answers: with the auditor on, every vera.audit.requested (its
// round, answer, answer_sha256 and candidate_step) with its round's
// vera.audit.judged score and vera.audit.feedback acceptance; without
// it, the submit vera.agent.step whose answer the run finished with (the
// latest such step; when none matches, the final answer itself as round
// 1 at the run's last step). A run without the auditor that finished
// without an answer has no answers.
func ReadRun(ctx context.Context, events []bus.Event, blob BlobReader) (RunRecord, error) {
	var (
		rec       RunRecord
		seen      = map[string]bool{}
		steps     = map[int]bool{}
		calls     = map[string]bool{}
		submits   []catalog.AgentStep
		audits    = map[int]catalog.AuditRequested{}
		judged    = map[int]catalog.AuditJudged{}
		feedback  = map[int]catalog.AuditFeedback{}
		finished  *catalog.RunFinished
		cancelled *catalog.RunCancelled
		submitted *catalog.TaskSubmitted
		started   *catalog.RunStarted
		last      time.Time
	)
	for _, ev := range events {
		if seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		if rec.RunID == "" {
			rec.RunID = ev.RunID
		} else if ev.RunID != rec.RunID {
			continue
		}
		if _, known := catalog.Lookup(ev.Type); !known {
			continue // a type this version does not know: not scoring's business
		}
		if ev.Time.After(last) {
			last = ev.Time
		}
		p, err := catalog.Decode(ev.Type, ev.Data)
		if err != nil {
			return RunRecord{}, fmt.Errorf("run %s: event %s: %w", ev.RunID, ev.ID, err)
		}
		switch d := p.(type) {
		case *catalog.TaskSubmitted:
			if submitted == nil {
				submitted = d
				rec.Submitted = ev.Time
			}
		case *catalog.RunStarted:
			if started == nil {
				started = d
			}
		case *catalog.AgentStep:
			steps[d.Step] = true
			if d.ActionTool == catalog.ActionSubmit {
				submits = append(submits, *d)
			}
		case *catalog.ToolFinished:
			if d.Requester == catalog.RequesterAgent && !strings.HasSuffix(d.RequestID, "-answer") {
				calls[d.RequestID] = true
			}
		case *catalog.ModelResponded:
			addUsage(&rec.Tokens, d.Usage)
		case *catalog.AuditRequested:
			if _, dup := audits[d.Round]; !dup {
				audits[d.Round] = *d
			}
		case *catalog.AuditJudged:
			if _, dup := judged[d.Round]; !dup {
				judged[d.Round] = *d
			}
		case *catalog.AuditFeedback:
			if _, dup := feedback[d.Round]; !dup {
				feedback[d.Round] = *d
			}
		case *catalog.RunFinished:
			if finished == nil {
				finished = d
				rec.Ended = ev.Time
			}
		case *catalog.RunCancelled:
			if cancelled == nil {
				cancelled = d
				if finished == nil {
					rec.Ended = ev.Time
				}
			}
		}
	}
	if rec.RunID == "" {
		return RunRecord{}, fmt.Errorf("no events")
	}
	switch {
	case started != nil:
		rec.Auditor = started.Config.Auditor.Enabled
	case submitted != nil:
		rec.Auditor = submitted.Auditor.Enabled
	}
	rec.Steps = len(steps)
	rec.ToolCalls = len(calls)
	if finished != nil {
		rec.Finished = true
		rec.Outcome, rec.Reason, rec.BestAuditRound = finished.Outcome, finished.Reason, finished.BestAuditRound
		answer, ok, err := readAnswer(ctx, blob, finished.Answer, finished.AnswerBlob)
		if err != nil {
			return RunRecord{}, fmt.Errorf("run %s: the final answer: %w", rec.RunID, err)
		}
		if ok {
			rec.HasFinal, rec.FinalAnswer, rec.FinalSHA256 = true, answer, digestOf(answer, "")
		}
	} else if cancelled != nil {
		rec.Cancelled = true
		rec.Reason = cancelled.Reason
	}
	if rec.Ended.IsZero() {
		rec.Ended = last
	}
	if !rec.Submitted.IsZero() && rec.Ended.After(rec.Submitted) {
		rec.WallMS = rec.Ended.Sub(rec.Submitted).Milliseconds()
	}

	if rec.Auditor || len(audits) > 0 {
		rounds := make([]int, 0, len(audits))
		for r := range audits {
			rounds = append(rounds, r)
		}
		slices.Sort(rounds)
		for _, r := range rounds {
			a := audits[r]
			answer, _, err := readAnswer(ctx, blob, a.Answer, a.AnswerBlob)
			if err != nil {
				return RunRecord{}, fmt.Errorf("run %s: the answer of audit round %d: %w", rec.RunID, r, err)
			}
			sa := SubmittedAnswer{Round: r, Step: a.CandidateStep, Answer: answer, SHA256: digestOf(answer, a.AnswerSHA256)}
			if j, ok := judged[r]; ok {
				sa.Audited, sa.AuditScore = true, j.Score
			}
			if f, ok := feedback[r]; ok {
				sa.Audited, sa.Accepted = true, f.Accepted
				if sa.AuditScore == 0 {
					sa.AuditScore = f.Score
				}
			}
			rec.Answers = append(rec.Answers, sa)
		}
		return rec, nil
	}
	if !rec.HasFinal {
		return rec, nil
	}
	// Without the auditor: the submit step the run finished with.
	for i := len(submits) - 1; i >= 0; i-- {
		st := submits[i]
		answer, ok, err := readAnswer(ctx, blob, st.Answer, st.AnswerBlob)
		if err != nil {
			return RunRecord{}, fmt.Errorf("run %s: the answer of step %d: %w", rec.RunID, st.Step, err)
		}
		if ok && digestOf(answer, "") == rec.FinalSHA256 {
			rec.Answers = []SubmittedAnswer{{Round: 1, Step: st.Step, Answer: answer, SHA256: digestOf(answer, st.AnswerSHA256)}}
			return rec, nil
		}
	}
	rec.Answers = []SubmittedAnswer{{Round: 1, Step: finished.Steps, Answer: rec.FinalAnswer, SHA256: rec.FinalSHA256}}
	return rec, nil
}

// readAnswer returns an answer carried inline or by blob; ok is false
// when there is none.
func readAnswer(ctx context.Context, blob BlobReader, inline string, ref *catalog.BlobRef) (string, bool, error) {
	if ref == nil {
		return inline, inline != "", nil
	}
	if blob == nil {
		return "", false, fmt.Errorf("answer in blob %s, and no blob reader", ref.Digest)
	}
	data, err := blob(ctx, ref.Digest)
	if err != nil {
		return "", false, fmt.Errorf("read blob %s: %w", ref.Digest, err)
	}
	return string(data), true, nil
}

// digestOf returns the lowercase hex SHA-256 of s, or given when set.
func digestOf(s, given string) string {
	if given != "" {
		return strings.ToLower(strings.TrimPrefix(given, "sha256:"))
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func addUsage(t *catalog.TokenUsage, u catalog.TokenUsage) {
	t.Prompt += u.Prompt
	t.Completion += u.Completion
	t.Reasoning += u.Reasoning
	t.Cached += u.Cached
	total := u.Total
	if total == 0 {
		total = u.Prompt + u.Completion
	}
	t.Total += total
}

// infraPatterns are the words of a FAILED run's reason that make the
// failure an infrastructure one (lower case).
var infraPatterns = []string{
	"model call failed", "model client", "unreachable", "connection refused", "connection reset",
	"no such host", "sandbox", "container", "docker", "timed out", "timeout", "deadline exceeded",
	"cancelled", "canceled", "interrupted", "unavailable", "eof",
}

// IsInfra decides whether a run's end is an infrastructure failure
// rather than a verdict on the agent's work. It is when the run:
//
//   - never finished (neither vera.run.finished nor vera.run.cancelled);
//   - was cancelled (by the eval's timeout or a person): it did not get
//     to end on its own;
//   - ended FAILED with a reason naming the model client or its
//     transport (model call failed, model client, unreachable, connection
//     refused or reset, no such host, EOF, timed out, timeout, deadline
//     exceeded, unavailable), the sandbox (sandbox, container, docker) or
//     an interruption (cancelled, interrupted).
//
// A FAILED run for any other reason (a task refused for its settings),
// and every RESOLVED or UNRESOLVED run (the step budget exhausted, the
// auditor's rejections) are not: they are scored as they are.
func IsInfra(rec RunRecord) bool {
	switch {
	case rec.Cancelled:
		return true
	case !rec.Finished:
		return true
	case rec.Outcome != catalog.OutcomeFailed:
		return false
	}
	reason := strings.ToLower(rec.Reason)
	for _, p := range infraPatterns {
		if strings.Contains(reason, p) {
			return true
		}
	}
	return false
}

// ScoreRun scores every answer of a run of task t with sc, and its final
// answer. It fills TaskID (t.ID), RunID (rec.RunID), Tags, Scorer,
// Outcome, Reason, Infra (IsInfra), Rounds, FinalAnswer, FinalRound,
// Correct, Steps, ToolCalls, Tokens and WallMS; the caller sets Profile
// and Attempt. Identical answers are scored once. An error of the scorer
// (a judge that failed) is returned: the task could not be scored.
//
// Reason is the run's reason; for a run that never finished it says so.
// FinalRound is the round whose answer is the final one, by digest (the
// run's best_audit_round when that round's answer is it, else the latest
// such round); 0 when the final answer is no round's or there is none.
// Correct is the final answer's verdict, false without a final answer.
func ScoreRun(ctx context.Context, t Task, rec RunRecord, sc Scorer) (catalog.EvalTaskScored, error) {
	out := catalog.EvalTaskScored{
		TaskID:    t.ID,
		RunID:     rec.RunID,
		Tags:      slices.Clone(t.Tags),
		Scorer:    t.Scorer.Type,
		Outcome:   rec.Outcome,
		Reason:    rec.Reason,
		Infra:     IsInfra(rec),
		Steps:     rec.Steps,
		ToolCalls: rec.ToolCalls,
		Tokens:    rec.Tokens,
		WallMS:    rec.WallMS,
	}
	if out.Scorer == "" {
		out.Scorer = ScorerExact
	}
	switch {
	case rec.Cancelled && out.Reason == "":
		out.Reason = "cancelled"
	case rec.Cancelled:
		out.Reason = "cancelled: " + out.Reason
	case !rec.Finished:
		out.Reason = "the run did not finish"
	}
	cache := map[string]Verdict{}
	score := func(answer string) (Verdict, error) {
		key := digestOf(answer, "")
		if v, ok := cache[key]; ok {
			return v, nil
		}
		v, err := sc.Score(ctx, t, answer)
		if err != nil {
			return Verdict{}, err
		}
		cache[key] = v
		return v, nil
	}
	for _, a := range rec.Answers {
		v, err := score(a.Answer)
		if err != nil {
			return catalog.EvalTaskScored{}, fmt.Errorf("task %s: score the answer of round %d: %w", t.ID, a.Round, err)
		}
		sha := a.SHA256
		if sha == "" {
			sha = digestOf(a.Answer, "")
		}
		out.Rounds = append(out.Rounds, catalog.EvalRoundScore{
			Round: a.Round, Step: a.Step, Answer: CutAnswer(a.Answer), AnswerSHA256: sha,
			Correct: v.Correct, Score: clamp01(v.Score), Reason: v.Reason,
			AuditScore: a.AuditScore, Accepted: a.Accepted, Audited: a.Audited,
		})
	}
	if rec.HasFinal {
		out.FinalAnswer = CutAnswer(rec.FinalAnswer)
		v, err := score(rec.FinalAnswer)
		if err != nil {
			return catalog.EvalTaskScored{}, fmt.Errorf("task %s: score the final answer: %w", t.ID, err)
		}
		out.Correct = v.Correct
		final := digestOf(rec.FinalAnswer, "")
		for _, a := range rec.Answers {
			if digestOf(a.Answer, "") != final {
				continue
			}
			if out.FinalRound != rec.BestAuditRound || out.FinalRound == 0 {
				out.FinalRound = a.Round // the latest match, unless the best round matched
			}
		}
	}
	return out, nil
}

func clamp01(f float64) float64 { return min(1, max(0, f)) }

// CutAnswer cuts an answer to MaxAnswerBytes on a rune boundary.
func CutAnswer(s string) string {
	if len(s) <= MaxAnswerBytes {
		return s
	}
	cut := MaxAnswerBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
