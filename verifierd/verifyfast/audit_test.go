package verifyfast

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

func testAuditor(url string) *Auditor {
	temp := 0.1
	return &Auditor{
		Verify:      newHTTPCompleter(url),
		VerifyModel: qwenModel,
		Strategy:    DefaultStrategy().ForProfile("cross-verify"),
		Profile:     "cross-verify",
		Sampling:    llm.Sampling{Temperature: &temp, MaxTokens: 500},
	}
}

const (
	decReply   = `{"facts": ["Sales rose 5%."], "chains": ["sales rose -> demand grew"]}`
	factReply  = `{"findings": [{"claim": "Sales rose 5%", "level": "contradiction", "severity": "high", "quote": "sales fell 5%", "reason": "opposite direction"}]}`
	logicReply = `{"findings": []}`
)

var auditItem = Item{ID: "7", Tag: TagMajorFactual, ExpectedCreditScore: 2, ContextInput: "Sales fell 5%.", ModelOutput: "Sales rose 5%, so demand grew."}

func phaseRule(task, content string) scriptedmodel.Rule {
	r := scriptedmodel.OnTranscript(`TASK: `+task, scriptedmodel.Reply{Content: content, Times: scriptedmodel.Forever})
	return r
}

// The logic check's first reply is malformed; the re-ask, carrying the
// reason, gets a valid one and the item is scored.
func TestAuditRepairedOnSecondAsk(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		scriptedmodel.OnLastUser(`TASK: REPAIR`, scriptedmodel.Reply{Content: logicReply, Times: scriptedmodel.Forever}),
		phaseRule("DECOMPOSE", "```json\n"+decReply+"\n```"),
		phaseRule("FACT_CHECK", "Sure! "+factReply+" Hope this helps."),
		phaseRule("LOGIC_CHECK", `{"findings": [{"claim": "demand grew", "level": "contradiction", "severity": "high", "quote": "sales fell"`),
	))
	a := testAuditor(srv.URL())
	res, err := a.AuditItem(context.Background(), auditItem)
	if err != nil {
		t.Fatal(err)
	}
	srv.AssertNoMisses(t)
	if res.Failed() || res.CreditScore != 2 || res.HighCount != 1 || res.Zone != ZoneBad || res.Profile != "cross-verify" {
		t.Fatalf("result = %+v", res)
	}
	if srv.Count() != 4 {
		t.Errorf("%d requests, want 4", srv.Count())
	}
	var repair *scriptedmodel.Request
	for _, r := range srv.Requests() {
		if len(r.Messages) == 4 {
			repair = &r
		}
		if r.Model != qwenModel {
			t.Errorf("request to model %q", r.Model)
		}
	}
	if repair == nil {
		t.Fatal("no re-ask")
	}
	if !strings.Contains(repair.Messages[2].Text, `"quote": "sales fell"`) || repair.Messages[2].Role != "assistant" {
		t.Errorf("re-ask does not carry the bad reply: %+v", repair.Messages[2])
	}
	if !strings.Contains(repair.Messages[3].Text, "the JSON object is not complete") {
		t.Errorf("re-ask does not carry the reason: %s", repair.Messages[3].Text)
	}
	if !strings.Contains(repair.Messages[0].Text, "TASK: LOGIC_CHECK") {
		t.Errorf("re-ask is not the logic check's")
	}
	if !strings.Contains(string(repair.ResponseFormat), `"name":"vera_verifyfast_findings"`) {
		t.Errorf("re-ask response_format %s", repair.ResponseFormat)
	}

	aud, err := a.Audit(context.Background(), auditItem.ContextInput, auditItem.ModelOutput)
	if err != nil {
		t.Fatal(err)
	}
	if len(aud.Phases) != 3 || len(aud.Phases[2].Replies) != 2 || len(aud.Phases[2].Problems) != 1 || aud.Phases[1].Model != qwenModel {
		t.Errorf("phases = %+v", aud.Phases)
	}
	if aud.Decomposition.Facts[0] != "Sales rose 5%." || aud.CreditScore != 2 || aud.Findings[0].Kind != KindFact {
		t.Errorf("audit = %+v", aud)
	}
}

