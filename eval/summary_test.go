package eval

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/catalog"
)

// rd is a round: its number, correctness, audit score, acceptance and
// whether it was audited.
func rd(round int, correct bool, score int, accepted, audited bool) catalog.EvalRoundScore {
	return catalog.EvalRoundScore{Round: round, Correct: correct, AuditScore: score, Accepted: accepted, Audited: audited}
}

func res(task, profile string, attempt int, correct, infra bool, steps, tools int, tokens, wall int64, rounds ...catalog.EvalRoundScore) catalog.EvalTaskScored {
	return catalog.EvalTaskScored{TaskID: task, Profile: profile, RunID: "run-" + task + "-" + profile, Attempt: attempt, Correct: correct, Infra: infra,
		Steps: steps, ToolCalls: tools, Tokens: catalog.TokenUsage{Total: tokens}, WallMS: wall, Rounds: rounds}
}

func evalTasks() []Task {
	return []Task{
		{ID: "t1", Tags: []string{"a"}},
		{ID: "t2", Tags: []string{"a", "b"}},
		{ID: "t3", Tags: []string{"b"}},
		{ID: "t4"},
		{ID: "t5", Tags: []string{"a"}},
		{ID: "t6", Tags: []string{"b", "b"}},
	}
}

func evalStarted() catalog.EvalStarted {
	return catalog.EvalStarted{Name: "demo", TaskSet: "demo.jsonl", Tasks: 6, Concurrency: 2, Profiles: []catalog.EvalProfile{
		{Name: "no-audit"},
		{Name: "audit3", Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 3}},
	}}
}

