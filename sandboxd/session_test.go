package sandboxd_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/sandboxd"
)

// shell carries a requester's shell state from one result to the next
// request, as the agent does: cwd_after, the exports added to the env,
// and shell_state_after when reported.
type shell struct {
	cwd   string
	env   map[string]string
	state string
}

func (s *shell) req(cmd string) req {
	return req{cmd: cmd, cwd: s.cwd, env: maps.Clone(s.env), shell: s.state}
}

func (s *shell) update(tf catalog.ToolFinished) {
	if tf.CwdAfter != "" {
		s.cwd = tf.CwdAfter
	}
	if s.env == nil {
		s.env = map[string]string{}
	}
	maps.Copy(s.env, tf.Exports)
	if tf.ShellStateAfter != "" {
		s.state = tf.ShellStateAfter
	}
}

// run runs a command from the state and carries the result's state on.
func (s *shell) run(f *fixture, run, cmd string) catalog.ToolFinished {
	f.t.Helper()
	r := s.req(cmd)
	r.id = fmt.Sprintf("req-%d", time.Now().UnixNano())
	tf := f.exec(run, r)
	s.update(tf)
	return tf
}

// sessions returns the run's vera.tool.session events.
func (f *fixture) sessions(run string) []catalog.ToolSession {
	evs, err := f.b.ReadRun(context.Background(), run)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []catalog.ToolSession
	for _, ev := range evs {
		var s catalog.ToolSession
		if ev.Type == catalog.TypeToolSession && ev.DecodeData(&s) == nil {
			out = append(out, s)
		}
	}
	return out
}

// TestSessionKeepsFunctionsAliasesVenvAndJobs: what a terminal keeps from
// one command to the next, a run's session keeps too, through the state
// the events carry.
func TestSessionKeepsFunctionsAliasesVenvAndJobs(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("keep")
	var sh shell
	steps := []struct{ cmd, want string }{
		{`greet() { echo "hello $1"; }; alias ll='ls -1'; COUNT=41; declare -A m=([k]=v); set -o pipefail; umask 027; mkdir -p d && cd d && touch a b`, ""},
		{`greet world; ll; echo $((COUNT+1)) ${m[k]}; false | true; echo pipefail=$?; umask; pwd`, "hello world\na\nb\n42 v\npipefail=1\n0027\n/work/d\n"},
		{`python3 -m venv /work/venv2 >/dev/null && source /work/venv2/bin/activate`, ""},
		{`echo "$VIRTUAL_ENV"; command -v python; type -t deactivate`, "/work/venv2\n/work/venv2/bin/python\nfunction\n"},
		{`deactivate; command -v python; sleep 300 & echo $! > /tmp/bg.pid`, "/work/.venv/bin/python\n"},
		{`kill -0 "$(cat /tmp/bg.pid)" && echo alive; greet again`, "alive\nhello again\n"},
	}
	for i, s := range steps {
		tf := sh.run(f, run, s.cmd)
		if tf.ExitCode != 0 || tf.Session != catalog.SessionPersistent || (s.want != "" && tf.Stdout.Head != s.want) {
			t.Fatalf("step %d: %s\nwant stdout %q", i, summarize(tf), s.want)
		}
		if tf.ShellStateAfter == "" {
			t.Fatalf("step %d reported no shell state: %s", i, summarize(tf))
		}
	}
	if !strings.Contains(sh.state, "greet ()") || !strings.Contains(sh.state, "alias ll=") {
		t.Fatalf("shell state lacks the function or the alias:\n%s", sh.state)
	}
	ss := f.sessions(run)
	if len(ss) != 1 || ss[0].Action != "started" {
		t.Fatalf("want one session started for %d commands, got %+v", len(steps), ss)
	}
}

