package bus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

func TestMain(m *testing.M) {
	if os.Getenv("VERA_BUS_HELPER") != "" {
		os.Exit(helperProcess())
	}
	goleak.VerifyTestMain(m, bustest.LeakIgnores...)
}

type note struct {
	N    int    `json:"n"`
	Text string `json:"text,omitempty"`
}

func (note) EventType() string { return "vera.ext.note" }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustEvent(t testing.TB, b *bus.Bus, run string, p bus.Payload, opts ...bus.EventOption) bus.Event {
	t.Helper()
	ev, err := b.Events.New(run, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestStreamsConfigured(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	s, err := b.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if cfg.Storage != jetstream.FileStorage || !cfg.DenyDelete || !cfg.DenyPurge || cfg.Duplicates != bus.DefaultDedupWindow ||
		cfg.MaxMsgSize != bus.DefaultMaxMsgSize || len(cfg.Subjects) != 1 || cfg.Subjects[0] != "vera.run.>" {
		t.Fatalf("unexpected stream config: %+v", cfg)
	}
	if err := s.Purge(ctx); err == nil {
		t.Error("purge allowed on the event stream")
	}
	if _, err := b.JetStream().Stream(ctx, bus.DeadLetterStream); err != nil {
		t.Fatalf("dead-letter stream: %v", err)
	}
	// EnsureStreams is idempotent.
	if err := b.EnsureStreams(ctx); err != nil {
		t.Fatal(err)
	}
	// A connection with other settings updates the stream.
	srvURL := b.Conn().ConnectedUrl()
	other := bustest.Connect(t, srvURL, bus.Options{DedupWindow: 5 * time.Minute})
	s, err = other.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Duplicates; got != 5*time.Minute {
		t.Errorf("dedup window after reconnecting with 5m = %v", got)
	}
}

func TestPublishDedup(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	ev := mustEvent(t, b, "r1", note{N: 1})
	a1, err := b.Publish(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := b.Publish(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if a1.Duplicate || !a2.Duplicate || a1.Sequence != a2.Sequence {
		t.Fatalf("dedup failed: %+v %+v", a1, a2)
	}
	evs, err := b.ReadRun(ctx, "r1")
	if err != nil || len(evs) != 1 {
		t.Fatalf("stored %d events (%v), want 1", len(evs), err)
	}
	// A reaction derived from its cause lands once however often it is made.
	r1 := mustEvent(t, b, "r1", note{N: 2}, bus.ReactionTo(ev, "reply"))
	r2 := mustEvent(t, b, "r1", note{N: 2}, bus.ReactionTo(ev, "reply"))
	if _, err := b.Publish(ctx, r1); err != nil {
		t.Fatal(err)
	}
	if a, err := b.Publish(ctx, r2); err != nil || !a.Duplicate {
		t.Fatalf("derived reaction not deduplicated: %+v %v", a, err)
	}
}

func TestPublishRejectsBadAndHuge(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	bad := mustEvent(t, b, "r1", note{N: 1})
	bad.Type = "nope"
	if _, err := b.Publish(ctx, bad); !errors.Is(err, bus.ErrInvalidEvent) {
		t.Fatalf("bad event: %v", err)
	}
	huge := mustEvent(t, b, "r1", note{Text: string(make([]byte, 2<<20))})
	if _, err := b.Publish(ctx, huge); !errors.Is(err, bus.ErrTooLarge) {
		t.Fatalf("huge event: %v", err)
	}
}

func TestFencingSingleNode(t *testing.T) {
	_, b := bustest.New(t)
	testFencing(t, b)
}

func TestFencingCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test skipped in -short mode")
	}
	c := bustest.StartCluster(t, 3)
	b := bustest.Connect(t, c.URL(), bus.Options{Replicas: 3})
	testFencing(t, b)
}

func testFencing(t *testing.T, b *bus.Bus) {
	ctx := ctxT(t)
	filter := "vera.run.f1.ext.>"
	seq, err := b.LastSequence(ctx, filter)
	if err != nil || seq != 0 {
		t.Fatalf("LastSequence of empty filter = %d, %v", seq, err)
	}
	first, err := b.Publish(ctx, mustEvent(t, b, "f1", note{N: 1}), bus.ExpectLastSequence(filter, 0))
	if err != nil {
		t.Fatalf("first fenced publish: %v", err)
	}
	// Two writers both believe the last sequence is `first`: one wins.
	var wins, conflicts atomic.Int32
	var codes sync.Map
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := b.Publish(ctx, mustEvent(t, b, "f1", note{N: 10 + i}), bus.ExpectLastSequence(filter, first.Sequence))
			var ce *bus.ConflictError
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, bus.ErrConflict) && errors.As(err, &ce):
				conflicts.Add(1)
				codes.Store(ce.Code, true)
			default:
				t.Errorf("writer %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != 1 {
		t.Fatalf("wins=%d conflicts=%d, want 1 and 1", wins.Load(), conflicts.Load())
	}
	codes.Range(func(k, _ any) bool {
		if c := k.(int); c != 10071 && c != 10164 {
			t.Errorf("conflict code %d", c)
		}
		return true
	})
	// Fencing on the event's own subject.
	ev := mustEvent(t, b, "f1", note{N: 99})
	last, _ := b.LastSequence(ctx, "vera.run.f1.ext.note")
	if _, err := b.Publish(ctx, ev, bus.ExpectLastSequence("", last)); err != nil {
		t.Fatalf("own-subject fence: %v", err)
	}
	if _, err := b.Publish(ctx, mustEvent(t, b, "f1", note{N: 100}), bus.ExpectLastSequence("", last)); !errors.Is(err, bus.ErrConflict) {
		t.Fatalf("stale own-subject fence: %v", err)
	}
	// A retry of an accepted fenced publish is a duplicate, not a conflict.
	if a, err := b.Publish(ctx, ev, bus.ExpectLastSequence("", last)); err != nil || !a.Duplicate {
		t.Fatalf("retry of fenced publish: %+v %v", a, err)
	}
}

func TestPublishBatch(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	var evs []bus.Event
	for i := 0; i < 500; i++ {
		evs = append(evs, mustEvent(t, b, "batch", note{N: i}))
	}
	acks, err := b.PublishBatch(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(acks); i++ {
		if acks[i].Sequence <= acks[i-1].Sequence {
			t.Fatalf("acks out of order at %d", i)
		}
	}
	// Again: all duplicates, nothing appended.
	acks2, err := b.PublishBatch(ctx, evs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range acks2 {
		if !acks2[i].Duplicate {
			t.Fatalf("event %d appended twice", i)
		}
	}
	got, _ := b.ReadRun(ctx, "batch")
	if len(got) != 500 {
		t.Fatalf("stored %d, want 500", len(got))
	}
	for i, ev := range got {
		var n note
		if err := ev.DecodeData(&n); err != nil || n.N != i {
			t.Fatalf("event %d out of order: %+v %v", i, n, err)
		}
	}
}

// TestCatchUpReadCrossesToAConsumer: a read of one run from a sequence
// gets its first messages one by one and the rest through an ordered
// consumer, in order, each once.
func TestCatchUpReadCrossesToAConsumer(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	var first uint64
	for i := range 100 {
		for _, run := range []string{"a", "b"} {
			ack, err := b.Publish(ctx, mustEvent(t, b, run, note{N: i}))
			if err != nil {
				t.Fatal(err)
			}
			if i == 10 && run == "a" {
				first = ack.Sequence
			}
		}
	}
	want := 10
	var last uint64
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: "a", FromSeq: first}) {
		if err != nil {
			t.Fatal(err)
		}
		var n note
		if err := rec.Event.DecodeData(&n); err != nil || rec.Event.RunID != "a" {
			t.Fatalf("record %+v: %v", rec, err)
		}
		if n.N != want || rec.Sequence <= last {
			t.Fatalf("got note %d at %d after %d, want note %d", n.N, rec.Sequence, last, want)
		}
		want, last = want+1, rec.Sequence
	}
	if want != 100 {
		t.Errorf("read up to note %d, want 99", want-1)
	}
}

func TestReadOptions(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	var seqs []uint64
	for i := 0; i < 10; i++ {
		run := fmt.Sprintf("run%d", i%2)
		a, err := b.Publish(ctx, mustEvent(t, b, run, note{N: i}))
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, a.Sequence)
	}
	count := func(o bus.ReadOptions) int {
		n := 0
		for rec, err := range b.Read(ctx, o) {
			if err != nil {
				t.Fatal(err)
			}
			if rec.Err != nil {
				t.Fatal(rec.Err)
			}
			n++
		}
		return n
	}
	if n := count(bus.ReadOptions{}); n != 10 {
		t.Errorf("all: %d", n)
	}
	if n := count(bus.ReadOptions{RunID: "run1"}); n != 5 {
		t.Errorf("run1: %d", n)
	}
	if n := count(bus.ReadOptions{FromSeq: seqs[6]}); n != 4 {
		t.Errorf("from seq: %d", n)
	}
	if n := count(bus.ReadOptions{FromSeq: seqs[6], RunID: "run1"}); n != 2 {
		t.Errorf("run1 from seq: %d", n)
	}
	if n := count(bus.ReadOptions{FromSeq: seqs[9] + 1, RunID: "run1"}); n != 0 {
		t.Errorf("run1 past the end: %d", n)
	}
	if n := count(bus.ReadOptions{RunID: "nope"}); n != 0 {
		t.Errorf("empty run: %d", n)
	}
	if n := count(bus.ReadOptions{Types: []string{"vera.tool.*"}}); n != 0 {
		t.Errorf("type filter: %d", n)
	}
	if n := count(bus.ReadOptions{FromTime: time.Now().Add(time.Hour)}); n != 0 {
		t.Errorf("from future time: %d", n)
	}

	// Follow sees events published after it started and stops with ctx.
	fctx, cancel := context.WithCancel(ctx)
	got := make(chan int, 100)
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for rec, err := range b.Read(fctx, bus.ReadOptions{RunID: "live", Follow: true}) {
			if err != nil {
				done <- err
				return
			}
			var n note
			_ = rec.Event.DecodeData(&n)
			got <- n.N
		}
	}()
	if _, err := b.Publish(ctx, mustEvent(t, b, "live", note{N: 42})); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-got:
		if n != 42 {
			t.Fatalf("followed %d", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not see a new event")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("follow ended with %v", err)
	}
}

