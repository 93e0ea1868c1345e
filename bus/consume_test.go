package bus_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
)

// consumeUntil runs Consume in the background and returns a stop function
// that cancels it and waits for it to return.
func consumeUntil(t *testing.T, b *bus.Bus, cfg bus.ConsumerConfig, h bus.Handler) (stop func()) {
	t.Helper()
	return bustest.Start(t, "Consume "+cfg.Durable, func(ctx context.Context) error { return b.Consume(ctx, cfg, h) })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func deadLetters(t *testing.T, b *bus.Bus) []bus.DeadLetter {
	t.Helper()
	ctx := ctxT(t)
	s, err := b.JetStream().Stream(ctx, bus.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []bus.DeadLetter
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		var dl bus.DeadLetter
		if err := json.Unmarshal(m.Data, &dl); err != nil {
			t.Fatal(err)
		}
		out = append(out, dl)
	}
	return out
}

func TestConsumeRedeliversAfterError(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	for i := 0; i < 5; i++ {
		if _, err := b.Publish(ctx, mustEvent(t, b, "c1", note{N: i})); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[int][]uint64{}
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "redeliver", Backoff: []time.Duration{20 * time.Millisecond}},
		func(ctx context.Context, m *bus.Message) error {
			var n note
			if err := m.Event.DecodeData(&n); err != nil {
				return bus.Permanent(err)
			}
			mu.Lock()
			seen[n.N] = append(seen[n.N], m.Delivered)
			mu.Unlock()
			if n.N == 3 && m.Delivered == 1 {
				return errors.New("transient failure")
			}
			return nil
		})
	waitFor(t, "all events handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 5 && len(seen[3]) == 2
	})
	stop()
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen[3]) != "[1 2]" {
		t.Errorf("event 3 deliveries %v, want [1 2]", seen[3])
	}
	for i := 0; i < 5; i++ {
		if i != 3 && len(seen[i]) != 1 {
			t.Errorf("event %d delivered %d times", i, len(seen[i]))
		}
	}
	if dl := deadLetters(t, b); len(dl) != 0 {
		t.Errorf("unexpected dead letters: %+v", dl)
	}
}

func TestConsumeDeadLetters(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	// A plain NATS client publishes garbage and a mismatched envelope.
	if err := b.Conn().Publish("vera.run.p1.ext.note", []byte("not json at all")); err != nil {
		t.Fatal(err)
	}
	mismatch := mustEvent(t, b, "p1", note{N: -1})
	raw, _ := mismatch.Marshal()
	if err := b.Conn().Publish("vera.run.other.ext.note", raw); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 2, 3, 4} {
		if _, err := b.Publish(ctx, mustEvent(t, b, "p1", note{N: n})); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	handled := map[int]int{}
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "poison", MaxDeliver: 3, Backoff: []time.Duration{10 * time.Millisecond}},
		func(ctx context.Context, m *bus.Message) error {
			var n note
			_ = m.Event.DecodeData(&n)
			mu.Lock()
			handled[n.N]++
			mu.Unlock()
			switch n.N {
			case 1:
				return bus.Permanent(errors.New("cannot handle one"))
			case 2:
				return errors.New("always failing")
			case 3:
				panic("boom")
			}
			return nil
		})
	waitFor(t, "dead letters", func() bool { return len(deadLetters(t, b)) == 5 })
	stop()
	reasons := map[string]bus.DeadLetter{}
	for _, dl := range deadLetters(t, b) {
		reasons[dl.Reason] = dl
		if dl.Consumer != "poison" || dl.Sequence == 0 || dl.Subject == "" {
			t.Errorf("incomplete dead letter %+v", dl)
		}
	}
	want := []string{"not a JSON envelope", "does not match subject", "cannot handle one", "failed 3 times, last error: always failing", "handler panic: boom"}
	for _, w := range want {
		found := false
		for r := range reasons {
			if strings.Contains(r, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no dead letter with reason containing %q; have %v", w, keys(reasons))
		}
	}
	for r, dl := range reasons {
		if strings.Contains(r, "not a JSON envelope") && string(dl.DataBase64) != "not json at all" {
			t.Errorf("garbage not kept in the dead letter: %+v", dl)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if handled[1] != 1 || handled[2] != 3 || handled[3] != 1 || handled[4] != 1 {
		t.Errorf("handled counts %v", handled)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestConsumeConcurrencyKeepsRunOrder(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	var evs []bus.Event
	for i := 0; i < 60; i++ {
		for r := 0; r < 5; r++ {
			evs = append(evs, mustEvent(t, b, fmt.Sprintf("run%d", r), note{N: i}))
		}
	}
	if _, err := b.PublishBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	last := map[string]int{}
	total := 0
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "conc", Concurrency: 4},
		func(ctx context.Context, m *bus.Message) error {
			var n note
			_ = m.Event.DecodeData(&n)
			mu.Lock()
			defer mu.Unlock()
			if prev, ok := last[m.Event.RunID]; ok && n.N != prev+1 {
				t.Errorf("run %s: %d after %d", m.Event.RunID, n.N, prev)
			}
			last[m.Event.RunID] = n.N
			total++
			return nil
		})
	waitFor(t, "300 events", func() bool { mu.Lock(); defer mu.Unlock(); return total == 300 })
	stop()
}

func TestConsumeTypesFilter(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	other, _ := b.Events.NewRaw("t1", "vera.ext.other", json.RawMessage(`{}`))
	for _, ev := range []bus.Event{mustEvent(t, b, "t1", note{N: 1}), other} {
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan string, 10)
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "typed", Types: []string{"vera.ext.other"}},
		func(ctx context.Context, m *bus.Message) error { got <- m.Event.Type; return nil })
	if typ := <-got; typ != "vera.ext.other" {
		t.Fatalf("got %s", typ)
	}
	stop()
	if len(got) != 0 {
		t.Fatalf("filtered consumer got %d more", len(got))
	}
}

