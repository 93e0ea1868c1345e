package image

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	imagetypes "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/pkg/jsonmessage"
)

// debootstrapDirs are searched for debootstrap after PATH: they are not on
// non-root users' PATH.
var debootstrapDirs = []string{"/usr/sbin", "/sbin"}

// findDebootstrap looks debootstrap up on PATH and in the sbin directories,
// which are not on non-root users' PATH.
func findDebootstrap() (string, error) {
	if p, err := exec.LookPath("debootstrap"); err == nil {
		return p, nil
	}
	for _, d := range debootstrapDirs {
		p := filepath.Join(d, "debootstrap")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNoDebootstrap
}

// buildOffline runs debootstrap into a temporary directory, prepares the
// root filesystem and imports it. It returns the work directory when
// o.KeepWorkDir is set.
func buildOffline(ctx context.Context, cli Engine, o Options, hash string, progress *lineWriter, log *slog.Logger) (kept string, err error) {
	deb, err := findDebootstrap()
	if err != nil {
		return "", err
	}
	if os.Geteuid() != 0 {
		return "", ErrNeedRoot
	}
	work, err := os.MkdirTemp("", "vera-sandbox-rootfs-")
	if err != nil {
		return "", err
	}
	if o.KeepWorkDir {
		defer func() { progress.printf("image: kept the work directory %s", work) }()
		kept = work
	} else {
		defer func() {
			if rmErr := removeWorkDir(work, log); rmErr != nil {
				log.Warn("could not remove the offline build's work directory", "dir", work, "err", rmErr)
				progress.printf("image: could not remove %s: %v", work, rmErr)
				err = errors.Join(err, rmErr)
			}
		}()
	}
	rootfs := filepath.Join(work, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return kept, err
	}
	// MkdirTemp made work 0700; the root of the image must be 0755, and
	// debootstrap's chroot needs to traverse.
	if err := os.Chmod(work, 0o755); err != nil {
		return kept, err
	}

	t0 := time.Now()
	if err := runDebootstrap(ctx, deb, o, rootfs, progress); err != nil {
		return kept, err
	}
	log.Info("debootstrap done", "duration", time.Since(t0))
	progress.printf("debootstrap: done in %s", time.Since(t0).Round(time.Second))

	if err := prepareRootfs(rootfs); err != nil {
		return kept, fmt.Errorf("preparing the root filesystem: %w", err)
	}
	t1 := time.Now()
	if err := importRootfs(ctx, cli, rootfs, hash, progress, log); err != nil {
		return kept, err
	}
	log.Info("import done", "duration", time.Since(t1))
	return kept, nil
}

// debootstrapArgs are the arguments of the debootstrap run.
func debootstrapArgs(o Options, rootfs string) []string {
	return []string{
		"--variant=minbase",
		"--include=" + strings.Join(packages, ","),
		o.Suite, rootfs, o.Mirror,
	}
}

func runDebootstrap(ctx context.Context, deb string, o Options, rootfs string, progress *lineWriter) error {
	args := debootstrapArgs(o, rootfs)
	progress.printf("debootstrap: running %s %s", deb, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, deb, args...)
	out := progress.prefixed("debootstrap")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = debootstrapEnv()
	// Its own process group, so that cancelling stops debootstrap and the
	// dpkg it runs in the chroot; SIGTERM first, so that its exit handler
	// unmounts the /proc and /sys it mounted in the target.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	err := cmd.Run()
	out.Flush()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("debootstrap interrupted: %w", context.Cause(ctx))
		}
		return fmt.Errorf("debootstrap %s from %s failed: %w; last output:\n%s", o.Suite, o.Mirror, err, out.Tail())
	}
	return nil
}

