package projector

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/rundir"
)

// The projector writes only into run dirs VERA may use, through their
// descriptors: a link, a FIFO or a forged state in a run's tree changes
// no file outside it and blocks nothing. Each test below is one of the
// attacks of issue 25 (the projector followed links in /work as root).

// canaryFile makes a file outside every root that nothing may change.
func canaryFile(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "canary")
	if err := os.WriteFile(p, []byte("canary\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func canaryIntact(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil || string(b) != "canary\n" {
		t.Fatalf("canary %s changed: %q %v", p, b, err)
	}
}

// handleAll hands every stored event of run to f, in stream order, and
// fails the test if one takes longer than limit (a FIFO would block).
func handleAll(t *testing.T, f *Files, b *bus.Bus, run string, limit time.Duration) {
	t.Helper()
	ctx := context.Background()
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: run}) {
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- f.Handle(ctx, &bus.Message{Event: rec.Event, Raw: rec.Raw, Sequence: rec.Sequence}) }()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("seq %d (%s): %v", rec.Sequence, rec.Event.Type, err)
			}
		case <-time.After(limit):
			t.Fatalf("seq %d (%s): the projector blocked", rec.Sequence, rec.Event.Type)
		}
	}
}

func TestLinksInTheRunDirAreNotFollowed(t *testing.T) {
	_, b := bustest.New(t)
	root := t.TempDir()
	canary := canaryFile(t)
	dangling := filepath.Join(filepath.Dir(canary), "made-by-projector")
	dir := filepath.Join(root, "run-link")
	evs := synthRun(t, "run-link", dir, 4)
	publish(t, b, evs)
	// The run dir exists (VERA made it), and something put links and a
	// FIFO where the projector's files go, plus a forged projection state
	// of the old layout that claims huge sizes.
	d, err := rundir.Open(mustRoots(t, root), dir, "run-link", true)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	for name, target := range map[string]string{FileNotes: canary, FileEvidence: canary, FileTrace: dangling} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, FileSession), 0o644); err != nil {
		t.Fatal(err)
	}
	forged, _ := json.Marshal(map[string]any{"run_id": "run-link", "last_seq": 1, "sizes": map[string]int64{FileNotes: 1 << 40}})
	if err := os.WriteFile(filepath.Join(dir, ".vera-projection.json"), forged, 0o644); err != nil {
		t.Fatal(err)
	}
	f := mustFiles(t, b, FilesConfig{Roots: []string{root}, StateDir: t.TempDir(), Logger: bustest.Logger(t)})
	handleAll(t, f, b, "run-link", 10*time.Second)
	canaryIntact(t, canary)
	if _, err := os.Lstat(dangling); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the projector created a dangling link's target: %v", err)
	}
	// The links and the FIFO were replaced by the run's own files.
	for _, name := range []string{FileNotes, FileEvidence, FileTrace, FileSession} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("%s: %v %v", name, fi, err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v; want no access for group and others", name, fi.Mode())
		}
	}
	sameFiles(t, "after links", Render(evs), readFiles(t, dir))
}

