package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector"
)

// submitted returns the vera.task.submitted events of a run.
func (e *testEnv) submitted(runID string) []bus.Event {
	e.t.Helper()
	var out []bus.Event
	for rec, err := range e.bus.Read(context.Background(), bus.ReadOptions{RunID: runID, Types: []string{catalog.TypeTaskSubmitted}}) {
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, rec.Event)
	}
	return out
}

func (e *testEnv) sessions() SessionList {
	e.t.Helper()
	code, body := e.request("GET", "/api/sessions", "", nil)
	if code != 200 {
		e.t.Fatalf("sessions: %d %s", code, body)
	}
	var l SessionList
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

func findSession(l SessionList, id string) *Session {
	for i := range l.Sessions {
		if l.Sessions[i].RunID == id {
			return &l.Sessions[i]
		}
	}
	return nil
}

// TestStartRunOnce: a new session is listed, starting it publishes one
// vera.task.submitted (source dashboard, the template, a work dir the
// server made under DataDir), and starting it again is refused: the prompt
// locks after start, also for racing requests.
func TestStartRunOnce(t *testing.T) {
	e := startEnv(t, false)
	id := e.newSession()
	if err := checkULID(id); err != nil {
		t.Fatal(err)
	}
	if s := findSession(e.sessions(), id); s == nil || s.State != StateNew {
		t.Fatalf("new session listed as %+v", s)
	}
	code, body := e.request("POST", "/api/runs/"+id+"/start", `{"task":"find the release date of X","max_steps":3}`, e.auth())
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, body)
	}
	evs := e.submitted(id)
	if len(evs) != 1 {
		t.Fatalf("%d task.submitted events, want 1", len(evs))
	}
	var d catalog.TaskSubmitted
	if err := evs[0].DecodeData(&d); err != nil {
		t.Fatal(err)
	}
	// The run's directory: named by the dashboard, made by the projector
	// and sandboxd (the dashboard writes no file).
	wantDir := filepath.Join(e.dataDir, "runs", id)
	if evs[0].Source != catalog.ComponentDashboard || d.SubmittedBy != catalog.ComponentDashboard || d.Task != "find the release date of X" ||
		d.MaxSteps != 3 || d.Model.Name != "test-model" || d.WorkDir != wantDir {
		t.Fatalf("task.submitted: source %q data %+v", evs[0].Source, d)
	}
	if _, err := os.Stat(wantDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dashboard made the run dir: %v", err)
	}
	code, body = e.request("POST", "/api/runs/"+id+"/start", `{"task":"another task"}`, e.auth())
	if code != http.StatusConflict {
		t.Fatalf("second start: %d %s", code, body)
	}
	if s := findSession(e.sessions(), id); s == nil || s.State != StateSubmitted || s.Title != "find the release date of X" {
		t.Fatalf("started session listed as %+v", s)
	}

	// Racing starts of one session: exactly one wins.
	id2 := e.newSession()
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Go(func() {
			codes[i], _ = e.request("POST", "/api/runs/"+id2+"/start", `{"task":"race"}`, e.auth())
		})
	}
	wg.Wait()
	created := 0
	for _, c := range codes {
		switch c {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Fatalf("racing start answered %d", c)
		}
	}
	if created != 1 || len(e.submitted(id2)) != 1 {
		t.Fatalf("racing starts: %d created, %d events", created, len(e.submitted(id2)))
	}

	// A run submitted by another tool (not on the page) is locked too.
	other := "01J0000000000000000000000Z"
	e.publish(other, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "cli task", WorkDir: "/tmp/w"}, SubmittedBy: "cli"})
	if code, body := e.request("POST", "/api/runs/"+other+"/start", `{"task":"x"}`, e.auth()); code != http.StatusConflict {
		t.Fatalf("start of a CLI run: %d %s", code, body)
	}

	// Cancel.
	if code, body := e.request("POST", "/api/runs/"+id+"/cancel", `{"reason":"enough"}`, e.auth()); code != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", code, body)
	}
	if s := findSession(e.sessions(), id); s == nil || s.State != StateCancelled {
		t.Fatalf("cancelled session listed as %+v", s)
	}
	if code, _ := e.request("POST", "/api/runs/"+e.newSession()+"/cancel", "", e.auth()); code != http.StatusNotFound {
		t.Fatalf("cancel of a run without task: %d", code)
	}

	// Bad bodies.
	for _, b := range []string{`{"task":""}`, `{"task":"x","max_steps":-1}`, `{"task":"x","work_dir":"/etc"}`, `not json`} {
		if code, body := e.request("POST", "/api/runs/"+e.newSession()+"/start", b, e.auth()); code != http.StatusBadRequest {
			t.Errorf("start with %s: %d %s", b, code, body)
		}
	}
	h := e.auth()
	h["Content-Type"] = "text/plain"
	if code, _ := e.request("POST", "/api/runs/"+e.newSession()+"/start", `{"task":"x"}`, h); code != http.StatusUnsupportedMediaType {
		t.Errorf("start as text/plain: %d", code)
	}
}

