package scriptedmodel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/vera-run/vera/internal/scriptedmodel"
)

const testKey = "sk-scripted-test-key"

// newClient returns a real openai-go client pointed at s, without retries
// unless opts say otherwise.
func newClient(s *scriptedmodel.Server, opts ...option.RequestOption) *openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(s.URL()),
		option.WithAPIKey(testKey),
		option.WithMaxRetries(0),
	}
	c := openai.NewClient(append(base, opts...)...)
	return &c
}

func userParams(model, prompt string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
	}
}

func apiError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T) is not an *openai.Error", err, err)
	}
	return apiErr
}

func TestListensOnLoopbackOnly(t *testing.T) {
	s := scriptedmodel.Start(t)
	u, err := url.Parse(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Path != "/v1" {
		t.Fatalf("URL() = %q, want http://127.0.0.1:<port>/v1", s.URL())
	}
}

func TestJSONCompletion(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Text("Hello from the script.")))
	client := newClient(s)

	res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-test",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are terse."),
			openai.UserMessage("Say hello."),
		},
		Temperature:         openai.Float(0.2),
		MaxCompletionTokens: openai.Int(64),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Choices) != 1 {
		t.Fatalf("got %d choices", len(res.Choices))
	}
	choice := res.Choices[0]
	if choice.Message.Content != "Hello from the script." || choice.FinishReason != "stop" || choice.Message.Role != "assistant" {
		t.Errorf("choice = content %q finish %q role %q", choice.Message.Content, choice.FinishReason, choice.Message.Role)
	}
	if res.Model != "gpt-test" || res.ID == "" || res.Object != "chat.completion" {
		t.Errorf("model %q id %q object %q", res.Model, res.ID, res.Object)
	}
	u := res.Usage
	if u.PromptTokens <= 0 || u.CompletionTokens <= 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("usage = %+v", u)
	}

	reqs := s.Requests()
	if len(reqs) != 1 || s.Count() != 1 {
		t.Fatalf("recorded %d requests, Count %d", len(reqs), s.Count())
	}
	r := reqs[0]
	if r.Index != 1 || r.Model != "gpt-test" || r.Stream || r.Rule != "sequence #1" {
		t.Errorf("request = %s", r)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != "system" || r.Messages[0].Text != "You are terse." ||
		r.Messages[1].Role != "user" || r.Messages[1].Text != "Say hello." {
		t.Errorf("messages = %+v", r.Messages)
	}
	if r.Temperature == nil || *r.Temperature != 0.2 {
		t.Errorf("temperature = %v", r.Temperature)
	}
	if r.MaxCompletionTokens == nil || *r.MaxCompletionTokens != 64 || r.MaxTokens != nil {
		t.Errorf("max_completion_tokens = %v, max_tokens = %v", r.MaxCompletionTokens, r.MaxTokens)
	}
	s.AssertNoMisses(t)
	s.AssertAllUsed(t)
}

func TestStreamingWithAccumulator(t *testing.T) {
	content := "The quick brown fox jumps over the lazy dog."
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{
		Content:      content,
		StreamChunks: 5,
		Usage:        &scriptedmodel.Usage{PromptTokens: 11, CompletionTokens: 7},
	}))
	client := newClient(s)

	params := userParams("gpt-stream", "Tell me about foxes.")
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	stream := client.Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	var chunks, contentChunks int
	var finished string
	for stream.Next() {
		chunk := stream.Current()
		chunks++
		if !acc.AddChunk(chunk) {
			t.Fatalf("accumulator rejected chunk %d: %s", chunks, chunk.RawJSON())
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			contentChunks++
		}
		if c, ok := acc.JustFinishedContent(); ok {
			finished = c
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if contentChunks != 5 {
		t.Errorf("content arrived in %d chunks, want 5", contentChunks)
	}
	// role chunk + 5 content chunks + finish chunk + usage chunk
	if chunks != 8 {
		t.Errorf("got %d chunks, want 8", chunks)
	}
	if finished != content {
		t.Errorf("JustFinishedContent = %q", finished)
	}
	got := acc.Choices[0]
	if got.Message.Content != content || got.FinishReason != "stop" {
		t.Errorf("accumulated content %q finish %q", got.Message.Content, got.FinishReason)
	}
	if acc.Usage.PromptTokens != 11 || acc.Usage.CompletionTokens != 7 || acc.Usage.TotalTokens != 18 {
		t.Errorf("accumulated usage = %+v", acc.Usage)
	}
	if acc.Model != "gpt-stream" || acc.ID == "" {
		t.Errorf("model %q id %q", acc.Model, acc.ID)
	}
	r := s.Requests()[0]
	if !r.Stream || !r.IncludeUsage {
		t.Errorf("recorded stream=%t include_usage=%t", r.Stream, r.IncludeUsage)
	}
}

func TestStreamingWithoutUsage(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Text("héllo wörld ✓")))
	stream := newClient(s).Chat.Completions.NewStreaming(context.Background(), userParams("m", "hi"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() {
			t.Errorf("chunk has a usage field although include_usage was not set: %s", chunk.RawJSON())
		}
		acc.AddChunk(chunk)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "héllo wörld ✓" || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("accumulated %q / %q", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason)
	}
	if acc.Usage.TotalTokens != 0 {
		t.Errorf("usage without include_usage = %+v", acc.Usage)
	}
}

