package verifyfast

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// maxJSONStarts bounds how many '{' ExtractJSONObject tries as the start of
// the object, so that a long reply full of braces costs little.
const maxJSONStarts = 64

var thinkRE = regexp.MustCompile(`(?is)<think>.*?</think>`)

// ExtractJSONObject finds the JSON object in a model reply. It tolerates
// what models wrap around JSON:
//
//   - <think>…</think> reasoning blocks (removed first);
//   - Markdown code fences and prose before or after the object: the first
//     balanced {…} (braces inside strings do not count) that is valid JSON
//     is taken;
//   - trailing commas before } or ], which are removed.
//
// It returns the object's text, or an error saying what is wrong (no
// object, an object cut off, invalid JSON) in words fit to send back to the
// model.
func ExtractJSONObject(reply string) (string, error) {
	s := thinkRE.ReplaceAllString(reply, "")
	if strings.TrimSpace(s) == "" {
		return "", errors.New("the reply is empty: expected one JSON object")
	}
	var firstErr error
	starts := 0
	for i := 0; i < len(s) && starts < maxJSONStarts; i++ {
		if s[i] != '{' {
			continue
		}
		starts++
		end, ok := balancedEnd(s, i)
		if !ok {
			if firstErr == nil {
				firstErr = errors.New("the JSON object is not complete (unbalanced braces or an unterminated string; was the reply cut off?)")
			}
			continue
		}
		cand := s[i:end]
		if json.Valid([]byte(cand)) {
			return cand, nil
		}
		if fixed := removeTrailingCommas(cand); json.Valid([]byte(fixed)) {
			return fixed, nil
		}
		if firstErr == nil {
			err := json.Unmarshal([]byte(cand), new(any))
			firstErr = fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	if firstErr == nil {
		firstErr = errors.New("no JSON object found in the reply")
	}
	return "", firstErr
}

// balancedEnd returns the end (exclusive) of the {…} starting at s[start],
// skipping braces inside JSON strings.
func balancedEnd(s string, start int) (int, bool) {
	depth := 0
	inStr, esc := false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				if c != '}' {
					return 0, false
				}
				return i + 1, true
			}
			if depth < 0 {
				return 0, false
			}
		}
	}
	return 0, false
}

// removeTrailingCommas drops commas (outside strings) that are followed,
// after blanks, by } or ].
func removeTrailingCommas(s string) string {
	var b strings.Builder
	inStr, esc := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			b.WriteByte(c)
			continue
		}
		if c == '"' {
			inStr = true
		}
		if c == ',' {
			j := i + 1
			for j < len(s) && (s[j] == ' ' || s[j] == '\n' || s[j] == '\r' || s[j] == '\t') {
				j++
			}
			if j < len(s) && (s[j] == '}' || s[j] == ']') {
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// decodeObject extracts the JSON object of a reply and decodes it into v.
func decodeObject(reply string, v any) error {
	obj, err := ExtractJSONObject(reply)
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
	var raw struct {
		Facts  *[]string `json:"facts"`
		Chains *[]string `json:"chains"`
	}
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
	var raw struct {
		Findings *[]struct {
			Claim    string  `json:"claim"`
			Level    string  `json:"level"`
			Severity *string `json:"severity"`
			Quote    string  `json:"quote"`
			Reason   string  `json:"reason"`
		} `json:"findings"`
	}
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
