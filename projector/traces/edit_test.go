package traces_test

import (
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector/traces"
)

// TestEditSpansAndSessions: an edit is an execute_tool edit span with its
// op, path and outcome (its arguments and diff with content on), a
// command's span says how it ran (persistent or exec), and a shell
// session is a span event on the run span, with what it lost.
func TestEditSpansAndSessions(t *testing.T) {
	s := &bustest.Synth{TB: t, RunID: "otel-edit", T0: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	s.Add("agent", catalog.RunStarted{AgentID: "a1", Config: catalog.RunConfig{Task: "t", WorkDir: "/tmp/w", Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}}})
	s.Add("sandboxd", catalog.ToolSession{Container: "vera-otel-edit", SessionID: "s2", Action: "restarted", Reason: "the keeper ended", Lost: []string{"the job table"}})
	edit := &catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/a.py", OldStr: "x = 1", NewStr: "x = 2"}
	s.Add("agent", catalog.ToolRequested{RequestID: "req-s0001", Requester: catalog.RequesterAgent, Tool: catalog.ToolEdit, Command: "edit str_replace /work/a.py", Edit: edit, Step: 1})
	s.Add("sandboxd", catalog.ToolFinished{RequestID: "req-s0001", Requester: catalog.RequesterAgent, Stdout: catalog.Output{Head: "edited", Bytes: 6},
		Edit: &catalog.EditResult{Op: catalog.EditStrReplace, Path: "/work/a.py", Changed: true, Diff: "-x = 1\n+x = 2\n"}})
	s.Add("agent", catalog.ToolRequested{RequestID: "req-s0002", Requester: catalog.RequesterAgent, Tool: catalog.ToolShell, Command: "python3 /work/a.py", Step: 2})
	s.Add("sandboxd", catalog.ToolFinished{RequestID: "req-s0002", Requester: catalog.RequesterAgent, Session: catalog.SessionExec})
	s.Add("agent", catalog.RunFinished{Outcome: catalog.OutcomeResolved, Answer: "2", Steps: 2})

	for _, content := range []bool{false, true} {
		spans := traces.Project(s.RunID, s.Evs, traces.Options{Content: content})
		ed := byName(spans, "execute_tool edit")
		if len(ed) != 1 {
			t.Fatalf("content %v: %d edit spans", content, len(ed))
		}
		for key, want := range map[string]string{"vera.edit.op": "str_replace", "vera.edit.path": "/work/a.py"} {
			if v, ok := attr(ed[0], key); !ok || v.AsString() != want {
				t.Errorf("edit span %s = %v, want %s", key, v.Emit(), want)
			}
		}
		if v, ok := attr(ed[0], "vera.edit.changed"); !ok || !v.AsBool() {
			t.Error("edit span: vera.edit.changed is not true")
		}
		diff, hasDiff := attr(ed[0], "vera.edit.diff")
		args, hasArgs := attr(ed[0], "gen_ai.tool.call.arguments")
		if hasDiff != content || hasArgs != content {
			t.Errorf("content %v: diff %v, arguments %v", content, hasDiff, hasArgs)
		}
		if content && (diff.AsString() != "-x = 1\n+x = 2\n" || !strings.Contains(args.AsString(), `"old_str":"x = 1"`)) {
			t.Errorf("diff %q, arguments %q", diff.AsString(), args.AsString())
		}
		sh := byName(spans, "execute_tool shell")
		if len(sh) != 1 {
			t.Fatalf("%d shell spans", len(sh))
		}
		if v, ok := attr(sh[0], "vera.tool.session"); !ok || v.AsString() != "exec" {
			t.Errorf("shell span vera.tool.session = %v", v.Emit())
		}
		root := byName(spans, "invoke_agent vera")[0]
		var found bool
		for _, e := range root.Events {
			if e.Name != catalog.TypeToolSession {
				continue
			}
			found = true
			var lost, action string
			for _, a := range e.Attrs {
				switch string(a.Key) {
				case "vera.lost":
					lost = a.Value.Emit()
				case "vera.action":
					action = a.Value.AsString()
				}
			}
			if action != "restarted" || !strings.Contains(lost, "the job table") {
				t.Errorf("session event attrs %v", e.Attrs)
			}
		}
		if !found {
			t.Error("no vera.tool.session event on the run span")
		}
	}
}
