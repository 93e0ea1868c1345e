package traces_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector/traces"
)

// benchRun is a run of steps agent steps, each with the events a real
// step has: a model call, the parsed step, a command with its evidence and
// ledger line, a note and a logic verdict (10 events, 3 spans per step).
func benchRun(b *bus.Bus, runID string, steps int) []bus.Event {
	var evs []bus.Event
	add := func(p bus.Payload) {
		ev, err := b.Events.New(runID, p)
		if err != nil {
			panic(err)
		}
		evs = append(evs, ev)
	}
	model := catalog.ModelConfig{BaseURL: "http://127.0.0.1:1234/v1", Name: "local-model"}
	add(catalog.TaskSubmitted{SubmittedBy: "bench", RunConfig: catalog.RunConfig{Task: "t", WorkDir: "/tmp/w", Model: model}})
	add(catalog.RunStarted{AgentID: "a", Config: catalog.RunConfig{Task: "t", WorkDir: "/tmp/w", Model: model}})
	for s := 1; s <= steps; s++ {
		call, req := fmt.Sprintf("call-agent-s%04d", s), fmt.Sprintf("req-s%04d", s)
		ev := fmt.Sprintf("ev_%04d", s)
		add(catalog.ModelRequested{CallID: call, Scope: catalog.ScopeAgent, Step: s, Model: model.Name, BaseURL: model.BaseURL, Attempt: 1, MessageCount: 3})
		add(catalog.ModelResponded{CallID: call, Scope: catalog.ScopeAgent, Step: s, Model: model.Name, Attempt: 1, LatencyMS: 900, FinishReason: "stop",
			Usage: catalog.TokenUsage{Prompt: 2000, Completion: 150, Total: 2150}, Text: "THOUGHT: look\nACTION: {}"})
		add(catalog.AgentStep{Step: s, Thought: "look", Action: "{}", ActionTool: "shell", Command: "ls /input", ModelCallID: call, RequestID: req})
		add(catalog.ToolRequested{RequestID: req, Requester: catalog.RequesterAgent, Tool: "shell", Command: "ls /input", Step: s})
		add(catalog.ToolStarted{RequestID: req, Container: "vera-x", ContainerID: "c", StartedAt: time.Now()})
		add(catalog.ToolFinished{RequestID: req, Requester: catalog.RequesterAgent, DurationMS: 40, Stdout: catalog.Output{Head: "a\nb\n", Bytes: 4}})
		add(catalog.EvidenceRecorded{EvidenceID: ev, RequestID: req, Step: s, Command: "ls /input", Excerpt: "a b"})
		add(catalog.LedgerMove{Step: s, MoveType: "read", Command: "ls /input", Outcome: "success", EvidenceID: ev, RequestID: req})
		add(catalog.NotesAppended{Step: s, Author: "agent", Text: "saw a and b"})
		add(catalog.LogicVerdict{Step: s, ThinkingEval: 1, ActionEval: 1, ThinkingEvalReason: "Different action.", VerifierType: "logic", DecidedBy: "logic"})
	}
	add(catalog.RunFinished{Outcome: catalog.OutcomeUnresolved, Reason: "bench", Steps: steps})
	return evs
}

// countingExporter records when each span reached it.
type countingExporter struct {
	mu     sync.Mutex
	n      int
	root   bool
	delays []time.Duration // export time - span end (the closing event's time)
}

func (c *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range spans {
		c.n++
		c.delays = append(c.delays, now.Sub(s.EndTime()))
		if s.Name() == "invoke_agent vera" {
			c.root = true
		}
	}
	return nil
}

func (c *countingExporter) Shutdown(context.Context) error { return nil }

func (c *countingExporter) done() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.root
}

func runLive(tb testing.TB, b *bus.Bus, exp sdktrace.SpanExporter, durable string, sync bool) (stop func()) {
	sink, err := traces.NewSink(exp, traces.SinkOptions{Sync: sync})
	if err != nil {
		tb.Fatal(err)
	}
	l, err := traces.NewLive(b, traces.LiveConfig{Sink: sink, Hold: -1, Durable: durable})
	if err != nil {
		tb.Fatal(err)
	}
	stopLive := bustest.Start(tb, "traces", l.Run)
	return func() {
		stopLive()
		sink.Shutdown(context.Background())
	}
}

