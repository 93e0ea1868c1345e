package sandboxd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/rundir"
)

// SandboxUser is the container user when the daemon runs as root and no
// User is configured: an unprivileged uid and gid of no one on the host
// (the one distroless images call nonroot), never 0.
const SandboxUser = "65532:65532"

// ErrRefused marks a request sandboxd will not serve because of what the
// run asked for (a mount outside the operator's roots, lab mode the daemon
// does not allow, an image it does not allow): no container is created.
var ErrRefused = errors.New("refused")

// resolvePath makes p absolute and clean and resolves the symlinks of its
// deepest existing ancestor (rundir.Resolve), so that a path naming a
// directory that does not exist yet is judged by where it would be
// created.
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return rundir.Resolve(filepath.Clean(abs))
}

// within reports whether p is root or lies below it (both resolved).
func within(p, root string) bool {
	if root == string(filepath.Separator) {
		return true
	}
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// resolveAll resolves every path of a list, dropping empty ones.
func resolveAll(ps []string) ([]string, error) {
	var out []string
	for _, p := range ps {
		if p == "" {
			continue
		}
		r, err := resolvePath(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// checkMount returns the resolved dir if it lies under one of roots and
// neither contains nor lies inside a protected path.
func checkMount(kind, dir string, roots, protected []string, flag string) (string, error) {
	real, err := resolvePath(dir)
	if err != nil {
		return "", fmt.Errorf("%w: %s dir %s: %v", ErrRefused, kind, dir, err)
	}
	for _, p := range protected {
		if within(real, p) || within(p, real) {
			return "", fmt.Errorf("%w: %s dir %s would expose %s (VERA's own keys, store or spool) to the sandbox", ErrRefused, kind, dir, p)
		}
	}
	for _, r := range roots {
		if within(real, r) {
			return real, nil
		}
	}
	shown := dir
	if real != filepath.Clean(dir) {
		shown = fmt.Sprintf("%s (really %s)", dir, real)
	}
	if len(roots) == 0 {
		return "", fmt.Errorf("%w: %s dir %s: this sandboxd mounts no %s dirs (start it with %s DIR)", ErrRefused, kind, shown, kind, flag)
	}
	return "", fmt.Errorf("%w: %s dir %s is outside the directories this sandboxd may mount (%s); start it with %s to allow another",
		ErrRefused, kind, shown, strings.Join(roots, ", "), flag)
}

// runDirPath is the run's directory: its task's work_dir, else
// WorkRoot/<run_id>.
func (d *Daemon) runDirPath(rs *runState) string {
	if rs.cfg != nil && rs.cfg.WorkDir != "" {
		return rs.cfg.WorkDir
	}
	return filepath.Join(d.cfg.WorkRoot, rs.id)
}

// admit checks what a run asks of the sandbox against what the operator
// allows, before anything is created: its run dir (opened, made or
// claimed under the work roots: package rundir), its input dir, lab mode
// and image. It returns the run dir (held open for the run, see
// runState.dir) and the resolved input dir.
func (d *Daemon) admit(rs *runState) (*rundir.Dir, string, error) {
	var c *catalog.RunConfig
	input := ""
	if rs.cfg != nil {
		c = rs.cfg
		input = c.InputDir
	}
	dir, err := d.openRunDir(rs)
	if err != nil {
		return nil, "", err
	}
	if input != "" {
		if input, err = checkMount("input", input, d.cfg.InputRoots, d.cfg.Protected, "--input-root"); err != nil {
			return nil, "", err
		}
		if err := d.checkInputNotInRuns(input); err != nil {
			return nil, "", err
		}
		if st, err := os.Stat(input); err != nil || !st.IsDir() {
			return nil, "", fmt.Errorf("%w: input dir %s is not a directory", ErrRefused, input)
		}
	}
	if c != nil && c.Sandbox.Lab && !d.cfg.Lab {
		return nil, "", fmt.Errorf("%w: the run asks for lab mode (privileged, root), which this sandboxd does not allow (start it with --lab on a trusted machine)", ErrRefused)
	}
	if c != nil && c.Sandbox.Image != "" && c.Sandbox.Image != d.cfg.Image && !contains(d.cfg.AllowedImages, c.Sandbox.Image) {
		return nil, "", fmt.Errorf("%w: the run asks for image %s; this sandboxd runs %s (and the images given with --allow-image)", ErrRefused, c.Sandbox.Image, d.cfg.Image)
	}
	return dir, input, nil
}

// checkInputNotInRuns refuses an input dir (resolved) that holds a work
// root, or lies inside a run's directory (a directory between it and a
// work root has VERA's marker): mounting it would show the sandbox
// other runs' files and trees.
func (d *Daemon) checkInputNotInRuns(input string) error {
	for _, r := range d.cfg.WorkRoots {
		if within(r, input) {
			return fmt.Errorf("%w: input dir %s holds %s, where runs' directories lie", ErrRefused, input, r)
		}
		if !within(input, r) {
			continue
		}
		for dir := input; within(dir, r); dir = filepath.Dir(dir) {
			if _, err := os.Lstat(filepath.Join(dir, rundir.Marker)); err == nil {
				return fmt.Errorf("%w: input dir %s lies in run dir %s", ErrRefused, input, dir)
			}
			if dir == r {
				break
			}
		}
	}
	return nil
}

// openRunDir opens the run's directory once for the run state, making it
// (mode 0700, marked as the run's) or claiming it when it is empty. A
// refusal is remembered: the run's every request gets the same reason.
func (d *Daemon) openRunDir(rs *runState) (*rundir.Dir, error) {
	rs.dirMu.Lock()
	defer rs.dirMu.Unlock()
	if rs.dir != nil || rs.dirErr != nil {
		return rs.dir, rs.dirErr
	}
	path := d.runDirPath(rs)
	if abs, err := filepath.Abs(path); err == nil {
		for _, p := range d.cfg.Protected {
			if within(abs, p) || within(p, abs) {
				rs.dirErr = fmt.Errorf("%w: work dir %s would expose %s (VERA's own keys, store or spool) to the sandbox", ErrRefused, path, p)
				return nil, rs.dirErr
			}
		}
	}
	dir, err := rundir.Open(d.roots, path, rs.id, true)
	if err != nil {
		if errors.Is(err, rundir.ErrRefused) {
			rs.dirErr = fmt.Errorf("%w: work dir: %v (the run dirs this sandboxd may use lie under %s; start it with --work-root to allow another)",
				ErrRefused, strings.TrimPrefix(err.Error(), rundir.ErrRefused.Error()+": "), strings.Join(d.cfg.WorkRoots, ", "))
			return nil, rs.dirErr
		}
		return nil, fmt.Errorf("work dir %s: %w", path, err)
	}
	rs.dir = dir
	return dir, nil
}

// sandboxOwner is who gets a /work VERA makes: the container user, when
// the daemon runs as root for another user (-1, -1: nobody: the daemon's
// own user is the container's).
func (d *Daemon) sandboxOwner() (uid, gid int) {
	uid, gid, ok := numericUser(d.cfg.User)
	if !ok || os.Geteuid() != 0 || uid == 0 {
		return -1, -1
	}
	return uid, gid
}

// workDir returns the run's /work on the host, <run dir>/work, making it
// (handed to the sandbox user) when it is missing and create is set; a
// missing one without create is fs.ErrNotExist. It keeps the tree open
// for the watchdog's walk (workUsed).
func (d *Daemon) workDir(rs *runState, create bool) (string, error) {
	dir, _, err := d.admit(rs)
	if err != nil {
		return "", err
	}
	rs.dirMu.Lock()
	defer rs.dirMu.Unlock()
	if rs.work != nil {
		return rs.workPath, nil
	}
	uid, gid := d.sandboxOwner()
	path, f, err := dir.Work(create, uid, gid)
	if err != nil {
		if errors.Is(err, rundir.ErrRefused) {
			return "", fmt.Errorf("%w: %v", ErrRefused, err)
		}
		return "", err
	}
	rs.work, rs.workPath = f, path
	return path, nil
}

// forgetWork closes the /work the run state holds, so that the next use
// opens the run's work/ again (the warm pool's tree took its place).
func (rs *runState) forgetWork() {
	rs.dirMu.Lock()
	defer rs.dirMu.Unlock()
	if rs.work != nil {
		rs.work.Close()
		rs.work, rs.workPath = nil, ""
	}
}

// closeDir closes what the run state holds of the run's directory.
func (rs *runState) closeDir() {
	rs.dirMu.Lock()
	defer rs.dirMu.Unlock()
	if rs.work != nil {
		rs.work.Close()
		rs.work = nil
	}
	if rs.dir != nil {
		rs.dir.Close()
		rs.dir = nil
	}
}

// labFor reports whether the run's containers run in lab mode: the
// operator allowed it (--lab) and the run asked for it.
func (d *Daemon) labFor(rs *runState) bool {
	return d.cfg.Lab && rs.cfg != nil && rs.cfg.Sandbox.Lab
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// fileOwner returns the uid that owns a file.
func fileOwner(fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// ownerOf returns the uid and gid that own a file.
func ownerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
