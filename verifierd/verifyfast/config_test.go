package verifyfast

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestDefaultsLoad(t *testing.T) {
	s := DefaultSettings()
	if got := s.ProfileNames(); strings.Join(got, ",") != "kimi-full,cross-verify" {
		t.Errorf("profiles = %v", got)
	}
	if !reflect.DeepEqual(s.Defaults, Generation{MaxTokens: 4000, Temperature: 0.1}) {
		t.Errorf("defaults = %+v", s.Defaults)
	}
	kimi := s.LLMs["kimi-k2"]
	want := LLM{Name: "kimi-k2", BaseURL: "http://127.0.0.1:1234/v1", Model: "Kimi-K2-Instruct-0905", APIKeyEnv: "KIMI_API_KEY", InferenceEngine: "aistudio-vllm"}
	if kimi != want {
		t.Errorf("kimi-k2 = %+v, want %+v", kimi, want)
	}
	if p := s.Profiles["cross-verify"]; p.Run != "kimi-k2" || p.Verify != "qwen3-235b" {
		t.Errorf("cross-verify = %+v", p)
	}
	for _, l := range s.LLMs {
		if l.APIKeyEnv == "" {
			t.Errorf("llm %s names no api_key_env", l.Name)
		}
	}

	st := DefaultStrategy()
	eff := st.Effective()
	if eff.NumericDeviationThreshold != 0.10 || eff.MaxErrorsPerPhase != 3 {
		t.Errorf("strategy defaults = %+v", eff)
	}
	if !equalThresholds(eff.ScoreThresholds, DefaultThresholds()) {
		t.Errorf("thresholds = %+v", eff.ScoreThresholds)
	}
	if got := st.ProfileNames(); strings.Join(got, ",") != "kimi-full,cross-verify" {
		t.Errorf("strategy profiles = %v", got)
	}
	if err := st.CheckProfiles(s); err != nil {
		t.Errorf("CheckProfiles: %v", err)
	}

	// The same files load from disk.
	dir := t.TempDir()
	for _, name := range []string{"settings.yaml", "strategy.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), mustRead("defaults/"+name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := LoadSettings(filepath.Join(dir, "settings.yaml")); err != nil {
		t.Error(err)
	}
	if _, err := LoadStrategy(filepath.Join(dir, "strategy.yaml")); err != nil {
		t.Error(err)
	}
	if _, err := LoadSettings(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("LoadSettings of a missing file succeeded")
	}
}

func equalThresholds(a, b Thresholds) bool {
	if a.Clean != b.Clean || len(a.High) != len(b.High) || len(a.Low) != len(b.Low) {
		return false
	}
	for i := range a.High {
		if a.High[i] != b.High[i] {
			return false
		}
	}
	for i := range a.Low {
		if a.Low[i] != b.Low[i] {
			return false
		}
	}
	return true
}

