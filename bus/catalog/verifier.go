package catalog

// Verifier types: the logic verifier, the DeepVerifier auditor and VerifyFast.
const (
	TypeLogicVerdict      = "vera.logic.verdict"
	TypeAuditRequested    = "vera.audit.requested"
	TypeAuditDecomposed   = "vera.audit.decomposed"
	TypeAuditCheckStarted = "vera.audit.check_started"
	TypeAuditCheck        = "vera.audit.check"
	TypeAuditJudged       = "vera.audit.judged"
	TypeAuditFeedback     = "vera.audit.feedback"
	TypeVerifyFastPhase   = "vera.verifyfast.phase"
	TypeVerifyFastScored  = "vera.verifyfast.scored"
)

// LogicVerdict is the repetitive-action verdict on one agent step
// (MIRAGE-Bench's repetitive risk).
type LogicVerdict struct {
	Step               int          `json:"step" jsonschema:"minimum=1" jsonschema_description:"The agent step judged."`
	ThinkingEval       int          `json:"thinking_eval" jsonschema:"minimum=0,maximum=2" jsonschema_description:"0 = repeats the action without awareness (hallucination); 1 = different action, no explicit awareness; 2 = aware of the repetition and takes an alternative."`
	ActionEval         int          `json:"action_eval" jsonschema:"minimum=0,maximum=2" jsonschema_description:"Score of the action on the same 0-2 scale (the verified_result format carries both)."`
	ThinkingEvalReason string       `json:"thinking_eval_reason" jsonschema_description:"Why, in one sentence, e.g. Action matches repetitive action."`
	VerifierType       VerifierType `json:"verifier_type" jsonschema_description:"Which verifier produced the verdict."`
	DecidedBy          DecidedBy    `json:"decided_by" jsonschema_description:"logic when keywords and patterns decided; llm when the hybrid verifier asked a model judge about an uncertain case; logic-fallback when that judge failed twice and the logic verdict stands (the reason says why)."`
	Window             int          `json:"window" jsonschema:"minimum=0" jsonschema_description:"How many preceding steps the action was compared with."`
	Action             string       `json:"action,omitempty" jsonschema_description:"The action judged (its command, or the raw action line)."`
	RepeatedAction     string       `json:"repeated_action,omitempty" jsonschema_description:"The earlier action this one repeats; empty when it repeats none."`
	RepeatedStep       int          `json:"repeated_step,omitempty" jsonschema:"minimum=0" jsonschema_description:"Step of that earlier action."`
	MatchedKeywords    []string     `json:"matched_keywords,omitempty" jsonschema_description:"Awareness keywords found in the thought (tried before, different approach...)."`
	MatchedPatterns    []string     `json:"matched_patterns,omitempty" jsonschema_description:"Awareness regular expressions that matched the thought."`
	ModelCallID        string       `json:"model_call_id,omitempty" jsonschema_description:"call_id of the fallback model call, when decided_by is llm."`
}

// EventType implements Payload.
func (LogicVerdict) EventType() string { return TypeLogicVerdict }

// AuditRequested submits a candidate answer to verification.
type AuditRequested struct {
	Round         int      `json:"round" jsonschema:"minimum=1" jsonschema_description:"Verification round, from 1."`
	Answer        string   `json:"answer" jsonschema_description:"The candidate answer, inline when small."`
	AnswerBlob    *BlobRef `json:"answer_blob,omitempty" jsonschema_description:"The candidate answer when too big to be inline."`
	AnswerFile    string   `json:"answer_file,omitempty" jsonschema_description:"The file under /work/output/ the answer was read from, when submitted as a file (the auditor reads the same file)."`
	AnswerSHA256  string   `json:"answer_sha256,omitempty" jsonschema_description:"Digest of the answer file's content at submit time."`
	CandidateStep int      `json:"candidate_step" jsonschema:"minimum=0" jsonschema_description:"The agent step that submitted it."`
	EvidenceIDs   []string `json:"evidence_ids,omitempty" jsonschema:"pattern=^ev_[0-9]{4}[0-9]*$" jsonschema_description:"Evidence the answer cites."`
	ToolCalls     int      `json:"tool_calls" jsonschema:"minimum=0" jsonschema_description:"Agent tool calls finished before the request; 0 means verification before any tool (dra_verifier_before_tools_total)."`
}

// EventType implements Payload.
func (AuditRequested) EventType() string { return TypeAuditRequested }

// AuditFinding is one line of the auditor's trajectory summary.
type AuditFinding struct {
	Step    int    `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step summarized."`
	Source  string `json:"source" jsonschema_description:"Where the finding comes from: a URL, a path or an evidence id."`
	Finding string `json:"finding" jsonschema_description:"What the step established."`
}

// LikelyError is a failure class a candidate answer likely suffers from.
type LikelyError struct {
	Class         ErrorClass `json:"class" jsonschema_description:"Failure class."`
	Justification string     `json:"justification" jsonschema_description:"Why the auditor suspects it."`
}

