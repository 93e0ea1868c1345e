// Package ledger is the deterministic decision logic of the VERA agent:
// move typing and query families for the search ledgers
// (move_ledger.jsonl, query_ledger.jsonl), registrable domains and vendor
// ownership for the negative-claim protocol, and the policy layer whose
// rules each emit their own vera.policy.<rule> event (so that the
// dra_policy_<rule>_total metrics derive from the stream).
//
// Everything here is a pure function of its inputs or a fold over past
// events: no clock, no randomness, no I/O, no map order in any output. A
// replay that folds the same events into a State and asks Decide the same
// question gets the same answer, which is what lets the agent be killed
// and restarted from the stream (the brief's invariant 5).
//
// # Search ledgers
//
// ClassifyMove types a shell command as a catalog.MoveType (search, fetch,
// read, extract, compute, install, write, verify, other) with a
// documented precedence (EditMove types an operation of the file tool:
// view is a read, the others writes); Outcome and OutcomeOf give its
// catalog.LedgerOutcome. ExtractQuery finds the search query a command
// issues (search-engine URLs, API parameters, grep -r patterns…), Family
// normalises it into a family, and QueryLedger counts families so that a
// family repeated past its limit requires a mutated query.
//
// # Reading commands
//
// The package has no shell reader of its own: every command is parsed
// once with internal/shell (on mvdan.cc/sh/v3), the same understanding
// of shell that sandboxd's deny rules and the logic verifier use. Its
// simple commands are unwrapped by shell.Unwrap (sudo, env, timeout,
// nice, xargs, …), and the commands they run in turn — command
// substitutions, the code of bash -c, eval, su -c and of a here-document
// or echoed text piped into a shell, find -exec — are read as children,
// parsed in their turn, down to a bounded depth. Interpreters' programs
// (python -c CODE and the glued -c'CODE', node -e, perl -e, a
// here-document or here-string on stdin …) come from shell.InlineCode.
// Words are read with their expansions as written (shell.Word.Text:
// "$HOME/x", "$(date)"), as the ledger records them; program names are
// lower-cased base names. ClassifyMove, ExtractQuery, URLs, Domains,
// FailureType and the finalization gate all walk that one reading.
//
// A command that does not parse as shell (an unclosed quote or
// here-document, prose, markup) is not guessed at: ClassifyMove types it
// other, ExtractQuery finds no query, the finalization gate sees no
// write, and URLs and Domains still report the http(s) URLs written in
// its text (shell.TextURLs) so that the domain ledger and the
// negative-claim sources do not lose them. Nested shell code that does
// not parse (bash -c 'unclosed) makes the command that runs it other in
// the same way, while the rest of the line is typed as usual.
//
// # Negative claims
//
// RegistrableDomain (eTLD+1 from a built-in list of common multi-label
// suffixes), IsOfficial (vendor ownership from names) and IsSearchEngine
// classify domains; NegativeCues and IsNegativeClaim detect negative-claim
// tasks and answers; NegativeClaim tracks the official and independent
// domains evidenced, the source minimums, the domain-shift guard, the
// budget and the UNRESOLVED conclusion with its reason, and renders the
// OPEN CONSTRAINTS lines.
//
// # Policy
//
// State folds the run's events (State.Apply); Decide applies the Policy
// to the next agent step and returns one catalog.PolicyTriggered per rule
// that fires: pre_tool_nudge, length_nudge, reminder, choice,
// choice_matched, stagnation, failure_escalation, domain_shift,
// conclusion_ready, finalization_stop, notes_gate,
// query_mutation_required, negative_claim and repetition_nudge — every
// rule of the catalogue. Summarize says whether the action is blocked,
// a tool is forced, or the run stops or concludes, and which messages go
// into the next prompt. State.MoveLine and State.QueryLine give the
// ledger lines of a finished request.
//
// The agent drives it so, for each step: fold every event up to the
// step's model response; parse the reply into a catalog.AgentStep; call
// Decide(state, ProposedFrom(step)); publish the step and the policy
// events (their ids derived from rule and step), then the tool request
// unless Summarize says Block. Because Decide reads the state as it was
// before the step, a worker resuming mid-step refolds the events before
// the step's vera.agent.step and decides again, identically; an event
// that slipped in between (a late logic verdict) is caught by the
// expected-last-sequence fence and decided again too.
package ledger
