package replay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/runcompare"
	"github.com/vera-run/vera/verifierd/logic"
)

// AuditMode says when Reverify runs the DeepVerifier auditor.
type AuditMode int

const (
	// AuditAuto audits when a model is given (ReverifyOptions.AuditModel)
	// or the recorded run enabled its auditor.
	AuditAuto AuditMode = iota
	// AuditNever runs the logic verifier only.
	AuditNever
	// AuditAlways audits with the given model, else the recorded run's
	// auditor model (else its agent model).
	AuditAlways
)

// DefaultTimeout bounds how long Reverify waits for the verifiers.
const DefaultTimeout = 10 * time.Minute

// ReverifyOptions configure Reverify.
type ReverifyOptions struct {
	// NewRunID names the replay run; default a fresh ULID.
	NewRunID string
	// WorkDir is the replay run's work dir; default Out, else a new
	// temporary directory (kept: the run's events point to it).
	WorkDir string
	// Out, when set, receives the replay run's files and metrics.prom
	// (see Rebuild); the caller checks it with PrepareOut beforehand.
	Out string
	// Dest, when set, receives a copy of the replay run (the bus the
	// recording came from, typically). Nil: the run lives only as long
	// as the scratch bus, unless saved with Save.
	Dest *bus.Bus
	// Save, when set, receives the replay run as an export file.
	Save io.Writer

	// Window is the logic verifier's repetition window; 0: its default.
	Window int
	// Audit says whether the auditor runs; AuditModel overrides the
	// run's auditor model. Models, when set, replaces the model clients
	// altogether (its calls are then not recorded unless it records them).
	Audit      AuditMode
	AuditModel *catalog.ModelConfig
	Models     func(catalog.ModelConfig) (llm.Completer, error)
	// Sandbox, when set, runs the auditor's commands; without it a check
	// that needs a command stays open until Timeout.
	Sandbox *Sandbox
	// Timeout bounds the wait for the verifiers; default DefaultTimeout.
	Timeout time.Duration

	Logger *slog.Logger
	// Progress receives a line on each phase.
	Progress func(format string, args ...any)
}

// StepVerdict compares the logic verdicts of one agent step.
type StepVerdict struct {
	Step     int                   `json:"step"`
	Action   string                `json:"action,omitempty"`
	Recorded *catalog.LogicVerdict `json:"recorded,omitempty"`
	Replayed *catalog.LogicVerdict `json:"replayed,omitempty"`
	Changed  bool                  `json:"changed"`
}

// AuditRound compares one audit round.
type AuditRound struct {
	Round         int                  `json:"round"`
	CandidateStep int                  `json:"candidate_step"`
	Answer        string               `json:"answer,omitempty"`
	Recorded      *catalog.AuditJudged `json:"recorded,omitempty"`
	Replayed      *catalog.AuditJudged `json:"replayed,omitempty"`
	Accepted      *bool                `json:"accepted,omitempty"`
	Complete      bool                 `json:"complete"`
}

// ReverifyResult is what Reverify found.
type ReverifyResult struct {
	OriginalRun string         `json:"original_run"`
	NewRun      string         `json:"new_run"`
	WorkDir     string         `json:"work_dir"`
	Events      int            `json:"events"`   // in the replay run
	Verdicts    int            `json:"verdicts"` // new logic verdicts
	Audited     bool           `json:"audited"`
	Steps       []StepVerdict  `json:"steps"`
	Audits      []AuditRound   `json:"audits,omitempty"`
	Incomplete  []string       `json:"incomplete,omitempty"`
	Copied      bool           `json:"copied_to_bus"`
	Files       *RebuildResult `json:"files,omitempty"`
}

