package traces

import (
	"encoding/json"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// Options are the choices a user makes about what a trace holds.
type Options struct {
	// Content records the text of model messages and replies
	// (gen_ai.input.messages, gen_ai.output.messages), tool call arguments
	// and results (gen_ai.tool.call.arguments, gen_ai.tool.call.result),
	// the task, the agent's thoughts, notes, evidence excerpts and answers.
	// Off by default, as the GenAI conventions ask: these may hold
	// sensitive data.
	Content bool
	// Blob, when set, returns a blob's bytes by digest: with Content, the
	// text that events carry as blobs (big model messages and replies,
	// long answers) is then recorded too, cut at MaxContentBytes.
	Blob func(digest string) ([]byte, error)
}

// MaxContentBytes bounds the text one attribute copies from a blob.
const MaxContentBytes = 256 << 10

// Span is one span of a run's trace, as the projection computes it.
type Span struct {
	ID     [8]byte
	Parent [8]byte // zero for the root
	Name   string
	Kind   trace.SpanKind
	Start  time.Time
	End    time.Time // zero while open
	Attrs  []attribute.KeyValue
	Events []SpanEvent
	Status codes.Code
	// StatusMessage says why, when Status is codes.Error.
	StatusMessage string

	key       string
	heldSince time.Time // wall time the span ended, for Live's hold
}

// SpanEvent is one event on a span.
type SpanEvent struct {
	Name  string
	Time  time.Time
	Attrs []attribute.KeyValue
}

// Ended reports whether the span's closing event was seen.
func (s *Span) Ended() bool { return !s.End.IsZero() }

// Projection folds one run's events into its trace. It is not safe for
// concurrent use.
type Projection struct {
	runID string
	opts  Options
	now   func() time.Time

	root  *Span
	spans map[string]*Span // spans events can still go on, open or held, by key
	ended []*Span          // ended and not yet taken, in end order

	stepCall  map[int]string    // agent step → key of its (latest) chat span
	answers   map[string]string // id of an event carrying an answer → key of its span
	stopScore int
	last      time.Time // time of the latest event
	rootTaken bool      // the root was taken: the trace is complete

	extEvents, extDropped int // outside tools' events on the root, and those left out
}

// MaxExtEvents bounds the outside tools' vera.ext.* events a run span
// holds; the run span's vera.ext_events_dropped counts the others.
const MaxExtEvents = 1000

// NewProjection returns the empty projection of run runID. now, when not
// nil, stamps the wall time at which each span ended (Live's hold).
func NewProjection(runID string, opts Options, now func() time.Time) *Projection {
	return &Projection{
		runID: runID, opts: opts, now: now,
		spans:     map[string]*Span{},
		stepCall:  map[int]string{},
		answers:   map[string]string{},
		stopScore: 3,
	}
}

// TraceID returns the run's trace id.
func (p *Projection) TraceID() trace.TraceID { return bus.TraceID(p.runID) }

// Take returns the ended spans that ready accepts (all when ready is nil)
// and forgets them: an event for one of them that comes later goes on the
// root span instead. The root is taken last, once every other span was.
func (p *Projection) Take(ready func(*Span) bool) []*Span {
	var out, keep []*Span
	for _, s := range p.ended {
		if s != p.root && (ready == nil || ready(s)) {
			out = append(out, s)
			delete(p.spans, s.key)
		} else {
			keep = append(keep, s)
		}
	}
	p.ended = keep
	if r := p.root; r != nil && r.Ended() && len(p.spans) == 1 && (ready == nil || ready(r)) {
		if p.extDropped > 0 {
			r.Attrs = append(r.Attrs, attribute.Int("vera.ext_events_dropped", p.extDropped))
		}
		out = append(out, r)
		delete(p.spans, r.key)
		p.ended = slices.DeleteFunc(p.ended, func(s *Span) bool { return s == r })
		p.root, p.rootTaken = nil, true
	}
	return out
}

// Done reports whether the run's root span was taken: the trace is
// complete, and Add ignores later events of the run.
func (p *Projection) Done() bool { return p.rootTaken }

// Close ends every open span at the latest event's time, marked
// vera.unfinished (a recorded run cut off, a command never answered), and
// returns every span not yet taken: the end of a recorded export.
func (p *Projection) Close() []*Span {
	for _, s := range p.openChildren() {
		s.Attrs = append(s.Attrs, attribute.Bool("vera.unfinished", true))
		p.end(s, p.last)
	}
	if p.root != nil && !p.root.Ended() {
		p.root.Attrs = append(p.root.Attrs, attribute.Bool("vera.unfinished", true))
		p.end(p.root, p.last)
	}
	return p.Take(nil)
}

func (p *Projection) openChildren() []*Span {
	var open []*Span
	for _, s := range p.spans {
		if s != p.root && !s.Ended() {
			open = append(open, s)
		}
	}
	// In a stable order (a map's is not), so that they end, and are
	// taken, the same way every time.
	slices.SortFunc(open, func(a, b *Span) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
	return open
}

// Add folds one event of the run (stream order). It returns false, and
// changes nothing, when the trace is complete already (Done).
func (p *Projection) Add(ev bus.Event) bool {
	if p.rootTaken {
		return false
	}
	if ev.Time.After(p.last) {
		p.last = ev.Time
	}
	root := p.ensureRoot(ev)
	switch ev.Type {
	case catalog.TypeTaskSubmitted:
		p.taskSubmitted(ev, root)
	case catalog.TypeRunStarted:
		p.runStarted(ev, root)
	case catalog.TypeRunFinished:
		p.runFinished(ev, root)
	case catalog.TypeModelRequested:
		p.modelRequested(ev)
	case catalog.TypeModelResponded:
		p.modelResponded(ev)
	case catalog.TypeToolRequested:
		p.toolRequested(ev)
	case catalog.TypeToolStarted:
		p.toolStarted(ev)
	case catalog.TypeToolFinished:
		p.toolFinished(ev)
	case catalog.TypeAgentStep:
		p.agentStep(ev)
	case catalog.TypeNotesAppended:
		p.notesAppended(ev)
	case catalog.TypeEvidenceRecorded:
		p.evidenceRecorded(ev)
	case catalog.TypeLedgerMove, catalog.TypeLedgerQuery:
		p.ledger(ev)
	case catalog.TypeLogicVerdict:
		p.logicVerdict(ev)
	case catalog.TypeAuditRequested:
		p.auditRequested(ev)
	case catalog.TypeAuditDecomposed:
		p.auditDecomposed(ev)
	case catalog.TypeAuditCheckStarted:
		p.auditCheckStarted(ev)
	case catalog.TypeAuditCheck:
		p.auditCheck(ev)
	case catalog.TypeAuditJudged:
		p.auditJudged(ev)
	case catalog.TypeAuditFeedback:
		p.auditFeedback(ev)
	case catalog.TypeVerifyFastPhase:
		p.verifyFastPhase(ev)
	case catalog.TypeVerifyFastScored:
		p.verifyFastScored(ev)
	case catalog.TypeContainerLog:
		// One line of the container's own output: a log, not a trace
		// fact (docs/otel.md); it stays in container.log and the stream.
	case catalog.TypeEvalFinished:
		p.evalFinished(ev, root)
	default:
		// Policy events, run.cancelled, container events, outside tools'
		// vera.ext.* events and types newer than this projector: a span
		// event on the root with the data's scalar members.
		if catalog.IsExtension(ev.Type) {
			// Anyone with the ext identity may publish these: bounded, so
			// that a flood cannot push VERA's own events off the run span
			// (the SDK keeps a span's newest events).
			if p.extEvents >= MaxExtEvents {
				p.extDropped++
				return true
			}
			p.extEvents++
		}
		root.Events = append(root.Events, SpanEvent{Name: ev.Type, Time: ev.Time, Attrs: p.genericAttrs(ev)})
	}
	return true
}

// ensureRoot returns the run's root span, opening it at the first event.
// An eval's events (vera eval, on the eval's id) have a root of their own
// kind: "vera eval", not an agent invocation.
func (p *Projection) ensureRoot(ev bus.Event) *Span {
	if p.root == nil && strings.HasPrefix(ev.Type, "vera.eval.") {
		p.root = &Span{
			key: "root", ID: bus.RootSpanID(p.runID), Name: "vera eval",
			Kind: trace.SpanKindInternal, Start: ev.Time,
			Attrs: []attribute.KeyValue{attribute.String("vera.eval_id", p.runID)},
		}
		p.spans[p.root.key] = p.root
	}
	if p.root == nil {
		p.root = &Span{
			key: "root", ID: bus.RootSpanID(p.runID), Name: "invoke_agent vera",
			Kind: trace.SpanKindInternal, Start: ev.Time,
			Attrs: []attribute.KeyValue{
				semconv.GenAIOperationNameInvokeAgent,
				semconv.GenAIAgentName("vera"),
				semconv.GenAIConversationID(p.runID),
				attribute.String("vera.run_id", p.runID),
			},
		}
		p.spans[p.root.key] = p.root
	}
	return p.root
}

// open starts a span with the id of the event that opens it.
func (p *Projection) open(key string, ev bus.Event, parent *Span, name string, kind trace.SpanKind, attrs ...attribute.KeyValue) *Span {
	s := &Span{key: key, ID: bus.SpanID(p.runID, ev.ID), Parent: parent.ID, Name: name, Kind: kind, Start: ev.Time, Attrs: attrs}
	p.spans[key] = s
	return s
}

func (p *Projection) end(s *Span, t time.Time) {
	if s.Ended() {
		return
	}
	if t.Before(s.Start) {
		t = s.Start
	}
	s.End = t
	if p.now != nil {
		s.heldSince = p.now()
	}
	p.ended = append(p.ended, s)
}

// span returns the span of key that events can still go on, else the root.
func (p *Projection) span(key string) *Span {
	if s, ok := p.spans[key]; ok {
		return s
	}
	return p.root
}

func (p *Projection) event(s *Span, ev bus.Event, attrs ...attribute.KeyValue) {
	s.Events = append(s.Events, SpanEvent{Name: ev.Type, Time: ev.Time, Attrs: attrs})
}

// decode unmarshals the event's data into v; data that does not decode
// (possible in a file export, never past the live consumer's schema
// check) makes a span event that says so on the root.
func (p *Projection) decode(ev bus.Event, v any) bool {
	if err := json.Unmarshal(ev.Data, v); err != nil {
		p.root.Events = append(p.root.Events, SpanEvent{Name: ev.Type, Time: ev.Time, Attrs: []attribute.KeyValue{
			attribute.String("vera.event_id", ev.ID),
			attribute.String("vera.malformed", err.Error()),
		}})
		return false
	}
	return true
}

func (p *Projection) taskSubmitted(ev bus.Event, root *Span) {
	var d catalog.TaskSubmitted
	if !p.decode(ev, &d) {
		return
	}
	root.Start = ev.Time
	root.Attrs = append(root.Attrs, modelAttrs(d.Model.Name, d.Model.BaseURL)...)
	root.Attrs = append(root.Attrs,
		attribute.String("vera.submitted_by", d.SubmittedBy),
		attribute.Int("vera.max_steps", d.MaxSteps),
		attribute.Bool("vera.auditor.enabled", d.Auditor.Enabled),
		attribute.Bool("vera.verifyfast.enabled", d.VerifyFast.Enabled),
		attribute.Bool("vera.sandbox.network", d.Sandbox.Network),
	)
	for _, k := range sortedKeys(d.Labels) {
		root.Attrs = append(root.Attrs, attribute.String("vera.label."+k, d.Labels[k]))
	}
	if p.opts.Content {
		root.Attrs = append(root.Attrs, semconv.GenAIInputMessagesKey.String(messagesJSON([]catalog.Message{{Role: "user", Content: d.Task}}, "")))
	}
	p.event(root, ev, attribute.String("vera.event_id", ev.ID))
}

func (p *Projection) runStarted(ev bus.Event, root *Span) {
	var d catalog.RunStarted
	if !p.decode(ev, &d) {
		return
	}
	if d.Config.Auditor.StopScore > 0 {
		p.stopScore = d.Config.Auditor.StopScore
	}
	root.Attrs = append(root.Attrs, semconv.GenAIAgentID(d.AgentID))
	if d.Version != "" {
		root.Attrs = append(root.Attrs, semconv.GenAIAgentVersion(d.Version))
	}
	p.event(root, ev,
		attribute.String("vera.agent_id", d.AgentID),
		attribute.Int("vera.auditor.max_rounds", d.Config.Auditor.MaxRounds),
		attribute.Int("vera.auditor.stop_score", p.stopScore))
}

// evalFinished ends an eval's trace, unless the eval was interrupted (a
// resumed eval goes on in the same trace).
func (p *Projection) evalFinished(ev bus.Event, root *Span) {
	root.Events = append(root.Events, SpanEvent{Name: ev.Type, Time: ev.Time, Attrs: p.genericAttrs(ev)})
	var d catalog.EvalFinished
	if !p.decode(ev, &d) || d.Interrupted {
		return
	}
	for _, s := range p.openChildren() {
		s.Attrs = append(s.Attrs, attribute.Bool("vera.unfinished", true))
		p.end(s, ev.Time)
	}
	p.end(root, ev.Time)
}

func (p *Projection) runFinished(ev bus.Event, root *Span) {
	var d catalog.RunFinished
	if !p.decode(ev, &d) {
		return
	}
	p.answers[ev.ID] = root.key
	root.Attrs = append(root.Attrs,
		attribute.String("vera.outcome", string(d.Outcome)),
		attribute.Int("vera.steps", d.Steps),
		attribute.Int64("vera.duration_ms", d.DurationMS),
	)
	if d.Reason != "" {
		root.Attrs = append(root.Attrs, attribute.String("vera.reason", d.Reason))
	}
	if d.BestAuditRound > 0 {
		root.Attrs = append(root.Attrs, attribute.Int("vera.best_audit_round", d.BestAuditRound), attribute.Int("vera.best_score", d.BestScore))
	}
	if d.Usage.Total > 0 || d.Usage.Prompt > 0 {
		root.Attrs = append(root.Attrs, semconv.GenAIUsageInputTokensKey.Int64(d.Usage.Prompt), semconv.GenAIUsageOutputTokensKey.Int64(d.Usage.Completion))
	}
	answer := d.Answer
	if text, ok := p.blobText(root, d.AnswerBlob); ok && answer == "" {
		answer = text
	}
	if p.opts.Content && answer != "" {
		root.Attrs = append(root.Attrs, semconv.GenAIOutputMessagesKey.String(messagesJSON([]catalog.Message{{Role: "assistant", Content: answer}}, "stop")))
	}
	if d.Outcome == catalog.OutcomeFailed {
		root.Status, root.StatusMessage = codes.Error, d.Reason
		root.Attrs = append(root.Attrs, semconv.ErrorTypeKey.String("run_failed"))
	}
	p.event(root, ev, attribute.String("vera.outcome", string(d.Outcome)))
	// Spans still open belong to a run that is over: they end with it.
	for _, s := range p.openChildren() {
		s.Attrs = append(s.Attrs, attribute.Bool("vera.unfinished", true))
		p.end(s, ev.Time)
	}
	p.end(root, ev.Time)
}

// parentOf returns the span a model call or tool request of this scope,
// round and check belongs under.
func (p *Projection) parentOf(round int, checkID string) *Span {
	if checkID != "" {
		if s, ok := p.spans["check:"+checkID]; ok {
			return s
		}
	}
	if round > 0 {
		if s, ok := p.spans["round:"+strconv.Itoa(round)]; ok {
			return s
		}
	}
	return p.root
}

func (p *Projection) modelRequested(ev bus.Event) {
	var d catalog.ModelRequested
	if !p.decode(ev, &d) {
		return
	}
	key := "call:" + d.CallID
	s, ok := p.spans[key]
	if !ok || s.Ended() {
		parent := p.root
		if d.Scope == catalog.ScopeVerifier || d.Scope == catalog.ScopeJudge {
			parent = p.parentOf(d.Round, d.CheckID)
		}
		attrs := []attribute.KeyValue{semconv.GenAIOperationNameChat}
		attrs = append(attrs, modelAttrs(d.Model, d.BaseURL)...)
		attrs = append(attrs, attribute.String("vera.model.call_id", d.CallID), attribute.String("vera.model.scope", string(d.Scope)))
		if d.Purpose != "" {
			attrs = append(attrs, attribute.String("vera.model.purpose", d.Purpose))
		}
		if d.Step > 0 {
			attrs = append(attrs, attribute.Int("vera.step", d.Step))
		}
		if d.Params.Temperature != nil {
			attrs = append(attrs, semconv.GenAIRequestTemperature(*d.Params.Temperature))
		}
		if d.Params.MaxTokens > 0 {
			attrs = append(attrs, semconv.GenAIRequestMaxTokens(d.Params.MaxTokens))
		}
		if d.Params.Stream {
			attrs = append(attrs, semconv.GenAIRequestStream(true))
		}
		if d.Params.TopP != nil {
			attrs = append(attrs, semconv.GenAIRequestTopP(*d.Params.TopP))
		}
		if d.Params.Seed != nil {
			attrs = append(attrs, semconv.GenAIRequestSeed(int(*d.Params.Seed)))
		}
		if len(d.Params.Stop) > 0 {
			attrs = append(attrs, semconv.GenAIRequestStopSequences(d.Params.Stop...))
		}
		if len(d.Tools) > 0 {
			attrs = append(attrs, attribute.StringSlice("vera.model.tools", d.Tools))
		}
		if d.ResponseFormat != "" {
			attrs = append(attrs, semconv.GenAIOutputTypeJSON, attribute.String("vera.model.response_format", d.ResponseFormat))
		}
		if p.opts.Content && len(d.Messages) > 0 {
			attrs = append(attrs, semconv.GenAIInputMessagesKey.String(messagesJSON(d.Messages, "")))
		}
		s = p.open(key, ev, parent, "chat "+d.Model, trace.SpanKindClient, attrs...)
		if raw, ok := p.blobBytes(s, d.MessagesBlob); ok {
			var msgs []catalog.Message
			if err := json.Unmarshal(raw, &msgs); err == nil {
				// Each message cut on its own, so the array stays one.
				per := max(MaxContentBytes/max(len(msgs), 1), 4096)
				for i := range msgs {
					msgs[i].Content = cut(msgs[i].Content, per)
				}
				s.Attrs = append(s.Attrs, semconv.GenAIInputMessagesKey.String(messagesJSON(msgs, "")))
			} else {
				s.Attrs = append(s.Attrs, attribute.String("vera.blob_error", d.MessagesBlob.Digest+": not a JSON array of messages"))
			}
		}
		if d.Scope == catalog.ScopeAgent && d.Step > 0 {
			p.stepCall[d.Step] = key
		}
	}
	attrs := []attribute.KeyValue{attribute.Int("vera.attempt", d.Attempt), attribute.Int("vera.message_count", d.MessageCount)}
	if d.MessagesBlob != nil {
		attrs = append(attrs, attribute.String("vera.messages_blob", d.MessagesBlob.Digest))
	}
	p.event(s, ev, attrs...)
}

func (p *Projection) modelResponded(ev bus.Event) {
	var d catalog.ModelResponded
	if !p.decode(ev, &d) {
		return
	}
	s, ok := p.spans["call:"+d.CallID]
	if !ok || s.Ended() {
		// A reply whose request is not in the stream: a span of its own,
		// as long as the reply says it took.
		start := ev
		start.Time = ev.Time.Add(-time.Duration(d.LatencyMS) * time.Millisecond)
		s = p.open("call:"+d.CallID, start, p.root, "chat "+d.Model, trace.SpanKindClient,
			semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(d.Model),
			attribute.String("vera.model.call_id", d.CallID), attribute.String("vera.model.scope", string(d.Scope)))
	}
	attrs := []attribute.KeyValue{attribute.Int("vera.attempt", d.Attempt), attribute.Int64("vera.latency_ms", d.LatencyMS)}
	if d.Error != "" {
		attrs = append(attrs, attribute.String("vera.error", d.Error), attribute.Bool("vera.retryable", d.Retryable))
	}
	if d.HTTPStatus != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", d.HTTPStatus))
	}
	p.event(s, ev, attrs...)
	if d.Retryable && d.Error != "" {
		return // another attempt follows: the span covers it
	}
	s.Attrs = append(s.Attrs, attribute.Int("vera.attempts", d.Attempt))
	if d.Model != "" {
		s.Attrs = append(s.Attrs, semconv.GenAIResponseModel(d.Model))
	}
	if d.FinishReason != "" {
		s.Attrs = append(s.Attrs, semconv.GenAIResponseFinishReasons(d.FinishReason))
	}
	if d.Usage.Prompt > 0 || d.Usage.Completion > 0 || d.Usage.Total > 0 {
		s.Attrs = append(s.Attrs, semconv.GenAIUsageInputTokensKey.Int64(d.Usage.Prompt), semconv.GenAIUsageOutputTokensKey.Int64(d.Usage.Completion))
	}
	if d.Usage.Reasoning > 0 {
		s.Attrs = append(s.Attrs, semconv.GenAIUsageReasoningOutputTokensKey.Int64(d.Usage.Reasoning))
	}
	if d.Usage.Cached > 0 {
		s.Attrs = append(s.Attrs, semconv.GenAIUsageCacheReadInputTokensKey.Int64(d.Usage.Cached))
	}
	if len(d.ToolCalls) > 0 {
		names := make([]string, len(d.ToolCalls))
		for i, c := range d.ToolCalls {
			names[i] = c.Name
		}
		s.Attrs = append(s.Attrs, attribute.StringSlice("vera.model.tool_calls", names))
	}
	if len(d.Dropped) > 0 {
		s.Attrs = append(s.Attrs, attribute.StringSlice("vera.model.dropped", d.Dropped))
	}
	if d.ReasoningSource != "" {
		s.Attrs = append(s.Attrs, attribute.String("vera.model.reasoning_source", d.ReasoningSource))
	}
	if d.Error != "" {
		s.Status, s.StatusMessage = codes.Error, d.Error
		s.Attrs = append(s.Attrs, semconv.ErrorTypeKey.String(modelErrorType(d)))
	} else if p.opts.Content {
		text, reasoning := d.Text, d.Reasoning
		if t, ok := p.blobText(s, d.TextBlob); ok {
			text = t
		}
		if r, ok := p.blobText(s, d.ReasoningBlob); ok {
			reasoning = r
		}
		calls := slices.Clone(d.ToolCalls)
		for i, c := range calls {
			if a, ok := p.blobText(s, c.ArgumentsBlob); ok {
				calls[i].Arguments = a
			}
		}
		if text != "" || reasoning != "" || len(calls) > 0 {
			s.Attrs = append(s.Attrs, semconv.GenAIOutputMessagesKey.String(outputJSON(cut(text, MaxContentBytes), cut(reasoning, MaxContentBytes), calls, d.FinishReason)))
		}
	}
	if d.TextBlob != nil {
		s.Attrs = append(s.Attrs, attribute.String("vera.text_blob", d.TextBlob.Digest))
	}
	p.end(s, ev.Time)
}

// modelErrorType is error.type for a failed call: the HTTP status when a
// response came, else the conventions' fallback _OTHER.
func modelErrorType(d catalog.ModelResponded) string {
	if d.HTTPStatus != 0 {
		return strconv.Itoa(d.HTTPStatus)
	}
	return "_OTHER"
}

func (p *Projection) toolRequested(ev bus.Event) {
	var d catalog.ToolRequested
	if !p.decode(ev, &d) {
		return
	}
	key := "req:" + d.RequestID
	if s, ok := p.spans[key]; ok && !s.Ended() {
		p.event(s, ev, attribute.String("vera.duplicate_request", ev.ID))
		return
	}
	parent := p.root
	if d.Requester == catalog.RequesterAuditor {
		parent = p.parentOf(d.Round, d.CheckID)
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(string(d.Tool)),
		semconv.GenAIToolTypeKey.String("function"),
		semconv.GenAIToolCallID(d.RequestID),
		attribute.String("vera.tool.requester", string(d.Requester)),
		attribute.Int64("vera.tool.timeout_ms", d.TimeoutMS),
	}
	if d.Step > 0 {
		attrs = append(attrs, attribute.Int("vera.step", d.Step))
	}
	if d.Edit != nil {
		attrs = append(attrs, attribute.String("vera.edit.op", string(d.Edit.Op)), attribute.String("vera.edit.path", d.Edit.Path))
	}
	if p.opts.Content {
		var args []byte
		if d.Edit != nil {
			args, _ = json.Marshal(d.Edit)
		} else {
			args, _ = json.Marshal(map[string]string{"command": d.Command, "cwd": d.Cwd})
		}
		attrs = append(attrs, semconv.GenAIToolCallArgumentsKey.String(string(args)))
	}
	s := p.open(key, ev, parent, "execute_tool "+string(d.Tool), trace.SpanKindInternal, attrs...)
	p.event(s, ev)
}

func (p *Projection) toolStarted(ev bus.Event) {
	var d catalog.ToolStarted
	if !p.decode(ev, &d) {
		return
	}
	s := p.span("req:" + d.RequestID)
	p.event(s, ev, attribute.String("vera.container", d.Container), attribute.String("vera.exec_id", d.ExecID))
}

func (p *Projection) toolFinished(ev bus.Event) {
	var d catalog.ToolFinished
	if !p.decode(ev, &d) {
		return
	}
	s, ok := p.spans["req:"+d.RequestID]
	if !ok || s.Ended() {
		p.event(p.root, ev, attribute.String("vera.request_id", d.RequestID), attribute.Int("vera.tool.exit_code", d.ExitCode))
		return
	}
	s.Attrs = append(s.Attrs,
		attribute.Int("vera.tool.exit_code", d.ExitCode),
		attribute.Bool("vera.tool.timed_out", d.TimedOut),
		attribute.Bool("vera.tool.denied", d.Denied),
		attribute.Bool("vera.tool.interrupted", d.Interrupted),
		attribute.Int64("vera.tool.duration_ms", d.DurationMS),
		attribute.Int64("vera.tool.stdout_bytes", d.Stdout.Bytes),
		attribute.Int64("vera.tool.stderr_bytes", d.Stderr.Bytes),
	)
	if d.Session != "" {
		s.Attrs = append(s.Attrs, attribute.String("vera.tool.session", string(d.Session)))
	}
	if d.Edit != nil {
		s.Attrs = append(s.Attrs, attribute.Bool("vera.edit.changed", d.Edit.Changed))
		if d.Edit.DiffTruncated {
			s.Attrs = append(s.Attrs, attribute.Bool("vera.edit.diff_truncated", true))
		}
		if p.opts.Content && d.Edit.Diff != "" {
			s.Attrs = append(s.Attrs, attribute.String("vera.edit.diff", d.Edit.Diff))
		}
	}
	switch {
	case d.Denied:
		s.Status, s.StatusMessage = codes.Error, "denied by rule "+d.DenyRule
		s.Attrs = append(s.Attrs, semconv.ErrorTypeKey.String("denied"), attribute.String("vera.tool.deny_rule", d.DenyRule))
	case d.TimedOut:
		s.Status, s.StatusMessage = codes.Error, "timed out"
		s.Attrs = append(s.Attrs, semconv.ErrorTypeKey.String("timeout"))
	case d.Error != "":
		s.Status, s.StatusMessage = codes.Error, d.Error
		s.Attrs = append(s.Attrs, semconv.ErrorTypeKey.String("sandbox_error"))
	case d.Interrupted:
		s.Status, s.StatusMessage = codes.Error, "interrupted"
		s.Attrs = append(s.Attrs, semconv.ErrorTypeKey.String("interrupted"))
	}
	if p.opts.Content {
		out := d.Stdout.Head
		if d.Stdout.Encoding != "" {
			// Not text: head and tail hold base64 of the bytes.
		} else if whole, ok := p.blobText(s, d.Stdout.Blob); ok {
			out = whole
		} else if d.Stdout.Truncated {
			out += "\n[…]\n" + d.Stdout.Tail
		}
		s.Attrs = append(s.Attrs, semconv.GenAIToolCallResultKey.String(out))
	}
	p.event(s, ev, attribute.Int("vera.tool.exit_code", d.ExitCode))
	p.end(s, ev.Time)
}

func (p *Projection) agentStep(ev bus.Event) {
	var d catalog.AgentStep
	if !p.decode(ev, &d) {
		return
	}
	s := p.span("call:" + d.ModelCallID)
	attrs := []attribute.KeyValue{attribute.Int("vera.step", d.Step), attribute.String("vera.action_tool", string(d.ActionTool))}
	if d.RequestID != "" {
		attrs = append(attrs, attribute.String("vera.request_id", d.RequestID))
	}
	if d.StatusUpdate != "" {
		attrs = append(attrs, attribute.String("vera.status_update", d.StatusUpdate))
	}
	if d.FormatError != "" {
		attrs = append(attrs, attribute.String("vera.format_error", d.FormatError))
	}
	if len(d.EvidenceUsed) > 0 {
		attrs = append(attrs, attribute.StringSlice("vera.evidence_used", d.EvidenceUsed))
	}
	if p.opts.Content {
		attrs = append(attrs, attribute.String("vera.thought", d.Thought), attribute.String("vera.action", d.Action))
	}
	p.event(s, ev, attrs...)
}

func (p *Projection) notesAppended(ev bus.Event) {
	var d catalog.NotesAppended
	if !p.decode(ev, &d) {
		return
	}
	attrs := []attribute.KeyValue{attribute.Int("vera.step", d.Step), attribute.String("vera.author", string(d.Author)), attribute.Int("vera.bytes", len(d.Text))}
	if len(d.EvidenceIDs) > 0 {
		attrs = append(attrs, attribute.StringSlice("vera.evidence_ids", d.EvidenceIDs))
	}
	if p.opts.Content {
		attrs = append(attrs, attribute.String("vera.text", d.Text))
	}
	p.event(p.root, ev, attrs...)
}

func (p *Projection) evidenceRecorded(ev bus.Event) {
	var d catalog.EvidenceRecorded
	if !p.decode(ev, &d) {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("vera.evidence_id", d.EvidenceID), attribute.Int("vera.tool.exit_code", d.ExitCode)}
	if len(d.URLs) > 0 {
		attrs = append(attrs, attribute.StringSlice("vera.urls", d.URLs))
	}
	if len(d.Paths) > 0 {
		attrs = append(attrs, attribute.StringSlice("vera.paths", d.Paths))
	}
	if p.opts.Content {
		attrs = append(attrs, attribute.String("vera.excerpt", d.Excerpt))
	}
	p.event(p.span("req:"+d.RequestID), ev, attrs...)
}

func (p *Projection) ledger(ev bus.Event) {
	var d struct {
		RequestID        string `json:"request_id"`
		Step             int    `json:"step"`
		MoveType         string `json:"move_type"`
		Outcome          string `json:"outcome"`
		EvidenceID       string `json:"evidence_id"`
		FamilyCount      int    `json:"family_count"`
		MutationRequired bool   `json:"mutation_required"`
		Query            string `json:"query"`
		Family           string `json:"family"`
	}
	if !p.decode(ev, &d) {
		return
	}
	attrs := []attribute.KeyValue{attribute.Int("vera.step", d.Step), attribute.String("vera.outcome", d.Outcome)}
	if d.MoveType != "" {
		attrs = append(attrs, attribute.String("vera.move_type", d.MoveType))
	}
	if d.EvidenceID != "" {
		attrs = append(attrs, attribute.String("vera.evidence_id", d.EvidenceID))
	}
	if ev.Type == catalog.TypeLedgerQuery {
		attrs = append(attrs, attribute.Int("vera.family_count", d.FamilyCount), attribute.Bool("vera.mutation_required", d.MutationRequired))
		if p.opts.Content {
			attrs = append(attrs, attribute.String("vera.query", d.Query), attribute.String("vera.family", d.Family))
		}
	}
	p.event(p.span("req:"+d.RequestID), ev, attrs...)
}

// logicLabels name the logic verifier's 0-2 thinking scores.
var logicLabels = [...]string{"unaware_repeat", "unaware", "aware"}

func (p *Projection) logicVerdict(ev bus.Event) {
	var d catalog.LogicVerdict
	if !p.decode(ev, &d) {
		return
	}
	s := p.root
	if key, ok := p.stepCall[d.Step]; ok {
		s = p.span(key)
	}
	label := ""
	if d.ThinkingEval >= 0 && d.ThinkingEval < len(logicLabels) {
		label = logicLabels[d.ThinkingEval]
	}
	attrs := evaluation("vera.logic", float64(d.ThinkingEval), label, d.ThinkingEvalReason)
	attrs = append(attrs,
		attribute.Int("vera.step", d.Step),
		attribute.Int("vera.logic.action_eval", d.ActionEval),
		attribute.String("vera.logic.verifier_type", string(d.VerifierType)),
		attribute.String("vera.logic.decided_by", string(d.DecidedBy)),
	)
	if d.RepeatedStep > 0 {
		attrs = append(attrs, attribute.Int("vera.logic.repeated_step", d.RepeatedStep))
	}
	s.Events = append(s.Events, SpanEvent{Name: evaluationEvent, Time: ev.Time, Attrs: attrs})
}

func (p *Projection) auditRequested(ev bus.Event) {
	var d catalog.AuditRequested
	if !p.decode(ev, &d) {
		return
	}
	key := "round:" + strconv.Itoa(d.Round)
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName("deepverifier"),
		semconv.GenAIConversationID(p.runID),
		attribute.Int("vera.audit.round", d.Round),
		attribute.Int("vera.audit.candidate_step", d.CandidateStep),
		attribute.Int("vera.audit.tool_calls", d.ToolCalls),
	}
	if len(d.EvidenceIDs) > 0 {
		attrs = append(attrs, attribute.StringSlice("vera.evidence_ids", d.EvidenceIDs))
	}
	if p.opts.Content && d.Answer != "" {
		attrs = append(attrs, semconv.GenAIInputMessagesKey.String(messagesJSON([]catalog.Message{{Role: "user", Content: d.Answer}}, "")))
	}
	s := p.open(key, ev, p.root, "invoke_agent deepverifier", trace.SpanKindInternal, attrs...)
	if text, ok := p.blobText(s, d.AnswerBlob); ok && d.Answer == "" {
		s.Attrs = append(s.Attrs, semconv.GenAIInputMessagesKey.String(messagesJSON([]catalog.Message{{Role: "user", Content: text}}, "")))
	}
	p.answers[ev.ID] = key
	p.event(s, ev)
}

