package eval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
)

// Scorer judges one answer of a task against the task's reference.
type Scorer interface {
	Score(ctx context.Context, t Task, answer string) (Verdict, error)
}

// DefaultRubric is the judge's rubric when a task gives none.
const DefaultRubric = "The answer states the same facts as the reference: every fact of the reference is in the answer, and nothing in the answer contradicts it. Wording, order and extra correct detail do not matter."

// NewScorer returns the scorer of spec:
//
//   - exact: the answer equals the reference after normalization (blanks
//     trimmed, whitespace runs collapsed to one space, one trailing period
//     dropped, and case folded unless case_sensitive);
//   - contains: the normalized reference occurs in the normalized answer;
//   - regex: the reference, an RE2 pattern, matches somewhere in the
//     answer (case as the pattern says: (?i) for insensitive);
//   - numeric: some number written in the answer is within tolerance
//     (absolute) or rel_tolerance (a fraction of the reference) of the
//     reference; with both 0 it must be equal (up to float rounding);
//   - judge: one call of the judge model (judge, with judgeModel as the
//     model name) that is given the task, the reference, the rubric and
//     the answer and replies {"explanation", "correct", "score"}; a judge
//     spec without a judge is an error.
//
// The deterministic scorers score 1 or 0; errors come only from the judge
// (a failed call, a reply that does not parse), and mean the answer could
// not be scored.
func NewScorer(spec ScorerSpec, judge llm.Completer, judgeModel string) (Scorer, error) {
	switch spec.Type {
	case ScorerExact, "":
		return exactScorer{spec}, nil
	case ScorerContains:
		return containsScorer{spec}, nil
	case ScorerRegex:
		return regexScorer{}, nil
	case ScorerNumeric:
		if spec.Tolerance < 0 || spec.RelTolerance < 0 {
			return nil, fmt.Errorf("numeric scorer: tolerances must be 0 or more")
		}
		return numericScorer{spec}, nil
	case ScorerJudge:
		if judge == nil {
			return nil, errors.New("judge scorer: no judge model (give the eval a judge model)")
		}
		if strings.TrimSpace(judgeModel) == "" {
			return nil, errors.New("judge scorer: the judge model has no name")
		}
		return &judgeScorer{spec: spec, judge: judge, model: judgeModel}, nil
	}
	return nil, fmt.Errorf("scorer %q: want %s", spec.Type, scorerKindsText)
}

// Normalize is what exact and contains compare: s trimmed, whitespace
// runs collapsed to one space, one trailing period dropped, and folded to
// lower case unless caseSensitive.
func Normalize(s string, caseSensitive bool) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.TrimSpace(strings.TrimSuffix(s, "."))
	if !caseSensitive {
		s = strings.ToLower(s)
	}
	return s
}

func verdict(ok bool, reason string) Verdict {
	v := Verdict{Correct: ok, Reason: reason}
	if ok {
		v.Score = 1
	}
	return v
}

type exactScorer struct{ spec ScorerSpec }

func (s exactScorer) Score(_ context.Context, t Task, answer string) (Verdict, error) {
	a, r := Normalize(answer, s.spec.CaseSensitive), Normalize(t.Answer, s.spec.CaseSensitive)
	if a == r {
		return verdict(true, "equals the reference"), nil
	}
	return verdict(false, "differs from the reference"), nil
}

type containsScorer struct{ spec ScorerSpec }

func (s containsScorer) Score(_ context.Context, t Task, answer string) (Verdict, error) {
	a, r := Normalize(answer, s.spec.CaseSensitive), Normalize(t.Answer, s.spec.CaseSensitive)
	if strings.Contains(a, r) {
		return verdict(true, "contains the reference"), nil
	}
	return verdict(false, "does not contain the reference"), nil
}

type regexScorer struct{}

func (regexScorer) Score(_ context.Context, t Task, answer string) (Verdict, error) {
	re, err := regexp.Compile(t.Answer)
	if err != nil {
		// ParseTasks refuses such a reference: this is a caller's task.
		return Verdict{}, fmt.Errorf("regex scorer: the reference is not a valid pattern: %w", err)
	}
	if loc := re.FindStringIndex(answer); loc != nil {
		return verdict(true, fmt.Sprintf("matches %q", cutRunes(answer[loc[0]:loc[1]], 80))), nil
	}
	return verdict(false, "the pattern does not match"), nil
}

