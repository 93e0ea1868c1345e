package eval

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/yamlconf"
)

// Built-in profile names: ProfileNoAudit, and "audit1" to "audit10"
// (ProfileAuditPrefix and the round cap).
const (
	ProfileNoAudit     = "no-audit"
	ProfileAuditPrefix = "audit"
	// MaxBuiltinRounds is the highest round cap of a built-in auditN.
	MaxBuiltinRounds = 10
)

// profileNameRE is what a profile's name may be.
var profileNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// BuiltinProfile returns the built-in profile name applied on base (the
// model, step budget, sandbox… given by flags): "no-audit" turns the
// auditor off; "auditN", N from 1 to 10 written without leading zeros,
// turns it on with a round cap of N (base's auditor model and stop score
// are kept). ok is false for any other name.
func BuiltinProfile(name string, base catalog.EvalProfile) (catalog.EvalProfile, bool) {
	p := base
	p.Name = name
	if name == ProfileNoAudit {
		p.Auditor = catalog.AuditorConfig{}
		return p, true
	}
	digits, ok := strings.CutPrefix(name, ProfileAuditPrefix)
	if !ok || digits == "" || digits[0] == '0' {
		return catalog.EvalProfile{}, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 || n > MaxBuiltinRounds || strconv.Itoa(n) != digits {
		return catalog.EvalProfile{}, false
	}
	p.Auditor.Enabled = true
	p.Auditor.MaxRounds = n
	return p, true
}

// ParseProfiles reads a profiles file (YAML). name prefixes the messages
// ("profiles.yaml:7: profiles.audit3.auditor.max_round: unknown field").
//
//	defaults:            # optional, applied under every profile
//	  model: {base_url: http://127.0.0.1:1234/v1, name: qwen3-14b, temperature: 0.2}
//	  max_steps: 12
//	profiles:            # required, at least one, in the order to run
//	  no-audit: {}
//	  audit3: {auditor: {enabled: true, max_rounds: 3, stop_score: 3}}
//	  big-model: {model: {name: qwen3-32b}, policy: {notes_interval: 4}}
//
// A profile's members are catalog.EvalProfile's JSON names (model,
// auditor, max_steps, policy, sandbox, timeout_ms, verifyfast) with their
// members in turn; its name is its key (1-64 of A-Z a-z 0-9 . _ -).
// defaults is merged under every profile member by member (a profile's
// model: {name: x} keeps the defaults' base_url); lists and scalars
// replace. Unknown keys, wrong types and duplicate keys are errors; every
// problem is reported, each at its line (a LineErrors). Whether a profile
// is complete (a model name…) is checked by ResolveProfiles, which can
// fill it from flags.
//
// It returns the profiles by name and their names in file order.
func ParseProfiles(r io.Reader, name string) (map[string]catalog.EvalProfile, []string, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", name, err)
	}
	d := &yamlconf.Decoder{File: name, EmptyMsg: "the file is empty"}
	root := d.Root(data)
	if root == nil {
		return nil, nil, lineErrors(d.Err())
	}
	var defaults any
	var order []string
	raws := map[string]any{}
	lines := map[string]int{}
	d.Object(root, 0, "", []yamlconf.Field{
		{Name: "defaults", Decode: func(e yamlconf.Entry) {
			defaults = value(d, e.Val, profileType, e.Path, true)
		}},
		{Name: "profiles", Required: true, Decode: func(e yamlconf.Entry) {
			entries, ok := d.Mapping(e.Val, e.Path)
			if !ok {
				return
			}
			if len(entries) == 0 {
				d.Failf(e.KeyNode.Line, e.Path, "no profiles")
			}
			for _, pe := range entries {
				if !profileNameRE.MatchString(pe.Key) {
					d.Failf(pe.KeyNode.Line, pe.Path, "profile name %q: want 1-64 letters, digits, '.', '_' or '-'", pe.Key)
					continue
				}
				raws[pe.Key] = value(d, pe.Val, profileType, pe.Path, true)
				lines[pe.Key] = pe.KeyNode.Line
				order = append(order, pe.Key)
			}
		}},
	}, nil)
	if err := lineErrors(d.Err()); err != nil {
		return nil, nil, err
	}
	out := make(map[string]catalog.EvalProfile, len(order))
	for _, n := range order {
		merged := mergeValues(defaults, raws[n])
		var p catalog.EvalProfile
		if merged != nil {
			b, err := json.Marshal(merged)
			if err == nil {
				err = json.Unmarshal(b, &p)
			}
			if err != nil {
				d.Failf(lines[n], "profiles."+n, "%v", err)
				continue
			}
		}
		p.Name = n
		out[n] = p
	}
	if err := lineErrors(d.Err()); err != nil {
		return nil, nil, err
	}
	return out, order, nil
}

