package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/vera-run/vera/bus/catalog"
)

// forkOrig is the original run of the fork tests.
const forkOrig = "01J9ZZZZZZZZZZZZZZZZZZFORK"

// publishOriginal records a run as the agent would have: its task, its
// effective configuration, 4 steps, an audited answer at step 3.
func (e *testEnv) publishOriginal(runID string) catalog.RunConfig {
	e.t.Helper()
	cfg := catalog.RunConfig{Task: "When was Example 2.0 released?", WorkDir: "/tmp/orig-work",
		Model:    catalog.ModelConfig{BaseURL: "http://127.0.0.1:9/v1", Name: "orig-model", ToolProtocol: catalog.ToolProtocolNative},
		MaxSteps: 12, Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 3, StopScore: 3},
		Sandbox: catalog.SandboxConfig{Network: true, ToolTimeoutMS: 900000}, Policy: catalog.PolicyConfig{NotesInterval: 3}}
	e.publish(runID, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "cli"})
	e.publish(runID, catalog.RunStarted{AgentID: "agent-1", Config: cfg})
	steps := []catalog.AgentStep{
		{Step: 1, Thought: "fetch the release page", Action: `{"tool":"shell","args":{"cmd":"curl -s https://example.org/releases"}}`, ActionTool: catalog.ActionShell, Command: "curl -s https://example.org/releases", ModelCallID: "c1"},
		{Step: 2, Thought: "write it down", Action: `{"tool":"notes_append","args":{"text":"2.0: 2024-05-01"}}`, ActionTool: catalog.ActionNotesAppend, NotesText: "2.0: 2024-05-01", ModelCallID: "c2"},
		{Step: 3, Thought: "submit", Action: `{"tool":"submit","args":{"answer":"2024-05-01"}}`, ActionTool: catalog.ActionSubmit, Answer: "2024-05-01", ModelCallID: "c3"},
	}
	for _, s := range steps {
		e.publish(runID, s)
	}
	e.publish(runID, catalog.AuditRequested{Round: 1, Answer: "2024-05-01", CandidateStep: 3, ToolCalls: 1})
	e.publish(runID, catalog.AgentStep{Step: 4, Thought: "check another source", Action: `{"tool":"shell","args":{"cmd":"curl -s https://news.example"}}`, ActionTool: catalog.ActionShell, Command: "curl -s https://news.example", ModelCallID: "c4"})
	return cfg
}

