package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
)

// The eval of the tests: 3 tasks under 2 profiles, one of them with a
// name that is HTML.
const (
	testEvalID    = "01JA00000000000000000EVAL1"
	evalProfileNA = "no-audit"
	evalProfileA  = `audit2<script>window.__xss=1</script>`
)

func evalRunID(task, profile string, attempt int) string {
	p := "p0"
	if profile == evalProfileA {
		p = "p1"
	}
	return testEvalID + "-t" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, task) + "-" + p + "-a" + string(rune('0'+attempt))
}

func evalStarted() catalog.EvalStarted {
	return catalog.EvalStarted{Name: "release-dates", TaskSet: "tasks.jsonl", TaskSetSHA256: strings.Repeat("ab", 32), Tasks: 3,
		Profiles: []catalog.EvalProfile{
			{Name: evalProfileNA, Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}},
			{Name: evalProfileA, Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}, Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 2}},
		},
		Concurrency: 2, SubmittedBy: "cli:test"}
}

func round(r int, correct bool, auditScore int, accepted, audited bool) catalog.EvalRoundScore {
	return catalog.EvalRoundScore{Round: r, Step: r * 3, Answer: "answer " + string(rune('0'+r)), AnswerSHA256: strings.Repeat("cd", 32),
		Correct: correct, Score: map[bool]float64{true: 1}[correct], AuditScore: auditScore, Accepted: accepted, Audited: audited}
}

func scored(task, profile string, attempt int, correct, infra bool, rounds ...catalog.EvalRoundScore) catalog.EvalTaskScored {
	out := catalog.OutcomeResolved
	if infra {
		out = catalog.OutcomeFailed
	}
	return catalog.EvalTaskScored{TaskID: task, Profile: profile, RunID: evalRunID(task, profile, attempt), Attempt: attempt, Scorer: "exact",
		Outcome: out, Infra: infra, Rounds: rounds, Correct: correct, Steps: 4, ToolCalls: 3, WallMS: 1000}
}

// evalScoredBefore are the scored tasks published before the checks:
// every task × profile but t3 under no-audit (5 of 6).
//
// no-audit: t1 right; t2 an infrastructure failure, then (attempt 2)
// wrong. First and final accuracy 1/2; no rounds.
// audit2: t1 wrong at round 1 (rejected, 2), right at round 2
// (accepted, 4); t2 right at round 1 (rejected, 2), wrong at round 2
// (rejected, 1), ended with round 1's; t3 an infrastructure failure.
// First 1/3, after round 1 1/3 (t2), after round 2 2/3, final 2/3;
// auditor: accepted right 1, accepted wrong 0, rejected right 1,
// rejected wrong 2: precision 1, recall 1/2.
func evalScoredBefore() []catalog.EvalTaskScored {
	return []catalog.EvalTaskScored{
		scored("t1", evalProfileNA, 1, true, false, round(1, true, 0, false, false)),
		scored("t1", evalProfileA, 1, true, false, round(1, false, 2, false, true), round(2, true, 4, true, true)),
		scored("t2", evalProfileNA, 1, false, true),
		scored("t2", evalProfileA, 1, true, false, round(1, true, 2, false, true), round(2, false, 1, false, true)),
		scored("t2", evalProfileNA, 2, false, false, round(1, false, 0, false, false)),
		scored("t3", evalProfileA, 1, false, true),
	}
}

// publishEval stores the eval's start, the scored tasks above, the runs'
// tasks (with the labels vera eval sets) and a cancellation published on
// the eval's id (as `vera cancel EVAL_ID` would): the id must still not
// be listed as a run.
func (e *testEnv) publishEval() {
	e.t.Helper()
	e.publish(testEvalID, evalStarted())
	for _, s := range evalScoredBefore() {
		e.publish(s.RunID, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "task " + s.TaskID, WorkDir: "/tmp/w"}, SubmittedBy: "cli:test",
			Labels: map[string]string{eval.LabelEvalID: testEvalID, eval.LabelEvalTask: s.TaskID, eval.LabelEvalProfile: s.Profile, eval.LabelEvalAttempt: string(rune('0' + s.Attempt))}})
		e.publish(testEvalID, s)
	}
	e.publish(testEvalID, catalog.RunCancelled{RequestedBy: "cli:test", Reason: "cancel the wrong id"})
}

