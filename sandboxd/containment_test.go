package sandboxd_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/sandboxd"
)

// Containment of what a command can do to the host (issue 25, items 4
// and 5). Every test here runs through the real daemon and real Docker;
// each fails on the sandboxd before the fix, as its comment says.

// treeBytes is what a host directory tree takes on disk (allocated
// blocks), links not followed.
func treeBytes(t *testing.T, root string) int64 {
	t.Helper()
	var total int64
	_ = filepath.WalkDir(root, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if info, err := e.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			}
		}
		return nil
	})
	return total
}

// stateFill is what a command may try against the state directory: fill
// it, make files, fifos and directories in it, list it, and (in a
// session, where its shell names its own state fifo) pour 50 MB into its
// own state report. It prints what worked, and the mount's options.
const stateFill = `while read -r _ _ _ _ mp opts _; do [[ $mp == /.vera-sandbox/state ]] && echo "mount=${opts%%,*}"; done < /proc/self/mountinfo
dd if=/dev/zero of=/.vera-sandbox/state/x bs=1M count=50 status=none 2>/dev/null && echo dd-wrote
head -c 50000000 /dev/zero > /.vera-sandbox/state/.x 2>/dev/null && echo head-wrote
touch /.vera-sandbox/state/y 2>/dev/null && echo touched
mkdir /.vera-sandbox/state/d 2>/dev/null && echo mkdir
mkfifo /.vera-sandbox/state/p 2>/dev/null && echo mkfifo
ls -a /.vera-sandbox/state >/dev/null 2>&1 && echo listed
if [[ -n ${__vera_out-} ]]; then head -c 50000000 /dev/zero > "$__vera_out" 2>/dev/null; echo own-report-poured; fi
true`

// TestStateDirCannotFillTheHostDisk: the container's shell-state
// directory is mounted read-only; nothing the sandbox user does there
// (dd, touch, mkdir, mkfifo, ls, or pouring data into its own state
// report) takes host disk, and the shell state still carries over, in a
// session and in exec mode.
//
// Fails before the fix: the directory was mounted read-write, mode 1733,
// so dd wrote 50 MiB into the host's spool (mount=rw, dd-wrote, and the
// spool grew by 100 MB).
func TestStateDirCannotFillTheHostDisk(t *testing.T) {
	f := newFixture(t, nil)
	for _, mode := range []catalog.SessionMode{catalog.SessionPersistent, catalog.SessionExec} {
		t.Run(string(mode), func(t *testing.T) {
			run := f.run("fill-" + string(mode))
			f.submit(run, catalog.RunConfig{Task: "t", WorkDir: filepath.Join(t.TempDir(), "w"), Sandbox: catalog.SandboxConfig{Session: mode}})
			name := sandboxd.ContainerName(run, "agent")
			var sh shell
			tf := sh.run(f, run, "mkdir -p /work/d && cd /work/d && export BEFORE=1 && fn() { echo fn-ran; }")
			if tf.ExitCode != 0 || tf.CwdAfter != "/work/d" || tf.Exports["BEFORE"] != "1" {
				t.Fatalf("first command: %s", summarize(tf))
			}
			info, err := f.docker.ContainerInspect(context.Background(), name)
			if err != nil {
				t.Fatal(err)
			}
			stateDir := ""
			for _, m := range info.Mounts {
				if m.Destination == sandboxd.StateMount {
					stateDir = m.Source
					if m.RW {
						t.Errorf("the state mount is read-write: %+v", m)
					}
				}
			}
			if stateDir == "" {
				t.Fatalf("no state mount: %+v", info.Mounts)
			}
			if st, err := os.Stat(stateDir); err != nil || st.Mode().Perm() != 0o711 || st.Mode()&os.ModeSticky != 0 {
				t.Errorf("state dir mode: %v %v", st.Mode(), err)
			}
			before := treeBytes(t, stateDir)

			start := time.Now()
			tf = f.exec(run, req{id: "fill", cmd: stateFill, cwd: sh.cwd, env: sh.env, shell: sh.state, timeout: 2 * time.Minute})
			grew := treeBytes(t, stateDir) - before
			t.Logf("the attack took %s: %q; the state dir grew by %d bytes", time.Since(start).Round(time.Millisecond), tf.Stdout.Head, grew)
			out := tf.Stdout.Head
			if !strings.HasPrefix(out, "mount=ro\n") {
				t.Errorf("the state mount is not read-only in the container: %s", summarize(tf))
			}
			for _, worked := range []string{"dd-wrote", "head-wrote", "touched", "mkdir", "mkfifo", "listed"} {
				if strings.Contains(out, worked+"\n") {
					t.Errorf("%s in the state dir worked: %s", worked, summarize(tf))
				}
			}
			if grew > 64<<10 {
				t.Errorf("the host's state dir grew by %d bytes", grew)
			}
			if mode == catalog.SessionPersistent {
				// Its own report, 50 MB long, is not carried over, and
				// the run says so; the previous state stays.
				if !strings.Contains(out, "own-report-poured\n") || tf.CwdAfter != "/work/d" || !f.stateNotReported(run, "fill") {
					t.Errorf("a 50 MB state report: %s", summarize(tf))
				}
			}
			if time.Since(start) > time.Minute {
				t.Errorf("the attack took %s", time.Since(start))
			}

			// The shell state still carries over, through the fifos.
			want := "fn-ran\n1\n/work/d\n"
			cmd := "fn; echo $BEFORE; pwd; cd /tmp; export AFTER=2; g() { echo g-ran; }"
			if mode == catalog.SessionExec {
				want, cmd = "1\n/work/d\n", "echo $BEFORE; pwd; cd /tmp; export AFTER=2"
			}
			tf = sh.run(f, run, cmd)
			if tf.ExitCode != 0 || tf.Stdout.Head != want || tf.CwdAfter != "/tmp" || tf.Exports["AFTER"] != "2" {
				t.Fatalf("state after the attack: %s", summarize(tf))
			}
			want, cmd = "g-ran\n1 2 /tmp\n", "g; echo $BEFORE $AFTER $PWD"
			if mode == catalog.SessionExec {
				want, cmd = "1 2 /tmp\n", "echo $BEFORE $AFTER $PWD"
			}
			r := sh.req(cmd)
			r.id = "carried-" + string(mode)
			if tf = f.exec(run, r); tf.ExitCode != 0 || tf.Stdout.Head != want {
				t.Fatalf("state carried over: %s", summarize(tf))
			}
			if f.stateNotReported(run, r.id) {
				t.Error("a normal command's state was recorded as not reported")
			}
			// What is left in the host's state dir is sandboxd's: the
			// session's fifos, nothing of a finished command.
			ents, _ := os.ReadDir(stateDir)
			for _, e := range ents {
				if !strings.HasPrefix(e.Name(), ".wake-") && !strings.HasPrefix(e.Name(), ".out-") && !strings.HasPrefix(e.Name(), ".err-") {
					t.Errorf("left in the state dir: %s (%s)", e.Name(), e.Type())
				}
			}
		})
	}
}

