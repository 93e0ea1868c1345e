package eval

import (
	"slices"
	"sort"
	"time"

	"github.com/vera-run/vera/bus/catalog"
)

// Summarize aggregates an eval's scored tasks into its Report.
//
// Of the records of one task and profile the latest attempt counts (the
// highest Attempt; of equal attempts the later in scored). Records of a
// task or profile the eval does not have are left out. Results are
// ordered by task (task-set order) then profile (started.Profiles order).
//
// Per profile (ProfileReport): Scored counts its results, Infra those
// marked Infra (they count as wrong, like any result without a correct
// final answer); FirstAccuracy is the share whose round-1 answer is
// correct; FinalAccuracy the share whose final answer is correct; ByRound
// (auditor profiles only) has one accuracy per round cap r from 1 to the
// larger of the profile's max_rounds and the highest round seen, computed
// as ProfileReport.ByRound says: the answer accepted at a round ≤ r, else,
// when round r was audited, the best-scored of rounds 1..r (earliest on
// ties), else the final answer; AuditorStats (auditor profiles only)
// counts every audited round's acceptance against its correctness; the
// means are per result (MeanTokens of Tokens.Total); ByTag has one entry
// per tag of the profile's results, sorted by tag. Fractions with a zero
// denominator are 0.
func Summarize(started catalog.EvalStarted, evalID string, startedAt time.Time, tasks []Task, scored []catalog.EvalTaskScored) Report {
	rep := Report{
		EvalID:   evalID,
		Name:     started.Name,
		TaskSet:  started.TaskSet,
		Started:  startedAt,
		Tasks:    len(tasks),
		Expected: len(tasks) * len(started.Profiles),
	}
	type key struct{ task, profile string }
	latest := map[key]catalog.EvalTaskScored{}
	for _, s := range scored {
		k := key{s.TaskID, s.Profile}
		if cur, ok := latest[k]; !ok || s.Attempt >= cur.Attempt {
			latest[k] = s
		}
	}
	taskTags := map[string][]string{}
	for _, t := range tasks {
		taskTags[t.ID] = t.Tags
	}
	perProfile := make([][]catalog.EvalTaskScored, len(started.Profiles))
	for _, t := range tasks {
		for i, p := range started.Profiles {
			if s, ok := latest[key{t.ID, p.Name}]; ok {
				rep.Results = append(rep.Results, s)
				perProfile[i] = append(perProfile[i], s)
			}
		}
	}
	for i, p := range started.Profiles {
		rep.Profiles = append(rep.Profiles, profileReport(p, perProfile[i], taskTags))
	}
	return rep
}