func (e *testEnv) evalDetail(id string) EvalDetail {
	e.t.Helper()
	code, body := e.request("GET", "/api/evals/"+id, "", nil)
	if code != http.StatusOK {
		e.t.Fatalf("GET /api/evals/%s: %d %s", id, code, body)
	}
	var d EvalDetail
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e *testEnv) evalList() EvalList {
	e.t.Helper()
	code, body := e.request("GET", "/api/evals", "", nil)
	if code != http.StatusOK {
		e.t.Fatalf("GET /api/evals: %d %s", code, body)
	}
	var l EvalList
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		e.t.Fatal(err)
	}
	return l
}

func approx(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func approxAll(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !approx(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestEvalsAPI: an eval stored on the bus is listed in GET /api/evals
// (not as a session, though a cancellation was published on its id) and
// GET /api/evals/{id} gives its figures as eval.Summarize computes them
// (the latest attempt of each task × profile, the tasks in the order
// they were scored, tasks and expected from vera.eval.started), updated
// as more is scored and when it finishes; both need a token; an unknown
// eval is 404, a bad id 400.
func TestEvalsAPI(t *testing.T) {
	e := startEnv(t, false)
	for _, p := range []string{"/api/evals", "/api/evals/" + testEvalID} {
		for name, hdr := range map[string]map[string]string{"no token": {TokenHeader: ""}, "wrong token": {TokenHeader: "nope"}} {
			if code, body := e.request("GET", p, "", hdr); code != http.StatusUnauthorized {
				t.Errorf("GET %s with %s: %d %.100s, want 401", p, name, code, body)
			}
		}
		if code, _ := e.request("GET", p+"?token="+testReadToken, "", map[string]string{TokenHeader: ""}); code != http.StatusUnauthorized {
			t.Errorf("GET %s with the token in the query: %d, want 401", p, code)
		}
	}
	if code, body := e.request("GET", "/api/evals/"+testEvalID, "", nil); code != http.StatusNotFound {
		t.Errorf("an eval not on the bus: %d %s, want 404", code, body)
	}
	if code, body := e.request("GET", "/api/evals/a.b", "", nil); code != http.StatusBadRequest {
		t.Errorf("a bad eval id: %d %s, want 400", code, body)
	}
	if l := e.evalList(); len(l.Evals) != 0 {
		t.Fatalf("evals before any: %+v", l)
	}

	e.publishEval()
	d := e.evalDetail(testEvalID)
	if d.EvalID != testEvalID || d.Name != "release-dates" || d.TaskSet != "tasks.jsonl" || d.Tasks != 3 || d.Expected != 6 ||
		d.Scored != 5 || d.Infra != 1 || d.State != EvalRunning || d.Finished != nil || d.LastSeq == 0 {
		t.Fatalf("eval header: %+v", d)
	}
	var order []string
	for _, r := range d.Results {
		order = append(order, r.TaskID+"/"+r.Profile+"/"+string(rune('0'+r.Attempt)))
	}
	if got, want := strings.Join(order, " "), "t1/no-audit/1 t1/"+evalProfileA+"/1 t2/no-audit/2 t2/"+evalProfileA+"/1 t3/"+evalProfileA+"/1"; got != want {
		t.Fatalf("results %s, want %s", got, want)
	}
	if len(d.Profiles) != 2 {
		t.Fatalf("profiles %+v", d.Profiles)
	}
	na, au := d.Profiles[0], d.Profiles[1]
	if na.Name != evalProfileNA || na.Auditor || na.Scored != 2 || na.Infra != 0 || !approx(na.FirstAccuracy, 0.5) || !approx(na.FinalAccuracy, 0.5) ||
		len(na.ByRound) != 0 || na.AuditorStats != nil {
		t.Errorf("no-audit: %+v", na)
	}
	if au.Name != evalProfileA || !au.Auditor || au.MaxRounds != 2 || au.Scored != 3 || au.Infra != 1 ||
		!approx(au.FirstAccuracy, 1.0/3) || !approxAll(au.ByRound, []float64{1.0 / 3, 2.0 / 3}) || !approx(au.FinalAccuracy, 2.0/3) {
		t.Errorf("audit2: %+v", au)
	}
	if st := au.AuditorStats; st == nil || st.Judged != 4 || st.AcceptedRight != 1 || st.AcceptedWrong != 0 || st.RejectedRight != 1 || st.RejectedWrong != 2 ||
		!approx(st.Precision, 1) || !approx(st.Recall, 0.5) {
		t.Errorf("auditor stats: %+v", au.AuditorStats)
	}

	// The list: the eval, and its runs as sessions carrying its id, but
	// not the eval's id.
	l := e.evalList()
	if len(l.Evals) != 1 {
		t.Fatalf("evals: %+v", l)
	}
	if s := l.Evals[0]; s.EvalID != testEvalID || s.Name != "release-dates" || s.Tasks != 3 || strings.Join(s.Profiles, ",") != evalProfileNA+","+evalProfileA ||
		s.Expected != 6 || s.Scored != 5 || s.Infra != 1 || s.State != EvalRunning || s.StartedAt.IsZero() || !s.FinishedAt.IsZero() {
		t.Errorf("listed eval: %+v", s)
	}
	sl := e.sessions()
	if findSession(sl, testEvalID) != nil {
		t.Errorf("the eval's id is listed as a session: %+v", sl.Sessions)
	}
	for _, s := range evalScoredBefore() {
		if got := findSession(sl, s.RunID); got == nil || got.EvalID != testEvalID {
			t.Errorf("run %s of the eval: %+v", s.RunID, got)
		}
	}
	if sl.LastSeq != l.LastSeq {
		t.Errorf("the lists' last sequences differ: sessions %d, evals %d", sl.LastSeq, l.LastSeq)
	}

	// More is scored (read incrementally), then the eval finishes.
	e.publish(testEvalID, scored("t3", evalProfileNA, 1, true, false, round(1, true, 0, false, false)))
	d = e.evalDetail(testEvalID)
	if na := d.Profiles[0]; d.Scored != 6 || na.Scored != 3 || !approx(na.FirstAccuracy, 2.0/3) || !approx(na.FinalAccuracy, 2.0/3) || d.State != EvalRunning {
		t.Errorf("after t3 under no-audit: scored %d, %+v", d.Scored, na)
	}
	e.publish(testEvalID, catalog.EvalFinished{Scored: 6, Expected: 6, Infra: 1, DurationMS: 5000, Summary: "the table"})
	d = e.evalDetail(testEvalID)
	if d.State != EvalFinished || d.Finished == nil || d.Finished.Summary != "the table" || d.FinishedAt.IsZero() {
		t.Errorf("finished: state %s, %+v", d.State, d.Finished)
	}
	if s := e.evalList().Evals[0]; s.State != EvalFinished || s.Scored != 6 || s.FinishedAt.IsZero() {
		t.Errorf("listed after the end: %+v", s)
	}

	// A resume runs it again; stopped, it is interrupted.
	started := evalStarted()
	started.Resumed = true
	e.publish(testEvalID, started)
	if s := e.evalList().Evals[0]; s.State != EvalRunning || s.Resumes != 1 {
		t.Errorf("resumed: %+v", s)
	}
	e.publish(testEvalID, catalog.EvalFinished{Scored: 6, Expected: 6, Interrupted: true, DurationMS: 10})
	if d := e.evalDetail(testEvalID); d.State != EvalInterrupted || d.Resumes != 1 || d.Name != "release-dates" {
		t.Errorf("interrupted: state %s resumes %d", d.State, d.Resumes)
	}
	if s := e.evalList().Evals[0]; s.State != EvalInterrupted {
		t.Errorf("listed interrupted: %+v", s)
	}

	// Newest first.
	second := evalStarted()
	second.Name = "later"
	time.Sleep(5 * time.Millisecond)
	e.publish("01JA00000000000000000EVAL2", second)
	if l := e.evalList(); len(l.Evals) != 2 || l.Evals[0].Name != "later" || l.Evals[0].Scored != 0 || l.Evals[1].EvalID != testEvalID {
		t.Errorf("two evals: %+v", l.Evals)
	}
}

// accuracyRow is the JavaScript expression of the first cells (profile
// to final) of profile's row in the eval page's accuracy table, joined
// by "|".
func accuracyRow(profile string, cells int) string {
	return fmt.Sprintf(`(() => { const r = [...document.querySelectorAll('#eval-accuracy tbody tr')].find((r) => r.dataset.profile === %s);
		return r ? [...r.cells].slice(0, %d).map((c) => c.textContent).join('|') : ''; })()`, jsString(profile), cells)
}

// TestBrowserEval drives the eval page in a headless Chromium: the eval
// is listed (its id is not a session), its page shows the accuracy by
// round, the auditor's precision and recall and the per-task table with
// the figures of the stored events, a vera.eval.task_scored published
// then appears live (the figures follow), the end shows, a task's link
// opens its run, whose page links back to the eval; profile names that
// are HTML are shown as text.
func TestBrowserEval(t *testing.T) {
	path := chromium(t)
	e := startEnv(t, false)
	ctx := browser(t, path)
	var jsMu sync.Mutex
	var jsErrors []string
	consoleCtx, stopConsole := context.WithCancel(ctx)
	consoleDone := make(chan struct{})
	go func() {
		defer close(consoleDone)
		for msg, err := range chromedp.Console(consoleCtx) {
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

	e.publishEval()
	if err := chromedp.Do(ctx, chromedp.Navigate(e.url+"/#token="+e.srv.ReadToken())); err != nil {
		t.Fatal(err)
	}
	item := fmt.Sprintf(`#evals li[data-eval=%q]`, testEvalID)
	waitJS(t, ctx, "the eval listed", fmt.Sprintf(`(() => { const li = document.querySelector(%s);
		return !!li && li.textContent.includes('release-dates') && li.textContent.includes('3 tasks × 2 profiles') && li.textContent.includes('5/6 scored (1 infra)') && li.textContent.includes('running'); })()`, jsString(item)))
	waitJS(t, ctx, "the eval's runs listed as sessions", fmt.Sprintf(`!!document.querySelector('#sessions li[data-run=%q]')`, evalRunID("t1", evalProfileNA, 1)))
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll('#sessions li[data-run=%q]').length`, testEvalID))); err != nil || n != 0 {
		t.Fatalf("the eval's id in the session list: %d (%v)", n, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(item))); err != nil {
		t.Fatal(err)
	}

	waitJS(t, ctx, "the eval page", `!document.getElementById('eval-panel').hidden && document.getElementById('run-panel').hidden &&
		document.getElementById('eval-name').textContent === 'release-dates' && document.getElementById('eval-progress').textContent === 'scored 5/6 · infra 1' &&
		location.hash === '#eval=`+testEvalID+`'`)
	waitJS(t, ctx, "the accuracy table's columns", `[...document.querySelectorAll('#eval-accuracy thead th')].slice(0, 7).map((c) => c.textContent).join('|') === 'profile|scored|infra|first|r1|r2|final'`)
	waitJS(t, ctx, "no-audit's accuracy", accuracyRow(evalProfileNA, 7)+` === 'no-audit|2|0|50.0%|—|—|50.0%'`)
	waitJS(t, ctx, "audit2's accuracy", accuracyRow(evalProfileA, 7)+` === `+jsString(evalProfileA+"|3|1|33.3%|33.3%|66.7%|66.7%"))
	waitJS(t, ctx, "the auditor's quality", `(() => { const r = document.querySelector('#eval-auditor tbody tr');
		return document.querySelectorAll('#eval-auditor tbody tr').length === 1 && [...r.cells].map((c) => c.textContent).join('|') === `+jsString(evalProfileA+"|4|1|0|1|2|100.0%|50.0%")+`; })()`)
	taskRows := `[...document.querySelectorAll('#eval-tasks tbody tr')].map((r) => [...r.cells].map((c) => c.textContent).join('|'))`
	want := []string{
		"t1|no-audit|1|RESOLVED|1|r1 ✓ final ✓|4|" + evalRunID("t1", evalProfileNA, 1),
		"t1|" + evalProfileA + "|1|RESOLVED|2|r1 ✗ r2 ✓ (accepted) final ✓|4|" + evalRunID("t1", evalProfileA, 1),
		"t2|no-audit|2|RESOLVED|1|r1 ✗ final ✗|4|" + evalRunID("t2", evalProfileNA, 2),
		"t2|" + evalProfileA + "|1|RESOLVED|2|r1 ✓ r2 ✗ final ✓|4|" + evalRunID("t2", evalProfileA, 1),
		"t3|" + evalProfileA + "|1|FAILED · infra|0|final ✗|4|" + evalRunID("t3", evalProfileA, 1),
	}
	wantJSON, _ := json.Marshal(want)
	waitJS(t, ctx, "the per-task table", `JSON.stringify(`+taskRows+`) === JSON.stringify(`+string(wantJSON)+`)`)

	// A task scored now appears live, and the figures follow.
	e.publish(testEvalID, scored("t3", evalProfileNA, 1, true, false, round(1, true, 0, false, false)))
	waitJS(t, ctx, "the new task live", `document.getElementById('eval-progress').textContent === 'scored 6/6 · infra 1' &&
		[...document.querySelectorAll('#eval-tasks tbody tr')].some((r) => r.dataset.task === 't3' && r.dataset.profile === 'no-audit' && r.classList.contains('new'))`)
	waitJS(t, ctx, "no-audit's accuracy after it", accuracyRow(evalProfileNA, 7)+` === 'no-audit|3|0|66.7%|—|—|66.7%'`)
	waitJS(t, ctx, "the list follows", fmt.Sprintf(`document.querySelector(%s).textContent.includes('6/6 scored')`, jsString(item)))
	e.publish(testEvalID, catalog.EvalFinished{Scored: 6, Expected: 6, Infra: 1, DurationMS: 65000})
	waitJS(t, ctx, "the end", `document.getElementById('eval-state').textContent === 'finished' && document.getElementById('eval-progress').textContent === 'scored 6/6 · infra 1 · finished after 1m05s'`)

	injected, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__xss !== undefined || document.querySelectorAll('#main script, #sidebar script').length > 0`))
	if err != nil {
		t.Fatal(err)
	}
	if injected {
		t.Fatal("a profile name was rendered as HTML")
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifactDir(t), "dashboard-eval.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}

	// A task's link opens its run, which links back to the eval.
	run := evalRunID("t2", evalProfileA, 1)
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#eval-tasks tr[data-run=%q] a.run-link`, run)))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "the run's page", `document.getElementById('eval-panel').hidden && !document.getElementById('run-panel').hidden &&
		document.getElementById('run-id').textContent === `+jsString(run)+` && document.getElementById('task').value === 'task t2' &&
		location.hash === '#run=`+run+`'`)
	waitJS(t, ctx, "the link back to the eval", `!document.getElementById('lineage').hidden &&
		document.getElementById('eval-of').textContent === `+jsString("part of eval "+testEvalID+" · task t2 · profile "+evalProfileA+" · attempt 1"))
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#eval-of a.eval-link`))); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, "back on the eval page", `!document.getElementById('eval-panel').hidden && document.getElementById('eval-id').textContent === '`+testEvalID+`' &&
		`+accuracyRow(evalProfileNA, 7)+` === 'no-audit|3|0|66.7%|—|—|66.7%'`)

	jsMu.Lock()
	defer jsMu.Unlock()
	for _, msg := range jsErrors {
		t.Errorf("JavaScript error on the page: %s", msg)
	}
}
