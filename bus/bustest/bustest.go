// Package bustest starts real NATS servers (single node or an in-process
// cluster on loopback) and bus connections for tests. It is imported only
// by tests.
package bustest

import (
	"go.uber.org/goleak"
	"sort"

	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/embedded"
)

// StartServer starts an embedded JetStream server on a free loopback port
// with its store in a temporary directory; it is shut down at cleanup.
func StartServer(tb testing.TB) *embedded.Server {
	tb.Helper()
	return StartServerIn(tb, tb.TempDir())
}

// StartServerIn is StartServer with a given store directory (to restart a
// server on the same data).
func StartServerIn(tb testing.TB, dir string) *embedded.Server {
	tb.Helper()
	s, err := embedded.Start(embedded.Options{DataDir: dir, Listen: "127.0.0.1:0", ServerName: "test"})
	if err != nil {
		tb.Fatalf("start embedded NATS: %v", err)
	}
	tb.Cleanup(s.Shutdown)
	return s
}

// Connect opens a bus on url with test-friendly defaults (quiet logger,
// short publish timeout); it is closed at cleanup.
func Connect(tb testing.TB, url string, opts bus.Options) *bus.Bus {
	tb.Helper()
	opts.URL = url
	if opts.Source == "" {
		opts.Source = "test"
	}
	if opts.Logger == nil {
		opts.Logger = Logger(tb)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := bus.Connect(ctx, opts)
	if err != nil {
		tb.Fatalf("connect bus: %v", err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// New starts a server and connects a bus to it.
func New(tb testing.TB) (*embedded.Server, *bus.Bus) {
	tb.Helper()
	s := StartServer(tb)
	return s, Connect(tb, s.ClientURL(), bus.Options{})
}

// Logger returns a logger writing to the test log when VERA_TEST_LOG=1 and
// discarding otherwise.
func Logger(tb testing.TB) *slog.Logger {
	if os.Getenv("VERA_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ tb testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Cluster is an in-process JetStream cluster on loopback.
type Cluster struct {
	tb      testing.TB
	Nodes   []*embedded.Server
	dirs    []string
	clients []string
	routes  []string
}

// StartCluster starts n nodes (n ≥ 3 for R3 streams) and waits until they
// have formed a JetStream cluster with a meta leader.
func StartCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	c := &Cluster{tb: tb, Nodes: make([]*embedded.Server, n)}
	for i := 0; i < n; i++ {
		c.dirs = append(c.dirs, tb.TempDir())
		c.clients = append(c.clients, FreeAddr(tb))
		c.routes = append(c.routes, FreeAddr(tb))
	}
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) { errs <- c.start(i) }(i)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			tb.Fatalf("start cluster: %v", err)
		}
	}
	tb.Cleanup(func() {
		for _, s := range c.Nodes {
			if s != nil {
				s.Shutdown()
			}
		}
	})
	c.WaitReady()
	return c
}

func (c *Cluster) start(i int) error {
	s, err := embedded.Start(embedded.Options{
		DataDir:    filepath.Join(c.dirs[i], "store"),
		Listen:     c.clients[i],
		ServerName: fmt.Sprintf("n%d", i+1),
		Cluster:    &embedded.ClusterOptions{Name: "vera-test", Listen: c.routes[i], Routes: c.routes},
	})
	if err != nil {
		return fmt.Errorf("node %d: %w", i+1, err)
	}
	c.Nodes[i] = s
	return nil
}

// WaitReady waits until every running node reports a JetStream meta
// leader and the leader counts every running node as a peer that can hold
// a replica: before that, creating an R3 stream fails with "no suitable
// peers for placement".
func (c *Cluster) WaitReady() {
	c.tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		ready, running, placeable := true, 0, -1
		for _, s := range c.Nodes {
			if s == nil {
				continue
			}
			running++
			if !s.NATS().JetStreamEnabled() || s.NATS().JetStreamIsClustered() && !hasLeader(s) {
				ready = false
			}
			if s.NATS().JetStreamIsLeader() {
				placeable = len(s.NATS().JetStreamClusterPeers())
			}
		}
		if ready && (placeable >= running || !c.clustered()) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.tb.Fatalf("cluster did not elect a JetStream meta leader within 30s")
}

// clustered reports whether the running nodes form a JetStream cluster.
func (c *Cluster) clustered() bool {
	for _, s := range c.Nodes {
		if s != nil {
			return s.NATS().JetStreamIsClustered()
		}
	}
	return false
}

func hasLeader(s *embedded.Server) bool {
	raft := s.NATS().JetStreamIsLeader()
	if raft {
		return true
	}
	// A follower is ready once it knows the leader.
	return s.NATS().JetStreamIsCurrent()
}

// URL is a comma-separated list of every node's client URL.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.clients))
	for i, a := range c.clients {
		urls[i] = "nats://" + a
	}
	return strings.Join(urls, ",")
}

// Stop shuts node i down (its store is kept).
func (c *Cluster) Stop(i int) {
	c.Nodes[i].Shutdown()
	c.Nodes[i] = nil
}

// Restart starts a stopped node i again on its store.
func (c *Cluster) Restart(i int) {
	c.tb.Helper()
	if err := c.start(i); err != nil {
		c.tb.Fatalf("restart: %v", err)
	}
}

// LeakIgnores are the goroutines goleak may ignore in packages that run an
// embedded nats-server: a few of its process-wide workers outlive Shutdown.
// Everything else a test leaves running is a leak.
var LeakIgnores = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*srvMemStore).expireMsgs"),
	goleak.IgnoreTopFunction("time.Sleep"),
	// A stream's source consumer setup (VERA sources VERA_EXT) waits for
	// its answer on a timer of its own, past Shutdown.
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"),
}

