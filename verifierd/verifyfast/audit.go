package verifyfast

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vera-run/vera/internal/llm"
)

// Auditor runs the VerifyFast audit of one output: Phase 1 (factor
// decomposition), then Phase 2 (fact check) and Phase 3 (logic check) in
// parallel, then Phase 4 (Score) on their findings.
//
// Which model does what. A profile pairs a run model with a verify model.
// In the spec's harness the run model produced the answer being audited
// (model_output, which the dataset already holds), so every phase of the
// audit, decomposition included, is verification and calls Verify with
// VerifyModel; Run is not called. DecomposeWithRun selects the other
// reading of the spec, where the run model performs Phase 1 and the verify
// model the checks.
//
// Every call requests response_format json_schema with the schema of its
// phase's reply (PhaseSchema: vera_verifyfast_decomposition, or
// vera_verifyfast_findings for Phases 2 and 3), re-asks included, as an
// optional feature: a server that refuses it is called again without it
// (llm.Response.Dropped; the model I/O events record both).
//
// Model replies must be one JSON object (see the prompts); code fences,
// prose around it, <think> blocks and trailing commas are tolerated
// (llm.ExtractJSONObject). A reply that still cannot be used — invalid JSON, a
// schema violation, a finding without severity or quote, more than
// MaxFacts facts — is answered by asking again once (MaxRepairs) with the
// reason appended to the conversation; if that fails too the phase fails
// and the item is not scored. Nothing is ever guessed.
type Auditor struct {
	Run, Verify           llm.Completer
	RunModel, VerifyModel string
	// Strategy is already resolved for the profile (Strategy.ForProfile):
	// its parameters are rendered into the prompts and it scores.
	Strategy Strategy
	Profile  string
	// MaxRepairs is how many times a phase asks again after an unusable
	// reply: 0 means the default, 1; a negative value never asks again.
	MaxRepairs int
	// Sampling goes into every request (zero values: the server's
	// defaults): settings.yaml's defaults (Generation.Sampling) in a
	// batch; in Live, those with the run's verifyfast.model settings over
	// them.
	Sampling llm.Sampling
	// DecomposeWithRun makes Phase 1 call Run with RunModel.
	DecomposeWithRun bool
	// Annotate, when set, is called with every request just before it is
	// sent, with the phase and the ask (1 for the first ask, 2, … for the
	// re-asks after unusable replies). It may fill in the bookkeeping
	// fields of llm.Request (RunID, Step, Round, CallID, CauseID); Live
	// uses it to tie the model I/O events to the answer audited. Round
	// arrives holding the ask number.
	Annotate func(req *llm.Request, p Phase, ask int)
}

// PhaseTrace records what one phase of an audit did.
type PhaseTrace struct {
	Phase Phase  `json:"phase"`
	Model string `json:"model"`
	// Replies holds every reply text received, in order: the first answer,
	// then the answers to the re-asks.
	Replies []string `json:"replies"`
	// Problems holds, for every unusable reply, why it was rejected.
	Problems []string `json:"problems,omitempty"`
	Tokens   Tokens   `json:"tokens"`
	Error    string   `json:"error,omitempty"`
	// Duration is the time the phase took, re-asks included.
	Duration time.Duration `json:"duration"`
}

// Audit is the outcome of Auditor.Audit. On failure it still carries what
// was obtained (the decomposition, the traces and tokens) but no score.
type Audit struct {
	Decomposition Decomposition `json:"decomposition"`
	// Findings are the fact check's followed by the logic check's.
	Findings    []Finding `json:"findings"`
	CreditScore int       `json:"credit_score"`
	HighCount   int       `json:"high_count"`
	LowCount    int       `json:"low_count"`
	Zone        Zone      `json:"zone,omitempty"`
	Tokens      Tokens    `json:"tokens"`
	// Phases are the traces of the phases that ran, in phase order.
	Phases   []PhaseTrace  `json:"phases"`
	Duration time.Duration `json:"duration"`
}

