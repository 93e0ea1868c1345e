package edit

import (
	"bytes"
	"fmt"
	"strings"
)

// diffContext is the number of unchanged lines a hunk shows around changes.
const diffContext = 3

// maxDiffWork bounds the Myers search: (lines compared) x (edit distance).
// Past it, the differing middle of the files is shown as removed and added
// whole: a correct diff, if not the shortest.
const maxDiffWork = 50_000_000

type opKind byte

const (
	opEqual opKind = iota
	opDelete
	opInsert
)

// lineOp is one line of an edit script: a is the line's index in before
// (for an insert: the index of the before line it goes in front of), b its
// index in after (for a delete: likewise).
type lineOp struct {
	kind opKind
	a, b int
}

// UnifiedDiff is the unified diff (3 lines of context) that turns before
// into after, with path on its ---/+++ lines; empty when they are equal.
// Lines without a final newline are marked "\ No newline at end of file".
func UnifiedDiff(path string, before, after []byte) string {
	return unifiedLabels(path, path, before, after)
}

// capDiff cuts diff at a line boundary to at most MaxDiffBytes.
func capDiff(diff string) (string, bool) {
	if len(diff) <= MaxDiffBytes {
		return diff, false
	}
	return diff[:strings.LastIndexByte(diff[:MaxDiffBytes], '\n')+1], true
}

func unifiedLabels(from, to string, before, after []byte) string {
	if bytes.Equal(before, after) {
		return ""
	}
	a, b := splitLines(before), splitLines(after)
	ops := lineScript(a, b)
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", from, to)
	for i := 0; i < len(ops); {
		// The next change, and the hunk around it and the changes near it.
		c := i
		for c < len(ops) && ops[c].kind == opEqual {
			c++
		}
		if c == len(ops) {
			break
		}
		start := max(i, c-diffContext)
		end := c
		for {
			for end < len(ops) && ops[end].kind != opEqual {
				end++
			}
			next := end
			for next < len(ops) && ops[next].kind == opEqual {
				next++
			}
			if next == len(ops) || next-end > 2*diffContext {
				break
			}
			end = next
		}
		end = min(len(ops), end+diffContext)
		writeHunk(&sb, a, b, ops[start:end])
		i = end
	}
	return sb.String()
}

// hunkRange is a hunk header's range: start is the 0-based index of its
// first line.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprint(start + 1)
	}
	return fmt.Sprintf("%d,%d", start+1, count)
}

func writeHunk(sb *strings.Builder, a, b [][]byte, ops []lineOp) {
	na, nb := 0, 0
	for _, op := range ops {
		if op.kind != opInsert {
			na++
		}
		if op.kind != opDelete {
			nb++
		}
	}
	fmt.Fprintf(sb, "@@ -%s +%s @@\n", hunkRange(ops[0].a, na), hunkRange(ops[0].b, nb))
	for _, op := range ops {
		var mark byte
		var line []byte
		switch op.kind {
		case opEqual:
			mark, line = ' ', a[op.a]
		case opDelete:
			mark, line = '-', a[op.a]
		case opInsert:
			mark, line = '+', b[op.b]
		}
		sb.WriteByte(mark)
		sb.Write(line)
		if len(line) == 0 || line[len(line)-1] != '\n' {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
}

// lineScript is an edit script from a to b: the common leading and
// trailing lines (only diffContext of each, which is all a diff shows),
// and a shortest script for the middle.
func lineScript(a, b [][]byte) []lineOp {
	p := 0
	for p < len(a) && p < len(b) && bytes.Equal(a[p], b[p]) {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && bytes.Equal(a[len(a)-1-s], b[len(b)-1-s]) {
		s++
	}
	var ops []lineOp
	for i := max(0, p-diffContext); i < p; i++ {
		ops = append(ops, lineOp{opEqual, i, i})
	}
	ids := map[string]int{}
	intern := func(lines [][]byte) []int {
		out := make([]int, len(lines))
		for i, l := range lines {
			id, ok := ids[string(l)]
			if !ok {
				id = len(ids)
				ids[string(l)] = id
			}
			out[i] = id
		}
		return out
	}
	ma, mb := intern(a[p:len(a)-s]), intern(b[p:len(b)-s])
	middle, ok := myers(ma, mb)
	if !ok {
		middle = middle[:0]
		for i := range ma {
			middle = append(middle, lineOp{opDelete, i, 0})
		}
		for j := range mb {
			middle = append(middle, lineOp{opInsert, len(ma), j})
		}
	}
	for _, op := range middle {
		ops = append(ops, lineOp{op.kind, op.a + p, op.b + p})
	}
	for k := 0; k < s && k < diffContext; k++ {
		ops = append(ops, lineOp{opEqual, len(a) - s + k, len(b) - s + k})
	}
	return ops
}

// myers is a shortest edit script from a to b (Myers' O(ND) algorithm),
// or false when finding it would take more than maxDiffWork.
func myers(a, b []int) ([]lineOp, bool) {
	n, m := len(a), len(b)
	limit := n + m
	maxD := min(limit, max(maxDiffWork/(limit+1), 64), 2000)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int32 // trace[d][k+d]: the furthest x on diagonal k after d edits
	for d := 0; d <= maxD; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x++
				y++
			}
			v[off+k] = x
		}
		snap := make([]int32, 2*d+1)
		for k := -d; k <= d; k++ {
			snap[k+d] = int32(v[off+k])
		}
		trace = append(trace, snap)
		if x := v[off+n-m]; (n-m >= -d && n-m <= d && (n-m+d)%2 == 0) && x >= n {
			return backtrack(trace, n, m), true
		}
	}
	return nil, false
}

// backtrack reads the edit script out of myers' trace, ending at (n, m).
func backtrack(trace [][]int32, n, m int) []lineOp {
	var rev []lineOp
	x, y := n, m
	for d := len(trace) - 1; d > 0; d-- {
		prev := trace[d-1]
		at := func(k int) int { return int(prev[k+d-1]) }
		k := x - y
		var pk int
		if k == -d || (k != d && at(k-1) < at(k+1)) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			x--
			y--
			rev = append(rev, lineOp{opEqual, x, y})
		}
		if x == px {
			y--
			rev = append(rev, lineOp{opInsert, x, y})
		} else {
			x--
			rev = append(rev, lineOp{opDelete, x, y})
		}
	}
	for x > 0 && y > 0 {
		x--
		y--
		rev = append(rev, lineOp{opEqual, x, y})
	}
	ops := make([]lineOp, len(rev))
	for i, op := range rev {
		ops[len(rev)-1-i] = op
	}
	return ops
}
