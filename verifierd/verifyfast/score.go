package verifyfast

import "slices"

// Rule is one step of the scoring formula: at least Min errors of the
// severity give Score.
type Rule struct {
	Min   int `json:"min"`
	Score int `json:"score"`
}

// Thresholds is the deterministic scoring formula, the
// score_thresholds block of strategy.yaml:
//
//	score_thresholds:
//	  high:               # when High > 0: first rule with High >= min
//	    - {min: 3, score: 1}
//	    - {min: 1, score: 2}
//	  low:                # when High == 0 and Low > 0: first rule with Low >= min
//	    - {min: 2, score: 3}
//	    - {min: 1, score: 4}
//	  clean: 5            # no counted errors
//
// which is the spec's formula and DefaultThresholds. Rules are written in
// strictly descending order of min and each list ends with min 1, so every
// count has a score; scores are 1..5 and never increase with more errors
// (every high score ≤ every low score ≤ clean). LoadStrategy enforces this.
type Thresholds struct {
	High  []Rule `json:"high"`
	Low   []Rule `json:"low"`
	Clean int    `json:"clean"`
}

// DefaultThresholds returns the spec's formula: High ≥ 3 → 1, High 1–2 → 2,
// Low ≥ 2 with High 0 → 3, Low 1 with High 0 → 4, no errors → 5.
func DefaultThresholds() Thresholds {
	return Thresholds{
		High:  []Rule{{Min: 3, Score: 1}, {Min: 1, Score: 2}},
		Low:   []Rule{{Min: 2, Score: 3}, {Min: 1, Score: 4}},
		Clean: 5,
	}
}

// Score applies the formula to counted High and Low errors. A count that no
// rule reaches (possible only in a hand-built, unvalidated Thresholds) falls
// through to the next branch.
func (t Thresholds) Score(high, low int) int {
	if high > 0 {
		for _, r := range t.High {
			if high >= r.Min {
				return r.Score
			}
		}
	}
	if low > 0 {
		for _, r := range t.Low {
			if low >= r.Min {
				return r.Score
			}
		}
	}
	return t.Clean
}

func (t Thresholds) isZero() bool { return len(t.High) == 0 && len(t.Low) == 0 && t.Clean == 0 }

func (t Thresholds) clone() Thresholds {
	return Thresholds{High: slices.Clone(t.High), Low: slices.Clone(t.Low), Clean: t.Clean}
}

// DefaultNumericDeviationThreshold is the spec's 10%: a numeric deviation
// above it (with opposite direction) is High severity.
const DefaultNumericDeviationThreshold = 0.10

// Params are the audit strategy parameters (strategy.yaml params).
type Params struct {
	// NumericDeviationThreshold is the fraction (0.10 = 10%) separating Low
	// from High numeric deviations; the fact-check prompt uses it.
	NumericDeviationThreshold float64 `json:"numeric_deviation_threshold"`
	// MaxErrorsPerPhase is the most errors the fact check and the logic
	// check may each report; 0 means no limit. Score enforces it too (see
	// Score).
	MaxErrorsPerPhase int `json:"max_errors_per_phase"`
	// ScoreThresholds is the scoring formula.
	ScoreThresholds Thresholds `json:"score_thresholds"`
}

// Overrides are a profile's changes to the default Params; nil fields
// inherit.
type Overrides struct {
	NumericDeviationThreshold *float64            `json:"numeric_deviation_threshold,omitempty"`
	MaxErrorsPerPhase         *int                `json:"max_errors_per_phase,omitempty"`
	ScoreThresholds           *ThresholdOverrides `json:"score_thresholds,omitempty"`
}

// ThresholdOverrides replace parts of the default Thresholds: a non-nil list
// replaces that whole list, a non-nil Clean replaces clean.
type ThresholdOverrides struct {
	High  []Rule `json:"high,omitempty"`
	Low   []Rule `json:"low,omitempty"`
	Clean *int   `json:"clean,omitempty"`
}

