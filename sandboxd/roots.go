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
// deepest existing ancestor, so that a path naming a directory that does
// not exist yet is judged by where it would be created.
func resolvePath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	abs = filepath.Clean(abs)
	rest := ""
	for cur := abs; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(real, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
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

// admit checks what a run asks of the sandbox against what the operator
// allows, before anything is created: its work and input dirs, lab mode
// and image. It returns the resolved dirs.
func (d *Daemon) admit(rs *runState) (work, input string, err error) {
	work = filepath.Join(d.cfg.WorkRoot, rs.id, "work")
	var c *catalog.RunConfig
	if rs.cfg != nil {
		c = rs.cfg
		if c.WorkDir != "" {
			work = c.WorkDir
		}
		input = c.InputDir
	}
	if work, err = checkMount("work", work, d.cfg.WorkRoots, d.cfg.Protected, "--work-root"); err != nil {
		return "", "", err
	}
	if input != "" {
		if input, err = checkMount("input", input, d.cfg.InputRoots, d.cfg.Protected, "--input-root"); err != nil {
			return "", "", err
		}
		if st, err := os.Stat(input); err != nil || !st.IsDir() {
			return "", "", fmt.Errorf("%w: input dir %s is not a directory", ErrRefused, input)
		}
	}
	if c != nil && c.Sandbox.Lab && !d.cfg.Lab {
		return "", "", fmt.Errorf("%w: the run asks for lab mode (privileged, root), which this sandboxd does not allow (start it with --lab on a trusted machine)", ErrRefused)
	}
	if c != nil && c.Sandbox.Image != "" && c.Sandbox.Image != d.cfg.Image && !contains(d.cfg.AllowedImages, c.Sandbox.Image) {
		return "", "", fmt.Errorf("%w: the run asks for image %s; this sandboxd runs %s (and the images given with --allow-image)", ErrRefused, c.Sandbox.Image, d.cfg.Image)
	}
	return work, input, nil
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
