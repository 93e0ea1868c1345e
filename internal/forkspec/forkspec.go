// Package forkspec builds the task of a fork: a new run that reproduces the
// first steps of a recorded run (its model replies served from the
// recording, its commands executed again in a fresh sandbox) and then goes
// on live with changed settings (catalog.ForkConfig). `vera fork` and the
// dashboard's "Fork here" both read the original with Read and build the
// new run's vera.task.submitted with Build, so that they check the fork
// point and apply the overrides the same way.
//
// A fork point N is valid when 0 <= N <= the original's step count and N
// is before the original's first audited answer (the candidate_step of
// its first vera.audit.requested): the prefix serves only agent replies,
// so it cannot reproduce an audit round.
package forkspec

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// Labels of a fork's vera.task.submitted.
const (
	LabelForkedFrom = "forked_from"  // the original run's id
	LabelForkAtStep = "fork_at_step" // the fork point, in decimal
)

// ErrUnknownRun: the stream holds no task for the run.
var ErrUnknownRun = errors.New("no such run")

// ErrNotStarted: the run has a task but no vera.run.started yet, so its
// effective configuration is not known.
var ErrNotStarted = errors.New("the run has not started")

// ErrInvalid marks a fork request that cannot be honoured (bad fork point,
// bad override): the user's error. errors.Is finds it; the messages do
// not repeat it.
var ErrInvalid = errors.New("invalid fork")

type invalidError struct{ err error }

func (e invalidError) Error() string        { return e.err.Error() }
func (e invalidError) Unwrap() error        { return e.err }
func (e invalidError) Is(target error) bool { return target == ErrInvalid }

// invalidf is an ErrInvalid error with this message.
func invalidf(format string, args ...any) error {
	return invalidError{fmt.Errorf(format, args...)}
}

// Original is what a fork needs to know of the run it forks.
type Original struct {
	RunID string
	// Started is the original's vera.run.started: Config is its
	// effective configuration, which the fork starts from.
	Started catalog.RunStarted
	// Steps is the highest agent step recorded (vera.agent.step).
	Steps int
	// FirstAudit is the candidate_step of the original's first
	// vera.audit.requested; 0 when no answer of it was audited.
	FirstAudit int
	// Finished is set when the original has a vera.run.finished.
	Finished bool
}

// MaxAtStep is the highest valid fork point.
func (o Original) MaxAtStep() int {
	if o.FirstAudit > 0 {
		return min(o.Steps, o.FirstAudit-1)
	}
	return o.Steps
}

// Read reads what a fork needs of run runID from the stream, by direct
// gets (no consumer is created). ErrUnknownRun: nothing was submitted on
// that run; ErrNotStarted: no agent has taken it yet.
func Read(ctx context.Context, b *bus.Bus, runID string) (Original, error) {
	if err := bus.ValidateRunID(runID); err != nil {
		return Original{}, invalidError{err}
	}
	o := Original{RunID: runID}
	var submitted, started bool
	types := []string{catalog.TypeTaskSubmitted, catalog.TypeRunStarted, catalog.TypeAgentStep, catalog.TypeAuditRequested, catalog.TypeRunFinished}
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: runID, Types: types, Direct: true}) {
		if err != nil {
			return Original{}, fmt.Errorf("read run %s: %w", runID, err)
		}
		if rec.Err != nil {
			continue
		}
		ev := rec.Event
		switch ev.Type {
		case catalog.TypeTaskSubmitted:
			submitted = true
		case catalog.TypeRunStarted:
			if started {
				continue // the first one is the run's
			}
			if err := ev.DecodeData(&o.Started); err != nil {
				return Original{}, fmt.Errorf("run %s: decode its vera.run.started: %w", runID, err)
			}
			started = true
		case catalog.TypeAgentStep:
			var d catalog.AgentStep
			if err := ev.DecodeData(&d); err == nil {
				o.Steps = max(o.Steps, d.Step)
			}
		case catalog.TypeAuditRequested:
			var d catalog.AuditRequested
			if err := ev.DecodeData(&d); err == nil && d.CandidateStep > 0 && (o.FirstAudit == 0 || d.CandidateStep < o.FirstAudit) {
				o.FirstAudit = d.CandidateStep
			}
		case catalog.TypeRunFinished:
			o.Finished = true
		}
	}
	switch {
	case !submitted && !started:
		return Original{}, fmt.Errorf("run %s: %w on this bus (no vera.task.submitted)", runID, ErrUnknownRun)
	case !started:
		return Original{}, fmt.Errorf("run %s: %w (no vera.run.started yet): its settings are not known, nothing to fork", runID, ErrNotStarted)
	}
	return o, nil
}

// CheckAtStep checks a fork point against the original; the error names
// the step and why.
func (o Original) CheckAtStep(at int) error {
	switch {
	case at < 0:
		return invalidf("step %d: the fork point is a step count, 0 or more", at)
	case at > o.Steps:
		return invalidf("step %d: run %s has %d steps recorded; fork at 0 to %d", at, o.RunID, o.Steps, o.MaxAtStep())
	case o.FirstAudit > 0 && at >= o.FirstAudit:
		return invalidf("step %d: run %s submitted its first audited answer at step %d, and a fork must branch before it (the recording cannot replay an audit); fork at 0 to %d",
			at, o.RunID, o.FirstAudit, o.MaxAtStep())
	}
	return nil
}

