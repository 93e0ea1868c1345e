// Package loadmodel is the workload of `vera bench load`: a small
// OpenAI-compatible chat-completions server that plays a fixed script for
// the VERA agent, so that a deployment can be loaded with many runs
// without a language model.
//
// It is production code, not a test double: `vera bench load` starts it in
// the operator's process and points the runs it submits at it. It listens
// on the address it is given (127.0.0.1:0 by default), speaks POST
// /v1/chat/completions (a JSON chat.completion, or with "stream": true a
// text/event-stream of chat.completion.chunk objects ending in
// "data: [DONE]", as OpenAI does) and GET /v1/models.
//
// # Script
//
// A run of S steps: steps 1 to S-1 each run one shell command,
//
//	echo "step k" | tee -a /work/load.txt
//
// and step S submits a final answer with STATUS_UPDATE: RESOLVED, citing
// the evidence the commands produced. Replies use VERA's text protocol
// (THOUGHT, a JSON action, EVIDENCE_USED, STATUS_UPDATE), which the agent
// also accepts when it offers native tools (tool_protocol auto falls back
// to text on a reply without tool calls).
//
// The server keeps no state: the step is read from the request, one more
// than the highest "[step N] ACTION:" of the agent's prompt, so that any
// number of runs, agents and retries may share one server. When the
// agent's notes gate asks for notes ("Update notes.md (notes_append)"),
// the step appends a line to notes.md instead of running its command
// (`vera bench load` sets the runs' notes interval so that it never does).
//
// Other callers: the DeepVerifier auditor's prompts (AUDIT-DECOMPOSE,
// AUDIT-CHECK, AUDIT-JUDGE) get well-formed replies that plan no check and
// judge without an opinion (score 3, "not judged"), so an audited run goes
// on; any other prompt (VerifyFast, the logic verifier's judge, a person)
// gets HTTP 400 with an OpenAI-shaped error saying this server only plays
// the agent's load script.
package loadmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultModel is the model name the server reports when a request names
// none.
const DefaultModel = "vera-load"

// Config configures a Server.
type Config struct {
	// Addr is the listen address; empty = 127.0.0.1:0 (a free loopback port).
	Addr string
	// Steps is S, the steps of a run: S-1 commands, then the submit. At
	// least 1.
	Steps int
	// Latency is waited before each reply (0 = none): a stand-in for the
	// model's time to answer.
	Latency time.Duration
}

// Server is a running load model server.
type Server struct {
	cfg  Config
	ln   net.Listener
	http *http.Server
	done chan struct{}
	// closing ends pending latency waits.
	closing   chan struct{}
	closeOnce sync.Once

	chat   atomic.Int64 // chat requests answered with a reply
	errors atomic.Int64 // chat requests refused
	ids    atomic.Int64
}

// Start listens on cfg.Addr and serves until Close.
func Start(cfg Config) (*Server, error) {
	if cfg.Steps < 1 {
		return nil, fmt.Errorf("loadmodel: steps must be at least 1, got %d", cfg.Steps)
	}
	if cfg.Latency < 0 {
		return nil, fmt.Errorf("loadmodel: latency must not be negative, got %s", cfg.Latency)
	}
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("loadmodel: listen on %s: %w", cfg.Addr, err)
	}
	s := &Server{cfg: cfg, ln: ln, done: make(chan struct{}), closing: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.handleChat)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found",
			fmt.Sprintf("loadmodel serves POST /v1/chat/completions and GET /v1/models, not %s %s", r.Method, r.URL.Path))
	})
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		_ = s.http.Serve(ln)
	}()
	return s, nil
}

// URL is the server's base URL, e.g. http://127.0.0.1:41234 (VERA adds /v1).
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Replies is the number of chat requests answered with a reply; Refused
// the number answered with an error.
func (s *Server) Replies() int64 { return s.chat.Load() }

// Refused is the number of chat requests answered with an error.
func (s *Server) Refused() int64 { return s.errors.Load() }

// Close stops the server: pending replies end, and Close returns once
// every handler has.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { close(s.closing) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.http.Shutdown(ctx)
	if err != nil {
		err = s.http.Close()
	}
	<-s.done
	if err != nil {
		return fmt.Errorf("loadmodel: close: %w", err)
	}
	return nil
}

// Message is one chat message of a request, its content as text.
type Message struct {
	Role    string
	Content string
}

