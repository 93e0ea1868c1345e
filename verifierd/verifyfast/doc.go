// Package verifyfast is VerifyFast, the rapid
// three-stage audit of LLM-generated reasoning.
//
// A VerifyFast run takes an item's context_input and model_output through
//
//   - Phase 1, factor decomposition: at most MaxFacts atomic facts and the
//     reasoning chains (a Decomposition);
//   - Phase 2 (fact check) and Phase 3 (logic check), run in parallel, each
//     returning structured Findings: a Level (contradiction, unsupported, or
//     reasonable_inference, which is not an error), a Severity (high or low)
//     and the Quote the finding rests on;
//   - Phase 4, deterministic scoring: Score turns the High and Low error
//     counts into a credit score 1–5 using the thresholds of a Strategy, so
//     that no model ever chooses the score.
//
// Scores are consolidated into three zones (ZoneOf): BAD 1–2, MID 3 and
// GOOD 4–5. Confusing BAD with GOOD ("cross-band confusion") is the one
// unacceptable outcome; BuildReport measures it per profile together with
// the 3×3 zone confusion matrix, zone accuracy, exact and ±1 match, per-tag
// results, tokens used and failed items, and renders it as text, JSON or a
// self-contained HTML page.
//
// The model-free core: the domain types, Phase 4, the settings.yaml and
// strategy.yaml loaders (LoadSettings, LoadStrategy, with errors naming
// file, line and field), validation of the input JSONL (ReadItems,
// LoadItems), reading results JSONL (ReadResults) and the report.
//
// The model phases: Auditor runs Phases 1–3 through an llm.Completer with
// the embedded prompt templates (Prompts, PhaseMessages), requests each
// phase's reply schema (PhaseSchema; dropped when the server refuses
// response_format) with the sampling options of settings.yaml (Generation),
// parses replies
// tolerantly (llm.ExtractJSONObject, ParseDecomposition, ParseFindings), asks
// again once with the reason when a reply is unusable, and scores with
// Score; AuditItem turns that into a Result, failed (never guessed) when a
// phase produced no usable answer.
//
// The batch: RunBatch audits items × profiles with bounded concurrency,
// retries rate-limited calls (AdviseRetry) while pausing and narrowing the
// whole batch, writes each result line as it completes, resumes from the
// results file, and, with a Cache (CachingCompleter), never repeats a model
// call on a rerun or a resume. ProgressBar draws its progress.
//
// On the bus: Live is the VerifyFast component. It consumes the agent's
// candidate answers (vera.audit.requested, and vera.run.finished when the
// answer was not audited), rebuilds the run's configuration and the
// evidence the answer cites from the stream, audits the answer against the
// task and that evidence, and publishes vera.verifyfast.phase (phases 1–3)
// and vera.verifyfast.scored, with ids derived from the answer event so
// that redelivery and replay publish each once; a failed audit publishes
// its phases with parse_error and no score.
//
// Example configuration files ship embedded (DefaultSettings,
// DefaultStrategy, Defaults).
package verifyfast
