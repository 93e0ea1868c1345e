package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/runcompare"
)

// Kinds of catalog.ForkDivergence (as `vera replay --reexecute` names
// them).
const (
	ForkKindMissingCall = "missing_call"
	ForkKindPrompt      = "prompt"
	ForkKindAction      = "action"
	ForkKindToolResult  = "tool_result"
)

// forkSideCap bounds each side of a divergence in vera.fork.prefix.
const forkSideCap = 500

// forkOrigin is the recorded run a fork reproduces (RunConfig.Fork.From),
// read once per run entry: what the prefix is compared with and served
// from.
type forkOrigin struct {
	runID   string
	exists  bool                // the run has events
	started *catalog.RunStarted // nil: no vera.run.started
	// requested is its tool protocol setting (auto when empty; text for a
	// run recorded before the setting existed, whose calls offered no
	// tools), the protocol its prefix is rendered and parsed with.
	requested catalog.ToolProtocol
	lastStep  int
	steps     map[int]catalog.AgentStep
	results   map[string]catalog.ToolFinished // agent request id → its first result
	responses map[string]catalog.ModelResponded
	requests  map[string]catalog.ModelRequested // call id → the attempt of the successful response
	audited   *catalog.AuditRequested           // the first audit request (lowest candidate step)
}

// readOrigin reads run runID whole.
func (a *Agent) readOrigin(ctx context.Context, runID string) (*forkOrigin, error) {
	evs, err := a.Bus.ReadRun(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("read run %s (the run forked): %w", runID, err)
	}
	o := &forkOrigin{runID: runID, exists: len(evs) > 0, steps: map[int]catalog.AgentStep{}, results: map[string]catalog.ToolFinished{},
		responses: map[string]catalog.ModelResponded{}, requests: map[string]catalog.ModelRequested{}}
	attempts := map[string]catalog.ModelRequested{} // call id + attempt → request
	offered := false
	for _, ev := range evs {
		if _, known := catalog.Lookup(ev.Type); !known {
			continue
		}
		p, err := catalog.Decode(ev.Type, ev.Data)
		if err != nil {
			continue
		}
		switch d := p.(type) {
		case *catalog.RunStarted:
			if o.started == nil {
				o.started = d
			}
		case *catalog.AgentStep:
			if _, dup := o.steps[d.Step]; !dup {
				o.steps[d.Step] = *d
				o.lastStep = max(o.lastStep, d.Step)
			}
		case *catalog.ToolFinished:
			if _, dup := o.results[d.RequestID]; !dup && d.Requester == catalog.RequesterAgent {
				o.results[d.RequestID] = *d
			}
		case *catalog.ModelRequested:
			if d.Scope == catalog.ScopeAgent {
				attempts[fmt.Sprintf("%s\x00%d", d.CallID, d.Attempt)] = *d
				offered = offered || len(d.Tools) > 0
			}
		case *catalog.ModelResponded:
			if _, dup := o.responses[d.CallID]; !dup && d.Scope == catalog.ScopeAgent && d.Error == "" {
				o.responses[d.CallID] = *d
				if q, ok := attempts[fmt.Sprintf("%s\x00%d", d.CallID, d.Attempt)]; ok {
					o.requests[d.CallID] = q
				}
			}
		case *catalog.AuditRequested:
			if o.audited == nil || d.CandidateStep < o.audited.CandidateStep {
				o.audited = d
			}
		}
	}
	if o.started != nil {
		o.requested = o.started.Config.Model.ToolProtocol
		if o.requested == "" {
			o.requested = catalog.ToolProtocolAuto
			if !offered && len(o.requests) > 0 {
				// Recorded before the tool protocols existed: the text
				// protocol (as `vera replay --reexecute` reads it).
				o.requested = catalog.ToolProtocolText
			}
		}
	}
	return o, nil
}

// origin returns the run a fork reproduces, cached in the run's entry.
func (a *Agent) origin(ctx context.Context, e *runEntry, from string) (*forkOrigin, error) {
	if e.origin != nil && e.origin.runID == from {
		return e.origin, nil
	}
	o, err := a.readOrigin(ctx, from)
	if err != nil {
		return nil, err
	}
	e.origin = o
	return o, nil
}

