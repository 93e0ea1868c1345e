package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults for ConsumerConfig.
const (
	DefaultMaxDeliver   = 5
	DefaultAckWait      = 30 * time.Second
	DefaultDrainTimeout = 30 * time.Second
)

// DefaultBackoff is the redelivery delay after the 1st, 2nd, … failure.
var DefaultBackoff = []time.Duration{500 * time.Millisecond, 2 * time.Second, 10 * time.Second, 30 * time.Second}

// ConsumerConfig configures a durable consumer.
type ConsumerConfig struct {
	// Durable names the consumer; its position survives restarts. Letters,
	// digits, '-' and '_' only (e.g. "sandboxd", "projector-files").
	Durable string
	// Types are the event-type patterns to receive ("vera.tool.requested",
	// "vera.audit.*"); empty means every type.
	Types []string
	// RunID restricts the consumer to one run; empty means every run.
	RunID string
	// DeliverNew starts a newly created consumer at the end of the stream
	// instead of its beginning. It has no effect on an existing consumer.
	DeliverNew bool

	MaxDeliver    int             // deliveries before a failing event is dead-lettered
	Backoff       []time.Duration // delay before redelivery after the n-th failure
	AckWait       time.Duration   // unacknowledged this long (process gone) → redelivered
	MaxAckPending int             // events in flight at once; default 256
	// Concurrency is the most handlers running at once. Events with the
	// same shard key (see ShardKey) are handled one at a time, in stream
	// order; events with different keys run in parallel, up to Concurrency,
	// and a busy key never holds up another one.
	Concurrency int
	// ShardKey returns the ordering key of an event when Concurrency > 1;
	// nil means the run id, so that the events of one run are handled in
	// order. It is called on the dispatching goroutine, before the handler,
	// with the envelope parsed (Event set), so it must be quick; a malformed
	// envelope is keyed by the run id of its subject without calling it.
	// Returning a key per event (its id, say) handles events independently.
	ShardKey func(*Message) string
	// DrainTimeout bounds how long in-flight handlers may run after the
	// consumer's context ends; then their context is cancelled.
	DrainTimeout time.Duration
}

func (c *ConsumerConfig) setDefaults() error {
	if c.Durable == "" {
		return errors.New("consumer: Durable name is required")
	}
	for _, r := range c.Durable {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("consumer: durable name %q: use letters, digits, '-' and '_'", c.Durable)
		}
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.Backoff == nil {
		c.Backoff = DefaultBackoff
	}
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 256
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	return nil
}

