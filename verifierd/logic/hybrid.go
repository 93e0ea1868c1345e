package logic

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"text/template"

	"github.com/vera-run/vera/internal/llm"
)

// JudgeAttempts is how many times Hybrid asks its judge before falling back
// to the logic verdict: once, and once more after an error or an unusable
// reply.
const JudgeAttempts = 2

// Hybrid is the hybrid verifier MIRAGE's logic verifier describes: Verify
// decides confident cases, and an LLM judge decides the uncertain band.
//
//   - A verdict of high confidence stands: verifier_type "logic",
//     decided_by "logic", and the judge is not called.
//   - A verdict of low confidence whose action IS the repeated action also
//     stands (decided_by "logic", no call): the spec scores a repetition 0
//     whatever the thinking says, so the judge could not raise the score,
//     and asking it would only cost. The judge never turns a repetition
//     found by the action comparison into a 1 or a 2.
//   - Any other low-confidence verdict (a different action with weak or
//     set-aside awareness cues, a reply that failed MIRAGE's format check,
//     a reference action inferred from the history or missing, no action)
//     goes to the judge with MIRAGE's repetitive-action rubric
//     (judge_prompt.tmpl): the task goal, the recent history, the repeated
//     action, the agent's thinking and its action. It must answer with
//     {"thinking_eval": 0|1|2, "action_eval": 0|1, "reason": "…"}; see
//     ParseJudgeReply. The judge's score is the verdict (verifier_type
//     "hybrid", decided_by "llm", its reason): it may find 1, 2, or 0 when
//     it sees a repetition that the comparison by form missed, in which
//     case action_eval is 0 too.
//   - Every call, the retry included, requests response_format
//     json_schema with judgeSchema (vera_logic_judge: the JudgeReply
//     object, strict), as an optional feature: a server that refuses it is
//     called again without it (the model I/O events record the schema sent
//     and the drop), and a reply that ignores it is read as before
//     (ParseJudgeReply).
//   - A reply that cannot be used is answered once with what was wrong and
//     a request for the JSON object alone; an error of the call is retried
//     once. If both attempts fail the logic verdict stands, with
//     verifier_type "hybrid", decided_by "logic-fallback" and the errors in
//     the reason: never a guess.
//
// Verify returns an error only when ctx ends (a verdict made up because
// the caller gave up would differ from the one an uninterrupted run gets)
// or when the Hybrid has no Judge.
type Hybrid struct {
	// Judge is the model client, the same OpenAI-compatible client the
	// agent uses.
	Judge llm.Completer
	// Model is the judge's model name at the server.
	Model string
	// Temperature is sent with every call; 0, the default, is what MIRAGE
	// uses for its judge.
	Temperature float64
	// MaxTokens bounds the reply; 0 leaves it to the server.
	MaxTokens int
	// Sampling holds the other sampling and server options sent with every
	// call (top_p, seed, stop, extra_body; llmbus.Sampling of the judge's
	// model settings gives them). Its Temperature and MaxTokens, when set,
	// take precedence over the two fields above.
	Sampling llm.Sampling
	// Logger reports judge failures; nil uses slog.Default().
	Logger *slog.Logger
}

// Verify scores f with Verify and, when that verdict is uncertain, with the
// judge, as described on Hybrid.
func (h *Hybrid) Verify(ctx context.Context, f InferenceFile) (Verdict, error) {
	return h.decide(ctx, Verify(f), fileCase(f), llm.Request{Scope: "logic"})
}

// judgeCase is what the judge's prompt shows.
type judgeCase struct {
	Goal     string
	History  string
	Repeated string
	Thinking string
	Action   string
}

//go:embed judge_prompt.tmpl
var judgePromptText string

var judgePrompt = template.Must(template.New("judge").Parse(judgePromptText))

func renderTemplate(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := judgePrompt.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("logic: judge prompt %s: %w", name, err)
	}
	return b.String(), nil
}

