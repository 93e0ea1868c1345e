// Package deepverify is VERA's DeepVerifier-style auditor: a clean-room
// consumer of vera.audit.requested that decomposes a candidate answer into
// at most three source-bound yes/no checks, verifies each with a small
// bounded shell loop (its commands go to sandboxd as vera.tool.requested
// from the auditor), judges the round with a 1–4 score and at most three
// corrective instructions, applies SCOUT gating (Scout) and hands feedback
// back to the agent as vera.audit.feedback.
//
// The checks of a round run concurrently end to end: on every delivery the
// auditor advances each unfinished check by one step at once (model calls
// in parallel), and sandboxd runs the auditor's commands in parallel with
// one another and with the agent's (each auditor request is its own
// ordering key there; the auditor sends a check's next command only after
// the previous one finished). So a round takes about as long as its longest
// check. The commands run in the run's auditor container,
// vera-<run_id>-auditor, where /work is mounted read-only: a check can read
// what the agent wrote and cannot change it.
//
// The auditor keeps no state of its own: on every delivery it rebuilds the
// run's audit state from the stream (task, notes, evidence ledger and its own
// audit.* and tool.* events) and does whatever is still missing, with ids
// derived from the cause, so that a restart in the middle of a round — even
// after kill -9 — resumes without repeating finished checks: a finished
// check's model calls and commands are not made again, and every check is
// recorded once. Only a model call in flight at the kill can be repeated
// (its reply was never recorded). A delivery the dead auditor was handling
// comes back after AckWait.
//
// # Model calls
//
// Every call (decomposition, each check step, judgement, and the one
// re-ask after an unparseable reply) requests response_format json_schema
// with the schema of exactly the object its parser reads
// (vera_audit_decomposition, vera_audit_check_step, vera_audit_judgement;
// see parse.go, strict mode and why), as an optional feature: a server that
// refuses it gets the same request again without it, which
// vera.model.responded records as dropped ["response_format"];
// vera.model.requested names the schema sent. A server that accepts the
// schema and ignores it is read as before (llm.ExtractJSONObject). The
// sampling and server options of the run's auditor model (the agent's when
// it has none) go with every call (llmbus.Sampling); temperature is 0
// when they set none.
//
// Measured (bench_test.go; a 2-core machine, shared and loaded):
//
//	go test ./verifierd/deepverify -run '^$' -bench RoundOverhead -benchtime 50x
//	go test ./verifierd/deepverify -run '^$' -bench RoundParallelChecks -benchtime 10x
//
// The auditor's own cost per round, model and tool time excluded, is 10–13
// ms. Three checks of 0.3, 0.6 and 1.0 s take a round of 0.99–1.01× the
// longest check alone with scripted model delays, and 1.03–1.09× with
// commands sleeping in the real sandbox (1.1–1.2× the bare 1.0 s; three
// shells starting at once in the container's one CPU cost the difference,
// not the auditor). Before sandboxd ran the auditor's commands in parallel
// the sandbox round took 2.1× the bare 1.0 s.
//
// It imports bus, bus/catalog, component, internal/llm (and llmbus, for
// the model settings) and internal/domain only; it meets the agent and sandboxd on the stream (its tests run a real sandboxd
// in the test process).
package deepverify
