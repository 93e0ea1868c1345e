// Package replay rebuilds, re-verifies and re-executes recorded VERA runs:
// the library behind `vera replay`.
//
// It is not a component: it composes them (the projector, the logic
// verifier, the DeepVerifier auditor, the agent and sandboxd), which is
// why it may import them all while they never import each other.
//
// # Sources
//
// A recorded run comes from an export file (bus.Export's JSON Lines, blobs
// inline; [OpenFile] imports it into a private embedded NATS server whose
// store lives in a temporary directory removed by [Session.Close]), or from
// a bus that already holds it ([OpenBus]).
//
// # Rebuild
//
// [Rebuild] writes every file projection of a run (notes.md, the ledgers,
// trace.jsonl, the logs) with projector.Files.Rebuild, the code the live
// projector shares, and metrics.prom with projector.Metrics folded over the
// run's stored messages (malformed ones counted as the live fold counts
// them) and written by Metrics.WriteText. The output is byte-identical to
// the live projection of the run. The projector's state file is not left
// in the output: its stream sequences belong to the bus the replay read.
//
// # Re-verification
//
// [Reverify] copies the recorded run into a new run (a fresh ULID-based
// id; every event id derived from the original's, causes remapped), without
// the original verifiers' output (logic verdicts, audit rounds, VerifyFast
// events, the auditor's tool calls and the verifiers' model I/O), labels its
// vera.task.submitted with replay_of and replay_mode, points its work_dir at
// a new directory, and runs the current verifiers on it: the logic verifier
// over every agent step and, when a model is available, the DeepVerifier
// auditor over the candidate answers. All of this happens on a scratch
// embedded bus holding only the new run, so no live component and no other
// run is touched; the new run is then copied to the destination bus (when
// there is one). The original run is never written to.
//
// # Re-execution
//
// [Reexecute] starts a new run with the recorded configuration and runs
// the real agent, sandboxd (real tool execution in Docker), the logic
// verifier, the auditor and the file projector on it, again on a scratch
// bus. Model replies come from the recording ([Recorded], an
// llm.Completer): a call is answered with the recorded reply of the same
// call id when its prompt equals the recorded prompt. The run is watched
// and compared with the recording step by step; every divergence (a call
// the recording lacks, a different prompt, a different step, a different
// tool result or end) is reported, and with StopOnDivergence the run is
// cancelled at the first one. The comparisons are package runcompare's,
// which the agent's forks share. A fork (RunConfig.Fork) is re-executed
// as a plain run from its own recording, which holds every call of its
// prefix.
package replay
