// Package traces projects VERA runs into OpenTelemetry traces that follow
// the OpenTelemetry GenAI semantic conventions (semconv 1.41, the
// gen_ai_latest_experimental attributes), and exports them over OTLP with
// the official OpenTelemetry Go SDK.
//
// A trace is a read model like the run's files: [Projection] folds one
// run's events, in stream order, into spans, and nothing else goes in. So a
// trace can be made for any run ever recorded (`vera events otel`), for an
// imported export file or a replay, and live while the run goes on
// ([Live], the durable consumer "projector-otel"). The ids are functions of
// the run and its events ([bus.TraceID], [bus.SpanID], [bus.RootSpanID]):
// exporting the same run twice gives the same trace id and span ids, and
// span times are the events' times.
//
// # The span tree
//
//	invoke_agent vera                 the run: task.submitted .. run.finished
//	├── chat {model}                  one model call (call_id), all its attempts
//	├── execute_tool shell            one tool request (request_id)
//	└── invoke_agent deepverifier     one audit round: audit.requested .. audit.feedback
//	    ├── chat {model}              the auditor's decomposition and judge calls
//	    └── verify_check {check_id}   one check: audit.check_started .. audit.check
//	        ├── chat {model}
//	        └── execute_tool shell
//
// The three verifiers' verdicts are gen_ai.evaluation.result span events on
// the span they judge: the logic verifier's on the chat span that produced
// the judged step, the auditor's judge score on its round's span,
// VerifyFast's score on the span of the answer it scored (the round, or the
// run for a final answer). Every other event (policy, notes, evidence,
// ledgers, steps, container events, outside tools' vera.ext.* events)
// becomes a span event on the span it belongs to. docs/otel.md has the
// mapping, one row per event type.
//
// # Content
//
// As the conventions ask, the text of model messages and replies, tool
// call arguments and results, the agent's thoughts, notes and answers are
// recorded only when the user opts in ([Options.Content]). Verifier
// explanations are recorded always (gen_ai.evaluation.explanation is a
// recommended attribute).
//
// # Late events
//
// OTLP carries finished spans, and a span cannot change once exported; but
// some facts about a span arrive after its closing event (the agent's step
// after its model call's reply, the evidence after the command, a verdict
// after the step). A span that ended is therefore held for [Live]'s hold
// time before export, and events that arrive meanwhile still go on it; an
// event whose span was already exported goes on the run's root span, which
// is held until the run finished. A recorded run is folded whole before
// anything is exported, so nothing is late there.
package traces
