package projector

import (
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// TestRenderSessionsAndAnswerFile: session.log has a line per shell
// session started or restarted, with what it lost, and the answer file of
// run.finished; the other files are unchanged by them.
func TestRenderSessionsAndAnswerFile(t *testing.T) {
	s := &bustest.Synth{TB: t, RunID: "r2", T0: time.Date(2026, 11, 25, 18, 0, 0, 0, time.UTC)}
	s.Add("sandboxd", catalog.ToolSession{Container: "vera-r2", SessionID: "9d3e1f0a77c2", Action: "started", Reason: "first command"})
	s.Add("sandboxd", catalog.ToolSession{Container: "vera-r2", SessionID: "0badc0ffee11", Action: "restarted", Reason: "the keeper ended",
		Lost: []string{"the job table of background jobs", "the dirstack"}})
	s.Add("agent", catalog.RunFinished{Outcome: catalog.OutcomeResolved, Answer: "# Report", Steps: 4, AnswerFile: "/work/output/report.md",
		AnswerSHA256: "5f1c0e0d2a8f4d0a9d1c2b3a4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071"})
	out := Render(s.Evs)
	want := "2026-11-25T18:00:00.000000000Z tool.session action=started container=vera-r2 session=9d3e1f0a77c2 reason=\"first command\"\n" +
		"2026-11-25T18:00:00.001500000Z tool.session action=restarted container=vera-r2 session=0badc0ffee11 reason=\"the keeper ended\" lost=\"the job table of background jobs; the dirstack\"\n" +
		"2026-11-25T18:00:00.003000000Z run.finished outcome=RESOLVED steps=4 duration_ms=0 tokens=0 answer_file=/work/output/report.md answer_sha256=5f1c0e0d2a8f4d0a9d1c2b3a4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071\n"
	if got := string(out[FileSession]); got != want {
		t.Errorf("session.log:\n%s\nwant:\n%s", got, want)
	}
	if n := strings.Count(string(out[FileTrace]), "\n"); n != 3 {
		t.Errorf("trace.jsonl has %d lines, want 3", n)
	}
}

// TestMetricsSessionsAndEdits: vera_tool_sessions_total counts sessions by
// action; vera_tool_edits_total counts the results of edit requests (not
// of shell commands) by op and outcome, the op read from the request when
// the result carries none.
func TestMetricsSessionsAndEdits(t *testing.T) {
	s := &bustest.Synth{TB: t, RunID: "r3", T0: time.Date(2026, 11, 25, 18, 0, 0, 0, time.UTC)}
	s.Add("sandboxd", catalog.ToolSession{Container: "vera-r3", SessionID: "a1", Action: "started", Reason: "first command"})
	s.Add("sandboxd", catalog.ToolSession{Container: "vera-r3", SessionID: "a2", Action: "restarted", Reason: "daemon restart"})
	s.Add("sandboxd", catalog.ToolSession{Container: "vera-r3-auditor", SessionID: "a3", Action: "started", Reason: "first command"})
	edit := func(id string, op catalog.EditOp, fin catalog.ToolFinished) {
		s.Add("agent", catalog.ToolRequested{RequestID: id, Requester: "agent", Tool: catalog.ToolEdit, Command: "edit " + string(op) + " /work/a.py",
			Edit: &catalog.EditArgs{Op: op, Path: "/work/a.py"}, Step: 1})
		fin.RequestID, fin.Requester = id, "agent"
		s.Add("sandboxd", fin)
	}
	edit("req-s0001", catalog.EditCreate, catalog.ToolFinished{Edit: &catalog.EditResult{Op: catalog.EditCreate, Path: "/work/a.py", Changed: true, Diff: "+x\n"}})
	edit("req-s0002", catalog.EditStrReplace, catalog.ToolFinished{Edit: &catalog.EditResult{Op: catalog.EditStrReplace, Path: "/work/a.py", Changed: true}})
	edit("req-s0003", catalog.EditStrReplace, catalog.ToolFinished{ExitCode: 1, Stderr: catalog.Output{Head: "old_str not found", Bytes: 17}})
	edit("req-s0004", catalog.EditView, catalog.ToolFinished{Edit: &catalog.EditResult{Op: catalog.EditView, Path: "/work/a.py"}})
	edit("req-s0005", catalog.EditUndo, catalog.ToolFinished{ExitCode: -1, Denied: true, DenyRule: "notes_overwrite"})
	edit("req-s0006", catalog.EditInsert, catalog.ToolFinished{ExitCode: -1, Error: "container gone"})
	s.Add("agent", catalog.ToolRequested{RequestID: "req-s0007", Requester: "agent", Tool: catalog.ToolShell, Command: "ls", Step: 7})
	s.Add("sandboxd", catalog.ToolFinished{RequestID: "req-s0007", Requester: "agent", ExitCode: 2, Session: catalog.SessionPersistent})
	text := foldText(t, s.Evs)
	for _, want := range []string{
		`vera_tool_sessions_total{action="started"} 2` + "\n",
		`vera_tool_sessions_total{action="restarted"} 1` + "\n",
		`vera_tool_edits_total{op="create",outcome="changed"} 1` + "\n",
		`vera_tool_edits_total{op="str_replace",outcome="changed"} 1` + "\n",
		`vera_tool_edits_total{op="str_replace",outcome="refused"} 1` + "\n",
		`vera_tool_edits_total{op="view",outcome="unchanged"} 1` + "\n",
		`vera_tool_edits_total{op="undo",outcome="denied"} 1` + "\n",
		`vera_tool_edits_total{op="insert",outcome="failed"} 1` + "\n",
		`vera_tool_edits_total{op="view",outcome="changed"} 0` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("want %q", want)
		}
	}
	var total int
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "vera_tool_edits_total{") && !strings.HasSuffix(line, " 0") {
			total++
		}
	}
	if total != 6 {
		t.Errorf("%d edit series counted, want 6 (the shell command is not an edit):\n%s", total, text)
	}
	// Present at zero before any event.
	empty := foldText(t, nil)
	for _, want := range []string{`vera_tool_sessions_total{action="restarted"} 0`, `vera_tool_edits_total{op="undo",outcome="failed"} 0`} {
		if !strings.Contains(empty, want) {
			t.Errorf("fresh metrics lack %q", want)
		}
	}
}
