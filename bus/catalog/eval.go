package catalog

// Eval and fork types.
const (
	TypeEvalStarted    = "vera.eval.started"
	TypeEvalTaskScored = "vera.eval.task_scored"
	TypeEvalFinished   = "vera.eval.finished"
	TypeForkPrefix     = "vera.fork.prefix"
)

// EvalProfile is one set of run settings an eval runs every task with:
// the agent's model and its settings, the auditor (off, or on with a
// round cap and stop score), the step budget, policy overrides and the
// sandbox. A run's task, work dir and input dir come from the task.
type EvalProfile struct {
	Name       string           `json:"name" jsonschema:"minLength=1" jsonschema_description:"The profile's name, e.g. no-audit or audit3."`
	Model      ModelConfig      `json:"model" jsonschema_description:"The agent's model and its settings."`
	Auditor    AuditorConfig    `json:"auditor" jsonschema_description:"The DeepVerifier auditor: off, or on with its round cap and stop score."`
	MaxSteps   int              `json:"max_steps,omitempty" jsonschema:"minimum=0" jsonschema_description:"Step budget of each run; 0 = unlimited."`
	Policy     PolicyConfig     `json:"policy,omitzero" jsonschema_description:"Policy-layer overrides."`
	Sandbox    SandboxConfig    `json:"sandbox,omitzero" jsonschema_description:"Sandbox settings of each run."`
	TimeoutMS  int64            `json:"timeout_ms,omitempty" jsonschema:"minimum=0" jsonschema_description:"Wall-time limit of one run in milliseconds; a run past it is cancelled and scored as failed; 0 = the eval's default."`
	VerifyFast VerifyFastConfig `json:"verifyfast,omitzero" jsonschema_description:"VerifyFast settings of each run."`
}

// EvalStarted opens an eval: a task set run with one or more profiles.
// The eval's id is the envelope's run id segment (vera.run.<eval_id>.…):
// an eval's events are a stream of their own, next to its runs'.
type EvalStarted struct {
	Name          string        `json:"name" jsonschema:"minLength=1" jsonschema_description:"A name for people (the task set's file name unless given)."`
	TaskSet       string        `json:"task_set" jsonschema_description:"The task set file as given."`
	TaskSetSHA256 string        `json:"task_set_sha256" jsonschema:"pattern=^[0-9a-f]{64}$" jsonschema_description:"Digest of the task set file: a resumed eval must run the same tasks."`
	Tasks         int           `json:"tasks" jsonschema:"minimum=1" jsonschema_description:"Number of tasks."`
	Profiles      []EvalProfile `json:"profiles,omitempty" jsonschema_description:"The profiles every task is run with (at least one)."`
	Concurrency   int           `json:"concurrency" jsonschema:"minimum=1" jsonschema_description:"Runs at once."`
	Resumed       bool          `json:"resumed,omitempty" jsonschema_description:"True when this start resumes an eval whose process stopped (vera eval --resume); the tasks already scored are not run again."`
	SubmittedBy   string        `json:"submitted_by" jsonschema_description:"Who started it, e.g. cli:alice."`
}

// EventType implements Payload.
func (EvalStarted) EventType() string { return TypeEvalStarted }

// EvalRoundScore is the score of one answer a run submitted: the answer
// of audit round Round (round 1 is the first answer; a run without the
// auditor has one round), scored against the task's reference.
type EvalRoundScore struct {
	Round        int     `json:"round" jsonschema:"minimum=1" jsonschema_description:"The answer's number: its audit round, from 1."`
	Step         int     `json:"step" jsonschema:"minimum=0" jsonschema_description:"The agent step that submitted it."`
	Answer       string  `json:"answer" jsonschema_description:"The answer, cut to 2000 bytes (answer_sha256 is of the whole)."`
	AnswerSHA256 string  `json:"answer_sha256" jsonschema_description:"Digest of the whole answer."`
	Correct      bool    `json:"correct" jsonschema_description:"The scorer's verdict."`
	Score        float64 `json:"score" jsonschema:"minimum=0,maximum=1" jsonschema_description:"The scorer's score: 1 or 0 for exact, contains, regex and numeric; the judge's rubric score scaled to 0-1."`
	Reason       string  `json:"reason,omitempty" jsonschema_description:"Why, when the scorer says (the judge's explanation, a numeric scorer's parsed value)."`
	AuditScore   int     `json:"audit_score,omitempty" jsonschema:"minimum=0,maximum=4" jsonschema_description:"The auditor's score of this answer (1-4); 0 = not audited."`
	Accepted     bool    `json:"accepted,omitempty" jsonschema_description:"Whether the auditor accepted this answer."`
	Audited      bool    `json:"audited,omitempty" jsonschema_description:"Whether the auditor judged this answer (a round cut off by the run's end was not)."`
}

