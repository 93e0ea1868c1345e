package jaegertest_test

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/vera-run/vera/internal/jaegertest"
)

// fixedIDs gives every span the same, known trace id and numbered span ids.
type fixedIDs struct {
	traceID trace.TraceID
	next    atomic.Uint64
}

func newFixedIDs() *fixedIDs {
	g := &fixedIDs{}
	rand.Read(g.traceID[:])
	return g
}

func (g *fixedIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	return g.traceID, g.NewSpanID(context.Background(), g.traceID)
}

func (g *fixedIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], 0xabc0000+g.next.Add(1))
	return s
}

func provider(t *testing.T, exp sdktrace.SpanExporter, ids sdktrace.IDGenerator, service string) *sdktrace.TracerProvider {
	t.Helper()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithIDGenerator(ids),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service), attribute.String("vera.test", t.Name()))),
	)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		tp.Shutdown(ctx)
	})
	return tp
}

func TestOTLPHTTPRoundTrip(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.OTLPHTTPEndpoint+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	ids := newFixedIDs()
	tp := provider(t, exp, ids, "jaegertest-http")
	tracer := tp.Tracer("vera/jaegertest")

	pctx, parent := tracer.Start(ctx, "parent", trace.WithSpanKind(trace.SpanKindServer))
	_, child := tracer.Start(pctx, "child", trace.WithAttributes(
		attribute.String("vera.key", "value"),
		attribute.Int64("vera.n", 42),
		attribute.Bool("vera.ok", true),
		attribute.StringSlice("vera.list", []string{"a", "b"}),
	))
	child.AddEvent("something happened", trace.WithAttributes(attribute.String("detail", "x")))
	child.SetStatus(codes.Error, "boom")
	child.End()
	parent.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}

	tid := ids.traceID.String()
	tr, err := j.WaitTrace(ctx, tid, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Spans) != 2 {
		t.Fatalf("want 2 spans, got %d: %+v", len(tr.Spans), tr.Spans)
	}
	ps, cs := tr.ByName("parent"), tr.ByName("child")
	if len(ps) != 1 || len(cs) != 1 {
		t.Fatalf("want one parent and one child, got %+v", tr.Spans)
	}
	p, c := ps[0], cs[0]
	if p.SpanID != parent.SpanContext().SpanID().String() || c.SpanID != child.SpanContext().SpanID().String() {
		t.Errorf("span ids: parent %s child %s, want %s and %s", p.SpanID, c.SpanID, parent.SpanContext().SpanID(), child.SpanContext().SpanID())
	}
	if p.TraceID != tid || c.TraceID != tid {
		t.Errorf("trace ids %s %s, want %s", p.TraceID, c.TraceID, tid)
	}
	if p.ParentSpanID != "" {
		t.Errorf("parent has parent %q", p.ParentSpanID)
	}
	if c.ParentSpanID != p.SpanID {
		t.Errorf("child's parent is %q, want %q", c.ParentSpanID, p.SpanID)
	}
	if got, ok := tr.Span(c.SpanID); !ok || got.Name != "child" {
		t.Errorf("Span(%s) = %+v, %v", c.SpanID, got, ok)
	}
	if kids := tr.Children(p.SpanID); len(kids) != 1 || kids[0].Name != "child" {
		t.Errorf("Children(parent) = %+v", kids)
	}
	if p.Kind != trace.SpanKindServer || c.Kind != trace.SpanKindInternal {
		t.Errorf("kinds %v %v, want server and internal", p.Kind, c.Kind)
	}
	if c.Attributes["vera.key"] != "value" || c.Attributes["vera.n"] != int64(42) || c.Attributes["vera.ok"] != true {
		t.Errorf("child attributes %v", c.Attributes)
	}
	if l, _ := c.Attributes["vera.list"].([]any); len(l) != 2 || l[0] != "a" || l[1] != "b" {
		t.Errorf("vera.list = %#v", c.Attributes["vera.list"])
	}
	if len(c.Events) != 1 || c.Events[0].Name != "something happened" || c.Events[0].Attributes["detail"] != "x" {
		t.Errorf("child events %+v", c.Events)
	} else if ev := c.Events[0].Time; ev.Before(c.Start) || ev.After(c.Start.Add(c.Duration)) {
		t.Errorf("event at %v, outside the span %v+%v", ev, c.Start, c.Duration)
	}
	if c.StatusCode != codes.Error || c.StatusMessage != "boom" {
		t.Errorf("child status %v %q, want Error boom", c.StatusCode, c.StatusMessage)
	}
	if p.Start.IsZero() || p.Duration <= 0 || time.Since(p.Start) > time.Minute {
		t.Errorf("parent start %v duration %v", p.Start, p.Duration)
	}
	if p.Service != "jaegertest-http" || p.Resource["vera.test"] != t.Name() || p.Scope != "vera/jaegertest" {
		t.Errorf("service %q resource %v scope %q", p.Service, p.Resource, p.Scope)
	}
}

