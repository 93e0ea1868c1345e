package verifyfast

import (
	"os"
	"slices"

	"github.com/vera-run/vera/internal/yamlconf"
)

// LoadStrategy reads and validates strategy.yaml:
//
//	defaults:                             # required
//	  params:                             # required
//	    numeric_deviation_threshold: 0.10 # required, a fraction in (0, 1]
//	    max_errors_per_phase: 3           # optional, >= 0; absent or 0: no cap
//	    score_thresholds: ...             # optional, see Thresholds; parts
//	                                      # left out keep the spec's formula
//	profiles:                             # optional
//	  kimi-full:
//	    params:                           # any subset of the params above,
//	      numeric_deviation_threshold: 0.08  # merged onto the defaults
//
// Every problem is reported, as a ConfigErrors naming file, line and field.
// Thresholds are checked after merging, so a profile cannot make the
// formula inconsistent with the defaults it inherits.
func LoadStrategy(path string) (Strategy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Strategy{}, err
	}
	return ParseStrategy(path, data)
}

// ParseStrategy is LoadStrategy on data already read; file names it in
// errors.
func ParseStrategy(file string, data []byte) (Strategy, error) {
	d := strategyDecoder{&yamlconf.Decoder{File: file}}
	root := d.Root(data)
	if root == nil {
		return Strategy{}, d.Err()
	}
	st := Strategy{file: file, lines: map[string]int{}}
	base := Params{ScoreThresholds: DefaultThresholds()}
	var defaults Overrides
	defaultsOK := true
	type prof struct {
		name string
		o    Overrides
		at   int    // line of params.score_thresholds, if set
		path string // its path
	}
	var profs []prof

	d.Object(root, 1, "", []yamlconf.Field{
		{Name: "defaults", Required: true, Decode: func(e yamlconf.Entry) {
			d.Object(e.Val, e.KeyNode.Line, e.Path, []yamlconf.Field{
				{Name: "params", Required: true, Decode: func(e yamlconf.Entry) {
					before := len(d.Errs)
					var at int
					defaults, at = d.params(e, true)
					defaultsOK = len(d.Errs) == before
					if defaultsOK && at > 0 {
						d.checkThresholds(base.apply(defaults).ScoreThresholds, at, e.Path+".score_thresholds", "")
					}
				}},
			}, nil)
		}},
		{Name: "profiles", Decode: func(e yamlconf.Entry) {
			entries, _ := d.Mapping(e.Val, e.Path)
			for _, pe := range entries {
				if !nameRE.MatchString(pe.Key) {
					d.Failf(pe.KeyNode.Line, pe.Path, "bad profile name: %s", nameRule)
				}
				st.lines[pe.Key] = pe.KeyNode.Line
				st.order = append(st.order, pe.Key)
				p := prof{name: pe.Key}
				d.Object(pe.Val, pe.KeyNode.Line, pe.Path, []yamlconf.Field{
					{Name: "params", Decode: func(e yamlconf.Entry) {
						before := len(d.Errs)
						p.o, p.at = d.params(e, false)
						p.path = e.Path + ".score_thresholds"
						if len(d.Errs) != before {
							p.at = 0 // already reported; skip the merged check
						}
					}},
				}, nil)
				profs = append(profs, p)
			}
		}},
	}, nil)

	st.Defaults = base.apply(defaults)
	st.Profiles = make(map[string]Overrides, len(profs))
	for _, p := range profs {
		st.Profiles[p.name] = p.o
		if p.at > 0 && defaultsOK {
			d.checkThresholds(st.Defaults.apply(p.o).ScoreThresholds, p.at, p.path, " after merging onto the defaults")
		}
	}
	if err := d.Err(); err != nil {
		return Strategy{}, err
	}
	return st, nil
}

// strategyDecoder is the Decoder of one strategy.yaml, with its blocks'
// decoders.
type strategyDecoder struct{ *yamlconf.Decoder }

