package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// Client calls an OpenAI-compatible /v1/chat/completions server through
// openai-go. It implements [Completer] and is safe for concurrent use.
//
// Each call is up to 1+MaxRetries attempts, each bounded by Config.Timeout;
// the retry loop is this package's own (openai-go's is switched off) so
// that every attempt is visible to the Recorder and counted in
// Response.Attempts.
//
// Environment: the client is built from openai-go's chat-completion
// service constructor with explicit options, never with openai.NewClient,
// whose defaults read OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_ADMIN_KEY,
// OPENAI_ORG_ID, OPENAI_PROJECT_ID, OPENAI_WEBHOOK_SECRET and
// OPENAI_CUSTOM_HEADERS (explicit options override the base URL and the
// key, but the organisation, project and custom headers would still be
// sent, and the ambient key would be sent to a server configured without
// one). None of the OPENAI_* variables has any effect here. What still
// applies from the environment: MODEL_TIMEOUT (when Config.Timeout is 0),
// the variable named by Config.APIKeyEnv, and, with the default HTTP
// client, Go's HTTP_PROXY / HTTPS_PROXY / NO_PROXY and SSL_CERT_FILE /
// SSL_CERT_DIR handling.
type Client struct {
	baseURL    string // normalised
	shownURL   string // normalised, password redacted
	model      string
	svc        openai.ChatCompletionService
	red        redactor
	log        *slog.Logger
	clock      Clock
	timeout    time.Duration
	maxRetries int
	backoff    Backoff
	stream     bool
	maxCompl   bool
	rec        Recorder
	newCallID  func() string
	ownedHTTP  *http.Client // the HTTP client New made, closed by Close
}

var _ Completer = (*Client)(nil)

// New builds a client. It reads the API key from the variable named by
// cfg.APIKeyEnv (an error if that variable is not set) and MODEL_TIMEOUT
// when cfg.Timeout is 0.
func New(cfg Config) (*Client, error) {
	base, err := NormalizeBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	lookup := cfg.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var key string
	if cfg.APIKeyEnv != "" {
		if !envNameRE.MatchString(cfg.APIKeyEnv) {
			return nil, fmt.Errorf("llm: api_key_env %q is not an environment variable name (it must name the variable holding the key, not be the key)", abbreviateSecret(cfg.APIKeyEnv))
		}
		v, ok := lookup(cfg.APIKeyEnv)
		if !ok {
			return nil, fmt.Errorf("llm: environment variable %s (the model's api_key_env) is not set", showEnvName(cfg.APIKeyEnv))
		}
		key = strings.TrimSpace(v)
	}
	timeout := cfg.Timeout
	switch {
	case timeout == 0:
		if timeout, err = TimeoutFromEnv(lookup); err != nil {
			return nil, err
		}
	case timeout < 0:
		timeout = 0
	}
	maxRetries := cfg.MaxRetries
	switch {
	case maxRetries == 0:
		maxRetries = DefaultMaxRetries
	case maxRetries < 0:
		maxRetries = 0
	}
	backoff := cfg.Backoff
	backoff.setDefaults()

	hc, owned := cfg.HTTPClient, (*http.Client)(nil)
	if hc == nil {
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			hc = &http.Client{Transport: t.Clone()}
			owned = hc
		} else {
			hc = &http.Client{Transport: http.DefaultTransport}
		}
	}
	opts := []option.RequestOption{
		option.WithBaseURL(base),
		option.WithHTTPClient(hc),
		option.WithMaxRetries(0), // our own loop retries, visibly
	}
	if key != "" {
		opts = append(opts, option.WithAPIKey(key))
	}
	c := &Client{
		baseURL:    base,
		shownURL:   RedactURL(base),
		model:      cfg.Model,
		svc:        openai.NewChatCompletionService(opts...),
		red:        redactor{key: key},
		log:        cfg.Logger,
		clock:      cfg.Clock,
		timeout:    timeout,
		maxRetries: maxRetries,
		backoff:    backoff,
		stream:     cfg.Stream,
		maxCompl:   cfg.MaxCompletionTokens,
		rec:        cfg.Recorder,
		newCallID:  cfg.NewCallID,
		ownedHTTP:  owned,
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.clock == nil {
		c.clock = systemClock{}
	}
	if c.newCallID == nil {
		c.newCallID = randomCallID
	}
	return c, nil
}

// Close releases the idle connections of the HTTP transport New made (a
// Config.HTTPClient is left alone). Calls may still be made afterwards;
// they open new connections.
func (c *Client) Close() {
	if c.ownedHTTP != nil {
		c.ownedHTTP.CloseIdleConnections()
	}
}

// BaseURL returns the normalised base URL (password redacted).
func (c *Client) BaseURL() string { return c.shownURL }