// BenchmarkLiveTraces measures the live trace projector (the real durable
// consumer with its schema check, the fold, and the SDK handing each span
// to an in-process exporter that only counts) catching up on a stored run
// of 1000 steps (10 003 events, 2 001 spans), against a raw
// ordered-consumer read of the same events (nats.go, no parsing) on the
// same server in the same iteration. ratio = raw time / projector time.
// The SDK's batch processor that production uses adds its schedule delay
// (1 s) to the last batch, not to the rate.
func BenchmarkLiveTraces(b *testing.B) {
	var raw, live time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		// A server of its own: the projector's consumer starts at the
		// beginning of the stream, which holds this run alone.
		b.StopTimer()
		_, bb := bustest.New(b)
		b.StartTimer()
		runID := "bench-" + strconv.Itoa(i)
		evs := benchRun(bb, runID, 1000)
		if _, err := bb.PublishBatch(context.Background(), evs); err != nil {
			b.Fatal(err)
		}
		filter, _ := bus.FilterSubject(runID, "")
		t0 := time.Now()
		if got := bustest.RawRead(b, bb, filter); got != len(evs) {
			b.Fatalf("raw read %d of %d", got, len(evs))
		}
		t1 := time.Now()
		exp := &countingExporter{}
		stop := runLive(b, bb, exp, "bench-traces-"+strconv.Itoa(i), true)
		for !exp.done() {
			time.Sleep(time.Millisecond)
		}
		t2 := time.Now()
		stop()
		raw += t1.Sub(t0)
		live += t2.Sub(t1)
		n += len(evs)
	}
	b.ReportMetric(float64(n)/live.Seconds(), "live-events/s")
	b.ReportMetric(float64(n)/raw.Seconds(), "raw-events/s")
	b.ReportMetric(raw.Seconds()/live.Seconds(), "ratio")
}

// BenchmarkLiveTraceDelay publishes a run one event at a time while the
// projector runs (hold 0, each span exported as it ends, synchronously)
// and reports the delay from a span's closing event (its time, taken when
// it was published) to its export, at p50 and p99. In production add the
// hold (--otlp-hold, 2 s) and the batch processor's delay (1 s).
func BenchmarkLiveTraceDelay(b *testing.B) {
	var all []time.Duration
	for i := 0; b.Loop(); i++ {
		_, bb := bustest.New(b)
		runID := "delay-" + strconv.Itoa(i)
		exp := &countingExporter{}
		durable := "delay-traces-" + strconv.Itoa(i)
		stop := runLive(b, bb, exp, durable, true)
		// Publish only once the consumer exists, so that no delay counts
		// its creation.
		for {
			if _, err := bb.JetStream().Consumer(context.Background(), bus.StreamName, durable); err == nil {
				break
			}
			time.Sleep(time.Millisecond)
		}
		for _, ev := range benchRun(bb, runID, 100) {
			ev.Time = time.Now().UTC()
			if _, err := bb.Publish(context.Background(), ev); err != nil {
				b.Fatal(err)
			}
		}
		for !exp.done() {
			time.Sleep(time.Millisecond)
		}
		stop()
		all = append(all, exp.delays...)
	}
	slices.Sort(all)
	b.ReportMetric(float64(len(all))/float64(b.N), "spans/op")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkRecordedTraces is `vera events otel --run` on the same run of
// 1000 steps: read the run from the stream (bus.Read, envelopes parsed),
// fold it whole, hand every span to the SDK (a counting exporter), against
// the raw ordered-consumer read in the same iteration.
func BenchmarkRecordedTraces(b *testing.B) {
	_, bb := bustest.New(b)
	const runID = "recorded"
	evs := benchRun(bb, runID, 1000)
	if _, err := bb.PublishBatch(context.Background(), evs); err != nil {
		b.Fatal(err)
	}
	filter, _ := bus.FilterSubject(runID, "")
	exp := &countingExporter{}
	sink, err := traces.NewSink(exp, traces.SinkOptions{Sync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Shutdown(context.Background())
	var raw, rec time.Duration
	for b.Loop() {
		t0 := time.Now()
		bustest.RawRead(b, bb, filter)
		t1 := time.Now()
		spans, read, err := traces.ProjectFrom(runID, bus.ValidEvents(bb.Read(context.Background(), bus.ReadOptions{RunID: runID})), traces.Options{})
		if err != nil {
			b.Fatal(err)
		}
		sink.Emit(context.Background(), bus.TraceID(runID), spans)
		t2 := time.Now()
		if read != len(evs) {
			b.Fatalf("read %d of %d", read, len(evs))
		}
		raw += t1.Sub(t0)
		rec += t2.Sub(t1)
	}
	b.ReportMetric(float64(len(evs)*b.N)/rec.Seconds(), "export-events/s")
	b.ReportMetric(float64(len(evs)*b.N)/raw.Seconds(), "raw-events/s")
	b.ReportMetric(raw.Seconds()/rec.Seconds(), "ratio")
}
