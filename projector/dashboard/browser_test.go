package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vera-run/vera/internal/browsertest"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/projector"
)

// chromium and browser are internal/browsertest's.
func chromium(t *testing.T) string { t.Helper(); return browsertest.Chromium(t) }

func browser(t *testing.T, path string) context.Context {
	t.Helper()
	return browsertest.Browser(t, path)
}

// waitJS polls a JavaScript boolean expression until it holds.
func waitJS(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({run: document.getElementById('run-id').textContent, conn: document.getElementById('conn').textContent, msg: document.getElementById('start-msg').textContent, events: document.getElementById('event-count').textContent, sessions: document.getElementById('sessions').textContent.slice(0, 400)})`))
			t.Fatalf("waiting for %s: %s did not hold within 30s (err %v); page: %s", what, expr, err, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func textOf(t *testing.T, ctx context.Context, id string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.getElementById(%q).textContent`, id)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// artifactDir is $VERA_ARTIFACTS (kept after the test) or a temporary dir.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("VERA_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// TestBrowserDashboard drives the page in a real headless Chromium: pick a
// session, watch events arrive live (event content is shown as text, never
// run as HTML), create a session, start a run (the test sees the
// vera.task.submitted the page published, and the prompt locks), then
// watch the run's Model I/O and Container Logs fill; a screenshot is saved.
func TestBrowserDashboard(t *testing.T) {
	path := chromium(t)
	m := projector.NewMetrics(nil, nil)
	e := startEnv(t, false, func(o *Options) { o.Metrics = m })
	ctx := browser(t, path)

	// Collect the page's errors and exceptions (a CSP violation is one).
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

	// An existing run, submitted by another tool.
	runA := "01J9ZZZZZZZZZZZZZZZZZZZZZA"
	publishObserved := func(runID string, p interface{ EventType() string }) {
		ev := mustEvent(t, e, runID, p)
		if _, err := e.pub.Publish(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		m.Observe(ev)
	}
	publishObserved(runA, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "existing task A", WorkDir: "/tmp/a",
		Model: catalog.ModelConfig{Name: "model-of-A"}, Auditor: catalog.AuditorConfig{Enabled: true}}, SubmittedBy: "cli"})
	publishObserved(runA, note("note before the page opened"))

	if err := chromedp.Do(ctx, chromedp.Navigate(e.url+"/#token="+e.srv.Token())); err != nil {
		t.Fatal(err)
	}
	sel := fmt.Sprintf(`#sessions li[data-run=%q]`, runA)
	waitJS(t, ctx, "session A listed", fmt.Sprintf(`!!document.querySelector(%s)`, jsString(sel)))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the stored events of A", `document.getElementById('notes').textContent.includes('note before the page opened')`)
	waitJS(t, ctx, "A's task locked", `document.getElementById('task').readOnly && document.getElementById('task').value === 'existing task A'`)
	waitJS(t, ctx, "A's own settings shown", `document.getElementById('template').textContent.startsWith('model model-of-A · auditor on')`)

	// Live events, including one that would run script if rendered as HTML.
	xss := `<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>`
	publishObserved(runA, note("live note 1"))
	publishObserved(runA, note(xss))
	publishObserved(runA, catalog.EvidenceRecorded{EvidenceID: "ev_0001", RequestID: "rq1", Step: 1, Command: "curl -s https://example.org", ExitCode: 0, Excerpt: xss})
	publishObserved(runA, catalog.AuditJudged{Round: 1, Score: 2, RawScore: 3, Instructions: []string{"open /work/notes.md and cite the changelog URL"}, BestRound: 1, BestScore: 2, DurationMS: 1500, ModelTokens: 120})
	publishObserved(runA, catalog.VerifyFastScored{AnswerEventID: "01J9ZZZZZZZZZZZZZZZZZZZZZB", Profile: "default", HighCount: 0, LowCount: 1, CreditScore: 4, Zone: "GOOD"})
	publishObserved(runA, catalog.LogicVerdict{Step: 2, ThinkingEval: 0, ActionEval: 0, ThinkingEvalReason: "Action matches repetitive action", VerifierType: "logic", DecidedBy: "logic", Window: 3})
	waitJS(t, ctx, "live notes", `document.getElementById('notes').textContent.includes('live note 1') && document.getElementById('notes').textContent.includes(`+jsString(xss)+`)`)
	waitJS(t, ctx, "evidence, verifier results", `document.getElementById('evidence').textContent.includes('ev_0001') && document.getElementById('audit').textContent.includes('cite the changelog URL') && document.getElementById('verifyfast').textContent.includes('GOOD') && document.getElementById('logic').textContent.includes('repetitive action')`)
	waitJS(t, ctx, "global metrics", `document.getElementById('global-metrics').textContent.includes('dra_verifier_last_score')`)
	injected, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__xss !== undefined || document.querySelectorAll('#main img, #main script').length > 0`))
	if err != nil {
		t.Fatal(err)
	}
	if injected {
		t.Fatal("event content was rendered as HTML")
	}

	// New session, start a run.
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#new-session"))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "a new editable session", `document.getElementById('run-id').textContent.length === 26 && document.getElementById('run-id').textContent !== `+jsString(runA)+` && !document.getElementById('task').readOnly`)
	runB := textOf(t, ctx, "run-id")
	waitJS(t, ctx, "the template's settings as placeholders", `document.getElementById('seed').placeholder === 'none' && document.getElementById('tool-protocol').options[0].textContent === 'default (auto)'`)
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS("#task"), "Find the official release date of Example 2.0"),
		chromedp.SetValue(chromedp.CSS("#tool-protocol"), "native"),
		chromedp.SendKeys(chromedp.CSS("#temperature"), "0.3"),
		chromedp.SendKeys(chromedp.CSS("#top-p"), "0.8"),
		chromedp.SendKeys(chromedp.CSS("#max-tokens"), "1024"),
		chromedp.SendKeys(chromedp.CSS("#seed"), "42"),
		chromedp.SetValue(chromedp.CSS("#stream"), "off"),
		chromedp.Click(chromedp.CSS("#start")),
	); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(e.submitted(runB)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the page published no vera.task.submitted for %s (message: %q)", runB, textOf(t, ctx, "start-msg"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var sub catalog.TaskSubmitted
	evs := e.submitted(runB)
	if err := evs[0].DecodeData(&sub); err != nil || sub.Task != "Find the official release date of Example 2.0" || sub.MaxSteps != 7 || evs[0].Source != catalog.ComponentDashboard {
		t.Fatalf("task.submitted %+v (%v)", sub, err)
	}
	// The form's model settings, over the template's endpoint and model.
	if m := sub.Model; m.Name != "test-model" || m.ToolProtocol != catalog.ToolProtocolNative || m.Temperature == nil || *m.Temperature != 0.3 ||
		m.TopP == nil || *m.TopP != 0.8 || m.MaxTokens != 1024 || m.Seed == nil || *m.Seed != 42 || m.Stream == nil || *m.Stream {
		t.Fatalf("task.submitted model %+v", m)
	}
	waitJS(t, ctx, "the prompt locked", `document.getElementById('task').readOnly && document.getElementById('start').disabled`)
	waitJS(t, ctx, "the settings locked", `document.getElementById('temperature').disabled && document.getElementById('stream').disabled && document.getElementById('tool-protocol').value === 'native'`)

	// The run's model calls and container logs arrive.
	publishObserved(runB, catalog.ModelRequested{CallID: "call-agent-s0001", Scope: catalog.ScopeAgent, Purpose: "step", Step: 1, Model: "test-model", BaseURL: "http://127.0.0.1:1/v1",
		Messages: []catalog.Message{{Role: "system", Content: "You are VERA."}, {Role: "user", Content: "PRIMARY TASK: Find the official release date"}}, MessageCount: 2, Attempt: 1})
	publishObserved(runB, catalog.ModelResponded{CallID: "call-agent-s0001", Scope: catalog.ScopeAgent, Step: 1, Model: "test-model", Attempt: 1, LatencyMS: 812,
		Usage: catalog.TokenUsage{Prompt: 100, Completion: 20, Total: 120}, FinishReason: "stop", Text: "THOUGHT: search the vendor site\nAction: {\"tool\":\"shell\",\"args\":{\"cmd\":\"curl -s https://example.org\"}}"})
	publishObserved(runB, catalog.ContainerLog{Container: "vera-" + runB, ContainerID: "abc", Stream: catalog.StreamStderr, Line: "sandbox ready on /work", Time: time.Now()})
	publishObserved(runB, catalog.ContainerEvent{Container: "vera-" + runB, ContainerID: "abc", Action: "exec_start", Time: time.Now()})
	waitJS(t, ctx, "Model I/O", `document.getElementById('modelio').textContent.includes('PRIMARY TASK: Find the official release date') && document.getElementById('modelio').textContent.includes('search the vendor site') && document.getElementById('modelio').textContent.includes('120 tok')`)
	waitJS(t, ctx, "Container Logs", `document.getElementById('container-logs').textContent.includes('sandbox ready on /work') && document.getElementById('container-logs').textContent.includes('exec_start')`)
	waitJS(t, ctx, "run metrics", `document.getElementById('run-metrics').textContent.includes('agent 120')`)

	// Step 2's reply grows live (pieces on core NATS, forwarded by the
	// feed), then its record replaces it: the reasoning collapsed, the
	// tool call shown.
	publishObserved(runB, catalog.ModelRequested{CallID: "call-agent-s0002", Scope: catalog.ScopeAgent, Purpose: "step", Step: 2, Model: "test-model", BaseURL: "http://127.0.0.1:1/v1",
		Messages: []catalog.Message{{Role: "user", Content: "step 2 prompt"}}, MessageCount: 1, Attempt: 1,
		Tools: []string{"shell", "notes_append", "submit"}, ToolChoice: "required",
		Params: catalog.ModelParams{Stream: true, Temperature: sub.Model.Temperature, Seed: sub.Model.Seed, ExtraBody: map[string]any{"reasoning_effort": "low"}}})
	waitJS(t, ctx, "step 2's call with what it sent", `document.querySelector('details.call[data-call="call-agent-s0002#1"] .request-settings').textContent ===
		'tools shell, notes_append, submit (required) · streamed · temperature 0.3 · seed 42 · extra_body {"reasoning_effort":"low"}'`)
	pub := live.NewPublisher(e.pub.Conn(), live.Options{Interval: 20 * time.Millisecond})
	defer pub.Close()
	sink := pub.Deltas(runB, 2, "call-agent-s0002")
	sink(llm.Delta{Reasoning: "The vendor lists releases on a changelog page. "})
	for _, w := range strings.Fields("I will fetch the changelog of Example and read the 2.0 entry <b>now</b>") {
		sink(llm.Delta{Content: w + " "})
		time.Sleep(5 * time.Millisecond)
	}
	waitJS(t, ctx, "the reply growing live", `!document.getElementById('live-reply-box').hidden &&
		document.getElementById('live-reply').textContent.includes('read the 2.0 entry <b>now</b>') &&
		document.getElementById('live-reply').textContent.includes('[reasoning] The vendor lists releases') &&
		document.getElementById('live-reply-title').textContent === 'step 2 · generating' &&
		document.querySelector('details.call[data-call="call-agent-s0002#1"] pre.live-text').textContent.includes('fetch the changelog') &&
		document.querySelector('details.call[data-call="call-agent-s0002#1"] summary').textContent.includes('generating')`)
	liveShot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifactDir(t), "dashboard-live.png"), liveShot, 0o644); err != nil {
		t.Fatal(err)
	}
	sink(llm.Delta{})
	publishObserved(runB, catalog.ModelResponded{CallID: "call-agent-s0002", Scope: catalog.ScopeAgent, Step: 2, Model: "test-model", Attempt: 1, LatencyMS: 900,
		Usage: catalog.TokenUsage{Prompt: 100, Completion: 30, Total: 130, Reasoning: 12}, FinishReason: "tool_calls",
		Text: "I will fetch the changelog", Reasoning: "The vendor lists releases on a changelog page.\nThe 2.0 entry has the date.", ReasoningSource: "reasoning_content",
		ToolCalls: []catalog.ToolCall{{ID: "call_1", Name: "shell", Arguments: `{"command":"curl -s https://example.org/changelog"}`}}})
	waitJS(t, ctx, "the recorded reply with its reasoning and tool call", `(() => {
		const c = document.querySelector('details.call[data-call="call-agent-s0002#1"]');
		const r = c.querySelector('details.reasoning');
		return document.getElementById('live-reply-box').hidden && !c.querySelector('pre.live-text') &&
			r && !r.open && r.querySelector('summary').textContent === 'reasoning (reasoning_content) · 2 lines' &&
			r.querySelector('pre').textContent.includes('The 2.0 entry has the date.') &&
			c.querySelector('pre.tool-call').textContent.includes('"command": "curl -s https://example.org/changelog"') &&
			c.querySelector('pre.tool-call').textContent.startsWith('shell ') &&
			c.querySelector('summary').textContent.includes('tool_calls · 130 tok');
	})()`)
	// A big reasoning is a blob, loaded on demand.
	ref, err := e.bus.PutBlob(context.Background(), []byte("a long chain of thought\nthat was stored as a blob"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	publishObserved(runB, catalog.ModelRequested{CallID: "call-agent-s0003", Scope: catalog.ScopeAgent, Purpose: "step", Step: 3, Model: "test-model", BaseURL: "http://127.0.0.1:1/v1",
		Messages: []catalog.Message{{Role: "user", Content: "step 3 prompt"}}, MessageCount: 1, Attempt: 1})
	publishObserved(runB, catalog.ModelResponded{CallID: "call-agent-s0003", Scope: catalog.ScopeAgent, Step: 3, Model: "test-model", Attempt: 1, LatencyMS: 900,
		FinishReason: "stop", Text: "THOUGHT: done", ReasoningBlob: &ref, ReasoningSource: "think"})
	waitJS(t, ctx, "the reasoning blob's button", `!!document.querySelector('details.call[data-call="call-agent-s0003#1"] details.reasoning button')`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](`(() => { const r = document.querySelector('details.call[data-call="call-agent-s0003#1"] details.reasoning'); r.open = true; r.querySelector('button').click(); })()`)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the reasoning blob loaded", `document.querySelector('details.call[data-call="call-agent-s0003#1"] details.reasoning').textContent.includes('that was stored as a blob')`)

	// Open the model call's details for the screenshot.
	_, _ = chromedp.Run(ctx, chromedp.Evaluate[any](`document.querySelectorAll('details.call').forEach(d => d.open = true)`))
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(artifactDir(t), "dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	jsMu.Lock()
	defer jsMu.Unlock()
	for _, msg := range jsErrors {
		t.Errorf("JavaScript error on the page: %s", msg)
	}
}

// TestBrowserTraceLink: with a trace UI configured, the selected run's
// header has a "Trace" link to its trace (the run's trace id in the
// template, opening in a new tab with rel="noopener noreferrer"), which
// follows the selection; without one there is no link at all.
func TestBrowserTraceLink(t *testing.T) {
	path := chromium(t)
	ctx := browser(t, path)
	runA := "01J9ZZZZZZZZZZZZZZZZZZZZZA"
	runB := "run_from-another_tool-7" // not a ULID: its trace id is hashed
	publishTask := func(e *testEnv, runID string) {
		e.publish(runID, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "task of " + runID, WorkDir: "/tmp/w"}, SubmittedBy: "cli"})
	}
	pick := func(e *testEnv, runID string) {
		t.Helper()
		sel := fmt.Sprintf(`#sessions li[data-run=%q]`, runID)
		waitJS(t, ctx, "session "+runID+" listed", fmt.Sprintf(`!!document.querySelector(%s)`, jsString(sel)))
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))); err != nil {
			t.Fatal(err)
		}
		waitJS(t, ctx, runID+" selected", `document.getElementById('run-id').textContent === `+jsString(runID)+` && document.getElementById('task').value === `+jsString("task of "+runID))
	}
	linkIs := func(runID, want string) {
		t.Helper()
		waitJS(t, ctx, "the trace link of "+runID, `(() => {
			const links = document.querySelectorAll('#run-panel a');
			const a = document.getElementById('trace-link');
			return links.length === 1 && links[0] === a && a.textContent === 'Trace' &&
				a.getAttribute('href') === `+jsString(want)+` && a.target === '_blank' && a.rel === 'noopener noreferrer';
		})()`)
	}

	// Configured: a Jaeger template.
	e := startEnv(t, false, func(o *Options) { o.TraceURL = "http://127.0.0.1:16686/trace/{trace_id}" })
	publishTask(e, runA)
	publishTask(e, runB)
	if err := chromedp.Do(ctx, chromedp.Navigate(e.url+"/#token="+e.srv.ReadToken())); err != nil {
		t.Fatal(err)
	}
	pick(e, runA)
	linkIs(runA, "http://127.0.0.1:16686/trace/"+wantTraceID(runA))
	pick(e, runB)
	linkIs(runB, "http://127.0.0.1:16686/trace/"+wantTraceID(runB))
	// The page itself links to http(s) URLs only, whatever the API says.
	waitJS(t, ctx, "only http(s) links", `safeHTTPURL('javascript:alert(1)') === null && safeHTTPURL('JAVASCRIPT:alert(1)') === null &&
		safeHTTPURL('data:text/html,x') === null && safeHTTPURL('ftp://x/') === null && safeHTTPURL('/trace/x') === null &&
		safeHTTPURL(undefined) === null && safeHTTPURL('https://jaeger.example/trace/ab') === 'https://jaeger.example/trace/ab'`)

	// Not configured: no link.
	e2 := startEnv(t, false)
	publishTask(e2, runA)
	if err := chromedp.Do(ctx, chromedp.Navigate(e2.url+"/#token="+e2.srv.ReadToken())); err != nil {
		t.Fatal(err)
	}
	pick(e2, runA)
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#run-panel a, #trace-link').length`))
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d trace links without a trace UI", n)
	}
}
