package catalog

// Policy rules. Each rule has its own event type vera.policy.<rule>, all
// carrying PolicyTriggered, and its own Prometheus counter
// dra_policy_<rule>_total.
const (
	RulePreToolNudge          = "pre_tool_nudge"
	RuleLengthNudge           = "length_nudge"
	RuleReminder              = "reminder"
	RuleChoice                = "choice"
	RuleChoiceMatched         = "choice_matched"
	RuleStagnation            = "stagnation"
	RuleFailureEscalation     = "failure_escalation"
	RuleDomainShift           = "domain_shift"
	RuleConclusionReady       = "conclusion_ready"
	RuleFinalizationStop      = "finalization_stop"
	RuleNotesGate             = "notes_gate"
	RuleQueryMutationRequired = "query_mutation_required"
	RuleNegativeClaim         = "negative_claim"
	RuleRepetitionNudge       = "repetition_nudge"
)

// Policy types.
const (
	TypePolicyPreToolNudge          = "vera.policy." + RulePreToolNudge
	TypePolicyLengthNudge           = "vera.policy." + RuleLengthNudge
	TypePolicyReminder              = "vera.policy." + RuleReminder
	TypePolicyChoice                = "vera.policy." + RuleChoice
	TypePolicyChoiceMatched         = "vera.policy." + RuleChoiceMatched
	TypePolicyStagnation            = "vera.policy." + RuleStagnation
	TypePolicyFailureEscalation     = "vera.policy." + RuleFailureEscalation
	TypePolicyDomainShift           = "vera.policy." + RuleDomainShift
	TypePolicyConclusionReady       = "vera.policy." + RuleConclusionReady
	TypePolicyFinalizationStop      = "vera.policy." + RuleFinalizationStop
	TypePolicyNotesGate             = "vera.policy." + RuleNotesGate
	TypePolicyQueryMutationRequired = "vera.policy." + RuleQueryMutationRequired
	TypePolicyNegativeClaim         = "vera.policy." + RuleNegativeClaim
	TypePolicyRepetitionNudge       = "vera.policy." + RuleRepetitionNudge
)

// PolicyRules returns every policy rule, sorted.
func PolicyRules() []string {
	var out []string
	for _, e := range registry.sorted {
		if r, ok := PolicyRule(e.Type); ok {
			out = append(out, r)
		}
	}
	return out
}

// PolicyRule returns the rule of a catalogued policy type:
// PolicyRule("vera.policy.stagnation") = ("stagnation", true).
func PolicyRule(typ string) (string, bool) {
	area, event, ok := SplitType(typ)
	if !ok || area != policyArea {
		return "", false
	}
	if _, known := Lookup(typ); !known {
		return "", false
	}
	return event, true
}

// PolicyMetricName returns the Prometheus counter of a policy rule,
// dra_policy_<rule>_total.
func PolicyMetricName(rule string) string { return "dra_policy_" + rule + "_total" }

// PolicyTriggered is the data of every vera.policy.<rule> type: a rule of
// the agent's policy layer fired. The typed optional fields are used by the
// rules they make sense for.
type PolicyTriggered struct {
	Rule               string            `json:"rule" jsonschema:"pattern=^[a-z][a-z0-9_]*$" jsonschema_description:"The rule; always equal to the last token of the event type (vera.policy.<rule>). Names the counter dra_policy_<rule>_total."`
	Step               int               `json:"step" jsonschema:"minimum=0" jsonschema_description:"Agent step at which the rule fired."`
	Effect             PolicyEffect      `json:"effect" jsonschema_description:"What the rule did to the agent loop."`
	Message            string            `json:"message,omitempty" jsonschema_description:"The text injected into the agent's next prompt, verbatim; empty when nothing was injected."`
	Count              int               `json:"count,omitempty" jsonschema:"minimum=0" jsonschema_description:"How many times in a row the triggering condition was seen (replies cut by length, turns without new evidence, failures of one type, same-family queries, finalization writes...)."`
	Limit              int               `json:"limit,omitempty" jsonschema:"minimum=0" jsonschema_description:"The threshold count reached."`
	FailureType        string            `json:"failure_type,omitempty" jsonschema_description:"The repeated failure type (failure_escalation), e.g. http_403 or command_not_found."`
	QueryFamily        string            `json:"query_family,omitempty" jsonschema_description:"The exhausted query family (query_mutation_required)."`
	Domains            []string          `json:"domains,omitempty" jsonschema_description:"Domains involved: for domain_shift the over-used domain(s)."`
	OfficialDomains    []string          `json:"official_domains,omitempty" jsonschema_description:"Official (vendor-owned) domains checked so far (negative_claim, conclusion_ready, domain_shift); the protocol needs at least 2."`
	IndependentDomains []string          `json:"independent_domains,omitempty" jsonschema_description:"Independent (non-vendor) domains checked so far; the protocol needs at least 1."`
	Constraints        []string          `json:"constraints,omitempty" jsonschema_description:"The OPEN CONSTRAINTS lines injected as hard requirements (negative_claim)."`
	Choices            []string          `json:"choices,omitempty" jsonschema_description:"The next-action options offered to the model (choice)."`
	Matched            string            `json:"matched,omitempty" jsonschema_description:"The offered option the model's action matched (choice_matched)."`
	BlockedCommand     string            `json:"blocked_command,omitempty" jsonschema_description:"The command that was not run (effect block)."`
	LogicVerdictStep   int               `json:"logic_verdict_step,omitempty" jsonschema:"minimum=0" jsonschema_description:"Step of the vera.logic.verdict that prompted the rule (repetition_nudge)."`
	Details            map[string]string `json:"details,omitempty" jsonschema_description:"Further rule-specific values, as strings, for what the typed fields do not cover."`
}

// EventType implements Payload: vera.policy.<rule>.
func (p PolicyTriggered) EventType() string { return "vera.policy." + p.Rule }

// policyNew returns the New function of a policy type.
func policyNew(rule string) func() Payload {
	return func() Payload { return &PolicyTriggered{Rule: rule} }
}
