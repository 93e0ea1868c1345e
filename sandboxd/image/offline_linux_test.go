package image

import (
	"archive/tar"
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestWriteRootfsTar(t *testing.T) {
	root := t.TempDir()
	mk := func(name string, mode os.FileMode, content string) {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	mk("usr/bin/tool", 0o755|os.ModeSetuid, "#!/bin/sh\n")
	mk("etc/shadow", 0o640, "root:*:1::::::\n")
	mk("usr/share/a", 0o644, "same inode")
	mk("proc/self", 0o644, "leftover")
	mk("sys/kernel", 0o644, "leftover")
	mk("dev/null-ish", 0o644, "leftover")
	if err := os.Link(filepath.Join(root, "usr/share/a"), filepath.Join(root, "usr/share/b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("usr/bin", filepath.Join(root, "bin")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "run-fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "tmp"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	devices := 0
	if os.Geteuid() == 0 {
		if err := syscall.Mknod(filepath.Join(root, "dev2null"), syscall.S_IFCHR|0o666, 1<<8|3); err == nil {
			devices++
		}
	}
	mtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if err := os.Chtimes(filepath.Join(root, "etc/shadow"), mtime, mtime); err != nil {
		t.Fatal(err)
	}

	var buf bytes.Buffer
	st, err := writeRootfsTar(&buf, root)
	if err != nil {
		t.Fatal(err)
	}
	hdrs, data := tarEntries(t, buf.Bytes())
	var names []string
	for n := range hdrs {
		names = append(names, n)
	}
	slices.Sort(names)
	want := []string{"bin", "dev/", "etc/", "etc/shadow", "proc/", "run-fifo", "sys/", "tmp/", "usr/", "usr/bin/", "usr/bin/tool", "usr/share/", "usr/share/a", "usr/share/b"}
	if !slices.Equal(names, want) {
		t.Fatalf("entries:\n got %v\nwant %v", names, want)
	}
	if st.entries != len(want) || st.skippedDevices != devices {
		t.Errorf("stats %+v, want %d entries, %d devices", st, len(want), devices)
	}
	check := func(name string, typ byte, mode int64) *tar.Header {
		h := hdrs[name]
		if h.Typeflag != typ || h.Mode != mode {
			t.Errorf("%s: type %q mode %o, want %q %o", name, h.Typeflag, h.Mode, typ, mode)
		}
		if h.Uid != os.Geteuid() || h.Uname != "" {
			t.Errorf("%s: uid %d uname %q", name, h.Uid, h.Uname)
		}
		return h
	}
	check("usr/bin/tool", tar.TypeReg, 0o4755)
	if h := check("etc/shadow", tar.TypeReg, 0o640); !h.ModTime.Equal(mtime) || data["etc/shadow"] != "root:*:1::::::\n" {
		t.Errorf("etc/shadow: mtime %v content %q", h.ModTime, data["etc/shadow"])
	}
	check("tmp/", tar.TypeDir, 0o1777)
	check("run-fifo", tar.TypeFifo, 0o600)
	if h := check("bin", tar.TypeSymlink, 0o777); h.Linkname != "usr/bin" {
		t.Errorf("bin -> %q", h.Linkname)
	}
	// One of the two names carries the data, the other links to it.
	a, b := hdrs["usr/share/a"], hdrs["usr/share/b"]
	if a.Typeflag != tar.TypeReg || data["usr/share/a"] != "same inode" || b.Typeflag != tar.TypeLink || b.Linkname != "usr/share/a" {
		t.Errorf("hard link: a=%+v b=%+v", a, b)
	}
	for _, d := range []string{"proc/", "sys/", "dev/"} {
		for n := range hdrs {
			if strings.HasPrefix(n, d) && n != d {
				t.Errorf("%s is inside %s", n, d)
			}
		}
	}
}

func TestPrepareRootfs(t *testing.T) {
	root := writeTree(t, map[string]string{
		"var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages": "x",
		"var/cache/apt/archives/bash_5.2_amd64.deb":                                         "x",
		"var/cache/apt/pkgcache.bin":                                                        "x",
		"var/log/dpkg.log":                                                                  "x",
		"etc/resolv.conf":                                                                   "nameserver 10.0.0.1\n",
		"etc/hostname":                                                                      "buildhost\n",
		"usr/bin/bash":                                                                      "x",
	})
	if err := prepareRootfs(root); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"var/lib/apt/lists/deb.debian.org_debian_dists_bookworm_main_binary-amd64_Packages", "var/cache/apt/archives/bash_5.2_amd64.deb", "var/cache/apt/pkgcache.bin", "var/log/dpkg.log"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !os.IsNotExist(err) {
			t.Errorf("%s not removed", gone)
		}
	}
	for _, d := range []string{"work", "input", "opt/vera", "var/lib/apt/lists", "usr/bin/bash"} {
		if _, err := os.Stat(filepath.Join(root, d)); err != nil {
			t.Error(err)
		}
	}
	for _, f := range []string{"etc/resolv.conf", "etc/hostname"} {
		if b, err := os.ReadFile(filepath.Join(root, f)); err != nil || len(b) != 0 {
			t.Errorf("%s: %q %v, want empty", f, b, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/profile.d/vera.sh")); err != nil || !bytes.Equal(b, profileScript) {
		t.Errorf("profile: %q %v", b, err)
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b`: "/tmp/a b",
		`/plain`:      "/plain",
		`/x\134y`:     `/x\y`,
		`/trail\04`:   `/trail\04`,
	} {
		if got := unescapeMountinfo(in); got != want {
			t.Errorf("unescapeMountinfo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRemoveWorkDirUnmounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	dir := t.TempDir()
	sub := filepath.Join(dir, "rootfs", "proc")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	if m, _ := mountsUnder(dir); len(m) != 1 {
		t.Fatalf("mountsUnder = %v", m)
	}
	if err := removeWorkDir(dir, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists: %v", dir, err)
	}
}

func TestDebootstrapArgsAndEnv(t *testing.T) {
	args := debootstrapArgs(Options{Suite: "bookworm", Mirror: "http://m/debian"}, "/tmp/x/rootfs")
	want := []string{"--variant=minbase", "--include=" + strings.Join(packages, ","), "bookworm", "/tmp/x/rootfs", "http://m/debian"}
	if !slices.Equal(args, want) {
		t.Errorf("args %q, want %q", args, want)
	}
	t.Setenv("PATH", "/usr/bin:/bin")
	t.Setenv("LANG", "de_DE.UTF-8")
	env := debootstrapEnv()
	if !slices.Contains(env, "PATH=/usr/bin:/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin") || !slices.Contains(env, "LC_ALL=C") {
		t.Errorf("env %q", env)
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "LANG=") {
			t.Errorf("LANG passed on: %s", kv)
		}
	}
}

// offlinePrereqs skips the test when the offline build cannot run here
// (fails instead with VERA_REQUIRE_DOCKER=1, as CI sets).
func offlinePrereqs(t *testing.T) {
	t.Helper()
	_, err := findDebootstrap()
	if err == nil && os.Geteuid() != 0 {
		err = ErrNeedRoot
	}
	if err != nil {
		if os.Getenv("VERA_REQUIRE_DOCKER") == "1" {
			t.Fatalf("offline build prerequisites: %v", err)
		}
		t.Skipf("offline build prerequisites: %v (set VERA_REQUIRE_DOCKER=1 to fail instead)", err)
	}
}

// isolatedTmp points TMPDIR at a fresh directory and checks, before it is
// removed, that no mount and no work directory is left in it.
func isolatedTmp(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	t.Cleanup(func() {
		if m, _ := mountsUnder(dir); len(m) > 0 {
			t.Errorf("mounts left behind: %v", m)
			for _, p := range m {
				_ = syscall.Unmount(p, syscall.MNT_DETACH)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "vera-sandbox-rootfs-*")); len(left) > 0 {
			t.Errorf("work directories left behind: %v", left)
		}
	})
	return dir
}

func TestOfflineBuildFailureRemovesTheWorkDir(t *testing.T) {
	offlinePrereqs(t)
	isolatedTmp(t)
	f := newFake()
	var progress bytes.Buffer
	_, err := Build(t.Context(), f, Options{Offline: true, Suite: "bookworm", Mirror: "http://127.0.0.1:9/debian", Progress: &progress})
	if err == nil || !strings.Contains(err.Error(), "debootstrap bookworm from http://127.0.0.1:9/debian failed") {
		t.Fatalf("Build error = %v\nprogress:\n%s", err, progress.String())
	}
	if f.imports != 0 {
		t.Error("imported after a failed debootstrap")
	}
}

func TestOfflineBuildCancelledInTheChroot(t *testing.T) {
	if os.Getenv("VERA_TEST_OFFLINE_BUILD") != "1" {
		t.Skip("runs debootstrap against the Debian mirror: set VERA_TEST_OFFLINE_BUILD=1 to run it")
	}
	offlinePrereqs(t)
	isolatedTmp(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	// Cancel once debootstrap has mounted /proc and /sys in the target and
	// is running dpkg there.
	w := &cancelOn{substr: "I: Installing core packages", cancel: cancel}
	f := newFake()
	var logs bytes.Buffer
	_, err := Build(ctx, f, Options{Offline: true, Suite: "bookworm", Progress: w, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Logf("logs:\n%s", logs.String())
	if err == nil || !strings.Contains(err.Error(), "debootstrap interrupted") {
		t.Fatalf("Build error = %v", err)
	}
	if !w.seen.Load() {
		t.Error("cancelled before debootstrap reached the chroot")
	}
}

type cancelOn struct {
	substr string
	cancel func()
	seen   atomic.Bool
}

func (c *cancelOn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), c.substr) && !c.seen.Swap(true) {
		c.cancel()
	}
	return len(p), nil
}
