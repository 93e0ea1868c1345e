// Package jaegertest gives tests a real OTLP backend: a Jaeger v2 process
// (github.com/jaegertracing/jaeger/cmd/jaeger v1.76.0, built by .ci/jaeger
// from the Go module proxy) with in-memory storage, its OTLP gRPC and HTTP
// receivers and its query/UI server each on a free 127.0.0.1 port and no
// other listener, so several tests may run one at once. Tests export spans
// with the OpenTelemetry SDK to OTLPHTTPEndpoint or OTLPGRPCEndpoint and read
// them back with Trace or WaitTrace, which use Jaeger's query API v3
// (GET /api/v3/traces/{id}, OTLP JSON).
//
// The binary is VERA_JAEGER, else jaeger on PATH, else DefaultBinary. When
// there is none the test is skipped, unless VERA_REQUIRE_JAEGER=1 (as in
// CI), which makes the absence a failure. Imported by tests only.
package jaegertest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Version is the Jaeger module version .ci/jaeger builds.
const Version = "v1.76.0"

// StartTimeout bounds how long Start waits for Jaeger to answer.
const StartTimeout = 60 * time.Second

// Jaeger is a running Jaeger v2 owned by one test; it is stopped at the
// test's cleanup.
type Jaeger struct {
	// OTLPHTTPEndpoint is the OTLP/HTTP receiver's base URL,
	// "http://127.0.0.1:PORT"; traces are posted to its /v1/traces.
	OTLPHTTPEndpoint string
	// OTLPGRPCEndpoint is the OTLP/gRPC receiver's address,
	// "127.0.0.1:PORT" (plaintext).
	OTLPGRPCEndpoint string
	// UIURL is the query service's base URL, "http://127.0.0.1:PORT":
	// the query APIs under /api (v3: /api/v3/...) and the UI at /. A build
	// from the module proxy has no jaeger-ui assets (they are made by npm
	// outside the Go module), so / is Jaeger's placeholder page.
	UIURL string
	// Binary is the Jaeger executable that runs.
	Binary string

	tb     testing.TB
	log    *tailBuffer
	client *http.Client
}

// DefaultBinary is where .ci/jaeger puts the binary by default:
// ${XDG_CACHE_HOME:-$HOME/.cache}/vera/jaeger-v1.76.0/jaeger.
func DefaultBinary() string {
	dir := os.Getenv("XDG_CACHE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".cache")
	}
	return filepath.Join(dir, "vera", "jaeger-"+Version, "jaeger")
}

// Binary finds the Jaeger executable: $VERA_JAEGER (which must then exist),
// else jaeger on PATH, else DefaultBinary. The error says where it looked.
func Binary() (string, error) {
	if p := os.Getenv("VERA_JAEGER"); p != "" {
		if isExecutable(p) {
			return p, nil
		}
		return "", fmt.Errorf("VERA_JAEGER=%s is not an executable file", p)
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p, nil
	}
	def := DefaultBinary()
	if def != "" && isExecutable(def) {
		return def, nil
	}
	return "", fmt.Errorf("no Jaeger binary: VERA_JAEGER is unset, there is no jaeger on PATH, and none at %s", def)
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Start runs a Jaeger v2 for the test and waits until it answers. It skips
// the test when there is no binary (fails under VERA_REQUIRE_JAEGER=1), and
// fails it, with Jaeger's log, when Jaeger does not come up within
// StartTimeout. Jaeger is stopped at cleanup; its log goes to the test log
// when the test has failed.
func Start(tb testing.TB) *Jaeger {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		msg := fmt.Sprintf("%v: this test needs Jaeger v2 %s; build it with .ci/jaeger (or point VERA_JAEGER at one)", err, Version)
		if os.Getenv("VERA_REQUIRE_JAEGER") == "1" {
			tb.Fatal(msg + " (VERA_REQUIRE_JAEGER=1)")
		}
		tb.Skip(msg + "; set VERA_REQUIRE_JAEGER=1 to make this a failure")
	}
	// Free ports are found by binding and releasing them, so another
	// process may take one before Jaeger binds it: then Jaeger exits at
	// once with "address already in use" and is started again on new ports.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		j, err := start(tb, bin)
		if err == nil {
			return j
		}
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			break
		}
	}
	tb.Fatal(lastErr)
	return nil
}

var errAddrInUse = errors.New("address already in use")

