package agents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// The tests of Sandbox II's agent side: the edit action, the shell state
// passed from result to request, and answers submitted as files. The
// sandbox is the harness's double on the bus (h.tools): it answers edit
// requests and the reads of answer files as sandboxd would.

func editAction(args string) string { return `{"tool":"edit","args":` + args + `}` }

func submitFile(path string) string {
	return fmt.Sprintf(`{"tool":"submit","args":{"answer_file":%q}}`, path)
}

// fakeEdit answers an edit request as sandboxd does: the agent-facing
// text on stdout, a refusal as exit 1 with the reason on stderr.
func fakeEdit(req catalog.ToolRequested) catalog.ToolFinished {
	e := req.Edit
	if e == nil {
		return catalog.ToolFinished{ExitCode: -1, Error: "edit request without edit args"}
	}
	if e.Op == catalog.EditStrReplace && strings.Contains(e.OldStr, "missing") {
		msg := "old_str was not found in " + e.Path + "; nothing changed.\n"
		return catalog.ToolFinished{ExitCode: 1, DurationMS: 1, Stderr: stdout(msg),
			Edit: &catalog.EditResult{Op: e.Op, Path: e.Path}}
	}
	text := fmt.Sprintf("The file %s has been edited (%s).\n     1\tx = 2\n", e.Path, e.Op)
	return catalog.ToolFinished{ExitCode: 0, DurationMS: 1, Stdout: stdout(text),
		Edit: &catalog.EditResult{Op: e.Op, Path: e.Path, Changed: e.Op != catalog.EditView, Diff: "-x = 1\n+x = 2\n"}}
}