// judgeMessages renders the system and user messages of a judge call.
func judgeMessages(c judgeCase) ([]llm.Message, error) {
	orNone := func(s, none string) string {
		if strings.TrimSpace(s) == "" {
			return none
		}
		return strings.TrimSpace(s)
	}
	c.Goal = orNone(c.Goal, "(not known)")
	c.History = orNone(c.History, "(not available)")
	c.Repeated = orNone(c.Repeated, "(not known: find it in the history)")
	c.Thinking = orNone(c.Thinking, "(empty)")
	c.Action = orNone(c.Action, "(no action)")
	sys, err := renderTemplate("system", c)
	if err != nil {
		return nil, err
	}
	user, err := renderTemplate("user", c)
	if err != nil {
		return nil, err
	}
	return []llm.Message{{Role: "system", Content: sys}, {Role: "user", Content: user}}, nil
}

// Limits of what a judge prompt carries from an inference file.
const (
	maxHistoryChars   = 6000
	maxHistoryActions = 10
	maxJudgeField     = 4000
	maxEchoedReply    = 2000
)

// fileCase builds the judge's view of a MIRAGE inference file: the
// history section BrowserGym writes, else the actions of the history.
func fileCase(f InferenceFile) judgeCase {
	c := judgeCase{Goal: f.Goal}
	if h := historySection(f.Snapshot); h != "" {
		c.History = clipFront(h, maxHistoryChars)
	} else if acts := HistoryActions(f.Snapshot); len(acts) > 0 {
		acts = acts[max(0, len(acts)-maxHistoryActions):]
		lines := make([]string, len(acts))
		for i, a := range acts {
			lines[i] = "- " + actionText(a)
		}
		c.History = strings.Join(lines, "\n")
	}
	if ref, src := ReferenceAction(f.Snapshot); src != RefNone {
		c.Repeated = actionText(ref)
		if src == RefHistory {
			c.Repeated += "\n(inferred from the history: the snapshot names none)"
		}
	}
	c.Thinking = f.Result.Thinking
	if strings.TrimSpace(c.Thinking) == "" && !f.Result.WellFormatted() {
		c.Thinking = contentText(f.Result.Completion)
	}
	c.Thinking = clip(c.Thinking, maxJudgeField)
	if a := resultAction(f.Result); a.Kind != ActionNone {
		c.Action = actionText(a)
	}
	return c
}

// actionText shows an action to the judge: as written when known.
func actionText(a Action) string {
	if a.Raw != "" {
		return clip(a.Raw, maxJudgeField)
	}
	return a.String()
}

// historySection returns the "# History of interaction with the task:"
// section of the snapshot's last user message that has one.
func historySection(s Snapshot) string {
	for i := len(s.Input) - 1; i >= 0; i-- {
		if s.Input[i].Role != "user" {
			continue
		}
		text := s.Input[i].Text()
		start := strings.Index(text, historyHeading)
		if start < 0 {
			continue
		}
		section := text[start+len(historyHeading):]
		if end := strings.Index(section, "\n# "); end >= 0 {
			section = section[:end]
		}
		return strings.TrimSpace(section)
	}
	return ""
}