// EvalTaskScored is the score of one task under one profile: every
// answer its run submitted, and what the run cost.
type EvalTaskScored struct {
	TaskID      string           `json:"task_id" jsonschema:"minLength=1" jsonschema_description:"The task's id in the task set."`
	Profile     string           `json:"profile" jsonschema:"minLength=1" jsonschema_description:"The profile's name."`
	RunID       string           `json:"run_id" jsonschema:"minLength=1" jsonschema_description:"The run that was scored."`
	Attempt     int              `json:"attempt" jsonschema:"minimum=1" jsonschema_description:"1, or more when the earlier runs of this task and profile failed for an infrastructure reason and were retried (--retry-failed)."`
	Tags        []string         `json:"tags,omitempty" jsonschema_description:"The task's tags."`
	Scorer      string           `json:"scorer" jsonschema_description:"The scorer: exact, contains, regex, numeric or judge."`
	Outcome     Outcome          `json:"outcome,omitempty" jsonschema_description:"The run's outcome; empty when it did not end (timed out and cancelled)."`
	Reason      string           `json:"reason,omitempty" jsonschema_description:"The run's reason (UNRESOLVED, FAILED), or why the task could not be scored."`
	Infra       bool             `json:"infra,omitempty" jsonschema_description:"The run failed for an infrastructure reason (model unreachable, sandbox error, timeout), not for its answer: --retry-failed runs it again."`
	Rounds      []EvalRoundScore `json:"rounds,omitempty" jsonschema_description:"Every submitted answer, scored, in order."`
	FinalAnswer string           `json:"final_answer,omitempty" jsonschema_description:"The run's final answer (vera.run.finished), cut to 2000 bytes."`
	FinalRound  int              `json:"final_round,omitempty" jsonschema:"minimum=0" jsonschema_description:"Which round's answer the run ended with; 0 = none."`
	Correct     bool             `json:"correct" jsonschema_description:"Whether the final answer is correct (false when there is none)."`
	Steps       int              `json:"steps" jsonschema:"minimum=0" jsonschema_description:"Agent steps."`
	ToolCalls   int              `json:"tool_calls" jsonschema:"minimum=0" jsonschema_description:"Agent tool calls (shell and edit)."`
	Tokens      TokenUsage       `json:"tokens,omitzero" jsonschema_description:"Tokens of every model call of the run (agent and verifiers)."`
	WallMS      int64            `json:"wall_ms" jsonschema:"minimum=0" jsonschema_description:"Wall time from the run's submission to its end."`
}

// EventType implements Payload.
func (EvalTaskScored) EventType() string { return TypeEvalTaskScored }

// EvalFinished closes an eval: every task and profile scored, or the
// eval was stopped (then a later --resume goes on).
type EvalFinished struct {
	Scored      int    `json:"scored" jsonschema:"minimum=0" jsonschema_description:"Tasks × profiles scored."`
	Expected    int    `json:"expected" jsonschema:"minimum=0" jsonschema_description:"Tasks × profiles of the eval."`
	Infra       int    `json:"infra,omitempty" jsonschema:"minimum=0" jsonschema_description:"Of those scored, how many failed for infrastructure reasons."`
	Interrupted bool   `json:"interrupted,omitempty" jsonschema_description:"The eval was stopped before every run ended; --resume goes on."`
	DurationMS  int64  `json:"duration_ms" jsonschema:"minimum=0" jsonschema_description:"Wall time of this invocation."`
	Summary     string `json:"summary,omitempty" jsonschema_description:"The report's accuracy table, as text."`
}

// EventType implements Payload.
func (EvalFinished) EventType() string { return TypeEvalFinished }

// ForkConfig makes a run a fork of a recorded run: the new run
// reproduces the first AtStep steps of run From (its recorded model
// replies served again, its commands executed for real in the new run's
// sandbox, each step compared with the original's) and goes on live from
// step AtStep+1 with its own settings.
type ForkConfig struct {
	From   string `json:"from" jsonschema:"minLength=1" jsonschema_description:"The run forked."`
	AtStep int    `json:"at_step" jsonschema:"minimum=0" jsonschema_description:"How many of its steps the fork reproduces before it goes on live."`
	Note   string `json:"note,omitempty" jsonschema_description:"Why, in the user's words."`
}

// ForkDivergence is where a fork's prefix departed from the original.
type ForkDivergence struct {
	Step     int    `json:"step" jsonschema:"minimum=0" jsonschema_description:"The step."`
	Kind     string `json:"kind" jsonschema_description:"prompt, action, tool_result or missing_call (as vera replay --reexecute names them)."`
	Detail   string `json:"detail" jsonschema_description:"What differs."`
	Recorded string `json:"recorded,omitempty" jsonschema_description:"The original's side, cut."`
	Replayed string `json:"replayed,omitempty" jsonschema_description:"The fork's side, cut."`
}

// ForkPrefix says whether a fork reproduced its original's first steps:
// published by the agent once the prefix is reproduced (before its first
// live model call) or at the first divergence (the run then ends FAILED).
type ForkPrefix struct {
	From             string          `json:"from" jsonschema:"minLength=1" jsonschema_description:"The run forked."`
	AtStep           int             `json:"at_step" jsonschema:"minimum=0" jsonschema_description:"The fork point."`
	Reproduced       bool            `json:"reproduced" jsonschema_description:"True when every step up to at_step and its command's result equal the original's."`
	StepsCompared    int             `json:"steps_compared" jsonschema:"minimum=0" jsonschema_description:"Steps compared with the original."`
	CommandsCompared int             `json:"commands_compared" jsonschema:"minimum=0" jsonschema_description:"Command and edit results compared with the original."`
	Divergence       *ForkDivergence `json:"divergence,omitempty" jsonschema_description:"The first divergence, when not reproduced."`
}

// EventType implements Payload.
func (ForkPrefix) EventType() string { return TypeForkPrefix }
