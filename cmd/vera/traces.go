package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/projector/traces"
)

// traceFlags are the OTLP trace export settings of `vera up`, `vera
// projector` and `vera events otel`.
type traceFlags struct {
	endpoint, protocol string
	content            bool
	hold               time.Duration
}

func (f *traceFlags) register(cmd *cobra.Command, live bool) {
	cmd.Flags().StringVar(&f.endpoint, "otlp-endpoint", "", "OTLP base URL of a trace backend, e.g. http://127.0.0.1:4318 (Jaeger, Tempo, an OTel collector...); empty = OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT"+map[bool]string{true: ", else no trace export", false: ""}[live])
	cmd.Flags().StringVar(&f.protocol, "otlp-protocol", "", "http/protobuf or grpc; empty = OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf")
	cmd.Flags().BoolVar(&f.content, "otel-content", envTrue("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"), "record message content in spans: model messages and replies, commands and their output, thoughts, notes, answers (off by default: they may be sensitive; env OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)")
	if live {
		cmd.Flags().DurationVar(&f.hold, "otlp-hold", 2*time.Second, "how long an ended span waits for late events (the step after its model call, the evidence after its command, verdicts) before export")
	}
}

func envTrue(name string) bool {
	v, err := strconv.ParseBool(os.Getenv(name))
	return err == nil && v
}

func (f *traceFlags) exporter() traces.ExporterConfig {
	return traces.ExporterConfig{Endpoint: f.endpoint, Protocol: f.protocol}
}

// set returns the live trace projector's settings, nil when no endpoint
// is given or set in the environment.
func (f *traceFlags) set() *wiring.Traces {
	ec := f.exporter()
	if !ec.Configured() {
		return nil
	}
	hold := f.hold
	if hold == 0 {
		hold = -1 // the flag's 0 means none; LiveConfig's 0 means the default
	}
	return &wiring.Traces{Exporter: ec, Live: traces.LiveConfig{Options: traces.Options{Content: f.content}, Hold: hold}}
}

