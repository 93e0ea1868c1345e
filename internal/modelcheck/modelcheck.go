// Package modelcheck tells a user what their model server can do for
// VERA: one request per capability (plain completion, streaming, native
// tool calling, structured output, reasoning, sampling parameters), sent
// through the same client VERA runs with (internal/llm), and a verdict per
// capability with what was seen and the model setting to use. It backs
// `vera model check`.
package modelcheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vera-run/vera/internal/eventfmt"
	"github.com/vera-run/vera/internal/llm"
)

// Verdict says whether a capability works.
type Verdict string

// Verdicts.
const (
	Yes     Verdict = "yes"
	Partial Verdict = "partial"
	No      Verdict = "no"
	Skipped Verdict = "skipped"
)

// ReasoningQuestion is what the reasoning check asks: a question a
// reasoning model thinks about before it answers.
const ReasoningQuestion = "What is 17 × 23? Think it through, then answer with the number only."

// Check names.
const (
	CheckCompletion = "completion"
	CheckStreaming  = "streaming"
	CheckTools      = "tools"
	CheckStructured = "structured"
	CheckReasoning  = "reasoning"
	CheckSampling   = "sampling"
)

// Check describes one capability check (for --help).
type Check struct {
	Name, Description string
}

// Checks lists the checks in the order they run.
var Checks = []Check{
	{CheckCompletion, "a plain chat completion, not streamed: does the server answer, with text? Everything else needs this; the command fails when it does not work."},
	{CheckStreaming, "the same request streamed (stream: true with stream_options.include_usage): do chunks arrive, and does the last one carry the token usage?"},
	{CheckTools, "one trivial tool (get_weather) offered with tool_choice \"required\": does a native tool_calls entry come back, with JSON arguments, or is the call written as text in the content, or are tools refused?"},
	{CheckStructured, "response_format json_schema with a two-field schema: is the reply a JSON document of that schema?"},
	{CheckReasoning, "a question worth thinking about: does the reasoning come apart from the answer, and from where (reasoning_content, reasoning, <think> in the content, Harmony markup, or only a reasoning token count)?"},
	{CheckSampling, "temperature 0, top_p 1 and seed 42: are they accepted?"},
}

// Config says which server and model to check.
type Config struct {
	BaseURL string
	Model   string
	// APIKeyEnv names the environment variable holding the API key ("" for
	// none).
	APIKeyEnv string
	// Timeout bounds each request (0: llm's default, MODEL_TIMEOUT or 150 s).
	Timeout time.Duration
	// HTTPClient carries the requests (default: llm's).
	HTTPClient *http.Client
	// LookupEnv reads the environment (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
}

// Result is the verdict of one check.
type Result struct {
	Check  string  `json:"check"`
	Works  Verdict `json:"works"`
	Detail string  `json:"detail"`
	// Setting is the model setting line this result recommends (e.g.
	// "tool_protocol: native"); "" when it recommends none.
	Setting   string `json:"setting,omitempty"`
	LatencyMS int64  `json:"latency_ms,omitempty"`
}

// Report is the outcome of all checks.
type Report struct {
	BaseURL string   `json:"base_url"`
	Model   string   `json:"model"`
	Results []Result `json:"results"`
}

// CompletionWorks reports whether the basic completion works: without it
// VERA cannot run on this server.
func (r Report) CompletionWorks() bool {
	res, ok := r.Result(CheckCompletion)
	return ok && res.Works == Yes
}

// Result returns the result of a check.
func (r Report) Result(check string) (Result, bool) {
	for _, res := range r.Results {
		if res.Check == check {
			return res, true
		}
	}
	return Result{}, false
}

// Settings returns the recommended setting lines, in check order, without
// duplicates.
func (r Report) Settings() []string {
	var out []string
	seen := map[string]bool{}
	for _, res := range r.Results {
		if res.Setting != "" && !seen[res.Setting] {
			seen[res.Setting] = true
			out = append(out, res.Setting)
		}
	}
	return out
}

