package llm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

const secretKey = "sk-vera-test-5f1c0e8a9b7d4c3e2a10"

// memRecorder records every Requested/Responded call.
type memRecorder struct {
	mu     sync.Mutex
	events []recEvent
}

type recEvent struct {
	kind string // requested, responded
	rec  llm.CallRecord
	resp llm.Response
	err  error
}

func (m *memRecorder) Requested(_ context.Context, rec llm.CallRecord) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, recEvent{kind: "requested", rec: rec})
}

func (m *memRecorder) Responded(_ context.Context, rec llm.CallRecord, resp llm.Response, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, recEvent{kind: "responded", rec: rec, resp: resp, err: err})
}

func (m *memRecorder) all() []recEvent {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]recEvent(nil), m.events...)
}

// dump renders everything recorded, as a log line or an event would carry it.
func (m *memRecorder) dump() string {
	var b strings.Builder
	for _, e := range m.all() {
		fmt.Fprintf(&b, "%s %+v %+v", e.kind, e.rec, e.resp)
		if e.err != nil {
			fmt.Fprintf(&b, " err=%v %+v %#v", e.err, e.err, e.err)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// checkPairs checks that the recorder saw n attempts as Requested/Responded
// pairs numbered 1..n.
func (m *memRecorder) checkPairs(t *testing.T, n int) []recEvent {
	t.Helper()
	evs := m.all()
	if len(evs) != 2*n {
		t.Fatalf("recorder saw %d calls, want %d (%d attempts):\n%s", len(evs), 2*n, n, m.dump())
	}
	var responded []recEvent
	for i := 0; i < n; i++ {
		req, res := evs[2*i], evs[2*i+1]
		if req.kind != "requested" || res.kind != "responded" {
			t.Fatalf("event %d/%d are %s/%s", 2*i, 2*i+1, req.kind, res.kind)
		}
		if req.rec.Attempt != i+1 || res.rec.Attempt != i+1 || res.resp.Attempts != i+1 {
			t.Errorf("attempt %d recorded as %d/%d/%d", i+1, req.rec.Attempt, res.rec.Attempt, res.resp.Attempts)
		}
		if req.rec.CallID == "" || req.rec.CallID != res.rec.CallID || req.rec.CallID != evs[0].rec.CallID {
			t.Errorf("call ids %q %q %q", req.rec.CallID, res.rec.CallID, evs[0].rec.CallID)
		}
		wantRetry := i+1 < n
		if res.rec.Retrying != wantRetry && res.err != nil {
			t.Errorf("attempt %d: Retrying = %v, want %v", i+1, res.rec.Retrying, wantRetry)
		}
		responded = append(responded, res)
	}
	return responded
}

type testClient struct {
	*llm.Client
	srv *scriptedmodel.Server
	rec *memRecorder
	log *bytes.Buffer
}

// newTestClient returns a client of srv with fast backoff, a recorder and a
// captured debug log. mutate adjusts the config.
func newTestClient(t *testing.T, srv *scriptedmodel.Server, mutate func(*llm.Config)) *testClient {
	t.Helper()
	rec := &memRecorder{}
	var logBuf bytes.Buffer
	logMu := &sync.Mutex{}
	cfg := llm.Config{
		BaseURL:    srv.URL(),
		Model:      "test-model",
		Timeout:    10 * time.Second,
		MaxRetries: 3,
		Backoff:    llm.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond},
		Recorder:   rec,
		Logger:     slog.New(slog.NewTextHandler(lockedWriter{mu: logMu, w: &logBuf}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return &testClient{Client: c, srv: srv, rec: rec, log: &logBuf}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func ask(prompt string) llm.Request {
	return llm.Request{Messages: []llm.Message{
		{Role: "system", Content: "You are terse."},
		{Role: "user", Content: prompt},
	}}
}

func TestCompleteJSON(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{
		Content: "Hello from the script.",
		Model:   "served-model-v2",
		Usage:   &scriptedmodel.Usage{PromptTokens: 17, CompletionTokens: 5},
		Delay:   30 * time.Millisecond,
	}))
	c := newTestClient(t, srv, nil)
	temp := 0.2
	req := ask("Say hello.")
	req.Temperature, req.MaxTokens = &temp, 64
	req.RunID, req.Scope, req.Step, req.CallID = "run-1", "agent", 7, "call-agent-s0007"

	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "Hello from the script." || resp.FinishReason != "stop" || resp.Model != "served-model-v2" {
		t.Errorf("resp = %+v", resp)
	}
	if resp.Usage != (llm.Usage{Prompt: 17, Completion: 5, Total: 22}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if resp.Attempts != 1 || resp.Latency < 30*time.Millisecond {
		t.Errorf("attempts %d latency %v", resp.Attempts, resp.Latency)
	}

	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	r := reqs[0]
	if r.Path != "/v1/chat/completions" || r.Model != "test-model" || r.Stream {
		t.Errorf("request %s", r)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[1].Text != "Say hello." {
		t.Errorf("messages %+v", r.Messages)
	}
	if r.Temperature == nil || *r.Temperature != 0.2 || r.MaxTokens == nil || *r.MaxTokens != 64 || r.MaxCompletionTokens != nil {
		t.Errorf("temperature %v max_tokens %v max_completion_tokens %v", r.Temperature, r.MaxTokens, r.MaxCompletionTokens)
	}
	if h := r.Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization sent without a key: %q", h)
	}

	res := c.rec.checkPairs(t, 1)[0]
	if res.err != nil || res.rec.HTTPStatus != 200 || res.resp.Text != resp.Text || res.resp.Latency != resp.Latency {
		t.Errorf("responded record %+v %+v %v", res.rec, res.resp, res.err)
	}
	rq := c.rec.all()[0].rec
	if rq.CallID != "call-agent-s0007" || rq.RunID != "run-1" || rq.Scope != "agent" || rq.Step != 7 ||
		rq.Model != "test-model" || rq.BaseURL != srv.URL() || len(rq.Messages) != 2 || rq.MaxTokens != 64 ||
		rq.Temperature == nil || rq.Stream || rq.Timeout != 10*time.Second {
		t.Errorf("requested record %+v", rq)
	}
	srv.AssertNoMisses(t)
}

func TestCompleteStream(t *testing.T) {
	content := "Streaming works, chunk by chunk, all the way to the end."
	srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{
		Content:      content,
		Usage:        &scriptedmodel.Usage{PromptTokens: 40, CompletionTokens: 12},
		StreamChunks: 6,
		ChunkDelay:   5 * time.Millisecond,
	}))
	c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Stream = true })
	resp, err := c.Complete(context.Background(), ask("Stream please."))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != content || resp.FinishReason != "stop" || resp.Model != "test-model" {
		t.Errorf("resp = %+v", resp)
	}
	if resp.Usage != (llm.Usage{Prompt: 40, Completion: 12, Total: 52}) {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if resp.Attempts != 1 || resp.Latency < 30*time.Millisecond {
		t.Errorf("attempts %d latency %v", resp.Attempts, resp.Latency)
	}
	r := srv.Requests()[0]
	if !r.Stream || !r.IncludeUsage {
		t.Errorf("stream %v include_usage %v", r.Stream, r.IncludeUsage)
	}
	if rec := c.rec.checkPairs(t, 1)[0]; !rec.rec.Stream || rec.resp.Text != content {
		t.Errorf("record %+v", rec)
	}
}

func TestMaxCompletionTokens(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("ok")))
	c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.MaxCompletionTokens = true })
	req := ask("x")
	req.MaxTokens = 32
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if r.MaxTokens != nil || r.MaxCompletionTokens == nil || *r.MaxCompletionTokens != 32 {
		t.Errorf("max_tokens %v max_completion_tokens %v", r.MaxTokens, r.MaxCompletionTokens)
	}
}

