//go:build unix && !linux

package rundir

import "golang.org/x/sys/unix"

// renameNoReplace is not offered where the kernel has no rename that
// refuses to replace: the caller falls back (the warm pool makes a new
// container instead of claiming one).
func renameNoReplace(fromFD int, from string, toFD int, to string) error {
	return unix.ENOSYS
}