// PhaseError is a phase that produced no usable answer.
type PhaseError struct {
	Phase Phase
	// Attempts is the number of asks made (1 + re-asks).
	Attempts int
	// Call is set when the model call itself failed (Err is the
	// completer's error); otherwise every reply was unusable and Err is why
	// the last one was rejected.
	Call bool
	Err  error
}

func (e *PhaseError) Error() string {
	if e.Call {
		return fmt.Sprintf("%s: model call failed: %v", e.Phase, e.Err)
	}
	return fmt.Sprintf("%s: no usable reply after %d attempt%s: %v", e.Phase, e.Attempts, plural(e.Attempts), e.Err)
}

func (e *PhaseError) Unwrap() error { return e.Err }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// errStopped is returned by the batch's completers once the batch has been
// asked to stop: no new call is started. An audit ending with it is not a
// result: the item is left for a resume.
var errStopped = errors.New("verifyfast: batch stopping: no new model call started")

func (a *Auditor) repairs() int {
	switch {
	case a.MaxRepairs < 0:
		return 0
	case a.MaxRepairs == 0:
		return 1
	}
	return a.MaxRepairs
}

// Audit runs the three model phases on one context/output pair and scores
// the findings. The error, when not nil, joins one *PhaseError per failed
// phase (Phase 1 failing stops the audit; Phases 2 and 3 both run to their
// end even when the other fails). Check ctx.Err() to tell a cancelled audit
// from a failed one.
func (a *Auditor) Audit(ctx context.Context, contextInput, modelOutput string) (out Audit, err error) {
	start := time.Now()
	out.Findings = []Finding{}
	defer func() { out.Duration = time.Since(start) }()

	decomposer, decModel := a.Verify, a.VerifyModel
	if a.DecomposeWithRun {
		decomposer, decModel = a.Run, a.RunModel
	}
	if decomposer == nil || a.Verify == nil {
		return out, errors.New("verifyfast: Auditor needs a completer for every phase (Verify, and Run with DecomposeWithRun)")
	}
	params := a.Strategy.Effective()

	// Phase 1.
	msgs, err := PhaseMessages(PhaseDecompose, NewPromptData(contextInput, modelOutput, nil, params))
	if err != nil {
		return out, err
	}
	var dec Decomposition
	tr, err := a.runPhase(ctx, PhaseDecompose, decomposer, decModel, msgs, func(reply string) error {
		d, err := ParseDecomposition(reply)
		if err == nil {
			dec = d
		}
		return err
	})
	out.Phases = append(out.Phases, tr)
	out.Tokens = out.Tokens.Add(tr.Tokens)
	if err != nil {
		return out, err
	}
	out.Decomposition = dec

	// Phases 2 and 3, in parallel.
	data := NewPromptData(contextInput, modelOutput, &dec, params)
	type checked struct {
		trace    PhaseTrace
		findings []Finding
		err      error
	}
	var results [2]checked
	var wg sync.WaitGroup
	for i, p := range []Phase{PhaseFactCheck, PhaseLogicCheck} {
		kind := KindFact
		if p == PhaseLogicCheck {
			kind = KindLogic
		}
		wg.Go(func() {
			r := &results[i]
			msgs, err := PhaseMessages(p, data)
			if err != nil {
				r.trace, r.err = PhaseTrace{Phase: p, Model: a.VerifyModel, Error: err.Error()}, err
				return
			}
			r.trace, r.err = a.runPhase(ctx, p, a.Verify, a.VerifyModel, msgs, func(reply string) error {
				fs, err := ParseFindings(reply, kind)
				if err == nil {
					r.findings = fs
				}
				return err
			})
		})
	}
	wg.Wait()

	var errs []error
	for _, r := range results {
		out.Phases = append(out.Phases, r.trace)
		out.Tokens = out.Tokens.Add(r.trace.Tokens)
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		out.Findings = append(out.Findings, r.findings...)
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}

	// Phase 4.
	out.CreditScore, out.HighCount, out.LowCount = Score(out.Findings, a.Strategy)
	out.Zone = ZoneOf(out.CreditScore)
	return out, nil
}

