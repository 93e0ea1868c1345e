package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CloudEvents constants used by every VERA event.
const (
	SpecVersion     = "1.0"
	ContentTypeJSON = "application/json"
	// ContentTypeCloudEvents is the media type of a structured-mode
	// CloudEvent in the JSON event format: every message the bus publishes
	// as an event carries it as its Content-Type header (HeaderContentType),
	// the NATS protocol binding's marker of structured mode.
	ContentTypeCloudEvents = "application/cloudevents+json"
	// HeaderContentType is the NATS header of the content type, spelled as
	// the CloudEvents NATS protocol binding spells it. Readers match it
	// (and the ce- headers of binary mode) case-insensitively: the
	// CloudEvents Go SDK writes and reads "content-type".
	HeaderContentType = "Content-Type"
	// SchemaURLPrefix and SchemaURLSuffix frame the dataschema of a
	// catalogue type: https://vera.dev/schemas/<type>.json, the $id of the
	// type's JSON Schema.
	SchemaURLPrefix = "https://vera.dev/schemas/"
	SchemaURLSuffix = ".json"
)

// Event is one CloudEvents 1.0 event in structured-mode JSON. RunID and
// CausationID are VERA's extension attributes (runid, causationid);
// Traceparent and Tracestate are the CloudEvents Distributed Tracing
// extension's (W3C Trace Context).
type Event struct {
	SpecVersion     string          `json:"specversion"`
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Type            string          `json:"type"`
	Subject         string          `json:"subject"`
	Time            time.Time       `json:"time"`
	DataContentType string          `json:"datacontenttype,omitempty"`
	DataSchema      string          `json:"dataschema,omitempty"`
	RunID           string          `json:"runid"`
	CausationID     string          `json:"causationid,omitempty"`
	Traceparent     string          `json:"traceparent,omitempty"`
	Tracestate      string          `json:"tracestate,omitempty"`
	Data            json.RawMessage `json:"data,omitempty"`
	DataBase64      []byte          `json:"data_base64,omitempty"`

	// checked is the Data slice last known to be valid JSON (decoded or
	// marshalled by us), so Validate need not scan it again. Replacing Data
	// makes it stale, and the check runs.
	checked json.RawMessage
	// runFromSubject is set by ParseStored when the stored envelope had no
	// runid and RunID was taken from its NATS subject: its bytes alone do
	// not name the run (Export then writes them in a vera.bus.raw line).
	runFromSubject bool
	// binary is set by ParseStoredMsg when the message was stored in the
	// CloudEvents binary mode (attributes in ce- headers, the body only the
	// data): its stored bytes are not an envelope (see Binary).
	binary bool
}

// Binary reports whether the event was read from a message stored in the
// CloudEvents binary mode (an outside tool's, see ParseStoredMsg): the
// stored bytes are its data alone, and its envelope is e.Marshal().
func (e *Event) Binary() bool { return e.binary }

// Payload is implemented by every catalogue data type: it names the event
// type the data belongs to.
type Payload interface{ EventType() string }

// Errors returned when an event or a name is not well formed.
var (
	ErrInvalidEvent = errors.New("invalid event")
	ErrInvalidRunID = errors.New("invalid run id")
	ErrInvalidType  = errors.New("invalid event type")
)

// ValidateRunID reports whether id can name a run: 1–128 characters of
// letters, digits, '_' and '-', so that it is one NATS subject token.
func ValidateRunID(id string) error {
	if !validRunID(id) {
		return fmt.Errorf("%w %q: use 1-128 letters, digits, '_' or '-'", ErrInvalidRunID, id)
	}
	return nil
}

// ValidateType reports whether typ is a VERA event type:
// vera.<area>.<event>[.<more>], each part lowercase [a-z][a-z0-9_]*.
func ValidateType(typ string) error {
	if !validType(typ) {
		return fmt.Errorf("%w %q: want vera.<area>.<event> in lowercase letters, digits and '_'", ErrInvalidType, typ)
	}
	return nil
}

func validRunID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validType checks vera(\.[a-z][a-z0-9_]*){2,}.
func validType(typ string) bool {
	rest, ok := strings.CutPrefix(typ, "vera.")
	if !ok {
		return false
	}
	tokens := 0
	for {
		tok, more, found := strings.Cut(rest, ".")
		if !typeTokenOK(tok) {
			return false
		}
		tokens++
		if !found {
			break
		}
		rest = more
	}
	return tokens >= 2
}

