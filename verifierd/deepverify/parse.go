package deepverify

import (
	"github.com/vera-run/vera/internal/llm"

	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
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
