package deepverify

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/schematest"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// checkStrict checks every object of a schema against OpenAI's strict mode:
// all properties required, no others allowed.
func checkStrict(t *testing.T, where string, s map[string]any) {
	t.Helper()
	switch s["type"] {
	case "object":
		props := s["properties"].(map[string]any)
		req := schematest.Strings(s["required"])
		if len(req) != len(props) || s["additionalProperties"] != false {
			t.Errorf("%s: required %v of %d properties, additionalProperties %v", where, req, len(props), s["additionalProperties"])
		}
		for _, k := range req {
			p, ok := props[k].(map[string]any)
			if !ok {
				t.Errorf("%s: required %q is not a property", where, k)
				continue
			}
			checkStrict(t, where+"."+k, p)
		}
	case "array":
		checkStrict(t, where+"[]", s["items"].(map[string]any))
	}
}

func TestReplySchemasMatchParsers(t *testing.T) {
	yes := true
	cases := []struct {
		schema  llm.JSONSchema
		typ     reflect.Type
		example any
		parse   func(string) error
	}{
		{decompositionSchema, reflect.TypeFor[Decomposition](), Decomposition{
			Summary:      []catalog.AuditFinding{{Step: 1, Source: "ev_0001", Finding: "f"}},
			LikelyErrors: []catalog.LikelyError{{Class: catalog.ErrorReasoning, Justification: "j"}},
			Checks:       []PlannedCheck{{Source: urlPy, Question: "Does it?", LoadBearing: &yes}},
		}, func(s string) error { _, err := ParseDecomposition(s); return err }},
		{checkStepSchema, reflect.TypeFor[CheckStep](), CheckStep{Command: "curl -sL " + urlPy, Citations: []string{}},
			func(s string) error { _, err := ParseCheckStep(s); return err }},
		{checkStepSchema, reflect.TypeFor[CheckStep](), CheckStep{Verdict: catalog.CheckNo, Evidence: "quote", Citations: []string{urlPy}},
			func(s string) error { _, err := ParseCheckStep(s); return err }},
		{judgementSchema, reflect.TypeFor[Judgement](), Judgement{Explanation: "e", Score: 3, Instructions: []string{"Run `ls`"}},
			func(s string) error { _, err := ParseJudgement(s); return err }},
	}
	for _, c := range cases {
		if !c.schema.Strict || c.schema.Name == "" {
			t.Errorf("%s: strict %v", c.schema.Name, c.schema.Strict)
		}
		plain := schematest.Plain(t, c.schema.Schema)
		checkStrict(t, c.schema.Name, plain)
		// The schema requires exactly the members the parser reads.
		if got, want := schematest.Strings(plain["required"]), schematest.JSONFields(c.typ); !slices.Equal(got, want) {
			t.Errorf("%s: required %v, the parser reads %v", c.schema.Name, got, want)
		}
		s := schematest.Compile(t, c.schema.Schema)
		ex, err := json.Marshal(c.example)
		if err != nil {
			t.Fatal(err)
		}
		if err := schematest.Validate(s, string(ex)); err != nil {
			t.Errorf("%s: example %s rejected: %v", c.schema.Name, ex, err)
		}
		if err := c.parse(string(ex)); err != nil {
			t.Errorf("%s: the parser rejects the example %s: %v", c.schema.Name, ex, err)
		}
		// Leaving out any member breaks the schema.
		for _, f := range schematest.JSONFields(c.typ) {
			var m map[string]any
			_ = json.Unmarshal(ex, &m)
			delete(m, f)
			b, _ := json.Marshal(m)
			if schematest.Validate(s, string(b)) == nil {
				t.Errorf("%s: accepted without %s: %s", c.schema.Name, f, b)
			}
		}
	}
	s := schematest.Compile(t, judgementSchema.Schema)
	for _, bad := range []string{`{"explanation":"e","score":5,"instructions":[]}`, `{"explanation":"e","score":0,"instructions":[]}`} {
		if schematest.Validate(s, bad) == nil {
			t.Errorf("judgement schema accepts %s", bad)
		}
	}
	s = schematest.Compile(t, checkStepSchema.Schema)
	if schematest.Validate(s, `{"command":"","verdict":"maybe","evidence":"","citations":[]}`) == nil {
		t.Error("check step schema accepts verdict maybe")
	}
}

