package scriptedmodel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// maxBodyBytes bounds the request bodies the server accepts.
const maxBodyBytes = 32 << 20

// ErrClosed is returned by [Server.WaitForRequests] when the server is closed
// before enough requests arrived.
var ErrClosed = errors.New("scriptedmodel: server closed")

// Server is a scripted OpenAI-compatible chat-completions server listening
// on 127.0.0.1. Create it with [New] or [Start].
type Server struct {
	listener  net.Listener
	http      *http.Server
	baseURL   string
	done      chan struct{}
	serveDone chan struct{}
	closeOnce sync.Once
	conns     sync.WaitGroup
	inFlight  atomic.Int64
	logf      func(format string, args ...any)

	// scriptMu guards the script and the call counter. It is taken before
	// recMu when both are needed.
	scriptMu    sync.Mutex
	steps       []*scriptedRule
	conditional []*scriptedRule
	sequence    []*scriptedRule
	fallback    *Reply
	models      []string
	calls       int

	recMu    sync.Mutex
	requests []Request
	misses   []Request
	changed  chan struct{} // closed and replaced whenever a request is recorded
}

// Option configures a [Server].
type Option func(*Server)

// WithRules adds rules to the script (see the package documentation for
// their precedence).
func WithRules(rules ...Rule) Option {
	return func(s *Server) { s.addRules(rules) }
}

// WithReplies appends replies to the sequence: the requests that no step or
// conditional rule answers get them in order, each reply answering
// Reply.Times requests.
func WithReplies(replies ...Reply) Option {
	return func(s *Server) { s.addReplies(replies) }
}

// WithFallback sets the reply given to any request nothing else answers.
func WithFallback(r Reply) Option {
	return func(s *Server) { s.setFallback(r) }
}

// WithModels adds model names to the GET /v1/models listing, besides those
// named by the script's rules and replies.
func WithModels(names ...string) Option {
	return func(s *Server) { s.models = append(s.models, names...) }
}

// WithLogf makes the server log one line per request (never its headers),
// typically with t.Logf.
func WithLogf(logf func(format string, args ...any)) Option {
	return func(s *Server) { s.logf = logf }
}

// New starts a server on 127.0.0.1 with an ephemeral port. It panics outside
// a test binary or if it cannot listen. Call [Server.Close] when done, or
// use [Start].
func New(opts ...Option) *Server {
	if !testing.Testing() {
		panic("scriptedmodel: this test helper must not be used outside tests")
	}
	s := &Server{
		done:      make(chan struct{}),
		serveDone: make(chan struct{}),
		changed:   make(chan struct{}),
	}
	for _, opt := range opts {
		opt(s)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("scriptedmodel: listen on 127.0.0.1: %v", err))
	}
	s.listener = l
	s.baseURL = "http://" + l.Addr().String() + "/v1"
	s.http = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ConnState: func(_ net.Conn, state http.ConnState) {
			switch state {
			case http.StateNew:
				s.conns.Add(1)
			case http.StateHijacked, http.StateClosed:
				s.conns.Done()
			}
		},
	}
	go func() {
		defer close(s.serveDone)
		_ = s.http.Serve(l)
	}()
	return s
}

// Start is [New] plus t.Cleanup(s.Close).
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	t.Cleanup(s.Close)
	return s
}

// URL returns the base URL to give openai-go's option.WithBaseURL, e.g.
// "http://127.0.0.1:41234/v1".
func (s *Server) URL() string { return s.baseURL }

// Close stops the server: pending delays end, connections are closed, and
// Close returns once every connection and handler goroutine has finished.
// It is idempotent.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		_ = s.http.Close() // closes the listener, waits for Serve, closes connections
		<-s.serveDone
		s.conns.Wait()
	})
}

// AddRules adds rules to the script of a running server.
func (s *Server) AddRules(rules ...Rule) { s.addRules(rules) }

// AddReplies appends replies to the sequence of a running server.
func (s *Server) AddReplies(replies ...Reply) { s.addReplies(replies) }

// SetFallback sets the fallback reply of a running server.
func (s *Server) SetFallback(r Reply) { s.setFallback(r) }

