//go:build unix

package rundir_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/rundir"
)

// setup returns a root and its Roots, plus a canary file outside it that
// no operation may change.
func setup(t *testing.T) (string, *rundir.Roots, string) {
	t.Helper()
	base := t.TempDir()
	root := filepath.Join(base, "runs")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	canary := filepath.Join(base, "canary")
	if err := os.WriteFile(canary, []byte("canary\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	roots, err := rundir.NewRoots(root)
	if err != nil {
		t.Fatal(err)
	}
	return root, roots, canary
}

func checkCanary(t *testing.T, canary string) {
	t.Helper()
	b, err := os.ReadFile(canary)
	if err != nil || string(b) != "canary\n" {
		t.Fatalf("canary changed: %q %v", b, err)
	}
}

func refused(t *testing.T, err error, want string) {
	t.Helper()
	if !errors.Is(err, rundir.ErrRefused) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want a refusal saying %q, got %v", want, err)
	}
}

func TestNewDirIsMadeAndMarked(t *testing.T) {
	root, roots, _ := setup(t)
	dir := filepath.Join(root, "a", "b", "r1")
	d, err := rundir.Open(roots, dir, "r1", true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("run dir: %v %v", fi, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, rundir.Marker))
	var m struct {
		RunID string `json:"run_id"`
	}
	if err != nil || json.Unmarshal(b, &m) != nil || m.RunID != "r1" {
		t.Fatalf("marker %q %v", b, err)
	}
	// The same run opens it again; another run is refused.
	d2, err := rundir.Open(roots, dir, "r1", true)
	if err != nil {
		t.Fatal(err)
	}
	d2.Close()
	_, err = rundir.Open(roots, dir, "r2", true)
	refused(t, err, "is the directory of run r1")
	// Without create, a missing one is not made.
	if _, err := rundir.Open(roots, filepath.Join(root, "nope"), "r3", false); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing without create: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a run dir was made without create")
	}
}

