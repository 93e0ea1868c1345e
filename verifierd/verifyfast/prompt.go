package verifyfast

import (
	"bytes"
	"embed"
	"fmt"
	"strconv"
	"text/template"

	"github.com/vera-run/vera/internal/llm"
)

// Prompts holds the prompt templates (text/template) of the three model
// phases and of the re-ask after an unusable reply:
//
//	prompts/standard.tmpl     shared blocks: the three-level error standard,
//	                          the hard rules, the output rules, the findings
//	                          schema, the inputs
//	prompts/decompose.tmpl    Phase 1: "decompose.system", "decompose.user"
//	prompts/fact_check.tmpl   Phase 2: "fact_check.system", "fact_check.user"
//	prompts/logic_check.tmpl  Phase 3: "logic_check.system", "logic_check.user"
//	prompts/repair.tmpl       the re-ask: "repair.user"
//
// Each phase is one system message (the role, the standard, the severity
// table, the JSON schema) and one user message (the inputs). The phase
// templates are executed with a PromptData, repair.user with a RepairData.
//
//go:embed prompts/*.tmpl
var Prompts embed.FS

var promptTemplates = template.Must(template.New("prompts").
	Funcs(template.FuncMap{"add": func(a, b int) int { return a + b }}).
	Option("missingkey=error").
	ParseFS(Prompts, "prompts/*.tmpl"))

// Phase is one of the three model phases of the audit.
type Phase int

// The model phases. Phase 4, the score, needs no model (Score).
const (
	PhaseDecompose  Phase = 1 // factor decomposition
	PhaseFactCheck  Phase = 2 // fact check
	PhaseLogicCheck Phase = 3 // logic check
)

// Phases returns the three model phases in order.
func Phases() []Phase { return []Phase{PhaseDecompose, PhaseFactCheck, PhaseLogicCheck} }

// String names the phase as in error reasons: "phase 2 (fact check)".
func (p Phase) String() string {
	switch p {
	case PhaseDecompose:
		return "phase 1 (decomposition)"
	case PhaseFactCheck:
		return "phase 2 (fact check)"
	case PhaseLogicCheck:
		return "phase 3 (logic check)"
	}
	return fmt.Sprintf("phase %d", int(p))
}

// template is the name prefix of the phase's templates.
func (p Phase) template() string {
	switch p {
	case PhaseDecompose:
		return "decompose"
	case PhaseFactCheck:
		return "fact_check"
	case PhaseLogicCheck:
		return "logic_check"
	}
	return ""
}

// MarshalText writes the phase as "decompose", "fact_check" or
// "logic_check".
func (p Phase) MarshalText() ([]byte, error) {
	if p.template() == "" {
		return nil, fmt.Errorf("unknown phase %d", int(p))
	}
	return []byte(p.template()), nil
}

// PromptData is what the phase templates see.
type PromptData struct {
	ContextInput string
	ModelOutput  string
	// Facts and Chains are Phase 1's decomposition (empty in Phase 1).
	Facts  []string
	Chains []string
	// MaxFacts is the Phase 1 limit (MaxFacts).
	MaxFacts int
	// Threshold is numeric_deviation_threshold as a percentage ("10%"),
	// ThresholdFraction as written in strategy.yaml ("0.1").
	Threshold         string
	ThresholdFraction string
	// MaxErrors is max_errors_per_phase; 0 means no cap (the prompts then
	// say nothing about a cap).
	MaxErrors int
}

// NewPromptData fills PromptData from an item's texts, a decomposition
// (nil in Phase 1) and the effective strategy parameters.
func NewPromptData(contextInput, modelOutput string, dec *Decomposition, p Params) PromptData {
	d := PromptData{
		ContextInput:      contextInput,
		ModelOutput:       modelOutput,
		MaxFacts:          MaxFacts,
		Threshold:         trimPct(p.NumericDeviationThreshold*100) + "%",
		ThresholdFraction: strconv.FormatFloat(p.NumericDeviationThreshold, 'f', -1, 64),
		MaxErrors:         p.MaxErrorsPerPhase,
	}
	if dec != nil {
		d.Facts, d.Chains = dec.Facts, dec.Chains
	}
	return d
}

// RepairData is what the re-ask template sees.
type RepairData struct {
	Error string // why the previous reply could not be used
}

// PhaseMessages renders the phase's prompt: a system and a user message.
func PhaseMessages(p Phase, d PromptData) ([]llm.Message, error) {
	name := p.template()
	if name == "" {
		return nil, fmt.Errorf("verifyfast: unknown phase %d", int(p))
	}
	sys, err := render(name+".system", d)
	if err != nil {
		return nil, err
	}
	user, err := render(name+".user", d)
	if err != nil {
		return nil, err
	}
	return []llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: user}}, nil
}

// RepairMessage renders the user message that asks again after an unusable
// reply, quoting the reason.
func RepairMessage(reason string) (llm.Message, error) {
	s, err := render("repair.user", RepairData{Error: reason})
	if err != nil {
		return llm.Message{}, err
	}
	return llm.Message{Role: "user", Content: s}, nil
}

func render(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := promptTemplates.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("verifyfast: prompt %s: %w", name, err)
	}
	return b.String(), nil
}
