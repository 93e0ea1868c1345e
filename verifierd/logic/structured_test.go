package logic

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/llm/schematest"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

func TestJudgeSchemaMatchesParser(t *testing.T) {
	plain := schematest.Plain(t, judgeSchema.Schema)
	var fields []string
	rt := reflect.TypeFor[JudgeReply]()
	for i := range rt.NumField() {
		n, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		fields = append(fields, n)
	}
	if got := schematest.Strings(plain["required"]); !slices.Equal(got, fields) {
		t.Errorf("required %v, the parser reads %v", got, fields)
	}
	if !judgeSchema.Strict || plain["additionalProperties"] != false || len(plain["properties"].(map[string]any)) != len(fields) {
		t.Errorf("not strict: %v", plain)
	}
	s := schematest.Compile(t, judgeSchema.Schema)
	for _, jr := range []JudgeReply{{ScoreRepeated, ActionRepeated, "repeats"}, {ScoreDifferent, ActionAvoided, "r"}, {ScoreAware, ActionAvoided, "aware"}} {
		b, _ := json.Marshal(jr)
		if err := schematest.Validate(s, string(b)); err != nil {
			t.Errorf("%s rejected: %v", b, err)
		}
		if got, err := ParseJudgeReply(string(b)); err != nil || got != jr {
			t.Errorf("ParseJudgeReply(%s) = %+v, %v", b, got, err)
		}
	}
	for _, bad := range []string{`{"thinking_eval":3,"action_eval":1,"reason":"r"}`, `{"thinking_eval":1,"action_eval":2,"reason":"r"}`,
		`{"thinking_eval":1,"reason":"r"}`, `{"thinking_eval":1,"action_eval":1,"reason":"r","score":1}`} {
		if schematest.Validate(s, bad) == nil {
			t.Errorf("schema accepts %s", bad)
		}
	}
	// The rubric's link between the scores is the parser's to check.
	if _, err := ParseJudgeReply(`{"thinking_eval":2,"action_eval":0,"reason":"r"}`); err == nil {
		t.Error("inconsistent scores accepted")
	}
}

// (a) A server that honours response_format: the judge's call requests
// JudgeReply's schema, the reply is the bare object; the Hybrid's sampling
// options go with it.
func TestHybridStructuredOutputHonoured(t *testing.T) {
	reply := `{"thinking_eval":2,"action_eval":1,"reason":"It notes the scrolling went nowhere and clicks instead."}`
	h, srv := newHybrid(t, scriptedmodel.WithReplies(scriptedmodel.Text(reply)))
	topP, seed := 0.7, int64(5)
	h.Sampling = llm.Sampling{TopP: &topP, Seed: &seed, ExtraBody: map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}}
	v, err := h.Verify(t.Context(), uncertainFile())
	if err != nil {
		t.Fatal(err)
	}
	if v.DecidedBy != DecidedByLLM || v.ThinkingEval != ScoreAware {
		t.Errorf("verdict %+v", v)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	name, strict, schema := schematest.Sent(t, r.ResponseFormat)
	if name != "vera_logic_judge" || !strict || !reflect.DeepEqual(schema, schematest.Plain(t, judgeSchema.Schema)) {
		t.Errorf("response_format %s strict %v schema %v", name, strict, schema)
	}
	if got := schematest.Strings(schema["required"]); !slices.Equal(got, []string{"thinking_eval", "action_eval", "reason"}) {
		t.Errorf("required %v", got)
	}
	if err := schematest.Validate(schematest.Compile(t, schema), reply); err != nil {
		t.Errorf("the scripted reply does not follow the schema: %v", err)
	}
	if r.Temperature == nil || *r.Temperature != 0 || r.TopP == nil || *r.TopP != topP || r.Seed == nil || *r.Seed != seed ||
		string(r.Members["chat_template_kwargs"]) != `{"enable_thinking":false}` {
		t.Errorf("temperature %v top_p %v seed %v kwargs %s", r.Temperature, r.TopP, r.Seed, r.Members["chat_template_kwargs"])
	}
	// A temperature in Sampling takes precedence.
	warm := 0.6
	h.Sampling.Temperature = &warm
	srv.AddReplies(scriptedmodel.Text(reply))
	if _, err := h.Verify(t.Context(), uncertainFile()); err != nil {
		t.Fatal(err)
	}
	if r := srv.Requests()[1]; r.Temperature == nil || *r.Temperature != warm {
		t.Errorf("temperature %v, want %v", r.Temperature, warm)
	}
}

