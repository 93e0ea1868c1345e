package edit

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	cases := []struct {
		name          string
		before, after string
		want          string // the output of GNU diff -u, headers aside
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"both empty", "", "", ""},
		{"two hunks, no final newline", "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\n", "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nL\nm", `--- /work/f
+++ /work/f
@@ -1,5 +1,5 @@
 a
-b
+B
 c
 d
 e
@@ -9,5 +9,5 @@
 i
 j
 k
-l
-m
+L
+m
\ No newline at end of file
`},
		{"changes 6 lines apart share a hunk", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\nX\n3\n4\n5\n6\n7\n8\nY\n", `--- /work/f
+++ /work/f
@@ -1,9 +1,9 @@
 1
-2
+X
 3
 4
 5
 6
 7
 8
-9
+Y
`},
		{"changes 7 lines apart make two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "1\nX\n3\n4\n5\n6\n7\n8\n9\nY\n",
			"--- /work/f\n+++ /work/f\n@@ -1,5 +1,5 @@\n 1\n-2\n+X\n 3\n 4\n 5\n@@ -7,4 +7,4 @@\n 7\n 8\n 9\n-10\n+Y\n"},
		{"from empty", "", "x\ny\n", "--- /work/f\n+++ /work/f\n@@ -0,0 +1,2 @@\n+x\n+y\n"},
		{"to empty", "x\n", "", "--- /work/f\n+++ /work/f\n@@ -1 +0,0 @@\n-x\n"},
		{"final newline added", "x", "x\n", "--- /work/f\n+++ /work/f\n@@ -1 +1 @@\n-x\n\\ No newline at end of file\n+x\n"},
		{"unchanged last line without newline", "a\nb\nc", "A\nb\nc", "--- /work/f\n+++ /work/f\n@@ -1,3 +1,3 @@\n-a\n+A\n b\n c\n\\ No newline at end of file\n"},
		{"insert in the middle", "1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nnew\n5\n6\n7\n8\n", "--- /work/f\n+++ /work/f\n@@ -2,6 +2,7 @@\n 2\n 3\n 4\n+new\n 5\n 6\n 7\n"},
		{"CRLF kept", "a\r\nb\r\n", "a\r\nB\r\n", "--- /work/f\n+++ /work/f\n@@ -1,2 +1,2 @@\n a\r\n-b\r\n+B\r\n"},
		{"unicode", "héllo\n世界\n", "héllo\n世界!\n", "--- /work/f\n+++ /work/f\n@@ -1,2 +1,2 @@\n héllo\n-世界\n+世界!\n"},
	}
	for _, c := range cases {
		got := UnifiedDiff("/work/f", []byte(c.before), []byte(c.after))
		if got != c.want {
			t.Errorf("%s: UnifiedDiff =\n%s\nwant\n%s", c.name, got, c.want)
		}
		if patched, err := applyPatch([]byte(c.before), got); err != nil || string(patched) != c.after {
			t.Errorf("%s: the diff applied gives %q, %v; want %q", c.name, patched, err, c.after)
		}
	}
}

// TestUnifiedDiffApplies diffs random pairs of line sequences (with and
// without final newlines) and applies each diff back.
func TestUnifiedDiffApplies(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"a\n", "b\n", "c\n", "a\r\n", "\n", "dd\n"}
	gen := func() string {
		var sb strings.Builder
		for range rng.IntN(30) {
			sb.WriteString(words[rng.IntN(len(words))])
		}
		if rng.IntN(3) == 0 {
			sb.WriteString("tail")
		}
		return sb.String()
	}
	for i := range 2000 {
		before := gen()
		after := before
		if rng.IntN(2) == 0 {
			after = gen()
		} else if len(before) > 0 { // a local change, as an edit makes
			at := rng.IntN(len(before))
			after = before[:at] + words[rng.IntN(len(words))] + before[at+rng.IntN(len(before)-at+1)/2:]
		}
		diff := UnifiedDiff("/work/f", []byte(before), []byte(after))
		if (diff == "") != (before == after) {
			t.Fatalf("case %d: diff of %q and %q is %q", i, before, after, diff)
		}
		got, err := applyPatch([]byte(before), diff)
		if err != nil || string(got) != after {
			t.Fatalf("case %d: diff of %q -> %q:\n%s\napplied gives %q, %v", i, before, after, diff, got, err)
		}
		if again := UnifiedDiff("/work/f", []byte(before), []byte(after)); again != diff {
			t.Fatalf("case %d: UnifiedDiff is not deterministic", i)
		}
	}
}

// TestUnifiedDiffShortest: the Myers script changes only what changed.
func TestUnifiedDiffShortest(t *testing.T) {
	before := "x\na\nb\nc\ny\nz\n"
	after := "a\nb\nq\nc\nz\n"
	diff := UnifiedDiff("/work/f", []byte(before), []byte(after))
	var minus, plus int
	for _, l := range strings.Split(diff, "\n")[2:] {
		if strings.HasPrefix(l, "-") {
			minus++
		}
		if strings.HasPrefix(l, "+") {
			plus++
		}
	}
	if minus != 2 || plus != 1 {
		t.Errorf("diff removes %d and adds %d lines, want 2 and 1 (x, y out; q in):\n%s", minus, plus, diff)
	}
}

// TestUnifiedDiffLarge: files too different for the Myers budget still
// get a diff that applies.
func TestUnifiedDiffLarge(t *testing.T) {
	var a, b strings.Builder
	for i := range 60000 {
		a.WriteString(strings.Repeat("a", i%7) + "\n")
		b.WriteString(strings.Repeat("b", i%5) + "\n")
	}
	diff := UnifiedDiff("/work/f", []byte(a.String()), []byte(b.String()))
	got, err := applyPatch([]byte(a.String()), diff)
	if err != nil || string(got) != b.String() {
		t.Fatalf("the diff of two large files does not apply: %v", err)
	}
	cut, truncated := capDiff(diff)
	if !truncated || len(cut) > MaxDiffBytes || !strings.HasSuffix(cut, "\n") || !strings.HasPrefix(diff, cut) {
		t.Errorf("capDiff: %d bytes, truncated %v; want a prefix of at most %d bytes ending a line", len(cut), truncated, MaxDiffBytes)
	}
}
