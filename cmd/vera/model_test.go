package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/vera-run/vera/internal/modelcheck"
	"github.com/vera-run/vera/internal/modelcheck/modelchecktest"
)

// verdicts reads the CAPABILITY / WORKS columns of the printed table.
func verdicts(table string) map[string]string {
	out := map[string]string{}
	row := regexp.MustCompile(`(?m)^(\w+)\s+(yes|no|partial|skipped)\s`)
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// TestModelCheckFamilies runs `vera model check` against fixture servers
// of three families and reads the table's verdicts and settings.
func TestModelCheckFamilies(t *testing.T) {
	cases := []struct {
		name, family string
		fixtures     map[string]string
		want         map[string]string
		settings     []string
		lines        []string
	}{
		{
			name: "vllm with tool and reasoning parsers", family: "vllm",
			fixtures: map[string]string{"completion": "reasoning_parser", "streaming": "reasoning_parser_stream", "tools": "tool_call_hermes", "structured": "structured", "reasoning": "reasoning_parser", "sampling": "reasoning_parser"},
			want:     map[string]string{"completion": "yes", "streaming": "yes", "tools": "yes", "structured": "yes", "reasoning": "yes", "sampling": "yes"},
			settings: []string{"stream: true", "tool_protocol: native"},
			lines:    []string{"separated by the server in message.reasoning_content"},
		},
		{
			name: "llama-server without --jinja", family: "llamacpp",
			fixtures: map[string]string{"completion": "no_jinja_think", "streaming": "no_jinja_think_stream", "tools": "no_jinja_tools_error", "structured": "structured", "reasoning": "no_jinja_think", "sampling": "no_jinja_think"},
			want:     map[string]string{"completion": "yes", "streaming": "yes", "tools": "no", "structured": "yes", "reasoning": "partial", "sampling": "yes"},
			settings: []string{"stream: true", "tool_protocol: text"},
			lines:    []string{"tools param requires --jinja flag — start llama-server with --jinja"},
		},
		{
			name: "ollama", family: "ollama",
			fixtures: map[string]string{"completion": "reasoning", "streaming": "reasoning_stream", "tools": "tool_call", "structured": "structured", "reasoning": "reasoning", "sampling": "reasoning"},
			want:     map[string]string{"completion": "yes", "streaming": "yes", "tools": "yes", "structured": "yes", "reasoning": "yes", "sampling": "yes"},
			settings: []string{"stream: true", "tool_protocol: native"},
			lines:    []string{"message.reasoning ("},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := modelchecktest.FixtureServer(t, tc.family, tc.fixtures)
			out, errOut, code := runCLI(t, "model", "check", "--base-url", srv.URL(), "--model", "m", "--timeout", "10s")
			if code != exitOK || errOut != "" {
				t.Fatalf("exit %d, stderr %q\n%s", code, errOut, out)
			}
			got := verdicts(out)
			for check, v := range tc.want {
				if got[check] != v {
					t.Errorf("%s: %q, want %q\n%s", check, got[check], v, out)
				}
			}
			settings := out[strings.Index(out, "Recommended model settings"):]
			for _, s := range tc.settings {
				if !strings.Contains(settings, "\n  "+s+"\n") {
					t.Errorf("setting %q missing:\n%s", s, out)
				}
			}
			for _, l := range tc.lines {
				if !strings.Contains(out, l) {
					t.Errorf("%q missing:\n%s", l, out)
				}
			}
			srv.AssertNoMisses(t)
		})
	}
}

// TestModelCheckJSON: --json prints the report as JSON.
func TestModelCheckJSON(t *testing.T) {
	srv := modelchecktest.FixtureServer(t, "openai", map[string]string{"completion": "chat", "streaming": "chat_stream", "tools": "tool_call", "structured": "structured", "reasoning": "reasoning_tokens", "sampling": "chat"})
	out, errOut, code := runCLI(t, "model", "check", "--base-url", srv.URL(), "--model", "gpt-4.1-mini", "--json")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var rep modelcheck.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if rep.Model != "gpt-4.1-mini" || len(rep.Results) != len(modelcheck.Checks) || !rep.CompletionWorks() {
		t.Errorf("%+v", rep)
	}
	if res, _ := rep.Result(modelcheck.CheckReasoning); res.Works != modelcheck.Partial || !strings.Contains(res.Detail, "256 reasoning tokens") {
		t.Errorf("reasoning %+v", res)
	}
}

// TestModelCheckFails: LM Studio's string error for a wrong path makes the
// basic completion fail: the table says so, the rest is skipped, and the
// command exits 1 with one line naming the cause.
func TestModelCheckFails(t *testing.T) {
	srv := modelchecktest.FixtureServer(t, "lmstudio", map[string]string{"completion": "error_wrong_path"})
	out, errOut, code := runCLI(t, "model", "check", "--base-url", srv.URL(), "--model", "qwen/qwen3-8b")
	if code != exitFailure {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, exitFailure, out, errOut)
	}
	got := verdicts(out)
	if got["completion"] != "no" || got["tools"] != "skipped" || got["sampling"] != "skipped" {
		t.Errorf("verdicts %v\n%s", got, out)
	}
	if strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "the basic completion does not work") ||
		!strings.Contains(errOut, "Unexpected endpoint or method") || !strings.Contains(errOut, "should end in /v1") {
		t.Errorf("stderr %q", errOut)
	}
}

func TestModelCheckUsage(t *testing.T) {
	for _, args := range [][]string{
		{"model", "check", "--model", "m"},
		{"model", "check", "--base-url", "http://127.0.0.1:9"},
		{"model", "check", "--base-url", "http://127.0.0.1:9", "--model", "m", "--timeout", "-1s"},
		{"model", "check", "--base-url", "http://127.0.0.1:9", "--model", "m", "--api-key-env", "VERA_TEST_SURELY_UNSET_KEY"},
	} {
		t.Setenv("VERA_MODEL_BASE_URL", "")
		t.Setenv("VERA_MODEL", "")
		t.Setenv("VERA_API_KEY_ENV", "")
		if _, errOut, code := runCLI(t, args...); code != exitUsage || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
	out, _, code := runCLI(t, "model", "check", "--help")
	if code != exitOK {
		t.Fatalf("--help: exit %d", code)
	}
	for _, c := range modelcheck.Checks {
		if !strings.Contains(out, "  "+c.Name+" ") {
			t.Errorf("--help does not explain the %s check:\n%s", c.Name, out)
		}
	}
}