// refusal returns why run runID cannot fork o as fk asks, or "".
func (o *forkOrigin) refusal(runID string, fk catalog.ForkConfig) string {
	switch {
	case fk.From == runID:
		return "a run cannot fork itself"
	case !o.exists:
		return fmt.Sprintf("run %s does not exist", fk.From)
	case o.started == nil:
		return fmt.Sprintf("run %s never started (it has no vera.run.started)", fk.From)
	case fk.AtStep > o.lastStep:
		return fmt.Sprintf("run %s has %d step(s), fewer than %d", fk.From, o.lastStep, fk.AtStep)
	case o.audited != nil && o.audited.CandidateStep <= fk.AtStep:
		k := o.audited.CandidateStep
		return fmt.Sprintf("run %s submitted an answer to the auditor at step %d (audit round %d): a fork must branch before it (at step %d or earlier), since the auditor's replies are not served again",
			fk.From, k, o.audited.Round, k-1)
	}
	return ""
}

func forkLabel(fk catalog.ForkConfig) string {
	return fmt.Sprintf("fork of run %s at step %d", fk.From, fk.AtStep)
}

// forkPrefixID is the id of a fork's vera.fork.prefix: one per run.
func forkPrefixID(v *runView) string {
	return bus.DeriveID(v.runID, v.startedEv.ID, "agent/fork/prefix")
}

// checkFork keeps a fork on its prefix (see "Forks" in the package
// documentation): it refuses a fork that cannot be taken, compares the
// steps and command results recorded so far with the original's, and
// ends the run FAILED at the first divergence. stop is true when the run
// ended.
func (a *Agent) checkFork(ctx context.Context, e *runEntry, v *runView) (stop bool, err error) {
	fk := *v.config().Fork
	o, err := a.origin(ctx, e, fk.From)
	if err != nil {
		return false, err
	}
	v.origin = o
	last := 0
	if l := v.lastStep(); l != nil {
		last = l.data.Step
	}
	if v.forked != nil {
		if v.forked.Reproduced {
			return false, nil
		}
		// Diverged: the run ends FAILED (again, after a crash in between).
		return true, a.finish(ctx, v, catalog.OutcomeFailed, forkFailure(fk, v.forked.Divergence), "", last, v.forkedEv.ID, "agent/fork/run.finished")
	}
	if why := o.refusal(v.runID, fk); why != "" {
		return true, a.finish(ctx, v, catalog.OutcomeFailed, forkLabel(fk)+" refused: "+why, "", last, v.startedEv.ID, "agent/fork/refused")
	}
	d, steps, cmds := comparePrefix(v, o, fk.AtStep)
	if d == nil {
		return false, nil
	}
	return true, a.forkDiverged(ctx, v, fk, *d, steps, cmds)
}

// forkFailure is the reason of a fork whose prefix did not reproduce.
func forkFailure(fk catalog.ForkConfig, d *catalog.ForkDivergence) string {
	if d == nil {
		return forkLabel(fk) + ": the prefix did not reproduce"
	}
	return fmt.Sprintf("%s: the prefix did not reproduce at step %d (%s): %s", forkLabel(fk), d.Step, d.Kind, d.Detail)
}

// forkDiverged publishes vera.fork.prefix (not reproduced) and ends the
// run FAILED.
func (a *Agent) forkDiverged(ctx context.Context, v *runView, fk catalog.ForkConfig, d catalog.ForkDivergence, steps, cmds int) error {
	d.Recorded, d.Replayed = runcompare.Cut(d.Recorded, forkSideCap), runcompare.Cut(d.Replayed, forkSideCap)
	p := catalog.ForkPrefix{From: fk.From, AtStep: fk.AtStep, StepsCompared: steps, CommandsCompared: cmds, Divergence: &d}
	id := forkPrefixID(v)
	if err := a.publish(ctx, v, p, id, v.startedEv.ID); err != nil {
		return err
	}
	a.log().Info("fork diverged from its original", "run", v.runID, "from", fk.From, "at_step", fk.AtStep, "step", d.Step, "kind", d.Kind, "detail", d.Detail)
	last := 0
	if l := v.lastStep(); l != nil {
		last = l.data.Step
	}
	return a.finish(ctx, v, catalog.OutcomeFailed, forkFailure(fk, &d), "", last, id, "agent/fork/run.finished")
}

