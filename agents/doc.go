// Package agents is the VERA research agent as a consumer of the bus.
//
// An [Agent] runs one durable consumer ("agent" by default) on
// vera.task.submitted, vera.tool.finished, vera.logic.verdict and
// vera.audit.feedback. It remembers nothing the stream does not hold:
// every delivery brings its view of the run up to date with the stream
// (the configuration, steps, tool requests and results, evidence, notes,
// policy events and recorded model responses) and takes every decision
// the run is ready for ([Agent.Advance]). The view is a cache kept
// between deliveries of a run, keyed by the stream sequence of its last
// event: a delivery reads only the events stored since, starting at that
// last event to check that the stream still holds it (else, and after any
// error, the run is read whole); the agent's own fenced publishes extend
// it as if read back. One goroutine of an Agent advances a run at a time.
// The decisions, in this order:
//
//  1. no vera.run.started yet: publish it with the effective
//     configuration (defaults filled in), fenced on its own subject and
//     with an id derived from the task, so that exactly one is stored;
//  2. every agent vera.tool.finished without evidence: publish
//     vera.evidence.recorded ev_NNNN, numbered by the result's place among
//     the run's agent results in stream order (a replay numbers the same),
//     then its vera.ledger.move and, when the command issued a search
//     query, vera.ledger.query line (ledger.State.MoveLine / QueryLine);
//  3. the last step's follow-ups still missing: its policy events
//     (ledger.Decide on the state folded from the events before the step),
//     then by its action: the vera.tool.requested of a shell or edit
//     action (request_id req-sNNNN; tool shell with the command, or tool
//     edit with the operation and its one-line summary as command; cwd,
//     env and shell_state from the earlier results: the last cwd_after,
//     every export, the last shell_state_after, a result without one
//     keeping the one before), the blocked move of a refused one,
//     vera.notes.appended, the audit request of a submit (see "The
//     verifier loop"), or vera.run.finished (RESOLVED with the answer of a
//     submit when no auditor is configured; UNRESOLVED when a policy rule
//     concludes or stops the run). A shell or edit step whose result has
//     not arrived yet: wait. A submit whose answer file could not be read
//     is followed by the next step (its observation says why);
//  4. the step budget (RunConfig.MaxSteps, 0 = unlimited) spent:
//     vera.run.finished UNRESOLVED("step budget exhausted") — missing
//     evidence is not a failure;
//  5. otherwise the next step: reuse the recorded reply of the step's
//     model call (call id agent-sNNNN) when a crashed worker already made
//     it, else assemble the prompt (protocol.Build: system prompt, task,
//     notes rebuilt from vera.notes.appended, OPEN CONSTRAINTS, the action
//     tail with observations, FEEDBACK from the last step's format errors
//     and policy messages) and call the model (scope agent, the call's
//     cause the event that enabled the step, so that its model I/O events
//     have derived ids). A model error after the client's retries ends
//     the run FAILED. The reply is parsed (protocol.ParseReply, with the
//     run's tool protocol) into vera.agent.step, with format_error when
//     invalid (then no tool runs and the errors are fed back next turn),
//     and request_id set when the shell or edit action passes the policy
//     gates (an edit is a tool call: the notes gate and the finalization
//     stop hold it as they hold a command). A submit that names an answer
//     file is completed from the file before it is recorded: see "Answer
//     files".
//     Three identical unusable replies in a row (protocol.Code.Unusable:
//     empty, reasoning only, a tool call the protocol cannot use) end the
//     run UNRESOLVED with the error's message instead.
//
// # Tool protocols
//
// The run's model setting tool_protocol (auto when empty) decides the
// system prompt (protocol.SystemPromptFor, recorded in vera.run.started)
// and whether a step's call offers the tools (protocol.Tools): native
// always, auto (as optional: a server refusing them is asked again
// without) until the run is decided, text never. In auto, the first reply
// that tells (protocol.Decide) is recorded as vera.agent.protocol, with an
// id derived from the step's cause, before that step; the view reads it
// back (runView.modeAt), so a restarted or second worker reads every later
// reply the same way. Each call also sends the run's sampling settings
// (llmbus.Sampling) and, when Config.Deltas is set, passes the streamed
// pieces of the reply to it. The reply the step is parsed from is always
// the recorded one (vera.model.responded, its text and reasoning from
// their blobs, its tool calls, the tools it dropped), so that the live
// agent, a restarted one and a re-execution parse the same thing.
//
// # Forks
//
// A run whose configuration has Fork (catalog.ForkConfig{From, AtStep})
// reproduces the first AtStep steps of the recorded run From, then goes
// on live with its own settings. The original is read once per run
// (Bus.ReadRun, blobs by digest from the shared object store); the fork's
// commands run for real in its own sandbox (its own work_dir), so that
// its /work is in the original's state when it goes live. Before every
// decision of a fork whose prefix is not settled, the agent:
//
//   - refuses the fork (vera.run.finished FAILED "fork of run X at step
//     N refused: …", no model call, no vera.fork.prefix) when From is the
//     run itself, does not exist, has no vera.run.started, has fewer than
//     AtStep steps, or submitted an answer to the auditor
//     (vera.audit.requested) at a step ≤ AtStep: a fork must branch
//     before the first audited answer, since only the agent's model
//     replies are served again, not the auditor's (its verdict would be a
//     live call, and the prefix would no longer be the original's);
//   - compares every step ≤ AtStep recorded so far with the original's
//     (runcompare.Steps: format error, tool, command, notes text, answer,
//     policy gate, evidence used) and the results of their commands and
//     edits that arrived (req-sNNNN and req-sNNNN-answer; runcompare.
//     Results: exit code, denial or timeout, stdout, stderr, cwd and shell
//     state after, edited file's digest). Unlike `vera replay
//     --reexecute`, a different tool result stops a fork: it must go on
//     from the original's /work.
//
// Step n ≤ AtStep without a recorded reply of its call agent-s000n: the
// prompt the run would send (rendered as below) is compared with the
// original's recorded prompt of that call (runcompare.Prompts); if equal,
// the original's reply is recorded as the run's own call through llmbus
// (vera.model.requested with this run's prompt and the original's model,
// endpoint and sampling; vera.model.responded with the original's text,
// reasoning, tool calls, finish reason and usage; ids derived from the
// step's cause as a live call's), and the step is taken from that
// recorded reply like any other (so a restart mid-prefix goes on from
// the stream). No model is contacted for the prefix. The original
// lacking the call is a missing_call divergence. At n = AtStep+1, with
// everything compared equal, the agent publishes vera.fork.prefix
// reproduced (steps and results compared), then calls the model live.
// AtStep 0 is a fork without a prefix (reproduced, 0 compared).
//
// At the first divergence (action, tool_result, prompt or missing_call)
// the agent publishes vera.fork.prefix not reproduced, with the step, the
// kind, what differs and both sides cut to 500 bytes, and ends the run
// FAILED: "fork of run X at step N: the prefix did not reproduce at step
// k (kind): detail". vera.fork.prefix has an id derived from the run and
// "agent/fork/prefix", so a run holds one, restarts included.
//
// The prefix is rendered and parsed with the original's tool protocol
// (its setting in vera.run.started; an auto run's vera.agent.protocol
// decision is reproduced by the fork itself from the same reply): the
// system prompt, the FEEDBACK reminders and the reading of the replies of
// steps ≤ AtStep. From step AtStep+1 the fork's own tool protocol and
// system prompt apply (protocol.SystemPromptFor), and its model and
// sampling, which only matter for live calls. Policy settings apply to
// the whole fork: a change that alters a prefix step (refuses its command,
// asks for notes sooner) is reported as an action divergence — or, when
// the policy ends the run at a prefix step, the run ends there. A fork at
// the step that ended the original (a submit without auditor) ends as the
// original did, without going live or publishing vera.fork.prefix. The
// served replies' usage counts in the fork's usage.
//
// # Answer files
//
// A submit may name a file under /work/output/ (answer_file) instead of
// giving the answer inline; the file's content when the model submits is
// the answer. The agent reads it through sandboxd before it records the
// step, from the step's recorded reply: a shell vera.tool.requested
// req-sNNNN-answer (command cat -- 'FILE', in a fresh shell at /work: no
// cwd, env or shell state, and its result is left out of the next
// command's), with an id derived from the step's cause, then waits for
// the result like a shell step. The result is evidence like any other
// (so the answer's content is in the evidence ledger, with its blob). The
// step then records answer_file, request_id req-sNNNN-answer and, when
// the read gives text, the whole content (answer inline up to 64 KiB,
// else answer_blob; read from the stdout blob when sandboxd cut the
// stream) and its SHA-256 (answer_sha256, lowercase hex). The policy sees
// that content, as it sees an inline answer. A read that fails (a missing
// file: cat's exit code), times out or gives an empty or non-text file
// leaves answer_sha256 empty: the submit failed, nothing is audited, and
// the next step's observation shows why. Otherwise answer_file and
// answer_sha256 go into vera.audit.requested and vera.run.finished with
// the answer. Everything comes from the stream: a worker that stops after
// publishing the read finds, once the result is stored, the recorded
// reply, the request and its result, and records the same step without
// calling the model again.
//
// # One writer per decision
//
// Every decision (a step, the end of a run for the budget or a model
// failure) is published with bus.ExpectLastSequence on the whole run
// ([RunFilter], vera.run.<run_id>.>) at the sequence of the last event the
// decision was taken from: if anything was stored since — another worker's
// step, a late verdict — the publish fails with bus.ErrConflict, and the
// agent re-reads and decides again from the longer history (where it
// usually finds the work done). The follow-ups of a stored decision
// (evidence, ledger lines, policy events, the tool request…) are fenced
// the same way, which keeps the cached view exact (see Agent.publish);
// their ids derive from the decision's event (bus.DeriveID), they are
// computed from the stored events alone, and the agent skips any id the
// run already holds, so a redelivery, a restart or a second worker
// publishes each of them once. Two workers may both call the model for one
// step in a race; their calls share a call id and cause, hence their model
// I/O event ids, and only one step is stored.
//
// # The verifier loop
//
// A submitted answer is a proposal. With the auditor disabled
// (RunConfig.Auditor.Enabled false) it finishes the run RESOLVED. With it
// enabled, the agent publishes vera.audit.requested (round n+1, the answer,
// the evidence it cites, the number of finished tool calls) and waits; it
// only reads the auditor's events:
//
//   - vera.audit.feedback accepted: vera.run.finished RESOLVED with that
//     answer;
//   - final and not accepted (the round cap is spent): UNRESOLVED, with the
//     answer of the best-scored round (vera.audit.judged best_round) as the
//     run's answer and the scores in the reason;
//   - otherwise the agent takes its next step, whose prompt carries the
//     feedback's message (its corrective instructions) verbatim in FEEDBACK,
//     and may submit again.
//
// The effective configuration in vera.run.started fills the auditor's
// round cap and stop score (DefaultAuditRounds, DefaultAuditStopScore).
//
// # Cancellation
//
// The agent follows vera.run.cancelled (an ordered read of new events,
// beside its consumer): a cancellation interrupts the run's Advance in
// progress in this process (its model call ends at once, recorded as a
// cancelled attempt), and nothing more is decided for the run. The system
// prompt in force is recorded in vera.run.started (system_prompt, a blob
// by digest).
package agents
