package deepverify

import (
	"context"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// TestCheckCommandsShareShellState: within a check, each command starts
// from the cwd, exports and shell state the earlier ones left; a command
// that reports no shell state keeps the one before it.
func TestCheckCommandsShareShellState(t *testing.T) {
	h := newHarness(t, 1)
	h.standard(1, 4)
	const (
		first  = "cd /work/output && greet() { echo hi; }; export LANG=C"
		second = "greet"
		third  = "type greet"
		state  = "greet () \n{ \n    echo hi\n}\nshopt -s extglob\n"
	)
	h.sc.mu.Lock()
	h.sc.checks["r1-c1"] = []string{`{"command":"` + first + `"}`, `{"command":"` + second + `"}`, `{"command":"` + third + `"}`,
		`{"verdict":"yes","evidence":"greet printed hi","citations":["` + urlPy + `"]}`}
	h.sc.mu.Unlock()
	h.mu.Lock()
	h.outputs[first], h.outputs[second], h.outputs[third] = "", "hi\n", "greet is a function\n"
	h.shapes[first] = func(f *catalog.ToolFinished) {
		f.CwdAfter, f.Exports, f.ShellStateAfter, f.Session = "/work/output", map[string]string{"LANG": "C"}, state, catalog.SessionPersistent
	}
	h.shapes[second] = func(f *catalog.ToolFinished) { f.CwdAfter = "/work/output" } // no shell state reported
	h.mu.Unlock()
	h.runToolAnswerer()
	h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	evs := h.wait("feedback", feedbackFor(1))

	reqs := map[string]catalog.ToolRequested{}
	for _, r := range payloads[catalog.ToolRequested](evs) {
		reqs[r.RequestID] = r
	}
	if r := reqs[RequestID(1, 1, 1)]; r.ShellState != "" || r.Cwd != "" || r.Env != nil {
		t.Errorf("first command starts from a fresh shell, got cwd %q env %v shell_state %q", r.Cwd, r.Env, r.ShellState)
	}
	for _, id := range []string{RequestID(1, 1, 2), RequestID(1, 1, 3)} {
		r, ok := reqs[id]
		if !ok {
			t.Fatalf("no request %s", id)
		}
		if r.ShellState != state || r.Cwd != "/work/output" || r.Env["LANG"] != "C" {
			t.Errorf("%s: cwd %q env %v shell_state %q; want the state the first command left", id, r.Cwd, r.Env, r.ShellState)
		}
	}
	h.srv.AssertNoMisses(t)
}

// TestAnswerFileInPrompts: an answer submitted as a file, too big to be
// inline, is read from its blob; every prompt names the file and its
// digest, the check prompt says how to read it, and a content longer than
// MaxFileAnswerBytes is cut in the prompts (the rest is in the file).
func TestAnswerFileInPrompts(t *testing.T) {
	h := newHarness(t, 1)
	h.standard(1, 4)
	h.runToolAnswerer()
	h.runAuditor()
	tail := "TAIL-ONLY-IN-THE-FILE"
	content := "# Report\n\n" + goodAnswer + "\n" + strings.Repeat("filler line for a long report\n", MaxFileAnswerBytes/30+10) + tail
	ref, err := h.b.PutBlob(context.Background(), []byte(content), "text/markdown; charset=utf-8")
	if err != nil {
		t.Fatal(err)
	}
	const path, sha = "/work/output/report.md", "5f1c0e0d2a8f4d0a9d1c2b3a4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071"
	h.publish(catalog.AuditRequested{Round: 1, AnswerBlob: &ref, AnswerFile: path, AnswerSHA256: sha, CandidateStep: 3,
		EvidenceIDs: []string{"ev_0001", "ev_0002"}, ToolCalls: 2})
	evs := h.wait("feedback", feedbackFor(1))
	if f := feedbackRound(t, evs, 1); f.Score != 4 {
		t.Errorf("feedback = %+v", f)
	}

	seen := map[string]bool{}
	for _, r := range h.srv.Requests() {
		u := r.LastUserMessage()
		kind := strings.Fields(u)[0]
		seen[kind] = true
		for _, want := range []string{"submitted as the file " + path, "sha256 " + sha, "# Report", goodAnswer,
			"Only its first", "the rest is in the file"} {
			if !strings.Contains(u, want) {
				t.Errorf("%s prompt lacks %q", kind, want)
			}
		}
		if strings.Contains(u, tail) {
			t.Errorf("%s prompt carries the whole %d-byte file", kind, len(content))
		}
		if kind == "AUDIT-CHECK" && !strings.Contains(u, "cat "+path) {
			t.Errorf("check prompt does not say how to read the file:\n%s", clip(u, 2000))
		}
	}
	for _, k := range []string{"AUDIT-DECOMPOSE", "AUDIT-CHECK", "AUDIT-JUDGE"} {
		if !seen[k] {
			t.Errorf("no %s prompt", k)
		}
	}
	h.srv.AssertNoMisses(t)
}

// TestEmptyAnswerFileIsAudited: an empty answer file is still an answer to
// audit (an inline answer must not be empty).
func TestEmptyAnswerFileIsAudited(t *testing.T) {
	h := newHarness(t, 1)
	h.standard(1, 1)
	h.runToolAnswerer()
	h.runAuditor()
	h.publish(catalog.AuditRequested{Round: 1, AnswerFile: "/work/output/answer.txt",
		AnswerSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", CandidateStep: 3, ToolCalls: 1})
	evs := h.wait("feedback", feedbackFor(1))
	if f := feedbackRound(t, evs, 1); f.Accepted {
		t.Errorf("feedback = %+v", f)
	}
	for _, r := range h.srv.Requests() {
		if u := r.LastUserMessage(); strings.HasPrefix(u, "AUDIT-") && !strings.Contains(u, "(the file was empty)") {
			t.Errorf("prompt does not say the file was empty:\n%s", clip(u, 1500))
		}
	}
}

func TestPromptAnswer(t *testing.T) {
	text, f := PromptAnswer(catalog.AuditRequested{}, "inline")
	if text != "inline" || f != (AnswerFile{}) {
		t.Errorf("inline answer: %q %+v", text, f)
	}
	big := strings.Repeat("é", MaxFileAnswerBytes) // 2 bytes a rune
	text, f = PromptAnswer(catalog.AuditRequested{AnswerFile: "/work/output/a.md", AnswerSHA256: "ab"}, "x"+big)
	if !f.Cut || f.Bytes != 1+len(big) || f.Shown != len(text) || len(text) > MaxFileAnswerBytes || !strings.HasPrefix(text, "xé") {
		t.Errorf("cut answer file: %d bytes shown, %+v", len(text), f)
	}
	if strings.ContainsRune(text, '\uFFFD') || !strings.HasSuffix(text, "é") {
		t.Error("the cut splits a rune")
	}
	p := RenderJudge(JudgeInput{Round: 1, Answer: "short", File: AnswerFile{Path: "/work/output/a.md", SHA256: "ab", Bytes: 5, Shown: 5}})
	if !strings.Contains(p, "submitted as the file /work/output/a.md (sha256 ab, 5 bytes). Its full content follows.\nshort") {
		t.Errorf("judge prompt:\n%s", p)
	}
	p = RenderJudge(JudgeInput{Round: 1, Answer: "short"})
	if strings.Contains(p, "submitted as the file") || !strings.Contains(p, "CANDIDATE ANSWER:\nshort\n") {
		t.Errorf("judge prompt of an inline answer:\n%s", p)
	}
}

// TestEditEvidenceIsNotAShellCommand: the evidence of an agent's edit is
// shown to the auditor as a file operation, not as a "$ command".
func TestEditEvidenceIsNotAShellCommand(t *testing.T) {
	h := newHarness(t, 1)
	h.standard(1, 4)
	edit := &catalog.EditArgs{Op: catalog.EditCreate, Path: "/work/output/report.md", FileText: "# Report"}
	h.publish(catalog.ToolRequested{RequestID: "req-s0004", Requester: catalog.RequesterAgent, Tool: catalog.ToolEdit,
		Command: "edit create /work/output/report.md", Edit: edit, Step: 4})
	h.publish(catalog.EvidenceRecorded{EvidenceID: "ev_0003", RequestID: "req-s0004", Step: 4, Command: "edit create /work/output/report.md",
		Excerpt: "Created /work/output/report.md (1 line)."})
	h.runToolAnswerer()
	h.runAuditor()
	h.request(1, goodAnswer, "ev_0001", "ev_0002")
	h.wait("feedback", feedbackFor(1))
	var prompt string
	for _, r := range h.srv.Requests() {
		if u := r.LastUserMessage(); strings.HasPrefix(u, "AUDIT-DECOMPOSE") {
			prompt = u
		}
	}
	for _, want := range []string{"- ev_0003 (step 4, exit 0) [file tool] edit create /work/output/report.md",
		"- ev_0001 (step 1, exit 0) $ curl -sL " + urlPy} {
		if !strings.Contains(prompt, want) {
			t.Errorf("decomposition prompt lacks %q:\n%s", want, prompt)
		}
	}
}