// Overrides are the settings a fork changes; a nil or empty member keeps
// the original's. They apply from the step after the fork point.
type Overrides struct {
	Model        string               // the agent's model name
	ModelBaseURL string               // its server
	APIKeyEnv    string               // the variable holding its key
	ToolProtocol catalog.ToolProtocol // auto, native or text
	Auditor      *bool                // audit candidate answers
	AuditRounds  *int                 // audit rounds (0 = the default); needs the auditor on
	MaxSteps     *int                 // step budget of the whole run (prefix included); 0 = unlimited

	NotesInterval          *int
	StagnationLimit        *int
	FailureEscalationLimit *int
	QueryFamilyLimit       *int
}

// Spec is one fork request.
type Spec struct {
	AtStep  int    // steps of the original reproduced
	Note    string // why, in the user's words
	WorkDir string // the fork's work dir (required: see DefaultWorkDir)
	// SubmittedBy names the submitter: cli, cli:alice, dashboard.
	SubmittedBy string
	// Labels are extra labels; forked_from and fork_at_step are set
	// over them.
	Labels    map[string]string
	Overrides Overrides
}

// Build returns the fork's task: the original's effective configuration
// with the overrides applied, Fork set, the new work dir, and the labels
// forked_from and fork_at_step. It checks the fork point (CheckAtStep),
// the overrides and that the settings hold no secret. Errors are
// ErrInvalid.
func Build(o Original, s Spec) (catalog.TaskSubmitted, error) {
	if err := o.CheckAtStep(s.AtStep); err != nil {
		return catalog.TaskSubmitted{}, err
	}
	if s.WorkDir == "" {
		return catalog.TaskSubmitted{}, invalidf("no work dir for the fork")
	}
	cfg := o.Started.Config
	cfg.WorkDir = s.WorkDir
	ov := s.Overrides
	if ov.Model != "" {
		cfg.Model.Name = ov.Model
	}
	if ov.ModelBaseURL != "" {
		cfg.Model.BaseURL = ov.ModelBaseURL
	}
	if ov.APIKeyEnv != "" {
		cfg.Model.APIKeyEnv = ov.APIKeyEnv
	}
	if ov.ToolProtocol != "" {
		if !ov.ToolProtocol.Valid() {
			return catalog.TaskSubmitted{}, invalidf("tool protocol %q: want auto, native or text", ov.ToolProtocol)
		}
		cfg.Model.ToolProtocol = ov.ToolProtocol
	}
	if ov.Auditor != nil {
		cfg.Auditor.Enabled = *ov.Auditor
	}
	if ov.AuditRounds != nil {
		switch {
		case *ov.AuditRounds < 0:
			return catalog.TaskSubmitted{}, invalidf("audit rounds %d: want 0 (the default) or more", *ov.AuditRounds)
		case !cfg.Auditor.Enabled:
			return catalog.TaskSubmitted{}, invalidf("audit rounds given with the auditor off")
		}
		cfg.Auditor.MaxRounds = *ov.AuditRounds
	}
	if ov.MaxSteps != nil {
		if *ov.MaxSteps < 0 {
			return catalog.TaskSubmitted{}, invalidf("max steps %d: want 0 (unlimited) or more", *ov.MaxSteps)
		}
		cfg.MaxSteps = *ov.MaxSteps
	}
	if cfg.MaxSteps != 0 && cfg.MaxSteps <= s.AtStep {
		return catalog.TaskSubmitted{}, invalidf("the step budget (%d) must be above the fork point (%d): the fork would end without a live step", cfg.MaxSteps, s.AtStep)
	}
	for _, p := range []struct {
		name string
		v    *int
		dst  *int
	}{
		{"notes interval", ov.NotesInterval, &cfg.Policy.NotesInterval},
		{"stagnation limit", ov.StagnationLimit, &cfg.Policy.StagnationLimit},
		{"failure escalation limit", ov.FailureEscalationLimit, &cfg.Policy.FailureEscalationLimit},
		{"query family limit", ov.QueryFamilyLimit, &cfg.Policy.QueryFamilyLimit},
	} {
		if p.v == nil {
			continue
		}
		if *p.v < 0 {
			return catalog.TaskSubmitted{}, invalidf("%s %d: want 0 (the default) or more", p.name, *p.v)
		}
		*p.dst = *p.v
	}
	cfg.Fork = &catalog.ForkConfig{From: o.RunID, AtStep: s.AtStep, Note: strings.TrimSpace(s.Note)}
	if err := cfg.ValidateSecrets(); err != nil {
		return catalog.TaskSubmitted{}, invalidError{err}
	}
	labels := make(map[string]string, len(s.Labels)+2)
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels[LabelForkedFrom] = o.RunID
	labels[LabelForkAtStep] = strconv.Itoa(s.AtStep)
	return catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: s.SubmittedBy, Labels: labels}, nil
}

// DefaultWorkDir is the work dir of a fork whose user named none: a
// sibling of the original's, <original>-fork-<the last 8 characters of
// the new run id, in lower case>, e.g. /w/t1 → /w/t1-fork-7pe1e464.
func DefaultWorkDir(originalWorkDir, newRunID string) string {
	short := newRunID
	if len(short) > 8 {
		short = short[len(short)-8:]
	}
	orig := filepath.Clean(originalWorkDir)
	return filepath.Join(filepath.Dir(orig), filepath.Base(orig)+"-fork-"+strings.ToLower(short))
}
