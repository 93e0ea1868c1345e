package image_test

// Integration tests against the real Docker Engine. They skip when Docker is
// unreachable (or debootstrap/root is missing), unless VERA_REQUIRE_DOCKER=1.
//
// The shared sandbox image (vera-sandbox:<hash> for the machine's offline
// recipe) is built if missing and kept: other packages' tests use it through
// imagetest.Ensure, and later runs reuse it. When it already exists,
// TestOfflineBuild builds a fresh copy under a salted tag to exercise the
// build, and removes that copy.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	imagetypes "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/vera-run/vera/sandboxd/image"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// offlineBuildOptIn skips tests that run debootstrap: they download from
// the Debian mirror, and tests by default talk only to loopback and their
// own containers (the image itself is built by the install step).
func offlineBuildOptIn(t *testing.T) {
	t.Helper()
	if os.Getenv("VERA_TEST_OFFLINE_BUILD") != "1" {
		t.Skip("runs debootstrap against the Debian mirror: set VERA_TEST_OFFLINE_BUILD=1 to run it (the install step `vera sandbox build --offline` builds the image)")
	}
}

// TestSharedImage checks the image the install step built: every tool, the
// environment, and that building again reuses it.
func TestSharedImage(t *testing.T) {
	cli := imagetest.Client(t)
	tag := imagetest.Ensure(t)
	checkImage(t, cli, tag)
	res, err := image.Build(t.Context(), cli, image.Options{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Reused || res.Tag != tag || res.Duration > 10*time.Second {
		t.Fatalf("Build of an existing image = %+v, want it reused at once", res)
	}
}

func TestOfflineBuild(t *testing.T) {
	offlineBuildOptIn(t)
	cli := imagetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), imagetest.BuildTimeout)
	defer cancel()

	opts := image.Options{Offline: true, Progress: progressLog(t)}
	shared, err := image.Build(ctx, cli, opts)
	if errors.Is(err, image.ErrNoDebootstrap) || errors.Is(err, image.ErrNeedRoot) {
		imagetest.Unavailable(t, "cannot build the sandbox image offline: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if shared.Tag != image.Tag(image.Options{Offline: true}) || !shared.Offline || shared.ID == "" {
		t.Fatalf("Build = %+v", shared)
	}

	build := func(salt string) (image.Result, error) {
		if salt == "" {
			return image.Build(ctx, cli, opts)
		}
		return image.BuildSalted(ctx, cli, opts, salt)
	}
	fresh, salt := shared, ""
	if shared.Reused {
		salt = "test-" + randomHex(t)
		t.Logf("%s exists already (kept from an earlier run); building a fresh copy under a salted tag", shared.Tag)
		fresh, err = build(salt)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeImage(t, cli, fresh.Tag) })
		if fresh.Reused || fresh.Tag == shared.Tag {
			t.Fatalf("salted build = %+v", fresh)
		}
	}
	t.Logf("offline build of %s: %s, image size %d MB", fresh.Tag, fresh.Duration.Round(time.Second), fresh.Size/1e6)

	checkImage(t, cli, fresh.Tag)

	again, err := build(salt)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || again.ID != fresh.ID || again.Tag != fresh.Tag {
		t.Errorf("second Build = %+v, want the image of %+v reused", again, fresh)
	}
	if again.Duration > 10*time.Second {
		t.Errorf("reusing the image took %s", again.Duration)
	}

	if got := imagetest.Ensure(t); got != shared.Tag {
		t.Errorf("imagetest.Ensure = %s, want %s", got, shared.Tag)
	}
}

