package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

func completeWith(t *testing.T, stream bool, reply scriptedmodel.Reply, req llm.Request) (llm.Response, error, scriptedmodel.Request) {
	t.Helper()
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(reply))
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", Stream: stream, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	if req.Messages == nil {
		req.Messages = []llm.Message{{Role: "user", Content: "hi"}}
	}
	resp, err := c.Complete(context.Background(), req)
	reqs := srv.Requests()
	if len(reqs) == 0 {
		return resp, err, scriptedmodel.Request{}
	}
	return resp, err, reqs[len(reqs)-1]
}

func TestToolCallsAndReasoningMembers(t *testing.T) {
	for _, stream := range []bool{false, true} {
		for _, field := range []string{"reasoning_content", "reasoning"} {
			reply := scriptedmodel.Reply{NullContent: true, Reasoning: "I should list the files.", ReasoningField: field, ReasoningTokens: 7,
				ToolCalls: []scriptedmodel.ToolCall{{Name: "shell", Arguments: `{"cmd":"ls /input","thought":"look"}`}}}
			var deltas []llm.Delta
			resp, err, sent := completeWith(t, stream, reply, llm.Request{
				Tools:      []llm.Tool{{Name: "shell", Parameters: map[string]any{"type": "object"}}},
				ToolChoice: "required",
				OnDelta:    func(d llm.Delta) { deltas = append(deltas, d) },
			})
			if err != nil {
				t.Fatalf("stream=%v %s: %v", stream, field, err)
			}
			if resp.Text != "" || resp.Reasoning != "I should list the files." || resp.ReasoningSource != field ||
				len(resp.ToolCalls) != 1 || resp.ToolCalls[0].Name != "shell" || resp.ToolCalls[0].Arguments != `{"cmd":"ls /input","thought":"look"}` ||
				resp.FinishReason != "tool_calls" {
				t.Fatalf("stream=%v %s: %+v", stream, field, resp)
			}
			if stream && (len(deltas) == 0 || resp.Usage.Reasoning != 7) {
				t.Fatalf("stream: deltas %v usage %+v", deltas, resp.Usage)
			}
			if len(sent.Tools) != 1 || string(sent.ToolChoice) != `"required"` {
				t.Fatalf("sent tools %v choice %s", sent.Tools, sent.ToolChoice)
			}
		}
	}
}

func TestReasoningMarkupInContent(t *testing.T) {
	cases := []struct {
		name, content, text, reasoning, source string
		calls                                  int
	}{
		{"think", "<think>\nplan it\n</think>\n\nTHOUGHT: x", "THOUGHT: x", "plan it", llm.ReasoningThink, 0},
		{"think opened in the prompt", "plan it</think>THOUGHT: x", "THOUGHT: x", "plan it", llm.ReasoningThink, 0},
		{"think cut", "<think>plan it and", "", "plan it and", llm.ReasoningThink, 0},
		{"harmony", "<|channel|>analysis<|message|>Need to look.<|end|><|start|>assistant<|channel|>final<|message|>THOUGHT: x<|return|>", "THOUGHT: x", "Need to look.", llm.ReasoningHarmony, 0},
		{"harmony tool call", "<|channel|>analysis<|message|>Run ls.<|end|><|start|>assistant<|channel|>commentary to=functions.shell <|constrain|>json<|message|>{\"cmd\":\"ls\"}<|call|>", "", "Run ls.", llm.ReasoningHarmony, 1},
		{"plain", "THOUGHT: x", "THOUGHT: x", "", "", 0},
	}
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			resp, err, _ := completeWith(t, stream, scriptedmodel.Reply{Content: tc.content, StreamChunks: 7}, llm.Request{})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if resp.Text != tc.text || resp.Reasoning != tc.reasoning || resp.ReasoningSource != tc.source || len(resp.ToolCalls) != tc.calls {
				t.Fatalf("%s stream=%v: text %q reasoning %q source %q calls %v", tc.name, stream, resp.Text, resp.Reasoning, resp.ReasoningSource, resp.ToolCalls)
			}
		}
	}
}

func TestSamplingAndExtraBodyAreSent(t *testing.T) {
	temp, topP, seed := 0.2, 0.9, int64(42)
	_, err, sent := completeWith(t, true, scriptedmodel.Reply{Content: "ok"}, llm.Request{Sampling: llm.Sampling{
		Temperature: &temp, TopP: &topP, Seed: &seed, MaxTokens: 100, Stop: []string{"END"},
		ExtraBody: map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if *sent.Temperature != 0.2 || *sent.TopP != 0.9 || *sent.Seed != 42 || *sent.MaxTokens != 100 ||
		string(sent.Members["stop"]) != `"END"` || string(sent.Members["chat_template_kwargs"]) != `{"enable_thinking":false}` {
		t.Fatalf("sent %s", sent.Body)
	}
	if _, err, _ := completeWith(t, false, scriptedmodel.Reply{Content: "ok"}, llm.Request{Sampling: llm.Sampling{ExtraBody: map[string]any{"model": "x"}}}); err == nil || !strings.Contains(err.Error(), `"model"`) {
		t.Fatalf("extra_body overriding model: %v", err)
	}
}

func TestResponseFormatRefusedIsDropped(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(r scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		if r.ResponseFormat != nil {
			return scriptedmodel.Reply{Status: 400, ErrorMessage: "response_format json_schema is not supported"}, true
		}
		return scriptedmodel.Reply{Content: `{"ok":true}`}, true
	})))
	c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	req := llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}, ResponseFormat: &llm.JSONSchema{Name: "verdict", Schema: map[string]any{"type": "object"}}}
	if _, err := c.Complete(context.Background(), req); err == nil {
		t.Fatal("a refused response_format without Optional should fail")
	}
	req.Optional = true
	resp, err := c.Complete(context.Background(), req)
	if err != nil || resp.Text != `{"ok":true}` || len(resp.Dropped) != 1 || resp.Dropped[0] != llm.FeatureResponseFormat {
		t.Fatalf("%+v %v", resp, err)
	}
	var rf map[string]any
	if err := json.Unmarshal(srv.Requests()[1].ResponseFormat, &rf); err != nil || rf["type"] != "json_schema" {
		t.Fatalf("response_format sent: %s", srv.Requests()[1].ResponseFormat)
	}
	// The client remembers the refusal: the next call does not send it
	// again, and still says it was dropped.
	before := srv.Count()
	resp, err = c.Complete(context.Background(), req)
	if err != nil || srv.Count() != before+1 || len(resp.Dropped) != 1 || srv.Requests()[before].ResponseFormat != nil {
		t.Fatalf("after a refusal: %d requests, %+v, %v", srv.Count()-before, resp, err)
	}
	// Another model on the same client is asked again.
	req.Model = "other"
	before = srv.Count()
	if _, err := c.Complete(context.Background(), req); err != nil || srv.Count() != before+2 {
		t.Fatalf("another model: %d requests, %v", srv.Count()-before, err)
	}
}

