package catalog

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Run lifecycle types.
const (
	TypeTaskSubmitted = "vera.task.submitted"
	TypeRunStarted    = "vera.run.started"
	TypeRunCancelled  = "vera.run.cancelled"
	TypeRunFinished   = "vera.run.finished"
)

// ModelConfig names an OpenAI-compatible model endpoint.
type ModelConfig struct {
	BaseURL   string `json:"base_url" jsonschema_description:"Base URL of the OpenAI-compatible API; requests go to {base_url}/chat/completions, /v1 is appended when missing."`
	Name      string `json:"name" jsonschema_description:"Model name sent as the request's model member."`
	APIKeyEnv string `json:"api_key_env,omitempty" jsonschema:"pattern=^[A-Za-z_][A-Za-z0-9_]*$" jsonschema_description:"NAME of the environment variable that holds the API key on the machine that makes the call. Never the key itself. Empty: no key."`
	TimeoutMS int64  `json:"timeout_ms,omitempty" jsonschema:"minimum=0" jsonschema_description:"Per-request timeout in milliseconds; 0 = the component default (150000, overridable with MODEL_TIMEOUT). With streaming it bounds the wait for the first chunk (the prompt's processing), idle_timeout_ms each later gap, and a whole streamed reply is capped at 30 minutes."`

	// Protocol and transport.
	ToolProtocol  ToolProtocol `json:"tool_protocol,omitempty" jsonschema_description:"How the agent's actions travel: native (OpenAI tools and tool_calls), text (VERA's THOUGHT/ACTION text format) or auto (native, falling back to text when the server or model does not use tools; decided from the first reply and recorded as vera.agent.protocol). Empty = auto. Only the agent uses it."`
	Stream        *bool        `json:"stream,omitempty" jsonschema_description:"Whether replies are requested as Server-Sent Events streams; absent = true. The recorded reply is the same either way."`
	IdleTimeoutMS int64        `json:"idle_timeout_ms,omitempty" jsonschema:"minimum=0" jsonschema_description:"With streaming: the longest wait for the next chunk once the first has come, in milliseconds; 0 = 60000 (or timeout_ms when shorter)."`

	// Sampling, sent only when set.
	Temperature *float64       `json:"temperature,omitempty" jsonschema:"minimum=0" jsonschema_description:"Sampling temperature; absent = the server default."`
	TopP        *float64       `json:"top_p,omitempty" jsonschema:"minimum=0,maximum=1" jsonschema_description:"Nucleus sampling mass; absent = the server default."`
	MaxTokens   int            `json:"max_tokens,omitempty" jsonschema:"minimum=0" jsonschema_description:"Completion token limit of one call; 0 = the server default."`
	Seed        *int64         `json:"seed,omitempty" jsonschema_description:"Sampling seed; absent = none."`
	Stop        []string       `json:"stop,omitempty" jsonschema:"maxItems=4" jsonschema_description:"Stop sequences (at most 4)."`
	ExtraBody   map[string]any `json:"extra_body,omitempty" jsonschema_description:"Extra members merged into the request body as given, for server-specific options such as {\"chat_template_kwargs\": {\"enable_thinking\": false}} (vLLM, llama.cpp, SGLang) or {\"reasoning_effort\": \"low\"}. A member VERA sets itself (model, messages, tools, stream…) is refused."`
}

// ClientKey identifies the connection settings of a model configuration
// (endpoint, model, key variable, timeouts, streaming): configurations with
// the same key can share one client. Sampling and protocol settings are
// per request and not part of it.
func (m ModelConfig) ClientKey() string {
	stream := "default"
	if m.Stream != nil {
		stream = strconv.FormatBool(*m.Stream)
	}
	return strings.Join([]string{m.BaseURL, m.Name, m.APIKeyEnv, strconv.FormatInt(m.TimeoutMS, 10), stream, strconv.FormatInt(m.IdleTimeoutMS, 10)}, "\x00")
}

// ToolProtocol says how the agent's actions travel between VERA and the
// model.
type ToolProtocol string

// ToolProtocol values.
const (
	ToolProtocolAuto   ToolProtocol = "auto"
	ToolProtocolNative ToolProtocol = "native"
	ToolProtocolText   ToolProtocol = "text"
)

func (ToolProtocol) enumValues() []string { return []string{"", "auto", "native", "text"} }

// Valid reports whether p is a known value ("" is auto).
func (p ToolProtocol) Valid() bool { return validEnum(p, string(p)) }

