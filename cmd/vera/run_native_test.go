package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// byStepCalls answers the prompt of step n with a native tool call, as a
// model trained on function calling does (no content), after its
// reasoning; a request that offers no tools gets an empty reply.
func byStepCalls(calls map[int]scriptedmodel.ToolCall) scriptedmodel.Rule {
	return scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		n := 0
		for _, m := range stepRE.FindAllStringSubmatch(req.LastUserMessage(), -1) {
			k, _ := strconv.Atoi(m[1])
			n = max(n, k)
		}
		c, ok := calls[n+1]
		if !ok || len(req.Tools) == 0 {
			return scriptedmodel.Reply{}, ok
		}
		return scriptedmodel.Reply{NullContent: true, Reasoning: "Step " + strconv.Itoa(n+1) + ": I reason before I act.", ToolCalls: []scriptedmodel.ToolCall{c}}, true
	})
}

func callArgs(t *testing.T, args map[string]any) string {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRunNativeToolsDoesTheWholeJob is TestRunDoesTheWholeJob with a model
// that only speaks native tool calls, streamed, with its reasoning in
// reasoning_content: `vera run --tool-protocol native` and the default
// (auto, which decides native from the first reply) both end RESOLVED in a
// real sandbox, and the record holds the reasoning and the tool calls.
func TestRunNativeToolsDoesTheWholeJob(t *testing.T) {
	dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(byStepCalls(map[int]scriptedmodel.ToolCall{
		1: {Name: "shell", Arguments: callArgs(t, map[string]any{"thought": "Write and read the answer.", "cmd": "echo 42 > /work/answer.txt && cat /work/answer.txt", "evidence_used": []string{}, "status_update": "continuing"})},
		2: {Name: "notes_append", Arguments: callArgs(t, map[string]any{"thought": "Pin it.", "text": "answer.txt holds 42 (ev_0001)", "evidence_used": []string{"ev_0001"}, "status_update": "continuing"})},
		3: {Name: "submit", Arguments: callArgs(t, map[string]any{"thought": "Done.", "answer": "42", "evidence_used": []string{"ev_0001"}, "status_update": "RESOLVED"})},
	})))
	for _, protocol := range []string{"native", ""} {
		name := protocol
		if name == "" {
			name = "auto"
		}
		t.Run(name, func(t *testing.T) {
			work := filepath.Join(t.TempDir(), "work")
			data := t.TempDir()
			var runID string
			t.Cleanup(func() {
				if runID != "" {
					removeContainers(t, runID)
				}
			})
			args := []string{"run", "--task", "What number is in answer.txt?", "--work-dir", work,
				"--model-base-url", model.URL(), "--model", "scripted", "--image", img, "--data-dir", data, "--no-network", "--json"}
			if protocol != "" {
				args = append(args, "--tool-protocol", protocol)
			}
			out, errOut, code := runCLI(t, args...)
			if m := regexp.MustCompile(`"runid":"([^"]+)"`).FindStringSubmatch(out); m != nil {
				runID = m[1]
			}
			if code != 0 {
				t.Fatalf("vera run exited %d\nstdout:\n%.4000s\nstderr:\n%s", code, out, errOut)
			}
			if b, err := os.ReadFile(filepath.Join(work, "work", "answer.txt")); err != nil || string(b) != "42\n" {
				t.Errorf("answer.txt = %q, %v", b, err)
			}
			trace, err := os.ReadFile(filepath.Join(work, "trace.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var steps, responded, protocols int
			for _, line := range strings.Split(strings.TrimSpace(string(trace)), "\n") {
				var rec struct {
					Type string          `json:"type"`
					Data json.RawMessage `json:"data"`
				}
				if json.Unmarshal([]byte(line), &rec) != nil {
					continue
				}
				switch rec.Type {
				case catalog.TypeAgentStep:
					var st catalog.AgentStep
					if json.Unmarshal(rec.Data, &st) == nil && st.Protocol == catalog.ToolProtocolNative && st.ToolCallID != "" && st.FormatError == "" {
						steps++
					}
				case catalog.TypeModelResponded:
					var r catalog.ModelResponded
					if json.Unmarshal(rec.Data, &r) == nil && r.Scope == catalog.ScopeAgent && len(r.ToolCalls) == 1 &&
						strings.HasPrefix(r.Reasoning, "Step ") && r.ReasoningSource == "reasoning_content" {
						responded++
					}
				case catalog.TypeAgentProtocol:
					protocols++
				}
			}
			wantProtocol := 0
			if protocol == "" {
				wantProtocol = 1 // auto records its decision once
			}
			if steps != 3 || responded != 3 || protocols != wantProtocol || !strings.Contains(string(trace), `"outcome":"RESOLVED"`) {
				t.Fatalf("trace: %d native steps, %d replies with reasoning and a tool call, %d protocol decisions (want 3, 3, %d):\n%.3000s",
					steps, responded, protocols, wantProtocol, trace)
			}
		})
	}
}
