package eval

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

func mustScorer(t *testing.T, spec ScorerSpec) Scorer {
	t.Helper()
	sc, err := NewScorer(spec, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

type scoreCase struct {
	ref, answer string
	correct     bool
	reason      string // a substring of the reason, when set
}

func runScoreCases(t *testing.T, spec ScorerSpec, cases []scoreCase) {
	t.Helper()
	sc := mustScorer(t, spec)
	for _, c := range cases {
		v, err := sc.Score(t.Context(), Task{ID: "t", Answer: c.ref, Scorer: spec}, c.answer)
		if err != nil {
			t.Errorf("%s %q vs %q: %v", spec.Type, c.answer, c.ref, err)
			continue
		}
		wantScore := 0.0
		if c.correct {
			wantScore = 1
		}
		if v.Correct != c.correct || v.Score != wantScore {
			t.Errorf("%s %+v: answer %q vs reference %q: %+v", spec.Type, spec, c.answer, c.ref, v)
		}
		if c.reason != "" && !strings.Contains(v.Reason, c.reason) {
			t.Errorf("%s: answer %q: reason %q, want it to contain %q", spec.Type, c.answer, v.Reason, c.reason)
		}
	}
}

func TestExactScorer(t *testing.T) {
	runScoreCases(t, ScorerSpec{Type: ScorerExact}, []scoreCase{
		{"Paris", "paris", true, "equals"},
		{"Paris", "  Paris.  ", true, ""},
		{"New York City", "new   york\n city", true, ""},
		{"Paris", "Paris, France", false, "differs"},
		{"Paris.", "Paris", true, ""},
		{"Paris", "Paris..", false, ""}, // one period only
	})
	runScoreCases(t, ScorerSpec{Type: ScorerExact, CaseSensitive: true}, []scoreCase{
		{"Paris", "paris", false, ""},
		{"Paris", " Paris. ", true, ""},
	})
}

func TestContainsScorer(t *testing.T) {
	runScoreCases(t, ScorerSpec{Type: ScorerContains}, []scoreCase{
		{"Marie Curie", "The answer is MARIE  curie, who won twice.", true, "contains"},
		{"Marie Curie", "Pierre Curie", false, "does not contain"},
		{"1903.", "in 1903 and 1911", true, ""},
	})
	runScoreCases(t, ScorerSpec{Type: ScorerContains, CaseSensitive: true}, []scoreCase{
		{"Marie Curie", "marie curie", false, ""},
	})
}

func TestRegexScorer(t *testing.T) {
	runScoreCases(t, ScorerSpec{Type: ScorerRegex}, []scoreCase{
		{`\b19(0[3-9])\b`, "first in 1903", true, `"1903"`},
		{`^v\d+\.\d+$`, "v1.22", true, ""},
		{`^v\d+\.\d+$`, "version v1.22", false, "does not match"},
		{`(?i)paris`, "PARIS", true, ""},
		{`paris`, "PARIS", false, ""},
	})
	if _, err := mustScorer(t, ScorerSpec{Type: ScorerRegex}).Score(t.Context(), Task{Answer: "("}, "x"); err == nil {
		t.Error("a bad pattern scored without an error")
	}
}

func TestNumbers(t *testing.T) {
	cases := map[string][]float64{
		"about 1,234.5 people (12%) in 2020-05": {1234.5, 12, 2020, 5},
		"-3e2 and $40 and −4":                   {-300, 40, -4},
		"version v2 and x.5 but .5 counts":      {0.5},
		"no numbers":                            nil,
		"The total is 42.":                      {42},
		"between 10-20":                         {10, 20},
	}
	for in, want := range cases {
		got := Numbers(in)
		if len(got) != len(want) {
			t.Errorf("Numbers(%q) = %v, want %v", in, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("Numbers(%q) = %v, want %v", in, got, want)
				break
			}
		}
	}
}

func TestNumericScorer(t *testing.T) {
	runScoreCases(t, ScorerSpec{Type: ScorerNumeric}, []scoreCase{
		{"1234.5", "It had 1,234.5 units in 2020.", true, "found 1234.5"},
		{"1,234.5", "1234.5", true, ""},
		{"12%", "growth of 12 %", true, ""},
		{"0.3", "0.1+0.2 = 0.30000000000000004", true, "found 0.30000000000000004"},
		{"1234.5", "It had 1,234 units", false, "nearest number 1234, reference 1234.5"},
		{"5", "no figure here", false, "no number in the answer"},
		{"-300", "-3e2", true, ""},
	})
	runScoreCases(t, ScorerSpec{Type: ScorerNumeric, Tolerance: 0.5}, []scoreCase{
		{"100", "about 100.4", true, ""},
		{"100", "about 100.6 or 98", false, "nearest number 100.6"},
	})
	runScoreCases(t, ScorerSpec{Type: ScorerNumeric, RelTolerance: 0.01}, []scoreCase{
		{"1000", "990", true, ""},
		{"1000", "989 or 1,010.5", false, "nearest number 1010.5"},
	})
}

func TestNewScorerErrors(t *testing.T) {
	if _, err := NewScorer(ScorerSpec{Type: ScorerJudge}, nil, "m"); err == nil || !strings.Contains(err.Error(), "no judge model") {
		t.Errorf("judge without a model: %v", err)
	}
	if _, err := NewScorer(ScorerSpec{Type: "fuzzy"}, nil, ""); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := NewScorer(ScorerSpec{Type: ScorerNumeric, Tolerance: -1}, nil, ""); err == nil {
		t.Error("negative tolerance accepted")
	}
}

func TestParseJudgeReply(t *testing.T) {
	good := []struct {
		text string
		want Verdict
	}{
		{`{"explanation": "same city", "correct": true, "score": 0.9}`, Verdict{Correct: true, Score: 0.9, Reason: "same city"}},
		{"Here you go:\n```json\n{\"correct\": false, \"score\": 0, \"explanation\": \"wrong year\",}\n```", Verdict{Correct: false, Score: 0, Reason: "wrong year"}},
		{`<think>{"correct": false}</think>{"correct": "yes", "score": "0.75"}`, Verdict{Correct: true, Score: 0.75}},
		{`{"correct": true}`, Verdict{Correct: true, Score: 1}},
		{`{"correct": false, "explanation": null}`, Verdict{Correct: false, Score: 0}},
	}
	for _, g := range good {
		got, err := ParseJudgeReply(g.text)
		if err != nil || got != g.want {
			t.Errorf("ParseJudgeReply(%q) = %+v, %v; want %+v", g.text, got, err, g.want)
		}
	}
	for _, bad := range []string{``, `correct: yes`, `{"score": 1}`, `{"correct": "maybe"}`, `{"correct": true, "score": 7}`, `{"correct": true, "score": "high"}`, `{"correct": true`} {
		if v, err := ParseJudgeReply(bad); err == nil {
			t.Errorf("ParseJudgeReply(%q) = %+v, want an error", bad, v)
		}
	}
}

// The judge scorer through the real model client against the scripted
// OpenAI-compatible server, with JSON and with streamed replies: the
// request carries the task, reference, rubric and answer, the reply
// schema, temperature 0, scope judge, purpose eval-judge and the call id;
// the verdict is the reply's.
func TestJudgeScorerThroughClient(t *testing.T) {
	for _, stream := range []bool{false, true} {
		name := "json"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
				scriptedmodel.OnLastUser(`ANSWER TO GRADE:\nThe capital is Paris`, scriptedmodel.Text("```json\n{\"explanation\": \"Names Paris, as the reference does.\", \"correct\": true, \"score\": 0.95}\n```")),
				scriptedmodel.OnLastUser(`ANSWER TO GRADE:\nLyon`, scriptedmodel.Text(`{"explanation": "Lyon is not the capital.", "correct": false, "score": 0.1}`)),
				scriptedmodel.OnLastUser(`ANSWER TO GRADE:\nbroken`, scriptedmodel.Text(`I think it is fine.`)),
			))
			var mu sync.Mutex
			var recs []llm.CallRecord
			c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "judge-m", MaxRetries: -1, Timeout: 30 * time.Second, Stream: stream,
				Logger: slog.New(slog.DiscardHandler),
				Recorder: llm.RecorderFunc{OnRequested: func(_ context.Context, rec llm.CallRecord) {
					mu.Lock()
					recs = append(recs, rec)
					mu.Unlock()
				}}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			spec := ScorerSpec{Type: ScorerJudge, Rubric: "Names the capital city."}
			sc, err := NewScorer(spec, c, "judge-m")
			if err != nil {
				t.Fatal(err)
			}
			task := Task{ID: "cap-fr", Task: "What is the capital of France?", Answer: "Paris", Scorer: spec}

			v, err := sc.Score(t.Context(), task, "The capital is Paris.")
			if err != nil {
				t.Fatal(err)
			}
			if want := (Verdict{Correct: true, Score: 0.95, Reason: "Names Paris, as the reference does."}); v != want {
				t.Errorf("verdict %+v, want %+v", v, want)
			}
			v, err = sc.Score(t.Context(), task, "Lyon")
			if err != nil {
				t.Fatal(err)
			}
			if want := (Verdict{Correct: false, Score: 0.1, Reason: "Lyon is not the capital."}); v != want {
				t.Errorf("verdict %+v, want %+v", v, want)
			}
			if _, err := sc.Score(t.Context(), task, "broken"); err == nil || !strings.Contains(err.Error(), "unusable reply") {
				t.Errorf("unparseable reply: %v, want an unusable reply error", err)
			}
			srv.AssertNoMisses(t)

			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3", len(reqs))
			}
			r := reqs[0]
			if r.Stream != stream || r.Model != "judge-m" || r.Temperature == nil || *r.Temperature != 0 {
				t.Errorf("request stream %v model %q temperature %v", r.Stream, r.Model, r.Temperature)
			}
			user := r.LastUserMessage()
			for _, part := range []string{"TASK:\nWhat is the capital of France?", "REFERENCE ANSWER:\nParis", "RUBRIC:\nNames the capital city.", "ANSWER TO GRADE:\nThe capital is Paris."} {
				if !strings.Contains(user, part) {
					t.Errorf("prompt lacks %q:\n%s", part, user)
				}
			}
			var rf struct {
				Type       string `json:"type"`
				JSONSchema struct {
					Name   string         `json:"name"`
					Schema map[string]any `json:"schema"`
				} `json:"json_schema"`
			}
			if err := json.Unmarshal(r.ResponseFormat, &rf); err != nil || rf.Type != "json_schema" || rf.JSONSchema.Name != JudgeSchemaName {
				t.Errorf("response_format %s (%v)", r.ResponseFormat, err)
			}
			if req, _ := rf.JSONSchema.Schema["required"].([]any); len(req) != 3 {
				t.Errorf("schema required %v, want explanation, correct, score", rf.JSONSchema.Schema["required"])
			}
			mu.Lock()
			defer mu.Unlock()
			if len(recs) != 3 {
				t.Fatalf("%d recorded calls", len(recs))
			}
			if rec := recs[0]; rec.Scope != "eval" || rec.Purpose != JudgePurpose || rec.CallID != JudgeCallID("cap-fr", "The capital is Paris.") || rec.ResponseFormat != JudgeSchemaName {
				t.Errorf("call record scope %q purpose %q id %q format %q", rec.Scope, rec.Purpose, rec.CallID, rec.ResponseFormat)
			}
			if !strings.HasPrefix(recs[1].CallID, "eval-judge-cap-fr-") || len(recs[1].CallID) != len("eval-judge-cap-fr-")+8 || recs[1].CallID == recs[0].CallID {
				t.Errorf("call ids %q %q", recs[0].CallID, recs[1].CallID)
			}
		})
	}
}

// The default rubric is sent when the task gives none.
func TestJudgeDefaultRubric(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text(`{"explanation": "ok", "correct": true, "score": 1}`)))
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "j", MaxRetries: -1, Timeout: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sc, err := NewScorer(ScorerSpec{Type: ScorerJudge}, c, "j")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Score(t.Context(), Task{ID: "x", Task: "q", Answer: "a"}, "a"); err != nil {
		t.Fatal(err)
	}
	if u := srv.Requests()[0].LastUserMessage(); !strings.Contains(u, "RUBRIC:\n"+DefaultRubric) {
		t.Errorf("prompt lacks the default rubric:\n%s", u)
	}
}

// A judge whose server fails: the error names the judge model.
func TestJudgeServerError(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Status: 500, ErrorMessage: "overloaded"}))
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "j", MaxRetries: -1, Timeout: 30 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sc, _ := NewScorer(ScorerSpec{Type: ScorerJudge}, c, "j")
	if _, err := sc.Score(t.Context(), Task{ID: "x", Task: "q", Answer: "a"}, "a"); err == nil || !strings.Contains(err.Error(), "judge model j") {
		t.Errorf("error %v", err)
	}
}
