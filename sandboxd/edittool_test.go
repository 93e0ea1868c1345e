package sandboxd_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/catalog"
)

func (f *fixture) edit(run, id string, a catalog.EditArgs) catalog.ToolFinished {
	f.t.Helper()
	return f.exec(run, req{id: id, edit: &a})
}

// TestEditToolInTheContainer: every operation of the file tool, run by
// sandboxd in the run's container as the sandbox user, with the refusals
// the agent sees as exit 1 and a reason.
func TestEditToolInTheContainer(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("edit")
	work := f.workDir(run)
	f.exec(run, req{cmd: "true"})
	tf := f.edit(run, "e1", catalog.EditArgs{Op: catalog.EditCreate, Path: "/work/src/a.py", FileText: "def f():\n    return 1\n\nx = 1\nx = 1\n"})
	if tf.ExitCode != 0 || tf.Edit == nil || !tf.Edit.Changed || tf.Edit.SHA256After == "" || !strings.Contains(tf.Edit.Diff, "+def f():") {
		t.Fatalf("create: %s", summarize(tf))
	}
	st, err := os.Stat(filepath.Join(work, "src/a.py"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fileUID(st); uid != 65532 && uid != os.Getuid() {
		t.Fatalf("the file belongs to uid %d, not the sandbox user", uid)
	}
	tf = f.edit(run, "e2", catalog.EditArgs{Op: catalog.EditView, Path: "/work/src/a.py", ViewRange: []int{1, 2}})
	if tf.ExitCode != 0 || !strings.Contains(tf.Stdout.Head, "     1\tdef f():\n     2\t    return 1") || strings.Contains(tf.Stdout.Head, "x = 1") {
		t.Fatalf("view: %s", summarize(tf))
	}
	tf = f.edit(run, "e3", catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/src/a.py", OldStr: "x = 1", NewStr: "x = 2"})
	if tf.ExitCode != 1 || !strings.Contains(tf.Stderr.Head, "2 times") || tf.Edit == nil || tf.Edit.Changed {
		t.Fatalf("non-unique: %s", summarize(tf))
	}
	tf = f.edit(run, "e4", catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/src/a.py", OldStr: "return 3", NewStr: "return 2"})
	if tf.ExitCode != 1 || !strings.Contains(tf.Stderr.Head, "did not appear verbatim") {
		t.Fatalf("absent: %s", summarize(tf))
	}
	tf = f.edit(run, "e5", catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/src/a.py", OldStr: "return 1", NewStr: "return 2"})
	if tf.ExitCode != 0 || !tf.Edit.Changed || !strings.Contains(tf.Edit.Diff, "-    return 1\n+    return 2") {
		t.Fatalf("replace: %s", summarize(tf))
	}
	tf = f.edit(run, "e6", catalog.EditArgs{Op: catalog.EditInsert, Path: "/work/src/a.py", InsertLine: 0, NewStr: "import os"})
	if tf.ExitCode != 0 {
		t.Fatalf("insert: %s", summarize(tf))
	}
	if b, _ := os.ReadFile(filepath.Join(work, "src/a.py")); string(b) != "import os\ndef f():\n    return 2\n\nx = 1\nx = 1\n" {
		t.Fatalf("file after insert: %q", b)
	}
	// The same request delivered again is not run again (an insert would
	// add its line twice).
	f.request(run, req{id: "e6", edit: &catalog.EditArgs{Op: catalog.EditInsert, Path: "/work/src/a.py", InsertLine: 0, NewStr: "import os"}})
	time.Sleep(2 * time.Second)
	if n := f.count(run, catalog.TypeToolFinished); n != 7 {
		t.Fatalf("%d results for 7 requests: the redelivered edit ran again", n)
	}
	for _, id := range []string{"u1", "u2"} {
		if tf = f.edit(run, id, catalog.EditArgs{Op: catalog.EditUndo, Path: "/work/src/a.py"}); tf.ExitCode != 0 {
			t.Fatalf("undo: %s", summarize(tf))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(work, "src/a.py")); string(b) != "def f():\n    return 1\n\nx = 1\nx = 1\n" {
		t.Fatalf("file after two undos: %q", b)
	}
	if tf = f.edit(run, "u3", catalog.EditArgs{Op: catalog.EditUndo, Path: "/work/src/a.py"}); tf.ExitCode != 0 {
		t.Fatalf("undo of the create: %s", summarize(tf))
	}
	if _, err := os.Stat(filepath.Join(work, "src/a.py")); !os.IsNotExist(err) {
		t.Fatalf("the undo of a create left the file: %v", err)
	}
	if tf = f.edit(run, "u4", catalog.EditArgs{Op: catalog.EditUndo, Path: "/work/src/a.py"}); tf.ExitCode != 1 {
		t.Fatalf("undo with nothing to undo: %s", summarize(tf))
	}

	// Refused: binary files, notes.md (also through a link), /input
	// (also through a link), a directory.
	if err := os.WriteFile(filepath.Join(work, "notes.md"), []byte("n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if tf := f.exec(run, req{cmd: `printf 'a\0b' > /work/bin.dat && ln -s /work/notes.md /work/n.md && ln -s /input /work/in && mkdir -p /work/dir`}); tf.ExitCode != 0 {
		t.Fatalf("setup: %s", summarize(tf))
	}
	for _, c := range []struct {
		a    catalog.EditArgs
		want string
	}{
		{catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/bin.dat", OldStr: "a", NewStr: "c"}, "binary"},
		{catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/notes.md", OldStr: "n", NewStr: "m"}, "notes"},
		{catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/n.md", OldStr: "n", NewStr: "m"}, "notes"},
		{catalog.EditArgs{Op: catalog.EditCreate, Path: "/work/in/x.txt", FileText: "x"}, "/input"},
		{catalog.EditArgs{Op: catalog.EditCreate, Path: "/input/x.txt", FileText: "x"}, "/input"},
		{catalog.EditArgs{Op: catalog.EditInsert, Path: "/work/dir", NewStr: "x"}, "directory"},
	} {
		tf := f.edit(run, "r-"+strings.ReplaceAll(c.a.Path, "/", "_"), c.a)
		if tf.ExitCode != 1 || !strings.Contains(strings.ToLower(tf.Stderr.Head), strings.ToLower(c.want)) {
			t.Fatalf("%+v: want a refusal naming %q, got %s", c.a, c.want, summarize(tf))
		}
	}
	if b, _ := os.ReadFile(filepath.Join(work, "notes.md")); string(b) != "n\n" {
		t.Fatalf("notes.md changed: %q", b)
	}
	tf = f.edit(run, "v-dir", catalog.EditArgs{Op: catalog.EditView, Path: "/work/dir"})
	if tf.ExitCode != 0 || !strings.Contains(tf.Stdout.Head, "is a directory") {
		t.Fatalf("view of a directory: %s", summarize(tf))
	}
}

func fileUID(fi os.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