// WriteTable prints the report as a table followed by the recommended
// settings.
func (r Report) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "model %s at %s\n\n", r.Model, r.BaseURL)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CAPABILITY\tWORKS\tDETAIL")
	for _, res := range r.Results {
		// Details quote the server: printed safe for a terminal, on one line.
		detail := strings.Join(strings.Fields(eventfmt.TerminalSafe(res.Detail)), " ")
		fmt.Fprintf(tw, "%s\t%s\t%s\n", res.Check, res.Works, detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if s := r.Settings(); len(s) > 0 {
		b.WriteString("\nRecommended model settings (run config, settings.yaml or the matching vera run flags):\n")
		for _, line := range s {
			b.WriteString("  " + line + "\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// Run sends one request per check and returns the report. Its error is
// for a configuration that cannot make a client (a bad base URL, an API
// key variable that is not set); what the server does is in the report.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Model == "" {
		return Report{}, errors.New("modelcheck: no model name")
	}
	base := llm.Config{
		BaseURL: cfg.BaseURL, Model: cfg.Model, APIKeyEnv: cfg.APIKeyEnv, Timeout: cfg.Timeout,
		MaxRetries: 1, HTTPClient: cfg.HTTPClient, LookupEnv: cfg.LookupEnv,
		Logger: slog.New(slog.DiscardHandler), // the report says what happened
	}
	plain, err := llm.New(base)
	if err != nil {
		return Report{}, fmt.Errorf("modelcheck: %w", err)
	}
	defer plain.Close()
	streamCfg := base
	streamCfg.Stream = true
	streaming, err := llm.New(streamCfg)
	if err != nil {
		return Report{}, fmt.Errorf("modelcheck: %w", err)
	}
	defer streaming.Close()

	rep := Report{BaseURL: plain.BaseURL(), Model: cfg.Model}
	completion := checkCompletion(ctx, plain)
	rep.Results = append(rep.Results, completion)
	if completion.Works != Yes && completion.Works != Partial {
		for _, c := range Checks[1:] {
			rep.Results = append(rep.Results, Result{Check: c.Name, Works: Skipped, Detail: "not tried: the basic completion does not work"})
		}
		return rep, nil
	}
	rep.Results = append(rep.Results,
		checkStreaming(ctx, streaming),
		checkTools(ctx, plain),
		checkStructured(ctx, plain),
		checkReasoning(ctx, plain),
		checkSampling(ctx, plain),
	)
	return rep, nil
}

func messages(user string) []llm.Message {
	return []llm.Message{
		{Role: "system", Content: "You are being tested by `vera model check`. Follow the instruction exactly."},
		{Role: "user", Content: user},
	}
}

func call(ctx context.Context, c *llm.Client, purpose string, req llm.Request) (llm.Response, error) {
	req.Scope, req.Purpose = "modelcheck", purpose
	return c.Complete(ctx, req)
}

func checkCompletion(ctx context.Context, c *llm.Client) Result {
	r := Result{Check: CheckCompletion}
	resp, err := call(ctx, c, CheckCompletion, llm.Request{Messages: messages("Reply with exactly one word: ready")})
	r.LatencyMS = resp.Latency.Milliseconds()
	if err != nil {
		r.Works, r.Detail = No, errLine(err)+connectionHint(err)
		return r
	}
	switch {
	case strings.TrimSpace(resp.Text) != "":
		r.Works = Yes
		r.Detail = fmt.Sprintf("answered %q in %s (finish_reason %s, %s)", abbreviate(resp.Text, 40), roundLatency(resp.Latency), orNone(resp.FinishReason), tokens(resp.Usage))
	case resp.Reasoning != "":
		r.Works = Partial
		r.Detail = fmt.Sprintf("only reasoning came back, no answer (finish_reason %s): give the model more max_tokens, or turn thinking off (extra_body)", orNone(resp.FinishReason))
	case len(resp.ToolCalls) > 0:
		r.Works = Partial
		r.Detail = "a tool call came back though no tool was offered"
	default:
		r.Works, r.Detail = No, fmt.Sprintf("empty reply (finish_reason %s)", orNone(resp.FinishReason))
	}
	return r
}

func checkStreaming(ctx context.Context, c *llm.Client) Result {
	r := Result{Check: CheckStreaming}
	chunks := 0
	resp, err := call(ctx, c, CheckStreaming, llm.Request{
		Messages: messages("Reply with exactly one word: ready"),
		OnDelta:  func(llm.Delta) { chunks++ },
	})
	r.LatencyMS = resp.Latency.Milliseconds()
	if err != nil {
		r.Works, r.Detail, r.Setting = No, errLine(err), "stream: false"
		return r
	}
	switch {
	case chunks == 0:
		r.Works, r.Setting = Partial, "stream: false"
		r.Detail = "the server answered the streaming request with one JSON body, not an event stream (it ignores stream: true)"
	case resp.Usage.Total == 0:
		r.Works, r.Setting = Partial, "stream: true"
		r.Detail = fmt.Sprintf("%d chunks, but no usage in the stream (stream_options.include_usage ignored): token counts are not recorded; stream: false records them", chunks)
	default:
		r.Works, r.Setting = Yes, "stream: true"
		r.Detail = fmt.Sprintf("%d chunks in %s, usage in the last chunk (%s)", chunks, roundLatency(resp.Latency), tokens(resp.Usage))
	}
	return r
}

const toolName = "get_weather"

func checkTools(ctx context.Context, c *llm.Client) Result {
	r := Result{Check: CheckTools}
	resp, err := call(ctx, c, CheckTools, llm.Request{
		Messages: messages("What is the weather in Paris? Use the get_weather tool."),
		Tools: []llm.Tool{{Name: toolName, Description: "Get the current weather of a city.", Parameters: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"city": map[string]any{"type": "string", "description": "the city name"}},
			"required":             []string{"city"},
			"additionalProperties": false,
		}}},
		ToolChoice: "required",
	})
	r.LatencyMS = resp.Latency.Milliseconds()
	if err != nil {
		r.Works, r.Setting = No, "tool_protocol: text"
		r.Detail = "refused: " + errLine(err) + toolsHint(err.Error())
		return r
	}
	if len(resp.ToolCalls) == 0 {
		r.Works, r.Setting = No, "tool_protocol: text"
		if looksLikeTextToolCall(resp.Text) {
			r.Detail = "the tool call came back as text in the content, not as tool_calls: the server does not parse this model's tool calls (llama-server: start it with --jinja; vLLM: --enable-auto-tool-choice --tool-call-parser NAME)"
		} else {
			r.Detail = fmt.Sprintf("no tool call though tool_choice was \"required\" (answered %q)", abbreviate(resp.Text, 60))
		}
		return r
	}
	tc := resp.ToolCalls[0]
	var args map[string]any
	argsOK := json.Unmarshal([]byte(tc.Arguments), &args) == nil
	_, hasCity := args["city"].(string)
	from := "in tool_calls"
	if resp.ReasoningSource == llm.ReasoningHarmony && tc.ID == "" {
		from = "from Harmony markup in the content (VERA parses it)"
	}
	switch {
	case tc.Name != toolName:
		r.Works, r.Setting = Partial, "tool_protocol: auto"
		r.Detail = fmt.Sprintf("a tool call %s, but to %q, not the offered %s", from, tc.Name, toolName)
	case !argsOK || !hasCity:
		r.Works, r.Setting = Partial, "tool_protocol: auto"
		r.Detail = fmt.Sprintf("a %s call %s, but its arguments are not the schema's JSON object: %s", toolName, from, abbreviate(tc.Arguments, 60))
	case len(resp.ToolCalls) > 1:
		r.Works, r.Setting = Partial, "tool_protocol: native"
		r.Detail = fmt.Sprintf("%d tool calls in one reply though parallel_tool_calls was false (VERA takes one per step)", len(resp.ToolCalls))
	default:
		r.Works, r.Setting = Yes, "tool_protocol: native"
		r.Detail = fmt.Sprintf("%s(%s) %s (finish_reason %s)", toolName, abbreviate(tc.Arguments, 40), from, orNone(resp.FinishReason))
	}
	return r
}

// looksLikeTextToolCall reports whether content holds a tool call written
// as text (Hermes <tool_call> tags, a JSON object naming the tool, a
// Python-style call).
func looksLikeTextToolCall(content string) bool {
	return strings.Contains(content, "<tool_call>") || strings.Contains(content, "[TOOL_CALLS]") ||
		strings.Contains(content, "<|python_tag|>") || strings.Contains(content, toolName)
}

func toolsHint(msg string) string {
	m := strings.ToLower(msg)
	switch {
	case strings.Contains(m, "jinja"):
		return " — start llama-server with --jinja"
	case strings.Contains(m, "enable-auto-tool-choice") || strings.Contains(m, "tool-call-parser"):
		return " — start vLLM with --enable-auto-tool-choice --tool-call-parser NAME (hermes for Qwen, llama3_json, mistral, openai for gpt-oss, …)"
	case strings.Contains(m, "does not support tools"):
		return " — this model has no tool support in Ollama: pick a model with the tools tag"
	}
	return ""
}

// The structured-output schema: the capital of France and its population.
var cityPopulation = &llm.JSONSchema{Name: "city_population", Strict: true, Schema: map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city":       map[string]any{"type": "string"},
		"population": map[string]any{"type": "integer"},
	},
	"required":             []string{"city", "population"},
	"additionalProperties": false,
}}

