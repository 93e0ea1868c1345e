package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/projector/dashboard"
)

// TestDemo: `vera demo` imports the bundled recorded run, the dashboard
// lists it, the metrics count its audit scores, and its files are written
// under the data dir; a second start imports nothing new.
func TestDemo(t *testing.T) {
	t.Setenv("NATS_URL", "")
	runID, err := demoRunID()
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	for i, wantImported := range []string{"106 events imported (0 already there)", "0 events imported (106 already there)"} {
		addr := bustest.FreeAddr(t)
		out, _, stop := start(t, "demo", "--data-dir", data, "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--no-sandboxd", "--log-level", "warn")
		waitFor(t, "vera demo banner", func() bool { return strings.Contains(out.String(), "Press Ctrl-C") })
		if !strings.Contains(out.String(), "demo run "+runID+": "+wantImported) {
			t.Fatalf("start %d: banner lacks %q:\n%s", i+1, wantImported, out.String())
		}
		m := regexp.MustCompile(`Open the dashboard: (http://[^/]+)/#token=(\w+)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no dashboard URL:\n%s", out.String())
		}
		get := func(path string) string {
			req, _ := http.NewRequest("GET", m[1]+path, nil)
			req.Header.Set(dashboard.TokenHeader, m[2]) // reading needs the token too
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s: %s\n%s", path, resp.Status, b)
			}
			return string(b)
		}
		if s := get("/api/sessions"); !strings.Contains(s, runID) {
			t.Errorf("sessions lack the demo run:\n%s", s)
		}
		waitFor(t, "metrics of the demo run", func() bool {
			return strings.Contains(get("/metrics"), `dra_verifier_scores_total{score="4"} 1`)
		})
		if s := get("/metrics"); !strings.Contains(s, `dra_verifier_scores_total{score="2"} 1`) || !strings.Contains(s, "dra_verifier_gradient_total 1") {
			t.Errorf("metrics:\n%s", s)
		}
		waitFor(t, "the demo run's files", func() bool {
			b, err := os.ReadFile(filepath.Join(data, "demo", runID, "session.log"))
			return err == nil && strings.Contains(string(b), " run.finished ")
		})
		if code := stop(); code != 0 {
			t.Errorf("vera demo exited %d", code)
		}
	}
	notes, err := os.ReadFile(filepath.Join(data, "demo", runID, "notes.md"))
	if err != nil || strings.Count(string(notes), "ev_000") != 2 {
		t.Errorf("notes.md (written once, not twice) = %q, %v", notes, err)
	}
}
