package catalog

import "time"

// Tool types.
const (
	TypeToolRequested = "vera.tool.requested"
	TypeToolStarted   = "vera.tool.started"
	TypeToolFinished  = "vera.tool.finished"
	TypeToolSession   = "vera.tool.session"
)

// ToolRequested asks sandboxd to run a command in the run's sandbox.
type ToolRequested struct {
	RequestID  string            `json:"request_id" jsonschema:"minLength=1" jsonschema_description:"Id of the request, unique in the run and derived from its cause (e.g. req-s0007 for the agent's step 7, req-r1-c2-t1 for an auditor check call). sandboxd runs a request id at most once."`
	Requester  Requester         `json:"requester" jsonschema_description:"Who asks."`
	Tool       ToolName          `json:"tool" jsonschema_description:"The tool: shell (command) or edit (edit)."`
	Command    string            `json:"command" jsonschema:"minLength=1" jsonschema_description:"The shell command (run by bash); for the edit tool, a one-line summary of the edit (e.g. edit str_replace /work/a.py)."`
	Edit       *EditArgs         `json:"edit,omitempty" jsonschema_description:"The file operation, when tool is edit."`
	Cwd        string            `json:"cwd,omitempty" jsonschema_description:"Working directory in the sandbox: the cwd_after of the requester's previous command, so that cd persists; empty = /work."`
	Env        map[string]string `json:"env,omitempty" jsonschema_description:"Variables to set: those exported by the requester's earlier commands, so that export KEY=VALUE persists."`
	ShellState string            `json:"shell_state,omitempty" jsonschema_description:"Shell state to start from in a persistent session: the shell_state_after of the requester's previous command (functions, aliases, unexported variables, shell options, umask), as bash source; empty = a fresh shell."`
	TimeoutMS  int64             `json:"timeout_ms" jsonschema:"minimum=0" jsonschema_description:"Kill the command after this many milliseconds; 0 = the run's tool timeout, else sandboxd's default."`
	Step       int               `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step the request belongs to (for the auditor: the candidate step); 0 = none."`
	Round      int               `json:"round,omitempty" jsonschema:"minimum=0" jsonschema_description:"Audit round, for auditor requests."`
	CheckID    string            `json:"check_id,omitempty" jsonschema_description:"Audit check, for auditor requests."`
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
	Daemon      string    `json:"daemon,omitempty" jsonschema_description:"Id of the sandboxd that ran it (vera sandboxd --id); a daemon that takes the run over reports a command another daemon started as interrupted instead of running it again."`
}

// EventType implements Payload.
func (ToolStarted) EventType() string { return TypeToolStarted }

// ToolFinished is the result of a requested command. A failing command is
// an observation, not an error of VERA.
type ToolFinished struct {
	RequestID       string            `json:"request_id" jsonschema:"minLength=1" jsonschema_description:"The request this answers."`
	Requester       Requester         `json:"requester" jsonschema_description:"Who asked (copied from the request, so that consumers can filter without a join)."`
	ExitCode        int               `json:"exit_code" jsonschema_description:"Exit code; -1 when the command did not run to an exit (denied, timed out, interrupted, error)."`
	DurationMS      int64             `json:"duration_ms" jsonschema:"minimum=0" jsonschema_description:"Run time of the command; 0 when it did not start."`
	TimedOut        bool              `json:"timed_out" jsonschema_description:"Killed at timeout_ms."`
	Denied          bool              `json:"denied" jsonschema_description:"Not run: the command matched a deny rule (destructive pattern, notes overwrite...)."`
	DenyRule        string            `json:"deny_rule,omitempty" jsonschema_description:"The deny rule that matched, when denied."`
	Interrupted     bool              `json:"interrupted" jsonschema_description:"Killed because the run was cancelled or finished, or sandboxd stopped."`
	Error           string            `json:"error,omitempty" jsonschema_description:"Error of sandboxd itself (container gone, Docker unreachable); empty when the command ran."`
	Notice          string            `json:"notice,omitempty" jsonschema_description:"What the sandbox tells the requester about the sandbox itself, once: e.g. that the run moved to another sandboxd, and whether /work came with it. The agent shows it to the model with the result."`
	Stdout          Output            `json:"stdout" jsonschema_description:"Captured standard output."`
	Stderr          Output            `json:"stderr" jsonschema_description:"Captured standard error."`
	CwdAfter        string            `json:"cwd_after,omitempty" jsonschema_description:"Working directory after the command (the next request's cwd)."`
	Exports         map[string]string `json:"exports,omitempty" jsonschema_description:"Variables the command exported with export KEY=VALUE (to add to the next request's env)."`
	ShellStateAfter string            `json:"shell_state_after,omitempty" jsonschema_description:"In a persistent session, the shell state the command left (functions, aliases, unexported variables, shell options, umask) as bash source: the next request's shell_state. Empty when the command did not report one (the previous state stays) or ran in exec mode."`
	Session         SessionMode       `json:"session,omitempty" jsonschema_description:"How the command ran: persistent (in the container's session) or exec (a Docker exec of its own); empty for the edit tool and for commands that did not run."`
	Edit            *EditResult       `json:"edit,omitempty" jsonschema_description:"What an edit did, when tool is edit and it ran (its text result for the agent is stdout; a refused edit has exit_code 1 and says why on stderr)."`
}

