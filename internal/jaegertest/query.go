package jaegertest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ErrNotFound is returned by Trace when Jaeger has no span of the trace.
var ErrNotFound = errors.New("trace not found")

// Trace is one trace as Jaeger stored it.
type Trace struct {
	TraceID string // 32 lowercase hex digits
	Spans   []Span // in the order Jaeger returned them
}

// Span is one span of a Trace, read from OTLP JSON. Ids are lowercase hex;
// ParentSpanID is "" for a root span.
type Span struct {
	TraceID       string
	SpanID        string
	ParentSpanID  string
	Name          string
	Kind          trace.SpanKind // OTLP and the Go API number kinds alike
	Start         time.Time
	Duration      time.Duration
	Attributes    map[string]any // string, bool, int64, float64, []byte, []any, map[string]any
	Events        []SpanEvent
	Links         []SpanLink
	StatusCode    codes.Code // Unset, Error or Ok
	StatusMessage string
	// Service is the resource's service.name; Resource all its attributes.
	Service  string
	Resource map[string]any
	// Scope is the instrumentation scope (the tracer's name).
	Scope string
}

// SpanEvent is an event (Jaeger UI: a log) of a span.
type SpanEvent struct {
	Name       string
	Time       time.Time
	Attributes map[string]any
}

// SpanLink is a link of a span to another span.
type SpanLink struct {
	TraceID    string
	SpanID     string
	Attributes map[string]any
}

// ByName returns the spans named name.
func (t *Trace) ByName(name string) []Span {
	var out []Span
	for _, s := range t.Spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Span returns the span whose id is idHex (any case).
func (t *Trace) Span(idHex string) (Span, bool) {
	idHex = strings.ToLower(idHex)
	for _, s := range t.Spans {
		if s.SpanID == idHex {
			return s, true
		}
	}
	return Span{}, false
}

// Children returns the spans whose parent is the span idHex.
func (t *Trace) Children(idHex string) []Span {
	idHex = strings.ToLower(idHex)
	var out []Span
	for _, s := range t.Spans {
		if s.ParentSpanID == idHex {
			out = append(out, s)
		}
	}
	return out
}

// Trace reads the trace traceIDHex through Jaeger's query API v3
// (GET /api/v3/traces/{id}, which answers OTLP JSON wrapped in
// {"result": ...}). It returns ErrNotFound while Jaeger has none of it.
func (j *Jaeger) Trace(ctx context.Context, traceIDHex string) (*Trace, error) {
	id := strings.ToLower(traceIDHex)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, j.UIURL+"/api/v3/traces/"+id, nil)
	if err != nil {
		return nil, err
	}
	resp, err := j.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("jaegertest: get trace %s: %w", id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("jaegertest: get trace %s: %w", id, err)
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("jaegertest: trace %s: %w", id, ErrNotFound)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jaegertest: get trace %s: %s: %s", id, resp.Status, strings.TrimSpace(string(body)))
	}
	return ParseTrace(id, body)
}