func (s *Server) addRules(rules []Rule) {
	s.scriptMu.Lock()
	defer s.scriptMu.Unlock()
	for _, r := range rules {
		switch r.tier() {
		case tierStep:
			if r.Call < 0 {
				panic(fmt.Sprintf("scriptedmodel: rule with Call %d: call index counts from 1", r.Call))
			}
			s.steps = append(s.steps, newScriptedRule(r, 0))
		case tierConditional:
			s.conditional = append(s.conditional, newScriptedRule(r, 0))
		default:
			s.sequence = append(s.sequence, newScriptedRule(r, len(s.sequence)+1))
		}
	}
}

func (s *Server) addReplies(replies []Reply) {
	rules := make([]Rule, len(replies))
	for i, r := range replies {
		rules[i] = Rule{Reply: r}
	}
	s.addRules(rules)
}

func (s *Server) setFallback(r Reply) {
	s.scriptMu.Lock()
	defer s.scriptMu.Unlock()
	s.fallback = &r
}

// match finds the reply for req; scriptMu must be held.
func (s *Server) match(req *Request) (Reply, string, bool) {
	for _, tier := range [][]*scriptedRule{s.steps, s.conditional, s.sequence} {
		for _, sr := range tier {
			if r, ok := sr.try(req); ok {
				return r, sr.label, true
			}
		}
	}
	if s.fallback != nil {
		return *s.fallback, "fallback", true
	}
	return Reply{}, "", false
}

// Models returns the model names GET /v1/models lists: those given to
// [WithModels] and those named by rules and replies, sorted.
func (s *Server) Models() []string {
	s.scriptMu.Lock()
	defer s.scriptMu.Unlock()
	names := slices.Clone(s.models)
	for _, tier := range [][]*scriptedRule{s.steps, s.conditional, s.sequence} {
		for _, sr := range tier {
			names = append(names, sr.Model, sr.Reply.Model)
		}
	}
	if s.fallback != nil {
		names = append(names, s.fallback.Model)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) > 0 && names[0] == "" {
		names = names[1:]
	}
	return names
}

// Requests returns a copy of every chat request received so far, in call
// index order.
func (s *Server) Requests() []Request {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	out := make([]Request, len(s.requests))
	for i, r := range s.requests {
		out[i] = r.clone()
	}
	return out
}

// Count returns the number of chat requests received so far.
func (s *Server) Count() int {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	return len(s.requests)
}

// InFlight returns the number of requests being handled right now.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// Misses returns the requests nothing answered: chat requests no rule
// matched, unparseable chat requests, and requests to unknown endpoints.
func (s *Server) Misses() []Request {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	out := make([]Request, len(s.misses))
	for i, r := range s.misses {
		out[i] = r.clone()
	}
	return out
}

// AssertNoMisses reports a test error for every miss.
func (s *Server) AssertNoMisses(t testing.TB) {
	t.Helper()
	for _, m := range s.Misses() {
		t.Errorf("scriptedmodel: unanswered request: %s", m)
	}
}

// Pending describes the rules that can still answer but have not been
// exhausted: step rules not reached yet and rules with a finite budget left.
// Rules with an unlimited budget ([Forever], Func rules) are not listed.
func (s *Server) Pending() []string {
	s.scriptMu.Lock()
	defer s.scriptMu.Unlock()
	var out []string
	for _, tier := range [][]*scriptedRule{s.steps, s.conditional, s.sequence} {
		for _, sr := range tier {
			if sr.remaining > 0 {
				out = append(out, fmt.Sprintf("%s (%d left)", sr.label, sr.remaining))
			}
		}
	}
	return out
}

// AssertAllUsed reports a test error for every pending rule.
func (s *Server) AssertAllUsed(t testing.TB) {
	t.Helper()
	for _, p := range s.Pending() {
		t.Errorf("scriptedmodel: scripted reply never used: %s", p)
	}
}