// The enums of the schemas are the catalogue's values.
func TestReplySchemaEnumsAreTheCatalogues(t *testing.T) {
	raw, err := catalog.Schema(catalog.TypeAuditDecomposed)
	if err != nil {
		t.Fatal(err)
	}
	var classes []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if p, ok := v["properties"].(map[string]any); ok {
				if c, ok := p["class"].(map[string]any); ok && c["enum"] != nil {
					classes = schematest.Strings(c["enum"])
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	walk(doc)
	var ours []string
	for _, c := range errorClasses {
		ours = append(ours, c.(string))
	}
	if len(classes) == 0 || !slices.Equal(classes, ours) {
		t.Errorf("error classes %v, the catalogue's %v", ours, classes)
	}
	for _, v := range []catalog.CheckResult{catalog.CheckYes, catalog.CheckNo, catalog.CheckUnknown} {
		if !v.Valid() {
			t.Errorf("%s", v)
		}
	}
}

// expectedFormat is the schema an auditor prompt's call requests.
func expectedFormat(t *testing.T, prompt string) llm.JSONSchema {
	t.Helper()
	switch {
	case decomposeHdr.MatchString(prompt):
		return decompositionSchema
	case checkHdr.MatchString(prompt):
		return checkStepSchema
	case judgeHdr.MatchString(prompt):
		return judgementSchema
	}
	t.Fatalf("unknown auditor prompt %.60q", prompt)
	return llm.JSONSchema{}
}

// firstUser is the auditor prompt of a request (the re-ask's last user
// message is the re-ask).
func firstUser(r scriptedmodel.Request) string {
	for _, m := range r.Messages {
		if m.Role == "user" {
			return m.Text
		}
	}
	return ""
}

// structured scripts round n as standard does, every reply the whole
// object of its schema, as a server constraining the output sends it.
func (h *harness) structured(n, score int) {
	h.standard(n, score)
	c1, c2 := CheckID(n, 1), CheckID(n, 2)
	h.sc.mu.Lock()
	defer h.sc.mu.Unlock()
	h.sc.checks[c1] = []string{
		`{"command":"curl -sL ` + urlPy + ` | grep -i 'release date'","verdict":"","evidence":"","citations":[]}`,
		`{"command":"","verdict":"yes","evidence":"curl ... | grep: Release Date: Oct. 7, 2024","citations":["` + urlPy + `"]}`,
	}
	h.sc.checks[c2] = []string{`{"command":"","verdict":"yes","evidence":"ev_0002: 3.13 | 2024-10-07","citations":["` + urlWiki + `"]}`}
}

func modelEvents(evs []bus.Event) (req []catalog.ModelRequested, resp []catalog.ModelResponded) {
	return payloads[catalog.ModelRequested](evs), payloads[catalog.ModelResponded](evs)
}

// (a) A server that honours response_format: every call requests the
// schema of its parser, the replies are the bare objects, the audit
// completes.
func TestStructuredOutputsHonoured(t *testing.T) {
	h := newHarness(t, 3)
	h.record = true
	temp, topP, seed := 0.2, 0.9, int64(7)
	h.auditorModel = &catalog.ModelConfig{BaseURL: h.srv.URL(), Name: "m", Temperature: &temp, TopP: &topP, Seed: &seed,
		ExtraBody: map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}}
	h.newRun("run-structured", 3, "/tmp/w")
	h.structured(1, 4)
	h.runToolAnswerer()
	h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback", feedbackFor(1))
	if f := feedbackRound(t, evs, 1); !f.Accepted || f.Score != 4 {
		t.Errorf("feedback = %+v", f)
	}
	for _, c := range payloads[catalog.AuditCheck](evs) {
		if c.Result != catalog.CheckYes {
			t.Errorf("check = %+v", c)
		}
	}
	reqs := h.srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d model calls, want 5", len(reqs))
	}
	for _, r := range reqs {
		prompt := firstUser(r)
		want := expectedFormat(t, prompt)
		name, strict, schema := schematest.Sent(t, r.ResponseFormat)
		if name != want.Name || !strict {
			t.Errorf("%.30q: response_format %s strict %v, want %s strict", prompt, name, strict, want.Name)
		}
		if got, exp := schematest.Strings(schema["required"]), schematest.Strings(schematest.Plain(t, want.Schema)["required"]); !slices.Equal(got, exp) {
			t.Errorf("%s: required %v, want %v", name, got, exp)
		}
		if !reflect.DeepEqual(schema, schematest.Plain(t, want.Schema)) {
			t.Errorf("%s: schema sent %v", name, schema)
		}
		// The scripted reply is what a constrained server sends.
		h.sc.mu.Lock()
		reply, _ := h.sc.lookup(prompt)
		h.sc.mu.Unlock()
		if err := schematest.Validate(schematest.Compile(t, schema), reply.Content); err != nil {
			t.Errorf("%s: scripted reply %s does not follow the schema: %v", name, reply.Content, err)
		}
		// The run's auditor sampling and server options go with every call.
		if r.Temperature == nil || *r.Temperature != temp || r.TopP == nil || *r.TopP != topP || r.Seed == nil || *r.Seed != seed ||
			string(r.Members["chat_template_kwargs"]) != `{"enable_thinking":false}` {
			t.Errorf("%s: temperature %v top_p %v seed %v kwargs %s", name, r.Temperature, r.TopP, r.Seed, r.Members["chat_template_kwargs"])
		}
	}
	mreq, mresp := modelEvents(evs)
	if len(mreq) != 5 || len(mresp) != 5 {
		t.Fatalf("%d model.requested, %d model.responded, want 5 each", len(mreq), len(mresp))
	}
	for _, m := range mreq {
		if !strings.HasPrefix(m.ResponseFormat, "vera_audit_") {
			t.Errorf("model.requested %s: response_format %q", m.CallID, m.ResponseFormat)
		}
	}
	for _, m := range mresp {
		if len(m.Dropped) != 0 || m.Error != "" {
			t.Errorf("model.responded %s: dropped %v error %q", m.CallID, m.Dropped, m.Error)
		}
	}
	h.srv.AssertNoMisses(t)
}

