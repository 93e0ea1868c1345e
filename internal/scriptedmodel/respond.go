package scriptedmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

const (
	defaultModel       = "scripted-model"
	systemFingerprint  = "fp_scripted"
	defaultStreamParts = 4
)

// respond writes reply to a matched chat request.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, req *Request, reply Reply) {
	ctx := r.Context()
	if !s.sleep(ctx, reply.Delay) {
		return // the client left or the server is closing: nobody to answer
	}
	if reply.Disconnect && !req.Stream {
		panic(http.ErrAbortHandler) // drops the connection without a response
	}

	h := w.Header()
	for k, vs := range reply.Header {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	h.Set("x-request-id", fmt.Sprintf("req_scripted_%d", req.Index))
	if reply.RetryAfter > 0 {
		h.Set("Retry-After-Ms", strconv.FormatInt(reply.RetryAfter.Milliseconds(), 10))
		h.Set("Retry-After", strconv.FormatInt(int64((reply.RetryAfter+time.Second-1)/time.Second), 10))
	}

	if reply.RawBody != nil {
		status := http.StatusOK
		if reply.Status != 0 {
			status = reply.Status
		}
		s.writeRaw(w, r, reply, status)
		return
	}
	if reply.Status >= 400 {
		if reply.Malformed {
			h.Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(reply.Status)
			_, _ = fmt.Fprintf(w, "<html><body><h1>%d %s</h1>scriptedmodel malformed error</body></html>\n",
				reply.Status, http.StatusText(reply.Status))
			return
		}
		typ, code, msg := defaultError(reply.Status)
		if reply.ErrorType != "" {
			typ = reply.ErrorType
		}
		if reply.ErrorCode != "" {
			code = reply.ErrorCode
		}
		if reply.ErrorMessage != "" {
			msg = reply.ErrorMessage
		}
		writeAPIError(w, reply.Status, typ, code, msg)
		return
	}

	status := http.StatusOK
	if reply.Status != 0 {
		status = reply.Status
	}
	content, finish := reply.Content, reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(reply.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	if reply.Truncate {
		content, finish = truncate(content, reply.TruncateAt, req), "length"
	}
	usage := wireUsage{}
	if reply.Usage != nil {
		usage.PromptTokens, usage.CompletionTokens = reply.Usage.PromptTokens, reply.Usage.CompletionTokens
	} else {
		usage.PromptTokens, usage.CompletionTokens = promptTokens(req), approxTokens(content)
	}
	usage.TotalTokens = usage.PromptTokens + usage.CompletionTokens
	usage.CompletionTokensDetails.ReasoningTokens = reply.ReasoningTokens
	model := reply.Model
	if model == "" {
		model = req.Model
	}
	if model == "" {
		model = defaultModel
	}
	c := completion{
		id:      fmt.Sprintf("chatcmpl-scripted-%d", req.Index),
		created: time.Now().Unix(),
		model:   model,
		content: content,
		finish:  finish,
		usage:   usage,
		reply:   reply,
		index:   req.Index,
	}
	if req.Stream {
		s.writeStream(w, r, req, reply, status, c)
		return
	}

	body, err := json.Marshal(c.wire())
	if err != nil {
		panic(err) // cannot happen: plain structs
	}
	if reply.Malformed {
		body = body[:len(body)/2]
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// completion is what a reply resolves to.
type completion struct {
	id      string
	created int64
	model   string
	content string
	finish  string
	usage   wireUsage
	reply   Reply
	index   int
}

func (c completion) toolCalls() []wireToolCall {
	var out []wireToolCall
	for i, tc := range c.reply.ToolCalls {
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d_%d", c.index, i)
		}
		out = append(out, wireToolCall{ID: id, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: tc.Arguments}})
	}
	return out
}

func (c completion) reasoningField() string {
	if c.reply.ReasoningField != "" {
		return c.reply.ReasoningField
	}
	return "reasoning_content"
}

func (c completion) wire() wireCompletion {
	usage := c.usage
	var content any = c.content
	if c.reply.NullContent {
		content = nil
	}
	var extra map[string]any
	if c.reply.Reasoning != "" {
		extra = map[string]any{c.reasoningField(): c.reply.Reasoning}
	}
	return wireCompletion{
		ID:      c.id,
		Object:  "chat.completion",
		Created: c.created,
		Model:   c.model,
		Choices: []wireChoice{{
			Index: 0,
			Message: wireResponseMessage{
				Role:        "assistant",
				Content:     content,
				Annotations: []struct{}{},
				ToolCalls:   c.toolCalls(),
				extra:       extra,
			},
			FinishReason: c.finish,
		}},
		Usage:             &usage,
		ServiceTier:       "default",
		SystemFingerprint: systemFingerprint,
	}
}

func (c completion) chunk(includeUsage bool, choices ...wireChunkChoice) wireChunk {
	ch := wireChunk{
		ID:                c.id,
		Object:            "chat.completion.chunk",
		Created:           c.created,
		Model:             c.model,
		ServiceTier:       "default",
		SystemFingerprint: systemFingerprint,
		Choices:           choices,
	}
	if ch.Choices == nil {
		ch.Choices = []wireChunkChoice{}
	}
	if includeUsage {
		ch.Usage = json.RawMessage("null")
	}
	return ch
}

// writeStream answers with a text/event-stream of chat.completion.chunk
// events, as OpenAI does for "stream": true.
func (s *Server) writeStream(w http.ResponseWriter, r *http.Request, req *Request, reply Reply, status int, c completion) {
	ctx := r.Context()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(status)

	sendRaw := func(data string) bool {
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	send := func(ch wireChunk) bool {
		b, err := json.Marshal(ch)
		if err != nil {
			panic(err) // cannot happen: plain structs
		}
		return sendRaw(string(b))
	}
	pause := func() bool { return s.sleep(ctx, reply.ChunkDelay) }
	contentChunk := func(piece string) wireChunk {
		return c.chunk(req.IncludeUsage, wireChunkChoice{Delta: wireDelta{Content: &piece}})
	}

	empty := ""
	if !send(c.chunk(req.IncludeUsage, wireChunkChoice{Delta: wireDelta{
		Role:    "assistant",
		Content: &empty,
		Refusal: json.RawMessage("null"),
	}})) {
		return
	}
	pieces := splitRunes(c.content, reply.StreamChunks)

	if reply.Malformed {
		if len(pieces) > 0 && (!pause() || !send(contentChunk(pieces[0]))) {
			return
		}
		if !pause() {
			return
		}
		sendRaw(fmt.Sprintf(`{"id":%q,"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`, c.id))
		return // no [DONE]
	}
	if reply.Disconnect {
		for _, p := range pieces[:len(pieces)/2] {
			if !pause() || !send(contentChunk(p)) {
				return
			}
		}
		panic(http.ErrAbortHandler) // drops the connection mid-stream
	}

	for _, p := range splitRunes(c.reply.Reasoning, reply.StreamChunks) {
		piece := p
		if !pause() || !send(c.chunk(req.IncludeUsage, wireChunkChoice{Delta: wireDelta{Reasoning: &piece, reasoningField: c.reasoningField()}})) {
			return
		}
	}
	for _, p := range pieces {
		if !pause() || !send(contentChunk(p)) {
			return
		}
	}
	for i, tc := range c.toolCalls() {
		idx := i
		head := wireToolCall{Index: &idx, ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Function.Name}}
		if !pause() || !send(c.chunk(req.IncludeUsage, wireChunkChoice{Delta: wireDelta{ToolCalls: []wireToolCall{head}}})) {
			return
		}
		for _, a := range splitRunes(tc.Function.Arguments, reply.StreamChunks) {
			part := wireToolCall{Index: &idx, Function: wireFunction{Arguments: a}}
			if !pause() || !send(c.chunk(req.IncludeUsage, wireChunkChoice{Delta: wireDelta{ToolCalls: []wireToolCall{part}}})) {
				return
			}
		}
	}
	finish := c.finish
	if !pause() || !send(c.chunk(req.IncludeUsage, wireChunkChoice{Delta: wireDelta{}, FinishReason: &finish})) {
		return
	}
	if req.IncludeUsage {
		ch := c.chunk(false)
		usage, err := json.Marshal(c.usage)
		if err != nil {
			panic(err)
		}
		ch.Usage = usage
		if !pause() || !send(ch) {
			return
		}
	}
	if !pause() {
		return
	}
	sendRaw("[DONE]")
}

// splitRunes splits s into n pieces of near-equal rune counts (n <= 0 means
// the default); the empty string has no pieces.
func splitRunes(s string, n int) []string {
	count := utf8.RuneCountInString(s)
	if count == 0 {
		return nil
	}
	if n <= 0 {
		n = defaultStreamParts
	}
	n = min(n, count)
	pieces := make([]string, 0, n)
	rest := s
	for i := range n {
		size := count / n
		if i < count%n {
			size++
		}
		end := 0
		for range size {
			_, w := utf8.DecodeRuneInString(rest[end:])
			end += w
		}
		pieces = append(pieces, rest[:end])
		rest = rest[end:]
	}
	return pieces
}

func truncate(content string, at int, req *Request) string {
	rs := []rune(content)
	n := len(rs) / 2
	switch {
	case at > 0:
		n = at
	case req.MaxCompletionTokens != nil && *req.MaxCompletionTokens > 0:
		n = int(min(*req.MaxCompletionTokens, int64(len(rs)))) * 4
	case req.MaxTokens != nil && *req.MaxTokens > 0:
		n = int(min(*req.MaxTokens, int64(len(rs)))) * 4
	}
	if n >= len(rs) {
		return content
	}
	return string(rs[:n])
}

// approxTokens estimates a token count at about four characters per token.
func approxTokens(s string) int {
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return 0
	}
	return (n + 3) / 4
}

