package yamlconf_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/vera-run/vera/internal/yamlconf"
)

// messages returns err's lines, failing the test unless err is an
// yamlconf.Errors whose Errors errors.As also finds.
func messages(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var es yamlconf.Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %T is not yamlconf.Errors: %v", err, err)
	}
	var e *yamlconf.Error
	if !errors.As(err, &e) || e != es[0] {
		t.Errorf("errors.As(*Error) = %v, want the first Error %v", e, es[0])
	}
	return strings.Split(err.Error(), "\n")
}

func check(t *testing.T, err error, want ...string) {
	t.Helper()
	if got := messages(t, err); !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestErrorPrintsLikeACompiler(t *testing.T) {
	for _, tt := range []struct {
		e    yamlconf.Error
		want string
	}{
		{yamlconf.Error{File: "s.yaml", Line: 12, Path: "profiles.x.verify", Msg: `unknown llm "qwen"`}, `s.yaml:12: profiles.x.verify: unknown llm "qwen"`},
		{yamlconf.Error{File: "s.yaml", Line: 3, Msg: "expected a mapping, got a list"}, "s.yaml:3: expected a mapping, got a list"},
		{yamlconf.Error{File: "s.yaml", Path: "profiles.x", Msg: "no such profile"}, "s.yaml: profiles.x: no such profile"},
		{yamlconf.Error{File: "s.yaml", Msg: "file is empty"}, "s.yaml: file is empty"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v prints %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestErrSortsByLineKeepingTheOrderWithinALine(t *testing.T) {
	d := &yamlconf.Decoder{File: "f.yaml"}
	if err := d.Err(); err != nil {
		t.Fatalf("Err with no problems = %v, want nil", err)
	}
	d.Failf(5, "b", "second on 5")
	d.Failf(2, "a", "on 2")
	d.Failf(5, "a", "third on 5")
	d.Failf(0, "", "whole file")
	err := d.Err()
	check(t, err, "f.yaml: whole file", "f.yaml:2: a: on 2", "f.yaml:5: b: second on 5", "f.yaml:5: a: third on 5")
	var es yamlconf.Errors
	errors.As(err, &es)
	if got := len(es.Unwrap()); got != 4 {
		t.Errorf("Unwrap gives %d errors, want 4", got)
	}
}

func TestRoot(t *testing.T) {
	d := &yamlconf.Decoder{File: "f.yaml"}
	n := d.Root([]byte("# a comment\na: 1\n"))
	if n == nil || n.Kind != yaml.MappingNode || n.Line != 2 {
		t.Fatalf("Root = %+v, want the mapping on line 2", n)
	}
	if err := d.Err(); err != nil {
		t.Fatalf("Err = %v", err)
	}

	for _, tt := range []struct {
		name, data, emptyMsg, want string
	}{
		{"invalid YAML at a line", "llms:\n  m: [\n", "", "f.yaml:2: invalid YAML: did not find expected node content"},
		{"invalid YAML without a line", "a: \x01\n", "", "f.yaml: invalid YAML: control characters are not allowed"},
		{"only a comment", "# only a comment\n", "", "f.yaml: file is empty"},
		{"nothing", "", "", "f.yaml: file is empty"},
		{"nothing, with EmptyMsg", "", "the file is empty", "f.yaml: the file is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := &yamlconf.Decoder{File: "f.yaml", EmptyMsg: tt.emptyMsg}
			if n := d.Root([]byte(tt.data)); n != nil {
				t.Errorf("Root = %+v, want nil", n)
			}
			check(t, d.Err(), tt.want)
		})
	}
}

// decodeDoc runs decode on the top node of data and returns the problems.
func decodeDoc(t *testing.T, data string, decode func(d *yamlconf.Decoder, root *yaml.Node)) error {
	t.Helper()
	d := &yamlconf.Decoder{File: "f.yaml"}
	root := d.Root([]byte(data))
	if root == nil {
		t.Fatalf("Root: %v", d.Err())
	}
	decode(d, root)
	return d.Err()
}

func TestObject(t *testing.T) {
	var seen []string
	record := func(e yamlconf.Entry) {
		seen = append(seen, e.Path+"@"+e.Val.Value)
		if e.KeyNode.Value != e.Key {
			t.Errorf("entry %s: KeyNode holds %q", e.Key, e.KeyNode.Value)
		}
	}
	err := decodeDoc(t, `top:
  b: &x 2
  a: 1
  c: *x
  secret: s
  typo: 3
  a: 4
  [k]: 5
other: {}
`, func(d *yamlconf.Decoder, root *yaml.Node) {
		d.Object(root, 1, "", []yamlconf.Field{
			{Name: "top", Required: true, Decode: func(e yamlconf.Entry) {
				d.Object(e.Val, e.KeyNode.Line, e.Path, []yamlconf.Field{
					{Name: "a", Decode: record},
					{Name: "b", Decode: record},
					{Name: "c", Decode: record},
					{Name: "d", Required: true, Decode: record},
				}, map[string]string{"secret": "secrets do not belong here"})
			}},
			{Name: "other", Decode: func(e yamlconf.Entry) {
				d.Object(e.Val, 0, e.Path, []yamlconf.Field{{Name: "z", Required: true, Decode: record}}, nil)
			}},
			{Name: "absent", Required: true, Decode: record},
		}, nil)
	})
	if want := []string{"top.b@2", "top.a@1", "top.c@2"}; !slices.Equal(seen, want) {
		t.Errorf("decoded %v, want %v (file order, alias resolved)", seen, want)
	}
	check(t, err,
		"f.yaml:1: top.d: required field missing",
		"f.yaml:1: absent: required field missing",
		"f.yaml:5: top.secret: secrets do not belong here",
		"f.yaml:6: top.typo: unknown field (known: a, b, c, d)",
		"f.yaml:7: top.a: duplicate key (first on line 3)",
		"f.yaml:8: top: mapping keys must be plain names",
		// at 0: the mapping's own line.
		"f.yaml:9: other.z: required field missing",
	)
}

func TestMapping(t *testing.T) {
	err := decodeDoc(t, "empty:\nnull: ~\nlist: [1]\nscalar: x\n", func(d *yamlconf.Decoder, root *yaml.Node) {
		entries, ok := d.Mapping(root, "")
		if !ok || len(entries) != 4 {
			t.Fatalf("Mapping = %v, %v; want 4 entries", entries, ok)
		}
		for _, e := range entries[:2] {
			if got, ok := d.Mapping(e.Val, e.Path); !ok || got != nil {
				t.Errorf("%s: Mapping = %v, %v; want an empty mapping", e.Path, got, ok)
			}
		}
		for _, e := range entries[2:] {
			if _, ok := d.Mapping(e.Val, e.Path); ok {
				t.Errorf("%s: Mapping ok, want not", e.Path)
			}
		}
	})
	check(t, err, "f.yaml:3: list: expected a mapping, got a list", `f.yaml:4: scalar: expected a mapping, got string "x"`)
}

func TestScalars(t *testing.T) {
	type got struct {
		path string
		v    any
	}
	var values []got
	err := decodeDoc(t, `str: text
quoted: "12"
notstr: 12
blank: "  "
int: -7
bigint: 9223372036854775808
intstr: "7"
float: 0.25
intasfloat: 3
nan: .nan
floatstr: x
list: [a, {b: 1}]
notlist: {a: 1}
`, func(d *yamlconf.Decoder, root *yaml.Node) {
		entries, _ := d.Mapping(root, "")
		for _, e := range entries {
			var v any
			var ok bool
			switch e.Key {
			case "str", "quoted", "notstr":
				v, ok = d.Str(e)
			case "blank":
				v, ok = d.NonEmptyStr(e)
			case "int", "bigint", "intstr":
				v, ok = d.Int(e)
			case "float", "intasfloat", "nan", "floatstr":
				v, ok = d.Float(e)
			case "list", "notlist":
				var items []yamlconf.Entry
				items, ok = d.List(e)
				var paths []string
				for _, it := range items {
					paths = append(paths, it.Path+"="+yamlconf.Describe(it.Val))
				}
				v = strings.Join(paths, " ")
			default:
				t.Fatalf("no decoder for %s", e.Key)
			}
			if ok {
				values = append(values, got{e.Path, v})
			}
		}
	})
	want := []got{{"str", "text"}, {"quoted", "12"}, {"int", -7}, {"float", 0.25}, {"intasfloat", 3.0}, {"list", `list[0]=string "a" list[1]=a mapping`}}
	if !slices.Equal(values, want) {
		t.Errorf("values %v, want %v", values, want)
	}
	check(t, err,
		"f.yaml:3: notstr: expected a string, got integer 12 (quote it if it is meant as text)",
		"f.yaml:4: blank: must not be empty",
		"f.yaml:6: bigint: expected an integer, got integer 9223372036854775808", // does not fit an int,
		`f.yaml:7: intstr: expected an integer, got string "7"`,
		"f.yaml:10: nan: expected a finite number, got number .nan",
		`f.yaml:11: floatstr: expected a number, got string "x"`,
		"f.yaml:13: notlist: expected a list, got a mapping",
	)
}

func TestDescribe(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(`[{a: 1}, [1], text, "12", 12, 1.5, true, ~, !!binary aGk=, &x y, *x]`), &doc); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range doc.Content[0].Content {
		got = append(got, yamlconf.Describe(n))
	}
	want := []string{"a mapping", "a list", `string "text"`, `string "12"`, "integer 12", "number 1.5", "boolean true", "nothing (null)", `!!binary "aGk="`, `string "y"`, `string "y"`}
	if !slices.Equal(got, want) {
		t.Errorf("Describe:\n%q\nwant\n%q", got, want)
	}
	items := doc.Content[0].Content
	if !yamlconf.IsNull(items[7]) || yamlconf.IsNull(items[2]) {
		t.Errorf("IsNull wrong on ~ or text")
	}
	if alias := items[10]; yamlconf.Resolve(alias) != items[9] || yamlconf.Resolve(items[9]) != items[9] {
		t.Errorf("Resolve does not follow the alias to its anchor")
	}
	if yamlconf.Resolve(nil) != nil {
		t.Errorf("Resolve(nil) != nil")
	}
}

func TestJoin(t *testing.T) {
	for _, tt := range [][3]string{{"", "a", "a"}, {"a", "b", "a.b"}, {"a.b", "c", "a.b.c"}} {
		if got := yamlconf.Join(tt[0], tt[1]); got != tt[2] {
			t.Errorf("Join(%q, %q) = %q, want %q", tt[0], tt[1], got, tt[2])
		}
	}
}
