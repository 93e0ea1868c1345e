// Package deepverify is VERA's DeepVerifier-style auditor: a clean-room
// consumer of vera.audit.requested that decomposes a candidate answer into
// at most three source-bound yes/no checks, verifies each with a small
// bounded shell loop (its commands go to sandboxd as vera.tool.requested
// from the auditor), judges the round with a 1–4 score and at most three
// corrective instructions, applies SCOUT gating (Scout) and hands feedback
// back to the agent as vera.audit.feedback.
//
// The auditor keeps no state of its own: on every delivery it rebuilds the
// run's audit state from the stream (task, notes, evidence ledger and its own
// audit.* and tool.* events) and does whatever is still missing, with ids
// derived from the cause, so that a restart in the middle of a round resumes
// without repeating finished checks.
//
// It imports bus, bus/catalog and internal/llm only; it meets the agent and
// sandboxd on the stream.
package deepverify