func promptTokens(req *Request) int {
	total := 3 // reply priming, as OpenAI counts it
	for _, m := range req.Messages {
		total += 3 + approxTokens(m.Text)
	}
	return total
}

func defaultError(status int) (typ, code, msg string) {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key", "Incorrect API key provided (scriptedmodel)."
	case status == http.StatusNotFound:
		return "invalid_request_error", "model_not_found", "The model does not exist (scriptedmodel)."
	case status == http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded", "Rate limit reached (scriptedmodel). Please try again later."
	case status == http.StatusServiceUnavailable:
		return "server_error", "", "The engine is currently overloaded, please try again later (scriptedmodel)."
	case status >= 500:
		return "server_error", "", "The server had an error while processing your request (scriptedmodel)."
	default:
		return "invalid_request_error", "", fmt.Sprintf("%s (scriptedmodel).", http.StatusText(status))
	}
}

func writeAPIError(w http.ResponseWriter, status int, typ, code, msg string) {
	e := wireError{Message: msg, Type: typ}
	if code != "" {
		e.Code = &code
	}
	writeJSON(w, status, struct {
		Error wireError `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic(err) // cannot happen: plain structs
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

type wireError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type wireCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []wireChoice `json:"choices"`
	Usage             *wireUsage   `json:"usage,omitempty"`
	ServiceTier       string       `json:"service_tier"`
	SystemFingerprint string       `json:"system_fingerprint"`
}

type wireChoice struct {
	Index        int                 `json:"index"`
	Message      wireResponseMessage `json:"message"`
	Logprobs     *struct{}           `json:"logprobs"`
	FinishReason string              `json:"finish_reason"`
}

type wireResponseMessage struct {
	Role        string         `json:"role"`
	Content     any            `json:"content"`
	Refusal     *string        `json:"refusal"`
	Annotations []struct{}     `json:"annotations"`
	ToolCalls   []wireToolCall `json:"tool_calls,omitempty"`
	extra       map[string]any // more members (reasoning_content…)
}

// MarshalJSON adds the extra members.
func (m wireResponseMessage) MarshalJSON() ([]byte, error) {
	type plain wireResponseMessage
	b, err := json.Marshal(plain(m))
	if err != nil || len(m.extra) == 0 {
		return b, err
	}
	var all map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, v := range m.extra {
		all[k] = v
	}
	return json.Marshal(all)
}

type wireToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
		AudioTokens  int `json:"audio_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens          int `json:"reasoning_tokens"`
		AudioTokens              int `json:"audio_tokens"`
		AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
		RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
	} `json:"completion_tokens_details"`
}

type wireChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	ServiceTier       string            `json:"service_tier"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []wireChunkChoice `json:"choices"`
	Usage             json.RawMessage   `json:"usage,omitempty"`
}

type wireChunkChoice struct {
	Index        int       `json:"index"`
	Delta        wireDelta `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

type wireDelta struct {
	Role      string          `json:"role,omitempty"`
	Content   *string         `json:"content,omitempty"`
	Refusal   json.RawMessage `json:"refusal,omitempty"`
	ToolCalls []wireToolCall  `json:"tool_calls,omitempty"`
	// Reasoning is sent under the member the reply names.
	Reasoning      *string `json:"-"`
	reasoningField string
}

// MarshalJSON sends Reasoning under its member name.
func (d wireDelta) MarshalJSON() ([]byte, error) {
	type plain wireDelta
	b, err := json.Marshal(plain(d))
	if err != nil || d.Reasoning == nil {
		return b, err
	}
	var all map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	all[d.reasoningField] = *d.Reasoning
	return json.Marshal(all)
}

type wireModelList struct {
	Object string      `json:"object"`
	Data   []wireModel `json:"data"`
}

type wireModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func newWireModel(id string) wireModel {
	return wireModel{ID: id, Object: "model", Created: 1700000000, OwnedBy: "scriptedmodel"}
}

// writeRaw writes a reply's RawBody verbatim, WriteChunk bytes at a time
// when set (flushing each piece).
func (s *Server) writeRaw(w http.ResponseWriter, r *http.Request, reply Reply, status int) {
	ct := reply.RawContentType
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	body := reply.RawBody
	n := reply.WriteChunk
	if n <= 0 {
		n = len(body)
	}
	for len(body) > 0 {
		k := min(n, len(body))
		if _, err := w.Write(body[:k]); err != nil || rc.Flush() != nil {
			return
		}
		body = body[k:]
		if len(body) > 0 && !s.sleep(r.Context(), reply.ChunkDelay) {
			return
		}
	}
}