// runPhase asks, and asks again with the reason while accept rejects the
// reply and re-asks are left.
func (a *Auditor) runPhase(ctx context.Context, p Phase, c llm.Completer, model string, msgs []llm.Message, accept func(reply string) error) (tr PhaseTrace, _ error) {
	tr = PhaseTrace{Phase: p, Model: model, Replies: []string{}}
	start := time.Now()
	defer func() { tr.Duration = time.Since(start) }() // tr is the named result
	attempts := 1 + a.repairs()
	schema, ok := PhaseSchema(p)
	if !ok {
		return tr, fmt.Errorf("verifyfast: unknown phase %d", int(p))
	}
	var last error
	for i := 1; i <= attempts; i++ {
		req := llm.Request{
			Model:          model,
			Messages:       msgs,
			Sampling:       a.Sampling,
			ResponseFormat: &schema,
			Optional:       true,
			Scope:          "verifyfast",
			Purpose:        purposeOf(p),
			Round:          i,
		}
		if a.Annotate != nil {
			a.Annotate(&req, p, i)
		}
		resp, err := c.Complete(ctx, req)
		if err != nil {
			pe := &PhaseError{Phase: p, Attempts: i, Call: true, Err: err}
			tr.Error = pe.Error()
			return tr, pe
		}
		tr.Replies = append(tr.Replies, resp.Text)
		tr.Tokens = tr.Tokens.Add(tokensOf(resp.Usage))
		last = accept(resp.Text)
		if last == nil {
			return tr, nil
		}
		if resp.FinishReason == "length" {
			last = fmt.Errorf("%w (the reply was cut off at the token limit: be brief)", last)
		}
		tr.Problems = append(tr.Problems, last.Error())
		if i == attempts {
			break
		}
		repair, err := RepairMessage(last.Error())
		if err != nil {
			return tr, err
		}
		msgs = append(msgs[:len(msgs):len(msgs)], llm.Message{Role: "assistant", Content: resp.Text}, repair)
	}
	pe := &PhaseError{Phase: p, Attempts: attempts, Err: last}
	tr.Error = pe.Error()
	return tr, pe
}

// purposeOf names the phase in the model request events (bus catalogue:
// decompose_facts, fact_check, logic_check).
func purposeOf(p Phase) string {
	switch p {
	case PhaseDecompose:
		return "decompose_facts"
	case PhaseFactCheck:
		return "fact_check"
	case PhaseLogicCheck:
		return "logic_check"
	}
	return ""
}

// AuditItem audits one item and returns its Result for the profile: scored
// when every phase answered, failed (Errors holding every failed phase's
// reason, no score) otherwise. The error is not nil only when the audit was
// interrupted (ctx ended, or the batch stopped starting calls): such an
// item has no result and must be run again.
func (a *Auditor) AuditItem(ctx context.Context, it Item) (Result, error) {
	aud, err := a.Audit(ctx, it.ContextInput, it.ModelOutput)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		if errors.Is(err, errStopped) {
			return Result{}, errStopped
		}
		var reasons []string
		var pe *PhaseError
		for _, e := range unjoin(err) {
			if errors.As(e, &pe) {
				reasons = append(reasons, pe.Error())
			} else {
				reasons = append(reasons, e.Error())
			}
		}
		res := FailedResult(it, a.Profile, reasons...)
		if len(aud.Phases) > 1 {
			d := aud.Decomposition
			res.Decomposition = &d
		}
		res.Tokens = aud.Tokens
		res.DurationMS = aud.Duration.Milliseconds()
		return res, nil
	}
	d := aud.Decomposition
	res := NewResult(it, a.Profile, &d, aud.Findings, a.Strategy)
	res.Tokens = aud.Tokens
	res.DurationMS = aud.Duration.Milliseconds()
	return res, nil
}

// unjoin splits an errors.Join error into its parts.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