var profileType = reflect.TypeFor[catalog.EvalProfile]()

// mergeValues merges over onto under: mappings member by member, anything
// else replaced.
func mergeValues(under, over any) any {
	um, uok := under.(map[string]any)
	om, ook := over.(map[string]any)
	if !uok || !ook {
		if over == nil {
			return under
		}
		return over
	}
	out := make(map[string]any, len(um)+len(om))
	for k, v := range um {
		out[k] = v
	}
	for k, v := range om {
		out[k] = mergeValues(um[k], v)
	}
	return out
}

// ResolveProfiles returns the profiles named, in the order named: each
// from the profiles file (file, from ParseProfiles; nil for none) when it
// defines the name, else built in (BuiltinProfile on base), else an error
// that lists the names there are. A name given twice is an error.
//
// A profile from the file takes from base (the flags) what it leaves out:
// the whole model when it gives no model base_url and no name, else its
// model's base_url, name and api_key_env each when empty; max_steps and
// timeout_ms when 0; sandbox and policy when it gives none. Its auditor and
// verifyfast are as the file says.
//
// Every profile is then checked: a model name and base_url (a URL
// llm.NormalizeBaseURL accepts), no secret in any model setting
// (catalog.ModelConfig.Validate), an auditor that is on with max_rounds
// of at least 1 and a stop_score of 0 to 4, no negative budget, a known
// sandbox session mode. Every problem of every profile is reported.
func ResolveProfiles(names []string, file map[string]catalog.EvalProfile, base catalog.EvalProfile) ([]catalog.EvalProfile, error) {
	if len(names) == 0 {
		return nil, errors.New("no profiles given")
	}
	var problems []string
	seen := map[string]bool{}
	var out []catalog.EvalProfile
	for _, n := range names {
		n = strings.TrimSpace(n)
		if seen[n] {
			problems = append(problems, fmt.Sprintf("profile %q is given twice", n))
			continue
		}
		seen[n] = true
		var p catalog.EvalProfile
		if fp, ok := file[n]; ok {
			p = fillFromBase(fp, base)
			p.Name = n
		} else if bp, ok := BuiltinProfile(n, base); ok {
			p = bp
		} else {
			problems = append(problems, unknownProfile(n, file))
			continue
		}
		for _, e := range ValidateProfile(p) {
			problems = append(problems, fmt.Sprintf("profile %q: %s", n, e))
		}
		out = append(out, p)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "\n"))
	}
	return out, nil
}

func unknownProfile(n string, file map[string]catalog.EvalProfile) string {
	var b strings.Builder
	fmt.Fprintf(&b, "unknown profile %q: ", n)
	if len(file) > 0 {
		names := make([]string, 0, len(file))
		for k := range file {
			names = append(names, k)
		}
		slices.Sort(names)
		fmt.Fprintf(&b, "the profiles file defines %s; ", strings.Join(names, ", "))
	}
	fmt.Fprintf(&b, "built in are %s and %s1 to %s%d (the auditor on with that round cap)", ProfileNoAudit, ProfileAuditPrefix, ProfileAuditPrefix, MaxBuiltinRounds)
	return b.String()
}