// comparePrefix compares the run's steps up to atStep, and the results of
// their commands that arrived, with the original's: the first divergence
// (nil when none), and how many steps and results were compared equal.
func comparePrefix(v *runView, o *forkOrigin, atStep int) (d *catalog.ForkDivergence, steps, cmds int) {
	for _, s := range v.steps {
		k := s.data.Step
		if k > atStep {
			break
		}
		want, ok := o.steps[k]
		if !ok {
			return &catalog.ForkDivergence{Step: k, Kind: ForkKindAction, Detail: "the original has no such step", Replayed: runcompare.StepText(s.data)}, steps, cmds
		}
		if diff := runcompare.Steps(want, s.data); diff != "" {
			return &catalog.ForkDivergence{Step: k, Kind: ForkKindAction, Detail: diff, Recorded: runcompare.StepText(want), Replayed: runcompare.StepText(s.data)}, steps, cmds
		}
		steps++
		for _, id := range []string{RequestID(k), AnswerRequestID(k)} {
			got, ok := v.results[id]
			if !ok {
				continue // not arrived yet (or none)
			}
			want, ok := o.results[id]
			if !ok {
				return &catalog.ForkDivergence{Step: k, Kind: ForkKindToolResult, Detail: "the original has no result of request " + id,
					Replayed: runcompare.ResultText(got.data)}, steps, cmds
			}
			if diff := runcompare.Results(want, got.data); diff != "" {
				return &catalog.ForkDivergence{Step: k, Kind: ForkKindToolResult, Detail: diff,
					Recorded: runcompare.ResultText(want), Replayed: runcompare.ResultText(got.data)}, steps, cmds
			}
			cmds++
		}
	}
	return nil, steps, cmds
}

// forkStep takes the fork's part in step n (see "Forks" in the package
// documentation) while its prefix is not settled: at n = AtStep+1 it
// publishes vera.fork.prefix (reproduced; everything before was compared
// by checkFork); at n ≤ AtStep without a recorded reply it compares the
// prompt with the original's and records the original's reply as the
// run's model call. handled false: the step goes on as usual (from the
// recorded reply).
func (a *Agent) forkStep(ctx context.Context, e *runEntry, v *runView, n int, cause bus.Event) (handled, stop bool, err error) {
	fk := v.config().Fork
	if fk == nil || v.forked != nil || v.origin == nil {
		return false, false, nil
	}
	if n > fk.AtStep {
		_, steps, cmds := comparePrefix(v, v.origin, fk.AtStep)
		p := catalog.ForkPrefix{From: fk.From, AtStep: fk.AtStep, Reproduced: true, StepsCompared: steps, CommandsCompared: cmds}
		a.log().Info("fork reproduced its prefix; going on live", "run", v.runID, "from", fk.From, "at_step", fk.AtStep)
		return true, false, a.publish(ctx, v, p, forkPrefixID(v), v.startedEv.ID)
	}
	callID := CallID(n)
	if _, have := v.model[callID]; have {
		return false, false, nil // served before a restart: go on from the recorded reply
	}
	o := v.origin
	resp, okResp := o.responses[callID]
	q, okReq := o.requests[callID]
	if !okResp || !okReq {
		d := catalog.ForkDivergence{Step: n, Kind: ForkKindMissingCall,
			Detail: fmt.Sprintf("the original has no recorded reply (with its prompt) for model call %s", callID)}
		_, steps, cmds := comparePrefix(v, o, fk.AtStep)
		return true, true, a.forkDiverged(ctx, v, *fk, d, steps, cmds)
	}
	want, err := a.recordedPrompt(ctx, q)
	if err != nil {
		return true, false, err
	}
	prompt := toLLM(a.prompt(ctx, v, n))
	if pd, differs := runcompare.Prompts(want, prompt); differs {
		d := catalog.ForkDivergence{Step: n, Kind: ForkKindPrompt, Detail: pd.Detail, Recorded: pd.Recorded, Replayed: pd.Replayed}
		_, steps, cmds := comparePrefix(v, o, fk.AtStep)
		return true, true, a.forkDiverged(ctx, v, *fk, d, steps, cmds)
	}
	reply, err := a.replyFrom(ctx, resp)
	if err != nil {
		return true, false, err
	}
	if err := a.serve(ctx, v, n, cause, q, resp, reply, prompt); err != nil {
		return true, false, err
	}
	if a.afterModel != nil {
		if err := a.afterModel(v.runID, n); err != nil {
			return true, false, err
		}
	}
	// Take the step from the stream as it is now, the served reply
	// recorded, exactly as a worker resuming here would.
	v, err = a.reread(ctx, e, v.runID)
	if err != nil {
		return true, false, err
	}
	if _, ok := v.model[callID]; !ok {
		return true, false, fmt.Errorf("step %d: the original's reply (call %s of run %s) could not be recorded on the bus; the step is retried", n, callID, fk.From)
	}
	return true, false, nil
}