// Model returns the default model name.
func (c *Client) Model() string { return c.model }

// Timeout returns the per-attempt timeout (0: none).
func (c *Client) Timeout() time.Duration { return c.timeout }

// MaxAttempts returns 1 + the number of retries.
func (c *Client) MaxAttempts() int { return 1 + c.maxRetries }

// Complete makes one call: up to 1+MaxRetries attempts.
//
// Retried: HTTP 408, 409, 429 and 5xx (unless the server says
// "x-should-retry: false"; "x-should-retry: true" makes any status
// retryable), connection errors, attempt timeouts, and, once per call, a
// malformed 200 body or an incomplete stream (ErrMalformed, ErrIncomplete).
// Not retried: other 4xx, ctx cancellation, ErrInvalidRequest, a
// Retry-After above Backoff.MaxRetryAfter, a wait that would outlast ctx's
// deadline.
//
// finish_reason "length" (a truncated answer) is a success: the caller
// decides. On success the Response carries the successful attempt's
// latency and the attempt count. On failure it carries what the last
// attempt got (Attempts, and the partial text of an incomplete stream) and
// the error is, by errors.Is / errors.As: *APIError, ErrTimeout,
// ErrIncomplete, ErrMalformed, ErrConnection, ErrInvalidRequest, or ctx's
// error (context.Canceled / context.DeadlineExceeded). Error texts never
// contain the API key.
func (c *Client) Complete(ctx context.Context, req Request) (Response, error) {
	model := req.Model
	if model == "" {
		model = c.model
	}
	params, err := c.params(req, model)
	if err != nil {
		return Response{}, err
	}
	callID := req.CallID
	if callID == "" {
		callID = c.newCallID()
	}
	rec := CallRecord{
		CallID: callID, RunID: req.RunID, Scope: req.Scope, Purpose: req.Purpose, CheckID: req.CheckID,
		Step: req.Step, Round: req.Round, CauseID: req.CauseID,
		Model: model, BaseURL: c.shownURL,
		Messages: req.Messages, Temperature: req.Temperature, MaxTokens: req.MaxTokens, Stream: c.stream,
		Timeout: c.timeout,
	}
	malformed := 0
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return Response{Attempts: attempt - 1}, fmt.Errorf("llm: model call %s cancelled before attempt %d: %w", callID, attempt, err)
		}
		rec.Attempt, rec.HTTPStatus, rec.Retrying = attempt, 0, false
		if c.rec != nil {
			c.rec.Requested(ctx, rec)
		}
		out := c.attempt(ctx, params)
		out.resp.Attempts = attempt
		retry, wait := c.decide(ctx, out, attempt, &malformed)
		rec.HTTPStatus, rec.Retrying = out.status, retry
		if c.rec != nil {
			c.rec.Responded(ctx, rec, out.resp, out.err)
		}
		if out.err == nil {
			c.log.Debug("model call", "call_id", callID, "model", model, "attempt", attempt,
				"latency", out.resp.Latency, "finish_reason", out.resp.FinishReason, "tokens", out.resp.Usage.Total)
			return out.resp, nil
		}
		if !retry {
			if out.kind == kindCancelled {
				return out.resp, out.err
			}
			c.log.Debug("model call failed", "call_id", callID, "model", model, "attempt", attempt, "err", out.err.Error())
			return out.resp, fmt.Errorf("%w (call %s, %s)", out.err, callID, plural(attempt, "attempt"))
		}
		c.log.Warn("model call: retrying", "call_id", callID, "model", model, "base_url", c.shownURL,
			"attempt", attempt, "of", 1+c.maxRetries, "wait", wait, "status", out.status, "err", out.err.Error())
		if err := sleep(ctx, wait); err != nil {
			return out.resp, fmt.Errorf("llm: model call %s cancelled while waiting to retry (last error: %v): %w", callID, out.err, err)
		}
	}
}

// errKind classifies the outcome of an attempt.
type errKind int

const (
	kindNone errKind = iota
	kindCancelled
	kindTimeout
	kindConnection
	kindAPI
	kindStreamError // an error event inside a 200 stream
	kindMalformed   // ErrMalformed or ErrIncomplete
)

type attemptResult struct {
	resp       Response
	err        error
	kind       errKind
	status     int
	retryable  bool
	retryAfter time.Duration
	hasAfter   bool
}

var errAttemptTimeout = errors.New("llm: attempt timeout")

