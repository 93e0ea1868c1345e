//go:build !linux && !darwin

package main

import "io"

// termWidth is the number of columns of the terminal w writes to, 0 when
// unknown (always, on this system).
func termWidth(io.Writer) int { return 0 }