// serve records the original's reply as the run's model call of step n
// through llmbus, as the model client records a live call: a
// vera.model.requested with this run's prompt (the original's model,
// endpoint and sampling, the tools the step's protocol offers) and a
// vera.model.responded with the original's response. The ids derive from
// the step's cause, the run and the call id, as a live call's do, so a
// second worker or a restart records the same pair once.
func (a *Agent) serve(ctx context.Context, v *runView, n int, cause bus.Event, q catalog.ModelRequested, resp catalog.ModelResponded, reply protocol.Reply, prompt []llm.Message) error {
	var failed []error
	rec := llmbus.New(a.Bus, llmbus.Options{Logger: a.log(), OnError: func(err error) { failed = append(failed, err) }})
	cr := llm.CallRecord{
		CallID: CallID(n), RunID: v.runID, Scope: string(catalog.ScopeAgent), Purpose: "step", Step: n, CauseID: cause.ID,
		Model: q.Model, BaseURL: q.BaseURL, Messages: prompt,
		Sampling: llm.Sampling{Temperature: q.Params.Temperature, TopP: q.Params.TopP, MaxTokens: q.Params.MaxTokens,
			Seed: q.Params.Seed, Stop: q.Params.Stop, ExtraBody: q.Params.ExtraBody},
		Stream: q.Params.Stream, Attempt: 1,
	}
	switch v.modeAt(n) {
	case catalog.ToolProtocolNative, catalog.ToolProtocolAuto:
		for _, t := range nativeTools {
			cr.Tools = append(cr.Tools, t.Name)
		}
		cr.ToolChoice = q.ToolChoice
	}
	out := llm.Response{
		Text: reply.Text, Reasoning: reply.Reasoning, ReasoningSource: reply.ReasoningSource,
		FinishReason: reply.FinishReason, Model: resp.Model, Dropped: resp.Dropped, Attempts: 1,
		Usage: llm.Usage{Prompt: resp.Usage.Prompt, Completion: resp.Usage.Completion, Total: resp.Usage.Total,
			Reasoning: resp.Usage.Reasoning, Cached: resp.Usage.Cached},
	}
	for _, tc := range reply.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, llm.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	rec.Requested(ctx, cr)
	cr.HTTPStatus = resp.HTTPStatus
	rec.Responded(ctx, cr, out, nil)
	if len(failed) > 0 {
		return fmt.Errorf("step %d: record the original's reply: %w", n, errors.Join(failed...))
	}
	return nil
}

// recordedPrompt returns the messages of a recorded model request (read
// from their blob when large).
func (a *Agent) recordedPrompt(ctx context.Context, q catalog.ModelRequested) ([]llm.Message, error) {
	msgs := q.Messages
	if q.MessagesBlob != nil {
		data, err := a.Bus.GetBlob(ctx, q.MessagesBlob.Digest)
		if err != nil {
			return nil, fmt.Errorf("read the recorded prompt of %s: %w", q.CallID, err)
		}
		if err := json.Unmarshal(data, &msgs); err != nil {
			return nil, fmt.Errorf("decode the recorded prompt of %s: %w", q.CallID, err)
		}
	}
	out := make([]llm.Message, len(msgs))
	for i, m := range msgs {
		out[i] = llm.Message{Role: string(m.Role), Content: m.Content}
	}
	return out, nil
}

// replyFrom returns a recorded response whole: its text and reasoning
// (read from their blobs when large), its tool calls (their arguments
// likewise), whether the server refused the tools, its finish reason.
func (a *Agent) replyFrom(ctx context.Context, r catalog.ModelResponded) (protocol.Reply, error) {
	out := protocol.Reply{
		Text: r.Text, Reasoning: r.Reasoning, ReasoningSource: r.ReasoningSource,
		ToolsRefused: slices.Contains(r.Dropped, llm.FeatureTools), FinishReason: r.FinishReason,
	}
	if r.TextBlob != nil {
		data, err := a.Bus.GetBlob(ctx, r.TextBlob.Digest)
		if err != nil {
			return protocol.Reply{}, fmt.Errorf("read recorded reply of %s: %w", r.CallID, err)
		}
		out.Text = string(data)
	}
	if r.ReasoningBlob != nil {
		data, err := a.Bus.GetBlob(ctx, r.ReasoningBlob.Digest)
		if err != nil {
			return protocol.Reply{}, fmt.Errorf("read recorded reasoning of %s: %w", r.CallID, err)
		}
		out.Reasoning = string(data)
	}
	out.ToolCalls = slices.Clone(r.ToolCalls)
	for i, tc := range out.ToolCalls {
		if tc.ArgumentsBlob == nil {
			continue
		}
		data, err := a.Bus.GetBlob(ctx, tc.ArgumentsBlob.Digest)
		if err != nil {
			return protocol.Reply{}, fmt.Errorf("read recorded tool call arguments of %s: %w", r.CallID, err)
		}
		out.ToolCalls[i].Arguments, out.ToolCalls[i].ArgumentsBlob = string(data), nil
	}
	return out, nil
}