func (p *Projection) roundSpan(round int) *Span { return p.span("round:" + strconv.Itoa(round)) }

func (p *Projection) auditDecomposed(ev bus.Event) {
	var d catalog.AuditDecomposed
	if !p.decode(ev, &d) {
		return
	}
	var checks, classes []string
	for _, c := range d.Checks {
		checks = append(checks, c.CheckID)
	}
	for _, e := range d.LikelyErrors {
		classes = append(classes, string(e.Class))
	}
	p.event(p.roundSpan(d.Round), ev,
		attribute.StringSlice("vera.audit.checks", checks),
		attribute.StringSlice("vera.audit.likely_errors", classes),
		attribute.Int("vera.audit.findings", len(d.Summary)),
		attribute.Int64("vera.duration_ms", d.DurationMS))
}

func (p *Projection) auditCheckStarted(ev bus.Event) {
	var d catalog.AuditCheckStarted
	if !p.decode(ev, &d) {
		return
	}
	s := p.open("check:"+d.CheckID, ev, p.roundSpan(d.Round), "verify_check "+d.CheckID, trace.SpanKindInternal,
		attribute.String("vera.audit.check_id", d.CheckID),
		attribute.Int("vera.audit.round", d.Round),
		attribute.String("vera.audit.question", d.Question))
	p.event(s, ev)
}

