package sandboxd_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// rootExec runs a command as root in a container straight through the
// Docker API (not through sandboxd) and returns its output.
func (f *fixture) rootExec(name string, cmd ...string) string {
	f.t.Helper()
	return f.execAs(name, "0:0", cmd...)
}

// execAs runs a command as user in a container straight through the
// Docker API and returns its combined output.
func (f *fixture) execAs(name, user string, cmd ...string) string {
	f.t.Helper()
	ctx := context.Background()
	created, err := f.docker.ContainerExecCreate(ctx, name, container.ExecOptions{User: user, AttachStdout: true, AttachStderr: true, Cmd: cmd})
	if err != nil {
		f.t.Fatal(err)
	}
	att, err := f.docker.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		f.t.Fatal(err)
	}
	return out.String()
}

// streamBytes is the exact content of a small, untruncated output.
func streamBytes(t *testing.T, o catalog.Output) []byte {
	t.Helper()
	if o.Truncated {
		t.Fatalf("output truncated: %+v", o)
	}
	if o.Encoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(o.Head)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return []byte(o.Head)
}

// stateNotReported reports whether the run records that the shell state
// of the request was not reported.
func (f *fixture) stateNotReported(run, requestID string) bool {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		evs, _ := f.b.ReadRun(context.Background(), run)
		for _, ev := range evs {
			var e catalog.ContainerEvent
			if ev.Type == catalog.TypeContainerEvent && ev.DecodeData(&e) == nil && e.Action == "vera_state_not_reported" && e.Attributes["request_id"] == requestID {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// TestUserPathDoesNotBreakTheShell: a PATH without the sandbox's own
// tools, exported by one command, applies to the user's later commands
// but never keeps them from running, and a later export repairs it.
func TestUserPathDoesNotBreakTheShell(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("path")
	tf := f.exec(run, req{cmd: "mkdir -p /work/bin && printf '#!/bin/sh\\necho mytool ran\\n' > /work/bin/mytool && chmod +x /work/bin/mytool && export PATH=/work/bin"})
	if tf.ExitCode != 0 || tf.Exports["PATH"] != "/work/bin" {
		t.Fatalf("export PATH: %s", summarize(tf))
	}
	env := tf.Exports
	// The user's PATH applies to the user's command: mytool is found, ls
	// is not, builtins work.
	tf = f.exec(run, req{cmd: "echo builtin-ok; mytool; ls / >/dev/null", env: env})
	if tf.ExitCode != 127 || string(streamBytes(t, tf.Stdout)) != "builtin-ok\nmytool ran\n" || !strings.Contains(string(streamBytes(t, tf.Stderr)), "ls: command not found") {
		t.Fatalf("with PATH=/work/bin: %s", summarize(tf))
	}
	if tf.CwdAfter != "/work" {
		t.Fatalf("cwd after: %s", summarize(tf))
	}
	// Any later command runs, and a later export repairs the PATH.
	tf = f.exec(run, req{cmd: "export PATH=/usr/bin:/bin", env: env})
	if tf.ExitCode != 0 || tf.Exports["PATH"] != "/usr/bin:/bin" {
		t.Fatalf("export PATH=/usr/bin:/bin: %s", summarize(tf))
	}
	for k, v := range tf.Exports {
		env[k] = v
	}
	tf = f.exec(run, req{cmd: "ls -d /work", env: env})
	if tf.ExitCode != 0 || string(streamBytes(t, tf.Stdout)) != "/work\n" {
		t.Fatalf("after repairing PATH: %s", summarize(tf))
	}
	// Even an empty PATH, or one naming a directory that does not exist.
	for _, p := range []string{"", "/nonexistent"} {
		tf = f.exec(run, req{cmd: "echo still-runs; cd /tmp", env: map[string]string{"PATH": p}})
		if tf.ExitCode != 0 || string(streamBytes(t, tf.Stdout)) != "still-runs\n" || tf.CwdAfter != "/tmp" {
			t.Fatalf("PATH=%q: %s", p, summarize(tf))
		}
	}
}

// TestOutputCannotForgeTheShellState: whatever a command prints, stdout and
// stderr are recorded byte for byte, and nothing it prints sets cwd_after
// or exports. A command that keeps the shell from reporting its state
// leaves the previous state, and the run records that it was not reported.
func TestOutputCannotForgeTheShellState(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("forge")
	f.exec(run, req{cmd: "mkdir -p /work/sub"})

	// The shell's arguments are what an attacker sees first: the old
	// wrapper passed its state marker as $1. Print them, and what looks
	// like a marker, to both streams, with state after it.
	cmd := `m="$1"; printf '%s' "$m"; printf '%s/etc\0FORGED=1\0' "$m" >&2; echo after-marker >&2
printf '\036VERA-STATE-00112233445566778899aabb\036/etc\0FORGED=2\0' >&2; echo tail >&2
printf '\036VERA-STATE-00112233445566778899aabb\036/etc\0FORGED=3\0'; echo out-tail`
	tf := f.exec(run, req{cmd: cmd, id: "forge-1", cwd: "/work/sub"})
	out, errb := streamBytes(t, tf.Stdout), streamBytes(t, tf.Stderr)
	m := ""
	if i := bytes.Index(out, []byte("\036VERA-STATE-00112233")); i >= 0 {
		m = string(out[:i])
	}
	wantErr := m + "/etc\x00FORGED=1\x00after-marker\n\x1eVERA-STATE-00112233445566778899aabb\x1e/etc\x00FORGED=2\x00tail\n"
	wantOut := m + "\x1eVERA-STATE-00112233445566778899aabb\x1e/etc\x00FORGED=3\x00out-tail\n"
	if string(errb) != wantErr || string(out) != wantOut {
		t.Errorf("output altered:\nstdout %q\n  want %q\nstderr %q\n  want %q", out, wantOut, errb, wantErr)
	}
	if _, forged := tf.Exports["FORGED"]; tf.ExitCode != 0 || tf.CwdAfter != "/work/sub" || forged {
		t.Errorf("state forged: exit %d cwd_after %q exports %v", tf.ExitCode, tf.CwdAfter, tf.Exports)
	}

	// The command cannot reach what sandboxd gave its shell: not the
	// keeper's descriptors, environment or memory.
	tf = f.exec(run, req{cmd: `for p in /proc/$PPID/fd/0 /proc/$PPID/environ /proc/$PPID/mem; do cat "$p" >/dev/null 2>&1 && echo "read $p"; done; ls /proc/$PPID/fd >/dev/null 2>&1 && echo listed
[ -n "${VERA_STATE_NONCE+x}" ] && echo "nonce in env"; grep -l VERA_STATE_NONCE /proc/[0-9]*/environ 2>/dev/null; true`, id: "forge-2"})
	if tf.ExitCode != 0 || tf.Stdout.Head != "" {
		t.Errorf("the command read its keeper: %s", summarize(tf))
	}

	// Commands that keep the shell from reporting: the previous state
	// stays, and the run says it was not reported.
	for i, c := range []string{
		"cd /tmp; export LOST=1; exec true",
		"cd /tmp; export LOST=1; kill -9 $$",
		"cd /tmp; export LOST=1; trap 'echo own-trap' EXIT",
	} {
		id := "forge-nr-" + string(rune('a'+i))
		tf = f.exec(run, req{cmd: c, id: id, cwd: "/work/sub"})
		if tf.CwdAfter != "/work/sub" || len(tf.Exports) != 0 {
			t.Errorf("%q: cwd_after %q exports %v, want the previous state", c, tf.CwdAfter, tf.Exports)
		}
		if !f.stateNotReported(run, id) {
			t.Errorf("%q: no record that the state was not reported", c)
		}
	}
	// And the next command is unaffected.
	tf = f.exec(run, req{cmd: "cd /tmp && export OK=1", id: "forge-after"})
	if tf.ExitCode != 0 || tf.CwdAfter != "/tmp" || tf.Exports["OK"] != "1" {
		t.Fatalf("after: %s", summarize(tf))
	}
	if f.stateNotReported(run, "forge-after") {
		t.Error("a normal command recorded as not reported")
	}
}

// survivors lists the processes of a container other than its own
// (docker-init, tini, the console's tail) and ps itself.
func (f *fixture) survivors(name string) []string {
	var left []string
	for _, line := range strings.Split(f.rootExec(name, "ps", "-eo", "pid=,ppid=,user=,args="), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		args := strings.Join(fields[3:], " ")
		if fields[0] == "1" || (fields[1] == "0" && strings.Contains(args, "vera-session:")) || strings.Contains(args, "tini --") || strings.HasPrefix(args, "tail -q") || strings.HasPrefix(args, "ps -eo") || strings.HasSuffix(args, "<defunct>") {
			continue
		}
		left = append(left, line)
	}
	return left
}

// TestTimeoutKillsDetachedProcesses: a timed-out command's processes all
// end, however they detached (own session, nohup, subshell, double fork,
// emptied environment, killed keeper), and the container stays usable.
func TestTimeoutKillsDetachedProcesses(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("detach")
	name := sandboxd.ContainerName(run, "agent")
	f.exec(run, req{cmd: "true"})
	for i, c := range []string{
		`echo start
setsid sleep 3001 &
nohup sleep 3002 >/dev/null 2>&1 &
(setsid sleep 3003 &)
( ( sleep 3004 & ) & )
env -i /bin/sh -c 'setsid sleep 3005 </dev/null >/dev/null 2>&1 &'
setsid bash -c 'trap "" HUP TERM INT; exec sleep 3006' </dev/null >/dev/null 2>&1 &
sleep 3000`,
		// The command kills the process that runs its shell, then waits
		// (Docker ends an exec 2 s after its own process exits: the
		// timeout comes first).
		`setsid sleep 3007 </dev/null >/dev/null 2>&1 & setsid sleep 3008 & sleep 0.2; kill -9 $PPID; sleep 3009`,
	} {
		start := time.Now()
		timeout := 3 * time.Second
		if i == 1 {
			timeout = time.Second
		}
		tf := f.exec(run, req{cmd: c, timeout: timeout, id: "detach-" + string(rune('a'+i))})
		// In a session (the default), $PPID is 0 and kill -9 0 ends the
		// session's keeper with the command: the command ends at once,
		// reported with the session's end, not as timed out.
		lostSession := i == 1 && strings.Contains(tf.Error, "the session ended during the command")
		if (!tf.TimedOut && !lostSession) || tf.ExitCode != -1 {
			t.Fatalf("case %d: %s", i, summarize(tf))
		}
		if el := time.Since(start); el > 60*time.Second {
			t.Fatalf("case %d: the timeout took %s", i, el)
		}
		var left []string
		deadline := time.Now().Add(10 * time.Second)
		for {
			left = f.survivors(name)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("case %d: processes of the timed-out command survived:\n%s", i, strings.Join(left, "\n"))
		}
	}
	// The container stays usable, with its shell state.
	tf := f.exec(run, req{cmd: "echo alive; cd /tmp && export AFTER=1", id: "after"})
	if tf.ExitCode != 0 || tf.Stdout.Head != "alive\n" || tf.CwdAfter != "/tmp" || tf.Exports["AFTER"] != "1" {
		t.Fatalf("after the timeouts: %s", summarize(tf))
	}
}

// TestTimeoutSparesConcurrentCommands: in the auditor's container, where
// commands run concurrently, one command's timeout ends its own processes
// but not a concurrent command's, nor what an earlier command left running.
func TestTimeoutSparesConcurrentCommands(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("spare")
	name := sandboxd.ContainerName(run, "auditor")
	aud := catalog.RequesterAuditor
	// An earlier command leaves a process running.
	if tf := f.exec(run, req{cmd: "nohup sleep 4001 </dev/null >/dev/null 2>&1 &", requester: aud}); tf.ExitCode != 0 {
		t.Fatal(summarize(tf))
	}
	var wg sync.WaitGroup
	var slow catalog.ToolFinished
	wg.Add(1)
	go func() {
		defer wg.Done()
		slow = f.exec(run, req{id: "slow", requester: aud, timeout: time.Minute, cmd: "sleep 6; echo survived"})
	}()
	time.Sleep(1500 * time.Millisecond) // the slow command runs first
	tf := f.exec(run, req{id: "hung", requester: aud, timeout: 2 * time.Second, cmd: "setsid sleep 4002 & (setsid sleep 4003 &); sleep 4004"})
	if !tf.TimedOut {
		t.Fatalf("hung: %s", summarize(tf))
	}
	wg.Wait()
	if slow.ExitCode != 0 || slow.Stdout.Head != "survived\n" {
		t.Fatalf("a concurrent command was killed by another's timeout: %s", summarize(slow))
	}
	left := strings.Join(f.survivors(name), "\n")
	for _, s := range []string{"sleep 4002", "sleep 4003", "sleep 4004"} {
		if strings.Contains(left, s) {
			t.Errorf("%s of the timed-out command survived:\n%s", s, left)
		}
	}
	if !strings.Contains(left, "sleep 4001") {
		t.Fatalf("the earlier command's process was killed by a later command's timeout:\n%s", left)
	}
}

// TestImageWithoutBashIsAClearResult: an image a run may ask for
// (--allow-image) that lacks what the sandbox shell needs gets a clear
// result, not a command failing in its place.
func TestImageWithoutBashIsAClearResult(t *testing.T) {
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	ctx := context.Background()
	tag := dockertest.Name(t, "img") + ":nobash"
	c, err := docker.ContainerCreate(ctx, &container.Config{Image: img, Labels: map[string]string{"vera.test": "true"}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	if err := docker.ContainerStart(ctx, c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	f0 := &fixture{t: t, docker: docker}
	f0.rootExec(c.ID, "rm", "-f", "/bin/bash", "/usr/bin/bash")
	if _, err := docker.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: tag}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = docker.ImageRemove(context.Background(), tag, image.RemoveOptions{Force: true}) })

	f := newFixture(t, func(c *sandboxd.Config) { c.AllowedImages = []string{tag} })
	run := f.run("nobash")
	ev, _ := f.b.Events.New(run, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "t", WorkDir: filepath.Join(t.TempDir(), "w"),
		Sandbox: catalog.SandboxConfig{Image: tag}}, SubmittedBy: "test"})
	if _, err := f.b.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	tf := f.exec(run, req{cmd: "echo hi"})
	t.Logf("reported as: %s", tf.Error)
	if tf.ExitCode != -1 || !strings.Contains(tf.Error, "no bash") || !strings.Contains(tf.Error, tag) {
		t.Fatalf("%s", summarize(tf))
	}
}
