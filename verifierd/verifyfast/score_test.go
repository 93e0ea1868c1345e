package verifyfast

import (
	"fmt"
	"testing"
)

func fnd(kind Kind, level ErrorLevel, sev Severity) Finding {
	return Finding{Kind: kind, Level: level, Severity: sev, Claim: "c", Quote: "q", Reason: "r"}
}

// rep returns n copies of f.
func rep(n int, f Finding) []Finding {
	out := make([]Finding, n)
	for i := range out {
		out[i] = f
	}
	return out
}

func cat(lists ...[]Finding) []Finding {
	var out []Finding
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var (
	factHigh   = fnd(KindFact, LevelContradiction, SeverityHigh)
	factLow    = fnd(KindFact, LevelUnsupported, SeverityLow)
	logicHigh  = fnd(KindLogic, LevelUnsupported, SeverityHigh)
	logicLow   = fnd(KindLogic, LevelContradiction, SeverityLow)
	factInfer  = fnd(KindFact, LevelReasonableInference, SeverityHigh)
	logicInfer = fnd(KindLogic, LevelReasonableInference, SeverityNone)
)

func TestScoreSpecFormula(t *testing.T) {
	// The zero Strategy is the spec's formula with no cap.
	tests := []struct {
		name            string
		findings        []Finding
		score, hi, lowN int
	}{
		{"no findings", nil, 5, 0, 0},
		{"only reasonable inferences", cat(rep(4, factInfer), rep(4, logicInfer)), 5, 0, 0},
		{"low 1, high 0", []Finding{factLow}, 4, 0, 1},
		{"low 1 plus inferences", cat([]Finding{logicLow}, rep(3, factInfer)), 4, 0, 1},
		{"low 2 (boundary), high 0", []Finding{factLow, logicLow}, 3, 0, 2},
		{"low 2 in one phase", rep(2, factLow), 3, 0, 2},
		{"low 7, high 0", cat(rep(4, factLow), rep(3, logicLow)), 3, 0, 7},
		{"high 1", []Finding{factHigh}, 2, 1, 0},
		{"high 1 beats many lows", cat([]Finding{logicHigh}, rep(5, factLow)), 2, 1, 5},
		{"high 2 (upper boundary of 2 points)", []Finding{factHigh, logicHigh}, 2, 2, 0},
		{"high 3 (boundary of 1 point)", cat(rep(2, factHigh), []Finding{logicHigh}), 1, 3, 0},
		{"high 3 in one phase", rep(3, logicHigh), 1, 3, 0},
		{"high 6 plus lows", cat(rep(3, factHigh), rep(3, logicHigh), rep(2, factLow)), 1, 6, 2},
		{"inference with high severity never counts", cat(rep(3, factInfer), []Finding{factLow}), 4, 0, 1},
		// Malformed findings are counted conservatively.
		{"error without severity counts high", []Finding{{Kind: KindFact, Level: LevelContradiction}}, 2, 1, 0},
		{"unknown severity counts high", []Finding{{Kind: KindLogic, Level: LevelUnsupported, Severity: "medium"}}, 2, 1, 0},
		{"unknown level counts as error", []Finding{{Kind: KindFact, Level: "wrong", Severity: SeverityLow}}, 4, 0, 1},
		{"unknown kind still counts", []Finding{{Kind: "other", Level: LevelUnsupported, Severity: SeverityLow}}, 4, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			score, high, low := Score(tt.findings, Strategy{})
			if score != tt.score || high != tt.hi || low != tt.lowN {
				t.Errorf("Score = (%d, high %d, low %d), want (%d, high %d, low %d)", score, high, low, tt.score, tt.hi, tt.lowN)
			}
		})
	}
}

func TestScoreCap(t *testing.T) {
	capped := func(n int) Strategy { return Strategy{Defaults: Params{MaxErrorsPerPhase: n}} }
	tests := []struct {
		name            string
		cap             int
		findings        []Finding
		score, hi, lowN int
	}{
		{"cap 0 means no cap", 0, rep(9, factHigh), 1, 9, 0},
		{"under the cap", 3, rep(3, factHigh), 1, 3, 0},
		{"cap per phase, not in total", 3, cat(rep(3, factHigh), rep(3, logicHigh)), 1, 6, 0},
		{"cap 3 trims a phase", 3, cat(rep(5, factHigh), rep(5, factLow)), 1, 3, 0},
		{"cap 2 keeps high 3 from one phase below the 1-point line", 2, rep(3, factHigh), 2, 2, 0},
		{"cap 2, two phases reach it", 2, cat(rep(3, factHigh), rep(1, logicHigh)), 1, 3, 0},
		{"cap 1: high first, low dropped", 1, []Finding{factLow, factLow, factHigh}, 2, 1, 0},
		{"cap 1: lows of two phases", 1, cat(rep(3, factLow), rep(3, logicLow)), 3, 0, 2},
		{"cap 1: one phase of lows becomes 4 points", 1, rep(4, factLow), 4, 0, 1},
		{"cap 2: high and low share the room", 2, []Finding{factHigh, factLow, factLow}, 2, 1, 1},
		{"inferences never use the room", 1, cat(rep(5, factInfer), []Finding{factLow}), 4, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			score, high, low := Score(tt.findings, capped(tt.cap))
			if score != tt.score || high != tt.hi || low != tt.lowN {
				t.Errorf("Score = (%d, high %d, low %d), want (%d, high %d, low %d)", score, high, low, tt.score, tt.hi, tt.lowN)
			}
		})
	}
}

