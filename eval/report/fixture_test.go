package report

import (
	"time"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
)

// The fixture: five tasks under two profiles. no-audit answers once;
// audit3 is audited for up to three rounds. Its figures are worked out by
// hand from the results below (see the comments on each result).

func round(n, step int, answer string, correct bool, audit int, accepted bool) catalog.EvalRoundScore {
	rs := catalog.EvalRoundScore{Round: n, Step: step, Answer: answer, Correct: correct, AuditScore: audit,
		Accepted: accepted, Audited: audit > 0}
	if correct {
		rs.Score = 1
	}
	return rs
}

func result(task, profile, run string, tags []string, correct bool, finalRound int, final string, steps, tools int, tokens, wallMS int64, rounds ...catalog.EvalRoundScore) catalog.EvalTaskScored {
	return catalog.EvalTaskScored{TaskID: task, Profile: profile, RunID: run, Attempt: 1, Tags: tags, Scorer: eval.ScorerExact,
		Outcome: catalog.OutcomeResolved, Rounds: rounds, FinalAnswer: final, FinalRound: finalRound, Correct: correct,
		Steps: steps, ToolCalls: tools, Tokens: catalog.TokenUsage{Prompt: tokens * 3 / 4, Completion: tokens / 4, Total: tokens},
		WallMS: wallMS}
}

var (
	tagsT1 = []string{"math"}
	tagsT2 = []string{"math", "web"}
	tagsT3 = []string{"web"}
	tagsT4 = []string{"code"}
	tagsT5 = []string{"code", "math"}
)

func fixtureResults() []catalog.EvalTaskScored {
	infra := result("t5", "no-audit", "run-t5-na", tagsT5, false, 0, "", 0, 0, 0, 60000)
	infra.Outcome = ""
	infra.Infra = true
	infra.Attempt = 2
	infra.Reason = "model unreachable: connection refused"
	return []catalog.EvalTaskScored{
		result("t1", "no-audit", "run-t1-na", tagsT1, true, 1, "42", 4, 3, 1000, 10000,
			round(1, 4, "42", true, 0, false)),
		// Accepted right at round 1.
		result("t1", "audit3", "run-t1-a3", tagsT1, true, 1, "42", 5, 4, 2000, 12000,
			round(1, 4, "42", true, 4, true)),
		result("t2", "no-audit", "run-t2-na", tagsT2, false, 1, "Lyon", 6, 5, 1500, 15000,
			round(1, 6, "Lyon", false, 0, false)),
		// Rejected wrong twice, accepted right at round 3.
		result("t2", "audit3", "run-t2-a3", tagsT2, true, 3, "Paris", 14, 11, 7000, 40000,
			round(1, 5, "Lyon", false, 1, false), round(2, 9, "Nice", false, 2, false), round(3, 14, "Paris", true, 4, true)),
		result("t3", "no-audit", "run-t3-na", tagsT3, true, 1, "1969", 5, 4, 1200, 12000,
			round(1, 5, "1969", true, 0, false)),
		// Rejected right, then accepted right.
		result("t3", "audit3", "run-t3-a3", tagsT3, true, 2, "1969", 9, 7, 4500, 25000,
			round(1, 5, "1969", true, 2, false), round(2, 9, "1969", true, 3, true)),
		result("t4", "no-audit", "run-t4-na", tagsT4, false, 1, "O(n^2)", 7, 6, 1800, 20000,
			round(1, 7, "O(n^2)", false, 0, false)),
		// Rejected wrong, then accepted wrong.
		result("t4", "audit3", "run-t4-a3", tagsT4, false, 2, "O(n)", 10, 8, 5000, 30000,
			round(1, 6, "O(n^2)", false, 1, false), round(2, 10, "O(n)", false, 4, true)),
		infra,
		// Rejected all three; at the cap the best-scored (round 2, right) is final.
		result("t5", "audit3", "run-t5-a3", tagsT5, true, 2, "17", 15, 12, 8000, 45000,
			round(1, 5, "15", false, 1, false), round(2, 10, "17", true, 2, false), round(3, 15, "19", false, 1, false)),
	}
}

