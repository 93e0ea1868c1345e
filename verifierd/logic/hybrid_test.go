package logic

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// newHTTPJudge is the production model client (openai-go) pointed at
// the scripted server, without its own retries so that the hybrid's retry
// behaviour is what the tests see.
func newHTTPJudge(t *testing.T, srv *scriptedmodel.Server) llm.Completer {
	t.Helper()
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "judge-model", MaxRetries: -1, Timeout: 30 * time.Second, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newHybrid(t *testing.T, opts ...scriptedmodel.Option) (*Hybrid, *scriptedmodel.Server) {
	t.Helper()
	srv := scriptedmodel.Start(t, opts...)
	return &Hybrid{Judge: newHTTPJudge(t, srv), Model: "judge-model", Logger: discardLogger()}, srv
}

// uncertainFile is a different action with only a weak awareness cue: low
// confidence, thinking_eval 2 by logic.
func uncertainFile() InferenceFile {
	f := webFile("scroll(0, 200)", weakThinking, "click('12')")
	f.Goal = "Find the total of the March expense report."
	return f
}

func TestHybridConfidentCasesNeverCallTheJudge(t *testing.T) {
	h, srv := newHybrid(t) // no script: any call would be a miss
	bad := false
	files := map[string]InferenceFile{
		"repeat, aware":      webFile("click('46')", awareThinking, "click('46')"),
		"repeat, neutral":    webFile("scroll(0, 200)", neutralThinking, "scroll(0, 200)"),
		"different, plain":   webFile("scroll(0, 200)", neutralThinking, "click('12')"),
		"different, aware":   webFile("scroll(0, 200)", awareThinking, "click('12')"),
		"repeat, bad format": {Snapshot: Snapshot{TaskName: "t", RepetitiveAction: js("noop(1000)")}, Result: Result{GoodFormat: &bad, Action: js("<think>I keep waiting.</think>\n<action>noop(1000) # wait</action>")}},
	}
	for name, f := range files {
		t.Run(name, func(t *testing.T) {
			logic := Verify(f)
			v, err := h.Verify(t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			if v.DecidedBy != DecidedByLogic || v.VerifierType != VerifierType {
				t.Errorf("decided_by %q verifier_type %q, want logic/logic", v.DecidedBy, v.VerifierType)
			}
			if v.ThinkingEval != logic.ThinkingEval || v.ActionEval != logic.ActionEval {
				t.Errorf("scores %d/%d, logic says %d/%d", v.ThinkingEval, v.ActionEval, logic.ThinkingEval, logic.ActionEval)
			}
			if logic.Confidence == ConfidenceLow && !strings.Contains(v.ThinkingEvalReason, "judge was not asked") {
				t.Errorf("a low-confidence repetition should say why the judge was not asked: %s", v.ThinkingEvalReason)
			}
		})
	}
	if n := srv.Count(); n != 0 {
		t.Errorf("the judge was called %d times, want 0", n)
	}
}

func TestHybridUncertainCaseAsksTheJudge(t *testing.T) {
	reply := `{"thinking_eval": 1, "action_eval": 1, "reason": "'Previously' narrates navigation; the agent does not notice it scrolled repeatedly, though it clicks something else."}`
	h, srv := newHybrid(t, scriptedmodel.WithReplies(scriptedmodel.Text(reply)))
	f := uncertainFile()
	f.Input = []Message{{Role: "user", Content: js("# Goal\nx\n# History of interaction with the task:\n<action>scroll(0, 200)</action>\n<action>scroll(0, 200)</action>\n# Action space\n...")}}
	if Verify(f).Confidence != ConfidenceLow {
		t.Fatal("the case should be uncertain for logic")
	}
	v, err := h.Verify(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	if v.DecidedBy != DecidedByLLM || v.VerifierType != VerifierTypeHybrid {
		t.Errorf("decided_by %q verifier_type %q, want llm/hybrid", v.DecidedBy, v.VerifierType)
	}
	if v.ThinkingEval != ScoreDifferent || v.ActionEval != ActionAvoided {
		t.Errorf("scores %d/%d, want the judge's 1/1", v.ThinkingEval, v.ActionEval)
	}
	if !strings.Contains(v.ThinkingEvalReason, "narrates navigation") || !strings.Contains(v.ThinkingEvalReason, "LLM judge") {
		t.Errorf("reason %q should carry the judge's", v.ThinkingEvalReason)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Model != "judge-model" || r.Temperature == nil || *r.Temperature != 0 {
		t.Errorf("model %q temperature %v", r.Model, r.Temperature)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[1].Role != "user" {
		t.Fatalf("messages %+v", r.Messages)
	}
	user := r.Messages[1].Text
	for _, want := range []string{f.Goal, weakThinking, "click('12')", "scroll(0, 200)", "<action>scroll(0, 200)</action>", "thinking_eval 2", "thinking_eval 0", `"action_eval"`} {
		if !strings.Contains(user, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, user)
		}
	}
	if !strings.Contains(r.Messages[0].Text, "JSON object only") {
		t.Errorf("system message: %s", r.Messages[0].Text)
	}
}

func TestHybridRetriesOnceOnAnUnusableReply(t *testing.T) {
	good := "```json\n{\"thinking_eval\": 2, \"action_eval\": 1, \"reason\": \"It notes the earlier scrolling and clicks instead.\"}\n```"
	for name, first := range map[string]string{
		"not JSON":     "I would give it a 2.",
		"out of range": `{"thinking_eval": 3, "action_eval": 1, "reason": "very aware"}`,
		"inconsistent": `{"thinking_eval": 2, "action_eval": 0, "reason": "aware"}`,
		"no reason":    `{"thinking_eval": 2, "action_eval": 1}`,
	} {
		t.Run(name, func(t *testing.T) {
			h, srv := newHybrid(t, scriptedmodel.WithReplies(scriptedmodel.Text(first), scriptedmodel.Text(good)))
			v, err := h.Verify(t.Context(), uncertainFile())
			if err != nil {
				t.Fatal(err)
			}
			if v.DecidedBy != DecidedByLLM || v.ThinkingEval != ScoreAware || !strings.Contains(v.ThinkingEvalReason, "clicks instead") {
				t.Errorf("verdict %+v", v)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests, want 2", len(reqs))
			}
			m := reqs[1].Messages
			if len(m) != 4 || m[2].Role != "assistant" || m[2].Text != first || m[3].Role != "user" || !strings.Contains(m[3].Text, "could not be used") {
				t.Errorf("second request's messages: %+v", m)
			}
			if reqs[1].Messages[1].Text != reqs[0].Messages[1].Text {
				t.Error("the second request should repeat the prompt")
			}
		})
	}
}

func TestHybridFallsBackToLogicWhenTheJudgeFailsTwice(t *testing.T) {
	h, srv := newHybrid(t, scriptedmodel.WithReplies(
		scriptedmodel.Reply{Status: http.StatusInternalServerError, ErrorMessage: "overloaded"},
		scriptedmodel.Text("Sorry, I cannot answer in JSON."),
	))
	f := uncertainFile()
	logic := Verify(f)
	v, err := h.Verify(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	if srv.Count() != JudgeAttempts {
		t.Errorf("%d calls, want %d", srv.Count(), JudgeAttempts)
	}
	if v.DecidedBy != DecidedByLogicFallback || v.VerifierType != VerifierTypeHybrid {
		t.Errorf("decided_by %q verifier_type %q, want logic-fallback/hybrid", v.DecidedBy, v.VerifierType)
	}
	if v.ThinkingEval != logic.ThinkingEval || v.ActionEval != logic.ActionEval {
		t.Errorf("scores %d/%d, want logic's %d/%d", v.ThinkingEval, v.ActionEval, logic.ThinkingEval, logic.ActionEval)
	}
	for _, want := range []string{"failed 2 times", "overloaded", "no JSON object", logic.ThinkingEvalReason} {
		if !strings.Contains(v.ThinkingEvalReason, want) {
			t.Errorf("reason lacks %q: %s", want, v.ThinkingEvalReason)
		}
	}
}

func TestHybridJudgeMayFindARepetition(t *testing.T) {
	h, _ := newHybrid(t, scriptedmodel.WithReplies(scriptedmodel.Text(`{"thinking_eval": 0, "action_eval": 0, "reason": "Clicking 12 scrolls the same list again."}`)))
	v, err := h.Verify(t.Context(), uncertainFile())
	if err != nil {
		t.Fatal(err)
	}
	if v.ThinkingEval != ScoreRepeated || v.ActionEval != ActionRepeated || v.DecidedBy != DecidedByLLM {
		t.Errorf("verdict %+v", v)
	}
}

func TestHybridGivesUpWithTheContext(t *testing.T) {
	h, _ := newHybrid(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Delay: time.Minute}))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if v, err := h.Verify(ctx, uncertainFile()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Verify = %+v, %v; want the context's error and no verdict", v, err)
	}
	if _, err := (&Hybrid{}).Verify(t.Context(), uncertainFile()); err == nil {
		t.Error("a Hybrid without a judge should fail")
	}
}

func TestParseJudgeReply(t *testing.T) {
	ok := map[string]JudgeReply{
		`{"thinking_eval":2,"action_eval":1,"reason":"aware"}`:                                             {2, 1, "aware"},
		"```json\n{\"thinking_eval\": 1, \"action_eval\": 1, \"reason\": \"r\"}\n```":                      {1, 1, "r"},
		"Here is my evaluation:\n{\"thinking_eval\": 0, \"reason\": \"repeats\"} done":                     {0, 0, "repeats"},
		`<think>maybe {"x":1}</think>{"thinking_eval":"2","action_eval":1.0,"reason":" r "}`:               {2, 1, "r"},
		`{"eval_score": 1, "eval_reason": "MIRAGE's names"}`:                                               {1, 1, "MIRAGE's names"},
		`{"note": {"thinking_eval": 9}} {"thinking_eval": 2, "action_eval": 1, "reason": "second object"}`: {},
	}
	for in, want := range ok {
		got, err := ParseJudgeReply(in)
		if want == (JudgeReply{}) {
			// The first object decodes but lacks thinking_eval: an error.
			if err == nil {
				t.Errorf("ParseJudgeReply(%q) = %+v, want an error", in, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("ParseJudgeReply(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{
		"", "2", "{", `{"thinking_eval": 1.5, "reason": "r"}`, `{"thinking_eval": -1, "reason": "r"}`,
		`{"thinking_eval": 1, "action_eval": 0, "reason": "r"}`, `{"thinking_eval": 0, "action_eval": 1, "reason": "r"}`,
		`{"thinking_eval": 1, "action_eval": 2, "reason": "r"}`, `{"thinking_eval": 1, "reason": ""}`, `{"thinking_eval": 1, "reason": 5}`,
	} {
		if got, err := ParseJudgeReply(in); err == nil || !errors.Is(err, ErrJudgeReply) {
			t.Errorf("ParseJudgeReply(%q) = %+v, %v; want an ErrJudgeReply", in, got, err)
		}
	}
}
