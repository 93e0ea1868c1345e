package llm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
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
// the variable named by Config.APIKeyEnv (when Config.KeyEnvs allows it),
// and, with the default HTTP client, Go's HTTP_PROXY / HTTPS_PROXY /
// NO_PROXY and SSL_CERT_FILE / SSL_CERT_DIR handling.
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
	idle       time.Duration // between stream chunks; 0 = none
	streamCap  time.Duration // a whole streamed attempt; 0 = none
	maxCompl   bool
	rec        Recorder
	newCallID  func() string
	ownedHTTP  *http.Client // the HTTP client New made, closed by Close

	// refusedMu guards refused: per model name, the optional features the
	// server refused once; an Optional request no longer sends them, so
	// that a refusal costs one extra request per client, not one per call.
	refusedMu sync.Mutex
	refused   map[string]dropped
}

var _ Completer = (*Client)(nil)

// New builds a client. It reads the API key from the variable named by
// cfg.APIKeyEnv (an error if that variable is not set, or if cfg.KeyEnvs
// does not allow it: then nothing is read) and MODEL_TIMEOUT when
// cfg.Timeout is 0.
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
		// The allow-list, before the variable is read: the value of a
		// variable the operator did not name is never looked at.
		if err := cfg.KeyEnvs.Check(cfg.APIKeyEnv); err != nil {
			return nil, err
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
	idle := cfg.IdleTimeout
	switch {
	case idle == 0:
		idle = DefaultIdleTimeout
		if timeout > 0 && timeout < idle {
			idle = timeout
		}
	case idle < 0:
		idle = 0
	}
	streamCap := cfg.StreamTimeout
	switch {
	case streamCap == 0:
		streamCap = max(DefaultStreamTimeout, timeout)
	case streamCap < 0:
		streamCap = 0
	}

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
		idle:       idle,
		streamCap:  streamCap,
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
	var drop dropped
	if req.Optional {
		drop = c.knownRefusals(model)
	}
	params, err := c.params(req, model, drop)
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
		Messages: req.Messages, Sampling: req.Sampling, Stream: c.stream,
		Timeout: c.timeout,
	}
	malformed := 0
	extra := 0 // attempts added by a refused feature: they do not use the retry budget
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return Response{Attempts: attempt - 1}, fmt.Errorf("llm: model call %s cancelled before attempt %d: %w", callID, attempt, err)
		}
		rec.Attempt, rec.HTTPStatus, rec.Retrying = attempt, 0, false
		rec.Tools, rec.ToolChoice, rec.ResponseFormat = nil, "", ""
		if !drop.tools {
			for _, t := range req.Tools {
				rec.Tools = append(rec.Tools, t.Name)
			}
			if len(req.Tools) > 0 {
				rec.ToolChoice = req.ToolChoice
			}
		}
		if !drop.format && req.ResponseFormat != nil {
			rec.ResponseFormat = req.ResponseFormat.Name
		}
		if c.rec != nil {
			c.rec.Requested(ctx, rec)
		}
		out := c.attempt(ctx, params, req.OnDelta)
		out.resp.Attempts = attempt
		out.resp.Dropped = drop.names()
		refused, next := c.refusedFeature(req, drop, out)
		retry, wait := refused, time.Duration(0)
		if !refused {
			retry, wait = c.decide(ctx, out, attempt-extra, &malformed)
		}
		rec.HTTPStatus, rec.Retrying = out.status, retry
		if c.rec != nil {
			c.rec.Responded(ctx, rec, out.resp, out.err)
		}
		if out.err == nil {
			c.log.Debug("model call", "call_id", callID, "model", model, "attempt", attempt,
				"latency", out.resp.Latency, "finish_reason", out.resp.FinishReason, "tokens", out.resp.Usage.Total)
			return out.resp, nil
		}
		if refused {
			c.log.Warn("model call: the server refused a request feature; sending it again without", "call_id", callID, "model", model,
				"base_url", c.shownURL, "dropped", strings.Join(next.names(), ","), "err", out.err.Error())
			drop, extra = next, extra+1
			c.rememberRefusals(model, drop)
			if params, err = c.params(req, model, drop); err != nil {
				return out.resp, err
			}
			continue
		}
		if !retry {
			if out.kind == kindCancelled {
				return out.resp, out.err
			}
			c.log.Debug("model call failed", "call_id", callID, "model", model, "attempt", attempt, "err", out.err.Error())
			err := out.err
			if out.hasAfter && out.retryAfter > c.backoff.MaxRetryAfter && out.retryable && attempt-extra <= c.maxRetries {
				err = fmt.Errorf("%w; the server asked to be called again in %s, longer than the %s this client waits (not retried)",
					err, out.retryAfter.Round(time.Second), c.backoff.MaxRetryAfter)
			}
			return out.resp, fmt.Errorf("%w (call %s, %s)", err, callID, plural(attempt, "attempt"))
		}
		c.log.Warn("model call: retrying", "call_id", callID, "model", model, "base_url", c.shownURL,
			"attempt", attempt, "of", 1+c.maxRetries+extra, "wait", wait, "status", out.status, "err", out.err.Error())
		if err := sleep(ctx, wait); err != nil {
			return out.resp, fmt.Errorf("llm: model call %s cancelled while waiting to retry (last error: %v): %w", callID, out.err, err)
		}
	}
}

