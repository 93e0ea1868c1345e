package traces

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"

	"github.com/vera-run/vera/bus/catalog"
)

// providers are the gen_ai.provider.name values of the hosted APIs the
// conventions name, by API host. Any other server VERA reaches speaks the
// OpenAI protocol without being OpenAI (LM Studio, Ollama, vLLM,
// llama.cpp's server...): its provider is "openai_compatible", a custom
// value as the conventions allow, and server.address says which it is.
var providers = map[string]string{
	"api.openai.com":                    "openai",
	"api.anthropic.com":                 "anthropic",
	"api.deepseek.com":                  "deepseek",
	"api.groq.com":                      "groq",
	"api.mistral.ai":                    "mistral_ai",
	"api.x.ai":                          "x_ai",
	"api.perplexity.ai":                 "perplexity",
	"api.cohere.com":                    "cohere",
	"generativelanguage.googleapis.com": "gcp.gemini",
}

// modelAttrs are the request model, provider and server of a model call.
func modelAttrs(model, baseURL string) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.GenAIRequestModel(model)}
	host, port := serverOf(baseURL)
	provider := "openai_compatible"
	if p, ok := providers[host]; ok {
		provider = p
	} else if strings.HasSuffix(host, ".openai.azure.com") {
		provider = "azure.ai.openai"
	}
	attrs = append(attrs, semconv.GenAIProviderNameKey.String(provider))
	if host != "" {
		attrs = append(attrs, semconv.ServerAddress(host))
		if port > 0 {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	return attrs
}

// serverOf returns the host and port of a base URL (the scheme's port
// when none is written); "" when it does not parse. User info is never
// returned.
func serverOf(baseURL string) (string, int) {
	u, err := url.Parse(strings.TrimSpace(baseURL))
	if err != nil || u.Host == "" {
		return "", 0
	}
	host := u.Hostname()
	p := u.Port()
	if p == "" {
		switch u.Scheme {
		case "https":
			return host, 443
		case "http":
			return host, 80
		}
		return host, 0
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return host, 0
	}
	return host, n
}

// part and message are the GenAI conventions' message shape
// (gen_ai.input.messages, gen_ai.output.messages).
type part struct {
	Type      string          `json:"type"`
	Content   string          `json:"content,omitempty"`
	ID        string          `json:"id,omitempty"`        // tool_call
	Name      string          `json:"name,omitempty"`      // tool_call
	Arguments json.RawMessage `json:"arguments,omitempty"` // tool_call: the arguments object
}

type message struct {
	Role         string `json:"role"`
	Parts        []part `json:"parts"`
	FinishReason string `json:"finish_reason,omitempty"`
}

// messagesJSON renders chat messages in the conventions' JSON shape;
// finish, when set, is the finish reason of output messages.
// outputJSON renders a reply as the conventions' output message: its
// reasoning, text and tool calls as reasoning, text and tool_call parts.
func outputJSON(text, reasoning string, calls []catalog.ToolCall, finish string) string {
	m := message{Role: "assistant", FinishReason: finish, Parts: []part{}}
	if reasoning != "" {
		m.Parts = append(m.Parts, part{Type: "reasoning", Content: reasoning})
	}
	if text != "" || (reasoning == "" && len(calls) == 0) {
		m.Parts = append(m.Parts, part{Type: "text", Content: text})
	}
	for _, c := range calls {
		tc := part{Type: "tool_call", ID: c.ID, Name: c.Name}
		if json.Valid([]byte(c.Arguments)) {
			tc.Arguments = json.RawMessage(c.Arguments)
		} else {
			b, _ := json.Marshal(c.Arguments) // not JSON: kept as a string
			tc.Arguments = b
		}
		m.Parts = append(m.Parts, tc)
	}
	b, err := json.Marshal([]message{m})
	if err != nil {
		return "[]"
	}
	return string(b)
}

func messagesJSON(msgs []catalog.Message, finish string) string {
	out := make([]message, len(msgs))
	for i, m := range msgs {
		out[i] = message{Role: string(m.Role), Parts: []part{{Type: "text", Content: m.Content}}, FinishReason: finish}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "[]"
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// maxGenericString bounds the strings a generic span event copies.
const maxGenericString = 1024

// scalarAttr turns a decoded JSON value into an attribute: strings (cut
// at 1 KiB), numbers, booleans, and arrays of one of those; other values
// (objects, mixed arrays, null) give none.
func scalarAttr(key string, v any) (attribute.KeyValue, bool) {
	switch x := v.(type) {
	case string:
		if len(x) > maxGenericString {
			i := maxGenericString
			for i > 0 && !utf8.RuneStart(x[i]) {
				i--
			}
			x = x[:i] + "…"
		}
		return attribute.String(key, x), true
	case bool:
		return attribute.Bool(key, x), true
	case float64:
		if x == float64(int64(x)) {
			return attribute.Int64(key, int64(x)), true
		}
		return attribute.Float64(key, x), true
	case []any:
		if len(x) == 0 {
			return attribute.KeyValue{}, false
		}
		switch x[0].(type) {
		case string:
			if ss, ok := all[string](x); ok {
				return attribute.StringSlice(key, ss), true
			}
		case float64:
			if fs, ok := all[float64](x); ok {
				return attribute.Float64Slice(key, fs), true
			}
		case bool:
			if bs, ok := all[bool](x); ok {
				return attribute.BoolSlice(key, bs), true
			}
		}
	}
	return attribute.KeyValue{}, false
}

// all returns the elements of x as Ts, or false when one is not a T.
func all[T any](x []any) ([]T, bool) {
	out := make([]T, 0, len(x))
	for _, e := range x {
		v, ok := e.(T)
		if !ok {
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}
