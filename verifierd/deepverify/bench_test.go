package deepverify

// Benchmarks of an audit round, each round on a fresh run of its own (the
// auditor rebuilds a run's state from the stream on every delivery, so a
// run's size matters; a fresh run is the common case).
//
//	go test ./verifierd/deepverify -run '^$' -bench RoundOverhead -benchtime 50x
//	go test ./verifierd/deepverify -run '^$' -bench RoundParallelChecks -benchtime 10x
//
// RoundOverhead: a round (decomposition, two checks, one of which runs a
// command, the judgement, the feedback) with a scripted model that answers
// at once and a stand-in for sandboxd that answers commands at once. It
// reports the round's wall time, the time a model call was in flight, and
// the difference: the auditor's own cost (rebuilding state from the stream,
// prompts, parsing, its events and the bus hops to the tool and back).
//
// RoundParallelChecks: three checks that take 0.3 s, 0.6 s and 1.0 s, either
// by scripted model delay (model-delays) or by commands sleeping in the
// real sandbox (sandbox-sleeps: sandboxd and Docker, the auditor's container
// started beforehand). Each iteration also times, on another fresh run, a
// round with the longest check alone, the raw thing: round/longest-check is
// the three-check round's wall time against it (with the checks run
// concurrently end to end it stays near 1; one after the other it would be
// near 1.9), round/longest-delay against the 1.0 s itself.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
)

// busyModel measures the time during which at least one model call is in
// flight.
type busyModel struct {
	llm.Completer
	mu       sync.Mutex
	inFlight int
	since    time.Time
	busy     time.Duration
}

func (m *busyModel) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	m.mu.Lock()
	if m.inFlight == 0 {
		m.since = time.Now()
	}
	m.inFlight++
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.inFlight--
		if m.inFlight == 0 {
			m.busy += time.Since(m.since)
		}
		m.mu.Unlock()
	}()
	return m.Completer.Complete(ctx, req)
}

func (m *busyModel) total() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.busy
}

// benchAuditor starts an auditor whose model calls go through a busyModel.
func (h *harness) benchAuditor() *busyModel {
	models := h.models()
	c, err := models(h.runID, catalog.ModelConfig{Name: "m"})
	if err != nil {
		h.t.Fatal(err)
	}
	bm := &busyModel{Completer: c}
	a := h.newAuditor(Config{Models: func(string, catalog.ModelConfig) (llm.Completer, error) { return bm, nil }})
	bustest.Start(h.t, "auditor", a.Run)
	return bm
}

// round requests round n of the current run and returns the time until
// its feedback is on the stream.
func (h *harness) round(n int) time.Duration {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		for _, err := range h.b.Read(ctx, bus.ReadOptions{RunID: h.runID, Types: []string{catalog.TypeAuditFeedback}, Follow: true}) {
			got <- err
			return
		}
		got <- errors.New("the stream ended")
	}()
	start := time.Now()
	h.request(n, goodAnswer, "ev_0001", "ev_0002")
	if err := <-got; err != nil {
		h.t.Fatalf("waiting for the feedback of %s: %v", h.runID, err)
	}
	return time.Since(start)
}

func BenchmarkRoundOverhead(b *testing.B) {
	h := newHarness(b, 1)
	h.standard(1, 4)
	h.runToolAnswerer()
	model := h.benchAuditor()
	var wall time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		h.newRun(fmt.Sprintf("bench-%d-%d", b.N, i), 1, "/tmp/w")
		b.StartTimer()
		wall += h.round(1)
	}
	b.StopTimer()
	busy := model.total()
	n := float64(b.N)
	b.ReportMetric(float64(wall.Microseconds())/1e3/n, "wall-ms/round")
	b.ReportMetric(float64(busy.Microseconds())/1e3/n, "model-ms/round")
	b.ReportMetric(float64((wall-busy).Microseconds())/1e3/n, "overhead-ms/round")
	b.ReportMetric(float64(h.srv.Count())/n, "model-calls/round")
}

// threeChecks scripts round 1 with three independent checks, and round 2
// with the longest of them alone (r2-c1); step gives a check's replies.
func (h *harness) threeChecks(step func(id string, d time.Duration) []string) {
	h.standard(1, 4)
	h.standard(2, 4)
	h.sc.mu.Lock()
	defer h.sc.mu.Unlock()
	h.sc.decompose[1] = `{"summary":[],"likely_errors":[],"checks":[` +
		`{"source":"` + urlPy + `","question":"A?"},{"source":"` + urlWiki + `","question":"B?"},{"source":"` + urlPy + `","question":"C?"}]}`
	h.sc.decompose[2] = `{"summary":[],"likely_errors":[],"checks":[{"source":"` + urlPy + `","question":"C?"}]}`
	for i, d := range checkDurations {
		h.sc.checks[CheckID(1, i+1)] = step(CheckID(1, i+1), d)
	}
	h.sc.checks[CheckID(2, 1)] = step(CheckID(2, 1), longestCheck)
}

// checkDurations are the three checks' times in RoundParallelChecks.
var checkDurations = []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 1000 * time.Millisecond}

var longestCheck = checkDurations[len(checkDurations)-1]

const benchVerdict = `{"verdict":"yes","evidence":"seen","citations":["` + urlPy + `","` + urlWiki + `"]}`

func BenchmarkRoundParallelChecks(b *testing.B) {
	b.Run("model-delays", func(b *testing.B) {
		h := newHarness(b, 1)
		h.sc.delays = map[string]time.Duration{}
		h.threeChecks(func(id string, d time.Duration) []string {
			h.sc.delays[id] = d
			return []string{benchVerdict}
		})
		h.runToolAnswerer()
		h.benchAuditor()
		benchParallel(b, h, func() { h.newRun(fmt.Sprintf("bench-md-%d", time.Now().UnixNano()), 2, "/tmp/w") })
	})
	b.Run("sandbox-sleeps", func(b *testing.B) {
		h := newHarness(b, 1)
		h.threeChecks(func(_ string, d time.Duration) []string {
			return []string{fmt.Sprintf(`{"command":"sleep %.1f"}`, d.Seconds()), benchVerdict}
		})
		h.startSandbox()
		h.benchAuditor()
		benchParallel(b, h, func() {
			h.dockerRun(2)
			// The auditor's container is started before the round.
			h.publish(catalog.ToolRequested{RequestID: "warm-up", Requester: catalog.RequesterAuditor, Tool: catalog.ToolShell, Command: "true"})
			h.wait("the auditor's container", func(evs []bus.Event) bool { return toolFinished(evs, "warm-up") != nil })
		})
	})
}

// benchParallel times, on fresh runs made by newRun, the three-check round
// and the round of the longest check alone, and reports their ratio.
func benchParallel(b *testing.B, h *harness, newRun func()) {
	var wall, alone time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		newRun()
		b.StartTimer()
		wall += h.round(1)
		b.StopTimer()
		newRun()
		alone += h.round(2)
		if evs, err := h.b.ReadRun(context.Background(), h.runID); err != nil || len(payloads[catalog.AuditCheck](evs)) != 1 {
			b.Fatalf("the longest check alone: %d checks (%v)", len(payloads[catalog.AuditCheck](evs)), err)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(wall.Microseconds())/1e3/n, "wall-ms/round")
	b.ReportMetric(float64(alone.Microseconds())/1e3/n, "alone-ms/round")
	b.ReportMetric(wall.Seconds()/alone.Seconds(), "round/longest-check")
	b.ReportMetric(wall.Seconds()/(n*longestCheck.Seconds()), "round/longest-delay")
}
