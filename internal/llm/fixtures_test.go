package llm_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// The conformance fixtures (internal/scriptedmodel/fixtures): every server
// family's exact wire body is served over real HTTP and read through the
// real client, and the parsed Response must be what the fixture index says.

// fixtureClient serves f (with the given write chunk size) and returns a
// client for it plus the server.
func fixtureClient(t *testing.T, f scriptedmodel.Fixture, stream bool, writeChunk, maxRetries int) (*llm.Client, *scriptedmodel.Server) {
	t.Helper()
	reply := f.Reply()
	reply.WriteChunk = writeChunk
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(reply))
	c, err := llm.New(llm.Config{
		BaseURL: srv.URL(), Model: "fixture-model", Stream: stream, MaxRetries: maxRetries,
		Timeout: 10 * time.Second,
		Backoff: llm.Backoff{Base: time.Millisecond, Max: 2 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, srv
}

func userRequest() llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: "user", Content: "How many rows does /input/data.csv have?"}}}
}

// checkFixtureResponse compares a response with the fixture's expectation.
func checkFixtureResponse(t *testing.T, name string, f scriptedmodel.Fixture, resp llm.Response) {
	t.Helper()
	want := f.Expect
	var calls []scriptedmodel.FixtureToolCall
	for _, c := range resp.ToolCalls {
		calls = append(calls, scriptedmodel.FixtureToolCall{ID: c.ID, Name: c.Name, Arguments: c.Arguments})
	}
	var problems []string
	check := func(field string, got, want any) {
		if !reflect.DeepEqual(got, want) {
			problems = append(problems, fmt.Sprintf("%s = %q, want %q", field, got, want))
		}
	}
	check("Text", resp.Text, want.Text)
	check("Reasoning", resp.Reasoning, want.Reasoning)
	check("ReasoningSource", resp.ReasoningSource, want.ReasoningSource)
	check("FinishReason", resp.FinishReason, want.FinishReason)
	if !reflect.DeepEqual(calls, want.ToolCalls) {
		problems = append(problems, fmt.Sprintf("ToolCalls = %+v, want %+v", calls, want.ToolCalls))
	}
	if want.Model != "" {
		check("Model", resp.Model, want.Model)
	}
	if u := want.Usage; u != nil {
		wu := llm.Usage{Prompt: u.Prompt, Completion: u.Completion, Total: u.Total, Reasoning: u.Reasoning, Cached: u.Cached}
		if resp.Usage != wu {
			problems = append(problems, fmt.Sprintf("Usage = %+v, want %+v", resp.Usage, wu))
		}
	}
	if len(problems) > 0 {
		t.Errorf("%s (%s, from %s):\n  %s", name, f.Server, f.Source, strings.Join(problems, "\n  "))
	}
}

func TestFixtureIndex(t *testing.T) {
	all, err := scriptedmodel.Fixtures()
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]int{}
	for _, f := range all {
		families[f.Family]++
		if !strings.HasPrefix(f.Source, "https://") {
			t.Errorf("%s: source %q is not a document URL", f.Name(), f.Source)
		}
		if len(f.Body) == 0 {
			t.Errorf("%s: empty body", f.Name())
		}
		if f.Stream && !strings.HasSuffix(strings.TrimRight(string(f.Body), "\n"), "data: [DONE]") {
			t.Errorf("%s: an SSE fixture must end with data: [DONE]", f.Name())
		}
		if !f.IsError() && f.Expect.FinishReason == "" {
			t.Errorf("%s: no expected finish_reason", f.Name())
		}
	}
	for _, fam := range []string{"openai", "vllm", "llamacpp", "ollama", "lmstudio", "harmony"} {
		if families[fam] < 3 {
			t.Errorf("family %s has %d fixtures, want at least 3", fam, families[fam])
		}
	}
}

// TestFixturesParse reads every non-error fixture through the real client;
// the streamed ones also written 1, 7 and 13 bytes at a time, so that
// events, JSON and UTF-8 sequences are split at awkward boundaries.
func TestFixturesParse(t *testing.T) {
	all, err := scriptedmodel.Fixtures()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if f.IsError() {
			continue
		}
		chunks := []int{0}
		if f.Stream {
			chunks = append(chunks, 1, 7, 13)
		}
		for _, n := range chunks {
			name := fmt.Sprintf("%s/write%d", f.Name(), n)
			t.Run(name, func(t *testing.T) {
				c, srv := fixtureClient(t, f, f.Stream, n, -1)
				var deltas strings.Builder
				req := userRequest()
				req.OnDelta = func(d llm.Delta) { deltas.WriteString(d.Content + d.Reasoning + d.ToolArgs) }
				resp, err := c.Complete(context.Background(), req)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				checkFixtureResponse(t, name, f, resp)
				if f.Stream && deltas.Len() == 0 {
					t.Errorf("%s: no deltas reached OnDelta", name)
				}
				if got := srv.Count(); got != 1 {
					t.Errorf("%s: %d requests, want 1", name, got)
				}
				if reqs := srv.Requests(); len(reqs) == 1 && reqs[0].IncludeUsage != f.Stream {
					t.Errorf("%s: include_usage %v on a stream=%v request", name, reqs[0].IncludeUsage, f.Stream)
				}
			})
		}
	}
}

// TestFixtureJSONToStreamingRequest: a server that answers a streaming
// request with a plain JSON completion (it ignores "stream") is read as
// that completion.
func TestFixtureJSONToStreamingRequest(t *testing.T) {
	all, err := scriptedmodel.Fixtures()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range all {
		if f.IsError() || f.Stream {
			continue
		}
		c, srv := fixtureClient(t, f, true, 5, -1)
		resp, err := c.Complete(context.Background(), userRequest())
		if err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		checkFixtureResponse(t, f.Name()+"/streaming-client", f, resp)
		if reqs := srv.Requests(); len(reqs) != 1 || !reqs[0].Stream {
			t.Errorf("%s: the request did not ask for a stream", f.Name())
		}
	}
}

