package edit

import (
	"errors"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

func TestCheckPath(t *testing.T) {
	const (
		view    = catalog.EditView
		create  = catalog.EditCreate
		replace = catalog.EditStrReplace
		insert  = catalog.EditInsert
		undo    = catalog.EditUndo
	)
	cases := []struct {
		op   catalog.EditOp
		path string
		want string // "" = allowed, else a part of the refusal
	}{
		{view, "/work/a.py", ""},
		{create, "/work/a.py", ""},
		{replace, "/work/sub/dir/a.py", ""},
		{insert, "/work/a..b.txt", ""}, // ".." inside a name is no parent reference
		{undo, "/work/a.py", ""},
		{view, "/input/data.csv", ""},
		{view, "/input", ""}, // a directory: sandboxd lists it
		{view, "/work", ""},
		{view, "/work/notes.md", ""}, // reading the notes is fine
		{view, "/etc/passwd", "outside /work and /input"},
		{view, "/inputs/x", "outside /work and /input"},
		{create, "/workspace/a.py", "outside /work"},
		{create, "/work", "the working directory, not a file"},
		{replace, "/work", "the working directory, not a file"},
		{create, "/work/notes.md", "append-only"},
		{replace, "/work/notes.md", "notes_append"},
		{insert, "/work/notes.md", "append-only"},
		{undo, "/work/notes.md", "append-only"},
		{create, "/input/data.csv", "read-only"},
		{replace, "/input/data.csv", "copy it to /work"},
		{insert, "/input", "read-only"},
		{create, "a.py", "relative; give an absolute path, e.g. /work/a.py"},
		{view, "work/a.py", "relative"},
		{create, "", "path is empty"},
		{view, "/work/../etc/passwd", `contains ".."`},
		{create, "/work/sub/../notes.md", `contains ".."`},
		{view, "/work/..", `contains ".."`},
		{create, "/work/a\x00.py", "NUL byte"},
		{create, "/work//a.py", "not in clean form; use /work/a.py"},
		{create, "/work/./notes.md", "not in clean form; use /work/notes.md"},
		{view, "/work/dir/", "not in clean form; use /work/dir"},
	}
	for _, c := range cases {
		err := CheckPath(c.op, c.path)
		if c.want == "" {
			if err != nil {
				t.Errorf("CheckPath(%s, %q) = %v, want allowed", c.op, c.path, err)
			}
			continue
		}
		var r *Refusal
		if !errors.As(err, &r) {
			t.Errorf("CheckPath(%s, %q) = %v, want a *Refusal containing %q", c.op, c.path, err, c.want)
			continue
		}
		if !strings.Contains(r.Msg, c.want) {
			t.Errorf("CheckPath(%s, %q) = %q, want it to contain %q", c.op, c.path, r.Msg, c.want)
		}
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		args catalog.EditArgs
		want string // "" = valid
	}{
		{"view whole", catalog.EditArgs{Op: "view", Path: "/work/a"}, ""},
		{"view range", catalog.EditArgs{Op: "view", Path: "/work/a", ViewRange: []int{3, 7}}, ""},
		{"view one line", catalog.EditArgs{Op: "view", Path: "/work/a", ViewRange: []int{3, 3}}, ""},
		{"view to end", catalog.EditArgs{Op: "view", Path: "/work/a", ViewRange: []int{3, -1}}, ""},
		{"view range of 1", catalog.EditArgs{Op: "view", Path: "/work/a", ViewRange: []int{3}}, "must be two line numbers"},
		{"view range of 3", catalog.EditArgs{Op: "view", Path: "/work/a", ViewRange: []int{1, 2, 3}}, "must be two line numbers"},
		{"view from 0", catalog.EditArgs{Op: "view", Path: "/work/a", ViewRange: []int{0, 10}}, "numbered from 1"},
		{"view backwards", catalog.EditArgs{Op: "view", Path: "/work/a", ViewRange: []int{10, 5}}, "before the first"},
		{"view last -2", catalog.EditArgs{Op: "view", Path: "/work/a", ViewRange: []int{1, -2}}, "before the first"},
		{"create empty", catalog.EditArgs{Op: "create", Path: "/work/a"}, ""},
		{"create no path", catalog.EditArgs{Op: "create", FileText: "x"}, "path is empty"},
		{"create in input", catalog.EditArgs{Op: "create", Path: "/input/a", FileText: "x"}, "read-only"},
		{"replace", catalog.EditArgs{Op: "str_replace", Path: "/work/a", OldStr: "x", NewStr: "y"}, ""},
		{"replace delete", catalog.EditArgs{Op: "str_replace", Path: "/work/a", OldStr: "x"}, ""},
		{"replace no old", catalog.EditArgs{Op: "str_replace", Path: "/work/a", NewStr: "y"}, "needs old_str"},
		{"replace same", catalog.EditArgs{Op: "str_replace", Path: "/work/a", OldStr: "x", NewStr: "x"}, "identical"},
		{"insert", catalog.EditArgs{Op: "insert", Path: "/work/a", NewStr: "y"}, ""},
		{"insert negative", catalog.EditArgs{Op: "insert", Path: "/work/a", NewStr: "y", InsertLine: -1}, "must be >= 0"},
		{"insert nothing", catalog.EditArgs{Op: "insert", Path: "/work/a", InsertLine: 2}, "needs new_str"},
		{"undo", catalog.EditArgs{Op: "undo", Path: "/work/a"}, ""},
		{"unknown op", catalog.EditArgs{Op: "delete", Path: "/work/a"}, `unknown edit op "delete"; use one of view, create, str_replace, insert, undo`},
		{"empty op", catalog.EditArgs{Path: "/work/a"}, "unknown edit op"},
	}
	for _, c := range cases {
		err := Validate(c.args)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: Validate = %v, want valid", c.name, err)
			}
			continue
		}
		var r *Refusal
		if !errors.As(err, &r) || !strings.Contains(r.Msg, c.want) {
			t.Errorf("%s: Validate = %v, want a *Refusal containing %q", c.name, err, c.want)
		}
	}
}