// (b) A server that refuses response_format with an HTTP 400: the call
// that meets the refusal is sent again without it; the client remembers
// the refusal, so the calls after it are sent without it at once. Every
// call succeeds, and the record says so. (Calls made at the same moment
// may each meet the refusal before it is remembered.)
func TestStructuredOutputsRefused(t *testing.T) {
	h := newHarness(t, 3)
	h.record = true
	h.standard(1, 4)
	h.sc.mu.Lock()
	h.sc.refuseFormat = true
	h.sc.mu.Unlock()
	h.runToolAnswerer()
	h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback", feedbackFor(1))
	if f := feedbackRound(t, evs, 1); !f.Accepted || f.Score != 4 {
		t.Errorf("feedback = %+v", f)
	}
	if n := len(payloads[catalog.AuditCheck](evs)); n != 2 {
		t.Errorf("%d checks, want 2", n)
	}
	reqs := h.srv.Requests()
	with := 0
	for _, r := range reqs {
		if len(r.ResponseFormat) > 0 {
			with++
		}
	}
	if with < 1 || len(reqs) != 5+with {
		t.Errorf("%d requests, %d with response_format; want 5 plus one per refused call", len(reqs), with)
	}
	mreq, mresp := modelEvents(evs)
	byAttempt := map[string]map[int]catalog.ModelResponded{}
	for _, m := range mresp {
		if byAttempt[m.CallID] == nil {
			byAttempt[m.CallID] = map[int]catalog.ModelResponded{}
		}
		byAttempt[m.CallID][m.Attempt] = m
	}
	if len(byAttempt) != 5 {
		t.Fatalf("%d calls recorded, want 5", len(byAttempt))
	}
	refused := 0
	for id, att := range byAttempt {
		first, second := att[1], att[2]
		if len(att) == 1 { // sent without response_format from the start
			if first.Error != "" || !slices.Equal(first.Dropped, []string{llm.FeatureResponseFormat}) {
				t.Errorf("%s attempt 1 of 1: error %q dropped %v", id, first.Error, first.Dropped)
			}
			continue
		}
		refused++
		if first.HTTPStatus != 400 || !strings.Contains(first.Error, "response_format") || len(first.Dropped) != 0 {
			t.Errorf("%s attempt 1: %+v", id, first)
		}
		if second.Error != "" || !slices.Equal(second.Dropped, []string{llm.FeatureResponseFormat}) {
			t.Errorf("%s attempt 2: error %q dropped %v", id, second.Error, second.Dropped)
		}
	}
	if refused != with {
		t.Errorf("%d calls met the refusal, %d requests carried response_format", refused, with)
	}
	for _, m := range mreq {
		if m.ResponseFormat != "" && (m.Attempt != 1 || len(byAttempt[m.CallID]) != 2) {
			t.Errorf("model.requested %s attempt %d: response_format %q", m.CallID, m.Attempt, m.ResponseFormat)
		}
	}
}

// (c) A server that accepts response_format and ignores it, answering
// with prose and a code fence around the JSON (and the partial objects of
// the prompt's examples): today's parsing reads it, no re-ask needed.
func TestStructuredOutputsIgnored(t *testing.T) {
	h := newHarness(t, 3)
	h.standard(1, 4)
	h.sc.mu.Lock()
	h.sc.wrap = func(s string) string { return "Sure, here is the JSON:\n```json\n" + s + "\n```\nI hope this helps." }
	h.sc.mu.Unlock()
	h.runToolAnswerer()
	h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback", feedbackFor(1))
	if f := feedbackRound(t, evs, 1); !f.Accepted || f.Score != 4 {
		t.Errorf("feedback = %+v", f)
	}
	d := payloads[catalog.AuditDecomposed](evs)
	if len(d) != 1 || len(d[0].Checks) != 2 {
		t.Errorf("decomposed = %+v", d)
	}
	reqs := h.srv.Requests()
	if len(reqs) != 5 {
		t.Errorf("%d model calls, want 5 (no re-ask)", len(reqs))
	}
	for _, r := range reqs {
		if name, _, _ := schematest.Sent(t, r.ResponseFormat); name != expectedFormat(t, firstUser(r)).Name {
			t.Errorf("response_format %s", name)
		}
	}
}
