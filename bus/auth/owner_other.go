//go:build !unix

package auth

import "io/fs"

// ownerOf is unknown off Unix: the mode checks are all there is.
func ownerOf(fs.FileInfo) (int, bool) { return 0, false }