// evalScored: six tasks under no-audit and audit3 (see TestSummarize for
// the figures they give), in a scrambled order, with a retried task, a
// stale attempt, and records of a task and a profile the eval lacks.
func evalScored() []catalog.EvalTaskScored {
	const na, a3 = "no-audit", "audit3"
	return []catalog.EvalTaskScored{
		res("t6", na, 1, false, true, 0, 0, 0, 100),
		res("t1", na, 1, true, false, 4, 2, 100, 1000, rd(1, true, 0, false, false)),
		res("t3", na, 2, true, false, 3, 1, 300, 3000, rd(1, true, 0, false, false)), // the retry, stored first
		res("t2", na, 1, false, false, 6, 3, 200, 2000, rd(1, false, 0, false, false)),
		res("t3", na, 1, false, true, 1, 0, 0, 500), // the infra failure it retried
		res("t4", na, 1, true, false, 2, 1, 50, 500, rd(1, true, 0, false, false)),
		res("t5", na, 1, false, false, 10, 5, 400, 4000, rd(1, false, 0, false, false)),
		res("zz", na, 1, true, false, 1, 1, 1, 1, rd(1, true, 0, false, false)),      // not a task of the set
		res("t1", "other", 1, true, false, 1, 1, 1, 1, rd(1, true, 0, false, false)), // not a profile of the eval

		res("t1", a3, 1, true, false, 5, 1, 1000, 10, rd(1, true, 4, true, true)),
		res("t2", a3, 1, true, false, 8, 2, 2000, 20, rd(1, false, 2, false, true), rd(2, true, 4, true, true)),
		res("t3", a3, 1, true, false, 12, 3, 3000, 30, rd(1, true, 2, false, true), rd(2, false, 1, false, true), rd(3, false, 2, false, true)),
		res("t4", a3, 1, false, false, 4, 4, 500, 40, rd(1, false, 3, true, true)),
		res("t5", a3, 1, false, false, 20, 5, 5000, 50, rd(1, false, 1, false, true), rd(2, true, 3, false, true)),
		res("t6", a3, 1, false, true, 3, 6, 100, 60, rd(1, true, 2, false, true), rd(2, false, 0, false, false)),
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func checkFloats(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %v, want %v", what, got, want)
		return
	}
	for i := range got {
		if !near(got[i], want[i]) {
			t.Errorf("%s: %v, want %v", what, got, want)
			return
		}
	}
}

func TestSummarize(t *testing.T) {
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	rep := Summarize(evalStarted(), "ev-1", at, evalTasks(), evalScored())
	if rep.EvalID != "ev-1" || rep.Name != "demo" || rep.TaskSet != "demo.jsonl" || !rep.Started.Equal(at) || rep.Tasks != 6 || rep.Expected != 12 {
		t.Errorf("header %+v", rep)
	}
	// Results: task order, then profile order; the latest attempt of t3.
	var order []string
	for _, r := range rep.Results {
		order = append(order, r.TaskID+"/"+r.Profile)
	}
	wantOrder := []string{"t1/no-audit", "t1/audit3", "t2/no-audit", "t2/audit3", "t3/no-audit", "t3/audit3",
		"t4/no-audit", "t4/audit3", "t5/no-audit", "t5/audit3", "t6/no-audit", "t6/audit3"}
	if !reflect.DeepEqual(order, wantOrder) {
		t.Fatalf("results %v", order)
	}
	if r := rep.Results[4]; r.Attempt != 2 || !r.Correct {
		t.Errorf("t3/no-audit: attempt %d, want the retry (2)", r.Attempt)
	}
	if len(rep.Profiles) != 2 {
		t.Fatalf("%d profiles", len(rep.Profiles))
	}

	// no-audit: right first and final on t1, t3 (retried), t4: 3/6.
	// Steps 4+6+3+2+10+0 = 25, tool calls 2+3+1+1+5+0 = 12, tokens
	// 100+200+300+50+400+0 = 1050, wall 1000+2000+3000+500+4000+100 = 10600.
	na := rep.Profiles[0]
	if na.Name != "no-audit" || na.Auditor || na.MaxRounds != 0 || na.Scored != 6 || na.Infra != 1 {
		t.Errorf("no-audit header %+v", na)
	}
	checkFloats(t, "no-audit accuracies", []float64{na.FirstAccuracy, na.FinalAccuracy}, []float64{0.5, 0.5})
	checkFloats(t, "no-audit means", []float64{na.MeanSteps, na.MeanToolCalls, na.MeanTokens, na.MeanWallMS}, []float64{25.0 / 6, 2, 175, 10600.0 / 6})
	if na.TotalTokens != 1050 || na.ByRound != nil || na.AuditorStats != nil {
		t.Errorf("no-audit tokens %d by round %v auditor %+v", na.TotalTokens, na.ByRound, na.AuditorStats)
	}
	// Tags: a = t1 ✓, t2 ✗, t5 ✗; b = t2 ✗, t3 ✓, t6 ✗ (t6's duplicate tag
	// counts once); t4 has none.
	wantTags := []TagReport{{Tag: "a", Scored: 3, FirstAccuracy: 1.0 / 3, FinalAccuracy: 1.0 / 3}, {Tag: "b", Scored: 3, FirstAccuracy: 1.0 / 3, FinalAccuracy: 1.0 / 3}}
	checkTags(t, "no-audit", na.ByTag, wantTags)

	// audit3, by hand:
	//   first (round 1 right): t1, t3, t6 → 3/6; final: t1, t2, t3 → 3/6.
	//   cap 1: t1 accepted ✓, t2 best r1 ✗, t3 r1 ✓, t4 accepted ✗, t5 r1 ✗,
	//          t6 r1 ✓ → 3/6;
	//   cap 2: t1 ✓, t2 accepted at 2 ✓, t3 best r1 (2 > 1) ✓, t4 ✗,
	//          t5 best r2 (3 > 1) ✓, t6 r2 not audited → final ✗ → 4/6;
	//   cap 3: t1 ✓, t2 ✓, t3 r1 and r3 tie at 2 → r1 ✓, t4 ✗, t5 no
	//          round 3 → final ✗, t6 → final ✗ → 3/6.
	//   auditor: accepted right t1r1, t2r2 = 2; accepted wrong t4r1 = 1;
	//   rejected right t3r1, t5r2, t6r1 = 3; rejected wrong t2r1, t3r2,
	//   t3r3, t5r1 = 4; judged 10 (t6r2 was not); precision 2/3, recall
	//   2/5.
	a3 := rep.Profiles[1]
	if a3.Name != "audit3" || !a3.Auditor || a3.MaxRounds != 3 || a3.Scored != 6 || a3.Infra != 1 {
		t.Errorf("audit3 header %+v", a3)
	}
	checkFloats(t, "audit3 accuracies", []float64{a3.FirstAccuracy, a3.FinalAccuracy}, []float64{0.5, 0.5})
	checkFloats(t, "audit3 by round", a3.ByRound, []float64{0.5, 4.0 / 6, 0.5})
	wantStats := AuditorStats{Judged: 10, AcceptedRight: 2, AcceptedWrong: 1, RejectedRight: 3, RejectedWrong: 4}
	if st := a3.AuditorStats; st == nil {
		t.Fatal("no auditor stats")
	} else {
		got := *st
		got.Precision, got.Recall = 0, 0
		if got != wantStats {
			t.Errorf("auditor stats %+v, want %+v", *st, wantStats)
		}
		checkFloats(t, "precision, recall", []float64{st.Precision, st.Recall}, []float64{2.0 / 3, 0.4})
	}
	checkFloats(t, "audit3 means", []float64{a3.MeanSteps, a3.MeanToolCalls, a3.MeanTokens, a3.MeanWallMS}, []float64{52.0 / 6, 3.5, 11600.0 / 6, 35})
	if a3.TotalTokens != 11600 {
		t.Errorf("audit3 tokens %d", a3.TotalTokens)
	}
	// Tags: a = t1 (✓ ✓), t2 (✗ ✓), t5 (✗ ✗); b = t2 (✗ ✓), t3 (✓ ✓), t6 (✓ ✗).
	checkTags(t, "audit3", a3.ByTag, []TagReport{{Tag: "a", Scored: 3, FirstAccuracy: 1.0 / 3, FinalAccuracy: 2.0 / 3}, {Tag: "b", Scored: 3, FirstAccuracy: 2.0 / 3, FinalAccuracy: 2.0 / 3}})
}

func checkTags(t *testing.T, profile string, got, want []TagReport) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s tags %+v, want %+v", profile, got, want)
		return
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Tag != w.Tag || g.Scored != w.Scored || !near(g.FirstAccuracy, w.FirstAccuracy) || !near(g.FinalAccuracy, w.FinalAccuracy) {
			t.Errorf("%s tag %d: %+v, want %+v", profile, i, g, w)
		}
	}
}