// TestSecurity: a missing or wrong token, a cross-origin request, a
// foreign Host and path traversal are all refused, and nothing is
// published or created.
func TestSecurity(t *testing.T) {
	e := startEnv(t, false)
	id := e.newSession()
	start := "/api/runs/" + id + "/start"
	task := `{"task":"x"}`

	// Token.
	for name, hdr := range map[string]map[string]string{
		"missing":      nil,
		"wrong":        {TokenHeader: "nope"},
		"wrong bearer": {"Authorization": "Bearer nope"},
		"prefix":       {TokenHeader: e.srv.Token()[:10]},
	} {
		if code, _ := e.request("POST", start, task, hdr); code != http.StatusUnauthorized {
			t.Errorf("start with %s token: %d, want 401", name, code)
		}
		if code, _ := e.request("POST", "/api/sessions", "", hdr); code != http.StatusUnauthorized {
			t.Errorf("new session with %s token: %d, want 401", name, code)
		}
	}
	// Cross-origin, even with the token.
	for name, hdr := range map[string]map[string]string{
		"foreign origin":     {"Origin": "http://evil.example"},
		"null origin":        {"Origin": "null"},
		"other port":         {"Origin": "http://127.0.0.1:1"},
		"cross-site fetch":   {"Sec-Fetch-Site": "cross-site"},
		"same-site fetch":    {"Sec-Fetch-Site": "same-site"},
		"cross-site+origin":  {"Sec-Fetch-Site": "cross-site", "Origin": e.url},
		"same-origin forged": {"Sec-Fetch-Site": "same-origin", "Origin": "http://evil.example"},
	} {
		hdr[TokenHeader] = e.srv.Token()
		if code, body := e.request("POST", start, task, hdr); code != http.StatusForbidden {
			t.Errorf("start from %s: %d %s, want 403", name, code, body)
		}
	}
	if n := len(e.submitted(id)); n != 0 {
		t.Fatalf("refused requests published %d events", n)
	}
	// DNS rebinding: a foreign Host on the loopback listener.
	if code, _ := e.request("GET", "/api/sessions", "", map[string]string{"Host": "evil.example"}); code != http.StatusForbidden {
		t.Errorf("foreign Host: %d, want 403", code)
	}
	if code, _ := e.request("GET", "/", "", map[string]string{"Host": "localhost"}); code != http.StatusOK {
		t.Errorf("Host localhost: %d, want 200", code)
	}
	// Same origin with the token works.
	h := e.auth()
	h["Origin"] = e.url
	h["Sec-Fetch-Site"] = "same-origin"
	if code, body := e.request("POST", "/api/sessions", "", h); code != http.StatusCreated {
		t.Fatalf("same-origin new session: %d %s", code, body)
	}

	// Traversal: run ids are checked, never used as paths.
	outside := filepath.Join(filepath.Dir(e.dataDir), "escaped")
	for _, p := range []string{
		"/api/runs/..%2F..%2Fescaped/start",
		"/api/runs/..%2F..%2F..%2Ftmp%2Fx/start",
		"/api/runs/run.1/start",
		"/api/runs/run-1/start", // a valid bus id but not a ULID: the dashboard makes no dir for it
		"/api/runs/01J0000000000000000000000%2F/start",
		"/api/runs/01j0000000000000000000000z/start",
	} {
		code, body := e.request("POST", p, task, e.auth())
		if code != http.StatusBadRequest && code != http.StatusNotFound && code != http.StatusMovedPermanently {
			t.Errorf("POST %s: %d %s", p, code, body)
		}
	}
	for _, p := range []string{"/api/runs/..%2F..%2Fetc/events", "/api/runs/a.b/events", "/api/runs/%2e%2e/events", "/api/blobs/..%2F..%2Fetc%2Fpasswd", "/api/blobs/sha256:xyz"} {
		if code, body := e.request("GET", p, "", nil); code != http.StatusBadRequest && code != http.StatusNotFound && code != http.StatusMovedPermanently {
			t.Errorf("GET %s: %d %s", p, code, body)
		}
	}
	for _, p := range []string{"/../../../../etc/passwd", "/%2e%2e/%2e%2e/%2e%2e/etc/passwd", "/..%2f..%2f..%2fetc%2fpasswd", "/static/../server.go"} {
		code, body := e.request("GET", p, "", nil)
		if code == http.StatusOK && (strings.Contains(body, "root:") || strings.Contains(body, "package dashboard")) {
			t.Errorf("GET %s served a file outside the page: %.80s", p, body)
		}
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("a directory was created outside the data dir")
	}
	entries, _ := os.ReadDir(filepath.Join(e.dataDir, "runs"))
	if len(entries) != 0 {
		t.Fatalf("refused requests created run dirs: %v", entries)
	}

	// The token file.
	st, err := os.Stat(e.srv.TokenFile())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v, want 0600", st.Mode().Perm())
	}
	data, _ := os.ReadFile(e.srv.TokenFile())
	if strings.TrimSpace(string(data)) != e.srv.Token() || len(e.srv.Token()) < 32 {
		t.Errorf("token file holds %q, token %q", data, e.srv.Token())
	}
	// Security headers.
	req, _ := http.NewRequest("GET", e.url+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
}

