package catalog

import "time"

// Tool types.
const (
	TypeToolRequested = "vera.tool.requested"
	TypeToolStarted   = "vera.tool.started"
	TypeToolFinished  = "vera.tool.finished"
)

// ToolRequested asks sandboxd to run a command in the run's sandbox.
type ToolRequested struct {
	RequestID string            `json:"request_id" jsonschema:"minLength=1" jsonschema_description:"Id of the request, unique in the run and derived from its cause (e.g. req-s0007 for the agent's step 7, req-r1-c2-t1 for an auditor check call). sandboxd runs a request id at most once."`
	Requester Requester         `json:"requester" jsonschema_description:"Who asks."`
	Tool      ToolName          `json:"tool" jsonschema_description:"The tool; only shell exists."`
	Command   string            `json:"command" jsonschema:"minLength=1" jsonschema_description:"The shell command (run with sh -c)."`
	Cwd       string            `json:"cwd,omitempty" jsonschema_description:"Working directory in the sandbox: the cwd_after of the requester's previous command, so that cd persists; empty = /work."`
	Env       map[string]string `json:"env,omitempty" jsonschema_description:"Variables to set: those exported by the requester's earlier commands, so that export KEY=VALUE persists."`
	TimeoutMS int64             `json:"timeout_ms" jsonschema:"minimum=0" jsonschema_description:"Kill the command after this many milliseconds; 0 = the run's tool timeout, else sandboxd's default."`
	Step      int               `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step the request belongs to (for the auditor: the candidate step); 0 = none."`
	Round     int               `json:"round,omitempty" jsonschema:"minimum=0" jsonschema_description:"Audit round, for auditor requests."`
	CheckID   string            `json:"check_id,omitempty" jsonschema_description:"Audit check, for auditor requests."`
}

// EventType implements Payload.
func (ToolRequested) EventType() string { return TypeToolRequested }

// ToolStarted says sandboxd started a requested command.
type ToolStarted struct {
	RequestID   string    `json:"request_id" jsonschema:"minLength=1" jsonschema_description:"The request being run."`
	Container   string    `json:"container" jsonschema_description:"Name of the sandbox container."`
	ContainerID string    `json:"container_id" jsonschema_description:"Docker id of the container."`
	ExecID      string    `json:"exec_id,omitempty" jsonschema_description:"Docker exec id of the command."`
	StartedAt   time.Time `json:"started_at" jsonschema_description:"When the exec started (RFC 3339)."`
}

// EventType implements Payload.
func (ToolStarted) EventType() string { return TypeToolStarted }

// ToolFinished is the result of a requested command. A failing command is
// an observation, not an error of VERA.
type ToolFinished struct {
	RequestID   string            `json:"request_id" jsonschema:"minLength=1" jsonschema_description:"The request this answers."`
	Requester   Requester         `json:"requester" jsonschema_description:"Who asked (copied from the request, so that consumers can filter without a join)."`
	ExitCode    int               `json:"exit_code" jsonschema_description:"Exit code; -1 when the command did not run to an exit (denied, timed out, interrupted, error)."`
	DurationMS  int64             `json:"duration_ms" jsonschema:"minimum=0" jsonschema_description:"Run time of the command; 0 when it did not start."`
	TimedOut    bool              `json:"timed_out" jsonschema_description:"Killed at timeout_ms."`
	Denied      bool              `json:"denied" jsonschema_description:"Not run: the command matched a deny rule (destructive pattern, notes overwrite...)."`
	DenyRule    string            `json:"deny_rule,omitempty" jsonschema_description:"The deny rule that matched, when denied."`
	Interrupted bool              `json:"interrupted" jsonschema_description:"Killed because the run was cancelled or finished, or sandboxd stopped."`
	Error       string            `json:"error,omitempty" jsonschema_description:"Error of sandboxd itself (container gone, Docker unreachable); empty when the command ran."`
	Stdout      Output            `json:"stdout" jsonschema_description:"Captured standard output."`
	Stderr      Output            `json:"stderr" jsonschema_description:"Captured standard error."`
	CwdAfter    string            `json:"cwd_after,omitempty" jsonschema_description:"Working directory after the command (the next request's cwd)."`
	Exports     map[string]string `json:"exports,omitempty" jsonschema_description:"Variables the command exported with export KEY=VALUE (to add to the next request's env)."`
}

// EventType implements Payload.
func (ToolFinished) EventType() string { return TypeToolFinished }
