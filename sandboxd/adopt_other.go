//go:build !linux

package sandboxd

import "errors"

var errNoExchange = errors.New("atomic rename exchange needs Linux")

func exchangePaths(a, b string) error   { return errNoExchange }
func renameNoReplace(a, b string) error { return errNoExchange }
