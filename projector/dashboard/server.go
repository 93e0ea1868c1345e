package dashboard

import (
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector"
)

// DefaultAddr is where the dashboard listens unless told otherwise:
// loopback only.
const DefaultAddr = "127.0.0.1:8844"

// TokenFileName is the name of the file in the data dir that holds the
// token of the running dashboard (mode 0600).
const TokenFileName = "dashboard.token"

// TokenHeader carries the token on mutating requests (Authorization:
// Bearer <token> is accepted too).
const TokenHeader = "X-Vera-Token"

//go:embed static
var staticFS embed.FS

// Options configure a dashboard server.
type Options struct {
	// Bus is the connection the dashboard reads and publishes on
	// (required). New runs get ids from its id source and clock.
	Bus *bus.Bus
	// Metrics, when set, feeds the metrics summary (GET /api/metrics) and
	// Prometheus' GET /metrics, which takes the token or the read token
	// like every read (Authorization: Bearer, or X-Vera-Token) unless
	// MetricsPublic. The caller runs it (Metrics.Run); nil hides the
	// global metrics and the page shows only what it computes from the
	// run's events.
	Metrics *projector.Metrics
	// MetricsPublic serves /metrics without a token.
	MetricsPublic bool
	// DataDir holds the token file and, under runs/<run_id>, the run
	// dirs of the runs started from the page (required).
	DataDir string
	// Token authorises mutating requests; empty makes a random one. It is
	// written to DataDir/dashboard.token with mode 0600.
	Token string
	// Template is the configuration of runs started from the page: model,
	// budgets, auditor, sandbox, VerifyFast. The page supplies the task and
	// may override max_steps; the server sets work_dir.
	Template catalog.RunConfig
	// AllowedHosts are extra Host header values (host or host:port)
	// accepted on a loopback listener, e.g. a name in /etc/hosts. Loopback
	// names (localhost, 127.0.0.0/8, ::1) are always accepted; on a
	// non-loopback listener any host is.
	AllowedHosts []string
	// Heartbeat is the interval of SSE comment heartbeats; default 15s.
	Heartbeat time.Duration
	// ReadToken authorises reading only (the API's GETs and the live
	// feed); empty makes a random one. It is written to
	// DataDir/dashboard.read-token with mode 0600. Token may read too.
	ReadToken string
	// MaxStreams caps the live SSE streams served at once; one more is
	// answered 503 with Retry-After. Default DefaultMaxStreams.
	MaxStreams int
	// TraceURL, when set, links each run to its trace in a tracing UI: a
	// URL template in which {trace_id} stands for the run's trace id
	// (bus.TraceID, 32 lowercase hex digits), e.g.
	// http://127.0.0.1:16686/trace/{trace_id} for Jaeger, or a Grafana
	// Explore URL with {trace_id} in its query for Tempo: any UI whose
	// trace page URL contains the trace id. A URL without {trace_id} is a
	// Jaeger UI base URL: /trace/{trace_id} is appended. It must be an
	// absolute http(s) URL (see TraceURLTemplate); empty: no links.
	TraceURL string
	Logger   *slog.Logger
}

// DefaultMaxStreams is the default cap on live SSE streams.
const DefaultMaxStreams = 256

// ReadTokenFileName is the name of the file in the data dir that holds
// the read-only token.
const ReadTokenFileName = "dashboard.read-token"

// Reads of the bus that many requests can start at once are bounded, so
// that no number of visitors weighs on the stream: catch-up reads (by
// direct gets: they create no consumer) and blob fetches.
const (
	maxCatchUps    = 8
	maxBlobFetches = 4
)

// Server is the dashboard. Create it with New; it is safe for concurrent
// use.
type Server struct {
	opts      Options
	log       *slog.Logger
	events    *bus.Factory
	token     string
	tokenFile string
	readToken string
	allowed   map[string]bool

	streams  atomic.Int64  // live SSE streams
	catchUps chan struct{} // semaphore of catch-up reads
	blobs    chan struct{} // semaphore of blob fetches
	cop      *http.CrossOriginProtection

	handlerOnce sync.Once
	handler     http.Handler

	hub         atomic.Pointer[hub] // Serve's, or one the handler started (handlerHub)
	hubMu       sync.Mutex          // guards the fields below and starting a hub
	handlerHubs []*hub              // hubs the handler started without Serve (Close stops them)
	closed      bool
	sessions    *sessionIndex
	evalCache   evalCache
	traceTmpl   string // Options.TraceURL with {trace_id}, or ""
}

var errClosed = errors.New("dashboard: the server is closed")

