package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var englishPrinter = message.NewPrinter(language.English)

// validators holds the compiled schema of every catalogued type, built on
// first use.
var validators struct {
	once sync.Once
	err  error
	byT  map[string]*jsonschema.Schema
}

// Validate checks the data member of an event of type typ against the
// type's JSON Schema (Schema): required members, JSON types, enum values
// and ranges. It is what Decode does not: Decode accepts
// {"requester": "root", "timeout_ms": -1} for vera.tool.requested,
// Validate rejects it, naming the member and the rule. Errors wrap
// ErrInvalidData (ErrUnknownType for a type not in the catalogue).
//
// The one difference from the published schema: an array or object
// member may be null, because Go encodes an empty slice or map so and
// decodes null as empty; every producer built on this package writes it.
func Validate(typ string, data []byte) error {
	validators.once.Do(compileValidators)
	if validators.err != nil {
		return validators.err
	}
	s, ok := validators.byT[typ]
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownType, typ)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalidData, typ, err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%w: %s: %s", ErrInvalidData, typ, schemaError(err))
	}
	return nil
}

// schemaError flattens the library's nested validation error into one
// line: "at /timeout_ms: must be >= 1; at /requester: value must be one
// of …".
func schemaError(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, kindMessage(e.ErrorKind)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(parts) > 8 {
		parts = append(parts[:8], fmt.Sprintf("and %d more", len(parts)-8))
	}
	return strings.Join(parts, "; ")
}

// kindMessage says what rule a value broke without repeating a string
// value: a secret pasted where a name belongs (an API key in api_key_env)
// must not be copied into logs, dead letters or a run's finish reason.
func kindMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Pattern:
		return fmt.Sprintf("does not match pattern %s", k.Want)
	case *kind.Enum:
		return fmt.Sprintf("must be one of %s", jsonList(k.Want))
	case *kind.Const:
		return fmt.Sprintf("must be %s", jsonList([]any{k.Want}))
	case *kind.Format:
		return fmt.Sprintf("is not a valid %s", k.Want)
	}
	return k.LocalizedString(englishPrinter)
}

func jsonList(vs []any) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		b, _ := json.Marshal(v)
		out[i] = string(b)
	}
	return strings.Join(out, ", ")
}

func compileValidators() {
	c := jsonschema.NewCompiler()
	validators.byT = map[string]*jsonschema.Schema{}
	for _, e := range registry.sorted {
		raw, err := schemaOf(e)
		if err != nil {
			validators.err = fmt.Errorf("catalog: schema of %s: %w", e.Type, err)
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			validators.err = fmt.Errorf("catalog: schema of %s: %w", e.Type, err)
			return
		}
		allowNull(doc, true)
		url := SchemaID(e.Type)
		if err := c.AddResource(url, doc); err != nil {
			validators.err = fmt.Errorf("catalog: schema of %s: %w", e.Type, err)
			return
		}
		s, err := c.Compile(url)
		if err != nil {
			validators.err = fmt.Errorf("catalog: compile the schema of %s: %w", e.Type, err)
			return
		}
		validators.byT[e.Type] = s
	}
}

// allowNull lets every array and object schema below the root also be
// null (see Validate).
func allowNull(node any, root bool) {
	switch n := node.(type) {
	case map[string]any:
		if t, ok := n["type"].(string); ok && !root && (t == "array" || t == "object") {
			n["type"] = []any{t, "null"}
		}
		for k, v := range n {
			if k == "examples" || k == "enum" || k == "const" || k == "default" {
				continue
			}
			allowNull(v, false)
		}
	case []any:
		for _, v := range n {
			allowNull(v, false)
		}
	}
}
