package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/jaegertest"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// The web of the system test: the project's release page and an
// independent news site, two registrable domains served by one container
// under two Docker network aliases.
const (
	releasesURL = "http://releases.vera.example/1.2.html"
	newsURL     = "http://news.example/vera-1-2.html"
)

// systemPages are the pages of that web server.
var systemPages = []dockertest.Page{
	{Host: "releases.vera.example", Path: "/1.2.html", Body: "<html><title>VERA 1.2.0</title><body>VERA 1.2.0 was released on 2026-03-14. Changes: replay --reexecute, SCOUT gating.</body></html>"},
	{Host: "news.example", Path: "/vera-1-2.html", Body: "<html><title>News</title><body>Independent report: the VERA project shipped version 1.2.0 on 14 March 2026 (2026-03-14).</body></html>"},
}

var (
	decomposeRE = regexp.MustCompile(`^AUDIT-DECOMPOSE round (\d+)`)
	checkRE     = regexp.MustCompile(`^AUDIT-CHECK (r\d+-c\d+) step (\d+)`)
	judgeRE     = regexp.MustCompile(`^AUDIT-JUDGE round (\d+)`)
)

// auditedScript is the scripted model of the system test: the agent's
// replies by step and the auditor's by prompt. Round 1 is judged 3 but
// SCOUT caps it at 2 (one domain); the agent follows the instruction,
// fetches the independent source and resubmits; round 2 is accepted.
func auditedScript() scriptedmodel.Rule {
	agent := map[int]string{
		1: turn(`{"tool":"shell","args":{"cmd":"curl -s `+releasesURL+`"}}`, "none", "CONTINUE"),
		2: turn(`{"tool":"notes_append","args":{"text":"releases.vera.example: VERA 1.2.0 released 2026-03-14 (ev_0001)"}}`, "ev_0001", "CONTINUE"),
		3: turn(`{"tool":"submit","args":{"answer":"VERA 1.2.0 was released on 2026-03-14 (`+releasesURL+`)."}}`, "ev_0001", "RESOLVED"),
		4: turn(`{"tool":"shell","args":{"cmd":"curl -s `+newsURL+`"}}`, "ev_0001", "CONTINUE"),
		5: turn(`{"tool":"notes_append","args":{"text":"news.example independently confirms 2026-03-14 (ev_0002)"}}`, "ev_0002", "CONTINUE"),
		6: turn(`{"tool":"submit","args":{"answer":"VERA 1.2.0 was released on 2026-03-14: the project's release page (`+releasesURL+`) and an independent report (`+newsURL+`) agree."}}`, "ev_0001, ev_0002", "RESOLVED"),
	}
	decompose := map[string]string{
		"1": `{"summary":[{"step":1,"source":"` + releasesURL + `","finding":"release page: 1.2.0 released 2026-03-14"}],
"likely_errors":[{"class":"finding_sources","justification":"a single source, the vendor's own"}],
"checks":[{"source":"` + releasesURL + `","question":"Does the release page give 2026-03-14 as the release date of 1.2.0?","load_bearing":true}]}`,
		"2": `{"summary":[{"step":1,"source":"` + releasesURL + `","finding":"release page: 2026-03-14"},{"step":4,"source":"` + newsURL + `","finding":"independent report: 14 March 2026"}],
"likely_errors":[],
"checks":[{"source":"` + releasesURL + `","question":"Does the release page give 2026-03-14?","load_bearing":true},
{"source":"` + newsURL + `","question":"Does the independent report give 14 March 2026?","load_bearing":true}]}`,
	}
	checks := map[string][]string{
		"r1-c1": {`{"command":"curl -s ` + releasesURL + ` | grep -o 'released on [0-9-]*'"}`,
			`{"verdict":"yes","evidence":"released on 2026-03-14","citations":["` + releasesURL + `"]}`},
		"r2-c1": {`{"verdict":"yes","evidence":"ev_0001: released on 2026-03-14","citations":["` + releasesURL + `"]}`},
		"r2-c2": {`{"command":"curl -s ` + newsURL + ` | grep -o '14 March 2026'"}`,
			`{"verdict":"yes","evidence":"14 March 2026","citations":["` + newsURL + `"]}`},
	}
	judge := map[string]string{
		"1": `{"explanation":"The date matches the vendor's page, but no independent source was consulted.","score":3,"instructions":["Confirm with an independent source: run ` + "`curl -s " + newsURL + "`" + ` and cite it."]}`,
		"2": `{"explanation":"Two independent sources agree on 2026-03-14.","score":4,"instructions":[]}`,
	}
	return scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		u := req.LastUserMessage()
		if m := decomposeRE.FindStringSubmatch(u); m != nil {
			r, ok := decompose[m[1]]
			return scriptedmodel.Text(r), ok
		}
		if m := checkRE.FindStringSubmatch(u); m != nil {
			rs := checks[m[1]]
			var n int
			fmt.Sscan(m[2], &n)
			if n < 1 || n > len(rs) {
				return scriptedmodel.Reply{}, false
			}
			return scriptedmodel.Text(rs[n-1]), true
		}
		if m := judgeRE.FindStringSubmatch(u); m != nil {
			r, ok := judge[m[1]]
			return scriptedmodel.Text(r), ok
		}
		n := 0
		for _, m := range stepRE.FindAllStringSubmatch(u, -1) {
			var k int
			fmt.Sscan(m[1], &k)
			n = max(n, k)
		}
		r, ok := agent[n+1]
		return scriptedmodel.Text(r), ok
	})
}

