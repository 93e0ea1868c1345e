package llm

import (
	"strings"
	"testing"
)

func TestExtractJSONObject(t *testing.T) {
	cases := []struct {
		name, in, want, err string
	}{
		{"plain", `{"a": 1}`, `{"a": 1}`, ""},
		{"fence", "```json\n{\"a\": 1}\n```", `{"a": 1}`, ""},
		{"prose around", "Here you go:\n{\"a\": {\"b\": [1, 2]}}\nDone.", `{"a": {"b": [1, 2]}}`, ""},
		{"braces in strings", `{"a": "}{ \" }"} tail }`, `{"a": "}{ \" }"}`, ""},
		{"think block", "<think>maybe {\"a\": 0}</think>\n{\"a\": 2}", `{"a": 2}`, ""},
		{"prose with braces first", "Use the form {like this}. {\"a\": 3}", `{"a": 3}`, ""},
		{"trailing commas", "{\"a\": [1, 2,], \"b\": {\"c\": 1,},}", `{"a": [1, 2], "b": {"c": 1}}`, ""},
		{"comma in string kept", `{"a": "x,}", }`, `{"a": "x,}" }`, ""},
		{"empty", "  ", "", "the reply is empty"},
		{"no object", "I cannot answer that.", "", "no JSON object found"},
		{"cut off", `{"findings": [{"claim": "x"`, "", "the JSON object is not complete"},
		{"invalid", `{findings: []}`, "", "invalid JSON: invalid character 'f'"},
		{"array only", `[1, 2]`, "", "no JSON object found"},
	}
	for _, c := range cases {
		got, err := ExtractJSONObject(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
