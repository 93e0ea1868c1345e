package sandboxd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/rundir"
	"github.com/vera-run/vera/sandboxd"
)

// TestTasksOutsideTheRootsGetNoContainer: a task's work or input dir
// outside the operator's roots (also by a symlink), a work dir VERA may
// not use (a file, a full directory it did not make — ~/.ssh —, one inside
// another run's tree), an input dir inside a run's tree, or a request for
// lab mode the daemon does not allow, is refused with its reason, and no
// container and no directory is made for it, nothing is chowned.
func TestTasksOutsideTheRootsGetNoContainer(t *testing.T) {
	allowed := t.TempDir()
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(allowed, "escape")); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(allowed, "afile")
	if err := os.WriteFile(file, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ssh := filepath.Join(allowed, "ssh")
	if err := os.Mkdir(ssh, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ssh, "authorized_keys"), []byte("key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	roots, err := rundir.NewRoots(allowed)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rundir.Open(roots, filepath.Join(allowed, "other"), "other-run", true)
	if err != nil {
		t.Fatal(err)
	}
	otherWork, wf, err := other.Work(true, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	wf.Close()
	other.Close()
	if err := os.Mkdir(filepath.Join(otherWork, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	owners := func() map[string]string {
		out := map[string]string{}
		for _, p := range []string{file, ssh, filepath.Join(ssh, "authorized_keys"), otherWork} {
			fi, err := os.Lstat(p)
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			out[p] = fmt.Sprintf("%v %d:%d %d", fi.Mode(), st.Uid, st.Gid, fi.Size())
		}
		return out
	}
	before := owners()
	f := newFixture(t, func(c *sandboxd.Config) {
		c.WorkRoots, c.InputRoots = []string{allowed}, []string{allowed}
	})
	ctx := context.Background()
	cases := []struct {
		name string
		cfg  catalog.RunConfig
		want string
	}{
		{"work outside", catalog.RunConfig{WorkDir: filepath.Join(outside, "work")}, "outside the directories"},
		{"work through a symlink", catalog.RunConfig{WorkDir: filepath.Join(allowed, "escape", "work")}, "symbolic link"},
		{"work is a file", catalog.RunConfig{WorkDir: file}, "not a directory"},
		{"work is a full dir VERA did not make", catalog.RunConfig{WorkDir: ssh}, "not empty and VERA did not make it"},
		{"work in another run's /work", catalog.RunConfig{WorkDir: filepath.Join(otherWork, "sub")}, "lies inside run dir"},
		{"work is another run's", catalog.RunConfig{WorkDir: filepath.Join(allowed, "other")}, "is the directory of run other-run"},
		{"input in another run's /work", catalog.RunConfig{WorkDir: filepath.Join(allowed, "w0"), InputDir: otherWork}, "lies in run dir"},
		{"input /etc", catalog.RunConfig{WorkDir: filepath.Join(allowed, "w1"), InputDir: "/etc"}, "outside the directories"},
		{"work is /", catalog.RunConfig{WorkDir: "/"}, "would expose"}, // it holds the daemon's spool
		{"lab without --lab", catalog.RunConfig{WorkDir: filepath.Join(allowed, "w2"), Sandbox: catalog.SandboxConfig{Lab: true}}, "lab mode"},
		{"another image", catalog.RunConfig{WorkDir: filepath.Join(allowed, "w3"), Sandbox: catalog.SandboxConfig{Image: "debian:latest"}}, "image"},
	}
	for i, c := range cases {
		run := f.run("refused" + string(rune('a'+i)))
		c.cfg.Task = "t"
		ev, _ := f.b.Events.New(run, catalog.TaskSubmitted{RunConfig: c.cfg, SubmittedBy: "test"})
		if _, err := f.b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
		tf := f.exec(run, req{cmd: "id; cat /input/shadow; touch /work/owned"})
		if tf.ExitCode != -1 || !strings.Contains(tf.Error, "refused") || !strings.Contains(tf.Error, c.want) {
			t.Errorf("%s: %+v, want refused (%s)", c.name, tf, c.want)
		}
		list, err := f.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", sandboxd.LabelRun+"="+run))})
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 0 {
			t.Errorf("%s: a container was created: %v", c.name, list[0].Names)
		}
	}
	for _, p := range []string{filepath.Join(outside, "work"), filepath.Join(outside, "work", "owned")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created outside the roots", p)
		}
	}
	after := owners()
	for p, was := range before {
		if after[p] != was {
			t.Errorf("%s changed: %s → %s", p, was, after[p])
		}
	}
	if entries, _ := os.ReadDir(ssh); len(entries) != 1 {
		t.Errorf("the full dir VERA did not make got %d entries", len(entries))
	}
	// Inside the roots, the same daemon serves.
	run := f.run("inside")
	ev, _ := f.b.Events.New(run, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "t", WorkDir: filepath.Join(allowed, "ok")}, SubmittedBy: "test"})
	if _, err := f.b.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if tf := f.exec(run, req{cmd: "touch /work/owned && echo ok"}); tf.ExitCode != 0 {
		t.Fatalf("inside the roots: %s", summarize(tf))
	}
}

// TestRootDaemonRunsContainersUnprivileged: sandboxd as root with no
// --user runs its containers as SandboxUser, with no effective capability, and the
// sandbox can still write its work dir.
func TestRootDaemonRunsContainersUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the daemon is not root here; CI runs as root")
	}
	f := newFixture(t, nil)
	run := f.run("uid")
	tf := f.exec(run, req{cmd: "id -u; id -g; grep CapEff /proc/self/status; echo hi > /work/x && cat /work/x"})
	if tf.ExitCode != 0 {
		t.Fatalf("%s", summarize(tf))
	}
	lines := strings.Fields(tf.Stdout.Head)
	if len(lines) < 5 || lines[0] != "65532" || lines[1] != "65532" || lines[3] != "0000000000000000" || lines[4] != "hi" {
		t.Fatalf("as root without --user: %q, want uid/gid 65532, no effective capability, a writable /work", tf.Stdout.Head)
	}
	info, err := f.docker.ContainerInspect(context.Background(), sandboxd.ContainerName(run, "agent"))
	if err != nil {
		t.Fatal(err)
	}
	// KILL only, for sandboxd's own killer (root in the container); the
	// command's user has none effective (CapEff above).
	if len(info.HostConfig.CapAdd) != 1 || !strings.HasSuffix(info.HostConfig.CapAdd[0], "KILL") || info.HostConfig.Privileged {
		t.Fatalf("caps %v, privileged %v", info.HostConfig.CapAdd, info.HostConfig.Privileged)
	}
}