func TestBaseURLWithoutV1(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("found")))
	bare := strings.TrimSuffix(srv.URL(), "/v1") // http://127.0.0.1:PORT
	for _, base := range []string{bare, bare + "/", srv.URL() + "/chat/completions"} {
		c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.BaseURL = base })
		if c.BaseURL() != srv.URL() {
			t.Errorf("BaseURL() = %q for %q", c.BaseURL(), base)
		}
		resp, err := c.Complete(context.Background(), ask("where?"))
		if err != nil || resp.Text != "found" {
			t.Errorf("base %q: %q, %v", base, resp.Text, err)
		}
	}
	for _, r := range srv.Requests() {
		if r.Path != "/v1/chat/completions" {
			t.Errorf("request went to %s", r.Path)
		}
	}
	srv.AssertNoMisses(t)
}

func TestRetriesThenSuccess(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(
				scriptedmodel.Reply{Status: 429, RetryAfter: 150 * time.Millisecond},
				scriptedmodel.Reply{Status: 500},
				scriptedmodel.Reply{Status: 503},
				scriptedmodel.Text("third time lucky"),
			))
			c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Stream = stream })
			resp, err := c.Complete(context.Background(), ask("retry me"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "third time lucky" || resp.Attempts != 4 {
				t.Errorf("text %q attempts %d", resp.Text, resp.Attempts)
			}
			reqs := srv.Requests()
			if len(reqs) != 4 {
				t.Fatalf("%d requests", len(reqs))
			}
			if gap := reqs[1].Received.Sub(reqs[0].Received); gap < 150*time.Millisecond {
				t.Errorf("Retry-After-Ms 150 not honoured: retried after %v", gap)
			}
			if gap := reqs[2].Received.Sub(reqs[1].Received); gap > 2*time.Second {
				t.Errorf("backoff of 1ms took %v", gap)
			}
			res := c.rec.checkPairs(t, 4)
			for i, want := range []int{429, 500, 503, 200} {
				if res[i].rec.HTTPStatus != want {
					t.Errorf("attempt %d status %d, want %d", i+1, res[i].rec.HTTPStatus, want)
				}
			}
			var ae *llm.APIError
			if !errors.As(res[0].err, &ae) || ae.Status != 429 || !ae.Retryable || ae.RetryAfter != 150*time.Millisecond || ae.Code != "rate_limit_exceeded" {
				t.Errorf("attempt 1 error %#v", res[0].err)
			}
			if !res[0].rec.Retrying || !res[2].rec.Retrying || res[3].rec.Retrying || res[3].err != nil {
				t.Errorf("retrying flags %v %v %v, last err %v", res[0].rec.Retrying, res[2].rec.Retrying, res[3].rec.Retrying, res[3].err)
			}
			if !strings.Contains(c.log.String(), "retrying") {
				t.Errorf("no retry warning logged:\n%s", c.log)
			}
		})
	}
}

