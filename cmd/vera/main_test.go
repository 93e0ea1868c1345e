package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/goleak"

	"github.com/docker/docker/api/types/container"
	"github.com/vera-run/vera/internal/dockertest"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
)

// syncBuffer is a bytes.Buffer safe for a writer and a poller.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start runs the CLI in the background until the returned stop is called.
func start(t *testing.T, args ...string) (stdout, stderr *syncBuffer, stop func() int) {
	t.Helper()
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	code := make(chan int, 1)
	go func() { code <- run(ctx, args, stdout, stderr) }()
	var once sync.Once
	var result int
	stop = func() int {
		once.Do(func() {
			cancel()
			select {
			case result = <-code:
			case <-time.After(30 * time.Second):
				t.Errorf("vera %v did not stop", args)
			}
		})
		return result
	}
	t.Cleanup(func() { stop() })
	return stdout, stderr, stop
}

func runCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	// Components a command runs log to stderr from their own goroutines.
	var out, errb syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}

// natsAs is a plain nats.go connection with identity's seed from the
// creds directory of data dir data, as any outside tool would make it.
func natsAs(t *testing.T, url, data, identity string) *nats.Conn {
	t.Helper()
	opt, err := nats.NkeyOptionFromSeed(auth.Store{Dir: auth.DirOf(data)}.Path(identity))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(url, opt)
	if err != nil {
		t.Fatalf("connect as %s to %s: %v", identity, url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// TestUpAndTailShowAPlainClientEvent is the acceptance scenario:
// `vera up` in one terminal, `vera events tail` in another, and an event a
// plain NATS client publishes as the ext identity (on
// vera.extin.<id>.ext, stored as vera.run.<id>.ext.ext) shows up.
func TestUpAndTailShowAPlainClientEvent(t *testing.T) {
	t.Setenv("NATS_URL", "")
	data := t.TempDir()
	t.Setenv("VERA_DATA_DIR", data) // where the other commands find their identities
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })

	tailOut, tailErr, stopTail := start(t, "events", "tail", "--nats-url", url)
	waitFor(t, "tail to start", func() bool { return strings.Contains(tailErr.String(), "tailing all runs") })
	jsonOut, _, stopJSON := start(t, "events", "tail", "--nats-url", url, "--json", "--run", "demo1")
	time.Sleep(300 * time.Millisecond)

	// A plain client needs an identity: the ext one may publish its own
	// events on vera.extin.<id>.ext (stored as vera.run.<id>.ext.ext).
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a NATS client without credentials connected to vera up")
	}
	nc := natsAs(t, url, data, auth.Ext)
	ev := `{"specversion":"1.0","id":"01JDEMOX0000000000000000AA","source":"my-script","type":"vera.ext.demo","subject":"demo1","runid":"demo1","time":"2026-11-21T18:00:00Z","datacontenttype":"application/json","data":{"hello":"from a plain NATS client"}}`
	if err := nc.Publish("vera.extin.demo1.ext", []byte(ev)); err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish("vera.extin.demo1.ext", []byte("not an envelope")); err != nil {
		t.Fatal(err)
	}
	nc.Flush()

	waitFor(t, "tail to print the event", func() bool {
		return strings.Contains(tailOut.String(), `ext.demo [my-script] hello="from a plain NATS client"`) &&
			strings.Contains(tailOut.String(), "MALFORMED")
	})
	waitFor(t, "tail --json to print the envelope", func() bool { return strings.Contains(jsonOut.String(), ev+"\n") })
	if strings.Contains(jsonOut.String(), "not an envelope") {
		t.Error("--json wrote a malformed message to stdout")
	}
	for name, stop := range map[string]func() int{"tail": stopTail, "tail --json": stopJSON, "up": stopUp} {
		if code := stop(); code != 0 {
			t.Errorf("%s exited %d after cancel", name, code)
		}
	}
}

