package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	imagetypes "github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
)

// fakeEngine records the calls Build makes.
type fakeEngine struct {
	mu          sync.Mutex
	images      map[string]imagetypes.InspectResponse
	buildStream string // answer of ImageBuild
	builds      []build.ImageBuildOptions
	contexts    [][]byte
	imports     int
	inspectErr  error
}

func newFake() *fakeEngine {
	return &fakeEngine{images: map[string]imagetypes.InspectResponse{}}
}

func (f *fakeEngine) DaemonHost() string { return "unix:///fake/docker.sock" }

func (f *fakeEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (imagetypes.InspectResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inspectErr != nil {
		return imagetypes.InspectResponse{}, f.inspectErr
	}
	img, ok := f.images[ref]
	if !ok {
		return img, fmt.Errorf("No such image: %s: %w", ref, cerrdefs.ErrNotFound)
	}
	return img, nil
}

func (f *fakeEngine) ImageBuild(_ context.Context, bc io.Reader, opts build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	b, err := io.ReadAll(bc)
	if err != nil {
		return build.ImageBuildResponse{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.builds = append(f.builds, opts)
	f.contexts = append(f.contexts, b)
	if !strings.Contains(f.buildStream, `"error`) {
		for _, t := range opts.Tags {
			f.images[t] = imagetypes.InspectResponse{ID: "sha256:built", Size: 123}
		}
	}
	return build.ImageBuildResponse{Body: io.NopCloser(strings.NewReader(f.buildStream))}, nil
}

func (f *fakeEngine) ImageImport(context.Context, imagetypes.ImportSource, string, imagetypes.ImportOptions) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.imports++
	return nil, errors.New("fake: no import")
}

func TestBuildReusesAnExistingImage(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	for _, offline := range []bool{false, true} {
		opts := Options{Offline: offline, Suite: "bookworm", Mirror: "http://deb.debian.org/debian"}
		tag := Tag(opts)
		f := newFake()
		f.images[tag] = imagetypes.InspectResponse{ID: "sha256:abc", Size: 42}
		var progress bytes.Buffer
		opts.Progress = &progress
		res, err := Build(t.Context(), f, opts)
		if err != nil {
			t.Fatal(err)
		}
		want := Result{Tag: tag, ID: "sha256:abc", Size: 42, Reused: true, Offline: offline, Duration: res.Duration}
		if res != want {
			t.Errorf("Build = %+v, want %+v", res, want)
		}
		if len(f.builds) != 0 || f.imports != 0 {
			t.Errorf("built although the image exists: %d builds, %d imports", len(f.builds), f.imports)
		}
		if !strings.Contains(progress.String(), "image: reusing "+tag) {
			t.Errorf("progress: %q", progress.String())
		}
	}
}

func TestBuildOnline(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	f := &fakeEngine{
		images: map[string]imagetypes.InspectResponse{},
		buildStream: `{"stream":"Step 1/6 : ARG BASE_IMAGE=debian:bookworm-slim\n"}
{"stream":"\n"}
{"stream":"\u001b[91m+ apt-get\u001b[0m"}
{"stream":"\u001b[91m update\n\u001b[0m"}
{"status":"Pulling from library/debian","id":"bookworm"}
{"status":"Downloading","progressDetail":{"current":1,"total":2},"progress":"[=>  ]","id":"abc"}
{"aux":{"ID":"sha256:built"}}
{"stream":"Successfully built built\nSuccessfully tagged x\n"}
`,
	}
	var progress bytes.Buffer
	res, err := Build(t.Context(), f, Options{BaseImage: "registry.example/debian:12", Progress: &progress})
	if err != nil {
		t.Fatal(err)
	}
	tag := Tag(Options{BaseImage: "registry.example/debian:12"})
	if res.Tag != tag || res.ID != "sha256:built" || res.Reused || res.Offline {
		t.Errorf("Build = %+v", res)
	}
	if len(f.builds) != 1 {
		t.Fatalf("%d builds", len(f.builds))
	}
	b := f.builds[0]
	if len(b.Tags) != 1 || b.Tags[0] != tag || b.BuildArgs["BASE_IMAGE"] == nil || *b.BuildArgs["BASE_IMAGE"] != "registry.example/debian:12" ||
		!b.Remove || !b.ForceRemove || b.Version != build.BuilderV1 ||
		b.Labels[LabelRecipe] != Hash(Options{BaseImage: "registry.example/debian:12"}) || b.Labels[LabelBuiltBy] != BuiltBy {
		t.Errorf("build options: %+v", b)
	}
	if !bytes.Equal(f.contexts[0], BuildContext()) {
		t.Error("the build context is not BuildContext()")
	}
	if strings.Contains(progress.String(), "Downloading") {
		t.Errorf("progress bars in the progress:\n%s", progress.String())
	}
	for _, want := range []string{
		"build: Step 1/6 : ARG BASE_IMAGE=debian:bookworm-slim\n",
		"build: bookworm: Pulling from library/debian\n",
		"build: + apt-get update\n",
		"build: Successfully built built\nbuild: Successfully tagged x\n",
	} {
		if !strings.Contains(progress.String(), want) {
			t.Errorf("progress lacks %q:\n%s", want, progress.String())
		}
	}
}

func TestBuildOnlineStreamErrorFailsTheBuild(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	f := &fakeEngine{
		images: map[string]imagetypes.InspectResponse{},
		buildStream: `{"stream":"Step 1/6 : ARG BASE_IMAGE=debian:bookworm-slim\n"}
{"errorDetail":{"message":"pull access denied for debian, repository does not exist"},"error":"pull access denied for debian, repository does not exist"}
`,
	}
	_, err := Build(t.Context(), f, Options{})
	var se *jsonmessage.JSONError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "pull access denied") || !strings.Contains(err.Error(), Tag(Options{})) ||
		!strings.Contains(err.Error(), "last output:\nStep 1/6") {
		t.Fatalf("Build error = %v, want the stream's error with the tag", err)
	}
}

func TestBuildInspectErrorIsReported(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	f := newFake()
	f.inspectErr = errors.New("boom")
	if _, err := Build(t.Context(), f, Options{}); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Build error = %v", err)
	}
}

func TestDockerUnreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	t.Setenv("DOCKER_API_VERSION", "")
	t.Setenv("DOCKER_CERT_PATH", "")
	_, err := Connect(t.Context())
	if err == nil || !strings.Contains(err.Error(), "DOCKER_HOST") || !strings.Contains(err.Error(), sock) {
		t.Fatalf("Connect error = %v, want one naming DOCKER_HOST and the socket", err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, err = Build(t.Context(), cli, Options{})
	if err == nil || !strings.Contains(err.Error(), "DOCKER_HOST") || !strings.Contains(err.Error(), sock) {
		t.Fatalf("Build error = %v, want one naming DOCKER_HOST and the socket", err)
	}
}

func TestReadMessages(t *testing.T) {
	var got []string
	err := readMessages(strings.NewReader(`{"stream":"Step 1/2 : FROM x\n"}
{"status":"Downloading","progressDetail":{"current":1},"id":"abc"}
{"aux":{"ID":"sha256:1"}}
{"errorDetail":{"code":1,"message":"The command '/bin/sh -c false' returned a non-zero code: 1"},"error":"The command '/bin/sh -c false' returned a non-zero code: 1"}
{"stream":"never read"}
`), func(m jsonmessage.JSONMessage) { got = append(got, m.Stream+messageText(m)) })
	var je *jsonmessage.JSONError
	if !errors.As(err, &je) || je.Code != 1 || !strings.Contains(je.Message, "non-zero code: 1") {
		t.Fatalf("err = %v", err)
	}
	want := []string{"Step 1/2 : FROM x\n", "abc: Downloading", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("messages %q, want %q", got, want)
	}
	if err := readMessages(strings.NewReader(`{"error":"only the old field"}`), func(jsonmessage.JSONMessage) {}); err == nil || err.Error() != "only the old field" {
		t.Errorf("err = %v", err)
	}
	if err := readMessages(strings.NewReader(`{"stream":"cut`), func(jsonmessage.JSONMessage) {}); err == nil || errors.As(err, &je) {
		t.Errorf("truncated stream: err = %v", err)
	}
	if err := readMessages(strings.NewReader(""), func(jsonmessage.JSONMessage) {}); err != nil {
		t.Errorf("empty stream: %v", err)
	}
}

func TestBuildOfflineWithoutDebootstrap(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	old := debootstrapDirs
	debootstrapDirs = []string{t.TempDir()}
	t.Cleanup(func() { debootstrapDirs = old })
	f := newFake()
	_, err := Build(t.Context(), f, Options{Offline: true, Suite: "bookworm", Mirror: "http://deb.debian.org/debian"})
	if !errors.Is(err, ErrNoDebootstrap) || !strings.Contains(err.Error(), "debootstrap not found: apt-get install debootstrap") {
		t.Fatalf("Build error = %v, want ErrNoDebootstrap", err)
	}
}

func TestLockTagWaits(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	unlock, err := lockTag(t.Context(), "test-lock-"+strings.ReplaceAll(t.Name(), "/", "_"), func() { t.Error("first lock waited") })
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	got := make(chan error, 1)
	go func() {
		u, err := lockTag(t.Context(), "test-lock-"+strings.ReplaceAll(t.Name(), "/", "_"), func() { close(waited) })
		if err == nil {
			u()
		}
		got <- err
	}()
	<-waited
	unlock()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	unlock, err = lockTag(ctx, "test-lock-"+strings.ReplaceAll(t.Name(), "/", "_"), func() {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { unlock() }() // the unlock in force at the end
	cancel()
	if _, err := lockTag(ctx, "test-lock-"+strings.ReplaceAll(t.Name(), "/", "_"), func() {}); !errors.Is(err, context.Canceled) {
		t.Fatalf("lockTag with a cancelled context = %v", err)
	}
	unlock()
	unlock = func() {}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "vera-sandbox-*.lock")); len(left) != 0 {
		t.Errorf("lock files left: %v", left)
	}
}

func TestLockTagExcludesManyWaiters(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var mu sync.Mutex
	inside, maxInside := 0, 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			unlock, err := lockTag(t.Context(), "many", func() {})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			inside++
			maxInside = max(maxInside, inside)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			mu.Lock()
			inside--
			mu.Unlock()
			unlock()
		})
	}
	wg.Wait()
	if maxInside != 1 {
		t.Errorf("%d holders at once", maxInside)
	}
}

// tarEntries reads a tar stream into name → header.
func tarEntries(t *testing.T, b []byte) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	hdrs := map[string]*tar.Header{}
	data := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, data
		}
		if err != nil {
			t.Fatal(err)
		}
		c, _ := io.ReadAll(tr)
		hdrs[h.Name] = h
		data[h.Name] = string(c)
	}
}
