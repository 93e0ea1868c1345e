// Package embedded runs a NATS server with JetStream inside the VERA
// process: the default "embedded dev mode" of `vera up`, and the real server
// every test of the bus runs against. It listens on loopback so any NATS
// client (the nats CLI, a Python script) can subscribe to a local run.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// DefaultListen is where `vera up` serves NATS clients.
const DefaultListen = "127.0.0.1:4222"

// Options configure an embedded server.
type Options struct {
	// DataDir holds the JetStream store (a "jetstream" folder is made in
	// it). Required.
	DataDir string
	// Listen is the client address, host:port. Port 0 picks a free port.
	// Default DefaultListen.
	Listen string
	// ServerName names the server; required and distinct in a cluster.
	ServerName string
	// SyncInterval is how often the file store is flushed to disk; zero
	// means fsync on every write (sync_interval: always), VERA's default.
	SyncInterval time.Duration
	// Cluster, when set, makes this server one node of a JetStream cluster.
	Cluster *ClusterOptions
	// Logger receives the server's log; nil discards it.
	Logger *slog.Logger
	// StartTimeout bounds the wait for the server to accept clients.
	StartTimeout time.Duration
	// Users, when set, makes the server require authentication: only
	// these nkey users may connect, each with its permissions (see
	// bus/auth). Nil leaves the server open, which only tests and
	// in-process servers that listen nowhere should do.
	Users []*server.NkeyUser
	// InProcess listens on no port at all: only connections made in this
	// process with nats.InProcessServer (see Server.InProcess) reach the
	// server, so no other local user can. For private scratch servers.
	InProcess bool
}

// ClusterOptions make a server a cluster node.
type ClusterOptions struct {
	Name   string   // cluster name, the same on every node
	Listen string   // route address host:port of this node
	Routes []string // route addresses of every node (self included is fine)
}

// Server is a running embedded NATS server.
type Server struct {
	ns   *server.Server
	opts Options
	once sync.Once

	mu    sync.Mutex
	sopts *server.Options // as started, for reloads
}

// Start checks the options, starts the server and waits until it accepts
// clients and JetStream is ready.
func Start(opts Options) (*Server, error) {
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	if opts.DataDir == "" {
		return nil, errors.New("embedded NATS: no data dir (pass --data-dir DIR)")
	}
	if err := checkWritable(opts.DataDir); err != nil {
		return nil, err
	}
	host, port, err := splitHostPort(opts.Listen)
	if err != nil {
		return nil, err
	}
	if !opts.InProcess {
		if err := checkFree(opts.Listen, "--nats-listen"); err != nil {
			return nil, err
		}
	}
	if opts.ServerName == "" {
		opts.ServerName = "vera-" + strconv.Itoa(os.Getpid())
	}
	sopts := &server.Options{
		ServerName:         opts.ServerName,
		Host:               host,
		Port:               port,
		JetStream:          true,
		StoreDir:           opts.DataDir,
		NoSigs:             true,
		MaxPayload:         8 << 20,
		JetStreamMaxMemory: 256 << 20,
		Nkeys:              opts.Users,
		DontListen:         opts.InProcess,
	}
	if opts.SyncInterval <= 0 {
		sopts.SyncAlways = true
		sopts.SyncInterval = 2 * time.Minute // unused while SyncAlways, but must be set
	} else {
		sopts.SyncInterval = opts.SyncInterval
	}
	if c := opts.Cluster; c != nil {
		chost, cport, err := splitHostPort(c.Listen)
		if err != nil {
			return nil, fmt.Errorf("cluster listen: %w", err)
		}
		sopts.Cluster = server.ClusterOpts{Name: c.Name, Host: chost, Port: cport}
		for _, r := range c.Routes {
			u, err := url.Parse("nats-route://" + r)
			if err != nil {
				return nil, fmt.Errorf("cluster route %q: %w", r, err)
			}
			sopts.Routes = append(sopts.Routes, u)
		}
	}
	return StartWithOptions(sopts, opts)
}