// TestTokenFileReplaced: an existing token file with loose permissions is
// replaced by one with mode 0600.
func TestTokenFileReplaced(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, TokenFileName)
	if err := os.WriteFile(p, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeTokenFile(p, "new"); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	data, _ := os.ReadFile(p)
	if st.Mode().Perm() != 0o600 || string(data) != "new\n" {
		t.Fatalf("mode %v data %q", st.Mode().Perm(), data)
	}
}

// TestMetricsEndpoint: with projector.Metrics the summary has the spec
// metrics; without it the endpoint says so.
func TestMetricsEndpoint(t *testing.T) {
	e := startEnv(t, false)
	if code, _ := e.request("GET", "/api/metrics", "", nil); code != http.StatusNotFound {
		t.Fatalf("metrics without Metrics: %d", code)
	}
	m := projector.NewMetrics(e.bus, nil)
	m.Observe(mustEvent(t, e, "run-x", catalog.AuditJudged{Round: 1, Score: 3, RawScore: 3, BestRound: 1, BestScore: 3, DurationMS: 2000, ModelTokens: 50}))
	e2 := startEnv(t, false, func(o *Options) { o.Metrics = m })
	code, body := e2.request("GET", "/api/metrics", "", nil)
	if code != 200 {
		t.Fatalf("metrics: %d %s", code, body)
	}
	var got struct{ Metrics []MetricFamily }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	byName := map[string]MetricFamily{}
	for _, f := range got.Metrics {
		byName[f.Name] = f
	}
	for _, n := range projector.SpecMetricNames() {
		if _, ok := byName[n]; !ok {
			t.Errorf("metric %s missing", n)
		}
	}
	if f := byName[projector.MetricVerifierLastScore]; len(f.Samples) != 1 || f.Samples[0].Value != 3 {
		t.Errorf("last score %+v", f)
	}
	if f := byName[projector.MetricVerifierDuration]; len(f.Samples) != 1 || f.Samples[0].Count != 1 || f.Samples[0].Value != 2 {
		t.Errorf("duration %+v", f)
	}
}

func mustEvent(t testing.TB, e *testEnv, runID string, p bus.Payload) bus.Event {
	t.Helper()
	ev, err := e.pub.Events.New(runID, p)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

// TestBlob serves a stored blob as text/plain.
func TestBlob(t *testing.T) {
	e := startEnv(t, false)
	ref, err := e.pub.PutBlob(context.Background(), []byte("<script>alert(1)</script>"), "text/html")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", e.url+"/api/blobs/"+ref.Digest, nil)
	req.Header.Set(TokenHeader, testReadToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("blob: %d %v", resp.StatusCode, resp.Header)
	}
	if code, _ := e.request("GET", "/api/blobs/sha256:"+strings.Repeat("0", 64), "", nil); code != http.StatusNotFound {
		t.Fatalf("missing blob: %d", code)
	}
}
