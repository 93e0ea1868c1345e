//go:build !linux

package image

import (
	"context"
	"errors"
	"log/slog"
)

func buildOffline(context.Context, Engine, Options, string, *lineWriter, *slog.Logger) (string, error) {
	return "", errors.New("the offline build (debootstrap) works on Linux only")
}