// backgroundWriters are what a command leaves writing /work after it
// returned: the red-team's shell loop, and a process whose main thread
// ended with the raw exit syscall while another thread writes (ps shows
// it as a zombie, "Zl", and it goes on).
const backgroundWriters = `nohup sh -c 'while :; do head -c 10M /dev/zero >> /work/big.$RANDOM; done' >/dev/null 2>&1 &
nohup python3 -c '
import threading, ctypes, time
def write():
    with open("/work/zbig", "ab") as f:
        while True:
            f.write(b"z" * (1 << 20)); f.flush(); time.sleep(0.01)
threading.Thread(target=write).start()
time.sleep(0.2)
ctypes.CDLL(None).syscall(60, 0)
' >/dev/null 2>&1 &
echo started`

// userExec runs a command as the daemon's sandbox user in a container
// straight through the Docker API and returns its output.
func (f *fixture) userExec(name string, cmd ...string) string {
	f.t.Helper()
	user := f.cfg.User // as New defaults it
	if user == "" {
		user = strconv.Itoa(os.Getuid()) + ":" + strconv.Itoa(os.Getgid())
		if os.Geteuid() == 0 {
			user = sandboxd.SandboxUser
		}
	}
	return f.execAs(name, user, cmd...)
}

// writersLeft lists the container's processes that write /work in
// backgroundWriters.
func (f *fixture) writersLeft(name string) []string {
	var left []string
	for _, line := range strings.Split(f.rootExec(name, "ps", "-eo", "pid=,stat=,args="), "\n") {
		if strings.Contains(line, "python3") || strings.Contains(line, "head -c 10M") || strings.Contains(line, "while :") {
			left = append(left, strings.TrimSpace(line))
		}
	}
	return left
}