// TestEditActionAndShellState: a text run that defines a shell function,
// edits a file (one edit refused), and runs shell commands. The edit
// requests carry the operation, a one-line command, and the cwd, env and
// shell state of the results before them; each result is evidence typed
// in the move ledger; a refused edit is an observation; the shell state of
// the last result that reported one goes into the next request.
func TestEditActionAndShellState(t *testing.T) {
	replace := editAction(`{"op":"str_replace","path":"/work/a.py","old_str":"x = 1","new_str":"x = 2"}`)
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: reply(shell("cd /work/sub && f() { echo hi; }"), "continuing"),
		2: reply(replace, "continuing"),
		3: reply(notes("edited a.py (ev_0002)"), "continuing"),
		4: reply(editAction(`{"op":"str_replace","path":"/work/a.py","old_str":"missing","new_str":"y"}`), "continuing"),
		5: reply(shell("f && shopt -s extglob"), "continuing"),
		6: reply(notes("f works (ev_0004)"), "continuing"),
		7: reply(shell("f"), "continuing"),
		8: reply(submitAns("done"), "RESOLVED"),
	})))
	const state1, state5 = "f () { echo hi; }", "f () { echo hi; }\nshopt -s extglob"
	h.tools(func(req catalog.ToolRequested) catalog.ToolFinished {
		if req.Tool == catalog.ToolEdit {
			return fakeEdit(req)
		}
		f := echoTools(req)
		switch req.Step {
		case 1:
			f.CwdAfter, f.ShellStateAfter = "/work/sub", state1
		case 5:
			f.ShellStateAfter = state5
		}
		return f
	})
	h.start(h.newAgent("a1"))
	h.submit("run-edit", catalog.RunConfig{})
	fin := h.waitFinished("run-edit")
	if fin.Outcome != catalog.OutcomeResolved || fin.Steps != 8 {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-edit")
	assertOnce(t, ds)

	reqs := map[string]*catalog.ToolRequested{}
	for _, r := range ofType[*catalog.ToolRequested](ds) {
		reqs[r.RequestID] = r
	}
	if len(reqs) != 5 {
		t.Fatalf("%d requests, want 5: %v", len(reqs), reqs)
	}
	edit := reqs["req-s0002"]
	if edit == nil || edit.Tool != catalog.ToolEdit || edit.Command != "edit str_replace /work/a.py" || edit.Step != 2 ||
		edit.Edit == nil || !reflect.DeepEqual(*edit.Edit, catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/a.py", OldStr: "x = 1", NewStr: "x = 2"}) {
		t.Fatalf("edit request = %+v", edit)
	}
	for id, want := range map[string]string{"req-s0001": "", "req-s0002": state1, "req-s0004": state1, "req-s0005": state1, "req-s0007": state5} {
		r := reqs[id]
		if r == nil || r.ShellState != want {
			t.Errorf("%s: shell_state %q, want %q", id, r.ShellState, want)
		}
		if id != "req-s0001" && r.Cwd != "/work/sub" {
			t.Errorf("%s: cwd %q, want /work/sub", id, r.Cwd)
		}
	}
	if reqs["req-s0001"].Tool != catalog.ToolShell || reqs["req-s0004"].Tool != catalog.ToolEdit {
		t.Errorf("tools: %s, %s", reqs["req-s0001"].Tool, reqs["req-s0004"].Tool)
	}

	steps := ofType[*catalog.AgentStep](ds)
	if st := steps[1]; st.ActionTool != catalog.ActionEdit || st.RequestID != "req-s0002" || st.Edit == nil || st.Command != "edit str_replace /work/a.py" {
		t.Errorf("step 2 = %+v", st)
	}
	evs := map[string]*catalog.EvidenceRecorded{}
	for _, e := range ofType[*catalog.EvidenceRecorded](ds) {
		evs[e.RequestID] = e
	}
	if e := evs["req-s0002"]; e == nil || e.EvidenceID != "ev_0002" || e.ExitCode != 0 || !strings.HasPrefix(e.Excerpt, "The file /work/a.py has been edited") || e.Command != "edit str_replace /work/a.py" {
		t.Errorf("edit evidence = %+v", e)
	}
	if e := evs["req-s0004"]; e == nil || e.ExitCode != 1 || !strings.Contains(e.Excerpt, "old_str was not found") {
		t.Errorf("refused edit evidence = %+v", e)
	}
	moves := map[string]*catalog.LedgerMove{}
	for _, m := range ofType[*catalog.LedgerMove](ds) {
		moves[m.RequestID] = m
	}
	if m := moves["req-s0002"]; m == nil || m.MoveType != catalog.MoveWrite || m.Outcome != catalog.LedgerSuccess || m.EvidenceID != "ev_0002" {
		t.Errorf("edit move = %+v", m)
	}
	if m := moves["req-s0004"]; m == nil || m.MoveType != catalog.MoveWrite || m.Outcome != catalog.LedgerFailure {
		t.Errorf("refused edit move = %+v", m)
	}

	// The refused edit is an observation of the next prompt.
	got := h.model.Requests()
	if len(got) != 8 {
		t.Fatalf("%d model calls, want 8", len(got))
	}
	p5 := got[4].LastUserMessage()
	if !strings.Contains(p5, "evidence: ev_0003\nexit_code: 1") || !strings.Contains(p5, "old_str was not found in /work/a.py") {
		t.Errorf("step 5 prompt lacks the refused edit:\n%s", p5)
	}
	if p3 := got[2].LastUserMessage(); !strings.Contains(p3, "The file /work/a.py has been edited") {
		t.Errorf("step 3 prompt lacks the edit's result:\n%s", p3)
	}
	h.model.AssertNoMisses(t)
}

