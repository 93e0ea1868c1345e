package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// A small structural JSON Schema validator, enough for the keywords the
// generator emits. It is stricter than the schemas on one point: an object
// member that the schema does not declare is an error, so that the
// examples prove every member they carry is documented.

var knownKeywords = []string{
	"$schema", "$id", "$defs", "$ref", "type", "enum", "const", "pattern", "minLength",
	"minimum", "maximum", "maxItems", "items", "required", "properties", "additionalProperties",
	"format", "title", "description", "examples",
}

type validator struct {
	root map[string]any
	errs []string
}

func (v *validator) errorf(path, format string, args ...any) {
	v.errs = append(v.errs, path+": "+fmt.Sprintf(format, args...))
}

func (v *validator) validate(path string, inst any, schema any) {
	s, ok := schema.(map[string]any)
	if !ok {
		if b, isBool := schema.(bool); isBool && b {
			return
		}
		v.errorf(path, "schema is %T", schema)
		return
	}
	for k := range s {
		if !slices.Contains(knownKeywords, k) {
			v.errorf(path, "schema keyword %q not understood by the test validator", k)
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		defs, _ := v.root["$defs"].(map[string]any)
		def, exists := defs[name]
		if !found || !exists {
			v.errorf(path, "unresolvable $ref %q", ref)
			return
		}
		v.validate(path, inst, def)
	}
	if typ, ok := s["type"].(string); ok && !jsonTypeIs(inst, typ) {
		v.errorf(path, "is %T, want %s", inst, typ)
		return
	}
	if enum, ok := s["enum"].([]any); ok && !slices.ContainsFunc(enum, func(x any) bool { return x == inst }) {
		v.errorf(path, "%v not in enum %v", inst, enum)
	}
	if c, ok := s["const"]; ok && c != inst {
		v.errorf(path, "%v != const %v", inst, c)
	}
	if str, isStr := inst.(string); isStr {
		if p, ok := s["pattern"].(string); ok {
			re, err := regexp.Compile(p)
			if err != nil {
				v.errorf(path, "bad pattern %q: %v", p, err)
			} else if !re.MatchString(str) {
				v.errorf(path, "%q does not match %s", str, p)
			}
		}
		if n, ok := s["minLength"].(float64); ok && float64(len([]rune(str))) < n {
			v.errorf(path, "shorter than %v", n)
		}
		if f, ok := s["format"].(string); ok && f == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				v.errorf(path, "not a date-time: %v", err)
			}
		}
	}
	if num, isNum := inst.(float64); isNum {
		if m, ok := s["minimum"].(float64); ok && num < m {
			v.errorf(path, "%v < minimum %v", num, m)
		}
		if m, ok := s["maximum"].(float64); ok && num > m {
			v.errorf(path, "%v > maximum %v", num, m)
		}
	}
	if arr, isArr := inst.([]any); isArr {
		if n, ok := s["maxItems"].(float64); ok && float64(len(arr)) > n {
			v.errorf(path, "%d items > maxItems %v", len(arr), n)
		}
		if items, ok := s["items"]; ok {
			for i, x := range arr {
				v.validate(fmt.Sprintf("%s[%d]", path, i), x, items)
			}
		}
	}
	if obj, isObj := inst.(map[string]any); isObj {
		req, _ := s["required"].([]any)
		for _, r := range req {
			if _, present := obj[r.(string)]; !present {
				v.errorf(path, "required member %q missing", r)
			}
		}
		props, hasProps := s["properties"].(map[string]any)
		for _, k := range sortedKeys(obj) {
			if ps, declared := props[k]; declared {
				v.validate(path+"."+k, obj[k], ps)
			} else if ap, ok := s["additionalProperties"]; ok {
				v.validate(path+"."+k, obj[k], ap)
			} else if hasProps {
				v.errorf(path, "member %q is not declared in the schema", k)
			}
		}
	}
}