// clipFront keeps the last n runes of s, marking the cut.
func clipFront(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// decide applies the hybrid rule to the logic verdict v. base carries the
// call's run, scope, step and call id (suffixed with the attempt).
func (h *Hybrid) decide(ctx context.Context, v Verdict, c judgeCase, base llm.Request) (Verdict, error) {
	if h == nil || h.Judge == nil {
		return Verdict{}, errors.New("logic: the hybrid verifier has no judge")
	}
	if err := ctx.Err(); err != nil {
		return Verdict{}, err
	}
	if v.Confidence == ConfidenceHigh {
		v.DecidedBy = DecidedByLogic
		return v, nil
	}
	if v.ActionEval == ActionRepeated {
		v.DecidedBy = DecidedByLogic
		v.ThinkingEvalReason += "; the judge was not asked: the action repeats the repeated action, so thinking_eval is 0 whatever the thinking says"
		return v, nil
	}
	msgs, err := judgeMessages(c)
	if err != nil {
		return Verdict{}, err
	}
	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	var failures []string
	for attempt := 1; attempt <= JudgeAttempts; attempt++ {
		req := base
		req.Model = h.Model
		req.Messages = msgs
		req.Sampling = h.Sampling
		if req.Temperature == nil {
			t := h.Temperature
			req.Temperature = &t
		}
		if req.MaxTokens == 0 {
			req.MaxTokens = h.MaxTokens
		}
		schema := judgeSchema
		req.ResponseFormat, req.Optional = &schema, true
		if base.CallID != "" {
			req.CallID = base.CallID + "-" + strconv.Itoa(attempt)
		}
		resp, err := h.Judge.Complete(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return Verdict{}, fmt.Errorf("logic: judge call: %w", ctx.Err())
			}
			failures = append(failures, fmt.Sprintf("attempt %d: %v", attempt, err))
			log.Warn("logic judge call failed", "attempt", attempt, "run", base.RunID, "step", base.Step, "err", err)
			continue // the same prompt again
		}
		jr, err := ParseJudgeReply(resp.Text)
		if err != nil {
			failures = append(failures, fmt.Sprintf("attempt %d: %v", attempt, err))
			log.Warn("logic judge reply unusable", "attempt", attempt, "run", base.RunID, "step", base.Step, "err", err)
			retry, rerr := renderTemplate("retry", err.Error())
			if rerr != nil {
				return Verdict{}, rerr
			}
			msgs = append(msgs[:2:2],
				llm.Message{Role: "assistant", Content: clip(resp.Text, maxEchoedReply)},
				llm.Message{Role: "user", Content: retry})
			continue
		}
		return judged(v, jr, req.CallID), nil
	}
	out := v
	out.VerifierType = VerifierTypeHybrid
	out.DecidedBy = DecidedByLogicFallback
	out.ThinkingEvalReason = fmt.Sprintf("the LLM judge failed %d times (%s), so the logic verdict stands: %s",
		JudgeAttempts, clip(strings.Join(failures, "; "), 600), v.ThinkingEvalReason)
	return out, nil
}

// judged is the verdict the judge's reply decides.
func judged(v Verdict, jr JudgeReply, callID string) Verdict {
	out := v
	out.ThinkingEval = jr.ThinkingEval
	out.ActionEval = jr.ActionEval
	out.VerifierType = VerifierTypeHybrid
	out.DecidedBy = DecidedByLLM
	out.ModelCallID = callID
	note := fmt.Sprintf("logic had low confidence in thinking_eval %d", v.ThinkingEval)
	if jr.ThinkingEval == ScoreRepeated {
		note += "; the judge found a repetition the comparison of the actions' form missed"
	}
	out.ThinkingEvalReason = "LLM judge: " + jr.Reason + " (" + note + ")"
	return out
}

// JudgeReply is the judge's answer.
type JudgeReply struct {
	ThinkingEval int    `json:"thinking_eval"`
	ActionEval   int    `json:"action_eval"`
	Reason       string `json:"reason"`
}

// judgeSchema is the reply schema of the judge's calls, derived from
// JudgeReply (llm.ReplySchema): thinking_eval 0, 1 or 2, action_eval 0 or
// 1, then the reason. It is strict (every member required, none other
// allowed: OpenAI's strict mode, so that OpenAI enforces it as the local
// servers do whatever strict says); ParseJudgeReply needs thinking_eval and
// the reason and checks action_eval when given, so requiring it costs
// nothing. The rubric's link between the two scores (0 with 0, 1 or 2 with
// 1) is beyond this schema dialect: ParseJudgeReply checks it.
var judgeSchema = llm.JSONSchema{Name: "vera_logic_judge", Strict: true,
	Schema: llm.MustReplySchema(JudgeReply{}, map[string][]any{
		"thinking_eval": {ScoreRepeated, ScoreDifferent, ScoreAware},
		"action_eval":   {ActionRepeated, ActionAvoided},
	})}

// ErrJudgeReply is wrapped by the errors of ParseJudgeReply.
var ErrJudgeReply = errors.New("unusable judge reply")