// TestEditHeldByNotesGate: an edit is a tool call, so the notes gate
// holds it like a shell command: no request, a denied write move.
func TestEditHeldByNotesGate(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: reply(shell("ls"), "continuing"),
		2: reply(shell("cat a"), "continuing"),
		3: reply(editAction(`{"op":"create","path":"/work/b.txt","file_text":"b\n"}`), "continuing"),
		4: reply(submitAns("b"), "RESOLVED"),
	})))
	h.tools(func(req catalog.ToolRequested) catalog.ToolFinished {
		if req.Tool == catalog.ToolEdit {
			return fakeEdit(req)
		}
		return echoTools(req)
	})
	h.start(h.newAgent("a1"))
	h.submit("run-edit-gate", catalog.RunConfig{})
	if fin := h.waitFinished("run-edit-gate"); fin.Outcome != catalog.OutcomeResolved {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-edit-gate")
	assertOnce(t, ds)
	if n := len(ofType[*catalog.ToolRequested](ds)); n != 2 {
		t.Errorf("%d requests, want 2: the edit of step 3 is held", n)
	}
	var held *catalog.LedgerMove
	for _, m := range ofType[*catalog.LedgerMove](ds) {
		if m.Step == 3 {
			held = m
		}
	}
	if held == nil || held.Outcome != catalog.LedgerDenied || held.MoveType != catalog.MoveWrite || held.Command != "edit create /work/b.txt" {
		t.Errorf("move of step 3 = %+v", held)
	}
}

// answerFiles is a sandbox double that answers shell reads of answer
// files from files (a missing one fails as cat does), edits with
// fakeEdit, and anything else with echoTools. Contents bigger than 4 KiB
// are stored as blobs, as sandboxd stores a stream bigger than its
// inline cap.
func (h *harness) answerFiles(files map[string]string) func(catalog.ToolRequested) catalog.ToolFinished {
	return func(req catalog.ToolRequested) catalog.ToolFinished {
		if req.Tool == catalog.ToolEdit {
			return fakeEdit(req)
		}
		if !strings.HasPrefix(req.Command, "cat -- '") {
			return echoTools(req)
		}
		path := strings.TrimSuffix(strings.TrimPrefix(req.Command, "cat -- '"), "'")
		path = strings.ReplaceAll(path, `'\''`, "'")
		content, ok := files[path]
		if !ok {
			return catalog.ToolFinished{ExitCode: 1, DurationMS: 1, Stderr: stdout("cat: " + path + ": No such file or directory\n")}
		}
		const inline = 4 << 10
		if len(content) <= inline {
			return catalog.ToolFinished{ExitCode: 0, DurationMS: 1, Stdout: stdout(content)}
		}
		ref, err := h.bus.PutBlob(context.Background(), []byte(content), "text/plain; charset=utf-8")
		if err != nil {
			return catalog.ToolFinished{ExitCode: -1, Error: err.Error()}
		}
		return catalog.ToolFinished{ExitCode: 0, DurationMS: 1, Stdout: catalog.Output{
			Head: content[:inline/2], Tail: content[len(content)-inline/2:], Bytes: int64(len(content)), Truncated: true, Blob: &ref}}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestAnswerFile: a submit that names a file under /work/output/ reads it
// through the sandbox first (request req-sNNNN-answer, recorded as
// evidence), and the step, the audit request and the end of the run carry
// the file, its content (a blob when large) and its digest.
func TestAnswerFile(t *testing.T) {
	small := "# Answer\n\nPython 3.13.0 was released on 2024-10-07 (ev_0001).\n"
	// Larger than the bus's biggest message (8 MiB): it can only travel
	// as a blob.
	large := "# Report\n" + strings.Repeat("A line of the long report, with its evidence (ev_0001).\n", 160000)
	for _, tc := range []struct {
		name    string
		content string
		audited bool
	}{
		{"small", small, false},
		{"large-audited", large, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const file = "/work/output/it's the answer.md"
			h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
				1: reply(shell("curl -s https://www.python.org/"), "continuing"),
				2: "THOUGHT: done\n" + submitFile(file) + "\nEVIDENCE_USED: ev_0001\nSTATUS_UPDATE: RESOLVED\n",
			})))
			h.tools(h.answerFiles(map[string]string{file: tc.content}))
			if tc.audited {
				h.auditor(3, func(int) (int, catalog.AuditJudged) { return 4, catalog.AuditJudged{BestRound: 1, BestScore: 4} })
			}
			h.start(h.newAgent("a1"))
			run := "run-answer-" + tc.name
			h.submit(run, catalog.RunConfig{Auditor: catalog.AuditorConfig{Enabled: tc.audited}})
			fin := h.waitFinished(run)
			ds := h.events(run)
			assertOnce(t, ds)
			sum := sha256Hex(tc.content)
			if fin.Outcome != catalog.OutcomeResolved || fin.Steps != 2 || fin.AnswerFile != file || fin.AnswerSHA256 != sum {
				t.Fatalf("finished = %+v", fin)
			}
			if got := h.answerOf(fin.Answer, fin.AnswerBlob); got != tc.content {
				t.Errorf("the run's answer is %d bytes, want the file's %d", len(got), len(tc.content))
			}
			var read *catalog.ToolRequested
			for _, r := range ofType[*catalog.ToolRequested](ds) {
				if r.RequestID == "req-s0002-answer" {
					read = r
				}
			}
			if read == nil || read.Tool != catalog.ToolShell || read.Command != `cat -- '/work/output/it'\''s the answer.md'` || read.Step != 2 || read.ShellState != "" {
				t.Fatalf("answer read = %+v", read)
			}
			st := ofType[*catalog.AgentStep](ds)[1]
			if st.ActionTool != catalog.ActionSubmit || st.AnswerFile != file || st.AnswerSHA256 != sum || st.RequestID != "req-s0002-answer" {
				t.Errorf("step 2 = %+v", st)
			}
			if got := h.answerOf(st.Answer, st.AnswerBlob); got != tc.content {
				t.Errorf("step 2 records %d bytes of answer, want %d", len(got), len(tc.content))
			}
			if (st.AnswerBlob != nil) != (len(tc.content) > answerInlineMax) {
				t.Errorf("step 2 answer blob %v for %d bytes", st.AnswerBlob, len(tc.content))
			}
			var ev *catalog.EvidenceRecorded
			for _, e := range ofType[*catalog.EvidenceRecorded](ds) {
				if e.RequestID == "req-s0002-answer" {
					ev = e
				}
			}
			if ev == nil || ev.EvidenceID != "ev_0002" || ev.Command != read.Command || !strings.HasPrefix(ev.Excerpt, "# ") {
				t.Errorf("answer evidence = %+v", ev)
			}
			if tc.audited {
				ars := ofType[*catalog.AuditRequested](ds)
				if len(ars) != 1 || ars[0].AnswerFile != file || ars[0].AnswerSHA256 != sum || h.answerOf(ars[0].Answer, ars[0].AnswerBlob) != tc.content {
					t.Errorf("audit requests = %+v", ars)
				}
			}
			h.model.AssertNoMisses(t)
		})
	}
}

