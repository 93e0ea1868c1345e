package sandboxd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/sandboxd/edit"
)

// The file tool (tool edit). sandboxd runs it in the run's container, as
// the sandbox user, never on the host: it reads the file with a helper
// exec (editReadScript, which resolves symbolic links inside the
// container, so that a link to /work/notes.md or into /input is refused
// like the path itself), computes the edit with package edit, and writes
// the result back with another helper exec (editWriteScript). The
// container's own permissions and read-only mounts apply, as they do to
// the shell. An edit is a request like a shell command: its
// vera.tool.started is stored before the file is touched, so that it runs
// at most once; cut off by a crash it is reported interrupted, not run
// again.
//
// Undo: before an edit changes a file, the file's content (or its absence)
// is pushed on the file's undo stack, kept in the daemon's spool
// (SpoolDir/<run>/edits), which survives a daemon restart; undo pops it.

// editReadScript prints, for $1: the resolved path, a NUL, then a kind
// (file, dir, missing, other), a NUL, the size, a NUL, and, for a file no
// bigger than $2 bytes, its content; for a directory, a listing two levels
// deep of what is not hidden.
const editReadScript = `p=$(realpath -m -- "$1" 2>/dev/null) || p=$1
printf '%s\0' "$p"
if [ -d "$p" ]; then
  printf 'dir\0%s\0' 0
  find "$p" -maxdepth 2 -not -path '*/.*' 2>/dev/null | LC_ALL=C sort | head -n 500
elif [ -f "$p" ]; then
  s=$(stat -c %s -- "$p") || exit 3
  printf 'file\0%s\0' "$s"
  [ "$s" -le "$2" ] && exec cat -- "$p"
  exit 0
elif [ -e "$p" ]; then
  printf 'other\0%s\0' 0
else
  printf 'missing\0%s\0' 0
fi`

// editWriteScript writes stdin to $1 (creating its directory), or removes
// $1 when $2 is "remove".
const editWriteScript = `if [ "$2" = remove ]; then exec rm -f -- "$1"; fi
d=$(dirname -- "$1") && mkdir -p -- "$d" && exec cat > "$1"`

// undoEntry is one saved state of a file, before an edit changed it.
type undoEntry struct {
	Existed bool   `json:"existed"`
	Content []byte `json:"content"`
}

