package agents

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/vera-run/vera/agents/ledger"
	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
)

// excerptCap bounds the excerpt of an evidence line.
const (
	excerptCap      = 1000
	answerInlineMax = 64 << 10 // bigger answers go to a blob
)

// next rebuilds run runID and takes its next decision. done is true when
// the run needs nothing more until a new event arrives.
func (a *Agent) next(ctx context.Context, e *runEntry, runID string) (done bool, err error) {
	v, err := a.refresh(ctx, e, runID)
	if err != nil {
		return false, err
	}
	if v.submitted == nil || v.finished != nil || v.cancelled {
		return true, nil
	}
	if v.started == nil {
		if err := v.submitted.RunConfig.ValidateSecrets(); err != nil {
			// A key pasted where its variable's name belongs, or a
			// password in a URL: never echoed into vera.run.started, and
			// never used. The reason does not quote the value.
			return true, a.finish(ctx, v, catalog.OutcomeFailed, "task refused: "+err.Error(), "", 0, v.submittedEv.ID, "agent/refused")
		}
		// An API key variable this agent's operator did not allow
		// (--allow-api-key-env): the model factory refuses it without
		// reading it, and the run is refused before it starts. Other
		// client errors (a variable not set) end the run at its first
		// step, as before.
		if _, err := a.model(v.runID, v.submitted.RunConfig.Model); errors.Is(err, llm.ErrKeyEnvNotAllowed) {
			return true, a.finish(ctx, v, catalog.OutcomeFailed, "task refused: model: "+err.Error(), "", 0, v.submittedEv.ID, "agent/refused")
		}
		return false, a.start(ctx, v)
	}
	if v.config().Fork != nil {
		if stop, err := a.checkFork(ctx, e, v); err != nil || stop {
			return true, err
		}
	}
	if n, err := a.recordEvidence(ctx, v); err != nil || n > 0 {
		return false, err
	}
	last := v.lastStep()
	if last != nil {
		stop, err := a.complete(ctx, v, last)
		if err != nil || stop {
			return true, err
		}
		if v.dirty {
			return false, nil // re-read what was just published
		}
	}
	return a.takeStep(ctx, e, v)
}

// start publishes vera.run.started with the effective configuration. It
// is fenced on its own subject (no run.started yet) and its id derives
// from the task, so exactly one is stored.
func (a *Agent) start(ctx context.Context, v *runView) error {
	cfg := v.submitted.RunConfig
	if cfg.Sandbox.ToolTimeoutMS == 0 {
		cfg.Sandbox.ToolTimeoutMS = DefaultToolTimeoutMS
	}
	st := ledger.NewState(a.cfg.Policy)
	st.Apply(v.submitted)
	pol := st.Policy()
	fill := func(dst *int, val int) {
		if *dst == 0 && val > 0 {
			*dst = val
		}
	}
	fill(&cfg.Policy.NotesInterval, pol.NotesInterval)
	fill(&cfg.Policy.StagnationLimit, pol.StagnationLimit)
	fill(&cfg.Policy.FailureEscalationLimit, pol.FailureEscalationLimit)
	fill(&cfg.Policy.QueryFamilyLimit, pol.QueryFamilyLimit)
	if cfg.Auditor.Enabled {
		fill(&cfg.Auditor.MaxRounds, DefaultAuditRounds)
		fill(&cfg.Auditor.StopScore, DefaultAuditStopScore)
	}
	// The system prompt in force, by digest (the same text, the same blob).
	sys, err := a.Bus.PutBlob(ctx, []byte(protocol.SystemPromptFor(cfg.Model.ToolProtocol)), "text/plain; charset=utf-8")
	if err != nil {
		return fmt.Errorf("store the system prompt: %w", err)
	}
	sys.Name = "system_prompt.txt"
	p := catalog.RunStarted{AgentID: a.cfg.ID, Version: a.cfg.Version, Config: cfg, SystemPrompt: &sys}
	id := bus.DeriveID(v.runID, v.submittedEv.ID, "agent/run.started")
	return a.publish(ctx, v, p, id, v.submittedEv.ID, bus.ExpectLastSequence("", 0))
}