// TestStreamWireFormat checks the raw SSE bytes against OpenAI's shape.
func TestStreamWireFormat(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{Content: "abcd", StreamChunks: 2}))
	body := `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`
	res, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q", ct)
	}
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	events := strings.Split(strings.TrimSuffix(string(raw), "\n\n"), "\n\n")
	if len(events) != 6 { // role, 2 content, finish, usage, [DONE]
		t.Fatalf("got %d events:\n%s", len(events), raw)
	}
	if events[5] != "data: [DONE]" {
		t.Errorf("last event = %q", events[5])
	}
	type chunk struct {
		Object  string `json:"object"`
		Choices []struct {
			Delta        map[string]any `json:"delta"`
			FinishReason *string        `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	var parsed []chunk
	for _, e := range events[:5] {
		data, ok := strings.CutPrefix(e, "data: ")
		if !ok {
			t.Fatalf("event %q lacks the data: prefix", e)
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		if c.Object != "chat.completion.chunk" {
			t.Errorf("object = %q", c.Object)
		}
		parsed = append(parsed, c)
	}
	if parsed[0].Choices[0].Delta["role"] != "assistant" {
		t.Errorf("first delta = %v", parsed[0].Choices[0].Delta)
	}
	if parsed[1].Choices[0].Delta["content"] != "ab" || parsed[2].Choices[0].Delta["content"] != "cd" {
		t.Errorf("content deltas = %v, %v", parsed[1].Choices[0].Delta, parsed[2].Choices[0].Delta)
	}
	if fr := parsed[3].Choices[0].FinishReason; fr == nil || *fr != "stop" || len(parsed[3].Choices[0].Delta) != 0 {
		t.Errorf("finish chunk = %+v", parsed[3].Choices[0])
	}
	if len(parsed[4].Choices) != 0 || parsed[4].Usage == nil || parsed[4].Usage.TotalTokens == 0 {
		t.Errorf("usage chunk = %+v", parsed[4])
	}
	for i := range 4 {
		if parsed[i].Usage != nil {
			t.Errorf("chunk %d has non-null usage", i)
		}
	}
}

func TestMatching(t *testing.T) {
	s := scriptedmodel.Start(t,
		scriptedmodel.WithReplies(scriptedmodel.Text("seq-1"), scriptedmodel.Reply{Content: "seq-2", Times: 2}),
		scriptedmodel.WithRules(
			scriptedmodel.Step(3, scriptedmodel.Text("step-3")),
			scriptedmodel.OnModel("verifier-model", scriptedmodel.Reply{Content: "verifier", Times: scriptedmodel.Forever}),
			scriptedmodel.OnLastUser(`(?i)\bplan\b`, scriptedmodel.Text("the plan")),
			scriptedmodel.OnTranscript(`system: .*judge`, scriptedmodel.Text("judged")),
			scriptedmodel.OnFunc(func(r scriptedmodel.Request) (scriptedmodel.Reply, bool) {
				if strings.Contains(r.LastUserMessage(), "echo:") {
					return scriptedmodel.Text(strings.ToUpper(r.LastUserMessage())), true
				}
				return scriptedmodel.Reply{}, false
			}),
		),
		scriptedmodel.WithFallback(scriptedmodel.Text("fallback")),
	)
	client := newClient(s)
	ask := func(model string, msgs ...openai.ChatCompletionMessageParamUnion) string {
		t.Helper()
		res, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model, Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		return res.Choices[0].Message.Content
	}
	u := openai.UserMessage[string]
	steps := []struct {
		got, want string
	}{
		{ask("agent", u("hello")), "seq-1"},                                  // 1: sequence
		{ask("agent", u("make a PLAN please")), "the plan"},                  // 2: last-user regexp beats the sequence
		{ask("verifier-model", u("make a plan")), "step-3"},                  // 3: step beats everything
		{ask("verifier-model", u("anything")), "verifier"},                   // 4: model rule, unlimited
		{ask("agent", openai.SystemMessage("be a judge"), u("x")), "judged"}, // 5: transcript regexp
		{ask("agent", u("echo: hi")), "ECHO: HI"},                            // 6: func
		{ask("agent", u("plan again")), "seq-2"},                             // 7: "plan" rule used up, sequence resumes
		{ask("agent", u("more")), "seq-2"},                                   // 8: seq-2 answers twice
		{ask("agent", u("more")), "fallback"},                                // 9: sequence exhausted
		{ask("verifier-model", u("again")), "verifier"},                      // 10: Forever
	}
	for i, st := range steps {
		if st.got != st.want {
			t.Errorf("request %d answered %q, want %q", i+1, st.got, st.want)
		}
	}
	wantRules := []string{"sequence #1", "last-user /(?i)\\bplan\\b/", "step 3", `model "verifier-model"`,
		"transcript /system: .*judge/", "func", "sequence #2", "sequence #2", "fallback", `model "verifier-model"`}
	for i, r := range s.Requests() {
		if r.Index != i+1 || r.Rule != wantRules[i] {
			t.Errorf("request %d: index %d rule %q, want rule %q", i+1, r.Index, r.Rule, wantRules[i])
		}
	}
	s.AssertNoMisses(t)
	s.AssertAllUsed(t)
}

func TestStepRuleWithFailingConditionFallsThrough(t *testing.T) {
	s := scriptedmodel.Start(t,
		scriptedmodel.WithRules(scriptedmodel.Rule{Call: 1, Model: "other", Reply: scriptedmodel.Text("step")}),
		scriptedmodel.WithReplies(scriptedmodel.Text("seq")),
	)
	res, err := newClient(s).Chat.Completions.New(context.Background(), userParams("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Choices[0].Message.Content != "seq" {
		t.Errorf("got %q", res.Choices[0].Message.Content)
	}
	if p := s.Pending(); len(p) != 1 || !strings.Contains(p[0], "step 1") {
		t.Errorf("Pending() = %q", p)
	}
}

// TestRateLimitThenSuccess shows openai-go retrying a 429 by itself when
// MaxRetries > 0, honouring Retry-After-Ms.
func TestRateLimitThenSuccess(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(
		scriptedmodel.Reply{Status: http.StatusTooManyRequests, RetryAfter: 30 * time.Millisecond},
		scriptedmodel.Text("finally"),
	))
	client := newClient(s, option.WithMaxRetries(2))
	start := time.Now()
	res, err := client.Chat.Completions.New(context.Background(), userParams("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < 30*time.Millisecond {
		t.Errorf("retried after %v, before Retry-After-Ms", elapsed)
	}
	if res.Choices[0].Message.Content != "finally" {
		t.Errorf("content = %q", res.Choices[0].Message.Content)
	}
	reqs := s.Requests()
	if len(reqs) != 2 {
		t.Fatalf("server saw %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if got, want := r.Header.Get("X-Stainless-Retry-Count"), fmt.Sprint(i); got != want {
			t.Errorf("request %d X-Stainless-Retry-Count = %q, want %q", i+1, got, want)
		}
		if r.APIKey() != testKey {
			t.Errorf("request %d API key %q", i+1, r.APIKey())
		}
	}
}

func TestRateLimitWithoutRetries(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(
		scriptedmodel.Reply{Status: http.StatusTooManyRequests, RetryAfter: 2 * time.Second},
	))
	_, err := newClient(s).Chat.Completions.New(context.Background(), userParams("m", "x"))
	apiErr := apiError(t, err)
	if apiErr.StatusCode != 429 || apiErr.Type != "requests" || apiErr.Code != "rate_limit_exceeded" || apiErr.Message == "" {
		t.Errorf("error = status %d type %q code %q message %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message)
	}
	if got := apiErr.Response.Header.Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After = %q", got)
	}
	if got := apiErr.Response.Header.Get("Retry-After-Ms"); got != "2000" {
		t.Errorf("Retry-After-Ms = %q", got)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error text leaks the API key: %v", err)
	}
}

func TestServerErrors(t *testing.T) {
	for _, status := range []int{500, 503} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{Status: status}))
			_, err := newClient(s).Chat.Completions.New(context.Background(), userParams("m", "x"))
			apiErr := apiError(t, err)
			if apiErr.StatusCode != status || apiErr.Type != "server_error" {
				t.Errorf("status %d type %q", apiErr.StatusCode, apiErr.Type)
			}
			if s.Count() != 1 {
				t.Errorf("Count = %d", s.Count())
			}
		})
	}
	t.Run("retried", func(t *testing.T) {
		s := scriptedmodel.Start(t, scriptedmodel.WithReplies(
			scriptedmodel.Reply{Status: 500, RetryAfter: time.Millisecond},
			scriptedmodel.Reply{Status: 503, RetryAfter: time.Millisecond},
			scriptedmodel.Text("ok"),
		))
		res, err := newClient(s, option.WithMaxRetries(2)).Chat.Completions.New(context.Background(), userParams("m", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Message.Content != "ok" || s.Count() != 3 {
			t.Errorf("content %q after %d requests", res.Choices[0].Message.Content, s.Count())
		}
	})
	t.Run("custom body", func(t *testing.T) {
		s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{
			Status: 400, ErrorType: "invalid_request_error", ErrorCode: "context_length_exceeded", ErrorMessage: "too long",
		}))
		_, err := newClient(s, option.WithMaxRetries(2)).Chat.Completions.New(context.Background(), userParams("m", "x"))
		apiErr := apiError(t, err)
		if apiErr.StatusCode != 400 || apiErr.Code != "context_length_exceeded" || apiErr.Message != "too long" {
			t.Errorf("status %d code %q message %q", apiErr.StatusCode, apiErr.Code, apiErr.Message)
		}
		if s.Count() != 1 {
			t.Errorf("a 400 was retried: %d requests", s.Count())
		}
	})
	t.Run("streaming request", func(t *testing.T) {
		s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{Status: 429}))
		stream := newClient(s).Chat.Completions.NewStreaming(context.Background(), userParams("m", "x"))
		if stream.Next() {
			t.Fatal("stream yielded a chunk")
		}
		if apiErr := apiError(t, stream.Err()); apiErr.StatusCode != 429 {
			t.Errorf("status %d", apiErr.StatusCode)
		}
	})
}

func TestMalformed(t *testing.T) {
	t.Run("json", func(t *testing.T) {
		s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{Content: "x", Malformed: true}))
		_, err := newClient(s, option.WithMaxRetries(2)).Chat.Completions.New(context.Background(), userParams("m", "x"))
		if err == nil {
			t.Fatal("malformed body accepted")
		}
		var apiErr *openai.Error
		if errors.As(err, &apiErr) {
			t.Errorf("malformed 200 body reported as API error %v", err)
		}
		if !strings.Contains(err.Error(), "error parsing response json") {
			t.Errorf("err = %v", err)
		}
		if s.Count() != 1 {
			t.Errorf("malformed body was retried: %d requests", s.Count())
		}
	})
	t.Run("stream", func(t *testing.T) {
		s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{Content: "some content", Malformed: true}))
		stream := newClient(s).Chat.Completions.NewStreaming(context.Background(), userParams("m", "x"))
		n := 0
		for stream.Next() {
			n++
		}
		if n != 2 {
			t.Errorf("got %d valid chunks before the broken one, want 2", n)
		}
		if stream.Err() == nil {
			t.Fatal("broken SSE event accepted")
		}
	})
	t.Run("error page", func(t *testing.T) {
		s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{Status: 502, Malformed: true}))
		_, err := newClient(s).Chat.Completions.New(context.Background(), userParams("m", "x"))
		if err == nil {
			t.Fatal("no error")
		}
		apiErr := apiError(t, err)
		if apiErr.StatusCode != 502 || apiErr.Message != "" {
			t.Errorf("status %d message %q", apiErr.StatusCode, apiErr.Message)
		}
	})
}

func TestTruncated(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(
		scriptedmodel.Reply{Content: "0123456789abcdef", Truncate: true, TruncateAt: 5},
		scriptedmodel.Reply{Content: "0123456789abcdef", Truncate: true},
		scriptedmodel.Reply{Content: "0123456789abcdef", Truncate: true},
	))
	client := newClient(s)

	res, err := client.Chat.Completions.New(context.Background(), userParams("m", "x"))
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Choices[0]; c.Message.Content != "01234" || c.FinishReason != "length" {
		t.Errorf("content %q finish %q", c.Message.Content, c.FinishReason)
	}

	params := userParams("m", "x")
	params.MaxTokens = openai.Int(2)
	res, err = client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Choices[0]; c.Message.Content != "01234567" || c.FinishReason != "length" {
		t.Errorf("with max_tokens 2: content %q finish %q", c.Message.Content, c.FinishReason)
	}

	stream := client.Chat.Completions.NewStreaming(context.Background(), userParams("m", "x"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if c := acc.Choices[0]; c.Message.Content != "01234567" || c.FinishReason != "length" {
		t.Errorf("stream: content %q finish %q", c.Message.Content, c.FinishReason)
	}
}

func TestLatency(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(
		scriptedmodel.Reply{Content: "slow", Delay: 50 * time.Millisecond},
		scriptedmodel.Reply{Content: "slow stream", ChunkDelay: 20 * time.Millisecond, StreamChunks: 2},
	))
	client := newClient(s)
	start := time.Now()
	if _, err := client.Chat.Completions.New(context.Background(), userParams("m", "x")); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed < 50*time.Millisecond {
		t.Errorf("answered after %v despite a 50ms delay", elapsed)
	}

	start = time.Now()
	stream := client.Chat.Completions.NewStreaming(context.Background(), userParams("m", "x"))
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// 2 content chunks + finish chunk + [DONE], each after 20ms.
	if elapsed := time.Since(start); elapsed < 80*time.Millisecond {
		t.Errorf("stream took %v despite 4×20ms chunk delays", elapsed)
	}
}

func TestClientTimeoutDuringDelay(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "late", Delay: time.Minute}))
	client := newClient(s)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := client.Chat.Completions.New(ctx, userParams("m", "x"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("timeout returned after %v", elapsed)
	}
	waitIdle(t, s)

	// openai-go's per-attempt timeout is not retried: the attempt's own
	// deadline error is returned at once, whatever MaxRetries says.
	start = time.Now()
	_, err = newClient(s, option.WithMaxRetries(2), option.WithRequestTimeout(100*time.Millisecond)).
		Chat.Completions.New(context.Background(), userParams("m", "x"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("request timeout returned after %v", elapsed)
	}
	if s.Count() != 2 {
		t.Errorf("server saw %d requests, want 2 (no retry after WithRequestTimeout)", s.Count())
	}
	waitIdle(t, s)
}

// waitIdle checks that the server's handlers have given up their delays.
func waitIdle(t *testing.T, s *scriptedmodel.Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d handlers still running after the client left", s.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestRecording(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("ok")))
	client := newClient(s, option.WithHeader("X-Vera-Run", "run-42"))

	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("sys"),
			openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("part one, "),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "https://example.invalid/x.png"}),
				openai.TextContentPart("part two"),
			}),
			openai.AssistantMessage("previous answer"),
			openai.ToolMessage("tool output", "call_1"),
			openai.UserMessage("last"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := s.Requests()[0]
	if got := r.Header.Get("Authorization"); got != "Bearer "+testKey {
		t.Errorf("Authorization = %q", got)
	}
	if r.APIKey() != testKey || r.Header.Get("X-Vera-Run") != "run-42" {
		t.Errorf("APIKey %q, X-Vera-Run %q", r.APIKey(), r.Header.Get("X-Vera-Run"))
	}
	if r.Received.IsZero() || r.Method != http.MethodPost || r.Path != "/v1/chat/completions" {
		t.Errorf("received %v method %s path %s", r.Received, r.Method, r.Path)
	}
	roles := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		roles[i] = m.Role
	}
	if strings.Join(roles, ",") != "system,user,assistant,tool,user" {
		t.Errorf("roles = %v", roles)
	}
	parts := r.Messages[1]
	if parts.Text != "part one, part two" || len(parts.Parts) != 3 || parts.Parts[1].Type != "image_url" ||
		parts.Parts[1].ImageURL != "https://example.invalid/x.png" {
		t.Errorf("array content = %+v", parts)
	}
	if r.Messages[3].ToolCallID != "call_1" || r.LastUserMessage() != "last" {
		t.Errorf("tool message %+v, last user %q", r.Messages[3], r.LastUserMessage())
	}
	if want := "system: sys\nuser: part one, part two\nassistant: previous answer\ntool: tool output\nuser: last\n"; r.Transcript() != want {
		t.Errorf("Transcript() = %q", r.Transcript())
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil || body["model"] != "m" {
		t.Errorf("raw body %s (%v)", r.Body, err)
	}
	// Printing a request never prints its headers.
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, r); strings.Contains(out, testKey) {
			t.Errorf("%s of a Request prints the API key: %s", format, out)
		}
	}
	// Requests returns copies.
	s.Requests()[0].Header.Set("Authorization", "changed")
	if s.Requests()[0].Header.Get("Authorization") != "Bearer "+testKey {
		t.Error("Requests() exposes internal state")
	}
}

func TestWaitForRequestsAndConcurrency(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "ok", Delay: 10 * time.Millisecond}))
	client := newClient(s)
	const n = 20

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	waited := make(chan error, 1)
	go func() { waited <- s.WaitForRequests(ctx, n) }()

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			stream := i%2 == 0
			if stream {
				st := client.Chat.Completions.NewStreaming(ctx, userParams("m", fmt.Sprint(i)))
				for st.Next() {
				}
				errs <- st.Err()
				return
			}
			_, err := client.Chat.Completions.New(ctx, userParams("m", fmt.Sprint(i)))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, r := range s.Requests() {
		seen[r.Index] = true
	}
	if len(seen) != n || s.Count() != n {
		t.Errorf("indexes %v, Count %d", seen, s.Count())
	}

	short, cancelShort := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancelShort()
	if err := s.WaitForRequests(short, n+1); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitForRequests beyond the count = %v", err)
	}
}

// fakeTB captures the errors an assertion reports.
type fakeTB struct {
	testing.TB
	errors []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}

func TestUnmatchedRequest(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Text("only one")))
	client := newClient(s, option.WithMaxRetries(2))
	if _, err := client.Chat.Completions.New(context.Background(), userParams("m", "first")); err != nil {
		t.Fatal(err)
	}
	_, err := client.Chat.Completions.New(context.Background(), userParams("m", "second question"))
	apiErr := apiError(t, err)
	if apiErr.StatusCode != 500 || apiErr.Code != "scriptedmodel_no_match" || !strings.Contains(apiErr.Message, "second question") {
		t.Errorf("status %d code %q message %q", apiErr.StatusCode, apiErr.Code, apiErr.Message)
	}
	if s.Count() != 2 {
		t.Errorf("the miss was retried: %d requests", s.Count())
	}
	misses := s.Misses()
	if len(misses) != 1 || misses[0].Index != 2 || !misses[0].Missed || misses[0].Rule != "" {
		t.Fatalf("misses = %v", misses)
	}
	if !s.Requests()[1].Missed {
		t.Error("request 2 not marked as missed")
	}

	var ftb fakeTB
	s.AssertNoMisses(&ftb)
	if len(ftb.errors) != 1 || !strings.Contains(ftb.errors[0], "second question") || strings.Contains(ftb.errors[0], testKey) {
		t.Errorf("AssertNoMisses reported %q", ftb.errors)
	}
}

func TestUnknownEndpointIsAMiss(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("ok")))
	// A base URL without /v1 is a classic configuration mistake.
	client := openai.NewClient(option.WithBaseURL(strings.TrimSuffix(s.URL(), "/v1")), option.WithAPIKey(testKey))
	_, err := client.Chat.Completions.New(context.Background(), userParams("m", "x"))
	if apiErr := apiError(t, err); apiErr.StatusCode != 404 {
		t.Errorf("status %d", apiErr.StatusCode)
	}
	misses := s.Misses()
	if len(misses) != 1 || misses[0].Path != "/chat/completions" || misses[0].Index != 0 {
		t.Errorf("misses = %v", misses)
	}
	if s.Count() != 0 {
		t.Errorf("Count = %d", s.Count())
	}
}

func TestModelsEndpoint(t *testing.T) {
	s := scriptedmodel.Start(t,
		scriptedmodel.WithModels("extra-model"),
		scriptedmodel.WithRules(scriptedmodel.OnModel("verifier", scriptedmodel.Text("v"))),
		scriptedmodel.WithReplies(scriptedmodel.Reply{Content: "a", Model: "agent"}),
	)
	client := newClient(s)
	page, err := client.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
		if m.Object != "model" || m.OwnedBy == "" {
			t.Errorf("model %+v", m)
		}
	}
	if strings.Join(ids, ",") != "agent,extra-model,verifier" {
		t.Errorf("models = %v", ids)
	}
	m, err := client.Models.Get(context.Background(), "verifier")
	if err != nil || m.ID != "verifier" {
		t.Errorf("Get(verifier) = %v, %v", m, err)
	}
	_, err = client.Models.Get(context.Background(), "nope")
	if apiErr := apiError(t, err); apiErr.StatusCode != 404 {
		t.Errorf("Get(nope) status %d", apiErr.StatusCode)
	}
	if s.Count() != 0 || len(s.Misses()) != 0 {
		t.Errorf("model requests were recorded as chat requests or misses")
	}
}

func TestDisconnect(t *testing.T) {
	t.Run("stream", func(t *testing.T) {
		s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{Content: "abcdefgh", Disconnect: true}))
		stream := newClient(s).Chat.Completions.NewStreaming(context.Background(), userParams("m", "x"))
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if stream.Err() == nil {
			t.Error("a dropped stream ended without error")
		}
		if c := acc.Choices[0]; c.Message.Content != "abcd" || c.FinishReason != "" {
			t.Errorf("partial content %q finish %q", c.Message.Content, c.FinishReason)
		}
	})
	t.Run("json is retried", func(t *testing.T) {
		s := scriptedmodel.Start(t, scriptedmodel.WithReplies(
			scriptedmodel.Reply{Disconnect: true},
			scriptedmodel.Text("second try"),
		))
		res, err := newClient(s, option.WithMaxRetries(1)).Chat.Completions.New(context.Background(), userParams("m", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Choices[0].Message.Content != "second try" || s.Count() != 2 {
			t.Errorf("content %q after %d requests", res.Choices[0].Message.Content, s.Count())
		}
	})
}

// TestClientAcceptsStreamEndingWithoutDone documents an openai-go behaviour
// the model client must guard against (it needs no scripted server): an
// event stream that ends cleanly without a finish_reason chunk nor "[DONE]"
// is NOT an error, so callers must check that a finish_reason arrived.
func TestClientAcceptsStreamEndingWithoutDone(t *testing.T) {
	raw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"half"},"finish_reason":null}]}`+"\n\n")
	}))
	defer raw.Close()
	client := openai.NewClient(option.WithBaseURL(raw.URL+"/v1"), option.WithAPIKey(testKey), option.WithMaxRetries(0))
	stream := client.Chat.Completions.NewStreaming(context.Background(), userParams("m", "x"))
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("openai-go now reports a stream cut short: %v (update the model client notes)", err)
	}
	if c := acc.Choices[0]; c.Message.Content != "half" || c.FinishReason != "" {
		t.Errorf("content %q finish %q", c.Message.Content, c.FinishReason)
	}
}

