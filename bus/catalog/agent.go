package catalog

// Agent, notes, evidence and ledger types.
const (
	TypeAgentStep        = "vera.agent.step"
	TypeAgentProtocol    = "vera.agent.protocol"
	TypeNotesAppended    = "vera.notes.appended"
	TypeEvidenceRecorded = "vera.evidence.recorded"
	TypeLedgerMove       = "vera.ledger.move"
	TypeLedgerQuery      = "vera.ledger.query"
)

// AgentStep is one parsed agent turn: THOUGHT, Action, EVIDENCE_USED and
// STATUS_UPDATE.
type AgentStep struct {
	Step            int          `json:"step" jsonschema:"minimum=1" jsonschema_description:"Step number, from 1."`
	Thought         string       `json:"thought" jsonschema_description:"The THOUGHT line."`
	Action          string       `json:"action" jsonschema_description:"The raw action line as the model wrote it (normally a single-line JSON tool call)."`
	ActionTool      ActionTool   `json:"action_tool,omitempty" jsonschema_description:"Tool named by the action; empty when the action could not be parsed."`
	Command         string       `json:"command,omitempty" jsonschema_description:"Shell command, when action_tool is shell (from args.cmd or command)."`
	NotesText       string       `json:"notes_text,omitempty" jsonschema_description:"Text to append to notes.md, when action_tool is notes_append."`
	Answer          string       `json:"answer,omitempty" jsonschema_description:"Candidate answer, when action_tool is submit (for an answer file: its content, when small)."`
	AnswerFile      string       `json:"answer_file,omitempty" jsonschema_description:"When action_tool is submit with a file: the file under /work/output/ whose content at submit time is the answer."`
	AnswerSHA256    string       `json:"answer_sha256,omitempty" jsonschema_description:"Digest of the answer file's content at submit time."`
	AnswerBlob      *BlobRef     `json:"answer_blob,omitempty" jsonschema_description:"The answer file's content, when too big to be inline."`
	Edit            *EditArgs    `json:"edit,omitempty" jsonschema_description:"The file operation, when action_tool is edit."`
	EvidenceUsed    []string     `json:"evidence_used,omitempty" jsonschema:"pattern=^ev_[0-9]{4}[0-9]*$" jsonschema_description:"Evidence ids cited on the EVIDENCE_USED line that exist."`
	UnknownEvidence []string     `json:"unknown_evidence,omitempty" jsonschema_description:"Ids cited on the EVIDENCE_USED line that match no recorded evidence."`
	StatusUpdate    string       `json:"status_update,omitempty" jsonschema_description:"The STATUS_UPDATE line, e.g. UNRESOLVED(need the official changelog)."`
	FormatError     string       `json:"format_error,omitempty" jsonschema_description:"What was wrong with the reply (missing line, unparseable JSON...); empty when the format was fine. A step with a format error runs no tool."`
	ModelCallID     string       `json:"model_call_id" jsonschema_description:"call_id of the model call whose reply this step parses."`
	RequestID       string       `json:"request_id,omitempty" jsonschema_description:"request_id of the vera.tool.requested this step issued, if any."`
	Protocol        ToolProtocol `json:"protocol,omitempty" jsonschema_description:"How the reply carried its action: native (a tool call) or text (the ACTION line); empty = text."`
	ToolCallID      string       `json:"tool_call_id,omitempty" jsonschema_description:"Id the server gave the native tool call this step acts on."`
}

// AgentProtocol records which tool protocol a run's agent uses, when it was
// not fixed by the run's settings (tool_protocol auto): decided once, from
// the first model reply, and kept for the rest of the run.
type AgentProtocol struct {
	Requested   ToolProtocol `json:"requested" jsonschema_description:"The protocol the run asked for (auto)."`
	Protocol    ToolProtocol `json:"protocol" jsonschema_description:"The protocol chosen: native or text."`
	Reason      string       `json:"reason" jsonschema:"minLength=1" jsonschema_description:"Why, in words: the server refused tools, the model answered in text, the model called a tool."`
	Step        int          `json:"step" jsonschema:"minimum=1" jsonschema_description:"Step whose reply decided."`
	ModelCallID string       `json:"model_call_id,omitempty" jsonschema_description:"call_id of the model call whose reply decided."`
}

// EventType implements Payload.
func (AgentProtocol) EventType() string { return TypeAgentProtocol }

