package bus

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/oklog/ulid/v2"
)

// A run's trace is a projection of its events, so its ids are functions of
// the run and of the events alone: exporting a run twice, from any process,
// at any time, gives the same trace and span ids, and any publisher can
// name the run's trace without asking anyone.

// TraceID returns the W3C trace id of run runID: the 16 bytes of the run
// id when it is a ULID (a ULID is 128 bits, like a trace id, so the trace
// id reads as the run id in hex), else the first 16 bytes of the SHA-256
// of "vera-trace\x00" + runID. It is never all zeros.
func TraceID(runID string) [16]byte {
	if u, err := ulid.ParseStrict(runID); err == nil && u != (ulid.ULID{}) {
		return u
	}
	sum := sha256.Sum256([]byte("vera-trace\x00" + runID))
	var id [16]byte
	copy(id[:], sum[:16])
	if id == ([16]byte{}) {
		id[15] = 1
	}
	return id
}

// SpanID returns the span id of the span that the event with id eventID
// opens in run runID (and of the span event it becomes): the first 8 bytes
// of the SHA-256 of "vera-span\x00" + runID + "\x00" + eventID, never all
// zeros. The run is part of the hash because event ids are unique only
// within a run.
func SpanID(runID, eventID string) [8]byte {
	return spanID("vera-span\x00" + runID + "\x00" + eventID)
}

// RootSpanID returns the span id of run runID's root span (the run as one
// invoke_agent operation), derived from the run id alone so that every
// event of the run can name it in its traceparent.
func RootSpanID(runID string) [8]byte {
	return spanID("vera-root\x00" + runID)
}

func spanID(key string) [8]byte {
	sum := sha256.Sum256([]byte(key))
	var id [8]byte
	copy(id[:], sum[:8])
	if id == ([8]byte{}) {
		id[7] = 1
	}
	return id
}

// Traceparent returns the W3C Trace Context traceparent of run runID's
// events ("00-<trace id>-<root span id>-01"): the run's trace, with the
// run's root span as the parent, sampled. VERA puts it on its own events
// (the CloudEvents Distributed Tracing extension), so an outside tool that
// reacts to an event can put its own spans in the run's trace.
func Traceparent(runID string) string {
	tid, sid := TraceID(runID), RootSpanID(runID)
	b := make([]byte, 0, 55)
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, tid[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sid[:])
	b = append(b, "-01"...)
	return string(b)
}
