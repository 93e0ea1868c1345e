package verifyfast

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/vera-run/vera/internal/llm"
)

// decompositionReply is what ParseDecomposition decodes a Phase 1 reply
// into.
type decompositionReply struct {
	Facts  *[]string `json:"facts"`
	Chains *[]string `json:"chains"`
}

// findingsReply is what ParseFindings decodes a Phase 2 or 3 reply into.
type findingsReply struct {
	Findings *[]findingReply `json:"findings"`
}

type findingReply struct {
	Claim    string  `json:"claim"`
	Level    string  `json:"level"`
	Severity *string `json:"severity"`
	Quote    string  `json:"quote"`
	Reason   string  `json:"reason"`
}

// The reply schemas of the phases (response_format json_schema), derived
// from the types the parsers decode into (llm.ReplySchema), members in the
// order of the prompts' schema. They are strict (OpenAI's strict mode:
// every member required, none other allowed), so that OpenAI enforces them
// as the local servers do whatever strict says; requiring "chains" and a
// severity costs the parsers nothing ([] and "none" are what they read
// for none). A server that refuses response_format is called again without
// it (the request is Optional); one that ignores it is read as before.
var (
	decompositionSchema = llm.JSONSchema{Name: "vera_verifyfast_decomposition", Strict: true,
		Schema: llm.MustReplySchema(decompositionReply{}, nil)}
	findingsSchema = llm.JSONSchema{Name: "vera_verifyfast_findings", Strict: true,
		Schema: llm.MustReplySchema(findingsReply{}, map[string][]any{
			"findings.level":    {string(LevelContradiction), string(LevelUnsupported), string(LevelReasonableInference)},
			"findings.severity": {string(SeverityHigh), string(SeverityLow), "none"},
		})}
)

// PhaseSchema returns the reply schema a phase's calls request.
func PhaseSchema(p Phase) (llm.JSONSchema, bool) {
	switch p {
	case PhaseDecompose:
		return decompositionSchema, true
	case PhaseFactCheck, PhaseLogicCheck:
		return findingsSchema, true
	}
	return llm.JSONSchema{}, false
}

// decodeObject extracts the JSON object of a reply and decodes it into v.
func decodeObject(reply string, v any) error {
	obj, err := llm.ExtractJSONObject(reply)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(obj)))
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("JSON does not follow the schema: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// ParseDecomposition parses and validates a Phase 1 reply:
// {"facts": [...], "chains": [...]}, facts required, at most MaxFacts, no
// entry blank. A missing "chains" is taken as none.
func ParseDecomposition(reply string) (Decomposition, error) {
	var raw decompositionReply
	if err := decodeObject(reply, &raw); err != nil {
		return Decomposition{}, err
	}
	if raw.Facts == nil {
		return Decomposition{}, errors.New(`"facts": required field missing (use [] for none)`)
	}
	d := Decomposition{Facts: trimAll(*raw.Facts), Chains: []string{}}
	if raw.Chains != nil {
		d.Chains = trimAll(*raw.Chains)
	}
	if err := d.Validate(); err != nil {
		return Decomposition{}, flatten(err)
	}
	return d, nil
}

func trimAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strings.TrimSpace(s)
	}
	return out
}

// ParseFindings parses and validates a Phase 2 or Phase 3 reply:
// {"findings": [{"claim", "level", "severity", "quote", "reason"}, ...]}.
// Levels and severities are read as ParseErrorLevel and ParseSeverity do; a
// reasonable_inference carries no severity; every finding must pass
// Finding.Validate (an error needs high or low and a quote). All problems
// are reported together, each naming its finding.
func ParseFindings(reply string, kind Kind) ([]Finding, error) {
	var raw findingsReply
	if err := decodeObject(reply, &raw); err != nil {
		return nil, err
	}
	if raw.Findings == nil {
		return nil, errors.New(`"findings": required field missing (use [] when there is nothing to report)`)
	}
	var problems []string
	out := make([]Finding, 0, len(*raw.Findings))
	for i, r := range *raw.Findings {
		f := Finding{
			Kind:   kind,
			Claim:  strings.TrimSpace(r.Claim),
			Quote:  strings.TrimSpace(r.Quote),
			Reason: strings.TrimSpace(r.Reason),
		}
		var bad []string
		level, err := ParseErrorLevel(r.Level)
		if err != nil {
			bad = append(bad, "level: "+err.Error())
		}
		f.Level = level
		if r.Severity != nil {
			sev, err := ParseSeverity(*r.Severity)
			if err != nil {
				bad = append(bad, "severity: "+err.Error())
			}
			f.Severity = sev
		}
		if f.Level == LevelReasonableInference {
			f.Severity = SeverityNone
		}
		if len(bad) == 0 {
			if err := f.Validate(); err != nil {
				bad = append(bad, flatten(err).Error())
			}
		}
		if len(bad) > 0 {
			problems = append(problems, fmt.Sprintf("findings[%d]: %s", i, strings.Join(bad, "; ")))
			continue
		}
		out = append(out, f)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

// flatten puts a joined error on one line.
func flatten(err error) error {
	return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
}