// ByRound runs to the highest round seen when it is above the cap; an
// empty profile has zero figures, not NaN.
func TestSummarizeEdges(t *testing.T) {
	started := catalog.EvalStarted{Name: "e", Profiles: []catalog.EvalProfile{
		{Name: "a2", Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 2}},
		{Name: "empty", Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 2}},
	}}
	tasks := []Task{{ID: "x"}, {ID: "y"}}
	scored := []catalog.EvalTaskScored{
		// x: rejected twice, accepted at round 3 (a resumed eval with a
		// bigger cap); y: no answer at all.
		res("x", "a2", 1, true, false, 1, 1, 10, 10, rd(1, false, 1, false, true), rd(2, false, 2, false, true), rd(3, true, 4, true, true)),
		res("y", "a2", 1, false, false, 1, 1, 10, 10),
	}
	rep := Summarize(started, "e1", time.Time{}, tasks, scored)
	a2 := rep.Profiles[0]
	// cap 1: x best r1 ✗, y final ✗; cap 2: x best r2 ✗; cap 3: x accepted ✓.
	checkFloats(t, "by round", a2.ByRound, []float64{0, 0, 0.5})
	if a2.FirstAccuracy != 0 || a2.FinalAccuracy != 0.5 || a2.AuditorStats.Precision != 1 || a2.AuditorStats.Recall != 1 {
		t.Errorf("a2 %+v stats %+v", a2, *a2.AuditorStats)
	}
	e := rep.Profiles[1]
	if e.Scored != 0 || e.FirstAccuracy != 0 || e.MeanSteps != 0 || e.AuditorStats == nil || e.AuditorStats.Precision != 0 || e.AuditorStats.Recall != 0 {
		t.Errorf("empty profile %+v", e)
	}
	checkFloats(t, "empty by round", e.ByRound, []float64{0, 0})
	if rep.Expected != 4 || len(rep.Results) != 2 {
		t.Errorf("expected %d results %d", rep.Expected, len(rep.Results))
	}
}

func TestCorrectAtCapUnordered(t *testing.T) {
	// Rounds out of order are read in round order.
	s := catalog.EvalTaskScored{Correct: false, Rounds: []catalog.EvalRoundScore{rd(2, true, 3, false, true), rd(1, false, 3, false, true)}}
	if CorrectAtCap(s, 2) {
		t.Error("cap 2: the tie at 3 goes to round 1 (wrong)")
	}
	s.Rounds[0].AuditScore = 4
	if !CorrectAtCap(s, 2) {
		t.Error("cap 2: round 2 scored higher (right)")
	}
}