// TestBackgroundWriterIsStoppedAtTheWorkLimit: a command leaves writers
// of /work running and returns. The /work watchdog, which lives as long
// as the container, kills them once /work passes its limit (a zombie
// leader with a writing thread included), records it on the run
// (vera_disk_limit) and tells the agent with its next result; the next,
// innocent command runs to its end; rm then frees the space.
//
// Fails before the fix: the watchdog ran only during a command, so /work
// grew on past the limit after the command returned (the test stops the
// writers itself at 3 GiB and fails), and the next command was killed
// for what the writers wrote.
func TestBackgroundWriterIsStoppedAtTheWorkLimit(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("bgwriter")
	work := filepath.Join(t.TempDir(), "w")
	const limit = 64 << 20
	const hardCap = 3 << 30 // the test's own safety net, far past what the watchdog lets through
	f.submit(run, catalog.RunConfig{Task: "t", WorkDir: work, Sandbox: catalog.SandboxConfig{WorkLimitMB: limit >> 20}})
	name := sandboxd.ContainerName(run, "agent")
	if tf := f.exec(run, req{cmd: "true"}); tf.ExitCode != 0 { // the container, its venv bootstrapped
		t.Fatalf("%s", summarize(tf))
	}
	stopWriters := func() {
		f.rootExec(name, "bash", "-c", `for d in /proc/[0-9]*; do a=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null); case $a in *python3*|*"head -c 10M"*|*"while :"*) for t in "$d"/task/*; do kill -KILL "${t##*/}"; done;; esac; done 2>/dev/null; true`)
	}
	writers := f.exec(run, req{id: "writers", cmd: backgroundWriters})
	if tf := writers; tf.ExitCode != 0 || tf.Stdout.Head != "started\n" {
		stopWriters()
		t.Fatalf("%s", summarize(tf))
	}
	returned := time.Now()

	// /work stops growing within a few polls, and stays put.
	var used, peak int64
	stable := time.Now()
	for {
		now := treeBytes(t, work)
		if now > hardCap {
			stopWriters()
			t.Fatalf("/work reached %d MiB %s after the command returned: the background writers were not stopped", now>>20, time.Since(returned).Round(time.Millisecond))
		}
		if now != used {
			used, stable = now, time.Now()
		}
		peak = max(peak, now)
		if time.Since(stable) > 4*time.Second && used > limit {
			break
		}
		if time.Since(returned) > 45*time.Second {
			stopWriters()
			t.Fatalf("/work did not stop growing within 45 s (%d MiB)", used>>20)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("/work stopped growing at %.1f MiB (limit %d MiB), %s after the command returned", float64(used)/(1<<20), limit>>20, stable.Sub(returned).Round(time.Millisecond))
	if used > limit+1<<30 {
		t.Errorf("/work went %d MiB past its limit before the writers were stopped", (used-limit)>>20)
	}
	if left := f.writersLeft(name); len(left) > 0 {
		stopWriters()
		t.Fatalf("writers left running:\n%s", strings.Join(left, "\n"))
	}

	// Recorded on the run.
	var ev *catalog.ContainerEvent
	for deadline := time.Now().Add(10 * time.Second); ev == nil && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		evs, _ := f.b.ReadRun(context.Background(), run)
		for _, e := range evs {
			var ce catalog.ContainerEvent
			if e.Type == catalog.TypeContainerEvent && e.DecodeData(&ce) == nil && ce.Action == "vera_disk_limit" {
				ev = &ce
				break
			}
		}
	}
	if ev == nil {
		t.Fatal("no vera_disk_limit event on the run")
	}
	killed, _ := strconv.Atoi(ev.Attributes["killed"])
	evUsed, _ := strconv.ParseInt(ev.Attributes["used"], 10, 64)
	if ev.Container != name || killed < 2 || ev.Attributes["limit"] != strconv.Itoa(limit) || evUsed <= limit {
		t.Errorf("vera_disk_limit: %+v", ev)
	}

	// The next command is innocent: it runs to its end (/work is over
	// its limit, and it adds nothing), and tells the agent.
	tf := f.exec(run, req{cmd: "sleep 1.5; echo ok"})
	if tf.ExitCode != 0 || tf.Stdout.Head != "ok\n" || tf.Error != "" {
		t.Fatalf("the next command: %s", summarize(tf))
	}
	// The notice goes with the agent's next result: this one (the
	// writers' own result was stored before they reached the limit,
	// unless the machine is so slow that storing it took longer).
	notice := tf.Notice
	if notice == "" && writers.Notice != "" {
		t.Logf("the notice came with the writers' own result (stored after the kill)")
		notice = writers.Notice
	}
	if !strings.Contains(notice, "background process") || !strings.Contains(notice, "were killed") || !strings.Contains(notice, "Remove files") {
		t.Errorf("the next result's notice: %q", tf.Notice)
	}
	// Removing files works, and frees the space.
	tf = f.exec(run, req{cmd: "rm -f /work/big.* /work/zbig && echo removed"})
	if tf.ExitCode != 0 || tf.Stdout.Head != "removed\n" {
		t.Fatalf("rm: %s", summarize(tf))
	}
	if now := treeBytes(t, work); now > limit {
		t.Errorf("/work holds %d MiB after rm", now>>20)
	}
	// And a command may write /work again.
	if tf := f.exec(run, req{cmd: "head -c 1000000 /dev/zero > /work/small && echo wrote"}); tf.ExitCode != 0 || tf.Stdout.Head != "wrote\n" {
		t.Fatalf("a write under the limit: %s", summarize(tf))
	}
}

// zombieLeader spins a thread and ends its main thread with the raw exit
// syscall: the leader is a zombie (state Z), its other thread runs on,
// and the process does not end until that thread does.
const zombieLeader = `python3 -c '
import threading, ctypes, time
def spin():
    while True: time.sleep(0.01)
threading.Thread(target=spin).start()
time.sleep(0.2)
ctypes.CDLL(None).syscall(60, 0)
'`

// TestTimeoutKillsAZombieLeadersThreads: a timed-out command whose
// process's leader is a zombie with live threads ends with everything
// else it started, in a session and in exec mode.
//
// Fails before the fix: the killer skipped every process in state Z, so
// the python3 process (ps: "Zl") lived on past the timeout.
func TestTimeoutKillsAZombieLeadersThreads(t *testing.T) {
	f := newFixture(t, nil)
	for _, mode := range []catalog.SessionMode{catalog.SessionPersistent, catalog.SessionExec} {
		t.Run(string(mode), func(t *testing.T) {
			run := f.run("zombie-" + string(mode))
			f.submit(run, catalog.RunConfig{Task: "t", WorkDir: filepath.Join(t.TempDir(), "w"), Sandbox: catalog.SandboxConfig{Session: mode}})
			name := sandboxd.ContainerName(run, "agent")
			tf := f.exec(run, req{cmd: "echo before; " + zombieLeader, timeout: 3 * time.Second})
			if !tf.TimedOut || tf.ExitCode != -1 || tf.Stdout.Head != "before\n" {
				t.Fatalf("%s", summarize(tf))
			}
			var left []string
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				left = left[:0]
				for _, line := range strings.Split(f.rootExec(name, "ps", "-eLo", "pid=,lwp=,stat=,args="), "\n") {
					if strings.Contains(line, "python3") {
						left = append(left, strings.TrimSpace(line))
					}
				}
				if len(left) == 0 || time.Now().After(deadline) {
					break
				}
			}
			if len(left) > 0 {
				f.rootExec(name, "bash", "-c", "pkill -KILL -f python3; true")
				t.Fatalf("the timed-out command's process lives on:\n%s", strings.Join(left, "\n"))
			}
			if tf := f.exec(run, req{cmd: "echo alive"}); tf.ExitCode != 0 || tf.Stdout.Head != "alive\n" {
				t.Fatalf("after the timeout: %s", summarize(tf))
			}
		})
	}
}

