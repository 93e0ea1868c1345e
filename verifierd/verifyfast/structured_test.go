package verifyfast

import (
	"context"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/schematest"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

func TestPhaseSchemasMatchParsers(t *testing.T) {
	dec := schematest.Plain(t, decompositionSchema.Schema)
	if got, want := schematest.Strings(dec["required"]), schematest.JSONFields(reflect.TypeFor[decompositionReply]()); !slices.Equal(got, want) {
		t.Errorf("decomposition: required %v, the parser reads %v", got, want)
	}
	fs := schematest.Plain(t, findingsSchema.Schema)
	if got, want := schematest.Strings(fs["required"]), schematest.JSONFields(reflect.TypeFor[findingsReply]()); !slices.Equal(got, want) {
		t.Errorf("findings: required %v, the parser reads %v", got, want)
	}
	item := fs["properties"].(map[string]any)["findings"].(map[string]any)["items"].(map[string]any)
	if got, want := schematest.Strings(item["required"]), schematest.JSONFields(reflect.TypeFor[findingReply]()); !slices.Equal(got, want) {
		t.Errorf("finding: required %v, the parser reads %v", got, want)
	}
	for _, s := range []map[string]any{dec, fs, item} {
		if s["additionalProperties"] != false || len(s["required"].([]any)) != len(s["properties"].(map[string]any)) {
			t.Errorf("not strict: %v", s)
		}
	}
	if !decompositionSchema.Strict || !findingsSchema.Strict {
		t.Error("schemas not strict")
	}
	// Every enum value is one the parser accepts.
	props := item["properties"].(map[string]any)
	for _, v := range schematest.Strings(props["level"].(map[string]any)["enum"]) {
		if _, err := ParseErrorLevel(v); err != nil {
			t.Errorf("level %q: %v", v, err)
		}
	}
	for _, v := range schematest.Strings(props["severity"].(map[string]any)["enum"]) {
		if _, err := ParseSeverity(v); err != nil {
			t.Errorf("severity %q: %v", v, err)
		}
	}

	// Examples: valid for the schema and for the parser.
	ds, fss := schematest.Compile(t, decompositionSchema.Schema), schematest.Compile(t, findingsSchema.Schema)
	for _, ex := range []string{decReply, `{"facts":[],"chains":[]}`} {
		if err := schematest.Validate(ds, ex); err != nil {
			t.Errorf("decomposition %s: %v", ex, err)
		}
		if _, err := ParseDecomposition(ex); err != nil {
			t.Errorf("parser rejects %s: %v", ex, err)
		}
	}
	for _, ex := range []string{factReply, logicReply,
		`{"findings":[{"claim":"c","level":"reasonable_inference","severity":"none","quote":"","reason":"r"}]}`} {
		if err := schematest.Validate(fss, ex); err != nil {
			t.Errorf("findings %s: %v", ex, err)
		}
		if _, err := ParseFindings(ex, KindFact); err != nil {
			t.Errorf("parser rejects %s: %v", ex, err)
		}
	}
	for _, bad := range []string{`{"facts":[]}`, `{"facts":["a"],"chains":[],"x":1}`} {
		if schematest.Validate(ds, bad) == nil {
			t.Errorf("decomposition schema accepts %s", bad)
		}
	}
	for _, bad := range []string{`{"findings":[{"claim":"c","level":"wrong","severity":"high","quote":"q","reason":"r"}]}`,
		`{"findings":[{"claim":"c","level":"unsupported","severity":"medium","quote":"q","reason":"r"}]}`,
		`{"findings":[{"claim":"c","level":"unsupported","quote":"q","reason":"r"}]}`} {
		if schematest.Validate(fss, bad) == nil {
			t.Errorf("findings schema accepts %s", bad)
		}
	}
}

// droppedRecorder keeps what the client reports of every attempt.
type droppedRecorder struct {
	mu      sync.Mutex
	formats []string   // per attempt: the response format sent
	dropped [][]string // per attempt: Response.Dropped
	errs    []string
}

func (r *droppedRecorder) Requested(_ context.Context, rec llm.CallRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.formats = append(r.formats, rec.ResponseFormat)
}

func (r *droppedRecorder) Responded(_ context.Context, _ llm.CallRecord, resp llm.Response, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropped = append(r.dropped, resp.Dropped)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	r.errs = append(r.errs, msg)
}

func recordingAuditor(t *testing.T, url string) (*Auditor, *droppedRecorder) {
	t.Helper()
	rec := &droppedRecorder{}
	c, err := llm.New(llm.Config{BaseURL: url, Model: "unused", MaxRetries: -1, Timeout: 30 * time.Second, Recorder: rec,
		HTTPClient: &http.Client{Transport: testTransport}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	a := testAuditor(url)
	a.Verify = c
	return a, rec
}

// wantFormat is the schema a phase prompt's call requests.
func wantFormat(t *testing.T, r scriptedmodel.Request) llm.JSONSchema {
	t.Helper()
	m := phaseRE.FindStringSubmatch(r.Transcript())
	if m == nil {
		t.Fatalf("not a phase prompt: %.80q", r.Transcript())
	}
	if m[1] == "DECOMPOSE" {
		return decompositionSchema
	}
	return findingsSchema
}

// (a) A server that honours response_format: each phase requests its
// schema, the replies are the bare objects, the item is scored; the
// Auditor's sampling options go with every call.
func TestAuditStructuredOutputsHonoured(t *testing.T) {
	replies := map[string]string{"DECOMPOSE": decReply, "FACT_CHECK": factReply, "LOGIC_CHECK": logicReply}
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		phaseRule("DECOMPOSE", decReply), phaseRule("FACT_CHECK", factReply), phaseRule("LOGIC_CHECK", logicReply)))
	a, rec := recordingAuditor(t, srv.URL())
	topP, seed := 0.8, int64(3)
	a.Sampling.TopP, a.Sampling.Seed = &topP, &seed
	a.Sampling.ExtraBody = map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}
	res, err := a.AuditItem(context.Background(), auditItem)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() || res.CreditScore != 2 {
		t.Fatalf("result = %+v", res)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, r := range reqs {
		want := wantFormat(t, r)
		name, strict, schema := schematest.Sent(t, r.ResponseFormat)
		if name != want.Name || !strict || !reflect.DeepEqual(schema, schematest.Plain(t, want.Schema)) {
			t.Errorf("response_format %s strict %v schema %v, want %s", name, strict, schema, want.Name)
		}
		if got, exp := schematest.Strings(schema["required"]), schematest.Strings(schematest.Plain(t, want.Schema)["required"]); !slices.Equal(got, exp) {
			t.Errorf("%s: required %v, want %v", name, got, exp)
		}
		phase := phaseRE.FindStringSubmatch(r.Transcript())[1]
		if err := schematest.Validate(schematest.Compile(t, schema), replies[phase]); err != nil {
			t.Errorf("%s: the scripted reply does not follow the schema: %v", phase, err)
		}
		if r.Temperature == nil || *r.Temperature != 0.1 || r.MaxTokens == nil || *r.MaxTokens != 500 || r.TopP == nil || *r.TopP != topP ||
			r.Seed == nil || *r.Seed != seed || string(r.Members["chat_template_kwargs"]) != `{"enable_thinking":false}` {
			t.Errorf("%s: sampling temperature %v max_tokens %v top_p %v seed %v kwargs %s", phase, r.Temperature, r.MaxTokens, r.TopP, r.Seed, r.Members["chat_template_kwargs"])
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for i, f := range rec.formats {
		if !strings.HasPrefix(f, "vera_verifyfast_") || len(rec.dropped[i]) != 0 {
			t.Errorf("attempt %d: format %q dropped %v", i, f, rec.dropped[i])
		}
	}
}

// (b) A server that refuses response_format with an HTTP 400: the first
// call is sent again without it; the client remembers the refusal, so the
// later phases are sent without it at once. Every call succeeds and says
// so (Response.Dropped).
func TestAuditStructuredOutputsRefused(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		scriptedmodel.OnFunc(func(r scriptedmodel.Request) (scriptedmodel.Reply, bool) {
			if len(r.ResponseFormat) == 0 {
				return scriptedmodel.Reply{}, false
			}
			return scriptedmodel.Reply{Status: 400, ErrorMessage: "Unrecognized request argument supplied: response_format"}, true
		}),
		phaseRule("DECOMPOSE", decReply), phaseRule("FACT_CHECK", factReply), phaseRule("LOGIC_CHECK", logicReply)))
	a, rec := recordingAuditor(t, srv.URL())
	res, err := a.AuditItem(context.Background(), auditItem)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() || res.CreditScore != 2 {
		t.Fatalf("result = %+v", res)
	}
	if n := srv.Count(); n != 4 {
		t.Errorf("%d requests, want 4 (the first phase refused once, then every phase sent without response_format)", n)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	refused, dropped := 0, 0
	for i := range rec.formats {
		switch {
		case rec.formats[i] != "" && strings.Contains(rec.errs[i], "response_format") && len(rec.dropped[i]) == 0:
			refused++
		case rec.formats[i] == "" && rec.errs[i] == "" && slices.Equal(rec.dropped[i], []string{llm.FeatureResponseFormat}):
			dropped++
		default:
			t.Errorf("attempt %d: format %q error %q dropped %v", i, rec.formats[i], rec.errs[i], rec.dropped[i])
		}
	}
	if refused != 1 || dropped != 3 {
		t.Errorf("%d refused and %d dropped attempts, want 1 and 3", refused, dropped)
	}
}

// (c) A server that accepts response_format and ignores it, with prose
// around the JSON: the replies are read as before, without a re-ask.
func TestAuditStructuredOutputsIgnored(t *testing.T) {
	wrap := func(s string) string {
		return "Here is my analysis.\n```json\n" + s + "\n```\nLet me know if you need more."
	}
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		phaseRule("DECOMPOSE", wrap(decReply)), phaseRule("FACT_CHECK", wrap(factReply)), phaseRule("LOGIC_CHECK", "Nothing wrong: "+logicReply)))
	a, _ := recordingAuditor(t, srv.URL())
	res, err := a.AuditItem(context.Background(), auditItem)
	if err != nil {
		t.Fatal(err)
	}
	if res.Failed() || res.CreditScore != 2 || res.HighCount != 1 {
		t.Fatalf("result = %+v", res)
	}
	if n := srv.Count(); n != 3 {
		t.Errorf("%d requests, want 3 (no re-ask)", n)
	}
	for _, r := range srv.Requests() {
		if name, _, _ := schematest.Sent(t, r.ResponseFormat); name != wantFormat(t, r).Name {
			t.Errorf("response_format %s", name)
		}
	}
}