// debootstrapEnv is the environment of debootstrap: the caller's, with the
// sbin directories on PATH (debootstrap calls chroot, mknod, ...), a locale
// that exists in the new system and no debconf questions.
func debootstrapEnv() []string {
	var env []string
	path := ""
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH":
			path = v
		case k == "LANG" || k == "LANGUAGE" || strings.HasPrefix(k, "LC_") || k == "DEBIAN_FRONTEND":
		default:
			env = append(env, kv)
		}
	}
	dirs := filepath.SplitList(path)
	for _, d := range strings.Split(systemPath, ":") {
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return append(env, "PATH="+strings.Join(dirs, ":"), "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive")
}

// prepareRootfs does to the debootstrapped system what the Dockerfile does
// after installing the packages: remove apt's lists and caches, create the
// directories and install the login-shell profile. It also empties the
// network files debootstrap copied from the host (Docker provides its own).
func prepareRootfs(rootfs string) error {
	for _, pattern := range cleanup {
		matches, err := filepath.Glob(filepath.Join(rootfs, pattern))
		if err != nil {
			return err
		}
		for _, m := range matches {
			if err := os.RemoveAll(m); err != nil {
				return err
			}
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(rootfs, d), 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(rootfs, filepath.Dir(profilePath)), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(rootfs, profilePath), profileScript, 0o644); err != nil {
		return err
	}
	for _, f := range []string{"/etc/resolv.conf", "/etc/hostname"} {
		p := filepath.Join(rootfs, f)
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// importRootfs streams rootfs as a tar into `docker import`.
func importRootfs(ctx context.Context, cli Engine, rootfs, hash string, progress *lineWriter, log *slog.Logger) error {
	pr, pw := io.Pipe()
	tarDone := make(chan error, 1)
	var stats tarStats
	go func() {
		cw := &countingWriter{w: pw, every: 100 << 20, report: func(n int64) {
			progress.printf("import: sent %d MB", n/1e6)
		}}
		var err error
		stats, err = writeRootfsTar(cw, rootfs)
		pw.CloseWithError(err) // nil: EOF for the reader
		tarDone <- err
	}()
	progress.printf("import: streaming %s into docker import as %s:%s", rootfs, Repository, hash)
	err := func() error {
		body, err := cli.ImageImport(ctx, imagetypes.ImportSource{Source: pr, SourceName: "-"}, Repository+":"+hash, imagetypes.ImportOptions{
			Message: "vera sandbox image, offline build (debootstrap)",
			Changes: importChanges(hash),
		})
		if err != nil {
			return err
		}
		defer body.Close()
		return readMessages(body, func(m jsonmessage.JSONMessage) {
			if m.Status != "" && m.Progress == nil {
				progress.printf("import: %s", messageText(m))
			}
		})
	}()
	// Stop the tar writer if the import ended early, and wait for it.
	pr.CloseWithError(errors.New("import ended"))
	tarErr := <-tarDone
	if tarErr != nil && err == nil {
		err = tarErr
	}
	if err != nil {
		return fmt.Errorf("docker import: %w", err)
	}
	log.Info("root filesystem imported", "files", stats.entries, "bytes", stats.bytes, "skipped_devices", stats.skippedDevices, "skipped_sockets", stats.skippedSockets)
	note := ""
	if stats.skippedDevices > 0 {
		note = fmt.Sprintf(" (%d device files left out: Docker provides /dev)", stats.skippedDevices)
	}
	progress.printf("import: %d entries, %d MB%s", stats.entries, stats.bytes/1e6, note)
	return nil
}

type countingWriter struct {
	w      io.Writer
	n      int64
	next   int64
	every  int64
	report func(int64)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.n >= c.next+c.every {
		c.next = c.n - c.n%c.every
		c.report(c.n)
	}
	return n, err
}

type tarStats struct {
	entries        int
	bytes          int64
	skippedDevices int
	skippedSockets int
}

// emptyDirs are written as empty directories: the container runtime mounts
// its own file systems there.
var emptyDirs = map[string]bool{"proc": true, "sys": true, "dev": true}

// writeRootfsTar writes the tree under root as a tar stream with the names
// relative to root. Modes (with setuid/setgid/sticky bits), numeric owners,
// modification times, symlinks, hard links and FIFOs are kept; device files
// and sockets are left out, the contents of /proc, /sys and /dev are left
// out, and so is anything on another file system (a mount left behind).
func writeRootfsTar(w io.Writer, root string) (tarStats, error) {
	var st tarStats
	rootInfo, err := os.Lstat(root)
	if err != nil {
		return st, err
	}
	rootDev := rootInfo.Sys().(*syscall.Stat_t).Dev
	tw := tar.NewWriter(w)
	type inode struct{ dev, ino uint64 }
	links := map[inode]string{}

	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		name := filepath.ToSlash(rel)
		fi, err := os.Lstat(path)
		if err != nil {
			return err
		}
		sys := fi.Sys().(*syscall.Stat_t)
		hdr := &tar.Header{
			Name:    name,
			Mode:    int64(sys.Mode & 0o7777),
			Uid:     int(sys.Uid),
			Gid:     int(sys.Gid),
			ModTime: fi.ModTime(),
			Format:  tar.FormatPAX,
		}
		var file string
		switch mode := fi.Mode(); {
		case mode.IsDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			if sys.Dev != rootDev || emptyDirs[name] {
				if sys.Dev != rootDev {
					// A mount point: its own stat is the mounted root's.
					hdr.Mode, hdr.Uid, hdr.Gid = 0o755, 0, 0
				}
				if err := tw.WriteHeader(hdr); err != nil {
					return err
				}
				st.entries++
				return fs.SkipDir
			}
		case mode.IsRegular():
			key := inode{uint64(sys.Dev), uint64(sys.Ino)}
			if first, ok := links[key]; ok && sys.Nlink > 1 {
				hdr.Typeflag = tar.TypeLink
				hdr.Linkname = first
				break
			}
			if sys.Nlink > 1 {
				links[key] = name
			}
			hdr.Typeflag = tar.TypeReg
			hdr.Size = fi.Size()
			file = path
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = target
		case mode&fs.ModeNamedPipe != 0:
			hdr.Typeflag = tar.TypeFifo
		case mode&fs.ModeDevice != 0:
			st.skippedDevices++
			return nil
		case mode&fs.ModeSocket != 0:
			st.skippedSockets++
			return nil
		default:
			return fmt.Errorf("%s: unsupported file type %v", path, mode.Type())
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		st.entries++
		if file != "" {
			n, err := copyFile(tw, file, hdr.Size)
			st.bytes += n
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	return st, tw.Close()
}

func copyFile(w io.Writer, path string, size int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, size))
	if err == nil && n != size {
		err = fmt.Errorf("%s: changed while being archived (%d of %d bytes)", path, n, size)
	}
	return n, err
}

// removeWorkDir unmounts whatever is still mounted under dir (debootstrap
// mounts /proc and /sys in its target and, when killed, may leave them),
// then removes dir. If a mount cannot be unmounted it removes nothing:
// deleting through a bind mount would delete the host's files.
func removeWorkDir(dir string, log *slog.Logger) error {
	for attempt := 0; ; attempt++ {
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			break
		}
		if attempt == 3 {
			return fmt.Errorf("not removing %s: still mounted there: %s", dir, strings.Join(mounts, ", "))
		}
		// Deepest first.
		slices.SortFunc(mounts, func(a, b string) int { return len(b) - len(a) })
		for _, m := range mounts {
			err := syscall.Unmount(m, syscall.MNT_DETACH)
			log.Info("unmounting what debootstrap left mounted", "path", m, "err", err)
		}
	}
	return os.RemoveAll(dir)
}

// mountsUnder lists the mount points at or below dir, from
// /proc/self/mountinfo.
func mountsUnder(dir string) ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// unescapeMountinfo decodes the octal escapes (\040 for a space, ...) of
// /proc/self/mountinfo paths.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
