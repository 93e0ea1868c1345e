package main

import (
	"context"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/internal/jaegertest"
	"github.com/vera-run/vera/projector/traces"
)

const demoFile = "demo/example-run.jsonl"

// demoSpans is what a recorded export of the demo run holds.
func demoSpans(t *testing.T) (string, []*traces.Span) {
	t.Helper()
	x, err := readExportFile(demoFile)
	if err != nil {
		t.Fatal(err)
	}
	return x.Order[0], traces.Project(x.Order[0], x.Runs[x.Order[0]], traces.Options{})
}

func traceHex(run string) string {
	id := bus.TraceID(run)
	return hex.EncodeToString(id[:])
}

// spanSet is the distinct "span parent name" lines of a trace read from
// Jaeger (a backend that keeps a span sent twice shows it twice).
func spanSet(tr *jaegertest.Trace) []string {
	var out []string
	for _, s := range tr.Spans {
		out = append(out, s.SpanID+" "+s.ParentSpanID+" "+s.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func projectedSet(spans []*traces.Span) []string {
	var out []string
	for _, s := range spans {
		parent := ""
		if s.Parent != ([8]byte{}) {
			parent = hex.EncodeToString(s.Parent[:])
		}
		out = append(out, hex.EncodeToString(s.ID[:])+" "+parent+" "+s.Name)
	}
	slices.Sort(out)
	return out
}

// checkDemoTrace checks the GenAI shape of the demo run's trace as Jaeger
// returns it.
func checkDemoTrace(t *testing.T, run string, tr *jaegertest.Trace) {
	t.Helper()
	roots := tr.ByName("invoke_agent vera")
	if len(roots) == 0 {
		t.Fatal("no invoke_agent vera span")
	}
	root := roots[0]
	if root.ParentSpanID != "" {
		t.Errorf("the run span has a parent %s", root.ParentSpanID)
	}
	if root.Service != "vera" {
		t.Errorf("service %q, want vera", root.Service)
	}
	for k, want := range map[string]any{"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": run, "vera.outcome": "RESOLVED"} {
		if got := root.Attributes[k]; got != want {
			t.Errorf("run span %s = %v, want %v", k, got, want)
		}
	}
	chats := 0
	for _, s := range tr.Spans {
		if strings.HasPrefix(s.Name, "chat ") {
			chats++
			if s.Attributes["gen_ai.operation.name"] != "chat" || s.Attributes["gen_ai.request.model"] != "scripted" {
				t.Errorf("chat span attributes %v", s.Attributes)
			}
			if _, ok := s.Attributes["gen_ai.input.messages"]; ok {
				t.Error("message content exported without --otel-content")
			}
		}
	}
	if chats == 0 {
		t.Error("no chat spans")
	}
	tools := tr.ByName("execute_tool shell")
	if len(tools) == 0 {
		t.Fatal("no execute_tool spans")
	}
	for _, s := range tools {
		if id, _ := s.Attributes["gen_ai.tool.call.id"].(string); !strings.HasPrefix(id, "req-") {
			t.Errorf("tool span call id %v", s.Attributes["gen_ai.tool.call.id"])
		}
		if _, ok := s.Attributes["vera.tool.exit_code"]; !ok {
			t.Errorf("tool span %s has no exit code", s.SpanID)
		}
	}
	var scores []float64
	for _, s := range tr.ByName("invoke_agent deepverifier") {
		for _, e := range s.Events {
			if e.Name == "gen_ai.evaluation.result" && e.Attributes["gen_ai.evaluation.name"] == "vera.deepverifier" {
				if v, ok := e.Attributes["gen_ai.evaluation.score.value"].(float64); ok {
					scores = append(scores, v)
				}
				if x, _ := e.Attributes["gen_ai.evaluation.explanation"].(string); x == "" {
					t.Error("an auditor verdict without its explanation")
				}
			}
		}
	}
	slices.Sort(scores)
	if !slices.Equal(scores, []float64{2, 4}) {
		t.Errorf("auditor evaluation scores %v, want the demo's 2 and 4", scores)
	}
	for _, s := range tr.ByName("verify_check r1-c1") {
		parent, ok := tr.Span(s.ParentSpanID)
		if !ok || parent.Name != "invoke_agent deepverifier" {
			t.Errorf("check r1-c1 is under %q", parent.Name)
		}
	}
	if root.StatusCode == codes.Error {
		t.Errorf("a RESOLVED run's span has status error: %s", root.StatusMessage)
	}
}

// TestEventsOtelDemoTwice: the demo run, exported from its file to a real
// Jaeger over OTLP/HTTP and again over OTLP/gRPC, arrives with the span
// tree and the GenAI attributes, and the second export brings the same
// trace and span ids (no new span).
func TestEventsOtelDemoTwice(t *testing.T) {
	j := jaegertest.Start(t)
	run, spans := demoSpans(t)
	want := projectedSet(spans)

	_, errOut, code := runCLI(t, "events", "otel", "--file", demoFile, "--otlp-endpoint", j.OTLPHTTPEndpoint)
	if code != 0 {
		t.Fatalf("vera events otel exited %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "trace id "+traceHex(run)) {
		t.Errorf("the trace id is not printed:\n%s", errOut)
	}
	ctx := context.Background()
	tr, err := j.WaitTrace(ctx, traceHex(run), len(spans))
	if err != nil {
		t.Fatal(err)
	}
	if got := spanSet(tr); !slices.Equal(got, want) {
		t.Fatalf("Jaeger holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkDemoTrace(t, run, tr)

	// Again over gRPC, with content this time: Jaeger's store keys spans
	// by trace and span id, so the second copy replaces the first, and the
	// content shows that it arrived.
	_, errOut, code = runCLI(t, "events", "otel", "--file", demoFile, "--otel-content", "--otlp-protocol", "grpc", "--otlp-endpoint", "http://"+j.OTLPGRPCEndpoint)
	if code != 0 {
		t.Fatalf("second export exited %d: %s", code, errOut)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if tr, err = j.Trace(ctx, traceHex(run)); err != nil {
			t.Fatal(err)
		}
		arrived := slices.ContainsFunc(tr.Spans, func(s jaegertest.Span) bool { return s.Attributes["gen_ai.input.messages"] != nil })
		if arrived || time.Now().After(deadline) {
			if !arrived {
				t.Fatal("the second export did not reach Jaeger")
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := spanSet(tr); !slices.Equal(got, want) {
		t.Fatalf("after a second export Jaeger holds other ids:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestUpExportsTracesLive: `vera up --otlp-endpoint` projects runs as they
// are stored; the demo run imported into it reaches Jaeger with the same
// spans a recorded export makes.
func TestUpExportsTracesLive(t *testing.T) {
	j := jaegertest.Start(t)
	t.Setenv("NATS_URL", "")
	addr := bustest.FreeAddr(t)
	upOut, upErr, stopUp := start(t, "up", "--data-dir", veraDataDir(t), "--nats-listen", addr, "--http-listen", "",
		"--no-sandboxd", "--no-agent", "--no-verifiers", "--otlp-endpoint", j.OTLPHTTPEndpoint, "--otlp-hold", "300ms", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	if !strings.Contains(upOut.String(), "traces:    OTLP http/protobuf "+j.OTLPHTTPEndpoint) {
		t.Errorf("the banner does not say where traces go:\n%s", upOut.String())
	}
	if _, errOut, code := runCLI(t, "events", "import", "--nats-url", "nats://"+addr, demoFile); code != 0 {
		t.Fatalf("import: %s", errOut)
	}
	run, spans := demoSpans(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tr, err := j.WaitTrace(ctx, traceHex(run), len(spans))
	if err != nil {
		t.Fatalf("%v\nvera up stderr:\n%s", err, upErr.String())
	}
	if got, want := spanSet(tr), projectedSet(spans); !slices.Equal(got, want) {
		t.Fatalf("live export holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkDemoTrace(t, run, tr)
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}

func TestEventsOtelUsage(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"events", "otel"}, "exactly one of --run and --file"},
		{[]string{"events", "otel", "--run", "a", "--file", "b"}, "exactly one of --run and --file"},
		{[]string{"events", "otel", "--file", demoFile}, "no OTLP endpoint"},
		{[]string{"events", "otel", "--file", demoFile, "--otlp-endpoint", "127.0.0.1:4318"}, "want a URL"},
		{[]string{"events", "otel", "--file", demoFile, "--otlp-endpoint", "http://127.0.0.1:1", "--otlp-protocol", "http/json"}, "http/json is not supported"},
		{[]string{"events", "otel", "--file", "/nonexistent.jsonl", "--dry-run"}, "no such file"},
	} {
		_, errOut, code := runCLI(t, tc.args...)
		if code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("vera %v: exit %d, stderr %q, want an error with %q", tc.args, code, errOut, tc.want)
		}
	}
	// A backend that cannot be reached: an error, not "exported".
	if _, errOut, code := runCLI(t, "events", "otel", "--file", demoFile, "--otlp-endpoint", "http://127.0.0.1:1"); code == 0 || !strings.Contains(errOut, "0 of 25 spans accepted") {
		t.Errorf("export to a closed port: exit %d, stderr %q", code, errOut)
	}
	out, _, code := runCLI(t, "events", "otel", "--file", demoFile, "--dry-run")
	run, spans := demoSpans(t)
	if code != 0 || !strings.HasPrefix(out, "trace "+traceHex(run)) || strings.Count(out, "\n") != len(spans)+1 {
		t.Errorf("--dry-run: exit %d\n%s", code, out)
	}
	bad := t.TempDir() + "/bad.jsonl"
	os.WriteFile(bad, []byte("{\"specversion\":\"1.0\"}\nnot json\n"), 0o600)
	if _, errOut, code := runCLI(t, "events", "otel", "--file", bad, "--dry-run"); code == 0 || !strings.Contains(errOut, "line 1") {
		t.Errorf("a bad file: exit %d %q", code, errOut)
	}
}