func (p *Projection) auditCheck(ev bus.Event) {
	var d catalog.AuditCheck
	if !p.decode(ev, &d) {
		return
	}
	s, ok := p.spans["check:"+d.CheckID]
	if !ok || s.Ended() {
		start := ev
		start.Time = ev.Time.Add(-time.Duration(d.DurationMS) * time.Millisecond)
		s = p.open("check:"+d.CheckID, start, p.roundSpan(d.Round), "verify_check "+d.CheckID, trace.SpanKindInternal,
			attribute.String("vera.audit.check_id", d.CheckID), attribute.Int("vera.audit.round", d.Round))
	}
	s.Attrs = append(s.Attrs,
		attribute.String("vera.audit.result", string(d.Result)),
		attribute.Bool("vera.audit.load_bearing", d.LoadBearing),
		attribute.String("vera.audit.source", d.Source),
		attribute.StringSlice("vera.audit.citations", d.Citations),
		attribute.StringSlice("vera.audit.tool_request_ids", d.ToolRequestIDs),
	)
	if p.opts.Content {
		// Quotes of the pages and command output the auditor read.
		s.Attrs = append(s.Attrs, attribute.String("vera.audit.evidence", d.Evidence))
	}
	p.event(s, ev, attribute.String("vera.audit.result", string(d.Result)))
	p.end(s, ev.Time)
}

