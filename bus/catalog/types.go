package catalog

import (
	"reflect"
	"slices"

	"github.com/vera-run/vera/bus"
)

// enumer is implemented by the string enum types used in payloads. The
// schema generator and the docs list the values; Valid methods check them.
type enumer interface{ enumValues() []string }

var enumerType = reflect.TypeFor[enumer]()

func validEnum(e enumer, v string) bool { return slices.Contains(e.enumValues(), v) }

// Outcome is the end state of a run. Missing evidence is not a failure: a
// run stays UNRESOLVED until new evidence is produced or the search is
// exhausted; FAILED is for errors (model unreachable, sandbox broken,
// cancellation).
type Outcome string

// Outcome values.
const (
	OutcomeResolved   Outcome = "RESOLVED"
	OutcomeUnresolved Outcome = "UNRESOLVED"
	OutcomeFailed     Outcome = "FAILED"
)

func (Outcome) enumValues() []string { return []string{"RESOLVED", "UNRESOLVED", "FAILED"} }

// Valid reports whether o is a known value.
func (o Outcome) Valid() bool { return validEnum(o, string(o)) }

// ModelScope says which part of VERA made a model call. It is the scope
// label of dra_model_tokens_total.
type ModelScope string

// ModelScope values.
const (
	ScopeAgent      ModelScope = "agent"      // the research agent's step calls
	ScopeVerifier   ModelScope = "verifier"   // DeepVerifier decomposition and per-check calls
	ScopeJudge      ModelScope = "judge"      // DeepVerifier judge calls
	ScopeVerifyFast ModelScope = "verifyfast" // VerifyFast phase calls
	ScopeLogic      ModelScope = "logic"      // the hybrid logic verifier's LLM fallback
	ScopeEval       ModelScope = "eval"       // vera eval's judge scorer
)

func (ModelScope) enumValues() []string {
	return []string{"agent", "verifier", "judge", "verifyfast", "logic", "eval"}
}

// Valid reports whether s is a known value.
func (s ModelScope) Valid() bool { return validEnum(s, string(s)) }

// MessageRole is the role of a chat message.
type MessageRole string

// MessageRole values.
const (
	RoleSystem    MessageRole = "system"
	RoleUser      MessageRole = "user"
	RoleAssistant MessageRole = "assistant"
	RoleTool      MessageRole = "tool"
)

func (MessageRole) enumValues() []string { return []string{"system", "user", "assistant", "tool"} }

// Valid reports whether r is a known value.
func (r MessageRole) Valid() bool { return validEnum(r, string(r)) }

// ActionTool is the tool named by the agent's JSON action line.
type ActionTool string

// ActionTool values.
const (
	ActionShell       ActionTool = "shell"
	ActionNotesAppend ActionTool = "notes_append"
	ActionSubmit      ActionTool = "submit"
	ActionEdit        ActionTool = "edit"
)

func (ActionTool) enumValues() []string { return []string{"shell", "notes_append", "submit", "edit"} }

// Valid reports whether a is a known value.
func (a ActionTool) Valid() bool { return validEnum(a, string(a)) }

// Requester is who asked sandboxd to run a command.
type Requester string

// Requester values.
const (
	RequesterAgent   Requester = "agent"
	RequesterAuditor Requester = "auditor"
	RequesterCLI     Requester = "cli"
)

func (Requester) enumValues() []string { return []string{"agent", "auditor", "cli"} }

// Valid reports whether r is a known value.
func (r Requester) Valid() bool { return validEnum(r, string(r)) }

// ToolName is the sandbox tool of a request: the shell, or the file tool.
type ToolName string

// ToolName values.
const (
	ToolShell ToolName = "shell" // a shell command run in the sandbox
	ToolEdit  ToolName = "edit"  // a file view or edit (EditArgs), run by sandboxd in the sandbox
)

func (ToolName) enumValues() []string { return []string{"shell", "edit"} }

// EditOp is one operation of the file tool.
type EditOp string

// EditOp values.
const (
	EditView       EditOp = "view"        // show a file (or a line range) with line numbers
	EditCreate     EditOp = "create"      // create a file that does not exist yet
	EditStrReplace EditOp = "str_replace" // replace the one occurrence of old_str with new_str
	EditInsert     EditOp = "insert"      // insert new_str after line insert_line (0 = at the top)
	EditUndo       EditOp = "undo"        // undo the last edit of the file
)

func (EditOp) enumValues() []string {
	return []string{"view", "create", "str_replace", "insert", "undo"}
}

// Valid reports whether o is a known value.
func (o EditOp) Valid() bool { return validEnum(o, string(o)) }

// SessionMode is how sandboxd runs a run's shell commands.
type SessionMode string

