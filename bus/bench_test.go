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
	"github.com/vera-run/vera/bus/catalog"
)

// The benchmarks measure the bus against raw nats.go jetstream calls on the
// same embedded server and stream (file storage, fsync on every write,
// authentication and permissions on: both legs connect as the agent, the
// identity that writes most of a run, and publish one of its types) in
// one run, and report ratio = bus time / raw time per event (lower is
// better; 1.0 is parity). Raw and bus legs alternate in chunks so that
// machine noise hits both alike.
//
//	go test ./bus -run '^$' -bench . -benchtime 5000x

// benchEvent is a typical small event: a policy reminder with a sentence
// of text.
type benchEvent struct{ catalog.PolicyTriggered }

func (benchEvent) EventType() string { return catalog.TypePolicyReminder }

var benchPayload = benchEvent{catalog.PolicyTriggered{
	Rule: catalog.RuleReminder, Step: 3, Effect: catalog.EffectNudge,
	Message: "a typical small event: a tool request or a policy nudge with a sentence of text",
}}

func benchBus(b *testing.B) *bus.Bus {
	s, store, _ := bustest.NewSecure(b)
	return bustest.ConnectAs(b, s.ClientURL(), store, catalog.ComponentAgent, bus.Options{})
}

// BenchmarkAuthenticationCost is the price of authentication and
// permissions themselves: raw jetstream publishes to an open server and
// to one that requires nkeys and checks the agent identity's permissions,
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

// BenchmarkExtInbound is what bounding outside tools costs them: an ext
// identity's event acknowledged by VERA_EXT and then sourced into VERA
// (bus.Options.ExtInbound), against the same event published straight
// into VERA (the path before VERA_EXT, as admin now), alternating in
// chunks of 100, each chunk on a run of its own (VERA_EXT keeps at most
// ExtEventsPerRun per run and identity). ratio is acknowledged time;
// visible-ns/event is until the whole chunk is readable in VERA.
func BenchmarkExtInbound(b *testing.B) {
	s, store, admin := bustest.NewSecure(b)
	ext := bustest.ConnectAs(b, s.ClientURL(), store, auth.Ext, bus.Options{ReadOnly: true, ExtInbound: true})
	ctx := context.Background()
	stream, err := admin.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		b.Fatal(err)
	}
	last := func() uint64 {
		info, err := stream.Info(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return info.State.LastSeq
	}
	var raw, ours, visible time.Duration
	b.ResetTimer()
	for done, k := 0, 0; done < b.N; k++ {
		chunk := min(100, b.N-done)
		run := fmt.Sprintf("bench-%d", k)
		t0 := time.Now()
		for i := 0; i < chunk; i++ {
			ev, _ := admin.Events.New(run, note{N: i, Text: "an outside tool's annotation"})
			if _, err := admin.Publish(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
		t1 := time.Now()
		want := last() + uint64(chunk)
		t2 := time.Now()
		for i := 0; i < chunk; i++ {
			ev, _ := ext.Events.New(run, note{N: i, Text: "an outside tool's annotation"})
			if _, err := ext.Publish(ctx, ev); err != nil {
				b.Fatal(err)
			}
		}
		t3 := time.Now()
		for last() < want {
			time.Sleep(200 * time.Microsecond)
		}
		t4 := time.Now()
		raw += t1.Sub(t0)
		ours += t3.Sub(t2)
		visible += t4.Sub(t2)
		done += chunk
	}
	report(b, raw, ours, b.N)
	b.ReportMetric(float64(visible.Nanoseconds())/float64(b.N), "visible-ns/event")
}
