package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/vera-run/vera/bus/catalog"
)

// modelSettingsFlags are the protocol, transport and sampling settings of
// one model configuration (catalog.ModelConfig beyond its endpoint): the
// agent's as --temperature, --top-p…, the auditor's as
// --auditor-temperature… A setting not given on the command line keeps
// the configuration's value (absent: the server's default).
type modelSettingsFlags struct {
	prefix   string // "" or "auditor-"
	fs       *pflag.FlagSet
	protocol bool // --tool-protocol is registered (the agent's model only)

	toolProtocol string
	temperature  float64
	topP         float64
	maxTokens    int
	seed         int64
	stop         []string
	extraBody    string
	stream       bool
	noStream     bool
	idleTimeout  time.Duration
}

// register adds the flags; what names the model in the help ("the
// agent's model").
func (m *modelSettingsFlags) register(cmd *cobra.Command, prefix, what string, protocol bool) {
	m.prefix, m.fs, m.protocol = prefix, cmd.Flags(), protocol
	fl := cmd.Flags()
	if protocol {
		fl.StringVar(&m.toolProtocol, prefix+"tool-protocol", "", what+": how the agent's actions travel: native (OpenAI tools and tool_calls), "+
			"text (VERA's THOUGHT/ACTION text format) or auto (native, falling back to text when the server or model does not call tools; "+
			"decided from the first reply and recorded); default auto")
	}
	fl.Float64Var(&m.temperature, prefix+"temperature", 0, what+": sampling temperature, 0 to 2 (default: the server's)")
	fl.Float64Var(&m.topP, prefix+"top-p", 0, what+": nucleus sampling mass, more than 0 and at most 1 (default: the server's)")
	fl.IntVar(&m.maxTokens, prefix+"max-tokens", 0, what+": completion token limit of one call (default 0: the server's)")
	fl.Int64Var(&m.seed, prefix+"seed", 0, what+": sampling seed, for servers that honour one (default: none sent)")
	fl.StringArrayVar(&m.stop, prefix+"stop", nil, what+": a stop sequence (repeatable, at most 4)")
	fl.StringVar(&m.extraBody, prefix+"extra-body", "", what+`: a JSON object merged into every request body, for server options such as '{"chat_template_kwargs":{"enable_thinking":false}}' or '{"reasoning_effort":"low"}'; members VERA sets itself (model, messages, tools, stream…) are refused`)
	live := ""
	if prefix == "" {
		live = ", shown live as it is generated"
	}
	fl.BoolVar(&m.stream, prefix+"stream", true, what+": ask for the reply as a stream of chunks (Server-Sent Events)"+live+"; the recorded reply is the same either way")
	fl.BoolVar(&m.noStream, prefix+"no-stream", false, what+": ask for whole replies (for a server whose streaming is broken)")
	fl.DurationVar(&m.idleTimeout, prefix+"idle-timeout", 0, what+": with streaming, the longest wait for the next chunk before the attempt fails and is retried (default 60s); MODEL_TIMEOUT bounds the wait for the first chunk, and a whole streamed reply may take up to 30 minutes")
}

func (m *modelSettingsFlags) changed(name string) bool { return m.fs.Changed(m.prefix + name) }

// any reports whether a setting was given.
func (m *modelSettingsFlags) any() bool {
	for _, n := range []string{"tool-protocol", "temperature", "top-p", "max-tokens", "seed", "stop", "extra-body", "stream", "no-stream", "idle-timeout"} {
		if m.fs.Lookup(m.prefix+n) != nil && m.changed(n) {
			return true
		}
	}
	return false
}