func checkStructured(ctx context.Context, c *llm.Client) Result {
	r := Result{Check: CheckStructured}
	resp, err := call(ctx, c, CheckStructured, llm.Request{
		Messages:       messages("Give the capital of France and its population, as JSON with the members city and population."),
		ResponseFormat: cityPopulation,
	})
	r.LatencyMS = resp.Latency.Milliseconds()
	if err != nil {
		r.Works = No
		r.Detail = "refused: " + errLine(err) + " — the judges will parse JSON out of free text instead"
		return r
	}
	switch problem := validCityPopulation(resp.Text); {
	case problem == "":
		r.Works, r.Detail = Yes, "a JSON document of the schema: "+abbreviate(strings.TrimSpace(resp.Text), 60)
	case strings.HasPrefix(problem, "not JSON"):
		r.Works, r.Detail = No, "response_format was ignored: the reply is "+problem+" — the judges will parse JSON out of free text instead"
	default:
		r.Works, r.Detail = Partial, "JSON, but not of the schema: "+problem
	}
	return r
}

// validCityPopulation checks text against the cityPopulation schema and
// says what is wrong ("" when nothing is).
func validCityPopulation(text string) string {
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(text)))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil || dec.More() {
		return fmt.Sprintf("not JSON (%q)", abbreviate(text, 50))
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return "not an object"
	}
	city, ok := obj["city"].(string)
	if !ok || city == "" {
		return "no string member city"
	}
	n, ok := obj["population"].(json.Number)
	if _, err := n.Int64(); !ok || err != nil {
		return "no integer member population"
	}
	if len(obj) != 2 {
		return fmt.Sprintf("%d members, the schema allows 2", len(obj))
	}
	return ""
}

