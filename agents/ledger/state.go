package ledger

import (
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

// State is the fold of a run's events that the ledgers and the policy
// rules read. It remembers nothing the stream does not say: rebuilt by
// applying the same events in the same order, it is the same, and so are
// the decisions taken from it.
//
// Apply folds (as values or pointers, as catalog.Decode returns them):
//
//   - vera.task.submitted and vera.run.started: the task (negative-claim
//     detection, claim subjects) and the run's PolicyConfig (run.started
//     wins);
//   - vera.agent.step: steps, statuses, format errors, submits, the tool
//     request of a shell action;
//   - vera.tool.requested (requester agent): the command of a request;
//   - vera.tool.finished (requester agent): outcome, failure type, the
//     move- and query-ledger lines, the negative-claim domains;
//   - vera.evidence.recorded: new evidence (exit 0, a non-empty excerpt
//     not seen before in the run) resets the stagnation count;
//   - vera.model.responded (scope agent, no error): finish_reason=length
//     streaks;
//   - vera.logic.verdict: a thinking_eval of 0 since the last step;
//   - vera.notes.appended (author agent): the last notes step;
//   - vera.policy.choice: the options offered.
//
// Other events are ignored, the ledger events included (they are derived
// from this fold). Apply is idempotent per event: a redelivered step,
// request, result, evidence, model response or verdict changes nothing.
//
// The zero State is empty, with DefaultPolicy; NewState sets a base
// policy. A State is a value with maps inside: use Clone to fork it.
type State struct {
	base       Policy
	task       string
	cfg        catalog.PolicyConfig
	runStarted bool
	negTask    bool
	subjects   []string

	steps      int // distinct agent steps applied
	lastStep   int
	lastStatus string
	toolCalls  int // agent tool requests

	formatStreak int
	unresolved   int // UNRESOLVED steps in a row without new evidence
	lengthStreak int
	failType     string
	failStreak   int
	resultFresh  bool // an agent tool result arrived since the last step
	lastNotes    int  // step of the last agent notes append
	finalWrites  int  // finalization-style writes since the last submit
	negAnswer    bool // a submit answered with a negative claim

	verdict    catalog.LogicVerdict
	hasVerdict bool // a 0 verdict arrived since the last step

	choices    []string
	choiceStep int

	queries QueryLedger
	neg     NegativeClaim // observations only; limits come from the policy

	requests map[string]*request
	finished map[string]bool
	evidence map[string]bool
	excerpts map[uint64]bool
	calls    map[string]bool
	verdicts map[int]bool
}

// request is one agent tool request and, once finished, its ledger lines.
type request struct {
	step     int
	command  string
	edit     *catalog.EditArgs // the file operation of an edit request
	done     bool
	move     catalog.LedgerMove
	query    catalog.LedgerQuery
	hasQuery bool
}

// NewState returns an empty state with a base policy; the run's
// PolicyConfig, once folded, overrides it (see Policy).
func NewState(p Policy) *State { return &State{base: p} }

// Policy returns the policy in force: the base policy with the run's
// PolicyConfig applied, defaults filled in.
func (s *State) Policy() Policy { return s.base.WithConfig(s.cfg).normalized() }

// Task returns the task text folded from the run's start.
func (s *State) Task() string { return s.task }

// Steps returns the number of agent steps folded.
func (s *State) Steps() int { return s.steps }

// LastStep returns the number of the last agent step folded.
func (s *State) LastStep() int { return s.lastStep }

// ToolCalls returns the number of tool requests of the agent folded.
func (s *State) ToolCalls() int { return s.toolCalls }

// Queries returns a copy of the query ledger.
func (s *State) Queries() QueryLedger { return s.queries.Clone() }

// Vendors returns the vendors of the negative-claim protocol: the
// policy's, then the claim subjects guessed from the task.
func (s *State) Vendors() []string {
	out := slices.Clone(s.base.Vendors)
	for _, v := range s.subjects {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// NegativeClaimActive reports whether the negative-claim protocol applies:
// the task is a negative claim, or the agent submitted a negative answer.
func (s *State) NegativeClaimActive() bool { return s.negTask || s.negAnswer }

// NegativeClaim returns a copy of the negative-claim tracker with its
// observations, the policy's limits and the vendors.
func (s *State) NegativeClaim() *NegativeClaim {
	n := s.Policy().negativeClaim(s.Vendors())
	n.checked = slices.Clone(s.neg.checked)
	n.lastHost, n.streak, n.moves = s.neg.lastHost, s.neg.streak, s.neg.moves
	return &n
}

// OpenConstraints returns the OPEN CONSTRAINTS lines to inject into every
// prompt while the negative-claim protocol is active; nil otherwise.
func (s *State) OpenConstraints() []string {
	if !s.NegativeClaimActive() {
		return nil
	}
	return s.NegativeClaim().Constraints()
}

// MoveLine returns the move-ledger line of a finished agent request (the
// caller adds the evidence id); false when the request is unknown or not
// finished.
func (s *State) MoveLine(requestID string) (catalog.LedgerMove, bool) {
	r := s.requests[requestID]
	if r == nil || !r.done {
		return catalog.LedgerMove{}, false
	}
	m := r.move
	m.Domains = slices.Clone(m.Domains)
	return m, true
}

// QueryLine returns the query-ledger line of a finished agent request that
// issued a search query; false otherwise.
func (s *State) QueryLine(requestID string) (catalog.LedgerQuery, bool) {
	r := s.requests[requestID]
	if r == nil || !r.done || !r.hasQuery {
		return catalog.LedgerQuery{}, false
	}
	return r.query, true
}

// BlockedMove returns the move-ledger line of a shell action a gate
// refused: its type and domains, outcome denied, no request.
func BlockedMove(step int, cmd string) catalog.LedgerMove {
	r := read(cmd)
	return catalog.LedgerMove{Step: step, MoveType: r.move(), Command: cmd, Outcome: catalog.LedgerDenied, Domains: r.domains()}
}

// BlockedEditMove returns the move-ledger line of an edit action a gate
// refused: its type (EditMove), outcome denied, no request.
func BlockedEditMove(step int, summary string, e catalog.EditArgs) catalog.LedgerMove {
	return catalog.LedgerMove{Step: step, MoveType: EditMove(e), Command: summary, Outcome: catalog.LedgerDenied}
}

// Apply folds one event's data (see State).
func (s *State) Apply(ev catalog.Payload) {
	switch e := ev.(type) {
	case catalog.TaskSubmitted:
		s.applyTask(e.RunConfig, false)
	case *catalog.TaskSubmitted:
		if e != nil {
			s.applyTask(e.RunConfig, false)
		}
	case catalog.RunStarted:
		s.applyTask(e.Config, true)
	case *catalog.RunStarted:
		if e != nil {
			s.applyTask(e.Config, true)
		}
	case catalog.AgentStep:
		s.applyStep(e)
	case *catalog.AgentStep:
		if e != nil {
			s.applyStep(*e)
		}
	case catalog.ToolRequested:
		s.applyRequest(e)
	case *catalog.ToolRequested:
		if e != nil {
			s.applyRequest(*e)
		}
	case catalog.ToolFinished:
		s.applyFinished(e)
	case *catalog.ToolFinished:
		if e != nil {
			s.applyFinished(*e)
		}
	case catalog.EvidenceRecorded:
		s.applyEvidence(e)
	case *catalog.EvidenceRecorded:
		if e != nil {
			s.applyEvidence(*e)
		}
	case catalog.ModelResponded:
		s.applyModel(e)
	case *catalog.ModelResponded:
		if e != nil {
			s.applyModel(*e)
		}
	case catalog.LogicVerdict:
		s.applyVerdict(e)
	case *catalog.LogicVerdict:
		if e != nil {
			s.applyVerdict(*e)
		}
	case catalog.NotesAppended:
		s.applyNotes(e)
	case *catalog.NotesAppended:
		if e != nil {
			s.applyNotes(*e)
		}
	case catalog.PolicyTriggered:
		s.applyPolicy(e)
	case *catalog.PolicyTriggered:
		if e != nil {
			s.applyPolicy(*e)
		}
	}
}

func (s *State) applyTask(c catalog.RunConfig, started bool) {
	if s.runStarted && !started {
		return
	}
	s.runStarted = s.runStarted || started
	s.task = c.Task
	s.cfg = c.Policy
	s.negTask = IsNegativeClaim(c.Task)
	s.subjects = ClaimSubjects(c.Task)
}

func (s *State) applyStep(e catalog.AgentStep) {
	if s.steps > 0 && e.Step <= s.lastStep {
		return // redelivered
	}
	s.steps++
	s.lastStep = e.Step
	s.resultFresh = false
	s.hasVerdict = false
	if e.Step > s.choiceStep {
		s.choices = nil
	}
	if e.FormatError != "" {
		s.formatStreak++
	} else {
		s.formatStreak = 0
	}
	if st := strings.TrimSpace(e.StatusUpdate); st != "" && e.FormatError == "" {
		s.lastStatus = st
		if unresolved(st) {
			s.unresolved++
		} else {
			s.unresolved = 0
		}
	}
	// A submit resets the finalization count, unless it named an answer
	// file that could not be read (no digest): nothing was submitted.
	if e.FormatError == "" && e.ActionTool == catalog.ActionSubmit && (e.AnswerFile == "" || e.AnswerSHA256 != "") {
		s.finalWrites = 0
		if IsNegativeClaim(e.Answer) {
			s.negAnswer = true
		}
	}
	if e.FormatError == "" && e.ActionTool == catalog.ActionShell && e.RequestID != "" && e.Command != "" {
		s.register(e.RequestID, e.Step, e.Command, nil)
	}
	if e.FormatError == "" && e.ActionTool == catalog.ActionEdit && e.RequestID != "" && e.Edit != nil {
		s.register(e.RequestID, e.Step, e.Command, e.Edit)
	}
}

func (s *State) applyRequest(e catalog.ToolRequested) {
	if e.Requester == catalog.RequesterAgent && e.RequestID != "" {
		var edit *catalog.EditArgs
		if e.Tool == catalog.ToolEdit {
			edit = e.Edit
			if edit == nil {
				edit = &catalog.EditArgs{} // typed other, as an edit without its operation
			}
		}
		s.register(e.RequestID, e.Step, e.Command, edit)
	}
}

// register records an agent tool request once: a shell command, or the
// file operation of an edit (edit non-nil; cmd is then its summary).
func (s *State) register(id string, step int, cmd string, edit *catalog.EditArgs) {
	if s.requests == nil {
		s.requests = map[string]*request{}
	}
	if _, seen := s.requests[id]; seen {
		return
	}
	s.requests[id] = &request{step: step, command: cmd, edit: edit}
	s.toolCalls++
	if edit != nil {
		if _, ok := editFinalizationTarget(*edit); ok {
			s.finalWrites++
		}
	} else if _, ok := finalizationTarget(cmd); ok {
		s.finalWrites++
	}
}

func (s *State) applyFinished(e catalog.ToolFinished) {
	if e.Requester != catalog.RequesterAgent || e.RequestID == "" || s.finished[e.RequestID] {
		return
	}
	if s.finished == nil {
		s.finished = map[string]bool{}
	}
	s.finished[e.RequestID] = true
	r := s.requests[e.RequestID]
	cmd := ""
	if r != nil {
		cmd = r.command
	}
	s.resultFresh = true
	rd := read(cmd) // the command is read once for every ledger below
	if ft := rd.failureType(e); ft == "" {
		s.failType, s.failStreak = "", 0
	} else if ft == s.failType {
		s.failStreak++
	} else {
		s.failType, s.failStreak = ft, 1
	}
	if r == nil {
		return
	}
	outcome := OutcomeOf(e)
	if r.edit != nil {
		// A file operation: typed by its op; no URL, domain or query.
		r.done = true
		r.move = catalog.LedgerMove{Step: r.step, MoveType: EditMove(*r.edit), Command: cmd, Outcome: outcome, RequestID: e.RequestID}
		return
	}
	mt := rd.move()
	r.done = true
	r.move = catalog.LedgerMove{
		Step: r.step, MoveType: mt, Command: cmd, Outcome: outcome,
		RequestID: e.RequestID, Domains: rd.domains(),
	}
	if q, ok := rd.query(); ok && !e.Denied {
		r.query = s.queries.Observe(r.step, q, outcome, s.Policy().QueryFamilyLimit)
		r.query.RequestID = e.RequestID
		r.hasQuery = true
	}
	s.neg.Observe(mt, rd.urls(), outcome)
}

func (s *State) applyEvidence(e catalog.EvidenceRecorded) {
	if e.EvidenceID == "" || s.evidence[e.EvidenceID] {
		return
	}
	if s.evidence == nil {
		s.evidence = map[string]bool{}
	}
	s.evidence[e.EvidenceID] = true
	text := strings.ToLower(strings.Join(strings.Fields(e.Excerpt), " "))
	if e.ExitCode != 0 || text == "" {
		return
	}
	h := fnv.New64a()
	h.Write([]byte(text))
	sum := h.Sum64()
	if s.excerpts[sum] {
		return // the same output again is not new evidence
	}
	if s.excerpts == nil {
		s.excerpts = map[uint64]bool{}
	}
	s.excerpts[sum] = true
	s.unresolved = 0
}

func (s *State) applyModel(e catalog.ModelResponded) {
	if e.Scope != catalog.ScopeAgent || e.Error != "" || e.CallID == "" || s.calls[e.CallID] {
		return
	}
	if s.calls == nil {
		s.calls = map[string]bool{}
	}
	s.calls[e.CallID] = true
	if e.FinishReason == "length" {
		s.lengthStreak++
	} else {
		s.lengthStreak = 0
	}
}

func (s *State) applyVerdict(e catalog.LogicVerdict) {
	if s.verdicts[e.Step] {
		return
	}
	if s.verdicts == nil {
		s.verdicts = map[int]bool{}
	}
	s.verdicts[e.Step] = true
	if e.ThinkingEval == 0 && (!s.hasVerdict || e.Step > s.verdict.Step) {
		s.verdict = e
		s.verdict.MatchedKeywords = slices.Clone(e.MatchedKeywords)
		s.verdict.MatchedPatterns = slices.Clone(e.MatchedPatterns)
		s.hasVerdict = true
	}
}

func (s *State) applyNotes(e catalog.NotesAppended) {
	if e.Author == catalog.AuthorAgent && e.Step > s.lastNotes {
		s.lastNotes = e.Step
	}
}

func (s *State) applyPolicy(e catalog.PolicyTriggered) {
	if e.Rule == catalog.RuleChoice && e.Step >= s.choiceStep && e.Step >= s.lastStep {
		s.choices = slices.Clone(e.Choices)
		s.choiceStep = e.Step
	}
}

// Clone returns an independent copy of the state.
func (s *State) Clone() *State {
	c := *s
	c.base.Vendors = slices.Clone(s.base.Vendors)
	c.subjects = slices.Clone(s.subjects)
	c.choices = slices.Clone(s.choices)
	c.verdict.MatchedKeywords = slices.Clone(s.verdict.MatchedKeywords)
	c.verdict.MatchedPatterns = slices.Clone(s.verdict.MatchedPatterns)
	c.queries = s.queries.Clone()
	c.neg = s.neg.Clone()
	if s.requests != nil {
		c.requests = make(map[string]*request, len(s.requests))
		for k, r := range s.requests {
			cp := *r
			cp.move.Domains = slices.Clone(r.move.Domains)
			c.requests[k] = &cp
		}
	}
	c.finished = maps.Clone(s.finished)
	c.evidence = maps.Clone(s.evidence)
	c.excerpts = maps.Clone(s.excerpts)
	c.calls = maps.Clone(s.calls)
	c.verdicts = maps.Clone(s.verdicts)
	return &c
}
