package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// TestSystemForkThroughTheCLI: `vera run` records a run whose commands
// write files, then `vera fork RUN --at-step 3 --model other` against the
// same `vera up`: the fork's prefix is served from the recording (the
// model is asked nothing for steps 1-3), its commands rebuild /work in
// the fork's own work dir, vera.fork.prefix says so, and from step 4 the
// other model takes the fork elsewhere.
func TestSystemForkThroughTheCLI(t *testing.T) {
	dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	original := byStep(map[int]string{
		1: turn(`{"tool":"shell","args":{"cmd":"echo alpha > /work/a.txt && cat /work/a.txt"}}`, "none", "continuing"),
		2: turn(`{"tool":"shell","args":{"cmd":"cat /work/a.txt > /work/b.txt && wc -c < /work/b.txt"}}`, "ev_0001", "continuing"),
		3: turn(`{"tool":"notes_append","args":{"text":"a.txt and b.txt hold alpha (ev_0001, ev_0002)"}}`, "ev_0001, ev_0002", "continuing"),
		4: turn(`{"tool":"submit","args":{"answer":"alpha"}}`, "ev_0001", "RESOLVED"),
	}, "")
	other := byStep(map[int]string{
		4: turn(`{"tool":"shell","args":{"cmd":"echo gamma > /work/c.txt && cat /work/c.txt"}}`, "ev_0001", "continuing"),
		5: turn(`{"tool":"submit","args":{"answer":"gamma"}}`, "ev_0003", "RESOLVED"),
	}, "")
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		if req.Model == "other" {
			return other.Func(req)
		}
		return original.Func(req)
	})))
	data := veraDataDir(t)
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, _ := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--work-root", os.TempDir(), "--image", img, "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })

	root := t.TempDir()
	out, errOut, code := runCLI(t, "run", "--nats-url", url, "--task", "Write alpha into two files and report it.", "--work-dir", filepath.Join(root, "orig"),
		"--model-base-url", model.URL(), "--model", "scripted", "--tool-protocol", "text", "--max-steps", "8")
	m := regexp.MustCompile(`run (\S+) submitted`).FindStringSubmatch(out)
	if m != nil {
		t.Cleanup(func() { removeContainers(t, m[1]) })
	}
	if code != 0 || m == nil {
		t.Fatalf("vera run: exit %d\n%s\n%s", code, out, errOut)
	}
	asked := model.Count()

	forkWork := filepath.Join(root, "fork")
	out, errOut, code = runCLI(t, "fork", m[1], "--at-step", "3", "--model", "other", "--nats-url", url, "--work-dir", forkWork, "--note", "another model from step 4")
	f := regexp.MustCompile(`run (\S+) submitted`).FindStringSubmatch(out)
	if f != nil {
		t.Cleanup(func() { removeContainers(t, f[1]) })
	}
	t.Logf("vera fork:\n%s", out)
	if code != 0 {
		t.Fatalf("vera fork: exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"prefix reproduced: 3 steps, 2 commands compared; live from step 4", "$ echo gamma", "RESOLVED"} {
		if !strings.Contains(out, want) {
			t.Errorf("vera fork's output lacks %q", want)
		}
	}
	// Steps 1-3 were served: the model was asked for steps 4 and 5 only.
	if n := model.Count() - asked; n != 2 {
		t.Errorf("the fork asked the model %d times, want 2 (steps 4 and 5)", n)
	}
	for name, want := range map[string]string{"a.txt": "alpha\n", "b.txt": "alpha\n", "c.txt": "gamma\n"} {
		b, err := os.ReadFile(filepath.Join(forkWork, "work", name))
		if err != nil || string(b) != want {
			t.Errorf("fork's %s = %q, %v; want %q", name, b, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "orig", "c.txt")); err == nil {
		t.Error("the fork wrote into the original's work dir")
	}
}
