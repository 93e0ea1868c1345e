package image

import "context"

// BuildSalted is Build with a salt hashed into the tag, so that a test can
// build a fresh image beside the shared one (and remove it afterwards).
func BuildSalted(ctx context.Context, cli Engine, opts Options, salt string) (Result, error) {
	opts.salt = salt
	return Build(ctx, cli, opts)
}