// TestOnlineBuildOnLocalBase runs the Dockerfile build with the offline
// image as its base (there is no registry to pull debian:bookworm-slim
// from). Its apt-get needs the Debian mirror from inside build containers, so
// it only runs with VERA_TEST_ONLINE_BUILD=1.
func TestOnlineBuildOnLocalBase(t *testing.T) {
	if os.Getenv("VERA_TEST_ONLINE_BUILD") != "1" {
		t.Skip("set VERA_TEST_ONLINE_BUILD=1 to run the Dockerfile build (needs the Debian mirror from build containers)")
	}
	base := imagetest.Ensure(t)
	cli := imagetest.Client(t)
	ctx, cancel := context.WithTimeout(t.Context(), imagetest.BuildTimeout)
	defer cancel()
	opts := image.Options{BaseImage: base, Progress: progressLog(t)}
	res, err := image.Build(ctx, cli, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Reused {
		t.Cleanup(func() { removeImage(t, cli, res.Tag) })
	}
	if res.Tag != image.Tag(opts) || res.Offline {
		t.Fatalf("Build = %+v", res)
	}
	t.Logf("online build of %s on %s: %s", res.Tag, base, res.Duration.Round(time.Second))
	checkImage(t, cli, res.Tag)
}

// checkImage checks the image's configuration, then runs a container from it
// and checks the tools.
func checkImage(t *testing.T, cli *client.Client, tag string) {
	t.Helper()
	ctx := t.Context()
	img, err := cli.ImageInspect(ctx, tag)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config == nil {
		t.Fatalf("%s has no config", tag)
	}
	hash := strings.TrimPrefix(tag, image.Repository+":")
	if img.Config.Labels[image.LabelRecipe] != hash || img.Config.Labels[image.LabelBuiltBy] != image.BuiltBy {
		t.Errorf("labels %v", img.Config.Labels)
	}
	if !slices.Equal(img.Config.Cmd, []string{"sleep", "infinity"}) || !slices.Equal(img.Config.Cmd, image.Cmd()) {
		t.Errorf("Cmd %q", img.Config.Cmd)
	}
	if !slices.Equal(img.Config.Entrypoint, image.Entrypoint()) {
		t.Errorf("Entrypoint %q", img.Config.Entrypoint)
	}
	if img.Config.WorkingDir != image.WorkDir {
		t.Errorf("WorkingDir %q", img.Config.WorkingDir)
	}
	for _, kv := range image.Env() {
		if !slices.Contains(img.Config.Env, kv) {
			t.Errorf("image env %q lacks %s", img.Config.Env, kv)
		}
	}

	created, err := cli.ContainerCreate(ctx, &container.Config{
		Image:  tag,
		Labels: map[string]string{"vera.test": "sandboxd/image"},
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "vera-image-test-"+randomHex(t))
	if err != nil {
		t.Fatal(err)
	}
	id := created.ID
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			t.Errorf("removing the test container: %v", err)
		}
	})
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	ct, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if ct.State == nil || !ct.State.Running || ct.Path != "/usr/bin/tini" || !slices.Equal(ct.Args, []string{"--", "sleep", "infinity"}) {
		t.Errorf("container: state=%+v %s %q", ct.State, ct.Path, ct.Args)
	}

	sh := func(script string) string {
		t.Helper()
		code, stdout, stderr, err := execIn(ctx, cli, id, "sh", "-c", script)
		if err != nil {
			t.Fatalf("exec %q: %v", script, err)
		}
		if code != 0 {
			t.Errorf("%q exited %d\nstdout: %s\nstderr: %s", script, code, stdout, stderr)
		}
		return stdout
	}
	for _, c := range []struct{ script, want string }{
		{"bash --version", "GNU bash"},
		{"python3 -m venv /tmp/v && /tmp/v/bin/pip --version", "pip "},
		{"curl --version", "curl "},
		{"wget --version", "GNU Wget"},
		{"git --version", "git version"},
		{"jq --version", "jq-"},
		{"ps -eo args", "sleep infinity"},
		{"ls /etc/ssl/certs/ca-certificates.crt", "ca-certificates.crt"},
		{"test -d /work && test -d /input && test -d /opt/vera && pwd", "/work\n"},
		{`echo "$PATH"`, "/work/.venv/bin:"},
		{`bash -lc 'echo "$PATH"'`, "/work/.venv/bin:"},
		{`echo "$LANG $PIP_CACHE_DIR $XDG_CACHE_HOME"`, "C.UTF-8 /work/.cache/pip /work/.cache\n"},
		{`python3 -c 'import sys; print(sys.getfilesystemencoding(), sys.stdout.encoding)'`, "utf-8 utf-8\n"},
		// A new shell, as the agent's next command would be (this one has
		// python3 hashed already).
		{"python3 -m venv /work/.venv && sh -c 'command -v python3; command -v pip'", "/work/.venv/bin/python3\n/work/.venv/bin/pip\n"},
		{"tr '\\0' ' ' </proc/1/cmdline", "/usr/bin/tini -- sleep infinity"},
	} {
		out := sh(c.script)
		if c.want != "" && !strings.HasPrefix(out, c.want) && !strings.Contains(out, c.want) {
			t.Errorf("%q printed %q, want %q", c.script, out, c.want)
		}
		if strings.HasPrefix(c.want, "/work/.venv/bin:") && !strings.HasPrefix(out, c.want) {
			t.Errorf("%q: PATH %q does not start with /work/.venv/bin", c.script, out)
		}
	}
	if out := sh("ls -A /var/lib/apt/lists /var/cache/apt/archives"); strings.Contains(out, ".deb") || strings.Contains(out, "Packages") {
		t.Errorf("apt caches left in the image:\n%s", out)
	}
}

// execIn runs cmd in the running container id and returns its exit code
// and output.
func execIn(ctx context.Context, cli *client.Client, id string, cmd ...string) (int, string, string, error) {
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, "", "", err
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return 0, "", "", err
	}
	defer att.Close()
	var stdout, stderr strings.Builder
	if _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); err != nil {
		return 0, "", "", err
	}
	for {
		st, err := cli.ContainerExecInspect(ctx, ex.ID)
		if err != nil {
			return 0, "", "", err
		}
		if !st.Running {
			return st.ExitCode, stdout.String(), stderr.String(), nil
		}
		select {
		case <-ctx.Done():
			return 0, "", "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func removeImage(t *testing.T, cli *client.Client, tag string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := cli.ImageRemove(ctx, tag, imagetypes.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Errorf("removing the test image: %v", err)
	}
}

func randomHex(t *testing.T) string {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// progressLog logs the build's progress lines to the test log, leaving out
// debootstrap's per-package lines.
func progressLog(t *testing.T) *logWriter { return &logWriter{t: t} }

type logWriter struct{ t *testing.T }

func (w *logWriter) Write(p []byte) (int, error) {
	for line := range strings.Lines(string(p)) {
		line = strings.TrimRight(line, "\n")
		if strings.HasPrefix(line, "debootstrap: I: ") {
			continue
		}
		w.t.Log(line)
	}
	return len(p), nil
}