func jsonTypeIs(inst any, typ string) bool {
	switch typ {
	case "object":
		_, ok := inst.(map[string]any)
		return ok
	case "array":
		_, ok := inst.([]any)
		return ok
	case "string":
		_, ok := inst.(string)
		return ok
	case "boolean":
		_, ok := inst.(bool)
		return ok
	case "number":
		_, ok := inst.(float64)
		return ok
	case "integer":
		f, ok := inst.(float64)
		return ok && f == math.Trunc(f)
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func validateAgainst(schemaJSON []byte, instance []byte) ([]string, error) {
	var root map[string]any
	if err := json.Unmarshal(schemaJSON, &root); err != nil {
		return nil, err
	}
	var inst any
	if err := json.Unmarshal(instance, &inst); err != nil {
		return nil, err
	}
	v := &validator{root: root}
	v.validate("data", inst, root)
	return v.errs, nil
}

func TestSchemasWellFormed(t *testing.T) {
	all, err := AllSchemas()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(Entries()) {
		t.Fatalf("AllSchemas has %d schemas for %d types", len(all), len(Entries()))
	}
	for _, e := range Entries() {
		b, err := Schema(e.Type)
		if err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
		if string(b) != string(all[e.Type]) {
			t.Errorf("%s: Schema and AllSchemas differ", e.Type)
		}
		if !json.Valid(b) {
			t.Fatalf("%s: schema is not valid JSON", e.Type)
		}
		if !strings.HasPrefix(string(b), "{\n  \"") {
			t.Errorf("%s: schema is not indented", e.Type)
		}
		var s map[string]any
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		checks := map[string]any{
			"$schema":     "https://json-schema.org/draft/2020-12/schema",
			"$id":         "https://vera.dev/schemas/" + e.Type + ".json",
			"title":       e.Type,
			"description": e.Summary,
			"type":        "object",
		}
		for k, want := range checks {
			if s[k] != want {
				t.Errorf("%s: %s = %v, want %v", e.Type, k, s[k], want)
			}
		}
		if _, ok := s["properties"].(map[string]any); !ok {
			t.Errorf("%s: no properties", e.Type)
		}
		checkPropertiesDocumented(t, e.Type, "data", s)
		if defs, ok := s["$defs"].(map[string]any); ok {
			for name, d := range defs {
				dm := d.(map[string]any)
				if dm["description"] == nil || dm["description"] == "" {
					t.Errorf("%s: $defs/%s has no description (add it to typeDocs)", e.Type, name)
				}
				checkPropertiesDocumented(t, e.Type, "$defs/"+name, dm)
			}
		}
	}
	if _, err := Schema("vera.nope.nothing"); !errors.Is(err, ErrUnknownType) {
		t.Errorf("Schema(unknown) error = %v", err)
	}
}

// checkPropertiesDocumented: snake_case names, a description on every
// property, *_ms members are integers.
func checkPropertiesDocumented(t *testing.T, typ, where string, s map[string]any) {
	t.Helper()
	props, _ := s["properties"].(map[string]any)
	for name, p := range props {
		if !tokenRE.MatchString(name) {
			t.Errorf("%s: %s.%s is not snake_case", typ, where, name)
		}
		pm := p.(map[string]any)
		if d, _ := pm["description"].(string); d == "" {
			t.Errorf("%s: %s.%s has no description", typ, where, name)
		}
		if strings.HasSuffix(name, "_ms") && pm["type"] != "integer" {
			t.Errorf("%s: %s.%s is a duration and must be integer milliseconds", typ, where, name)
		}
		if items, ok := pm["items"].(map[string]any); ok && items["properties"] != nil {
			checkPropertiesDocumented(t, typ, where+"."+name+"[]", items)
		}
	}
}

func TestExamplesValidateAgainstSchemas(t *testing.T) {
	for _, e := range Entries() {
		sch, err := Schema(e.Type)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(e.Example)
		errs, err := validateAgainst(sch, data)
		if err != nil {
			t.Fatalf("%s: %v", e.Type, err)
		}
		for _, msg := range errs {
			t.Errorf("%s: example does not validate: %s", e.Type, msg)
		}
		// The example embedded in the schema is the same value.
		var s struct{ Examples []json.RawMessage }
		if err := json.Unmarshal(sch, &s); err != nil || len(s.Examples) != 1 {
			t.Fatalf("%s: schema examples: %v", e.Type, err)
		}
		p, err := Decode(e.Type, s.Examples[0])
		if err != nil {
			t.Fatalf("%s: schema example does not decode: %v", e.Type, err)
		}
		if _, enc, _ := Encode(p); string(enc) != string(data) {
			t.Errorf("%s: schema example differs from Entry.Example", e.Type)
		}
	}
}

func TestValidatorRejects(t *testing.T) {
	// The validator used above must catch what it claims to catch.
	sch, err := Schema(TypeToolFinished)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := Lookup(TypeToolFinished)
	base, _ := json.Marshal(e.Example)
	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		_ = json.Unmarshal(base, &m)
		f(m)
		b, _ := json.Marshal(m)
		return b
	}
	cases := map[string][]byte{
		"missing required":  mutate(func(m map[string]any) { delete(m, "request_id") }),
		"undeclared member": mutate(func(m map[string]any) { m["exitcode"] = 1 }),
		"wrong type":        mutate(func(m map[string]any) { m["exit_code"] = "zero" }),
		"not an integer":    mutate(func(m map[string]any) { m["duration_ms"] = 1.5 }),
		"bad enum":          mutate(func(m map[string]any) { m["requester"] = "robot" }),
		"below minimum":     mutate(func(m map[string]any) { m["duration_ms"] = -1 }),
		"nested required":   mutate(func(m map[string]any) { delete(m["stdout"].(map[string]any), "bytes") }),
		"nested ref pattern": mutate(func(m map[string]any) {
			m["stdout"].(map[string]any)["blob"] = map[string]any{"digest": "md5:x", "size": 1, "content_type": "x"}
		}),
		"map value type":        mutate(func(m map[string]any) { m["exports"] = map[string]any{"A": 1} }),
		"empty required string": mutate(func(m map[string]any) { m["request_id"] = "" }),
	}
	for name, inst := range cases {
		errs, err := validateAgainst(sch, inst)
		if err != nil {
			t.Fatal(err)
		}
		if len(errs) == 0 {
			t.Errorf("%s: validator accepted %s", name, inst)
		}
	}
	if errs, _ := validateAgainst(sch, base); len(errs) != 0 {
		t.Errorf("validator rejects the example: %v", errs)
	}

	// Arrays, maxItems and date-time.
	jsch, _ := Schema(TypeAuditJudged)
	je, _ := Lookup(TypeAuditJudged)
	jb, _ := json.Marshal(je.Example)
	var jm map[string]any
	_ = json.Unmarshal(jb, &jm)
	jm["instructions"] = []any{"a", "b", "c", "d"}
	jb, _ = json.Marshal(jm)
	if errs, _ := validateAgainst(jsch, jb); len(errs) == 0 {
		t.Error("maxItems not enforced")
	}
	tsch, _ := Schema(TypeToolStarted)
	if errs, _ := validateAgainst(tsch, []byte(`{"request_id":"r","container":"c","container_id":"i","started_at":"yesterday"}`)); len(errs) == 0 {
		t.Error("date-time not enforced")
	}
}

func TestPolicySchemasPinTheRule(t *testing.T) {
	for _, rule := range PolicyRules() {
		typ := "vera.policy." + rule
		sch, _ := Schema(typ)
		var s struct {
			Properties map[string]struct {
				Const string `json:"const"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(sch, &s); err != nil {
			t.Fatal(err)
		}
		if got := s.Properties["rule"].Const; got != rule {
			t.Errorf("%s: rule const = %q", typ, got)
		}
		other := `{"rule":"not_this","step":1,"effect":"nudge"}`
		if errs, _ := validateAgainst(sch, []byte(other)); len(errs) == 0 {
			t.Errorf("%s: schema accepts another rule", typ)
		}
	}
}

func TestSchemaKeepsShellCharacters(t *testing.T) {
	sch, _ := Schema(TypePolicyFinalizationStop)
	if !strings.Contains(string(sch), "<<'EOF'") || strings.Contains(string(sch), `\u003c`) {
		t.Error("schema examples should show < and > as written")
	}
	if got := string(unescapeHTML([]byte(`"a\\u003cb \u003c \" \u0026\u003e \u00e9"`))); got != `"a\\u003cb < \" &> \u00e9"` {
		t.Errorf("unescapeHTML = %s", got)
	}
}