// scratchScan lists, as the sandbox user, every directory and regular
// file it may write outside /work: on the root file system (find -xdev
// also names the mount points on it), every mount point, /dev/shm. Each
// line is "W <path>" for a path a file could be made in (or, for a file,
// opened for writing); then the mount table.
const scratchScan = `{ find / -xdev \( -path /work -o -path /proc -o -path /sys \) -prune -o \( -type d -o -type f \) -writable -print 2>/dev/null
  while read -r _ _ _ _ mp _; do printf '%b\n' "$mp"; done < /proc/self/mountinfo
  echo /dev/shm
} | sort -u | while IFS= read -r p; do
  case $p in /work|/work/*|/proc|/proc/*|/sys|/sys/*) continue;; esac
  if [[ -d $p && ! -L $p ]]; then
    x=$(mktemp -p "$p" .vera-scan.XXXXXX 2>/dev/null) && { rm -f "$x"; echo "W $p"; }
  elif [[ -f $p && -w $p ]]; then echo "W $p"
  fi
done
echo ---
cat /proc/self/mountinfo`

// TestSandboxUserCanWriteOnlyBoundedScratch: outside /work, every place
// the sandbox user can write is a tmpfs with a size (the kernel bounds
// it), never the host's disk; the state mount takes no write.
//
// Fails before the fix: the state dir was writable (a bind mount of the
// host's disk).
func TestSandboxUserCanWriteOnlyBoundedScratch(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("scratch")
	tf := f.exec(run, req{cmd: scratchScan, timeout: 2 * time.Minute})
	if tf.ExitCode != 0 || tf.Stdout.Truncated {
		t.Fatalf("%s", summarize(tf))
	}
	scan, table, _ := strings.Cut(tf.Stdout.Head, "---\n")
	type mnt struct{ point, fstype, opts string }
	var mounts []mnt
	for _, line := range strings.Split(table, "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		fields, after := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(after) < 3 {
			continue
		}
		point := strings.ReplaceAll(fields[4], `\040`, " ")
		mounts = append(mounts, mnt{point, after[0], after[2] + "," + fields[5]})
	}
	mountOf := func(p string) mnt {
		best := mnt{}
		for _, m := range mounts {
			if (p == m.point || strings.HasPrefix(p, strings.TrimSuffix(m.point, "/")+"/")) && len(m.point) >= len(best.point) {
				best = m
			}
		}
		return best
	}
	var writable []string
	for _, line := range strings.Split(scan, "\n") {
		p, ok := strings.CutPrefix(line, "W ")
		if !ok {
			continue
		}
		writable = append(writable, p)
		m := mountOf(p)
		sized := slices.ContainsFunc(strings.Split(m.opts, ","), func(o string) bool { return strings.HasPrefix(o, "size=") })
		switch {
		case (m.fstype == "tmpfs") && sized:
			// bounded by the kernel
		case m.fstype == "mqueue" && p == "/dev/mqueue":
			// POSIX message queues: kernel memory bounded by
			// RLIMIT_MSGQUEUE, no file on any disk
		default:
			t.Errorf("the sandbox user can write %s, on %s (%s %s): not a tmpfs with a size", p, m.point, m.fstype, m.opts)
		}
	}
	t.Logf("writable outside /work: %v", writable)
	for _, want := range []string{"/tmp", "/var/tmp"} {
		if !slices.Contains(writable, want) {
			t.Errorf("%s is not writable (scratch space): %v", want, writable)
		}
	}
	if slices.ContainsFunc(writable, func(p string) bool { return strings.HasPrefix(p, sandboxd.StateMount) }) {
		t.Errorf("the state mount is writable")
	}
	if m := mountOf(sandboxd.StateMount); m.point != sandboxd.StateMount || !strings.Contains(","+m.opts+",", ",ro,") {
		t.Errorf("the state mount: %+v", m)
	}
}

