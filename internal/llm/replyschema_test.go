package llm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/schematest"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

type schemaItem struct {
	Source string `json:"source"`
	Class  string `json:"class"`
	Ok     *bool  `json:"ok"`
}

type schemaReply struct {
	Reason  string       `json:"reason"`
	Score   int          `json:"score"`
	Items   []schemaItem `json:"items"`
	Weight  float64      `json:"weight"`
	Tags    []string     `json:"tags"`
	Skipped string       `json:"-"`
	hidden  string
	NoTag   string
}

func TestReplySchema(t *testing.T) {
	schema, err := llm.ReplySchema(schemaReply{}, map[string][]any{"score": {1, 2, 3}, "items.class": {"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"additionalProperties":false,"properties":{"reason":{"type":"string"},"score":{"enum":[1,2,3],"type":"integer"},` +
		`"items":{"items":{"additionalProperties":false,"properties":{"source":{"type":"string"},"class":{"enum":["a","b"],"type":"string"},"ok":{"type":"boolean"}},` +
		`"required":["source","class","ok"],"type":"object"},"type":"array"},"weight":{"type":"number"},"tags":{"items":{"type":"string"},"type":"array"},"NoTag":{"type":"string"}},` +
		`"required":["reason","score","items","weight","tags","NoTag"],"type":"object"}`
	if string(raw) != want {
		t.Fatalf("schema\n got %s\nwant %s", raw, want)
	}
	s := schematest.Compile(t, schema)
	good := `{"reason":"r","score":2,"items":[{"source":"s","class":"b","ok":true}],"weight":0.5,"tags":[],"NoTag":""}`
	if err := schematest.Validate(s, good); err != nil {
		t.Errorf("valid reply rejected: %v", err)
	}
	for name, bad := range map[string]string{
		"score not in enum": strings.Replace(good, `"score":2`, `"score":4`, 1),
		"class not in enum": strings.Replace(good, `"class":"b"`, `"class":"c"`, 1),
		"member missing":    strings.Replace(good, `"weight":0.5,`, ``, 1),
		"extra member":      strings.Replace(good, `"NoTag":""`, `"NoTag":"","x":1`, 1),
		"nested missing":    strings.Replace(good, `"ok":true`, `"x":true`, 1),
	} {
		if schematest.Validate(s, bad) == nil {
			t.Errorf("%s: accepted %s", name, bad)
		}
	}
}

func TestReplySchemaErrors(t *testing.T) {
	if _, err := llm.ReplySchema(schemaReply{}, map[string][]any{"items.kind": {"a"}}); err == nil || !strings.Contains(err.Error(), `"items.kind"`) {
		t.Errorf("enum on no member: err = %v", err)
	}
	if _, err := llm.ReplySchema(struct{ M map[string]int }{}, nil); err == nil || !strings.Contains(err.Error(), "M: a map[string]int has no reply schema") {
		t.Errorf("map member: err = %v", err)
	}
	if _, err := llm.ReplySchema("text", nil); err == nil {
		t.Error("a string: no error")
	}
	if s, err := llm.ReplySchema(&schemaItem{}, nil); err != nil || s["type"] != "object" {
		t.Errorf("pointer: %v %v", s, err)
	}
}

// The order of the properties survives the client: it is what constrained
// decoders generate in.
func TestReplySchemaOrderIsSent(t *testing.T) {
	schema := llm.MustReplySchema(schemaReply{}, nil)
	_, err, sent := completeWith(t, false, scriptedmodel.Text(`{}`), llm.Request{
		ResponseFormat: &llm.JSONSchema{Name: "reply", Schema: schema, Strict: true}, Optional: true})
	if err != nil {
		t.Fatal(err)
	}
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Strict bool            `json:"strict"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(sent.ResponseFormat, &rf); err != nil {
		t.Fatalf("response_format %s: %v", sent.ResponseFormat, err)
	}
	if rf.Type != "json_schema" || rf.JSONSchema.Name != "reply" || !rf.JSONSchema.Strict {
		t.Fatalf("response_format = %s", sent.ResponseFormat)
	}
	s := string(rf.JSONSchema.Schema)
	order := []string{`"reason"`, `"score"`, `"items"`, `"source"`, `"class"`, `"ok"`, `"weight"`, `"tags"`, `"NoTag"`}
	at := 0
	for _, k := range order {
		i := strings.Index(s[at:], k+":")
		if i < 0 {
			t.Fatalf("property %s not in order in %s", k, s)
		}
		at += i
	}
}