// params decodes a params block. It returns the overrides and the line of
// score_thresholds (0 if absent).
func (d strategyDecoder) params(e yamlconf.Entry, isDefaults bool) (Overrides, int) {
	var o Overrides
	thresholdsAt := 0
	d.Object(e.Val, e.KeyNode.Line, e.Path, []yamlconf.Field{
		{Name: "numeric_deviation_threshold", Required: isDefaults, Decode: func(e yamlconf.Entry) {
			if v, ok := d.Float(e); ok {
				if v <= 0 || v > 1 {
					d.Failf(e.Val.Line, e.Path, "must be a fraction in (0, 1], e.g. 0.10 for 10%%; got %v", v)
				}
				o.NumericDeviationThreshold = &v
			}
		}},
		{Name: "max_errors_per_phase", Decode: func(e yamlconf.Entry) {
			if v, ok := d.Int(e); ok {
				if v < 0 {
					d.Failf(e.Val.Line, e.Path, "must be 0 (no cap) or more, got %d", v)
				}
				o.MaxErrorsPerPhase = &v
			}
		}},
		{Name: "score_thresholds", Decode: func(e yamlconf.Entry) {
			thresholdsAt = e.KeyNode.Line
			t := &ThresholdOverrides{}
			o.ScoreThresholds = t
			d.Object(e.Val, e.KeyNode.Line, e.Path, []yamlconf.Field{
				{Name: "high", Decode: func(e yamlconf.Entry) { t.High = d.rules(e, "High") }},
				{Name: "low", Decode: func(e yamlconf.Entry) { t.Low = d.rules(e, "Low") }},
				{Name: "clean", Decode: func(e yamlconf.Entry) {
					if v, ok := d.Int(e); ok {
						if v < 1 || v > 5 {
							d.Failf(e.Val.Line, e.Path, "score must be 1..5, got %d", v)
						}
						t.Clean = &v
					}
				}},
			}, nil)
		}},
	}, nil)
	return o, thresholdsAt
}

// rules decodes a list of {min, score} rules and checks it on its own:
// min >= 1, strictly descending, ending with 1; score 1..5 and never higher
// for more errors.
func (d strategyDecoder) rules(e yamlconf.Entry, severity string) []Rule {
	items, ok := d.List(e)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		d.Failf(e.Val.Line, e.Path, "at least one rule is required")
		return nil
	}
	rules := make([]Rule, 0, len(items))
	for i, it := range items {
		var r Rule
		var hasMin, hasScore bool
		d.Object(it.Val, it.Val.Line, it.Path, []yamlconf.Field{
			{Name: "min", Required: true, Decode: func(e yamlconf.Entry) {
				if v, ok := d.Int(e); ok {
					r.Min, hasMin = v, true
					if v < 1 {
						d.Failf(e.Val.Line, e.Path, "must be at least 1, got %d", v)
						hasMin = false
					}
				}
			}},
			{Name: "score", Required: true, Decode: func(e yamlconf.Entry) {
				if v, ok := d.Int(e); ok {
					r.Score, hasScore = v, true
					if v < 1 || v > 5 {
						d.Failf(e.Val.Line, e.Path, "score must be 1..5, got %d", v)
						hasScore = false
					}
				}
			}},
		}, nil)
		if i > 0 && hasMin && r.Min >= rules[i-1].Min && rules[i-1].Min > 0 {
			d.Failf(it.Val.Line, it.Path+".min", "rules must be in strictly descending order of min: %d follows %d", r.Min, rules[i-1].Min)
		}
		if i > 0 && hasScore && rules[i-1].Score > 0 && r.Score < rules[i-1].Score {
			d.Failf(it.Val.Line, it.Path+".score", "fewer errors cannot score lower: %d errors score %d but %d errors score %d", r.Min, r.Score, rules[i-1].Min, rules[i-1].Score)
		}
		rules = append(rules, r)
	}
	if last := rules[len(rules)-1]; last.Min > 1 {
		it := items[len(items)-1]
		d.Failf(it.Val.Line, it.Path+".min", "the last rule must have min 1, so that any number of %s errors is scored", severity)
	}
	return rules
}

// checkThresholds checks the ordering across the lists of a complete
// formula: every high score <= every low score <= clean.
func (d strategyDecoder) checkThresholds(t Thresholds, line int, path, note string) {
	if len(t.High) == 0 || len(t.Low) == 0 {
		return // reported already
	}
	maxHigh := slices.MaxFunc(t.High, func(a, b Rule) int { return a.Score - b.Score })
	minLow := slices.MinFunc(t.Low, func(a, b Rule) int { return a.Score - b.Score })
	maxLow := slices.MaxFunc(t.Low, func(a, b Rule) int { return a.Score - b.Score })
	if maxHigh.Score > minLow.Score {
		d.Failf(line, path, "inconsistent%s: %d High error(s) score %d, above %d Low error(s) scoring %d", note, maxHigh.Min, maxHigh.Score, minLow.Min, minLow.Score)
	}
	if maxLow.Score > t.Clean {
		d.Failf(line, path, "inconsistent%s: %d Low error(s) score %d, above clean %d", note, maxLow.Min, maxLow.Score, t.Clean)
	}
}

// CheckProfiles reports the profiles strategy.yaml overrides that
// settings.yaml does not define (most likely typos), naming strategy.yaml's
// lines.
func (s Strategy) CheckProfiles(set *Settings) error {
	d := &yamlconf.Decoder{File: s.file}
	for _, name := range s.ProfileNames() {
		if _, ok := set.Profiles[name]; !ok {
			d.Failf(s.lines[name], "profiles."+name, "no such profile in settings")
		}
	}
	return d.Err()
}