func TestStringErrorBodyAndHTMLPage(t *testing.T) {
	_, err, _ := completeWith(t, false, scriptedmodel.Reply{RawBody: []byte(`{"error":"Unexpected endpoint or method. (POST /v1/chat/completion)"}`)}, llm.Request{})
	if err == nil || !strings.Contains(err.Error(), "Unexpected endpoint or method") || !strings.Contains(err.Error(), "/v1") {
		t.Fatalf("string error: %v", err)
	}
	_, err, _ = completeWith(t, false, scriptedmodel.Reply{Status: http.StatusBadGateway, Malformed: true}, llm.Request{})
	if err == nil || !strings.Contains(err.Error(), "HTML page") {
		t.Fatalf("html: %v", err)
	}
}

// TestStreamTimeouts: when streaming, Timeout bounds the wait for the
// first chunk (a local model reading a long prompt), IdleTimeout each gap
// after it, and StreamTimeout the whole reply, so that a long answer
// that keeps coming is not cut by Timeout.
func TestStreamTimeouts(t *testing.T) {
	slowStart := scriptedmodel.Reply{Content: "a long answer that keeps coming", Delay: 250 * time.Millisecond, ChunkDelay: 100 * time.Millisecond, StreamChunks: 8}
	for _, tc := range []struct {
		name                string
		reply               scriptedmodel.Reply
		timeout, idle, cap_ time.Duration
		want                string // "" = success, else a substring of the error
	}{
		{"slow prompt, long reply", slowStart, 400 * time.Millisecond, 200 * time.Millisecond, 0, ""},
		{"no first chunk in time", slowStart, 150 * time.Millisecond, time.Second, 0, "no part of the reply within 150ms"},
		{"a gap too long", scriptedmodel.Reply{Content: "abcdefgh", ChunkDelay: 300 * time.Millisecond, StreamChunks: 4}, time.Second, 100 * time.Millisecond, 0, "sent nothing for 100ms"},
		{"the whole reply too long", slowStart, time.Second, time.Second, 500 * time.Millisecond, "no complete response within 500ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(tc.reply))
			c, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m", Stream: true, MaxRetries: -1,
				Timeout: tc.timeout, IdleTimeout: tc.idle, StreamTimeout: tc.cap_})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "hi"}}})
			switch {
			case tc.want == "" && (err != nil || resp.Text != tc.reply.Content):
				t.Fatalf("got %q, %v", resp.Text, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, llm.ErrTimeout)):
				t.Fatalf("err = %v, want ErrTimeout saying %q", err, tc.want)
			}
		})
	}
}

// TestReservedBodyKeysAreTheCatalogues: the members a run's extra_body
// setting may not set (checked when the run is submitted) are the ones the
// client refuses.
func TestReservedBodyKeysAreTheCatalogues(t *testing.T) {
	client, domain := llm.ReservedBodyKeys(), catalog.ReservedBodyKeys()
	slices.Sort(client)
	slices.Sort(domain)
	if !slices.Equal(client, domain) {
		t.Fatalf("client refuses %v, the catalogue %v", client, domain)
	}
}

// TestRefusesFeature: a call's error is read as the refusal of a feature
// by the same rule the client drops Optional features with.
func TestRefusesFeature(t *testing.T) {
	for _, tc := range []struct {
		status        int
		msg           string
		tools, format bool
	}{
		{400, "tools are not supported by this model", true, false},
		{500, "tools param requires --jinja flag", true, false},
		{400, "response_format json_schema is not supported", false, true},
		{422, "unknown parameter", true, true}, // names no feature: either
		{429, "too many tool calls per minute", false, false},
		{401, "invalid API key", false, false},
	} {
		err := fmt.Errorf("call x: %w", &llm.APIError{Status: tc.status, Message: tc.msg})
		if got := llm.RefusesFeature(err, llm.FeatureTools); got != tc.tools {
			t.Errorf("%d %q: refuses tools %v, want %v", tc.status, tc.msg, got, tc.tools)
		}
		if got := llm.RefusesFeature(err, llm.FeatureResponseFormat); got != tc.format {
			t.Errorf("%d %q: refuses response_format %v, want %v", tc.status, tc.msg, got, tc.format)
		}
	}
	if llm.RefusesFeature(errors.New("connection refused"), llm.FeatureTools) {
		t.Error("a connection error read as a refusal")
	}
}
