package edit

import (
	"fmt"
	"regexp"
	"strings"
)

// lineNumberPrefix is the start of a line of view's output: the line
// number and its tab.
var lineNumberPrefix = regexp.MustCompile(`^\s*\d+\t`)

// maxHintWork bounds the line comparisons of the whitespace hint.
const maxHintWork = 20_000_000

// absentHint is what to tell an agent whose old_str does not occur in
// content: that it kept view's line numbers, or where a text that differs
// from it only in whitespace is; else to copy the text again.
func absentHint(content []byte, oldStr string) string {
	oldLines := strings.Split(strings.TrimSuffix(oldStr, "\n"), "\n")
	numbered, nonEmpty := 0, 0
	for _, l := range oldLines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		nonEmpty++
		if lineNumberPrefix.MatchString(l) {
			numbered++
		}
	}
	if nonEmpty > 0 && numbered == nonEmpty {
		return " Its lines start with line numbers from view's output (\"    12\\t\"); old_str must be the file's text only: leave out each line's number and the tab after it."
	}
	if first, last, ok := matchIgnoringSpace(content, oldLines); ok {
		return fmt.Sprintf(" A text that differs from old_str only in whitespace (indentation, spaces, tabs or line endings) is at %s; view those lines and copy them exactly.", lineSpan(first, last))
	}
	return " View the file (or the region) again and copy the text exactly, with its indentation and line breaks."
}

// squeeze is s with its runs of white space made one space, and trimmed.
func squeeze(s string) string { return strings.Join(strings.Fields(s), " ") }

// matchIgnoringSpace finds the first lines of content that match
// oldLines when white space is squeezed (the first of oldLines may be the
// end of a line, the last the start of one; blank lines around old_str are
// ignored). It returns their 1-based span.
func matchIgnoringSpace(content []byte, oldLines []string) (first, last int, ok bool) {
	var want []string
	for _, l := range oldLines {
		want = append(want, squeeze(l))
	}
	for len(want) > 0 && want[0] == "" {
		want = want[1:]
	}
	for len(want) > 0 && want[len(want)-1] == "" {
		want = want[:len(want)-1]
	}
	if len(want) == 0 {
		return 0, 0, false
	}
	lines := splitLines(content)
	have := make([]string, len(lines))
	for i, l := range lines {
		have[i] = squeeze(string(l))
	}
	work := 0
	for i := 0; i+len(want) <= len(have); i++ {
		matched := true
		for k, w := range want {
			work++
			h := have[i+k]
			switch {
			case len(want) == 1:
				matched = strings.Contains(h, w)
			case k == 0:
				matched = strings.HasSuffix(h, w)
			case k == len(want)-1:
				matched = strings.HasPrefix(h, w)
			default:
				matched = h == w
			}
			if !matched {
				break
			}
		}
		if matched {
			return i + 1, i + len(want), true
		}
		if work > maxHintWork {
			break
		}
	}
	return 0, 0, false
}