// TestFixtureErrors: each error body (a string error at HTTP 200, an HTML
// page, a 429 asking for a wait beyond the client's budget, refusals)
// gives one line naming what happened, whether or not the client streams.
func TestFixtureErrors(t *testing.T) {
	all, err := scriptedmodel.Fixtures()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range all {
		if !f.IsError() {
			continue
		}
		n++
		for _, stream := range []bool{false, true} {
			name := fmt.Sprintf("%s/stream=%v", f.Name(), stream)
			t.Run(name, func(t *testing.T) {
				c, _ := fixtureClient(t, f, stream, 0, 2)
				_, err := c.Complete(context.Background(), userRequest())
				if err == nil {
					t.Fatalf("%s: no error", name)
				}
				msg := err.Error()
				if strings.Contains(msg, "\n") {
					t.Errorf("%s: the error is not one line:\n%s", name, msg)
				}
				for _, want := range f.Expect.Error {
					if !strings.Contains(msg, want) {
						t.Errorf("%s: error %q does not contain %q", name, msg, want)
					}
				}
			})
		}
	}
	if n < 5 {
		t.Errorf("%d error fixtures, want at least 5", n)
	}
}

// TestFixtureErrorAttempts: what is retried and what is not.
func TestFixtureErrorAttempts(t *testing.T) {
	cases := []struct {
		family, name string
		attempts     int
		target       error
	}{
		{"openai", "error_rate_limit", 1, nil},       // Retry-After beyond the budget
		{"llamacpp", "no_jinja_tools_error", 1, nil}, // a 500 no retry cures
		{"lmstudio", "error_wrong_path", 2, llm.ErrMalformed},
		{"proxy", "bad_gateway", 3, nil}, // a 502 from a proxy is transient
		{"ollama", "error_no_tools", 1, nil},
	}
	for _, tc := range cases {
		f := scriptedmodel.MustFixture(tc.family, tc.name)
		c, srv := fixtureClient(t, f, false, 0, 2)
		resp, err := c.Complete(context.Background(), userRequest())
		if err == nil {
			t.Fatalf("%s: no error", f.Name())
		}
		if srv.Count() != tc.attempts || resp.Attempts != tc.attempts {
			t.Errorf("%s: %d requests, Attempts %d, want %d", f.Name(), srv.Count(), resp.Attempts, tc.attempts)
		}
		if tc.target != nil && !errors.Is(err, tc.target) {
			t.Errorf("%s: %v is not %v", f.Name(), err, tc.target)
		}
		var ae *llm.APIError
		if tc.target == nil && (!errors.As(err, &ae) || (f.Status != 0 && ae.Status != f.Status)) {
			t.Errorf("%s: %v is not an APIError with status %d", f.Name(), err, f.Status)
		}
	}
}

// TestFixtureRefusalDropsTools: with Request.Optional, the refusals of
// llama-server without --jinja (a 500), of Ollama for a model without tools
// and of vLLM without --enable-auto-tool-choice (400s) make the client send
// the call again without tools, and Response.Dropped says so.
func TestFixtureRefusalDropsTools(t *testing.T) {
	answer := scriptedmodel.MustFixture("llamacpp", "no_jinja_think")
	for _, refusal := range []scriptedmodel.Fixture{
		scriptedmodel.MustFixture("llamacpp", "no_jinja_tools_error"),
		scriptedmodel.MustFixture("ollama", "error_no_tools"),
		scriptedmodel.MustFixture("vllm", "error_auto_tool_choice"),
	} {
		srv := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(r scriptedmodel.Request) (scriptedmodel.Reply, bool) {
			if len(r.Tools) > 0 {
				return refusal.Reply(), true
			}
			return answer.Reply(), true
		})))
		c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: 2, Backoff: llm.Backoff{Base: time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		req := userRequest()
		req.Tools = []llm.Tool{{Name: "get_weather", Parameters: map[string]any{"type": "object"}}}
		req.ToolChoice = "auto"
		req.Optional = true
		resp, err := c.Complete(context.Background(), req)
		c.Close()
		if err != nil {
			t.Fatalf("%s: %v", refusal.Name(), err)
		}
		if !reflect.DeepEqual(resp.Dropped, []string{llm.FeatureTools}) || srv.Count() != 2 || resp.ReasoningSource != llm.ReasoningThink {
			t.Errorf("%s: dropped %v after %d requests, %+v", refusal.Name(), resp.Dropped, srv.Count(), resp)
		}
		if reqs := srv.Requests(); len(reqs) == 2 && (len(reqs[1].Tools) != 0 || reqs[1].ToolChoice != nil) {
			t.Errorf("%s: the second request still offers tools: %v %s", refusal.Name(), reqs[1].Tools, reqs[1].ToolChoice)
		}
	}
}

// TestStreamMislabelledAsJSON: an event stream sent with Content-Type
// application/json is still read as a stream.
func TestStreamMislabelledAsJSON(t *testing.T) {
	f := scriptedmodel.MustFixture("ollama", "reasoning_stream")
	f.ContentType = "application/json"
	c, _ := fixtureClient(t, f, true, 7, -1)
	resp, err := c.Complete(context.Background(), userRequest())
	if err != nil {
		t.Fatal(err)
	}
	checkFixtureResponse(t, "mislabelled stream", f, resp)
}
