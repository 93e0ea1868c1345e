package bus

import (
	"encoding/hex"
	"regexp"
	"testing"

	"github.com/oklog/ulid/v2"
)

func TestTraceIDsAreDerived(t *testing.T) {
	run := "01JQ8Z7Y6X5W4V3T2S1R0QPNMK"
	u := ulid.MustParseStrict(run)
	if got := TraceID(run); got != [16]byte(u) {
		t.Fatalf("TraceID of a ULID run = %x, want its bytes %x", got, u[:])
	}
	if TraceID("demo") != TraceID("demo") || TraceID("demo") == TraceID("demo2") {
		t.Fatal("TraceID of a non-ULID run is not a function of the run id")
	}
	if SpanID(run, "a") != SpanID(run, "a") || SpanID(run, "a") == SpanID("other", "a") || SpanID(run, "a") == SpanID(run, "b") {
		t.Fatal("SpanID must depend on the run and the event id, and on nothing else")
	}
	if RootSpanID(run) == SpanID(run, run) {
		t.Fatal("the root span id must not collide with an event's span id")
	}
	tp := Traceparent(run)
	if !regexp.MustCompile(`^00-[0-9a-f]{32}-[0-9a-f]{16}-01$`).MatchString(tp) {
		t.Fatalf("Traceparent = %q, not W3C form", tp)
	}
	root := RootSpanID(run)
	if tp != "00-"+hex.EncodeToString(u[:])+"-"+hex.EncodeToString(root[:])+"-01" {
		t.Fatalf("Traceparent = %q", tp)
	}
}
