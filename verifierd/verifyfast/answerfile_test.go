package verifyfast

import (
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// TestSubmitStepOfAnswerFile: a final answer submitted as a file, too big
// to be inline in its submit step, is matched to that step by the file's
// digest, not taken from the last submit.
func TestSubmitStepOfAnswerFile(t *testing.T) {
	const sha = "1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e"
	steps := []catalog.AgentStep{
		{Step: 4, ActionTool: catalog.ActionSubmit, AnswerFile: "/work/output/report.md", AnswerSHA256: sha,
			AnswerBlob: &bus.BlobRef{Digest: "sha256:" + sha, Size: 90000}, EvidenceUsed: []string{"ev_0001"}},
		{Step: 5, ActionTool: catalog.ActionEdit, Command: "edit str_replace /work/output/report.md"},
		{Step: 6, ActionTool: catalog.ActionSubmit, Answer: "a later inline answer", EvidenceUsed: []string{"ev_0002"}},
	}
	ev, err := (&bus.Factory{Source: "agent"}).New("run-f", catalog.RunFinished{Outcome: catalog.OutcomeResolved, Steps: 6,
		AnswerBlob: &bus.BlobRef{Digest: "sha256:" + sha, Size: 90000}, AnswerFile: "/work/output/report.md", AnswerSHA256: sha})
	if err != nil {
		t.Fatal(err)
	}
	a, err := decodeAnswer(ev, 9)
	if err != nil || a == nil {
		t.Fatalf("decodeAnswer: %v, %v", a, err)
	}
	st, ok := submitStep(a, "the report's 90000 bytes", steps)
	if !ok || st.Step != 4 {
		t.Errorf("submit step = %d (%v), want 4", st.Step, ok)
	}
	ids, from := citedIDs(a, "the report's 90000 bytes", &runView{steps: steps})
	if len(ids) != 1 || ids[0] != "ev_0001" || a.step != 4 {
		t.Errorf("cited %v from %q, step %d", ids, from, a.step)
	}
}

// TestEmptyAnswerFileIsNotScored: an audit request for an empty answer
// file has no text to score; it is skipped, not an error.
func TestEmptyAnswerFileIsNotScored(t *testing.T) {
	f := &bus.Factory{Source: "agent"}
	ev, err := f.New("run-f", catalog.AuditRequested{Round: 1, AnswerFile: "/work/output/a.txt",
		AnswerSHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", CandidateStep: 2})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := decodeAnswer(ev, 3); a != nil || err != nil {
		t.Errorf("decodeAnswer = %+v, %v; want nothing to score", a, err)
	}
	ev, err = f.New("run-f", catalog.AuditRequested{Round: 1, CandidateStep: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeAnswer(ev, 4); err == nil {
		t.Error("an audit request without any answer is not an error")
	}
}