// AuditCheckPlan is a verification question planned by the decomposition.
type AuditCheckPlan struct {
	CheckID     string `json:"check_id" jsonschema:"minLength=1" jsonschema_description:"Id of the check, derived from round and position (r1-c1...)."`
	Source      string `json:"source" jsonschema_description:"Source the check is bound to (URL, path or evidence id)."`
	Question    string `json:"question" jsonschema_description:"A yes/no question answerable with tools."`
	LoadBearing bool   `json:"load_bearing" jsonschema_description:"Whether the answer depends on it; an unknown load-bearing check caps the score at 2."`
}

// AuditDecomposed is the auditor's decomposition of a candidate answer:
// the trajectory summary, likely errors and the checks to run.
type AuditDecomposed struct {
	Round        int              `json:"round" jsonschema:"minimum=1" jsonschema_description:"Verification round."`
	Summary      []AuditFinding   `json:"summary,omitempty" jsonschema_description:"Summary of the trajectory, from the task, notes and evidence only (clean room: not the agent's chat)."`
	LikelyErrors []LikelyError    `json:"likely_errors,omitempty" jsonschema_description:"Failure classes the answer likely has."`
	Checks       []AuditCheckPlan `json:"checks,omitempty" jsonschema:"maxItems=3" jsonschema_description:"The checks to run, at most 3."`
	ModelCallID  string           `json:"model_call_id,omitempty" jsonschema_description:"call_id of the decomposition model call."`
	DurationMS   int64            `json:"duration_ms" jsonschema:"minimum=0" jsonschema_description:"Time spent decomposing."`
}

// EventType implements Payload.
func (AuditDecomposed) EventType() string { return TypeAuditDecomposed }

// AuditCheckStarted says the auditor began one check.
type AuditCheckStarted struct {
	Round    int    `json:"round" jsonschema:"minimum=1" jsonschema_description:"Verification round."`
	CheckID  string `json:"check_id" jsonschema:"minLength=1" jsonschema_description:"The check."`
	Question string `json:"question" jsonschema_description:"Its question."`
}

// EventType implements Payload.
func (AuditCheckStarted) EventType() string { return TypeAuditCheckStarted }

// AuditCheck is the result of one check.
type AuditCheck struct {
	Round          int         `json:"round" jsonschema:"minimum=1" jsonschema_description:"Verification round."`
	CheckID        string      `json:"check_id" jsonschema:"minLength=1" jsonschema_description:"The check."`
	Source         string      `json:"source" jsonschema_description:"Source the check is bound to."`
	Question       string      `json:"question" jsonschema_description:"Its question."`
	LoadBearing    bool        `json:"load_bearing" jsonschema_description:"Whether the answer depends on it."`
	Result         CheckResult `json:"result" jsonschema_description:"The answer to the question."`
	Evidence       string      `json:"evidence" jsonschema_description:"What the auditor saw: quotes with their URLs or paths and commands."`
	Citations      []string    `json:"citations,omitempty" jsonschema_description:"URLs or paths supporting the result (their distinct domains count for the two-independent-citations cap)."`
	ToolRequestIDs []string    `json:"tool_request_ids,omitempty" jsonschema_description:"request_id of every vera.tool.requested the check issued."`
	DurationMS     int64       `json:"duration_ms" jsonschema:"minimum=0" jsonschema_description:"Time spent on the check."`
}

// EventType implements Payload.
func (AuditCheck) EventType() string { return TypeAuditCheck }

// ScoreCap is a gating rule that capped the judge's score.
type ScoreCap struct {
	Rule   string `json:"rule" jsonschema:"minLength=1" jsonschema_description:"The rule: unknown_load_bearing, negative_claim_coverage or independent_citations."`
	Reason string `json:"reason" jsonschema_description:"Why it applied here."`
	Cap    int    `json:"cap" jsonschema:"minimum=1,maximum=4" jsonschema_description:"Highest score the rule allows."`
}

// AuditJudged is the judge's verdict on a round.
type AuditJudged struct {
	Round        int        `json:"round" jsonschema:"minimum=1" jsonschema_description:"Verification round."`
	Explanation  string     `json:"explanation" jsonschema_description:"The judge's reasoning."`
	Score        int        `json:"score" jsonschema:"minimum=1,maximum=4" jsonschema_description:"Final score after caps: 1 = wrong, 4 = verified (counted by dra_verifier_scores_total)."`
	RawScore     int        `json:"raw_score" jsonschema:"minimum=1,maximum=4" jsonschema_description:"The judge's score before caps."`
	Instructions []string   `json:"instructions,omitempty" jsonschema:"maxItems=3" jsonschema_description:"At most 3 concrete corrective instructions for the agent."`
	Caps         []ScoreCap `json:"caps,omitempty" jsonschema_description:"Caps that applied (SCOUT gating)."`
	BestRound    int        `json:"best_round" jsonschema:"minimum=1" jsonschema_description:"Best-scoring round so far, this one included (earliest on ties)."`
	BestScore    int        `json:"best_score" jsonschema:"minimum=1,maximum=4" jsonschema_description:"Its score."`
	DurationMS   int64      `json:"duration_ms" jsonschema:"minimum=0" jsonschema_description:"Time spent on the whole round (decompose, checks, judge)."`
	ModelTokens  int64      `json:"model_tokens" jsonschema:"minimum=0" jsonschema_description:"Model tokens the round used (dra_verifier_model_tokens_total)."`
	ModelCallID  string     `json:"model_call_id,omitempty" jsonschema_description:"call_id of the judge model call."`
}