// answerOf returns an answer given inline or as a blob.
func (h *harness) answerOf(inline string, blob *catalog.BlobRef) string {
	h.t.Helper()
	if blob == nil {
		return inline
	}
	data, err := h.bus.GetBlob(context.Background(), blob.Digest)
	if err != nil {
		h.t.Fatalf("answer blob: %v", err)
	}
	return string(data)
}

// TestAnswerFileMissingIsAnObservation: a submit of a file that does not
// exist submits nothing (no audit); the model sees the failed read and
// goes on.
func TestAnswerFileMissingIsAnObservation(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: reply(shell("ls"), "continuing"),
		2: reply(submitFile("/work/output/answer.md"), "RESOLVED"),
		3: reply(submitFile("/work/output/empty.md"), "RESOLVED"),
		4: reply(submitAns("inline after all"), "RESOLVED"),
	})))
	h.tools(h.answerFiles(map[string]string{"/work/output/empty.md": " \n"}))
	h.auditor(3, func(int) (int, catalog.AuditJudged) { return 4, catalog.AuditJudged{BestRound: 1, BestScore: 4} })
	h.start(h.newAgent("a1"))
	h.submit("run-missing", catalog.RunConfig{Auditor: catalog.AuditorConfig{Enabled: true}})
	fin := h.waitFinished("run-missing")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "inline after all" || fin.Steps != 4 || fin.AnswerFile != "" {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-missing")
	assertOnce(t, ds)
	ars := ofType[*catalog.AuditRequested](ds)
	if len(ars) != 1 || ars[0].CandidateStep != 4 {
		t.Fatalf("audit requests = %+v: the failed submits must not be audited", ars)
	}
	steps := ofType[*catalog.AgentStep](ds)
	for _, st := range steps[1:3] {
		if st.AnswerFile == "" || st.AnswerSHA256 != "" || st.Answer != "" || st.RequestID == "" {
			t.Errorf("step %d = %+v", st.Step, st)
		}
	}
	got := h.model.Requests()
	if len(got) != 4 {
		t.Fatalf("%d model calls, want 4", len(got))
	}
	if p := got[2].LastUserMessage(); !strings.Contains(p, "answer NOT submitted: reading /work/output/answer.md failed (exit code 1)") || !strings.Contains(p, "No such file or directory") {
		t.Errorf("step 3 prompt lacks the failed read:\n%s", p)
	}
	if p := got[3].LastUserMessage(); !strings.Contains(p, "answer NOT submitted: /work/output/empty.md is empty") {
		t.Errorf("step 4 prompt lacks the empty file:\n%s", p)
	}
}