// (b) A server that refuses response_format with an HTTP 400, in the live
// verifier whose judge records its calls on the bus: the call is sent again
// without it and decides, and vera.model.responded says it was dropped.
func TestLiveJudgeStructuredOutputRefused(t *testing.T) {
	_, b := bustest.New(t)
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(r scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		if len(r.ResponseFormat) > 0 {
			return scriptedmodel.Reply{Status: 400, ErrorMessage: "'response_format.type' must be 'json_object' or 'text'"}, true
		}
		return scriptedmodel.Text(`{"thinking_eval": 1, "action_eval": 1, "reason": "It reads the README without noticing the repeated listing."}`), true
	})))
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "judge-model", MaxRetries: -1, Timeout: 30 * time.Second, Logger: discardLogger(),
		Recorder: llmbus.New(b, llmbus.Options{Logger: discardLogger()})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	hybrid := &Hybrid{Judge: c, Model: "judge-model", Logger: discardLogger()}

	publishTask(t, b, "run-s")
	publishSteps(t, b, "run-s", []catalog.AgentStep{
		shellStep(1, "List the work directory.", "ls /work", false),
		shellStep(2, "List the work directory.", "ls  /work", false),
		shellStep(3, "I previously listed the directory; now I read the README.", "cat /work/README.md", false),
	})
	stop := startLive(t, b, Config{Window: 3, Hybrid: hybrid})
	waitIdle(t, b, DefaultDurable)
	stop()

	got := verdicts(t, b, "run-s")
	if len(got) != 1 || got[0].V.DecidedBy != catalog.DecidedByLLM || got[0].V.ThinkingEval != 1 {
		t.Fatalf("verdicts %+v, want the judge's on step 3", got)
	}
	if n := srv.Count(); n != 2 {
		t.Errorf("%d requests, want 2 (refused, then without response_format)", n)
	}
	var reqs []catalog.ModelRequested
	var resps []catalog.ModelResponded
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: "run-s", Types: []string{catalog.TypeModelRequested, catalog.TypeModelResponded}}) {
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Event.Type {
		case catalog.TypeModelRequested:
			var d catalog.ModelRequested
			if err := rec.Event.DecodeData(&d); err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, d)
		case catalog.TypeModelResponded:
			var d catalog.ModelResponded
			if err := rec.Event.DecodeData(&d); err != nil {
				t.Fatal(err)
			}
			resps = append(resps, d)
		}
	}
	if len(reqs) != 2 || len(resps) != 2 {
		t.Fatalf("%d model.requested, %d model.responded, want 2 each", len(reqs), len(resps))
	}
	for _, r := range reqs {
		if want := r.Attempt == 1; (r.ResponseFormat == "vera_logic_judge") != want || (r.ResponseFormat == "") == want {
			t.Errorf("attempt %d: response_format %q", r.Attempt, r.ResponseFormat)
		}
	}
	for _, r := range resps {
		switch r.Attempt {
		case 1:
			if r.HTTPStatus != 400 || r.Error == "" || len(r.Dropped) != 0 {
				t.Errorf("attempt 1: %+v", r)
			}
		case 2:
			if r.Error != "" || !slices.Equal(r.Dropped, []string{llm.FeatureResponseFormat}) {
				t.Errorf("attempt 2: error %q dropped %v", r.Error, r.Dropped)
			}
		}
	}
}

// (c) A server that accepts response_format and ignores it, with prose
// around the JSON: the reply is read as before, without a retry.
func TestHybridStructuredOutputIgnored(t *testing.T) {
	h, srv := newHybrid(t, scriptedmodel.WithReplies(scriptedmodel.Text(
		"My evaluation:\n```json\n{\"thinking_eval\": 1, \"action_eval\": 1, \"reason\": \"A different action, no sign it noticed.\"}\n```\nThat is all.")))
	v, err := h.Verify(t.Context(), uncertainFile())
	if err != nil {
		t.Fatal(err)
	}
	if v.DecidedBy != DecidedByLLM || v.ThinkingEval != ScoreDifferent || !strings.Contains(v.ThinkingEvalReason, "no sign it noticed") {
		t.Errorf("verdict %+v", v)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	if name, _, _ := schematest.Sent(t, reqs[0].ResponseFormat); name != "vera_logic_judge" {
		t.Errorf("response_format %s", name)
	}
}