func TestRetriesExhausted(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Status: 500, ErrorMessage: "boom"}))
	c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.MaxRetries = 2 })
	resp, err := c.Complete(context.Background(), ask("x"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 500 || ae.Message != "boom" || !ae.Retryable {
		t.Fatalf("err = %v", err)
	}
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 500 {
		t.Errorf("the openai-go error is not wrapped: %v", err)
	}
	if resp.Attempts != 3 || srv.Count() != 3 {
		t.Errorf("attempts %d, requests %d", resp.Attempts, srv.Count())
	}
	if !strings.Contains(err.Error(), "3 attempts") || !strings.Contains(err.Error(), "boom") {
		t.Errorf("err text %q", err)
	}
	c.rec.checkPairs(t, 3)
}

func TestNoRetryOn4xx(t *testing.T) {
	for _, status := range []int{400, 401, 404, 422} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{
				Status: status, ErrorCode: "context_length_exceeded", ErrorType: "invalid_request_error", ErrorMessage: "too long",
			}))
			c := newTestClient(t, srv, nil)
			resp, err := c.Complete(context.Background(), ask("x"))
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v (%T)", err, err)
			}
			if ae.Status != status || ae.Retryable || ae.Code != "context_length_exceeded" || ae.Type != "invalid_request_error" || ae.Message != "too long" {
				t.Errorf("APIError %+v", ae)
			}
			if srv.Count() != 1 || resp.Attempts != 1 {
				t.Errorf("a %d was retried: %d requests, %d attempts", status, srv.Count(), resp.Attempts)
			}
			if res := c.rec.checkPairs(t, 1)[0]; res.rec.Retrying || res.rec.HTTPStatus != status {
				t.Errorf("record %+v", res.rec)
			}
		})
	}
}

