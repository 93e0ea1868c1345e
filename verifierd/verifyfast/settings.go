package verifyfast

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/yamlconf"
)

// Generation holds the model call defaults of settings.yaml: sent with
// every call of the audit phases.
type Generation struct {
	MaxTokens   int     `json:"max_tokens"`
	Temperature float64 `json:"temperature"`
	// TopP and Seed are sent when set (nil: the server's default).
	TopP *float64 `json:"top_p,omitempty"`
	Seed *int64   `json:"seed,omitempty"`
	// ExtraBody members are merged into every request body as given, for
	// server-specific options such as
	// {"chat_template_kwargs": {"enable_thinking": false}}; the members
	// VERA sets itself (model, messages, response_format, …) are refused.
	ExtraBody map[string]any `json:"extra_body,omitempty"`
}

// Sampling returns the request options of g.
func (g Generation) Sampling() llm.Sampling {
	t := g.Temperature
	return llm.Sampling{Temperature: &t, MaxTokens: g.MaxTokens, TopP: g.TopP, Seed: g.Seed, ExtraBody: g.ExtraBody}
}

// The generation defaults used when settings.yaml leaves them out (the
// spec's example values).
const (
	DefaultMaxTokens   = 4000
	DefaultTemperature = 0.1
)

// LLM is one entry of settings.yaml llms: an OpenAI-compatible endpoint and
// model. The API key is never in the file: APIKeyEnv names the environment
// variable holding it (empty for endpoints that need none).
type LLM struct {
	Name            string `json:"name"`
	BaseURL         string `json:"base_url"`
	Model           string `json:"model"`
	APIKeyEnv       string `json:"api_key_env,omitempty"`
	InferenceEngine string `json:"inference_engine,omitempty"`
}

// APIKey reads the key from the environment variable named by APIKeyEnv;
// "" if none is named or it is unset.
func (l LLM) APIKey() string {
	if l.APIKeyEnv == "" {
		return ""
	}
	return os.Getenv(l.APIKeyEnv)
}

// Profile pairs the model that runs the audit phases (Run) with the model
// that verifies (Verify); both name entries of Settings.LLMs.
type Profile struct {
	Name   string `json:"name"`
	Run    string `json:"run"`
	Verify string `json:"verify"`
}

// Settings is a loaded settings.yaml:
//
//	defaults:            # optional; these are the built-in values
//	  max_tokens: 4000
//	  temperature: 0.1
//	  top_p: 0.95        # optional, more than 0 and at most 1; not sent when absent
//	  seed: 42           # optional; not sent when absent
//	  extra_body:        # optional, merged into every request body
//	    chat_template_kwargs: {enable_thinking: false}
//	llms:                # required, at least one
//	  kimi-k2:
//	    base_url: "http://127.0.0.1:1234/v1"   # required, http(s)
//	    model: "Kimi-K2-Instruct-0905"         # required
//	    api_key_env: "KIMI_API_KEY"            # optional
//	    inference_engine: "aistudio-vllm"      # optional
//	profiles:            # required, at least one
//	  kimi-full:
//	    run: kimi-k2     # required, an llm above
//	    verify: kimi-k2  # required, an llm above
type Settings struct {
	Defaults Generation         `json:"defaults"`
	LLMs     map[string]LLM     `json:"llms"`
	Profiles map[string]Profile `json:"profiles"`

	order []string // profile names in file order
}

// ProfileNames returns the profile names in file order.
func (s *Settings) ProfileNames() []string { return slices.Clone(s.order) }

// SelectProfiles returns the named profiles in the order given, or every
// profile in file order when names is empty. Unknown or repeated names are
// an error.
func (s *Settings) SelectProfiles(names []string) ([]Profile, error) {
	if len(names) == 0 {
		names = s.order
	}
	seen := map[string]bool{}
	out := make([]Profile, 0, len(names))
	for _, n := range names {
		p, ok := s.Profiles[n]
		if !ok {
			return nil, fmt.Errorf("unknown profile %q (settings has %s)", n, strings.Join(s.order, ", "))
		}
		if seen[n] {
			return nil, fmt.Errorf("profile %q given twice", n)
		}
		seen[n] = true
		out = append(out, p)
	}
	return out, nil
}

