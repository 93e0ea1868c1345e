package ledger

import (
	"slices"
	"strconv"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

// Default limits of the policy layer.
const (
	DefaultNotesInterval          = 3  // NOTES_UPDATE_INTERVAL of the spec
	DefaultStagnationLimit        = 3  // STAGNATION_LIMIT
	DefaultFailureEscalationLimit = 2  // FAILURE_ESCALATION_LIMIT
	DefaultLengthNudgeAfter       = 2  // replies cut by finish_reason=length in a row
	DefaultFinalizationStopAfter  = 3  // finalization-style writes without a submit
	DefaultQueryFamilyLimit       = 3  // queries of one family before a mutation is required
	DefaultDomainShiftAfter       = 3  // consecutive moves on one domain (negative claims)
	DefaultPreToolNudgeAfter      = 2  // steps without any tool call
	DefaultReminderAfter          = 1  // format errors in a row
	DefaultReminderInterval       = 10 // steps between periodic task reminders
	DefaultNegativeClaimBudget    = 10 // web moves before a negative claim may conclude
	DefaultMinOfficialDomains     = 2
	DefaultMinIndependentDomains  = 1
)

// Policy holds the limits of the policy layer. For every limit, zero
// means the default (the Default* constants) and a negative value turns
// the rule off (for the minimums: requires none). The run's
// catalog.PolicyConfig, folded from vera.run.started, overrides the four
// limits it carries (see State.Policy).
//
// Counting: a rule with a limit fires when its count reaches the limit
// and at every later step while the condition persists (the count resets
// when it breaks), so the limit-th occurrence fires and the one before
// does not. The gates are different: they block the attempt that would
// go past the limit (the limit+1-th query of a family, the move after
// DomainShiftAfter moves on one domain, the FinalizationStopAfter-th
// final write).
type Policy struct {
	// NotesInterval: every NotesInterval steps the agent must have
	// appended to notes.md (notes_append) within the last NotesInterval
	// steps before it may run a tool (notes_gate).
	NotesInterval int
	// StagnationLimit: STATUS_UPDATE UNRESOLVED this many steps in a row
	// with no new evidence forces a tool call (stagnation).
	StagnationLimit int
	// FailureEscalationLimit: this many agent tool calls in a row failing
	// with the same FailureType escalate (failure_escalation).
	FailureEscalationLimit int
	// LengthNudgeAfter: this many agent replies in a row cut by
	// finish_reason=length nudge for a shorter reply (length_nudge).
	LengthNudgeAfter int
	// FinalizationStopAfter: the FinalizationStopAfter-th finalization-style
	// write since the last submit stops the run (finalization_stop).
	FinalizationStopAfter int
	// QueryFamilyLimit: after this many queries of one family the next one
	// is blocked until mutated (query_mutation_required).
	QueryFamilyLimit int
	// DomainShiftAfter: after this many consecutive web moves on one
	// domain, while the negative-claim minimums are unmet, the next move
	// on it is blocked (domain_shift).
	DomainShiftAfter int
	// PreToolNudgeAfter: this many steps without any tool call yet nudge
	// the agent to use the shell (pre_tool_nudge).
	PreToolNudgeAfter int
	// ReminderAfter: this many format errors in a row remind the output
	// format (reminder).
	ReminderAfter int
	// ReminderInterval: every ReminderInterval steps the primary task and
	// the format are reminded (reminder).
	ReminderInterval int
	// NegativeClaimBudget: web moves after which a negative claim with its
	// minimums met concludes (conclusion_ready).
	NegativeClaimBudget int
	// MinOfficialDomains and MinIndependentDomains: the negative-claim
	// source minimums.
	MinOfficialDomains    int
	MinIndependentDomains int
	// Vendors: names, aliases or domains of the vendor a negative claim is
	// about (see IsOfficial). The subjects guessed from the task
	// (ClaimSubjects) are added to them.
	Vendors []string
}

// DefaultPolicy returns the policy with every default filled in.
func DefaultPolicy() Policy { return Policy{}.normalized() }

// normalized returns p with zero limits replaced by the defaults and
// negative ones by 0 (off).
func (p Policy) normalized() Policy {
	p.NotesInterval = lim(p.NotesInterval, DefaultNotesInterval)
	p.StagnationLimit = lim(p.StagnationLimit, DefaultStagnationLimit)
	p.FailureEscalationLimit = lim(p.FailureEscalationLimit, DefaultFailureEscalationLimit)
	p.LengthNudgeAfter = lim(p.LengthNudgeAfter, DefaultLengthNudgeAfter)
	p.FinalizationStopAfter = lim(p.FinalizationStopAfter, DefaultFinalizationStopAfter)
	p.QueryFamilyLimit = lim(p.QueryFamilyLimit, DefaultQueryFamilyLimit)
	p.DomainShiftAfter = lim(p.DomainShiftAfter, DefaultDomainShiftAfter)
	p.PreToolNudgeAfter = lim(p.PreToolNudgeAfter, DefaultPreToolNudgeAfter)
	p.ReminderAfter = lim(p.ReminderAfter, DefaultReminderAfter)
	p.ReminderInterval = lim(p.ReminderInterval, DefaultReminderInterval)
	p.NegativeClaimBudget = lim(p.NegativeClaimBudget, DefaultNegativeClaimBudget)
	p.MinOfficialDomains = lim(p.MinOfficialDomains, DefaultMinOfficialDomains)
	p.MinIndependentDomains = lim(p.MinIndependentDomains, DefaultMinIndependentDomains)
	p.Vendors = slices.Clone(p.Vendors)
	return p
}

// WithConfig returns p with the non-zero limits of a run's PolicyConfig
// in place of its own.
func (p Policy) WithConfig(c catalog.PolicyConfig) Policy {
	if c.NotesInterval != 0 {
		p.NotesInterval = c.NotesInterval
	}
	if c.StagnationLimit != 0 {
		p.StagnationLimit = c.StagnationLimit
	}
	if c.FailureEscalationLimit != 0 {
		p.FailureEscalationLimit = c.FailureEscalationLimit
	}
	if c.QueryFamilyLimit != 0 {
		p.QueryFamilyLimit = c.QueryFamilyLimit
	}
	return p
}

// negativeClaim returns a tracker configured with the limits of a
// normalised policy (whose 0 means off, spelled -1 in NegativeClaim).
func (p Policy) negativeClaim(vendors []string) NegativeClaim {
	neg := func(v int) int {
		if v == 0 {
			return -1
		}
		return v
	}
	return NegativeClaim{
		Vendors:        vendors,
		MinOfficial:    neg(p.MinOfficialDomains),
		MinIndependent: neg(p.MinIndependentDomains),
		ShiftAfter:     neg(p.DomainShiftAfter),
		Budget:         neg(p.NegativeClaimBudget),
	}
}

// Proposed is the action of the agent step being decided.
type Proposed struct {
	Step        int
	Tool        catalog.ActionTool // "" when the reply had a format error
	Command     string             // shell; for edit, the summary of the operation
	Edit        *catalog.EditArgs  // edit
	NotesText   string             // notes_append
	Answer      string             // submit
	Status      string             // the STATUS_UPDATE line
	Thought     string
	FormatError string
}

// ProposedFrom returns the action of a parsed agent step.
func ProposedFrom(s catalog.AgentStep) Proposed {
	return Proposed{
		Step: s.Step, Tool: s.ActionTool, Command: s.Command, Edit: s.Edit, NotesText: s.NotesText,
		Answer: s.Answer, Status: s.StatusUpdate, Thought: s.Thought, FormatError: s.FormatError,
	}
}

// isShell reports a runnable shell action.
func (p Proposed) isShell() bool {
	return p.FormatError == "" && p.Tool == catalog.ActionShell && strings.TrimSpace(p.Command) != ""
}

// isEdit reports a runnable edit action.
func (p Proposed) isEdit() bool {
	return p.FormatError == "" && p.Tool == catalog.ActionEdit && p.Edit != nil
}

// isTool reports a runnable tool call: a shell command or an edit.
func (p Proposed) isTool() bool { return p.isShell() || p.isEdit() }

func (p Proposed) isSubmit() bool { return p.FormatError == "" && p.Tool == catalog.ActionSubmit }

// unresolved reports a STATUS_UPDATE of UNRESOLVED (UNRESOLVED, UNRESOLVED(reason)…).
func unresolved(status string) bool {
	return strings.HasPrefix(strings.ToUpper(strings.TrimSpace(status)), string(catalog.OutcomeUnresolved))
}

// Decide applies the policy rules to the next agent step. state must be
// the fold of the run's events before that step's vera.agent.step (its
// vera.model.responded included); next is the step's action
// (ProposedFrom). Decide is a pure function of both: a replay that folds
// the same events decides the same.
//
// It returns one catalog.PolicyTriggered per rule that fires, at most one
// per rule, with Step set to next.Step, in this order:
//
//   - conclusion_ready (conclude): the negative-claim protocol is active,
//     its budget spent, its minimums met and the status still UNRESOLVED
//     (no submit proposed). It is then the only event: the run ends
//     UNRESOLVED with Details["reason"].
//   - negative_claim (nudge): at the first step of a negative-claim task,
//     the OPEN CONSTRAINTS.
//   - choice_matched (nudge): the action matches an option of the choice
//     offered at an earlier step (same move type).
//   - repetition_nudge (nudge): the logic verifier scored a step 0
//     (repeated without awareness) since the last step.
//   - length_nudge (nudge): LengthNudgeAfter replies in a row were cut by
//     finish_reason=length.
//   - reminder (nudge): ReminderAfter format errors in a row, or a step
//     that is a multiple of ReminderInterval (the primary task).
//   - pre_tool_nudge (nudge): no tool has been requested yet, the action
//     is not one either, and this is at least the PreToolNudgeAfter-th step.
//   - failure_escalation (nudge): the last FailureEscalationLimit (or
//     more) tool results of the agent failed with the same FailureType;
//     fires once per new result.
//   - stagnation (force_tool): StagnationLimit steps in a row with an
//     UNRESOLVED status and no new evidence (this step included).
//   - the first gate that refuses a shell action: finalization_stop
//     (stop), notes_gate, query_mutation_required, domain_shift (block).
//   - negative_claim (block): a submit whose answer is a negative claim
//     while the source minimums are unmet and the budget not spent.
//   - choice (nudge): with domain_shift, query_mutation_required,
//     failure_escalation or stagnation, concrete next actions to choose
//     from, each prefixed by its move type ("search: …").
//
// Summarize turns the result into what the agent must do.
func Decide(state State, next Proposed) []catalog.PolicyTriggered {
	s := &state
	p := s.Policy()
	nc := s.NegativeClaim()
	active := s.NegativeClaimActive()
	var out []catalog.PolicyTriggered
	add := func(t catalog.PolicyTriggered) {
		t.Step = next.Step
		out = append(out, t)
	}
	var rd *reading // the proposed command, read once when a rule needs it
	command := func() *reading {
		if rd == nil {
			rd = read(next.Command)
		}
		return rd
	}

	status := next.Status
	if next.FormatError != "" || strings.TrimSpace(status) == "" {
		status = s.lastStatus
	}
	if active && !next.isSubmit() && unresolved(status) && nc.ConclusionReady() {
		reason := nc.Reason()
		add(catalog.PolicyTriggered{
			Rule: catalog.RuleConclusionReady, Effect: catalog.EffectConclude,
			Message:            capitalize(reason) + ".",
			Count:              nc.Moves(),
			Limit:              p.NegativeClaimBudget,
			OfficialDomains:    nc.Official(),
			IndependentDomains: nc.Independent(),
			Details:            map[string]string{"outcome": string(catalog.OutcomeUnresolved), "reason": reason},
		})
		return out
	}

	if active && s.negTask && s.steps == 0 {
		lines := nc.Constraints()
		add(catalog.PolicyTriggered{
			Rule: catalog.RuleNegativeClaim, Effect: catalog.EffectNudge,
			Message:            constraintBlock(lines),
			Constraints:        lines,
			OfficialDomains:    nc.Official(),
			IndependentDomains: nc.Independent(),
			Details:            map[string]string{"cues": strings.Join(NegativeCues(s.task), "; ")},
		})
	}

	if len(s.choices) > 0 && s.choiceStep < next.Step && next.isTool() {
		var mt catalog.MoveType
		if next.isEdit() {
			mt = EditMove(*next.Edit)
		} else {
			mt = command().move()
		}
		for _, c := range s.choices {
			if choiceMove(c) == mt {
				add(catalog.PolicyTriggered{Rule: catalog.RuleChoiceMatched, Effect: catalog.EffectNudge, Matched: c})
				break
			}
		}
	}

	if s.hasVerdict {
		v := s.verdict
		msg := "Step " + strconv.Itoa(v.Step) + " repeated "
		if v.RepeatedStep > 0 {
			msg += "the action of step " + strconv.Itoa(v.RepeatedStep)
		} else {
			msg += "an earlier action"
		}
		msg += " without acknowledging it. Try a different approach."
		t := catalog.PolicyTriggered{
			Rule: catalog.RuleRepetitionNudge, Effect: catalog.EffectNudge, Message: msg,
			LogicVerdictStep: v.Step,
		}
		if v.RepeatedAction != "" {
			t.Details = map[string]string{"repeated_action": clip(v.RepeatedAction, 200)}
		}
		add(t)
	}

	if p.LengthNudgeAfter > 0 && s.lengthStreak >= p.LengthNudgeAfter {
		add(catalog.PolicyTriggered{
			Rule: catalog.RuleLengthNudge, Effect: catalog.EffectNudge,
			Count: s.lengthStreak, Limit: p.LengthNudgeAfter,
			Message: "Your last " + strconv.Itoa(s.lengthStreak) + " replies were cut off (finish_reason=length). " +
				"Answer in the required format, briefly: one THOUGHT line, one JSON action.",
		})
	}

	formatCount := 0
	if next.FormatError != "" {
		formatCount = s.formatStreak + 1
	}
	afterErrors := p.ReminderAfter > 0 && formatCount >= p.ReminderAfter
	periodic := p.ReminderInterval > 0 && next.Step > 0 && next.Step%p.ReminderInterval == 0
	if afterErrors || periodic {
		msg := "Reminder: THOUGHT line, one JSON action line, EVIDENCE_USED, STATUS_UPDATE."
		kind := "format"
		if periodic {
			msg += " PRIMARY TASK: " + clip(s.task, 300)
			kind = "periodic"
			if afterErrors {
				kind = "format+periodic"
			}
		}
		t := catalog.PolicyTriggered{Rule: catalog.RuleReminder, Effect: catalog.EffectNudge, Message: msg,
			Details: map[string]string{"kind": kind}}
		if afterErrors {
			t.Count, t.Limit = formatCount, p.ReminderAfter
		}
		add(t)
	}

	if p.PreToolNudgeAfter > 0 && s.toolCalls == 0 && !next.isTool() && s.steps+1 >= p.PreToolNudgeAfter {
		add(catalog.PolicyTriggered{
			Rule: catalog.RulePreToolNudge, Effect: catalog.EffectNudge,
			Count: s.steps + 1, Limit: p.PreToolNudgeAfter,
			Message: "You have not run any command yet. Use the shell to gather evidence before concluding.",
		})
	}

	var trigger string // the rule a choice is offered for
	if p.FailureEscalationLimit > 0 && s.resultFresh && s.failType != "" && s.failStreak >= p.FailureEscalationLimit {
		add(catalog.PolicyTriggered{
			Rule: catalog.RuleFailureEscalation, Effect: catalog.EffectNudge,
			Count: s.failStreak, Limit: p.FailureEscalationLimit, FailureType: s.failType,
			Message: "The last " + strconv.Itoa(s.failStreak) + " tool calls failed with " + describeFailure(s.failType) +
				". Use a different source or tool.",
		})
		trigger = catalog.RuleFailureEscalation
	}

	stagnant := 0
	if next.FormatError == "" && unresolved(next.Status) {
		stagnant = s.unresolved + 1
	}
	if p.StagnationLimit > 0 && stagnant >= p.StagnationLimit {
		add(catalog.PolicyTriggered{
			Rule: catalog.RuleStagnation, Effect: catalog.EffectForceTool,
			Count: stagnant, Limit: p.StagnationLimit,
			Message: "No new evidence for " + strconv.Itoa(stagnant) + " turns. Run a command that produces new evidence now.",
		})
		if trigger == "" {
			trigger = catalog.RuleStagnation
		}
	}

	if next.isEdit() {
		if t, ok := editGate(s, p, next); ok {
			add(t)
		}
	}
	if next.isShell() {
		if t, ok := gate(s, p, nc, active, next, command()); ok {
			add(t)
			if t.Rule == catalog.RuleDomainShift || t.Rule == catalog.RuleQueryMutationRequired {
				trigger = t.Rule
			}
		}
	}

	if next.isSubmit() && IsNegativeClaim(next.Answer) && !nc.BudgetExhausted() {
		if met, missing := nc.Minimums(); !met {
			lines := nc.Constraints()
			add(catalog.PolicyTriggered{
				Rule: catalog.RuleNegativeClaim, Effect: catalog.EffectBlock,
				Message: "A negative answer needs source coverage first (missing " + strings.Join(missing, "; ") +
					"). Keep searching before you submit it.\n" + constraintBlock(lines),
				Constraints:        lines,
				OfficialDomains:    nc.Official(),
				IndependentDomains: nc.Independent(),
				Details:            map[string]string{"cues": strings.Join(NegativeCues(next.Answer), "; ")},
			})
		}
	}

	if trigger != "" {
		choices := choicesFor(trigger, nc)
		msg := "Choose one next action:"
		for i, c := range choices {
			msg += " (" + strconv.Itoa(i+1) + ") " + c
		}
		add(catalog.PolicyTriggered{
			Rule: catalog.RuleChoice, Effect: catalog.EffectNudge, Choices: choices, Message: msg,
			Details: map[string]string{"for": trigger},
		})
	}
	return out
}

// gate returns the first gate refusing a shell action.
func gate(s *State, p Policy, nc *NegativeClaim, active bool, next Proposed, rd *reading) (catalog.PolicyTriggered, bool) {
	cmd := next.Command
	target, final := rd.finalizationTarget()
	if t, ok := toolGate(s, p, next, target, final); ok {
		return t, true
	}
	if q, ok := rd.query(); ok && p.QueryFamilyLimit > 0 {
		fam := Family(q)
		if s.queries.NeedsMutation(fam, p.QueryFamilyLimit) {
			c := s.queries.Count(fam)
			return catalog.PolicyTriggered{
				Rule: catalog.RuleQueryMutationRequired, Effect: catalog.EffectBlock,
				Count: c, Limit: p.QueryFamilyLimit, QueryFamily: fam, BlockedCommand: cmd,
				Message: "The query family '" + fam + "' was tried " + strconv.Itoa(c) +
					" times. Change the terms, source or angle.",
			}, true
		}
	}
	if active {
		if shift, host, count := nc.ShiftRequired(cmd); shift {
			_, missing := nc.Minimums()
			return catalog.PolicyTriggered{
				Rule: catalog.RuleDomainShift, Effect: catalog.EffectBlock,
				Count: count, Limit: p.DomainShiftAfter, Domains: []string{host}, BlockedCommand: cmd,
				OfficialDomains: nc.Official(), IndependentDomains: nc.Independent(),
				Message: "You have queried " + host + " " + strconv.Itoa(count-1) + " times in a row and the source minimums are unmet (" +
					strings.Join(missing, "; ") + "). Check another official domain and one independent domain.",
			}, true
		}
	}
	return catalog.PolicyTriggered{}, false
}

// editGate returns the first gate refusing an edit: an edit is a tool
// call, so the finalization stop (for a write of a final deliverable) and
// the notes gate apply; the query and domain gates do not (it issues no
// query and reaches no domain).
func editGate(s *State, p Policy, next Proposed) (catalog.PolicyTriggered, bool) {
	target, final := editFinalizationTarget(*next.Edit)
	return toolGate(s, p, next, target, final)
}

// toolGate returns the first of the gates every tool call passes: the
// finalization stop, when the call writes the final deliverable target
// (final), and the notes gate.
func toolGate(s *State, p Policy, next Proposed, target string, final bool) (catalog.PolicyTriggered, bool) {
	cmd := next.Command
	if final && p.FinalizationStopAfter > 0 && s.finalWrites+1 >= p.FinalizationStopAfter {
		n := s.finalWrites + 1
		return catalog.PolicyTriggered{
			Rule: catalog.RuleFinalizationStop, Effect: catalog.EffectStop,
			Count: n, Limit: p.FinalizationStopAfter, BlockedCommand: cmd,
			Message: "Stopping: a final deliverable was written " + strconv.Itoa(n) + " times without submitting.",
			Details: map[string]string{"path": target},
		}, true
	}
	if n := p.NotesInterval; n > 0 {
		g := next.Step / n * n
		if g >= n && s.lastNotes < g-n+1 {
			return catalog.PolicyTriggered{
				Rule: catalog.RuleNotesGate, Effect: catalog.EffectBlock,
				Count: next.Step - s.lastNotes, Limit: n, BlockedCommand: cmd,
				Message: "Update notes.md (notes_append) before running more tools: notes are due every " +
					strconv.Itoa(n) + " steps.",
			}, true
		}
	}
	return catalog.PolicyTriggered{}, false
}

// choicesFor returns the next-action options offered with a rule.
func choicesFor(rule string, nc *NegativeClaim) []string {
	switch rule {
	case catalog.RuleDomainShift:
		var out []string
		off, ind := nc.Official(), nc.Independent()
		if len(off) < lim(nc.MinOfficial, DefaultMinOfficialDomains) {
			o := "fetch: a page on another official domain"
			if len(nc.Vendors) > 0 {
				o += " of " + strings.Join(nc.Vendors, ", ")
			}
			if nc.lastHost != "" {
				o += " (not " + nc.lastHost + ")"
			}
			out = append(out, o)
		}
		if len(ind) < lim(nc.MinIndependent, DefaultMinIndependentDomains) {
			out = append(out, "search: an independent (non-vendor) source on the claim")
		}
		return append(out, "extract: the candidate names and dates from evidence already saved under /work")
	case catalog.RuleQueryMutationRequired:
		return []string{
			"search: the same question with a new key term or another entity",
			"fetch: a result URL from an earlier search instead of searching again",
			"extract: the relevant lines from a page already saved under /work",
		}
	}
	return []string{
		"search: a query from a new family",
		"fetch: a primary source URL named in your notes or evidence",
		"extract: the relevant lines from a page already saved under /work",
	}
}

// choiceMove returns the move type an option is prefixed with.
func choiceMove(option string) catalog.MoveType {
	t, _, ok := strings.Cut(option, ":")
	if !ok {
		return neutral
	}
	return catalog.MoveType(strings.TrimSpace(t))
}

func describeFailure(t string) string {
	switch {
	case strings.HasPrefix(t, "http_") && len(t) == 8:
		return "HTTP " + t[5:]
	case strings.HasPrefix(t, "exit_"):
		return "exit code " + t[5:]
	}
	return strings.ReplaceAll(t, "_", " ")
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// Effects is what a step's policy events require of the agent.
type Effects struct {
	Block     bool     // the proposed action must not run
	ForceTool bool     // the next action must be a tool call
	Stop      bool     // the run stops
	Conclude  bool     // the run concludes UNRESOLVED with Reason
	Reason    string   // the UNRESOLVED reason, when Conclude
	Messages  []string // texts to inject into the next prompt, in order
}

// Summarize folds the events Decide returned into their effects.
func Summarize(ts []catalog.PolicyTriggered) Effects {
	var e Effects
	for _, t := range ts {
		switch t.Effect {
		case catalog.EffectBlock:
			e.Block = true
		case catalog.EffectForceTool:
			e.ForceTool = true
		case catalog.EffectStop:
			e.Stop, e.Block = true, true
		case catalog.EffectConclude:
			e.Conclude, e.Block = true, true
			e.Reason = t.Details["reason"]
		}
		if t.Message != "" {
			e.Messages = append(e.Messages, t.Message)
		}
	}
	return e
}
