package ledger

import (
	"fmt"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// sim plays the agent's side of a run against the package: it folds the
// events an agent would see and publish, and decides every step.
type sim struct {
	t         *testing.T
	st        *State
	events    []catalog.Payload
	decisions map[int][]catalog.PolicyTriggered
	fired     map[string]int
	evidence  int
}

func newSim(t *testing.T, p Policy, task string, cfg catalog.PolicyConfig) *sim {
	t.Helper()
	m := &sim{t: t, st: NewState(p), decisions: map[int][]catalog.PolicyTriggered{}, fired: map[string]int{}}
	m.apply(catalog.RunStarted{AgentID: "agent-1", Config: catalog.RunConfig{Task: task, WorkDir: "/tmp/w", Policy: cfg}})
	return m
}

func (m *sim) apply(evs ...catalog.Payload) {
	for _, e := range evs {
		m.st.Apply(e)
		m.events = append(m.events, e)
	}
}

// action is what the model replies at one step, and what its tool returns.
type action struct {
	tool      catalog.ActionTool
	cmd       string
	edit      *catalog.EditArgs
	answer    string
	notes     string
	status    string
	formatErr string
	finish    string // finish_reason; default stop
	exit      int
	out       string // stdout of the tool
	excerpt   string // evidence excerpt; default out
}

func shell(cmd, out string) action {
	return action{tool: catalog.ActionShell, cmd: cmd, out: out, status: "UNRESOLVED(working)"}
}

func failing(cmd string, exit int, stderr string) action {
	a := shell(cmd, "")
	a.exit = exit
	a.excerpt = stderr
	return a
}

func fileEdit(op catalog.EditOp, path string) action {
	e := &catalog.EditArgs{Op: op, Path: path, FileText: "x\n"}
	return action{tool: catalog.ActionEdit, cmd: "edit " + string(op) + " " + path, edit: e, out: "done", status: "UNRESOLVED(working)"}
}

func notes(text string) action {
	return action{tool: catalog.ActionNotesAppend, notes: text, status: "UNRESOLVED(working)"}
}

func submit(answer string) action {
	return action{tool: catalog.ActionSubmit, answer: answer, status: "RESOLVED"}
}

func thinking(status string) action {
	return action{status: status, tool: catalog.ActionNotesAppend, notes: "thinking"}
}

// turn plays one step and returns its policy events.
func (m *sim) turn(a action) []catalog.PolicyTriggered {
	n := m.st.LastStep() + 1
	finish := a.finish
	if finish == "" {
		finish = "stop"
	}
	m.apply(catalog.ModelResponded{CallID: fmt.Sprintf("call-agent-s%04d", n), Scope: catalog.ScopeAgent, Step: n,
		Model: "m", Attempt: 1, FinishReason: finish})
	step := catalog.AgentStep{Step: n, ModelCallID: fmt.Sprintf("call-agent-s%04d", n), FormatError: a.formatErr,
		StatusUpdate: a.status}
	if a.formatErr == "" {
		step.ActionTool, step.Command, step.Answer, step.NotesText, step.Edit = a.tool, a.cmd, a.answer, a.notes, a.edit
	}
	ts := Decide(*m.st, ProposedFrom(step))
	m.decisions[n] = ts
	eff := Summarize(ts)
	run := a.formatErr == "" && (a.tool == catalog.ActionShell || a.tool == catalog.ActionEdit) && !eff.Block
	req := fmt.Sprintf("req-s%04d", n)
	if run {
		step.RequestID = req
	}
	m.apply(step)
	for _, t := range ts {
		m.fired[t.Rule]++
		m.apply(t)
	}
	if a.formatErr == "" && a.tool == catalog.ActionNotesAppend && !eff.Block {
		m.apply(catalog.NotesAppended{Step: n, Author: catalog.AuthorAgent, Text: a.notes})
	}
	if run {
		tool := catalog.ToolShell
		if a.edit != nil {
			tool = catalog.ToolEdit
		}
		m.apply(catalog.ToolRequested{RequestID: req, Requester: catalog.RequesterAgent, Tool: tool,
			Command: a.cmd, Edit: a.edit, TimeoutMS: 1000, Step: n})
		m.apply(catalog.ToolFinished{RequestID: req, Requester: catalog.RequesterAgent, ExitCode: a.exit,
			Stdout: catalog.Output{Head: a.out, Bytes: int64(len(a.out))}, Stderr: catalog.Output{Head: a.excerpt}})
		m.evidence++
		ex := a.excerpt
		if ex == "" {
			ex = a.out
		}
		m.apply(catalog.EvidenceRecorded{EvidenceID: fmt.Sprintf("ev_%04d", m.evidence), RequestID: req, Step: n,
			Command: a.cmd, ExitCode: a.exit, Excerpt: ex})
	}
	return ts
}

// rules returns the rules of a step's events.
func rules(ts []catalog.PolicyTriggered) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Rule)
	}
	return out
}

// find returns the event of a rule.
func find(ts []catalog.PolicyTriggered, rule string) (catalog.PolicyTriggered, bool) {
	for _, t := range ts {
		if t.Rule == rule {
			return t, true
		}
	}
	return catalog.PolicyTriggered{}, false
}

// expectRule checks that rule fires (or not) in ts.
func (m *sim) expectRule(ts []catalog.PolicyTriggered, rule string, want bool) catalog.PolicyTriggered {
	m.t.Helper()
	got, ok := find(ts, rule)
	if ok != want {
		m.t.Fatalf("step %d: %s fired = %v, want %v (events %q)", m.st.LastStep(), rule, ok, want, rules(ts))
	}
	return got
}