// Reverify runs the current verifiers over run runID of src and records
// their verdicts in a new run; see the package documentation.
func Reverify(ctx context.Context, src *bus.Bus, runID string, opts ReverifyOptions) (*ReverifyResult, error) {
	log, progress := reporting(opts.Logger, opts.Progress)
	rec, err := readRecording(ctx, src, runID)
	if err != nil {
		return nil, err
	}
	res := &ReverifyResult{OriginalRun: runID}
	if res.NewRun, res.WorkDir, err = newReplayRun(opts.NewRunID, opts.WorkDir, opts.Out); err != nil {
		return nil, err
	}
	switch opts.Audit {
	case AuditAlways:
		res.Audited = true
	case AuditAuto:
		res.Audited = opts.AuditModel != nil || opts.Models != nil || rec.config.Auditor.Enabled
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}

	e, err := newEnv(ctx, log)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if err := e.startFiles(ctx, res.WorkDir); err != nil {
		return nil, err
	}
	if err := e.startLogic(ctx, opts.Window); err != nil {
		return nil, err
	}
	if res.Audited {
		if err := e.startAuditor(ctx, opts.Models, opts.AuditModel); err != nil {
			return nil, err
		}
		if opts.Sandbox != nil {
			if err := e.startSandbox(ctx, opts.Sandbox, res.WorkDir); err != nil {
				return nil, err
			}
		}
	}

	// The recording without its verifiers' output, plus an audit request
	// per submitted answer when the recording has none (it predates the
	// audit loop).
	auditorReqs := map[string]bool{}
	synthesize := res.Audited && !rec.hasAuditRequest
	round, toolCalls := 0, 0
	spec := copySpec{
		NewRun: res.NewRun, WorkDir: res.WorkDir,
		Labels: map[string]string{LabelReplayOf: runID, LabelReplayMode: "reverify"},
		Keep:   func(ev *bus.Event) bool { return !verifierOutput(ev, auditorReqs) },
		After: func(ev *bus.Event) []bus.Payload {
			if !synthesize {
				return nil
			}
			switch ev.Type {
			case catalog.TypeToolFinished:
				var d catalog.ToolFinished
				if ev.DecodeData(&d) == nil && d.Requester == catalog.RequesterAgent {
					toolCalls++
				}
			case catalog.TypeAgentStep:
				var d catalog.AgentStep
				if ev.DecodeData(&d) == nil && d.FormatError == "" && d.ActionTool == catalog.ActionSubmit && d.Answer != "" {
					round++
					return []bus.Payload{catalog.AuditRequested{Round: round, Answer: d.Answer, CandidateStep: d.Step, EvidenceIDs: d.EvidenceUsed, ToolCalls: toolCalls}}
				}
			}
			return nil
		},
	}
	// The end of the run is stored after the verifiers are done, as in a
	// live run whose verifiers answer before it ends (sandboxd refuses
	// commands of an ended run, the auditor's included).
	spec.Defer = func(ev *bus.Event) bool {
		return ev.Type == catalog.TypeRunFinished || ev.Type == catalog.TypeRunCancelled
	}
	progress("copying run %s into replay run %s", runID, res.NewRun)
	copied, ends, err := copyRun(ctx, src, runID, e.bus, spec)
	if err != nil {
		return nil, err
	}
	var rounds []int
	for _, ev := range copied {
		if ev.Type == catalog.TypeAuditRequested {
			var d catalog.AuditRequested
			if ev.DecodeData(&d) == nil {
				rounds = append(rounds, d.Round)
			}
		}
	}

	progress("verifying %d agent steps%s", len(rec.steps), map[bool]string{true: fmt.Sprintf(" and %d candidate answers", len(rounds)), false: ""}[res.Audited])
	deadline := time.Now().Add(timeout)
	var evs []bus.Event
	for {
		evs, err = e.bus.ReadRun(ctx, res.NewRun)
		if err != nil {
			return nil, err
		}
		logicDone, err := e.bus.ConsumerDrained(ctx, logic.DefaultDurable)
		if err != nil {
			return nil, err
		}
		open := openRounds(evs, rounds, res.Audited)
		if logicDone && len(open) == 0 {
			break
		}
		if err := e.group.Err(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			if !logicDone {
				res.Incomplete = append(res.Incomplete, "logic verifier: steps left unverified")
			}
			for _, r := range open {
				res.Incomplete = append(res.Incomplete, fmt.Sprintf("audit round %d: not finished within %s", r, timeout))
			}
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if len(ends) == 0 {
		// An unfinished recording: end the copy, so that no agent takes
		// the replay run over once it is on a live bus.
		c, err := e.bus.Events.New(res.NewRun, catalog.RunCancelled{RequestedBy: SourceReplay, Reason: "re-verification of unfinished run " + runID})
		if err != nil {
			return nil, err
		}
		ends = append(ends, c)
	}
	if len(ends) > 0 {
		if _, err := e.bus.PublishBatch(ctx, ends); err != nil {
			return nil, fmt.Errorf("store the end of replay run %s: %w", res.NewRun, err)
		}
	}
	e.group.Stop()
	evs, err = e.bus.ReadRun(ctx, res.NewRun)
	if err != nil {
		return nil, err
	}
	res.Events = len(evs)
	summarizeVerdicts(res, rec, evs)

	if res.Files, res.Copied, err = e.deliver(ctx, res.NewRun, opts.Out, opts.Save, opts.Dest, progress, log); err != nil {
		return nil, err
	}
	return res, nil
}

// workDir picks the work dir of a replay run.
func workDir(given, out, runID string) (string, error) {
	switch {
	case given != "":
		return absDir(given)
	case out != "":
		return absDir(out)
	}
	d, err := os.MkdirTemp("", "vera-replay-"+runID+"-")
	if err != nil {
		return "", fmt.Errorf("work dir: %w", err)
	}
	return d, nil
}

// openRounds lists the audit rounds without feedback yet.
func openRounds(evs []bus.Event, rounds []int, audited bool) []int {
	if !audited {
		return nil
	}
	done := map[int]bool{}
	for _, ev := range evs {
		if ev.Type == catalog.TypeAuditFeedback {
			var d catalog.AuditFeedback
			if ev.DecodeData(&d) == nil {
				done[d.Round] = true
			}
		}
	}
	var open []int
	for _, r := range rounds {
		if !done[r] {
			open = append(open, r)
		}
	}
	return open
}

// summarizeVerdicts fills the per-step and per-round comparison.
func summarizeVerdicts(res *ReverifyResult, rec *recording, evs []bus.Event) {
	now := index(evs)
	for _, st := range rec.steps {
		sv := StepVerdict{Step: st.Step, Action: runcompare.ActionText(st)}
		if v, ok := rec.verdicts[st.Step]; ok {
			sv.Recorded = &v
		}
		if v, ok := now.verdicts[st.Step]; ok {
			sv.Replayed = &v
			res.Verdicts++
		}
		sv.Changed = verdictKey(sv.Recorded) != verdictKey(sv.Replayed)
		res.Steps = append(res.Steps, sv)
	}
	if !res.Audited {
		return
	}
	for _, r := range now.auditOrder {
		req := now.audits[r]
		ar := AuditRound{Round: r, CandidateStep: req.CandidateStep, Answer: req.Answer}
		if j, ok := rec.judged[r]; ok {
			ar.Recorded = &j
		}
		if j, ok := now.judged[r]; ok {
			ar.Replayed = &j
		}
		if fb, ok := now.feedback[r]; ok {
			acc := fb.Accepted
			ar.Accepted, ar.Complete = &acc, true
		}
		res.Audits = append(res.Audits, ar)
	}
}

func verdictKey(v *catalog.LogicVerdict) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%d", v.ThinkingEval, v.ActionEval)
}

// deliver hands a replay run over: its files into out (when given), its
// export to save, and its events to the bus dest.
func (e *env) deliver(ctx context.Context, runID, out string, save io.Writer, dest *bus.Bus, progress func(string, ...any), log *slog.Logger) (files *RebuildResult, copied bool, err error) {
	if out != "" {
		progress("writing the replay run's files to %s", out)
		fr, err := Rebuild(ctx, e.bus, runID, out, RebuildOptions{Force: true, Logger: log})
		if err != nil {
			return nil, false, err
		}
		files = &fr
	}
	if save != nil {
		if _, err := e.bus.Export(ctx, save, bus.ExportOptions{RunID: runID}); err != nil {
			return nil, false, fmt.Errorf("save replay run: %w", err)
		}
	}
	if dest != nil {
		progress("storing replay run %s on the bus", runID)
		if _, err := transfer(ctx, e.bus, runID, dest); err != nil {
			return nil, false, err
		}
		copied = true
	}
	return files, copied, nil
}