// TestOldReadWriteStateMountIsRecreated: a container an older sandboxd
// made, with its state directory mounted read-write (and something its
// commands wrote there), is recreated on the run's next command, with a
// read-only state mount, on the same /work; what the old one wrote into
// the state directory is gone.
//
// Fails before the fix: a read-write state mount was kept as it was.
func TestOldReadWriteStateMountIsRecreated(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("oldrw")
	name := sandboxd.ContainerName(run, "agent")
	if tf := f.exec(run, req{cmd: "echo keep > /work/kept.txt"}); tf.ExitCode != 0 {
		t.Fatalf("%s", summarize(tf))
	}
	// The same container as an older sandboxd made it: state mount
	// read-write, the directory writable by anyone (1733).
	ctx := context.Background()
	info, err := f.docker.ContainerInspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	host := info.HostConfig
	stateDir := ""
	for i, m := range host.Mounts {
		if m.Target == sandboxd.StateMount {
			host.Mounts[i].ReadOnly = false
			stateDir = m.Source
		}
	}
	if stateDir == "" {
		t.Fatalf("no state mount: %+v", host.Mounts)
	}
	if err := f.docker.ContainerRemove(ctx, info.ID, container.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(stateDir, os.ModeSticky|0o733); err != nil {
		t.Fatal(err)
	}
	created, err := f.docker.ContainerCreate(ctx, info.Config, host, nil, nil, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.docker.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	out := f.userExec(name, "bash", "-c", "head -c 1000000 /dev/zero > /.vera-sandbox/state/junk && echo wrote")
	if out != "wrote\n" {
		t.Fatalf("the old container's state mount is not writable: %q", out)
	}

	tf := f.exec(run, req{cmd: "cat /work/kept.txt"})
	if tf.ExitCode != 0 || tf.Stdout.Head != "keep\n" {
		t.Fatalf("after the old container: %s", summarize(tf))
	}
	info, err = f.docker.ContainerInspect(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if info.ID == created.ID {
		t.Fatal("the container with a read-write state mount was kept")
	}
	for _, m := range info.Mounts {
		if m.Destination == sandboxd.StateMount && m.RW {
			t.Fatalf("the new container's state mount is read-write: %+v", m)
		}
	}
	if _, err := os.Lstat(filepath.Join(stateDir, "junk")); !os.IsNotExist(err) {
		t.Errorf("what the old container wrote in its state dir is still there: %v", err)
	}
}