// knownRefusals returns the features the server refused before for model.
func (c *Client) knownRefusals(model string) dropped {
	c.refusedMu.Lock()
	defer c.refusedMu.Unlock()
	return c.refused[model]
}

// rememberRefusals notes the features the server refused for model.
func (c *Client) rememberRefusals(model string, d dropped) {
	c.refusedMu.Lock()
	defer c.refusedMu.Unlock()
	if c.refused == nil {
		c.refused = map[string]dropped{}
	}
	old := c.refused[model]
	c.refused[model] = dropped{tools: old.tools || d.tools, format: old.format || d.format}
}

// dropped says which optional request features a call no longer sends.
type dropped struct{ tools, format bool }

func (d dropped) names() []string {
	var out []string
	if d.tools {
		out = append(out, FeatureTools)
	}
	if d.format {
		out = append(out, FeatureResponseFormat)
	}
	return out
}

// refusedFeature reports whether the attempt failed because the server
// refused an optional feature of the request (tools, response_format) and
// which features to drop for the next attempt (see refusal); when the
// message names neither, every optional feature still sent is dropped at
// once.
func (c *Client) refusedFeature(req Request, drop dropped, out attemptResult) (bool, dropped) {
	if !req.Optional || out.kind != kindAPI {
		return false, drop
	}
	ok, namesTools, namesFormat := refusal(out.status, out.err.Error())
	if !ok {
		return false, drop
	}
	hasTools, hasFormat := len(req.Tools) > 0 && !drop.tools, req.ResponseFormat != nil && !drop.format
	if !hasTools && !hasFormat {
		return false, drop
	}
	next := drop
	switch {
	case hasTools && namesTools:
		next.tools = true
	case hasFormat && namesFormat:
		next.format = true
	default:
		next.tools, next.format = drop.tools || hasTools, drop.format || hasFormat
	}
	return true, next
}

// refusal reads an HTTP error as a server's refusal of a request feature:
// an HTTP 400, 404, 422 or 501, or a message no retry cures whatever its
// status (permanentRefusal); and which features its message names.
func refusal(status int, msg string) (ok, namesTools, namesFormat bool) {
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusNotImplemented:
	default:
		if !permanentRefusal(msg) {
			return false, false, false
		}
	}
	m := strings.ToLower(msg)
	namesTools = strings.Contains(m, "tool") || strings.Contains(m, "function")
	namesFormat = strings.Contains(m, "response_format") || strings.Contains(m, "json_schema") || strings.Contains(m, "grammar") || strings.Contains(m, "schema")
	return true, namesTools, namesFormat
}

