package projector

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// Metric names of the VERA spec (seed "Metrics You'll Likely Watch") not
// built from a policy rule; policy counters are catalog.PolicyMetricName.
const (
	MetricVerifierScores          = "dra_verifier_scores_total"
	MetricVerifierLastScore       = "dra_verifier_last_score"
	MetricVerifierDuration        = "dra_verifier_duration_seconds"
	MetricVerifierModelTokens     = "dra_verifier_model_tokens_total"
	MetricModelTokens             = "dra_model_tokens_total"
	MetricInstructionChars        = "dra_verifier_instruction_chars"
	MetricInstructionHasURL       = "dra_verifier_instruction_has_url_total"
	MetricInstructionHasPath      = "dra_verifier_instruction_has_path_total"
	MetricInstructionHasCmd       = "dra_verifier_instruction_has_cmd_total"
	MetricVerifierBeforeTools     = "dra_verifier_before_tools_total"
	MetricModelFinishReasonLength = "dra_model_finish_reason_length_total"
	MetricVerifierGradient        = "dra_verifier_gradient_total"

	// VERA's own model metrics (not in the spec's list).
	MetricModelReasoningTokens = "vera_model_reasoning_tokens_total"
	MetricModelToolCalls       = "vera_model_tool_calls_total"
	MetricModelDropped         = "vera_model_dropped_features_total"

	// VERA's sandbox metrics.
	MetricToolSessions = "vera_tool_sessions_total"
	MetricToolEdits    = "vera_tool_edits_total"
)

// Outcomes of an edit (label outcome of vera_tool_edits_total).
const (
	EditChanged   = "changed"   // ran and changed the file
	EditUnchanged = "unchanged" // ran and left the file as it was (view, a no-op edit)
	EditRefused   = "refused"   // ran to exit code 1: the edit was refused (old_str not found...)
	EditDenied    = "denied"    // not run: a deny rule matched
	EditFailed    = "failed"    // did not run to an exit: timed out, interrupted, sandboxd error
)

// Metrics folds events into VERA's Prometheus metrics. The zero value is
// not usable; call NewMetrics.
//
// The collectors live in private client_golang registries (never the
// global one): events holds what is derived from events only (WriteText,
// the metrics.prom snapshot), health what is sampled from the server.
type Metrics struct {
	Bus    *bus.Bus
	Logger *slog.Logger

	// mu serialises Observe with snapshots of events, so that a snapshot
	// never shows half of an event's fold; healthMu does the same for a
	// health sample (reset, then set).
	mu, healthMu sync.Mutex

	events *prometheus.Registry // derived from events only (WriteText)
	health *prometheus.Registry // sampled from the server

	// seen holds the event ids folded per run, so that a copy stored twice
	// counts once; a run's set is dropped at its vera.run.finished to
	// bound memory.
	seen map[string]map[string]struct{}
	// editOps holds, per run, the op of each edit request not finished
	// yet (vera.tool.finished carries no tool name); dropped with seen.
	editOps map[string]map[string]string

	scores, modelTokens, eventsTotal                           *prometheus.CounterVec
	reasoningTokens, toolCalls, dropped, sessions              *prometheus.CounterVec
	edits                                                      *prometheus.CounterVec
	lastScore                                                  prometheus.Gauge
	duration                                                   prometheus.Histogram
	instrChars                                                 prometheus.Summary
	verifierTokens, instrURL, instrPath, instrCmd, beforeTools prometheus.Counter
	length, gradient, malformed                                prometheus.Counter
	policyByType                                               map[string]prometheus.Counter

	consPending, consAckPending, consRedelivered, deadLetters *prometheus.GaugeVec
	streamMsgs                                                prometheus.Gauge
	healthErrors                                              prometheus.Counter
}

func newCounter(r *prometheus.Registry, name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	r.MustRegister(c)
	return c
}

func newCounterVec(r *prometheus.Registry, name, help, label string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	r.MustRegister(c)
	return c
}

func newGauge(r *prometheus.Registry, name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	r.MustRegister(g)
	return g
}