func TestBlobs(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	ref, err := b.PutBlob(ctx, data, "application/octet-stream")
	if err != nil {
		t.Fatal(err)
	}
	if ref.Digest != bus.Digest(data) || ref.Size != int64(len(data)) {
		t.Fatalf("ref %+v", ref)
	}
	if _, err := b.PutBlob(ctx, data, ""); err != nil { // idempotent
		t.Fatal(err)
	}
	got, err := b.GetBlob(ctx, ref.Digest)
	if err != nil || len(got) != len(data) {
		t.Fatalf("get: %v (%d bytes)", err, len(got))
	}
	if ok, _ := b.HasBlob(ctx, ref.Digest); !ok {
		t.Fatal("HasBlob false")
	}
	if _, err := b.GetBlob(ctx, bus.Digest([]byte("absent"))); !errors.Is(err, bus.ErrBlobNotFound) {
		t.Fatalf("absent blob: %v", err)
	}
	if _, err := b.GetBlob(ctx, "md5:abc"); err == nil {
		t.Fatal("bad digest accepted")
	}
	// Sizes at the chunk edges, as the object store itself reads them.
	store, err := b.JetStream().ObjectStore(ctx, bus.BlobBucket)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 512 << 10, 1 << 20, 1<<20 + 1} {
		data := bytes.Repeat([]byte{byte(n)}, n)
		ref, err := b.PutBlob(ctx, data, "")
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		got, err := b.GetBlob(ctx, ref.Digest)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: got %d bytes, %v", n, len(got), err)
		}
		info, err := store.GetInfo(ctx, strings.TrimPrefix(ref.Digest, "sha256:"))
		if err != nil || info.Size != uint64(n) || info.Chunks != uint32((n+512<<10-1)/(512<<10)) {
			t.Fatalf("%d bytes: info %+v, %v", n, info, err)
		}
	}
	// A deleted blob is stored again, and the old chunks are gone.
	name := strings.TrimPrefix(ref.Digest, "sha256:")
	if err := store.Delete(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := b.PutBlob(ctx, data, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := b.GetBlob(ctx, ref.Digest); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after re-put: %d bytes, %v", len(got), err)
	}
	s, err := b.JetStream().Stream(ctx, "OBJ_"+bus.BlobBucket)
	if err != nil {
		t.Fatal(err)
	}
	si, err := s.Info(ctx, jetstream.WithSubjectFilter("$O."+bus.BlobBucket+".C.>"))
	if err != nil {
		t.Fatal(err)
	}
	var chunks uint64
	for _, n := range si.State.Subjects {
		chunks += n
	}
	// 6 chunks of the 3 MiB blob (once) + 0+1+1+2+3 of the edge sizes.
	if chunks != 6+7 {
		t.Errorf("%d chunks stored, want 13 (old copies purged)", chunks)
	}
}

