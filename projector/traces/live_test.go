package traces_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector/traces"
)

// importLines stores lines [from, to) of the demo export file on b.
func importLines(t *testing.T, b *bus.Bus, from, to int) {
	t.Helper()
	raw, err := os.ReadFile("../../cmd/vera/demo/example-run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(nil, 64<<20)
	for i := 0; sc.Scan(); i++ {
		if i >= from && (to < 0 || i < to) {
			buf.Write(sc.Bytes())
			buf.WriteByte('\n')
		}
	}
	if _, err := b.Import(context.Background(), &buf, bus.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
}

// spanKey is what must be equal between a live and a recorded export.
func spanKey(id, parent [8]byte, name string, start, end time.Time, events int) string {
	return fmt.Sprintf("%x<-%x %s %s..%s events=%d", id, parent, name, start.UTC().Format(time.RFC3339Nano), end.UTC().Format(time.RFC3339Nano), events)
}

func exportedKeys(t *testing.T, stubs tracetest.SpanStubs, run string) []string {
	t.Helper()
	var keys []string
	for _, s := range stubs {
		if s.SpanContext.TraceID() != bus.TraceID(run) {
			t.Fatalf("span %s in trace %s, want the run's %x", s.Name, s.SpanContext.TraceID(), bus.TraceID(run))
		}
		keys = append(keys, spanKey(s.SpanContext.SpanID(), s.Parent.SpanID(), s.Name, s.StartTime, s.EndTime, len(s.Events)))
	}
	sort.Strings(keys)
	return keys
}

func projectedKeys(spans []*traces.Span) []string {
	var keys []string
	for _, s := range spans {
		keys = append(keys, spanKey(s.ID, s.Parent, s.Name, s.Start, s.End, len(s.Events)))
	}
	sort.Strings(keys)
	return keys
}

func startLive(t *testing.T, b *bus.Bus, exp sdktrace.SpanExporter) (stop func()) {
	t.Helper()
	sink, err := traces.NewSink(exp, traces.SinkOptions{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := traces.NewLive(b, traces.LiveConfig{Sink: sink, Hold: 500 * time.Millisecond, Logger: bustest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return bustest.Start(t, "live traces", l.Run)
}

func waitRoot(t *testing.T, exp *tracetest.InMemoryExporter) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range exp.GetSpans() {
			if s.Name == "invoke_agent vera" {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no root span exported within 30s (%d spans)", len(exp.GetSpans()))
}

// TestLiveEqualsRecorded: the live projector, fed the demo run through a
// real bus, exports the spans a recorded export makes: same ids, parents,
// names, times and events.
func TestLiveEqualsRecorded(t *testing.T) {
	_, b := bustest.New(t)
	run, evs := demoRun(t)
	exp := tracetest.NewInMemoryExporter()
	stop := startLive(t, b, exp)
	importLines(t, b, 0, -1)
	waitRoot(t, exp)
	stop()
	got := exportedKeys(t, exp.GetSpans(), run)
	want := projectedKeys(traces.Project(run, evs, traces.Options{}))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("live export differs from the recorded one:\nlive:\n%s\nrecorded:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLiveRestartMidRun: a projector stopped in the middle of a run and
// started again (same durable) rebuilds the open spans from the stream;
// together the two export every span once.
func TestLiveRestartMidRun(t *testing.T) {
	_, b := bustest.New(t)
	run, evs := demoRun(t)
	first := tracetest.NewInMemoryExporter()
	stop := startLive(t, b, first)
	importLines(t, b, 0, 40)
	deadline := time.Now().Add(30 * time.Second)
	for len(first.GetSpans()) < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	drained := func() bool { ok, _ := b.ConsumerDrained(context.Background(), "projector-otel"); return ok }
	for !drained() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if len(first.GetSpans()) < 3 {
		t.Fatalf("first projector exported %d spans", len(first.GetSpans()))
	}
	second := tracetest.NewInMemoryExporter()
	stop = startLive(t, b, second)
	importLines(t, b, 40, -1)
	waitRoot(t, second)
	stop()
	all := append(first.GetSpans(), second.GetSpans()...)
	got := exportedKeys(t, all, run)
	want := projectedKeys(traces.Project(run, evs, traces.Options{}))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after a restart the spans differ:\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLiveContentFromBlobStore: with content on, the live projector reads
// a model call's messages from the bus's object store.
func TestLiveContentFromBlobStore(t *testing.T) {
	_, b := bustest.New(t)
	ctx := context.Background()
	msgs := []byte(`[{"role":"system","content":"` + strings.Repeat("s", 100000) + `"},{"role":"user","content":"find it"}]`)
	ref, err := b.PutBlob(ctx, msgs, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	exp := tracetest.NewInMemoryExporter()
	sink, err := traces.NewSink(exp, traces.SinkOptions{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	l, err := traces.NewLive(b, traces.LiveConfig{Sink: sink, Hold: -1, Logger: bustest.Logger(t),
		Options: traces.Options{Content: true, Blob: func(d string) ([]byte, error) { return b.GetBlob(ctx, d) }}})
	if err != nil {
		t.Fatal(err)
	}
	stop := bustest.Start(t, "live traces", l.Run)
	defer stop()
	const run = "content-run"
	model := catalog.ModelConfig{BaseURL: "http://127.0.0.1:1234", Name: "m"}
	for _, p := range []bus.Payload{
		catalog.TaskSubmitted{SubmittedBy: "cli", RunConfig: catalog.RunConfig{Task: "t", WorkDir: "/w", Model: model}},
		catalog.ModelRequested{CallID: "c1", Scope: catalog.ScopeAgent, Step: 1, Model: "m", BaseURL: model.BaseURL, Attempt: 1, MessageCount: 2,
			MessagesBlob: &catalog.BlobRef{Digest: ref.Digest, Size: ref.Size, ContentType: ref.ContentType}},
		catalog.ModelResponded{CallID: "c1", Scope: catalog.ScopeAgent, Step: 1, Model: "m", Attempt: 1, FinishReason: "stop", Text: "ok"},
	} {
		ev, err := b.Events.New(run, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range exp.GetSpans() {
			if strings.HasPrefix(s.Name, "chat ") {
				for _, kv := range s.Attributes {
					if kv.Key == "gen_ai.input.messages" && strings.Contains(kv.Value.AsString(), "find it") {
						return
					}
				}
				t.Fatalf("chat span without the blob's messages: %v", s.Attributes)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no chat span exported")
}
