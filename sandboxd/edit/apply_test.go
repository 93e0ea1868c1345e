package edit

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// checkOutcome checks what every outcome must hold: Changed agrees with
// Content and Remove, the digests are those of the contents, and the diff
// turns before into the new content.
func checkOutcome(t *testing.T, name string, out Outcome, before []byte, existed bool) {
	t.Helper()
	if out.Changed != (out.Content != nil || out.Remove) || out.Changed != out.Result.Changed {
		t.Errorf("%s: Changed %v, Result.Changed %v, Content nil %v, Remove %v: inconsistent", name, out.Changed, out.Result.Changed, out.Content == nil, out.Remove)
	}
	wantBefore := ""
	if existed {
		wantBefore = digest(before)
	}
	if out.Result.SHA256Before != wantBefore {
		t.Errorf("%s: SHA256Before %q, want %q", name, out.Result.SHA256Before, wantBefore)
	}
	after := before
	if out.Content != nil {
		after = out.Content
	}
	wantAfter := digest(after)
	if out.Remove {
		wantAfter = ""
	}
	if out.Result.SHA256After != wantAfter {
		t.Errorf("%s: SHA256After %q, want %q", name, out.Result.SHA256After, wantAfter)
	}
	if !out.Changed && out.Result.Diff != "" {
		t.Errorf("%s: unchanged, yet a diff %q", name, out.Result.Diff)
	}
	if out.Changed && !out.Remove && !out.Result.DiffTruncated {
		patched, err := applyPatch(before, out.Result.Diff)
		if err != nil || !bytes.Equal(patched, after) {
			t.Errorf("%s: the diff applied gives %q, %v; want %q", name, patched, err, after)
		}
	}
	if out.Text == "" {
		t.Errorf("%s: no text for the agent", name)
	}
}

// applyCase is one Apply: args on a file (missing when !exists), and the
// text (exact, or parts of it) and content it should give, or the refusal.
type applyCase struct {
	name     string
	args     catalog.EditArgs
	file     string
	exists   bool
	text     string   // exact Text, when set
	contains []string // parts of Text, or of the refusal's message when refused
	content  *string  // new content, when the file changes
	refused  bool
}

func str(s string) *string { return &s }