// SessionMode values.
const (
	// SessionPersistent: one long-lived session per container; each
	// command starts from the whole shell state its requester passes
	// (cwd, exports and shell_state: functions, aliases, variables,
	// options), without a Docker exec of its own.
	SessionPersistent SessionMode = "persistent"
	// SessionExec: one Docker exec per command; only cwd and exports
	// carry over.
	SessionExec SessionMode = "exec"
)

func (SessionMode) enumValues() []string { return []string{"persistent", "exec"} }

// Valid reports whether m is a known value.
func (m SessionMode) Valid() bool { return validEnum(m, string(m)) }

// Valid reports whether t is a known value.
func (t ToolName) Valid() bool { return validEnum(t, string(t)) }

// NotesAuthor is who appended to notes.md.
type NotesAuthor string

// NotesAuthor values.
const (
	AuthorAgent   NotesAuthor = "agent"   // the agent's notes_append action
	AuthorAuditor NotesAuthor = "auditor" // auditor feedback recorded in the notes
	AuthorSystem  NotesAuthor = "system"  // VERA itself, e.g. new evidence ids
)

func (NotesAuthor) enumValues() []string { return []string{"agent", "auditor", "system"} }

// Valid reports whether a is a known value.
func (a NotesAuthor) Valid() bool { return validEnum(a, string(a)) }

// MoveType classifies a tool call in the move ledger.
type MoveType string

// MoveType values.
const (
	MoveSearch  MoveType = "search"
	MoveFetch   MoveType = "fetch"
	MoveRead    MoveType = "read"
	MoveExtract MoveType = "extract"
	MoveCompute MoveType = "compute"
	MoveInstall MoveType = "install"
	MoveWrite   MoveType = "write"
	MoveVerify  MoveType = "verify"
	MoveOther   MoveType = "other"
)

func (MoveType) enumValues() []string {
	return []string{"search", "fetch", "read", "extract", "compute", "install", "write", "verify", "other"}
}

// Valid reports whether m is a known value.
func (m MoveType) Valid() bool { return validEnum(m, string(m)) }

// LedgerOutcome is the outcome of a move or a query in the ledgers.
type LedgerOutcome string

// LedgerOutcome values.
const (
	LedgerSuccess LedgerOutcome = "success" // exit 0 with useful output
	LedgerFailure LedgerOutcome = "failure" // non-zero exit or error
	LedgerEmpty   LedgerOutcome = "empty"   // ran fine, produced nothing useful
	LedgerDenied  LedgerOutcome = "denied"  // blocked by a deny rule or a policy gate
	LedgerTimeout LedgerOutcome = "timeout" // killed at its timeout
)

func (LedgerOutcome) enumValues() []string {
	return []string{"success", "failure", "empty", "denied", "timeout"}
}

// Valid reports whether o is a known value.
func (o LedgerOutcome) Valid() bool { return validEnum(o, string(o)) }

// PolicyEffect is what a policy rule did to the agent loop.
type PolicyEffect string

// PolicyEffect values.
const (
	EffectNudge     PolicyEffect = "nudge"      // text injected, the action proceeds
	EffectBlock     PolicyEffect = "block"      // the proposed action was not executed
	EffectForceTool PolicyEffect = "force_tool" // the next action must be a tool call
	EffectStop      PolicyEffect = "stop"       // the run stops
	EffectConclude  PolicyEffect = "conclude"   // the run concludes UNRESOLVED with a reason
)

func (PolicyEffect) enumValues() []string {
	return []string{"nudge", "block", "force_tool", "stop", "conclude"}
}

// Valid reports whether e is a known value.
func (e PolicyEffect) Valid() bool { return validEnum(e, string(e)) }

// StreamName names an output stream.
type StreamName string

// StreamName values.
const (
	StreamStdout StreamName = "stdout"
	StreamStderr StreamName = "stderr"
)

func (StreamName) enumValues() []string { return []string{"stdout", "stderr"} }

// Valid reports whether s is a known value.
func (s StreamName) Valid() bool { return validEnum(s, string(s)) }

// VerifierType names the logic verifier variant.
type VerifierType string

// VerifierType values.
const (
	VerifierLogic  VerifierType = "logic"
	VerifierHybrid VerifierType = "hybrid"
)

func (VerifierType) enumValues() []string { return []string{"logic", "hybrid"} }

// Valid reports whether v is a known value.
func (v VerifierType) Valid() bool { return validEnum(v, string(v)) }

// DecidedBy says which path of the logic verifier produced a verdict.
type DecidedBy string

// DecidedBy values.
const (
	DecidedByLogic         DecidedBy = "logic"
	DecidedByLLM           DecidedBy = "llm"
	DecidedByLogicFallback DecidedBy = "logic-fallback" // the judge failed twice; the logic verdict stands
)

func (DecidedBy) enumValues() []string { return []string{"logic", "llm", "logic-fallback"} }