func TestConsumeLongHandlerKeptInProgress(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	if _, err := b.Publish(ctx, mustEvent(t, b, "slow", note{N: 1})); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var deliveries []uint64
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "slow", AckWait: 300 * time.Millisecond},
		func(ctx context.Context, m *bus.Message) error {
			mu.Lock()
			deliveries = append(deliveries, m.Delivered)
			mu.Unlock()
			time.Sleep(1500 * time.Millisecond) // 5× AckWait
			return nil
		})
	time.Sleep(2500 * time.Millisecond)
	stop()
	mu.Lock()
	defer mu.Unlock()
	if len(deliveries) != 1 {
		t.Fatalf("a handler longer than AckWait was redelivered: %v", deliveries)
	}
}

func TestConsumeDrainsOnShutdown(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	if _, err := b.Publish(ctx, mustEvent(t, b, "drain", note{N: 1})); err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var finished bool
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "drain"},
		func(ctx context.Context, m *bus.Message) error {
			close(started)
			time.Sleep(300 * time.Millisecond)
			finished = ctx.Err() == nil
			return nil
		})
	<-started
	stop() // cancel while the handler runs: it must finish and be acked
	if !finished {
		t.Fatal("in-flight handler was cancelled instead of drained")
	}
	cons, err := b.JetStream().Consumer(ctx, bus.StreamName, "drain")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NumAckPending != 0 || info.AckFloor.Stream != 1 {
		t.Fatalf("after drain: ack pending %d, ack floor %d", info.NumAckPending, info.AckFloor.Stream)
	}
}

