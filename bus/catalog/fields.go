package catalog

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// fieldDoc describes one JSON member of a payload for the docs, derived
// from the Go type by reflection (the same tags the schema is built from).
type fieldDoc struct {
	Path        string // dotted JSON path: "model.base_url", "checks[].question"
	JSONType    string // "string", "integer", "array of string", "[BlobRef](#blobref)"...
	Required    bool
	Description string
}

var timeType = reflect.TypeFor[time.Time]()

// fieldDocs lists the members of struct type t, expanding nested structs
// that are not shared types.
func fieldDocs(t reflect.Type) []fieldDoc {
	var out []fieldDoc
	walkFields(t, "", &out)
	return out
}

func walkFields(t reflect.Type, prefix string, out *[]fieldDoc) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			walkFields(f.Type, prefix, out)
			continue
		}
		if name == "" {
			name = f.Name
		}
		path := prefix + name
		optional := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		desc := fieldDescription(f)
		jt, expand, elemPrefix := jsonTypeOf(f.Type, path)
		*out = append(*out, fieldDoc{Path: path, JSONType: jt, Required: !optional, Description: desc})
		if expand != nil {
			walkFields(expand, elemPrefix, out)
		}
	}
}

// fieldDescription joins the description tag with the constraints of the
// jsonschema tag and the enum values of the field's type.
func fieldDescription(f reflect.StructField) string {
	desc := f.Tag.Get("jsonschema_description")
	var notes []string
	for _, kv := range splitTag(f.Tag.Get("jsonschema")) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch k {
		case "description":
			desc = v
		case "minimum":
			notes = append(notes, "minimum "+v)
		case "maximum":
			notes = append(notes, "maximum "+v)
		case "minLength":
			if v == "1" {
				notes = append(notes, "non-empty")
			} else {
				notes = append(notes, "at least "+v+" characters")
			}
		case "maxItems":
			notes = append(notes, "at most "+v+" items")
		case "pattern":
			notes = append(notes, "pattern `"+v+"`")
		case "enum":
			notes = append(notes, "value `"+v+"`")
		}
	}
	if vals := enumValuesOf(f.Type); vals != nil {
		quoted := make([]string, len(vals))
		for i, v := range vals {
			quoted[i] = "`" + v + "`"
		}
		notes = append(notes, "one of "+strings.Join(quoted, ", "))
	}
	if len(notes) > 0 {
		desc = strings.TrimSpace(desc + " (" + strings.Join(notes, "; ") + ")")
	}
	return desc
}

// splitTag splits a jsonschema tag on commas not escaped with a backslash.
func splitTag(tag string) []string {
	if tag == "" {
		return nil
	}
	var out []string
	var cur strings.Builder
	for i := 0; i < len(tag); i++ {
		switch {
		case tag[i] == '\\' && i+1 < len(tag) && tag[i+1] == ',':
			cur.WriteByte(',')
			i++
		case tag[i] == ',':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(tag[i])
		}
	}
	return append(out, cur.String())
}

func enumValuesOf(t reflect.Type) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() == reflect.String && t.Implements(enumerType) {
		return reflect.Zero(t).Interface().(enumer).enumValues()
	}
	return nil
}

func isShared(t reflect.Type) bool { return slices.Contains(sharedTypes, t) }

// sharedAnchor is the markdown link of a shared type's section.
func sharedLink(t reflect.Type) string {
	return "[" + t.Name() + "](#" + strings.ToLower(t.Name()) + ")"
}

// jsonTypeOf names the JSON type of t. For structs to be expanded in place
// it returns the struct type and the prefix of its members.
func jsonTypeOf(t reflect.Type, path string) (name string, expand reflect.Type, prefix string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == timeType:
		return "string (date-time)", nil, ""
	case t.Kind() == reflect.Struct && isShared(t):
		return "object: " + sharedLink(t), nil, ""
	case t.Kind() == reflect.Struct:
		return "object", t, path + "."
	}
	switch t.Kind() {
	case reflect.String:
		return "string", nil, ""
	case reflect.Bool:
		return "boolean", nil, ""
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer", nil, ""
	case reflect.Float32, reflect.Float64:
		return "number", nil, ""
	case reflect.Slice, reflect.Array:
		elem, exp, _ := jsonTypeOf(t.Elem(), path+"[]")
		if exp != nil {
			return "array of object", exp, path + "[]."
		}
		return "array of " + elem, nil, ""
	case reflect.Map:
		elem, _, _ := jsonTypeOf(t.Elem(), path)
		if t.Elem().Kind() == reflect.Interface {
			return "object", nil, ""
		}
		return "object (" + elem + " values)", nil, ""
	case reflect.Interface:
		return "any", nil, ""
	}
	panic(fmt.Sprintf("catalog: no JSON type for %s", t))
}
