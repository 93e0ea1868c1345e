package bus_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

type withBlob struct {
	Text string       `json:"text"`
	Out  *bus.BlobRef `json:"out,omitempty"`
}

func (withBlob) EventType() string { return "vera.ext.output" }

// recordRun publishes a small run with a blob, a pretty-printed event from a
// plain NATS client, and an event of another run.
func recordRun(t *testing.T, b *bus.Bus) {
	ctx := ctxT(t)
	big := bytes.Repeat([]byte("output line\n"), 20000)
	ref, err := b.PutBlob(ctx, big, "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	evs := []bus.Event{
		mustEvent(t, b, "exp", note{N: 1, Text: "first"}),
		mustEvent(t, b, "exp", withBlob{Text: "see blob", Out: &ref}),
		mustEvent(t, b, "other", note{N: 9}),
		mustEvent(t, b, "exp", withBlob{Text: "same blob again", Out: &ref}),
	}
	for _, ev := range evs {
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	pretty := `{
  "specversion": "1.0", "id": "01JDEMO0000000000000000000", "source": "python",
  "type": "vera.ext.demo", "subject": "exp", "runid": "exp",
  "time": "2026-11-21T12:00:00Z", "data": {"hello": "world"}
}`
	if err := b.Conn().Publish("vera.run.exp.ext.demo", []byte(pretty)); err != nil {
		t.Fatal(err)
	}
	if err := b.Conn().Publish("vera.run.exp.ext.demo", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	if err := b.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
}

func export(t *testing.T, b *bus.Bus, run string) ([]byte, bus.ExportStats) {
	var buf bytes.Buffer
	var warned []string
	st, err := b.Export(ctxT(t), &buf, bus.ExportOptions{RunID: run, Warn: func(m string) { warned = append(warned, m) }})
	if err != nil {
		t.Fatal(err)
	}
	if st.Skipped+st.Malformed != len(warned) {
		t.Fatalf("skipped %d and marked %d malformed but warned %d times", st.Skipped, st.Malformed, len(warned))
	}
	return buf.Bytes(), st
}

func TestExportImportRoundTrip(t *testing.T) {
	_, src := bustest.New(t)
	recordRun(t, src)
	first, st := export(t, src, "exp")
	if st.Events != 4 || st.Blobs != 1 || st.Malformed != 1 || st.Skipped != 0 {
		t.Fatalf("export stats %+v, want 4 events, 1 blob, 1 malformed", st)
	}
	lines := strings.Split(strings.TrimSuffix(string(first), "\n"), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines", len(lines))
	}
	// The garbage message is the last line, marked and verbatim.
	var garbage bus.Event
	var rd bus.RawData
	if err := json.Unmarshal([]byte(lines[5]), &garbage); err != nil || garbage.Type != bus.RawType ||
		garbage.DecodeData(&rd) != nil || string(rd.Raw) != "garbage" || rd.SubjectTail != "ext.demo" || rd.Malformed == "" {
		t.Fatalf("line 6 should be the garbage, marked: %v %s", err, lines[5])
	}
	var blobLine bus.Event
	if err := json.Unmarshal([]byte(lines[1]), &blobLine); err != nil || blobLine.Type != bus.BlobType {
		t.Fatalf("line 2 should be the blob: %v %s", err, lines[1][:80])
	}
	for i, l := range lines {
		if _, err := bus.ParseEvent([]byte(l)); err != nil {
			t.Errorf("line %d is not an envelope: %v", i+1, err)
		}
	}

	// Into a fresh server, then export again: byte-identical.
	_, dst := bustest.New(t)
	ist, err := dst.Import(ctxT(t), bytes.NewReader(first), bus.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ist.Imported != 4 || ist.Malformed != 1 || ist.Blobs != 1 || len(ist.Bad) != 0 {
		t.Fatalf("import stats %+v", ist)
	}
	second, _ := export(t, dst, "exp")
	if !bytes.Equal(first, second) {
		t.Fatalf("export → import → export differs:\n%s\n---\n%s", first, second)
	}
	// The same export twice from the source is stable too.
	again, _ := export(t, src, "exp")
	if !bytes.Equal(first, again) {
		t.Fatal("exporting twice differs")
	}
}

func TestImportTwiceIsIdempotentPastDedupWindow(t *testing.T) {
	_, src := bustest.New(t)
	recordRun(t, src)
	file, _ := export(t, src, "exp")

	srv := bustest.StartServer(t)
	dst := bustest.Connect(t, srv.ClientURL(), bus.Options{DedupWindow: 200 * time.Millisecond})
	if _, err := dst.Import(ctxT(t), bytes.NewReader(file), bus.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // well past the dedup window
	st, err := dst.Import(ctxT(t), bytes.NewReader(file), bus.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Imported != 0 || st.Malformed != 0 || st.Existing != 5 {
		t.Fatalf("second import stats %+v, want 0 imported and 5 existing (4 events, 1 malformed)", st)
	}
	evs, err := dst.ReadRun(ctxT(t), "exp")
	if err != nil || len(evs) != 4 {
		t.Fatalf("stored %d events after two imports (%v), want 4", len(evs), err)
	}
}

func TestImportReportsBadLinesAndKeepsTheRest(t *testing.T) {
	_, b := bustest.New(t)
	good := mustEvent(t, b, "imp", note{N: 1})
	raw, _ := good.Marshal()
	good2 := mustEvent(t, b, "imp", note{N: 2})
	raw2, _ := good2.Marshal()
	in := string(raw) + "\n{not json\n\n" + `{"specversion":"1.0"}` + "\n" + string(raw2) + "\n" + string(raw) + "\n"
	st, err := b.Import(ctxT(t), strings.NewReader(in), bus.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Line numbers are the file's: the blank line counts.
	if st.Imported != 2 || st.Existing != 1 || len(st.Bad) != 2 || st.Bad[0].Line != 2 || st.Bad[1].Line != 4 {
		t.Fatalf("stats %+v", st)
	}
}

// TestImportRefusesABlobWhoseBytesChanged: a blob line whose bytes are not
// the ones it was exported with is reported and not stored, so that no
// later export stumbles on a blob its events cannot find.
func TestImportRefusesABlobWhoseBytesChanged(t *testing.T) {
	_, src := bustest.New(t)
	recordRun(t, src)
	file, _ := export(t, src, "exp")
	lines := strings.Split(strings.TrimSuffix(string(file), "\n"), "\n")
	var blob bus.Event
	if err := json.Unmarshal([]byte(lines[1]), &blob); err != nil || blob.Type != bus.BlobType {
		t.Fatalf("line 2 should be the blob: %v", err)
	}
	blob.DataBase64 = append([]byte("tampered "), blob.DataBase64...)
	raw, err := blob.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	lines[1] = string(raw)
	_, dst := bustest.New(t)
	st, err := dst.Import(ctxT(t), strings.NewReader(strings.Join(lines, "\n")+"\n"), bus.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Bad) != 1 || st.Bad[0].Line != 2 || !strings.Contains(st.Bad[0].Err.Error(), "not the blob it was exported with") || st.Blobs != 0 {
		t.Fatalf("import of a tampered blob: %+v", st)
	}
	if _, err := dst.GetBlob(ctxT(t), bus.Digest(blob.DataBase64)); !errors.Is(err, bus.ErrBlobNotFound) {
		t.Fatalf("the tampered bytes were stored: %v", err)
	}
}
