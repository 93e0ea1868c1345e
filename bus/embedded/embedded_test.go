package embedded_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/embedded"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bustest.LeakIgnores...) }

func TestStartAndShutdown(t *testing.T) {
	dir := t.TempDir()
	s, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.NATS().JetStreamEnabled() {
		t.Fatal("JetStream is off")
	}
	cfg := s.NATS().JetStreamConfig()
	if cfg == nil || cfg.SyncAlways != true || !strings.HasPrefix(cfg.StoreDir, dir) {
		t.Fatalf("JetStream config %+v: want fsync always under %s", cfg, dir)
	}
	if !strings.HasPrefix(s.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("not on loopback: %s", s.ClientURL())
	}
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")
	s.Shutdown()
	s.Shutdown() // twice is fine
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("still listening after Shutdown")
	}
}

func TestTakenPortIsAOneLineErrorWithTheFix(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: l.Addr().String()})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "in use") || !strings.Contains(err.Error(), "--nats-listen") {
		t.Fatalf("error %q", err)
	}
}

func TestUnusableDataDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(file, "sub"), ""} {
		_, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:0"})
		if err == nil || !strings.Contains(err.Error(), "--data-dir") {
			t.Errorf("data dir %q: error %v", dir, err)
		}
	}
}

func TestBadListenAddress(t *testing.T) {
	_, err := embedded.Start(embedded.Options{DataDir: t.TempDir(), Listen: "localhost"})
	if err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("error %v", err)
	}
}

func TestRestartKeepsEvents(t *testing.T) {
	dir := t.TempDir()
	s := bustest.StartServerIn(t, dir)
	b := bustest.Connect(t, s.ClientURL(), bus.Options{})
	ev, _ := b.Events.NewRaw("keep", "vera.ext.demo", []byte(`{"n":1}`))
	ctx := context.Background()
	if _, err := b.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	b.Close()
	s.Shutdown()
	s2 := bustest.StartServerIn(t, dir)
	b2 := bustest.Connect(t, s2.ClientURL(), bus.Options{})
	evs, err := b2.ReadRun(ctx, "keep")
	if err != nil || len(evs) != 1 || evs[0].ID != ev.ID {
		t.Fatalf("after restart: %v %+v", err, evs)
	}
}

// TestNATSConfStartsAVERAServer takes the repository's nats.conf with the
// identities `vera auth init --data-dir ./.vera` makes beside it, starts a
// server from it (on a free port and a temporary store) and checks that it
// requires authentication and enforces the catalogue's permissions.
func TestNATSConfStartsAVERAServer(t *testing.T) {
	dir := t.TempDir()
	conf, err := os.ReadFile("../../nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), conf, 0o600); err != nil {
		t.Fatal(err)
	}
	store := auth.Store{Dir: auth.DirOf(filepath.Join(dir, ".vera"))}
	if _, err := store.Init(); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(filepath.Join(dir, "nats.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if !opts.JetStream || !opts.SyncAlways || opts.Host != "127.0.0.1" || opts.Port != 4222 {
		t.Fatalf("nats.conf: jetstream=%v sync_always=%v listen=%s:%d; want JetStream, sync_interval always, 127.0.0.1:4222",
			opts.JetStream, opts.SyncAlways, opts.Host, opts.Port)
	}
	if len(opts.Nkeys) != len(auth.BuiltIn()) {
		t.Fatalf("nats.conf has %d users, want VERA's %d identities", len(opts.Nkeys), len(auth.BuiltIn()))
	}
	opts.Port = server.RANDOM_PORT
	opts.StoreDir = t.TempDir()
	s, err := embedded.StartWithOptions(opts, embedded.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := bus.Connect(ctx, bus.Options{URL: s.ClientURL(), Logger: bustest.Logger(t)}); !errors.Is(err, bus.ErrNotAuthorized) {
		t.Fatalf("connect without credentials to a server from nats.conf: %v", err)
	}
	bustest.ConnectAs(t, s.ClientURL(), store, auth.Admin, bus.Options{}) // creates the streams
	b := bustest.ConnectAs(t, s.ClientURL(), store, auth.Ext, bus.Options{PublishBudget: time.Second, ExtInbound: true})
	ev, _ := b.Events.NewRaw("conf", "vera.ext.demo", []byte(`{}`))
	if _, err := b.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	ev, _ = b.Events.NewRaw("conf", "vera.run.finished", []byte(`{"status":"RESOLVED"}`))
	if _, err := b.Publish(ctx, ev); !errors.Is(err, bus.ErrPermissionDenied) {
		t.Fatalf("ext publishing vera.run.finished on a server from nats.conf: %v", err)
	}
}

// TestClusterConfs checks deploy/cluster/node*.conf: one cluster, distinct
// names, full routes, JetStream with fsync always.
func TestClusterConfs(t *testing.T) {
	names := map[string]bool{}
	for i := 1; i <= 3; i++ {
		path := filepath.Join("..", "..", "deploy", "cluster", "node"+string(rune('0'+i))+".conf")
		opts, err := server.ProcessConfigFile(withIdentities(t, path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !opts.JetStream || !opts.SyncAlways || opts.Cluster.Name != "vera" || len(opts.Routes) != 3 || opts.Cluster.Port != 6222 {
			t.Errorf("%s: jetstream=%v sync=%v cluster=%q routes=%d", path, opts.JetStream, opts.SyncAlways, opts.Cluster.Name, len(opts.Routes))
		}
		if len(opts.Nkeys) != len(auth.BuiltIn()) {
			t.Errorf("%s: %d users, want VERA's %d identities", path, len(opts.Nkeys), len(auth.BuiltIn()))
		}
		names[opts.ServerName] = true
	}
	if len(names) != 3 {
		t.Errorf("server names not distinct: %v", names)
	}
}

// withIdentities copies a cluster node's config, unchanged, into a
// directory with the identities' nats-auth.conf beside it, as docs/deploy.md
// says to install it on a node (nats-server resolves an include relative
// to the including file, even one written as an absolute path: the config
// must include the file by its name alone).
func withIdentities(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const include = `include "nats-auth.conf"`
	if !strings.Contains(string(b), include) {
		t.Fatalf("%s does not include the identities (%s)", path, include)
	}
	dir := t.TempDir()
	store := auth.Store{Dir: auth.DirOf(dir)}
	if _, err := store.Init(); err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node")
	if err := os.Mkdir(node, 0o700); err != nil {
		t.Fatal(err)
	}
	authConf, err := os.ReadFile(filepath.Join(auth.DirOf(dir), "nats-auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(node, "nats-auth.conf"), authConf, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(node, filepath.Base(path))
	if err := os.WriteFile(out, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}
