package replay

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// TestReexecuteNativeToolRun records runs whose model replies are streamed
// native tool calls with reasoning (tool_protocol native, and auto
// deciding native), the model I/O in blobs, and re-executes their
// exports: the agent reads the recorded tool calls (arguments in a blob
// included) exactly as the live agent did, and nothing diverges.
func TestReexecuteNativeToolRun(t *testing.T) {
	for _, proto := range []catalog.ToolProtocol{catalog.ToolProtocolNative, catalog.ToolProtocolAuto} {
		t.Run(string(proto), func(t *testing.T) {
			runID := "rec-native-" + string(proto)
			srv, b := bustest.New(t)
			calls := []struct{ tool, arg, val string }{
				{"notes_append", "text", "- plan: answer from what is known"},
				{"notes_append", "text", "- the answer is 42; " + strings.Repeat("source: the task text. ", 20)}, // arguments over the blob threshold
				{"submit", "answer", "42"},
			}
			model := scriptedmodel.Start(t, scriptedmodel.WithRules(scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
				n := promptStep(req)
				if n < 1 || n > len(calls) {
					return scriptedmodel.Reply{}, false
				}
				c := calls[n-1]
				args, _ := json.Marshal(map[string]any{"thought": "step " + c.tool, c.arg: c.val, "evidence_used": []string{}, "status_update": "continuing"})
				return scriptedmodel.Reply{NullContent: true, Reasoning: strings.Repeat("I weigh what I know. ", 20),
					ToolCalls: []scriptedmodel.ToolCall{{Name: c.tool, Arguments: string(args)}}}, true
			})))
			startAgent(t, srv.ClientURL(), 256)
			submitTask(t, b, runID, catalog.RunConfig{Task: "What is the answer?", WorkDir: filepath.Join(t.TempDir(), "w"),
				Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted", ToolProtocol: proto}, MaxSteps: 10})
			if fin := waitFinished(t, b, runID, time.Minute); fin.Outcome != catalog.OutcomeResolved || fin.Answer != "42" {
				t.Fatalf("recording finished %+v", fin)
			}
			for _, r := range model.Requests() {
				if !r.Stream || len(r.Tools) != 4 { // shell, edit, notes_append, submit
					t.Fatalf("the recording's call was not a streamed native call: stream %v tools %v", r.Stream, r.Tools)
				}
			}
			path := exportRun(t, b, runID)
			res := reexecuteFile(t, path, runID, ReexecuteOptions{StopOnDivergence: true})
			if res.Diverged() || res.Stopped != "" || len(res.Incomplete) > 0 {
				t.Fatalf("divergences %+v, stopped %q, incomplete %v", res.Divergences, res.Stopped, res.Incomplete)
			}
			if res.Steps != 3 || res.Served != 3 || res.End == nil || res.End.Outcome != catalog.OutcomeResolved || res.End.Answer != "42" {
				t.Errorf("result = %+v", res)
			}
		})
	}
}

// TestReexecuteRecordingFromBeforeToolProtocols: a text run recorded
// before runs had a tool_protocol setting (none in its task, no agent call
// offering tools) is re-executed with the text protocol, not with auto
// (today's default, whose prompt differs): nothing diverges.
func TestReexecuteRecordingFromBeforeToolProtocols(t *testing.T) {
	const runID = "rec-old-text"
	srv, b := bustest.New(t)
	model := scriptedAgentModel(t, notesOnlyReplies())
	startAgent(t, srv.ClientURL(), 0)
	submitTask(t, b, runID, catalog.RunConfig{Task: "What is the answer?", WorkDir: filepath.Join(t.TempDir(), "w"),
		Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted", ToolProtocol: catalog.ToolProtocolText}, MaxSteps: 10})
	if fin := waitFinished(t, b, runID, time.Minute); fin.Outcome != catalog.OutcomeResolved {
		t.Fatalf("recording finished %+v", fin)
	}
	old := tamper(t, exportRun(t, b, runID), func(ev *bus.Event, d map[string]any) (bool, bool) {
		var m map[string]any
		switch ev.Type {
		case catalog.TypeTaskSubmitted:
			m, _ = d["model"].(map[string]any)
		case catalog.TypeRunStarted:
			cfg, _ := d["config"].(map[string]any)
			m, _ = cfg["model"].(map[string]any)
		}
		if m == nil {
			return true, false
		}
		delete(m, "tool_protocol")
		return true, true
	})
	res := reexecuteFile(t, old, runID, ReexecuteOptions{StopOnDivergence: true})
	if res.Diverged() || res.Stopped != "" || res.Steps != 3 || res.End == nil || res.End.Outcome != catalog.OutcomeResolved {
		t.Fatalf("divergences %+v, stopped %q, result %+v", res.Divergences, res.Stopped, res)
	}
}