func (c *ConsumerConfig) filters() ([]string, error) {
	if len(c.Types) == 0 {
		f, err := FilterSubject(c.RunID, "")
		return []string{f}, err
	}
	out := make([]string, 0, len(c.Types))
	for _, t := range c.Types {
		f, err := FilterSubject(c.RunID, t)
		if err != nil {
			return nil, fmt.Errorf("consumer %s: %w", c.Durable, err)
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// wants reports whether a decoded event's type is one of c.Types (every
// type when there are none). The subject filters decide for VERA's own
// types; an outside type is not in its subject (vera.ext.* types share
// vera.run.<run>.ext.<identity>), so only this check tells them apart.
func (c *ConsumerConfig) wants(typ string) bool {
	if len(c.Types) == 0 {
		return true
	}
	for _, p := range c.Types {
		if typeMatches(p, typ) {
			return true
		}
	}
	return false
}

// Message is one delivered event.
type Message struct {
	Event     Event
	Raw       []byte
	Subject   string
	Sequence  uint64    // stream sequence
	Delivered uint64    // 1 on first delivery
	Stored    time.Time // when the stream stored it
	msg       jetstream.Msg
	metaErr   error // the delivery's metadata could not be read
	envErr    error // the envelope is malformed
}

// InProgress tells the server the handler is still working, resetting the
// ack timer. The consumer already does this periodically while a handler
// runs; call it for finer control.
func (m *Message) InProgress() error { return m.msg.InProgress() }

// Handler processes one event. Returning nil acknowledges it. An error
// marked with Permanent dead-letters it at once; any other error schedules a
// redelivery with backoff until MaxDeliver, then dead-letters it.
type Handler func(ctx context.Context, m *Message) error

type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the event goes to the
// dead-letter stream with err as the reason.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Consume runs a durable consumer until ctx ends, calling h for each event.
// On shutdown it stops fetching, lets in-flight handlers finish (bounded by
// DrainTimeout), and returns nil. Malformed envelopes, permanent errors and
// events that exhaust MaxDeliver go to the dead-letter stream and are
// terminated; they never stop the consumer.
func (b *Bus) Consume(ctx context.Context, cfg ConsumerConfig, h Handler) error {
	if err := cfg.setDefaults(); err != nil {
		return err
	}
	cons, err := b.ensureConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	log := b.log.With("consumer", cfg.Durable)

	// Handlers get a context that outlives ctx by DrainTimeout.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()

	// draining is set once ctx ends: the acks of the handlers still
	// running are then confirmed by the server before Consume returns
	// (a process that exits next loses none).
	var draining atomic.Bool
	var sh *sharder
	dispatch := func(jm jetstream.Msg) { b.handle(hctx, log, &cfg, jm, nil, h, &draining) }
	if cfg.Concurrency > 1 {
		sh = newSharder(cfg.Concurrency, func(d delivery) { b.handle(hctx, log, &cfg, d.jm, d.m, h, &draining) })
		dispatch = func(jm jetstream.Msg) {
			if cfg.ShardKey == nil {
				runID, _, _ := ParseSubject(jm.Subject())
				sh.dispatch(runID, delivery{jm: jm})
				return
			}
			m := newMessage(jm)
			key := ""
			if m.parsed() {
				key = cfg.ShardKey(m)
			} else {
				key, _, _ = ParseSubject(jm.Subject())
			}
			sh.dispatch(key, delivery{jm: jm, m: m})
		}
	}

	cc, err := cons.Consume(dispatch,
		jetstream.PullMaxMessages(min(cfg.MaxAckPending, 500)),
		// Short pulls with frequent heartbeats: after a leader change the
		// client notices a dead pull within 2×heartbeat and pulls again
		// (the defaults take about 30s).
		jetstream.PullExpiry(10*time.Second),
		jetstream.PullHeartbeat(2*time.Second),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if !errors.Is(err, jetstream.ErrNoHeartbeat) && !errors.Is(err, nats.ErrConnectionClosed) {
				log.Warn("consume", "err", err)
			}
		}))
	if err != nil {
		return fmt.Errorf("consume %s: %w", cfg.Durable, err)
	}
	log.Info("consumer started", "types", cfg.Types, "run", cfg.RunID)
	<-ctx.Done()
	draining.Store(true)

	log.Info("consumer draining")
	cc.Drain()
	timer := time.NewTimer(cfg.DrainTimeout)
	defer timer.Stop()
	select {
	case <-cc.Closed():
	case <-timer.C:
		log.Warn("drain timed out; cancelling handlers", "timeout", cfg.DrainTimeout)
		hcancel()
		cc.Stop()
		<-cc.Closed()
	}
	done := make(chan struct{})
	go func() {
		if sh != nil {
			sh.wait()
		}
		close(done)
	}()
	select {
	case <-done:
	case <-timer.C:
		log.Warn("drain timed out; cancelling handlers", "timeout", cfg.DrainTimeout)
		hcancel()
		<-done
	}
	log.Info("consumer stopped")
	return nil
}

func (b *Bus) ensureConsumer(ctx context.Context, cfg ConsumerConfig) (jetstream.Consumer, error) {
	filters, err := cfg.filters()
	if err != nil {
		return nil, err
	}
	jc := jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    -1, // bounded by the client so poison messages reach the dead-letter stream
		MaxAckPending: cfg.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
	if cfg.DeliverNew {
		jc.DeliverPolicy = jetstream.DeliverNewPolicy
	}
	if len(filters) == 1 {
		jc.FilterSubject = filters[0]
	} else {
		jc.FilterSubjects = filters
	}
	if existing, err := b.js.Consumer(ctx, StreamName, cfg.Durable); err == nil {
		// Keep the existing start position; update what may change.
		jc.DeliverPolicy = existing.CachedInfo().Config.DeliverPolicy
		jc.OptStartSeq = existing.CachedInfo().Config.OptStartSeq
		jc.OptStartTime = existing.CachedInfo().Config.OptStartTime
	}
	// During a leader election or a restart the API may time out: retry
	// until ctx ends rather than fail the component.
	for attempt := 1; ; attempt++ {
		cons, err := b.js.CreateOrUpdateConsumer(ctx, StreamName, jc)
		if err == nil {
			return cons, nil
		}
		if !retryable(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("create consumer %s on %s: %w", cfg.Durable, StreamName, err)
		}
		b.log.Warn("create consumer: retrying", "consumer", cfg.Durable, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("create consumer %s on %s: %w", cfg.Durable, StreamName, ctx.Err())
		case <-time.After(backoff(attempt)):
		}
	}
}

// handle processes one delivery; m is the delivery already read by
// newMessage, or nil.
func (b *Bus) handle(ctx context.Context, log interface {
	Warn(string, ...any)
	Error(string, ...any)
}, cfg *ConsumerConfig, jm jetstream.Msg, m *Message, h Handler, draining *atomic.Bool) {
	if m == nil {
		m = newMessage(jm)
	}
	if m.metaErr != nil {
		log.Error("message without metadata", "subject", jm.Subject(), "err", m.metaErr)
		_ = jm.Term()
		return
	}
	if m.Delivered > uint64(cfg.MaxDeliver) {
		b.deadLetter(ctx, log, cfg, m, fmt.Sprintf("delivered %d times without success (max %d)", m.Delivered, cfg.MaxDeliver))
		return
	}
	if m.envErr != nil {
		b.deadLetter(ctx, log, cfg, m, m.envErr.Error())
		return
	}
	if !cfg.wants(m.Event.Type) {
		// An outside event of a type the consumer does not take: its
		// subject is shared by every outside type (ExtArea).
		_ = jm.Ack()
		return
	}
	ev := m.Event
	herr := b.runHandler(ctx, cfg, m, h)
	switch {
	case herr == nil:
		var err error
		if draining != nil && draining.Load() {
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			err = jm.DoubleAck(actx)
			cancel()
		} else {
			err = jm.Ack()
		}
		if err != nil {
			log.Warn("ack", "seq", m.Sequence, "err", err)
		}
	case IsPermanent(herr):
		b.deadLetter(ctx, log, cfg, m, herr.Error())
	case m.Delivered >= uint64(cfg.MaxDeliver):
		b.deadLetter(ctx, log, cfg, m, fmt.Sprintf("failed %d times, last error: %v", m.Delivered, herr))
	default:
		delay := cfg.Backoff[min(int(m.Delivered)-1, len(cfg.Backoff)-1)]
		log.Warn("handler failed; will redeliver", "type", ev.Type, "id", ev.ID, "run", ev.RunID,
			"delivery", m.Delivered, "retry_in", delay, "err", herr)
		if err := jm.NakWithDelay(delay); err != nil {
			log.Warn("nak", "seq", m.Sequence, "err", err)
		}
	}
}

// newMessage reads a delivery's metadata and envelope; what is wrong with
// them is kept in metaErr and envErr for handle to deal with.
func newMessage(jm jetstream.Msg) *Message {
	m := &Message{Raw: jm.Data(), Subject: jm.Subject(), msg: jm}
	meta, err := jm.Metadata()
	if err != nil {
		m.metaErr = err
		return m
	}
	m.Sequence, m.Delivered, m.Stored = meta.Sequence.Stream, meta.NumDelivered, meta.Timestamp
	ev, err := ParseStoredMsg(m.Subject, jm.Headers(), m.Raw)
	if err != nil {
		m.envErr = err
		return m
	}
	m.Event = ev
	return m
}

// Envelope returns the message's envelope as JSON: Raw as stored for a
// structured-mode message, the event's structured form (Event.Marshal) for
// a binary-mode one, whose stored bytes are its data alone (see
// ParseStoredMsg). Use it where the envelope's bytes are wanted; a
// malformed message has no envelope, and Raw is returned.
func (m *Message) Envelope() ([]byte, error) { return envelopeOf(&m.Event, m.Raw, m.envErr) }

func envelopeOf(ev *Event, raw []byte, perr error) ([]byte, error) {
	if perr != nil || !ev.binary {
		return raw, nil
	}
	return ev.Marshal()
}

// parsed reports whether the message has a valid envelope.
func (m *Message) parsed() bool { return m.metaErr == nil && m.envErr == nil }

// delivery is a message on its way to a handler; m is set when the
// dispatcher already read it (to compute a ShardKey).
type delivery struct {
	jm jetstream.Msg
	m  *Message
}

// sharder runs handlers with at most n at once, handling the deliveries of
// one key one at a time in arrival order. A key with work has one goroutine
// (started on its first delivery, ending when its queue is empty) that
// takes a slot per delivery; the dispatcher never blocks, so a busy key
// cannot hold up the others. The server's MaxAckPending bounds the queues.
type sharder struct {
	slots  chan struct{}
	handle func(delivery)

	mu     sync.Mutex
	queues map[string][]delivery // key → deliveries not yet handled, the first in progress
	wg     sync.WaitGroup
}

func newSharder(n int, handle func(delivery)) *sharder {
	return &sharder{slots: make(chan struct{}, n), handle: handle, queues: map[string][]delivery{}}
}

func (s *sharder) dispatch(key string, d delivery) {
	s.mu.Lock()
	q, busy := s.queues[key]
	s.queues[key] = append(q, d)
	s.mu.Unlock()
	if busy {
		return // the key's goroutine takes it in turn
	}
	s.wg.Add(1)
	go s.drain(key)
}

// drain handles the key's deliveries until its queue is empty.
func (s *sharder) drain(key string) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		d := s.queues[key][0]
		s.mu.Unlock()
		s.slots <- struct{}{}
		s.handle(d)
		<-s.slots
		s.mu.Lock()
		q := s.queues[key]
		if len(q) == 1 {
			delete(s.queues, key)
			s.mu.Unlock()
			return
		}
		q[0] = delivery{}
		s.queues[key] = q[1:]
		s.mu.Unlock()
	}
}