func start(tb testing.TB, bin string) (*Jaeger, error) {
	tb.Helper()
	ports, err := freePorts(5)
	if err != nil {
		return nil, fmt.Errorf("jaegertest: free ports: %w", err)
	}
	otlpGRPC, otlpHTTP, queryHTTP, queryGRPC, health := ports[0], ports[1], ports[2], ports[3], ports[4]

	dir := tb.TempDir()
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, []byte(Config(otlpGRPC, otlpHTTP, queryHTTP, queryGRPC, health)), 0o644); err != nil {
		return nil, fmt.Errorf("jaegertest: %w", err)
	}

	j := &Jaeger{
		OTLPHTTPEndpoint: "http://" + otlpHTTP,
		OTLPGRPCEndpoint: otlpGRPC,
		UIURL:            "http://" + queryHTTP,
		Binary:           bin,
		tb:               tb,
		log:              newTailBuffer(400),
		client:           &http.Client{Timeout: 10 * time.Second},
	}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Dir = dir
	cmd.Stdout = j.log
	cmd.Stderr = j.log
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("jaegertest: start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		select {
		case <-exited:
			return
		default:
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			fmt.Fprintln(j.log, "jaegertest: Jaeger did not stop within 10 s of SIGINT; killed")
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	if err := j.waitReady("http://"+health+"/status", exited); err != nil {
		stop()
		if strings.Contains(j.log.String(), "address already in use") {
			return nil, fmt.Errorf("%w: %v", errAddrInUse, err)
		}
		if waitErr != nil {
			err = fmt.Errorf("%v (%v)", err, waitErr)
		}
		return nil, fmt.Errorf("jaegertest: Jaeger (%s) did not start: %v\n--- Jaeger log ---\n%s", bin, err, j.log.String())
	}
	tb.Cleanup(func() {
		stop()
		if tb.Failed() {
			tb.Logf("--- Jaeger log (%s, last %d lines) ---\n%s", j.UIURL, j.log.max, j.log.String())
		}
	})
	return j, nil
}

// waitReady polls the health endpoint (200 once every component is up)
// and the query API until both answer.
func (j *Jaeger) waitReady(healthURL string, exited <-chan struct{}) error {
	deadline := time.Now().Add(StartTimeout)
	ready := func(u string) bool {
		resp, err := j.client.Get(u)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	for {
		if ready(healthURL) && ready(j.UIURL+"/api/v3/services") {
			return nil
		}
		select {
		case <-exited:
			return errors.New("jaeger exited")
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer from %s within %v", healthURL, StartTimeout)
		}
	}
}

// Log returns the last lines Jaeger wrote.
func (j *Jaeger) Log() string { return j.log.String() }

// Config is the Jaeger v2 configuration Start uses (each argument a
// host:port): in-memory storage fed by the OTLP receivers, the query
// extension (HTTP: UI and APIs; gRPC: api_v2/api_v3) and the v2 health
// check (HTTP only, /status). The collector's own metrics are off
// (level: none), so it opens no Prometheus port (8888); no other
// extension (zpages, pprof, expvar, remote sampling) is enabled; and the
// query extension does not trace itself (enable_tracing: false, else it
// exports to localhost:4317). These five ports are all it listens on.
func Config(otlpGRPC, otlpHTTP, queryHTTP, queryGRPC, health string) string {
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    resource:
      service.name: jaeger
    metrics:
      level: none
    logs:
      level: info

extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: %q
  jaeger_query:
    storage:
      traces: memstore
    # On by default in v2: Jaeger would trace itself to localhost:4317,
    # a fixed port, and wait for it at shutdown.
    enable_tracing: false
    http:
      endpoint: %q
    grpc:
      endpoint: %q
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000

receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %q
      http:
        endpoint: %q

exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`, health, queryHTTP, queryGRPC, otlpGRPC, otlpHTTP)
}

// freePorts returns n distinct free 127.0.0.1 addresses, all bound at
// once so none repeats.
func freePorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var addrs []string
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// tailBuffer keeps the last max lines written to it.
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	lines   []string
	partial []byte
	dropped int
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		b.lines = append(b.lines, string(b.partial[:i]))
		b.partial = b.partial[i+1:]
	}
	if over := len(b.lines) - b.max; over > 0 {
		b.dropped += over
		b.lines = append(b.lines[:0:0], b.lines[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s strings.Builder
	if b.dropped > 0 {
		fmt.Fprintf(&s, "[%d earlier lines dropped]\n", b.dropped)
	}
	for _, l := range b.lines {
		s.WriteString(l)
		s.WriteByte('\n')
	}
	s.Write(b.partial)
	return s.String()
}