type numericScorer struct{ spec ScorerSpec }

// numberRE finds the numbers written in a text: an optional sign, an
// optional $, digits with thousands separators or plain, a fraction, an
// exponent, a %.
var numberRE = regexp.MustCompile(`[-+\x{2212}]?\$?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?%?`)

// Numbers returns the numbers written in s, in order (see ParseNumber for
// what a number is). A sign glued to a word or a number before it
// (2020-05) is a hyphen, not a sign.
func Numbers(s string) []float64 {
	var out []float64
	for _, loc := range numberRE.FindAllStringIndex(s, -1) {
		m := s[loc[0]:loc[1]]
		if loc[0] > 0 && (m[0] == '-' || m[0] == '+' || strings.HasPrefix(m, "\u2212")) {
			prev, _ := utf8.DecodeLastRuneInString(s[:loc[0]])
			if unicode.IsLetter(prev) || unicode.IsDigit(prev) {
				_, size := utf8.DecodeRuneInString(m)
				m = m[size:]
			}
		}
		if loc[0] > 0 {
			// A number glued to letters or a decimal point before it
			// (v2, x.5) is part of a word.
			if prev, _ := utf8.DecodeLastRuneInString(s[:loc[0]]); unicode.IsLetter(prev) || prev == '.' || prev == '_' {
				continue
			}
		}
		if v, err := ParseNumber(m); err == nil {
			out = append(out, v)
		}
	}
	return out
}

func (s numericScorer) Score(_ context.Context, t Task, answer string) (Verdict, error) {
	ref, err := ParseNumber(t.Answer)
	if err != nil {
		return Verdict{}, fmt.Errorf("numeric scorer: reference %q: %w", t.Answer, err)
	}
	nums := Numbers(answer)
	if len(nums) == 0 {
		return verdict(false, "no number in the answer"), nil
	}
	nearest, best := 0.0, math.Inf(1)
	for _, v := range nums {
		d := math.Abs(v - ref)
		if s.within(v, ref) {
			return verdict(true, "found "+formatNumber(v)), nil
		}
		if d < best {
			nearest, best = v, d
		}
	}
	return verdict(false, fmt.Sprintf("nearest number %s, reference %s", formatNumber(nearest), formatNumber(ref))), nil
}

func (s numericScorer) within(v, ref float64) bool {
	d := math.Abs(v - ref)
	if d <= 1e-9*math.Max(1, math.Abs(ref)) {
		return true
	}
	return d <= s.spec.Tolerance || d <= s.spec.RelTolerance*math.Abs(ref)
}