// apply sets the given settings on mc and checks the result
// (catalog.ModelConfig.ValidateSampling); the error names the flag.
func (m *modelSettingsFlags) apply(mc *catalog.ModelConfig) error {
	flag := func(n string) string { return "--" + m.prefix + n }
	if m.protocol && m.changed("tool-protocol") {
		mc.ToolProtocol = catalog.ToolProtocol(m.toolProtocol)
		if !mc.ToolProtocol.Valid() || m.toolProtocol == "" {
			return fmt.Errorf("%s %q: want auto, native or text", flag("tool-protocol"), m.toolProtocol)
		}
	}
	if m.changed("temperature") {
		v := m.temperature
		mc.Temperature = &v
	}
	if m.changed("top-p") {
		v := m.topP
		mc.TopP = &v
	}
	if m.changed("max-tokens") {
		mc.MaxTokens = m.maxTokens
	}
	if m.changed("seed") {
		v := m.seed
		mc.Seed = &v
	}
	if m.changed("stop") {
		mc.Stop = append([]string(nil), m.stop...)
		for _, s := range mc.Stop {
			if s == "" {
				return fmt.Errorf("%s: an empty stop sequence", flag("stop"))
			}
		}
	}
	if m.changed("extra-body") {
		body, err := parseExtraBody(m.extraBody)
		if err != nil {
			return fmt.Errorf("%s: %w", flag("extra-body"), err)
		}
		mc.ExtraBody = body
	}
	switch {
	case m.changed("stream") && m.changed("no-stream"):
		return fmt.Errorf("give %s or %s, not both", flag("stream"), flag("no-stream"))
	case m.changed("no-stream") && m.noStream, m.changed("stream") && !m.stream:
		v := false
		mc.Stream = &v
	case m.changed("stream"), m.changed("no-stream"):
		v := true
		mc.Stream = &v
	}
	if m.changed("idle-timeout") {
		if m.idleTimeout <= 0 {
			return fmt.Errorf("%s %v: want a positive duration such as 90s", flag("idle-timeout"), m.idleTimeout)
		}
		mc.IdleTimeoutMS = m.idleTimeout.Milliseconds()
		if mc.IdleTimeoutMS == 0 {
			mc.IdleTimeoutMS = 1
		}
	}
	if err := mc.ValidateSampling(); err != nil {
		// The message starts with the setting's name: name the flag too.
		setting, _, _ := strings.Cut(err.Error(), " ")
		setting = strings.TrimSuffix(setting, ":")
		if n, ok := settingFlags[setting]; ok && m.fs.Lookup(m.prefix+n) != nil {
			return fmt.Errorf("%s (%s model settings): %w", flag(n), m.what(), err)
		}
		return fmt.Errorf("%s model settings: %w", m.what(), err)
	}
	return nil
}

// settingFlags maps a ModelConfig setting to its flag.
var settingFlags = map[string]string{
	"tool_protocol": "tool-protocol", "temperature": "temperature", "top_p": "top-p", "max_tokens": "max-tokens",
	"stop": "stop", "extra_body": "extra-body", "idle_timeout_ms": "idle-timeout",
}

func (m *modelSettingsFlags) what() string {
	switch m.prefix {
	case "":
		return "the agent's"
	case "judge-":
		return "the hybrid judge's"
	}
	return "the auditor's"
}

// parseExtraBody reads --extra-body: one JSON object.
func parseExtraBody(s string) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	var body map[string]any
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("not a JSON object (%v): give one such as '{\"chat_template_kwargs\":{\"enable_thinking\":false}}'", err)
	}
	if body == nil {
		return nil, errors.New(`not a JSON object (null): give one such as '{"reasoning_effort":"low"}'`)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value: give one object")
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("text after the JSON object")
	}
	return body, nil
}

// modelSettingsText lists the settings of mc that are not the defaults,
// for `vera run`'s first lines ("" when all are).
func modelSettingsText(mc catalog.ModelConfig) string {
	var parts []string
	if mc.ToolProtocol != "" {
		parts = append(parts, "tool protocol "+string(mc.ToolProtocol))
	}
	if mc.Stream != nil && !*mc.Stream {
		parts = append(parts, "no streaming")
	}
	if mc.IdleTimeoutMS > 0 {
		parts = append(parts, "idle timeout "+(time.Duration(mc.IdleTimeoutMS)*time.Millisecond).String())
	}
	if mc.Temperature != nil {
		parts = append(parts, fmt.Sprintf("temperature %g", *mc.Temperature))
	}
	if mc.TopP != nil {
		parts = append(parts, fmt.Sprintf("top_p %g", *mc.TopP))
	}
	if mc.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("max_tokens %d", mc.MaxTokens))
	}
	if mc.Seed != nil {
		parts = append(parts, fmt.Sprintf("seed %d", *mc.Seed))
	}
	if len(mc.Stop) > 0 {
		parts = append(parts, fmt.Sprintf("%d stop sequences", len(mc.Stop)))
	}
	if len(mc.ExtraBody) > 0 {
		keys := slices.Sorted(maps.Keys(mc.ExtraBody))
		parts = append(parts, "extra_body "+strings.Join(keys, ", "))
	}
	return strings.Join(parts, " · ")
}
