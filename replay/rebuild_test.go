package replay

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector"
)

// TestRebuildMatchesLive records runs while the live file projector and
// the live metrics fold run, exports each run, replays the export on a
// private embedded bus, and compares: every projected file byte for byte,
// and metrics.prom with the live Metrics.WriteText.
func TestRebuildMatchesLive(t *testing.T) {
	cases := []struct {
		name   string
		record func(t *testing.T, b *bus.Bus, url, runID, work string)
	}{
		{"synthetic", func(t *testing.T, b *bus.Bus, _, runID, work string) {
			publish(t, b, synthRun(t, runID, work, 5))
		}},
		{"agent", func(t *testing.T, b *bus.Bus, url, runID, work string) {
			model := scriptedAgentModel(t, notesOnlyReplies())
			startAgent(t, url, 256) // prompts and replies in blobs
			submitTask(t, b, runID, catalog.RunConfig{Task: "What is the answer?", WorkDir: work,
				Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted"}, MaxSteps: 10})
			if fin := waitFinished(t, b, runID, time.Minute); fin.Outcome != catalog.OutcomeResolved {
				t.Fatalf("recorded run finished %+v", fin)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv, b := bustest.New(t)
			log := bustest.Logger(t)
			root := t.TempDir()
			work := filepath.Join(root, "work")
			const runID = "rec-1"
			files, err := projector.NewFiles(b, projector.FilesConfig{Logger: log, Roots: []string{root}})
			if err != nil {
				t.Fatal(err)
			}
			bustest.Start(t, "files", files.Run)
			m := projector.NewMetrics(b, log)
			bustest.Start(t, "metrics", m.Run)

			tc.record(t, b, srv.ClientURL(), runID, work)
			waitProjected(t, b, runID, work)
			live := metricsText(t, m, countEvents(t, b, runID))
			path := exportRun(t, b, runID)

			s, err := OpenFile(ctx, path, OpenOptions{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got, err := s.RunID("")
			if err != nil || got != runID {
				t.Fatalf("RunID = %q, %v", got, err)
			}
			out := filepath.Join(root, "out")
			res, err := Rebuild(ctx, s.Bus, runID, out, RebuildOptions{Logger: log})
			if err != nil {
				t.Fatal(err)
			}
			names := projector.FileNames()
			// The same files, not only the same bytes: a file nothing
			// feeds exists in neither.
			for _, name := range names {
				_, lerr := os.Stat(filepath.Join(work, name))
				_, rerr := os.Stat(filepath.Join(out, name))
				if (lerr == nil) != (rerr == nil) {
					t.Errorf("%s: live has it %v, replay has it %v", name, lerr == nil, rerr == nil)
				}
			}
			want := readFiles(t, work, names)
			sameFiles(t, "live vs replay", want, readFiles(t, out, names))
			for _, name := range []string{projector.FileNotes, projector.FileTrace, projector.FileSession} {
				if len(want[name]) == 0 {
					t.Errorf("%s is empty: the recording does not exercise it", name)
				}
			}
			prom, err := os.ReadFile(filepath.Join(out, MetricsFile))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(prom, live) {
				t.Errorf("metrics.prom differs from the live snapshot\n--- live\n%s\n--- replay\n%s", live, prom)
			}
			if entries, err := os.ReadDir(out); err != nil || len(entries) > len(OutputFiles()) {
				t.Errorf("the output holds more than the projected files and metrics.prom: %v %v", entries, err)
			}
			if res.Events != countEvents(t, b, runID) || res.Files[MetricsFile] != int64(len(prom)) {
				t.Errorf("result = %+v", res)
			}
			t.Logf("%s: %d events, trace %d bytes, metrics.prom %d bytes", tc.name, res.Events, res.Files[projector.FileTrace], len(prom))

			// The same from the recording bus itself (vera replay --run).
			s2, err := OpenBus(ctx, b, runID)
			if err != nil {
				t.Fatal(err)
			}
			out2 := filepath.Join(root, "out2")
			if _, err := Rebuild(ctx, s2.Bus, runID, out2, RebuildOptions{}); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, "live vs replay from the bus", readFiles(t, out, OutputFiles()), readFiles(t, out2, OutputFiles()))

			// A non-empty output directory is refused without Force.
			if _, err := Rebuild(ctx, s.Bus, runID, out, RebuildOptions{}); !errors.Is(err, ErrNotEmpty) {
				t.Errorf("rebuild into a non-empty dir: %v, want ErrNotEmpty", err)
			}
			if _, err := Rebuild(ctx, s.Bus, runID, out, RebuildOptions{Force: true}); err != nil {
				t.Errorf("rebuild with Force: %v", err)
			}
			sameFiles(t, "forced rebuild", want, readFiles(t, out, names))
		})
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := OpenFile(ctx, filepath.Join(dir, "missing.jsonl"), OpenOptions{}); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}

	_, b := bustest.New(t)
	publish(t, b, synthRun(t, "r1", filepath.Join(dir, "w"), 1))
	var buf bytes.Buffer
	if _, err := b.Export(ctx, &buf, bus.ExportOptions{RunID: "r1"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(buf.String(), "\n")
	lines[2] = "{not json\n"
	lines[4] = `{"specversion":"1.0"}` + "\n"
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(strings.Join(lines, "")), 0o644)
	_, err := OpenFile(ctx, bad, OpenOptions{})
	var ie *ImportError
	if !errors.As(err, &ie) || len(ie.Bad) != 2 || ie.Bad[0].Line != 3 || ie.Bad[1].Line != 5 {
		t.Fatalf("bad lines: %v", err)
	}
	if !strings.Contains(err.Error(), "bad.jsonl:3:") || !strings.Contains(err.Error(), "bad.jsonl:5:") {
		t.Errorf("error does not name the lines: %v", err)
	}

	if _, err := OpenBus(ctx, b, "nope"); err == nil || !strings.Contains(err.Error(), "unknown run nope") {
		t.Errorf("unknown run: %v", err)
	}
	if _, err := Rebuild(ctx, b, "nope", filepath.Join(dir, "o"), RebuildOptions{}); err == nil {
		t.Error("rebuild of an unknown run succeeded")
	}

	// Two runs in one file: the run must be named.
	publish(t, b, synthRun(t, "r2", filepath.Join(dir, "w2"), 1))
	buf.Reset()
	if _, err := b.Export(ctx, &buf, bus.ExportOptions{}); err != nil {
		t.Fatal(err)
	}
	both := filepath.Join(dir, "both.jsonl")
	os.WriteFile(both, buf.Bytes(), 0o644)
	s, err := OpenFile(ctx, both, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.RunID(""); err == nil || !strings.Contains(err.Error(), "r1, r2") {
		t.Errorf("two runs: %v", err)
	}
	if id, err := s.RunID("r2"); err != nil || id != "r2" {
		t.Errorf("RunID(r2) = %q, %v", id, err)
	}
	if _, err := s.RunID("r3"); err == nil {
		t.Error("RunID(r3) succeeded")
	}
}