func TestScoreDefaultStrategy(t *testing.T) {
	st := DefaultStrategy()
	for _, profile := range []string{"", "kimi-full", "cross-verify", "unknown"} {
		st := st.ForProfile(profile)
		for _, tt := range []struct {
			findings []Finding
			want     int
		}{
			{nil, 5}, {rep(1, factLow), 4}, {rep(2, logicLow), 3},
			{rep(2, factHigh), 2}, {rep(3, factHigh), 1}, {rep(6, factHigh), 1},
		} {
			if got, _, _ := Score(tt.findings, st); got != tt.want {
				t.Errorf("profile %q: Score(%d findings) = %d, want %d", profile, len(tt.findings), got, tt.want)
			}
		}
	}
	// max_errors_per_phase 3 by default, 5 for cross-verify.
	_, high, _ := Score(rep(5, factHigh), st.ForProfile("kimi-full"))
	_, highCV, _ := Score(rep(5, factHigh), st.ForProfile("cross-verify"))
	if high != 3 || highCV != 5 {
		t.Errorf("high counts = %d (kimi-full), %d (cross-verify), want 3 and 5", high, highCV)
	}
	if got := st.ForProfile("kimi-full").Effective().NumericDeviationThreshold; got != 0.08 {
		t.Errorf("kimi-full threshold = %v, want 0.08", got)
	}
	if got := st.ForProfile("cross-verify").Effective().NumericDeviationThreshold; got != 0.10 {
		t.Errorf("cross-verify threshold = %v, want 0.10", got)
	}
}

const overrideStrategy = `defaults:
  params:
    numeric_deviation_threshold: 0.10
    max_errors_per_phase: 2
profiles:
  uncapped:
    params:
      max_errors_per_phase: 0
  strict:
    params:
      score_thresholds:
        high:
          - {min: 2, score: 1}
          - {min: 1, score: 2}
        low:
          - {min: 1, score: 3}
  lenient:
    params:
      max_errors_per_phase: 5
      score_thresholds:
        low:
          - {min: 3, score: 3}
          - {min: 1, score: 4}
  clean-is-4:
    params:
      score_thresholds:
        clean: 4
`

func TestScoreProfileOverrides(t *testing.T) {
	st, err := ParseStrategy("strategy.yaml", []byte(overrideStrategy))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		profile  string
		findings []Finding
		want     int
	}{
		// defaults: cap 2 per phase
		{"", rep(3, factHigh), 2},
		{"", nil, 5},
		{"", rep(1, factLow), 4},
		{"", rep(2, factLow), 3},
		{"no-such-profile", rep(3, factHigh), 2},
		// uncapped: the third High counts
		{"uncapped", rep(3, factHigh), 1},
		{"uncapped", rep(2, factHigh), 2},
		// strict: 2 Highs are enough for 1 point, one Low is MID
		{"strict", rep(2, logicHigh), 1},
		{"strict", rep(1, logicHigh), 2},
		{"strict", rep(1, factLow), 3},
		{"strict", nil, 5},
		// lenient: two Lows stay GOOD, three are MID
		{"lenient", rep(2, factLow), 4},
		{"lenient", cat(rep(2, factLow), rep(1, logicLow)), 3},
		{"lenient", rep(3, factHigh), 1}, // high rules inherited
		// clean-is-4: only clean changes
		{"clean-is-4", nil, 4},
		{"clean-is-4", rep(1, factLow), 4},
		{"clean-is-4", rep(2, factLow), 3},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%d", tt.profile, len(tt.findings)), func(t *testing.T) {
			if got, _, _ := Score(tt.findings, st.ForProfile(tt.profile)); got != tt.want {
				t.Errorf("Score = %d, want %d", got, tt.want)
			}
		})
	}
	// ForProfile does not stack: resolving again starts from the defaults.
	if got, _, _ := Score(rep(2, logicHigh), st.ForProfile("strict").ForProfile("uncapped")); got != 2 {
		t.Errorf("re-resolved strategy scored %d, want 2", got)
	}
	// Overrides do not leak into the defaults.
	if got := st.Effective().ScoreThresholds; fmt.Sprint(got) != fmt.Sprint(DefaultThresholds()) {
		t.Errorf("defaults changed: %v", got)
	}
}

func TestThresholdsScore(t *testing.T) {
	th := DefaultThresholds()
	for high := 0; high <= 4; high++ {
		for low := 0; low <= 4; low++ {
			var want int
			switch {
			case high >= 3:
				want = 1
			case high >= 1:
				want = 2
			case low >= 2:
				want = 3
			case low == 1:
				want = 4
			default:
				want = 5
			}
			if got := th.Score(high, low); got != want {
				t.Errorf("Score(high %d, low %d) = %d, want %d", high, low, got, want)
			}
		}
	}
}
