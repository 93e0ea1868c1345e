package edit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

// Limits of the tool.
const (
	MaxFileBytes = 4 << 20 // view and the edits refuse bigger files (and edits that would make one)
	MaxViewLines = 2000    // a view longer than this is cut, with a note saying which range to ask for next
	MaxViewBytes = 256 << 10
	MaxDiffBytes = 16 << 10 // EditResult.Diff is cut at this (DiffTruncated)

	SnippetContext  = 4   // lines shown before and after an edited region
	MaxSnippetLines = 100 // an edit's snippet is cut after this many lines
	maxSnippetBytes = 32 << 10
	maxListed       = 20 // occurrences listed by line in a refusal
)

// Outcome is what an operation did, or would have the caller do.
type Outcome struct {
	// Content is the file's new content, to write back; nil when the file
	// is unchanged (view, an undo with nothing to undo) or to be removed.
	Content []byte
	// Changed reports whether the file changes: Content is to be written,
	// or the file removed (Remove).
	Changed bool
	// Remove says the file is to be removed: the undo of the edit that
	// created it.
	Remove bool
	// Text is what the agent is shown: the view's listing, or a
	// confirmation with a numbered snippet of the edited region.
	Text string
	// Result is what the edit did, for ToolFinished.Edit.
	Result catalog.EditResult
}

// digest is the hex SHA-256 of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Apply runs view, create, str_replace or insert on current, the file's
// content (exists=false: the file does not exist). It validates a first
// (Validate). A request it does not perform returns a *Refusal; undo goes
// through Undo, and asking Apply for it is the caller's error.
func Apply(a catalog.EditArgs, current []byte, exists bool) (Outcome, error) {
	if err := Validate(a); err != nil {
		return Outcome{}, err
	}
	if !exists {
		current = nil
	}
	switch a.Op {
	case catalog.EditView:
		return view(a, current, exists)
	case catalog.EditCreate:
		return create(a, exists)
	case catalog.EditStrReplace:
		return strReplace(a, current, exists)
	case catalog.EditInsert:
		return insert(a, current, exists)
	default:
		return Outcome{}, fmt.Errorf("edit: Apply cannot run %s on %s: undo needs the content from before the file's last edit, call Undo", a.Op, a.Path)
	}
}

// CheckFileSize refuses a file of size bytes that the operation would have
// to read in full, so that sandboxd can refuse before reading it.
func CheckFileSize(a catalog.EditArgs, size int64) error {
	if a.Op == catalog.EditCreate || a.Op == catalog.EditUndo || size <= MaxFileBytes {
		return nil
	}
	return tooBig(a.Path, size)
}

func tooBig(path string, size int64) *Refusal {
	return refusef("%s is %d bytes, more than the edit tool's limit of %d bytes (4 MiB). Use the shell: grep -n PATTERN %s to find lines, sed -n 'FIRST,LASTp' %s to read them, sed -i or a script to change them.", path, size, MaxFileBytes, path, path)
}

// readable refuses a missing, oversized or binary file for op.
func readable(a catalog.EditArgs, current []byte, exists bool) error {
	if !exists {
		if a.Op == catalog.EditView {
			return refusef("%s does not exist. Create it with op create, or view its directory to see which files there are.", a.Path)
		}
		return refusef("%s does not exist, so there is nothing to edit; create it with op create (file_text = its whole content).", a.Path)
	}
	if len(current) > MaxFileBytes {
		return tooBig(a.Path, int64(len(current)))
	}
	if IsBinary(current) {
		why := "it is not valid UTF-8"
		if bytes.IndexByte(current, 0) >= 0 {
			why = "it contains NUL bytes"
		}
		return refusef("%s is a binary file of %d bytes (%s); the edit tool handles text files only. Use the shell to inspect it (xxd, file, head -c).", a.Path, len(current), why)
	}
	return nil
}

