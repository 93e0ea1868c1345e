package traces

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// Sink turns projected spans into OpenTelemetry SDK spans and hands them
// to an exporter. The SDK does the batching, the retries and the wire
// protocol; the sink only chooses the ids (the projection's, through the
// tracer provider's id generator) and the times (the events').
type Sink struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// SinkOptions tune a Sink.
type SinkOptions struct {
	// Resource describes the process; default: service.name "vera"
	// (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override it).
	Resource *resource.Resource
	// Sync exports each span before Emit returns (one export call per
	// span); otherwise spans are batched (the SDK's batch processor, which
	// blocks rather than drops when its queue is full, and sends a batch
	// at least every second unless OTEL_BSP_SCHEDULE_DELAY says otherwise).
	Sync bool
}

// MaxSpanEvents bounds the events of one span (the SDK's default is 128;
// a long run's root span has more).
const MaxSpanEvents = 10000

// NewSink returns a sink exporting through exp. Shutdown flushes it and
// shuts exp down.
func NewSink(exp sdktrace.SpanExporter, opts SinkOptions) (*Sink, error) {
	if exp == nil {
		return nil, errors.New("traces: a sink needs an exporter")
	}
	res := opts.Resource
	if res == nil {
		var err error
		if res, err = DefaultResource(); err != nil {
			return nil, err
		}
	}
	var proc sdktrace.SpanProcessor
	if opts.Sync {
		proc = sdktrace.NewSimpleSpanProcessor(exp)
	} else {
		bopts := []sdktrace.BatchSpanProcessorOption{sdktrace.WithBlocking(), sdktrace.WithMaxQueueSize(8192)}
		if os.Getenv("OTEL_BSP_SCHEDULE_DELAY") == "" {
			// The SDK waits up to 5 s to fill a batch; a run watched as it
			// happens wants its spans sooner.
			bopts = append(bopts, sdktrace.WithBatchTimeout(time.Second))
		}
		proc = sdktrace.NewBatchSpanProcessor(exp, bopts...)
	}
	limits := sdktrace.NewSpanLimits()
	limits.EventCountLimit = MaxSpanEvents
	limits.AttributeCountLimit = 256
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(proc),
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithIDGenerator(projectedIDs{}),
		sdktrace.WithRawSpanLimits(limits),
		sdktrace.WithResource(res),
	)
	return &Sink{tp: tp, tracer: tp.Tracer("github.com/vera-run/vera/projector/traces", trace.WithSchemaURL(semconv.SchemaURL))}, nil
}

// LogErrors sends the OpenTelemetry SDK's own errors (a backend that
// refuses or cannot be reached) to log instead of the standard logger,
// for the whole process: the SDK reports them through one global handler.
func LogErrors(log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("trace export", "err", err)
	}))
}

// DefaultResource is service.name "vera", overridden by
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES.
func DefaultResource() (*resource.Resource, error) {
	base := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("vera"))
	res, err := resource.Merge(base, resource.Environment())
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("traces: resource: %w", err)
	}
	return res, nil
}

// Emit exports the spans of trace tid.
func (s *Sink) Emit(ctx context.Context, tid trace.TraceID, spans []*Span) {
	for _, sp := range spans {
		sctx := context.WithValue(ctx, idsKey{}, ids{trace: tid, span: sp.ID})
		if sp.Parent != ([8]byte{}) {
			sctx = trace.ContextWithRemoteSpanContext(sctx, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: tid, SpanID: sp.Parent, TraceFlags: trace.FlagsSampled, Remote: true,
			}))
		}
		_, span := s.tracer.Start(sctx, sp.Name,
			trace.WithTimestamp(sp.Start), trace.WithSpanKind(sp.Kind), trace.WithAttributes(sp.Attrs...))
		for _, e := range sp.Events {
			span.AddEvent(e.Name, trace.WithTimestamp(e.Time), trace.WithAttributes(e.Attrs...))
		}
		if sp.Status != 0 {
			span.SetStatus(sp.Status, sp.StatusMessage)
		}
		end := sp.End
		if end.IsZero() {
			end = sp.Start
		}
		span.End(trace.WithTimestamp(end))
	}
}

