package bustest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
)

// Synth builds a deterministic synthetic run for tests: event ids and
// times come from the event's index (one event every 1.5 ms from T0), and
// each event is caused by the one before, so the same calls give the same
// bytes in every process.
type Synth struct {
	TB    testing.TB
	RunID string
	T0    time.Time
	Evs   []bus.Event
}

// Add appends an event of p from source.
func (s *Synth) Add(source string, p bus.Payload) {
	s.TB.Helper()
	i := len(s.Evs)
	t := s.T0.Add(time.Duration(i) * 1500 * time.Microsecond)
	data, err := json.Marshal(p)
	if err != nil {
		s.TB.Fatal(err)
	}
	ev := bus.Event{
		SpecVersion: bus.SpecVersion, ID: bus.KeyedID(t, fmt.Sprintf("%s/%d", s.RunID, i)),
		Source: source, Type: p.EventType(), Subject: s.RunID, RunID: s.RunID, Time: t,
		DataContentType: bus.ContentTypeJSON, DataSchema: bus.DataSchemaOf(p.EventType()),
		Traceparent: bus.Traceparent(s.RunID), Data: data,
	}
	if i > 0 {
		ev.CausationID = s.Evs[i-1].ID
	}
	if err := ev.Validate(); err != nil {
		s.TB.Fatal(err)
	}
	s.Evs = append(s.Evs, ev)
}