func frac(n, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// roundCorrect reports whether a result's answer of round r is correct
// (false when it has no such round).
func roundCorrect(s catalog.EvalTaskScored, r int) bool {
	for _, rd := range s.Rounds {
		if rd.Round == r {
			return rd.Correct
		}
	}
	return false
}

// CorrectAtCap reports whether a result's answer would have been correct
// had the auditor's round cap been r (see ProfileReport.ByRound): the
// answer accepted at a round ≤ r; else, when round r was audited, the
// best audit-scored of rounds 1..r, earliest on ties; else (the run ended
// before round r was judged) the final answer.
func CorrectAtCap(s catalog.EvalTaskScored, r int) bool {
	rounds := slices.Clone(s.Rounds)
	slices.SortStableFunc(rounds, func(a, b catalog.EvalRoundScore) int { return a.Round - b.Round })
	reached := false
	for _, rd := range rounds {
		if rd.Round > r {
			break
		}
		if rd.Accepted {
			return rd.Correct
		}
		if rd.Round == r && rd.Audited {
			reached = true
		}
	}
	if !reached {
		return s.Correct
	}
	var best *catalog.EvalRoundScore
	for i := range rounds {
		rd := &rounds[i]
		if rd.Round > r {
			break
		}
		if best == nil || rd.AuditScore > best.AuditScore {
			best = rd
		}
	}
	return best.Correct
}

func profileReport(p catalog.EvalProfile, res []catalog.EvalTaskScored, taskTags map[string][]string) ProfileReport {
	pr := ProfileReport{Name: p.Name, Auditor: p.Auditor.Enabled, Scored: len(res)}
	if p.Auditor.Enabled {
		pr.MaxRounds = p.Auditor.MaxRounds
	}
	var first, final, steps, calls int
	var wall int64
	for _, s := range res {
		if s.Infra {
			pr.Infra++
		}
		if roundCorrect(s, 1) {
			first++
		}
		if s.Correct {
			final++
		}
		steps += s.Steps
		calls += s.ToolCalls
		wall += s.WallMS
		pr.TotalTokens += s.Tokens.Total
	}
	pr.FirstAccuracy = frac(first, len(res))
	pr.FinalAccuracy = frac(final, len(res))
	if n := len(res); n > 0 {
		pr.MeanSteps = float64(steps) / float64(n)
		pr.MeanToolCalls = float64(calls) / float64(n)
		pr.MeanTokens = float64(pr.TotalTokens) / float64(n)
		pr.MeanWallMS = float64(wall) / float64(n)
	}
	if p.Auditor.Enabled {
		maxR := p.Auditor.MaxRounds
		st := &AuditorStats{}
		for _, s := range res {
			for _, rd := range s.Rounds {
				maxR = max(maxR, rd.Round)
				if !rd.Audited {
					continue
				}
				st.Judged++
				switch {
				case rd.Accepted && rd.Correct:
					st.AcceptedRight++
				case rd.Accepted:
					st.AcceptedWrong++
				case rd.Correct:
					st.RejectedRight++
				default:
					st.RejectedWrong++
				}
			}
		}
		st.Precision = frac(st.AcceptedRight, st.AcceptedRight+st.AcceptedWrong)
		st.Recall = frac(st.AcceptedRight, st.AcceptedRight+st.RejectedRight)
		pr.AuditorStats = st
		for r := 1; r <= maxR; r++ {
			n := 0
			for _, s := range res {
				if CorrectAtCap(s, r) {
					n++
				}
			}
			pr.ByRound = append(pr.ByRound, frac(n, len(res)))
		}
	}
	type tagCount struct{ scored, first, final int }
	tags := map[string]*tagCount{}
	for _, s := range res {
		tt, ok := taskTags[s.TaskID]
		if !ok {
			tt = s.Tags
		}
		for _, tag := range dedupe(tt) {
			c := tags[tag]
			if c == nil {
				c = &tagCount{}
				tags[tag] = c
			}
			c.scored++
			if roundCorrect(s, 1) {
				c.first++
			}
			if s.Correct {
				c.final++
			}
		}
	}
	names := make([]string, 0, len(tags))
	for t := range tags {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		c := tags[t]
		pr.ByTag = append(pr.ByTag, TagReport{Tag: t, Scored: c.scored, FirstAccuracy: frac(c.first, c.scored), FinalAccuracy: frac(c.final, c.scored)})
	}
	return pr
}

func dedupe(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return slices.Compact(out)
}

// SummarizeRecorded is Summarize for an eval read back from the bus,
// where the task set itself is not: the tasks' order is the order in
// which they were first scored, their tags those they were scored with,
// and their number (Tasks, Expected) the one vera.eval.started recorded.
// vera eval report and the dashboard both summarize with it.
func SummarizeRecorded(started catalog.EvalStarted, evalID string, startedAt time.Time, scored []catalog.EvalTaskScored) Report {
	var tasks []Task
	seen := map[string]bool{}
	for _, s := range scored {
		if !seen[s.TaskID] {
			seen[s.TaskID] = true
			tasks = append(tasks, Task{ID: s.TaskID, Tags: s.Tags})
		}
	}
	r := Summarize(started, evalID, startedAt, tasks, scored)
	r.Tasks = started.Tasks
	r.Expected = started.Tasks * len(started.Profiles)
	return r
}
