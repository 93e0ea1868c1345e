package replay

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/projector"
)

// auditorModel answers the auditor's decomposition, check and judge
// prompts: one check, decided without a command, and the given score.
func auditorModel(t *testing.T, score string) *scriptedmodel.Server {
	return scriptedmodel.Start(t, scriptedmodel.WithRules(
		scriptedmodel.OnLastUser(`^AUDIT-DECOMPOSE`, scriptedmodel.Text(`{"summary":[{"step":1,"source":"ev_0001","finding":"release page fetched"}],"likely_errors":[],"checks":[{"source":"ev_0001","question":"Does ev_0001 give October 7, 2024?"}]}`)),
		scriptedmodel.OnLastUser(`^AUDIT-CHECK`, scriptedmodel.Text(`{"verdict":"yes","evidence":"ev_0001 says so","citations":["ev_0001"]}`)),
		scriptedmodel.OnLastUser(`^AUDIT-JUDGE`, scriptedmodel.Text(`{"explanation":"supported by ev_0001","score":`+score+`,"instructions":[]}`)),
	))
}

// TestReverifyWritesANewRun re-verifies a recorded run on the bus it
// lives on: the verdicts of the current logic verifier and auditor land in
// a new run labelled as a replay of it, the old verifiers' output is not
// copied, and the original run is left exactly as it was.
func TestReverifyWritesANewRun(t *testing.T) {
	ctx := context.Background()
	_, b := bustest.New(t)
	log := bustest.Logger(t)
	root := t.TempDir()
	const orig = "rec-verify"
	evs := synthRun(t, orig, filepath.Join(root, "work"), 5)
	publish(t, b, evs)
	before := countEvents(t, b, orig)
	beforeSeq := lastSeq(t, b, orig)
	model := auditorModel(t, "4")

	out := filepath.Join(root, "out")
	if err := PrepareOut(out, false); err != nil {
		t.Fatal(err)
	}
	var saved bytes.Buffer
	res, err := Reverify(ctx, b, orig, ReverifyOptions{
		Out: out, Dest: b, Save: &saved, Logger: log, Timeout: time.Minute,
		AuditModel: &catalog.ModelConfig{BaseURL: model.URL(), Name: "judge"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := countEvents(t, b, orig); n != before || lastSeq(t, b, orig) != beforeSeq {
		t.Fatalf("original run changed: %d events (was %d)", n, before)
	}
	if res.NewRun == orig || bus.ValidateRunID(res.NewRun) != nil || !res.Copied || len(res.Incomplete) > 0 {
		t.Fatalf("result = %+v", res)
	}

	got, err := b.ReadRun(ctx, res.NewRun)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != res.Events {
		t.Errorf("new run on the bus has %d events, result says %d", len(got), res.Events)
	}
	now := index(got)
	if now.submitted == nil || now.submitted.Labels[LabelReplayOf] != orig || now.submitted.Labels[LabelReplayMode] != "reverify" || now.submitted.WorkDir != out {
		t.Errorf("replay task = %+v", now.submitted)
	}
	for _, ev := range got {
		// Copied or new, every event is in the new run's trace.
		if ev.Traceparent != bus.Traceparent(res.NewRun) {
			t.Errorf("%s %s in the new run has traceparent %q, want the new run's %q", ev.Type, ev.ID, ev.Traceparent, bus.Traceparent(res.NewRun))
		}
		if ev.Source == catalog.ComponentLogic || ev.Source == catalog.ComponentDeepVerify {
			if ev.Time.Before(evs[len(evs)-1].Time.Add(time.Hour)) && ev.Type == catalog.TypeLogicVerdict {
				// A verdict copied from the recording would carry its time.
				var d catalog.LogicVerdict
				if ev.DecodeData(&d) == nil && d.ThinkingEvalReason == "old verifier" {
					t.Errorf("recorded verdict copied: %+v", d)
				}
			}
		}
	}
	// Window 3: steps 2-5 repeat one command, so steps 4 and 5 repeat it.
	var verdictSteps []int
	for _, s := range res.Steps {
		if s.Replayed != nil {
			verdictSteps = append(verdictSteps, s.Step)
			if s.Replayed.ThinkingEval != 0 {
				t.Errorf("step %d: thinking_eval %d, want 0", s.Step, s.Replayed.ThinkingEval)
			}
		}
	}
	if len(res.Steps) != 5 || len(verdictSteps) != 2 || verdictSteps[0] != 4 || verdictSteps[1] != 5 || len(now.verdicts) != 2 {
		t.Errorf("verdicts on steps %v (steps %+v)", verdictSteps, res.Steps)
	}
	if !res.Steps[2].Changed || res.Steps[2].Recorded == nil || res.Steps[2].Replayed != nil {
		t.Errorf("step 3: %+v, want the recorded verdict gone", res.Steps[2])
	}
	if len(res.Audits) != 1 || res.Audits[0].Replayed == nil || res.Audits[0].Replayed.RawScore != 4 || res.Audits[0].Recorded == nil || res.Audits[0].Recorded.Score != 2 ||
		res.Audits[0].Accepted == nil || res.Audits[0].Replayed.Score != 2 || len(res.Audits[0].Replayed.Caps) == 0 {
		t.Errorf("audits = %+v", res.Audits)
	}
	if n := len(now.judged); n != 1 {
		t.Errorf("%d audit judgements in the new run", n)
	}

	// The files in Out are those of the new run, as the projector makes them.
	check := filepath.Join(root, "check")
	if _, err := Rebuild(ctx, b, res.NewRun, check, RebuildOptions{}); err != nil {
		t.Fatal(err)
	}
	sameFiles(t, "out vs rebuild of the new run", readFiles(t, check, OutputFiles()), readFiles(t, out, OutputFiles()))
	if !strings.Contains(string(readFiles(t, out, []string{projector.FileTrace})[projector.FileTrace]), `"vera.logic.verdict"`) {
		t.Error("trace.jsonl of the replay run has no verdict")
	}
	if !bytes.Contains(saved.Bytes(), []byte(res.NewRun)) {
		t.Error("saved export does not hold the new run")
	}

	var text bytes.Buffer
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", text.String())
	for _, want := range []string{res.NewRun, "  4     -         0/0", "round 1"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("summary lacks %q", want)
		}
	}
}

// TestReverifyAgentRunWithoutAudit re-verifies a real agent recording
// made before the audit loop: its submitted answer gets an audit request
// of the replay, and the auditor judges it.
func TestReverifyAgentRun(t *testing.T) {
	ctx := context.Background()
	srv, b := bustest.New(t)
	root := t.TempDir()
	const orig = "rec-agent"
	model := scriptedAgentModel(t, notesOnlyReplies())
	startAgent(t, srv.ClientURL(), 256)
	submitTask(t, b, orig, catalog.RunConfig{Task: "What is the answer?", WorkDir: filepath.Join(root, "w"),
		Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted"}, MaxSteps: 10})
	waitFinished(t, b, orig, time.Minute)
	path := exportRun(t, b, orig)

	s, err := OpenFile(ctx, path, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	judge := auditorModel(t, "3")
	res, err := Reverify(ctx, s.Bus, orig, ReverifyOptions{Audit: AuditAlways, Timeout: time.Minute, WorkDir: t.TempDir(),
		AuditModel: &catalog.ModelConfig{BaseURL: judge.URL(), Name: "judge"}, Logger: bustest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Steps) != 3 || res.Verdicts != 0 || len(res.Audits) != 1 || res.Audits[0].Answer != "42" ||
		res.Audits[0].Replayed == nil || res.Audits[0].Replayed.RawScore != 3 || res.Copied {
		t.Errorf("result = %+v", res)
	}
}