func newGaugeVec(r *prometheus.Registry, name, help, label string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{label})
	r.MustRegister(g)
	return g
}

// NewMetrics returns metrics with every spec metric present at zero.
func NewMetrics(b *bus.Bus, logger *slog.Logger) *Metrics {
	m := &Metrics{Bus: b, Logger: logger, events: prometheus.NewRegistry(), health: prometheus.NewRegistry(), seen: map[string]map[string]struct{}{},
		editOps: map[string]map[string]string{}, policyByType: map[string]prometheus.Counter{}}
	r := m.events
	m.scores = newCounterVec(r, MetricVerifierScores, "Auditor rounds by final score (vera.audit.judged).", "score")
	for s := 1; s <= 4; s++ {
		m.scores.WithLabelValues(strconv.Itoa(s))
	}
	m.lastScore = newGauge(r, MetricVerifierLastScore, "Score of the latest audit round in stream order (vera.audit.judged).")
	m.duration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    MetricVerifierDuration,
		Help:    "Duration of audit rounds (vera.audit.judged duration_ms).",
		Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800},
	})
	r.MustRegister(m.duration)
	m.verifierTokens = newCounter(r, MetricVerifierModelTokens, "Model tokens used by audit rounds (vera.audit.judged model_tokens).")
	m.modelTokens = newCounterVec(r, MetricModelTokens, "Model tokens by scope (vera.model.responded usage.total).", "scope")
	for _, s := range []string{"agent", "verifier", "judge", "verifyfast", "logic"} {
		m.modelTokens.WithLabelValues(s)
	}
	m.reasoningTokens = newCounterVec(r, MetricModelReasoningTokens, "Reasoning tokens by scope, when the server reports them (vera.model.responded usage.reasoning).", "scope")
	m.toolCalls = newCounterVec(r, MetricModelToolCalls, "Native tool calls in model replies, by scope (vera.model.responded tool_calls).", "scope")
	for _, s := range []string{"agent", "verifier", "judge", "verifyfast", "logic"} {
		m.reasoningTokens.WithLabelValues(s)
		m.toolCalls.WithLabelValues(s)
	}
	m.dropped = newCounterVec(r, MetricModelDropped, "Model calls sent again without a feature the server refused (vera.model.responded dropped), by feature.", "feature")
	for _, f := range []string{"tools", "response_format"} {
		m.dropped.WithLabelValues(f)
	}
	m.sessions = newCounterVec(r, MetricToolSessions, "Shell sessions sandboxd started in a container (action started) or started again after one ended (action restarted) (vera.tool.session).", "action")
	for _, a := range []string{"started", "restarted"} {
		m.sessions.WithLabelValues(a)
	}
	m.edits = prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricToolEdits,
		Help: "Edits of the file tool by op and outcome: changed, unchanged, refused (exit 1), denied, failed (timed out, interrupted, sandboxd error) (vera.tool.finished of an edit request)."},
		[]string{"op", "outcome"})
	r.MustRegister(m.edits)
	for _, op := range []catalog.EditOp{catalog.EditView, catalog.EditCreate, catalog.EditStrReplace, catalog.EditInsert, catalog.EditUndo} {
		for _, o := range []string{EditChanged, EditUnchanged, EditRefused, EditDenied, EditFailed} {
			m.edits.WithLabelValues(string(op), o)
		}
	}
	// No objectives: only _sum and _count, which are a pure fold (quantiles
	// would depend on wall-clock age windows).
	m.instrChars = prometheus.NewSummary(prometheus.SummaryOpts{
		Name: MetricInstructionChars,
		Help: "Length in characters of the auditor's corrective instructions (vera.audit.judged).",
	})
	r.MustRegister(m.instrChars)
	m.instrURL = newCounter(r, MetricInstructionHasURL, "Auditor instructions naming a URL.")
	m.instrPath = newCounter(r, MetricInstructionHasPath, "Auditor instructions naming a file path.")
	m.instrCmd = newCounter(r, MetricInstructionHasCmd, "Auditor instructions naming a shell command.")
	m.beforeTools = newCounter(r, MetricVerifierBeforeTools, "Audit requests made before any agent tool call (vera.audit.requested tool_calls 0).")
	m.length = newCounter(r, MetricModelFinishReasonLength, "Model replies cut by the token limit (vera.model.responded finish_reason length).")
	m.gradient = newCounter(r, MetricVerifierGradient, "Corrective feedback handed back to the agent: vera.audit.feedback not accepted, with instructions or a message.")
	for _, rule := range catalog.PolicyRules() {
		m.policyByType["vera.policy."+rule] = newCounter(r, catalog.PolicyMetricName(rule), "Times the policy rule "+rule+" fired (vera.policy."+rule+").")
	}
	m.eventsTotal = newCounterVec(r, "vera_events_total", "Events folded, by type.", "type")
	m.malformed = newCounter(r, "vera_events_malformed_total", "Stored messages that are not valid events or whose data does not decode.")

	h := m.health
	m.consPending = newGaugeVec(h, "vera_bus_consumer_pending", "Events not yet delivered to a durable consumer of stream VERA (its lag).", "consumer")
	m.consAckPending = newGaugeVec(h, "vera_bus_consumer_ack_pending", "Events delivered to a durable consumer and not yet acknowledged.", "consumer")
	m.consRedelivered = newGaugeVec(h, "vera_bus_consumer_redelivered", "Events of a durable consumer delivered more than once and still unacknowledged.", "consumer")
	m.deadLetters = newGaugeVec(h, "vera_bus_dead_letters", "Messages in the dead-letter stream VERA_DLQ, by consumer.", "consumer")
	m.streamMsgs = newGauge(h, "vera_bus_stream_messages", "Messages stored in stream VERA.")
	m.healthErrors = newCounter(h, "vera_bus_health_errors_total", "Failed samples of the bus health.")
	return m
}

