package eval

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

func ptr[T any](v T) *T { return &v }

func baseProfile() catalog.EvalProfile {
	return catalog.EvalProfile{
		Name:     "base",
		Model:    catalog.ModelConfig{BaseURL: "http://127.0.0.1:9/v1", Name: "flag-model", APIKeyEnv: "FLAG_KEY", Temperature: ptr(0.7)},
		Auditor:  catalog.AuditorConfig{StopScore: 4},
		MaxSteps: 30,
		Sandbox:  catalog.SandboxConfig{Network: true},
		Policy:   catalog.PolicyConfig{NotesInterval: 5},
	}
}

func TestBuiltinProfile(t *testing.T) {
	base := baseProfile()
	p, ok := BuiltinProfile("no-audit", base)
	want := base
	want.Name, want.Auditor = "no-audit", catalog.AuditorConfig{}
	if !ok || !reflect.DeepEqual(p, want) {
		t.Errorf("no-audit: %+v %v", p, ok)
	}
	for _, n := range []int{1, 3, 10} {
		name := "audit" + map[int]string{1: "1", 3: "3", 10: "10"}[n]
		p, ok := BuiltinProfile(name, base)
		want := base
		want.Name, want.Auditor = name, catalog.AuditorConfig{Enabled: true, MaxRounds: n, StopScore: 4}
		if !ok || !reflect.DeepEqual(p, want) {
			t.Errorf("%s: %+v %v", name, p, ok)
		}
	}
	for _, name := range []string{"audit", "audit0", "audit11", "audit03", "audit-1", "audit1x", "noaudit", ""} {
		if _, ok := BuiltinProfile(name, base); ok {
			t.Errorf("%q is built in", name)
		}
	}
}

const profilesYAML = `# eval profiles
defaults:
  model: {base_url: http://127.0.0.1:1234/v1, name: qwen3-14b, temperature: 0.2, extra_body: {chat_template_kwargs: {enable_thinking: false}}}
  max_steps: 12
profiles:
  no-audit: {}
  audit3: {auditor: {enabled: true, max_rounds: 3, stop_score: 3}}
  big-model:
    model: {name: qwen3-32b, stop: ["</answer>"]}
    policy: {notes_interval: 4}
    sandbox: {network: true, session: exec, work_limit_mb: 512}
    timeout_ms: 600000
    verifyfast: {enabled: true, profile: kimi-full}
`

func TestParseProfiles(t *testing.T) {
	got, order, err := ParseProfiles(strings.NewReader(profilesYAML), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(order, []string{"no-audit", "audit3", "big-model"}) {
		t.Errorf("order %v", order)
	}
	extra := map[string]any{"chat_template_kwargs": map[string]any{"enable_thinking": false}}
	defModel := catalog.ModelConfig{BaseURL: "http://127.0.0.1:1234/v1", Name: "qwen3-14b", Temperature: ptr(0.2), ExtraBody: extra}
	want := map[string]catalog.EvalProfile{
		"no-audit": {Name: "no-audit", Model: defModel, MaxSteps: 12},
		"audit3":   {Name: "audit3", Model: defModel, MaxSteps: 12, Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 3, StopScore: 3}},
		"big-model": {Name: "big-model", MaxSteps: 12, TimeoutMS: 600000,
			Model:      catalog.ModelConfig{BaseURL: "http://127.0.0.1:1234/v1", Name: "qwen3-32b", Temperature: ptr(0.2), ExtraBody: extra, Stop: []string{"</answer>"}},
			Policy:     catalog.PolicyConfig{NotesInterval: 4},
			Sandbox:    catalog.SandboxConfig{Network: true, Session: catalog.SessionExec, WorkLimitMB: 512},
			VerifyFast: catalog.VerifyFastConfig{Enabled: true, Profile: "kimi-full"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%#v\nwant\n%#v", got, want)
	}
}

func TestParseProfilesErrors(t *testing.T) {
	in := `defaults:
  model: {name: 14}
  max_step: 3
profiles:
  audit3:
    auditor: {enabled: yes please, max_round: 3}
  x y: {}
  ok: {name: foo}
  audit3: {}
  list: [1]
  temp: {model: {temperature: hot, extra_body: [1]}}
`
	_, _, err := ParseProfiles(strings.NewReader(in), "p.yaml")
	var le LineErrors
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T), want LineErrors", err, err)
	}
	want := []string{
		`p.yaml:2: defaults.model.name: expected a string, got integer 14 (quote it if it is meant as text)`,
		`p.yaml:3: defaults.max_step: unknown field (known: model, auditor, max_steps, policy, sandbox, timeout_ms, verifyfast)`,
		`p.yaml:6: profiles.audit3.auditor.enabled: expected true or false, got string "yes please"`,
		`p.yaml:6: profiles.audit3.auditor.max_round: unknown field (known: enabled, model, max_rounds, stop_score)`,
		`p.yaml:7: profiles.x y: profile name "x y": want 1-64 letters, digits, '.', '_' or '-'`,
		`p.yaml:8: profiles.ok.name: a profile's name is its key`,
		`p.yaml:9: profiles.audit3: duplicate key (first on line 5)`,
		`p.yaml:10: profiles.list: expected a mapping, got a list`,
		`p.yaml:11: profiles.temp.model.temperature: expected a number, got string "hot"`,
		`p.yaml:11: profiles.temp.model.extra_body: expected a mapping, got a list`,
	}
	if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
		t.Fatalf("messages:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for in, want := range map[string]string{
		"":                          "p.yaml: the file is empty",
		"defaults: {}\n":            "p.yaml:1: profiles: required field missing",
		"profiles: {}\n":            "p.yaml:1: profiles: no profiles",
		"profiles:\n  a: [\n":       "p.yaml:2: invalid YAML: did not find expected node content",
		"profiles: {a: {}}\nx: 1\n": "p.yaml:2: x: unknown field (known: defaults, profiles)",
	} {
		_, _, err := ParseProfiles(strings.NewReader(in), "p.yaml")
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: error %v, want %s…", in, err, want)
		}
	}
}

