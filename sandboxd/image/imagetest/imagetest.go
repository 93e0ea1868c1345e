// Package imagetest gives tests the VERA sandbox image.
//
// Ensure builds the image offline (debootstrap from the machine's Debian
// mirror, then docker import: about a minute on the development machine)
// the first time and reuses it by tag afterwards. The image is kept on
// purpose: every test run, package and developer on the machine shares it,
// and a changed recipe gets a new tag. Remove old ones with
// `docker image rm vera-sandbox:<hash>`.
//
// When Docker is not reachable, or the offline build cannot run (no
// debootstrap, not root), the test is skipped with the reason, unless the
// environment has VERA_REQUIRE_DOCKER=1 (as CI does): then it fails.
package imagetest

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/vera-run/vera/sandboxd/image"
)

// RequireEnv is the environment variable that turns skips into failures.
const RequireEnv = "VERA_REQUIRE_DOCKER"

// BuildTimeout bounds the offline build in Ensure.
const BuildTimeout = 30 * time.Minute

// Unavailable skips the test because a prerequisite is missing, or fails
// it when VERA_REQUIRE_DOCKER=1.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf(format+" ("+RequireEnv+"=1: failing instead of skipping)", args...)
	}
	t.Skipf(format+" (skipping; set "+RequireEnv+"=1 to fail instead)", args...)
}

// Client returns a Docker client (image.Connect: configured from the
// environment, API version negotiated), closed when the test ends. It skips
// or fails (see Unavailable) when Docker is not reachable.
func Client(t testing.TB) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cli, err := image.Connect(ctx)
	if err != nil {
		Unavailable(t, "Docker is not reachable: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

var (
	mu     sync.Mutex
	cached string
)

// Ensure returns the tag of the sandbox image (image.Tag with the offline
// options). Tests never build it themselves: building talks to the Debian
// mirror, and tests talk only to loopback and their own containers. It is
// built by an install step (`vera sandbox build --offline`, which .ci/run
// runs); when it is missing the test is skipped with that instruction, or
// fails under VERA_REQUIRE_DOCKER=1.
func Ensure(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if cached != "" {
		return cached
	}
	cli := Client(t)
	tag := image.Tag(image.Options{Offline: true})
	if _, err := cli.ImageInspect(t.Context(), tag); err != nil {
		Unavailable(t, "sandbox image %s is not built (%v): run `go run ./cmd/vera sandbox build --offline` first (root and debootstrap needed)", tag, err)
	}
	cached = tag
	return cached
}
