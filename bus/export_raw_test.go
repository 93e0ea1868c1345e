package bus_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

// outsideEvent is a valid CloudEvent from a tool that knows nothing of
// VERA's runid extension (nor of the subject attribute): the run is named
// only by the NATS subject it is published on.
const outsideEvent = `{"specversion": "1.0", "id": "acme-1", "source": "acme",
 "type": "vera.ext.acme", "time": "2026-11-21T12:00:00Z",
 "datacontenttype": "application/json", "data": {"found": 3}}`

// halfEnvelope is JSON but not a valid envelope.
const halfEnvelope = `{"specversion":"1.0","id":"half-1","data":{"x":1}}`

type storedMsg struct {
	subject string
	raw     []byte
}

// recordMixedRun stores, on run mix: a VERA event, the outside event, a
// message that is not JSON and one that is JSON but no envelope. It
// returns them in stream order.
func recordMixedRun(t *testing.T, b *bus.Bus) []storedMsg {
	t.Helper()
	ctx := ctxT(t)
	ev := mustEvent(t, b, "mix", note{N: 1, Text: "vera"})
	if _, err := b.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	raw, _ := ev.Marshal()
	msgs := []storedMsg{
		{"vera.run.mix.ext.note", raw},
		{"vera.run.mix.ext.acme", []byte(outsideEvent)},
		{"vera.run.mix.ext.junk", []byte("not json\x00\xff")},
		{"vera.run.mix.ext.half", []byte(halfEnvelope)},
	}
	for _, m := range msgs[1:] {
		if _, err := b.JetStream().Publish(ctx, m.subject, m.raw); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

func storedMessages(t *testing.T, b *bus.Bus, run string) []storedMsg {
	t.Helper()
	var out []storedMsg
	for rec, err := range b.Read(ctxT(t), bus.ReadOptions{RunID: run}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, storedMsg{rec.Subject, rec.Raw})
	}
	return out
}

// rawLine is the data of a vera.bus.raw line.
type rawLine struct {
	SubjectTail string `json:"subject_tail"`
	Raw         []byte `json:"raw_base64"`
	Malformed   string `json:"malformed"`
}

// TestOutsideEventWithoutRunIDIsAnEventOfItsSubjectsRun: the run comes from
// the NATS subject when the envelope has no runid.
func TestOutsideEventWithoutRunIDIsAnEventOfItsSubjectsRun(t *testing.T) {
	ev, err := bus.ParseStored("vera.run.mix.ext.acme", []byte(outsideEvent))
	if err != nil {
		t.Fatalf("a valid CloudEvent without runid on its run's subject: %v", err)
	}
	if ev.RunID != "mix" || ev.Subject != "mix" || ev.ID != "acme-1" || ev.Type != "vera.ext.acme" {
		t.Fatalf("parsed %+v", ev)
	}
	// No forging: the type must still match the subject, and a subject
	// attribute, when present, must still name the subject's run.
	forged := strings.Replace(outsideEvent, "vera.ext.acme", "vera.tool.finished", 1)
	if _, err := bus.ParseStored("vera.run.mix.ext.acme", []byte(forged)); !errors.Is(err, bus.ErrInvalidEvent) {
		t.Errorf("a vera.tool.finished on an ext subject: %v", err)
	}
	other := strings.Replace(outsideEvent, `"source"`, `"subject": "victim", "source"`, 1)
	if _, err := bus.ParseStored("vera.run.mix.ext.acme", []byte(other)); !errors.Is(err, bus.ErrInvalidEvent) {
		t.Errorf("a subject attribute naming another run: %v", err)
	}
	if _, err := bus.ParseStored("vera.run.mix", []byte(outsideEvent)); !errors.Is(err, bus.ErrInvalidEvent) {
		t.Errorf("a subject without a type: %v", err)
	}
	// Without a subject there is no run: the bytes alone are no event.
	if _, err := bus.ParseEvent([]byte(outsideEvent)); !errors.Is(err, bus.ErrInvalidEvent) {
		t.Errorf("ParseEvent without runid: %v", err)
	}
}

// TestExportCarriesEveryStoredMessage: a run with a VERA event, an outside
// CloudEvent without runid, a message that is not JSON and a JSON message
// that is no envelope exports as four lines; the outside event is an event
// of the run and the bad ones are marked. Import into a fresh server stores
// all four back, byte for byte on their subjects, and exports the same file.
func TestExportCarriesEveryStoredMessage(t *testing.T) {
	_, src := bustest.New(t)
	want := recordMixedRun(t, src)

	evs, err := src.ReadRun(ctxT(t), "mix")
	if err != nil || len(evs) != 2 || evs[1].ID != "acme-1" || evs[1].RunID != "mix" {
		t.Errorf("ReadRun: %d events (%v), want the VERA event and the outside one", len(evs), err)
	}

	var buf bytes.Buffer
	st, err := src.Export(ctxT(t), &buf, bus.ExportOptions{RunID: "mix"})
	if err != nil {
		t.Fatal(err)
	}
	first := buf.Bytes()
	lines := strings.Split(strings.TrimSuffix(string(first), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("export wrote %d lines, want 4 (stats %+v):\n%s", len(lines), st, first)
	}
	if st.Events != 2 || st.Malformed != 2 || st.Skipped != 0 {
		t.Errorf("export stats %+v, want 2 events and 2 malformed", st)
	}
	if lines[0] != string(want[0].raw) {
		t.Errorf("line 1 is not the VERA event as stored: %s", lines[0])
	}
	for i, l := range lines[1:] {
		ev, err := bus.ParseEvent([]byte(l))
		if err != nil || ev.Type != bus.RawType || ev.RunID != "mix" {
			t.Fatalf("line %d: %v %s", i+2, err, l)
		}
		var d rawLine
		if err := ev.DecodeData(&d); err != nil {
			t.Fatal(err)
		}
		m := want[i+1]
		if "vera.run.mix."+d.SubjectTail != m.subject || !bytes.Equal(d.Raw, m.raw) {
			t.Errorf("line %d carries %q %q, want %q %q", i+2, d.SubjectTail, d.Raw, m.subject, m.raw)
		}
		if malformed := i > 0; malformed != (d.Malformed != "") {
			t.Errorf("line %d: malformed %q", i+2, d.Malformed)
		}
	}

	_, dst := bustest.New(t)
	ist, err := dst.Import(ctxT(t), bytes.NewReader(first), bus.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ist.Imported != 2 || ist.Malformed != 2 || ist.Existing != 0 || len(ist.Bad) != 0 {
		t.Fatalf("import stats %+v", ist)
	}
	got := storedMessages(t, dst, "mix")
	if len(got) != 4 {
		t.Fatalf("the fresh server holds %d messages of the run, want 4", len(got))
	}
	for i := 1; i < 4; i++ {
		if got[i].subject != want[i].subject || !bytes.Equal(got[i].raw, want[i].raw) {
			t.Errorf("message %d stored back as %s %q, want %s %q", i+1, got[i].subject, got[i].raw, want[i].subject, want[i].raw)
		}
	}
	buf.Reset()
	if _, err := dst.Export(ctxT(t), &buf, bus.ExportOptions{RunID: "mix"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, buf.Bytes()) {
		t.Fatalf("export → import → export differs:\n%s\n---\n%s", first, buf.Bytes())
	}
	// Idempotent: a second import (the malformed ones too) adds nothing.
	ist, err = dst.Import(ctxT(t), bytes.NewReader(first), bus.ImportOptions{})
	if err != nil || ist.Imported != 0 || ist.Malformed != 0 || ist.Existing != 4 {
		t.Fatalf("second import %+v %v", ist, err)
	}
	if n := len(storedMessages(t, dst, "mix")); n != 4 {
		t.Fatalf("%d messages after two imports", n)
	}
}

// TestImportRawLineStaysInItsRun: a vera.bus.raw line is stored under its
// own run's subjects only; a tail that is no literal subject is reported.
func TestImportRawLineStaysInItsRun(t *testing.T) {
	_, b := bustest.New(t)
	line := func(tail string) string {
		data, _ := json.Marshal(map[string]any{"subject_tail": tail, "raw_base64": base64.StdEncoding.EncodeToString([]byte("x"))})
		ev := bus.Event{SpecVersion: bus.SpecVersion, ID: "raw-" + tail, Source: "hand", Type: bus.RawType,
			Subject: "rr", RunID: "rr", Time: time.Unix(0, 0).UTC(), DataContentType: bus.ContentTypeJSON, Data: data}
		raw, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return string(raw) + "\n"
	}
	in := line("ext.ok") + line("") + line("ext.*") + line("ext.>") + line("ext..x") + line("ext. x") + line(".ext")
	st, err := b.Import(ctxT(t), strings.NewReader(in), bus.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Malformed != 1 || len(st.Bad) != 6 {
		t.Fatalf("stats %+v, want 1 stored and 6 reported", st)
	}
	for i, le := range st.Bad {
		if le.Line != i+2 {
			t.Errorf("bad line %d reported as line %d: %v", i+2, le.Line, le)
		}
	}
	got := storedMessages(t, b, "rr")
	if len(got) != 1 || got[0].subject != "vera.run.rr.ext.ok" || string(got[0].raw) != "x" {
		t.Fatalf("stored %+v", got)
	}
}

// TestExportAllRunsSkipsOnlyWhatNoLineCanName: exporting every run writes
// every message whose subject names a valid run (malformed ones marked);
// a message on a subject whose run token is no run id cannot be named by
// any line, and is the one thing skipped, with a warning.
func TestExportAllRunsSkipsOnlyWhatNoLineCanName(t *testing.T) {
	_, b := bustest.New(t)
	want := recordMixedRun(t, b)
	if _, err := b.JetStream().Publish(ctxT(t), "vera.run.a+b.ext.x", []byte("nameless")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var warned []string
	st, err := b.Export(ctxT(t), &buf, bus.ExportOptions{Warn: func(m string) { warned = append(warned, m) }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Events != 2 || st.Malformed != 2 || st.Skipped != 1 || len(warned) != 3 || !strings.Contains(warned[2], "vera.run.a+b.ext.x") {
		t.Fatalf("stats %+v, warnings %q", st, warned)
	}
	if n := strings.Count(buf.String(), "\n"); n != len(want) {
		t.Fatalf("%d lines, want %d", n, len(want))
	}
}
