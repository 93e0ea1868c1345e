package main

import (
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// TestSandboxExecThroughVeraUp runs `vera up` (embedded bus + sandboxd) and
// `vera sandbox exec` against it: the command goes out as an event, runs in
// a real container, and its result comes back as an event.
func TestSandboxExecThroughVeraUp(t *testing.T) {
	dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", veraDataDir(t), "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--image", img, "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	if !strings.Contains(upOut.String(), "components: sandboxd") {
		t.Fatalf("vera up does not run sandboxd:\n%s", upOut.String())
	}
	run := "cli-exec-test"
	t.Cleanup(func() { removeContainers(t, run) })

	out, errOut, code := runCLI(t, "sandbox", "exec", "--nats-url", url, "--run", run, "--", "echo", "hello; echo to-stderr >&2")
	if code != 0 || out != "hello\n" || errOut != "to-stderr\n" {
		t.Fatalf("exec: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if _, _, code := runCLI(t, "sandbox", "exec", "--nats-url", url, "--run", run, "--", "exit 7"); code != 7 {
		t.Errorf("exit code %d, want the command's 7", code)
	}
	if _, errOut, code := runCLI(t, "sandbox", "exec", "--nats-url", url, "--run", run, "--", "rm -rf /"); code != exitDenied || !strings.Contains(errOut, "rm_root") {
		t.Errorf("denied: exit %d, stderr %q", code, errOut)
	}
	if _, _, code := runCLI(t, "sandbox", "exec", "--nats-url", url, "--run", run, "--timeout", "1s", "--", "sleep 30"); code != exitTimedOut {
		t.Errorf("timeout: exit %d", code)
	}
	// Two calls on one run share its shell session: cwd, exports,
	// functions and unexported variables carry over; --fresh starts anew.
	if out, errOut, code := runCLI(t, "sandbox", "exec", "--nats-url", url, "--run", run, "--",
		"mkdir -p /work/sub && cd /work/sub && export X=exported && Y=plain && greet() { echo hi from greet; }"); code != 0 {
		t.Fatalf("session setup: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runCLI(t, "sandbox", "exec", "--nats-url", url, "--run", run, "--", `pwd; echo "$X $Y"; greet`)
	if want := "/work/sub\nexported plain\nhi from greet\n"; code != 0 || out != want {
		t.Errorf("the next call did not carry the session: exit %d, stdout %q (want %q), stderr %q", code, out, want, errOut)
	}
	out, _, code = runCLI(t, "sandbox", "exec", "--nats-url", url, "--run", run, "--fresh", "--", `pwd; echo "[${X-}]"`)
	if want := "/work\n[]\n"; code != 0 || out != want {
		t.Errorf("--fresh: exit %d, stdout %q, want %q", code, out, want)
	}
	// The whole exchange is on the stream.
	out, _, _ = runCLI(t, "events", "tail", "--nats-url", url, "--run", run, "--no-follow")
	for _, want := range []string{"tool.requested [cli]", "tool.started [sandboxd]", "tool.finished [sandboxd]", "container.event [sandboxd]"} {
		if !strings.Contains(out, want) {
			t.Errorf("stream lacks %q", want)
		}
	}
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}