func TestShouldRetryHeader(t *testing.T) {
	// A scripting miss is a 500 with x-should-retry: false.
	srv := scriptedmodel.Start(t)
	c := newTestClient(t, srv, nil)
	_, err := c.Complete(context.Background(), ask("x"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 500 || ae.Retryable || srv.Count() != 1 {
		t.Errorf("err %v, %d requests", err, srv.Count())
	}

	srv2 := scriptedmodel.Start(t, scriptedmodel.WithReplies(
		scriptedmodel.Reply{Status: 400, Header: http.Header{"X-Should-Retry": {"true"}}},
		scriptedmodel.Text("ok"),
	))
	c2 := newTestClient(t, srv2, nil)
	if resp, err := c2.Complete(context.Background(), ask("x")); err != nil || resp.Attempts != 2 {
		t.Errorf("x-should-retry: true not honoured: %v, %+v", err, resp)
	}
}

func TestErrorPageIsAnAPIError(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(
		scriptedmodel.Reply{Status: 502, Malformed: true},
		scriptedmodel.Text("ok"),
	))
	c := newTestClient(t, srv, nil)
	resp, err := c.Complete(context.Background(), ask("x"))
	if err != nil || resp.Attempts != 2 {
		t.Fatalf("err %v resp %+v", err, resp)
	}
	var ae *llm.APIError
	if first := c.rec.checkPairs(t, 2)[0]; !errors.As(first.err, &ae) || ae.Status != 502 || !ae.Retryable {
		t.Errorf("first attempt %v", first.err)
	}
}

func TestRetryAfterTooLong(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Status: 429, RetryAfter: time.Hour}))
	c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Backoff.MaxRetryAfter = time.Minute })
	start := time.Now()
	_, err := c.Complete(context.Background(), ask("x"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 429 || ae.RetryAfter != time.Hour {
		t.Fatalf("err = %v", err)
	}
	if srv.Count() != 1 || time.Since(start) > 5*time.Second {
		t.Errorf("%d requests in %v", srv.Count(), time.Since(start))
	}
}

func TestRetryWaitBeyondDeadline(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Status: 429, RetryAfter: 30 * time.Second}))
	c := newTestClient(t, srv, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := c.Complete(ctx, ask("x"))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 429 {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > time.Second || srv.Count() != 1 {
		t.Errorf("waited %v for a retry that could not happen before the deadline (%d requests)", time.Since(start), srv.Count())
	}
}

func TestAttemptTimeout(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v/all", stream), func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "late", Delay: 5 * time.Second}))
			c := newTestClient(t, srv, func(cfg *llm.Config) {
				cfg.Timeout, cfg.MaxRetries, cfg.Stream = 100*time.Millisecond, 2, stream
			})
			start := time.Now()
			resp, err := c.Complete(context.Background(), ask("x"))
			if !errors.Is(err, llm.ErrTimeout) {
				t.Fatalf("err = %v", err)
			}
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("an attempt timeout reads as the caller's deadline: %v", err)
			}
			if resp.Attempts != 3 || srv.Count() != 3 {
				t.Errorf("attempts %d requests %d", resp.Attempts, srv.Count())
			}
			if el := time.Since(start); el < 300*time.Millisecond || el > 3*time.Second {
				t.Errorf("3 attempts of 100ms took %v", el)
			}
			for i, r := range c.rec.checkPairs(t, 3) {
				if !errors.Is(r.err, llm.ErrTimeout) || r.rec.HTTPStatus != 0 || r.rec.Retrying != (i < 2) {
					t.Errorf("attempt %d: %v status %d retrying %v", i+1, r.err, r.rec.HTTPStatus, r.rec.Retrying)
				}
			}
		})
		t.Run(fmt.Sprintf("stream=%v/then-ok", stream), func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(
				scriptedmodel.Reply{Content: "late", Delay: 5 * time.Second},
				scriptedmodel.Reply{Content: "slow chunks", ChunkDelay: time.Second, StreamChunks: 3},
				scriptedmodel.Text("in time"),
			))
			c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Timeout, cfg.Stream = 400*time.Millisecond, stream })
			resp, err := c.Complete(context.Background(), ask("x"))
			want, attempts := "in time", 3
			if !stream {
				want, attempts = "slow chunks", 2 // ChunkDelay only slows streams
			}
			if err != nil || resp.Text != want || resp.Attempts != attempts {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			if resp.Latency >= 400*time.Millisecond {
				t.Errorf("latency %v is not the successful attempt's", resp.Latency)
			}
		})
	}
}

