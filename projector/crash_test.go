package projector

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/vera-run/vera/bus"
)

var errCrash = errors.New("simulated crash")

// TestKillBetweenAppends kills the projector (drops its memory) at every
// point of a run: after the first file of an event is appended and before
// the rest and the state are written, with a torn half line left in the
// next file. A restarted projector, redelivered the event, must end with
// exactly Render's bytes, and at no point may a file hold a torn line
// once a projector has loaded it.
func TestKillBetweenAppends(t *testing.T) {
	ctx := context.Background()
	n := len(synthRun(t, "kill", "", 3))
	for k := 1; k < n; k++ {
		dir := filepath.Join(t.TempDir(), "kill")
		evs := synthRun(t, "kill", dir, 3)
		handle := func(f *Files, i int) error {
			raw, err := evs[i].Marshal()
			if err != nil {
				t.Fatal(err)
			}
			return f.Handle(ctx, &bus.Message{Event: evs[i], Raw: raw, Subject: "x", Sequence: uint64(i + 1), Delivered: 1})
		}
		root := func(string) (string, bool) { return dir, true }
		f := &Files{cfg: FilesConfig{Root: root, StateDir: testStateDir}}
		for i := 0; i < k; i++ {
			if err := handle(f, i); err != nil {
				t.Fatalf("k=%d event %d: %v", k, i, err)
			}
		}
		// Crash inside event k.
		testHookAfterAppend = func(file string) error {
			for _, other := range FileNames() {
				if other != file {
					fh, _ := os.OpenFile(filepath.Join(dir, other), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
					fh.WriteString(`{"torn":`)
					fh.Close()
					break
				}
			}
			return errCrash
		}
		err := handle(f, k)
		testHookAfterAppend = nil
		if !errors.Is(err, errCrash) {
			t.Fatalf("k=%d: want the simulated crash, got %v", k, err)
		}
		// Restart: new memory, event k redelivered, then the rest; and a
		// second redelivery of everything changes nothing.
		f = &Files{cfg: FilesConfig{Root: root, StateDir: testStateDir}}
		for i := k; i < len(evs); i++ {
			if err := handle(f, i); err != nil {
				t.Fatalf("k=%d event %d after restart: %v", k, i, err)
			}
			if i == k {
				checkLines(t, dir)
			}
		}
		f = &Files{cfg: FilesConfig{Root: root, StateDir: testStateDir}}
		for i := range evs {
			if err := handle(f, i); err != nil {
				t.Fatal(err)
			}
		}
		got := readFiles(t, dir)
		// Render of the events with this dir differs from want only in
		// work_dir; compare with the run's own render.
		sameFiles(t, "after kill", Render(evs), got)
		if t.Failed() {
			t.Fatalf("k=%d", k)
		}
	}
}