func (c *Client) attempt(ctx context.Context, params openai.ChatCompletionNewParams) attemptResult {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if c.timeout > 0 {
		actx, cancel = context.WithTimeoutCause(ctx, c.timeout, errAttemptTimeout)
	}
	defer cancel()

	var httpResp *http.Response
	start := c.clock.Now()
	var (
		resp Response
		err  error
	)
	if c.stream {
		resp, err = c.doStream(actx, params, &httpResp)
	} else {
		resp, err = c.doJSON(actx, params, &httpResp)
	}
	resp.Latency = max(c.clock.Now().Sub(start), 0)
	out := attemptResult{resp: resp}
	if httpResp != nil {
		out.status = httpResp.StatusCode
	}
	if err == nil {
		return out
	}
	c.classify(ctx, actx, err, httpResp, &out)
	out.err = c.red.error(out.err)
	return out
}

func (c *Client) classify(ctx, actx context.Context, err error, httpResp *http.Response, out *attemptResult) {
	var oe *openai.Error
	var se *ssestream.StreamError
	switch {
	case ctx.Err() != nil:
		out.kind, out.err = kindCancelled, fmt.Errorf("llm: model call cancelled: %w", ctx.Err())
	case actx.Err() != nil && errors.Is(context.Cause(actx), errAttemptTimeout):
		out.kind, out.retryable = kindTimeout, true
		out.err = fmt.Errorf("%w: no complete response within %s", ErrTimeout, c.timeout)
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrIncomplete):
		out.kind, out.retryable, out.err = kindMalformed, true, err
	case errors.As(err, &oe):
		ae, hasAfter := c.apiError(oe.StatusCode, oe, oe.Response)
		out.kind, out.retryable, out.err = kindAPI, ae.Retryable, ae
		out.status = ae.Status
		out.retryAfter, out.hasAfter = ae.RetryAfter, hasAfter
	case httpResp != nil && httpResp.StatusCode >= 400:
		// An error status whose body is not an OpenAI error object
		// (an HTML page from a proxy, say): openai-go returns its decoding
		// error, the status is still the truth.
		ae, hasAfter := c.apiError(httpResp.StatusCode, nil, httpResp)
		ae.Message = "the error body is not an OpenAI error object"
		out.kind, out.retryable, out.err = kindAPI, ae.Retryable, ae
		out.retryAfter, out.hasAfter = ae.RetryAfter, hasAfter
	case errors.As(err, &se):
		out.kind, out.retryable = kindStreamError, true
		out.err = fmt.Errorf("llm: the model server sent an error inside the response stream: %s", truncateText(se.Message, 2000))
	default:
		out.kind, out.retryable = kindConnection, true
		out.err = fmt.Errorf("%w: %w", ErrConnection, err)
	}
}

// apiError builds an *APIError from an HTTP error response; hasAfter
// reports whether the response carried a Retry-After.
func (c *Client) apiError(status int, oe *openai.Error, resp *http.Response) (ae *APIError, hasAfter bool) {
	ae = &APIError{Status: status}
	if oe != nil {
		ae.Type, ae.Code, ae.Message = oe.Type, oe.Code, c.red.string(truncateText(oe.Message, 4000))
		if oe.Message == "" && oe.Type == "" && oe.Code == "" {
			ae.Message = "the error body is not an OpenAI error object"
		}
		cp := *oe
		if cp.Request != nil {
			cp.Request = cp.Request.Clone(context.WithoutCancel(cp.Request.Context()))
			if cp.Request.Header.Get("Authorization") != "" {
				cp.Request.Header.Set("Authorization", "Bearer "+redacted)
			}
		}
		ae.err = &cp
	}
	ae.Retryable = status == http.StatusRequestTimeout || status == http.StatusConflict ||
		status == http.StatusTooManyRequests || status >= 500
	if resp != nil {
		switch strings.ToLower(resp.Header.Get("x-should-retry")) {
		case "true":
			ae.Retryable = true
		case "false":
			ae.Retryable = false
		}
		ae.RetryAfter, hasAfter = parseRetryAfter(resp.Header, time.Now())
	}
	return ae, hasAfter
}