// wait returns when every dispatched delivery has been handled.
func (s *sharder) wait() { s.wg.Wait() }

// ParseStored decodes and validates an envelope stored on subject. The
// envelope must name the run and type the subject does: publish
// permissions are per subject, so an identity allowed only
// vera.run.*.ext.> must not get a vera.tool.finished believed by putting
// that type in the envelope.
//
// An envelope without VERA's runid extension (absent, null or empty: a
// plain CloudEvent from an outside tool) belongs to the run its subject
// names: RunID is taken from the subject, and so is Subject when the
// envelope has none. The rules stay the same: the type must be the
// subject's, and a subject attribute that is present must name the
// subject's run. The returned Event has both set, so to its reader it is
// an ordinary event of that run (its Raw bytes are unchanged).
func ParseStored(subject string, raw []byte) (Event, error) {
	var e Event
	if err := decodeEnvelope(raw, &e); err != nil {
		return Event{}, fmt.Errorf("%w: not a JSON envelope: %v", ErrInvalidEvent, err)
	}
	e.checked = e.Data
	return finishStored(subject, e)
}

// ParseStoredMsg is ParseStored for a NATS message with its headers, in
// either mode of the CloudEvents NATS protocol binding. A message whose
// headers carry ce-specversion (and whose Content-Type is not a structured
// CloudEvents type such as application/cloudevents+json) is in binary
// mode, as the CloudEvents SDKs publish by default: its attributes are the
// ce-<name> headers (ce-id, ce-type, ce-runid, …; datacontenttype may also
// be the Content-Type header) and raw is its data alone. It reads as the
// structured event with the same attributes would: JSON data
// (datacontenttype absent, application/json or a +json type) in Data,
// other data in DataBase64. Any other message is a structured envelope,
// read by ParseStored. The rules are ParseStored's either way: the event
// must name the run and type of subject, and a missing runid is taken from
// subject. Header names are matched case-insensitively.
//
// The event's Binary method tells which mode it was read from: the stored
// bytes of a binary-mode event are not its envelope; e.Marshal() is.
func ParseStoredMsg(subject string, header nats.Header, raw []byte) (Event, error) {
	if !binaryMode(header) {
		return ParseStored(subject, raw)
	}
	var e Event
	if err := e.readBinary(header, raw); err != nil {
		return Event{}, fmt.Errorf("%w: binary-mode CloudEvent: %v", ErrInvalidEvent, err)
	}
	return finishStored(subject, e)
}