// TestAnswerFileOutsideOutputIsAFormatError: nothing is read.
func TestAnswerFileOutsideOutputIsAFormatError(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: reply(submitFile("/work/answer.md"), "RESOLVED"),
		2: reply(submitAns("42"), "RESOLVED"),
	})))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-outside", catalog.RunConfig{})
	fin := h.waitFinished("run-outside")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "42" {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-outside")
	if n := len(ofType[*catalog.ToolRequested](ds)); n != 0 {
		t.Errorf("%d tool requests", n)
	}
	if st := ofType[*catalog.AgentStep](ds)[0]; !strings.HasPrefix(st.FormatError, "bad_answer_file:") || st.RequestID != "" {
		t.Errorf("step 1 = %+v", st)
	}
	if p := h.model.Requests()[1].LastUserMessage(); !strings.Contains(p, "[bad_answer_file]") {
		t.Errorf("step 2 prompt lacks the format error:\n%s", p)
	}
}

// TestAnswerFileReadSurvivesARestart: the worker that published the read
// stops before its result; another worker takes the result and records
// the step from the recorded reply, without calling the model again.
func TestAnswerFileReadSurvivesARestart(t *testing.T) {
	const file, content = "/work/output/answer.md", "the answer is 42 (ev_0001)\n"
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: reply(shell("ls"), "continuing"),
		2: reply(submitFile(file), "RESOLVED"),
	})))
	release := make(chan struct{})
	answer := h.answerFiles(map[string]string{file: content})
	h.tools(func(req catalog.ToolRequested) catalog.ToolFinished {
		if IsAnswerRead(req.RequestID) {
			<-release
		}
		return answer(req)
	})
	stopA := h.start(h.newAgent("a1"))
	h.submit("run-restart", catalog.RunConfig{})
	deadline := time.Now().Add(30 * time.Second)
	for !h.hasRequest("run-restart", "req-s0002-answer") {
		if time.Now().After(deadline) {
			t.Fatal("the answer file was never read")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopA()
	if n := len(ofType[*catalog.AgentStep](h.events("run-restart"))); n != 1 {
		t.Fatalf("%d steps before the read's result, want 1", n)
	}
	close(release)
	h.start(h.newAgent("a2"))
	fin := h.waitFinished("run-restart")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != content || fin.AnswerSHA256 != sha256Hex(content) || fin.AnswerFile != file {
		t.Fatalf("finished = %+v", fin)
	}
	if n := h.model.Count(); n != 2 {
		t.Errorf("%d model calls, want 2: the recorded reply of step 2 is reused", n)
	}
	assertOnce(t, h.events("run-restart"))
}

func (h *harness) hasRequest(runID, requestID string) bool {
	for _, r := range ofType[*catalog.ToolRequested](h.events(runID)) {
		if r.RequestID == requestID {
			return true
		}
	}
	return false
}

// TestNativeEditAndAnswerFile: the native protocol's edit and submit
// answer_file calls make the same requests and answers as the text ones.
func TestNativeEditAndAnswerFile(t *testing.T) {
	const file, content = "/work/output/answer.md", "# 42\n"
	editArgs, _ := json.Marshal(map[string]any{"thought": "write the answer", "op": "create", "path": file, "file_text": content,
		"evidence_used": []string{}, "status_update": "continuing"})
	submitArgs, _ := json.Marshal(map[string]any{"thought": "done", "answer_file": file, "evidence_used": []string{"ev_0001"}, "status_update": "RESOLVED"})
	h := newHarness(t, scriptedmodel.WithRules(byStepReply(map[int]scriptedmodel.Reply{
		1: toolCall("edit", string(editArgs)),
		2: toolCall("submit", string(submitArgs)),
	})))
	h.tools(h.answerFiles(map[string]string{file: content}))
	h.start(h.newAgent("a1"))
	h.submit("run-native-edit", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: catalog.ToolProtocolNative}})
	fin := h.waitFinished("run-native-edit")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != content || fin.AnswerFile != file || fin.AnswerSHA256 != sha256Hex(content) {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("run-native-edit")
	assertOnce(t, ds)
	reqs := ofType[*catalog.ToolRequested](ds)
	if len(reqs) != 2 || reqs[0].Tool != catalog.ToolEdit || reqs[0].Edit == nil || reqs[0].Edit.FileText != content ||
		reqs[0].Command != "edit create "+file || reqs[1].RequestID != "req-s0002-answer" {
		t.Fatalf("requests = %+v", reqs)
	}
	if evs := ofType[*catalog.EvidenceRecorded](ds); len(evs) != 2 || !strings.Contains(evs[0].Excerpt, "has been edited") {
		t.Errorf("evidence = %+v", evs)
	}
	if p := h.model.Requests()[1].LastUserMessage(); !strings.Contains(p, "has been edited (create)") {
		t.Errorf("step 2 prompt lacks the edit's result:\n%s", p)
	}
}

