package verifyfast

import (
	"context"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/scriptedmodel"
)

// BenchmarkBatchCriticalPath measures VerifyFast batch wall time against
// its critical-path limit. With a scripted model of fixed latency L and
// concurrency C, N items cannot finish faster than ceil(N/C) × 2L (per
// item: Phase 1, then Phases 2 and 3 in parallel). It reports the wall time
// of one batch, the limit and their ratio (aim ≤ 1.2):
//
//	go test -run '^$' -bench BatchCriticalPath -benchtime 5x ./verifierd/verifyfast/
func BenchmarkBatchCriticalPath(b *testing.B) {
	const (
		n = 40
		c = 8
		l = 50 * time.Millisecond
	)
	items := make([]Item, n)
	for i := range items {
		items[i] = Item{
			ID: ItemID(fmt.Sprint(i + 1)), Tag: TagClean, ExpectedCreditScore: 5, Line: i + 1,
			ContextInput: fmt.Sprintf("Context %d: sales rose 5%% in March.", i),
			ModelOutput:  fmt.Sprintf("Output %d: sales rose 5%% in March.", i),
		}
	}
	reply := func(content string) scriptedmodel.Reply {
		return scriptedmodel.Reply{Content: content, Delay: l, Times: scriptedmodel.Forever}
	}
	srv := scriptedmodel.Start(b, scriptedmodel.WithRules(
		scriptedmodel.OnTranscript(`TASK: DECOMPOSE`, reply(`{"facts": ["Sales rose 5% in March."], "chains": []}`)),
		scriptedmodel.OnTranscript(`TASK: FACT_CHECK`, reply(`{"findings": []}`)),
		scriptedmodel.OnTranscript(`TASK: LOGIC_CHECK`, reply(`{"findings": []}`)),
	))
	set := testSettings(b, srv.URL())
	cfg := BatchConfig{
		Items:       items,
		Profiles:    []string{"kimi-full"},
		Settings:    set,
		Strategy:    DefaultStrategy(),
		Completers:  completersFor(set),
		Concurrency: c,
		Out:         io.Discard,
	}
	limit := time.Duration(math.Ceil(float64(n)/float64(c))) * 2 * l

	// Warm the connection pool so the first iteration does not pay for
	// dialing.
	if _, err := RunBatch(context.Background(), cfg); err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	runs := 0
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		stats, err := RunBatch(context.Background(), cfg)
		total += time.Since(start)
		runs++
		if err != nil || stats.Scored != n {
			b.Fatalf("stats %+v, err %v", stats, err)
		}
	}
	wall := total / time.Duration(runs)
	b.ReportMetric(float64(wall.Milliseconds()), "wall-ms")
	b.ReportMetric(float64(limit.Milliseconds()), "limit-ms")
	b.ReportMetric(float64(wall)/float64(limit), "ratio")
}
