//go:build unix

package rundir

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Names and modes of a run dir (see the package comment).
const (
	// Marker is the file that says VERA made a directory for a run.
	Marker = ".vera-run"
	// WorkName is the sandbox's tree inside a run dir, mounted at /work.
	WorkName = "work"
	// DirMode is the mode of a run dir VERA makes or claims.
	DirMode os.FileMode = 0o700
	// FileMode is the mode of VERA's files in a run dir whose group may
	// not read it (see Dir.FileMode).
	FileMode os.FileMode = 0o600

	// reservedPrefix starts the names of VERA's own directories under a
	// root (the warm pool's .vera-pool): no run dir lies below one.
	reservedPrefix = ".vera"
	markerMax      = 4096
)

// ErrRefused marks a path VERA will not use as a run dir, or a file it
// will not open in one; the error says why.
var ErrRefused = errors.New("refused")

// ErrTooDeep is returned by UsedBytes for a tree deeper than MaxDepth.
var ErrTooDeep = errors.New("directory tree too deep to measure")

// MaxDepth bounds the depth UsedBytes walks (and so the descriptors it
// holds at once).
const MaxDepth = 1024

func refusef(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// Roots are the directories under which run dirs may lie: the operator's
// choice, never a task's. A root is taken as given (made absolute and
// clean) and as its symbolic links resolve now; below a root, no link is
// ever followed.
type Roots struct {
	list []root
}

type root struct {
	given, real string
}

// NewRoots resolves the given directories (empty ones are skipped, a
// missing one is judged by where it would be created).
func NewRoots(dirs ...string) (*Roots, error) {
	r := &Roots{}
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("run root %s: %w", d, err)
		}
		abs = filepath.Clean(abs)
		real, err := Resolve(abs)
		if err != nil {
			return nil, fmt.Errorf("run root %s: %w", d, err)
		}
		if seen[abs+"\x00"+real] {
			continue
		}
		seen[abs+"\x00"+real] = true
		r.list = append(r.list, root{given: abs, real: real})
	}
	return r, nil
}

// Dirs are the roots, resolved.
func (r *Roots) Dirs() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.list))
	for _, x := range r.list {
		out = append(out, x.real)
	}
	return out
}

// Len is the number of roots.
func (r *Roots) Len() int {
	if r == nil {
		return 0
	}
	return len(r.list)
}

// Contains reports whether path (absolute) lies under one of the roots,
// by its name alone.
func (r *Roots) Contains(path string) bool {
	_, _, ok := r.locate(filepath.Clean(path))
	return ok
}

// locate returns the root p lies under (the deepest that matches) and
// the names below it.
func (r *Roots) locate(p string) (root, []string, bool) {
	var best root
	var bestBase string
	found := false
	if r == nil {
		return best, nil, false
	}
	for _, x := range r.list {
		for _, base := range []string{x.given, x.real} {
			if !under(p, base) {
				continue
			}
			if !found || len(base) > len(bestBase) {
				best, bestBase, found = x, base, true
			}
		}
	}
	if !found {
		return root{}, nil, false
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(p, bestBase), "/")
	if rest == "" {
		return best, nil, true
	}
	return best, strings.Split(rest, "/"), true
}

func under(p, base string) bool {
	if base == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == base || strings.HasPrefix(p, base+"/")
}

