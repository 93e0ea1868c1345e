package projector

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testStateDir keeps the projection state of every Files the tests make
// with mustFiles, so that a restarted projector finds its state.
var testStateDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vera-projector-state-")
	if err != nil {
		panic(err)
	}
	testStateDir = dir
	defer os.RemoveAll(dir)
	goleak.VerifyTestMain(m, bustest.LeakIgnores...)
}

// testState reads the projection state kept for run dir dir, if any.
func testState(dir string) (*projState, bool) {
	paths, _ := filepath.Glob(filepath.Join(testStateDir, "*.json"))
	for _, p := range paths {
		var st projState
		data, err := os.ReadFile(p)
		if err == nil && json.Unmarshal(data, &st) == nil && st.Dir == dir {
			return &st, true
		}
	}
	return nil, false
}

func publish(tb testing.TB, b *bus.Bus, evs []bus.Event) {
	tb.Helper()
	ctx := context.Background()
	for i := 0; i < len(evs); i += 1000 {
		if _, err := b.PublishBatch(ctx, evs[i:min(i+1000, len(evs))]); err != nil {
			tb.Fatal(err)
		}
	}
}

func readFiles(tb testing.TB, dir string) map[string][]byte {
	tb.Helper()
	out := map[string][]byte{}
	for _, name := range FileNames() {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			tb.Fatal(err)
		}
		if data == nil {
			data = []byte{}
		}
		out[name] = data
	}
	return out
}

func sameFiles(tb testing.TB, what string, want, got map[string][]byte) {
	tb.Helper()
	for _, name := range FileNames() {
		if !bytes.Equal(want[name], got[name]) {
			tb.Errorf("%s: %s differs (want %d bytes, got %d)\n--- want tail\n%s\n--- got tail\n%s", what, name,
				len(want[name]), len(got[name]), tail(want[name]), tail(got[name]))
		}
	}
}

func tail(b []byte) string {
	if len(b) > 400 {
		b = b[len(b)-400:]
	}
	return string(b)
}

// lastSeq is the stream sequence of the run's last stored event.
func lastSeq(tb testing.TB, b *bus.Bus, runID string) uint64 {
	tb.Helper()
	f, _ := bus.FilterSubject(runID, "")
	seq, err := b.LastSequence(context.Background(), f)
	if err != nil {
		tb.Fatal(err)
	}
	return seq
}

func waitProjected(tb testing.TB, dir string, seq uint64) {
	tb.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if st, ok := testState(dir); ok && st.LastSeq >= seq {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, _ := testState(dir)
	tb.Fatalf("projection of %s did not reach seq %d (state %+v)", dir, seq, st)
}

// startFiles runs a live file projector until the returned stop is called.
func startFiles(tb testing.TB, b *bus.Bus) (stop func()) {
	tb.Helper()
	f := mustFiles(tb, b, FilesConfig{Logger: bustest.Logger(tb)})
	return bustest.Start(tb, "Files.Run", f.Run)
}

// checkLines fails unless every file is whole lines and every .jsonl line
// is a JSON object.
func checkLines(tb testing.TB, dir string) {
	tb.Helper()
	for name, data := range readFiles(tb, dir) {
		if len(data) > 0 && data[len(data)-1] != '\n' {
			tb.Errorf("%s: torn last line %q", name, tail(data))
		}
		if !strings.HasSuffix(name, ".jsonl") {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				tb.Errorf("%s line %d: %v: %q", name, n, err, sc.Text())
			}
		}
	}
}

