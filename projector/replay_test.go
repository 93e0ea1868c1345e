package projector

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

// TestExportImportReplayIsByteIdentical records a run on one server,
// exports it, imports it on another (after unrelated events, so stream
// sequences differ) and rebuilds there: every file, trace included, and the
// metrics snapshot are byte-identical (BRIEF invariant 5).
func TestExportImportReplayIsByteIdentical(t *testing.T) {
	ctx := context.Background()
	_, src := bustest.New(t)
	_, dst := bustest.New(t)
	root := t.TempDir()
	evs := synthRun(t, "rec", filepath.Join(root, "rec"), 9)
	publish(t, src, evs)
	publish(t, dst, synthRun(t, "other", filepath.Join(root, "other"), 2))

	var file bytes.Buffer
	if _, err := src.Export(ctx, &file, bus.ExportOptions{RunID: "rec"}); err != nil {
		t.Fatal(err)
	}
	st, err := dst.Import(ctx, bytes.NewReader(file.Bytes()), bus.ImportOptions{})
	if err != nil || len(st.Bad) > 0 {
		t.Fatalf("import: %v %v", err, st.Bad)
	}
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	if err := mustFiles(t, src, FilesConfig{}).Rebuild(ctx, "rec", a); err != nil {
		t.Fatal(err)
	}
	if err := mustFiles(t, dst, FilesConfig{}).Rebuild(ctx, "rec", b); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "original vs replayed", readFiles(t, a), readFiles(t, b))
	sameFiles(t, "replayed vs Render", Render(evs), readFiles(t, b))

	replayed, err := dst.ReadRun(ctx, "rec")
	if err != nil {
		t.Fatal(err)
	}
	if foldText(t, replayed) != foldText(t, evs) {
		t.Error("metrics of the replayed run differ")
	}
}
