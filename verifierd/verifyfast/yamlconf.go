package verifyfast

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// ConfigError is one problem in settings.yaml or strategy.yaml. It prints as
//
//	settings.yaml:12: profiles.cross-verify.verify: unknown llm "qwen"
type ConfigError struct {
	File string // the path the file was loaded from
	Line int    // 1-based; 0 when the problem concerns the whole file
	Path string // dotted field path, e.g. profiles.cross-verify.verify
	Msg  string
}

func (e *ConfigError) Error() string {
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

// ConfigErrors is every problem found in a file, in line order. The loaders
// return it as their error; errors.As finds it.
type ConfigErrors []*ConfigError

func (es ConfigErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As and errors.Is see each ConfigError.
func (es ConfigErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// ydec walks a yaml.Node tree, collecting ConfigErrors.
type ydec struct {
	file string
	errs ConfigErrors
}

func (d *ydec) failf(line int, path, format string, args ...any) {
	d.errs = append(d.errs, &ConfigError{File: d.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *ydec) err() error {
	if len(d.errs) == 0 {
		return nil
	}
	slices.SortStableFunc(d.errs, func(a, b *ConfigError) int { return cmp.Compare(a.Line, b.Line) })
	return d.errs
}

// root parses data and returns the document's top node (nil after an error).
func (d *ydec) root(data []byte) *yaml.Node {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line := 0
		msg := err.Error()
		// yaml.v3 reports "yaml: line N: ..."; lift the line out.
		var n int
		var rest string
		if k, _ := fmt.Sscanf(msg, "yaml: line %d:", &n); k == 1 {
			line = n
			if i := strings.Index(msg, ": "); i >= 0 {
				rest = msg[i+2:]
				if j := strings.Index(rest, ": "); j >= 0 {
					rest = rest[j+2:]
				}
			}
			msg = "invalid YAML: " + rest
		} else {
			msg = "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")
		}
		d.failf(line, "", "%s", msg)
		return nil
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		d.failf(0, "", "file is empty")
		return nil
	}
	return doc.Content[0]
}

func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func describe(n *yaml.Node) string {
	n = resolve(n)
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

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// entry is one key/value pair of a mapping.
type entry struct {
	key  string
	kn   *yaml.Node // key node, for its line
	val  *yaml.Node
	path string
}

// mapping returns the pairs of a mapping node in file order, reporting
// duplicate and non-string keys. A null node is an empty mapping.
func (d *ydec) mapping(n *yaml.Node, path string) ([]entry, bool) {
	n = resolve(n)
	if isNull(n) {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		d.failf(n.Line, path, "expected a mapping, got %s", describe(n))
		return nil, false
	}
	seen := map[string]int{}
	var out []entry
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind != yaml.ScalarNode {
			d.failf(kn.Line, path, "mapping keys must be plain names")
			continue
		}
		key := kn.Value
		if first, dup := seen[key]; dup {
			d.failf(kn.Line, join(path, key), "duplicate key (first on line %d)", first)
			continue
		}
		seen[key] = kn.Line
		out = append(out, entry{key: key, kn: kn, val: resolve(vn), path: join(path, key)})
	}
	return out, true
}

// field describes one known key of a struct-like mapping.
type field struct {
	name     string
	required bool
	decode   func(e entry)
}

// object decodes a struct-like mapping: every key must be a known field,
// required fields must be present. at is the line to report missing fields
// on (the mapping's own key line). unknownHints gives a friendlier message
// for specific unknown keys.
func (d *ydec) object(n *yaml.Node, at int, path string, fields []field, unknownHints map[string]string) {
	entries, ok := d.mapping(n, path)
	if !ok {
		return
	}
	have := map[string]bool{}
	for _, e := range entries {
		i := slices.IndexFunc(fields, func(f field) bool { return f.name == e.key })
		if i < 0 {
			if hint, ok := unknownHints[e.key]; ok {
				d.failf(e.kn.Line, e.path, "%s", hint)
				continue
			}
			names := make([]string, len(fields))
			for j, f := range fields {
				names[j] = f.name
			}
			d.failf(e.kn.Line, e.path, "unknown field (known: %s)", strings.Join(names, ", "))
			continue
		}
		have[e.key] = true
		fields[i].decode(e)
	}
	for _, f := range fields {
		if f.required && !have[f.name] {
			d.failf(at, join(path, f.name), "required field missing")
		}
	}
}

func (d *ydec) str(e entry) (string, bool) {
	n := e.val
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		d.failf(n.Line, e.path, "expected a string, got %s (quote it if it is meant as text)", describe(n))
		return "", false
	}
	return n.Value, true
}

func (d *ydec) nonEmptyStr(e entry) (string, bool) {
	s, ok := d.str(e)
	if ok && strings.TrimSpace(s) == "" {
		d.failf(e.val.Line, e.path, "must not be empty")
		return "", false
	}
	return s, ok
}

func (d *ydec) int(e entry) (int, bool) {
	n := e.val
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		d.failf(n.Line, e.path, "expected an integer, got %s", describe(n))
		return 0, false
	}
	var v int
	if err := n.Decode(&v); err != nil {
		d.failf(n.Line, e.path, "expected an integer, got %s", describe(n))
		return 0, false
	}
	return v, true
}

func (d *ydec) float(e entry) (float64, bool) {
	n := e.val
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") {
		d.failf(n.Line, e.path, "expected a number, got %s", describe(n))
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		d.failf(n.Line, e.path, "expected a finite number, got %s", describe(n))
		return 0, false
	}
	return v, true
}

// list returns the items of a sequence node with their paths.
func (d *ydec) list(e entry) ([]entry, bool) {
	n := e.val
	if n.Kind != yaml.SequenceNode {
		d.failf(n.Line, e.path, "expected a list, got %s", describe(n))
		return nil, false
	}
	out := make([]entry, len(n.Content))
	for i, c := range n.Content {
		c = resolve(c)
		out[i] = entry{key: fmt.Sprint(i), kn: c, val: c, path: fmt.Sprintf("%s[%d]", e.path, i)}
	}
	return out, true
}