func TestSettingsOptionalParts(t *testing.T) {
	s, err := ParseSettings("settings.yaml", []byte(`
llms:
  local:
    base_url: http://localhost:8080/v1
    model: some-model
profiles:
  solo: {run: local, verify: local}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s.Defaults, Generation{MaxTokens: DefaultMaxTokens, Temperature: DefaultTemperature}) {
		t.Errorf("defaults = %+v", s.Defaults)
	}
	if l := s.LLMs["local"]; l.APIKeyEnv != "" || l.APIKey() != "" {
		t.Errorf("local llm = %+v", l)
	}
	if _, err := s.SelectProfiles([]string{"solo", "nope"}); err == nil {
		t.Error("SelectProfiles accepted an unknown profile")
	}
	ps, err := s.SelectProfiles(nil)
	if err != nil || len(ps) != 1 || ps[0].Name != "solo" {
		t.Errorf("SelectProfiles(nil) = %v, %v", ps, err)
	}
}

func TestSettingsSamplingOptions(t *testing.T) {
	s, err := ParseSettings("settings.yaml", []byte(`
defaults:
  temperature: 0.3
  top_p: 0.95
  seed: 42
  extra_body:
    chat_template_kwargs: {enable_thinking: false}
llms:
  local: {base_url: http://localhost:8080/v1, model: m}
profiles:
  solo: {run: local, verify: local}
`))
	if err != nil {
		t.Fatal(err)
	}
	sm := s.Defaults.Sampling()
	if *sm.Temperature != 0.3 || sm.MaxTokens != DefaultMaxTokens || *sm.TopP != 0.95 || *sm.Seed != 42 ||
		!reflect.DeepEqual(sm.ExtraBody, map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}) {
		t.Errorf("sampling = %+v", sm)
	}
	if sm := (Generation{Temperature: 0.1, MaxTokens: 10}).Sampling(); sm.TopP != nil || sm.Seed != nil || sm.ExtraBody != nil {
		t.Errorf("unset options are sent: %+v", sm)
	}
}

func TestSettingsAliases(t *testing.T) {
	s, err := ParseSettings("settings.yaml", []byte(`
llms:
  a: &local
    base_url: http://localhost:8080/v1
    model: m
  b: *local
profiles:
  p: {run: a, verify: b}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.LLMs["b"].Model != "m" || s.LLMs["b"].Name != "b" {
		t.Errorf("b = %+v", s.LLMs["b"])
	}
}

func TestAPIKeyFromEnv(t *testing.T) {
	t.Setenv("VERIFYFAST_TEST_KEY", "k-123")
	if got := (LLM{APIKeyEnv: "VERIFYFAST_TEST_KEY"}).APIKey(); got != "k-123" {
		t.Errorf("APIKey = %q", got)
	}
}

// The line numbers below count from the line after the opening backquote.
func TestSettingsErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "unknown llm, as in the brief",
			yaml: `defaults:
  max_tokens: 4000
  temperature: 0.1
llms:
  kimi-k2:
    base_url: "https://example.com/v1"
    model: "Kimi-K2-Instruct-0905"
profiles:
  kimi-full:
    run: kimi-k2
    verify: kimi-k2
  cross-verify:
    run: kimi-k2
    verify: qwen
`,
			want: []string{`settings.yaml:14: profiles.cross-verify.verify: unknown llm "qwen"`},
		},
		{
			name: "wrong types",
			yaml: `defaults:
  max_tokens: lots
  temperature: [0.1]
llms:
  m:
    base_url: http://h/v1
    model: 3.5
profiles:
  p: {run: m, verify: m}
`,
			want: []string{
				`settings.yaml:2: defaults.max_tokens: expected an integer, got string "lots"`,
				`settings.yaml:3: defaults.temperature: expected a number, got a list`,
				`settings.yaml:7: llms.m.model: expected a string, got number 3.5 (quote it if it is meant as text)`,
			},
		},
		{
			name: "bad sampling options",
			yaml: `defaults:
  top_p: 0
  seed: x
  extra_body: {model: other}
llms:
  m: {base_url: http://h/v1, model: m}
profiles:
  p: {run: m, verify: m}
`,
			want: []string{
				`settings.yaml:2: defaults.top_p: must be more than 0 and at most 1, got 0`,
				`settings.yaml:3: defaults.seed: expected an integer, got string "x"`,
				`settings.yaml:4: defaults.extra_body: extra_body sets "model", which VERA sets itself`,
			},
		},
		{
			name: "missing required fields and unknown fields",
			yaml: `llms:
  m:
    base_url: http://h/v1
    modle: x
  n:
    model: y
    api_key: sk-secret
profiles:
  p:
    run: m
`,
			want: []string{
				`settings.yaml:2: llms.m.model: required field missing`,
				`settings.yaml:4: llms.m.modle: unknown field (known: base_url, model, api_key_env, inference_engine)`,
				`settings.yaml:5: llms.n.base_url: required field missing`,
				`settings.yaml:7: llms.n.api_key: keys do not belong in settings.yaml: put the key in an environment variable and name the variable in api_key_env`,
				`settings.yaml:9: profiles.p.verify: required field missing`,
			},
		},
		{
			name: "missing sections",
			yaml: "defaults:\n  max_tokens: 10\n",
			want: []string{
				`settings.yaml:1: llms: required field missing`,
				`settings.yaml:1: profiles: required field missing`,
			},
		},
		{
			name: "bad values",
			yaml: `defaults:
  max_tokens: 0
  temperature: 3
llms:
  m:
    base_url: "127.0.0.1:1234"
    model: ""
    api_key_env: "MY-KEY"
  "bad name":
    base_url: http://h
    model: x
profiles:
  "a,b": {run: m, verify: m}
`,
			want: []string{
				`settings.yaml:2: defaults.max_tokens: must be positive, got 0`,
				`settings.yaml:3: defaults.temperature: must be between 0 and 2, got 3`,
				`settings.yaml:6: llms.m.base_url: want an http:// or https:// URL, got "127.0.0.1:1234"`,
				`settings.yaml:7: llms.m.model: must not be empty`,
				`settings.yaml:8: llms.m.api_key_env: "MY-KEY" is not an environment variable name`,
				`settings.yaml:9: llms.bad name: bad llm name: names are letters, digits, '.', '_' and '-', starting with a letter or digit`,
				`settings.yaml:13: profiles.a,b: bad profile name: names are letters, digits, '.', '_' and '-', starting with a letter or digit`,
			},
		},
		{
			name: "duplicate key and empty sections",
			yaml: `llms: {}
profiles:
  p: {run: m, verify: m}
  p: {run: m, verify: m}
`,
			want: []string{
				`settings.yaml:1: llms: at least one llm is required`,
				`settings.yaml:3: profiles.p.run: unknown llm "m"`,
				`settings.yaml:3: profiles.p.verify: unknown llm "m"`,
				`settings.yaml:4: profiles.p: duplicate key (first on line 3)`,
			},
		},
		{
			name: "not a mapping",
			yaml: "- a\n- b\n",
			want: []string{`settings.yaml:1: expected a mapping, got a list`},
		},
		{
			name: "invalid yaml",
			yaml: "llms:\n  m: [\n",
			want: []string{`settings.yaml:2: invalid YAML: did not find expected node content`},
		},
		{
			name: "empty file",
			yaml: "# only a comment\n",
			want: []string{`settings.yaml: file is empty`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := ParseSettings("settings.yaml", []byte(tt.yaml))
			if s != nil {
				t.Errorf("got settings despite errors")
			}
			checkConfigErrors(t, err, tt.want)
		})
	}
}

