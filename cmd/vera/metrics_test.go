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
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/projector/dashboard"
)

// metricsFamily is a metric family /metrics always has.
const metricsFamily = "# TYPE " + projector.MetricVerifierGradient + " counter"

// scrapeMetrics GETs a /metrics URL as Prometheus does with
// authorization: {credentials_file: ...}: the token, if any, as
// "Authorization: Bearer <token>".
func scrapeMetrics(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// tokenFile is a token file's content as Prometheus' credentials_file
// reads it (trimmed).
func tokenFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// checkMetricsAccess: without a token or with a wrong one, 401 with a body
// that says how to authenticate and holds no metric; with each of tokens,
// 200 and the metrics.
func checkMetricsAccess(t *testing.T, url string, tokens map[string]string) {
	t.Helper()
	for name, tok := range map[string]string{"no token": "", "a wrong token": "nope"} {
		code, body := scrapeMetrics(t, url, tok)
		if code != http.StatusUnauthorized || strings.Contains(body, "# TYPE") || strings.Contains(body, "dra_") ||
			!strings.Contains(body, "Authorization: Bearer") {
			t.Errorf("GET %s with %s: %d, want 401 saying how to authenticate, and no metric:\n%.300s", url, name, code, body)
		}
	}
	for name, tok := range tokens {
		if code, body := scrapeMetrics(t, url, tok); code != http.StatusOK || !strings.Contains(body, metricsFamily) {
			t.Errorf("GET %s with %s: %d, want 200 and the metrics:\n%.300s", url, name, code, body)
		}
	}
}

// TestUpMetricsNeedAToken: `vera up` serves /metrics on the dashboard's
// listener to the read-only token (DATA_DIR/dashboard.read-token) and the
// full one, sent as Prometheus sends a credentials_file, and says so at
// start; without a token or with a wrong one it is 401. With
// --metrics-public it is served without a token, and the banner says it is
// public.
func TestUpMetricsNeedAToken(t *testing.T) {
	t.Setenv("NATS_URL", "")
	data := veraDataDir(t)
	upArgs := []string{"up", "--data-dir", data, "--http-listen", "127.0.0.1:0", "--no-sandboxd", "--no-agent", "--no-verifiers", "--no-projector", "--log-level", "warn"}
	out, errOut, stop := start(t, append(upArgs, "--nats-listen", bustest.FreeAddr(t))...)
	waitFor(t, "vera up banner", func() bool { return strings.Contains(out.String(), "Press Ctrl-C") })
	readFile := filepath.Join(data, dashboard.ReadTokenFileName)
	m := regexp.MustCompile(`dashboard: http://[^/]+/#token=(\w+)`).FindStringSubmatch(out.String())
	mu := regexp.MustCompile(`metrics: +(http://\S+/metrics) \(needs the read-only token in (\S+) as Authorization: Bearer`).FindStringSubmatch(out.String())
	if m == nil || mu == nil || mu[2] != readFile {
		t.Fatalf("the banner lacks the dashboard's token or the metrics' URL and token file (%s):\n%s\n%s", readFile, out, errOut)
	}
	checkMetricsAccess(t, mu[1], map[string]string{"the read token": tokenFile(t, readFile), "the full token": m[1]})
	if code := stop(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}

	out, errOut, stop = start(t, append(upArgs, "--nats-listen", bustest.FreeAddr(t), "--metrics-public")...)
	waitFor(t, "vera up --metrics-public banner", func() bool { return strings.Contains(out.String(), "Press Ctrl-C") })
	mu = regexp.MustCompile(`metrics: +(http://\S+/metrics) \(public`).FindStringSubmatch(out.String())
	if mu == nil {
		t.Fatalf("the banner does not say the metrics are public:\n%s\n%s", out, errOut)
	}
	if code, body := scrapeMetrics(t, mu[1], ""); code != http.StatusOK || !strings.Contains(body, metricsFamily) {
		t.Errorf("--metrics-public without a token: %d\n%.300s", code, body)
	}
	if code := stop(); code != 0 {
		t.Errorf("vera up --metrics-public exited %d", code)
	}
}

// TestProjectorMetricsNeedAToken: `vera projector --metrics-listen
// 127.0.0.1:0` serves /metrics to the tokens of its DATA_DIR's token files:
// on a data dir without them it makes dashboard.read-token (0600) and
// serves that; on a dashboard's data dir (here `vera up`'s) it serves the
// dashboard's read-only and full tokens. Without a token or with a wrong
// one it is 401; with --metrics-public it is served to anyone, and the
// start-up line says so.
func TestProjectorMetricsNeedAToken(t *testing.T) {
	t.Setenv("NATS_URL", "")
	data := veraDataDir(t) // the identities, and vera up's dashboard tokens
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--no-sandboxd",
		"--no-agent", "--no-verifiers", "--no-projector", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	full := regexp.MustCompile(`dashboard: http://[^/]+/#token=(\w+)`).FindStringSubmatch(upOut.String())
	if full == nil {
		t.Fatalf("no dashboard token:\n%s", upOut)
	}

	projector := func(dataDir string, extra ...string) (metricsURL, line string, stop func() int) {
		t.Helper()
		args := append([]string{"projector", "--nats-url", url, "--metrics-listen", "127.0.0.1:0", "--no-files", "--data-dir", dataDir, "--log-level", "warn"}, extra...)
		_, errOut, stop := start(t, args...)
		waitFor(t, "the projector's metrics address", func() bool { return strings.Contains(errOut.String(), "/metrics") })
		m := regexp.MustCompile(`metrics at (http://\S+/metrics) \(([^\n]*)\)`).FindStringSubmatch(errOut.String())
		if m == nil {
			t.Fatalf("no metrics URL: %s", errOut)
		}
		return m[1], m[2], stop
	}

	// A data dir of its own: the read token is made there.
	own := t.TempDir()
	u, line, stop := projector(own)
	readFile := filepath.Join(own, dashboard.ReadTokenFileName)
	if st, err := os.Stat(readFile); err != nil || st.Mode().Perm() != 0o600 || !strings.Contains(line, readFile) {
		t.Fatalf("the read token file %s: %v %v; start-up line %q", readFile, st, err, line)
	}
	checkMetricsAccess(t, u, map[string]string{"the read token it made": tokenFile(t, readFile)})
	if _, err := os.Stat(filepath.Join(own, dashboard.TokenFileName)); err == nil {
		t.Errorf("vera projector made a full token")
	}
	if code := stop(); code != 0 {
		t.Errorf("vera projector exited %d", code)
	}

	// The dashboard's data dir: its tokens open the projector's /metrics.
	u, _, stop = projector(data)
	checkMetricsAccess(t, u, map[string]string{
		"the dashboard's read token": tokenFile(t, filepath.Join(data, dashboard.ReadTokenFileName)),
		"the dashboard's full token": full[1],
	})
	if code := stop(); code != 0 {
		t.Errorf("vera projector exited %d", code)
	}

	// --metrics-public: anyone, and it says so.
	pubDir := t.TempDir()
	u, line, stop = projector(pubDir, "--metrics-public")
	if !strings.Contains(line, "public") {
		t.Errorf("the start-up line does not say /metrics is public: %q", line)
	}
	if _, err := os.Stat(filepath.Join(pubDir, dashboard.ReadTokenFileName)); err == nil {
		t.Errorf("vera projector --metrics-public made a read token")
	}
	if code, body := scrapeMetrics(t, u, ""); code != http.StatusOK || !strings.Contains(body, metricsFamily) {
		t.Errorf("--metrics-public without a token: %d\n%.300s", code, body)
	}
	if code := stop(); code != 0 {
		t.Errorf("vera projector exited %d", code)
	}
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}

// TestDashboardMetricsNeedAToken: `vera dashboard` serves /metrics to its
// read-only and full tokens only, and says so at start; with
// --metrics-public to anyone.
func TestDashboardMetricsNeedAToken(t *testing.T) {
	t.Setenv("NATS_URL", "")
	srv := bustest.StartServer(t)
	for _, public := range []bool{false, true} {
		data := t.TempDir()
		args := []string{"dashboard", "--nats-url", srv.ClientURL(), "--listen", "127.0.0.1:0", "--data-dir", data, "--log-level", "warn"}
		if public {
			args = append(args, "--metrics-public")
		}
		out, errOut, stop := start(t, args...)
		waitFor(t, "the dashboard banner", func() bool { return strings.Contains(out.String(), "Press Ctrl-C") })
		m := regexp.MustCompile(`VERA dashboard: http://[^/]+/#token=(\w+)`).FindStringSubmatch(out.String())
		mu := regexp.MustCompile(`metrics: (http://\S+/metrics) \((needs|public)`).FindStringSubmatch(out.String())
		if m == nil || mu == nil {
			t.Fatalf("no dashboard token or metrics URL in:\n%s\n%s", out, errOut)
		}
		if public {
			if code, body := scrapeMetrics(t, mu[1], ""); mu[2] != "public" || code != http.StatusOK || !strings.Contains(body, metricsFamily) {
				t.Errorf("--metrics-public (%s) without a token: %d\n%.300s", mu[2], code, body)
			}
		} else {
			if mu[2] != "needs" {
				t.Errorf("the banner says the metrics are %s", mu[2])
			}
			checkMetricsAccess(t, mu[1], map[string]string{
				"the read token": tokenFile(t, filepath.Join(data, dashboard.ReadTokenFileName)),
				"the full token": m[1],
			})
		}
		if code := stop(); code != 0 {
			t.Errorf("vera dashboard exited %d", code)
		}
	}
}