func checkReasoning(ctx context.Context, c *llm.Client) Result {
	r := Result{Check: CheckReasoning}
	resp, err := call(ctx, c, CheckReasoning, llm.Request{
		Messages: messages(ReasoningQuestion),
	})
	r.LatencyMS = resp.Latency.Milliseconds()
	if err != nil {
		r.Works, r.Detail = No, errLine(err)
		return r
	}
	n := len(resp.Reasoning)
	switch resp.ReasoningSource {
	case llm.ReasoningContent, llm.ReasoningMember:
		r.Works = Yes
		r.Detail = fmt.Sprintf("separated by the server in message.%s (%d bytes%s)", resp.ReasoningSource, n, reasoningTokens(resp.Usage))
	case llm.ReasoningThink:
		r.Works = Partial
		r.Detail = fmt.Sprintf("<think> blocks in the content (%d bytes): VERA separates them, or let the server do it (vLLM --reasoning-parser NAME, llama-server --reasoning-format deepseek)", n)
	case llm.ReasoningHarmony:
		r.Works = Partial
		r.Detail = fmt.Sprintf("gpt-oss Harmony markup in the content (%d bytes of analysis): VERA parses it; a server with Harmony support (vLLM, a recent llama-server) separates it", n)
	default:
		if resp.Usage.Reasoning > 0 {
			r.Works = Partial
			r.Detail = fmt.Sprintf("%d reasoning tokens counted, but no reasoning text sent (the provider keeps it hidden)", resp.Usage.Reasoning)
		} else {
			r.Works = No
			r.Detail = "no reasoning in the reply (not a reasoning model, or thinking is off)"
		}
	}
	return r
}

func reasoningTokens(u llm.Usage) string {
	if u.Reasoning > 0 {
		return fmt.Sprintf(", %d reasoning tokens", u.Reasoning)
	}
	return ""
}

func checkSampling(ctx context.Context, c *llm.Client) Result {
	r := Result{Check: CheckSampling}
	temp, topP, seed := 0.0, 1.0, int64(42)
	resp, err := call(ctx, c, CheckSampling, llm.Request{
		Messages: messages("Reply with exactly one word: ready"),
		Sampling: llm.Sampling{Temperature: &temp, TopP: &topP, Seed: &seed},
	})
	r.LatencyMS = resp.Latency.Milliseconds()
	if err != nil {
		r.Works = No
		r.Detail = "refused: " + errLine(err)
		r.Setting = "leave temperature, top_p and seed unset for this model"
		return r
	}
	r.Works, r.Detail = Yes, "temperature 0, top_p 1 and seed 42 accepted"
	return r
}

func connectionHint(err error) string {
	var ae *llm.APIError
	switch {
	case errors.Is(err, llm.ErrConnection):
		return " — is the server running, and is the base URL right?"
	case errors.As(err, &ae) && (ae.Status == http.StatusUnauthorized || ae.Status == http.StatusForbidden):
		return " — the server wants an API key: name its environment variable with --api-key-env"
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		return " — check the base URL (it should lead to /v1) and the model name (GET /v1/models lists them)"
	}
	return ""
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// callSuffix is the "(call ID, N attempts)" the client adds to its errors.
var callSuffix = regexp.MustCompile(` \(call [^ ,)]+, \d+ attempts?\)$`)

// errLine is an error's text on one line, without the call id.
func errLine(err error) string {
	return callSuffix.ReplaceAllString(oneLine(err.Error()), "")
}

func abbreviate(s string, n int) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func tokens(u llm.Usage) string {
	if u.Total == 0 {
		return "no usage reported"
	}
	return fmt.Sprintf("%d prompt + %d completion tokens", u.Prompt, u.Completion)
}

func roundLatency(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
