package catalog

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
)

// newReflector returns the reflector every schema is generated with.
//
// Additional properties are allowed on purpose: later versions add optional
// fields, and a consumer validating with an older schema must keep
// accepting newer events. Fields without omitempty/omitzero are required.
func newReflector() *jsonschema.Reflector {
	return &jsonschema.Reflector{
		Anonymous:                 true, // $id is set per event type below
		ExpandedStruct:            true,
		AllowAdditionalProperties: true,
		Mapper:                    enumSchema,
		LookupComment: func(t reflect.Type, field string) string {
			if field == "" {
				return typeDocs[t]
			}
			return ""
		},
	}
}

// enumSchema maps the string enum types to a string schema listing their
// values, inline (no $ref), so that each field keeps its own description.
func enumSchema(t reflect.Type) *jsonschema.Schema {
	if t.Kind() != reflect.String || !t.Implements(enumerType) {
		return nil
	}
	s := &jsonschema.Schema{Type: "string"}
	for _, v := range reflect.Zero(t).Interface().(enumer).enumValues() {
		s.Enum = append(s.Enum, v)
	}
	return s
}

// Schema returns the JSON Schema (draft 2020-12) of the data of a
// catalogued type, indented, with $id SchemaID(typ), title typ and the
// entry's Summary as description. The entry's example is included under
// examples. Unknown types give an error wrapping ErrUnknownType.
func Schema(typ string) ([]byte, error) {
	e, ok := Lookup(typ)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownType, typ)
	}
	return schemaOf(e)
}

func schemaOf(e Entry) ([]byte, error) {
	s := newReflector().Reflect(e.New())
	s.ID = jsonschema.ID(SchemaID(e.Type))
	s.Title = e.Type
	s.Description = e.Summary
	if rule, ok := PolicyRule(e.Type); ok {
		if p, found := s.Properties.Get("rule"); found {
			p.Const = rule
		}
	}
	s.Examples = []any{e.Example}
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("catalog: schema of %s: %w", e.Type, err)
	}
	return append(unescapeHTML(out), '\n'), nil
}

// unescapeHTML turns the \u003c, \u003e and \u0026 escapes encoding/json
// puts in strings back into <, > and &, which JSON allows as is: schemas
// are read by people too, and examples hold shell commands.
func unescapeHTML(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			switch string(b[i+2 : i+6]) {
			case "003c":
				out = append(out, '<')
				i += 5
				continue
			case "003e":
				out = append(out, '>')
				i += 5
				continue
			case "0026":
				out = append(out, '&')
				i += 5
				continue
			}
		}
		out = append(out, b[i], b[i+1]) // any other escape pair, e.g. \\ or \"
		i++
	}
	return out
}

// AllSchemas returns the schema of every catalogued type, keyed by type.
func AllSchemas() (map[string][]byte, error) {
	out := make(map[string][]byte, len(registry.sorted))
	for _, e := range registry.sorted {
		b, err := schemaOf(e)
		if err != nil {
			return nil, err
		}
		out[e.Type] = b
	}
	return out, nil
}