func TestTimeoutFromEnvironment(t *testing.T) {
	srv := scriptedmodel.Start(t)
	for _, c := range []struct {
		env  string
		want time.Duration
	}{
		{"", llm.DefaultTimeout},
		{"42", 42 * time.Second},
		{"2.5", 2500 * time.Millisecond},
		{"90s", 90 * time.Second},
		{"2m30s", 150 * time.Second},
	} {
		t.Setenv("MODEL_TIMEOUT", c.env)
		cl, err := llm.New(llm.Config{BaseURL: srv.URL()})
		if err != nil {
			t.Fatalf("MODEL_TIMEOUT=%q: %v", c.env, err)
		}
		if cl.Timeout() != c.want {
			t.Errorf("MODEL_TIMEOUT=%q: timeout %v, want %v", c.env, cl.Timeout(), c.want)
		}
	}
	for _, bad := range []string{"soon", "-3", "0", "-1s"} {
		t.Setenv("MODEL_TIMEOUT", bad)
		if _, err := llm.New(llm.Config{BaseURL: srv.URL()}); err == nil {
			t.Errorf("MODEL_TIMEOUT=%q accepted", bad)
		}
	}
	t.Setenv("MODEL_TIMEOUT", "soon")
	cl, err := llm.New(llm.Config{BaseURL: srv.URL(), Timeout: time.Minute})
	if err != nil || cl.Timeout() != time.Minute {
		t.Errorf("an explicit timeout should win over MODEL_TIMEOUT: %v %v", cl, err)
	}
	cl, err = llm.New(llm.Config{BaseURL: srv.URL(), Timeout: -1})
	if err != nil || cl.Timeout() != 0 {
		t.Errorf("a negative timeout should disable it: %v", err)
	}
	if cl.MaxAttempts() != 1+llm.DefaultMaxRetries {
		t.Errorf("MaxAttempts = %d", cl.MaxAttempts())
	}
}

