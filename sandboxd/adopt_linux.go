//go:build linux

package sandboxd

import (
	"golang.org/x/sys/unix"
)

// exchangePaths swaps two paths atomically (renameat2 RENAME_EXCHANGE):
// a process that opens either path by name sees the old or the new
// directory, never none.
func exchangePaths(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// renameNoReplace renames a to b unless b exists (renameat2
// RENAME_NOREPLACE).
func renameNoReplace(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE)
}