func checkConfigErrors(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	var ces ConfigErrors
	if !errors.As(err, &ces) {
		t.Fatalf("error %T is not ConfigErrors: %v", err, err)
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("errors.As(*ConfigError) failed")
	}
	got := strings.Split(err.Error(), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestStrategyErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "scores out of 1..5",
			yaml: `defaults:
  params:
    numeric_deviation_threshold: 0.1
    score_thresholds:
      high:
        - {min: 3, score: 0}
        - {min: 1, score: 2}
      clean: 6
`,
			want: []string{
				`strategy.yaml:6: defaults.params.score_thresholds.high[0].score: score must be 1..5, got 0`,
				`strategy.yaml:8: defaults.params.score_thresholds.clean: score must be 1..5, got 6`,
			},
		},
		{
			name: "rule order and coverage",
			yaml: `defaults:
  params:
    numeric_deviation_threshold: 0.1
    score_thresholds:
      high:
        - {min: 1, score: 2}
        - {min: 3, score: 1}
      low:
        - {min: 2, score: 3}
      clean: 5
`,
			want: []string{
				`strategy.yaml:7: defaults.params.score_thresholds.high[1].min: rules must be in strictly descending order of min: 3 follows 1`,
				`strategy.yaml:7: defaults.params.score_thresholds.high[1].score: fewer errors cannot score lower: 3 errors score 1 but 1 errors score 2`,
				`strategy.yaml:7: defaults.params.score_thresholds.high[1].min: the last rule must have min 1, so that any number of High errors is scored`,
				`strategy.yaml:9: defaults.params.score_thresholds.low[0].min: the last rule must have min 1, so that any number of Low errors is scored`,
			},
		},
		{
			name: "inconsistent across lists",
			yaml: `defaults:
  params:
    numeric_deviation_threshold: 0.1
    score_thresholds:
      high:
        - {min: 1, score: 4}
      clean: 3
`,
			want: []string{
				`strategy.yaml:4: defaults.params.score_thresholds: inconsistent: 1 High error(s) score 4, above 2 Low error(s) scoring 3`,
				`strategy.yaml:4: defaults.params.score_thresholds: inconsistent: 1 Low error(s) score 4, above clean 3`,
			},
		},
		{
			name: "profile override inconsistent after merge",
			yaml: `defaults:
  params:
    numeric_deviation_threshold: 0.1
profiles:
  kimi-full:
    params:
      score_thresholds:
        low:
          - {min: 1, score: 1}
`,
			want: []string{
				`strategy.yaml:7: profiles.kimi-full.params.score_thresholds: inconsistent after merging onto the defaults: 1 High error(s) score 2, above 1 Low error(s) scoring 1`,
			},
		},
		{
			name: "params: types, ranges, unknown and missing",
			yaml: `defaults:
  params:
    max_errors_per_phase: three
profiles:
  kimi-full:
    params:
      numeric_deviation_threshold: 10
      max_error_per_phase: 5
  cross-verify:
    params:
      max_errors_per_phase: -1
      score_thresholds:
        high: {min: 1, score: 2}
        mid: []
`,
			want: []string{
				`strategy.yaml:2: defaults.params.numeric_deviation_threshold: required field missing`,
				`strategy.yaml:3: defaults.params.max_errors_per_phase: expected an integer, got string "three"`,
				`strategy.yaml:7: profiles.kimi-full.params.numeric_deviation_threshold: must be a fraction in (0, 1], e.g. 0.10 for 10%; got 10`,
				`strategy.yaml:8: profiles.kimi-full.params.max_error_per_phase: unknown field (known: numeric_deviation_threshold, max_errors_per_phase, score_thresholds)`,
				`strategy.yaml:11: profiles.cross-verify.params.max_errors_per_phase: must be 0 (no cap) or more, got -1`,
				`strategy.yaml:13: profiles.cross-verify.params.score_thresholds.high: expected a list, got a mapping`,
				`strategy.yaml:14: profiles.cross-verify.params.score_thresholds.mid: unknown field (known: high, low, clean)`,
			},
		},
		{
			name: "missing defaults",
			yaml: "profiles: {}\n",
			want: []string{`strategy.yaml:1: defaults: required field missing`},
		},
		{
			name: "rule fields",
			yaml: `defaults:
  params:
    numeric_deviation_threshold: 0.1
    score_thresholds:
      low:
        - {min: 0, score: 3}
        - {score: 4}
        - []
`,
			want: []string{
				`strategy.yaml:6: defaults.params.score_thresholds.low[0].min: must be at least 1, got 0`,
				`strategy.yaml:7: defaults.params.score_thresholds.low[1].min: required field missing`,
				`strategy.yaml:8: defaults.params.score_thresholds.low[2]: expected a mapping, got a list`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseStrategy("strategy.yaml", []byte(tt.yaml))
			checkConfigErrors(t, err, tt.want)
		})
	}
}

func TestStrategyCheckProfiles(t *testing.T) {
	st, err := ParseStrategy("strategy.yaml", []byte(`defaults:
  params:
    numeric_deviation_threshold: 0.1
profiles:
  kimi-full: {}
  kimi-ful:
    params: {max_errors_per_phase: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	checkConfigErrors(t, st.CheckProfiles(DefaultSettings()), []string{
		`strategy.yaml:6: profiles.kimi-ful: no such profile in settings`,
	})
	if got := st.ForProfile("kimi-full").Effective().MaxErrorsPerPhase; got != 0 {
		t.Errorf("kimi-full cap = %d, want 0 (none set)", got)
	}
	if got := st.ForProfile("kimi-ful").Effective().MaxErrorsPerPhase; got != 4 {
		t.Errorf("kimi-ful cap = %d, want 4", got)
	}
}