// handleEdit runs one edit request (after claim: at most once).
func (d *Daemon) handleEdit(ctx context.Context, rs *runState, cause bus.Event, req catalog.ToolRequested, token, spool string) error {
	log := d.log.With("run", rs.id, "request", req.RequestID)
	finish := func(tf catalog.ToolFinished) error { return d.finish(ctx, rs, cause, req, tf) }
	refuse := func(a catalog.EditArgs, msg string) error {
		log.Info("edit refused", "op", a.Op, "path", a.Path, "reason", msg)
		return finish(catalog.ToolFinished{ExitCode: 1, Stderr: textOutput(msg + "\n"), Edit: &catalog.EditResult{Op: a.Op, Path: a.Path}})
	}
	if req.Edit == nil {
		return finish(catalog.ToolFinished{ExitCode: -1, Error: "an edit request without its edit (the edit field)"})
	}
	a := *req.Edit
	if err := edit.Validate(a); err != nil {
		var r *edit.Refusal
		if errors.As(err, &r) {
			return refuse(a, r.Msg)
		}
		return finish(catalog.ToolFinished{ExitCode: -1, Error: err.Error()})
	}
	if rs.isEnded() {
		return finish(catalog.ToolFinished{ExitCode: -1, Error: "the run has ended; the edit was not made"})
	}
	if _, _, err := d.admit(rs); err != nil {
		return finish(catalog.ToolFinished{ExitCode: -1, Error: fmt.Sprintf("%v; no container was created", err)})
	}
	b, err := d.ensureBox(ctx, rs, roleOf(req.Requester))
	if err != nil {
		return finish(catalog.ToolFinished{ExitCode: -1, Error: fmt.Sprintf("sandbox unavailable: %v", err)})
	}
	user := d.cfg.User
	if d.labFor(rs) {
		user = "0:0"
	}
	if err := d.recordStarted(ctx, rs, cause, req.RequestID, token, b, "", d.cfg.Clock.Now()); err != nil {
		return fmt.Errorf("record tool.started of %s (the edit was not made): %w", req.RequestID, err)
	}
	start := time.Now()

	ectx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	f, err := d.readForEdit(ectx, b, user, a.Path)
	if err != nil {
		return finish(catalog.ToolFinished{ExitCode: -1, Error: "read " + a.Path + ": " + err.Error(), DurationMS: time.Since(start).Milliseconds()})
	}
	if f.resolved != a.Path {
		// A symbolic link: the target is what is read and written.
		if err := edit.CheckPath(a.Op, f.resolved); err != nil {
			return refuse(a, fmt.Sprintf("%s resolves to %s: %v", a.Path, f.resolved, err))
		}
	}
	switch f.kind {
	case "dir":
		if a.Op == catalog.EditView {
			text := fmt.Sprintf("%s is a directory. Its files and directories up to 2 levels deep, hidden ones left out:\n%s", a.Path, f.content)
			return d.finishEdit(ctx, rs, cause, req, spool, token, start, text, &catalog.EditResult{Op: a.Op, Path: a.Path})
		}
		return refuse(a, a.Path+" is a directory; the edit tool changes files. Name a file in it.")
	case "other":
		return refuse(a, a.Path+" is not a regular file (a device, socket or fifo).")
	}
	if err := edit.CheckFileSize(a, f.size); err != nil {
		return refuse(a, err.Error())
	}
	var out edit.Outcome
	undoPath := d.undoPath(rs.id, f.resolved)
	if a.Op == catalog.EditUndo {
		stack, err := readUndo(undoPath)
		if err != nil {
			return finish(catalog.ToolFinished{ExitCode: -1, Error: "undo history of " + a.Path + ": " + err.Error()})
		}
		if len(stack) == 0 {
			return refuse(a, "No edit of "+a.Path+" to undo (undo reverts edits made with the edit tool, one per call, not shell commands).")
		}
		last := stack[len(stack)-1]
		if out, err = edit.Undo(f.resolved, f.content, last.Content, last.Existed); err != nil {
			return d.editErr(a, err, refuse, finish)
		}
		if err := writeUndo(undoPath, stack[:len(stack)-1]); err != nil {
			return finish(catalog.ToolFinished{ExitCode: -1, Error: "undo history of " + a.Path + ": " + err.Error()})
		}
	} else {
		args := a
		args.Path = f.resolved
		if out, err = edit.Apply(args, f.content, f.kind == "file"); err != nil {
			return d.editErr(a, err, refuse, finish)
		}
		if out.Changed {
			stack, err := readUndo(undoPath)
			if err == nil {
				err = writeUndo(undoPath, append(stack, undoEntry{Existed: f.kind == "file", Content: f.content}))
			}
			if err != nil {
				return finish(catalog.ToolFinished{ExitCode: -1, Error: "undo history of " + a.Path + ": " + err.Error()})
			}
		}
	}
	if out.Changed {
		if lim := d.workLimit(rs); lim > 0 && !out.Remove {
			if used, err := d.workUsed(rs); err == nil && used-f.size+int64(len(out.Content)) > lim {
				return refuse(a, fmt.Sprintf("the edit would take /work over its disk limit (%s used of %s); remove files first.", mib(used), mib(lim)))
			}
		}
		if err := d.writeForEdit(ectx, b, user, f.resolved, out.Content, out.Remove); err != nil {
			return finish(catalog.ToolFinished{ExitCode: 1, Stderr: textOutput("the edit could not be written: " + err.Error() + "\n"),
				Edit: &catalog.EditResult{Op: a.Op, Path: a.Path}, DurationMS: time.Since(start).Milliseconds()})
		}
	}
	res := out.Result
	res.Path = a.Path
	log.Info("edit made", "op", a.Op, "path", a.Path, "changed", out.Changed)
	return d.finishEdit(ctx, rs, cause, req, spool, token, start, out.Text, &res)
}