// Valid reports whether d is a known value.
func (d DecidedBy) Valid() bool { return validEnum(d, string(d)) }

// ErrorClass is a DeepVerifier failure class a candidate answer likely has.
type ErrorClass string

// ErrorClass values.
const (
	ErrorFindingSources       ErrorClass = "finding_sources"
	ErrorReasoning            ErrorClass = "reasoning"
	ErrorProblemUnderstanding ErrorClass = "problem_understanding"
	ErrorAction               ErrorClass = "action_error"
	ErrorStepBudget           ErrorClass = "step_budget"
)

func (ErrorClass) enumValues() []string {
	return []string{"finding_sources", "reasoning", "problem_understanding", "action_error", "step_budget"}
}

// Valid reports whether c is a known value.
func (c ErrorClass) Valid() bool { return validEnum(c, string(c)) }

// CheckResult is the answer to one audit check question.
type CheckResult string

// CheckResult values.
const (
	CheckYes     CheckResult = "yes"
	CheckNo      CheckResult = "no"
	CheckUnknown CheckResult = "unknown"
)

func (CheckResult) enumValues() []string { return []string{"yes", "no", "unknown"} }

// Valid reports whether r is a known value.
func (r CheckResult) Valid() bool { return validEnum(r, string(r)) }

// VerifyFastPhaseName names a VerifyFast phase.
type VerifyFastPhaseName string

// VerifyFastPhaseName values.
const (
	PhaseDecompose  VerifyFastPhaseName = "decompose"   // phase 1
	PhaseFactCheck  VerifyFastPhaseName = "fact_check"  // phase 2
	PhaseLogicCheck VerifyFastPhaseName = "logic_check" // phase 3
)

func (VerifyFastPhaseName) enumValues() []string {
	return []string{"decompose", "fact_check", "logic_check"}
}

// Valid reports whether n is a known value.
func (n VerifyFastPhaseName) Valid() bool { return validEnum(n, string(n)) }

// ErrorKind is the kind of a VerifyFast error.
type ErrorKind string

// ErrorKind values.
const (
	KindFact  ErrorKind = "fact"
	KindLogic ErrorKind = "logic"
)

func (ErrorKind) enumValues() []string { return []string{"fact", "logic"} }

// Valid reports whether k is a known value.
func (k ErrorKind) Valid() bool { return validEnum(k, string(k)) }

// ErrorLevel is how a claim relates to the context. Reasonable inferences
// are not errors and are never reported.
type ErrorLevel string

// ErrorLevel values.
const (
	LevelContradiction ErrorLevel = "contradiction"
	LevelUnsupported   ErrorLevel = "unsupported"
)

func (ErrorLevel) enumValues() []string { return []string{"contradiction", "unsupported"} }

// Valid reports whether l is a known value.
func (l ErrorLevel) Valid() bool { return validEnum(l, string(l)) }

// Severity is the weight of a VerifyFast error in the score.
type Severity string

// Severity values.
const (
	SeverityHigh Severity = "high"
	SeverityLow  Severity = "low"
)

func (Severity) enumValues() []string { return []string{"high", "low"} }

// Valid reports whether s is a known value.
func (s Severity) Valid() bool { return validEnum(s, string(s)) }

// Zone is the band a VerifyFast credit score falls in.
type Zone string

// Zone values.
const (
	ZoneBad  Zone = "BAD"  // credit score 1-2: reject or review by hand
	ZoneMid  Zone = "MID"  // credit score 3: use with caution
	ZoneGood Zone = "GOOD" // credit score 4-5: can be adopted
)

func (Zone) enumValues() []string { return []string{"BAD", "MID", "GOOD"} }

// Valid reports whether z is a known value.
func (z Zone) Valid() bool { return validEnum(z, string(z)) }

// BlobRef references a payload too big to ride in an event (model I/O, tool
// output, long answers). The bytes live in VERA's JetStream object store, or
// in a file under the run's work dir, addressed by their digest.
type BlobRef = bus.BlobRef

// Output is a capped capture of one output stream (a command's stdout or
// stderr). Small streams are inline in Head; big ones keep their first and
// last bytes inline and the whole stream in Blob.
type Output struct {
	Head      string   `json:"head,omitempty" jsonschema_description:"The first bytes of the stream; the whole stream when truncated is false."`
	Tail      string   `json:"tail,omitempty" jsonschema_description:"The last bytes of the stream when truncated; empty otherwise."`
	Bytes     int64    `json:"bytes" jsonschema:"minimum=0" jsonschema_description:"Total size of the stream in bytes, before any truncation."`
	Truncated bool     `json:"truncated,omitempty" jsonschema_description:"True when head and tail do not hold the whole stream (the middle was cut); the whole stream is then in blob."`
	Encoding  string   `json:"encoding,omitempty" jsonschema:"enum=base64" jsonschema_description:"Empty when head and tail are UTF-8 text; base64 when the bytes were not valid UTF-8 and head and tail hold base64 of the raw bytes."`
	Blob      *BlobRef `json:"blob,omitempty" jsonschema_description:"The whole stream, when it was bigger than the inline cap."`
}

