package live_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bustest.LeakIgnores...) }

// collector gathers the pieces a subscription receives.
type collector struct {
	mu     sync.Mutex
	pieces []live.Piece
	got    chan struct{}
}

func newCollector() *collector { return &collector{got: make(chan struct{}, 1024)} }

func (c *collector) add(p live.Piece) {
	c.mu.Lock()
	c.pieces = append(c.pieces, p)
	c.mu.Unlock()
	c.got <- struct{}{}
}

func (c *collector) snapshot() []live.Piece {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]live.Piece(nil), c.pieces...)
}

// waitFor waits until the collector holds a piece satisfying ok.
func (c *collector) waitFor(t *testing.T, d time.Duration, ok func([]live.Piece) bool) []live.Piece {
	t.Helper()
	deadline := time.After(d)
	for {
		if ps := c.snapshot(); ok(ps) {
			return ps
		}
		select {
		case <-c.got:
		case <-deadline:
			t.Fatalf("timed out; pieces so far: %+v", c.snapshot())
		}
	}
}

func subscribe(t *testing.T, b *bus.Bus, run string) *collector {
	t.Helper()
	c := newCollector()
	sub, err := live.Subscribe(b.Conn(), run, c.add)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := b.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	return c
}

func done(ps []live.Piece) bool { return len(ps) > 0 && ps[len(ps)-1].Done }