// EditArgs is one operation of the file tool. Paths are absolute sandbox
// paths under /work (or /input for view).
type EditArgs struct {
	Op         EditOp `json:"op" jsonschema_description:"view, create, str_replace, insert or undo."`
	Path       string `json:"path" jsonschema:"minLength=1" jsonschema_description:"Absolute path of the file in the sandbox, e.g. /work/analysis.py."`
	ViewRange  []int  `json:"view_range,omitempty" jsonschema_description:"For view: [first, last] line numbers, from 1; last -1 = to the end. Absent = the whole file."`
	FileText   string `json:"file_text,omitempty" jsonschema_description:"For create: the file's content."`
	OldStr     string `json:"old_str,omitempty" jsonschema_description:"For str_replace: the exact text to replace; it must occur exactly once."`
	NewStr     string `json:"new_str,omitempty" jsonschema_description:"For str_replace: the replacement; for insert: the text to insert."`
	InsertLine int    `json:"insert_line,omitempty" jsonschema:"minimum=0" jsonschema_description:"For insert: the line after which new_str goes (0 = before the first line)."`
}

// EditResult is what an edit did to a file.
type EditResult struct {
	Op            EditOp `json:"op" jsonschema_description:"The operation."`
	Path          string `json:"path" jsonschema_description:"The file."`
	Changed       bool   `json:"changed" jsonschema_description:"Whether the file's content changed (false for view and for a refused edit)."`
	Diff          string `json:"diff,omitempty" jsonschema_description:"Unified diff of the change (possibly cut, see diff_truncated)."`
	DiffTruncated bool   `json:"diff_truncated,omitempty" jsonschema_description:"The diff was longer than the inline cap and was cut."`
	SHA256Before  string `json:"sha256_before,omitempty" jsonschema_description:"Digest of the file before the edit; empty when it did not exist."`
	SHA256After   string `json:"sha256_after,omitempty" jsonschema_description:"Digest of the file after the edit."`
}

// ToolSession says sandboxd started a shell session in a container, or
// started it again, and which shell state that lost.
type ToolSession struct {
	Container string   `json:"container" jsonschema_description:"Name of the sandbox container."`
	SessionID string   `json:"session_id" jsonschema:"minLength=1" jsonschema_description:"Id of the new session (the Docker exec id of its keeper)."`
	Action    string   `json:"action" jsonschema:"enum=started,enum=restarted" jsonschema_description:"started: the container's first session; restarted: a session replaced another that ended or became unusable."`
	Reason    string   `json:"reason" jsonschema_description:"Why the session started, in words (first command, daemon restart, the keeper ended, unresponsive after a kill)."`
	Lost      []string `json:"lost,omitempty" jsonschema_description:"What the previous session held that the new one does not (e.g. the job table of background jobs); empty when nothing was lost."`
}

// EventType implements Payload.
func (ToolSession) EventType() string { return TypeToolSession }

// EventType implements Payload.
func (ToolFinished) EventType() string { return TypeToolFinished }
