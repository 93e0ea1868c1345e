package bus

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// credentialsOption turns a credentials file into a connection option: a
// NATS .creds file (user JWT and seed, as nsc and the nats CLI write
// them) or a bare nkey seed file (NAME.nk, as `vera up` writes them under
// DATA_DIR/creds).
func credentialsOption(path string) (nats.Option, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("NATS credentials: %w", err)
	}
	if bytes.Contains(b, []byte("BEGIN NATS USER JWT")) {
		return nats.UserCredentials(path), nil
	}
	opt, err := nats.NkeyOptionFromSeed(path)
	if err != nil {
		return nil, fmt.Errorf("NATS credentials %s: neither a .creds file nor an nkey seed: %w", path, err)
	}
	return opt, nil
}

// ErrNotAuthorized is returned by Connect when the server refuses the
// connection's credentials, or the connection has none and the server
// requires some.
var ErrNotAuthorized = errors.New("not authorized")

func authHint(opts Options, err error) error {
	if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		return nil
	}
	if opts.CredsFile == "" {
		return fmt.Errorf("connect to NATS at %s: %w: the server requires credentials (`vera up` keeps one identity per use in DATA_DIR/creds; pass --nats-creds FILE or NATS_CREDS)", opts.URL, ErrNotAuthorized)
	}
	return fmt.Errorf("connect to NATS at %s: %w: the server refused the credentials in %s", opts.URL, ErrNotAuthorized, opts.CredsFile)
}