func TestWorkDirsOutsideTheRootsAreNotProjected(t *testing.T) {
	_, b := bustest.New(t)
	root := t.TempDir()
	home := t.TempDir() // a fake home with a private directory in it
	ssh := filepath.Join(home, ".ssh")
	if err := os.Mkdir(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ssh, "authorized_keys"), []byte("ssh-ed25519 AAAA owner\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Under the roots, but a directory VERA did not make and not empty.
	notEmpty := filepath.Join(root, "dotfiles")
	if err := os.Mkdir(notEmpty, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notEmpty, "x"), []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fileDir := filepath.Join(root, "a-file")
	if err := os.WriteFile(fileDir, []byte("file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{"run-ssh": ssh, "run-outside": filepath.Join(home, "new"), "run-full": notEmpty, "run-file": fileDir}
	for run, dir := range cases {
		publish(t, b, synthRun(t, run, dir, 2))
	}
	f := mustFiles(t, b, FilesConfig{Roots: []string{root}, StateDir: t.TempDir(), Logger: bustest.Logger(t)})
	for run := range cases {
		handleAll(t, f, b, run, 10*time.Second)
	}
	if f.Refused() != int64(len(cases)) {
		t.Fatalf("%d runs refused, want %d", f.Refused(), len(cases))
	}
	entries, _ := os.ReadDir(ssh)
	if len(entries) != 1 {
		t.Fatalf("~/.ssh holds %d entries, want only authorized_keys", len(entries))
	}
	if b, _ := os.ReadFile(filepath.Join(ssh, "authorized_keys")); string(b) != "ssh-ed25519 AAAA owner\n" {
		t.Fatalf("authorized_keys changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(home, "new")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the projector made a directory outside its roots")
	}
	if entries, _ := os.ReadDir(notEmpty); len(entries) != 1 {
		t.Fatalf("a directory VERA did not make got %d entries", len(entries))
	}
	if b, _ := os.ReadFile(fileDir); string(b) != "file\n" {
		t.Fatalf("a file named as a work dir changed: %q", b)
	}
}

func TestProjectionStateIsNotKeptInTheRunDir(t *testing.T) {
	_, b := bustest.New(t)
	root, state := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "run-st")
	evs := synthRun(t, "run-st", dir, 3)
	publish(t, b, evs)
	f := mustFiles(t, b, FilesConfig{Roots: []string{root}, StateDir: state})
	handleAll(t, f, b, "run-st", 10*time.Second)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		switch e.Name() {
		case rundir.Marker:
		default:
			if _, ok := Render(evs)[e.Name()]; !ok {
				t.Errorf("the run dir holds %s, which is not a projected file", e.Name())
			}
		}
	}
	if _, err := os.Stat(filepath.Join(state, "run-st.json")); err != nil {
		t.Fatalf("no state in the state dir: %v", err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("run dir mode %v, want 0700", fi.Mode())
	}
}

func mustRoots(t *testing.T, dirs ...string) *rundir.Roots {
	t.Helper()
	r, err := rundir.NewRoots(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestOutsideEventsAreCappedInTheTrace (issue 26): an outside tool's
// events grew a run's trace.jsonl from 60 KB to 37 MB. A run's trace now
// holds at most ExtTraceCap bytes of outside events; VERA's own events
// are all there, the live projection, a rebuild and Render agree byte for
// byte, and the outside events past the cap stay on the stream.
func TestOutsideEventsAreCappedInTheTrace(t *testing.T) {
	_, b := bustest.New(t)
	root := t.TempDir()
	dir := filepath.Join(root, "run-ext")
	evs := synthRun(t, "run-ext", dir, 3)
	blob := strings.Repeat("x", 10<<10)
	s := &bustest.Synth{TB: t, RunID: "run-ext", T0: time.Date(2026, 11, 21, 13, 0, 0, 0, time.UTC)}
	for i := 0; i < 200; i++ { // about 2 MiB of outside events
		s.Add("tool", flood{I: i, Pad: blob})
	}
	s.Add("agent", catalog.NotesAppended{Text: "after the flood", Step: 9}) // VERA's own, after it
	evs = append(evs, s.Evs...)
	publish(t, b, evs)
	f := mustFiles(t, b, FilesConfig{Roots: []string{root}, StateDir: t.TempDir()})
	handleAll(t, f, b, "run-ext", 10*time.Second)
	live := readFiles(t, dir)
	sameFiles(t, "live vs Render", Render(evs), live)
	var ext, own int
	for _, line := range bytes.SplitAfter(live[FileTrace], []byte("\n")) {
		switch {
		case bytes.Contains(line, []byte(`"type":"vera.ext.`)):
			ext += len(line)
		case len(line) > 0:
			own++
		}
	}
	wantOwn := 0
	for _, ev := range evs {
		if !strings.HasPrefix(ev.Type, "vera.ext.") {
			wantOwn++
		}
	}
	if ext > ExtTraceCap || ext < ExtTraceCap-(12<<10) || own != wantOwn {
		t.Fatalf("trace.jsonl: %d bytes of outside events (cap %d), %d of VERA's %d events", ext, ExtTraceCap, own, wantOwn)
	}
	rb := filepath.Join(root, "rebuilt")
	if err := f.Rebuild(context.Background(), "run-ext", rb); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "live vs Rebuild", live, readFiles(t, rb))
}

// flood is an outside event type of a test tool.
type flood struct {
	I   int    `json:"i"`
	Pad string `json:"pad"`
}

func (flood) EventType() string { return "vera.ext.flood" }
