package rundir

import "golang.org/x/sys/unix"

// renameNoReplace renames from (in directory fromFD) to to (in toFD),
// failing if to exists.
func renameNoReplace(fromFD int, from string, toFD int, to string) error {
	return unix.Renameat2(fromFD, from, toFD, to, unix.RENAME_NOREPLACE)
}