// TestForkEndpoint: POST /api/runs/{id}/fork needs the token, answers
// 404 for an unknown run, 409 for one not started, 400 for a bad fork
// point or setting, and 201 with a new run whose vera.task.submitted is
// the original's configuration with the overrides, fork set, the labels
// and a work dir under DataDir; the session list shows the lineage.
func TestForkEndpoint(t *testing.T) {
	e := startEnv(t, false)
	orig := e.publishOriginal(forkOrig)
	path := "/api/runs/" + forkOrig + "/fork"

	if code, body := e.request("POST", path, `{"at_step":1}`, nil); code != http.StatusUnauthorized {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, body := e.request("POST", path, `{"at_step":1}`, map[string]string{TokenHeader: testReadToken}); code != http.StatusUnauthorized {
		t.Errorf("read token: %d %s", code, body)
	}
	if code, body := e.request("POST", path, `{"at_step":1}`, map[string]string{TokenHeader: e.srv.Token(), "Origin": "https://evil.example"}); code != http.StatusForbidden {
		t.Errorf("cross-origin: %d %s", code, body)
	}
	if code, body := e.request("POST", "/api/runs/01J9ZZZZZZZZZZZZZZZZZZNONE/fork", `{"at_step":1}`, e.auth()); code != http.StatusNotFound || !strings.Contains(body, "no such run") {
		t.Errorf("unknown run: %d %s", code, body)
	}
	e.publish("01J9ZZZZZZZZZZZZZZZZZZWAIT", catalog.TaskSubmitted{RunConfig: orig, SubmittedBy: "cli"})
	if code, body := e.request("POST", "/api/runs/01J9ZZZZZZZZZZZZZZZZZZWAIT/fork", `{"at_step":0}`, e.auth()); code != http.StatusConflict || !strings.Contains(body, "has not started") {
		t.Errorf("not started: %d %s", code, body)
	}
	for _, c := range []struct{ body, want string }{
		{`{}`, "at_step is required"},
		{`{"at_step":5}`, "step 5: run " + forkOrig + " has 4 steps recorded; fork at 0 to 2"},
		{`{"at_step":3}`, "first audited answer at step 3"},
		{`{"at_step":-1}`, "0 or more"},
		{`{"at_step":1,"tool_protocol":"smoke"}`, `tool protocol \"smoke\"`},
		{`{"at_step":1,"auditor":false,"audit_rounds":2}`, "audit rounds given with the auditor off"},
		{`{"at_step":1,"workdir":"/etc"}`, "unknown field"},
	} {
		if code, body := e.request("POST", path, c.body, e.auth()); code != http.StatusBadRequest || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", c.body, code, body, c.want)
		}
	}
	if code, body := e.request("POST", "/api/runs/a.b/fork", `{"at_step":1}`, e.auth()); code != http.StatusBadRequest {
		t.Errorf("bad run id: %d %s", code, body)
	}

	code, body := e.request("POST", path, `{"at_step":2,"model":"other-model","tool_protocol":"text","auditor":true,"audit_rounds":5,"note":"text from step 3"}`, e.auth())
	if code != http.StatusCreated {
		t.Fatalf("fork: %d %s", code, body)
	}
	var resp ForkResponse
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatal(err)
	}
	if err := checkULID(resp.RunID); err != nil || resp.ForkedFrom != forkOrig || resp.AtStep != 2 {
		t.Fatalf("response %+v (%v)", resp, err)
	}
	evs := e.submitted(resp.RunID)
	if len(evs) != 1 {
		t.Fatalf("%d tasks on the fork, want 1", len(evs))
	}
	var d catalog.TaskSubmitted
	if err := evs[0].DecodeData(&d); err != nil {
		t.Fatal(err)
	}
	wantDir := filepath.Join(e.dataDir, "runs", resp.RunID)
	if _, err := os.Stat(wantDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the dashboard made the fork's run dir %s: %v", wantDir, err)
	}
	want := orig
	want.WorkDir = wantDir
	want.Model.Name, want.Model.ToolProtocol = "other-model", catalog.ToolProtocolText
	want.Auditor.MaxRounds = 5
	want.Fork = &catalog.ForkConfig{From: forkOrig, AtStep: 2, Note: "text from step 3"}
	gotJSON, _ := json.Marshal(d.RunConfig)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("fork config\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if evs[0].Source != catalog.ComponentDashboard || d.SubmittedBy != catalog.ComponentDashboard ||
		d.Labels["forked_from"] != forkOrig || d.Labels["fork_at_step"] != "2" || len(d.Labels) != 2 {
		t.Errorf("submitted by %s/%s, labels %v", evs[0].Source, d.SubmittedBy, d.Labels)
	}

	// A fork at 0 with the auditor off: the same task from the start.
	code, body = e.request("POST", path, `{"at_step":0,"auditor":false}`, e.auth())
	if code != http.StatusCreated {
		t.Fatalf("fork at 0: %d %s", code, body)
	}
	var resp0 ForkResponse
	_ = json.Unmarshal([]byte(body), &resp0)

	l := e.sessions()
	if s := findSession(l, resp.RunID); s == nil || s.ForkedFrom != forkOrig || s.ForkAtStep != 2 {
		t.Errorf("fork listed as %+v", s)
	}
	if s := findSession(l, forkOrig); s == nil || strings.Join(s.Forks, ",") != resp.RunID+","+resp0.RunID {
		t.Errorf("original listed as %+v, want forks %s then %s", s, resp.RunID, resp0.RunID)
	}
}