// EventType implements Payload.
func (AuditJudged) EventType() string { return TypeAuditJudged }

// AuditFeedback is what the auditor hands back to the agent for a round.
type AuditFeedback struct {
	Round        int      `json:"round" jsonschema:"minimum=1" jsonschema_description:"Verification round."`
	Score        int      `json:"score" jsonschema:"minimum=1,maximum=4" jsonschema_description:"The round's score."`
	Accepted     bool     `json:"accepted" jsonschema_description:"True when the score reached the stop score: the agent finishes RESOLVED."`
	Instructions []string `json:"instructions,omitempty" jsonschema:"maxItems=3" jsonschema_description:"Corrective instructions to follow before resubmitting."`
	Final        bool     `json:"final" jsonschema_description:"True when no further round will be run (accepted, or the round budget is spent): the agent finishes with the best round's answer."`
	Message      string   `json:"message,omitempty" jsonschema_description:"The text injected into the agent's next prompt, verbatim."`
}

// EventType implements Payload.
func (AuditFeedback) EventType() string { return TypeAuditFeedback }

// VerifyFastError is one error found by a VerifyFast check phase.
type VerifyFastError struct {
	Kind     ErrorKind  `json:"kind" jsonschema_description:"fact (phase 2) or logic (phase 3)."`
	Level    ErrorLevel `json:"level" jsonschema_description:"contradiction: conflicts with the context; unsupported: not in the context and not reasonably inferable."`
	Severity Severity   `json:"severity" jsonschema_description:"high: enough to change the core conclusion (reversed direction...); low: a deviation that keeps the direction."`
	Claim    string     `json:"claim" jsonschema_description:"The claim or reasoning chain at fault."`
	Quote    string     `json:"quote,omitempty" jsonschema_description:"The passage of the context it conflicts with, if any."`
	Reason   string     `json:"reason" jsonschema_description:"Why it is an error."`
}

// VerifyFastPhase is the result of one VerifyFast phase on an answer.
type VerifyFastPhase struct {
	AnswerEventID string              `json:"answer_event_id" jsonschema:"minLength=1" jsonschema_description:"Id of the event carrying the answer audited (vera.audit.requested or vera.run.finished)."`
	Profile       string              `json:"profile" jsonschema_description:"The profile in use."`
	Phase         int                 `json:"phase" jsonschema:"minimum=1,maximum=3" jsonschema_description:"1 = decompose, 2 = fact check, 3 = logic check."`
	Name          VerifyFastPhaseName `json:"name" jsonschema_description:"Name of the phase."`
	Facts         []string            `json:"facts,omitempty" jsonschema_description:"Phase 1: atomic factual claims extracted (at most 5 by default)."`
	Chains        []string            `json:"chains,omitempty" jsonschema_description:"Phase 1: reasoning chains (deductions) extracted."`
	Errors        []VerifyFastError   `json:"errors,omitempty" jsonschema_description:"Phases 2 and 3: errors found."`
	ParseError    string              `json:"parse_error,omitempty" jsonschema_description:"Why the model's reply could not be parsed; the phase then counts as having found nothing."`
	ModelCallID   string              `json:"model_call_id,omitempty" jsonschema_description:"call_id of the phase's model call."`
	DurationMS    int64               `json:"duration_ms" jsonschema:"minimum=0" jsonschema_description:"Time spent on the phase."`
}

// EventType implements Payload.
func (VerifyFastPhase) EventType() string { return TypeVerifyFastPhase }

// VerifyFastScored is VerifyFast's deterministic score of an answer.
type VerifyFastScored struct {
	AnswerEventID string `json:"answer_event_id" jsonschema:"minLength=1" jsonschema_description:"Id of the event carrying the answer scored."`
	Profile       string `json:"profile" jsonschema_description:"The profile in use."`
	HighCount     int    `json:"high_count" jsonschema:"minimum=0" jsonschema_description:"High-severity errors of phases 2 and 3."`
	LowCount      int    `json:"low_count" jsonschema:"minimum=0" jsonschema_description:"Low-severity errors of phases 2 and 3."`
	CreditScore   int    `json:"credit_score" jsonschema:"minimum=1,maximum=5" jsonschema_description:"high >= 3: 1; high 1-2: 2; high 0 and low >= 2: 3; high 0 and low 1: 4; no errors: 5."`
	Zone          Zone   `json:"zone" jsonschema_description:"BAD (1-2), MID (3) or GOOD (4-5)."`
	DurationMS    int64  `json:"duration_ms" jsonschema:"minimum=0" jsonschema_description:"Time spent on all phases."`
}

// EventType implements Payload.
func (VerifyFastScored) EventType() string { return TypeVerifyFastScored }
