package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// SchemaProperty is one member of an object schema's "properties".
type SchemaProperty struct {
	Name   string
	Schema map[string]any
}

// SchemaProperties is an object schema's "properties", kept in order.
// Constrained decoders (llama.cpp's grammar, vLLM's and Ollama's guided
// decoding) generate the members in the order the schema lists them, so
// the order is part of the prompt: a reason before its score, a summary
// before the checks it leads to. encoding/json would sort a map's keys;
// this type marshals as an object in its own order.
type SchemaProperties []SchemaProperty

// MarshalJSON writes the properties as one JSON object, in order.
func (p SchemaProperties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range p {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.Name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.Schema)
		if err != nil {
			return nil, fmt.Errorf("property %s: %w", m.Name, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// ReplySchema derives the JSON Schema of the JSON object a reply must be
// from the Go struct its parser decodes into (v, a struct or a pointer to
// one), for Request.ResponseFormat. The schema is in OpenAI's strict
// dialect, which every OpenAI-compatible server also accepts and which
// llama.cpp's grammar converter handles: each object lists its members in
// field order (json tag names; fields tagged "-" and unexported ones are
// left out), requires all of them and allows no others; there is no $ref,
// no pattern and no numeric bound. Strings, booleans, integers, floats,
// slices, nested structs and pointers to them are supported (a pointer is
// its element: strict mode has every member present). Any other field type
// is an error.
//
// enums restricts members to values: its keys are member paths, dotted
// from the root and ignoring arrays ("score", "likely_errors.class"); a key
// that names no member is an error, so a renamed field cannot silently lose
// its enum.
func ReplySchema(v any, enums map[string][]any) (map[string]any, error) {
	t := reflect.TypeOf(v)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("llm: reply schema of %T: want a struct", v)
	}
	used := map[string]bool{}
	s, err := typeSchema(t, "", enums, used)
	if err != nil {
		return nil, fmt.Errorf("llm: reply schema of %s: %w", t, err)
	}
	for path := range enums {
		if !used[path] {
			return nil, fmt.Errorf("llm: reply schema of %s: enum for %q, which is not a member", t, path)
		}
	}
	return s, nil
}

// MustReplySchema is ReplySchema for package-level schemas; it panics on
// an error, which is a programming error.
func MustReplySchema(v any, enums map[string][]any) map[string]any {
	s, err := ReplySchema(v, enums)
	if err != nil {
		panic(err)
	}
	return s
}

func typeSchema(t reflect.Type, path string, enums map[string][]any, used map[string]bool) (map[string]any, error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var s map[string]any
	switch t.Kind() {
	case reflect.String:
		s = map[string]any{"type": "string"}
	case reflect.Bool:
		s = map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s = map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		s = map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		items, err := typeSchema(t.Elem(), path, enums, used)
		if err != nil {
			return nil, err
		}
		return map[string]any{"type": "array", "items": items}, nil
	case reflect.Struct:
		return objectSchema(t, path, enums, used)
	default:
		where := path
		if where == "" {
			where = "the reply"
		}
		return nil, fmt.Errorf("%s: a %s has no reply schema", where, t)
	}
	if vals, ok := enums[path]; ok {
		s["enum"] = vals
		used[path] = true
	}
	return s, nil
}

func objectSchema(t reflect.Type, path string, enums map[string][]any, used map[string]bool) (map[string]any, error) {
	props := SchemaProperties{}
	required := []string{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := f.Name
		if tag, ok := f.Tag.Lookup("json"); ok {
			n, _, _ := strings.Cut(tag, ",")
			if n == "-" {
				continue
			}
			if n != "" {
				name = n
			}
		}
		sub := name
		if path != "" {
			sub = path + "." + name
		}
		ps, err := typeSchema(f.Type, sub, enums, used)
		if err != nil {
			return nil, err
		}
		props = append(props, SchemaProperty{Name: name, Schema: ps})
		required = append(required, name)
	}
	return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}, nil
}
