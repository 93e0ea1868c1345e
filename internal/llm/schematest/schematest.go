// Package schematest helps tests check the JSON Schemas VERA's model calls
// request (llm.JSONSchema, response_format json_schema): compiled and
// applied with a real JSON Schema validator, read back from a request as
// the server received it, and compared with the Go types the replies are
// parsed into. It is for tests only.
package schematest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile compiles schema as a client sends it (marshalled to JSON).
func Compile(tb testing.TB, schema any) *jsonschema.Schema {
	tb.Helper()
	raw, err := json.Marshal(schema)
	if err != nil {
		tb.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("reply.json", doc); err != nil {
		tb.Fatal(err)
	}
	s, err := c.Compile("reply.json")
	if err != nil {
		tb.Fatalf("compile %s: %v", raw, err)
	}
	return s
}

// Validate checks the JSON document doc against s; a doc that is not JSON
// is an error too.
func Validate(s *jsonschema.Schema, doc string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(v)
}

// Plain is v marshalled and decoded into plain JSON values (the order of
// object members is lost).
func Plain(tb testing.TB, v any) map[string]any {
	tb.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatal(err)
	}
	return m
}

// Strings is a decoded JSON array of strings (a schema's required list).
func Strings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// JSONFields lists the JSON member names of a struct type, in order.
func JSONFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}

// Sent reads the response_format member of a request as sent: the json
// schema's name, strict flag and schema. Anything but a json_schema
// format fails the test.
func Sent(tb testing.TB, raw json.RawMessage) (name string, strict bool, schema map[string]any) {
	tb.Helper()
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string         `json:"name"`
			Strict bool           `json:"strict"`
			Schema map[string]any `json:"schema"`
		} `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil || rf.Type != "json_schema" {
		tb.Fatalf("response_format %s: %v", raw, err)
	}
	return rf.JSONSchema.Name, rf.JSONSchema.Strict, rf.JSONSchema.Schema
}
