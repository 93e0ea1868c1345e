package main

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/projector/dashboard"
)

// TestDashboardTraceUIURLFlag: `vera up`, `vera demo` and `vera dashboard`
// take --trace-ui-url; `vera dashboard` links runs to their traces with
// it (or with $VERA_TRACE_UI_URL), and refuses a URL that is not http(s)
// before connecting to anything.
func TestDashboardTraceUIURLFlag(t *testing.T) {
	t.Setenv("NATS_URL", "")
	t.Setenv("VERA_TRACE_UI_URL", "")
	for _, cmd := range []string{"up", "demo", "dashboard"} {
		out, errOut, code := runCLI(t, cmd, "--help")
		if code != 0 || !strings.Contains(out, "--trace-ui-url") || !strings.Contains(out, "VERA_TRACE_UI_URL") {
			t.Errorf("vera %s --help (exit %d) does not show --trace-ui-url:\n%s%s", cmd, code, out, errOut)
		}
	}

	srv := bustest.StartServer(t)
	newSession := func(t *testing.T, args ...string) map[string]any {
		t.Helper()
		args = append([]string{"dashboard", "--nats-url", srv.ClientURL(), "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--log-level", "warn"}, args...)
		out, errOut, stop := start(t, args...)
		defer stop()
		waitFor(t, "the dashboard banner", func() bool { return strings.Contains(out.String(), "Press Ctrl-C") })
		m := regexp.MustCompile(`VERA dashboard: (http://[^/]+)/#token=(\w+)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no URL in:\n%s\n%s", out, errOut)
		}
		req, _ := http.NewRequest("POST", m[1]+"/api/sessions", nil)
		req.Header.Set(dashboard.TokenHeader, m[2])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("new session: %d %v", resp.StatusCode, err)
		}
		return s
	}
	traceID := func(s map[string]any) string {
		run, _ := s["run_id"].(string)
		id := bus.TraceID(run)
		return hex.EncodeToString(id[:])
	}

	t.Run("flag", func(t *testing.T) {
		s := newSession(t, "--trace-ui-url", "http://127.0.0.1:16686")
		if s["trace_id"] != traceID(s) || s["trace_url"] != "http://127.0.0.1:16686/trace/"+traceID(s) {
			t.Errorf("session %v", s)
		}
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv("VERA_TRACE_UI_URL", "https://tempo.example.org/t?id={trace_id}")
		s := newSession(t)
		if s["trace_url"] != "https://tempo.example.org/t?id="+traceID(s) {
			t.Errorf("session %v", s)
		}
	})
	t.Run("none", func(t *testing.T) {
		s := newSession(t)
		if _, has := s["trace_url"]; has || s["trace_id"] != traceID(s) {
			t.Errorf("session %v", s)
		}
	})
	t.Run("bad", func(t *testing.T) {
		for _, bad := range []string{"javascript:alert(1)", "ftp://x/{trace_id}", "/trace/{trace_id}"} {
			_, errOut, code := runCLI(t, "dashboard", "--nats-url", "nats://127.0.0.1:1", "--data-dir", t.TempDir(), "--trace-ui-url", bad)
			if code == 0 || !strings.Contains(errOut, "--trace-ui-url") {
				t.Errorf("--trace-ui-url %q: exit %d, stderr %q", bad, code, errOut)
			}
		}
	})
}
