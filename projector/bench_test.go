package projector

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

// BenchmarkProjectionRebuild rebuilds every file of a synthetic run of
// about 100 000 events from the stream, against a raw ordered-consumer read
// of the same events (nats.go, no parsing) on the same server in the same
// run. ratio = raw time / rebuild time = rebuild throughput as a fraction
// of the raw read's.
func BenchmarkProjectionRebuild(b *testing.B) {
	_, bb := bustest.New(b)
	const runID = "bench-run"
	root := b.TempDir()
	evs := synthRun(b, runID, filepath.Join(root, "live"), 8452)
	publish(b, bb, evs)
	ctx := context.Background()
	filter, _ := bus.FilterSubject(runID, "")
	f := mustFiles(b, bb, FilesConfig{})
	var raw, rebuild time.Duration
	var bytesOut int64
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		n := bustest.RawRead(b, bb, filter)
		t1 := time.Now()
		dir := filepath.Join(root, "rb"+strconv.Itoa(i))
		if err := f.Rebuild(ctx, runID, dir); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if n != len(evs) {
			b.Fatalf("raw read %d events, want %d", n, len(evs))
		}
		raw += t1.Sub(t0)
		rebuild += t2.Sub(t1)
		if i == 0 {
			for _, data := range readFiles(b, dir) {
				bytesOut += int64(len(data))
			}
		}
	}
	b.ReportMetric(float64(len(evs)), "events")
	b.ReportMetric(float64(len(evs))*float64(b.N)/rebuild.Seconds(), "rebuild-events/s")
	b.ReportMetric(float64(len(evs))*float64(b.N)/raw.Seconds(), "raw-events/s")
	b.ReportMetric(raw.Seconds()/rebuild.Seconds(), "ratio")
	b.ReportMetric(float64(bytesOut), "bytes-written")
}

// BenchmarkLiveProjection measures the live projector (an fsync per file
// append and an atomic state write per event) on a run of about 12 000
// events, against a raw ordered-consumer read of the same events.
func BenchmarkLiveProjection(b *testing.B) {
	_, bb := bustest.New(b)
	root := b.TempDir()
	var raw, live time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		runID := "live-" + strconv.Itoa(i)
		dir := filepath.Join(root, runID)
		evs := synthRun(b, runID, dir, 1000)
		publish(b, bb, evs)
		filter, _ := bus.FilterSubject(runID, "")
		t0 := time.Now()
		bustest.RawRead(b, bb, filter)
		t1 := time.Now()
		stop := startFiles(b, bb)
		waitProjected(b, dir, lastSeq(b, bb, runID))
		t2 := time.Now()
		stop()
		raw += t1.Sub(t0)
		live += t2.Sub(t1)
		n += len(evs)
	}
	b.ReportMetric(float64(n)/live.Seconds(), "live-events/s")
	b.ReportMetric(float64(n)/raw.Seconds(), "raw-events/s")
	b.ReportMetric(raw.Seconds()/live.Seconds(), "ratio")
}

// BenchmarkLiveProjectionInterleaved is BenchmarkLiveProjection with two
// runs whose events alternate on the stream: no event follows its run's
// previous one directly, so each costs the projector one lookup of the
// stream for a gap (fillGap), the worst case of that check.
func BenchmarkLiveProjectionInterleaved(b *testing.B) {
	_, bb := bustest.New(b)
	root := b.TempDir()
	var raw, live time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		runA, runB := "ila-"+strconv.Itoa(i), "ilb-"+strconv.Itoa(i)
		dirA, dirB := filepath.Join(root, runA), filepath.Join(root, runB)
		evA, evB := synthRun(b, runA, dirA, 300), synthRun(b, runB, dirB, 300)
		for k := 0; k < max(len(evA), len(evB)); k++ {
			if k < len(evA) {
				publish(b, bb, evA[k:k+1])
			}
			if k < len(evB) {
				publish(b, bb, evB[k:k+1])
			}
		}
		fa, _ := bus.FilterSubject(runA, "")
		fb, _ := bus.FilterSubject(runB, "")
		t0 := time.Now()
		bustest.RawRead(b, bb, fa)
		bustest.RawRead(b, bb, fb)
		t1 := time.Now()
		stop := startFiles(b, bb)
		waitProjected(b, dirA, lastSeq(b, bb, runA))
		waitProjected(b, dirB, lastSeq(b, bb, runB))
		t2 := time.Now()
		stop()
		raw += t1.Sub(t0)
		live += t2.Sub(t1)
		n += len(evA) + len(evB)
	}
	b.ReportMetric(float64(n)/live.Seconds(), "live-events/s")
	b.ReportMetric(float64(n)/raw.Seconds(), "raw-events/s")
	b.ReportMetric(raw.Seconds()/live.Seconds(), "ratio")
}
