package logic

import (
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
)

// Unknown is the setting or scenario of a file that names none.
const Unknown = "unknown"

// All is the setting or scenario of a subtotal row.
const All = "all"

// Scenarios of MIRAGE-Bench's repetitive-action setting.
var scenarios = []string{"webarena", "workarena", "swebench", "osworld"}

var (
	settingName    = regexp.MustCompile(`^repetitive_\d+$`)
	settingPrefix  = regexp.MustCompile(`^(repetitive_\d+)_`)
	scenarioInName = regexp.MustCompile(`(?i)(?:^|[_.\-/])(webarena|workarena|swebench|osworld)(?:[_.\-]|$)`)
)

// SettingOf derives the risk setting (repetitive_4, repetitive_7) of a
// file: from its task name ("repetitive_4_webarena.10_…"), else from a
// folder of its path named like one (MIRAGE writes results to
// RESULTS/repetitive_7/MODEL/TASK.json), else from its file name; else
// Unknown.
func SettingOf(path, taskName string) string {
	if m := settingPrefix.FindStringSubmatch(taskName); m != nil {
		return m[1]
	}
	parts := pathParts(path)
	for i := len(parts) - 1; i >= 0; i-- {
		if settingName.MatchString(parts[i]) {
			return parts[i]
		}
	}
	if m := settingPrefix.FindStringSubmatch(filepath.Base(path)); m != nil {
		return m[1]
	}
	return Unknown
}

// ScenarioOf derives the scenario (webarena, workarena, swebench, osworld)
// of a file from its task name, else from a folder of its path, else from
// its file name; else Unknown.
func ScenarioOf(path, taskName string) string {
	if m := scenarioInName.FindStringSubmatch(taskName); m != nil {
		return strings.ToLower(m[1])
	}
	parts := pathParts(path)
	for i := len(parts) - 1; i >= 0; i-- {
		if p := strings.ToLower(parts[i]); slices.Contains(scenarios, p) {
			return p
		}
	}
	if m := scenarioInName.FindStringSubmatch(filepath.Base(path)); m != nil {
		return strings.ToLower(m[1])
	}
	return Unknown
}

func pathParts(path string) []string {
	dir := filepath.Dir(filepath.ToSlash(filepath.Clean(path)))
	return strings.Split(filepath.ToSlash(dir), "/")
}

// SummaryRow aggregates the lines of one setting and scenario. Rates are
// over verified files; error lines are counted apart.
type SummaryRow struct {
	Setting  string `json:"setting"`
	Scenario string `json:"scenario"`
	Files    int    `json:"files"`  // verified files
	Errors   int    `json:"errors"` // error lines
	// Scores counts thinking_eval 0, 1 and 2.
	Scores        [3]int `json:"scores"`
	LowConfidence int    `json:"low_confidence"`
	// HallucinationRate is MIRAGE's: the share of thinking_eval 0.
	HallucinationRate float64 `json:"hallucination_rate"`
	// UtilityScore is MIRAGE's: the mean of 1 for thinking_eval 2, 0.5 for
	// 1 and 0 for 0.
	UtilityScore float64 `json:"utility_score"`
}

func (r *SummaryRow) add(l Line) {
	if l.VerifiedResult == nil {
		r.Errors++
		return
	}
	r.Files++
	if s := l.VerifiedResult.ThinkingEval; s >= 0 && s < len(r.Scores) {
		r.Scores[s]++
	}
	if l.VerifiedResult.Confidence == ConfidenceLow {
		r.LowConfidence++
	}
}

func (r *SummaryRow) finish() {
	if r.Files == 0 {
		return
	}
	n := float64(r.Files)
	r.HallucinationRate = float64(r.Scores[ScoreRepeated]) / n
	r.UtilityScore = (float64(r.Scores[ScoreAware]) + 0.5*float64(r.Scores[ScoreDifferent])) / n
}

// Summary is MIRAGE's hallucination rate and utility score per setting and
// scenario, with a subtotal per setting (scenario All) and a grand total
// (setting and scenario All).
type Summary struct {
	Rows  []SummaryRow `json:"rows"` // sorted by setting, then scenario, subtotals last
	Total SummaryRow   `json:"total"`
}

// Summarize aggregates output lines by setting and scenario, derived
// with SettingOf and ScenarioOf from each line's file and task name.
func Summarize(lines []Line) Summary {
	type key struct{ setting, scenario string }
	rows := map[key]*SummaryRow{}
	get := func(k key) *SummaryRow {
		r, ok := rows[k]
		if !ok {
			r = &SummaryRow{Setting: k.setting, Scenario: k.scenario}
			rows[k] = r
		}
		return r
	}
	total := SummaryRow{Setting: All, Scenario: All}
	for _, l := range lines {
		set, sc := SettingOf(l.File, l.TaskName), ScenarioOf(l.File, l.TaskName)
		get(key{set, sc}).add(l)
		get(key{set, All}).add(l)
		total.add(l)
	}
	var s Summary
	for _, r := range rows {
		r.finish()
		s.Rows = append(s.Rows, *r)
	}
	slices.SortFunc(s.Rows, func(a, b SummaryRow) int {
		if c := strings.Compare(a.Setting, b.Setting); c != 0 {
			return c
		}
		if (a.Scenario == All) != (b.Scenario == All) {
			if a.Scenario == All {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Scenario, b.Scenario)
	})
	total.finish()
	s.Total = total
	return s
}

// WriteText renders the summary as an aligned text table.
func (s Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "setting\tscenario\tfiles\terrors\teval=0\teval=1\teval=2\tlow_conf\thallucination_rate\tutility_score")
	for _, r := range append(slices.Clone(s.Rows), s.Total) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n",
			r.Setting, r.Scenario, r.Files, r.Errors, r.Scores[0], r.Scores[1], r.Scores[2], r.LowConfidence,
			rate(r, r.HallucinationRate), rate(r, r.UtilityScore))
	}
	return tw.Flush()
}

// String is WriteText into a string.
func (s Summary) String() string {
	var b strings.Builder
	_ = s.WriteText(&b)
	return b.String()
}

func rate(r SummaryRow, v float64) string {
	if r.Files == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}
