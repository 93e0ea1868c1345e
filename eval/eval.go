// Package eval is VERA's evaluation domain: a task set (JSONL, one task
// per line, each with a reference answer and a scorer), profiles (the run
// settings every task is run with), the scorers, the scoring of every
// answer a run submitted (one per audit round), and the report that
// aggregates them: accuracy of the first answer, after each verification
// round and final, the auditor's own precision and recall against the
// references, cost per task, per tag.
//
// It holds no bus connection: package eval/runner drives the runs of an
// eval on the bus and publishes its vera.eval.* events; package
// eval/report renders a Report as text, JSON and HTML.
package eval

import (
	"time"

	"github.com/vera-run/vera/bus/catalog"
)

// The labels vera eval sets on each run's vera.task.submitted.
const (
	LabelEvalID      = "eval_id"
	LabelEvalTask    = "eval_task"
	LabelEvalProfile = "eval_profile"
	LabelEvalAttempt = "eval_attempt"
)

// Scorer kinds.
const (
	ScorerExact    = "exact"
	ScorerContains = "contains"
	ScorerRegex    = "regex"
	ScorerNumeric  = "numeric"
	ScorerJudge    = "judge"
)

// Task is one line of a task set.
type Task struct {
	// Line is the task's line in its file, from 1 (not in the JSON).
	Line     int        `json:"-"`
	ID       string     `json:"id"`
	Task     string     `json:"task"`
	InputDir string     `json:"input_dir,omitempty"`
	Answer   string     `json:"answer"`
	Scorer   ScorerSpec `json:"scorer"`
	Tags     []string   `json:"tags,omitempty"`
}

// ScorerSpec says how a task's answers are scored. In a task line it is
// either a kind ("exact") or an object ({"type":"numeric","tolerance":0.5});
// a line without a scorer is scored "exact" (see ParseTasks and NewScorer
// for what each kind does).
type ScorerSpec struct {
	// Type is one of the Scorer* kinds.
	Type string `json:"type"`
	// CaseSensitive: exact and contains compare case-insensitively (and
	// with whitespace runs collapsed) unless set.
	CaseSensitive bool `json:"case_sensitive,omitempty"`
	// Tolerance is numeric's absolute tolerance (default 0: equal values).
	Tolerance float64 `json:"tolerance,omitempty"`
	// RelTolerance is numeric's relative tolerance, as a fraction of the
	// reference (0.01 = 1 %).
	RelTolerance float64 `json:"rel_tolerance,omitempty"`
	// Rubric is judge's instructions: what makes an answer correct.
	Rubric string `json:"rubric,omitempty"`
}

// Verdict is a scorer's judgement of one answer.
type Verdict struct {
	Correct bool
	// Score is 1 or 0 for the deterministic scorers, the judge's score
	// scaled to 0–1.
	Score  float64
	Reason string
}

// Report is an eval's results, aggregated per profile.
type Report struct {
	EvalID   string          `json:"eval_id"`
	Name     string          `json:"name"`
	TaskSet  string          `json:"task_set"`
	Started  time.Time       `json:"started"`
	Tasks    int             `json:"tasks"`
	Expected int             `json:"expected"` // tasks × profiles
	Profiles []ProfileReport `json:"profiles"`
	// Results are the scored tasks, the latest attempt of each task and
	// profile, ordered by task (in task-set order) then profile.
	Results []catalog.EvalTaskScored `json:"results"`
	// DashboardURL, when set, is the dashboard's base URL: the HTML
	// report links each run to DashboardURL + "#run=" + run id.
	DashboardURL string `json:"dashboard_url,omitempty"`
}

// ProfileReport is one profile's figures. Accuracies are fractions of
// the profile's scored tasks (a task whose run failed or gave no answer
// counts as wrong).
type ProfileReport struct {
	Name      string `json:"name"`
	Auditor   bool   `json:"auditor"`
	MaxRounds int    `json:"max_rounds,omitempty"`
	Scored    int    `json:"scored"`
	Infra     int    `json:"infra"`
	// FirstAccuracy: the first answer (round 1) is correct.
	FirstAccuracy float64 `json:"first_accuracy"`
	// ByRound[r-1] is the accuracy had the round cap been r: the answer
	// accepted at a round j ≤ r, else the best-scored of rounds 1..r
	// (earliest on ties, as the agent chooses at the cap), else, for a run
	// that ended before round r, its final answer. Empty without auditor.
	ByRound []float64 `json:"by_round,omitempty"`
	// FinalAccuracy: the run's final answer is correct.
	FinalAccuracy float64 `json:"final_accuracy"`
	// AuditorStats is the auditor's own quality against the references, over
	// every audited answer; nil without auditor.
	AuditorStats *AuditorStats `json:"auditor_stats,omitempty"`
	// Means per scored task.
	MeanSteps     float64     `json:"mean_steps"`
	MeanToolCalls float64     `json:"mean_tool_calls"`
	MeanTokens    float64     `json:"mean_tokens"`
	MeanWallMS    float64     `json:"mean_wall_ms"`
	TotalTokens   int64       `json:"total_tokens"`
	ByTag         []TagReport `json:"by_tag,omitempty"`
}

// AuditorStats counts the auditor's decisions on audited answers against
// the references: accepting is a prediction that the answer is correct.
type AuditorStats struct {
	Judged        int `json:"judged"`
	AcceptedRight int `json:"accepted_right"`
	AcceptedWrong int `json:"accepted_wrong"`
	RejectedRight int `json:"rejected_right"`
	RejectedWrong int `json:"rejected_wrong"`
	// Precision = accepted right / accepted; Recall = accepted right /
	// right. NaN is never used: 0 when the denominator is 0.
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
}

// TagReport is a profile's figures on the tasks with one tag.
type TagReport struct {
	Tag           string  `json:"tag"`
	Scored        int     `json:"scored"`
	FirstAccuracy float64 `json:"first_accuracy"`
	FinalAccuracy float64 `json:"final_accuracy"`
}