// TestShellEnvKeepsTheLastReportedState: the shell state of the next
// request is the last one reported; results without one (edits, exec
// mode) keep it, and the read of an answer file (a fresh shell of its
// own) does not count.
func TestShellEnvKeepsTheLastReportedState(t *testing.T) {
	v := &runView{results: map[string]finishedRec{}}
	add := func(id string, f catalog.ToolFinished) {
		v.order = append(v.order, id)
		v.results[id] = finishedRec{data: f, ordinal: len(v.order)}
	}
	if cwd, env, st := v.shellEnv(); cwd != "" || env != nil || st != "" {
		t.Fatalf("empty run: %q %v %q", cwd, env, st)
	}
	add("req-s0001", catalog.ToolFinished{CwdAfter: "/work/a", ShellStateAfter: "s1", Exports: map[string]string{"A": "1"}})
	add("req-s0002", catalog.ToolFinished{}) // an edit
	add("req-s0003-answer", catalog.ToolFinished{CwdAfter: "/work", ShellStateAfter: "fresh"})
	cwd, env, st := v.shellEnv()
	if cwd != "/work/a" || env["A"] != "1" || st != "s1" {
		t.Fatalf("got %q %v %q", cwd, env, st)
	}
	add("req-s0004", catalog.ToolFinished{ShellStateAfter: "s4"})
	if _, _, st := v.shellEnv(); st != "s4" {
		t.Fatalf("state %q, want s4", st)
	}
}