func TestCloseEndsDelaysAndLeaksNothing(t *testing.T) {
	before := runtime.NumGoroutine()

	s := scriptedmodel.New(scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "never", Delay: time.Minute}))
	hc := &http.Client{Transport: &http.Transport{}}
	client := newClient(s, option.WithHTTPClient(hc))
	done := make(chan error, 1)
	go func() {
		_, err := client.Chat.Completions.New(context.Background(), userParams("m", "x"))
		done <- err
	}()
	if err := s.WaitForRequests(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.Close()
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("Close took %v", elapsed)
	}
	if s.InFlight() != 0 {
		t.Errorf("%d handlers still running after Close", s.InFlight())
	}
	if err := <-done; err == nil {
		t.Error("request succeeded against a closed server")
	}
	s.Close() // idempotent
	if err := s.WaitForRequests(context.Background(), 2); !errors.Is(err, scriptedmodel.ErrClosed) {
		t.Errorf("WaitForRequests after Close = %v", err)
	}
	hc.CloseIdleConnections()

	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines: %d before, %d after Close\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSSEFramesAreFlushed checks that chunks reach the client as they are
// written rather than all at the end.
func TestSSEFramesAreFlushed(t *testing.T) {
	s := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{
		Content: "ab", StreamChunks: 2, ChunkDelay: 300 * time.Millisecond,
	}))
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`
	res, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	start := time.Now()
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: {") {
		t.Fatalf("first line %q, %v", line, err)
	}
	if elapsed := time.Since(start); elapsed > 250*time.Millisecond {
		t.Errorf("first chunk arrived after %v: not flushed", elapsed)
	}
}