// Resolve makes abs's deepest existing ancestor real (symlinks
// resolved), so that a directory not made yet is judged by where it
// would be made. It is how roots are taken; below a root nothing is
// resolved, since no link is followed there.
func Resolve(abs string) (string, error) {
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

// Dir is an open run directory. Every operation goes through its
// descriptor and names one entry; none follows a link.
type Dir struct {
	fd   int
	path string
	run  string
}

// Path is the run dir's path: its root resolved, then the names below it.
func (d *Dir) Path() string { return d.path }

// RunID is the run the directory was opened for ("" for OpenTrusted).
func (d *Dir) RunID() string { return d.run }

// Close closes the directory.
func (d *Dir) Close() error {
	if d == nil || d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

func (d *Dir) join(name string) string { return filepath.Join(d.path, name) }

// Open opens the run dir path of run runID under one of roots; with
// create it is made (mode 0700, with any missing directory between it
// and its root) or, when it exists empty, claimed for the run. See the
// package comment for what is refused; a refusal wraps ErrRefused, a
// missing directory without create fs.ErrNotExist.
func Open(roots *Roots, path, runID string, create bool) (*Dir, error) {
	if roots.Len() == 0 {
		return nil, refusef("run dir %s: no directories are configured for runs", path)
	}
	if runID == "" {
		return nil, refusef("run dir %s: no run id", path)
	}
	if !filepath.IsAbs(path) {
		return nil, refusef("run dir %q is not an absolute path", path)
	}
	p := filepath.Clean(path)
	rt, names, ok := roots.locate(p)
	if !ok {
		return nil, refusef("run dir %s is outside the directories runs may use (%s)", path, strings.Join(roots.Dirs(), ", "))
	}
	fd, err := unix.Open(rt.real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) && create {
		// The operator named the root; it is made when first used.
		if err := os.MkdirAll(rt.real, DirMode); err != nil {
			return nil, fmt.Errorf("run root %s: %w", rt.real, err)
		}
		fd, err = unix.Open(rt.real, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("run root %s: %w", rt.real, err)
	}
	cur := rt.real
	if err := checkAncestor(fd, cur); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Walk down to the run dir's parent.
	for i, name := range names {
		if name == "." || name == ".." || name == "" {
			unix.Close(fd)
			return nil, refusef("run dir %s: bad path element %q", path, name)
		}
		if strings.HasPrefix(name, reservedPrefix) {
			unix.Close(fd)
			return nil, refusef("run dir %s: %q is a name VERA reserves for its own directories", path, name)
		}
		if hasMarker(fd) {
			unix.Close(fd)
			return nil, refusef("run dir %s lies inside run dir %s (its files and its sandbox's /work)", path, cur)
		}
		if i == len(names)-1 {
			break
		}
		child, err := openChild(fd, name, create)
		unix.Close(fd)
		if err != nil {
			return nil, describe(filepath.Join(cur, name), err)
		}
		fd, cur = child, filepath.Join(cur, name)
		if err := checkAncestor(fd, cur); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	dfd := fd
	if len(names) > 0 {
		last := names[len(names)-1]
		dfd, err = openChild(fd, last, create)
		unix.Close(fd)
		if err != nil {
			return nil, describe(p, err)
		}
	}
	d := &Dir{fd: dfd, path: filepath.Join(rt.real, filepath.Join(names...)), run: runID}
	if err := d.claim(create); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// OpenTrusted opens a directory the operator named for VERA's files (a
// replay's output dir), made when missing with create: the path is taken
// as typed, links included; the files in it are still opened with
// O_NOFOLLOW and accepted only when regular.
func OpenTrusted(path string, create bool) (*Dir, error) {
	if create {
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return &Dir{fd: fd, path: abs}, nil
}

// openChild opens directory name below fd without following a link,
// making it (mode 0700) first when it is missing and create is set.
func openChild(fd int, name string, create bool) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NONBLOCK
	child, err := unix.Openat(fd, name, flags, 0)
	if errors.Is(err, unix.ENOENT) && create {
		if err := unix.Mkdirat(fd, name, uint32(DirMode)); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, err
		}
		child, err = unix.Openat(fd, name, flags, 0)
	}
	if errors.Is(err, unix.ENOTDIR) {
		// O_DIRECTORY|O_NOFOLLOW on a link says ENOTDIR: tell them apart.
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			err = unix.ELOOP
		}
	}
	return child, err
}

// describe turns an open's errno into what it means for a run dir.
func describe(path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return refusef("%s is a symbolic link; VERA follows no link below a run root", path)
	case errors.Is(err, unix.ENOTDIR):
		return refusef("%s is not a directory", path)
	case errors.Is(err, unix.ENOENT):
		return &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	return &fs.PathError{Op: "open", Path: path, Err: err}
}

// checkAncestor refuses a directory on the way to a run dir that another
// user owns or that any user may write without the sticky bit: whoever
// can write it can put another directory, or a link, in the run dir's
// place between VERA's checks and a mount by path.
func checkAncestor(fd int, path string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid && st.Uid != 0 {
		return refusef("%s belongs to uid %d, not to VERA's user (uid %d) or root", path, st.Uid, uid)
	}
	if st.Mode&0o002 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return refusef("%s may be written by any user", path)
	}
	return nil
}

// hasMarker reports whether the directory has an entry named Marker, of
// any kind: a directory that looks like a run dir is never walked
// through.
func hasMarker(fd int) bool {
	var st unix.Stat_t
	return unix.Fstatat(fd, Marker, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

type marker struct {
	VERARun int    `json:"vera_run"`
	RunID   string `json:"run_id"`
}

// claim checks the opened run dir and, with create, marks it as the
// run's when it is new or empty.
func (d *Dir) claim(create bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd, &st); err != nil {
		return fmt.Errorf("run dir %s: %w", d.path, err)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return refusef("run dir %s belongs to uid %d, not to VERA's user (uid %d): VERA uses only directories it made", d.path, st.Uid, uid)
	}
	m, err := d.readMarker()
	switch {
	case err == nil:
		if m.RunID != d.run {
			return refusef("%s is the directory of run %s; give run %s a new or empty directory", d.path, m.RunID, d.run)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if !create {
		return refusef("%s is not a run dir VERA made (no %s)", d.path, Marker)
	}
	empty, err := d.empty()
	if err != nil {
		return fmt.Errorf("run dir %s: %w", d.path, err)
	}
	if !empty {
		// Claimed meanwhile by another of VERA's processes?
		if m, err := d.readMarker(); err == nil {
			if m.RunID != d.run {
				return refusef("%s is the directory of run %s; give run %s a new or empty directory", d.path, m.RunID, d.run)
			}
			return nil
		}
		return refusef("%s is not empty and VERA did not make it; give the run a new or empty directory", d.path)
	}
	if err := unix.Fchmod(d.fd, uint32(DirMode)); err != nil {
		return fmt.Errorf("run dir %s: %w", d.path, err)
	}
	data, _ := json.Marshal(marker{VERARun: 1, RunID: d.run})
	// The marker appears whole or not at all: written to a temporary file,
	// then linked to its name (which fails if another of VERA's processes
	// claimed the directory at the same moment).
	f, tmp, err := d.CreateTemp(Marker, FileMode)
	if err != nil {
		return fmt.Errorf("mark run dir %s: %w", d.path, err)
	}
	_, werr := f.Write(append(data, '\n'))
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Linkat(d.fd, tmp, d.fd, Marker, 0)
	}
	_ = unix.Unlinkat(d.fd, tmp, 0)
	if errors.Is(werr, unix.EEXIST) {
		// Claimed at the same moment by another of VERA's processes.
		m, err := d.readMarker()
		if err != nil {
			return err
		}
		if m.RunID != d.run {
			return refusef("%s is the directory of run %s; give run %s a new or empty directory", d.path, m.RunID, d.run)
		}
		return nil
	}
	if werr != nil {
		return fmt.Errorf("mark run dir %s: %w", d.path, werr)
	}
	return d.Sync()
}

func (d *Dir) readMarker() (marker, error) {
	f, err := d.OpenFile(Marker, os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return marker{}, fs.ErrNotExist
		}
		return marker{}, refusef("run dir %s: its marker %s: %v", d.path, Marker, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, markerMax+1))
	if err != nil {
		return marker{}, fmt.Errorf("run dir %s: read %s: %w", d.path, Marker, err)
	}
	var m marker
	if len(data) > markerMax || json.Unmarshal(data, &m) != nil || m.VERARun != 1 || m.RunID == "" {
		return marker{}, refusef("run dir %s: its marker %s is not VERA's", d.path, Marker)
	}
	return m, nil
}

// empty reports whether the directory has no entries but a marker being
// written (another of VERA's processes claiming it at the same moment).
func (d *Dir) empty() (bool, error) {
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), d.path)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil && err != io.EOF {
		return false, err
	}
	for _, n := range names {
		if !strings.HasPrefix(n, "."+Marker+".tmp-") {
			return false, nil
		}
	}
	return true, nil
}

func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		return refusef("%q is not a file name", name)
	}
	return nil
}