// fixtureReport aggregates fixtureResults by hand.
//
// no-audit: right t1, t3 → first = final = 2/5. steps 4+6+5+7+0 = 22 → 4.4;
// tool calls 3+5+4+6+0 = 18 → 3.6; tokens 5500 → 1100; wall 117 s → 23.4 s.
//
// audit3: first right t1, t3 → 2/5. Cap 1 = first = 2/5; cap 2: t1
// (accepted r1), t3 (accepted r2), t5 (best of r1, r2 is r2, right) → 3/5;
// cap 3: t1, t2 (accepted r3), t3, t5 → 4/5; final t1, t2, t3, t5 → 4/5.
// Auditor over the 11 audited answers: accepted right t1r1, t2r3, t3r2 = 3;
// accepted wrong t4r2 = 1; rejected right t3r1, t5r2 = 2; rejected wrong
// t2r1, t2r2, t4r1, t5r1, t5r3 = 5; precision 3/4, recall 3/5. steps 53 →
// 10.6; tool calls 42 → 8.4; tokens 26500 → 5300; wall 152 s → 30.4 s.
func fixtureReport() eval.Report {
	return eval.Report{
		EvalID:   "01JEVALFIXTURE0000000000AA",
		Name:     "smoke",
		TaskSet:  "testdata/tasks.jsonl",
		Started:  time.Date(2026, 11, 25, 20, 0, 0, 0, time.UTC),
		Tasks:    5,
		Expected: 10,
		Profiles: []eval.ProfileReport{
			{
				Name: "no-audit", Scored: 5, Infra: 1,
				FirstAccuracy: 0.4, FinalAccuracy: 0.4,
				MeanSteps: 4.4, MeanToolCalls: 3.6, MeanTokens: 1100, MeanWallMS: 23400, TotalTokens: 5500,
				ByTag: []eval.TagReport{
					{Tag: "code", Scored: 2, FirstAccuracy: 0, FinalAccuracy: 0},
					{Tag: "math", Scored: 3, FirstAccuracy: 1.0 / 3, FinalAccuracy: 1.0 / 3},
					{Tag: "web", Scored: 2, FirstAccuracy: 0.5, FinalAccuracy: 0.5},
				},
			},
			{
				Name: "audit3", Auditor: true, MaxRounds: 3, Scored: 5,
				FirstAccuracy: 0.4, ByRound: []float64{0.4, 0.6, 0.8}, FinalAccuracy: 0.8,
				AuditorStats: &eval.AuditorStats{Judged: 11, AcceptedRight: 3, AcceptedWrong: 1, RejectedRight: 2, RejectedWrong: 5,
					Precision: 0.75, Recall: 0.6},
				MeanSteps: 10.6, MeanToolCalls: 8.4, MeanTokens: 5300, MeanWallMS: 30400, TotalTokens: 26500,
				ByTag: []eval.TagReport{
					{Tag: "code", Scored: 2, FirstAccuracy: 0, FinalAccuracy: 0.5},
					{Tag: "math", Scored: 3, FirstAccuracy: 1.0 / 3, FinalAccuracy: 1},
					{Tag: "web", Scored: 2, FirstAccuracy: 0.5, FinalAccuracy: 1},
				},
			},
		},
		Results: fixtureResults(),
	}
}

const hostile = "<script>alert(1)</script>"

// hostileReport has markup in every user-derived text: eval name, task
// set, profile, task id, tag, answers, run id and reason.
func hostileReport() eval.Report {
	res := result(hostile, hostile, "run-"+hostile, []string{hostile}, true, 1, hostile+" final", 3, 2, 900, 8000,
		round(1, 3, hostile, true, 4, true))
	res.Reason = hostile
	bad := result("t-"+hostile, hostile, "run-2", []string{hostile}, false, 0, "", 1, 0, 100, 2000)
	bad.Infra = true
	bad.Reason = hostile
	return eval.Report{
		EvalID: "01JEVALHOSTILE000000000000", Name: hostile, TaskSet: hostile + ".jsonl", Tasks: 2, Expected: 2,
		Profiles: []eval.ProfileReport{{Name: hostile, Auditor: true, MaxRounds: 1, Scored: 2, Infra: 1,
			FirstAccuracy: 0.5, ByRound: []float64{0.5}, FinalAccuracy: 0.5,
			AuditorStats: &eval.AuditorStats{Judged: 1, AcceptedRight: 1, Precision: 1, Recall: 1},
			MeanSteps:    2, MeanToolCalls: 1, MeanTokens: 500, MeanWallMS: 5000, TotalTokens: 1000,
			ByTag: []eval.TagReport{{Tag: hostile, Scored: 2, FirstAccuracy: 0.5, FinalAccuracy: 0.5}}}},
		Results: []catalog.EvalTaskScored{res, bad},
	}
}
