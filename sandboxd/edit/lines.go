package edit

import (
	"bytes"
	"fmt"
	"strings"
	"unicode/utf8"
)

// splitLines splits b into its lines, each with its "\n" (the last line
// lacks it when b does not end with a newline). Empty b has no lines.
func splitLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			lines = append(lines, b)
			break
		}
		lines = append(lines, b[:i+1])
		b = b[i+1:]
	}
	return lines
}

// lineCount is the number of lines of b: its newlines, plus one for a last
// line without a newline.
func lineCount(b []byte) int {
	n := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// lineAt is the 1-based number of the line that holds byte offset off.
func lineAt(b []byte, off int) int {
	return 1 + bytes.Count(b[:off], []byte{'\n'})
}

// isCRLF reports whether b has CRLF line endings: at least one, and every
// "\n" preceded by "\r".
func isCRLF(b []byte) bool {
	crlf := bytes.Count(b, []byte("\r\n"))
	return crlf > 0 && crlf == bytes.Count(b, []byte{'\n'})
}

// toCRLF turns the "\n" line endings of s (which has no "\r") into "\r\n".
func toCRLF(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// IsBinary reports whether b is not text the edit tool handles: it holds a
// NUL byte or is not valid UTF-8.
func IsBinary(b []byte) bool {
	return bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b)
}

// shown is a line as the agent sees it: without its "\n", and without the
// "\r" before it in a CRLF file.
func shown(line []byte, crlf bool) []byte {
	line = bytes.TrimSuffix(line, []byte{'\n'})
	if crlf {
		line = bytes.TrimSuffix(line, []byte{'\r'})
	}
	return line
}

// numbered writes lines from..to (1-based, inclusive) of lines cat -n
// style, at most maxLines of them and at most about maxBytes. It returns
// the last line written (from-1 when none), and whether that line was cut
// short (a single line longer than maxBytes is cut at a rune boundary).
func numbered(sb *strings.Builder, lines [][]byte, from, to int, crlf bool, maxLines, maxBytes int) (last int, cutLine bool) {
	written := 0
	last = from - 1
	for n := from; n <= to && n-from < maxLines; n++ {
		line := shown(lines[n-1], crlf)
		entry := len(line) + 8
		if written+entry > maxBytes {
			if n > from {
				return last, false
			}
			// Not even the first line fits: show its start.
			keep := max(maxBytes-8, 0)
			for keep > 0 && !utf8.RuneStart(line[keep]) {
				keep--
			}
			fmt.Fprintf(sb, "%6d\t%s\n", n, line[:keep])
			return n, true
		}
		fmt.Fprintf(sb, "%6d\t%s\n", n, line)
		written += entry
		last = n
	}
	return last, false
}

// plural is "1 line", "2 lines".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// listLines is "3, 17, 42" (and "... and N more" past the listed ones).
func listLines(lines []int, total int) string {
	parts := make([]string, len(lines))
	for i, l := range lines {
		parts[i] = fmt.Sprint(l)
	}
	s := strings.Join(parts, ", ")
	if total > len(lines) {
		s += fmt.Sprintf(", ... and %d more", total-len(lines))
	}
	return s
}