// recordEvidence publishes the evidence and ledger lines of every agent
// tool result that has none yet; it returns how many results it handled.
// Evidence ids number the agent's results in stream order, so a replay
// numbers them the same.
func (a *Agent) recordEvidence(ctx context.Context, v *runView) (int, error) {
	n := 0
	for _, reqID := range v.order {
		r := v.results[reqID]
		moveID, queryID := bus.DeriveID(v.runID, r.ev.ID, "agent/ledger.move"), bus.DeriveID(v.runID, r.ev.ID, "agent/ledger.query")
		if evID, ok := v.evidence[reqID]; ok {
			// Its ledger lines follow the evidence in separate fenced
			// publishes: a lost race between them leaves them to do.
			if v.ids[moveID] && v.ids[queryID] {
				continue
			}
			if err := a.recordLedgerLines(ctx, v, reqID, evID, r.ev.ID, moveID, queryID); err != nil {
				return n, err
			}
			continue
		}
		req := v.requests[reqID]
		evID := protocol.FormatEvidenceID(r.ordinal)
		e := catalog.EvidenceRecorded{
			EvidenceID: evID,
			RequestID:  reqID,
			Step:       req.Step,
			Command:    req.Command,
			ExitCode:   r.data.ExitCode,
			Excerpt:    excerpt(r.data),
			URLs:       ledger.URLs(req.Command),
			OutputBlob: r.data.Stdout.Blob,
		}
		if err := a.publish(ctx, v, e, bus.DeriveID(v.runID, r.ev.ID, "agent/evidence"), r.ev.ID); err != nil {
			return n, err
		}
		if a.beforeLedger != nil {
			a.beforeLedger(v.runID, reqID)
		}
		if err := a.recordLedgerLines(ctx, v, reqID, evID, r.ev.ID, moveID, queryID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// recordLedgerLines publishes the move and query ledger lines of a
// result whose evidence is evID, those the run does not hold yet.
func (a *Agent) recordLedgerLines(ctx context.Context, v *runView, reqID, evID, cause, moveID, queryID string) error {
	if m, ok := v.state.MoveLine(reqID); ok && !v.ids[moveID] {
		m.EvidenceID = evID
		if err := a.publish(ctx, v, m, moveID, cause); err != nil {
			return err
		}
	}
	if q, ok := v.state.QueryLine(reqID); ok && !v.ids[queryID] {
		q.EvidenceID = evID
		if err := a.publish(ctx, v, q, queryID, cause); err != nil {
			return err
		}
	}
	return nil
}

// excerpt is the quotable part of a result: its stdout (else stderr),
// trimmed and capped.
func excerpt(f catalog.ToolFinished) string {
	out := f.Stdout
	if strings.TrimSpace(out.Head) == "" && out.Encoding == "" {
		out = f.Stderr
	}
	if out.Encoding != "" {
		return ""
	}
	text := strings.TrimSpace(out.Head)
	if out.Truncated {
		text += "\n[...]\n" + strings.TrimSpace(out.Tail)
	}
	return protocol.CapText(text, excerptCap)
}

// complete publishes what the recorded step last still lacks (its policy
// events, its tool request, notes append or end of run), each once: the
// ids derive from the step event. stop is true when the run ended or
// waits for the step's tool result.
func (a *Agent) complete(ctx context.Context, v *runView, last *stepRec) (stop bool, err error) {
	st := last.data
	ts := ledger.Decide(*last.before, ledger.ProposedFrom(st))
	eff := ledger.Summarize(ts)
	cause := last.ev.ID
	for _, t := range ts {
		if err := a.publish(ctx, v, t, bus.DeriveID(v.runID, cause, "agent/policy/"+t.Rule), cause); err != nil {
			return false, err
		}
	}
	switch {
	case eff.Conclude:
		return true, a.finish(ctx, v, catalog.OutcomeUnresolved, eff.Reason, "", st.Step, cause, "agent/run.finished")
	case eff.Stop:
		reason := "finalization stop: " + strings.Join(eff.Messages, " ")
		return true, a.finish(ctx, v, catalog.OutcomeUnresolved, strings.TrimSpace(reason), "", st.Step, cause, "agent/run.finished")
	case st.FormatError != "":
		if v.unusableStreak(last) {
			reason := fmt.Sprintf("the model's last %d replies were unusable, each the same format error: %s", protocol.UnusableLimit, st.FormatError)
			return true, a.finish(ctx, v, catalog.OutcomeUnresolved, reason, "", st.Step, cause, "agent/run.finished/unusable")
		}
		return false, nil
	}
	switch st.ActionTool {
	case catalog.ActionShell, catalog.ActionEdit:
		if st.RequestID == "" { // refused by a gate
			m := ledger.BlockedMove(st.Step, st.Command)
			if st.ActionTool == catalog.ActionEdit && st.Edit != nil {
				m = ledger.BlockedEditMove(st.Step, st.Command, *st.Edit)
			}
			return false, a.publish(ctx, v, m, bus.DeriveID(v.runID, cause, "agent/ledger.move"), cause)
		}
		if _, ok := v.requests[st.RequestID]; !ok {
			cfg := v.config()
			cwd, env, shellState := v.shellEnv()
			req := catalog.ToolRequested{
				RequestID:  st.RequestID,
				Requester:  catalog.RequesterAgent,
				Tool:       catalog.ToolShell,
				Command:    st.Command,
				Cwd:        cwd,
				Env:        env,
				ShellState: shellState,
				TimeoutMS:  cfg.Sandbox.ToolTimeoutMS,
				Step:       st.Step,
			}
			if st.ActionTool == catalog.ActionEdit {
				req.Tool, req.Edit = catalog.ToolEdit, st.Edit
			}
			if req.TimeoutMS <= 0 {
				req.TimeoutMS = DefaultToolTimeoutMS
			}
			if err := a.publish(ctx, v, req, bus.DeriveID(v.runID, cause, "agent/tool.requested"), cause); err != nil {
				return false, err
			}
		}
		_, have := v.results[st.RequestID]
		return !have, nil
	case catalog.ActionNotesAppend:
		if eff.Block || strings.TrimSpace(st.NotesText) == "" {
			return false, nil
		}
		n := catalog.NotesAppended{Step: st.Step, Author: catalog.AuthorAgent, Text: st.NotesText, EvidenceIDs: st.EvidenceUsed}
		return false, a.publish(ctx, v, n, bus.DeriveID(v.runID, cause, "agent/notes.appended"), cause)
	case catalog.ActionSubmit:
		if eff.Block {
			return false, nil
		}
		if st.AnswerFile != "" && st.AnswerSHA256 == "" {
			return false, nil // the answer file could not be read: the model sees why and goes on
		}
		if !v.config().Auditor.Enabled {
			answer, err := a.stepAnswer(ctx, st)
			if err != nil {
				return false, err
			}
			return true, a.finish(ctx, v, catalog.OutcomeResolved, "", answer, st.Step, cause, "agent/run.finished",
				withAnswerFile(st.AnswerFile, st.AnswerSHA256))
		}
		return a.audit(ctx, v, last)
	}
	return false, nil
}

// stepAnswer returns the answer a submit step proposes: inline, or read
// from its blob (a large answer file).
func (a *Agent) stepAnswer(ctx context.Context, st catalog.AgentStep) (string, error) {
	if st.AnswerBlob == nil {
		return st.Answer, nil
	}
	data, err := a.Bus.GetBlob(ctx, st.AnswerBlob.Digest)
	if err != nil {
		return "", fmt.Errorf("read the answer of step %d: %w", st.Step, err)
	}
	return string(data), nil
}

// audit runs the agent's side of the verifier loop for the submit step
// last: the answer is a proposal. It publishes vera.audit.requested for the
// next round and waits for the auditor's vera.audit.feedback; an accepted
// answer finishes the run RESOLVED; a final rejection finishes it
// UNRESOLVED with the best-scored round's answer; any other feedback lets
// the agent go on (stop false): the next step's prompt carries the
// feedback message.
func (a *Agent) audit(ctx context.Context, v *runView, last *stepRec) (stop bool, err error) {
	st := last.data
	cause := last.ev.ID
	ar := v.auditOf(st.Step)
	if ar == nil {
		req := catalog.AuditRequested{
			Round:         len(v.audits) + 1,
			CandidateStep: st.Step,
			EvidenceIDs:   st.EvidenceUsed,
			ToolCalls:     len(v.order),
			AnswerFile:    st.AnswerFile,
			AnswerSHA256:  st.AnswerSHA256,
		}
		if st.AnswerBlob != nil {
			ref := *st.AnswerBlob
			req.AnswerBlob = &ref
		} else if len(st.Answer) > answerInlineMax {
			ref, err := a.Bus.PutBlob(ctx, []byte(st.Answer), "text/plain; charset=utf-8")
			if err != nil {
				return false, err
			}
			ref.Name = "answer.txt"
			req.AnswerBlob = &ref
		} else {
			req.Answer = st.Answer
		}
		return true, a.publish(ctx, v, req, bus.DeriveID(v.runID, cause, "agent/audit.requested"), cause)
	}
	fb, ok := v.fbByRnd[ar.data.Round]
	if !ok {
		return true, nil // waiting for the auditor
	}
	fcause := fb.ev.ID
	switch {
	case fb.data.Accepted:
		answer, err := a.stepAnswer(ctx, st)
		if err != nil {
			return false, err
		}
		return true, a.finish(ctx, v, catalog.OutcomeResolved, "", answer, st.Step, fcause, "agent/run.finished",
			withBest(ar.data.Round, fb.data.Score), withAnswerFile(st.AnswerFile, st.AnswerSHA256))
	case fb.data.Final:
		best, score := ar.data.Round, fb.data.Score
		if j, ok := v.judged[ar.data.Round]; ok && j.BestRound > 0 {
			best, score = j.BestRound, j.BestScore
		}
		kept := ar.data
		if best != ar.data.Round && best <= len(v.audits) {
			kept = v.audits[best-1].data
		}
		answer, err := a.auditAnswer(ctx, kept)
		if err != nil {
			return false, err
		}
		reason := fmt.Sprintf("the auditor did not accept an answer in %d round(s): best score %d/4, round %d's answer kept", ar.data.Round, score, best)
		return true, a.finish(ctx, v, catalog.OutcomeUnresolved, reason, answer, st.Step, fcause, "agent/run.finished",
			withBest(best, score), withAnswerFile(kept.AnswerFile, kept.AnswerSHA256))
	}
	return false, nil
}

// auditAnswer returns the candidate answer of an audit request.
func (a *Agent) auditAnswer(ctx context.Context, r catalog.AuditRequested) (string, error) {
	if r.AnswerBlob == nil {
		return r.Answer, nil
	}
	data, err := a.Bus.GetBlob(ctx, r.AnswerBlob.Digest)
	if err != nil {
		return "", fmt.Errorf("read the answer of audit round %d: %w", r.Round, err)
	}
	return string(data), nil
}

// finishOption completes a vera.run.finished, or how it is published.
type finishOption struct {
	best    func(*catalog.RunFinished)
	publish bus.PublishOption
}

// withBest records the audit round whose answer the run keeps.
func withBest(round, score int) finishOption {
	return finishOption{best: func(p *catalog.RunFinished) { p.BestAuditRound, p.BestScore = round, score }}
}

// withAnswerFile records the file the run's answer was read from, and
// its digest (nothing when file is empty).
func withAnswerFile(file, sha string) finishOption {
	return finishOption{best: func(p *catalog.RunFinished) { p.AnswerFile, p.AnswerSHA256 = file, sha }}
}

// fenced publishes the end of the run fenced on the run (see Agent.fence).
func fenced(o bus.PublishOption) finishOption { return finishOption{publish: o} }

// finish publishes vera.run.finished with an id derived from cause.
func (a *Agent) finish(ctx context.Context, v *runView, outcome catalog.Outcome, reason, answer string, steps int, cause, purpose string, fos ...finishOption) error {
	p := catalog.RunFinished{Outcome: outcome, Reason: reason, Steps: steps, Usage: v.usage}
	var opts []bus.PublishOption
	for _, o := range fos {
		if o.best != nil {
			o.best(&p)
		}
		if o.publish != nil {
			opts = append(opts, o.publish)
		}
	}
	if v.started != nil {
		if d := a.Bus.Options().Clock.Now().Sub(v.startedEv.Time); d > 0 {
			p.DurationMS = d.Milliseconds()
		}
	}
	if len(answer) > answerInlineMax {
		ref, err := a.Bus.PutBlob(ctx, []byte(answer), "text/plain; charset=utf-8")
		if err != nil {
			return err
		}
		ref.Name = "answer.txt"
		p.AnswerBlob = &ref
	} else {
		p.Answer = answer
	}
	return a.publish(ctx, v, p, bus.DeriveID(v.runID, cause, purpose), cause, opts...)
}

// takeStep decides the next step: the budget, the model call (or the
// recorded reply of an earlier attempt), the parse and the policy, then
// publishes vera.agent.step fenced on the run.
func (a *Agent) takeStep(ctx context.Context, e *runEntry, v *runView) (bool, error) {
	last := v.lastStep()
	n, cause := 1, v.startedEv
	if last != nil {
		n, cause = last.data.Step+1, last.ev
		if r, ok := v.results[last.data.RequestID]; ok && last.data.RequestID != "" {
			cause = r.ev
		}
		if fb := v.pendingFeedback(); fb != nil {
			cause = fb.ev
		}
	}
	cfg := v.config()
	if cfg.MaxSteps > 0 && n > cfg.MaxSteps {
		return true, a.finish(ctx, v, catalog.OutcomeUnresolved, "step budget exhausted", "", n-1, cause.ID, "agent/run.finished/budget", fenced(a.fence(v)))
	}

	callID := CallID(n)
	if handled, stop, err := a.forkStep(ctx, e, v, n, cause); handled || err != nil {
		return stop, err
	}
	mode := v.modeAt(n)
	reply, ok, err := a.recorded(ctx, v, callID)
	if err != nil {
		return false, err
	}
	if !ok {
		client, err := a.model(v.runID, cfg.Model)
		if err != nil {
			return true, a.finish(ctx, v, catalog.OutcomeFailed, "model client: "+err.Error(), "", n-1, cause.ID, "agent/run.finished/failed", fenced(a.fence(v)))
		}
		req := llm.Request{
			Model:    cfg.Model.Name,
			Messages: toLLM(a.prompt(ctx, v, n)),
			Sampling: llmbus.Sampling(cfg.Model),
			RunID:    v.runID,
			Scope:    string(catalog.ScopeAgent),
			Step:     n,
			CallID:   callID,
			Purpose:  "step",
			CauseID:  cause.ID,
		}
		switch mode {
		case catalog.ToolProtocolNative:
			req.Tools = nativeTools
		case catalog.ToolProtocolAuto:
			req.Tools, req.Optional = nativeTools, true
		}
		if a.cfg.Deltas != nil {
			req.OnDelta = a.cfg.Deltas(v.runID, n, callID)
		}
		resp, err := client.Complete(ctx, req)
		if req.OnDelta != nil {
			req.OnDelta(llm.Delta{}) // the end of the reply, for live viewers
		}
		if callErr := err; callErr != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			// Fence on the stream as it is now, the failed attempts'
			// events included.
			v, err = a.reread(ctx, e, v.runID)
			if err != nil {
				return false, err
			}
			if l := v.lastStep(); v.finished != nil || (l != nil && l.data.Step >= n) {
				return false, nil
			}
			reason := "model call failed: " + callErr.Error()
			if mode == catalog.ToolProtocolNative && llm.RefusesFeature(callErr, llm.FeatureTools) {
				reason += " (the server seems to refuse native tools: run with --tool-protocol text or auto)"
			}
			return true, a.finish(ctx, v, catalog.OutcomeFailed, reason, "", n-1, cause.ID, "agent/run.finished/failed", fenced(a.fence(v)))
		}
		if a.afterModel != nil {
			if err := a.afterModel(v.runID, n); err != nil {
				return false, err
			}
		}
		// Decide from the stream as it is now (the recorded response
		// included), exactly as a worker resuming here would.
		v, err = a.reread(ctx, e, v.runID)
		if err != nil {
			return false, err
		}
		if l := v.lastStep(); v.finished != nil || (l != nil && l.data.Step >= n) {
			return false, nil // someone else went on
		}
		mode = v.modeAt(n)
		switch r, ok, err := a.recorded(ctx, v, callID); {
		case err != nil:
			return false, err
		case ok:
			reply = r
		case v.asked[callID]:
			// The client records its calls, and this reply's record was
			// not stored (the bus refused it beyond its publish budget).
			// A step taken from it would rest on a reply nobody can see
			// or replay: fail, and the redelivered step calls again.
			return false, fmt.Errorf("step %d: the model's reply (call %s) could not be recorded on the bus; the step is retried", n, callID)
		default:
			reply = replyOf(resp) // the client records nothing
		}
	}

	// tool_protocol auto: the first reply that shows which protocol works
	// decides, once; the decision is stored before the step it comes
	// from (a restart reads it back: modeAt).
	if mode == catalog.ToolProtocolAuto {
		if p, why, ok := protocol.Decide(reply); ok {
			d := catalog.AgentProtocol{Requested: catalog.ToolProtocolAuto, Protocol: p, Reason: why, Step: n, ModelCallID: callID}
			if err := a.publish(ctx, v, d, bus.DeriveID(v.runID, cause.ID, fmt.Sprintf("agent/protocol/%d", n)), cause.ID); err != nil {
				return false, err
			}
			mode = p
		}
	}

	step := a.parseStep(v, n, mode, reply)
	if step.FormatError == "" && step.ActionTool == catalog.ActionSubmit && step.AnswerFile != "" {
		// The answer is the file's content: read it first, so that the
		// step records the answer and its digest (see readAnswerFile).
		if wait, err := a.readAnswerFile(ctx, v, &step, cause.ID); wait || err != nil {
			return wait, err
		}
	}
	eff := ledger.Summarize(ledger.Decide(*v.state, ledger.ProposedFrom(step)))
	if step.FormatError == "" && (step.ActionTool == catalog.ActionShell || step.ActionTool == catalog.ActionEdit) && !eff.Block {
		step.RequestID = RequestID(n)
	}
	id := bus.DeriveID(v.runID, cause.ID, fmt.Sprintf("agent/step/%d", n))
	return false, a.publish(ctx, v, step, id, cause.ID) // fenced on the run
}

// recorded returns the reply of a successful recorded agent model call,
// whole: its text and reasoning (read from their blobs when large), its
// tool calls, whether the server refused the tools, its finish reason. A
// restarted agent and a replay parse exactly what the live agent parsed.
func (a *Agent) recorded(ctx context.Context, v *runView, callID string) (protocol.Reply, bool, error) {
	r, ok := v.model[callID]
	if !ok {
		return protocol.Reply{}, false, nil
	}
	out, err := a.replyFrom(ctx, r)
	if err != nil {
		return protocol.Reply{}, false, err
	}
	return out, true, nil
}

// replyOf is the reply of a response that was not recorded.
func replyOf(resp llm.Response) protocol.Reply {
	out := protocol.Reply{Text: resp.Text, Reasoning: resp.Reasoning, ReasoningSource: resp.ReasoningSource,
		ToolsRefused: slices.Contains(resp.Dropped, llm.FeatureTools), FinishReason: resp.FinishReason}
	for _, tc := range resp.ToolCalls {
		out.ToolCalls = append(out.ToolCalls, catalog.ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	}
	return out
}

// nativeTools are the agent's tools as offered to the model.
var nativeTools = func() []llm.Tool {
	var out []llm.Tool
	for _, t := range protocol.Tools() {
		out = append(out, llm.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return out
}()

// parseStep turns a model reply, read with protocol mode, into the step
// event.
func (a *Agent) parseStep(v *runView, n int, mode catalog.ToolProtocol, reply protocol.Reply) catalog.AgentStep {
	turn, errs := protocol.ParseReply(mode, reply)
	st := catalog.AgentStep{
		Step:         n,
		Thought:      turn.Thought,
		Action:       turn.Action.Raw,
		StatusUpdate: turn.StatusUpdate.String(),
		ModelCallID:  CallID(n),
		Protocol:     turn.Protocol,
		ToolCallID:   turn.ToolCallID,
	}
	for _, id := range turn.EvidenceUsed {
		if v.evIDs[id] {
			st.EvidenceUsed = append(st.EvidenceUsed, id)
		} else {
			st.UnknownEvidence = append(st.UnknownEvidence, id)
		}
	}
	if len(errs) > 0 {
		st.FormatError = protocol.Summary(errs)
		return st
	}
	st.ActionTool = turn.Action.Tool
	switch turn.Action.Tool {
	case catalog.ActionShell:
		st.Command = turn.Action.Cmd
	case catalog.ActionNotesAppend:
		st.NotesText = turn.Action.Text
	case catalog.ActionEdit:
		st.Edit = turn.Action.Edit
		st.Command = protocol.EditSummary(*turn.Action.Edit)
	case catalog.ActionSubmit:
		st.Answer = turn.Action.Answer
		st.AnswerFile = turn.Action.AnswerFile
	}
	return st
}

// prompt assembles the messages of step n from the run's events.
func (a *Agent) prompt(ctx context.Context, v *runView, n int) []protocol.Message {
	c := protocol.Context{
		SystemPrompt:    protocol.SystemPromptFor(v.requestedAt(n)),
		Task:            v.config().Task,
		OpenConstraints: v.state.OpenConstraints(),
	}
	for _, s := range v.steps {
		c.Tail = append(c.Tail, protocol.TailEntry{Step: s.data.Step, Action: tailAction(s.data), Observation: v.observation(s.data)})
	}
	// Notes written since the first step the tail shows come after the
	// tail, so that the prompt only grows at its end while the tail's
	// page lasts; they join the pinned notes when the page turns.
	since := 0
	if i := protocol.TailStart(len(c.Tail), a.cfg.Context); i < len(c.Tail) {
		since = c.Tail[i].Step
	}
	c.Notes, c.NewNotes = v.notesSplit(since)
	if c.NewNotes != "" {
		c.NewNotesSince = since
	}
	var fb []string
	if last := v.lastStep(); last != nil {
		if last.data.FormatError != "" {
			fb = append(fb, a.formatFeedback(ctx, v, last.data, n))
		} else if notice := a.notice(ctx, v, last.data); notice != "" {
			fb = append(fb, notice)
		}
		for _, p := range v.policy[last.data.Step] {
			if p.Message != "" {
				fb = append(fb, p.Message)
			}
		}
		if f := v.pendingFeedback(); f != nil {
			msg := f.data.Message
			if msg == "" {
				msg = fmt.Sprintf("AUDITOR FEEDBACK (round %d): score %d/4, not accepted.\n%s", f.data.Round, f.data.Score, strings.Join(f.data.Instructions, "\n"))
			}
			fb = append(fb, msg)
		}
	}
	c.Feedback = strings.Join(fb, "\n\n")
	return protocol.Build(c, a.cfg.Context)
}

// formatFeedback re-parses the recorded reply of a step with a format
// error to render the full feedback for step n (its reminder shows the
// protocol of step n); the step's summary is the fallback.
func (a *Agent) formatFeedback(ctx context.Context, v *runView, st catalog.AgentStep, n int) string {
	if reply, ok, err := a.recorded(ctx, v, st.ModelCallID); err == nil && ok {
		if _, errs := protocol.ParseReply(v.modeAt(st.Step), reply); len(errs) > 0 {
			return protocol.FeedbackFor(v.modeAt(n), errs)
		}
	}
	return "FORMAT ERROR: your previous reply was not executed (no tool ran): " + st.FormatError
}

// notice returns what the model should know about the part of step st's
// reply that was ignored (a text action beside the tool call that ran, a
// tool call beside the text that was read), or "".
func (a *Agent) notice(ctx context.Context, v *runView, st catalog.AgentStep) string {
	r, ok := v.model[st.ModelCallID]
	if !ok {
		return ""
	}
	native := st.Protocol == catalog.ToolProtocolNative && (strings.TrimSpace(r.Text) != "" || r.TextBlob != nil)
	text := st.Protocol != catalog.ToolProtocolNative && len(r.ToolCalls) > 0
	if !native && !text {
		return "" // nothing beside the part that was read: no need to read it again
	}
	reply, ok, err := a.recorded(ctx, v, st.ModelCallID)
	if err != nil || !ok {
		return ""
	}
	turn, _ := protocol.ParseReply(v.modeAt(st.Step), reply)
	return turn.Notice
}

func tailAction(st catalog.AgentStep) string {
	if st.Action != "" {
		return st.Action
	}
	if st.FormatError != "" {
		return "(format error)"
	}
	return ""
}

// observation renders what came of a step for the action tail.
func (v *runView) observation(st catalog.AgentStep) string {
	if st.FormatError != "" {
		return "(format error, nothing ran: " + st.FormatError + ")"
	}
	switch st.ActionTool {
	case catalog.ActionShell, catalog.ActionEdit:
		if st.RequestID == "" {
			return "(not run: refused by the policy layer, see FEEDBACK)"
		}
		r, ok := v.results[st.RequestID]
		if !ok {
			return "(pending)"
		}
		return protocol.RenderObservation(v.evidence[st.RequestID], r.data)
	case catalog.ActionNotesAppend:
		for _, nt := range v.notes {
			if nt.Step == st.Step && nt.Author == catalog.AuthorAgent {
				return "(appended to notes.md)"
			}
		}
		return "(not appended: refused by the policy layer)"
	case catalog.ActionSubmit:
		if st.AnswerFile == "" {
			return "(answer submitted)"
		}
		r, ok := v.results[st.RequestID]
		if !ok {
			return "(pending: reading " + st.AnswerFile + ")"
		}
		if st.AnswerSHA256 == "" {
			problem := answerProblem(st.AnswerFile, r.data)
			if problem == "" {
				problem = "its content could not be read whole as UTF-8 text"
			}
			return "(answer NOT submitted: " + problem + ". Fix the file, then submit again.)\n" +
				protocol.RenderObservation(v.evidence[st.RequestID], r.data)
		}
		size := r.data.Stdout.Bytes
		return fmt.Sprintf("(answer submitted: the %d bytes of %s, sha256 %s, read as evidence %s)", size, st.AnswerFile, st.AnswerSHA256, v.evidence[st.RequestID])
	}
	return ""
}

func toLLM(ms []protocol.Message) []llm.Message {
	out := make([]llm.Message, len(ms))
	for i, m := range ms {
		out[i] = llm.Message{Role: string(m.Role), Content: m.Content}
	}
	return out
}

// model returns the cached client of a model configuration.
func (a *Agent) model(runID string, mc catalog.ModelConfig) (llm.Completer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.clients[mc.ClientKey()]; ok {
		return c, nil
	}
	c, err := a.cfg.Models(runID, mc)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, errors.New("no model client")
	}
	if a.clients == nil {
		a.clients = map[string]llm.Completer{}
	}
	a.clients[mc.ClientKey()] = c
	return c, nil
}
