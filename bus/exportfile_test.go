package bus_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// TestReadExportEvents: an export file read back gives the run's valid
// events in order (an outside event without runid, carried in a
// vera.bus.raw line, among them), its blobs by digest, and skips a
// malformed message.
func TestReadExportEvents(t *testing.T) {
	_, b := bustest.New(t)
	ctx := context.Background()
	const run = "rx"
	blob := bytes.Repeat([]byte("big output "), 100)
	ref, err := b.PutBlob(ctx, blob, "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.Events.New(run, catalog.NotesAppended{Step: 1, Author: "agent", Text: "a note"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, first); err != nil {
		t.Fatal(err)
	}
	outside := `{"specversion":"1.0","id":"x1","source":"acme","type":"vera.ext.acme.scanned","time":"2026-11-25T12:00:00Z","data":{"n":1}}`
	if _, err := b.PublishRaw(ctx, "vera.run."+run+".ext.acme.scanned", "", []byte(outside)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PublishRaw(ctx, "vera.run."+run+".notes.appended", "", []byte("not an event")); err != nil {
		t.Fatal(err)
	}
	last, err := b.Events.New(run, catalog.EvidenceRecorded{EvidenceID: "ev_0001", RequestID: "req-s0001", Step: 1, Command: "ls",
		OutputBlob: &catalog.BlobRef{Digest: ref.Digest, Size: ref.Size, ContentType: ref.ContentType}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, last); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := b.Export(ctx, &file, bus.ExportOptions{RunID: run}); err != nil {
		t.Fatal(err)
	}
	x, err := bus.ReadExportEvents(&file)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Order) != 1 || x.Order[0] != run {
		t.Fatalf("runs %v", x.Order)
	}
	var ids []string
	for _, ev := range x.Runs[run] {
		ids = append(ids, ev.ID)
	}
	if want := []string{first.ID, "x1", last.ID}; len(ids) != 3 || ids[0] != want[0] || ids[1] != want[1] || ids[2] != want[2] {
		t.Errorf("events %v, want %v", ids, want)
	}
	if got := x.Blobs[ref.Digest]; !bytes.Equal(got, blob) {
		t.Errorf("blob %s: %d bytes, want %d", ref.Digest, len(got), len(blob))
	}
	if _, err := bus.ReadExportEvents(bytes.NewReader([]byte("{}\n"))); err == nil {
		t.Error("a line that is not an envelope is accepted")
	}
}