// TestSystemAuditedRun is the whole system through its CLI: `vera up`
// (embedded bus, sandboxd, agent, verifiers, projector, dashboard) and
// `vera run --auditor` against it. The agent fetches a page from a web
// server on the test's own Docker network and submits; the DeepVerifier
// auditor checks the claim with its own command in the auditor container,
// SCOUT caps the round at 2 (one domain), the agent follows the corrective
// instruction, and round 2 is accepted: RESOLVED. The run's files are in
// its work dir. With VERA_UPDATE_DEMO=1 the run is exported as the demo
// run `vera demo` bundles (see demo/README.md).
// auditedRun runs `vera run` with the auditor against the scripted model
// until the run ends, removes its containers at the test's end, and
// returns what it printed and the run's id; it fails the test unless
// vera run exits 0.
func auditedRun(t *testing.T, natsURL, modelURL, work, task string, maxSteps int) (out, runID string) {
	t.Helper()
	t.Cleanup(func() {
		if runID != "" {
			removeContainers(t, runID)
		}
	})
	out, errOut, code := runCLI(t, "run", "--nats-url", natsURL, "--task", task,
		"--work-dir", work, "--model-base-url", modelURL, "--model", "scripted", "--auditor", "--max-steps", fmt.Sprint(maxSteps))
	if m := regexp.MustCompile(`run (\S+) submitted`).FindStringSubmatch(out); m != nil {
		runID = m[1]
	}
	t.Logf("vera run:\n%s", out)
	if code != 0 {
		t.Fatalf("vera run exited %d\nstderr:\n%s", code, errOut)
	}
	return out, runID
}

func TestSystemAuditedRun(t *testing.T) {
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	netName := dockertest.Network(t, docker)
	dockertest.WebServer(t, docker, img, netName, systemPages)
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(auditedScript()))
	live := jaegertest.Start(t)

	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", veraDataDir(t), "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--work-root", os.TempDir(),
		"--image", img, "--network", netName, "--log-level", "warn", "--otlp-endpoint", live.OTLPHTTPEndpoint, "--otlp-hold", "500ms")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })

	work := filepath.Join(t.TempDir(), "work")
	out, runID := auditedRun(t, url, model.URL(), work, "When was VERA 1.2.0 released? Cite independent sources.", 12)
	for _, want := range []string{
		"$ curl -s " + releasesURL, "evidence ev_0001", "audit round 1 requested",
		"auditor: r1-c1 → yes", "auditor: round 1 score 2/4 (judge 3)", "capped at 2 by independent_citations",
		"auditor: round 1 rejected", "$ curl -s " + newsURL, "evidence ev_0002",
		"audit round 2 requested", "auditor: round 2 score 4/4", "auditor: round 2 accepted",
		"RESOLVED after 6 steps", "an independent report",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The auditor's own command ran in the auditor container.
	tail, _, _ := runCLI(t, "events", "tail", "--nats-url", url, "--run", runID, "--no-follow", "--type", "vera.tool.finished", "--json")
	if !strings.Contains(tail, `"requester":"auditor"`) || !strings.Contains(tail, "released on 2026-03-14") {
		t.Errorf("no auditor tool result with the page's text:\n%s", tail)
	}
	for _, f := range []string{"notes.md", "evidence.jsonl", "trace.jsonl", "session.log", "move_ledger.jsonl"} {
		waitFor(t, f, func() bool { st, err := os.Stat(filepath.Join(work, f)); return err == nil && st.Size() > 0 })
	}
	// The run as a trace, live while it ran, and the same spans when the
	// recorded run is exported afterwards to another backend.
	waitFor(t, "the run's end in session.log", func() bool {
		b, _ := os.ReadFile(filepath.Join(work, "session.log"))
		return strings.Contains(string(b), " run.finished ")
	})
	recorded := jaegertest.Start(t)
	if _, errOut, code := runCLI(t, "events", "otel", "--nats-url", url, "--run", runID, "--otlp-endpoint", recorded.OTLPHTTPEndpoint); code != 0 {
		t.Fatalf("vera events otel: %s", errOut)
	}
	ctx := context.Background()
	rec, err := recorded.WaitTrace(ctx, traceHex(runID), 10)
	if err != nil {
		t.Fatal(err)
	}
	lv, err := live.WaitTrace(ctx, traceHex(runID), len(rec.Spans))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := spanSet(lv), spanSet(rec); !slices.Equal(a, b) {
		t.Errorf("live trace\n%s\nrecorded export\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	checkDemoTrace(t, runID, lv)
	if os.Getenv("VERA_UPDATE_DEMO") == "1" {
		waitFor(t, "the run's last events", func() bool {
			b, _ := os.ReadFile(filepath.Join(work, "session.log"))
			return strings.Contains(string(b), " run.finished ")
		})
		time.Sleep(2 * time.Second) // container removal events
		if _, errOut, code := runCLI(t, "events", "export", "--nats-url", url, "--run", runID, "-o", filepath.Join("demo", "example-run.jsonl")); code != 0 {
			t.Fatalf("export: %s", errOut)
		}
		t.Logf("demo run %s exported to demo/example-run.jsonl", runID)
	}
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}
