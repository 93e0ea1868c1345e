package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// TestRunViewShowsEditsSessionsAndAnswerFiles: vera run shows an edit step
// by its op and path, its result by the lines the diff adds and removes
// (or why it was refused), a shell session restarted with what it lost,
// and an answer submitted as a file by its path and digest.
func TestRunViewShowsEditsSessionsAndAnswerFiles(t *testing.T) {
	_, b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := "edit-view"
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := followRun(ctx, b, run, &out, &errOut, followOptions{}, nil)
		done <- err
	}()
	const sha = "5f1c0e0d2a8f4d0a9d1c2b3a4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071"
	repl := &catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/a.py", OldStr: "x = 1\n", NewStr: "x = 2\ny = 3\n"}
	publishExample(t, ctx, b, run, catalog.TypeRunStarted, func(*catalog.RunStarted) {})
	publishExample(t, ctx, b, run, catalog.TypeToolSession, func(s *catalog.ToolSession) {
		s.Container, s.Action, s.Reason, s.Lost = "vera-edit-view", "restarted", "the keeper ended", []string{"the job table", "the dirstack"}
	})
	publishExample(t, ctx, b, run, catalog.TypeAgentStep, func(s *catalog.AgentStep) {
		*s = catalog.AgentStep{Step: 1, Thought: "fix it", ActionTool: catalog.ActionEdit, Edit: repl, Command: "edit str_replace /work/a.py", RequestID: "req-s0001"}
	})
	publishExample(t, ctx, b, run, catalog.TypeToolRequested, func(r *catalog.ToolRequested) {
		*r = catalog.ToolRequested{RequestID: "req-s0001", Requester: catalog.RequesterAgent, Tool: catalog.ToolEdit, Command: "edit str_replace /work/a.py", Edit: repl, Step: 1}
	})
	publishExample(t, ctx, b, run, catalog.TypeToolFinished, func(f *catalog.ToolFinished) {
		*f = catalog.ToolFinished{RequestID: "req-s0001", Requester: catalog.RequesterAgent, Stdout: catalog.Output{Head: "edited", Bytes: 6},
			Edit: &catalog.EditResult{Op: catalog.EditStrReplace, Path: "/work/a.py", Changed: true,
				Diff: "--- /work/a.py\n+++ /work/a.py\n@@ -1 +1,2 @@\n-x = 1\n+x = 2\n+y = 3\n"}}
	})
	publishExample(t, ctx, b, run, catalog.TypeAgentStep, func(s *catalog.AgentStep) {
		*s = catalog.AgentStep{Step: 2, Thought: "again", ActionTool: catalog.ActionEdit, Edit: repl, Command: "edit str_replace /work/a.py", RequestID: "req-s0002"}
	})
	publishExample(t, ctx, b, run, catalog.TypeToolRequested, func(r *catalog.ToolRequested) {
		*r = catalog.ToolRequested{RequestID: "req-s0002", Requester: catalog.RequesterAgent, Tool: catalog.ToolEdit, Command: "edit str_replace /work/a.py", Edit: repl, Step: 2}
	})
	publishExample(t, ctx, b, run, catalog.TypeToolFinished, func(f *catalog.ToolFinished) {
		*f = catalog.ToolFinished{RequestID: "req-s0002", Requester: catalog.RequesterAgent, ExitCode: 1,
			Stderr: catalog.Output{Head: "old_str not found in /work/a.py", Bytes: 31}}
	})
	publishExample(t, ctx, b, run, catalog.TypeAgentStep, func(s *catalog.AgentStep) {
		*s = catalog.AgentStep{Step: 3, Thought: "done", ActionTool: catalog.ActionSubmit, Answer: "# Report\nx is 2", AnswerFile: "/work/output/report.md", AnswerSHA256: sha}
	})
	publishExample(t, ctx, b, run, catalog.TypeRunFinished, func(f *catalog.RunFinished) {
		*f = catalog.RunFinished{Outcome: catalog.OutcomeResolved, Steps: 3, Answer: "# Report\nx is 2", AnswerFile: "/work/output/report.md", AnswerSHA256: sha}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"  shell session restarted in vera-edit-view: the keeper ended; lost: the job table; the dirstack\n",
		"  edit str_replace /work/a.py\n",
		"  → str_replace /work/a.py: +2/-1 lines\n",
		"  → edit: refused: old_str not found in /work/a.py\n",
		"  submits the file /work/output/report.md (sha256 5f1c0e0d2a8f…): # Report x is 2\n",
		"answer (the file /work/output/report.md, sha256 5f1c0e0d2a8f…):\n# Report\nx is 2\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "bytes out") {
		t.Errorf("an edit's result is shown as a command's:\n%s", got)
	}
}

func TestEditLines(t *testing.T) {
	for _, c := range []struct {
		e       *catalog.EditArgs
		summary string
		want    string
	}{
		{&catalog.EditArgs{Op: catalog.EditView, Path: "/input/spec.txt", ViewRange: []int{10, -1}}, "", "edit view /input/spec.txt lines 10-end"},
		{&catalog.EditArgs{Op: catalog.EditInsert, Path: "/work/a.py", InsertLine: 0}, "", "edit insert /work/a.py after line 0"},
		{&catalog.EditArgs{Op: catalog.EditCreate, Path: "/work/output/r.md"}, "", "edit create /work/output/r.md"},
		{nil, "edit undo /work/a.py", "edit undo /work/a.py"},
		{nil, "", "edit (no operation)"},
	} {
		if got := editLine(c.e, c.summary); got != c.want {
			t.Errorf("editLine(%+v, %q) = %q, want %q", c.e, c.summary, got, c.want)
		}
	}
	for _, c := range []struct {
		f    catalog.ToolFinished
		want string
	}{
		{catalog.ToolFinished{Edit: &catalog.EditResult{Op: catalog.EditView, Path: "/work/a.py"}, Stdout: catalog.Output{Bytes: 120}}, "view /work/a.py: 120 bytes shown"},
		{catalog.ToolFinished{Edit: &catalog.EditResult{Op: catalog.EditCreate, Path: "/work/b", Changed: true, Diff: "+a\n+b\n", DiffTruncated: true}}, "create /work/b: +2/-0 lines (diff cut: counts are partial)"},
		{catalog.ToolFinished{Edit: &catalog.EditResult{Op: catalog.EditUndo, Path: "/work/b"}}, "undo /work/b: unchanged"},
		{catalog.ToolFinished{ExitCode: -1, Denied: true}, "edit: denied"},
		{catalog.ToolFinished{ExitCode: -1, Error: "container gone"}, "edit: sandbox error: container gone"},
	} {
		what := "exit"
		if c.f.Denied {
			what = "denied"
		}
		if got := editResultLine(&c.f, what); got != c.want {
			t.Errorf("editResultLine(%+v) = %q, want %q", c.f, got, c.want)
		}
	}
}