// An item whose phase fails twice is a failed result with the reason and
// no score; a phase 1 failure stops the audit.
func TestAuditFailsTwice(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		phaseRule("DECOMPOSE", decReply),
		phaseRule("FACT_CHECK", `{"findings": [{"claim": "x", "level": "contradiction", "severity": "medium", "quote": "y"}]}`),
		phaseRule("LOGIC_CHECK", logicReply),
	))
	a := testAuditor(srv.URL())
	res, err := a.AuditItem(context.Background(), auditItem)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Failed() || res.CreditScore != 0 || res.Zone != ZoneNone || res.HighCount != 0 {
		t.Fatalf("result = %+v", res)
	}
	want := `phase 2 (fact check): no usable reply after 2 attempts: findings[0]: severity: unknown severity "medium" (want high or low)`
	if len(res.Errors) != 1 || res.Errors[0] != want {
		t.Errorf("errors = %q\nwant %q", res.Errors, want)
	}
	if res.Decomposition == nil || res.Tokens.Total == 0 {
		t.Errorf("the failed result lost what was obtained: %+v", res)
	}
	if srv.Count() != 4 { // decompose, fact ×2, logic
		t.Errorf("%d requests, want 4", srv.Count())
	}
	// The result line is accepted by ReadResults as a failed result.
	if _, bad := ReadResults(strings.NewReader(mustJSON(res))); len(bad) != 0 {
		t.Errorf("failed result rejected: %v", bad)
	}

	// With re-asks disabled the same failure comes after one attempt.
	a.MaxRepairs = -1
	n := srv.Count()
	res, _ = a.AuditItem(context.Background(), auditItem)
	if srv.Count()-n != 3 || !strings.Contains(res.Errors[0], "after 1 attempt:") {
		t.Errorf("MaxRepairs -1: %d requests, %v", srv.Count()-n, res.Errors)
	}

	// Phase 1 over the fact limit fails the whole audit.
	srv2 := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: `{"facts": ["a","b","c","d","e","f"], "chains": []}`}))
	res, _ = testAuditor(srv2.URL()).AuditItem(context.Background(), auditItem)
	if len(res.Errors) != 1 || !strings.HasPrefix(res.Errors[0], "phase 1 (decomposition): no usable reply after 2 attempts: facts: 6 facts, at most 5 allowed") || srv2.Count() != 2 {
		t.Errorf("errors = %v after %d requests", res.Errors, srv2.Count())
	}
}

// Phases 2 and 3 run at the same time: an audit takes about two model
// latencies, not three.
func TestAuditPhasesInParallel(t *testing.T) {
	const l = 400 * time.Millisecond
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		scriptedmodel.OnTranscript(`TASK: DECOMPOSE`, scriptedmodel.Reply{Content: decReply, Delay: l, Times: scriptedmodel.Forever}),
		scriptedmodel.OnTranscript(`TASK: FACT_CHECK`, scriptedmodel.Reply{Content: factReply, Delay: l, Times: scriptedmodel.Forever}),
		scriptedmodel.OnTranscript(`TASK: LOGIC_CHECK`, scriptedmodel.Reply{Content: logicReply, Delay: l, Times: scriptedmodel.Forever}),
	))
	a := testAuditor(srv.URL())
	start := time.Now()
	aud, err := a.Audit(context.Background(), auditItem.ContextInput, auditItem.ModelOutput)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// Wall time is only a sanity bound (a loaded CI machine stretches it);
	// the proof of overlap is below: phase 3's request arrived while phase
	// 2's was still being answered.
	if elapsed >= 6*l {
		t.Errorf("audit took %v with latency %v", elapsed, l)
	}
	reqs := srv.Requests()
	if d := reqs[2].Received.Sub(reqs[1].Received); d > l/2 || d < -l/2 {
		t.Errorf("phases 2 and 3 started %v apart", d)
	}
	if aud.Duration < 2*l {
		t.Errorf("duration %v", aud.Duration)
	}
}

// DecomposeWithRun sends Phase 1 to the run model and the checks to the
// verify model; by default all three go to the verify model.
func TestAuditModelsPerPhase(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		phaseRule("DECOMPOSE", decReply), phaseRule("FACT_CHECK", factReply), phaseRule("LOGIC_CHECK", logicReply),
	))
	a := testAuditor(srv.URL())
	a.Run, a.RunModel = newHTTPCompleter(srv.URL()), kimiModel
	if _, err := a.Audit(context.Background(), "c", "o"); err != nil {
		t.Fatal(err)
	}
	a.DecomposeWithRun = true
	if _, err := a.Audit(context.Background(), "c", "o"); err != nil {
		t.Fatal(err)
	}
	var models []string
	for _, r := range srv.Requests() {
		phase := phaseRE.FindStringSubmatch(r.Transcript())[1]
		models = append(models, phase+"="+r.Model)
	}
	got := strings.Join(models[:1], ",") + "|" + strings.Join(models[3:4], ",")
	if got != "DECOMPOSE="+qwenModel+"|DECOMPOSE="+kimiModel {
		t.Errorf("models = %v", models)
	}
	for _, m := range append(models[1:3], models[4:]...) {
		if !strings.HasSuffix(m, "="+qwenModel) {
			t.Errorf("check went to %s", m)
		}
	}

	// No completer: an error, no call.
	if _, err := (&Auditor{}).Audit(context.Background(), "c", "o"); err == nil {
		t.Error("Audit without completers succeeded")
	}
}

// A cancelled context is no result.
func TestAuditItemCancelled(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: decReply, Delay: 5 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := testAuditor(srv.URL()).AuditItem(ctx, auditItem)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v", err)
	}
}