// RefusesFeature reports whether err, a call's error, is the server
// refusing feature (FeatureTools or FeatureResponseFormat) as a request
// with Optional set would have dropped it: a refusal naming it, or naming
// no feature at all.
func RefusesFeature(err error, feature string) bool {
	var ae *APIError
	if !errors.As(err, &ae) {
		return false
	}
	ok, namesTools, namesFormat := refusal(ae.Status, ae.Error())
	switch feature {
	case FeatureTools:
		return ok && (namesTools || !namesFormat)
	case FeatureResponseFormat:
		return ok && (namesFormat || !namesTools)
	}
	return false
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

func (c *Client) attempt(ctx context.Context, params openai.ChatCompletionNewParams, onDelta func(Delta)) attemptResult {
	actx, cancel := ctx, context.CancelFunc(func() {})
	if limit := c.attemptLimit(); limit > 0 {
		actx, cancel = context.WithTimeoutCause(ctx, limit, errAttemptTimeout)
	}
	defer cancel()

	var httpResp *http.Response
	start := c.clock.Now()
	var (
		resp Response
		err  error
	)
	if c.stream {
		var idle context.CancelCauseFunc
		actx, idle = context.WithCancelCause(actx)
		resp, err = c.doStream(actx, params, &httpResp, onDelta, idle)
		idle(nil)
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
		out.err = fmt.Errorf("%w: no complete response within %s", ErrTimeout, c.attemptLimit())
	case actx.Err() != nil && errors.Is(context.Cause(actx), errFirstChunkTimeout):
		out.kind, out.retryable = kindTimeout, true
		out.err = fmt.Errorf("%w: no part of the reply within %s (the server was still reading the prompt, or stalled; MODEL_TIMEOUT sets this wait)", ErrTimeout, c.timeout)
	case actx.Err() != nil && errors.Is(context.Cause(actx), errIdleTimeout):
		out.kind, out.retryable = kindTimeout, true
		out.err = fmt.Errorf("%w: the stream sent nothing for %s (idle timeout; %d bytes of text received)", ErrTimeout, c.idle, len(out.resp.Text)+len(out.resp.Reasoning))
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
		ae.Message = "the error body is not an OpenAI error object" + describeBody(httpResp)
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
			if msg := flatErrorMessage(resp); msg != "" {
				ae.Message = c.red.string(truncateText(msg, 4000))
			} else {
				ae.Message = "the error body is not an OpenAI error object" + describeBody(resp)
			}
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
	if status >= 500 && permanentRefusal(ae.Message) {
		ae.Retryable = false // llama-server's "tools param requires --jinja flag" is a 500
	}
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

func (c *Client) params(req Request, model string, drop dropped) (openai.ChatCompletionNewParams, error) {
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
	sm := req.Sampling
	if sm.Temperature != nil {
		p.Temperature = openai.Float(*sm.Temperature)
	}
	if sm.TopP != nil {
		p.TopP = openai.Float(*sm.TopP)
	}
	if sm.Seed != nil {
		p.Seed = openai.Int(*sm.Seed)
	}
	switch len(sm.Stop) {
	case 0:
	case 1:
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(sm.Stop[0])}
	default:
		p.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: sm.Stop}
	}
	if sm.MaxTokens > 0 {
		if c.maxCompl {
			p.MaxCompletionTokens = openai.Int(int64(sm.MaxTokens))
		} else {
			p.MaxTokens = openai.Int(int64(sm.MaxTokens))
		}
	}
	if len(req.Tools) > 0 && !drop.tools {
		for _, t := range req.Tools {
			if t.Name == "" {
				return p, fmt.Errorf("%w: a tool has no name", ErrInvalidRequest)
			}
			fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.Parameters)}
			if t.Description != "" {
				fn.Description = openai.String(t.Description)
			}
			p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fn))
		}
		switch req.ToolChoice {
		case "":
		case "auto", "required", "none":
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String(req.ToolChoice)}
		default:
			return p, fmt.Errorf("%w: tool_choice %q (want auto, required or none)", ErrInvalidRequest, req.ToolChoice)
		}
		p.ParallelToolCalls = openai.Bool(false)
	}
	if f := req.ResponseFormat; f != nil && !drop.format {
		if f.Name == "" || f.Schema == nil {
			return p, fmt.Errorf("%w: a response format needs a name and a schema", ErrInvalidRequest)
		}
		js := shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: f.Name, Schema: f.Schema}
		if f.Strict {
			js.Strict = openai.Bool(true)
		}
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: js}}
	}
	if c.stream {
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	}
	if len(sm.ExtraBody) > 0 {
		for _, k := range reservedBodyKeys {
			if _, ok := sm.ExtraBody[k]; ok {
				return p, fmt.Errorf("%w: extra_body sets %q, which the client sets itself", ErrInvalidRequest, k)
			}
		}
		p.SetExtraFields(sm.ExtraBody)
	}
	return p, nil
}

// reservedBodyKeys are the request members the client sets itself.
// Package catalog refuses the same members in a run's extra_body setting
// (catalog.ReservedBodyKeys; TestReservedBodyKeysAreTheCatalogues keeps
// the lists equal).
var reservedBodyKeys = []string{"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options", "response_format", "functions", "function_call", "n"}

// ReservedBodyKeys returns the request members Sampling.ExtraBody may not
// set.
func ReservedBodyKeys() []string { return slices.Clone(reservedBodyKeys) }

