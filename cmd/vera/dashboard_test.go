package main

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/projector/dashboard"
)

// TestDashboardCommand: `vera dashboard` alone against a bus serves the
// page and shows the settings its flags give runs started there.
func TestDashboardCommand(t *testing.T) {
	t.Setenv("NATS_URL", "")
	srv := bustest.StartServer(t)
	out, errOut, stop := start(t, "dashboard", "--nats-url", srv.ClientURL(), "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--base-url", "http://127.0.0.1:1234", "--model", "qwen-test", "--max-steps", "7", "--auditor=false", "--verifyfast", "--log-level", "warn")
	waitFor(t, "the dashboard banner", func() bool { return strings.Contains(out.String(), "Press Ctrl-C") })
	m := regexp.MustCompile(`VERA dashboard: (http://[^/]+)/#token=(\w+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no URL in:\n%s\n%s", out, errOut)
	}
	req, _ := http.NewRequest("GET", m[1]+"/api/config", nil)
	req.Header.Set(dashboard.TokenHeader, m[2]) // reading needs the token too
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c struct {
		Model      string `json:"model"`
		MaxSteps   int    `json:"max_steps"`
		Auditor    bool   `json:"auditor"`
		VerifyFast bool   `json:"verifyfast"`
		Network    bool   `json:"network"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	if c.Model != "qwen-test" || c.MaxSteps != 7 || c.Auditor || !c.VerifyFast || !c.Network {
		t.Errorf("config = %+v", c)
	}
	if code := stop(); code != 0 {
		t.Errorf("vera dashboard exited %d", code)
	}
}