func (m *Metrics) log() *slog.Logger {
	if m.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Logger
}

var (
	reURL  = regexp.MustCompile(`(?i)\bhttps?://\S+`)
	rePath = regexp.MustCompile(`(^|[\s"'(\x60=])(/|\./|\.\./|~/)[A-Za-z0-9_.~-]+`)
	reCmd  = regexp.MustCompile("\x60[^\x60]+\x60|(?i)\\b(curl|wget|grep|rg|sed|awk|jq|cat|head|tail|ls|find|python3?|pip|apt-get|git|cd|echo|sh|bash|lynx|pdftotext)\\s+\\S")
)

// Observe folds one event. Folding the same events in the same order gives
// the same values; an event id already seen in its run (until the run's
// vera.run.finished) is ignored.
func (m *Metrics) Observe(ev bus.Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := m.seen[ev.RunID]
	if ids == nil {
		ids = map[string]struct{}{}
		m.seen[ev.RunID] = ids
	}
	if _, dup := ids[ev.ID]; dup {
		return
	}
	ids[ev.ID] = struct{}{}
	if ev.Type == catalog.TypeRunFinished {
		delete(m.seen, ev.RunID)
		delete(m.editOps, ev.RunID)
	}
	m.eventsTotal.WithLabelValues(ev.Type).Inc()
	bad := func(err error) {
		if err != nil {
			m.malformed.Inc()
		}
	}
	switch ev.Type {
	case catalog.TypeAuditJudged:
		var d catalog.AuditJudged
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		m.scores.WithLabelValues(strconv.Itoa(d.Score)).Inc()
		m.lastScore.Set(float64(d.Score))
		m.duration.Observe(float64(d.DurationMS) / 1000)
		addCount(m.verifierTokens, d.ModelTokens)
		for _, in := range d.Instructions {
			m.instrChars.Observe(float64(utf8.RuneCountInString(in)))
			if reURL.MatchString(in) {
				m.instrURL.Inc()
			}
			if rePath.MatchString(in) {
				m.instrPath.Inc()
			}
			if reCmd.MatchString(in) {
				m.instrCmd.Inc()
			}
		}
	case catalog.TypeAuditRequested:
		var d catalog.AuditRequested
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		if d.ToolCalls == 0 {
			m.beforeTools.Inc()
		}
	case catalog.TypeAuditFeedback:
		var d catalog.AuditFeedback
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		if !d.Accepted && (len(d.Instructions) > 0 || strings.TrimSpace(d.Message) != "") {
			m.gradient.Inc()
		}
	case catalog.TypeModelResponded:
		var d catalog.ModelResponded
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		scope := string(d.Scope)
		if scope == "" {
			scope = "unknown"
		}
		addCount(m.modelTokens.WithLabelValues(scope), d.Usage.Total)
		addCount(m.reasoningTokens.WithLabelValues(scope), d.Usage.Reasoning)
		addCount(m.toolCalls.WithLabelValues(scope), int64(len(d.ToolCalls)))
		if d.Error == "" {
			for _, f := range d.Dropped {
				m.dropped.WithLabelValues(f).Inc()
			}
		}
		if d.FinishReason == "length" {
			m.length.Inc()
		}
	case catalog.TypeToolSession:
		var d catalog.ToolSession
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		m.sessions.WithLabelValues(d.Action).Inc()
	case catalog.TypeToolRequested:
		var d catalog.ToolRequested
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		if d.Tool == catalog.ToolEdit {
			ops := m.editOps[ev.RunID]
			if ops == nil {
				ops = map[string]string{}
				m.editOps[ev.RunID] = ops
			}
			op := "unknown"
			if d.Edit != nil && d.Edit.Op != "" {
				op = string(d.Edit.Op)
			}
			ops[d.RequestID] = op
		}
	case catalog.TypeToolFinished:
		var d catalog.ToolFinished
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		op, requested := m.editOps[ev.RunID][d.RequestID]
		if !requested && d.Edit == nil {
			return // a shell command
		}
		delete(m.editOps[ev.RunID], d.RequestID)
		if d.Edit != nil && d.Edit.Op != "" {
			op = string(d.Edit.Op)
		}
		m.edits.WithLabelValues(op, editOutcome(d)).Inc()
	default:
		if f := m.policyByType[ev.Type]; f != nil {
			f.Inc()
		}
	}
}