// Flush exports every span emitted so far.
func (s *Sink) Flush(ctx context.Context) error { return s.tp.ForceFlush(ctx) }

// Shutdown flushes and stops the sink and its exporter.
func (s *Sink) Shutdown(ctx context.Context) error { return s.tp.Shutdown(ctx) }

// projectedIDs is the tracer provider's id generator: the ids the
// projection chose travel in the context of each Start.
type projectedIDs struct{}

type idsKey struct{}

type ids struct {
	trace trace.TraceID
	span  trace.SpanID
}

func (projectedIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.trace, v.span
	}
	var t trace.TraceID
	var s trace.SpanID
	_, _ = rand.Read(t[:])
	_, _ = rand.Read(s[:])
	return t, s
}

func (projectedIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if v, ok := ctx.Value(idsKey{}).(ids); ok {
		return v.span
	}
	var s trace.SpanID
	_, _ = rand.Read(s[:])
	return s
}

// ExporterConfig says where spans go. Empty fields are taken from the
// standard OpenTelemetry environment variables, which the SDK also reads
// for what is not here (OTEL_EXPORTER_OTLP_HEADERS,
// OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_EXPORTER_OTLP_CERTIFICATE...).
type ExporterConfig struct {
	// Endpoint is the OTLP base URL, e.g. http://127.0.0.1:4318 (HTTP) or
	// http://127.0.0.1:4317 (gRPC). For HTTP, /v1/traces is appended to
	// its path (unless it ends so already), as for
	// OTEL_EXPORTER_OTLP_ENDPOINT. Empty:
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as is), else
	// OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string
	// Protocol is "http/protobuf" or "grpc". Empty:
	// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
	// else http/protobuf.
	Protocol string
}

// ErrNoEndpoint is returned when no OTLP endpoint is configured.
var ErrNoEndpoint = errors.New("no OTLP endpoint: give --otlp-endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT")

// Configured reports whether an endpoint is given or set in the
// environment.
func (c ExporterConfig) Configured() bool {
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
}

func (c ExporterConfig) protocol() string {
	for _, p := range []string{c.Protocol, os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")} {
		if p != "" {
			return p
		}
	}
	return "http/protobuf"
}

// Describe says where spans go, for a log line (no headers: they may
// hold keys).
func (c ExporterConfig) Describe() string {
	ep := c.Endpoint
	switch {
	case ep != "":
	case os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "":
		ep = os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	default:
		ep = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	if u, err := url.Parse(ep); err == nil {
		u.User = nil
		ep = u.String()
	}
	return c.protocol() + " " + ep
}

// NewExporter returns the OTLP span exporter c describes.
func NewExporter(ctx context.Context, c ExporterConfig) (sdktrace.SpanExporter, error) {
	if !c.Configured() {
		return nil, ErrNoEndpoint
	}
	switch proto := c.protocol(); proto {
	case "http/protobuf", "http":
		var opts []otlptracehttp.Option
		if c.Endpoint != "" {
			u, err := endpointURL(c.Endpoint)
			if err != nil {
				return nil, err
			}
			if p := strings.TrimSuffix(u.Path, "/"); !strings.HasSuffix(p, "/v1/traces") {
				u.Path = p + "/v1/traces"
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("traces: OTLP/HTTP exporter: %w", err)
		}
		return exp, nil
	case "grpc":
		var opts []otlptracegrpc.Option
		if c.Endpoint != "" {
			u, err := endpointURL(c.Endpoint)
			if err != nil {
				return nil, err
			}
			opts = append(opts, otlptracegrpc.WithEndpointURL(u.String()))
		}
		exp, err := otlptracegrpc.New(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("traces: OTLP/gRPC exporter: %w", err)
		}
		return exp, nil
	default:
		return nil, fmt.Errorf("traces: OTLP protocol %q: use http/protobuf or grpc (http/json is not supported by the Go SDK)", proto)
	}
}

func endpointURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("traces: OTLP endpoint %q: want a URL such as http://127.0.0.1:4318", s)
	}
	return u, nil
}

// exportTimeout bounds a final flush.
const exportTimeout = 30 * time.Second
