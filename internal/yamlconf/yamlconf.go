// Package yamlconf reads hand-written YAML configuration files strictly and
// reports every problem at its line, like a compiler:
//
//	settings.yaml:12: profiles.cross-verify.verify: unknown llm "qwen"
//
// A Decoder walks the yaml.Node tree of one file. Object decodes a
// struct-like mapping against a list of known Fields (unknown keys, missing
// required keys and duplicate keys are errors); Str, NonEmptyStr, Int,
// Float and List check one value's type. Problems do not stop the walk:
// they collect in Decoder.Errs, and Err returns them sorted by line as an
// Errors. verifierd/verifyfast (settings.yaml, strategy.yaml) and eval
// (profiles files) read their files with it.
package yamlconf

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is one problem in a file. It prints as "file:line: path: msg",
// leaving out the line when it is 0 and the path when it is empty.
type Error struct {
	File string // the name the file was loaded as
	Line int    // 1-based; 0 when the problem concerns the whole file
	Path string // dotted field path, e.g. profiles.cross-verify.verify
	Msg  string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Path != "" {
		b.WriteString(": ")
		b.WriteString(e.Path)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a file, in line order, one per line of
// its message. errors.As finds it, and each *Error in it.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As and errors.Is see each Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Decoder walks the yaml.Node tree of one file, collecting Errors.
type Decoder struct {
	File string // prefixes every Error
	Errs Errors // the problems found so far, in the order found
	// EmptyMsg is what Root reports for a file without a document
	// ("file is empty" when unset).
	EmptyMsg string
}

// Failf records a problem at line (0 for the whole file) and path.
func (d *Decoder) Failf(line int, path, format string, args ...any) {
	d.Errs = append(d.Errs, &Error{File: d.File, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// Err returns the problems found, sorted by line (stable, so problems on
// one line keep the order found), as an Errors; nil when there are none.
func (d *Decoder) Err() error {
	if len(d.Errs) == 0 {
		return nil
	}
	slices.SortStableFunc(d.Errs, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
	return d.Errs
}

// Root parses data and returns the document's top node. It returns nil
// after recording the problem when data is not YAML ("invalid YAML: …", at
// the line yaml.v3 names) or holds no document (EmptyMsg).
func (d *Decoder) Root(data []byte) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		// yaml.v3 reports "yaml: line N: ..."; lift the line out.
		var line int
		if k, _ := fmt.Sscanf(msg, "line %d:", &line); k == 1 {
			if _, rest, ok := strings.Cut(msg, ": "); ok {
				msg = rest
			}
		}
		d.Failf(line, "", "invalid YAML: %s", msg)
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		msg := d.EmptyMsg
		if msg == "" {
			msg = "file is empty"
		}
		d.Failf(0, "", "%s", msg)
		return nil
	}
	return doc.Content[0]
}

// Resolve follows aliases (*anchor) to the node they stand for.
func Resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// Describe names a node's kind and value for a message: "a mapping",
// "a list", `string "x"`, "integer 3", "number 0.5", "boolean true",
// "nothing (null)".
func Describe(n *yaml.Node) string {
	n = Resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("string %q", n.Value)
		case "!!int":
			return "integer " + n.Value
		case "!!float":
			return "number " + n.Value
		case "!!bool":
			return "boolean " + n.Value
		case "!!null":
			return "nothing (null)"
		}
		return fmt.Sprintf("%s %q", n.ShortTag(), n.Value)
	}
	return "an unsupported YAML node"
}

// IsNull reports whether n is null (~, null, or nothing after the colon).
func IsNull(n *yaml.Node) bool {
	n = Resolve(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// Join appends key to a dotted path.
func Join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// Entry is one key/value pair of a mapping, or one item of a list (whose
// Key is its index and whose KeyNode is the item itself).
type Entry struct {
	Key     string
	KeyNode *yaml.Node // the key's node, for its line
	Val     *yaml.Node // the value, aliases resolved
	Path    string     // the dotted path of the value
}

// Mapping returns the pairs of a mapping node in file order, reporting
// duplicate and non-scalar keys (and leaving them out). A null node is an
// empty mapping. ok is false, after reporting it, when n is not a mapping.
func (d *Decoder) Mapping(n *yaml.Node, path string) (entries []Entry, ok bool) {
	n = Resolve(n)
	if IsNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		d.Failf(n.Line, path, "expected a mapping, got %s", Describe(n))
		return nil, false
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind != yaml.ScalarNode {
			d.Failf(kn.Line, path, "mapping keys must be plain names")
			continue
		}
		key := kn.Value
		if first, dup := seen[key]; dup {
			d.Failf(kn.Line, Join(path, key), "duplicate key (first on line %d)", first)
			continue
		}
		seen[key] = kn.Line
		entries = append(entries, Entry{Key: key, KeyNode: kn, Val: Resolve(vn), Path: Join(path, key)})
	}
	return entries, true
}

// Field is one known key of a struct-like mapping: Decode is called with
// its entry when the key is present.
type Field struct {
	Name     string
	Required bool
	Decode   func(e Entry)
}

// Object decodes a struct-like mapping: every key must be one of fields
// (decoded in file order), and every Required field must be present. A
// missing field is reported at line at (the mapping's key line; 0 for the
// mapping's own line). hints gives a message for specific unknown keys in
// place of "unknown field (known: …)".
func (d *Decoder) Object(n *yaml.Node, at int, path string, fields []Field, hints map[string]string) {
	entries, ok := d.Mapping(n, path)
	if !ok {
		return
	}
	have := map[string]bool{}
	for _, e := range entries {
		i := slices.IndexFunc(fields, func(f Field) bool { return f.Name == e.Key })
		if i < 0 {
			if hint, ok := hints[e.Key]; ok {
				d.Failf(e.KeyNode.Line, e.Path, "%s", hint)
				continue
			}
			names := make([]string, len(fields))
			for j, f := range fields {
				names[j] = f.Name
			}
			d.Failf(e.KeyNode.Line, e.Path, "unknown field (known: %s)", strings.Join(names, ", "))
			continue
		}
		have[e.Key] = true
		fields[i].Decode(e)
	}
	for _, f := range fields {
		if f.Required && !have[f.Name] {
			if at == 0 {
				at = Resolve(n).Line
			}
			d.Failf(at, Join(path, f.Name), "required field missing")
		}
	}
}

// Str returns e's value as a string; anything but a YAML string (an
// unquoted 12 or yes too) is reported.
func (d *Decoder) Str(e Entry) (string, bool) {
	n := e.Val
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.Failf(n.Line, e.Path, "expected a string, got %s (quote it if it is meant as text)", Describe(n))
		return "", false
	}
	return n.Value, true
}

// NonEmptyStr is Str that also reports an empty or all-blank string.
func (d *Decoder) NonEmptyStr(e Entry) (string, bool) {
	s, ok := d.Str(e)
	if ok && strings.TrimSpace(s) == "" {
		d.Failf(e.Val.Line, e.Path, "must not be empty")
		return "", false
	}
	return s, ok
}

// Int returns e's value as an int; anything but a YAML integer that fits
// is reported.
func (d *Decoder) Int(e Entry) (int, bool) {
	n := e.Val
	var v int
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
		d.Failf(n.Line, e.Path, "expected an integer, got %s", Describe(n))
		return 0, false
	}
	return v, true
}

// Float returns e's value as a float64 (an integer is a number too);
// anything else, and NaN or infinity, is reported.
func (d *Decoder) Float(e Entry) (float64, bool) {
	n := e.Val
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
		d.Failf(n.Line, e.Path, "expected a number, got %s", Describe(n))
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.Failf(n.Line, e.Path, "expected a finite number, got %s", Describe(n))
		return 0, false
	}
	return v, true
}

// List returns the items of a sequence value, each with its path
// ("rules[2]"); anything but a list is reported.
func (d *Decoder) List(e Entry) ([]Entry, bool) {
	n := e.Val
	if n.Kind != yaml.SequenceNode {
		d.Failf(n.Line, e.Path, "expected a list, got %s", Describe(n))
		return nil, false
	}
	out := make([]Entry, len(n.Content))
	for i, c := range n.Content {
		c = Resolve(c)
		out[i] = Entry{Key: fmt.Sprint(i), KeyNode: c, Val: c, Path: fmt.Sprintf("%s[%d]", e.Path, i)}
	}
	return out, true
}
