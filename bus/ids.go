package bus

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
)

// Clock tells the time. Components take one so that tests and replays can
// fix it.
type Clock interface{ Now() time.Time }

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns time.Now in UTC.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// ClockFunc adapts a function to Clock.
type ClockFunc func() time.Time

// Now calls f.
func (f ClockFunc) Now() time.Time { return f() }

// IDSource makes event ids. Ids must be unique and sort in creation order.
type IDSource interface{ NewID(t time.Time) string }

// ULIDSource makes monotonic ULIDs: ids made in the same millisecond still
// sort in creation order. It is safe for concurrent use.
type ULIDSource struct {
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// NewULIDSource returns a ULID source reading randomness from r, or from
// crypto/rand when r is nil. A seeded r makes the ids reproducible.
func NewULIDSource(r io.Reader) *ULIDSource {
	if r == nil {
		r = rand.Reader
	}
	return &ULIDSource{entropy: ulid.Monotonic(r, 0)}
}

// NewID returns a ULID for time t.
func (s *ULIDSource) NewID(t time.Time) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(t), s.entropy).String()
}

// DeriveID returns the id of a reaction, in run runID, to the event
// causeID: a ULID with the cause's timestamp whose entropy is a hash of the
// run, the cause and purpose. A retried or replayed reaction therefore gets
// the same id, and the stream's deduplication drops the second copy; the
// same cause id in two runs (an outside tool that reuses ids) gives two
// different ids, so one run's reaction never hides the other's.
func DeriveID(runID, causeID, purpose string) string {
	var ms uint64
	if u, err := ulid.ParseStrict(causeID); err == nil {
		ms = u.Time()
	}
	sum := sha256.Sum256([]byte(runID + "\x00" + causeID + "\x00" + purpose))
	var id ulid.ULID
	if err := id.SetTime(ms); err != nil {
		panic(fmt.Sprintf("derive id: %v", err)) // ms comes from a valid ULID, so it fits
	}
	if err := id.SetEntropy(sum[:10]); err != nil {
		panic(fmt.Sprintf("derive id: %v", err))
	}
	return id.String()
}

// KeyedID returns a ULID for time t whose entropy is a hash of key: the id
// of an event that mirrors an outside fact (a Docker event, a log line), so
// that observing the fact again after a restart yields the same id.
func KeyedID(t time.Time, key string) string {
	sum := sha256.Sum256([]byte(key))
	var id ulid.ULID
	ms := ulid.Timestamp(t)
	if ms > ulid.MaxTime() {
		ms = ulid.MaxTime()
	}
	if err := id.SetTime(ms); err != nil {
		panic(fmt.Sprintf("keyed id: %v", err))
	}
	if err := id.SetEntropy(sum[:10]); err != nil {
		panic(fmt.Sprintf("keyed id: %v", err))
	}
	return id.String()
}

// dataSchemas maps a catalogued type to its dataschema URL (the $id of its
// JSON Schema). Package catalog fills it in its init (RegisterDataSchema):
// bus cannot import catalog, which imports bus.
var dataSchemas sync.Map // type → URL

// RegisterDataSchema records url as the dataschema of events of type typ:
// the Factory puts it on every event of that type it builds. Package
// catalog registers each catalogued type's schema $id
// (https://vera.dev/schemas/<type>.json); other types (vera.ext.*) get none
// from the factory. Safe for concurrent use; meant for init functions.
func RegisterDataSchema(typ, url string) { dataSchemas.Store(typ, url) }

// DataSchemaOf returns the dataschema registered for typ, or "".
func DataSchemaOf(typ string) string {
	if v, ok := dataSchemas.Load(typ); ok {
		return v.(string)
	}
	return ""
}

// Factory builds envelopes for one component: it stamps the source, the
// time, a fresh id, the run's traceparent (Traceparent) and, for a
// catalogued type, its dataschema.
type Factory struct {
	Source string   // component name, e.g. "sandboxd"
	Clock  Clock    // defaults to SystemClock
	IDs    IDSource // defaults to a crypto-random ULIDSource
	once   sync.Once
	// trace caches the traceparent of the last run built for: a component
	// builds many events of one run in a row.
	trace atomic.Pointer[runTrace]
}

type runTrace struct{ run, traceparent string }

// traceparent returns Traceparent(runID), cached for the last run.
func (f *Factory) traceparent(runID string) string {
	if t := f.trace.Load(); t != nil && t.run == runID {
		return t.traceparent
	}
	if !validRunID(runID) {
		return "" // the event is refused by Validate anyway
	}
	tp := Traceparent(runID)
	f.trace.Store(&runTrace{run: runID, traceparent: tp})
	return tp
}

// EventOption adjusts an envelope while it is built.
type EventOption func(*Event)

// WithID sets the event id (for example one made by DeriveID).
func WithID(id string) EventOption { return func(e *Event) { e.ID = id } }

// WithTime sets the event time.
func WithTime(t time.Time) EventOption { return func(e *Event) { e.Time = t.UTC() } }

// CausedBy records cause as the event's cause (causationid).
func CausedBy(cause Event) EventOption { return func(e *Event) { e.CausationID = cause.ID } }

// ReactionTo records cause and derives the id from it and purpose, so that
// reacting twice to one event yields one stored event.
func ReactionTo(cause Event, purpose string) EventOption {
	return func(e *Event) {
		e.CausationID = cause.ID
		e.ID = DeriveID(cause.RunID, cause.ID, purpose)
	}
}

func (f *Factory) defaults() {
	f.once.Do(func() {
		if f.Clock == nil {
			f.Clock = SystemClock{}
		}
		if f.IDs == nil {
			f.IDs = NewULIDSource(nil)
		}
	})
}

// New builds an event of p's type about run runID.
func (f *Factory) New(runID string, p Payload, opts ...EventOption) (Event, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return Event{}, fmt.Errorf("encode %s data: %w", p.EventType(), err)
	}
	return f.build(runID, p.EventType(), data, true, opts)
}

// NewRaw builds an event from already-encoded JSON data (nil for none).
func (f *Factory) NewRaw(runID, typ string, data json.RawMessage, opts ...EventOption) (Event, error) {
	return f.build(runID, typ, data, false, opts)
}

func (f *Factory) build(runID, typ string, data json.RawMessage, trusted bool, opts []EventOption) (Event, error) {
	f.defaults()
	now := f.Clock.Now().UTC()
	e := Event{
		SpecVersion:     SpecVersion,
		Source:          f.Source,
		Type:            typ,
		Subject:         runID,
		RunID:           runID,
		Time:            now,
		DataContentType: ContentTypeJSON,
		DataSchema:      DataSchemaOf(typ),
		Traceparent:     f.traceparent(runID),
		Data:            data,
	}
	if trusted {
		e.checked = data
	}
	for _, o := range opts {
		o(&e)
	}
	if e.ID == "" {
		e.ID = f.IDs.NewID(e.Time)
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}
