package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/rundir"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// Issue 25: the model's commands reached host files through VERA's own
// host code. These tests run the whole of `vera up` (as root in CI) with
// a scripted model whose commands attack the host, aimed only at canary
// files in a temporary directory, and check that nothing outside the run's
// own directory changed. The hostile commands run only inside the sandbox
// container, through sandboxd.

// canaries makes a directory of canary files and returns it with the
// path of one of them.
func canaries(t *testing.T) (dir, canary string) {
	t.Helper()
	dir = t.TempDir()
	canary = filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(canary, []byte("canary\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, canary
}

// dirSnapshot describes every entry of a tree: path, mode, owner, size
// and content digest of regular files.
func dirSnapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		desc := fmt.Sprintf("%v uid=%d gid=%d size=%d", fi.Mode(), st.Uid, st.Gid, fi.Size())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + string(b)
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for p, d := range before {
		if after[p] != d {
			t.Errorf("%s: %s changed: %q → %q", what, p, d, after[p])
		}
	}
	for p, d := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s: %s appeared (%s)", what, p, d)
		}
	}
}

// spoolBytes is what the sandbox daemon's spool holds.
func spoolBytes(t *testing.T, data string) int64 {
	t.Helper()
	var n int64
	_ = filepath.WalkDir(filepath.Join(data, "sandboxd"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

var submittedRE = regexp.MustCompile(`run (\S+) submitted`)

// TestHostileModelReachesNoHostFile: links and FIFOs in /work named like
// every file VERA writes, a dangling link, a forged projection state in
// the old layout's place, 20 MiB into the shell-state mount — then a
// notes_append, so that the projector writes. Before: the projector wrote
// the canary as root and truncated it at the run's end, a FIFO froze the
// projector for every run, and the state mount took the 20 MiB on the
// host. After: the canary, the dangling link's target and the spool are
// untouched, the run's files are regular files of VERA's beside /work, and
// the next, ordinary run gets its files.
func TestHostileModelReachesNoHostFile(t *testing.T) {
	dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	canaryDir, canary := canaries(t)
	dangling := filepath.Join(canaryDir, "cron.d-vera")
	before := dirSnapshot(t, canaryDir)
	names := []string{"notes.md", "evidence.jsonl", "move_ledger.jsonl", "query_ledger.jsonl", "trace.jsonl", "container.log", "container_events.log", "session.log"}
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	// Whatever is at a name VERA's files had (the old layout's /work held
	// them) is replaced: by a link to the canary, a dangling link, a FIFO.
	// First the files the run has not written yet (notes.md before the
	// first note: the old projector opened the link, cut the canary to 0
	// and wrote the note into it), then all of them.
	put := `import os
def put(n, target):
    p = '/work/' + n
    try: os.remove(p)
    except OSError: pass
    os.symlink(target, p)
`
	first := `python3 -c "` + put + `put('notes.md', '` + canary + `')
put('query_ledger.jsonl', '` + dangling + `')
print('linked')"`
	links := `python3 -c "` + put + `for n in [` + strings.Join(quoted, ",") + `]:
    put(n, '` + canary + `')
print('relinked')"`
	fifos := `python3 -c "import os
for n in ['trace.jsonl', 'session.log']:
    os.remove('/work/' + n); os.mkfifo('/work/' + n)
try: os.remove('/work/.vera-projection.json')
except OSError: pass
open('/work/.vera-projection.json','w').write('{\"run_id\":\"x\",\"last_seq\":1,\"sizes\":{\"notes.md\":1099511627776,\"evidence.jsonl\":1099511627776}}')
print('fifos')"`
	fill := `dd if=/dev/zero of=/.vera-sandbox/state/fill bs=1M count=20 2>&1; ls -la /.vera-sandbox/state 2>&1 | head -3; echo done`
	hostile := map[int]string{
		1: turn(jsonAction("shell", map[string]any{"cmd": first}), "none", "continuing"),
		2: turn(`{"tool":"notes_append","args":{"text":"pwned through the projector"}}`, "none", "continuing"),
		3: turn(jsonAction("shell", map[string]any{"cmd": links}), "none", "continuing"),
		4: turn(jsonAction("shell", map[string]any{"cmd": fifos}), "none", "continuing"),
		5: turn(jsonAction("shell", map[string]any{"cmd": fill}), "none", "continuing"),
		6: turn(`{"tool":"notes_append","args":{"text":"second note"}}`, "none", "continuing"),
		7: turn(`{"tool":"submit","args":{"answer":"done"}}`, "none", "RESOLVED"),
	}
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(byStep(hostile, "")))
	data := veraDataDir(t)
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "", "--image", img,
		"--network", "none", "--no-verifiers", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	spool0 := spoolBytes(t, data)

	out, errOut, code := runCLIFor(t, 3*time.Minute, "run", "--nats-url", url, "--task", "Attack the host.",
		"--model-base-url", model.URL(), "--model", "scripted", "--no-network")
	m := submittedRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no run submitted (exit %d)\n%s\n%s", code, out, errOut)
	}
	runID := m[1]
	t.Cleanup(func() { removeContainers(t, runID) })
	if code != 0 {
		t.Fatalf("hostile run: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "linked") || !strings.Contains(out, "relinked") || !strings.Contains(out, "fifos") {
		t.Fatalf("the hostile commands did not run as written:\n%s", out)
	}
	runDir := filepath.Join(data, "runs", runID)
	waitFor(t, "the hostile run's end in session.log", func() bool {
		return strings.Contains(readRegular(filepath.Join(runDir, projector.FileSession)), " run.finished ")
	})
	sameSnapshot(t, "canary dir", before, dirSnapshot(t, canaryDir))
	if _, err := os.Lstat(dangling); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
	// The run's files: regular files of VERA's, 0600, in a 0700 run dir,
	// beside the sandbox's tree, which holds the model's links and FIFOs.
	if fi, err := os.Stat(runDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("run dir %s: %v %v", runDir, fi, err)
	}
	for _, n := range []string{"notes.md", "evidence.jsonl", "trace.jsonl", "session.log"} {
		fi, err := os.Lstat(filepath.Join(runDir, n))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			t.Errorf("%s: %v %v", n, fi, err)
		}
	}
	notes := readRegular(filepath.Join(runDir, "notes.md"))
	if !strings.Contains(notes, "pwned through the projector") || !strings.Contains(notes, "second note") {
		t.Errorf("notes.md = %q", notes)
	}
	if fi, err := os.Lstat(filepath.Join(runDir, rundir.WorkName, "notes.md")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the model's own link in /work: %v %v", fi, err)
	}
	if grown := spoolBytes(t, data) - spool0; grown > 1<<20 {
		t.Errorf("the spool grew by %d bytes: the state mount took the model's writes", grown)
	}
	if !strings.Contains(out, "Read-only file system") {
		t.Errorf("the write into the shell-state mount did not fail as read-only:\n%s", out)
	}

	// The next, ordinary run is projected: nothing blocked the projector.
	plain := scriptedmodel.Start(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: turn(`{"tool":"notes_append","args":{"text":"an ordinary note"}}`, "none", "continuing"),
		2: turn(`{"tool":"submit","args":{"answer":"ok"}}`, "none", "RESOLVED"),
	}, "")))
	out, errOut, code = runCLIFor(t, 2*time.Minute, "run", "--nats-url", url, "--task", "Say ok.",
		"--model-base-url", plain.URL(), "--model", "scripted", "--no-network")
	m = submittedRE.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("ordinary run: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Cleanup(func() { removeContainers(t, m[1]) })
	waitFor(t, "the ordinary run's notes", func() bool {
		b, _ := os.ReadFile(filepath.Join(data, "runs", m[1], "notes.md"))
		return strings.Contains(string(b), "an ordinary note")
	})
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
	sameSnapshot(t, "canary dir after vera up stopped", before, dirSnapshot(t, canaryDir))
}

