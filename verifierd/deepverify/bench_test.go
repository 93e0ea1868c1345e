package deepverify

// Benchmarks of an audit round, each round on a fresh run of its own (the
// auditor rebuilds a run's state from the stream on every delivery, so a
// run's size matters; a fresh run is the common case).
//
//	go test ./verifierd/deepverify -run '^$' -bench RoundOverhead -benchtime 50x
//	go test ./verifierd/deepverify -run '^$' -bench RoundParallelChecks -benchtime 5x
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
// started beforehand). It reports the round's wall time against its longest
// check (from its check_started to its audit.check), and against the longest
// delay itself: with the checks run concurrently end to end both stay near
// 1, where one after the other they would be near 1.9.

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
	c, err := models(catalog.ModelConfig{Name: "m"})
	if err != nil {
		h.t.Fatal(err)
	}
	bm := &busyModel{Completer: c}
	a := &Auditor{Bus: h.b, Logger: bustest.Logger(h.t),
		Models: func(catalog.ModelConfig) (llm.Completer, error) { return bm, nil }}
	bustest.Start(h.t, "auditor", a.Run)
	return bm
}

// round requests round 1 of the current run and returns the time until its
// feedback is on the stream.
func (h *harness) round() time.Duration {
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
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
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
		wall += h.round()
	}
	b.StopTimer()
	busy := model.total()
	n := float64(b.N)
	b.ReportMetric(float64(wall.Microseconds())/1e3/n, "wall-ms/round")
	b.ReportMetric(float64(busy.Microseconds())/1e3/n, "model-ms/round")
	b.ReportMetric(float64((wall-busy).Microseconds())/1e3/n, "overhead-ms/round")
	b.ReportMetric(float64(h.srv.Count())/n, "model-calls/round")
}

// checkDurations are the three checks' times in RoundParallelChecks.
var checkDurations = []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 1000 * time.Millisecond}

// threeChecks scripts round 1 with three independent checks.
func (h *harness) threeChecks(step func(i int, d time.Duration) []string) {
	h.standard(1, 4)
	h.sc.mu.Lock()
	defer h.sc.mu.Unlock()
	h.sc.decompose[1] = `{"summary":[],"likely_errors":[],"checks":[` +
		`{"source":"` + urlPy + `","question":"A?"},{"source":"` + urlWiki + `","question":"B?"},{"source":"` + urlPy + `","question":"C?"}]}`
	for i, d := range checkDurations {
		h.sc.checks[CheckID(1, i+1)] = step(i, d)
	}
}

const benchVerdict = `{"verdict":"yes","evidence":"seen","citations":["` + urlPy + `","` + urlWiki + `"]}`

func BenchmarkRoundParallelChecks(b *testing.B) {
	b.Run("model-delays", func(b *testing.B) {
		h := newHarness(b, 1)
		h.sc.delays = map[string]time.Duration{}
		h.threeChecks(func(i int, d time.Duration) []string {
			h.sc.delays[CheckID(1, i+1)] = d
			return []string{benchVerdict}
		})
		h.runToolAnswerer()
		h.benchAuditor()
		benchParallel(b, h, func(i int) { h.newRun(fmt.Sprintf("bench-md-%d-%d", b.N, i), 1, "/tmp/w") })
	})
	b.Run("sandbox-sleeps", func(b *testing.B) {
		h := newHarness(b, 1)
		h.threeChecks(func(i int, d time.Duration) []string {
			return []string{fmt.Sprintf(`{"command":"sleep %.1f"}`, d.Seconds()), benchVerdict}
		})
		h.startSandbox()
		h.benchAuditor()
		benchParallel(b, h, func(i int) {
			h.dockerRun(1)
			// The auditor's container is started before the round.
			h.publish(catalog.ToolRequested{RequestID: "warm-up", Requester: catalog.RequesterAuditor, Tool: catalog.ToolShell, Command: "true"})
			h.wait("the auditor's container", func(evs []bus.Event) bool { return toolFinished(evs, "warm-up") != nil })
		})
	})
}

// benchParallel times rounds on fresh runs made by setup, and reports the
// round's wall time against its longest check and its longest delay.
func benchParallel(b *testing.B, h *harness, setup func(i int)) {
	var wall, longest time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		setup(i)
		b.StartTimer()
		wall += h.round()
		b.StopTimer()
		evs, err := h.b.ReadRun(context.Background(), h.runID)
		if err != nil {
			b.Fatal(err)
		}
		started := map[string]time.Time{}
		var l time.Duration
		for _, ev := range evs {
			switch ev.Type {
			case catalog.TypeAuditCheckStarted:
				var d catalog.AuditCheckStarted
				if ev.DecodeData(&d) == nil {
					started[d.CheckID] = ev.Time
				}
			case catalog.TypeAuditCheck:
				var d catalog.AuditCheck
				if ev.DecodeData(&d) == nil {
					l = max(l, ev.Time.Sub(started[d.CheckID]))
				}
			}
		}
		if len(started) != len(checkDurations) {
			b.Fatalf("%d checks started, want %d", len(started), len(checkDurations))
		}
		longest += l
	}
	n := float64(b.N)
	b.ReportMetric(float64(wall.Microseconds())/1e3/n, "wall-ms/round")
	b.ReportMetric(float64(longest.Microseconds())/1e3/n, "longest-check-ms/round")
	b.ReportMetric(wall.Seconds()/longest.Seconds(), "round/longest-check")
	b.ReportMetric(wall.Seconds()/(n*checkDurations[len(checkDurations)-1].Seconds()), "round/longest-delay")
}
