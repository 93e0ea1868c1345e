package bus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
)

// Issue 26's quotas, on a real server with auth on. Before: VERA and
// VERA_DLQ had no size limit, ext grew the stream from 2.2 to 46 MB with
// valid vera.ext.* envelopes, and 7 MB of garbage became 9.6 MB of dead
// letters; a full disk stops every component's publish.

// TestExtBudgetPerRunAndIdentity: an ext identity's outside events are
// counted per run and identity by the server (VERA_EXT, max messages per
// subject vera.extin.<run>.<identity>, discard new per subject): past
// the budget a publish is refused with ErrExtBudget, and nothing more of
// that identity is stored on that run, while its other runs and other
// identities are not affected. An outside event is at most
// ExtMaxEventSize bytes.
func TestExtBudgetPerRunAndIdentity(t *testing.T) {
	s, store, _ := bustest.NewSecure(t)
	ctx := ctxT(t)
	// Admin sets a small budget (the streams are updated in place).
	admin := bustest.ConnectAs(t, s.ClientURL(), store, auth.Admin, bus.Options{ExtEventsPerRun: 3})
	if _, _, err := store.Issue("tool2", auth.RoleExt); err != nil {
		t.Fatal(err)
	}
	bustest.ReloadUsers(t, s, store)
	ext := bustest.ConnectAs(t, s.ClientURL(), store, auth.Ext, bus.Options{ReadOnly: true, ExtInbound: true, PublishBudget: time.Second})
	tool2 := bustest.ConnectAs(t, s.ClientURL(), store, "tool2", bus.Options{ReadOnly: true, ExtInbound: true, PublishBudget: time.Second})
	pub := func(b *bus.Bus, run string, n int) error {
		ev := mustEvent(t, b, run, note{N: n})
		_, err := b.Publish(ctx, ev)
		return err
	}
	for n := 1; n <= 3; n++ {
		if err := pub(ext, "x", n); err != nil {
			t.Fatalf("event %d of the budget: %v", n, err)
		}
	}
	err := pub(ext, "x", 4)
	if !errors.Is(err, bus.ErrExtBudget) || !bus.IsPermanent(err) || !strings.Contains(err.Error(), "per run and identity") {
		t.Fatalf("past the budget: %v, want a permanent ErrExtBudget naming the budget", err)
	}
	if err := pub(ext, "y", 1); err != nil {
		t.Errorf("another run: %v", err)
	}
	if err := pub(tool2, "x", 1); err != nil {
		t.Errorf("another identity on the same run: %v", err)
	}
	big := mustEvent(t, ext, "z", note{N: 1, Text: strings.Repeat("x", bus.ExtMaxEventSize)})
	if _, err := ext.Publish(ctx, big); !errors.Is(err, bus.ErrTooLarge) {
		t.Errorf("an outside event over %d bytes: %v", bus.ExtMaxEventSize, err)
	}
	// What is stored: 3 + 1 events on x (ext's and tool2's, on their
	// names), 1 on y.
	want := map[string]uint64{"vera.run.x.ext.ext": 3, "vera.run.x.ext.tool2": 1, "vera.run.y.ext.ext": 1}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, got := bustest.RawSubjects(t, admin, "vera.run.*.ext.>")
		if len(got) == len(want) && got["vera.run.x.ext.ext"] == 3 && got["vera.run.x.ext.tool2"] == 1 && got["vera.run.y.ext.ext"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored %v, want %v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Readers take them as ordinary events, by type.
	evs, err := admin.ReadRun(ctx, "x")
	if err != nil || len(evs) != 4 {
		t.Fatalf("run x: %d events, %v", len(evs), err)
	}
	n := 0
	for rec, err := range admin.Read(ctx, bus.ReadOptions{RunID: "x", Types: []string{"vera.ext.note"}}) {
		if err != nil || rec.Err != nil {
			t.Fatal(err, rec.Err)
		}
		n++
	}
	for rec, err := range admin.Read(ctx, bus.ReadOptions{RunID: "x", Types: []string{"vera.ext.other"}}) {
		t.Fatalf("a read of vera.ext.other got %v %v", rec.Event.Type, err)
	}
	if n != 4 {
		t.Errorf("a read of vera.ext.note got %d events, want 4", n)
	}
}

// countingHandler counts the log records whose message contains a word.
type countingHandler struct {
	slog.Handler
	mu   sync.Mutex
	word string
	n    int
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.word) {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
	}
	return nil
}
func (h *countingHandler) count() int { h.mu.Lock(); defer h.mu.Unlock(); return h.n }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *countingHandler) WithGroup(string) slog.Handler            { return h }