func (p *Projection) auditJudged(ev bus.Event) {
	var d catalog.AuditJudged
	if !p.decode(ev, &d) {
		return
	}
	label := "rejected"
	if d.Score >= p.stopScore {
		label = "accepted"
	}
	attrs := evaluation("vera.deepverifier", float64(d.Score), label, d.Explanation)
	attrs = append(attrs,
		attribute.Int("vera.audit.round", d.Round),
		attribute.Int("vera.audit.raw_score", d.RawScore),
		attribute.Int("vera.audit.best_round", d.BestRound),
		attribute.Int64("vera.audit.model_tokens", d.ModelTokens))
	var caps []string
	for _, c := range d.Caps {
		caps = append(caps, fmt.Sprintf("%s<=%d", c.Rule, c.Cap))
	}
	if len(caps) > 0 {
		attrs = append(attrs, attribute.StringSlice("vera.audit.caps", caps))
	}
	if len(d.Instructions) > 0 {
		attrs = append(attrs, attribute.StringSlice("vera.audit.instructions", d.Instructions))
	}
	s := p.roundSpan(d.Round)
	s.Events = append(s.Events, SpanEvent{Name: evaluationEvent, Time: ev.Time, Attrs: attrs})
}

func (p *Projection) auditFeedback(ev bus.Event) {
	var d catalog.AuditFeedback
	if !p.decode(ev, &d) {
		return
	}
	key := "round:" + strconv.Itoa(d.Round)
	s, ok := p.spans[key]
	if !ok || s.Ended() {
		p.event(p.root, ev, attribute.Int("vera.audit.round", d.Round), attribute.Int("vera.audit.score", d.Score))
		return
	}
	s.Attrs = append(s.Attrs,
		attribute.Int("vera.audit.score", d.Score),
		attribute.Bool("vera.audit.accepted", d.Accepted),
		attribute.Bool("vera.audit.final", d.Final))
	p.event(s, ev, attribute.Bool("vera.audit.accepted", d.Accepted))
	for _, c := range p.openChildren() {
		if c.Parent == s.ID {
			c.Attrs = append(c.Attrs, attribute.Bool("vera.unfinished", true))
			p.end(c, ev.Time)
		}
	}
	p.end(s, ev.Time)
}