// editOutcome classifies the result of an edit request.
func editOutcome(d catalog.ToolFinished) string {
	switch {
	case d.Denied:
		return EditDenied
	case d.TimedOut, d.Interrupted, d.Error != "":
		return EditFailed
	case d.ExitCode != 0:
		return EditRefused
	case d.Edit != nil && d.Edit.Changed:
		return EditChanged
	}
	return EditUnchanged
}

// ObserveMalformed counts a stored message that is not a valid event.
func (m *Metrics) ObserveMalformed() {
	m.mu.Lock()
	m.malformed.Inc()
	m.mu.Unlock()
}

// addCount adds n to a counter. A negative n (data breaking the catalogue's
// minimum=0) adds nothing: a Prometheus counter never goes down.
func addCount(c prometheus.Counter, n int64) {
	if n > 0 {
		c.Add(float64(n))
	}
}

// WriteText writes the event-derived metrics in the Prometheus text format,
// deterministically (sorted, no timestamps): the metrics.prom snapshot.
// Bus health is not included.
// The registry sorts families by name and series by label values, and the
// text encoder writes no timestamps (nor created timestamps), so the same
// events give byte-identical output.
func (m *Metrics) WriteText(w io.Writer) error {
	mfs, err := m.eventsGatherer().Gather()
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(bw, mf); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// Handler serves /metrics: the event-derived metrics and bus health, in the
// format the scraper negotiates (promhttp).
func (m *Metrics) Handler() http.Handler {
	g := prometheus.Gatherers{m.eventsGatherer(), m.healthGatherer()}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// lockedGatherer gathers r while holding mu, so a snapshot never sees half
// of an update.
func lockedGatherer(mu *sync.Mutex, r *prometheus.Registry) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mu.Lock()
		defer mu.Unlock()
		return r.Gather()
	})
}