func TestOTLPGRPC(t *testing.T) {
	j := jaegertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(j.OTLPGRPCEndpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	ids := newFixedIDs()
	tp := provider(t, exp, ids, "jaegertest-grpc")
	_, span := tp.Tracer("vera/jaegertest").Start(ctx, "over-grpc")
	span.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	tr, err := j.WaitTrace(ctx, ids.traceID.String(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Spans) != 1 || tr.Spans[0].Name != "over-grpc" || tr.Spans[0].Service != "jaegertest-grpc" {
		t.Fatalf("got %+v", tr.Spans)
	}
}

// TestTwoAtOnce: two Jaegers share no port and no storage.
func TestTwoAtOnce(t *testing.T) {
	a, b := jaegertest.Start(t), jaegertest.Start(t)
	for _, x := range []string{a.OTLPHTTPEndpoint, a.OTLPGRPCEndpoint, a.UIURL} {
		for _, y := range []string{b.OTLPHTTPEndpoint, b.OTLPGRPCEndpoint, b.UIURL} {
			if x == y {
				t.Fatalf("both use %s", x)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(a.OTLPHTTPEndpoint+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	ids := newFixedIDs()
	tp := provider(t, exp, ids, "jaegertest-two")
	_, span := tp.Tracer("vera/jaegertest").Start(ctx, "only-in-a")
	span.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WaitTrace(ctx, ids.traceID.String(), 1); err != nil {
		t.Fatal(err)
	}
	if tr, err := b.Trace(ctx, ids.traceID.String()); err == nil {
		t.Fatalf("the other Jaeger has the trace: %+v", tr)
	}

	// The UI is served too.
	resp, err := http.Get(b.UIURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("UI: %s", resp.Status)
	}
}

func TestParseTrace(t *testing.T) {
	body := `{"result":{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"svc"}}]},
	"scopeSpans":[{"scope":{"name":"sc"},"spans":[{"traceId":"000000000000000000000000000000AB","spanId":"0000000000000002",
	"parentSpanId":"0000000000000001","name":"n","kind":3,"startTimeUnixNano":"1000000000","endTimeUnixNano":1500000000,
	"attributes":[{"key":"i","value":{"intValue":"7"}},{"key":"d","value":{"doubleValue":1.5}},{"key":"b","value":{"bytesValue":"aGk="}},
	{"key":"kv","value":{"kvlistValue":{"values":[{"key":"x","value":{"boolValue":false}}]}}}],
	"events":[{"timeUnixNano":"1200000000","name":"e"}],"status":{"code":1}}]}]}]}}`
	tr, err := jaegertest.ParseTrace("AB", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	s := tr.Spans[0]
	if s.TraceID != "000000000000000000000000000000ab" || s.ParentSpanID != "0000000000000001" || s.Kind != trace.SpanKindClient ||
		s.Duration != 500*time.Millisecond || s.Start.UnixNano() != 1e9 || s.StatusCode != codes.Ok || s.Service != "svc" || s.Scope != "sc" {
		t.Errorf("span %+v", s)
	}
	if s.Attributes["i"] != int64(7) || s.Attributes["d"] != 1.5 || string(s.Attributes["b"].([]byte)) != "hi" ||
		s.Attributes["kv"].(map[string]any)["x"] != false {
		t.Errorf("attributes %#v", s.Attributes)
	}
	if len(s.Events) != 1 || s.Events[0].Name != "e" || s.Events[0].Time.UnixNano() != 1.2e9 {
		t.Errorf("events %+v", s.Events)
	}
}