// TestConcurrentClaims: the projector and sandboxd claim a new run's dir
// at the same moment; both succeed for the same run, and of two runs
// naming one dir exactly one does. The marker is never seen half written.
func TestConcurrentClaims(t *testing.T) {
	root, roots, _ := setup(t)
	for i := range 50 {
		dir := filepath.Join(root, "same", string(rune('a'+i%26))+strings.Repeat("x", i/26))
		errs := make(chan error, 8)
		for range 4 {
			go func() {
				d, err := rundir.Open(roots, dir, "r1", true)
				if err == nil {
					d.Close()
				}
				errs <- err
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatalf("claim %d of the same run: %v", i, err)
			}
		}
		other := filepath.Join(root, "two", string(rune('a'+i%26))+strings.Repeat("x", i/26))
		for _, run := range []string{"a", "b", "c", "d"} {
			go func() {
				d, err := rundir.Open(roots, other, run, true)
				if err == nil {
					d.Close()
				}
				errs <- err
			}()
		}
		ok := 0
		for range 4 {
			if err := <-errs; err == nil {
				ok++
			} else if !errors.Is(err, rundir.ErrRefused) || !strings.Contains(err.Error(), "is the directory of run") {
				t.Fatalf("claim %d by another run: %v", i, err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d runs claimed one dir", ok)
		}
	}
}

func TestEmptyDirIsClaimedFullOneRefused(t *testing.T) {
	root, roots, _ := setup(t)
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := rundir.Open(roots, empty, "r1", true)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if fi, _ := os.Stat(empty); fi.Mode().Perm() != 0o700 {
		t.Fatalf("claimed dir mode %v", fi.Mode())
	}
	full := filepath.Join(root, "ssh")
	if err := os.Mkdir(full, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "authorized_keys"), []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = rundir.Open(roots, full, "r2", true)
	refused(t, err, "not empty and VERA did not make it")
	if _, err := os.Stat(filepath.Join(full, rundir.Marker)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a full directory got a marker")
	}
}

func TestLinksFilesAndForeignPathsAreRefused(t *testing.T) {
	root, roots, canary := setup(t)
	outside := filepath.Dir(canary)
	// The run dir is a link (to a directory outside, or dangling).
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	_, err := rundir.Open(roots, filepath.Join(root, "link"), "r1", true)
	refused(t, err, "symbolic link")
	if err := os.Symlink(filepath.Join(outside, "made-by-vera"), filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	_, err = rundir.Open(roots, filepath.Join(root, "dangling"), "r1", true)
	refused(t, err, "symbolic link")
	if _, err := os.Lstat(filepath.Join(outside, "made-by-vera")); err == nil {
		t.Fatal("a dangling link's target was made")
	}
	// A link on the way.
	_, err = rundir.Open(roots, filepath.Join(root, "link", "r1"), "r1", true)
	refused(t, err, "symbolic link")
	// A file.
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = rundir.Open(roots, filepath.Join(root, "file"), "r1", true)
	refused(t, err, "not a directory")
	// Outside every root, relative, reserved names.
	_, err = rundir.Open(roots, filepath.Join(outside, "x"), "r1", true)
	refused(t, err, "outside the directories runs may use")
	_, err = rundir.Open(roots, "runs/x", "r1", true)
	refused(t, err, "not an absolute path")
	_, err = rundir.Open(roots, filepath.Join(root, ".vera-pool", "tok"), "r1", true)
	refused(t, err, "reserves")
	checkCanary(t, canary)
}

func TestRunDirInsideAnotherRunIsRefused(t *testing.T) {
	root, roots, _ := setup(t)
	a, err := rundir.Open(roots, filepath.Join(root, "a"), "a", true)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	work, wf, err := a.Work(true, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	wf.Close()
	// What the sandbox of run a could make in its /work.
	if err := os.MkdirAll(filepath.Join(work, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(work, "x"), filepath.Join(work, "y", "z"), filepath.Join(root, "a", "sub")} {
		_, err := rundir.Open(roots, p, "b", true)
		refused(t, err, "lies inside run dir")
	}
	// A marker-named entry in a directory makes it no way through,
	// whoever made it.
	if err := os.WriteFile(filepath.Join(work, "x", rundir.Marker), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A root that is itself a run dir: the run dir is the root.
	rr, err := rundir.NewRoots(filepath.Join(root, "a"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := rundir.Open(rr, filepath.Join(root, "a"), "a", true)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	_, err = rundir.Open(rr, filepath.Join(root, "a", "work", "q"), "q", true)
	refused(t, err, "lies inside run dir")
}

func TestForeignOwnersAndWritableAncestors(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make files of another user")
	}
	root, roots, _ := setup(t)
	other := filepath.Join(root, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(other, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := rundir.Open(roots, other, "r1", true) // an empty dir of another user
	refused(t, err, "belongs to uid 65534")
	_, err = rundir.Open(roots, filepath.Join(other, "r1"), "r1", true)
	refused(t, err, "belongs to uid 65534")
	open := filepath.Join(root, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err = rundir.Open(roots, filepath.Join(open, "r1"), "r1", true)
	refused(t, err, "may be written by any user")
	if err := os.Chmod(open, os.ModeSticky|0o777); err != nil { // sticky: others cannot replace VERA's entries
		t.Fatal(err)
	}
	d, err := rundir.Open(roots, filepath.Join(open, "r1"), "r1", true)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
}

func TestOpenFileNeverFollowsOrBlocks(t *testing.T) {
	root, roots, canary := setup(t)
	d, err := rundir.Open(roots, filepath.Join(root, "r"), "r", true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	dir := d.Path()
	if err := os.Symlink(canary, filepath.Join(dir, "notes.md")); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(filepath.Dir(canary), "created")
	if err := os.Symlink(dangling, filepath.Join(dir, "trace.jsonl")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "session.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"notes.md", "trace.jsonl", "session.log"} {
		for _, flag := range []int{os.O_WRONLY | os.O_CREATE, os.O_RDONLY, os.O_RDWR | os.O_TRUNC} {
			done := make(chan error, 1)
			go func() {
				f, err := d.OpenFile(name, flag, 0o600)
				if f != nil {
					f.Close()
				}
				done <- err
			}()
			select {
			case err := <-done:
				if !errors.Is(err, rundir.ErrRefused) {
					t.Fatalf("open %s (flag %#x): want a refusal, got %v", name, flag, err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("open %s (flag %#x) blocked", name, flag)
			}
		}
	}
	checkCanary(t, canary)
	if _, err := os.Lstat(dangling); err == nil {
		t.Fatal("a dangling link's target was created")
	}
	for _, bad := range []string{"", ".", "..", "a/b", "../canary"} {
		if _, err := d.OpenFile(bad, os.O_RDONLY, 0); !errors.Is(err, rundir.ErrRefused) {
			t.Fatalf("name %q: %v", bad, err)
		}
	}
	// A regular file of its own is opened, written and renamed.
	f, tmp, err := d.CreateTemp("x", 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("hello\n")
	f.Close()
	if err := d.Rename(tmp, "x"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "x")); string(b) != "hello\n" {
		t.Fatalf("x holds %q", b)
	}
}

// TestAnotherUserReadsNothing: a run's files are 0600 in a 0700
// directory; another local user (uid 65534, run as a real process) can
// neither read them nor list the run dir, even with every directory
// above it open to all.
func TestAnotherUserReadsNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user (uid 65534)")
	}
	base, err := os.MkdirTemp("", "vera-rundir-other-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	roots, err := rundir.NewRoots(base)
	if err != nil {
		t.Fatal(err)
	}
	d, err := rundir.Open(roots, filepath.Join(base, "r"), "r", true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	f, err := d.OpenFile("notes.md", os.O_WRONLY|os.O_CREATE, rundir.FileMode)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("private finding\n")
	f.Close()
	for _, args := range [][]string{{"cat", filepath.Join(d.Path(), "notes.md")}, {"ls", d.Path()}} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Permission denied") {
			t.Errorf("%v as uid 65534: %v\n%s", args, err, out)
		}
	}
}

func TestWorkIsHandedOverOnlyWhenVERAsOwn(t *testing.T) {
	root, roots, _ := setup(t)
	d, err := rundir.Open(roots, filepath.Join(root, "r"), "r", true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		uid, gid = 65532, 65532
	}
	path, f, err := d.Work(true, uid, gid)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if path != filepath.Join(d.Path(), rundir.WorkName) {
		t.Fatalf("work path %s", path)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.IsDir() {
		t.Fatalf("work: %v %v", fi, err)
	}
	if uid >= 0 && int(fi.Sys().(*syscall.Stat_t).Uid) != uid {
		t.Fatalf("work dir not handed to %d", uid)
	}
	// A link in its place is refused (the run dir is VERA's, but the
	// check holds anyway).
	r2, err := rundir.Open(roots, filepath.Join(root, "r2"), "r2", true)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := os.Symlink("/", filepath.Join(r2.Path(), rundir.WorkName)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r2.Work(true, uid, gid); !errors.Is(err, rundir.ErrRefused) {
		t.Fatalf("work as a link: %v", err)
	}
}

func TestUsedBytesStaysInTheTree(t *testing.T) {
	root, roots, _ := setup(t)
	d, err := rundir.Open(roots, filepath.Join(root, "r"), "r", true)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	work, wf, err := d.Work(true, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer wf.Close()
	base, err := rundir.UsedBytes(wf)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "a"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link to a big tree outside counts for the link only.
	big := t.TempDir()
	if err := os.WriteFile(filepath.Join(big, "big"), make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(big, filepath.Join(work, "out")); err != nil {
		t.Fatal(err)
	}
	used, err := rundir.UsedBytes(wf)
	if err != nil {
		t.Fatal(err)
	}
	if got := used - base; got < 1<<20 || got > 2<<20 {
		t.Fatalf("used grew by %d bytes, want about 1 MiB", got)
	}
	// Deeper than MaxDepth: what was counted, and ErrTooDeep.
	p := work
	for range rundir.MaxDepth + 2 {
		p = filepath.Join(p, "d")
		if err := os.Mkdir(p, 0o755); err != nil {
			// PATH_MAX: go on from the deepest directory by its descriptor
			// is not possible with os.Mkdir; stop making it deeper here.
			t.Skipf("cannot make a tree deeper than %d here: %v", rundir.MaxDepth, err)
		}
	}
	if _, err := rundir.UsedBytes(wf); !errors.Is(err, rundir.ErrTooDeep) {
		t.Fatalf("a tree deeper than MaxDepth: %v", err)
	}
}