func runApplyCases(t *testing.T, cases []applyCase) {
	t.Helper()
	for _, c := range cases {
		out, err := Apply(c.args, []byte(c.file), c.exists)
		if c.refused {
			var r *Refusal
			if !errors.As(err, &r) {
				t.Errorf("%s: Apply = %+v, %v; want a refusal", c.name, out, err)
				continue
			}
			for _, part := range c.contains {
				if !strings.Contains(r.Msg, part) {
					t.Errorf("%s: refusal %q does not contain %q", c.name, r.Msg, part)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Apply: %v", c.name, err)
			continue
		}
		checkOutcome(t, c.name, out, []byte(c.file), c.exists)
		if c.text != "" && out.Text != c.text {
			t.Errorf("%s: Text =\n%s\nwant\n%s", c.name, out.Text, c.text)
		}
		for _, part := range c.contains {
			if !strings.Contains(out.Text, part) {
				t.Errorf("%s: Text %q does not contain %q", c.name, out.Text, part)
			}
		}
		switch {
		case c.content == nil && out.Changed:
			t.Errorf("%s: changed the file to %q, want it unchanged", c.name, out.Content)
		case c.content != nil && string(out.Content) != *c.content:
			t.Errorf("%s: Content = %q, want %q", c.name, out.Content, *c.content)
		}
	}
}

func viewArgs(path string, rng ...int) catalog.EditArgs {
	return catalog.EditArgs{Op: catalog.EditView, Path: path, ViewRange: rng}
}

func numberedLines(from, to int) string {
	var sb strings.Builder
	for i := from; i <= to; i++ {
		fmt.Fprintf(&sb, "line %d\n", i)
	}
	return sb.String()
}

func TestView(t *testing.T) {
	const abc = "alpha\nbeta\ngamma\n"
	long := numberedLines(1, 2500)
	runApplyCases(t, []applyCase{
		{name: "whole", args: viewArgs("/work/a.txt"), file: abc, exists: true,
			text: "Here's the result of running `cat -n` on /work/a.txt (3 lines):\n     1\talpha\n     2\tbeta\n     3\tgamma\n"},
		{name: "range", args: viewArgs("/work/a.txt", 2, 3), file: abc, exists: true,
			text: "Here's the result of running `cat -n` on lines 2-3 of /work/a.txt (3 lines in all):\n     2\tbeta\n     3\tgamma\n"},
		{name: "to the end", args: viewArgs("/work/a.txt", 2, -1), file: abc, exists: true,
			text: "Here's the result of running `cat -n` on lines 2-3 of /work/a.txt (3 lines in all):\n     2\tbeta\n     3\tgamma\n"},
		{name: "one line", args: viewArgs("/input/a.txt", 1, 1), file: abc, exists: true,
			text: "Here's the result of running `cat -n` on lines 1-1 of /input/a.txt (3 lines in all):\n     1\talpha\n"},
		{name: "range past the end", args: viewArgs("/work/a.txt", 2, 9), file: abc, exists: true, refused: true,
			contains: []string{"view_range [2, 9] is out of bounds: /work/a.txt has 3 lines; ask for lines within [1, 3]"}},
		{name: "range after the end", args: viewArgs("/work/a.txt", 4, -1), file: abc, exists: true, refused: true,
			contains: []string{"has 3 lines"}},
		{name: "empty file", args: viewArgs("/work/e"), file: "", exists: true, text: "/work/e is empty (0 lines)."},
		{name: "range of an empty file", args: viewArgs("/work/e", 1, 1), file: "", exists: true, refused: true,
			contains: []string{"/work/e is empty (0 lines)"}},
		{name: "no final newline", args: viewArgs("/work/a"), file: "x\ny", exists: true,
			text: "Here's the result of running `cat -n` on /work/a (2 lines):\n     1\tx\n     2\ty\n(no newline at end of file)\n"},
		{name: "single line without newline", args: viewArgs("/work/a"), file: "x", exists: true,
			text: "Here's the result of running `cat -n` on /work/a (1 line):\n     1\tx\n(no newline at end of file)\n"},
		{name: "CRLF", args: viewArgs("/work/w.txt"), file: "a\r\nb\r\n", exists: true,
			contains: []string{"     1\ta\n     2\tb\n", "CRLF line endings"}},
		{name: "a lone CR is shown", args: viewArgs("/work/m.txt"), file: "a\r\nb\n", exists: true,
			contains: []string{"     1\ta\r\n     2\tb\n"}},
		{name: "unicode", args: viewArgs("/work/u.txt"), file: "héllo wörld\n日本語\n", exists: true,
			text: "Here's the result of running `cat -n` on /work/u.txt (2 lines):\n     1\théllo wörld\n     2\t日本語\n"},
		{name: "missing", args: viewArgs("/work/nope.py"), refused: true,
			contains: []string{"/work/nope.py does not exist", "op create"}},
		{name: "binary", args: viewArgs("/work/b.bin"), file: "ab\x00cd", exists: true, refused: true,
			contains: []string{"/work/b.bin is a binary file of 5 bytes", "NUL", "xxd, file"}},
		{name: "invalid UTF-8", args: viewArgs("/work/l1.txt"), file: "caf\xe9\n", exists: true, refused: true,
			contains: []string{"binary file of 5 bytes", "not valid UTF-8"}},
		{name: "oversized", args: viewArgs("/work/big"), file: strings.Repeat("x", MaxFileBytes+1), exists: true, refused: true,
			contains: []string{fmt.Sprintf("/work/big is %d bytes", MaxFileBytes+1), "grep -n", "sed -n"}},
		{name: "long file is cut", args: viewArgs("/work/long"), file: long, exists: true,
			contains: []string{"(2500 lines)", "  2000\tline 2000\n[only lines 1-2000 of the requested 1-2500 are shown", "view_range [2001, 2500]"}},
		{name: "long range is cut", args: viewArgs("/work/long", 10, -1), file: long, exists: true,
			contains: []string{"    10\tline 10\n", "  2009\tline 2009\n[only lines 10-2009 of the requested 10-2500", "view_range [2010, 2500]"}},
		{name: "range within the limit", args: viewArgs("/work/long", 2001, 2500), file: long, exists: true,
			contains: []string{"  2001\tline 2001\n", "  2500\tline 2500\n"}},
		{name: "long line is cut", args: viewArgs("/work/min.js"), file: strings.Repeat("é", MaxViewBytes) + "\nnext\n", exists: true,
			contains: []string{"[line 1 is", "was cut", "view_range [2, 2]"}},
	})
	out, err := Apply(viewArgs("/work/long"), []byte(long), true)
	if err != nil || strings.Contains(out.Text, "line 2001\n") {
		t.Errorf("the cut view shows line 2001 (err %v)", err)
	}
}

func TestCreate(t *testing.T) {
	create := func(path, text string) catalog.EditArgs {
		return catalog.EditArgs{Op: catalog.EditCreate, Path: path, FileText: text}
	}
	runApplyCases(t, []applyCase{
		{name: "new", args: create("/work/a.py", "x = 1\nprint(x)\n"), text: "Created /work/a.py (2 lines, 15 bytes).", content: str("x = 1\nprint(x)\n")},
		{name: "empty", args: create("/work/empty", ""), text: "Created /work/empty (0 lines, 0 bytes).", content: str("")},
		{name: "no final newline", args: create("/work/a", "x\ny"), text: "Created /work/a (2 lines, 3 bytes).", content: str("x\ny")},
		{name: "CRLF kept", args: create("/work/w", "a\r\nb\r\n"), content: str("a\r\nb\r\n")},
		{name: "exists", args: create("/work/a.py", "y"), file: "x", exists: true, refused: true,
			contains: []string{"/work/a.py already exists; use view then str_replace", "rm /work/a.py"}},
		{name: "empty file exists", args: create("/work/a.py", "y"), file: "", exists: true, refused: true, contains: []string{"already exists"}},
		{name: "NUL", args: create("/work/b", "a\x00b"), refused: true, contains: []string{"NUL", "shell"}},
		{name: "too big", args: create("/work/b", strings.Repeat("x", MaxFileBytes+1)), refused: true, contains: []string{"more than the edit tool's limit"}},
	})
	out, err := Apply(create("/work/a.py", "x\ny\n"), nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "--- /dev/null\n+++ /work/a.py\n@@ -0,0 +1,2 @@\n+x\n+y\n"; out.Result.Diff != want {
		t.Errorf("create's diff = %q, want %q", out.Result.Diff, want)
	}
	empty, err := Apply(create("/work/e", ""), nil, false)
	if err != nil || empty.Content == nil || !empty.Changed || empty.Result.SHA256After != digest(nil) {
		t.Errorf("creating an empty file: %+v, %v; want changed, empty non-nil content", empty, err)
	}
}

func replace(path, oldStr, newStr string) catalog.EditArgs {
	return catalog.EditArgs{Op: catalog.EditStrReplace, Path: path, OldStr: oldStr, NewStr: newStr}
}

func TestStrReplace(t *testing.T) {
	const py = "import os\n\ndef f(x):\n    return x + 1\n\ndef g(x):\n    return x + 1\n"
	twelve := numberedLines(1, 12)
	runApplyCases(t, []applyCase{
		{name: "unique", args: replace("/work/a.py", "def g(x):\n    return x + 1", "def g(x):\n    return x * 2"), file: py, exists: true,
			content:  str("import os\n\ndef f(x):\n    return x + 1\n\ndef g(x):\n    return x * 2\n"),
			contains: []string{"Edited /work/a.py: replaced old_str (lines 6-7) with new_str (lines 6-7)", "     7\t    return x * 2\n"}},
		{name: "snippet shows 4 lines around", args: replace("/work/l", "line 6\n", "six\nsix again\n"), file: twelve, exists: true,
			content: str(strings.Replace(twelve, "line 6\n", "six\nsix again\n", 1)),
			text: "Edited /work/l: replaced old_str (line 6) with new_str (lines 6-7). Here's the result of running `cat -n` on a snippet of the edited file:\n" +
				"     2\tline 2\n     3\tline 3\n     4\tline 4\n     5\tline 5\n     6\tsix\n     7\tsix again\n     8\tline 7\n     9\tline 8\n    10\tline 9\n    11\tline 10\n" +
				"Review the changes; if they are not as expected, edit again or undo."},
		{name: "delete", args: replace("/work/a.py", "import os\n\n", ""), file: py, exists: true,
			content: str(strings.TrimPrefix(py, "import os\n\n")), contains: []string{"deleted old_str (lines 1-2)", "     1\tdef f(x):\n"}},
		{name: "delete the last line", args: replace("/work/l", "line 12\n", ""), file: twelve, exists: true,
			content: str(numberedLines(1, 11)), contains: []string{"    11\tline 11\n"}},
		{name: "absent", args: replace("/work/a.py", "def h(x):", "def k(x):"), file: py, exists: true, refused: true,
			contains: []string{"No replacement was performed: old_str did not appear verbatim in /work/a.py.", "copy the text exactly"}},
		{name: "absent with other indentation", args: replace("/work/a.py", "def f(x):\n\treturn x + 1", "y"), file: py, exists: true, refused: true,
			contains: []string{"did not appear verbatim", "differs from old_str only in whitespace", "lines 3-4"}},
		{name: "absent: line numbers copied", args: replace("/work/a.py", "     3\tdef f(x):\n     4\t    return x + 1\n", "y"), file: py, exists: true, refused: true,
			contains: []string{"did not appear verbatim", "line numbers from view's output"}},
		{name: "twice", args: replace("/work/a.py", "    return x + 1\n", "    return x\n"), file: py, exists: true, refused: true,
			contains: []string{"No replacement was performed: old_str occurs 2 times in /work/a.py, at lines [4, 7]; include more surrounding lines to make it unique."}},
		{name: "twice on a line", args: replace("/work/a", "ab", "x"), file: "ab ab\ncd\n", exists: true, refused: true,
			contains: []string{"occurs 2 times in /work/a, at lines [1, 1]"}},
		{name: "overlapping", args: replace("/work/a", "aa", "b"), file: "aaa\n", exists: true, refused: true,
			contains: []string{"occurs 2 times"}},
		{name: "many", args: replace("/work/a", "x", "y"), file: strings.Repeat("x\n", 25), exists: true, refused: true,
			contains: []string{"occurs 25 times in /work/a, at lines [1, 2, 3,", "20, ... and 5 more]"}},
		{name: "CRLF, old_str with LF", args: replace("/work/w", "b\nc", "B\nC"), file: "a\r\nb\r\nc\r\nd\r\n", exists: true,
			content: str("a\r\nB\r\nC\r\nd\r\n"), contains: []string{"     2\tB\n     3\tC\n"}},
		{name: "CRLF, old_str with CRLF", args: replace("/work/w", "b\r\n", "B\r\n"), file: "a\r\nb\r\n", exists: true,
			content: str("a\r\nB\r\n")},
		{name: "mixed endings matched verbatim", args: replace("/work/w", "a\r\nb\n", "x\n"), file: "a\r\nb\nc\n", exists: true,
			content: str("x\nc\n")},
		{name: "mixed endings: LF old_str does not match CRLF", args: replace("/work/w", "a\nb", "x"), file: "a\r\nb\nc\n", exists: true, refused: true,
			contains: []string{"did not appear verbatim", "whitespace"}},
		{name: "no final newline kept", args: replace("/work/a", "b", "B"), file: "a\nb", exists: true, content: str("a\nB")},
		{name: "unicode", args: replace("/work/u", "wörld", "мир"), file: "héllo wörld\n", exists: true, content: str("héllo мир\n"),
			contains: []string{"     1\théllo мир\n"}},
		{name: "whole file", args: replace("/work/a", "only\n", "other\n"), file: "only\n", exists: true, content: str("other\n")},
		{name: "empty file", args: replace("/work/e", "x", "y"), file: "", exists: true, refused: true, contains: []string{"did not appear verbatim"}},
		{name: "missing", args: replace("/work/nope", "x", "y"), refused: true,
			contains: []string{"/work/nope does not exist, so there is nothing to edit; create it with op create"}},
		{name: "binary", args: replace("/work/b", "x", "y"), file: "x\x00", exists: true, refused: true, contains: []string{"binary file of 2 bytes"}},
		{name: "oversized", args: replace("/work/big", "x", "y"), file: strings.Repeat("z", MaxFileBytes) + "x", exists: true, refused: true,
			contains: []string{"more than the edit tool's limit"}},
		{name: "result oversized", args: replace("/work/a", "x", strings.Repeat("y", MaxFileBytes)), file: "x\n", exists: true, refused: true,
			contains: []string{"No replacement was performed: /work/a would be"}},
		{name: "identical", args: replace("/work/a", "x", "x"), file: "x\n", exists: true, refused: true, contains: []string{"identical"}},
		{name: "notes.md", args: replace("/work/notes.md", "x", "y"), file: "x\n", exists: true, refused: true, contains: []string{"notes_append"}},
	})
	out, err := Apply(replace("/work/a", "b\n", "B\n"), []byte("a\nb\nc\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if want := "--- /work/a\n+++ /work/a\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"; out.Result.Diff != want {
		t.Errorf("str_replace's diff = %q, want %q", out.Result.Diff, want)
	}
}

func TestStrReplaceHintSpacing(t *testing.T) {
	_, err := Apply(replace("/work/a.py", "return  x+1", "y"), []byte("def f(x):\n    return x+1\n"), true)
	var r *Refusal
	if !errors.As(err, &r) || !strings.Contains(r.Msg, "only in whitespace") || !strings.Contains(r.Msg, "line 2;") {
		t.Errorf("refusal %v: want the whitespace hint naming line 2", err)
	}
}

func TestStrReplaceDiffTruncated(t *testing.T) {
	big := strings.Repeat("some text of a line\n", 4000)
	out, err := Apply(replace("/work/a", "START\n", big), []byte("START\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Result.DiffTruncated || len(out.Result.Diff) > MaxDiffBytes || len(out.Result.Diff) < MaxDiffBytes-100 {
		t.Errorf("diff of %d bytes, truncated %v; want cut near %d", len(out.Result.Diff), out.Result.DiffTruncated, MaxDiffBytes)
	}
	if !strings.Contains(out.Text, "[snippet cut after line 100; view lines 101-4000 to see the rest]") {
		t.Errorf("the snippet of a 4000-line edit is not cut: %d bytes", len(out.Text))
	}
}

func insertArgs(path string, line int, text string) catalog.EditArgs {
	return catalog.EditArgs{Op: catalog.EditInsert, Path: path, InsertLine: line, NewStr: text}
}

func TestInsert(t *testing.T) {
	const abc = "a\nb\nc\n"
	runApplyCases(t, []applyCase{
		{name: "at the top", args: insertArgs("/work/f", 0, "top\n"), file: abc, exists: true, content: str("top\na\nb\nc\n"),
			text: "Inserted 1 line at the top of /work/f (now line 1). Here's the result of running `cat -n` on a snippet of the edited file:\n" +
				"     1\ttop\n     2\ta\n     3\tb\n     4\tc\nReview the changes (indentation, no duplicated lines); if they are not as expected, edit again or undo."},
		{name: "in the middle, newline added", args: insertArgs("/work/f", 2, "x\ny"), file: abc, exists: true, content: str("a\nb\nx\ny\nc\n"),
			contains: []string{"Inserted 2 lines after line 2 of /work/f (now lines 3-4)", "     3\tx\n     4\ty\n     5\tc\n"}},
		{name: "at the end", args: insertArgs("/work/f", 3, "d"), file: abc, exists: true, content: str("a\nb\nc\nd\n")},
		{name: "at the end, no final newline", args: insertArgs("/work/f", 2, "c"), file: "a\nb", exists: true, content: str("a\nb\nc"),
			contains: []string{"Inserted 1 line after line 2 of /work/f (now line 3)"}},
		{name: "at the end, no final newline, new_str ends one", args: insertArgs("/work/f", 2, "c\n"), file: "a\nb", exists: true, content: str("a\nb\nc\n")},
		{name: "before the last line without newline", args: insertArgs("/work/f", 1, "x"), file: "a\nb", exists: true, content: str("a\nx\nb")},
		{name: "empty file", args: insertArgs("/work/f", 0, "first"), file: "", exists: true, content: str("first\n")},
		{name: "blank line", args: insertArgs("/work/f", 1, "\n"), file: abc, exists: true, content: str("a\n\nb\nc\n")},
		{name: "CRLF", args: insertArgs("/work/f", 1, "x\ny"), file: "a\r\nb\r\n", exists: true, content: str("a\r\nx\r\ny\r\nb\r\n")},
		{name: "CRLF at the end without newline", args: insertArgs("/work/f", 2, "c"), file: "a\r\nb", exists: true, content: str("a\r\nb\r\nc")},
		{name: "unicode", args: insertArgs("/work/f", 1, "ünï"), file: "α\nβ\n", exists: true, content: str("α\nünï\nβ\n")},
		{name: "past the end", args: insertArgs("/work/f", 4, "x"), file: abc, exists: true, refused: true,
			contains: []string{"insert_line 4 is out of range: /work/f has 3 lines; use a value from 0 (before the first line) to 3 (after the last line)."}},
		{name: "past the end of an empty file", args: insertArgs("/work/f", 1, "x"), file: "", exists: true, refused: true,
			contains: []string{"has 0 lines; use a value from 0"}},
		{name: "missing", args: insertArgs("/work/f", 0, "x"), refused: true, contains: []string{"does not exist"}},
		{name: "binary", args: insertArgs("/work/f", 0, "x"), file: "\xff\xfe", exists: true, refused: true, contains: []string{"binary file of 2 bytes"}},
		{name: "oversized", args: insertArgs("/work/f", 0, "x"), file: strings.Repeat("y", MaxFileBytes+1), exists: true, refused: true, contains: []string{"limit"}},
		{name: "input", args: insertArgs("/input/f", 0, "x"), file: abc, exists: true, refused: true, contains: []string{"read-only"}},
	})
}

func TestUndo(t *testing.T) {
	// The undo of a create removes the file.
	created, err := Apply(catalog.EditArgs{Op: catalog.EditCreate, Path: "/work/n.py", FileText: "x\n"}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Undo("/work/n.py", created.Content, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	checkOutcome(t, "undo create", out, created.Content, true)
	if !out.Remove || out.Content != nil || !strings.Contains(out.Text, "removed") {
		t.Errorf("undo of a create: %+v; want Remove, no content, a text saying the file is removed", out)
	}
	if want := "--- /work/n.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"; out.Result.Diff != want {
		t.Errorf("undo of a create: diff %q, want %q", out.Result.Diff, want)
	}

	// The undo of a replace restores the bytes.
	before := []byte("a\r\nb\r\nc")
	edited, err := Apply(replace("/work/w", "b", "B\nB2"), before, true)
	if err != nil {
		t.Fatal(err)
	}
	out, err = Undo("/work/w", edited.Content, before, true)
	if err != nil {
		t.Fatal(err)
	}
	checkOutcome(t, "undo replace", out, edited.Content, true)
	if !bytes.Equal(out.Content, before) || out.Result.Op != catalog.EditUndo {
		t.Errorf("undo of a replace: content %q, op %s; want %q, undo", out.Content, out.Result.Op, before)
	}
	if !strings.Contains(out.Text, "Undid the last edit of /work/w") || !strings.Contains(out.Text, "     2\tb\n") {
		t.Errorf("undo of a replace: text %q", out.Text)
	}

	// Undo to an empty file.
	out, err = Undo("/work/e", []byte("x\n"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	checkOutcome(t, "undo to empty", out, []byte("x\n"), true)
	if out.Content == nil || len(out.Content) != 0 || out.Remove {
		t.Errorf("undo to an empty file: %+v; want empty non-nil content", out)
	}

	// Nothing to undo.
	out, err = Undo("/work/s", []byte("same\n"), []byte("same\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	checkOutcome(t, "undo nothing", out, []byte("same\n"), true)
	if out.Changed || !strings.Contains(out.Text, "nothing was undone") {
		t.Errorf("undo with nothing to undo: %+v", out)
	}

	var r *Refusal
	if _, err := Undo("/work/notes.md", []byte("x"), []byte("y"), true); !errors.As(err, &r) {
		t.Errorf("Undo of notes.md = %v, want a refusal", err)
	}
	if _, err := Apply(catalog.EditArgs{Op: catalog.EditUndo, Path: "/work/a"}, []byte("x"), true); err == nil || errors.As(err, &r) {
		t.Errorf("Apply(undo) = %v, want an error of the caller (not a refusal)", err)
	}
}

func TestCheckFileSize(t *testing.T) {
	var r *Refusal
	if err := CheckFileSize(viewArgs("/work/a"), MaxFileBytes+1); !errors.As(err, &r) {
		t.Errorf("CheckFileSize(view, over the limit) = %v, want a refusal", err)
	}
	if err := CheckFileSize(replace("/work/a", "x", "y"), MaxFileBytes); err != nil {
		t.Errorf("CheckFileSize(str_replace, at the limit) = %v", err)
	}
	if err := CheckFileSize(catalog.EditArgs{Op: catalog.EditCreate, Path: "/work/a"}, MaxFileBytes+1); err != nil {
		t.Errorf("CheckFileSize(create) = %v; create reads no file", err)
	}
}

func TestLineCount(t *testing.T) {
	for s, want := range map[string]int{"": 0, "\n": 1, "x": 1, "x\n": 1, "x\ny": 2, "x\ny\n": 2, "\n\n": 2, "a\r\nb": 2} {
		if got := lineCount([]byte(s)); got != want {
			t.Errorf("lineCount(%q) = %d, want %d", s, got, want)
		}
		if got := len(splitLines([]byte(s))); got != want {
			t.Errorf("len(splitLines(%q)) = %d, want %d", s, got, want)
		}
	}
}

func TestIsBinary(t *testing.T) {
	for s, want := range map[string]bool{"": false, "text\n": false, "日本\n": false, "a\x00": true, "\xc3": true, "\r\n\t": false} {
		if got := IsBinary([]byte(s)); got != want {
			t.Errorf("IsBinary(%q) = %v, want %v", s, got, want)
		}
	}
}