var (
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	envVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

const nameRule = "names are letters, digits, '.', '_' and '-', starting with a letter or digit"

// LoadSettings reads and validates settings.yaml. Every problem is reported,
// as a ConfigErrors naming file, line and field.
func LoadSettings(path string) (*Settings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSettings(path, data)
}

// ParseSettings is LoadSettings on data already read; file names it in
// errors.
func ParseSettings(file string, data []byte) (*Settings, error) {
	d := &yamlconf.Decoder{File: file}
	root := d.Root(data)
	if root == nil {
		return nil, d.Err()
	}
	s := &Settings{
		Defaults: Generation{MaxTokens: DefaultMaxTokens, Temperature: DefaultTemperature},
		LLMs:     map[string]LLM{},
		Profiles: map[string]Profile{},
	}
	type ref struct {
		name string
		e    yamlconf.Entry
	}
	var refs []ref // profile run/verify values, checked once llms are known
	llmsOK := false

	d.Object(root, 1, "", []yamlconf.Field{
		{Name: "defaults", Decode: func(e yamlconf.Entry) {
			d.Object(e.Val, e.KeyNode.Line, e.Path, []yamlconf.Field{
				{Name: "max_tokens", Decode: func(e yamlconf.Entry) {
					if v, ok := d.Int(e); ok {
						if v <= 0 {
							d.Failf(e.Val.Line, e.Path, "must be positive, got %d", v)
						}
						s.Defaults.MaxTokens = v
					}
				}},
				{Name: "temperature", Decode: func(e yamlconf.Entry) {
					if v, ok := d.Float(e); ok {
						if v < 0 || v > 2 {
							d.Failf(e.Val.Line, e.Path, "must be between 0 and 2, got %v", v)
						}
						s.Defaults.Temperature = v
					}
				}},
				{Name: "top_p", Decode: func(e yamlconf.Entry) {
					if v, ok := d.Float(e); ok {
						if v <= 0 || v > 1 {
							d.Failf(e.Val.Line, e.Path, "must be more than 0 and at most 1, got %v", v)
						}
						s.Defaults.TopP = &v
					}
				}},
				{Name: "seed", Decode: func(e yamlconf.Entry) {
					if v, ok := d.Int(e); ok {
						seed := int64(v)
						s.Defaults.Seed = &seed
					}
				}},
				{Name: "extra_body", Decode: func(e yamlconf.Entry) {
					if e.Val.Kind != yaml.MappingNode {
						d.Failf(e.Val.Line, e.Path, "expected a mapping of request members, got %s", yamlconf.Describe(e.Val))
						return
					}
					var m map[string]any
					if err := e.Val.Decode(&m); err != nil {
						d.Failf(e.Val.Line, e.Path, "%v", err)
						return
					}
					if err := (catalog.ModelConfig{ExtraBody: m}).ValidateSampling(); err != nil {
						d.Failf(e.Val.Line, e.Path, "%v", err)
						return
					}
					if _, err := json.Marshal(m); err != nil {
						d.Failf(e.Val.Line, e.Path, "not representable as JSON: %v", err)
						return
					}
					s.Defaults.ExtraBody = m
				}},
			}, nil)
		}},
		{Name: "llms", Required: true, Decode: func(e yamlconf.Entry) {
			entries, ok := d.Mapping(e.Val, e.Path)
			llmsOK = ok
			if ok && len(entries) == 0 {
				d.Failf(e.KeyNode.Line, e.Path, "at least one llm is required")
			}
			for _, le := range entries {
				if !nameRE.MatchString(le.Key) {
					d.Failf(le.KeyNode.Line, le.Path, "bad llm name: %s", nameRule)
				}
				llm := LLM{Name: le.Key}
				d.Object(le.Val, le.KeyNode.Line, le.Path, []yamlconf.Field{
					{Name: "base_url", Required: true, Decode: func(e yamlconf.Entry) {
						v, ok := d.NonEmptyStr(e)
						if !ok {
							return
						}
						u, err := url.Parse(v)
						if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
							d.Failf(e.Val.Line, e.Path, "want an http:// or https:// URL, got %q", v)
						}
						llm.BaseURL = v
					}},
					{Name: "model", Required: true, Decode: func(e yamlconf.Entry) {
						llm.Model, _ = d.NonEmptyStr(e)
					}},
					{Name: "api_key_env", Decode: func(e yamlconf.Entry) {
						v, ok := d.Str(e)
						if ok && !envVarRE.MatchString(v) {
							d.Failf(e.Val.Line, e.Path, "%q is not an environment variable name", v)
						}
						llm.APIKeyEnv = v
					}},
					{Name: "inference_engine", Decode: func(e yamlconf.Entry) {
						llm.InferenceEngine, _ = d.Str(e)
					}},
				}, map[string]string{
					"api_key": "keys do not belong in settings.yaml: put the key in an environment variable and name the variable in api_key_env",
				})
				s.LLMs[le.Key] = llm
			}
		}},
		{Name: "profiles", Required: true, Decode: func(e yamlconf.Entry) {
			entries, ok := d.Mapping(e.Val, e.Path)
			if ok && len(entries) == 0 {
				d.Failf(e.KeyNode.Line, e.Path, "at least one profile is required")
			}
			for _, pe := range entries {
				if !nameRE.MatchString(pe.Key) {
					d.Failf(pe.KeyNode.Line, pe.Path, "bad profile name: %s", nameRule)
				}
				p := Profile{Name: pe.Key}
				d.Object(pe.Val, pe.KeyNode.Line, pe.Path, []yamlconf.Field{
					{Name: "run", Required: true, Decode: func(e yamlconf.Entry) {
						if v, ok := d.NonEmptyStr(e); ok {
							p.Run = v
							refs = append(refs, ref{v, e})
						}
					}},
					{Name: "verify", Required: true, Decode: func(e yamlconf.Entry) {
						if v, ok := d.NonEmptyStr(e); ok {
							p.Verify = v
							refs = append(refs, ref{v, e})
						}
					}},
				}, nil)
				s.Profiles[pe.Key] = p
				s.order = append(s.order, pe.Key)
			}
		}},
	}, nil)

	for _, r := range refs {
		if _, ok := s.LLMs[r.name]; !ok && llmsOK {
			d.Failf(r.e.Val.Line, r.e.Path, "unknown llm %q", r.name)
		}
	}
	if err := d.Err(); err != nil {
		return nil, err
	}
	return s, nil
}