// binaryMode reports whether a message with header is a binary-mode
// CloudEvent: it has a ce-specversion header and no structured-mode
// Content-Type (application/cloudevents…).
func binaryMode(header nats.Header) bool {
	if len(header) == 0 {
		return false
	}
	// VERA's own messages first, by exact name: structured, marked.
	if v := header[HeaderContentType]; len(v) > 0 && structuredContentType(v[0]) {
		return false
	}
	spec := false
	for k, v := range header {
		switch {
		case len(v) == 0:
		case len(k) == len("ce-specversion") && strings.EqualFold(k, "ce-specversion"):
			spec = spec || v[0] != ""
		case len(k) == len(HeaderContentType) && strings.EqualFold(k, HeaderContentType):
			if structuredContentType(v[0]) {
				return false
			}
		}
	}
	return spec
}

// ceHeaders returns the headers that carry a binary-mode CloudEvent (ce-*
// and Content-Type, as stored), or nil when header is not one's. Export
// keeps them with a malformed binary-mode message, so that its import
// stores the message as it was.
func ceHeaders(header nats.Header) nats.Header {
	if !binaryMode(header) {
		return nil
	}
	out := nats.Header{}
	for k, v := range header {
		if len(k) > 3 && strings.EqualFold(k[:3], "ce-") || strings.EqualFold(k, HeaderContentType) {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

// structuredContentType reports whether a Content-Type names a structured
// CloudEvent (application/cloudevents, application/cloudevents+json, …).
func structuredContentType(ct string) bool {
	const prefix = "application/cloudevents"
	ct = strings.TrimLeft(ct, " \t")
	return len(ct) >= len(prefix) && strings.EqualFold(ct[:len(prefix)], prefix)
}

// readBinary fills e from a binary-mode message's headers and data.
func (e *Event) readBinary(header nats.Header, data []byte) error {
	*e = Event{binary: true}
	contentType := ""
	for k, v := range header {
		if len(v) == 0 {
			continue
		}
		val := v[0]
		if strings.EqualFold(k, HeaderContentType) {
			contentType = val
			continue
		}
		if len(k) <= 3 || !strings.EqualFold(k[:3], "ce-") {
			continue
		}
		name := strings.ToLower(k[3:])
		if dst := e.stringAttr(name); dst != nil {
			*dst = val
		} else if name == "time" {
			t, err := time.Parse(time.RFC3339Nano, val)
			if err != nil {
				return fmt.Errorf("ce-time: %v", err)
			}
			e.Time = t
		}
		// Other extension attributes are allowed and ignored, as in
		// structured mode.
	}
	if e.DataContentType == "" {
		e.DataContentType = contentType
	}
	if len(data) == 0 {
		return nil
	}
	if jsonMediaType(e.DataContentType) {
		// Validate checks it is JSON (it reports "data is not valid JSON").
		if string(data) != "null" { // as "data": null in structured mode
			e.Data = json.RawMessage(data)
		}
	} else {
		e.DataBase64 = data
	}
	return nil
}

// jsonMediaType reports whether a datacontenttype means JSON data: absent
// (CloudEvents' default for the JSON format), application/json, text/json
// or any type with the +json suffix, parameters ignored.
func jsonMediaType(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "" || mt == ContentTypeJSON || mt == "text/json" || strings.HasSuffix(mt, "+json")
}

// finishStored completes and checks an event read from subject with
// ParseStored's rules: runid from the subject when absent, a valid
// envelope (else the partial event and why), naming the subject's run and
// type (else no event).
func finishStored(subject string, e Event) (Event, error) {
	if e.RunID == "" {
		if run, _, err := ParseSubject(subject); err == nil {
			e.RunID, e.runFromSubject = run, true
			if e.Subject == "" {
				e.Subject = run
			}
		}
	}
	if err := e.Validate(); err != nil {
		return e, err
	}
	if !subjectMatches(subject, &e) {
		return Event{}, fmt.Errorf("%w: envelope (run %q, type %q) does not match subject %q", ErrInvalidEvent, e.RunID, e.Type, subject)
	}
	return e, nil
}

// subjectMatches reports whether subject is vera.run.<RunID>.<Type without
// "vera.">, without allocating; an outside event (a vera.ext.* type) is
// stored on vera.run.<RunID>.ext.<identity> (see ExtInRoot), whatever its
// type.
func subjectMatches(subject string, ev *Event) bool {
	rest, ok := strings.CutPrefix(subject, SubjectRoot+".")
	if !ok {
		return false
	}
	rest, ok = strings.CutPrefix(rest, ev.RunID)
	if !ok || len(rest) == 0 || rest[0] != '.' {
		return false
	}
	typ, ok := strings.CutPrefix(ev.Type, "vera.")
	if ok && isExtType(ev.Type) {
		area, _, _ := strings.Cut(rest[1:], ".")
		return area == ExtArea
	}
	return ok && rest[1:] == typ
}

// runHandler calls h, keeping the message alive with InProgress while it
// runs and turning a panic into a permanent error.
func (b *Bus) runHandler(ctx context.Context, cfg *ConsumerConfig, m *Message, h Handler) (err error) {
	// A self-rearming timer (no goroutine until it fires) keeps the message
	// in progress while the handler runs past a third of AckWait.
	every := max(cfg.AckWait/3, 10*time.Millisecond)
	var mu sync.Mutex
	stopped := false
	var beat *time.Timer
	mu.Lock() // the callback may fire before beat is assigned
	beat = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		_ = m.msg.InProgress()
		beat.Reset(every)
	})
	mu.Unlock()
	defer func() {
		mu.Lock()
		stopped = true
		beat.Stop()
		mu.Unlock()
		if r := recover(); r != nil {
			err = Permanent(fmt.Errorf("handler panic: %v\n%s", r, debug.Stack()))
		}
	}()
	return h(ctx, m)
}

// DeadLetter is the record stored on vera.dlq.<consumer>.<run_id> for every
// message a consumer rejected.
type DeadLetter struct {
	Reason     string          `json:"reason"`
	Consumer   string          `json:"consumer"`
	Stream     string          `json:"stream"`
	Sequence   uint64          `json:"sequence"`
	Subject    string          `json:"subject"`
	Deliveries uint64          `json:"deliveries"`
	Time       time.Time       `json:"time"`
	EventID    string          `json:"event_id,omitempty"`
	EventType  string          `json:"event_type,omitempty"`
	RunID      string          `json:"run_id,omitempty"`
	Data       json.RawMessage `json:"data,omitempty"`        // the message, when it is JSON
	DataBase64 []byte          `json:"data_base64,omitempty"` // the message, when it is not, or its first DeadLetterCopyMax bytes
	// Size is the message's size; Truncated says the copy holds only its
	// first DeadLetterCopyMax bytes (the message stays in its stream at
	// Sequence).
	Size      int  `json:"size,omitempty"`
	Truncated bool `json:"truncated,omitempty"`
}

func (b *Bus) deadLetter(ctx context.Context, log interface {
	Warn(string, ...any)
	Error(string, ...any)
}, cfg *ConsumerConfig, m *Message, reason string) {
	dl := DeadLetter{
		Reason:     reason,
		Consumer:   cfg.Durable,
		Stream:     StreamName,
		Sequence:   m.Sequence,
		Subject:    m.Subject,
		Deliveries: m.Delivered,
		Time:       b.opts.Clock.Now().UTC(),
		EventID:    m.Event.ID,
		EventType:  m.Event.Type,
		RunID:      m.Event.RunID,
	}
	if dl.RunID == "" {
		dl.RunID, _, _ = ParseSubject(m.Subject)
	}
	dl.Size = len(m.Raw)
	switch {
	case len(m.Raw) > DeadLetterCopyMax:
		// A dead letter is a pointer with a sample: garbage that fills a
		// stream must not fill the dead letters with as much again.
		dl.DataBase64, dl.Truncated = m.Raw[:DeadLetterCopyMax], true
	case json.Valid(m.Raw):
		dl.Data = m.Raw
	default:
		dl.DataBase64 = m.Raw
	}
	data, err := json.Marshal(dl)
	if err == nil {
		msg := &nats.Msg{Subject: deadLetterSubject(cfg.Durable, dl.RunID), Data: data, Header: nats.Header{}}
		// One dead letter per consumer and stream sequence, even if we crash
		// between publishing it and terminating the message.
		id := fmt.Sprintf("dlq-%s-%d", cfg.Durable, m.Sequence)
		_, err = b.publishMsg(ctx, msg, id, publishOptions{})
	}
	if err != nil {
		// Leave the message unacknowledged: it comes back after AckWait and
		// we try again, so nothing vanishes.
		log.Error("dead-letter publish failed; message will be redelivered", "seq", m.Sequence, "reason", reason, "err", err)
		return
	}
	log.Warn("dead-lettered", "seq", m.Sequence, "subject", m.Subject, "reason", reason)
	if err := m.msg.TermWithReason(truncate(reason, 200)); err != nil {
		log.Warn("term", "seq", m.Sequence, "err", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ConsumerDrained reports whether the durable consumer exists and has
// handled every event it was given: nothing pending, nothing awaiting its
// ack. (A component in the same process has caught up, e.g. before a
// one-shot command stops it.)
func (b *Bus) ConsumerDrained(ctx context.Context, durable string) (bool, error) {
	c, err := b.js.Consumer(ctx, StreamName, durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("consumer %s: %w", durable, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("consumer %s: %w", durable, err)
	}
	return info.NumPending == 0 && info.NumAckPending == 0, nil
}