func view(a catalog.EditArgs, current []byte, exists bool) (Outcome, error) {
	if err := readable(a, current, exists); err != nil {
		return Outcome{}, err
	}
	sum := digest(current)
	out := Outcome{Result: catalog.EditResult{Op: a.Op, Path: a.Path, SHA256Before: sum, SHA256After: sum}}
	lines := splitLines(current)
	n := len(lines)
	whole := len(a.ViewRange) == 0
	if n == 0 {
		if !whole {
			return Outcome{}, refusef("view_range [%d, %d] is out of bounds: %s is empty (0 lines).", a.ViewRange[0], a.ViewRange[1], a.Path)
		}
		out.Text = fmt.Sprintf("%s is empty (0 lines).", a.Path)
		return out, nil
	}
	from, to := 1, n
	var sb strings.Builder
	if whole {
		fmt.Fprintf(&sb, "Here's the result of running `cat -n` on %s (%s):\n", a.Path, plural(n, "line"))
	} else {
		from, to = a.ViewRange[0], a.ViewRange[1]
		if to == -1 {
			to = n
		}
		if from > n || to > n {
			return Outcome{}, refusef("view_range [%d, %d] is out of bounds: %s has %s; ask for lines within [1, %d] (last -1 = to the end).", a.ViewRange[0], a.ViewRange[1], a.Path, plural(n, "line"), n)
		}
		fmt.Fprintf(&sb, "Here's the result of running `cat -n` on lines %d-%d of %s (%s in all):\n", from, to, a.Path, plural(n, "line"))
	}
	crlf := isCRLF(current)
	last, cut := numbered(&sb, lines, from, to, crlf, MaxViewLines, MaxViewBytes)
	if cut {
		fmt.Fprintf(&sb, "[line %d is %d bytes long and was cut; read it with the shell, e.g. sed -n '%dp' %s | cut -c1-2000]\n", last, len(shown(lines[last-1], crlf)), last, a.Path)
	}
	if last < to {
		next := min(to, last+MaxViewLines)
		fmt.Fprintf(&sb, "[only lines %d-%d of the requested %d-%d are shown: a view shows at most %d lines or %d KiB. View the rest with view_range [%d, %d], or search the file with the shell (grep -n PATTERN %s).]\n",
			from, last, from, to, MaxViewLines, MaxViewBytes>>10, last+1, next, a.Path)
	}
	if last == n && current[len(current)-1] != '\n' {
		sb.WriteString("(no newline at end of file)\n")
	}
	if crlf {
		sb.WriteString("(the file has CRLF line endings, shown without \"\\r\"; old_str and new_str written with \"\\n\" are matched and written with \"\\r\\n\")\n")
	}
	out.Text = sb.String()
	return out, nil
}

func create(a catalog.EditArgs, exists bool) (Outcome, error) {
	if exists {
		return Outcome{}, refusef("%s already exists; use view then str_replace or insert to change it, or remove it with the shell first (rm %s) to write it anew.", a.Path, a.Path)
	}
	content := []byte(a.FileText)
	if len(content) > MaxFileBytes {
		return Outcome{}, refusef("file_text is %d bytes, more than the edit tool's limit of %d bytes (4 MiB); write the file in parts (create, then insert), or generate it with a script.", len(content), MaxFileBytes)
	}
	if IsBinary(content) {
		return Outcome{}, refusef("file_text contains a NUL byte or invalid UTF-8; the edit tool writes text files only. Write binary data with the shell (printf, xxd -r, base64 -d).")
	}
	text := fmt.Sprintf("Created %s (%s, %s).", a.Path, plural(lineCount(content), "line"), plural(len(content), "byte"))
	return changed(a.Op, a.Path, nil, false, content, text), nil
}

// changed is the outcome of turning before (beforeExisted=false: no file)
// into after.
func changed(op catalog.EditOp, path string, before []byte, beforeExisted bool, after []byte, text string) Outcome {
	from := path
	if !beforeExisted {
		from = "/dev/null"
	}
	diff, truncated := capDiff(unifiedLabels(from, path, before, after))
	res := catalog.EditResult{Op: op, Path: path, Diff: diff, DiffTruncated: truncated, SHA256After: digest(after)}
	if beforeExisted {
		res.SHA256Before = digest(before)
	}
	res.Changed = !beforeExisted || !bytes.Equal(before, after)
	out := Outcome{Changed: res.Changed, Text: text, Result: res}
	if res.Changed {
		out.Content = after
		if out.Content == nil {
			out.Content = []byte{}
		}
	}
	return out
}

