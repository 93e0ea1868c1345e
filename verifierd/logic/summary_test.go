package logic

import (
	"math"
	"strings"
	"testing"
)

func TestSettingAndScenario(t *testing.T) {
	tests := []struct {
		path, task        string
		setting, scenario string
	}{
		{"data/repetitive_4/webarena/repetitive_4_webarena.10_GenericAgent-gpt-4o-mini-2024-07-18.json", "repetitive_4_webarena.10_GenericAgent-gpt-4o-mini-2024-07-18", "repetitive_4", "webarena"},
		{"results/repetitive_7/gpt-4o/repetitive_7_workarena.servicenow.x.json", "repetitive_7_workarena.servicenow.x", "repetitive_7", "workarena"},
		{"results/repetitive_7/gpt-4o/x.json", "repetitive_7_swebench.django__django-1", "repetitive_7", "swebench"},
		{"data/repetitive_7/osworld/repetitive_actions_osworld_gpt-4o_convert_image.json", "repetitive_actions_osworld_gpt-4o_convert_image", "repetitive_7", "osworld"},
		{"repetitive_4_swebench.astropy.json", "", "repetitive_4", "swebench"},
		{`C:\results\repetitive_7\osworld\a.json`, "", Unknown, Unknown}, // not a path on this OS
		{"elsewhere/file.json", "task", Unknown, Unknown},
		{"x/repetitive_4/WorkArena/file.json", "", "repetitive_4", "workarena"},
	}
	for _, tt := range tests {
		if tt.path[0] == 'C' && strings.Contains(tt.path, `\`) {
			continue // only meaningful on Windows
		}
		if got := SettingOf(tt.path, tt.task); got != tt.setting {
			t.Errorf("SettingOf(%q, %q) = %q, want %q", tt.path, tt.task, got, tt.setting)
		}
		if got := ScenarioOf(tt.path, tt.task); got != tt.scenario {
			t.Errorf("ScenarioOf(%q, %q) = %q, want %q", tt.path, tt.task, got, tt.scenario)
		}
	}
}

func line(path string, score int, conf Confidence) Line {
	return Line{File: path, VerifiedResult: &Verdict{ThinkingEval: score, Confidence: conf, VerifierType: VerifierType}}
}

func TestSummarize(t *testing.T) {
	lines := []Line{
		line("r/repetitive_4/webarena/a.json", 0, ConfidenceHigh),
		line("r/repetitive_4/webarena/b.json", 1, ConfidenceHigh),
		line("r/repetitive_4/webarena/c.json", 2, ConfidenceLow),
		line("r/repetitive_4/webarena/d.json", 2, ConfidenceHigh),
		line("r/repetitive_4/swebench/e.json", 0, ConfidenceHigh),
		line("r/repetitive_7/osworld/f.json", 1, ConfidenceLow),
		{File: "r/repetitive_7/osworld/g.json", Error: "r/repetitive_7/osworld/g.json: malformed"},
	}
	s := Summarize(lines)
	find := func(setting, scenario string) SummaryRow {
		for _, r := range s.Rows {
			if r.Setting == setting && r.Scenario == scenario {
				return r
			}
		}
		t.Fatalf("no row %s/%s in %+v", setting, scenario, s.Rows)
		return SummaryRow{}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

	web := find("repetitive_4", "webarena")
	if web.Files != 4 || web.Scores != [3]int{1, 1, 2} || web.LowConfidence != 1 ||
		!near(web.HallucinationRate, 0.25) || !near(web.UtilityScore, (2+0.5)/4) {
		t.Errorf("webarena row %+v", web)
	}
	r4 := find("repetitive_4", All)
	if r4.Files != 5 || !near(r4.HallucinationRate, 0.4) || !near(r4.UtilityScore, 2.5/5) {
		t.Errorf("repetitive_4 subtotal %+v", r4)
	}
	os := find("repetitive_7", "osworld")
	if os.Files != 1 || os.Errors != 1 || !near(os.HallucinationRate, 0) || !near(os.UtilityScore, 0.5) {
		t.Errorf("osworld row %+v", os)
	}
	if s.Total.Files != 6 || s.Total.Errors != 1 || !near(s.Total.HallucinationRate, 2.0/6) || !near(s.Total.UtilityScore, 3.0/6) {
		t.Errorf("total %+v", s.Total)
	}
	var order []string
	for _, r := range s.Rows {
		order = append(order, r.Setting+"/"+r.Scenario)
	}
	if got := strings.Join(order, " "); got != "repetitive_4/swebench repetitive_4/webarena repetitive_4/all repetitive_7/osworld repetitive_7/all" {
		t.Errorf("row order %s", got)
	}

	text := s.String()
	for _, want := range []string{"hallucination_rate", "utility_score", "repetitive_4  webarena", "0.250", "0.625", "all           all"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}

	empty := Summarize(nil)
	if empty.Total.Files != 0 || !strings.Contains(empty.String(), "-") {
		t.Errorf("empty summary %q", empty.String())
	}
}