// OpenFile opens the regular file name in the directory with flag (the
// os.O_* flags) and, when it creates it, perm. It never follows a link
// and never blocks on a FIFO; a file that is not regular, or that another
// user owns, is refused (ErrRefused).
func (d *Dir) OpenFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(d.fd, name, flag|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(perm.Perm()))
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, refusef("%s is a symbolic link", d.join(name))
		}
		if errors.Is(err, unix.ENXIO) {
			return nil, refusef("%s is not a regular file", d.join(name))
		}
		return nil, &fs.PathError{Op: "open", Path: d.join(name), Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "stat", Path: d.join(name), Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, refusef("%s is not a regular file", d.join(name))
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		unix.Close(fd)
		return nil, refusef("%s belongs to uid %d, not to VERA's user (uid %d)", d.join(name), st.Uid, uid)
	}
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err == nil {
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	return os.NewFile(uintptr(fd), d.join(name)), nil
}

// CreateTemp makes a new regular file named "."+prefix+".tmp-<random>"
// with mode perm and returns it open for writing.
func (d *Dir) CreateTemp(prefix string, perm os.FileMode) (*os.File, string, error) {
	for range 100 {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		name := "." + prefix + ".tmp-" + hex.EncodeToString(b)
		f, err := d.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return f, name, nil
	}
	return nil, "", fmt.Errorf("%s: no free temporary name for %s", d.path, prefix)
}