// Start runs a component's Run(ctx) in the background until the returned
// stop is called or the test ends. stop cancels ctx and waits for Run to
// return (at most a minute); an error from Run, or a Run that does not
// return, fails the test under name.
func Start(tb testing.TB, name string, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					tb.Errorf("%s: %v", name, err)
				}
			case <-time.After(time.Minute):
				tb.Errorf("%s did not return within a minute of cancel", name)
			}
		})
	}
	tb.Cleanup(stop)
	return stop
}

// StartSecureServer starts an embedded JetStream server that requires
// authentication, with VERA's built-in identities (bus/auth) in a
// temporary creds directory, as `vera up` does. The returned store has a
// seed file per identity; connect with ConnectAs.
func StartSecureServer(tb testing.TB) (*embedded.Server, auth.Store) {
	tb.Helper()
	store := auth.Store{Dir: filepath.Join(tb.TempDir(), "creds")}
	ids, err := store.Init()
	if err != nil {
		tb.Fatalf("init identities: %v", err)
	}
	users, err := auth.NkeyUsers(ids)
	if err != nil {
		tb.Fatalf("identities: %v", err)
	}
	s, err := embedded.Start(embedded.Options{DataDir: tb.TempDir(), Listen: "127.0.0.1:0", ServerName: "test", Users: users})
	if err != nil {
		tb.Fatalf("start embedded NATS: %v", err)
	}
	tb.Cleanup(s.Shutdown)
	return s, store
}

// ReloadUsers gives server s the identities store holds now, as a
// running `vera up` reloads after `vera auth issue` or `revoke`.
func ReloadUsers(tb testing.TB, s *embedded.Server, store auth.Store) {
	tb.Helper()
	ids, err := store.Identities()
	if err != nil {
		tb.Fatal(err)
	}
	users, err := auth.NkeyUsers(ids)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.SetUsers(users); err != nil {
		tb.Fatal(err)
	}
}

// ConnectAs is Connect with identity's credentials from store.
func ConnectAs(tb testing.TB, url string, store auth.Store, identity string, opts bus.Options) *bus.Bus {
	tb.Helper()
	opts.CredsFile = store.Path(identity)
	if opts.Source == "" {
		opts.Source = identity
	}
	return Connect(tb, url, opts)
}

// NewSecure starts a secure server and connects as admin (which creates
// the streams).
func NewSecure(tb testing.TB) (*embedded.Server, auth.Store, *bus.Bus) {
	tb.Helper()
	s, store := StartSecureServer(tb)
	return s, store, ConnectAs(tb, s.ClientURL(), store, auth.Admin, bus.Options{Source: "test"})
}

// ConsumerCounter returns a function that reports how many consumers
// stream VERA has now.
func ConsumerCounter(tb testing.TB, b *bus.Bus) func() int {
	tb.Helper()
	ctx := context.Background()
	stream, err := b.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		tb.Fatal(err)
	}
	return func() int {
		tb.Helper()
		info, err := stream.Info(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		return info.State.Consumers
	}
}

// RawRead reads every message stored on filter with a plain nats.go
// ordered consumer, parsing nothing, and returns how many there were: the
// raw baseline that readers and projectors are benchmarked against.
func RawRead(tb testing.TB, b *bus.Bus, filter string) int {
	tb.Helper()
	ctx := context.Background()
	cons, err := b.JetStream().OrderedConsumer(ctx, bus.StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
	if err != nil {
		tb.Fatal(err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		tb.Fatal(err)
	}
	defer it.Stop()
	n := 0
	for {
		m, err := it.Next()
		if err != nil {
			tb.Fatal(err)
		}
		n++
		meta, err := m.Metadata()
		if err != nil {
			tb.Fatal(err)
		}
		if meta.NumPending == 0 {
			return n
		}
	}
}

// RawSubjects lists, sorted, the subjects of stream VERA's messages that
// match filter, as the server counts them (no consumer, no wait).
func RawSubjects(tb testing.TB, b *bus.Bus, filter string) ([]string, map[string]uint64) {
	tb.Helper()
	ctx := context.Background()
	s, err := b.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		tb.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		out = append(out, subj)
	}
	sort.Strings(out)
	return out, info.State.Subjects
}
