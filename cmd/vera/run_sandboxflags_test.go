package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus/catalog"
)

// TestRunSandboxFlags: --session, --work-limit-mb and --scratch-limit-mb
// fill the run's sandbox settings; a bad value is a usage error.
func TestRunSandboxFlags(t *testing.T) {
	base := []string{"run", "--task", "x", "--work-dir", t.TempDir(), "--model-base-url", "http://127.0.0.1:1", "--model", "m"}
	parse := func(args ...string) (catalog.SandboxConfig, error) {
		t.Helper()
		var f runFlags
		c := &cobra.Command{Use: "run"}
		f.register(c)
		if err := c.ParseFlags(append(base[1:], args...)); err != nil {
			return catalog.SandboxConfig{}, err
		}
		cfg, err := f.config(strings.NewReader(""))
		return cfg.Sandbox, err
	}
	sb, err := parse()
	if err != nil || sb.Session != catalog.SessionPersistent || sb.WorkLimitMB != 0 || sb.ScratchLimitMB != 0 || !sb.Network {
		t.Errorf("defaults: %+v, %v", sb, err)
	}
	sb, err = parse("--session", "exec", "--work-limit-mb", "2048", "--scratch-limit-mb", "512", "--no-network", "--command-timeout", "2m")
	want := catalog.SandboxConfig{Session: catalog.SessionExec, WorkLimitMB: 2048, ScratchLimitMB: 512, ToolTimeoutMS: (2 * time.Minute).Milliseconds()}
	if err != nil || sb != want {
		t.Errorf("set: %+v, %v; want %+v", sb, err, want)
	}
	if sb, err := parse("--session", "Persistent"); err != nil || sb.Session != catalog.SessionPersistent {
		t.Errorf("--session Persistent: %+v, %v", sb, err)
	}
	for _, bad := range [][]string{{"--session", "tmux"}, {"--work-limit-mb", "-1"}, {"--scratch-limit-mb", "-5"}, {"--command-timeout", "-1s"}} {
		if _, err := parse(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
		_, errOut, code := runCLI(t, append(append([]string{}, base...), bad...)...)
		if code != exitUsage || !strings.Contains(errOut, bad[0]) {
			t.Errorf("vera run %v: exit %d, stderr %q; want a usage error naming %s", bad, code, errOut, bad[0])
		}
	}
	out, _, code := runCLI(t, "run", "--help")
	for _, want := range []string{"--session", "persistent", "exec", "--work-limit-mb", "--scratch-limit-mb", "edit (view, create, str_replace", "/work/output/"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("vera run --help lacks %q", want)
		}
	}
}