// reservedBodyKeys are the request members VERA sets itself: extra_body
// may not override them. The model client refuses the same members
// (llm.ReservedBodyKeys; a test there keeps the two lists equal): this
// check is the early one, when a run's settings are given.
var reservedBodyKeys = []string{"model", "messages", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options", "response_format", "functions", "function_call", "n"}

// ReservedBodyKeys returns the request members extra_body may not set.
func ReservedBodyKeys() []string { return slices.Clone(reservedBodyKeys) }

// ValidateSampling checks the protocol, sampling and extra_body settings of
// a model configuration.
func (m ModelConfig) ValidateSampling() error {
	if !m.ToolProtocol.Valid() {
		return fmt.Errorf("tool_protocol %q: want auto, native or text", m.ToolProtocol)
	}
	if m.Temperature != nil && (*m.Temperature < 0 || *m.Temperature > 2) {
		return fmt.Errorf("temperature %v: want 0 to 2", *m.Temperature)
	}
	if m.TopP != nil && (*m.TopP <= 0 || *m.TopP > 1) {
		return fmt.Errorf("top_p %v: want more than 0 and at most 1", *m.TopP)
	}
	if m.MaxTokens < 0 {
		return fmt.Errorf("max_tokens %d: want 0 (the server default) or more", m.MaxTokens)
	}
	if m.IdleTimeoutMS < 0 {
		return fmt.Errorf("idle_timeout_ms %d: want 0 (the default) or more", m.IdleTimeoutMS)
	}
	if len(m.Stop) > 4 {
		return fmt.Errorf("stop: %d sequences, at most 4", len(m.Stop))
	}
	for k := range m.ExtraBody {
		if slices.Contains(reservedBodyKeys, k) {
			return fmt.Errorf("extra_body sets %q, which VERA sets itself", k)
		}
	}
	return nil
}

// AuditorConfig holds the DeepVerifier auditor settings of a run.
type AuditorConfig struct {
	Enabled   bool         `json:"enabled" jsonschema_description:"Whether candidate answers are audited before the run finishes."`
	Model     *ModelConfig `json:"model,omitempty" jsonschema_description:"Model of the auditor; absent = the agent's model."`
	MaxRounds int          `json:"max_rounds" jsonschema:"minimum=0" jsonschema_description:"Verification rounds allowed per run (the retry budget); 0 = the default."`
	StopScore int          `json:"stop_score,omitempty" jsonschema:"minimum=0,maximum=4" jsonschema_description:"A round scoring at least this accepts the answer (stop early); 0 = the default, 3."`
}

// SandboxConfig holds the Docker sandbox settings of a run.
type SandboxConfig struct {
	Network        bool        `json:"network" jsonschema_description:"Whether the sandbox container can reach the network (web access is curl/wget from the shell)."`
	Lab            bool        `json:"lab" jsonschema_description:"Lab mode: a privileged container running as root, so apt-get and low-level network changes work. Removes most isolation; trusted machines only."`
	Image          string      `json:"image,omitempty" jsonschema_description:"Sandbox image; empty = VERA's built-in image."`
	ToolTimeoutMS  int64       `json:"tool_timeout_ms,omitempty" jsonschema:"minimum=0" jsonschema_description:"Default timeout of one command in milliseconds; 0 = the default (900000)."`
	Session        SessionMode `json:"session,omitempty" jsonschema_description:"How commands run: persistent (one shell session per container; functions, aliases and variables persist) or exec (a Docker exec per command; only cd and export persist); empty = persistent."`
	WorkLimitMB    int64       `json:"work_limit_mb,omitempty" jsonschema:"minimum=0" jsonschema_description:"Limit on the size of /work in MiB; 0 = sandboxd's default."`
	ScratchLimitMB int64       `json:"scratch_limit_mb,omitempty" jsonschema:"minimum=0" jsonschema_description:"Limit in MiB on what the container writes outside /work (/tmp, /var/tmp and its writable layer); 0 = sandboxd's default."`
}

// VerifyFastConfig holds the VerifyFast settings of a run.
type VerifyFastConfig struct {
	Enabled bool         `json:"enabled" jsonschema_description:"Whether candidate answers are scored by VerifyFast."`
	Profile string       `json:"profile,omitempty" jsonschema_description:"Profile: the execution/verification model pair and strategy overrides, e.g. kimi-full or cross-verify; empty = the default profile."`
	Model   *ModelConfig `json:"model,omitempty" jsonschema_description:"Verification model; absent = the profile's model, else the agent's."`
}

// PolicyConfig holds the limits of the agent's policy layer.
type PolicyConfig struct {
	NotesInterval          int `json:"notes_interval,omitempty" jsonschema:"minimum=0" jsonschema_description:"Every N steps the agent must append to notes.md before running more tools (NOTES_UPDATE_INTERVAL); 0 = the default, 3."`
	StagnationLimit        int `json:"stagnation_limit,omitempty" jsonschema:"minimum=0" jsonschema_description:"UNRESOLVED turns without new evidence before a tool call is forced (STAGNATION_LIMIT); 0 = the default."`
	FailureEscalationLimit int `json:"failure_escalation_limit,omitempty" jsonschema:"minimum=0" jsonschema_description:"Repeats of one failure type before escalation (FAILURE_ESCALATION_LIMIT); 0 = the default."`
	QueryFamilyLimit       int `json:"query_family_limit,omitempty" jsonschema:"minimum=0" jsonschema_description:"Queries of one normalized family before a mutation is required; 0 = the default."`
}

// RunConfig is the configuration of a run. TaskSubmitted carries it as
// submitted (zero = default); RunStarted echoes it with defaults filled in.
type RunConfig struct {
	Task       string           `json:"task" jsonschema:"minLength=1" jsonschema_description:"The task text (the PRIMARY TASK of every prompt)."`
	WorkDir    string           `json:"work_dir" jsonschema:"minLength=1" jsonschema_description:"The run's directory on the host, under one of the deployment's run roots (DATA_DIR/runs and its --work-root directories): new, empty or this run's own. The projector writes the run's files there (notes.md, ledgers, trace.jsonl, logs); its subdirectory work/ is the sandbox's /work (read-write); nothing else of it is visible in the sandbox."`
	InputDir   string           `json:"input_dir,omitempty" jsonschema_description:"Host directory mounted read-only at /input; empty = no input mount."`
	Model      ModelConfig      `json:"model" jsonschema_description:"The agent's model."`
	MaxSteps   int              `json:"max_steps" jsonschema:"minimum=0" jsonschema_description:"Step budget of the agent; 0 = unlimited."`
	Auditor    AuditorConfig    `json:"auditor" jsonschema_description:"DeepVerifier auditor settings."`
	Sandbox    SandboxConfig    `json:"sandbox" jsonschema_description:"Docker sandbox settings."`
	VerifyFast VerifyFastConfig `json:"verifyfast,omitzero" jsonschema_description:"VerifyFast settings; absent = disabled."`
	Policy     PolicyConfig     `json:"policy,omitzero" jsonschema_description:"Policy-layer limits; absent = defaults."`
	Fork       *ForkConfig      `json:"fork,omitempty" jsonschema_description:"Set when the run is a fork of a recorded run (vera fork): it reproduces that run's first steps, then goes on live with its own settings."`
}

// TaskSubmitted asks VERA to run a task. Its event id names nothing by
// itself: the run id is the envelope's subject.
type TaskSubmitted struct {
	RunConfig
	SubmittedBy string            `json:"submitted_by" jsonschema_description:"Who submitted the task: cli, dashboard or an outside tool, optionally with a user, e.g. cli:alice."`
	Labels      map[string]string `json:"labels,omitempty" jsonschema_description:"Free-form labels for dashboards and outside tools; VERA does not interpret them."`
}

// EventType implements Payload.
func (TaskSubmitted) EventType() string { return TypeTaskSubmitted }

// RunStarted says an agent worker took the run.
type RunStarted struct {
	AgentID      string    `json:"agent_id" jsonschema:"minLength=1" jsonschema_description:"Instance id of the agent worker that owns the run (the one writer of its decisions)."`
	Version      string    `json:"version,omitempty" jsonschema_description:"VERA version of that worker."`
	Config       RunConfig `json:"config" jsonschema_description:"The effective configuration: the submitted one with every default filled in. Other components read their settings from here."`
	SystemPrompt *BlobRef  `json:"system_prompt,omitempty" jsonschema_description:"The system prompt in force, by digest, so that a replay can tell prompts apart."`
}

// EventType implements Payload.
func (RunStarted) EventType() string { return TypeRunStarted }

// RunCancelled says a user or tool asked to stop the run.
type RunCancelled struct {
	RequestedBy string `json:"requested_by" jsonschema_description:"Who cancelled: cli, dashboard or an outside tool, optionally with a user, e.g. dashboard:alice."`
	Reason      string `json:"reason,omitempty" jsonschema_description:"Why, in the requester's words."`
}

// EventType implements Payload.
func (RunCancelled) EventType() string { return TypeRunCancelled }

// RunFinished is the last decision of a run.
type RunFinished struct {
	Outcome        Outcome    `json:"outcome" jsonschema_description:"RESOLVED: answered and accepted. UNRESOLVED: no supported answer yet (not a failure). FAILED: an error stopped the run."`
	Reason         string     `json:"reason,omitempty" jsonschema_description:"Why the run ended so: for UNRESOLVED a concrete summary (e.g. no official announcement found in the sources checked), for FAILED the error (cancelled, model unreachable...)."`
	Answer         string     `json:"answer,omitempty" jsonschema_description:"The final answer, inline when small."`
	AnswerBlob     *BlobRef   `json:"answer_blob,omitempty" jsonschema_description:"The final answer when too big to be inline."`
	AnswerFile     string     `json:"answer_file,omitempty" jsonschema_description:"The file under /work/output/ the final answer was read from, when it was submitted as a file."`
	AnswerSHA256   string     `json:"answer_sha256,omitempty" jsonschema_description:"Digest of the final answer file's content at submit time."`
	Steps          int        `json:"steps" jsonschema:"minimum=0" jsonschema_description:"Agent steps taken."`
	BestAuditRound int        `json:"best_audit_round,omitempty" jsonschema:"minimum=0" jsonschema_description:"Audit round whose answer was kept (the best-scoring one); 0 = not audited."`
	BestScore      int        `json:"best_score,omitempty" jsonschema:"minimum=0,maximum=4" jsonschema_description:"Auditor score (1-4) of that round; 0 = not audited."`
	DurationMS     int64      `json:"duration_ms" jsonschema:"minimum=0" jsonschema_description:"Wall time from vera.run.started to this event."`
	Usage          TokenUsage `json:"usage,omitzero" jsonschema_description:"Tokens used by the agent's own model calls (scope agent)."`
}

// EventType implements Payload.
func (RunFinished) EventType() string { return TypeRunFinished }

// envNameRE is what an environment variable name may be.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// ValidEnvName reports whether s can name an environment variable.
func ValidEnvName(s string) bool { return envNameRE.MatchString(s) }

// ErrSecretInConfig: a model configuration holds what looks like a secret
// where only a name or a plain URL belongs. Its message never repeats the
// value.
var ErrSecretInConfig = errors.New("a secret in the run's settings")

// Validate checks that a model configuration carries no secret: api_key_env
// must name an environment variable (a pasted key is refused), and the
// base URL may hold no user name or password. field names the setting in
// the message ("--api-key-env", "model"). The error never quotes the
// offending value.
func (m ModelConfig) Validate(field string) error {
	if m.APIKeyEnv != "" && !ValidEnvName(m.APIKeyEnv) {
		return fmt.Errorf("%w: %s api_key_env must be the NAME of an environment variable (letters, digits, _), not the key itself (%d characters given, not shown); put the key in a variable, e.g. VERA_MODEL_API_KEY, and give its name", ErrSecretInConfig, field, len(m.APIKeyEnv))
	}
	if u, err := url.Parse(strings.TrimSpace(m.BaseURL)); err == nil && u.User != nil {
		return fmt.Errorf("%w: %s base_url holds a user name or password (not shown); drop it from the URL, put the key in an environment variable and give its name as api_key_env", ErrSecretInConfig, field)
	} else if err != nil && strings.Contains(m.BaseURL, "@") {
		return fmt.Errorf("%w: %s base_url does not parse and may hold a password (not shown)", ErrSecretInConfig, field)
	}
	if err := m.ValidateSampling(); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// ValidateSecrets checks every model configuration of a run (the agent's
// and the auditor's) with ModelConfig.Validate.
func (c RunConfig) ValidateSecrets() error {
	if err := c.Model.Validate("model"); err != nil {
		return err
	}
	if c.Auditor.Model != nil {
		if err := c.Auditor.Model.Validate("auditor model"); err != nil {
			return err
		}
	}
	if c.VerifyFast.Model != nil {
		return c.VerifyFast.Model.Validate("verifyfast model")
	}
	return nil
}
