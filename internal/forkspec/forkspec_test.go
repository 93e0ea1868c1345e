package forkspec

import (
	"context"
	"errors"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// TestReadAndBuild reads runs off a real bus: an unknown run, one not
// started, a fork of a fork (steps, first audit, its own fork replaced,
// its labels not inherited).
func TestReadAndBuild(t *testing.T) {
	_, b := bustest.New(t)
	ctx := context.Background()
	pub := func(run string, p bus.Payload) {
		t.Helper()
		ev, err := b.Events.New(run, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Read(ctx, b, "nope"); !errors.Is(err, ErrUnknownRun) {
		t.Errorf("unknown run: %v", err)
	}
	if _, err := Read(ctx, b, "a.b"); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad run id: %v", err)
	}
	cfg := catalog.RunConfig{Task: "t", WorkDir: "/w/r1-fork-aaaa", Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1/v1", Name: "m"}, MaxSteps: 10,
		Fork: &catalog.ForkConfig{From: "r0", AtStep: 1}}
	pub("r1", catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "cli", Labels: map[string]string{"forked_from": "r0", "eval_id": "e1"}})
	if _, err := Read(ctx, b, "r1"); !errors.Is(err, ErrNotStarted) {
		t.Errorf("not started: %v", err)
	}
	pub("r1", catalog.RunStarted{AgentID: "a", Config: cfg})
	for i := 1; i <= 5; i++ {
		pub("r1", catalog.AgentStep{Step: i, ModelCallID: "c"})
	}
	pub("r1", catalog.AuditRequested{Round: 1, CandidateStep: 5})
	pub("r1", catalog.AuditRequested{Round: 2, CandidateStep: 4}) // not in order: the lowest counts
	o, err := Read(ctx, b, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if o.Steps != 5 || o.FirstAudit != 4 || o.MaxAtStep() != 3 || o.Finished || o.Started.Config.Task != "t" {
		t.Fatalf("read %+v", o)
	}
	if err := o.CheckAtStep(4); !errors.Is(err, ErrInvalid) {
		t.Errorf("step 4 accepted: %v", err)
	}
	sub, err := Build(o, Spec{AtStep: 3, WorkDir: DefaultWorkDir(cfg.WorkDir, "01M8A9CSDYH57K9RP7Z92A1KN9"), SubmittedBy: "cli", Note: "  again  "})
	if err != nil {
		t.Fatal(err)
	}
	if *sub.Fork != (catalog.ForkConfig{From: "r1", AtStep: 3, Note: "again"}) || sub.WorkDir != "/w/r1-fork-aaaa-fork-z92a1kn9" ||
		len(sub.Labels) != 2 || sub.Labels[LabelForkedFrom] != "r1" || sub.Labels[LabelForkAtStep] != "3" || sub.MaxSteps != 10 {
		t.Errorf("built %+v fork %+v labels %v", sub.RunConfig, sub.Fork, sub.Labels)
	}
	if _, err := Build(o, Spec{AtStep: 1, WorkDir: "/w/x", Overrides: Overrides{APIKeyEnv: "sk-live-not-a-name"}}); !errors.Is(err, ErrInvalid) || !errors.Is(err, catalog.ErrSecretInConfig) {
		t.Errorf("a pasted key: %v", err)
	}
	if _, err := Build(o, Spec{AtStep: 1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("no work dir: %v", err)
	}
	// The original is read as it is: it may not be finished.
	pub("r1", catalog.RunFinished{Outcome: catalog.OutcomeResolved, Steps: 5})
	if o, err := Read(ctx, b, "r1"); err != nil || !o.Finished {
		t.Errorf("finished: %+v %v", o, err)
	}
}
