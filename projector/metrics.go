package projector

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

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
)

// Metrics folds events into VERA's Prometheus metrics. The zero value is
// not usable; call NewMetrics.
type Metrics struct {
	Bus    *bus.Bus
	Logger *slog.Logger

	events *registry // derived from events only (WriteText)
	health *registry // sampled from the server

	// seen holds the event ids folded per run, so that a copy stored twice
	// counts once; a run's set is dropped at its vera.run.finished to
	// bound memory.
	seen map[string]map[string]struct{}

	scores, lastScore, duration, verifierTokens, modelTokens       *family
	instrChars, instrURL, instrPath, instrCmd, beforeTools, length *family
	gradient, policy, eventsTotal, malformed                       *family
	policyByType                                                   map[string]*family

	consPending, consAckPending, consRedelivered, deadLetters, streamMsgs, healthErrors *family
}

// NewMetrics returns metrics with every spec metric present at zero.
func NewMetrics(b *bus.Bus, logger *slog.Logger) *Metrics {
	m := &Metrics{Bus: b, Logger: logger, events: newRegistry(), health: newRegistry(), seen: map[string]map[string]struct{}{}, policyByType: map[string]*family{}}
	r := m.events
	m.scores = r.add(MetricVerifierScores, "Auditor rounds by final score (vera.audit.judged).", kindCounter, "score")
	for s := 1; s <= 4; s++ {
		m.scores.get(strconv.Itoa(s))
	}
	m.lastScore = r.add(MetricVerifierLastScore, "Score of the latest audit round in stream order (vera.audit.judged).", kindGauge, "")
	m.duration = r.add(MetricVerifierDuration, "Duration of audit rounds (vera.audit.judged duration_ms).", kindHistogram, "", 1, 5, 10, 30, 60, 120, 300, 600, 1800)
	m.verifierTokens = r.add(MetricVerifierModelTokens, "Model tokens used by audit rounds (vera.audit.judged model_tokens).", kindCounter, "")
	m.modelTokens = r.add(MetricModelTokens, "Model tokens by scope (vera.model.responded usage.total).", kindCounter, "scope")
	for _, s := range []string{"agent", "verifier", "judge", "verifyfast", "logic"} {
		m.modelTokens.get(s)
	}
	m.instrChars = r.add(MetricInstructionChars, "Length in characters of the auditor's corrective instructions (vera.audit.judged).", kindSummary, "")
	m.instrURL = r.add(MetricInstructionHasURL, "Auditor instructions naming a URL.", kindCounter, "")
	m.instrPath = r.add(MetricInstructionHasPath, "Auditor instructions naming a file path.", kindCounter, "")
	m.instrCmd = r.add(MetricInstructionHasCmd, "Auditor instructions naming a shell command.", kindCounter, "")
	m.beforeTools = r.add(MetricVerifierBeforeTools, "Audit requests made before any agent tool call (vera.audit.requested tool_calls 0).", kindCounter, "")
	m.length = r.add(MetricModelFinishReasonLength, "Model replies cut by the token limit (vera.model.responded finish_reason length).", kindCounter, "")
	m.gradient = r.add(MetricVerifierGradient, "Corrective feedback handed back to the agent: vera.audit.feedback not accepted, with instructions or a message.", kindCounter, "")
	for _, rule := range catalog.PolicyRules() {
		m.policyByType["vera.policy."+rule] = r.add(catalog.PolicyMetricName(rule), "Times the policy rule "+rule+" fired (vera.policy."+rule+").", kindCounter, "")
	}
	m.eventsTotal = r.add("vera_events_total", "Events folded, by type.", kindCounter, "type")
	m.malformed = r.add("vera_events_malformed_total", "Stored messages that are not valid events or whose data does not decode.", kindCounter, "")

	h := m.health
	m.consPending = h.add("vera_bus_consumer_pending", "Events not yet delivered to a durable consumer of stream VERA (its lag).", kindGauge, "consumer")
	m.consAckPending = h.add("vera_bus_consumer_ack_pending", "Events delivered to a durable consumer and not yet acknowledged.", kindGauge, "consumer")
	m.consRedelivered = h.add("vera_bus_consumer_redelivered", "Events of a durable consumer delivered more than once and still unacknowledged.", kindGauge, "consumer")
	m.deadLetters = h.add("vera_bus_dead_letters", "Messages in the dead-letter stream VERA_DLQ, by consumer.", kindGauge, "consumer")
	m.streamMsgs = h.add("vera_bus_stream_messages", "Messages stored in stream VERA.", kindGauge, "")
	m.healthErrors = h.add("vera_bus_health_errors_total", "Failed samples of the bus health.", kindCounter, "")
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
	m.events.mu.Lock()
	defer m.events.mu.Unlock()
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
	}
	m.eventsTotal.get(ev.Type).value++
	bad := func(err error) {
		if err != nil {
			m.malformed.get("").value++
		}
	}
	switch ev.Type {
	case catalog.TypeAuditJudged:
		var d catalog.AuditJudged
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		m.scores.get(strconv.Itoa(d.Score)).value++
		m.lastScore.get("").value = float64(d.Score)
		m.duration.observe("", float64(d.DurationMS)/1000)
		m.verifierTokens.get("").value += float64(d.ModelTokens)
		for _, in := range d.Instructions {
			m.instrChars.observe("", float64(utf8.RuneCountInString(in)))
			if reURL.MatchString(in) {
				m.instrURL.get("").value++
			}
			if rePath.MatchString(in) {
				m.instrPath.get("").value++
			}
			if reCmd.MatchString(in) {
				m.instrCmd.get("").value++
			}
		}
	case catalog.TypeAuditRequested:
		var d catalog.AuditRequested
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		if d.ToolCalls == 0 {
			m.beforeTools.get("").value++
		}
	case catalog.TypeAuditFeedback:
		var d catalog.AuditFeedback
		if err := ev.DecodeData(&d); err != nil {
			bad(err)
			return
		}
		if !d.Accepted && (len(d.Instructions) > 0 || strings.TrimSpace(d.Message) != "") {
			m.gradient.get("").value++
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
		m.modelTokens.get(scope).value += float64(d.Usage.Total)
		if d.FinishReason == "length" {
			m.length.get("").value++
		}
	default:
		if f := m.policyByType[ev.Type]; f != nil {
			f.get("").value++
		}
	}
}