// chatRequest is the part of a chat-completions request the server reads.
type chatRequest struct {
	Model         string            `json:"model"`
	Messages      []json.RawMessage `json:"messages"`
	Stream        bool              `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// messageText reads a message whose content is a string or a list of
// parts ({"type":"text","text":…}).
func messageText(raw json.RawMessage) (Message, error) {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return Message{}, err
	}
	out := Message{Role: m.Role}
	if len(m.Content) == 0 || string(m.Content) == "null" {
		return out, nil
	}
	if m.Content[0] == '"' {
		err := json.Unmarshal(m.Content, &out.Content)
		return out, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(m.Content, &parts); err != nil {
		return Message{}, fmt.Errorf("content is neither a string nor a list of parts: %w", err)
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	out.Content = b.String()
	return out, nil
}

// ErrNotScripted is wrapped by Reply's error for a prompt that is neither
// the agent's nor the auditor's.
var ErrNotScripted = errors.New("loadmodel plays only the VERA agent's load script (and answers the DeepVerifier auditor)")

var (
	stepRE     = regexp.MustCompile(`\n\[step (\d+)\] ACTION:`)
	evidenceRE = regexp.MustCompile(`\bev_\d{4,}\b`)
	checkRE    = regexp.MustCompile(`^AUDIT-CHECK (\S+) step (\d+)`)
)

// agentPromptHeader starts the user message of every agent step
// (agents/protocol.HeaderTask).
const agentPromptHeader = "PRIMARY TASK:"

// notesGateCue is in the agent's prompt when its notes gate blocked a tool.
const notesGateCue = "Update notes.md (notes_append)"

// Reply returns the script's reply to a request's messages, for a run of
// steps steps; an error wrapping ErrNotScripted for a prompt the script
// does not know.
func Reply(steps int, msgs []Message) (string, error) {
	last := ""
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			last = msgs[i].Content
			break
		}
	}
	switch {
	case strings.HasPrefix(last, "AUDIT-DECOMPOSE"):
		return `{"summary":[],"likely_errors":[],"checks":[]}`, nil
	case strings.HasPrefix(last, "AUDIT-CHECK"):
		id := "check"
		if m := checkRE.FindStringSubmatch(last); m != nil {
			id = m[1]
		}
		return `{"command":"","verdict":"unknown","evidence":"loadmodel does not verify (` + id + `)","citations":[]}`, nil
	case strings.HasPrefix(last, "AUDIT-JUDGE"):
		return `{"explanation":"Not judged: loadmodel is a load generator and has no opinion on answers.","score":3,"instructions":[]}`, nil
	case strings.HasPrefix(last, agentPromptHeader):
	default:
		return "", fmt.Errorf("%w: the last user message starts with %q", ErrNotScripted, firstLine(last, 60))
	}
	done := 0
	for _, m := range stepRE.FindAllStringSubmatch(last, -1) {
		if k, err := strconv.Atoi(m[1]); err == nil {
			done = max(done, k)
		}
	}
	step := done + 1
	if step >= steps {
		ev := evidenceRE.FindAllString(last, -1)
		cited := "none"
		if len(ev) > 0 {
			cited = dedupe(ev)
		}
		answer := fmt.Sprintf("load run done: /work/load.txt holds the lines of %d commands", steps-1)
		return turn(fmt.Sprintf("Step %d of %d: every command ran, submitting.", step, steps),
			action("submit", map[string]string{"answer": answer}), cited, "RESOLVED"), nil
	}
	if strings.Contains(last, notesGateCue) {
		return turn(fmt.Sprintf("Step %d of %d: notes are due.", step, steps),
			action("notes_append", map[string]string{"text": fmt.Sprintf("load run: %d of %d commands run", done, steps-1)}), "none", "continuing"), nil
	}
	cmd := fmt.Sprintf(`echo "step %d" | tee -a /work/load.txt`, step)
	return turn(fmt.Sprintf("Step %d of %d: running the load command.", step, steps),
		action("shell", map[string]string{"cmd": cmd}), "none", "continuing"), nil
}

func turn(thought, action, evidence, status string) string {
	return "THOUGHT: " + thought + "\n" + action + "\nEVIDENCE_USED: " + evidence + "\nSTATUS_UPDATE: " + status + "\n"
}

func action(tool string, args map[string]string) string {
	b, _ := json.Marshal(struct {
		Tool string            `json:"tool"`
		Args map[string]string `json:"args"`
	}{tool, args})
	return string(b)
}

func dedupe(ids []string) string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return strings.Join(out, ", ")
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object": "list",
		"data":   []map[string]any{{"id": DefaultModel, "object": "model", "created": 0, "owned_by": "vera"}},
	})
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		s.errors.Add(1)
		writeError(w, http.StatusBadRequest, "invalid_request_error", "bad_body", "reading the request body: "+err.Error())
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.errors.Add(1)
		writeError(w, http.StatusBadRequest, "invalid_request_error", "bad_json", "the body is not a chat-completions request: "+err.Error())
		return
	}
	msgs := make([]Message, 0, len(req.Messages))
	for i, raw := range req.Messages {
		m, err := messageText(raw)
		if err != nil {
			s.errors.Add(1)
			writeError(w, http.StatusBadRequest, "invalid_request_error", "bad_message", fmt.Sprintf("messages[%d]: %v", i, err))
			return
		}
		msgs = append(msgs, m)
	}
	text, err := Reply(s.cfg.Steps, msgs)
	if err != nil {
		s.errors.Add(1)
		// Not worth retrying: the same prompt gets the same answer.
		w.Header().Set("x-should-retry", "false")
		writeError(w, http.StatusBadRequest, "invalid_request_error", "not_scripted", err.Error())
		return
	}
	if d := s.cfg.Latency; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		case <-s.closing:
			t.Stop()
			return
		}
	}
	s.chat.Add(1)
	model := req.Model
	if model == "" {
		model = DefaultModel
	}
	id := "chatcmpl-load-" + strconv.FormatInt(s.ids.Add(1), 10)
	created := time.Now().Unix()
	usage := map[string]int{"prompt_tokens": len(body) / 4, "completion_tokens": len(text) / 4}
	usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, piece := range pieces(text, 4) {
		send(chunk(map[string]any{"content": piece}, nil))
	}
	send(chunk(map[string]any{}, "stop"))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

// pieces splits s into at most n pieces of about equal runes.
func pieces(s string, n int) []string {
	r := []rune(s)
	if len(r) == 0 {
		return nil
	}
	n = min(n, len(r))
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, string(r[i*len(r)/n:(i+1)*len(r)/n]))
	}
	return out
}

func writeError(w http.ResponseWriter, status int, typ, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}
