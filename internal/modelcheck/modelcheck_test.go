package modelcheck_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/modelcheck"
	"github.com/vera-run/vera/internal/modelcheck/modelchecktest"
)

func TestChecksAgainstFixtures(t *testing.T) {
	type want map[string]modelcheck.Verdict
	Y, P, N, S := modelcheck.Yes, modelcheck.Partial, modelcheck.No, modelcheck.Skipped
	cases := []struct {
		name, family string
		fixtures     map[string]string
		verdicts     want
		details      map[string]string // substrings of the detail
		settings     []string
	}{
		{
			name: "openai", family: "openai",
			fixtures: map[string]string{"completion": "chat", "streaming": "chat_stream", "tools": "tool_call", "structured": "structured", "reasoning": "reasoning_tokens", "sampling": "chat"},
			verdicts: want{"completion": Y, "streaming": Y, "tools": Y, "structured": Y, "reasoning": P, "sampling": Y},
			details:  map[string]string{"reasoning": "256 reasoning tokens counted", "streaming": "usage in the last chunk", "tools": "in tool_calls"},
			settings: []string{"stream: true", "tool_protocol: native"},
		},
		{
			name: "vllm with parsers", family: "vllm",
			fixtures: map[string]string{"completion": "reasoning_parser", "streaming": "reasoning_parser_stream", "tools": "tool_call_hermes", "structured": "structured", "reasoning": "reasoning_parser", "sampling": "reasoning_parser"},
			verdicts: want{"completion": Y, "streaming": Y, "tools": Y, "structured": Y, "reasoning": Y, "sampling": Y},
			details:  map[string]string{"reasoning": "message.reasoning_content"},
			settings: []string{"stream: true", "tool_protocol: native"},
		},
		{
			name: "vllm without parsers", family: "vllm",
			fixtures: map[string]string{"completion": "no_reasoning_parser", "streaming": "no_reasoning_parser_stream", "tools": "error_auto_tool_choice", "structured": "structured", "reasoning": "no_reasoning_parser", "sampling": "no_reasoning_parser"},
			verdicts: want{"completion": Y, "streaming": Y, "tools": N, "structured": Y, "reasoning": P, "sampling": Y},
			details:  map[string]string{"tools": "--enable-auto-tool-choice --tool-call-parser", "reasoning": "--reasoning-parser"},
			settings: []string{"stream: true", "tool_protocol: text"},
		},
		{
			name: "llama-server --no-jinja", family: "llamacpp",
			fixtures: map[string]string{"completion": "no_jinja_think", "streaming": "no_jinja_think_stream", "tools": "no_jinja_tools_error", "structured": "structured", "reasoning": "no_jinja_think", "sampling": "no_jinja_think"},
			verdicts: want{"completion": Y, "streaming": Y, "tools": N, "structured": Y, "reasoning": P, "sampling": Y},
			details:  map[string]string{"tools": "start llama-server with --jinja", "reasoning": "<think> blocks"},
			settings: []string{"stream: true", "tool_protocol: text"},
		},
		{
			name: "llama-server, tool call as text", family: "llamacpp",
			fixtures: map[string]string{"completion": "jinja_reasoning", "streaming": "jinja_reasoning_stream", "tools": "skip_chat_parsing_tool_text", "structured": "structured", "reasoning": "jinja_reasoning", "sampling": "jinja_reasoning"},
			verdicts: want{"completion": Y, "streaming": Y, "tools": N, "structured": Y, "reasoning": Y, "sampling": Y},
			details:  map[string]string{"tools": "came back as text", "streaming": "usage in the last chunk"},
			settings: []string{"stream: true", "tool_protocol: text"},
		},
		{
			name: "ollama, old stream without usage", family: "ollama",
			fixtures: map[string]string{"completion": "reasoning", "streaming": "chat_stream_no_usage", "tools": "tool_call", "structured": "structured", "reasoning": "reasoning", "sampling": "reasoning"},
			verdicts: want{"completion": Y, "streaming": P, "tools": Y, "structured": Y, "reasoning": Y, "sampling": Y},
			details:  map[string]string{"streaming": "no usage in the stream", "reasoning": "message.reasoning"},
			settings: []string{"stream: true", "tool_protocol: native"},
		},
		{
			name: "gpt-oss Harmony leaking", family: "harmony",
			fixtures: map[string]string{"completion": "content_leak", "streaming": "content_leak_stream", "tools": "tool_call_leak", "structured": "content_leak", "reasoning": "content_leak", "sampling": "content_leak"},
			verdicts: want{"completion": Y, "streaming": Y, "tools": Y, "structured": N, "reasoning": P, "sampling": Y},
			details:  map[string]string{"tools": "Harmony markup", "structured": "response_format was ignored"},
			settings: []string{"stream: true", "tool_protocol: native"},
		},
		{
			name: "lm studio, wrong path", family: "lmstudio",
			fixtures: map[string]string{"completion": "error_wrong_path"},
			verdicts: want{"completion": N, "streaming": S, "tools": S, "structured": S, "reasoning": S, "sampling": S},
			details:  map[string]string{"completion": "Unexpected endpoint or method"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := modelchecktest.FixtureServer(t, tc.family, tc.fixtures)
			rep, err := modelcheck.Run(context.Background(), modelcheck.Config{BaseURL: srv.URL(), Model: "m", Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Results) != len(modelcheck.Checks) {
				t.Fatalf("%d results, want %d", len(rep.Results), len(modelcheck.Checks))
			}
			for check, v := range tc.verdicts {
				res, _ := rep.Result(check)
				if res.Works != v {
					t.Errorf("%s: %s (%s), want %s", check, res.Works, res.Detail, v)
				}
				if sub := tc.details[check]; sub != "" && !strings.Contains(res.Detail, sub) {
					t.Errorf("%s: detail %q does not contain %q", check, res.Detail, sub)
				}
			}
			if got := strings.Join(rep.Settings(), "|"); got != strings.Join(tc.settings, "|") {
				t.Errorf("settings %q, want %q", got, tc.settings)
			}
			if rep.CompletionWorks() != (tc.verdicts["completion"] == Y) {
				t.Errorf("CompletionWorks %v", rep.CompletionWorks())
			}
			var b bytes.Buffer
			if err := rep.WriteTable(&b); err != nil {
				t.Fatal(err)
			}
			t.Logf("\n%s", b.String())
			if !strings.Contains(b.String(), "CAPABILITY") || !strings.Contains(b.String(), "completion") {
				t.Errorf("table:\n%s", b.String())
			}
			srv.AssertNoMisses(t)
		})
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := modelcheck.Run(context.Background(), modelcheck.Config{BaseURL: "http://127.0.0.1:9", Model: ""}); err == nil {
		t.Error("no model: no error")
	}
	_, err := modelcheck.Run(context.Background(), modelcheck.Config{BaseURL: "http://127.0.0.1:9", Model: "m", APIKeyEnv: "VERA_TEST_UNSET_KEY",
		LookupEnv: func(string) (string, bool) { return "", false }})
	if err == nil || !strings.Contains(err.Error(), "VERA_TEST_UNSET_KEY") {
		t.Errorf("unset key variable: %v", err)
	}
}

// TestConnectionRefused: nothing listens; the completion check says so in
// one line and the rest is skipped.
func TestConnectionRefused(t *testing.T) {
	rep, err := modelcheck.Run(context.Background(), modelcheck.Config{BaseURL: "http://127.0.0.1:9", Model: "m", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := rep.Result(modelcheck.CheckCompletion)
	if res.Works != modelcheck.No || !strings.Contains(res.Detail, "is the server running") || strings.Contains(res.Detail, "\n") {
		t.Errorf("%+v", res)
	}
	if rep.CompletionWorks() {
		t.Error("CompletionWorks")
	}
}