// fillFromBase fills what a file profile leaves out from base (see
// ResolveProfiles).
func fillFromBase(p, base catalog.EvalProfile) catalog.EvalProfile {
	if p.Model.BaseURL == "" && p.Model.Name == "" {
		m := base.Model
		// Sampling the file gave on its own still applies.
		if !reflect.ValueOf(p.Model).IsZero() {
			m = overlayModel(base.Model, p.Model)
		}
		p.Model = m
	} else {
		if p.Model.BaseURL == "" {
			p.Model.BaseURL = base.Model.BaseURL
		}
		if p.Model.Name == "" {
			p.Model.Name = base.Model.Name
		}
		if p.Model.APIKeyEnv == "" {
			p.Model.APIKeyEnv = base.Model.APIKeyEnv
		}
	}
	if p.MaxSteps == 0 {
		p.MaxSteps = base.MaxSteps
	}
	if p.TimeoutMS == 0 {
		p.TimeoutMS = base.TimeoutMS
	}
	if reflect.ValueOf(p.Sandbox).IsZero() {
		p.Sandbox = base.Sandbox
	}
	if p.Policy == (catalog.PolicyConfig{}) {
		p.Policy = base.Policy
	}
	return p
}

// overlayModel returns under with every non-zero member of over.
func overlayModel(under, over catalog.ModelConfig) catalog.ModelConfig {
	u := reflect.ValueOf(&under).Elem()
	o := reflect.ValueOf(over)
	for i := range o.NumField() {
		if f := o.Field(i); !f.IsZero() {
			u.Field(i).Set(f)
		}
	}
	return under
}

// ValidateProfile lists what is wrong with a profile (nil when nothing).
func ValidateProfile(p catalog.EvalProfile) []string {
	var problems []string
	add := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if !profileNameRE.MatchString(p.Name) {
		add("name %q: want 1-64 letters, digits, '.', '_' or '-'", p.Name)
	}
	checkModel := func(field string, m catalog.ModelConfig, required bool) {
		if required || m.BaseURL != "" {
			if strings.TrimSpace(m.BaseURL) == "" {
				add("%s base_url missing (the model server, e.g. http://127.0.0.1:1234/v1)", field)
			} else if _, err := llm.NormalizeBaseURL(m.BaseURL); err != nil {
				add("%s base_url: %s", field, strings.TrimPrefix(err.Error(), "llm: "))
			}
		}
		if required && strings.TrimSpace(m.Name) == "" {
			add("%s name missing (the model's name at the server)", field)
		}
		if err := m.Validate(field); err != nil {
			add("%v", err)
		}
		if m.TimeoutMS < 0 {
			add("%s timeout_ms %d: want 0 (the default) or more", field, m.TimeoutMS)
		}
	}
	checkModel("model", p.Model, true)
	if p.Auditor.Model != nil {
		checkModel("auditor model", *p.Auditor.Model, false)
	}
	if p.VerifyFast.Model != nil {
		checkModel("verifyfast model", *p.VerifyFast.Model, false)
	}
	if p.Auditor.Enabled && p.Auditor.MaxRounds < 1 {
		add("auditor max_rounds %d: an auditor that is on needs 1 or more", p.Auditor.MaxRounds)
	}
	if p.Auditor.MaxRounds < 0 {
		add("auditor max_rounds %d: want 0 or more", p.Auditor.MaxRounds)
	}
	if p.Auditor.StopScore < 0 || p.Auditor.StopScore > 4 {
		add("auditor stop_score %d: want 1 to 4 (0 = the default, 3)", p.Auditor.StopScore)
	}
	if p.MaxSteps < 0 {
		add("max_steps %d: want 0 (unlimited) or more", p.MaxSteps)
	}
	if p.TimeoutMS < 0 {
		add("timeout_ms %d: want 0 (the eval's default) or more", p.TimeoutMS)
	}
	pol := p.Policy
	for _, v := range []struct {
		name string
		n    int
	}{{"notes_interval", pol.NotesInterval}, {"stagnation_limit", pol.StagnationLimit},
		{"failure_escalation_limit", pol.FailureEscalationLimit}, {"query_family_limit", pol.QueryFamilyLimit}} {
		if v.n < 0 {
			add("policy %s %d: want 0 (the default) or more", v.name, v.n)
		}
	}
	sb := p.Sandbox
	switch sb.Session {
	case "", catalog.SessionPersistent, catalog.SessionExec:
	default:
		add("sandbox session %q: want persistent or exec", sb.Session)
	}
	if sb.ToolTimeoutMS < 0 || sb.WorkLimitMB < 0 || sb.ScratchLimitMB < 0 {
		add("sandbox tool_timeout_ms, work_limit_mb and scratch_limit_mb must be 0 (the default) or more")
	}
	return problems
}