// TestBrowserFork drives the page in a real headless Chromium: on a
// recorded run, each agent step's row has "Fork here" (disabled from the
// first audited answer on); clicking it opens the fork form at that step,
// submitting it publishes the fork (checked on the stream) and opens the
// new run, which shows "forked from <original> at step N" and, when the
// agent publishes it, its prefix status; the original lists its fork.
func TestBrowserFork(t *testing.T) {
	path := chromium(t)
	e := startEnv(t, false)
	e.publishOriginal(forkOrig)
	ctx := browser(t, path)

	var jsMu sync.Mutex
	var jsErrors []string
	consoleCtx, stopConsole := context.WithCancel(ctx)
	console := chromedp.Console(consoleCtx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for msg, err := range console {
			if err != nil {
				return
			}
			if msg.Type == chromedp.ConsoleError || msg.Type == chromedp.ConsoleException {
				jsMu.Lock()
				jsErrors = append(jsErrors, string(msg.Type)+": "+msg.Text+" at "+msg.URL)
				jsMu.Unlock()
			}
		}
	}()
	defer func() { stopConsole(); <-consoleDone }()

	if err := chromedp.Do(ctx, chromedp.Navigate(e.url+"/#token="+e.srv.Token())); err != nil {
		t.Fatal(err)
	}
	sel := fmt.Sprintf(`#sessions li[data-run=%q]`, forkOrig)
	waitJS(t, ctx, "the original listed", fmt.Sprintf(`!!document.querySelector(%s)`, jsString(sel)))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "a Fork here control on each step, off from the audited answer", `(() => {
		const bs = [...document.querySelectorAll('#events button.fork-here')];
		return bs.length === 4 && bs.map((b) => b.getAttribute('data-step') + (b.disabled ? 'x' : '')).join(',') === '1,2,3x,4x';
	})()`)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#events button.fork-here[data-step="2"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the fork form at step 2", `!document.getElementById('fork-form').hidden && document.getElementById('fork-at-step').value === '2' &&
		document.getElementById('fork-model').placeholder === 'orig-model' && !document.querySelector('#events tr.detail')`)
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#fork-model"), "other-model"),
		chromedp.SetValue(chromedp.CSS("#fork-tool-protocol"), "text"),
		chromedp.SetValue(chromedp.CSS("#fork-auditor"), "off"),
		chromedp.SendKeys(chromedp.CSS("#fork-note"), "text protocol from step 3"),
		chromedp.Click(chromedp.CSS("#fork-submit")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the fork opened with its lineage", `document.getElementById('run-id').textContent.length === 26 && document.getElementById('run-id').textContent !== `+jsString(forkOrig)+
		` && document.getElementById('forked-from').textContent === 'forked from `+forkOrig+` at step 2 (text protocol from step 3)' && !document.getElementById('lineage').hidden`)
	forkID := textOf(t, ctx, "run-id")

	evs := e.submitted(forkID)
	if len(evs) != 1 {
		t.Fatalf("%d tasks on the fork %s, want 1", len(evs), forkID)
	}
	var d catalog.TaskSubmitted
	if err := evs[0].DecodeData(&d); err != nil {
		t.Fatal(err)
	}
	if d.Fork == nil || *d.Fork != (catalog.ForkConfig{From: forkOrig, AtStep: 2, Note: "text protocol from step 3"}) ||
		d.Model.Name != "other-model" || d.Model.ToolProtocol != catalog.ToolProtocolText || d.Auditor.Enabled || d.Labels["forked_from"] != forkOrig {
		t.Errorf("the page's fork submitted %+v (fork %+v, labels %v)", d.RunConfig, d.Fork, d.Labels)
	}
	waitJS(t, ctx, "prefix pending", `document.getElementById('fork-prefix').textContent.includes('prefix not reproduced yet')`)
	// The agent's side: the prefix reproduced.
	e.publish(forkID, catalog.ForkPrefix{From: forkOrig, AtStep: 2, Reproduced: true, StepsCompared: 2, CommandsCompared: 1})
	waitJS(t, ctx, "prefix status", `document.getElementById('fork-prefix').textContent === '· prefix reproduced: 2 steps, 1 commands compared'`)

	// Back to the original through the lineage link: it lists its fork.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#forked-from a.run-link`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the original lists its fork", `document.getElementById('run-id').textContent === `+jsString(forkOrig)+
		` && document.getElementById('forks').textContent === 'forks: `+forkID+`' && document.getElementById('forked-from').textContent === ''`)

	// A refused fork says why in the form.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#events button.fork-here[data-step="1"]`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the form at step 1", `!document.getElementById('fork-form').hidden && document.getElementById('fork-at-step').value === '1'`)
	if err := chromedp.Do(ctx,
		chromedp.SetValue(chromedp.CSS("#fork-at-step"), "3"),
		chromedp.Click(chromedp.CSS("#fork-submit")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the refusal", `document.getElementById('fork-msg').textContent.includes('first audited answer at step 3') && document.getElementById('run-id').textContent === `+jsString(forkOrig))

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(artifactDir(t), "dashboard-fork.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)
	jsMu.Lock()
	defer jsMu.Unlock()
	refused := 0
	for _, msg := range jsErrors {
		// The refused fork's answer is logged by the browser: expected.
		if strings.Contains(msg, "status of 400") && strings.HasSuffix(msg, "/api/runs/"+forkOrig+"/fork") {
			refused++
			continue
		}
		t.Errorf("page error: %s", msg)
	}
	if refused > 1 {
		t.Errorf("%d refused forks logged, want at most 1", refused)
	}
}
