// Package projector holds VERA's read models: the files of each run's
// directory and the Prometheus metrics, all rebuilt from the VERA stream
// alone.
//
// # Files
//
// [Render] is the pure layer: a run's events in stream order map to the
// exact bytes of every artifact. Each event appends zero or more whole lines
// to the files below, and never depends on earlier events, so the output of
// a prefix of the stream is a byte prefix of the output of the whole stream.
// The live projector ([Files.Run]) and [Files.Rebuild] both use it, which is
// why a live projection equals a rebuild byte for byte.
//
//	notes.md             vera.notes.appended: text verbatim followed by "\n"
//	                     (as docs/events.md specifies). Evidence ids are in
//	                     notes because the agent appends them as notes events
//	                     (the stream is the truth; the projector adds nothing).
//	evidence.jsonl       vera.evidence.recorded: the event's data, compact JSON.
//	move_ledger.jsonl    vera.ledger.move: the data, compact JSON.
//	query_ledger.jsonl   vera.ledger.query: the data, compact JSON.
//	trace.jsonl          every event: its CloudEvents envelope as stored on
//	                     the stream, compact JSON, one per line (the SSE
//	                     feed and `vera replay` read it; it is lossless, and
//	                     the same bytes `vera export` writes, so an exported
//	                     and re-imported run gives the same trace).
//	container.log        vera.container.log: "<time> <stream> <line>", times
//	                     in UTC RFC 3339 with 9 fixed fraction digits; a line
//	                     with a control character other than tab is Go-quoted,
//	                     a cut one ends with " [truncated]".
//	container_events.log vera.container.event: "<time> <action> <container>
//	                     k=v ..." with attributes sorted by key.
//	session.log          vera.task.submitted, vera.run.started,
//	                     vera.run.cancelled, vera.run.finished (with
//	                     answer_file and answer_sha256 when the answer was
//	                     a file), vera.tool.session (a shell session
//	                     started or restarted: action, container, session,
//	                     reason, and lost joined with "; " when it lost
//	                     something): "<event time> <type> k=v ...".
//
// In the .log files a value with spaces, quotes or control characters is
// written Go-quoted, so every record is exactly one line. A ledger event whose
// data does not decode as its catalogue type is left out of its ledger (it
// is still in trace.jsonl and the projector logs it); bad input never stops
// the projector.
//
// # Where the files go
//
// Into each run's directory (the work_dir of its task), beside the
// sandbox's tree work/ (the container's /work), never into it: the
// projector opens a run dir only under FilesConfig.Roots (the deployment's
// run roots, the same as sandboxd's) and only if it is new, empty or the
// run's own (package internal/rundir), making or claiming it as the run's;
// every file in it is opened without following a link and without
// blocking (O_NOFOLLOW|O_NONBLOCK) and accepted only as a regular file of
// the projector's user. A run whose work_dir is refused is not projected
// (its events stay on the stream; the projector logs it once and counts it,
// Files.Refused). Files are 0600 in a 0700 run dir.
//
// # Live projection and crash safety
//
// [Files.Run] is the durable consumer "projector-files". Per run it keeps a
// state, <run_id>.json in FilesConfig.StateDir (DATA_DIR/projector; never
// in the run dir, where it would be input the projector trusts), written
// to a temporary file, fsynced and renamed (losing the rename to a crash
// only means resuming from an older state, which is safe), holding the run
// dir, the last projected stream sequence and the size of every file after
// it. For each event it:
//
//  1. skips it when its sequence is not above the recorded one (redelivery,
//     restart, a deleted and recreated consumer);
//  2. truncates any file longer than its recorded size (a crash after an
//     append but before the state was saved), so a line is never written
//     twice and never torn;
//  3. appends the event's lines, fsyncs each file, then saves the state.
//
// When the state is missing, belongs to another run or directory, or a
// file is shorter than recorded (or is not a regular file of the
// projector's), the run is rebuilt from the stream ([Files.Rebuild]'s
// path: every file written to a temporary file in the run dir, fsynced and
// renamed over whatever had its name, then the state). A handler error
// (disk full...) marks the run dirty: the next event of the run rebuilds it
// first, so an event redelivered after later ones were projected is never
// lost.
//
// # Metrics
//
// [Metrics] is a fold of events into prometheus/client_golang collectors
// ([Metrics.Observe]) kept in a private registry (never the global one);
// the same events give the same values, in any process. Every metric the
// VERA spec names is present from the start (at zero):
//
//	dra_verifier_scores_total{score}     vera.audit.judged, by final score 1-4
//	dra_verifier_last_score              score of the latest vera.audit.judged
//	dra_verifier_duration_seconds        histogram of its duration_ms
//	dra_verifier_model_tokens_total      sum of its model_tokens
//	dra_model_tokens_total{scope}        vera.model.responded usage.total
//	dra_model_finish_reason_length_total vera.model.responded finish_reason=length
//	dra_verifier_instruction_chars       summary (_sum, _count) of the length in
//	                                     characters of each judged instruction
//	dra_verifier_instruction_has_url_total  instructions with an http(s) URL
//	dra_verifier_instruction_has_path_total instructions with a /, ./, ../ or ~/ path
//	dra_verifier_instruction_has_cmd_total  instructions with a `backquoted`
//	                                     command or a common CLI (curl, grep...)
//	                                     followed by an argument
//	dra_verifier_before_tools_total      vera.audit.requested with tool_calls 0
//	dra_verifier_gradient_total          vera.audit.feedback not accepted that
//	                                     carries instructions or a message: a
//	                                     corrective "gradient" to the agent
//	dra_policy_<rule>_total              vera.policy.<rule>, every catalogued rule
//	vera_model_reasoning_tokens_total{scope} vera.model.responded usage.reasoning
//	vera_model_tool_calls_total{scope}   native tool calls in vera.model.responded
//	vera_model_dropped_features_total{feature} successful replies obtained
//	                                     without a refused feature (dropped)
//	vera_tool_sessions_total{action}     vera.tool.session, by action (started,
//	                                     restarted)
//	vera_tool_edits_total{op,outcome}    vera.tool.finished of an edit request,
//	                                     by op and outcome: changed, unchanged,
//	                                     refused (exit 1), denied, failed (timed
//	                                     out, interrupted, sandboxd error)
//	vera_events_total{type}              events folded, by type
//	vera_events_malformed_total          messages that are not events, or whose
//	                                     data does not decode for a metric
//
// Labels are global (no run label), so cardinality stays fixed. An event id
// seen twice in a run counts once. [Metrics.Run] reads the
// stream with an ordered (non-durable) reader from its first event and
// follows it, so a restart rebuilds every counter from the stream instead of
// remembering it. Bus health (consumer lag, redeliveries, dead letters) is
// sampled from JetStream by [Metrics.RunHealth] and kept apart, in a second
// registry: it describes the server now, not the stream, and is not part of
// [Metrics.WriteText].
//
// [Metrics.Handler] is promhttp over both registries. [Metrics.WriteText]
// (the metrics.prom snapshot) is the event registry's Gather encoded by
// expfmt in the text format: families sorted by name, series by label
// values, no timestamps, so the same events give the same bytes. A labelled
// family with no series yet (vera_events_total before the first event) is
// left out rather than written as bare HELP and TYPE lines. A negative token
// count (data breaking the catalogue's minimum=0) adds nothing, since a
// counter never goes down.
package projector