// TestSessionOutputAndStatusAreExact: the session's framing never shows:
// no newline is added, the session's own markers printed by a command are
// output, stdin is empty, and exit or exec bash end only the command.
func TestSessionOutputAndStatusAreExact(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("exact")
	var sh shell
	sh.run(f, run, `keep() { echo kept; }`)
	fake := `printf '\0vera-end:0123456789abcdef0123456789abcdef:0\0'; printf '\0vera-end:0123456789abcdef0123456789abcdef\0' >&2`
	cases := []struct {
		cmd           string
		out, err      string
		code          int
		stateReported bool
	}{
		{`printf 'no newline'; printf 'err' >&2; exit 7`, "no newline", "err", 7, true},
		{fake + `; echo after`, "\x00vera-end:0123456789abcdef0123456789abcdef:0\x00after\n", "\x00vera-end:0123456789abcdef0123456789abcdef\x00", 0, true},
		{`cat; echo "read=$?"; read -r x; echo "x=[$x] $?"`, "read=0\nx=[] 1\n", "", 0, true},
		{`echo before; exec bash`, "before\n", "", 0, false},
		{`exec bash -c 'echo replaced >&2; exit 5'`, "", "replaced\n", 5, false},
		{`f() { exit 4; }; f`, "", "", 4, true},
		{`keep`, "kept\n", "", 0, true},
	}
	for i, c := range cases {
		r := sh.req(c.cmd)
		r.id = fmt.Sprintf("exact-%d", i)
		tf := f.exec(run, r)
		if got := streamBytes(t, tf.Stdout); !bytes.Equal(got, []byte(c.out)) || string(streamBytes(t, tf.Stderr)) != c.err || tf.ExitCode != c.code {
			t.Fatalf("case %d %q: %s\nstdout %q stderr %q", i, c.cmd, summarize(tf), streamBytes(t, tf.Stdout), streamBytes(t, tf.Stderr))
		}
		if got := tf.ShellStateAfter != ""; got != c.stateReported {
			t.Fatalf("case %d: state reported %v, want %v", i, got, c.stateReported)
		}
		if !c.stateReported && !f.stateNotReported(run, r.id) {
			t.Fatalf("case %d: the run does not record that the state was not reported", i)
		}
		sh.update(tf)
	}
	if ss := f.sessions(run); len(ss) != 1 {
		t.Fatalf("commands that end their own shell must not cost the session: %+v", ss)
	}
}

// TestSessionTimeoutKillsDetachedKeepsSession: a timed-out
// command's processes go, including those it detached with setsid, nohup
// or a double fork; a background job an earlier command started stays;
// the session and its state go on.
func TestSessionTimeoutKillsDetachedKeepsSession(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("detach")
	var sh shell
	sh.run(f, run, `helper() { echo helped; }; sleep 400 & echo $! > /tmp/old.pid`)
	start := time.Now()
	r := sh.req(`echo before; setsid sleep 401 & nohup sleep 402 >/dev/null 2>&1 & (setsid bash -c 'sleep 403' &); (sleep 404 &); sleep 405`)
	r.id, r.timeout = "slow", 2*time.Second
	tf := f.exec(run, r)
	if !tf.TimedOut || tf.ExitCode != -1 || tf.Stdout.Head != "before\n" {
		t.Fatalf("%s", summarize(tf))
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("the timeout took %s", d)
	}
	tf = sh.run(f, run, `ps -eo args | grep -c '[s]leep 40[1-5]'; kill -0 "$(cat /tmp/old.pid)" && echo old-alive; helper`)
	if tf.ExitCode != 0 || tf.Stdout.Head != "0\nold-alive\nhelped\n" {
		t.Fatalf("after the timeout: %s", summarize(tf))
	}
	if ss := f.sessions(run); len(ss) != 1 {
		t.Fatalf("a timeout must not cost the session: %+v", ss)
	}
}

// TestSessionStateTooBigIsRecorded: a shell state beyond the bound is not
// carried over, the run says so, and cwd and exports still are.
func TestSessionStateTooBigIsRecorded(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("big")
	r := req{id: "big", cmd: `BIG=$(head -c 200000 /dev/zero | tr '\0' x); export SMALL=1; cd /tmp`}
	tf := f.exec(run, r)
	if tf.ExitCode != 0 || tf.ShellStateAfter != "" || tf.CwdAfter != "/tmp" || tf.Exports["SMALL"] != "1" {
		t.Fatalf("%s", summarize(tf))
	}
	if !f.stateNotReported(run, "big") {
		t.Fatal("the run does not record that the shell state was not carried over")
	}
}