// answerSpan returns the span of the answer carried by event id.
func (p *Projection) answerSpan(id string) *Span {
	if key, ok := p.answers[id]; ok {
		return p.span(key)
	}
	return p.root
}

func (p *Projection) verifyFastPhase(ev bus.Event) {
	var d catalog.VerifyFastPhase
	if !p.decode(ev, &d) {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.Int("vera.verifyfast.phase", d.Phase),
		attribute.String("vera.verifyfast.name", string(d.Name)),
		attribute.Int("vera.verifyfast.facts", len(d.Facts)),
		attribute.Int("vera.verifyfast.chains", len(d.Chains)),
		attribute.Int("vera.verifyfast.errors", len(d.Errors)),
		attribute.Int64("vera.duration_ms", d.DurationMS),
	}
	if d.ParseError != "" {
		attrs = append(attrs, attribute.String("vera.verifyfast.parse_error", d.ParseError))
	}
	p.event(p.answerSpan(d.AnswerEventID), ev, attrs...)
}

func (p *Projection) verifyFastScored(ev bus.Event) {
	var d catalog.VerifyFastScored
	if !p.decode(ev, &d) {
		return
	}
	attrs := evaluation("vera.verifyfast", float64(d.CreditScore), string(d.Zone),
		fmt.Sprintf("%d high-severity and %d low-severity errors", d.HighCount, d.LowCount))
	attrs = append(attrs, attribute.String("vera.verifyfast.profile", d.Profile), attribute.String("vera.answer_event_id", d.AnswerEventID))
	s := p.answerSpan(d.AnswerEventID)
	s.Events = append(s.Events, SpanEvent{Name: evaluationEvent, Time: ev.Time, Attrs: attrs})
}

