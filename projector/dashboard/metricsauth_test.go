package dashboard

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector"
)

// knownFamily is a metric family projector.Metrics always has.
const knownFamily = "# TYPE " + projector.MetricVerifierGradient + " counter"

// scrape GETs url as Prometheus does (its Accept header), with hdr.
func scrape(t *testing.T, u string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// checkRefused: a 401 that says how to authenticate and holds no metric.
func checkRefused(t *testing.T, what string, code int, h http.Header, body string) {
	t.Helper()
	if code != http.StatusUnauthorized {
		t.Errorf("%s: %d, want 401\n%.300s", what, code, body)
		return
	}
	if strings.Contains(body, "# TYPE") || strings.Contains(body, "dra_") || strings.Contains(body, "vera_") {
		t.Errorf("%s: the 401 holds metrics:\n%s", what, body)
	}
	if !strings.HasPrefix(h.Get("Content-Type"), "text/plain") || !strings.Contains(body, "Authorization: Bearer") || !strings.Contains(body, ReadTokenFileName) {
		t.Errorf("%s: the 401 does not say how to authenticate (%s):\n%s", what, h.Get("Content-Type"), body)
	}
	if !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer ") {
		t.Errorf("%s: WWW-Authenticate %q", what, h.Get("WWW-Authenticate"))
	}
}

// TestMetricsNeedAToken: the dashboard's Prometheus /metrics, over a real
// listener (Serve), serves the read token and the full token, as
// Authorization: Bearer (what Prometheus' credentials_file sends: the
// file's content, trimmed) or X-Vera-Token; no token, a wrong one, a
// prefix of the right one, another scheme or the token in the query is
// 401 with a plain-text body saying how to authenticate and no metric.
// With MetricsPublic it is served without a token, as before.
func TestMetricsNeedAToken(t *testing.T) {
	m := projector.NewMetrics(nil, nil) // served, not run
	e := startEnv(t, false, func(o *Options) { o.Metrics = m })
	m.Observe(mustEvent(t, e, "run-x", catalog.AuditJudged{Round: 1, Score: 3, RawScore: 3, BestRound: 1, BestScore: 3, DurationMS: 2000, ModelTokens: 50}))
	u := e.url + "/metrics"

	fileTok, err := os.ReadFile(filepath.Join(e.dataDir, ReadTokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	for name, hdr := range map[string]map[string]string{
		"the read token as bearer (credentials_file)": {"Authorization": "Bearer " + strings.TrimSpace(string(fileTok))},
		"the read token in X-Vera-Token":              {TokenHeader: testReadToken},
		"the full token as bearer":                    {"Authorization": "Bearer " + e.srv.Token()},
		"the full token in X-Vera-Token":              {TokenHeader: e.srv.Token()},
	} {
		code, _, body := scrape(t, u, hdr)
		if code != http.StatusOK || !strings.Contains(body, knownFamily) || !strings.Contains(body, projector.MetricVerifierScores+`{score="3"} 1`) {
			t.Errorf("%s: %d, want 200 with the metrics\n%.300s", name, code, body)
		}
	}
	for name, hdr := range map[string]map[string]string{
		"no token":       nil,
		"wrong bearer":   {"Authorization": "Bearer nope"},
		"wrong header":   {TokenHeader: "nope"},
		"prefix":         {"Authorization": "Bearer " + testReadToken[:4]},
		"empty bearer":   {"Authorization": "Bearer "},
		"basic scheme":   {"Authorization": "Basic " + testReadToken},
		"token, no type": {"Authorization": testReadToken},
	} {
		code, h, body := scrape(t, u, hdr)
		checkRefused(t, name, code, h, body)
	}
	// The query parameter is a credential of the live feed only.
	code, h, body := scrape(t, u+"?token="+url.QueryEscape(testReadToken), nil)
	checkRefused(t, "the token in the query", code, h, body)
	// The Host check still comes first.
	req, _ := http.NewRequest("GET", u, nil)
	req.Host = "evil.example"
	req.Header.Set(TokenHeader, testReadToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}

	// --metrics-public: served without a token; the API still needs one.
	pub, err := New(Options{Bus: e.bus, Metrics: m, MetricsPublic: true, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	hs := httptest.NewServer(pub.Handler())
	defer hs.Close()
	if code, _, body := scrape(t, hs.URL+"/metrics", nil); code != http.StatusOK || !strings.Contains(body, knownFamily) {
		t.Errorf("public metrics without a token: %d\n%.300s", code, body)
	}
	if code, _, _ := scrape(t, hs.URL+"/api/metrics", nil); code != http.StatusUnauthorized {
		t.Errorf("public metrics: /api/metrics without a token: %d, want 401", code)
	}
}

// TestMetricsTokenFiles: what vera projector serves /metrics with —
// EnsureReadToken makes DATA_DIR/dashboard.read-token (0600) when it is
// missing or empty and keeps one that is there; RequireToken with
// FileTokens, over a real listener, serves the read token and a
// dashboard's full token when its file is there, follows the files when a
// dashboard writes new tokens, and refuses everything when they are gone.
func TestMetricsTokenFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tok, err := EnsureReadToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ReadTokenFileName)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 || len(tok) != 64 {
		t.Fatalf("made %q: %v %v", tok, st, err)
	}
	if again, err := EnsureReadToken(dir); err != nil || again != tok {
		t.Fatalf("a second call: %q %v, want the same token", again, err)
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err = EnsureReadToken(dir); err != nil || len(tok) != 64 {
		t.Fatalf("an empty file: %q %v, want a new token", tok, err)
	}

	b := bustest.Connect(t, bustest.StartServer(t).ClientURL(), bus.Options{Source: "test"})
	m := projector.NewMetrics(b, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: RequireToken(m.Handler(), FileTokens(dir))}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	u := "http://" + ln.Addr().String() + "/metrics"

	ok := func(what, token string) {
		t.Helper()
		if code, _, body := scrape(t, u, map[string]string{"Authorization": "Bearer " + token}); code != http.StatusOK || !strings.Contains(body, knownFamily) {
			t.Errorf("%s: %d\n%.300s", what, code, body)
		}
	}
	refused := func(what string, hdr map[string]string) {
		t.Helper()
		code, h, body := scrape(t, u, hdr)
		checkRefused(t, what, code, h, body)
	}
	ok("the read token", tok)
	refused("no token", nil)
	refused("a wrong token", map[string]string{"Authorization": "Bearer nope"})
	// A dashboard starts on the same data dir: its tokens are taken, the
	// old read token no longer.
	d, err := New(Options{Bus: b, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ok("the dashboard's read token", d.ReadToken())
	ok("the dashboard's full token", d.Token())
	refused("the replaced read token", map[string]string{"Authorization": "Bearer " + tok})
	// No files, no access.
	os.Remove(path)
	os.Remove(d.TokenFile())
	refused("the token whose file is gone", map[string]string{"Authorization": "Bearer " + d.ReadToken()})
}