// TestExecModeIsARunSetting: session exec keeps today's per-exec mode:
// cd and export persist, functions do not.
func TestExecModeIsARunSetting(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("execmode")
	f.submit(run, catalog.RunConfig{Task: "t", WorkDir: filepath.Join(t.TempDir(), "w"), Sandbox: catalog.SandboxConfig{Session: catalog.SessionExec}})
	var sh shell
	tf := sh.run(f, run, `fn() { echo x; }; export A=1; cd /tmp`)
	if tf.Session != catalog.SessionExec || tf.ShellStateAfter != "" || tf.CwdAfter != "/tmp" || tf.Exports["A"] != "1" {
		t.Fatalf("%s", summarize(tf))
	}
	tf = sh.run(f, run, `type -t fn || echo none; echo $A`)
	if tf.Stdout.Head != "none\n1\n" {
		t.Fatalf("%s", summarize(tf))
	}
	if ss := f.sessions(run); len(ss) != 0 {
		t.Fatalf("exec mode started sessions: %+v", ss)
	}
}

// submit records a run's task with its configuration.
func (f *fixture) submit(run string, c catalog.RunConfig) {
	f.t.Helper()
	ev, err := f.b.Events.New(run, catalog.TaskSubmitted{RunConfig: c, SubmittedBy: "test"})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.b.Publish(context.Background(), ev); err != nil {
		f.t.Fatal(err)
	}
}