// A reply of many small deltas arrives as few pieces, in order, whole,
// numbered from 1, the last marked done; its reasoning and tool call
// arguments travel beside the answer.
func TestPiecesBatchAReplyAndEnd(t *testing.T) {
	_, b := bustest.New(t)
	c := subscribe(t, b, "run-1")
	other := subscribe(t, b, "run-2")
	pub := live.NewPublisher(b.Conn(), live.Options{Interval: 20 * time.Millisecond, MaxBytes: 256, Logger: bustest.Logger(t)})
	defer pub.Close()
	sink := pub.Deltas("run-1", 3, "call-7")
	var content, reasoning strings.Builder
	for i := range 400 {
		r := "think " + string(rune('a'+i%26))
		reasoning.WriteString(r)
		sink(llm.Delta{Reasoning: r})
		w := "word" + string(rune('a'+i%26)) + " "
		content.WriteString(w)
		sink(llm.Delta{Content: w})
		if i%50 == 0 {
			time.Sleep(30 * time.Millisecond) // some batches end on the timer
		}
	}
	sink(llm.Delta{ToolName: "shell"})
	sink(llm.Delta{ToolArgs: `{"command":`})
	sink(llm.Delta{ToolArgs: `"ls"}`})
	sink(llm.Delta{}) // the end
	sink(llm.Delta{Content: "after the end"})

	ps := c.waitFor(t, 10*time.Second, done)
	var r live.Reply
	for _, p := range ps {
		if p.RunID != "run-1" || p.CallID != "call-7" || p.Step != 3 {
			t.Fatalf("piece %+v: want run-1, call-7, step 3", p)
		}
		r.Add(p)
	}
	if r.Missed || r.LastSeq != len(ps) {
		t.Fatalf("pieces not numbered 1..%d: last %d, missed %v", len(ps), r.LastSeq, r.Missed)
	}
	if r.Content != content.String() || r.Reasoning != reasoning.String() {
		t.Fatalf("content or reasoning differ from what was streamed:\n%q\n%q", r.Content, r.Reasoning)
	}
	if r.ToolArgs != `{"command":"ls"}` || len(r.ToolNames) != 1 || r.ToolNames[0] != "shell" {
		t.Fatalf("tool call: %v %q", r.ToolNames, r.ToolArgs)
	}
	if len(ps) > 100 || len(ps) < 2 {
		t.Fatalf("%d pieces for 803 deltas: want them batched (at most 256 bytes a piece)", len(ps))
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(c.snapshot()); n != len(ps) {
		t.Fatalf("%d pieces after the end, want none", n-len(ps))
	}
	if n := len(other.snapshot()); n != 0 {
		t.Fatalf("the subscriber of run-2 got %d pieces of run-1", n)
	}
}

// A piece waits at most the interval: a slow model's few words show up
// without the end of the reply.
func TestPendingTextIsPublishedWithinTheInterval(t *testing.T) {
	_, b := bustest.New(t)
	c := subscribe(t, b, "")
	pub := live.NewPublisher(b.Conn(), live.Options{Interval: 50 * time.Millisecond, Logger: bustest.Logger(t)})
	defer pub.Close()
	sink := pub.Deltas("slow", 1, "c1")
	start := time.Now()
	sink(llm.Delta{Content: "Thinking"})
	ps := c.waitFor(t, 5*time.Second, func(ps []live.Piece) bool { return len(ps) == 1 })
	if el := time.Since(start); el < 40*time.Millisecond || el > 2*time.Second {
		t.Fatalf("first piece after %v, want about the interval (50ms)", el)
	}
	if ps[0].Content != "Thinking" || ps[0].Done || ps[0].Seq != 1 || ps[0].RunID != "slow" {
		t.Fatalf("piece %+v", ps[0])
	}
}

// A batch that reaches MaxBytes is published at once, without waiting for
// the interval.
func TestFullBatchIsPublishedAtOnce(t *testing.T) {
	_, b := bustest.New(t)
	c := subscribe(t, b, "big")
	pub := live.NewPublisher(b.Conn(), live.Options{Interval: time.Hour, MaxBytes: 1000, Logger: bustest.Logger(t)})
	defer pub.Close()
	sink := pub.Deltas("big", 1, "c1")
	for range 11 {
		sink(llm.Delta{Content: strings.Repeat("x", 100)})
	}
	ps := c.waitFor(t, 5*time.Second, func(ps []live.Piece) bool { return len(ps) == 1 })
	if len(ps[0].Content) != 1000 {
		t.Fatalf("first piece holds %d bytes, want the 1000 that filled the batch", len(ps[0].Content))
	}
	// After Close nothing more goes out, not even the end.
	pub.Close()
	sink(llm.Delta{})
	time.Sleep(100 * time.Millisecond)
	if n := len(c.snapshot()); n != 1 {
		t.Fatalf("%d pieces after Close, want none", n-1)
	}
}

// Live pieces are never stored: their subject is outside every stream's
// subjects, and publishing them leaves the streams as they were.
func TestPiecesAreNotStored(t *testing.T) {
	_, b := bustest.New(t)
	subj, err := live.Subject("run-x")
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []struct {
		name     string
		subjects []string
	}{{"events", b.Options().StreamConfig().Subjects}, {"dead letters", b.Options().DeadLetterStreamConfig().Subjects}} {
		for _, s := range cfg.subjects {
			if bus.MatchSubject(s, subj) {
				t.Fatalf("the %s stream's subject %s takes %s", cfg.name, s, subj)
			}
		}
	}
	c := subscribe(t, b, "run-x")
	pub := live.NewPublisher(b.Conn(), live.Options{Logger: bustest.Logger(t)})
	defer pub.Close()
	sink := pub.Deltas("run-x", 1, "c1")
	sink(llm.Delta{Content: "hello"})
	sink(llm.Delta{})
	c.waitFor(t, 5*time.Second, done)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{bus.StreamName, bus.DeadLetterStream} {
		st, err := b.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs != 0 {
			t.Fatalf("stream %s holds %d messages after live pieces were published", name, info.State.Msgs)
		}
	}
}

func TestSubjectsAndBadInput(t *testing.T) {
	if s, err := live.Subject("01JNZ8Q6V3K4T5M2R8X9Y0ABCD"); err != nil || s != "vera.live.01JNZ8Q6V3K4T5M2R8X9Y0ABCD.model" {
		t.Fatalf("subject %q %v", s, err)
	}
	for _, bad := range []string{"", "a.b", "a*", ">"} {
		if _, err := live.Subject(bad); err == nil {
			t.Errorf("subject of run %q: no error", bad)
		}
	}
	if f, err := live.Filter(""); err != nil || f != "vera.live.*.model" {
		t.Fatalf("filter %q %v", f, err)
	}
	pub := live.NewPublisher(nil, live.Options{})
	if pub.Deltas("a.b", 1, "c") != nil {
		t.Fatal("a sink for an invalid run id")
	}
	for _, body := range []string{`nope`, `{"seq":1}`, `{"call_id":"c","seq":0}`} {
		if _, err := live.Decode("vera.live.r.model", []byte(body)); err == nil {
			t.Errorf("decode %s: no error", body)
		}
	}
}

// A viewer that joins late, or loses a piece, knows it.
func TestReplyNotesMissedPieces(t *testing.T) {
	var late live.Reply
	late.Add(live.Piece{CallID: "c", Seq: 3, Content: "c"})
	if !late.Missed || late.Content != "c" {
		t.Fatalf("late viewer: %+v", late)
	}
	var gap live.Reply
	gap.Add(live.Piece{CallID: "c", Seq: 1, Content: "a"})
	gap.Add(live.Piece{CallID: "c", Seq: 2, Content: "b"})
	if gap.Missed {
		t.Fatal("missed without a gap")
	}
	gap.Add(live.Piece{CallID: "c", Seq: 4, Content: "d", Done: true})
	if !gap.Missed || !gap.Done || gap.Content != "abd" || gap.LastSeq != 4 {
		t.Fatalf("gap: %+v", gap)
	}
}

// Through the real model client streaming from the scripted server over
// HTTP: what a viewer gathers from the live pieces is the reply the client
// returns (the record), reasoning and tool call arguments included, in far
// fewer messages than chunks.
func TestPiecesOfARealStreamedReply(t *testing.T) {
	_, b := bustest.New(t)
	content := strings.Repeat("The release notes say 2.0 shipped on 2024-03-01. ", 40)
	reasoning := strings.Repeat("Check the changelog first. ", 30)
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{
		Content: content, Reasoning: reasoning, ReasoningField: "reasoning_content", StreamChunks: 300, ChunkDelay: time.Millisecond,
		ToolCalls: []scriptedmodel.ToolCall{{Name: "shell", Arguments: `{"cmd":"curl -s https://example.org/changelog"}`}},
	}))
	client, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", Stream: true, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	c := subscribe(t, b, "real")
	pub := live.NewPublisher(b.Conn(), live.Options{Logger: bustest.Logger(t)})
	defer pub.Close()
	sink := pub.Deltas("real", 1, "call-1")
	resp, err := client.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "when?"}},
		Tools: []llm.Tool{{Name: "shell", Parameters: map[string]any{"type": "object"}}}, OnDelta: sink})
	if err != nil {
		t.Fatal(err)
	}
	sink(llm.Delta{})
	ps := c.waitFor(t, 10*time.Second, done)
	var r live.Reply
	for _, p := range ps {
		r.Add(p)
	}
	// The record's reasoning is trimmed (llm.Response); live pieces are
	// the raw stream.
	if r.Missed || r.Content != resp.Text || strings.TrimSpace(r.Reasoning) != resp.Reasoning || len(resp.ToolCalls) != 1 || r.ToolArgs != resp.ToolCalls[0].Arguments ||
		len(r.ToolNames) != 1 || r.ToolNames[0] != "shell" {
		t.Fatalf("live reply differs from the record:\nlive %+v\nrecord %+v", r, resp)
	}
	if resp.Text != content || resp.Reasoning != strings.TrimSpace(reasoning) {
		t.Fatalf("the client's reply is not the scripted one: %+v", resp)
	}
	if len(ps) > 40 {
		t.Fatalf("%d pieces for about 600 chunks: want them batched", len(ps))
	}
	t.Logf("%d bytes of reply and reasoning in %d live pieces", len(content)+len(reasoning), len(ps))
}

// BenchmarkDelta is the cost the agent pays per streamed chunk (a token
// or a few): appending it to the batch, and publishing a batch every
// DefaultMaxBytes or DefaultInterval on a real connection.
func BenchmarkDelta(b *testing.B) {
	_, bb := bustest.New(b)
	pub := live.NewPublisher(bb.Conn(), live.Options{Logger: bustest.Logger(b)})
	defer pub.Close()
	sink := pub.Deltas("bench", 1, "call-1")
	d := llm.Delta{Content: "token "}
	b.ReportAllocs()
	for b.Loop() {
		sink(d)
	}
	sink(llm.Delta{})
}
