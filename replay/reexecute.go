package replay

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/agents/ledger"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/runcompare"
	"github.com/vera-run/vera/sandboxd"
)

// Kinds of Divergence.
const (
	// KindMissingCall: the run asked for a model call the recording lacks.
	KindMissingCall = "missing_call"
	// KindPrompt: a model call's prompt differs from the recorded one.
	KindPrompt = "prompt"
	// KindAction: a step differs from the recorded step (its action, its
	// format error, or the policy's decision to run it).
	KindAction = "action"
	// KindToolResult: a command's result differs from the recorded one
	// (exit code or output). It does not stop a run by itself: when it
	// matters, the next prompt differs.
	KindToolResult = "tool_result"
	// KindEnd: the run ended otherwise (outcome, answer or step count).
	KindEnd = "end"
)

// Divergence is one place where a re-execution departs from the recording.
type Divergence struct {
	Step      int    `json:"step"`
	Kind      string `json:"kind"`
	CallID    string `json:"call_id,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Detail    string `json:"detail"`
	Recorded  string `json:"recorded,omitempty"`
	Replayed  string `json:"replayed,omitempty"`
}

// stops reports whether the divergence stops a run under StopOnDivergence.
func (d Divergence) stops() bool { return d.Kind != KindToolResult }

// ReexecuteOptions configure Reexecute.
type ReexecuteOptions struct {
	// NewRunID, WorkDir, Out, Dest and Save are as in ReverifyOptions.
	NewRunID string
	WorkDir  string
	Out      string
	Dest     *bus.Bus
	Save     io.Writer
	// Sandbox runs the commands (required when the recording has any).
	Sandbox *Sandbox
	// StopOnDivergence cancels the run at the first divergence (other than
	// a tool result); otherwise the run goes on while the recording can
	// answer its model calls (a changed prompt is answered with the
	// recorded reply).
	StopOnDivergence bool
	// Window is the logic verifier's repetition window; 0: its default.
	Window int
	// Policy is the agent's base policy (the run's config overrides it),
	// to test a policy change against a recording.
	Policy *ledger.Policy
	// Timeout bounds the run; default DefaultTimeout.
	Timeout  time.Duration
	Logger   *slog.Logger
	Progress func(format string, args ...any)
}

// ReexecuteResult is the divergence report of a re-execution.
type ReexecuteResult struct {
	OriginalRun   string         `json:"original_run"`
	NewRun        string         `json:"new_run"`
	WorkDir       string         `json:"work_dir"`
	RecordedSteps int            `json:"recorded_steps"`
	Steps         int            `json:"steps"`
	Served        int            `json:"model_calls_served"`
	Events        int            `json:"events"`
	Divergences   []Divergence   `json:"divergences"`
	Stopped       string         `json:"stopped,omitempty"`
	RecordedEnd   *RunEnd        `json:"recorded_end,omitempty"`
	End           *RunEnd        `json:"end,omitempty"`
	Incomplete    []string       `json:"incomplete,omitempty"`
	Copied        bool           `json:"copied_to_bus"`
	Files         *RebuildResult `json:"files,omitempty"`
}

// Diverged reports whether the re-execution departed from the recording.
func (r *ReexecuteResult) Diverged() bool { return len(r.Divergences) > 0 }

// Reexecute runs the agent again on the recorded task of run runID of src,
// model replies served from the recording and commands really executed,
// and reports where the new run diverges from the recording; see the
// package documentation.
func Reexecute(ctx context.Context, src *bus.Bus, runID string, opts ReexecuteOptions) (*ReexecuteResult, error) {
	log, progress := reporting(opts.Logger, opts.Progress)
	rec, err := readRecording(ctx, src, runID)
	if err != nil {
		return nil, err
	}
	if rec.submitted == nil {
		return nil, fmt.Errorf("run %s has no vera.task.submitted: nothing to re-execute", runID)
	}
	agentCommands := 0
	for _, r := range rec.requests {
		if r.Requester == catalog.RequesterAgent {
			agentCommands++
		}
	}
	if agentCommands > 0 && opts.Sandbox == nil {
		return nil, fmt.Errorf("run %s ran %d command(s): re-executing it needs the sandbox (Docker and the sandbox image)", runID, agentCommands)
	}
	res := &ReexecuteResult{OriginalRun: runID, RecordedSteps: len(rec.steps), RecordedEnd: recordedEnd(rec)}
	if res.NewRun, res.WorkDir, err = newReplayRun(opts.NewRunID, opts.WorkDir, opts.Out); err != nil {
		return nil, err
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

	var mu sync.Mutex
	var divs []Divergence
	addDiv := func(d Divergence) {
		mu.Lock()
		divs = append(divs, d)
		mu.Unlock()
		log.Info("replay: divergence", "run", res.NewRun, "step", d.Step, "kind", d.Kind, "detail", d.Detail)
		progress("divergence at step %d (%s): %s", d.Step, d.Kind, d.Detail)
	}
	base, err := newRecorded(ctx, src, rec)
	if err != nil {
		return nil, err
	}
	base.ServeChangedPrompts = !opts.StopOnDivergence
	base.OnDivergence = addDiv
	served := func() int { return 0 }
	recordedFor := func(b *bus.Bus) *Recorded {
		r := &Recorded{Recorder: llmbus.New(b, llmbus.Options{Logger: log}), ServeChangedPrompts: base.ServeChangedPrompts,
			OnDivergence: base.OnDivergence, calls: base.calls}
		prev := served
		served = func() int { return prev() + r.Served() }
		return r
	}

	if err := e.startFiles(ctx, res.WorkDir); err != nil {
		return nil, err
	}
	if err := e.startLogic(ctx, opts.Window); err != nil {
		return nil, err
	}
	dvBus, err := e.connect(ctx, catalog.ComponentDeepVerify)
	if err != nil {
		return nil, err
	}
	dvModel := recordedFor(dvBus)
	if err := e.startAuditor(ctx, func(catalog.ModelConfig) (llm.Completer, error) { return dvModel, nil }, nil); err != nil {
		return nil, err
	}
	if opts.Sandbox != nil {
		if err := e.startSandbox(ctx, opts.Sandbox, res.WorkDir); err != nil {
			return nil, err
		}
	}
	agentBus, err := e.connect(ctx, catalog.ComponentAgent)
	if err != nil {
		return nil, err
	}
	agentModel := recordedFor(agentBus)
	// In stop mode the agent's call for step n waits until the watcher
	// below has compared step n-1 with the recording (the agent stores a
	// step before it asks for the next one), and is refused once the
	// re-execution stopped: a diverged run takes no further step.
	var (
		gateMu   sync.Mutex
		compared int                   // the last step the watcher compared
		halted   bool                  // stopped, or ended
		advanced = make(chan struct{}) // closed and replaced at each change
	)
	notify := func(step int, stop bool) {
		gateMu.Lock()
		compared = max(compared, step)
		halted = halted || stop
		close(advanced)
		advanced = make(chan struct{})
		gateMu.Unlock()
	}
	if opts.StopOnDivergence {
		agentModel.Gate = func(ctx context.Context, req llm.Request) error {
			for {
				gateMu.Lock()
				done, stop, ch := compared >= req.Step-1, halted, advanced
				gateMu.Unlock()
				if stop {
					return fmt.Errorf("%w: %s", ErrStopped, req.CallID)
				}
				if done {
					return nil
				}
				select {
				case <-ch:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
	}
	acfg := agents.Config{ID: "replay", Version: "replay", Logger: log,
		Models: func(string, catalog.ModelConfig) (llm.Completer, error) { return agentModel, nil }}
	if opts.Policy != nil {
		acfg.Policy = *opts.Policy
	}
	a, err := agents.New(agentBus, acfg)
	if err != nil {
		return res, err
	}
	e.group.sup.Add(a)

	task := *rec.submitted
	if task.Model.ToolProtocol == "" && !offeredTools(rec) {
		// Recorded before the tool protocols existed (no setting, and no
		// agent call offered tools): the run used the text protocol, which
		// auto, today's default, would not reproduce (its prompt differs).
		task.Model.ToolProtocol = catalog.ToolProtocolText
	}
	if fk := task.Fork; fk != nil {
		// A fork's first steps were served from its original, which the
		// re-execution's bus does not hold; its own recording has every
		// call of them (recorded as its own, with its prompts), so it is
		// re-executed as a plain run. Its prefix is then rendered with
		// its own tool protocol: a fork that changed the protocol
		// diverges at its first prompt.
		progress("run %s is a fork of run %s at step %d: re-executing it as a plain run from its own recording", runID, fk.From, fk.AtStep)
		task.Fork = nil
	}
	task.WorkDir = res.WorkDir
	task.SubmittedBy = "replay"
	task.Labels = maps.Clone(task.Labels)
	if task.Labels == nil {
		task.Labels = map[string]string{}
	}
	task.Labels[LabelReplayOf], task.Labels[LabelReplayMode] = runID, "reexecute"
	ev, err := e.bus.Events.New(res.NewRun, task)
	if err != nil {
		return nil, err
	}
	if _, err := e.bus.Publish(ctx, ev); err != nil {
		return nil, fmt.Errorf("submit replay run: %w", err)
	}
	progress("re-executing run %s as %s (%d recorded steps, %d model calls recorded)", runID, res.NewRun, len(rec.steps), base.Calls())

	// Watch the new run and compare it with the recording as it goes.
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	requests := map[string]catalog.ToolRequested{}
	seen := 0 // divergences already acted on
	ended := false
	for r, err := range e.bus.Read(wctx, bus.ReadOptions{RunID: res.NewRun, Follow: true}) {
		if err != nil {
			return nil, err
		}
		if r.Err != nil {
			continue
		}
		p, err := catalog.Decode(r.Event.Type, r.Event.Data)
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *catalog.AgentStep:
			res.Steps = max(res.Steps, d.Step)
			progress("step %d: %s", d.Step, clip(oneLine(runcompare.StepText(*d)), 80))
			if want, ok := rec.stepByN[d.Step]; !ok {
				addDiv(Divergence{Step: d.Step, Kind: KindAction, Detail: "the recording has no such step", Replayed: runcompare.StepText(*d)})
			} else if diff := runcompare.Steps(want, *d); diff != "" {
				addDiv(Divergence{Step: d.Step, Kind: KindAction, Detail: diff, Recorded: runcompare.StepText(want), Replayed: runcompare.StepText(*d)})
			}
		case *catalog.ToolRequested:
			requests[d.RequestID] = *d
		case *catalog.ToolFinished:
			if d.Requester != catalog.RequesterAgent {
				break
			}
			if want, ok := rec.results[d.RequestID]; ok {
				if diff := runcompare.Results(want, *d); diff != "" {
					addDiv(Divergence{Step: requests[d.RequestID].Step, Kind: KindToolResult, RequestID: d.RequestID, Detail: diff,
						Recorded: runcompare.ResultText(want), Replayed: runcompare.ResultText(*d)})
				}
			}
		case *catalog.RunFinished:
			res.End = &RunEnd{Outcome: d.Outcome, Answer: d.Answer, Reason: d.Reason, Steps: d.Steps}
			ended = true
		case *catalog.RunCancelled:
			res.End = &RunEnd{Cancelled: true, Reason: d.Reason, Steps: res.Steps}
			ended = true
		}
		if ended {
			notify(res.Steps, true)
			break
		}
		if opts.StopOnDivergence {
			mu.Lock()
			var first *Divergence
			for i := seen; i < len(divs); i++ {
				// Refused model calls stop the run through the agent
				// (it ends it FAILED); a changed step is stopped here.
				if divs[i].Kind == KindAction {
					first = &divs[i]
					break
				}
			}
			seen = len(divs)
			mu.Unlock()
			if first != nil && res.Stopped == "" {
				res.Stopped = fmt.Sprintf("at step %d: %s", first.Step, first.Detail)
				c, err := e.bus.Events.New(res.NewRun, catalog.RunCancelled{RequestedBy: "replay", Reason: "re-execution diverged from run " + runID + " " + res.Stopped})
				if err != nil {
					return nil, err
				}
				if _, err := e.bus.Publish(ctx, c); err != nil {
					return nil, fmt.Errorf("cancel replay run: %w", err)
				}
			}
		}
		if st, ok := p.(*catalog.AgentStep); ok {
			notify(st.Step, res.Stopped != "")
		}
	}
	notify(res.Steps, true) // release a call still waiting
	if !ended {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		res.Incomplete = append(res.Incomplete, fmt.Sprintf("the run did not end within %s", timeout))
		// End it, so that no agent takes it over once it is on a live bus.
		c, err := e.bus.Events.New(res.NewRun, catalog.RunCancelled{RequestedBy: SourceReplay, Reason: fmt.Sprintf("re-execution did not end within %s", timeout)})
		if err == nil {
			_, err = e.bus.Publish(ctx, c)
		}
		if err != nil {
			return nil, fmt.Errorf("cancel replay run: %w", err)
		}
	}
	// Let sandboxd remove the run's containers before stopping it.
	if opts.Sandbox != nil && ended {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if ok, err := e.bus.ConsumerDrained(ctx, sandboxd.ConsumerControl); err != nil || ok {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	e.group.Stop()
	if opts.StopOnDivergence && res.Stopped == "" {
		// A refused model call: the agent ended the run FAILED itself.
		mu.Lock()
		for _, d := range divs {
			if d.stops() {
				res.Stopped = fmt.Sprintf("at step %d: %s (the model call was refused; the agent ended the run)", d.Step, d.Detail)
				break
			}
		}
		mu.Unlock()
	}
	if ended && res.Stopped == "" && res.End != nil && !res.End.Cancelled {
		if diff := compareEnds(res.RecordedEnd, res.End); diff != "" {
			addDiv(Divergence{Step: res.End.Steps, Kind: KindEnd, Detail: diff, Recorded: endText(res.RecordedEnd), Replayed: endText(res.End)})
		}
	}
	mu.Lock()
	res.Divergences = slices.Clone(divs)
	mu.Unlock()
	if res.Divergences == nil {
		res.Divergences = []Divergence{}
	}
	res.Served = served()
	after, err := e.bus.ReadRun(ctx, res.NewRun)
	if err != nil {
		return nil, err
	}
	res.Events = len(after)

	if res.Files, res.Copied, err = e.deliver(ctx, res.NewRun, opts.Out, opts.Save, opts.Dest, progress, log); err != nil {
		return nil, err
	}
	return res, nil
}

func recordedEnd(rec *recording) *RunEnd {
	switch {
	case rec.finished != nil:
		f := rec.finished
		return &RunEnd{Outcome: f.Outcome, Answer: f.Answer, Reason: f.Reason, Steps: f.Steps}
	case rec.cancelled != nil:
		return &RunEnd{Cancelled: true, Reason: rec.cancelled.Reason, Steps: len(rec.steps)}
	}
	return nil
}

func compareEnds(want, got *RunEnd) string {
	switch {
	case want == nil:
		return "the recorded run never ended; the re-execution did"
	case want.Cancelled:
		return "the recorded run was cancelled; the re-execution ended " + string(got.Outcome)
	}
	var diffs []string
	if want.Outcome != got.Outcome {
		diffs = append(diffs, "outcome")
	}
	if want.Answer != got.Answer {
		diffs = append(diffs, "answer")
	}
	if want.Steps != got.Steps {
		diffs = append(diffs, "steps")
	}
	if len(diffs) == 0 {
		return ""
	}
	return "the run ended otherwise: " + strings.Join(diffs, ", ") + " differ"
}

// offeredTools reports whether any recorded agent model call offered
// native tools.
func offeredTools(rec *recording) bool {
	for _, c := range rec.calls {
		for _, q := range c.attempts {
			if q.Scope == catalog.ScopeAgent && len(q.Tools) > 0 {
				return true
			}
		}
	}
	return false
}
