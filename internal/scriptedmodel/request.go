package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Request is one recorded request.
type Request struct {
	// Index is the call index of a chat request (1 for the first one
	// received, retries included); 0 for requests to other endpoints, which
	// only appear among the misses.
	Index    int
	Received time.Time
	Method   string
	Path     string
	// Header is a copy of the request headers, Authorization included.
	Header http.Header
	// Body is the raw request body.
	Body []byte
	// ParseError is set when Body is not a valid chat-completion request.
	ParseError string

	Model               string
	Messages            []Message
	Temperature         *float64
	MaxTokens           *int64
	MaxCompletionTokens *int64
	Stream              bool
	// IncludeUsage reports stream_options.include_usage.
	IncludeUsage bool
	TopP         *float64
	Seed         *int64
	// Tools are the names of the function tools offered; ToolChoice and
	// ResponseFormat are the members as sent (nil when absent).
	Tools          []string
	ToolChoice     json.RawMessage
	ResponseFormat json.RawMessage
	// Members holds every top-level member of the body, raw (for
	// server-specific options such as chat_template_kwargs or stop).
	Members map[string]json.RawMessage

	// Rule labels the rule that answered ("fallback" for the fallback reply);
	// empty for a miss.
	Rule string
	// Missed is set when nothing answered the request; MissReason says why.
	Missed     bool
	MissReason string
}

// Message is one message of a chat request.
type Message struct {
	Role string
	// Text is the content when it was a string, or the text of its text
	// (and refusal) parts concatenated in order when it was an array.
	Text string
	// Parts holds the content parts when the content was an array.
	Parts      []ContentPart
	Name       string
	ToolCallID string
	// Raw is the message exactly as received.
	Raw json.RawMessage
}

// ContentPart is one element of an array-valued message content.
type ContentPart struct {
	Type string
	// Text is set for "text" (and "refusal") parts.
	Text string
	// ImageURL is set for "image_url" parts.
	ImageURL string
	Raw      json.RawMessage
}

// APIKey returns the bearer token of the Authorization header.
func (r Request) APIKey() string {
	auth := r.Header.Get("Authorization")
	if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		return strings.TrimSpace(auth[7:])
	}
	return ""
}

// LastUserMessage returns the text of the last message with role "user".
func (r Request) LastUserMessage() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Text
		}
	}
	return ""
}

// Transcript renders all messages, in order, as "<role>: <text>\n" each.
func (r Request) Transcript() string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Role)
		b.WriteString(": ")
		b.WriteString(m.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// String summarises the request without its headers, so that printing a
// Request never prints the API key.
func (r Request) String() string {
	s := fmt.Sprintf("#%d %s %s model=%q messages=%d stream=%t", r.Index, r.Method, r.Path, r.Model, len(r.Messages), r.Stream)
	if last := r.LastUserMessage(); last != "" {
		s += fmt.Sprintf(" last-user=%q", abbreviate(last, 80))
	}
	if r.Rule != "" {
		s += fmt.Sprintf(" rule=%q", r.Rule)
	}
	if r.Missed {
		s += fmt.Sprintf(" MISS(%s)", r.MissReason)
	}
	return s
}

// GoString keeps %#v from printing the headers either.
func (r Request) GoString() string { return "scriptedmodel.Request{" + r.String() + "}" }

func (r Request) clone() Request {
	c := r
	c.Header = r.Header.Clone()
	c.Body = bytes.Clone(r.Body)
	c.Messages = make([]Message, len(r.Messages))
	for i, m := range r.Messages {
		m.Parts = append([]ContentPart(nil), m.Parts...)
		c.Messages[i] = m
	}
	return c
}

func abbreviate(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	return string(rs[:n]) + "…"
}

type wireRequest struct {
	Model               string            `json:"model"`
	Messages            []json.RawMessage `json:"messages"`
	Temperature         *float64          `json:"temperature"`
	MaxTokens           *int64            `json:"max_tokens"`
	MaxCompletionTokens *int64            `json:"max_completion_tokens"`
	Stream              bool              `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	TopP  *float64 `json:"top_p"`
	Seed  *int64   `json:"seed"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	ToolChoice     json.RawMessage `json:"tool_choice"`
	ResponseFormat json.RawMessage `json:"response_format"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
}

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// parseBody fills the parsed fields of req from req.Body.
func parseBody(req *Request) error {
	var w wireRequest
	if err := json.Unmarshal(req.Body, &w); err != nil {
		return fmt.Errorf("request body is not a JSON object: %v", err)
	}
	req.Model = w.Model
	req.Temperature = w.Temperature
	req.MaxTokens = w.MaxTokens
	req.MaxCompletionTokens = w.MaxCompletionTokens
	req.Stream = w.Stream
	req.IncludeUsage = w.StreamOptions != nil && w.StreamOptions.IncludeUsage
	req.TopP, req.Seed = w.TopP, w.Seed
	for _, t := range w.Tools {
		req.Tools = append(req.Tools, t.Function.Name)
	}
	req.ToolChoice, req.ResponseFormat = w.ToolChoice, w.ResponseFormat
	_ = json.Unmarshal(req.Body, &req.Members)
	for i, raw := range w.Messages {
		m, err := parseMessage(raw)
		if err != nil {
			return fmt.Errorf("messages[%d]: %v", i, err)
		}
		req.Messages = append(req.Messages, m)
	}
	return nil
}

func parseMessage(raw json.RawMessage) (Message, error) {
	var w wireMessage
	if err := json.Unmarshal(raw, &w); err != nil {
		return Message{}, err
	}
	m := Message{Role: w.Role, Name: w.Name, ToolCallID: w.ToolCallID, Raw: bytes.Clone(raw)}
	content := bytes.TrimSpace(w.Content)
	switch {
	case len(content) == 0 || bytes.Equal(content, []byte("null")):
	case content[0] == '"':
		if err := json.Unmarshal(content, &m.Text); err != nil {
			return Message{}, fmt.Errorf("content: %v", err)
		}
	case content[0] == '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(content, &raws); err != nil {
			return Message{}, fmt.Errorf("content: %v", err)
		}
		var text strings.Builder
		for j, pr := range raws {
			var wp wirePart
			if err := json.Unmarshal(pr, &wp); err != nil {
				return Message{}, fmt.Errorf("content[%d]: %v", j, err)
			}
			p := ContentPart{Type: wp.Type, Raw: bytes.Clone(pr)}
			switch wp.Type {
			case "text":
				p.Text = wp.Text
			case "refusal":
				p.Text = wp.Refusal
			case "image_url":
				if wp.ImageURL != nil {
					p.ImageURL = wp.ImageURL.URL
				}
			}
			text.WriteString(p.Text)
			m.Parts = append(m.Parts, p)
		}
		m.Text = text.String()
	default:
		return Message{}, fmt.Errorf("content must be a string, an array of parts or null")
	}
	return m, nil
}