// WaitForRequests waits until at least n chat requests have been received.
// It returns ctx.Err() if ctx ends first and ErrClosed if the server is
// closed first.
func (s *Server) WaitForRequests(ctx context.Context, n int) error {
	for {
		s.recMu.Lock()
		count, changed := len(s.requests), s.changed
		s.recMu.Unlock()
		if count >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return ErrClosed
		}
	}
}

// record stores req; scriptMu must be held when req is a chat request so that
// requests are stored in call index order.
func (s *Server) record(req Request, chat bool) {
	s.recMu.Lock()
	if chat {
		s.requests = append(s.requests, req)
	}
	if req.Missed {
		s.misses = append(s.misses, req)
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.recMu.Unlock()
	if s.logf != nil {
		s.logf("scriptedmodel: %s", req)
	}
}

// sleep waits d, returning false if ctx ends or the server closes first.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)

	path := r.URL.Path
	switch {
	case path == "/v1/chat/completions" && r.Method == http.MethodPost:
		s.handleChat(w, r)
	case path == "/v1/models" && r.Method == http.MethodGet:
		s.handleModels(w, "")
	case strings.HasPrefix(path, "/v1/models/") && r.Method == http.MethodGet:
		s.handleModels(w, strings.TrimPrefix(path, "/v1/models/"))
	default:
		status, reason := http.StatusNotFound, "unknown endpoint"
		if path == "/v1/chat/completions" || path == "/v1/models" {
			status, reason = http.StatusMethodNotAllowed, "method not allowed"
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes))
		s.record(Request{
			Received:   time.Now(),
			Method:     r.Method,
			Path:       path,
			Header:     r.Header.Clone(),
			Body:       body,
			Missed:     true,
			MissReason: reason,
		}, false)
		w.Header().Set("x-should-retry", "false")
		writeAPIError(w, status, "invalid_request_error", "", fmt.Sprintf("scriptedmodel: %s: %s %s", reason, r.Method, path))
	}
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	req := Request{
		Received: time.Now(),
		Method:   r.Method,
		Path:     r.URL.Path,
		Header:   r.Header.Clone(),
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBodyBytes+1))
	switch {
	case err != nil:
		req.ParseError = fmt.Sprintf("reading body: %v", err)
	case len(body) > maxBodyBytes:
		req.ParseError = "request body too large"
	default:
		req.Body = body
		if err := parseBody(&req); err != nil {
			req.ParseError = err.Error()
		}
	}

	s.scriptMu.Lock()
	s.calls++
	req.Index = s.calls
	var (
		reply   Reply
		matched bool
	)
	if req.ParseError != "" {
		req.Missed, req.MissReason = true, "invalid request: "+req.ParseError
	} else {
		reply, req.Rule, matched = s.match(&req)
		if !matched {
			req.Missed, req.MissReason = true, "no scripted reply matches"
		}
	}
	s.record(req, true)
	s.scriptMu.Unlock()

	switch {
	case req.ParseError != "":
		w.Header().Set("x-should-retry", "false")
		writeAPIError(w, http.StatusBadRequest, "invalid_request_error", "", "scriptedmodel: "+req.ParseError)
	case !matched:
		w.Header().Set("x-should-retry", "false")
		writeAPIError(w, http.StatusInternalServerError, "server_error", "scriptedmodel_no_match",
			fmt.Sprintf("scriptedmodel: no scripted reply matches request #%d (model %q, last user message %q)",
				req.Index, req.Model, abbreviate(req.LastUserMessage(), 200)))
	default:
		s.respond(w, r, &req, reply)
	}
}

func (s *Server) handleModels(w http.ResponseWriter, id string) {
	names := s.Models()
	if id == "" {
		data := make([]wireModel, len(names))
		for i, n := range names {
			data[i] = newWireModel(n)
		}
		writeJSON(w, http.StatusOK, wireModelList{Object: "list", Data: data})
		return
	}
	if slices.Contains(names, id) {
		writeJSON(w, http.StatusOK, newWireModel(id))
		return
	}
	writeAPIError(w, http.StatusNotFound, "invalid_request_error", "model_not_found",
		fmt.Sprintf("The model '%s' does not exist (scriptedmodel)", id))
}