// TestTaskSetsChooseNoMount: `vera eval` used to add every task's
// input_dir as an input root, so a downloaded task set chose host mounts
// (a task naming ~/.ssh got it mounted read-only). Now an eval whose tasks
// name input dirs outside the --input-root directories typed on its
// command line stops before anything runs, naming them and the flag.
func TestTaskSetsChooseNoMount(t *testing.T) {
	t.Setenv("NATS_URL", "")
	home := t.TempDir()
	ssh := filepath.Join(home, ".ssh")
	if err := os.Mkdir(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tasks := filepath.Join(dir, "tasks.jsonl")
	line := fmt.Sprintf(`{"id":"keys","task":"What is in /input?","answer":"x","scorer":"contains","input_dir":%q}`+"\n", ssh)
	if err := os.WriteFile(tasks, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	_, errOut, code := runCLI(t, "eval", tasks, "--profiles", "no-audit", "--model-base-url", "http://127.0.0.1:9", "--model", "m",
		"--data-dir", data, "--log-level", "warn")
	if code != exitUsage || !strings.Contains(errOut, "--input-root") || !strings.Contains(errOut, "task keys: input_dir "+ssh) {
		t.Fatalf("exit %d, want %d with the task and the flag named:\n%s", code, exitUsage, errOut)
	}
	_ = filepath.WalkDir(filepath.Join(data, "runs"), func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == rundir.Marker {
			t.Errorf("a run dir was made: %s", filepath.Dir(p))
		}
		return nil
	})
}

// TestSandboxCannotReachTheBus: from a run's container on Docker's
// default bridge (a run with network on), neither the NATS port nor the
// dashboard's of `vera up` answers on the host's side of the bridge: the
// embedded server and the dashboard listen on loopback, which is not the
// container's.
func TestSandboxCannotReachTheBus(t *testing.T) {
	dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	addr, httpAddr := bustest.FreeAddr(t), bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", veraDataDir(t), "--nats-listen", addr, "--http-listen", httpAddr, "--image", img,
		"--no-verifiers", "--no-agent", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	run := "reach-bus"
	t.Cleanup(func() { removeContainers(t, run) })
	_, natsPort, _ := strings.Cut(addr, ":")
	_, httpPort, _ := strings.Cut(httpAddr, ":")
	probe := `python3 -c "
import socket, struct
gw = None
for line in open('/proc/net/route').read().splitlines()[1:]:
    f = line.split()
    if f[1] == '00000000':
        gw = socket.inet_ntoa(struct.pack('<L', int(f[2], 16)))
print('gateway', gw)
for port in (` + natsPort + `, ` + httpPort + `):
    for host in (gw, '127.0.0.1'):
        s = socket.socket(); s.settimeout(3)
        try:
            s.connect((host, port)); print('OPEN', host, port)
        except OSError as e:
            print('closed', host, port, type(e).__name__)
        s.close()
"`
	out, errOut, code := runCLI(t, "sandbox", "exec", "--nats-url", url, "--run", run, "--", probe)
	if code != 0 || !strings.Contains(out, "gateway ") || strings.Contains(out, "gateway None") {
		t.Fatalf("probe: exit %d\n%s\n%s", code, out, errOut)
	}
	if strings.Contains(out, "OPEN") {
		t.Errorf("the sandbox reached a port of vera up:\n%s", out)
	}
	if strings.Count(out, "closed ") != 4 {
		t.Errorf("probe output:\n%s", out)
	}
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}

// readRegular reads a regular file, never through a link or a FIFO (the
// test must not block where the old projector did); "" otherwise.
func readRegular(path string) string {
	if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	b, _ := os.ReadFile(path)
	return string(b)
}

func jsonAction(tool string, args map[string]any) string {
	b, err := json.Marshal(map[string]any{"tool": tool, "args": args})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestWorkDirsAreVERAs: a work dir VERA did not make, or one outside the
// roots, is never created, chowned, exchanged or mounted — whoever names
// it. Before: `vera run --work-dir ~/.ssh` left ~/.ssh owned by 65532
// and the model replaced authorized_keys; a raw task naming a root-owned
// file got the file chowned; the projector created and wrote a work dir
// sandboxd had refused. After: vera run stops with one line; sandboxd
// refuses the raw tasks with no container; the projector makes nothing.
func TestWorkDirsAreVERAs(t *testing.T) {
	dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	home := t.TempDir() // a fake HOME
	ssh := filepath.Join(home, ".ssh")
	if err := os.Mkdir(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ssh, "authorized_keys"), []byte("ssh-ed25519 AAAA owner\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rootFile := filepath.Join(home, "rootfile")
	if err := os.WriteFile(rootFile, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := dirSnapshot(t, home)
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(byStep(nil,
		turn(jsonAction("shell", map[string]any{"cmd": "echo evil > /work/authorized_keys; id -u"}), "none", "continuing"))))

	// vera run, embedded: the typed dir is not empty and not VERA's.
	data := t.TempDir()
	out, errOut, code := runCLI(t, "run", "--task", "x", "--work-dir", ssh, "--model-base-url", model.URL(), "--model", "scripted",
		"--image", img, "--data-dir", data, "--no-network", "--max-steps", "1")
	if code != exitUsage || !strings.Contains(errOut, "not empty and VERA did not make it") {
		t.Errorf("vera run --work-dir ~/.ssh: exit %d\n%s\n%s", code, out, errOut)
	}
	sameSnapshot(t, "fake home after vera run", before, dirSnapshot(t, home))

	// Raw tasks to a running deployment whose roots do not hold them.
	data = veraDataDir(t)
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "", "--image", img,
		"--network", "none", "--no-verifiers", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	cli := bustest.Connect(t, url, bus.Options{CredsFile: auth.Store{Dir: auth.DirOf(data)}.Path(catalog.ComponentCLI), Source: catalog.ComponentCLI})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	outside := filepath.Join(home, "new-dir")
	runs := map[string]string{"raw-ssh": ssh, "raw-file": rootFile, "raw-outside": outside}
	for run, dir := range runs {
		t.Cleanup(func() { removeContainers(t, run) })
		ev, err := cli.Events.New(run, catalog.TaskSubmitted{SubmittedBy: "test", RunConfig: catalog.RunConfig{
			Task: "x", WorkDir: dir, MaxSteps: 1, Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted"},
			Sandbox: catalog.SandboxConfig{Network: false}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	for run, dir := range runs {
		var tf catalog.ToolFinished
		for rec, err := range cli.Read(ctx, bus.ReadOptions{RunID: run, Types: []string{catalog.TypeToolFinished}, Follow: true}) {
			if err != nil {
				t.Fatalf("%s: %v", run, err)
			}
			if rec.Err == nil && rec.Event.DecodeData(&tf) == nil {
				break
			}
		}
		if tf.ExitCode != -1 || !strings.Contains(tf.Error, "refused") {
			t.Errorf("%s (work dir %s): want a refusal, got exit %d: %s", run, dir, tf.ExitCode, tf.Error)
		}
	}
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
	sameSnapshot(t, "fake home after raw tasks", before, dirSnapshot(t, home))
	if _, err := os.Stat(outside); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a work dir outside the roots was made: %v", err)
	}
}
