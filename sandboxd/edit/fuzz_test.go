package edit

import (
	"bytes"
	"errors"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// FuzzApply runs str_replace, insert and view on arbitrary content, and
// checks that every change is consistent (checkOutcome: digests, a diff
// that applies), that Undo restores the exact bytes, and that UnifiedDiff
// is empty for equal inputs and deterministic.
func FuzzApply(f *testing.F) {
	f.Add("a\nb\nc\n", "b", "B\n", 1)
	f.Add("a\r\nb\r\nc", "b\nc", "x", 3)
	f.Add("", "x", "", 0)
	f.Add("aaa", "aa", "a", 2)
	f.Add("héllo\n世界", "世", "\n", -1)
	f.Add("x\x00y\n", "x", "y", 0)
	f.Add("  indented\n\tline\n", "indented\n line", "z", 1)
	f.Fuzz(func(t *testing.T, content, oldStr, newStr string, line int) {
		const path = "/work/fuzz.txt"
		before := []byte(content)
		var refusal *Refusal

		out, err := Apply(replace(path, oldStr, newStr), before, true)
		switch {
		case err == nil:
			checkOutcome(t, "str_replace", out, before, true)
			if !out.Changed {
				t.Fatalf("str_replace of %q with %q in %q changed nothing", oldStr, newStr, content)
			}
			undone, err := Undo(path, out.Content, before, true)
			if err != nil {
				t.Fatal(err)
			}
			checkOutcome(t, "undo", undone, out.Content, true)
			if !bytes.Equal(undone.Content, before) {
				t.Fatalf("undo gives %q, want %q", undone.Content, before)
			}
		case !errors.As(err, &refusal) || refusal.Msg == "":
			t.Fatalf("str_replace: %v, want a refusal with a message", err)
		}

		ins := catalog.EditArgs{Op: catalog.EditInsert, Path: path, InsertLine: line, NewStr: newStr}
		if line < 0 { // a line within the file (-MinInt stays negative: a refusal)
			ins.InsertLine = -line % (lineCount(before) + 1)
		}
		out, err = Apply(ins, before, true)
		switch {
		case err == nil:
			checkOutcome(t, "insert", out, before, true)
			if !bytes.HasPrefix(out.Content, before[:prefixLen(before, ins.InsertLine)]) {
				t.Fatalf("insert after line %d of %q changed the lines before it: %q", ins.InsertLine, content, out.Content)
			}
			undone, err := Undo(path, out.Content, before, true)
			if err != nil || !bytes.Equal(undone.Content, before) {
				t.Fatalf("undo of insert gives %q, %v; want %q", undone.Content, err, before)
			}
		case !errors.As(err, &refusal) || refusal.Msg == "":
			t.Fatalf("insert: %v, want a refusal with a message", err)
		}

		if out, err := Apply(viewArgs(path), before, true); err == nil {
			checkOutcome(t, "view", out, before, true)
		} else if !errors.As(err, &refusal) {
			t.Fatalf("view: %v", err)
		}

		if d := UnifiedDiff(path, before, before); d != "" {
			t.Fatalf("diff of equal contents is %q", d)
		}
		other := []byte(newStr + content + oldStr)
		d1 := UnifiedDiff(path, before, other)
		if d2 := UnifiedDiff(path, before, other); d1 != d2 {
			t.Fatal("UnifiedDiff is not deterministic")
		}
		if got, err := applyPatch(before, d1); err != nil || !bytes.Equal(got, other) {
			t.Fatalf("diff %q of %q -> %q applies as %q, %v", d1, before, other, got, err)
		}
	})
}

// prefixLen is the byte length of the first n lines of b.
func prefixLen(b []byte, n int) int {
	l := 0
	for _, line := range splitLines(b)[:n] {
		l += len(line)
	}
	return l
}