// ObserveMalformed counts a stored message that is not a valid event.
func (m *Metrics) ObserveMalformed() {
	m.events.mu.Lock()
	m.malformed.get("").value++
	m.events.mu.Unlock()
}

// WriteText writes the event-derived metrics in the Prometheus text format,
// deterministically (sorted, no timestamps): the metrics.prom snapshot.
// Bus health is not included.
func (m *Metrics) WriteText(w io.Writer) error { return m.events.write(w) }

// Handler serves /metrics: the event-derived metrics, then bus health.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		if err := m.events.write(w); err != nil {
			return
		}
		_ = m.health.write(w)
	})
}

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
		m.health.mu.Lock()
		m.healthErrors.get("").value++
		m.health.mu.Unlock()
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

	m.health.mu.Lock()
	defer m.health.mu.Unlock()
	clear(m.consPending.series)
	clear(m.consAckPending.series)
	clear(m.consRedelivered.series)
	clear(m.deadLetters.series)
	for name, c := range consumers {
		m.consPending.get(name).value = float64(c.pending)
		m.consAckPending.get(name).value = float64(c.ackPending)
		m.consRedelivered.get(name).value = float64(c.rd)
	}
	for name, n := range dead {
		m.deadLetters.get(name).value = float64(n)
	}
	m.streamMsgs.get("").value = float64(si.State.Msgs)
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