// WaitTrace polls Trace until the trace has at least minSpans spans, and
// returns it. Without a deadline on ctx it waits at most 30 s.
func (j *Jaeger) WaitTrace(ctx context.Context, traceIDHex string, minSpans int) (*Trace, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	for {
		t, err := j.Trace(ctx, traceIDHex)
		if err == nil && len(t.Spans) >= minSpans {
			return t, nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return nil, fmt.Errorf("jaegertest: waiting for %d spans of trace %s: %w (last: %v)", minSpans, traceIDHex, ctx.Err(), err)
			}
			return t, fmt.Errorf("jaegertest: waiting for %d spans of trace %s: %w (has %d: %v)", minSpans, traceIDHex, ctx.Err(), len(t.Spans), spanNames(t))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func spanNames(t *Trace) []string {
	var out []string
	for _, s := range t.Spans {
		out = append(out, s.Name)
	}
	return out
}

// ParseTrace decodes a GET /api/v3/traces/{id} answer: OTLP JSON
// (resourceSpans, hex ids, 64-bit numbers as strings) under "result".
func ParseTrace(traceIDHex string, body []byte) (*Trace, error) {
	var doc struct {
		Result struct {
			ResourceSpans []struct {
				Resource struct {
					Attributes []otlpKeyValue `json:"attributes"`
				} `json:"resource"`
				ScopeSpans []struct {
					Scope struct {
						Name string `json:"name"`
					} `json:"scope"`
					Spans []struct {
						TraceID           string         `json:"traceId"`
						SpanID            string         `json:"spanId"`
						ParentSpanID      string         `json:"parentSpanId"`
						Name              string         `json:"name"`
						Kind              int            `json:"kind"`
						StartTimeUnixNano otlpUint64     `json:"startTimeUnixNano"`
						EndTimeUnixNano   otlpUint64     `json:"endTimeUnixNano"`
						Attributes        []otlpKeyValue `json:"attributes"`
						Events            []struct {
							TimeUnixNano otlpUint64     `json:"timeUnixNano"`
							Name         string         `json:"name"`
							Attributes   []otlpKeyValue `json:"attributes"`
						} `json:"events"`
						Links []struct {
							TraceID    string         `json:"traceId"`
							SpanID     string         `json:"spanId"`
							Attributes []otlpKeyValue `json:"attributes"`
						} `json:"links"`
						Status struct {
							Code    int    `json:"code"`
							Message string `json:"message"`
						} `json:"status"`
					} `json:"spans"`
				} `json:"scopeSpans"`
			} `json:"resourceSpans"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("jaegertest: decode trace %s: %w", traceIDHex, err)
	}
	t := &Trace{TraceID: strings.ToLower(traceIDHex)}
	for _, rs := range doc.Result.ResourceSpans {
		res, err := attrMap(rs.Resource.Attributes)
		if err != nil {
			return nil, err
		}
		service, _ := res["service.name"].(string)
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				attrs, err := attrMap(s.Attributes)
				if err != nil {
					return nil, err
				}
				sp := Span{
					TraceID:       strings.ToLower(s.TraceID),
					SpanID:        strings.ToLower(s.SpanID),
					ParentSpanID:  strings.ToLower(s.ParentSpanID),
					Name:          s.Name,
					Kind:          trace.SpanKind(s.Kind),
					Start:         unixNano(s.StartTimeUnixNano),
					Duration:      time.Duration(s.EndTimeUnixNano) - time.Duration(s.StartTimeUnixNano),
					Attributes:    attrs,
					StatusCode:    statusCode(s.Status.Code),
					StatusMessage: s.Status.Message,
					Service:       service,
					Resource:      res,
					Scope:         ss.Scope.Name,
				}
				for _, e := range s.Events {
					ea, err := attrMap(e.Attributes)
					if err != nil {
						return nil, err
					}
					sp.Events = append(sp.Events, SpanEvent{Name: e.Name, Time: unixNano(e.TimeUnixNano), Attributes: ea})
				}
				for _, l := range s.Links {
					la, err := attrMap(l.Attributes)
					if err != nil {
						return nil, err
					}
					sp.Links = append(sp.Links, SpanLink{TraceID: strings.ToLower(l.TraceID), SpanID: strings.ToLower(l.SpanID), Attributes: la})
				}
				t.Spans = append(t.Spans, sp)
			}
		}
	}
	return t, nil
}

func unixNano(n otlpUint64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n))
}

// statusCode maps OTLP's numbering (1 ok, 2 error) to the Go API's
// (1 error, 2 ok).
func statusCode(c int) codes.Code {
	switch c {
	case 1:
		return codes.Ok
	case 2:
		return codes.Error
	}
	return codes.Unset
}

// otlpUint64 is a 64-bit OTLP JSON number, which is written as a string
// (or, by some encoders, as a plain number).
type otlpUint64 uint64

func (n *otlpUint64) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("OTLP uint64 %s: %w", b, err)
	}
	*n = otlpUint64(v)
	return nil
}

type otlpKeyValue struct {
	Key   string       `json:"key"`
	Value otlpAnyValue `json:"value"`
}

type otlpAnyValue struct {
	StringValue *string         `json:"stringValue"`
	BoolValue   *bool           `json:"boolValue"`
	IntValue    json.RawMessage `json:"intValue"` // "42" or 42
	DoubleValue *float64        `json:"doubleValue"`
	BytesValue  *string         `json:"bytesValue"` // base64
	ArrayValue  *struct {
		Values []otlpAnyValue `json:"values"`
	} `json:"arrayValue"`
	KvlistValue *struct {
		Values []otlpKeyValue `json:"values"`
	} `json:"kvlistValue"`
}

func (v otlpAnyValue) value() (any, error) {
	switch {
	case v.StringValue != nil:
		return *v.StringValue, nil
	case v.BoolValue != nil:
		return *v.BoolValue, nil
	case v.IntValue != nil:
		i, err := strconv.ParseInt(strings.Trim(string(v.IntValue), `"`), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("OTLP intValue %s: %w", v.IntValue, err)
		}
		return i, nil
	case v.DoubleValue != nil:
		return *v.DoubleValue, nil
	case v.BytesValue != nil:
		return base64.StdEncoding.DecodeString(*v.BytesValue)
	case v.ArrayValue != nil:
		out := make([]any, 0, len(v.ArrayValue.Values))
		for _, e := range v.ArrayValue.Values {
			x, err := e.value()
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	case v.KvlistValue != nil:
		return attrMap(v.KvlistValue.Values)
	}
	return nil, nil
}

func attrMap(kvs []otlpKeyValue) (map[string]any, error) {
	m := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		v, err := kv.Value.value()
		if err != nil {
			return nil, fmt.Errorf("attribute %q: %w", kv.Key, err)
		}
		m[kv.Key] = v
	}
	return m, nil
}