func TestUpReportsBadSetupInOneLine(t *testing.T) {
	t.Setenv("NATS_URL", "")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, errOut, code := runCLI(t, "up", "--data-dir", t.TempDir(), "--nats-listen", l.Addr().String())
	if code != exitFailure || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "in use") || !strings.Contains(errOut, "--nats-listen") {
		t.Errorf("taken port: exit %d, stderr %q", code, errOut)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	_, errOut, code = runCLI(t, "up", "--data-dir", filepath.Join(file, "sub"), "--nats-listen", "127.0.0.1:0")
	if code != exitFailure || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "--data-dir") {
		t.Errorf("unusable data dir: exit %d, stderr %q", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"up", "--no-such-flag"},
		{"events", "export"},
		{"events", "export", "--run", "a.b"},
		{"events", "import"},
		{"events", "tail", "--type", "tool.*"},
		{"events", "schema", "vera.nope.nope"},
		{"up", "--log-level", "loud"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != exitUsage || !strings.HasPrefix(errOut, "vera: ") {
			t.Errorf("vera %v: exit %d, stderr %q; want exit 2 and a message", args, code, errOut)
		}
	}
}

func TestNoServerIsAClearError(t *testing.T) {
	_, errOut, code := runCLI(t, "events", "tail", "--nats-url", "nats://"+bustest.FreeAddr(t))
	if code != exitFailure || !strings.Contains(errOut, "vera up") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestExportImportCLI(t *testing.T) {
	srcSrv, src := bustest.New(t)
	ctx := context.Background()
	ref, err := src.PutBlob(ctx, bytes.Repeat([]byte("x"), 100000), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		data, _ := json.Marshal(map[string]any{"n": i, "out": ref})
		ev, err := src.Events.NewRaw("r1", "vera.ext.demo", data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	first := filepath.Join(dir, "first.jsonl")
	_, errOut, code := runCLI(t, "events", "export", "--nats-url", srcSrv.ClientURL(), "--run", "r1", "-o", first)
	if code != 0 || !strings.Contains(errOut, "3 events, 1 blobs") {
		t.Fatalf("export: exit %d: %s", code, errOut)
	}
	if _, _, code := runCLI(t, "events", "export", "--nats-url", srcSrv.ClientURL(), "--run", "nope", "-o", filepath.Join(dir, "nope.jsonl")); code != exitFailure {
		t.Errorf("export of an empty run: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "nope.jsonl")); !os.IsNotExist(err) {
		t.Error("a failed export left a file behind")
	}

	dst := bustest.StartServer(t)
	for i, want := range []string{"imported 3 events (0 already present), 1 blobs", "imported 0 events (3 already present)"} {
		_, errOut, code := runCLI(t, "events", "import", "--nats-url", dst.ClientURL(), first)
		if code != 0 || !strings.Contains(errOut, want) {
			t.Fatalf("import #%d: exit %d: %s", i+1, code, errOut)
		}
	}
	second := filepath.Join(dir, "second.jsonl")
	if _, errOut, code := runCLI(t, "events", "export", "--nats-url", dst.ClientURL(), "--run", "r1", "-o", second); code != 0 {
		t.Fatalf("export 2: %s", errOut)
	}
	a, _ := os.ReadFile(first)
	b, _ := os.ReadFile(second)
	if !bytes.Equal(a, b) {
		t.Fatal("export → import → export is not byte-identical")
	}

	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, append([]byte("{broken\n"), a...), 0o644)
	_, errOut, code = runCLI(t, "events", "import", "--nats-url", dst.ClientURL(), bad)
	if code != exitFailure || !strings.Contains(errOut, "line 1") || !strings.Contains(errOut, "3 already present") {
		t.Errorf("bad line: exit %d: %s", code, errOut)
	}
}

// TestEventsTailJSONBinaryMode: `vera events tail --json` prints a
// CloudEvent stored in binary mode (ce- headers, the body its data) as its
// structured envelope, one line, like any other event.
func TestEventsTailJSONBinaryMode(t *testing.T) {
	srv, b := bustest.New(t)
	h := nats.Header{}
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "acme-1", "ce-source": "acme", "ce-type": "vera.ext.acme.scanned", "ce-time": "2026-11-21T12:00:00Z", "ce-datacontenttype": "text/plain"} {
		h.Set(k, v)
	}
	if _, err := b.JetStream().PublishMsg(context.Background(), &nats.Msg{Subject: "vera.run.r1.ext.acme.scanned", Header: h, Data: []byte("3 hosts")}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, "events", "tail", "--nats-url", srv.ClientURL(), "--run", "r1", "--from-start", "--no-follow", "--json")
	if code != 0 {
		t.Fatalf("tail: exit %d: %s", code, errOut)
	}
	ev, err := bus.ParseEvent([]byte(strings.TrimSpace(out)))
	if err != nil || ev.ID != "acme-1" || ev.RunID != "r1" || string(ev.DataBase64) != "3 hosts" {
		t.Fatalf("tail --json printed %q: %+v, %v", out, ev, err)
	}
}

func TestSchemaAndTypes(t *testing.T) {
	out, _, code := runCLI(t, "events", "schema", "vera.tool.requested")
	var s map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s["$id"] != "https://vera.dev/schemas/vera.tool.requested.json" {
		t.Fatalf("schema: exit %d: %.200s", code, out)
	}
	out, _, code = runCLI(t, "events", "schema")
	var all map[string]json.RawMessage
	if code != 0 || json.Unmarshal([]byte(out), &all) != nil || len(all) < 30 {
		t.Fatalf("all schemas: exit %d, %d types", code, len(all))
	}
	out, _, code = runCLI(t, "sandbox", "rules")
	if code != 0 || !strings.Contains(out, "rm_root") || !strings.Contains(out, "notes_md") {
		t.Fatalf("sandbox rules: %s", out)
	}
	out, _, code = runCLI(t, "events", "types")
	if code != 0 || !strings.Contains(out, "vera.tool.finished") || !strings.Contains(out, "vera.ext.*") {
		t.Fatalf("types: %s", out)
	}
}

func TestDeadLettersCLI(t *testing.T) {
	srv, b := bustest.New(t)
	if err := b.Conn().Publish("vera.run.x.ext.demo", []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Consume(ctx, bus.ConsumerConfig{Durable: "probe"}, func(context.Context, *bus.Message) error { return nil })
	}()
	waitFor(t, "a dead letter", func() bool {
		out, _, _ := runCLI(t, "events", "dead-letters", "--nats-url", srv.ClientURL())
		return strings.Contains(out, "probe seq=1 vera.run.x.ext.demo")
	})
	cancel()
	<-done
	out, _, _ := runCLI(t, "events", "dead-letters", "--nats-url", srv.ClientURL(), "--consumer", "other")
	if !strings.Contains(out, "no dead letters") {
		t.Errorf("filtered list: %s", out)
	}
}

// TestSIGTERMStopsUpGracefully runs the real binary and stops it with
// SIGTERM, as a service manager would.
func TestSIGTERMStopsUpGracefully(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "vera")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	addr := bustest.FreeAddr(t)
	cmd := exec.Command(bin, "up", "--data-dir", t.TempDir(), "--nats-listen", addr, "--http-listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "NATS_URL=")
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "banner", func() bool { return strings.Contains(out.String(), "Press Ctrl-C") })
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, errb.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("vera up did not stop within 20s of SIGTERM")
	}
	if !strings.Contains(errb.String(), "NATS server stopped") {
		t.Errorf("no clean shutdown in the log:\n%s", errb.String())
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Error("port still open after shutdown")
	}
}

// TestMain keeps the tests away from the user's own VERA data dir (its
// identities would be offered to the tests' servers, its store reused):
// VERA_DATA_DIR points at a directory of the test binary's own.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "vera-cmd-test-data-")
	if err != nil {
		panic(err)
	}
	os.Setenv("VERA_DATA_DIR", dir)
	opts := append([]goleak.Option{goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	})}, bustest.LeakIgnores...)
	goleak.VerifyTestMain(m, opts...)
}

// removeContainers removes the sandbox containers of a run.
func removeContainers(t *testing.T, run string) {
	cli := dockertest.Client(t)
	for _, name := range []string{"vera-" + run, "vera-" + run + "-auditor"} {
		_ = cli.ContainerRemove(context.Background(), name, container.RemoveOptions{Force: true})
	}
}