// TestStoreFullLosesNothing: with a small limit on VERA, a component's
// publish past it is refused at once with ErrStoreFull (not retried for
// the whole publish budget), said in one log line however many publishes
// are refused, and nothing already stored is dropped to make room. The
// dead letters, diagnostics, make room by dropping their oldest.
func TestStoreFullLosesNothing(t *testing.T) {
	s, store, _ := bustest.NewSecure(t)
	ctx := ctxT(t)
	admin := bustest.ConnectAs(t, s.ClientURL(), store, auth.Admin, bus.Options{Limits: bus.StoreLimits{Events: 64 << 10, DeadLetters: 32 << 10}})
	h := &countingHandler{Handler: slog.DiscardHandler, word: "store full"}
	agent := bustest.ConnectAs(t, s.ClientURL(), store, auth.Admin, bus.Options{Source: "agent", ReadOnly: true, Logger: slog.New(h), PublishBudget: 30 * time.Second})
	stored := 0
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		ev := mustEvent(t, agent, "r1", note{N: i, Text: strings.Repeat("e", 1000)})
		began := time.Now()
		if _, err := agent.Publish(ctx, ev); err != nil {
			if !errors.Is(err, bus.ErrStoreFull) || !strings.Contains(err.Error(), "nothing stored is lost") {
				t.Fatalf("publish %d: %v, want ErrStoreFull", i, err)
			}
			if time.Since(began) > 5*time.Second {
				t.Errorf("a refused publish took %s: it was retried", time.Since(began))
			}
			full = err
			break
		}
		stored++
	}
	if full == nil || stored < 20 {
		t.Fatalf("%d events stored, then %v", stored, full)
	}
	for i := 0; i < 20; i++ {
		if _, err := agent.Publish(ctx, mustEvent(t, agent, "r1", note{N: 5000 + i})); !errors.Is(err, bus.ErrStoreFull) {
			t.Fatalf("publish into a full store: %v", err)
		}
	}
	evs, err := admin.ReadRun(ctx, "r1")
	if err != nil || len(evs) != stored {
		t.Fatalf("%d events read, %d stored (%v)", len(evs), stored, err)
	}
	if evs[0].ID == "" || !bytes.Contains(mustMarshal(t, evs[0]), []byte(`"n":0`)) {
		t.Errorf("the first event is not the first stored: %+v", evs[0])
	}
	if n := h.count(); n != 1 {
		t.Errorf("%d log lines say the store is full, want 1", n)
	}
	// Dead letters of a full size limit keep coming: the oldest go.
	for i := 0; i < 200; i++ {
		dl, _ := json.Marshal(bus.DeadLetter{Reason: strings.Repeat("r", 500), Consumer: "c", Sequence: uint64(i)})
		if _, err := admin.PublishRaw(ctx, bus.DeadLetterSubject+".c.r1", "dl-"+strings.Repeat("x", 3)+string(rune('a'+i%26))+string(rune('a'+i/26)), dl); err != nil {
			t.Fatalf("dead letter %d: %v", i, err)
		}
	}
}

// TestDeadLetterCopyIsCapped: a dead letter carries at most
// DeadLetterCopyMax bytes of the rejected message (which stays in its
// stream at the dead letter's sequence).
func TestDeadLetterCopyIsCapped(t *testing.T) {
	_, b := bustest.New(t)
	garbage := bytes.Repeat([]byte("g"), 200<<10)
	if err := b.Conn().Publish("vera.run.p1.ext.note", garbage); err != nil {
		t.Fatal(err)
	}
	stop := consumeUntil(t, b, bus.ConsumerConfig{Durable: "big", MaxDeliver: 1},
		func(ctx context.Context, m *bus.Message) error { return nil })
	waitFor(t, "the dead letter", func() bool { return len(deadLetters(t, b)) == 1 })
	stop()
	dl := deadLetters(t, b)[0]
	if !dl.Truncated || dl.Size != len(garbage) || len(dl.DataBase64) != bus.DeadLetterCopyMax || dl.Data != nil {
		t.Fatalf("dead letter: truncated %v size %d copy %d bytes (data %d)", dl.Truncated, dl.Size, len(dl.DataBase64), len(dl.Data))
	}
}

func mustMarshal(t *testing.T, ev bus.Event) []byte {
	t.Helper()
	b, err := ev.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