// editErr answers an edit the package refused (exit 1) or failed.
func (d *Daemon) editErr(a catalog.EditArgs, err error, refuse func(catalog.EditArgs, string) error, finish func(catalog.ToolFinished) error) error {
	var r *edit.Refusal
	if errors.As(err, &r) {
		return refuse(a, r.Msg)
	}
	return finish(catalog.ToolFinished{ExitCode: -1, Error: err.Error()})
}

// finishEdit publishes an edit's result: its text on stdout (a blob when
// long, like a command's output).
func (d *Daemon) finishEdit(ctx context.Context, rs *runState, cause bus.Event, req catalog.ToolRequested, spool, token string, start time.Time, text string, res *catalog.EditResult) error {
	if err := os.MkdirAll(spool, 0o700); err != nil {
		return d.finish(ctx, rs, cause, req, catalog.ToolFinished{ExitCode: -1, Error: "spool: " + err.Error()})
	}
	c := newCapture(filepath.Join(spool, token+".stdout"), d.cfg.HeadBytes, d.cfg.TailBytes, d.cfg.SpoolMax)
	_, _ = c.Write([]byte(text))
	_ = c.close()
	tf := catalog.ToolFinished{ExitCode: 0, DurationMS: time.Since(start).Milliseconds(), Stdout: d.outputOf(ctx, c), Edit: res}
	return d.finish(ctx, rs, cause, req, tf)
}

// textOutput is a short text as an inline output.
func textOutput(s string) catalog.Output {
	c := newCapture("", 64<<10, 0, 0)
	_, _ = c.Write([]byte(s))
	return c.output(nil)
}

// editFile is a file as the read helper saw it.
type editFile struct {
	resolved string
	kind     string // file, dir, missing, other
	size     int64
	content  []byte
}

func (d *Daemon) readForEdit(ctx context.Context, b *box, user, path string) (editFile, error) {
	stdout, stderr, code, err := d.execIO(ctx, b.id, user, nil, "sh", "-c", editReadScript, "vera-edit", path, strconv.Itoa(edit.MaxFileBytes))
	if err != nil {
		return editFile{}, err
	}
	if code != 0 {
		return editFile{}, fmt.Errorf("exit %d: %s", code, strings.TrimSpace(string(stderr)))
	}
	parts := bytes.SplitN(stdout, []byte{0}, 4)
	if len(parts) < 4 {
		return editFile{}, fmt.Errorf("unexpected answer from the container (%d bytes)", len(stdout))
	}
	size, _ := strconv.ParseInt(string(parts[2]), 10, 64)
	f := editFile{resolved: string(parts[0]), kind: string(parts[1]), size: size, content: parts[3]}
	if f.kind == "file" && size <= edit.MaxFileBytes && int64(len(f.content)) != size {
		return editFile{}, fmt.Errorf("%s changed while it was read (%d bytes, then %d)", path, size, len(f.content))
	}
	return f, nil
}

func (d *Daemon) writeForEdit(ctx context.Context, b *box, user, path string, content []byte, remove bool) error {
	mode := "write"
	if remove {
		mode = "remove"
	}
	_, stderr, code, err := d.execIO(ctx, b.id, user, content, "sh", "-c", editWriteScript, "vera-edit", path, mode)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("%s", strings.TrimSpace(string(stderr)))
	}
	return nil
}

// undoPath is where a file's undo stack is kept.
func (d *Daemon) undoPath(runID, path string) string {
	sum := sha256.Sum256([]byte(path))
	return filepath.Join(d.cfg.SpoolDir, runID, "edits", hex.EncodeToString(sum[:12])+".json")
}

func readUndo(path string) ([]undoEntry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s []undoEntry
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("undo history %s: %w", path, err)
	}
	return s, nil
}

// maxUndo bounds a file's undo stack.
const maxUndo = 20

func writeUndo(path string, s []undoEntry) error {
	if len(s) > maxUndo {
		s = s[len(s)-maxUndo:]
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