// TokenUsage counts model tokens as reported by the model server.
type TokenUsage struct {
	Prompt     int64 `json:"prompt" jsonschema:"minimum=0" jsonschema_description:"Prompt (input) tokens."`
	Completion int64 `json:"completion" jsonschema:"minimum=0" jsonschema_description:"Completion (output) tokens."`
	Total      int64 `json:"total" jsonschema:"minimum=0" jsonschema_description:"Total tokens as reported; prompt + completion when the server does not say."`
	Reasoning  int64 `json:"reasoning,omitempty" jsonschema:"minimum=0" jsonschema_description:"Reasoning tokens among the completion tokens, when the server reports them (completion_tokens_details.reasoning_tokens)."`
	Cached     int64 `json:"cached,omitempty" jsonschema:"minimum=0" jsonschema_description:"Prompt tokens served from the server's prompt cache, when it reports them (prompt_tokens_details.cached_tokens)."`
}

// Message is one chat message sent to a model.
type Message struct {
	Role    MessageRole `json:"role" jsonschema_description:"Chat role."`
	Content string      `json:"content" jsonschema_description:"Message text."`
}

// typeDocs are the schema descriptions of the nested struct types (their
// $defs entries) and the intros of the shared types in docs/events.md.
var typeDocs = map[reflect.Type]string{
	reflect.TypeFor[BlobRef]():          "A reference to bytes stored in VERA's JetStream object store (or a file under the run's work dir), by content digest. Used for model I/O, tool output and answers above the inline threshold: events stay small.",
	reflect.TypeFor[Output]():           "A capped capture of one output stream. Small streams are inline in head; big ones keep their first bytes in head, their last bytes in tail and the whole stream in blob.",
	reflect.TypeFor[TokenUsage]():       "Model token counts as reported by the model server.",
	reflect.TypeFor[Message]():          "One chat message sent to a model.",
	reflect.TypeFor[ToolCall]():         "One native tool call of a model reply (OpenAI tool_calls): its id, function name and the arguments text as sent.",
	reflect.TypeFor[ModelConfig]():      "An OpenAI-compatible model endpoint. Carries the name of the environment variable holding the API key, never a key: events are durable and replicated.",
	reflect.TypeFor[RunConfig]():        "The configuration of a run: the task, its directories, the models, budgets and the settings of the sandbox, the auditor and VerifyFast. vera.task.submitted carries it as submitted; vera.run.started echoes it with every default filled in.",
	reflect.TypeFor[AuditorConfig]():    "DeepVerifier auditor settings.",
	reflect.TypeFor[SandboxConfig]():    "Docker sandbox settings.",
	reflect.TypeFor[VerifyFastConfig](): "VerifyFast settings.",
	reflect.TypeFor[PolicyConfig]():     "Limits of the agent's policy layer; zero means the default.",
	reflect.TypeFor[ModelParams]():      "Sampling parameters of a model call.",
	reflect.TypeFor[AuditFinding]():     "One line of the auditor's summary of the agent's trajectory.",
	reflect.TypeFor[LikelyError]():      "A failure class the candidate answer likely suffers from.",
	reflect.TypeFor[AuditCheckPlan]():   "A yes/no verification question planned by the decomposition.",
	reflect.TypeFor[ScoreCap]():         "A SCOUT gating rule that capped the judge's score.",
	reflect.TypeFor[VerifyFastError]():  "One error found by a VerifyFast check phase.",
	reflect.TypeFor[EditArgs]():         "One operation of the file tool (edit): view, create, str_replace, insert or undo on a file of the sandbox.",
	reflect.TypeFor[EditResult]():       "What an edit did to a file: whether it changed, the unified diff and the content digests before and after.",
	reflect.TypeFor[EvalProfile]():      "One set of run settings an eval runs every task with (vera eval --profiles).",
	reflect.TypeFor[EvalRoundScore]():   "The score of one submitted answer against the task's reference.",
	reflect.TypeFor[ForkConfig]():       "Makes a run a fork of a recorded run (vera fork): the run reproduces the original's first at_step steps, then goes on live.",
	reflect.TypeFor[ForkDivergence]():   "Where a fork's prefix departed from the original.",
}

// sharedTypes are documented once in docs/events.md and linked from field
// tables instead of being expanded.
var sharedTypes = []reflect.Type{
	reflect.TypeFor[BlobRef](),
	reflect.TypeFor[Output](),
	reflect.TypeFor[TokenUsage](),
	reflect.TypeFor[ModelConfig](),
	reflect.TypeFor[RunConfig](),
}
