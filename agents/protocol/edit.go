package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"
	"unicode"

	"github.com/vera-run/vera/bus/catalog"
)

// AnswerDir is the directory an answer file must be in.
const AnswerDir = "/work/output/"

// NotesPath is the agent's notes file, which only notes_append changes.
const NotesPath = "/work/notes.md"

// ValidAnswerFile reports whether p may name an answer file: a clean
// absolute path of a file under AnswerDir, without control characters.
func ValidAnswerFile(p string) bool {
	return strings.HasPrefix(p, AnswerDir) && len(p) > len(AnswerDir) && path.Clean(p) == p && !hasControl(p)
}

// hasControl reports whether s holds a control character (a newline in a
// path would break the one-line summary of an edit and the answer read).
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// editArgKeys are the arguments of the edit action.
var editArgKeys = []string{"op", "path", "view_range", "file_text", "old_str", "new_str", "insert_line"}

// EditSummary is the one-line command of an edit request and its
// evidence: "edit str_replace /work/a.py" ("edit view /work/a.py 10:20"
// for a line range).
func EditSummary(e catalog.EditArgs) string {
	s := "edit " + string(e.Op) + " " + e.Path
	if e.Op == catalog.EditView && len(e.ViewRange) == 2 {
		s += fmt.Sprintf(" %d:%d", e.ViewRange[0], e.ViewRange[1])
	}
	if e.Op == catalog.EditInsert {
		s += fmt.Sprintf(" after line %d", e.InsertLine)
	}
	return s
}

// editAction validates an edit action's args: a known op, an absolute
// clean path under /work (or /input for view), never notes.md for a
// change, and the arguments the op needs.
func editAction(a Action, args map[string]json.RawMessage, argIsString bool) (Action, *FormatError) {
	bad := func(format string, v ...any) (Action, *FormatError) {
		return a, &FormatError{CodeBadEdit, fmt.Sprintf(format, v...) + ` e.g. {"tool":"edit","args":{"op":"str_replace","path":"/work/a.py","old_str":"x = 1","new_str":"x = 2"}}.`}
	}
	if argIsString {
		return bad(`"args" must be a JSON object with op, path and the op's arguments,`)
	}
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(editArgKeys, k) {
			return bad("The edit action has an unknown argument %q; its arguments are %s,", clip(k, 40), strings.Join(editArgKeys, ", "))
		}
	}
	raw, err := json.Marshal(args)
	if err != nil { // raw JSON values of a parsed object always encode
		return bad("The edit action's args could not be read (%v),", err)
	}
	var e catalog.EditArgs
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&e); err != nil {
		return bad("The edit action's args have a wrong type (%s): op, path, file_text, old_str and new_str are strings, view_range a list of two line numbers, insert_line a number,", err2msg(err))
	}
	e.Op = catalog.EditOp(strings.ToLower(strings.TrimSpace(string(e.Op))))
	e.Path = strings.TrimSpace(e.Path)
	a.Edit = &e
	has := func(k string) bool {
		r, ok := args[k]
		return ok && string(bytes.TrimSpace(r)) != "null"
	}
	switch {
	case e.Op == "":
		return bad("The edit action has no op: give args.op, one of view, create, str_replace, insert or undo,")
	case !e.Op.Valid():
		return bad("Unknown edit op %q: args.op is one of view, create, str_replace, insert or undo,", clip(string(e.Op), 40))
	case e.Path == "":
		return bad("The edit action has no path: give args.path, the absolute path of the file,")
	case !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || hasControl(e.Path):
		return bad("args.path must be a clean absolute path such as /work/analysis.py (no .., no trailing /); got %q,", clip(e.Path, 120))
	}
	underWork := strings.HasPrefix(e.Path, "/work/")
	underInput := e.Path == "/input" || strings.HasPrefix(e.Path, "/input/")
	switch {
	case e.Op == catalog.EditView && !underWork && !underInput:
		return bad("view reads files under /work or /input; got %q,", clip(e.Path, 120))
	case e.Op != catalog.EditView && underInput:
		return bad("/input is read-only: copy the file under /work and edit the copy (%q),", clip(e.Path, 120))
	case e.Op != catalog.EditView && !underWork:
		return bad("edit changes files under /work only; got %q,", clip(e.Path, 120))
	case e.Op != catalog.EditView && e.Path == NotesPath:
		a.Edit = nil
		return a, &FormatError{CodeNotesOverwrite, fmt.Sprintf("notes.md is append-only: the edit op %s on %s is refused. Add to your notes with {\"tool\":\"notes_append\",\"args\":{\"text\":\"…\"}}; to correct a note, append a correction.", e.Op, NotesPath)}
	}
	switch e.Op {
	case catalog.EditView:
		if has("view_range") && (len(e.ViewRange) != 2 || e.ViewRange[0] < 1 || (e.ViewRange[1] != -1 && e.ViewRange[1] < e.ViewRange[0])) {
			return bad("args.view_range must be [first, last] line numbers from 1 (last -1 = to the end); got %s,", clip(string(args["view_range"]), 60))
		}
	case catalog.EditCreate:
		if !has("file_text") {
			return bad("create needs args.file_text, the new file's content,")
		}
	case catalog.EditStrReplace:
		if e.OldStr == "" {
			return bad("str_replace needs args.old_str, the exact text to replace (it must occur once in the file), and args.new_str,")
		}
		if !has("new_str") {
			return bad("str_replace needs args.new_str, the replacement (\"\" deletes old_str),")
		}
	case catalog.EditInsert:
		if !has("insert_line") || !has("new_str") {
			return bad("insert needs args.insert_line (the line after which to insert, 0 = at the top) and args.new_str,")
		}
		if e.InsertLine < 0 {
			return bad("args.insert_line must be 0 or more; got %d,", e.InsertLine)
		}
	}
	return a, nil
}