// Validate checks that e is a complete VERA envelope.
func (e *Event) Validate() error {
	var problems []string
	if e.SpecVersion != SpecVersion {
		problems = append(problems, fmt.Sprintf("specversion %q is not %q", e.SpecVersion, SpecVersion))
	}
	if e.ID == "" {
		problems = append(problems, "id is empty")
	}
	if e.Source == "" {
		problems = append(problems, "source is empty")
	}
	if err := ValidateType(e.Type); err != nil {
		problems = append(problems, err.Error())
	}
	if err := ValidateRunID(e.RunID); err != nil {
		problems = append(problems, "runid: "+err.Error())
	} else if e.Subject != e.RunID {
		problems = append(problems, fmt.Sprintf("subject %q differs from runid %q", e.Subject, e.RunID))
	}
	if e.Time.IsZero() {
		problems = append(problems, "time is missing")
	}
	if e.DataSchema != "" && !absoluteURI(e.DataSchema) {
		problems = append(problems, fmt.Sprintf("dataschema %q is not an absolute URI", e.DataSchema))
	}
	if e.Traceparent != "" && !validTraceparent(e.Traceparent) {
		problems = append(problems, fmt.Sprintf("traceparent %q is not a W3C traceparent (00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all zero)", e.Traceparent))
	}
	if len(e.Data) > 0 && len(e.DataBase64) > 0 {
		problems = append(problems, "both data and data_base64 are set")
	}
	if len(e.Data) > 0 && !e.dataKnownValid() && !json.Valid(e.Data) {
		problems = append(problems, "data is not valid JSON")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidEvent, strings.Join(problems, "; "))
	}
	return nil
}

// absoluteURI reports whether s is an absolute URI (RFC 3986): a scheme
// (a letter, then letters, digits, '+', '-' or '.'), ':', and a rest
// without spaces or control characters. It does not allocate.
func absoluteURI(s string) bool {
	colon := strings.IndexByte(s, ':')
	if colon < 1 || colon == len(s)-1 {
		return false
	}
	for i := 0; i < colon; i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	for i := colon + 1; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// validTraceparent checks the W3C Trace Context traceparent of version 00:
// 00-<32 lowercase hex trace id>-<16 lowercase hex parent id>-<2 hex
// flags>, neither id all zeros.
func validTraceparent(s string) bool {
	if len(s) != 55 || s[0] != '0' || s[1] != '0' || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return false
	}
	var trace, parent byte // OR of the ids' digits: zero when all are '0'
	for i := 3; i < 55; i++ {
		if i == 35 || i == 52 {
			continue
		}
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
		switch {
		case i < 35:
			trace |= c - '0'
		case i < 52:
			parent |= c - '0'
		}
	}
	return trace != 0 && parent != 0
}

func (e *Event) dataKnownValid() bool {
	return len(e.checked) == len(e.Data) && len(e.Data) > 0 && &e.checked[0] == &e.Data[0]
}

// NATSSubject is the subject the event is stored on.
func (e *Event) NATSSubject() (string, error) { return Subject(e.RunID, e.Type) }

// DecodeData unmarshals the event's JSON data into v.
func (e *Event) DecodeData(v any) error {
	if len(e.Data) == 0 {
		return fmt.Errorf("decode %s %s: event has no JSON data", e.Type, e.ID)
	}
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("decode %s %s: %w", e.Type, e.ID, err)
	}
	return nil
}

// Marshal encodes e as compact single-line JSON (the stored form).
func (e *Event) Marshal() ([]byte, error) { return e.MarshalJSON() }

// ParseEvent decodes and validates one envelope on its own, without the
// subject it was stored on (a line of an export file): it must carry the
// runid extension, as nothing else names its run. Use ParseStored for a
// message read from the stream.
func ParseEvent(raw []byte) (Event, error) {
	var e Event
	if err := decodeEnvelope(raw, &e); err != nil {
		return Event{}, fmt.Errorf("%w: not a JSON envelope: %v", ErrInvalidEvent, err)
	}
	e.checked = e.Data
	if err := e.Validate(); err != nil {
		return e, err
	}
	return e, nil
}