// TestConsumerResumesAfterKill9 runs the consumer in a child process, kills
// it with SIGKILL mid-stream, restarts it, and checks that it resumes where
// it left off: every event handled, at most the one in flight twice.
func TestConsumerResumesAfterKill9(t *testing.T) {
	srv, b := bustest.New(t)
	ctx := ctxT(t)
	const total = 60
	var evs []bus.Event
	for i := 0; i < total; i++ {
		evs = append(evs, mustEvent(t, b, "k9", note{N: i}))
	}
	if _, err := b.PublishBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "handled.txt")
	start := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "VERA_BUS_HELPER=consume", "NATS_URL="+srv.ClientURL(), "OUT="+out)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	lines := func() []int {
		data, _ := os.ReadFile(out)
		var ns []int
		for _, l := range strings.Fields(string(data)) {
			n, _ := strconv.Atoi(l)
			ns = append(ns, n)
		}
		return ns
	}
	first := start()
	waitFor(t, "first process to handle 20 events", func() bool { return len(lines()) >= 20 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	atKill := len(lines())

	second := start()
	waitFor(t, "every event handled", func() bool {
		seen := map[int]bool{}
		for _, n := range lines() {
			seen[n] = true
		}
		return len(seen) == total
	})
	_ = second.Process.Signal(syscall.SIGTERM)
	if err := second.Wait(); err != nil {
		t.Errorf("graceful stop after SIGTERM: %v", err)
	}
	ns := lines()
	if len(ns) > total+1 {
		t.Fatalf("restart re-handled %d events (handled %d before the kill)", len(ns)-total, atKill)
	}
	// One consumer handles in stream order; the event in flight at the kill
	// may come again right after, nothing else.
	var collapsed []int
	for i, n := range ns {
		if i == 0 || n != ns[i-1] {
			collapsed = append(collapsed, n)
		}
	}
	for i, n := range collapsed {
		if n != i {
			t.Fatalf("handled out of order or skipped: %v", ns)
		}
	}
}

// helperProcess is the child side of TestConsumerResumesAfterKill9.
func helperProcess() int {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	b, err := bus.Connect(ctx, bus.Options{URL: os.Getenv("NATS_URL"), Source: "helper", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer b.Close()
	f, err := os.OpenFile(os.Getenv("OUT"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer f.Close()
	w := bufio.NewWriter(f)
	err = b.Consume(ctx, bus.ConsumerConfig{Durable: "k9", AckWait: 2 * time.Second}, func(ctx context.Context, m *bus.Message) error {
		var n note
		if err := m.Event.DecodeData(&n); err != nil {
			return bus.Permanent(err)
		}
		fmt.Fprintln(w, n.N)
		if err := w.Flush(); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		time.Sleep(15 * time.Millisecond)
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestConsumeShardKey: with a ShardKey, events of one run but different
// keys are handled in parallel, each key in stream order, and a key whose
// handler is stuck holds up neither the other keys nor the dispatcher.
func TestConsumeShardKey(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	// One run; keys: "slow" for n == 0, "k1"/"k2" alternating otherwise.
	key := func(n int) string {
		switch {
		case n == 0:
			return "slow"
		case n%2 == 1:
			return "k1"
		default:
			return "k2"
		}
	}
	const total = 41
	var evs []bus.Event
	for i := 0; i < total; i++ {
		evs = append(evs, mustEvent(t, b, "one-run", note{N: i}))
	}
	if _, err := b.PublishBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	var mu sync.Mutex
	last := map[string]int{}
	handled := 0
	var keyedSeen []string
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "sharded", Concurrency: 3,
		ShardKey: func(m *bus.Message) string {
			var n note
			if err := m.Event.DecodeData(&n); err != nil {
				t.Errorf("ShardKey got an unparsed event: %v", err)
			}
			k := key(n.N)
			mu.Lock()
			keyedSeen = append(keyedSeen, m.Event.ID)
			mu.Unlock()
			return k
		}},
		func(ctx context.Context, m *bus.Message) error {
			var n note
			if err := m.Event.DecodeData(&n); err != nil {
				return bus.Permanent(err)
			}
			if key(n.N) == "slow" {
				select { // stuck until every other event is handled
				case <-release:
				case <-ctx.Done():
				}
			}
			mu.Lock()
			defer mu.Unlock()
			k := key(n.N)
			if prev, ok := last[k]; ok && n.N <= prev {
				t.Errorf("key %s: %d after %d", k, n.N, prev)
			}
			last[k] = n.N
			handled++
			return nil
		})
	waitFor(t, "every event but the stuck one", func() bool { mu.Lock(); defer mu.Unlock(); return handled == total-1 })
	close(release)
	waitFor(t, "the stuck one", func() bool { mu.Lock(); defer mu.Unlock(); return handled == total })
	stop()
	if len(keyedSeen) != total {
		t.Errorf("ShardKey called %d times, want %d (once per delivery)", len(keyedSeen), total)
	}
}

// TestConsumeShardKeyParallel: three events of one run, each its own key,
// are in the handler at the same time (keyed by run they would queue).
func TestConsumeShardKeyParallel(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	for i := 0; i < 3; i++ {
		if _, err := b.Publish(ctx, mustEvent(t, b, "par", note{N: i})); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	inFlight, peak, done := 0, 0, 0
	all := make(chan struct{})
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "perevent", Concurrency: 4,
		ShardKey: func(m *bus.Message) string { return m.Event.ID }},
		func(ctx context.Context, m *bus.Message) error {
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			if inFlight == 3 {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(5 * time.Second):
			}
			mu.Lock()
			inFlight--
			done++
			mu.Unlock()
			return nil
		})
	waitFor(t, "three events", func() bool { mu.Lock(); defer mu.Unlock(); return done == 3 })
	stop()
	if peak != 3 {
		t.Fatalf("at most %d handlers at once, want 3", peak)
	}
}

func TestConsumerDrained(t *testing.T) {
	_, b := bustest.New(t)
	ctx := ctxT(t)
	if ok, err := b.ConsumerDrained(ctx, "nobody"); err != nil || ok {
		t.Fatalf("absent consumer: drained %v, %v", ok, err)
	}
	release := make(chan struct{})
	consumeUntil(t, b, bus.ConsumerConfig{Durable: "slow"}, func(ctx context.Context, m *bus.Message) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})
	waitFor(t, "the consumer", func() bool { _, err := b.JetStream().Consumer(ctx, bus.StreamName, "slow"); return err == nil })
	if _, err := b.Publish(ctx, mustEvent(t, b, "r1", note{N: 1})); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if ok, err := b.ConsumerDrained(ctx, "slow"); err != nil || ok {
		t.Fatalf("while the handler runs: drained %v, %v", ok, err)
	}
	close(release)
	waitFor(t, "drained", func() bool { ok, err := b.ConsumerDrained(ctx, "slow"); return err == nil && ok })
}