func newEventsOtelCmd(g *globals) *cobra.Command {
	var f traceFlags
	var run, file string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "otel (--run ID | --file EXPORT.jsonl) [--otlp-endpoint URL]",
		Short: "Export a recorded run as an OpenTelemetry trace (GenAI conventions) over OTLP",
		Long: `Project a recorded run into an OpenTelemetry trace and send it over OTLP to
a trace backend (Jaeger, Grafana Tempo, Honeycomb, Langfuse, Arize Phoenix, an
OpenTelemetry collector...). The run is read from the bus (--run) or from a
'vera events export' file (--file, which may hold several runs).

The trace is a projection of the run's events, so any run ever recorded can be
exported, and exporting it again gives the same trace id and span ids (the
trace id is the run id's ULID bytes; span ids are hashes of the events that
open the spans): a backend sees the same spans, not new ones. Span times are
the events' times. The span tree and the attributes follow the OpenTelemetry
GenAI semantic conventions; docs/otel.md maps every VERA event type.

The endpoint and its headers come from --otlp-endpoint or the standard
variables OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
OTEL_EXPORTER_OTLP_HEADERS (API keys go there, not on the command line),
OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. --dry-run prints the spans
instead of sending them.`,
		Example: `  vera events otel --run 01JQ8Z7Y6X5W4V3T2S1R0QPNMK --otlp-endpoint http://127.0.0.1:4318
  OTEL_EXPORTER_OTLP_ENDPOINT=https://cloud.langfuse.com/api/public/otel \
  OTEL_EXPORTER_OTLP_HEADERS="Authorization=Basic $LANGFUSE_AUTH" vera events otel --run r42
  vera events otel --file r42.jsonl --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (run == "") == (file == "") {
				return usageError{errors.New("give exactly one of --run and --file")}
			}
			if run != "" {
				if err := bus.ValidateRunID(run); err != nil {
					return usageError{fmt.Errorf("--run: %w", err)}
				}
			}
			ec := f.exporter()
			if !dryRun && !ec.Configured() {
				return usageError{fmt.Errorf("%w (or use --dry-run)", traces.ErrNoEndpoint)}
			}
			ctx := cmd.Context()
			opts := traces.Options{Content: f.content}
			var projected []runTrace
			if file != "" {
				x, err := readExportFile(file)
				if err != nil {
					return err
				}
				opts.Blob = func(digest string) ([]byte, error) {
					if b, ok := x.Blobs[digest]; ok {
						return b, nil
					}
					return nil, fmt.Errorf("not in %s", file)
				}
				for _, id := range x.Order {
					projected = append(projected, runTrace{id: id, events: len(x.Runs[id]), spans: traces.Project(id, x.Runs[id], opts)})
				}
			} else {
				b, _, err := g.openBus(cmd, catalog.ComponentCLI, true)
				if err != nil {
					return err
				}
				defer b.Close()
				opts.Blob = func(digest string) ([]byte, error) { return b.GetBlob(ctx, digest) }
				// Read and fold at once: the fold keeps spans, not events.
				spans, n, err := traces.ProjectFrom(run, bus.ValidEvents(b.Read(ctx, bus.ReadOptions{RunID: run})), opts)
				if err != nil {
					return fmt.Errorf("read run %s: %w", run, err)
				}
				if n == 0 {
					return fmt.Errorf("run %s has no stored events on %s", run, g.natsURL)
				}
				projected = append(projected, runTrace{id: run, events: n, spans: spans})
			}
			if dryRun {
				for _, rt := range projected {
					printSpans(g.stdout, rt.id, rt.spans)
				}
				return nil
			}
			exp, err := traces.NewExporter(ctx, ec)
			if err != nil {
				return err
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			traces.LogErrors(log)
			rec := &checkedExporter{SpanExporter: exp}
			sink, err := traces.NewSink(rec, traces.SinkOptions{})
			if err != nil {
				return err
			}
			total := 0
			for _, rt := range projected {
				sink.Emit(ctx, bus.TraceID(rt.id), rt.spans)
				total += len(rt.spans)
				tid := bus.TraceID(rt.id)
				fmt.Fprintf(g.stderr, "run %s: %d events, %d spans, trace id %s\n", rt.id, rt.events, len(rt.spans), hex.EncodeToString(tid[:]))
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
			defer cancel()
			if err := sink.Shutdown(sctx); err != nil {
				return fmt.Errorf("export to %s: %w", ec.Describe(), err)
			}
			sent, err := rec.result()
			if err != nil {
				return fmt.Errorf("export to %s: %d of %d spans accepted: %w", ec.Describe(), sent, total, err)
			}
			fmt.Fprintf(g.stderr, "exported %d spans of %d runs to %s\n", sent, len(projected), ec.Describe())
			return nil
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "the run to export, read from the bus")
	cmd.Flags().StringVar(&file, "file", "", "a 'vera events export' file to export instead (- = stdin)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the spans instead of exporting them")
	f.register(cmd, false)
	return cmd
}

// runTrace is one run's projected trace.
type runTrace struct {
	id     string
	events int
	spans  []*traces.Span
}

// checkedExporter remembers what its exporter accepted and its last
// error: the SDK's batch processor only logs export errors, and a one-shot
// export must not say it succeeded when the backend refused it.
type checkedExporter struct {
	sdktrace.SpanExporter
	mu   sync.Mutex
	sent int
	err  error
}

func (c *checkedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := c.SpanExporter.ExportSpans(ctx, spans)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.err = err
	} else {
		c.sent += len(spans)
	}
	return err
}

func (c *checkedExporter) result() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent, c.err
}

// readExportFile reads a `vera events export` file ("-" is standard
// input): its events by run, and its blobs.
func readExportFile(path string) (bus.ExportEvents, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		fh, err := os.Open(path)
		if err != nil {
			return bus.ExportEvents{}, err
		}
		defer fh.Close()
		r = fh
	}
	x, err := bus.ReadExportEvents(r)
	if err != nil {
		return bus.ExportEvents{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(x.Order) == 0 {
		return bus.ExportEvents{}, fmt.Errorf("%s holds no events", path)
	}
	return x, nil
}

// printSpans writes a run's spans as an indented tree, children under
// their parent in start order.
func printSpans(w io.Writer, runID string, spans []*traces.Span) {
	tid := bus.TraceID(runID)
	fmt.Fprintf(w, "trace %s (run %s, %d spans)\n", hex.EncodeToString(tid[:]), runID, len(spans))
	children := map[[8]byte][]*traces.Span{}
	for _, s := range spans {
		children[s.Parent] = append(children[s.Parent], s)
	}
	var walk func(parent [8]byte, depth int)
	walk = func(parent [8]byte, depth int) {
		kids := children[parent]
		slices.SortStableFunc(kids, func(a, b *traces.Span) int { return a.Start.Compare(b.Start) })
		for _, s := range kids {
			status := ""
			if s.Status != 0 && s.StatusMessage != "" {
				status = "  error: " + s.StatusMessage
			}
			fmt.Fprintf(w, "%s%s  %s  %s  %d attributes, %d events%s\n", strings.Repeat("  ", depth+1),
				hex.EncodeToString(s.ID[:]), s.Name, s.End.Sub(s.Start).Round(time.Millisecond), len(s.Attrs), len(s.Events), status)
			walk(s.ID, depth+1)
		}
	}
	walk([8]byte{}, 0)
}
