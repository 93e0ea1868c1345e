package dashboard

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// BenchmarkSSEDelivery measures the latency from publishing an event (just
// before Publish) to its arrival at each of 50 connected SSE clients of the
// run, against a plain NATS subscriber of the run's subjects on the same
// server in the same run (the raw baseline). Modes: serve (Serve: its hub,
// one stream reader fanned out, started with it) and handler (Handler
// alone: the first stream starts the hub). Reported: p50 and p99 of both,
// in microseconds, and ratio-p50/ratio-p99 = dashboard / raw.
//
//	go test -run '^$' -bench BenchmarkSSEDelivery -benchtime 300x ./projector/dashboard/
func BenchmarkSSEDelivery(b *testing.B) {
	for _, mode := range []string{"serve", "handler"} {
		b.Run(mode, func(b *testing.B) { benchDelivery(b, mode == "handler", 50) })
	}
}

func benchDelivery(b *testing.B, direct bool, n int) {
	e := startEnv(b, direct)
	const run = "bench-run"

	nc, err := nats.Connect(e.natsURL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	rawC := make(chan time.Time, 1024)
	sub, err := nc.Subscribe("vera.run."+run+".>", func(*nats.Msg) { rawC <- time.Now() })
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}

	clients := make([]*sseClient, n)
	for i := range clients {
		clients[i] = openSSE(b, e.url+"/api/runs/"+run+"/events", "")
		defer clients[i].close()
	}
	for _, c := range clients { // connected: the stream's opening comment
		select {
		case <-c.comments:
		case <-time.After(30 * time.Second):
			b.Fatal("an SSE client did not connect")
		}
	}
	ctx := context.Background()
	var dash, raw []time.Duration
	round := func(i int, record bool) {
		ev := mustEvent(b, e, run, note(fmt.Sprintf("bench %d", i)))
		t0 := time.Now()
		ack, err := e.pub.Publish(ctx, ev)
		if err != nil {
			b.Fatal(err)
		}
		select {
		case at := <-rawC:
			if record {
				raw = append(raw, at.Sub(t0))
			}
		case <-time.After(30 * time.Second):
			b.Fatal("raw subscriber got nothing")
		}
		for _, c := range clients {
			select {
			case got, ok := <-c.C:
				if !ok || got.seq != ack.Sequence {
					b.Fatalf("client got seq %d (open %v), want %d", got.seq, ok, ack.Sequence)
				}
				if record {
					dash = append(dash, got.at.Sub(t0))
				}
			case <-time.After(30 * time.Second):
				b.Fatal("an SSE client got nothing")
			}
		}
	}
	for i := range 20 { // warm up
		round(-i-1, false)
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		round(i, true)
		i++
	}
	b.StopTimer()
	dp50, dp99 := pct(dash, 50), pct(dash, 99)
	rp50, rp99 := pct(raw, 50), pct(raw, 99)
	b.ReportMetric(float64(n), "clients")
	b.ReportMetric(us(dp50), "sse-p50-µs")
	b.ReportMetric(us(dp99), "sse-p99-µs")
	b.ReportMetric(us(rp50), "raw-p50-µs")
	b.ReportMetric(us(rp99), "raw-p99-µs")
	b.ReportMetric(us(dp50)/us(rp50), "ratio-p50")
	b.ReportMetric(us(dp99)/us(rp99), "ratio-p99")
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, (len(s)*p+99)/100-1)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