// Rename renames entry from to to, both in the directory.
func (d *Dir) Rename(from, to string) error {
	if err := checkName(from); err != nil {
		return err
	}
	if err := checkName(to); err != nil {
		return err
	}
	if err := unix.Renameat(d.fd, from, d.fd, to); err != nil {
		return &os.LinkError{Op: "rename", Old: d.join(from), New: d.join(to), Err: err}
	}
	return nil
}

// Remove removes the entry name (not a directory); a missing one is
// fs.ErrNotExist.
func (d *Dir) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := unix.Unlinkat(d.fd, name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: d.join(name), Err: err}
	}
	return nil
}

// Sync fsyncs the directory.
func (d *Dir) Sync() error {
	if err := unix.Fsync(d.fd); err != nil && !errors.Is(err, unix.EINVAL) {
		return &fs.PathError{Op: "sync", Path: d.path, Err: err}
	}
	return nil
}

// Work opens the run's sandbox tree, WorkName in the directory, making
// it (mode 0700) when it is missing and create is set. When uid >= 0 and
// the tree is VERA's own (this process's user owns it: VERA made it, in a
// directory only VERA writes), it is handed to uid:gid — the directory
// itself, never what is in it. A tree that is a link, not a directory, or
// owned by a third user is refused. It returns the tree's path (to mount)
// and an open descriptor of it (to measure it, UsedBytes).
func (d *Dir) Work(create bool, uid, gid int) (string, *os.File, error) {
	path := d.join(WorkName)
	fd, err := openChild(d.fd, WorkName, create)
	if err != nil {
		return "", nil, describe(path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return "", nil, fmt.Errorf("%s: %w", path, err)
	}
	me := os.Geteuid()
	switch {
	case int(st.Uid) == me && uid >= 0 && uid != me:
		if err := unix.Fchown(fd, uid, gid); err != nil {
			unix.Close(fd)
			return "", nil, fmt.Errorf("hand %s to %d:%d: %w", path, uid, gid, err)
		}
	case int(st.Uid) == me, uid >= 0 && int(st.Uid) == uid:
	default:
		unix.Close(fd)
		return "", nil, refusef("%s belongs to uid %d, neither VERA's user (uid %d) nor the sandbox's", path, st.Uid, me)
	}
	return path, os.NewFile(uintptr(fd), path), nil
}

// MoveIn renames the directory name of src into this directory as
// WorkName, only if the run has no tree yet (or an empty one): the warm
// pool's prepared /work becoming the run's. Both must be on one
// filesystem.
func (d *Dir) MoveIn(src *Dir, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	// An empty tree (made by an earlier attempt) may go; a full one stays.
	if err := unix.Unlinkat(d.fd, WorkName, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
		return &fs.PathError{Op: "move in", Path: d.join(WorkName), Err: err}
	}
	if err := renameNoReplace(src.fd, name, d.fd, WorkName); err != nil {
		return &os.LinkError{Op: "move in", Old: src.join(name), New: d.join(WorkName), Err: err}
	}
	return nil
}

// UsedBytes is what the tree below the open directory dir takes on disk
// (allocated blocks, so a sparse file counts for what it stores), walked
// from descriptors: no link is followed, no other filesystem entered, an
// entry that vanishes meanwhile is not counted. Deeper than MaxDepth it
// returns what it counted with ErrTooDeep.
func UsedBytes(dir *os.File) (int64, error) {
	fd, err := unix.Openat(int(dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, err
	}
	total := st.Blocks * 512
	err = walk(fd, uint64(st.Dev), 1, &total)
	return total, err
}

// walk adds what the entries of directory fd take to total, and closes fd.
func walk(fd int, dev uint64, depth int, total *int64) error {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil // vanished or unreadable: not counted
	}
	var deep error
	for _, name := range names {
		var st unix.Stat_t
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		*total += st.Blocks * 512
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || uint64(st.Dev) != dev {
			continue
		}
		if depth >= MaxDepth {
			deep = ErrTooDeep
			continue
		}
		child, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		if err := walk(child, dev, depth+1, total); err != nil {
			deep = err
		}
	}
	return deep
}
