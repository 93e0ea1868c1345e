package dashboard

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// wantTraceID is hex(bus.TraceID(runID)), computed here rather than with
// the package's helper.
func wantTraceID(runID string) string {
	id := bus.TraceID(runID)
	return hex.EncodeToString(id[:])
}

// rawSessions is GET /api/sessions as plain JSON objects, so that a key's
// absence can be seen.
func (e *testEnv) rawSessions() map[string]map[string]any {
	e.t.Helper()
	code, body := e.request("GET", "/api/sessions", "", nil)
	if code != http.StatusOK {
		e.t.Fatalf("sessions: %d %s", code, body)
	}
	var l struct {
		Sessions []map[string]any `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		e.t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, s := range l.Sessions {
		id, _ := s["run_id"].(string)
		out[id] = s
	}
	return out
}

// TestTraceLinks: every run the API describes (the session list, a new
// session) carries trace_id = hex(bus.TraceID(run id)), for ULID and other
// run ids alike; trace_url is there only when Options.TraceURL is set,
// with the trace id put in place of {trace_id}, or appended as
// /trace/<id> to a Jaeger base URL.
func TestTraceLinks(t *testing.T) {
	ulidRun := "01J9ZZZZZZZZZZZZZZZZZZZZZA"
	otherRun := "run_with-odd_ID-42"
	if wantTraceID(ulidRun) == wantTraceID(otherRun) || len(wantTraceID(otherRun)) != 32 {
		t.Fatal("bad fixture")
	}
	grafana := `https://grafana.example.org/explore?left=%7B%22datasource%22:%22tempo%22,%22queries%22:%5B%7B%22query%22:%22{trace_id}%22%7D%5D%7D`
	for _, tc := range []struct {
		name, tmpl string
		want       func(id string) string // nil: no trace_url
	}{
		{"none", "", nil},
		{"jaeger base URL", "http://127.0.0.1:16686", func(id string) string { return "http://127.0.0.1:16686/trace/" + id }},
		{"jaeger base URL with slash", "http://127.0.0.1:16686/jaeger/", func(id string) string { return "http://127.0.0.1:16686/jaeger/trace/" + id }},
		{"jaeger template", "http://jaeger:16686/trace/{trace_id}", func(id string) string { return "http://jaeger:16686/trace/" + id }},
		{"grafana explore template", grafana, func(id string) string { return strings.Replace(grafana, "{trace_id}", id, 1) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnv(t, true, func(o *Options) { o.TraceURL = tc.tmpl })
			e.publish(ulidRun, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "task A", WorkDir: "/tmp/a"}, SubmittedBy: "cli"})
			e.publish(otherRun, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "task B", WorkDir: "/tmp/b"}, SubmittedBy: "cli"})

			// A new session's answer describes the run too.
			code, body := e.request("POST", "/api/sessions", "", e.auth())
			if code != http.StatusCreated {
				t.Fatalf("new session: %d %s", code, body)
			}
			var created map[string]any
			if err := json.Unmarshal([]byte(body), &created); err != nil {
				t.Fatal(err)
			}
			newRun, _ := created["run_id"].(string)
			check := func(where string, s map[string]any, run string) {
				t.Helper()
				if s == nil {
					t.Fatalf("%s: run %s not described", where, run)
				}
				if got := s["trace_id"]; got != wantTraceID(run) {
					t.Errorf("%s: run %s: trace_id %v, want %s", where, run, got, wantTraceID(run))
				}
				got, has := s["trace_url"]
				switch {
				case tc.want == nil && has:
					t.Errorf("%s: run %s: trace_url %v without a trace UI", where, run, got)
				case tc.want != nil && got != tc.want(wantTraceID(run)):
					t.Errorf("%s: run %s: trace_url %v, want %s", where, run, got, tc.want(wantTraceID(run)))
				}
			}
			check("POST /api/sessions", created, newRun)
			list := e.rawSessions()
			for _, run := range []string{ulidRun, otherRun, newRun} {
				check("GET /api/sessions", list[run], run)
			}
			// The typed form agrees.
			if s := findSession(e.sessions(), otherRun); s == nil || s.TraceID != wantTraceID(otherRun) {
				t.Errorf("Session %+v", s)
			}
		})
	}
}

// TestTraceURLRejected: New refuses a trace UI URL that is not an
// absolute http(s) URL once the trace id is in, with an error naming the
// option.
func TestTraceURLRejected(t *testing.T) {
	e := startEnv(t, true)
	for _, bad := range []string{
		"javascript:alert(1)",
		"javascript:alert(1)//{trace_id}",
		"JavaScript:alert('{trace_id}')",
		"data:text/html,{trace_id}",
		"ftp://x/{trace_id}",
		"ftp://jaeger:16686",
		"/trace/{trace_id}",
		"trace/{trace_id}",
		"//jaeger:16686/trace/{trace_id}",
		"jaeger:16686",
		"127.0.0.1:16686/trace/{trace_id}",
		"http:///trace/{trace_id}",
		"http:jaeger/trace/{trace_id}",
		"http://user:secret@jaeger:16686/trace/{trace_id}",
		"http://jaeger:16686/search?service=vera", // no {trace_id}: appending /trace/<id> would land in the query
		"http://jaeger:16686/#/x",
		"http://jae ger:16686/trace/{trace_id}",
		"http://jaeger:16686/trace/{trace_id}\n",
	} {
		_, err := New(Options{Bus: e.bus, DataDir: t.TempDir(), TraceURL: bad})
		if err == nil {
			t.Errorf("New accepted TraceURL %q", bad)
			continue
		}
		if !strings.Contains(err.Error(), "TraceURL") {
			t.Errorf("TraceURL %q: error %q does not name the option", bad, err)
		}
	}
	for _, good := range []string{"http://127.0.0.1:16686", "https://jaeger.example.org/trace/{trace_id}", "HTTP://jaeger:16686/", "http://[::1]:16686/trace/{trace_id}?uiFind={trace_id}"} {
		if _, err := New(Options{Bus: e.bus, DataDir: t.TempDir(), TraceURL: good}); err != nil {
			t.Errorf("New refused TraceURL %q: %v", good, err)
		}
	}
}
