package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/vera-run/vera/bus/catalog"
)

// runConfigOf parses `vera run` flags (after the required ones) into the
// run's configuration, as the command does.
func runConfigOf(t *testing.T, args ...string) (catalog.RunConfig, error) {
	t.Helper()
	var f runFlags
	cmd := &cobra.Command{Use: "run"}
	f.register(cmd)
	base := []string{"--task", "t", "--work-dir", t.TempDir(), "--model-base-url", "http://127.0.0.1:1234", "--model", "m"}
	if err := cmd.ParseFlags(append(base, args...)); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return f.config(strings.NewReader(""))
}

func ptr[T any](v T) *T { return &v }

func TestRunModelSettingsFlagsMakeTheRunConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		model   catalog.ModelConfig // BaseURL and Name filled in below
		auditor *catalog.ModelConfig
	}{
		{name: "none: server defaults, nothing set", args: nil},
		{name: "every agent setting",
			args: []string{"--tool-protocol", "native", "--temperature", "0.2", "--top-p", "0.9", "--max-tokens", "2048", "--seed", "7",
				"--stop", "</answer>", "--stop", "\nObservation:", "--extra-body", `{"chat_template_kwargs":{"enable_thinking":false}}`,
				"--no-stream", "--idle-timeout", "90s"},
			model: catalog.ModelConfig{ToolProtocol: catalog.ToolProtocolNative, Temperature: ptr(0.2), TopP: ptr(0.9), MaxTokens: 2048, Seed: ptr(int64(7)),
				Stop: []string{"</answer>", "\nObservation:"}, ExtraBody: map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}},
				Stream: ptr(false), IdleTimeoutMS: 90000}},
		{name: "temperature 0 is sent, not dropped", args: []string{"--temperature", "0", "--seed", "0"},
			model: catalog.ModelConfig{Temperature: ptr(0.0), Seed: ptr(int64(0))}},
		{name: "stream on explicitly", args: []string{"--stream", "--tool-protocol", "text"},
			model: catalog.ModelConfig{Stream: ptr(true), ToolProtocol: catalog.ToolProtocolText}},
		{name: "--stream=false", args: []string{"--stream=false"}, model: catalog.ModelConfig{Stream: ptr(false)}},
		{name: "auditor inherits the agent's settings and overrides its own",
			args:  []string{"--auditor", "--temperature", "0.7", "--max-tokens", "512", "--auditor-temperature", "0", "--auditor-extra-body", `{"reasoning_effort":"low"}`},
			model: catalog.ModelConfig{Temperature: ptr(0.7), MaxTokens: 512},
			auditor: &catalog.ModelConfig{Temperature: ptr(0.0), MaxTokens: 512,
				ExtraBody: map[string]any{"reasoning_effort": "low"}}},
		{name: "auditor without settings of its own uses the agent's model", args: []string{"--auditor", "--top-p", "0.5"},
			model: catalog.ModelConfig{TopP: ptr(0.5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := runConfigOf(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.model
			want.BaseURL, want.Name = "http://127.0.0.1:1234", "m"
			if !reflect.DeepEqual(cfg.Model, want) {
				t.Errorf("model\n got %+v\nwant %+v", cfg.Model, want)
			}
			if tc.auditor != nil {
				w := *tc.auditor
				w.BaseURL, w.Name = "http://127.0.0.1:1234", "m"
				if cfg.Auditor.Model == nil || !reflect.DeepEqual(*cfg.Auditor.Model, w) {
					t.Errorf("auditor model\n got %+v\nwant %+v", cfg.Auditor.Model, w)
				}
			} else if cfg.Auditor.Model != nil {
				t.Errorf("auditor model %+v, want none (the agent's)", *cfg.Auditor.Model)
			}
		})
	}
}

func TestRunModelSettingsFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tool-protocol", "json"}, `--tool-protocol "json": want auto, native or text`},
		{[]string{"--tool-protocol", ""}, `--tool-protocol "": want auto, native or text`},
		{[]string{"--temperature", "3"}, "temperature 3: want 0 to 2"},
		{[]string{"--top-p", "0"}, "top_p 0: want more than 0"},
		{[]string{"--max-tokens", "-5"}, "max_tokens -5"},
		{[]string{"--stop", "a", "--stop", "b", "--stop", "c", "--stop", "d", "--stop", "e"}, "stop: 5 sequences, at most 4"},
		{[]string{"--stop", ""}, "--stop: an empty stop sequence"},
		{[]string{"--extra-body", `{"chat_template_kwargs":`}, "--extra-body: not a JSON object"},
		{[]string{"--extra-body", `[1,2]`}, "--extra-body: not a JSON object"},
		{[]string{"--extra-body", `null`}, "--extra-body: not a JSON object (null)"},
		{[]string{"--extra-body", `{"a":1} {"b":2}`}, "--extra-body: more than one JSON value"},
		{[]string{"--extra-body", `{"stream":false}`}, `extra_body sets "stream", which VERA sets itself`},
		{[]string{"--extra-body", `{"messages":[]}`}, `extra_body sets "messages"`},
		{[]string{"--stream", "--no-stream"}, "give --stream or --no-stream, not both"},
		{[]string{"--idle-timeout", "0s"}, "--idle-timeout 0s: want a positive duration"},
		{[]string{"--auditor-temperature", "0.1"}, "the --auditor-* settings need --auditor"},
		{[]string{"--auditor", "--auditor-extra-body", `{"tools":[]}`}, `--auditor-extra-body (the auditor's model settings): extra_body sets "tools"`},
	} {
		_, err := runConfigOf(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to say %q", tc.args, err, tc.want)
		}
	}
	// Through the command: a usage error, exit status 2, before any bus.
	_, errOut, code := runCLI(t, "run", "--task", "x", "--work-dir", t.TempDir(), "--model-base-url", "http://127.0.0.1:1", "--model", "m",
		"--extra-body", `{"model":"other"}`)
	if code != exitUsage || !strings.Contains(errOut, `extra_body sets "model"`) {
		t.Errorf("vera run --extra-body with a reserved key: exit %d, stderr %q", code, errOut)
	}
	_, errOut, code = runCLI(t, "up", "--data-dir", t.TempDir(), "--temperature", "9")
	if code != exitUsage || !strings.Contains(errOut, "temperature 9: want 0 to 2") {
		t.Errorf("vera up --temperature 9: exit %d, stderr %q", code, errOut)
	}
}

func TestRunHelpExplainsModelSettings(t *testing.T) {
	out, _, code := runCLI(t, "run", "--help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, flag := range []string{"--tool-protocol", "--temperature", "--top-p", "--max-tokens", "--seed", "--stop", "--extra-body",
		"--stream", "--no-stream", "--idle-timeout", "--show-reasoning", "--auditor-temperature", "--auditor-extra-body"} {
		if !strings.Contains(out, flag+" ") {
			t.Errorf("vera run --help lacks %s", flag)
		}
	}
	for _, cmd := range []string{"up", "demo", "dashboard"} {
		out, _, _ := runCLI(t, cmd, "--help")
		for _, flag := range []string{"--tool-protocol", "--temperature", "--extra-body", "--no-stream"} {
			if !strings.Contains(out, flag+" ") {
				t.Errorf("vera %s --help lacks %s", cmd, flag)
			}
		}
	}
}

// The dashboard's template (vera up, vera demo, vera dashboard) carries
// the model settings of the flags.
func TestDashboardTemplateTakesModelSettings(t *testing.T) {
	var f dashboardRunFlags
	cmd := &cobra.Command{Use: "up"}
	f.register(cmd)
	if err := cmd.ParseFlags([]string{"--base-url", "http://127.0.0.1:1234", "--model", "m", "--tool-protocol", "auto", "--seed", "3", "--no-stream"}); err != nil {
		t.Fatal(err)
	}
	tmpl, err := f.template()
	if err != nil {
		t.Fatal(err)
	}
	want := catalog.ModelConfig{BaseURL: "http://127.0.0.1:1234", Name: "m", ToolProtocol: catalog.ToolProtocolAuto, Seed: ptr(int64(3)), Stream: ptr(false)}
	if !reflect.DeepEqual(tmpl.Model, want) {
		t.Fatalf("template model\n got %+v\nwant %+v", tmpl.Model, want)
	}
}