// StartWithOptions starts a server from nats-server options (for example
// parsed from nats.conf by server.ProcessConfigFile).
func StartWithOptions(sopts *server.Options, opts Options) (*Server, error) {
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 30 * time.Second
	}
	sopts.NoSigs = true
	ns, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	fatal := &fatalCatcher{log: opts.Logger}
	ns.SetLoggerV2(fatal, false, false, false)
	go ns.Start()
	if !ns.ReadyForConnections(opts.StartTimeout) {
		ns.Shutdown()
		if msg := fatal.last(); msg != "" {
			return nil, fmt.Errorf("embedded NATS did not start: %s", msg)
		}
		return nil, fmt.Errorf("embedded NATS did not accept clients within %s", opts.StartTimeout)
	}
	s := &Server{ns: ns, opts: opts, sopts: sopts.Clone()}
	if sopts.Cluster.Port == 0 && sopts.JetStream {
		deadline := time.Now().Add(opts.StartTimeout)
		for !ns.JetStreamEnabled() {
			if time.Now().After(deadline) {
				s.Shutdown()
				return nil, errors.New("embedded NATS: JetStream did not start")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return s, nil
}

// SetUsers replaces the server's nkey users and their permissions without
// a restart (a newly issued identity, a revoked one). Clients whose user is
// gone are disconnected by the server.
func (s *Server) SetUsers(users []*server.NkeyUser) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sopts.Nkeys) == 0 {
		return errors.New("embedded NATS: the server was started without authentication; restart it to turn authentication on")
	}
	if len(users) == 0 {
		return errors.New("embedded NATS: no users: authentication cannot be turned off by a reload")
	}
	next := s.sopts.Clone()
	next.Nkeys = users
	if err := s.ns.ReloadOptions(next); err != nil {
		return fmt.Errorf("embedded NATS: reload users: %w", err)
	}
	s.sopts = next
	return nil
}

// InProcess is the connection option that reaches this server inside the
// process (the only way to reach one started with Options.InProcess).
func (s *Server) InProcess() nats.Option { return nats.InProcessServer(s.ns) }

// ClientURL is the URL clients connect to, e.g. nats://127.0.0.1:4222.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// NATS returns the underlying server.
func (s *Server) NATS() *server.Server { return s.ns }

// Shutdown stops the server: clients are disconnected, the store is closed,
// and Shutdown returns when the server is fully down. Safe to call twice.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
	})
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("listen address %q: %w (want host:port, e.g. 127.0.0.1:4222)", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("listen address %q: bad port", addr)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

func checkFree(addr, flag string) error {
	if strings.HasSuffix(addr, ":0") {
		return nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("cannot listen on %s: the address is in use (another NATS server or `vera up` is running there); stop it or pass %s with a free address", addr, flag)
		}
		return fmt.Errorf("cannot listen on %s: %v (pass %s with another address)", addr, err, flag)
	}
	return l.Close()
}

func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("data dir %s is not usable: %v (pass --data-dir with a writable directory)", dir, err)
	}
	f, err := os.CreateTemp(dir, ".vera-write-check-*")
	if err != nil {
		return fmt.Errorf("data dir %s is not writable: %v (pass --data-dir with a writable directory)", dir, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(filepath.Clean(f.Name()))
}

// fatalCatcher adapts the server's logger to slog and remembers fatal
// messages, which the server logs instead of returning.
type fatalCatcher struct {
	log *slog.Logger
	mu  sync.Mutex
	msg string
}

func (f *fatalCatcher) last() string { f.mu.Lock(); defer f.mu.Unlock(); return f.msg }

func (f *fatalCatcher) emit(level slog.Level, format string, v ...any) {
	if f.log != nil {
		f.log.Log(context.Background(), level, fmt.Sprintf(format, v...), "component", "nats-server")
	}
}

func (f *fatalCatcher) Noticef(format string, v ...any) { f.emit(slog.LevelDebug, format, v...) }
func (f *fatalCatcher) Warnf(format string, v ...any)   { f.emit(slog.LevelWarn, format, v...) }
func (f *fatalCatcher) Errorf(format string, v ...any)  { f.emit(slog.LevelError, format, v...) }
func (f *fatalCatcher) Debugf(format string, v ...any)  {}
func (f *fatalCatcher) Tracef(format string, v ...any)  {}
func (f *fatalCatcher) Fatalf(format string, v ...any) {
	f.mu.Lock()
	f.msg = fmt.Sprintf(format, v...)
	f.mu.Unlock()
	f.emit(slog.LevelError, format, v...)
}