// apply returns p with o merged onto it.
func (p Params) apply(o Overrides) Params {
	p.ScoreThresholds = p.ScoreThresholds.clone()
	if o.NumericDeviationThreshold != nil {
		p.NumericDeviationThreshold = *o.NumericDeviationThreshold
	}
	if o.MaxErrorsPerPhase != nil {
		p.MaxErrorsPerPhase = *o.MaxErrorsPerPhase
	}
	if t := o.ScoreThresholds; t != nil {
		if t.High != nil {
			p.ScoreThresholds.High = slices.Clone(t.High)
		}
		if t.Low != nil {
			p.ScoreThresholds.Low = slices.Clone(t.Low)
		}
		if t.Clean != nil {
			p.ScoreThresholds.Clean = *t.Clean
		}
	}
	return p
}

// Strategy is a loaded strategy.yaml: default Params, per-profile Overrides,
// and the profile the strategy is resolved for.
//
// The zero Strategy is the spec's: threshold 0.10, no error cap, the spec's
// formula.
type Strategy struct {
	Defaults Params               `json:"defaults"`
	Profiles map[string]Overrides `json:"profiles,omitempty"`
	// Profile is the profile selected by ForProfile; "" means the defaults.
	Profile string `json:"profile,omitempty"`

	file  string         // file it was loaded from, for CheckProfiles
	lines map[string]int // line of each profile key
	order []string       // profile names in file order
}

// ForProfile returns the strategy resolved for a profile: Effective (and so
// Score) then uses the profile's overrides merged onto the defaults. A
// profile strategy.yaml does not mention simply gets the defaults.
func (s Strategy) ForProfile(name string) Strategy {
	s.Profile = name
	return s
}

// Effective returns the parameters in force: the defaults with the selected
// profile's overrides merged on, and, for fields left zero, the spec's
// values (threshold 0.10, the spec's formula).
func (s Strategy) Effective() Params {
	p := s.Defaults
	if o, ok := s.Profiles[s.Profile]; ok && s.Profile != "" {
		p = p.apply(o)
	} else {
		p.ScoreThresholds = p.ScoreThresholds.clone()
	}
	if p.NumericDeviationThreshold == 0 {
		p.NumericDeviationThreshold = DefaultNumericDeviationThreshold
	}
	if p.ScoreThresholds.isZero() {
		p.ScoreThresholds = DefaultThresholds()
	}
	return p
}

// ProfileNames returns the profiles the strategy overrides, in file order.
func (s Strategy) ProfileNames() []string {
	if s.order != nil {
		return slices.Clone(s.order)
	}
	names := make([]string, 0, len(s.Profiles))
	for n := range s.Profiles {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Score is Phase 4: the deterministic credit score (1–5) from the findings
// of the fact check and the logic check, with the counted High and Low
// errors.
//
//   - reasonable_inference findings never count;
//   - Score is conservative with findings Finding.Validate would reject, so
//     that a malformed finding can never raise a score: any level other than
//     reasonable_inference counts as an error, and an error whose severity is
//     not low counts as High;
//   - max_errors_per_phase: a phase may report at most that many errors (the
//     prompts say so). When a phase (the findings of one Kind) has more, only
//     that many count, High ones first; so the cap limits how much one phase
//     can weigh but never lets a Low displace a High. 0 means no cap;
//   - the counts then go through the thresholds (Thresholds.Score).
//
// Use st.ForProfile(name) to score with a profile's overrides.
func Score(findings []Finding, st Strategy) (score, high, low int) {
	p := st.Effective()
	type counts struct{ high, low int }
	perPhase := map[Kind]*counts{}
	var kinds []Kind
	for _, f := range findings {
		if !f.Level.IsError() {
			continue
		}
		c := perPhase[f.Kind]
		if c == nil {
			c = &counts{}
			perPhase[f.Kind] = c
			kinds = append(kinds, f.Kind)
		}
		if f.Severity == SeverityLow {
			c.low++
		} else {
			c.high++
		}
	}
	for _, k := range kinds {
		c := perPhase[k]
		h, l := c.high, c.low
		if limit := p.MaxErrorsPerPhase; limit > 0 {
			h = min(h, limit)
			l = min(l, limit-h)
		}
		high += h
		low += l
	}
	return p.ScoreThresholds.Score(high, low), high, low
}
