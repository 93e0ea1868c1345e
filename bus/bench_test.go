package bus_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
)

// The benchmarks measure the bus against raw nats.go jetstream calls on the
// same embedded server and stream (file storage, fsync on every write,
// authentication and permissions on: both legs connect as the ext
// identity, whose events vera.ext.note are) in one run, and report ratio = bus time / raw time per event (lower is
// better; 1.0 is parity). Raw and bus legs alternate in chunks so that
// machine noise hits both alike.
//
//	go test ./bus -run '^$' -bench . -benchtime 5000x

var benchPayload = note{N: 1, Text: "a typical small event: a tool request or a policy nudge with a sentence of text"}

func benchBus(b *testing.B) *bus.Bus {
	s, store, _ := bustest.NewSecure(b)
	return bustest.ConnectAs(b, s.ClientURL(), store, auth.Ext, bus.Options{})
}

// BenchmarkAuthenticationCost is the price of authentication and
// permissions themselves: raw jetstream publishes to an open server and
// to one that requires nkeys and checks the ext identity's permissions,
// alternating in chunks, in one run. ratio = authenticated / open.
func BenchmarkAuthenticationCost(b *testing.B) {
	_, open := bustest.New(b)
	secure := benchBus(b)
	ctx := context.Background()
	proto, _ := open.Events.New("bench", benchPayload)
	data, _ := proto.Marshal()
	subj, _ := proto.NATSSubject()
	var raw, ours time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		chunk := min(100, b.N-done)
		for _, leg := range []struct {
			js  jetstream.JetStream
			sum *time.Duration
		}{{open.JetStream(), &raw}, {secure.JetStream(), &ours}} {
			t0 := time.Now()
			for i := 0; i < chunk; i++ {
				if _, err := leg.js.Publish(ctx, subj, data, jetstream.WithMsgID(nuid.Next())); err != nil {
					b.Fatal(err)
				}
			}
			*leg.sum += time.Since(t0)
		}
		done += chunk
	}
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "open-ns/event")
	b.ReportMetric(float64(ours.Nanoseconds())/float64(b.N), "auth-ns/event")
	b.ReportMetric(float64(ours)/float64(raw), "ratio")
}

func report(b *testing.B, raw, ours time.Duration, n int) {
	b.ReportMetric(float64(raw.Nanoseconds())/float64(n), "raw-ns/event")
	b.ReportMetric(float64(ours.Nanoseconds())/float64(n), "bus-ns/event")
	b.ReportMetric(float64(ours)/float64(raw), "ratio")
}

func BenchmarkPublishSync(b *testing.B) {
	bb := benchBus(b)
	ctx := context.Background()
	js := bb.JetStream()
	proto, _ := bb.Events.New("bench", benchPayload)
	data, _ := proto.Marshal()
	subj, _ := proto.NATSSubject()
	var raw, ours time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		chunk := min(100, b.N-done)
		t0 := time.Now()
		for i := 0; i < chunk; i++ {
			if _, err := js.Publish(ctx, subj, data, jetstream.WithMsgID(nuid.Next())); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		for i := 0; i < chunk; i++ {
			ev, err := bb.Events.New("bench", benchPayload)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := bb.Publish(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now()
		raw += t1.Sub(t0)
		ours += t2.Sub(t1)
		done += chunk
	}
	report(b, raw, ours, b.N)
}

func BenchmarkPublishAsync(b *testing.B) {
	bb := benchBus(b)
	ctx := context.Background()
	js := bb.JetStream()
	proto, _ := bb.Events.New("bench", benchPayload)
	data, _ := proto.Marshal()
	subj, _ := proto.NATSSubject()
	const chunk = 500
	var raw, ours time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(chunk, b.N-done)
		t0 := time.Now()
		futures := make([]jetstream.PubAckFuture, n)
		for i := 0; i < n; i++ {
			f, err := js.PublishAsync(subj, data, jetstream.WithMsgID(nuid.Next()))
			if err != nil {
				b.Fatal(err)
			}
			futures[i] = f
		}
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		evs := make([]bus.Event, n)
		for i := range evs {
			evs[i], _ = bb.Events.New("bench", benchPayload)
		}
		if _, err := bb.PublishBatch(ctx, evs); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		raw += t1.Sub(t0)
		ours += t2.Sub(t1)
		done += n
	}
	report(b, raw, ours, b.N)
}

// fill stores n events of run "bench" and returns their count.
func fill(b *testing.B, bb *bus.Bus, n int) {
	b.Helper()
	ctx := context.Background()
	for done := 0; done < n; {
		k := min(1000, n-done)
		evs := make([]bus.Event, k)
		for i := range evs {
			evs[i], _ = bb.Events.New("bench", benchPayload)
		}
		if _, err := bb.PublishBatch(ctx, evs); err != nil {
			b.Fatal(err)
		}
		done += k
	}
}

func BenchmarkConsume(b *testing.B) {
	bb := benchBus(b)
	fill(b, bb, b.N)
	ctx := context.Background()
	b.ResetTimer()
	var raw, ours time.Duration
	for round := 0; round < 2; round++ { // raw, bus, raw, bus: each leg reads half
		// raw jetstream Consume with explicit ack
		t0 := time.Now()
		cons, err := bb.JetStream().CreateOrUpdateConsumer(ctx, bus.StreamName, jetstream.ConsumerConfig{
			Durable: fmt.Sprintf("raw%d", round), AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 256,
			FilterSubject: "vera.run.*.>",
		})
		if err != nil {
			b.Fatal(err)
		}
		var got atomic.Int64
		doneCh := make(chan struct{})
		cc, err := cons.Consume(func(m jetstream.Msg) {
			_ = m.Ack()
			if got.Add(1) == int64(b.N) {
				close(doneCh)
			}
		}, jetstream.PullMaxMessages(256))
		if err != nil {
			b.Fatal(err)
		}
		<-doneCh
		raw += time.Since(t0)
		cc.Stop()

		// the bus consumer: decode + validate the envelope, handler, ack
		t1 := time.Now()
		cctx, cancel := context.WithCancel(ctx)
		var n atomic.Int64
		busDone := make(chan struct{})
		go func() {
			_ = bb.Consume(cctx, bus.ConsumerConfig{Durable: fmt.Sprintf("bus%d", round)}, func(ctx context.Context, m *bus.Message) error {
				if n.Add(1) == int64(b.N) {
					close(busDone)
				}
				return nil
			})
		}()
		<-busDone
		ours += time.Since(t1)
		cancel()
	}
	report(b, raw, ours, 2*b.N)
}

func BenchmarkReplay(b *testing.B) {
	bb := benchBus(b)
	fill(b, bb, b.N)
	ctx := context.Background()
	b.ResetTimer()
	var raw, ours time.Duration
	for round := 0; round < 2; round++ {
		t0 := time.Now()
		oc, err := bb.JetStream().OrderedConsumer(ctx, bus.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{"vera.run.bench.>"}})
		if err != nil {
			b.Fatal(err)
		}
		it, err := oc.Messages(jetstream.PullMaxMessages(1000))
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			if _, err := it.Next(); err != nil {
				b.Fatal(err)
			}
		}
		it.Stop()
		raw += time.Since(t0)

		t1 := time.Now()
		n := 0
		for rec, err := range bb.Read(ctx, bus.ReadOptions{RunID: "bench"}) {
			if err != nil || rec.Err != nil {
				b.Fatal(err, rec.Err)
			}
			n++
		}
		if n != b.N {
			b.Fatalf("read %d of %d", n, b.N)
		}
		ours += time.Since(t1)
	}
	report(b, raw, ours, 2*b.N)
}