var (
	judgeThinkBlock = regexp.MustCompile(`(?s)<think>.*?</think>`)
	jsonFence       = regexp.MustCompile("(?s)```[A-Za-z]*[ \t]*\n?(.*?)```")
)

// ParseJudgeReply reads the judge's reply tolerantly: a <think> block is
// dropped, the JSON object may sit in a code fence or amid text (the first
// object that decodes is taken), numbers may be written 1, 1.0 or "1", and
// MIRAGE's own field names (eval_score, eval_reason) are accepted. It is
// strict about the content: thinking_eval must be 0, 1 or 2; action_eval,
// when given, 0 or 1 and consistent with thinking_eval (0 with 0, 1 or 2
// with 1; when absent it is derived so); the reason must not be empty.
func ParseJudgeReply(text string) (JudgeReply, error) {
	text = strings.TrimSpace(judgeThinkBlock.ReplaceAllString(text, ""))
	if text == "" {
		return JudgeReply{}, fmt.Errorf("%w: the reply is empty", ErrJudgeReply)
	}
	var candidates []string
	for _, m := range jsonFence.FindAllStringSubmatch(text, -1) {
		candidates = append(candidates, m[1])
	}
	candidates = append(candidates, text)
	var obj map[string]json.RawMessage
	for _, c := range candidates {
		if obj = firstJSONObject(c); obj != nil {
			break
		}
	}
	if obj == nil {
		return JudgeReply{}, fmt.Errorf("%w: no JSON object in the reply", ErrJudgeReply)
	}
	field := func(names ...string) (json.RawMessage, bool) {
		for _, n := range names {
			if v, ok := obj[n]; ok && string(v) != "null" {
				return v, true
			}
		}
		return nil, false
	}
	var r JudgeReply
	raw, ok := field("thinking_eval", "eval_score", "score")
	if !ok {
		return JudgeReply{}, fmt.Errorf("%w: thinking_eval is missing", ErrJudgeReply)
	}
	te, err := smallInt(raw)
	if err != nil || te < 0 || te > 2 {
		return JudgeReply{}, fmt.Errorf("%w: thinking_eval is %s, want 0, 1 or 2", ErrJudgeReply, clip(string(raw), 40))
	}
	r.ThinkingEval = te
	r.ActionEval = ActionAvoided
	if te == ScoreRepeated {
		r.ActionEval = ActionRepeated
	}
	if raw, ok := field("action_eval"); ok {
		ae, err := smallInt(raw)
		if err != nil || ae < 0 || ae > 1 {
			return JudgeReply{}, fmt.Errorf("%w: action_eval is %s, want 0 or 1", ErrJudgeReply, clip(string(raw), 40))
		}
		if ae != r.ActionEval {
			return JudgeReply{}, fmt.Errorf("%w: thinking_eval %d with action_eval %d contradicts the rubric (thinking_eval 0 means the action is the repeated one, action_eval 0; 1 and 2 mean a different action, action_eval 1)", ErrJudgeReply, te, ae)
		}
	}
	raw, ok = field("reason", "eval_reason", "thinking_eval_reason")
	if ok {
		if err := json.Unmarshal(raw, &r.Reason); err != nil {
			return JudgeReply{}, fmt.Errorf("%w: reason is not a string", ErrJudgeReply)
		}
	}
	r.Reason = strings.TrimSpace(r.Reason)
	if r.Reason == "" {
		return JudgeReply{}, fmt.Errorf("%w: the reason is missing or empty", ErrJudgeReply)
	}
	return r, nil
}

// firstJSONObject decodes the JSON object of a model reply (found as every
// component finds it: llm.ExtractJSONObject), or nil.
func firstJSONObject(s string) map[string]json.RawMessage {
	text, err := llm.ExtractJSONObject(s)
	if err != nil {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(text), &obj) != nil {
		return nil
	}
	return obj
}

// smallInt reads an integral JSON number, or a string holding one.
func smallInt(raw json.RawMessage) (int, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(strings.TrimSpace(s))
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f != float64(int(f)) {
		return 0, fmt.Errorf("not an integer: %s", raw)
	}
	return int(f), nil
}