// doJSON makes one non-streaming request. The body is read raw and decoded
// here, so that a malformed 200 body is told apart from a broken
// connection.
func (c *Client) doJSON(ctx context.Context, params openai.ChatCompletionNewParams, httpResp **http.Response) (Response, error) {
	var raw []byte
	if _, err := c.svc.New(ctx, params, option.WithResponseBodyInto(&raw), option.WithResponseInto(httpResp)); err != nil {
		return Response{}, err
	}
	return completionFromJSON(raw, *httpResp)
}

// completionFromJSON reads a non-streamed chat completion body.
func completionFromJSON(raw []byte, httpResp *http.Response) (Response, error) {
	if !json.Valid(raw) {
		return Response{}, fmt.Errorf("%w: the body is not valid JSON (%d bytes)%s", ErrMalformed, len(raw), describeBody(httpResp))
	}
	var cc openai.ChatCompletion
	if err := cc.UnmarshalJSON(raw); err != nil {
		return Response{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if len(cc.Choices) == 0 {
		if msg, ok := bodyError(raw); ok {
			return Response{}, fmt.Errorf("%w: the server answered HTTP 200 with an error instead of a completion: %s%s", ErrMalformed, truncateText(msg, 2000), errorHint(msg))
		}
		return Response{}, fmt.Errorf("%w: no choices", ErrMalformed)
	}
	ch := cc.Choices[0]
	resp := Response{FinishReason: string(ch.FinishReason), Usage: usage(cc.Usage), Model: cc.Model}
	reasoning, source := reasoningMembers(ch.Message.RawJSON())
	var calls []ToolCall
	for _, tc := range ch.Message.ToolCalls {
		calls = append(calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	finishReply(&resp, ch.Message.Content, reasoning, source, calls)
	return resp, nil
}

// bodyError reads the error member of a body that is not a completion: an
// OpenAI error object {"error": {"message": …}} or a plain string
// {"error": "…"} (LM Studio's answer to an unknown path).
func bodyError(raw []byte) (string, bool) {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil || len(e.Error) == 0 || string(e.Error) == "null" {
		return "", false
	}
	var s string
	if json.Unmarshal(e.Error, &s) == nil {
		return s, true
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(e.Error, &o) == nil && o.Message != "" {
		return o.Message, true
	}
	return string(e.Error), true
}

// permanentRefusal reports whether an error message is a server's refusal
// of a request feature that no retry cures, whatever its status:
// llama-server without --jinja answers a request with tools (or
// tool_choice) with HTTP 500 "tools param requires --jinja flag" or
// "Unsupported param: tool_choice".
func permanentRefusal(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "requires --jinja") || strings.Contains(m, "unsupported param: tool")
}

// flatErrorMessage reads the message of an error body that is not nested
// under "error": vLLM's {"object": "error", "message": …}, FastAPI's
// {"detail": …}. The body stays readable.
func flatErrorMessage(resp *http.Response) string {
	if resp == nil || resp.Body == nil {
		return ""
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	if err != nil {
		return ""
	}
	var flat struct {
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(raw, &flat) != nil {
		return ""
	}
	if flat.Message != "" {
		return flat.Message
	}
	var detail string
	if json.Unmarshal(flat.Detail, &detail) == nil {
		return detail
	}
	if len(flat.Detail) > 0 {
		return string(flat.Detail)
	}
	return ""
}

// errorHint adds what to change for the errors whose cause is known.
func errorHint(msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "unexpected endpoint") || strings.Contains(m, "not found") && strings.Contains(m, "path"):
		return " (the base URL does not lead to the chat completions API: it should end in /v1, e.g. http://127.0.0.1:1234/v1)"
	case strings.Contains(m, "jinja") || strings.Contains(m, "tools param requires"):
		return " (llama.cpp's server needs --jinja for tools; or run with --tool-protocol text)"
	}
	return ""
}

// describeBody says what an error or non-JSON body looked like, from its
// Content-Type: an HTML page usually means a proxy or a wrong base URL.
func describeBody(r *http.Response) string {
	if r == nil {
		return ""
	}
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	switch {
	case strings.Contains(ct, "text/html"):
		return " (an HTML page: a proxy or a web UI answered, not the model API; check that base_url ends in /v1)"
	case ct != "" && !strings.Contains(ct, "json") && !strings.Contains(ct, "event-stream"):
		return " (Content-Type " + truncateText(ct, 100) + ")"
	}
	return ""
}

var (
	errIdleTimeout       = errors.New("llm: stream idle timeout")
	errFirstChunkTimeout = errors.New("llm: no first chunk in time")
)

// attemptLimit is the cap of a whole attempt: Timeout, or StreamTimeout
// when streaming (0: none).
func (c *Client) attemptLimit() time.Duration {
	if c.stream {
		return c.streamCap
	}
	return c.timeout
}

// doStream makes one streaming request and accumulates its chunks. Every
// chunk re-arms the idle timer; when it fires, cancel ends the attempt.
func (c *Client) doStream(ctx context.Context, params openai.ChatCompletionNewParams, httpResp **http.Response, onDelta func(Delta), cancel context.CancelCauseFunc) (Response, error) {
	// The wait for the first chunk is Timeout (the prompt's processing
	// may be long on a local model); each later gap is IdleTimeout.
	var idle *time.Timer
	if c.timeout > 0 {
		idle = time.AfterFunc(c.timeout, func() { cancel(errFirstChunkTimeout) })
	}
	defer func() {
		if idle != nil {
			idle.Stop()
		}
	}()
	first := true
	// A 200 answer that is a JSON document rather than an event stream (a
	// string error such as LM Studio's for a wrong path, or a server that
	// ignores "stream") is kept, to be read as a non-streamed body.
	var jsonBody []byte
	keepJSON := option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		if err != nil || res == nil || res.StatusCode >= 400 || res.Body == nil ||
			!strings.Contains(strings.ToLower(res.Header.Get("Content-Type")), "json") {
			return res, err
		}
		// Only a body that starts as a JSON object is taken: an event
		// stream mislabelled as JSON still goes to the SSE decoder.
		br := bufio.NewReader(res.Body)
		for {
			b, perr := br.Peek(1)
			if perr != nil || (b[0] != ' ' && b[0] != '\n' && b[0] != '\r' && b[0] != '\t') {
				break
			}
			_, _ = br.Discard(1)
		}
		if b, perr := br.Peek(1); perr != nil || b[0] != '{' {
			res.Body = readCloser{br, res.Body}
			return res, nil
		}
		raw, rerr := io.ReadAll(io.LimitReader(br, 32<<20))
		_ = res.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		jsonBody = raw
		res.Body = io.NopCloser(bytes.NewReader(nil))
		return res, nil
	})
	stream := c.svc.NewStreaming(ctx, params, option.WithResponseInto(httpResp), keepJSON)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	var rejected error
	var reasoning strings.Builder
	source := ""
	for stream.Next() {
		if first {
			first = false
			if idle != nil {
				idle.Stop()
			}
			idle = nil
			if c.idle > 0 {
				idle = time.AfterFunc(c.idle, func() { cancel(errIdleTimeout) })
			}
		} else if idle != nil {
			idle.Reset(c.idle)
		}
		chunk := stream.Current()
		if !acc.AddChunk(chunk) {
			rejected = fmt.Errorf("%w: a stream chunk does not continue the completion (id or index mismatch)", ErrMalformed)
			break
		}
		if len(chunk.Choices) == 0 {
			continue
		}
		d := chunk.Choices[0].Delta
		r, src := reasoningMembers(d.RawJSON())
		if r != "" {
			reasoning.WriteString(r)
			if source == "" {
				source = src
			}
		}
		if onDelta != nil {
			delta := Delta{Content: d.Content, Reasoning: r}
			for _, tc := range d.ToolCalls {
				delta.ToolName += tc.Function.Name
				delta.ToolArgs += tc.Function.Arguments
			}
			if delta != (Delta{}) {
				onDelta(delta)
			}
		}
	}
	if jsonBody != nil && stream.Err() == nil {
		return completionFromJSON(jsonBody, *httpResp)
	}
	resp := Response{Usage: usage(acc.Usage), Model: acc.Model}
	content := ""
	var calls []ToolCall
	if len(acc.Choices) > 0 {
		content = acc.Choices[0].Message.Content
		resp.FinishReason = string(acc.Choices[0].FinishReason)
		for _, tc := range acc.Choices[0].Message.ToolCalls {
			calls = append(calls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
	}
	finishReply(&resp, content, reasoning.String(), source, calls)
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
		return resp, fmt.Errorf("%w (%d bytes of text received)", ErrIncomplete, len(content)+reasoning.Len())
	}
	return resp, nil
}

// readCloser reads from a reader wrapped around a body and closes the body.
type readCloser struct {
	io.Reader
	io.Closer
}

func usage(u openai.CompletionUsage) Usage {
	out := Usage{Prompt: u.PromptTokens, Completion: u.CompletionTokens, Total: u.TotalTokens,
		Reasoning: u.CompletionTokensDetails.ReasoningTokens, Cached: u.PromptTokensDetails.CachedTokens}
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
