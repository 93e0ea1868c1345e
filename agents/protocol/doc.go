// Package protocol is the VERA agent's conversation protocol: the embedded
// system prompt, the parser of the model's replies, and the deterministic
// assembly of the context sent to the model at every step. It is pure: no
// I/O, no clock, no randomness, so that replaying a run rebuilds the same
// prompts byte for byte.
//
// # Reply format
//
// Every model reply must hold four parts (any order is tolerated, the prompt
// asks for this one):
//
//	THOUGHT: <what the agent knows and does next>
//	<one JSON action on its own line>
//	EVIDENCE_USED: ev_0003, ev_0007        (or: none)
//	STATUS_UPDATE: continuing | UNRESOLVED(<reason>) | RESOLVED
//
// [Parse] reads a reply into a [Turn] and a list of [FormatError]s. When the
// list is not empty the agent runs no tool, records the errors (see
// [Summary]) and sends [Feedback] in the next turn.
//
// # Actions
//
// Exactly one action per reply. The accepted shapes ([Shapes]) are:
//
//	{"tool":"shell","args":{"cmd":"<command>"}}          canonical shell
//	{"tool":"shell","command":"<command>"}                short shell form
//	{"tool":"edit","args":{"op":"<op>","path":"<path>",…}} view or change a file
//	{"tool":"notes_append","args":{"text":"<markdown>"}}  append to notes.md
//	{"tool":"submit","args":{"answer":"<final answer>"}}   submit for audit
//	{"tool":"submit","args":{"answer_file":"<path>"}}      submit a file
//
// plus a few aliases, all named in the system prompt: tool "bash" for
// shell, "append_notes" for notes_append, "final_answer" for submit, and
// "args":{"command":…} for the shell command. Tool names are matched
// case-insensitively with "-", "." and spaces read as "_". Extra fields are
// ignored. A shell action giving both args.cmd and command must give the
// same command.
//
// The action is found (1) on a line that starts with "{", (2) after an
// "ACTION:" label (on the same line or the next), (3) inside a fenced code
// block (```json or any fence whose content starts with "{"). JSON that
// spans several lines (in a fence or not) is accepted and re-serialised to
// one line with [encoding/json.Compact]; raw newlines and tabs inside JSON
// strings (a heredoc typed literally) are escaped before a second attempt.
// A single-line action keeps its bytes as written in [Action.Raw]. Text
// after the closing brace on the same line is ignored. JSON objects with no
// "tool" field found outside an ACTION: label are taken as data, not as
// actions (inside a THOUGHT they stay part of it). The same action written twice (say after ACTION: and again in a
// fence) counts once; two different actions are a multiple_actions error.
//
// Notes are append-only: notes_append with a "mode" other than append (a,
// a+, append), a true overwrite/replace/truncate/delete/clear/reset/rewrite
// flag, an "op"/"operation" other than append, a notes tool named for
// writing, replacing, editing or deleting, or an edit of /work/notes.md
// other than view is refused as notes_overwrite.
//
// The edit action's args are those of catalog.EditArgs: op (view, create,
// str_replace, insert, undo), path, and what the op needs (view_range,
// file_text, old_str and new_str, insert_line). [Action.Edit] holds them;
// an unknown op or argument, a wrong type, a path that is not clean and
// absolute (under /work, or /input for view), an argument the op needs
// missing, are bad_edit. [EditSummary] is its one-line command
// ("edit str_replace /work/a.py").
//
// submit takes the answer inline (args.answer) or as a file
// (args.answer_file, [Action.AnswerFile]): a clean absolute path under
// /work/output/ ([ValidAnswerFile]; else bad_answer_file). Given both, the
// file wins and the inline answer is dropped. The agent reads the file and
// submits its content (see package agents).
//
// # Lines and labels
//
// Labels are matched case-insensitively at the start of a line, after
// optional markdown decoration ("**THOUGHT:**", "- Thought:", "## Thought"),
// with "_", "-" or a space inside two-word labels (EVIDENCE_USED, "Evidence
// used", STATUS-UPDATE) and ":", "-", "=", "–", "—" or "->" as separator. A
// label with no separator counts only when written in capitals ("THOUGHT I
// will…"), so that prose such as "Action items …" is not a label. CRLF and
// lone CR are read as LF. <think>…</think> and <thinking>…</thinking> blocks
// are removed before parsing; a closing tag with no opening one removes
// everything before it (servers that put the opening tag in the template);
// an unclosed opening tag removes everything after it, and if nothing is left
// the error is unterminated_think.
//
// THOUGHT may continue over the following lines until the next label or
// action. EVIDENCE_USED and STATUS_UPDATE take their value from their own
// line, or from the next line(s) when their own is empty. A repeated THOUGHT
// is concatenated, repeated EVIDENCE_USED lines are merged, and the last
// STATUS_UPDATE wins.
//
// # Evidence ids
//
// EVIDENCE_USED ids are normalised by [NormalizeEvidenceID]: case-folded, "-"
// or no separator read as "_", and the number written with at least four
// digits: ev_1, EV-1 and ev_00001 all become ev_0001, ev_12345 stays. ev_0
// and ev_ followed by anything but digits are bad_evidence_id. Prose beside
// the ids is tolerated ("ev_0004 (release page)"); a value with no id at all
// must be "none" (or "n/a", "[]"). Ids are de-duplicated in order of first
// mention. Whether an id exists in the run's ledger is the agent's concern,
// not the parser's.
//
// # Status
//
// STATUS_UPDATE is one of RESOLVED, UNRESOLVED(<reason>) or CONTINUE
// (written "continuing", "continue" or "in progress"). UNRESOLVED needs a
// reason: in parentheses, or after ":"/"-"/a space. RESOLVED and CONTINUE may
// carry an optional note the same way. [StatusUpdate.String] gives the
// canonical form, e.g. "UNRESOLVED(need the release page)".
//
// # Context
//
// [Build] assembles the model messages of one step from a [Context], in a
// fixed order: a system message (the system prompt), then one user message
// with PRIMARY TASK, PINNED notes.md, OPEN CONSTRAINTS (when any), ACTION
// TAIL and FEEDBACK (when any). The task and the notes are never clipped.
// Only the tail is bounded: the last [Options.TailK] entries (default 6),
// each observation capped to [Options.ObservationCap] bytes (default 2 KiB)
// and each action to [Options.ActionCap] bytes (default 2 KiB), keeping the
// head and the tail of the text around a marker line that says how many
// bytes were left out ([CapText]). The same Context and Options always give
// the same bytes.
//
// # Tool protocols
//
// A run's model setting tool_protocol (catalog.ModelConfig.ToolProtocol)
// says how the action travels. [ParseReply] reads a [Reply] (what
// vera.model.responded records: text, reasoning, tool calls, whether the
// server refused the tools) with the protocol in force; [Turn.Protocol]
// says how it was read.
//
//   - text: the reply format above, in the reply's text. [SystemPrompt] is
//     the prompt, byte for byte as before native tools existed. Tool calls
//     beside a text that holds the step are ignored (the text wins;
//     [Turn.Notice] tells the model).
//   - native: the agent offers [Tools] as OpenAI function tools (no
//     tool_choice is sent: the server's default, auto, is the one every
//     server family accepts) and reads the reply's tool call. The prompt
//     ([SystemPromptFor] native) is the same guide with its sections on the
//     reply format, the actions and the examples describing the function
//     calls.
//   - auto (the default): the tools are offered as optional (a server that
//     refuses them with a 4xx gets the call again without them) until the
//     run is decided; see [Decide].
//
// Native calls keep the discipline. Each of the four functions (shell
// with cmd, edit with op, path and the op's arguments, notes_append with
// text, submit with answer or answer_file) also takes the
// required arguments thought, evidence_used (a list of ev_ ids, [] for
// none) and status_update (continuing, UNRESOLVED(reason) or RESOLVED).
// They are arguments of every call rather than of a wrapper function
// ("step" with a nested action) because models trained on function calling
// choose a function by name and fill flat arguments: one function per
// action is what their chat templates and the servers' tool-call parsers
// handle best, a nested union is what grammar-constrained decoding handles
// worst, and a call then reads like the text format's action line. The
// schema lists thought first, so that a model (and a constrained decoder,
// which follows the schema's order) states its reason before its action.
// When thought is missing or blank, the THOUGHT is the reply's text (its
// THOUGHT line if it has one, else the whole text), else its reasoning
// (capped at 4 KiB): many servers return a model's words beside a call in
// the content, and a reasoning model's reasoning is its thought. A missing
// evidence_used or status_update is a format error, as in the text format.
//
// One tool call per step: several calls in one reply are multiple_actions
// (identical calls count once, as an action written twice does). The
// call's arguments are validated by the same rules and codes as the text
// format's action (bad_json, unknown_tool, empty_command, notes_overwrite,
// …), with messages that name the arguments. The step's action
// ([Action.Raw]) is the canonical {"tool":NAME,"args":{…}} of the call,
// without the three discipline arguments (they are the step's other
// fields), so that everything that reads actions (the action tail, the
// logic verifier, the ledgers, the projector) reads a native step as a
// text one. A reply with both a tool call and an action in its text: the
// tool call wins, and [Turn.Notice] says that the text action was ignored.
//
// [Decide] takes the auto decision from the first reply that shows which
// protocol works: the server refused the tools → text; a tool call →
// native; no tool call but text that parses in the text format → text. An
// empty or reasoning-only reply, or text that does not parse, decides
// nothing: it is a format error and the next step offers the tools again.
// The agent records the decision once (vera.agent.protocol) before the
// step it came from and keeps it for the rest of the run. The prompt is
// fixed by the setting, not by the decision ([SystemPromptFor]): in auto it
// is the text prompt followed by a section saying that the functions, when
// offered, may be called instead, so that a model of either kind succeeds
// from the first step and the prompt prefix never changes within a run.
//
// # Unusable replies
//
// A reply that carries nothing the protocol can use is one error, alone:
// empty_reply (no text, reasoning or tool call), reasoning_only,
// unexpected_tool_call (only tool calls, in the text protocol),
// missing_tool_call (text but no call, in the native protocol) and
// unterminated_think ([Code.Unusable]). Its message says what the server
// sent and what to change (max_tokens, thinking off, llama.cpp's --jinja,
// --tool-protocol), and depends only on the protocol and the reply's shape,
// so that the same fault gives the same message: after [UnusableLimit]
// identical ones in a row the agent ends the run UNRESOLVED with it.
//
// What this package does not decide: whether cited ids exist in the run's
// ledger, the notes gate, the step budget and the other policy rules. Those
// belong to the agent, which feeds their messages back through
// Context.OpenConstraints and Context.Feedback.
package protocol