// New checks the options, makes the token if none is given and writes it to
// DataDir/dashboard.token (mode 0600).
func New(opts Options) (*Server, error) {
	if opts.Bus == nil {
		return nil, errors.New("dashboard: Options.Bus is nil")
	}
	if opts.DataDir == "" {
		return nil, errors.New("dashboard: Options.DataDir is empty")
	}
	// Runs started here carry the template's model settings: a secret
	// there would be in every vera.task.submitted.
	if err := opts.Template.ValidateSecrets(); err != nil {
		return nil, fmt.Errorf("dashboard: the settings of new runs: %w", err)
	}
	traceTmpl, err := TraceURLTemplate(opts.TraceURL)
	if err != nil {
		return nil, fmt.Errorf("dashboard: Options.TraceURL: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 15 * time.Second
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("dashboard: data dir %q: %w", opts.DataDir, err)
	}
	opts.DataDir = dataDir
	if opts.Token == "" {
		if opts.Token, err = newToken(); err != nil {
			return nil, fmt.Errorf("dashboard: make token: %w", err)
		}
	}
	bo := opts.Bus.Options()
	s := &Server{
		opts:      opts,
		log:       opts.Logger,
		events:    &bus.Factory{Source: catalog.ComponentDashboard, Clock: bo.Clock, IDs: bo.IDs},
		token:     opts.Token,
		tokenFile: filepath.Join(dataDir, TokenFileName),
		allowed:   map[string]bool{},
		cop:       http.NewCrossOriginProtection(),
		traceTmpl: traceTmpl,
	}
	for _, h := range opts.AllowedHosts {
		s.allowed[strings.ToLower(h)] = true
	}
	s.sessions = newSessionIndex(opts.Bus)
	if err := writeTokenFile(s.tokenFile, s.token); err != nil {
		return nil, err
	}
	s.readToken = opts.ReadToken
	if s.readToken == "" {
		if s.readToken, err = newToken(); err != nil {
			return nil, fmt.Errorf("dashboard: read token: %w", err)
		}
	}
	if err := writeTokenFile(filepath.Join(s.opts.DataDir, ReadTokenFileName), s.readToken); err != nil {
		return nil, err
	}
	s.catchUps = make(chan struct{}, maxCatchUps)
	s.blobs = make(chan struct{}, maxBlobFetches)
	return s, nil
}

// writeTokenFile writes token to path with mode 0600, atomically, so that a
// file with looser permissions is replaced rather than reused.
func writeTokenFile(path, token string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("dashboard: token file: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".dashboard-token-*")
	if err != nil {
		return fmt.Errorf("dashboard: token file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("dashboard: token file: %w", err)
	}
	if _, err := tmp.WriteString(token + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("dashboard: token file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("dashboard: token file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("dashboard: token file: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("dashboard: token file: %w", err)
	}
	return nil
}

// Token is the token mutating requests must carry (it may read too).
func (s *Server) Token() string { return s.token }

// ReadToken is the token that may only read.
func (s *Server) ReadToken() string { return s.readToken }

// TokenFile is the path of the file holding the token.
func (s *Server) TokenFile() string { return s.tokenFile }

// Run listens on addr (DefaultAddr when empty) and serves until ctx ends.
func (s *Server) Run(ctx context.Context, addr string) error {
	if addr == "" {
		addr = DefaultAddr
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("dashboard: listen on %s: %w", addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends, then shuts down gracefully: every
// SSE stream ends (their contexts derive from ctx), in-flight requests get
// up to 5 seconds, and ln is closed. While Serve runs, every live SSE
// stream is served from one stream reader (the hub), started before the
// first request, so the dashboard holds one consumer on the stream however
// many streams are open. It returns nil when ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	h, err := startHub(ctx, s.opts.Bus, s.log, 0)
	if err != nil {
		ln.Close()
		return err
	}
	defer h.stop()
	s.hubMu.Lock()
	if old := s.hub.Swap(h); old != nil && old.idle > 0 {
		old.cancel() // the handler's own hub: its streams move to this one
	}
	s.hubMu.Unlock()
	defer s.hub.CompareAndSwap(h, nil)

	srv := &http.Server{
		Handler:           s.Handler(),
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	s.log.Info("dashboard listening", "url", "http://"+ln.Addr().String()+"/")

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
		cancel()
	}
	shutCtx, shutCancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := srv.Shutdown(shutCtx); err != nil {
		s.log.Warn("dashboard: shutdown", "err", err)
		srv.Close()
	}
	shutCancel()
	if serveErr == nil {
		serveErr = <-served
	}
	cancel()
	if errors.Is(serveErr, http.ErrServerClosed) {
		return nil
	}
	if serveErr != nil {
		return fmt.Errorf("dashboard: serve: %w", serveErr)
	}
	return nil
}

// Handler returns the dashboard's HTTP handler (the page and its API). It
// can be mounted on another server; without Serve running, the first live
// stream starts the shared stream reader (the hub), which stops once it
// has had no stream for a while, or at Close.
func (s *Server) Handler() http.Handler {
	s.handlerOnce.Do(func() {
		sub, err := fs.Sub(staticFS, "static")
		if err != nil {
			panic(err) // the embedded tree is fixed at build time
		}
		mux := http.NewServeMux()
		mux.Handle("GET /", http.FileServerFS(sub))
		mux.HandleFunc("GET /api/config", s.reading(s.handleConfig))
		mux.HandleFunc("GET /api/sessions", s.reading(s.handleSessions))
		mux.HandleFunc("POST /api/sessions", s.mutating(s.handleNewSession))
		mux.HandleFunc("GET /api/evals", s.reading(s.handleEvals))
		mux.HandleFunc("GET /api/evals/{id}", s.reading(s.handleEval))
		mux.HandleFunc("GET /api/events", s.reading(s.handleAllEvents))
		mux.HandleFunc("GET /api/runs/{id}/events", s.reading(s.handleRunEvents))
		mux.HandleFunc("POST /api/runs/{id}/start", s.mutating(s.handleStart))
		mux.HandleFunc("POST /api/runs/{id}/cancel", s.mutating(s.handleCancel))
		mux.HandleFunc("POST /api/runs/{id}/fork", s.mutating(s.handleFork))
		mux.HandleFunc("GET /api/metrics", s.reading(s.handleMetrics))
		mux.HandleFunc("GET /api/blobs/{digest}", s.reading(s.handleBlob))
		if s.opts.Metrics != nil {
			mux.Handle("GET /metrics", s.metricsHandler()) // Prometheus
		}
		s.handler = s.guard(mux)
	})
	return s.handler
}

// guard rejects requests whose Host is not the served one (DNS rebinding)
// and sets the security headers of every response.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		if !s.hostAllowed(r) {
			httpError(w, http.StatusForbidden, "host %q is not served here", r.Host)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed: on a loopback listener only loopback names (and
// AllowedHosts) may be asked for, so that a page on another site that
// rebinds its DNS name to 127.0.0.1 cannot read the dashboard.
func (s *Server) hostAllowed(r *http.Request) bool {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if tcp, ok := local.(*net.TCPAddr); !ok || !tcp.IP.IsLoopback() {
		return true
	}
	host := strings.ToLower(r.Host)
	if s.allowed[host] {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	if s.allowed[name] || name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// mutating wraps a state-changing handler: cross-origin requests are
// refused (Sec-Fetch-Site, else Origin against Host), then the token is
// required, and the body is capped.
func (s *Server) mutating(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.cop.Check(r); err != nil {
			httpError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
			httpError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		if !s.tokenOK(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vera-dashboard"`)
			httpError(w, http.StatusUnauthorized, "missing or wrong token: send the token printed at start (also in %s) in the %s header", TokenFileName, TokenHeader)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		next(w, r)
	}
}

// sameOrigin reports whether the Origin header names the host served.
func sameOrigin(origin, host string) bool {
	if origin == "null" {
		return false
	}
	scheme, rest, ok := strings.Cut(origin, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return false
	}
	return strings.EqualFold(rest, host)
}

// reading wraps a handler that only reads: the token or the read token is
// required. The live feed may carry it as the token query parameter,
// since a browser's EventSource cannot set headers.
func (s *Server) reading(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		got := presented(r)
		if got == "" && strings.HasSuffix(r.URL.Path, "/events") {
			got = r.URL.Query().Get("token")
		}
		if !equal(got, s.token) && !equal(got, s.readToken) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="vera-dashboard"`)
			httpError(w, http.StatusUnauthorized, "missing or wrong token: reading needs the token printed at start (or the read-only one in %s) in the %s header", ReadTokenFileName, TokenHeader)
			return
		}
		next(w, r)
	}
}

// presented is the token a request carries in its headers.
func presented(r *http.Request) string {
	got := r.Header.Get(TokenHeader)
	if got == "" {
		if a, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = strings.TrimSpace(a)
		}
	}
	return got
}

func equal(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// tokenOK: the request carries the full token (the read token may not
// change anything).
func (s *Server) tokenOK(r *http.Request) bool { return equal(presented(r), s.token) }

type apiError struct {
	Error string `json:"error"`
}

func httpError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, apiError{Error: fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
