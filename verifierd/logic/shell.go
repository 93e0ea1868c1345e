package logic

import (
	"strings"

	"github.com/vera-run/vera/internal/shell"
)

// NormalizeShellCommand writes a shell command in a canonical form, so
// that two spellings of one command compare equal: shell.Canonical, the
// product's one reading of shell syntax (whitespace, comments, line
// continuations and quoting that changes nothing are normalised;
// substitutions by the same rules; here-document bodies verbatim). A
// command that is not valid shell is compared with its runs of whitespace
// collapsed (canonicalised if that made it valid), which is all that can
// be said of it without a parse.
//
// The result is meant for comparison, not for running.
func NormalizeShellCommand(s string) string {
	if c, err := shell.Canonical(s); err == nil {
		return c
	}
	f := strings.Join(strings.Fields(s), " ")
	if c, err := shell.Canonical(f); err == nil {
		return c // collapsing made it valid: keep the form a fixed point
	}
	return f
}
