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
// It imports bus, bus/catalog, component, internal/llm and internal/domain
// only; it
// meets the agent and sandboxd on the stream (its tests run a real sandboxd
// in the test process).
package deepverify
