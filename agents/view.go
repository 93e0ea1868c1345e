package agents

import (
	"context"
	"fmt"
	"strings"

	"github.com/vera-run/vera/agents/ledger"
	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// stepRec is one recorded vera.agent.step with the policy state folded
// from every event stored before it (what Decide saw).
type stepRec struct {
	ev     bus.Event
	seq    uint64
	data   catalog.AgentStep
	before *ledger.State
}

// auditRec is one vera.audit.requested the agent published.
type auditRec struct {
	ev   bus.Event
	data catalog.AuditRequested
}

// feedbackRec is one vera.audit.feedback of the auditor.
type feedbackRec struct {
	ev   bus.Event
	data catalog.AuditFeedback
}

// finishedRec is one agent vera.tool.finished with its place among the
// run's agent results (1-based: ev_0001 is the first).
type finishedRec struct {
	ev      bus.Event
	data    catalog.ToolFinished
	ordinal int
}

// runView is a run rebuilt from its events: the agent remembers nothing
// else between deliveries.
type runView struct {
	runID string

	submitted   *catalog.TaskSubmitted
	submittedEv bus.Event
	started     *catalog.RunStarted
	startedEv   bus.Event
	finished    *catalog.RunFinished
	cancelled   bool
	lastSeq     uint64 // stream sequence of the last event read (the fence)
	lastSubject string // subject and id of that event (see readInto)
	lastID      string

	ids      map[string]bool // every event id of the run
	steps    []stepRec       // in step order
	byStep   map[int]int     // step → index in steps
	requests map[string]catalog.ToolRequested
	results  map[string]finishedRec // request id → result (first one)
	order    []string               // request ids of agent results in stream order
	evidence map[string]string      // request id → evidence id
	evIDs    map[string]bool        // recorded evidence ids
	notes    []catalog.NotesAppended
	policy   map[int][]catalog.PolicyTriggered
	model    map[string]catalog.ModelResponded // call id → successful agent response
	asked    map[string]bool                   // call id → a vera.model.requested of the agent is stored
	audits   []auditRec                        // the agent's vera.audit.requested, in round order
	judged   map[int]catalog.AuditJudged       // round → the auditor's judgement
	fbByRnd  map[int]feedbackRec               // round → the auditor's feedback
	usage    catalog.TokenUsage
	decision *catalog.AgentProtocol // the auto protocol's decision (the first one stored)
	forked   *catalog.ForkPrefix    // a fork's vera.fork.prefix (the first one stored)
	forkedEv bus.Event
	origin   *forkOrigin // the run a fork reproduces (set by checkFork; not from this run's stream)

	state *ledger.State   // fold of every event
	dirty bool            // the agent published since the read
	sent  map[string]bool // ids the agent published since the read
}

// load reads run runID from the stream and rebuilds its view.
func (a *Agent) load(ctx context.Context, runID string) (*runView, error) {
	v := &runView{
		runID:    runID,
		ids:      map[string]bool{},
		byStep:   map[int]int{},
		requests: map[string]catalog.ToolRequested{},
		results:  map[string]finishedRec{},
		evidence: map[string]string{},
		evIDs:    map[string]bool{},
		policy:   map[int][]catalog.PolicyTriggered{},
		model:    map[string]catalog.ModelResponded{},
		asked:    map[string]bool{},
		judged:   map[int]catalog.AuditJudged{},
		fbByRnd:  map[int]feedbackRec{},
		state:    ledger.NewState(a.cfg.Policy),
	}
	if _, err := a.readInto(ctx, v, 0); err != nil {
		return nil, err
	}
	return v, nil
}

// readInto applies to v the run's events stored from sequence from on.
// With from > 0, from must be v.lastSeq: the first event read must be the
// last one v holds (same sequence, subject and id), which verifies that
// the stream still holds what v was built from; ok is false, and v
// unchanged, when it does not. After an error v may hold part of the new
// events: discard it.
func (a *Agent) readInto(ctx context.Context, v *runView, from uint64) (ok bool, err error) {
	first := from > 0
	for rec, err := range a.Bus.Read(ctx, bus.ReadOptions{RunID: v.runID, FromSeq: from}) {
		if err != nil {
			return false, fmt.Errorf("read run %s: %w", v.runID, err)
		}
		if first {
			first = false
			if rec.Sequence != v.lastSeq || rec.Subject != v.lastSubject || rec.Event.ID != v.lastID {
				return false, nil
			}
			continue
		}
		if rec.Sequence > v.lastSeq {
			v.lastSeq, v.lastSubject, v.lastID = rec.Sequence, rec.Subject, rec.Event.ID
		}
		if rec.Err != nil {
			continue // malformed: the consumers dead-letter it
		}
		ev := rec.Event
		if v.ids[ev.ID] {
			continue
		}
		v.ids[ev.ID] = true
		if _, known := catalog.Lookup(ev.Type); !known {
			continue
		}
		p, err := catalog.Decode(ev.Type, ev.Data)
		if err != nil {
			continue
		}
		v.apply(ev, rec.Sequence, p)
	}
	return !first, nil
}

// applyOwn applies an event the agent just stored at sequence seq, fenced
// on the run at v.lastSeq (so nothing else of the run was stored between),
// exactly as reading it back would: false if it cannot be re-decoded.
func (v *runView) applyOwn(ev bus.Event, seq uint64) bool {
	raw, err := ev.Marshal()
	if err != nil {
		return false
	}
	back, err := bus.ParseEvent(raw)
	if err != nil {
		return false
	}
	subj, err := back.NATSSubject()
	if err != nil {
		return false
	}
	p, err := catalog.Decode(back.Type, back.Data)
	if err != nil {
		return false
	}
	v.lastSeq, v.lastSubject, v.lastID = seq, subj, back.ID
	v.ids[back.ID] = true
	v.apply(back, seq, p)
	return true
}

func (v *runView) apply(ev bus.Event, seq uint64, p catalog.Payload) {
	switch d := p.(type) {
	case *catalog.TaskSubmitted:
		if v.submitted == nil {
			v.submitted, v.submittedEv = d, ev
		}
	case *catalog.RunStarted:
		if v.started == nil {
			v.started, v.startedEv = d, ev
		}
	case *catalog.RunFinished:
		if v.finished == nil {
			v.finished = d
		}
	case *catalog.RunCancelled:
		v.cancelled = true
	case *catalog.ForkPrefix:
		if v.forked == nil {
			v.forked, v.forkedEv = d, ev
		}
	case *catalog.AgentProtocol:
		if v.decision == nil {
			v.decision = d
		}
	case *catalog.AgentStep:
		if _, dup := v.byStep[d.Step]; !dup {
			v.byStep[d.Step] = len(v.steps)
			v.steps = append(v.steps, stepRec{ev: ev, seq: seq, data: *d, before: v.state.Clone()})
		}
	case *catalog.ToolRequested:
		if d.Requester == catalog.RequesterAgent {
			if _, dup := v.requests[d.RequestID]; !dup {
				v.requests[d.RequestID] = *d
			}
		}
	case *catalog.ToolFinished:
		if d.Requester == catalog.RequesterAgent {
			if _, dup := v.results[d.RequestID]; !dup {
				v.order = append(v.order, d.RequestID)
				v.results[d.RequestID] = finishedRec{ev: ev, data: *d, ordinal: len(v.order)}
			}
		}
	case *catalog.EvidenceRecorded:
		if _, dup := v.evidence[d.RequestID]; !dup && d.RequestID != "" {
			v.evidence[d.RequestID] = d.EvidenceID
		}
		v.evIDs[d.EvidenceID] = true
	case *catalog.NotesAppended:
		v.notes = append(v.notes, *d)
	case *catalog.PolicyTriggered:
		v.policy[d.Step] = append(v.policy[d.Step], *d)
	case *catalog.ModelRequested:
		if d.Scope == catalog.ScopeAgent {
			v.asked[d.CallID] = true
		}
	case *catalog.ModelResponded:
		if d.Scope == catalog.ScopeAgent && d.Error == "" {
			if _, dup := v.model[d.CallID]; !dup {
				v.model[d.CallID] = *d
				v.usage.Prompt += d.Usage.Prompt
				v.usage.Completion += d.Usage.Completion
				v.usage.Total += d.Usage.Total
			}
		}
	case *catalog.AuditFeedback:
		if _, dup := v.fbByRnd[d.Round]; !dup {
			v.fbByRnd[d.Round] = feedbackRec{ev: ev, data: *d}
		}
	case *catalog.AuditRequested:
		if d.Round == len(v.audits)+1 {
			v.audits = append(v.audits, auditRec{ev: ev, data: *d})
		}
	case *catalog.AuditJudged:
		if _, dup := v.judged[d.Round]; !dup {
			v.judged[d.Round] = *d
		}
	}
	v.state.Apply(p)
}

// auditOf returns the audit request of the candidate answer of step n.
func (v *runView) auditOf(step int) *auditRec {
	for i := range v.audits {
		if v.audits[i].data.CandidateStep == step {
			return &v.audits[i]
		}
	}
	return nil
}

// pendingFeedback returns the auditor's feedback to the last step when it
// is a submit whose audit was answered but not final: the agent goes on
// with it.
func (v *runView) pendingFeedback() *feedbackRec {
	last := v.lastStep()
	if last == nil || last.data.ActionTool != catalog.ActionSubmit {
		return nil
	}
	ar := v.auditOf(last.data.Step)
	if ar == nil {
		return nil
	}
	fb, ok := v.fbByRnd[ar.data.Round]
	if !ok || fb.data.Final || fb.data.Accepted {
		return nil
	}
	return &fb
}

// lastStep returns the last recorded step, or nil before the first.
func (v *runView) lastStep() *stepRec {
	if len(v.steps) == 0 {
		return nil
	}
	return &v.steps[len(v.steps)-1]
}

// config returns the run's effective configuration.
func (v *runView) config() catalog.RunConfig {
	if v.started != nil {
		return v.started.Config
	}
	if v.submitted != nil {
		return v.submitted.RunConfig
	}
	return catalog.RunConfig{}
}

// requested returns the run's tool protocol setting (auto when empty).
func (v *runView) requested() catalog.ToolProtocol {
	if p := v.config().Model.ToolProtocol; p != "" {
		return p
	}
	return catalog.ToolProtocolAuto
}

// requestedAt returns the tool protocol setting step n is taken with:
// the run's own (requested), but for the prefix of a fork (n ≤ AtStep),
// which is rendered and parsed with the original's setting.
func (v *runView) requestedAt(n int) catalog.ToolProtocol {
	if fk := v.config().Fork; fk != nil && n <= fk.AtStep && v.origin != nil && v.origin.started != nil {
		return v.origin.requested
	}
	return v.requested()
}

// modeAt returns how the reply of step n is read: the setting of step n
// (requestedAt: text, native), or for auto the decision recorded at or
// before step n, else auto (not decided yet).
func (v *runView) modeAt(n int) catalog.ToolProtocol {
	p := v.requestedAt(n)
	if p == catalog.ToolProtocolAuto && v.decision != nil && v.decision.Step <= n {
		return v.decision.Protocol
	}
	return p
}

// unusableStreak reports whether step last ends a run of
// protocol.UnusableLimit steps in a row with the same unusable-reply
// error (the same code and message).
func (v *runView) unusableStreak(last *stepRec) bool {
	fe := last.data.FormatError
	if fe == "" || !protocol.SummaryCode(fe).Unusable() {
		return false
	}
	n := 0
	for i := v.byStep[last.data.Step]; i >= 0 && n < protocol.UnusableLimit; i-- {
		if v.steps[i].data.FormatError != fe {
			break
		}
		n++
	}
	return n >= protocol.UnusableLimit
}

// notesSplit is notes.md as the projector writes it (every append
// verbatim, each followed by a newline) in two parts: the appends made
// before step since (all of them when since is 0), and those made at it
// or later.
func (v *runView) notesSplit(since int) (pinned, recent string) {
	var p, r strings.Builder
	for _, n := range v.notes {
		b := &p
		if since > 0 && n.Step >= since {
			b = &r
		}
		b.WriteString(n.Text)
		b.WriteByte('\n')
	}
	return p.String(), r.String()
}

// shellEnv returns the cwd, environment and shell state of the next
// agent command: the cwd_after of the last agent result that reported
// one, the exports of every earlier one (later ones winning), and the
// shell_state_after of the last result that reported one. The reads of
// answer files are left out: they run in a fresh shell of their own.
func (v *runView) shellEnv() (cwd string, env map[string]string, shellState string) {
	for _, id := range v.order {
		if IsAnswerRead(id) {
			continue
		}
		r := v.results[id].data
		if r.CwdAfter != "" {
			cwd = r.CwdAfter
		}
		if r.ShellStateAfter != "" {
			shellState = r.ShellStateAfter
		}
		for k, val := range r.Exports {
			if env == nil {
				env = map[string]string{}
			}
			env[k] = val
		}
	}
	return cwd, env, shellState
}