func TestRenderGolden(t *testing.T) {
	evs := synthRun(t, "golden-run", "/srv/work/golden-run", 6)
	got := Render(evs)
	dir := filepath.Join("testdata", "golden")
	if *update {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range got {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, name := range FileNames() {
		if len(got[name]) == 0 {
			t.Errorf("%s is empty: the synthetic run should cover every file", name)
		}
	}
	sameFiles(t, "golden", readFiles(t, dir), got)
	// Deterministic and prefix-stable.
	sameFiles(t, "second render", got, Render(evs))
	half := Render(evs[:len(evs)/2])
	for name := range got {
		if !bytes.HasPrefix(got[name], half[name]) {
			t.Errorf("%s: rendering a prefix is not a prefix", name)
		}
	}
}

func TestRenderBadDataSkipsLineKeepsTrace(t *testing.T) {
	evs := synthRun(t, "bad", "/w", 1)
	for i := range evs {
		if evs[i].Type == "vera.evidence.recorded" {
			evs[i].Data = json.RawMessage(`{"evidence_id":42}`)
		}
	}
	out := Render(evs)
	if len(out[FileEvidence]) != 0 {
		t.Errorf("evidence with bad data projected: %q", out[FileEvidence])
	}
	if n := bytes.Count(out[FileTrace], []byte("\n")); n != len(evs) {
		t.Errorf("trace has %d lines, want %d", n, len(evs))
	}
}

func TestLiveEqualsRebuildAndRender(t *testing.T) {
	_, b := bustest.New(t)
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "run-a"), filepath.Join(root, "run-b")
	evA := synthRun(t, "run-a", dirA, 20)
	evB := synthRun(t, "run-b", dirB, 7)
	stop := startFiles(t, b)
	// Interleave the two runs.
	publish(t, b, evA[:len(evA)/2])
	publish(t, b, evB)
	publish(t, b, evA[len(evA)/2:])
	waitProjected(t, dirA, lastSeq(t, b, "run-a"))
	waitProjected(t, dirB, lastSeq(t, b, "run-b"))
	stop()

	sameFiles(t, "live run-a vs Render", Render(evA), readFiles(t, dirA))
	sameFiles(t, "live run-b vs Render", Render(evB), readFiles(t, dirB))
	checkLines(t, dirA)

	rb := filepath.Join(root, "rebuild-a")
	if err := mustFiles(t, b, FilesConfig{}).Rebuild(context.Background(), "run-a", rb); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "live vs Rebuild", readFiles(t, dirA), readFiles(t, rb))
	if matches, _ := filepath.Glob(filepath.Join(rb, ".*.tmp-*")); len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}
}

func TestRedeliveryWritesNoLineTwice(t *testing.T) {
	_, b := bustest.New(t)
	dir := filepath.Join(t.TempDir(), "run-r")
	evs := synthRun(t, "run-r", dir, 10)
	publish(t, b, evs)
	stop := startFiles(t, b)
	waitProjected(t, dir, lastSeq(t, b, "run-r"))
	stop()
	want := Render(evs)
	sameFiles(t, "first pass", want, readFiles(t, dir))

	// Delete the durable consumer: every event is delivered again.
	ctx := context.Background()
	if err := b.JetStream().DeleteConsumer(ctx, bus.StreamName, FilesDurable); err != nil {
		t.Fatal(err)
	}
	stop = startFiles(t, b)
	// Wait until the new consumer has handed out everything.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := b.JetStream().Consumer(ctx, bus.StreamName, FilesDurable)
		if err == nil {
			if info, err := c.Info(ctx); err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Stream >= lastSeq(t, b, "run-r") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("redelivery did not finish")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	sameFiles(t, "after redelivery", want, readFiles(t, dir))

	// Lose the state file too: the projector rebuilds rather than append.
	if err := os.Remove(filepath.Join(testStateDir, "run-r.json")); err != nil {
		t.Fatal(err)
	}
	if err := b.JetStream().DeleteConsumer(ctx, bus.StreamName, FilesDurable); err != nil {
		t.Fatal(err)
	}
	stop = startFiles(t, b)
	waitProjected(t, dir, lastSeq(t, b, "run-r"))
	stop()
	sameFiles(t, "after lost state", want, readFiles(t, dir))
}

func TestCrashMidRunNeverTorn(t *testing.T) {
	_, b := bustest.New(t)
	dir := filepath.Join(t.TempDir(), "run-c")
	evs := synthRun(t, "run-c", dir, 30)
	cut := len(evs) / 3
	publish(t, b, evs[:cut])
	stop := startFiles(t, b)
	waitProjected(t, dir, lastSeq(t, b, "run-c"))
	// More events arrive; stop while they are being projected.
	pubErr := make(chan error, 1)
	go func() {
		_, err := b.PublishBatch(context.Background(), evs[cut:2*cut])
		pubErr <- err
	}()
	time.Sleep(30 * time.Millisecond)
	stop()
	checkLines(t, dir)
	if err := <-pubErr; err != nil {
		t.Fatal(err)
	}

	// Simulate a crash after an append whose state was never saved: a torn
	// line at the end of two files.
	for _, name := range []string{FileEvidence, FileTrace} {
		fh, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteString(`{"evidence_id":"ev_9999","torn`)
		fh.Close()
	}
	publish(t, b, evs[2*cut:])
	stop = startFiles(t, b)
	waitProjected(t, dir, lastSeq(t, b, "run-c"))
	stop()
	checkLines(t, dir)
	sameFiles(t, "after crash", Render(evs), readFiles(t, dir))
}

func TestTraceLineFromRawEqualsMarshal(t *testing.T) {
	for _, ev := range synthRun(t, "raw", "/w", 2) {
		marshalled, err := ev.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, marshalled, "", "  "); err != nil {
			t.Fatal(err)
		}
		for _, raw := range [][]byte{nil, marshalled, pretty.Bytes()} {
			var got []byte
			if err := RenderEvent(&ev, raw, func(file string, line []byte) {
				if file == FileTrace {
					got = append([]byte(nil), line...)
				}
			}); err != nil {
				t.Fatal(err)
			}
			if want := append(marshalled, '\n'); !bytes.Equal(got, want) {
				t.Fatalf("trace line from raw %q:\n got %s\nwant %s", raw, got, want)
			}
		}
	}
	for _, s := range []string{`{"a":"x y"}`, `{"a":"q\" b"}`, `{"a":"\\"}`} {
		if !compactJSON([]byte(s)) {
			t.Errorf("%s should be compact", s)
		}
	}
	for _, s := range []string{`{"a": 1}`, `{"a":"\\" ,"b":1}`, "[1,\n2]"} {
		if compactJSON([]byte(s)) {
			t.Errorf("%s should not be compact", s)
		}
	}
}

