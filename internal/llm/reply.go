package llm

import (
	"encoding/json"
	"strings"
)

// This file separates what a server's reply carries: the answer, the
// reasoning (in a message member or as markup in the content) and native
// tool calls (in tool_calls, or as Harmony markup in the content).

// reasoningMembers reads the reasoning members of a message or a stream
// delta from its raw JSON object: reasoning_content (vLLM's reasoning
// parsers, llama.cpp's server, DeepSeek) and reasoning (Ollama, LM Studio,
// OpenRouter, newer vLLM). Null and absent members give "".
func reasoningMembers(raw string) (text, source string) {
	if raw == "" || !strings.Contains(raw, `"reasoning`) {
		return "", ""
	}
	var m struct {
		ReasoningContent *string `json:"reasoning_content"`
		Reasoning        *string `json:"reasoning"`
	}
	if json.Unmarshal([]byte(raw), &m) != nil {
		return "", ""
	}
	switch {
	case m.ReasoningContent != nil && *m.ReasoningContent != "":
		return *m.ReasoningContent, ReasoningContent
	case m.Reasoning != nil && *m.Reasoning != "":
		return *m.Reasoning, ReasoningMember
	}
	return "", ""
}

// splitContent separates reasoning markup from the answer in a message's
// content: gpt-oss's Harmony channels (analysis → reasoning, final →
// answer, a commentary message addressed to functions.NAME → a tool call)
// and <think>…</think> blocks (also the form whose opening tag was in the
// prompt, so that the content starts with the reasoning and only
// "</think>" is seen). Content with neither comes back unchanged.
func splitContent(content string) (answer, reasoning, source string, calls []ToolCall) {
	if strings.Contains(content, "<|channel|>") || strings.Contains(content, "<|message|>") {
		if a, r, c, ok := parseHarmony(content); ok {
			return a, r, ReasoningHarmony, c
		}
	}
	if a, r, ok := splitThink(content); ok {
		return a, r, ReasoningThink, nil
	}
	return content, "", "", nil
}

// splitThink takes <think>…</think> blocks out of content. A content that
// holds "</think>" without an opening tag before it is reasoning up to
// that tag (chat templates such as Qwen3's and DeepSeek-R1's put the
// opening tag in the prompt). An opening tag never closed (the reply was
// cut) makes the rest reasoning.
func splitThink(content string) (answer, reasoning string, ok bool) {
	const open, closeTag = "<think>", "</think>"
	if !strings.Contains(content, open) && !strings.Contains(content, closeTag) {
		return content, "", false
	}
	var ans, rea []string
	rest := content
	if i, j := strings.Index(rest, closeTag), strings.Index(rest, open); i >= 0 && (j < 0 || i < j) {
		rea = append(rea, strings.TrimSpace(rest[:i]))
		rest = rest[i+len(closeTag):]
	}
	for {
		i := strings.Index(rest, open)
		if i < 0 {
			ans = append(ans, rest)
			break
		}
		ans = append(ans, rest[:i])
		rest = rest[i+len(open):]
		j := strings.Index(rest, closeTag)
		if j < 0 {
			rea = append(rea, strings.TrimSpace(rest))
			break
		}
		rea = append(rea, strings.TrimSpace(rest[:j]))
		rest = rest[j+len(closeTag):]
	}
	return strings.TrimSpace(strings.Join(ans, "")), joinNonEmpty(rea, "\n\n"), true
}

// Harmony tokens (OpenAI's gpt-oss response format). A message is
// [<|start|>role]<|channel|>CHANNEL[ to=RECIPIENT][<|constrain|>FORMAT]<|message|>TEXT
// ended by <|end|>, <|return|>, <|call|> or the end of the content.
const (
	hStart     = "<|start|>"
	hChannel   = "<|channel|>"
	hConstrain = "<|constrain|>"
	hMessage   = "<|message|>"
)

var harmonyEnds = []string{"<|end|>", "<|return|>", "<|call|>"}

