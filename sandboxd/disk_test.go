package sandboxd_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/catalog"
)

// TestDiskLimits: a command that fills /work past the run's limit is
// killed with a clear result; one that fills the scratch space (/tmp,
// /var/tmp) gets "No space left on device" and a note saying the limit;
// the run's next command, and another run, work.
func TestDiskLimits(t *testing.T) {
	f := newFixture(t, nil)
	run := f.run("disk")
	f.submit(run, catalog.RunConfig{Task: "t", WorkDir: filepath.Join(t.TempDir(), "w"),
		Sandbox: catalog.SandboxConfig{WorkLimitMB: 64, ScratchLimitMB: 32}})
	start := time.Now()
	tf := f.exec(run, req{cmd: "dd if=/dev/zero of=/work/big bs=1M count=3000 status=none; echo done"})
	if tf.ExitCode != -1 || !strings.Contains(tf.Error, "disk limit: /work holds") || strings.Contains(tf.Stdout.Head, "done") {
		t.Fatalf("/work past its limit: %s", summarize(tf))
	}
	t.Logf("/work limit hit after %s: %s", time.Since(start).Round(time.Millisecond), tf.Error)
	// /work is over its limit now: a command that does not add to it (a
	// slow one included, past the watchdog's polls) runs to its end.
	if tf := f.exec(run, req{cmd: "sleep 1.5; du -sm /work/big | cut -f1"}); tf.ExitCode != 0 || tf.Error != "" {
		t.Fatalf("a command that adds nothing to a full /work was killed: %s", summarize(tf))
	}
	for _, dir := range []string{"/tmp", "/var/tmp"} {
		tf = f.exec(run, req{cmd: "head -c 100000000 /dev/zero > " + dir + "/fill"})
		if tf.ExitCode == 0 || !strings.Contains(tf.Stderr.Head, "No space left on device") || !strings.Contains(tf.Error, "scratch space") {
			t.Fatalf("%s past the scratch limit: %s", dir, summarize(tf))
		}
	}
	tf = f.exec(run, req{cmd: "rm -f /work/big /tmp/fill /var/tmp/fill && df -m /tmp | tail -1 | awk '{print $2}' && echo ok"})
	if tf.ExitCode != 0 || !strings.HasSuffix(tf.Stdout.Head, "ok\n") || !strings.HasPrefix(tf.Stdout.Head, "32\n") {
		t.Fatalf("after freeing space: %s", summarize(tf))
	}
	other := f.run("other")
	if tf := f.exec(other, req{cmd: "head -c 50000000 /dev/zero > /tmp/x && echo fine"}); tf.ExitCode != 0 || tf.Stdout.Head != "fine\n" {
		t.Fatalf("another run (default limits): %s", summarize(tf))
	}
}
