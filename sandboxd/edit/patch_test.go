package edit

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// applyPatch applies a unified diff made by UnifiedDiff to before,
// checking every context and removed line, and returns the result.
func applyPatch(before []byte, diff string) ([]byte, error) {
	if diff == "" {
		return before, nil
	}
	a := splitLines(before)
	rest := strings.SplitAfter(diff, "\n")
	if len(rest) < 2 || !strings.HasPrefix(rest[0], "--- ") || !strings.HasPrefix(rest[1], "+++ ") {
		return nil, fmt.Errorf("no ---/+++ header in %q", diff)
	}
	rest = rest[2:]
	var out [][]byte
	pos := 0 // next line of a to copy
	for len(rest) > 0 && rest[0] != "" {
		h := rest[0]
		rest = rest[1:]
		var as, ac, bs, bc int
		if _, err := parseHunkHeader(h, &as, &ac, &bs, &bc); err != nil {
			return nil, err
		}
		start := as - 1
		if ac == 0 {
			start = as
		}
		if start < pos || start > len(a) {
			return nil, fmt.Errorf("hunk %q starts at line index %d, copied up to %d of %d", h, start, pos, len(a))
		}
		out = append(out, a[pos:start]...)
		pos = start
		gotA, gotB := 0, 0
		for len(rest) > 0 && rest[0] != "" && !strings.HasPrefix(rest[0], "@@ ") {
			l := rest[0]
			rest = rest[1:]
			line := []byte(l[1:])
			if len(rest) > 0 && rest[0] == "\\ No newline at end of file\n" {
				rest = rest[1:]
				line = bytes.TrimSuffix(line, []byte{'\n'})
			}
			switch l[0] {
			case ' ', '-':
				if pos >= len(a) || !bytes.Equal(a[pos], line) {
					return nil, fmt.Errorf("hunk %q: line %q does not match before's line %d", h, l, pos+1)
				}
				pos++
				gotA++
				if l[0] == ' ' {
					out = append(out, line)
					gotB++
				}
			case '+':
				out = append(out, line)
				gotB++
			default:
				return nil, fmt.Errorf("hunk %q: bad line %q", h, l)
			}
		}
		if gotA != ac || gotB != bc {
			return nil, fmt.Errorf("hunk %q has %d/%d lines", h, gotA, gotB)
		}
	}
	out = append(out, a[pos:]...)
	return bytes.Join(out, nil), nil
}

// parseHunkHeader reads "@@ -as[,ac] +bs[,bc] @@".
func parseHunkHeader(h string, as, ac, bs, bc *int) (int, error) {
	f := strings.Fields(h)
	if len(f) != 4 || f[0] != "@@" || f[3] != "@@" || f[1][0] != '-' || f[2][0] != '+' {
		return 0, fmt.Errorf("bad hunk header %q", h)
	}
	rng := func(s string, start, count *int) error {
		*count = 1
		p, c, found := strings.Cut(s, ",")
		var err error
		if *start, err = strconv.Atoi(p); err != nil {
			return fmt.Errorf("bad hunk header %q: %w", h, err)
		}
		if found {
			if *count, err = strconv.Atoi(c); err != nil {
				return fmt.Errorf("bad hunk header %q: %w", h, err)
			}
		}
		return nil
	}
	if err := rng(f[1][1:], as, ac); err != nil {
		return 0, err
	}
	return 0, rng(f[2][1:], bs, bc)
}

func TestApplyPatchRejectsMismatch(t *testing.T) {
	diff := UnifiedDiff("/work/a", []byte("a\nb\nc\n"), []byte("a\nB\nc\n"))
	if _, err := applyPatch([]byte("a\nX\nc\n"), diff); err == nil {
		t.Fatal("applyPatch applied a diff to content it does not fit")
	}
	got, err := applyPatch([]byte("a\nb\nc\n"), diff)
	if err != nil || string(got) != "a\nB\nc\n" {
		t.Fatalf("applyPatch = %q, %v", got, err)
	}
}