func formatNumber(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// judgeScorer asks a model whether an answer is right.
type judgeScorer struct {
	spec  ScorerSpec
	judge llm.Completer
	model string
}

// judgeReply is the judge model's reply. The members are in the order a
// constrained decoder writes them: the reasoning before the verdict.
type judgeReply struct {
	Explanation string  `json:"explanation"`
	Correct     bool    `json:"correct"`
	Score       float64 `json:"score"`
}

// JudgeSchemaName names the judge's reply schema (response_format).
const JudgeSchemaName = "vera_eval_judgement"

var judgeSchema = llm.JSONSchema{Name: JudgeSchemaName, Strict: true, Schema: llm.MustReplySchema(judgeReply{}, nil)}

// JudgePurpose is the purpose of the judge's model calls.
const JudgePurpose = "eval-judge"

const judgeSystemPrompt = `You grade answers to research tasks against a reference answer. You are strict about facts and lenient about wording: an answer is correct when it satisfies the rubric, whatever its phrasing, length or extra correct detail. Reply with one JSON object and nothing else: {"explanation": "<one or two sentences: what matches or differs>", "correct": true|false, "score": <a number from 0 to 1: how fully the answer meets the rubric>}.`

// JudgeCallID is the call id of the judge's call on an answer of a task:
// eval-judge-<task id>-<first 8 hex digits of the answer's SHA-256>, the
// same for the same answer, so that a retried scoring is the same call.
func JudgeCallID(taskID, answer string) string {
	sum := sha256.Sum256([]byte(answer))
	return "eval-judge-" + taskID + "-" + hex.EncodeToString(sum[:4])
}

// judgePrompt is the user message of a judge call.
func judgePrompt(t Task, rubric, answer string) string {
	var b strings.Builder
	b.WriteString("TASK:\n")
	b.WriteString(t.Task)
	b.WriteString("\n\nREFERENCE ANSWER:\n")
	b.WriteString(t.Answer)
	b.WriteString("\n\nRUBRIC:\n")
	b.WriteString(rubric)
	b.WriteString("\n\nANSWER TO GRADE:\n")
	b.WriteString(answer)
	b.WriteString("\n\nGrade the answer against the reference by the rubric. Reply with the JSON object only.")
	return b.String()
}

// Score makes one model call. The call is in scope eval, purpose eval-judge,
// with call id JudgeCallID, temperature 0, and the reply schema requested
// when the server accepts one (Request.Optional).
func (s *judgeScorer) Score(ctx context.Context, t Task, answer string) (Verdict, error) {
	rubric := s.spec.Rubric
	if strings.TrimSpace(rubric) == "" {
		rubric = DefaultRubric
	}
	zero := 0.0
	schema := judgeSchema
	req := llm.Request{
		Model: s.model,
		Messages: []llm.Message{
			{Role: "system", Content: judgeSystemPrompt},
			{Role: "user", Content: judgePrompt(t, rubric, answer)},
		},
		Sampling:       llm.Sampling{Temperature: &zero},
		ResponseFormat: &schema,
		Optional:       true,
		Scope:          string(catalog.ScopeEval),
		Purpose:        JudgePurpose,
		CallID:         JudgeCallID(t.ID, answer),
	}
	resp, err := s.judge.Complete(ctx, req)
	if err != nil {
		return Verdict{}, fmt.Errorf("judge model %s: %w", s.model, err)
	}
	v, err := ParseJudgeReply(resp.Text)
	if err != nil {
		return Verdict{}, fmt.Errorf("judge model %s: unusable reply: %w", s.model, err)
	}
	return v, nil
}

// ParseJudgeReply reads a judge's reply: the JSON object in it (code
// fences, <think> blocks and prose around it are tolerated, see
// llm.ExtractJSONObject) with "correct" (a boolean, or "true"/"false"/
// "yes"/"no"), "score" (a number from 0 to 1, or a numeric string;
// absent: 1 when correct, else 0) and "explanation" (the verdict's
// reason). Anything else is an error.
func ParseJudgeReply(text string) (Verdict, error) {
	obj, err := llm.ExtractJSONObject(text)
	if err != nil {
		return Verdict{}, err
	}
	var raw struct {
		Correct     json.RawMessage `json:"correct"`
		Score       json.RawMessage `json:"score"`
		Explanation json.RawMessage `json:"explanation"`
	}
	if err := json.Unmarshal([]byte(obj), &raw); err != nil {
		return Verdict{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if len(raw.Correct) == 0 || string(raw.Correct) == "null" {
		return Verdict{}, errors.New(`"correct" missing`)
	}
	var v Verdict
	switch c := strings.ToLower(strings.Trim(string(raw.Correct), `" `)); c {
	case "true", "yes":
		v.Correct = true
	case "false", "no":
	default:
		return Verdict{}, fmt.Errorf(`"correct" is %s: want true or false`, raw.Correct)
	}
	if len(raw.Score) == 0 || string(raw.Score) == "null" {
		if v.Correct {
			v.Score = 1
		}
	} else {
		f, err := strconv.ParseFloat(strings.Trim(string(raw.Score), `" `), 64)
		if err != nil || math.IsNaN(f) || f < 0 || f > 1 {
			return Verdict{}, fmt.Errorf(`"score" is %s: want a number from 0 to 1`, raw.Score)
		}
		v.Score = f
	}
	if len(raw.Explanation) > 0 && string(raw.Explanation) != "null" {
		var e string
		if err := json.Unmarshal(raw.Explanation, &e); err != nil {
			e = string(raw.Explanation)
		}
		v.Reason = strings.TrimSpace(e)
	}
	return v, nil
}

// cutRunes cuts s to at most n runes, marking a cut with "…".
func cutRunes(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j] + "…"
		}
		i++
	}
	return s
}
