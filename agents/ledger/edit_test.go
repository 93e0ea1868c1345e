package ledger

import (
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// TestEditMoves: an edit's ledger line is typed by its op (view reads,
// the others write), carries no domain and issues no query.
func TestEditMoves(t *testing.T) {
	m := newSim(t, quiet, plainTask, catalog.PolicyConfig{})
	m.turn(fileEdit(catalog.EditCreate, "/work/a.py"))
	m.turn(fileEdit(catalog.EditView, "/work/a.py"))
	m.turn(fileEdit(catalog.EditStrReplace, "/work/a.py"))
	for i, want := range []catalog.MoveType{catalog.MoveWrite, catalog.MoveRead, catalog.MoveWrite} {
		line, ok := m.st.MoveLine(m.reqOf(i + 1))
		if !ok || line.MoveType != want || line.Outcome != catalog.LedgerSuccess || len(line.Domains) != 0 || line.Command == "" {
			t.Errorf("move %d: %+v %v, want %s", i+1, line, ok, want)
		}
		if _, ok := m.st.QueryLine(m.reqOf(i + 1)); ok {
			t.Errorf("edit %d issued a query", i+1)
		}
	}
	if m.st.ToolCalls() != 3 {
		t.Errorf("%d tool calls, want 3", m.st.ToolCalls())
	}
	if got := BlockedEditMove(4, "edit undo /work/a.py", catalog.EditArgs{Op: catalog.EditUndo, Path: "/work/a.py"}); got.MoveType != catalog.MoveWrite || got.Outcome != catalog.LedgerDenied {
		t.Errorf("blocked edit move %+v", got)
	}
	if EditMove(catalog.EditArgs{Op: "chmod"}) != catalog.MoveOther {
		t.Error("an unknown op is not other")
	}
}

// TestEditGates: an edit is a tool call: the notes gate holds it, it ends
// the pre-tool nudge, and creating a final deliverable counts towards the
// finalization stop while fixing one does not.
func TestEditGates(t *testing.T) {
	p := quiet
	p.NotesInterval = 0 // default 3
	m := newSim(t, p, plainTask, catalog.PolicyConfig{})
	m.turn(fileEdit(catalog.EditCreate, "/work/a.py"))
	m.turn(fileEdit(catalog.EditView, "/work/a.py"))
	ev := m.expectRule(m.turn(fileEdit(catalog.EditStrReplace, "/work/a.py")), catalog.RuleNotesGate, true)
	if ev.Effect != catalog.EffectBlock || ev.BlockedCommand != "edit str_replace /work/a.py" {
		t.Fatalf("notes_gate: %+v", ev)
	}
	if m.st.ToolCalls() != 2 {
		t.Fatalf("the held edit ran: %d tool calls", m.st.ToolCalls())
	}

	n := quiet
	n.PreToolNudgeAfter = 0 // default 2
	pre := newSim(t, n, plainTask, catalog.PolicyConfig{})
	pre.turn(thinking("UNRESOLVED(planning)"))
	pre.expectRule(pre.turn(fileEdit(catalog.EditCreate, "/work/a.py")), catalog.RulePreToolNudge, false)

	f := newSim(t, quiet, plainTask, catalog.PolicyConfig{})
	f.expectRule(f.turn(fileEdit(catalog.EditCreate, "/work/output/answer.md")), catalog.RuleFinalizationStop, false)
	for range 3 {
		f.expectRule(f.turn(fileEdit(catalog.EditStrReplace, "/work/output/answer.md")), catalog.RuleFinalizationStop, false)
	}
	f.expectRule(f.turn(fileEdit(catalog.EditCreate, "/work/output/answer.md")), catalog.RuleFinalizationStop, false)
	ev = f.expectRule(f.turn(fileEdit(catalog.EditCreate, "/work/output/answer.md")), catalog.RuleFinalizationStop, true)
	if ev.Effect != catalog.EffectStop || ev.Details["path"] != "/work/output/answer.md" {
		t.Fatalf("finalization_stop: %+v", ev)
	}
}

// TestFailedAnswerFileSubmitKeepsTheFinalizationCount: a submit whose
// answer file could not be read submitted nothing.
func TestFailedAnswerFileSubmitKeepsTheFinalizationCount(t *testing.T) {
	s := NewState(quiet)
	s.Apply(catalog.RunStarted{Config: catalog.RunConfig{Task: plainTask}})
	create := catalog.EditArgs{Op: catalog.EditCreate, Path: "/work/output/answer.md"}
	s.Apply(catalog.AgentStep{Step: 1, ActionTool: catalog.ActionEdit, Edit: &create, Command: "edit create /work/output/answer.md", RequestID: "req-s0001"})
	s.Apply(catalog.AgentStep{Step: 2, ActionTool: catalog.ActionSubmit, AnswerFile: "/work/output/answer.md", RequestID: "req-s0002-answer"})
	if s.finalWrites != 1 {
		t.Fatalf("a failed file submit reset the count: %d", s.finalWrites)
	}
	s.Apply(catalog.AgentStep{Step: 3, ActionTool: catalog.ActionSubmit, AnswerFile: "/work/output/answer.md", AnswerSHA256: "ab", RequestID: "req-s0003-answer"})
	if s.finalWrites != 0 {
		t.Fatalf("a submitted file did not reset the count: %d", s.finalWrites)
	}
}
