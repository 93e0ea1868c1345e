package deepverify

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
)

// Limits the auditor enforces whatever the model says.
const (
	MaxChecks       = 3
	MaxInstructions = 3
)

// Decomposition is the decomposition model's reply.
type Decomposition struct {
	Summary      []catalog.AuditFinding `json:"summary"`
	LikelyErrors []catalog.LikelyError  `json:"likely_errors"`
	Checks       []PlannedCheck         `json:"checks"`
}

// PlannedCheck is one check as the model proposes it.
type PlannedCheck struct {
	Source      string `json:"source"`
	Question    string `json:"question"`
	LoadBearing *bool  `json:"load_bearing"` // absent = load-bearing
}

// CheckStep is one reply of a check loop: a command to run, or a verdict.
type CheckStep struct {
	Command   string              `json:"command"`
	Verdict   catalog.CheckResult `json:"verdict"`
	Evidence  string              `json:"evidence"`
	Citations []string            `json:"citations"`
}

// Judgement is the judge model's reply.
type Judgement struct {
	Explanation  string   `json:"explanation"`
	Score        int      `json:"score"`
	Instructions []string `json:"instructions"`
}

// The reply schemas the auditor's calls request (response_format
// json_schema), each derived from the type its parser decodes into
// (llm.ReplySchema): every member required, none other allowed, which is
// OpenAI's strict mode (Strict is set, so that OpenAI enforces the schema;
// the other servers constrain the output whatever strict says). A required
// member costs the parsers nothing: an empty list, an empty string (a check
// step's verdict "" means "run the command") and load_bearing are what they
// read anyway. A server that refuses the schema is called again without it
// (Request.Optional), and a server that ignores it is read as before: the
// parsers take the object out of whatever surrounds it.
var (
	decompositionSchema = llm.JSONSchema{Name: "vera_audit_decomposition", Strict: true,
		Schema: llm.MustReplySchema(Decomposition{}, map[string][]any{"likely_errors.class": errorClasses})}
	checkStepSchema = llm.JSONSchema{Name: "vera_audit_check_step", Strict: true,
		Schema: llm.MustReplySchema(CheckStep{}, map[string][]any{"verdict": {"", string(catalog.CheckYes), string(catalog.CheckNo), string(catalog.CheckUnknown)}})}
	judgementSchema = llm.JSONSchema{Name: "vera_audit_judgement", Strict: true,
		Schema: llm.MustReplySchema(Judgement{}, map[string][]any{"score": {1, 2, 3, 4}})}
)

// errorClasses are the failure classes a decomposition may name
// (catalog.ErrorClass).
var errorClasses = []any{string(catalog.ErrorFindingSources), string(catalog.ErrorReasoning),
	string(catalog.ErrorProblemUnderstanding), string(catalog.ErrorAction), string(catalog.ErrorStepBudget)}

// ParseDecomposition parses and normalises a decomposition reply: unknown
// failure classes are dropped, at most MaxChecks checks are kept.
func ParseDecomposition(reply string) (Decomposition, error) {
	var d Decomposition
	if err := decode(reply, &d); err != nil {
		return Decomposition{}, err
	}
	sum := d.Summary[:0]
	for _, f := range d.Summary {
		f.Step = max(0, f.Step)
		f.Source, f.Finding = strings.TrimSpace(f.Source), strings.TrimSpace(f.Finding)
		if f.Finding != "" {
			sum = append(sum, f)
		}
	}
	d.Summary = sum
	errs := d.LikelyErrors[:0]
	for _, e := range d.LikelyErrors {
		e.Class = catalog.ErrorClass(strings.ToLower(strings.TrimSpace(string(e.Class))))
		if e.Class.Valid() {
			errs = append(errs, e)
		}
	}
	d.LikelyErrors = errs
	checks := d.Checks[:0]
	for _, c := range d.Checks {
		c.Source, c.Question = strings.TrimSpace(c.Source), strings.TrimSpace(c.Question)
		if c.Question != "" {
			checks = append(checks, c)
		}
	}
	if len(checks) > MaxChecks {
		checks = checks[:MaxChecks]
	}
	d.Checks = checks
	return d, nil
}

// ParseCheckStep parses a check-loop reply.
func ParseCheckStep(reply string) (CheckStep, error) {
	var s CheckStep
	if err := decode(reply, &s); err != nil {
		return CheckStep{}, err
	}
	s.Verdict = catalog.CheckResult(strings.ToLower(strings.TrimSpace(string(s.Verdict))))
	s.Command = strings.TrimSpace(s.Command)
	switch {
	case s.Verdict != "" && !s.Verdict.Valid():
		return CheckStep{}, fmt.Errorf("verdict %q is not yes, no or unknown", s.Verdict)
	case s.Verdict == "" && s.Command == "":
		return CheckStep{}, errors.New("neither a command nor a verdict")
	}
	if s.Verdict != "" {
		s.Command = ""
	}
	return s, nil
}

// ParseJudgement parses a judge reply; the score must be 1–4 and at most
// MaxInstructions non-empty instructions are kept.
func ParseJudgement(reply string) (Judgement, error) {
	var j Judgement
	if err := decode(reply, &j); err != nil {
		return Judgement{}, err
	}
	if j.Score < 1 || j.Score > 4 {
		return Judgement{}, fmt.Errorf("score %d is not 1-4", j.Score)
	}
	ins := j.Instructions[:0]
	for _, s := range j.Instructions {
		if s = strings.TrimSpace(s); s != "" {
			ins = append(ins, s)
		}
	}
	if len(ins) > MaxInstructions {
		ins = ins[:MaxInstructions]
	}
	j.Instructions = ins
	return j, nil
}

func decode(reply string, v any) error {
	c, err := llm.ExtractJSONObject(reply)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(c), v); err != nil {
		return fmt.Errorf("reply JSON: %w", err)
	}
	return nil
}

// reaskPrompt is sent once after an unparseable reply.
func reaskPrompt(err error) string {
	return "Your reply could not be parsed (" + err.Error() + "). Reply again with only the JSON object, exactly as specified, and nothing else."
}