// mustFiles is NewFiles or the end of the test; by default its runs may
// lie under the system's temporary directory (where t.TempDir makes
// them) and its state is kept in testStateDir.
func mustFiles(tb testing.TB, b *bus.Bus, cfg FilesConfig) *Files {
	tb.Helper()
	if cfg.Roots == nil {
		cfg.Roots = []string{os.TempDir()}
	}
	if cfg.StateDir == "" {
		cfg.StateDir = testStateDir
	}
	f, err := NewFiles(b, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// TestOutOfOrderRedeliveryIsNotSkipped: an event of a run delivered after
// a later event of the same run (as a redelivery can be after a consumer's
// leader changes) is projected, from the stream, before the later one;
// files equal Render of the whole run, and the late delivery itself then
// writes nothing twice.
func TestOutOfOrderRedeliveryIsNotSkipped(t *testing.T) {
	_, b := bustest.New(t)
	dir := filepath.Join(t.TempDir(), "run-gap")
	evs := synthRun(t, "run-gap", dir, 6)
	publish(t, b, evs)
	ctx := context.Background()
	var msgs []*bus.Message
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: "run-gap"}) {
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, &bus.Message{Event: rec.Event, Raw: rec.Raw, Sequence: rec.Sequence})
	}
	if len(msgs) < 5 {
		t.Fatalf("%d events", len(msgs))
	}
	f := mustFiles(t, b, FilesConfig{})
	// Deliver in stream order but for two events, held back and handed
	// over at the end.
	held := map[int]bool{2: true, 3: true}
	for i, m := range msgs {
		if held[i] {
			continue
		}
		if err := f.Handle(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range held {
		if err := f.Handle(ctx, msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	sameFiles(t, "out-of-order deliveries vs Render", Render(evs), readFiles(t, dir))
	checkLines(t, dir)
	if f.GapsRepaired() != 1 {
		t.Errorf("%d gaps repaired, want 1", f.GapsRepaired())
	}
}

// TestInterleavedRunsNeedNoRepair: events of two runs alternate on the
// stream; the sequence gaps they leave in each other are not gaps of the
// run, and nothing is repaired.
func TestInterleavedRunsNeedNoRepair(t *testing.T) {
	_, b := bustest.New(t)
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "run-ia"), filepath.Join(root, "run-ib")
	evA := synthRun(t, "run-ia", dirA, 8)
	evB := synthRun(t, "run-ib", dirB, 8)
	for i := 0; i < max(len(evA), len(evB)); i++ {
		if i < len(evA) {
			publish(t, b, evA[i:i+1])
		}
		if i < len(evB) {
			publish(t, b, evB[i:i+1])
		}
	}
	f := mustFiles(t, b, FilesConfig{})
	ctx := context.Background()
	for rec, err := range b.Read(ctx, bus.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Handle(ctx, &bus.Message{Event: rec.Event, Raw: rec.Raw, Sequence: rec.Sequence}); err != nil {
			t.Fatal(err)
		}
	}
	sameFiles(t, "run-ia", Render(evA), readFiles(t, dirA))
	sameFiles(t, "run-ib", Render(evB), readFiles(t, dirB))
	if f.GapsRepaired() != 0 {
		t.Errorf("%d gaps repaired in interleaved runs, want 0", f.GapsRepaired())
	}
}