// blobText returns the bytes of ref for a content attribute, cut at
// MaxContentBytes; ok is false without content capture, a blob reader or
// a reference, and when the blob cannot be read (s then says why).
func (p *Projection) blobText(s *Span, ref *catalog.BlobRef) (string, bool) {
	b, ok := p.blobBytes(s, ref)
	if !ok {
		return "", false
	}
	return cut(string(b), MaxContentBytes), true
}

func (p *Projection) blobBytes(s *Span, ref *catalog.BlobRef) ([]byte, bool) {
	if !p.opts.Content || p.opts.Blob == nil || ref == nil {
		return nil, false
	}
	b, err := p.opts.Blob(ref.Digest)
	if err != nil {
		s.Attrs = append(s.Attrs, attribute.String("vera.blob_error", fmt.Sprintf("%s: %v", ref.Digest, err)))
		return nil, false
	}
	return b, true
}

// cut returns text whole when it fits in limit bytes, else its first
// limit bytes (whole UTF-8 characters) and a marker.
func cut(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	i := limit
	for i > 0 && !utf8.RuneStart(text[i]) {
		i--
	}
	return text[:i] + fmt.Sprintf("\n[… cut: %d of %d bytes]", i, len(text))
}

// evaluationEvent is the GenAI conventions' event for a verdict.
const evaluationEvent = "gen_ai.evaluation.result"