// snippet shows lines first..last of content with SnippetContext lines
// around them, numbered.
func snippet(content []byte, first, last int) string {
	lines := splitLines(content)
	n := len(lines)
	if n == 0 {
		return "(the file is now empty)\n"
	}
	from, to := max(1, first-SnippetContext), min(n, last+SnippetContext)
	from = min(from, n)
	var sb strings.Builder
	shownTo, _ := numbered(&sb, lines, from, to, isCRLF(content), MaxSnippetLines, maxSnippetBytes)
	if shownTo < to {
		fmt.Fprintf(&sb, "[snippet cut after line %d; view lines %d-%d to see the rest]\n", shownTo, shownTo+1, to)
	}
	return sb.String()
}

func strReplace(a catalog.EditArgs, current []byte, exists bool) (Outcome, error) {
	if err := readable(a, current, exists); err != nil {
		return Outcome{}, err
	}
	oldStr, newStr := a.OldStr, a.NewStr
	if isCRLF(current) {
		if !strings.Contains(oldStr, "\r") {
			oldStr = toCRLF(oldStr)
		}
		if !strings.Contains(newStr, "\r") {
			newStr = toCRLF(newStr)
		}
	}
	count, offsets := occurrences(current, oldStr)
	switch {
	case count == 0:
		return Outcome{}, &Refusal{Msg: fmt.Sprintf("No replacement was performed: old_str did not appear verbatim in %s.", a.Path) + absentHint(current, a.OldStr)}
	case count > 1:
		lines := make([]int, len(offsets))
		for i, off := range offsets {
			lines[i] = lineAt(current, off)
		}
		return Outcome{}, refusef("No replacement was performed: old_str occurs %d times in %s, at lines [%s]; include more surrounding lines to make it unique.", count, a.Path, listLines(lines, count))
	}
	at := offsets[0]
	after := make([]byte, 0, len(current)-len(oldStr)+len(newStr))
	after = append(after, current[:at]...)
	after = append(after, newStr...)
	after = append(after, current[at+len(oldStr):]...)
	if len(after) > MaxFileBytes {
		return Outcome{}, refusef("No replacement was performed: %s would be %d bytes, more than the edit tool's limit of %d bytes (4 MiB). Use the shell to write big files.", a.Path, len(after), MaxFileBytes)
	}
	oldFirst, oldLast := lineAt(current, at), lineAt(current, at+len(oldStr)-1)
	first, last := lineAt(after, at), lineAt(after, at)
	if newStr != "" {
		last = lineAt(after, at+len(newStr)-1)
	}
	text := fmt.Sprintf("Edited %s: replaced old_str (%s) with new_str (%s). Here's the result of running `cat -n` on a snippet of the edited file:\n%sReview the changes; if they are not as expected, edit again or undo.",
		a.Path, lineSpan(oldFirst, oldLast), lineSpan(first, last), snippet(after, first, last))
	if newStr == "" {
		text = fmt.Sprintf("Edited %s: deleted old_str (%s). Here's the result of running `cat -n` on a snippet of the edited file:\n%sReview the changes; if they are not as expected, edit again or undo.",
			a.Path, lineSpan(oldFirst, oldLast), snippet(after, first, last))
	}
	return changed(a.Op, a.Path, current, true, after, text), nil
}

// lineSpan is "line 3" or "lines 3-7".
func lineSpan(first, last int) string {
	if first == last {
		return fmt.Sprintf("line %d", first)
	}
	return fmt.Sprintf("lines %d-%d", first, last)
}

// occurrences counts the occurrences of s in b and returns the offsets of
// the first maxListed. It counts non-overlapping ones, plus an occurrence
// that overlaps the only one, so that a count of 1 means exactly one.
func occurrences(b []byte, s string) (count int, offsets []int) {
	needle := []byte(s)
	for from := 0; from <= len(b); {
		i := bytes.Index(b[from:], needle)
		if i < 0 {
			break
		}
		count++
		if len(offsets) < maxListed {
			offsets = append(offsets, from+i)
		}
		from += i + len(needle)
	}
	if count == 1 {
		if j := bytes.Index(b[offsets[0]+1:], needle); j >= 0 {
			count++
			offsets = append(offsets, offsets[0]+1+j)
		}
	}
	return count, offsets
}