func TestCancellation(t *testing.T) {
	t.Run("during the request", func(t *testing.T) {
		srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "never", Delay: 30 * time.Second}))
		c := newTestClient(t, srv, nil)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			_ = srv.WaitForRequests(context.Background(), 1)
			time.Sleep(20 * time.Millisecond)
			cancel()
		}()
		start := time.Now()
		resp, err := c.Complete(ctx, ask("x"))
		if !errors.Is(err, context.Canceled) || errors.Is(err, llm.ErrTimeout) {
			t.Fatalf("err = %v", err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("cancellation took %v", el)
		}
		if srv.Count() != 1 || resp.Attempts != 1 {
			t.Errorf("retried after cancellation: %d requests", srv.Count())
		}
		if r := c.rec.checkPairs(t, 1)[0]; r.rec.Retrying || !errors.Is(r.err, context.Canceled) {
			t.Errorf("record %+v %v", r.rec, r.err)
		}
	})
	t.Run("during the backoff", func(t *testing.T) {
		srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Status: 503, RetryAfter: 20 * time.Second}))
		c := newTestClient(t, srv, nil)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			_ = srv.WaitForRequests(context.Background(), 1)
			time.Sleep(50 * time.Millisecond)
			cancel()
		}()
		start := time.Now()
		_, err := c.Complete(ctx, ask("x"))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("cancellation took %v", el)
		}
		if srv.Count() != 1 {
			t.Errorf("%d requests", srv.Count())
		}
	})
	t.Run("before the call", func(t *testing.T) {
		srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("x")))
		c := newTestClient(t, srv, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Complete(ctx, ask("x")); !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
		if srv.Count() != 0 || len(c.rec.all()) != 0 {
			t.Errorf("a cancelled call was sent or recorded")
		}
	})
	t.Run("caller deadline", func(t *testing.T) {
		srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "late", Delay: 30 * time.Second}))
		c := newTestClient(t, srv, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := c.Complete(ctx, ask("x"))
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, llm.ErrTimeout) || srv.Count() != 1 {
			t.Errorf("err = %v after %d requests", err, srv.Count())
		}
	})
}

func TestTruncatedIsNotAnError(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{
				Content: "a long answer that the server cuts", Truncate: true, TruncateAt: 6,
			}))
			c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Stream = stream })
			resp, err := c.Complete(context.Background(), ask("x"))
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != "length" || resp.Text != "a long" || resp.Attempts != 1 {
				t.Errorf("resp %+v", resp)
			}
		})
	}
}

func TestMalformedIsRetriedOnce(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v/twice", stream), func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "some content here", Malformed: true}))
			c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Stream = stream })
			resp, err := c.Complete(context.Background(), ask("x"))
			if !errors.Is(err, llm.ErrMalformed) {
				t.Fatalf("err = %v", err)
			}
			var ae *llm.APIError
			if errors.As(err, &ae) {
				t.Errorf("a malformed 200 is reported as an API error: %v", err)
			}
			if srv.Count() != 2 || resp.Attempts != 2 {
				t.Errorf("%d requests, %d attempts; want 2 (one retry)", srv.Count(), resp.Attempts)
			}
			res := c.rec.checkPairs(t, 2)
			if !res[0].rec.Retrying || res[1].rec.Retrying || res[0].rec.HTTPStatus != 200 {
				t.Errorf("records %+v / %+v", res[0].rec, res[1].rec)
			}
		})
		t.Run(fmt.Sprintf("stream=%v/once", stream), func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(
				scriptedmodel.Reply{Content: "garbage", Malformed: true},
				scriptedmodel.Reply{Status: 500},
				scriptedmodel.Text("fine"),
			))
			c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Stream = stream })
			resp, err := c.Complete(context.Background(), ask("x"))
			if err != nil || resp.Text != "fine" || resp.Attempts != 3 {
				t.Errorf("resp %+v err %v", resp, err)
			}
		})
	}
}

func TestDisconnectIsRetried(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(
				scriptedmodel.Reply{Content: "abcdefgh", Disconnect: true},
				scriptedmodel.Reply{Content: "abcdefgh", Disconnect: true},
				scriptedmodel.Text("whole"),
			))
			c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Stream = stream })
			resp, err := c.Complete(context.Background(), ask("x"))
			if err != nil || resp.Text != "whole" || resp.Attempts != 3 {
				t.Fatalf("resp %+v err %v", resp, err)
			}
			first := c.rec.checkPairs(t, 3)[0]
			if !errors.Is(first.err, llm.ErrConnection) {
				t.Errorf("first attempt error %v", first.err)
			}
			if stream && first.resp.Text != "abcd" {
				t.Errorf("partial text of the dropped stream %q", first.resp.Text)
			}
		})
	}
}

func TestConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	rec := &memRecorder{}
	c, err := llm.New(llm.Config{
		BaseURL: "http://" + addr, Model: "m", MaxRetries: 2, Recorder: rec,
		Backoff: llm.Backoff{Base: time.Millisecond}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Complete(context.Background(), ask("x"))
	if !errors.Is(err, llm.ErrConnection) || resp.Attempts != 3 {
		t.Errorf("err %v attempts %d", err, resp.Attempts)
	}
	rec.checkPairs(t, 3)
}

// A stream that ends cleanly without a finish_reason (nor [DONE]) is
// ErrIncomplete, retried once, with the partial text returned. The
// scripted server cannot send one, so a raw handler does.
func TestIncompleteStream(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"half"},"finish_reason":null}]}`+"\n\n")
		if n == 3 {
			_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" and whole"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
		}
	}))
	defer raw.Close()
	rec := &memRecorder{}
	c, err := llm.New(llm.Config{
		BaseURL: raw.URL, Model: "m", Stream: true, Recorder: rec,
		Backoff: llm.Backoff{Base: time.Millisecond}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Complete(context.Background(), ask("x"))
	if !errors.Is(err, llm.ErrIncomplete) {
		t.Fatalf("err = %v", err)
	}
	if resp.Text != "half" || resp.FinishReason != "" || resp.Attempts != 2 {
		t.Errorf("resp %+v", resp)
	}
	rec.checkPairs(t, 2)

	resp, err = c.Complete(context.Background(), ask("x"))
	if err != nil || resp.Text != "half and whole" || resp.FinishReason != "stop" {
		t.Errorf("third stream: %+v %v", resp, err)
	}
}

func TestInvalidRequest(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("x")))
	c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Model = "" })
	for name, req := range map[string]llm.Request{
		"no model":    ask("x"),
		"no messages": {Model: "m"},
		"bad role":    {Model: "m", Messages: []llm.Message{{Role: "tool", Content: "x"}}},
	} {
		if _, err := c.Complete(context.Background(), req); !errors.Is(err, llm.ErrInvalidRequest) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if srv.Count() != 0 || len(c.rec.all()) != 0 {
		t.Errorf("invalid requests were sent (%d) or recorded (%d)", srv.Count(), len(c.rec.all()))
	}
}

func TestCallIDs(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("x")))
	n := 0
	c := newTestClient(t, srv, func(cfg *llm.Config) {
		cfg.NewCallID = func() string { n++; return fmt.Sprintf("gen-%d", n) }
	})
	req := ask("x")
	for range 2 {
		if _, err := c.Complete(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	req.CallID = "mine"
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range c.rec.all() {
		ids = append(ids, e.rec.CallID)
	}
	if strings.Join(ids, " ") != "gen-1 gen-1 gen-2 gen-2 mine mine" {
		t.Errorf("call ids %v", ids)
	}

	// The default generator makes distinct ids.
	c2 := newTestClient(t, srv, nil)
	for range 2 {
		if _, err := c2.Complete(context.Background(), ask("x")); err != nil {
			t.Fatal(err)
		}
	}
	evs := c2.rec.all()
	if a, b := evs[0].rec.CallID, evs[2].rec.CallID; a == b || !strings.HasPrefix(a, "call-") {
		t.Errorf("generated call ids %q %q", a, b)
	}
}

func TestConcurrentCalls(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "same", Delay: 10 * time.Millisecond}))
	c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.Stream = true })
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := ask(fmt.Sprint("q", i))
			req.CallID = fmt.Sprint("c", i)
			resp, err := c.Complete(context.Background(), req)
			if err == nil && resp.Text != "same" {
				err = fmt.Errorf("text %q", resp.Text)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if srv.Count() != 16 || len(c.rec.all()) != 32 {
		t.Errorf("%d requests, %d records", srv.Count(), len(c.rec.all()))
	}
}