// decide says whether to retry after attempt and how long to wait first.
func (c *Client) decide(ctx context.Context, out attemptResult, attempt int, malformed *int) (bool, time.Duration) {
	if out.err == nil || !out.retryable || attempt > c.maxRetries {
		return false, 0
	}
	if out.kind == kindMalformed {
		if *malformed >= 1 {
			return false, 0
		}
		*malformed++
	}
	wait := c.backoff.delay(attempt)
	if out.hasAfter {
		if out.retryAfter > c.backoff.MaxRetryAfter {
			return false, 0
		}
		wait = out.retryAfter
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= wait {
		return false, 0 // the wait would outlast the caller's deadline
	}
	return true, wait
}

func (c *Client) params(req Request, model string) (openai.ChatCompletionNewParams, error) {
	var p openai.ChatCompletionNewParams
	if model == "" {
		return p, fmt.Errorf("%w: no model name (set Request.Model or Config.Model)", ErrInvalidRequest)
	}
	if len(req.Messages) == 0 {
		return p, fmt.Errorf("%w: no messages", ErrInvalidRequest)
	}
	p.Model = model
	p.Messages = make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages))
	for i, m := range req.Messages {
		switch m.Role {
		case "system":
			p.Messages = append(p.Messages, openai.SystemMessage(m.Content))
		case "user":
			p.Messages = append(p.Messages, openai.UserMessage(m.Content))
		case "assistant":
			p.Messages = append(p.Messages, openai.AssistantMessage(m.Content))
		case "developer":
			p.Messages = append(p.Messages, openai.DeveloperMessage(m.Content))
		default:
			return p, fmt.Errorf("%w: message %d has role %q (want system, user, assistant or developer)", ErrInvalidRequest, i, m.Role)
		}
	}
	if req.Temperature != nil {
		p.Temperature = openai.Float(*req.Temperature)
	}
	if req.MaxTokens > 0 {
		if c.maxCompl {
			p.MaxCompletionTokens = openai.Int(int64(req.MaxTokens))
		} else {
			p.MaxTokens = openai.Int(int64(req.MaxTokens))
		}
	}
	if c.stream {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	return p, nil
}

// doJSON makes one non-streaming request. The body is read raw and decoded
// here, so that a malformed 200 body is told apart from a broken
// connection.
func (c *Client) doJSON(ctx context.Context, params openai.ChatCompletionNewParams, httpResp **http.Response) (Response, error) {
	var raw []byte
	if _, err := c.svc.New(ctx, params, option.WithResponseBodyInto(&raw), option.WithResponseInto(httpResp)); err != nil {
		return Response{}, err
	}
	if !json.Valid(raw) {
		return Response{}, fmt.Errorf("%w: the body is not valid JSON (%d bytes)", ErrMalformed, len(raw))
	}
	var cc openai.ChatCompletion
	if err := cc.UnmarshalJSON(raw); err != nil {
		return Response{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(cc.Choices) == 0 {
		var e struct {
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error != nil {
			return Response{}, fmt.Errorf("%w: no choices; the server reported: %s", ErrMalformed, truncateText(e.Error.Message, 2000))
		}
		return Response{}, fmt.Errorf("%w: no choices", ErrMalformed)
	}
	ch := cc.Choices[0]
	return Response{
		Text:         ch.Message.Content,
		FinishReason: string(ch.FinishReason),
		Usage:        usage(cc.Usage),
		Model:        cc.Model,
	}, nil
}

// doStream makes one streaming request and accumulates its chunks.
func (c *Client) doStream(ctx context.Context, params openai.ChatCompletionNewParams, httpResp **http.Response) (Response, error) {
	stream := c.svc.NewStreaming(ctx, params, option.WithResponseInto(httpResp))
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	var rejected error
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			rejected = fmt.Errorf("%w: a stream chunk does not continue the completion (id or index mismatch)", ErrMalformed)
			break
		}
	}
	resp := Response{Usage: usage(acc.Usage), Model: acc.Model}
	if len(acc.Choices) > 0 {
		resp.Text = acc.Choices[0].Message.Content
		resp.FinishReason = string(acc.Choices[0].FinishReason)
	}
	if rejected != nil {
		return resp, rejected
	}
	if err := stream.Err(); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if errors.As(err, &syn) || errors.As(err, &typ) {
			return resp, fmt.Errorf("%w: a stream chunk is not valid: %v", ErrMalformed, err)
		}
		return resp, err
	}
	if resp.FinishReason == "" {
		return resp, fmt.Errorf("%w (%d bytes of text received)", ErrIncomplete, len(resp.Text))
	}
	return resp, nil
}

func usage(u openai.CompletionUsage) Usage {
	out := Usage{Prompt: u.PromptTokens, Completion: u.CompletionTokens, Total: u.TotalTokens}
	if out.Total == 0 {
		out.Total = out.Prompt + out.Completion
	}
	return out
}

// parseRetryAfter reads Retry-After-Ms (milliseconds) or Retry-After
// (seconds or an HTTP date), preferring the former as openai-go does.
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
			return durationOf(f, time.Millisecond), true
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && !math.IsInf(f, 0) {
			return durationOf(f, time.Second), true
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0), true
		}
	}
	return 0, false
}

func durationOf(f float64, unit time.Duration) time.Duration {
	if f*float64(unit) >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(f * float64(unit))
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// showEnvName prints an environment variable name, abbreviated when it does
// not look like one (lowercase letters: perhaps a key pasted by mistake).
func showEnvName(s string) string {
	if strings.ToUpper(s) == s {
		return s
	}
	return abbreviateSecret(s)
}

// abbreviateSecret shows the start of a string that may be a secret.
func abbreviateSecret(s string) string {
	if len(s) <= 4 {
		return s
	}
	return s[:4] + "…"
}