// EventType implements Payload.
func (AgentStep) EventType() string { return TypeAgentStep }

// NotesAppended is one append to the run's notes.md. Notes are append-only.
type NotesAppended struct {
	Step        int         `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step of the append; 0 = before the first step."`
	Author      NotesAuthor `json:"author" jsonschema_description:"Who wrote the text."`
	Text        string      `json:"text" jsonschema:"minLength=1" jsonschema_description:"The text appended, verbatim (markdown); the projector adds it to notes.md as is, followed by a newline."`
	EvidenceIDs []string    `json:"evidence_ids,omitempty" jsonschema:"pattern=^ev_[0-9]{4}[0-9]*$" jsonschema_description:"Evidence ids the text refers to."`
}

// EventType implements Payload.
func (NotesAppended) EventType() string { return TypeNotesAppended }

// EvidenceRecorded is one line of the evidence ledger (evidence.jsonl): the
// normalized output of one agent tool call.
type EvidenceRecorded struct {
	EvidenceID string   `json:"evidence_id" jsonschema:"pattern=^ev_[0-9]{4}[0-9]*$" jsonschema_description:"Evidence id, ev_0001, ev_0002... in order of recording within the run."`
	RequestID  string   `json:"request_id" jsonschema_description:"The tool request whose output this is."`
	Step       int      `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step of the tool call."`
	Command    string   `json:"command" jsonschema_description:"The command run."`
	ExitCode   int      `json:"exit_code" jsonschema_description:"Its exit code (-1 when it did not run to an exit)."`
	Excerpt    string   `json:"excerpt" jsonschema_description:"Normalized excerpt of the output that can be quoted as a snippet."`
	URLs       []string `json:"urls,omitempty" jsonschema_description:"URLs the command fetched or the output names."`
	Paths      []string `json:"paths,omitempty" jsonschema_description:"Files the command read or wrote, as sandbox paths (/work/..., /input/...)."`
	OutputBlob *BlobRef `json:"output_blob,omitempty" jsonschema_description:"The full stdout, when it was too big for the tool event."`
}

// EventType implements Payload.
func (EvidenceRecorded) EventType() string { return TypeEvidenceRecorded }

// LedgerMove is one line of the move ledger (move_ledger.jsonl): a tool
// call typed as a search move.
type LedgerMove struct {
	Step       int           `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step of the move."`
	MoveType   MoveType      `json:"move_type" jsonschema_description:"What kind of move the command is."`
	Command    string        `json:"command" jsonschema_description:"The command."`
	Outcome    LedgerOutcome `json:"outcome" jsonschema_description:"How the move went."`
	EvidenceID string        `json:"evidence_id,omitempty" jsonschema:"pattern=^ev_[0-9]{4}[0-9]*$" jsonschema_description:"Evidence recorded from the move, if any."`
	RequestID  string        `json:"request_id,omitempty" jsonschema_description:"The tool request of the move; empty for a move blocked before a request was made."`
	Domains    []string      `json:"domains,omitempty" jsonschema_description:"Web domains the move touched (input to the domain-shift guard)."`
}

// EventType implements Payload.
func (LedgerMove) EventType() string { return TypeLedgerMove }

// LedgerQuery is one line of the query ledger (query_ledger.jsonl).
type LedgerQuery struct {
	Step             int           `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step of the query."`
	Query            string        `json:"query" jsonschema_description:"The query as issued."`
	Family           string        `json:"family" jsonschema_description:"Normalized query family (lowercased, stop words and order removed)."`
	FamilyCount      int           `json:"family_count" jsonschema:"minimum=1" jsonschema_description:"How many queries of this family the run has issued, this one included."`
	Outcome          LedgerOutcome `json:"outcome" jsonschema_description:"How the query went."`
	MutationRequired bool          `json:"mutation_required" jsonschema_description:"True when the family hit its limit: the next query must belong to a new family."`
	EvidenceID       string        `json:"evidence_id,omitempty" jsonschema:"pattern=^ev_[0-9]{4}[0-9]*$" jsonschema_description:"Evidence recorded from the query, if any."`
	RequestID        string        `json:"request_id,omitempty" jsonschema_description:"The tool request that issued the query."`
}

// EventType implements Payload.
func (LedgerQuery) EventType() string { return TypeLedgerQuery }