// TestReadWhenNoConsumerIsLeft: another client took every consumer the
// stream allows; a read that ends (a component's catch-up read) still
// gets the whole run, by direct gets.
func TestReadWhenNoConsumerIsLeft(t *testing.T) {
	s := bustest.StartServer(t)
	ctx := ctxT(t)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	cfg := (bus.Options{}).StreamConfig()
	cfg.MaxConsumers = 2
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	b := bustest.Connect(t, s.ClientURL(), bus.Options{})
	for i := range 40 {
		if _, err := b.Publish(ctx, mustEvent(t, b, "r", note{N: i})); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := js.OrderedConsumer(ctx, bus.StreamName, jetstream.OrderedConsumerConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.OrderedConsumer(ctx, bus.StreamName, jetstream.OrderedConsumerConfig{}); !errors.Is(err, jetstream.ErrMaximumConsumersLimit) {
		t.Fatalf("a third consumer: %v, want the limit", err)
	}
	evs, err := b.ReadRun(ctx, "r")
	if err != nil {
		t.Fatalf("read with no consumer left: %v", err)
	}
	if len(evs) != 40 {
		t.Fatalf("read %d events, want 40", len(evs))
	}
}

// TestDirectReadCreatesNoConsumer: a Direct read returns what an ordered
// read returns, for one filter and several, and leaves the stream's
// consumer count as it was.
func TestDirectReadCreatesNoConsumer(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	for i := range 50 {
		run := fmt.Sprintf("d%d", i%2)
		if _, err := b.Publish(ctx, mustEvent(t, b, run, note{N: i})); err != nil {
			t.Fatal(err)
		}
		ev, _ := b.Events.NewRaw(run, "vera.ext.other", []byte(`{}`))
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	consumers := bustest.ConsumerCounter(t, b)
	before := consumers()
	for _, o := range []bus.ReadOptions{
		{RunID: "d0"},
		{RunID: "d0", Types: []string{"vera.ext.note"}},
		{Types: []string{"vera.ext.note", "vera.ext.other"}},
		{RunID: "d1", Types: []string{"vera.ext.other", "vera.ext.note"}, FromSeq: 40},
	} {
		var want, got []uint64
		for rec, err := range b.Read(ctx, o) {
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, rec.Sequence)
		}
		d := o
		d.Direct = true
		for rec, err := range b.Read(ctx, d) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rec.Sequence)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || len(want) == 0 {
			t.Errorf("%+v: direct read %v, ordered read %v", o, got, want)
		}
	}
	time.Sleep(100 * time.Millisecond)
	// The ordered reads' consumers go when their reads end; the direct
	// reads never made one.
	if n := consumers(); n > before {
		t.Logf("consumers %d → %d (ordered reads not yet cleaned up)", before, n)
	}
	n0 := consumers()
	for range 20 {
		for _, err := range b.Read(ctx, bus.ReadOptions{RunID: "d0", Direct: true}) {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := consumers(); n != n0 {
		t.Fatalf("20 direct reads changed the consumer count %d → %d", n0, n)
	}
}
