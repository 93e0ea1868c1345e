package edit

import (
	"fmt"
	"path"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

// Sandbox paths the tool knows.
const (
	WorkDir   = "/work"          // the agent's working directory: the only place edits may change
	InputDir  = "/input"         // the task's read-only inputs: view only
	NotesPath = "/work/notes.md" // append-only, owned by notes_append: view only
)

// Refusal is an edit that was not performed, with a message for the agent
// (a model) saying why and what to do instead.
type Refusal struct{ Msg string }

// Error implements error.
func (r *Refusal) Error() string { return r.Msg }

func refusef(format string, args ...any) *Refusal {
	return &Refusal{Msg: fmt.Sprintf(format, args...)}
}

// changes reports whether op changes files.
func changes(op catalog.EditOp) bool { return op != catalog.EditView }

// underDir reports whether p is dir or inside it (p cleaned and absolute).
func underDir(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

// CheckPath validates the path of an edit: absolute, cleaned, without NUL
// nor a ".." element, and under /work. View may also read under /input and
// may name /work or /input itself (sandboxd lists a directory); the ops
// that change files refuse /work itself, /work/notes.md (append-only,
// owned by notes_append) and anything under /input.
//
// CheckPath looks at the string only: sandboxd must still resolve symbolic
// links in the sandbox and check the resolved path again.
func CheckPath(op catalog.EditOp, p string) error {
	switch {
	case p == "":
		return refusef("path is empty; give the absolute path of a file, e.g. %s/analysis.py.", WorkDir)
	case strings.IndexByte(p, 0) >= 0:
		return refusef("path %q contains a NUL byte; give the absolute path of a file, e.g. %s/analysis.py.", p, WorkDir)
	case !strings.HasPrefix(p, "/"):
		return refusef("path %q is relative; give an absolute path, e.g. %s.", p, path.Join(WorkDir, p))
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return refusef("path %q contains \"..\"; give the file's absolute path without \"..\", e.g. %s/analysis.py.", p, WorkDir)
		}
	}
	if clean := path.Clean(p); clean != p {
		return refusef("path %q is not in clean form; use %s.", p, clean)
	}
	if !changes(op) {
		if underDir(p, WorkDir) || underDir(p, InputDir) {
			return nil
		}
		return refusef("path %s is outside %s and %s; the edit tool views files under %s (and the task's inputs under %s). Use the shell to read other files.", p, WorkDir, InputDir, WorkDir, InputDir)
	}
	switch {
	case underDir(p, InputDir):
		return refusef("%s is under %s, which is read-only; copy it to %s with the shell (cp) and edit the copy.", p, InputDir, WorkDir)
	case p == WorkDir:
		return refusef("%s is the working directory, not a file; give the path of a file in it, e.g. %s/analysis.py.", p, WorkDir)
	case p == NotesPath:
		return refusef("%s is append-only; add to it with the notes_append tool, never with edit.", p)
	case !underDir(p, WorkDir):
		return refusef("path %s is outside %s; the edit tool changes files under %s only.", p, WorkDir, WorkDir)
	}
	return nil
}

// Validate checks the arguments' shape for their op, path included (see
// CheckPath): a known op; for view, a view_range absent or [first, last]
// with 1 <= first and last -1 or last >= first; for str_replace, a
// non-empty old_str different from new_str; for insert, insert_line >= 0
// and a non-empty new_str. Whether the file exists, and ranges against its
// length, are Apply's checks.
func Validate(a catalog.EditArgs) error {
	if !a.Op.Valid() {
		return refusef("unknown edit op %q; use one of view, create, str_replace, insert, undo.", a.Op)
	}
	if err := CheckPath(a.Op, a.Path); err != nil {
		return err
	}
	switch a.Op {
	case catalog.EditView:
		if len(a.ViewRange) == 0 {
			return nil
		}
		if len(a.ViewRange) != 2 {
			return refusef("view_range %v must be two line numbers [first, last] (last -1 = to the end), e.g. [1, 50]; leave it out to view the whole file.", a.ViewRange)
		}
		first, last := a.ViewRange[0], a.ViewRange[1]
		if first < 1 {
			return refusef("view_range [%d, %d]: the first line is %d, but lines are numbered from 1; e.g. [1, %d].", first, last, first, max(last, 1))
		}
		if last != -1 && last < first {
			return refusef("view_range [%d, %d]: the last line is before the first; give [first, last] with last >= first, or last -1 for the end of the file.", first, last)
		}
	case catalog.EditStrReplace:
		if a.OldStr == "" {
			return refusef("str_replace needs old_str: the exact text to replace, copied from the file (view it first). To add text without replacing any, use insert.")
		}
		if a.OldStr == a.NewStr {
			return refusef("No replacement was performed: old_str and new_str are identical, so the edit would change nothing. Put the new text in new_str.")
		}
	case catalog.EditInsert:
		if a.InsertLine < 0 {
			return refusef("insert_line is %d; it must be >= 0: the line after which new_str goes (0 = before the first line).", a.InsertLine)
		}
		if a.NewStr == "" {
			return refusef("insert needs new_str: the text to insert after line %d.", a.InsertLine)
		}
	}
	return nil
}