// lineErrors turns the yamlconf.Errors of a profiles file into the
// LineErrors eval's parsers return, each path folded into its message (the
// text is the same).
func lineErrors(err error) error {
	var ys yamlconf.Errors
	if !errors.As(err, &ys) {
		return err
	}
	out := make(LineErrors, len(ys))
	for i, e := range ys {
		msg := e.Msg
		if e.Path != "" {
			msg = e.Path + ": " + msg
		}
		out[i] = &LineError{File: e.File, Line: e.Line, Msg: msg}
	}
	return out
}

// value checks a node against the Go type t (a catalogue struct and what
// it holds) and returns it as a JSON value (map[string]any, []any, string,
// bool, int64, float64, or nil for null). Struct members are the type's
// JSON names; profile is set at the top of a profile, whose name is its
// key.
func value(d *yamlconf.Decoder, n *yaml.Node, t reflect.Type, path string, profile bool) any {
	n = yamlconf.Resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if yamlconf.IsNull(n) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		out := map[string]any{}
		var fields []yamlconf.Field
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if !sf.IsExported() || name == "" || name == "-" || (profile && name == "name") {
				continue
			}
			fields = append(fields, yamlconf.Field{Name: name, Decode: func(e yamlconf.Entry) {
				if v := value(d, e.Val, sf.Type, e.Path, false); v != nil {
					out[name] = v
				}
			}})
		}
		var hints map[string]string
		if profile {
			hints = map[string]string{"name": "a profile's name is its key"}
		}
		d.Object(n, 0, path, fields, hints)
		return out
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.Failf(n.Line, path, "expected a string, got %s (quote it if it is meant as text)", yamlconf.Describe(n))
			return nil
		}
		return n.Value
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.Failf(n.Line, path, "expected true or false, got %s", yamlconf.Describe(n))
			return nil
		}
		var b bool
		_ = n.Decode(&b)
		return b
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var v int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil || reflect.New(t).Elem().OverflowInt(v) {
			d.Failf(n.Line, path, "expected an integer, got %s", yamlconf.Describe(n))
			return nil
		}
		return v
	case reflect.Float32, reflect.Float64:
		var v float64
		if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") || n.Decode(&v) != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			d.Failf(n.Line, path, "expected a number, got %s", yamlconf.Describe(n))
			return nil
		}
		return v
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.Failf(n.Line, path, "expected a list, got %s", yamlconf.Describe(n))
			return nil
		}
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			out = append(out, value(d, c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), false))
		}
		return out
	case reflect.Map, reflect.Interface:
		// Free-form (extra_body): any YAML with string keys.
		var v any
		if err := n.Decode(&v); err != nil {
			d.Failf(n.Line, path, "%v", err)
			return nil
		}
		if _, err := json.Marshal(v); err != nil {
			d.Failf(n.Line, path, "not representable as JSON (keys must be strings): %v", err)
			return nil
		}
		if t.Kind() == reflect.Map {
			if _, ok := v.(map[string]any); !ok {
				d.Failf(n.Line, path, "expected a mapping, got %s", yamlconf.Describe(n))
				return nil
			}
		}
		return v
	}
	d.Failf(n.Line, path, "cannot be set in a profiles file")
	return nil
}