func TestResolveProfiles(t *testing.T) {
	file, _, err := ParseProfiles(strings.NewReader(`
profiles:
  bare: {}
  named: {model: {name: other}, sandbox: {lab: true}}
  sampled: {model: {temperature: 0.1}, max_steps: 5, auditor: {enabled: true, max_rounds: 2}}
  no-audit: {model: {base_url: http://10.0.0.1:8000, name: file-model}}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base := baseProfile()
	got, err := ResolveProfiles([]string{"bare", "audit4", "named", "sampled", "no-audit"}, file, base)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(got))
	for i, p := range got {
		names[i] = p.Name
	}
	if !reflect.DeepEqual(names, []string{"bare", "audit4", "named", "sampled", "no-audit"}) {
		t.Fatalf("names %v", names)
	}
	// bare: everything from the base but the auditor.
	wantBare := base
	wantBare.Name, wantBare.Auditor = "bare", catalog.AuditorConfig{}
	if !reflect.DeepEqual(got[0], wantBare) {
		t.Errorf("bare\n%+v\nwant\n%+v", got[0], wantBare)
	}
	if a := got[1].Auditor; !a.Enabled || a.MaxRounds != 4 || a.StopScore != 4 || got[1].Model.Name != "flag-model" {
		t.Errorf("audit4 %+v", got[1])
	}
	// named: its model name, the base's endpoint and key variable, not the
	// base's sampling; its own sandbox.
	if m := got[2].Model; m.Name != "other" || m.BaseURL != base.Model.BaseURL || m.APIKeyEnv != "FLAG_KEY" || m.Temperature != nil {
		t.Errorf("named model %+v", m)
	}
	if got[2].Sandbox != (catalog.SandboxConfig{Lab: true}) || got[2].Policy != base.Policy || got[2].MaxSteps != 30 {
		t.Errorf("named %+v", got[2])
	}
	// sampled: the base's model with the file's temperature.
	if m := got[3].Model; m.Name != "flag-model" || m.Temperature == nil || *m.Temperature != 0.1 || m.APIKeyEnv != "FLAG_KEY" {
		t.Errorf("sampled model %+v", m)
	}
	if got[3].MaxSteps != 5 || !got[3].Auditor.Enabled || got[3].Auditor.MaxRounds != 2 {
		t.Errorf("sampled %+v", got[3])
	}
	// The file's no-audit wins over the built-in.
	if got[4].Model.Name != "file-model" || got[4].Model.BaseURL != "http://10.0.0.1:8000" {
		t.Errorf("no-audit %+v", got[4].Model)
	}

	// Built-ins alone, without a file.
	if got, err := ResolveProfiles([]string{"no-audit", "audit3"}, nil, base); err != nil || len(got) != 2 || got[1].Auditor.MaxRounds != 3 {
		t.Errorf("built-ins: %+v %v", got, err)
	}
}

func TestResolveProfilesErrors(t *testing.T) {
	file := map[string]catalog.EvalProfile{
		"fine":   {Name: "fine"},
		"zero":   {Name: "zero", Auditor: catalog.AuditorConfig{Enabled: true}},
		"secret": {Name: "secret", Model: catalog.ModelConfig{BaseURL: "http://user:pw@127.0.0.1:1/v1", Name: "m", APIKeyEnv: "sk-abc123-this-is-a-key"}},
		"badurl": {Name: "badurl", Model: catalog.ModelConfig{BaseURL: "ftp://host", Name: "m"}},
		"limits": {Name: "limits", MaxSteps: -1, TimeoutMS: -5, Auditor: catalog.AuditorConfig{StopScore: 5}, Sandbox: catalog.SandboxConfig{Session: "tmux"}, Policy: catalog.PolicyConfig{NotesInterval: -1}},
		"noname": {Name: "noname", Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1"}},
	}
	base := baseProfile()
	_, err := ResolveProfiles([]string{"fine", "zero", "audit3", "fine", "nope", "secret", "badurl", "limits"}, file, base)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`profile "zero": auditor max_rounds 0: an auditor that is on needs 1 or more`,
		`profile "fine" is given twice`,
		`unknown profile "nope": the profiles file defines badurl, fine, limits, noname, secret, zero; built in are no-audit and audit1 to audit10`,
		`profile "secret": a secret in the run's settings: model api_key_env must be the NAME`,
		`profile "badurl": model base_url: model base URL "ftp://host": want an http:// or https:// URL`,
		`profile "limits": auditor stop_score 5: want 1 to 4`,
		`profile "limits": max_steps -1: want 0 (unlimited) or more`,
		`profile "limits": timeout_ms -5`,
		`profile "limits": policy notes_interval -1`,
		`profile "limits": sandbox session "tmux": want persistent or exec`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "sk-abc123") || strings.Contains(msg, ":pw@") {
		t.Errorf("the error repeats a secret:\n%s", msg)
	}
	if strings.Contains(msg, `profile "fine":`) || strings.Contains(msg, `profile "audit3":`) {
		t.Errorf("a good profile reported:\n%s", msg)
	}
	// A model name and endpoint are required, from the file or the base.
	_, err = ResolveProfiles([]string{"noname", "no-audit"}, file, catalog.EvalProfile{})
	for _, want := range []string{`profile "noname": model name missing`, `profile "no-audit": model base_url missing`, `profile "no-audit": model name missing`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if _, err := ResolveProfiles(nil, file, base); err == nil {
		t.Error("no names accepted")
	}
}