func insert(a catalog.EditArgs, current []byte, exists bool) (Outcome, error) {
	if err := readable(a, current, exists); err != nil {
		return Outcome{}, err
	}
	lines := splitLines(current)
	n := len(lines)
	if a.InsertLine > n {
		return Outcome{}, refusef("insert_line %d is out of range: %s has %s; use a value from 0 (before the first line) to %d (after the last line).", a.InsertLine, a.Path, plural(n, "line"), n)
	}
	eol, text := "\n", a.NewStr
	if isCRLF(current) {
		eol = "\r\n"
		if !strings.Contains(text, "\r") {
			text = toCRLF(text)
		}
	}
	at := 0
	for _, l := range lines[:a.InsertLine] {
		at += len(l)
	}
	var prefix string
	if a.InsertLine == n && n > 0 && current[len(current)-1] != '\n' {
		// After a last line without a newline: end that line, and keep the
		// file without a final newline unless new_str ends with one.
		prefix = eol
	} else if !strings.HasSuffix(text, "\n") {
		text += eol
	}
	after := make([]byte, 0, len(current)+len(prefix)+len(text))
	after = append(after, current[:at]...)
	after = append(after, prefix...)
	after = append(after, text...)
	after = append(after, current[at:]...)
	if len(after) > MaxFileBytes {
		return Outcome{}, refusef("Nothing was inserted: %s would be %d bytes, more than the edit tool's limit of %d bytes (4 MiB). Use the shell to write big files.", a.Path, len(after), MaxFileBytes)
	}
	start := at + len(prefix)
	first, last := lineAt(after, start), lineAt(after, start+len(text)-1)
	where := fmt.Sprintf("after line %d", a.InsertLine)
	if a.InsertLine == 0 {
		where = "at the top"
	}
	msg := fmt.Sprintf("Inserted %s %s of %s (now %s). Here's the result of running `cat -n` on a snippet of the edited file:\n%sReview the changes (indentation, no duplicated lines); if they are not as expected, edit again or undo.",
		plural(last-first+1, "line"), where, a.Path, lineSpan(first, last), snippet(after, first, last))
	return changed(a.Op, a.Path, current, true, after, msg), nil
}

// Undo undoes the last edit of path: current is the file's content now,
// previous its content before that edit (prevExisted=false: that edit
// created the file, which is then to be removed: Outcome.Remove). current
// is nil or empty when the file is gone since.
func Undo(path string, current, previous []byte, prevExisted bool) (Outcome, error) {
	if err := CheckPath(catalog.EditUndo, path); err != nil {
		return Outcome{}, err
	}
	if !prevExisted {
		diff, truncated := capDiff(unifiedLabels(path, "/dev/null", current, nil))
		return Outcome{
			Changed: true,
			Remove:  true,
			Text:    fmt.Sprintf("Undid the last edit of %s, which had created it: the file is to be removed.", path),
			Result: catalog.EditResult{Op: catalog.EditUndo, Path: path, Changed: true, Diff: diff, DiffTruncated: truncated,
				SHA256Before: digest(current)},
		}, nil
	}
	if bytes.Equal(current, previous) {
		sum := digest(current)
		return Outcome{
			Text:   fmt.Sprintf("%s already has the content it had before its last edit; nothing was undone.", path),
			Result: catalog.EditResult{Op: catalog.EditUndo, Path: path, SHA256Before: sum, SHA256After: sum},
		}, nil
	}
	text := fmt.Sprintf("Undid the last edit of %s: it has its content from before that edit again (%s).", path, plural(lineCount(previous), "line"))
	if !IsBinary(previous) {
		first, last := changedLines(current, previous)
		text += " Here's the result of running `cat -n` on a snippet of the restored region:\n" + snippet(previous, first, last)
	}
	return changed(catalog.EditUndo, path, current, true, previous, text), nil
}

// changedLines is the span of after's lines (1-based) that differ from
// before: the lines between their common leading and trailing lines.
func changedLines(before, after []byte) (first, last int) {
	a, b := splitLines(before), splitLines(after)
	p := 0
	for p < len(a) && p < len(b) && bytes.Equal(a[p], b[p]) {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && bytes.Equal(a[len(a)-1-s], b[len(b)-1-s]) {
		s++
	}
	first, last = p+1, len(b)-s
	if last < first { // lines only removed: show around where they were
		last = first
	}
	return first, last
}