func evaluation(name string, score float64, label, explanation string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.GenAIEvaluationName(name), semconv.GenAIEvaluationScoreValue(score)}
	if label != "" {
		attrs = append(attrs, semconv.GenAIEvaluationScoreLabel(label))
	}
	if explanation != "" {
		attrs = append(attrs, semconv.GenAIEvaluationExplanation(explanation))
	}
	return attrs
}

// genericAttrs are the attributes of an event without its own mapping:
// its id and source, and each scalar member of its data (strings up to
// 1 KiB) or array of scalars, as vera.<member>.
func (p *Projection) genericAttrs(ev bus.Event) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("vera.event_id", ev.ID), attribute.String("vera.source", ev.Source)}
	var data map[string]any
	if len(ev.Data) == 0 || json.Unmarshal(ev.Data, &data) != nil {
		return attrs
	}
	for _, k := range sortedKeys(data) {
		if k == "message" && !p.opts.Content && strings.HasPrefix(ev.Type, "vera.policy.") {
			continue // the text injected into the agent's prompt
		}
		if kv, ok := scalarAttr("vera."+k, data[k]); ok {
			attrs = append(attrs, kv)
		}
	}
	return attrs
}

// Project folds the events of one recorded run, in stream order, and
// returns all its spans: those still open end at the last event, marked
// vera.unfinished.
func Project(runID string, events []bus.Event, opts Options) []*Span {
	p := NewProjection(runID, opts, nil)
	for _, ev := range events {
		p.Add(ev)
	}
	return p.Close()
}

// ProjectFrom is Project over events as a reader yields them (in stream
// order): the fold runs in a goroutine of its own beside the reader, so
// reading and folding overlap. It returns the spans and the number of
// events folded, or the reader's first error.
func ProjectFrom(runID string, events iter.Seq2[bus.Event, error], opts Options) ([]*Span, int, error) {
	ch := make(chan []bus.Event, 16)
	done := make(chan []*Span)
	go func() {
		p := NewProjection(runID, opts, nil)
		for batch := range ch {
			for _, ev := range batch {
				p.Add(ev)
			}
		}
		done <- p.Close()
	}()
	const batchSize = 256
	batch := make([]bus.Event, 0, batchSize)
	n := 0
	var rerr error
	for ev, err := range events {
		if err != nil {
			rerr = err
			break
		}
		batch = append(batch, ev)
		n++
		if len(batch) == batchSize {
			ch <- batch
			batch = make([]bus.Event, 0, batchSize)
		}
	}
	if len(batch) > 0 {
		ch <- batch
	}
	close(ch)
	spans := <-done
	if rerr != nil {
		return nil, n, rerr
	}
	return spans, n, nil
}
