package bus

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"strings"
)

// ExportEvents are the contents of an export file as events.
type ExportEvents struct {
	Runs  map[string][]Event // each run's events in file (stream) order
	Order []string           // the runs in the order they first appear
	Blobs map[string][]byte  // the blobs' bytes by digest
}

// ReadExportEvents reads a `vera events export` file (see Export): its
// events grouped by run, and its blob lines' bytes by digest. A
// vera.bus.raw line counts when the message it carries is a valid event (an
// outside event without runid) and is skipped when it is malformed. A line
// that is not a valid envelope is an error naming its number.
func ReadExportEvents(r io.Reader) (ExportEvents, error) {
	x := ExportEvents{Runs: map[string][]Event{}, Blobs: map[string][]byte{}}
	runs := x.Runs
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if strings.TrimSpace(string(line)) == "" {
			continue
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return ExportEvents{}, fmt.Errorf("line %d: not an event envelope: %w", n, err)
		}
		switch ev.Type {
		case BlobType:
			x.Blobs[Digest(ev.DataBase64)] = ev.DataBase64
			continue
		case RawType:
			var d RawData
			if json.Unmarshal(ev.Data, &d) != nil || d.Malformed != "" {
				continue
			}
			inner, err := ParseStoredMsg(SubjectRoot+"."+ev.RunID+"."+d.SubjectTail, d.Header, d.Raw)
			if err != nil {
				continue
			}
			ev = inner
		}
		if err := ev.Validate(); err != nil {
			return ExportEvents{}, fmt.Errorf("line %d: %w", n, err)
		}
		if _, ok := runs[ev.RunID]; !ok {
			x.Order = append(x.Order, ev.RunID)
		}
		runs[ev.RunID] = append(runs[ev.RunID], ev)
	}
	if err := sc.Err(); err != nil {
		return ExportEvents{}, err
	}
	return x, nil
}

// ValidEvents yields the valid events a Read yields, in stream order: a
// stored message that is not a valid event (Record.Err) is skipped, and a
// read error is yielded and ends the sequence.
func ValidEvents(records iter.Seq2[Record, error]) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for rec, err := range records {
			if err != nil {
				yield(Event{}, err)
				return
			}
			if rec.Err != nil {
				continue
			}
			if !yield(rec.Event, nil) {
				return
			}
		}
	}
}