func (m *Metrics) eventsGatherer() prometheus.Gatherer { return lockedGatherer(&m.mu, m.events) }
func (m *Metrics) healthGatherer() prometheus.Gatherer { return lockedGatherer(&m.healthMu, m.health) }

// Run folds the whole stream from its first event and follows it until ctx
// ends. It uses an ordered, non-durable reader on purpose: metrics are a
// fold, so a restart must rebuild every counter from the stream rather than
// resume a durable position with counters lost.
func (m *Metrics) Run(ctx context.Context) error {
	if m.Bus == nil {
		return errors.New("projector: Metrics.Bus is nil")
	}
	for rec, err := range m.Bus.Read(ctx, bus.ReadOptions{Follow: true}) {
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if rec.Err != nil {
			m.ObserveMalformed()
			continue
		}
		m.Observe(rec.Event)
	}
	return nil
}

// RunHealth samples the bus health every interval (default 15s) until ctx
// ends.
func (m *Metrics) RunHealth(ctx context.Context, interval time.Duration) error {
	if m.Bus == nil {
		return errors.New("projector: Metrics.Bus is nil")
	}
	if interval <= 0 {
		interval = 15 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := m.SampleHealth(ctx); err != nil && ctx.Err() == nil {
			m.log().Warn("projector: bus health", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// SampleHealth refreshes the bus health gauges once: per durable consumer
// of stream VERA its pending (lag), ack-pending and redelivered counts, and
// the dead letters per consumer in VERA_DLQ.
func (m *Metrics) SampleHealth(ctx context.Context) error {
	err := m.sampleHealth(ctx)
	if err != nil {
		m.healthErrors.Inc()
	}
	return err
}

func (m *Metrics) sampleHealth(ctx context.Context) error {
	js := m.Bus.JetStream()
	s, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		return err
	}
	type cons struct {
		pending        uint64
		ackPending, rd int
	}
	consumers := map[string]cons{}
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		if ci.Config.Durable == "" {
			continue // ordered readers and other ephemeral consumers
		}
		consumers[ci.Name] = cons{ci.NumPending, ci.NumAckPending, ci.NumRedelivered}
	}
	if err := lister.Err(); err != nil {
		return err
	}
	si, err := s.Info(ctx)
	if err != nil {
		return err
	}
	dead := map[string]uint64{}
	if ds, err := js.Stream(ctx, bus.DeadLetterStream); err == nil {
		di, err := ds.Info(ctx, jetstream.WithSubjectFilter(bus.DeadLetterSubject+".>"))
		if err != nil {
			return err
		}
		for subj, n := range di.State.Subjects {
			rest := strings.TrimPrefix(subj, bus.DeadLetterSubject+".")
			c, _, _ := strings.Cut(rest, ".")
			dead[c] += n
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}

	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	m.consPending.Reset()
	m.consAckPending.Reset()
	m.consRedelivered.Reset()
	m.deadLetters.Reset()
	for name, c := range consumers {
		m.consPending.WithLabelValues(name).Set(float64(c.pending))
		m.consAckPending.WithLabelValues(name).Set(float64(c.ackPending))
		m.consRedelivered.WithLabelValues(name).Set(float64(c.rd))
	}
	for name, n := range dead {
		m.deadLetters.WithLabelValues(name).Set(float64(n))
	}
	m.streamMsgs.Set(float64(si.State.Msgs))
	return nil
}

// SpecMetricNames lists every metric the VERA spec names, with the policy
// counter of every catalogued rule.
func SpecMetricNames() []string {
	out := []string{
		MetricModelFinishReasonLength, MetricModelTokens, MetricVerifierBeforeTools,
		MetricVerifierDuration, MetricVerifierGradient, MetricInstructionChars,
		MetricInstructionHasCmd, MetricInstructionHasPath, MetricInstructionHasURL,
		MetricVerifierLastScore, MetricVerifierModelTokens, MetricVerifierScores,
	}
	for _, r := range catalog.PolicyRules() {
		out = append(out, catalog.PolicyMetricName(r))
	}
	return out
}