// TestStartStoredButNeverRunRuns: a daemon that stored a request's
// vera.tool.started and died before the command could run (waiting for
// the store's answer in a failover) left no mark on its spool: its
// successor runs the command, once, instead of reporting it interrupted.
func TestStartStoredButNeverRunRuns(t *testing.T) {
	f := newFixtureOpts(t, nil, false)
	run := f.run("never")
	reqEv := f.request(run, req{id: "req-never", cmd: "echo ran >> /work/side.txt; echo ran"})
	started, err := f.b.Events.New(run, catalog.ToolStarted{RequestID: "req-never", Container: "vera-" + run, StartedAt: time.Now().UTC()}, bus.ReactionTo(reqEv, "started"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.b.Publish(context.Background(), started); err != nil {
		t.Fatal(err)
	}
	f.start()
	tf := f.result(run, "req-never", 2*time.Minute)
	if tf.ExitCode != 0 || tf.Interrupted || tf.Stdout.Head != "ran\n" {
		t.Fatalf("%s", summarize(tf))
	}
	if n := f.count(run, catalog.TypeToolStarted); n != 1 {
		t.Fatalf("%d tool.started events, want the one stored before", n)
	}
}

// TestSessionKillScript: "except" spares the named live session, "only"
// kills the named one with its tree; the next command gets a new session
// that says it replaced the killed one.
func TestSessionKillScript(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("killscript")
	name := sandboxd.ContainerName(run, "agent")
	f.exec(run, req{cmd: "true"})
	ss := f.sessions(run)
	if len(ss) != 1 {
		t.Fatalf("sessions: %+v", ss)
	}
	keepers := func() string {
		return strings.TrimSpace(f.rootExec(name, "bash", "-c", "ps -eo ppid=,args= | grep -c '^ *0 .*[v]era-session:' || true"))
	}
	f.rootExec(name, "bash", "-c", sandboxd.SessionKillScript, "vera-test", "except", ss[0].SessionID)
	if n := keepers(); n != "1" {
		t.Fatalf("except killed the live session: %s keepers", n)
	}
	f.rootExec(name, "bash", "-c", sandboxd.SessionKillScript, "vera-test", "only", ss[0].SessionID)
	if n := keepers(); n != "0" {
		t.Fatalf("only left %s keepers", n)
	}
	if tf := f.exec(run, req{cmd: "echo again"}); tf.ExitCode != 0 || tf.Stdout.Head != "again\n" {
		t.Fatalf("after the kill: %s", summarize(tf))
	}
	if ss = f.sessions(run); len(ss) != 2 || ss[1].Action != "restarted" {
		t.Fatalf("sessions: %+v", ss)
	}
}

// TestKillScriptSameTickOrphan: start times count 10 ms ticks, so the
// background job of the previous command can share its tick with the
// next command's shell when commands follow each other within
// milliseconds (TestSessionTimeoutKillsDetachedKeepsSession once failed
// on it in CI). An orphan of the command's own tick is the command's
// only when the namespace gave it a pid after the command's shell; one
// from before is spared.
func TestKillScriptSameTickOrphan(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("tick")
	name := sandboxd.ContainerName(run, "agent")
	f.exec(run, req{cmd: "true"})
	// The fake session keeper: a Docker exec named like one, whose only
	// child stands for the command's shell; one orphan is forked just
	// before that child, one just after.
	const fakeKeeper = `(setsid sleep 990 &)
(exec sleep 991) &
(setsid sleep 992 &)
wait`
	const list = `for d in /proc/[0-9]*; do
  read -r s 2>/dev/null < "$d/stat" || continue
  a=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)
  case $a in "sleep 99"[0-2]" ") s=${s##*) }; set -- $s; [[ $1 == Z ]] || echo "${a% }|${d#/proc/}|${20}";; esac
done`
	const cleanup = `for d in /proc/[0-9]*; do
  a=$(tr '\0' ' ' < "$d/cmdline" 2>/dev/null)
  case $a in "sleep 99"[0-2]" "|*vera-session:tick-test*) kill -KILL "${d#/proc/}";; esac
done; true`
	type proc struct{ pid, start int }
	procs := func() map[string]proc {
		m := map[string]proc{}
		for _, line := range strings.Split(strings.TrimSpace(f.rootExec(name, "bash", "-c", list)), "\n") {
			parts := strings.Split(line, "|")
			if len(parts) != 3 {
				continue
			}
			pid, _ := strconv.Atoi(parts[1])
			start, _ := strconv.Atoi(parts[2])
			m[parts[0]] = proc{pid, start}
		}
		return m
	}
	ctx := context.Background()
	for attempt := 1; ; attempt++ {
		f.rootExec(name, "bash", "-c", cleanup)
		created, err := f.docker.ContainerExecCreate(ctx, name, container.ExecOptions{User: "0:0", Cmd: []string{"bash", "-p", "-c", fakeKeeper, "vera-session:tick-test"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.docker.ContainerExecStart(ctx, created.ID, container.ExecStartOptions{Detach: true}); err != nil {
			t.Fatal(err)
		}
		var m map[string]proc
		for deadline := time.Now().Add(10 * time.Second); ; {
			if m = procs(); len(m) == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the fake session's processes did not all start: %+v", m)
			}
			time.Sleep(20 * time.Millisecond)
		}
		before, shell, after := m["sleep 990"], m["sleep 991"], m["sleep 992"]
		if before.start != shell.start || after.start != shell.start {
			// Three forks in one 10 ms tick is a matter of luck: on a
			// busy 2-core VM (forks of several ms each) it may never
			// come. Then the rule cannot be exercised here, and the test
			// says so instead of passing.
			if attempt == 100 {
				t.Skipf("NOT EXERCISED: in 100 attempts this machine never started three processes in one 10 ms tick (last %+v); the same-tick rule is not tested here", m)
			}
			continue
		}
		if !(before.pid < shell.pid && shell.pid < after.pid) {
			t.Fatalf("pids not in fork order: %+v", m)
		}
		f.rootExec(name, "bash", "-c", sandboxd.KillScript, "vera-kill", "vera-session:tick-test", strconv.FormatInt(time.Now().UnixMicro(), 10))
		left := procs()
		_, beforeAlive := left["sleep 990"]
		_, shellAlive := left["sleep 991"]
		_, afterAlive := left["sleep 992"]
		f.rootExec(name, "bash", "-c", cleanup)
		if !beforeAlive || shellAlive || afterAlive {
			t.Fatalf("after the kill (attempt %d), alive: earlier orphan %v (want true), command %v, later orphan %v (want false)", attempt, beforeAlive, shellAlive, afterAlive)
		}
		return
	}
}