// parseHarmony reads Harmony messages from content. ok is false when the
// content holds no complete header (then it is not Harmony after all).
func parseHarmony(content string) (answer, reasoning string, calls []ToolCall, ok bool) {
	var ans, rea []string
	rest := content
	for {
		m := strings.Index(rest, hMessage)
		if m < 0 {
			if s := strings.TrimSpace(stripHarmonyTokens(rest)); s != "" {
				ans = append(ans, s) // text after the last message: keep it
			}
			break
		}
		header, body := rest[:m], rest[m+len(hMessage):]
		end := len(body)
		for _, e := range harmonyEnds {
			if i := strings.Index(body, e); i >= 0 && i < end {
				end = i
			}
		}
		// A following header also ends a message whose end token is missing.
		for _, h := range []string{hStart, hChannel} {
			if i := strings.Index(body, h); i >= 0 && i < end {
				end = i
			}
		}
		text := body[:end]
		rest = body[end:]
		for _, e := range harmonyEnds {
			rest = strings.TrimPrefix(rest, e)
		}
		channel, recipient := harmonyHeader(header)
		ok = true
		switch {
		case strings.HasPrefix(recipient, "functions."):
			calls = append(calls, ToolCall{Name: strings.TrimPrefix(recipient, "functions."), Arguments: strings.TrimSpace(text)})
		case channel == "analysis":
			rea = append(rea, strings.TrimSpace(text))
		case channel == "commentary":
			rea = append(rea, strings.TrimSpace(text)) // preambles to the user: reasoning-like
		default: // final, or no channel
			ans = append(ans, strings.TrimSpace(text))
		}
	}
	if !ok {
		return content, "", nil, false
	}
	return joinNonEmpty(ans, "\n"), joinNonEmpty(rea, "\n\n"), calls, true
}

// harmonyHeader reads the channel and the recipient of a message header
// such as "<|start|>assistant<|channel|>commentary to=functions.shell <|constrain|>json".
func harmonyHeader(h string) (channel, recipient string) {
	if i := strings.LastIndex(h, hStart); i >= 0 {
		h = h[i+len(hStart):]
	}
	if i := strings.Index(h, hConstrain); i >= 0 {
		h = h[:i]
	}
	role, ch, hasChannel := strings.Cut(h, hChannel)
	fields := strings.Fields(ch)
	if hasChannel && len(fields) > 0 {
		channel = fields[0]
	}
	for _, f := range append(strings.Fields(role), fields...) {
		if r, ok := strings.CutPrefix(f, "to="); ok {
			recipient = r
		}
	}
	return channel, recipient
}

func stripHarmonyTokens(s string) string {
	for _, t := range []string{hStart, hChannel, hConstrain, hMessage, "<|end|>", "<|return|>", "<|call|>", "assistant"} {
		s = strings.ReplaceAll(s, t, "")
	}
	return s
}

func joinNonEmpty(parts []string, sep string) string {
	out := parts[:0:0]
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, sep)
}

// finishReply fills the answer, reasoning and tool calls of resp from the
// message's content, its reasoning member and its native tool calls.
func finishReply(resp *Response, content, memberReasoning, memberSource string, native []ToolCall) {
	answer, markup, markupSource, markupCalls := splitContent(content)
	if memberReasoning = strings.TrimSpace(memberReasoning); memberReasoning != "" {
		// vLLM's reasoning parsers leave the blank lines that followed
		// </think> at the start of the content.
		answer = strings.TrimLeft(answer, "\r\n")
	}
	resp.Text = answer
	switch {
	case memberReasoning != "" && markup != "":
		resp.Reasoning, resp.ReasoningSource = memberReasoning+"\n\n"+markup, memberSource
	case memberReasoning != "":
		resp.Reasoning, resp.ReasoningSource = memberReasoning, memberSource
	case markup != "":
		resp.Reasoning, resp.ReasoningSource = markup, markupSource
	case markupSource == ReasoningHarmony:
		resp.ReasoningSource = ReasoningHarmony
	}
	resp.ToolCalls = native
	if len(native) == 0 {
		resp.ToolCalls = markupCalls
	}
}
