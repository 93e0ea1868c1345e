package deepverify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
)

// Durable is the name of the auditor's durable consumer:
// component.Durable(catalog.ComponentDeepVerify, ""), the name bus/auth
// reserves for the auditor.
const Durable = "verifier-deepverify"

// DefaultToolTimeout bounds one auditor shell command.
const DefaultToolTimeout = 2 * time.Minute

// DefaultConcurrency is the number of runs the auditor handles at once.
const DefaultConcurrency = 4

// Config is the auditor's configuration. The zero value works but for
// Models, which is required; SetDefaults fills the defaults documented on
// each field.
type Config struct {
	// Models returns the client of a run's model settings (the run's
	// auditor model, else the agent's); required. Its clients should record
	// their calls on the auditor's bus (llmbus).
	Models component.Models
	// MaxCheckSteps is the command budget of one check loop; default
	// DefaultMaxCheckSteps (4).
	MaxCheckSteps int
	// Logger defaults to slog.Default(), tagged with the component's name
	// (component.Logger).
	Logger *slog.Logger
	// Source stamps the events; default catalog.ComponentDeepVerify.
	Source string
	// Clock measures durations and stamps events; default (nil) the bus's
	// clock, which New takes.
	Clock bus.Clock
	// ToolTimeout bounds each command; default DefaultToolTimeout.
	ToolTimeout time.Duration
	// Concurrency is the number of runs handled at once; default
	// DefaultConcurrency (4).
	Concurrency int
	// AckWait is how long a delivery may stay unacknowledged, because the
	// auditor died while handling it, before it is delivered again (to the
	// restarted auditor); default bus.DefaultAckWait. A live handler keeps
	// its delivery in progress however long it runs.
	AckWait time.Duration
	// Durable names the consumer; default Durable
	// (component.Durable(catalog.ComponentDeepVerify, "")).
	Durable string
}

// SetDefaults fills in the defaults documented on each field and checks
// the configuration: Models is required.
func (c *Config) SetDefaults() error {
	if c.Models == nil {
		return errors.New("deepverify: Config.Models is nil")
	}
	if c.MaxCheckSteps <= 0 {
		c.MaxCheckSteps = DefaultMaxCheckSteps
	}
	if c.Source == "" {
		c.Source = catalog.ComponentDeepVerify
	}
	if c.ToolTimeout <= 0 {
		c.ToolTimeout = DefaultToolTimeout
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.AckWait <= 0 {
		c.AckWait = bus.DefaultAckWait
	}
	if c.Durable == "" {
		c.Durable = component.Durable(catalog.ComponentDeepVerify, "")
	}
	c.Logger = component.Logger(c.Logger, catalog.ComponentDeepVerify)
	return nil
}

// Auditor is the DeepVerifier auditor consumer. Create it with New and run
// it with Run.
type Auditor struct {
	b      *bus.Bus
	cfg    Config    // defaults filled by New; never written afterwards
	clock  bus.Clock // cfg.Clock, else the bus's
	events *bus.Factory
}

var _ component.Component = (*Auditor)(nil)

// New returns the auditor that consumes and publishes on b.
func New(b *bus.Bus, cfg Config) (*Auditor, error) {
	if b == nil {
		return nil, errors.New("deepverify: New needs a bus")
	}
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	opts := b.Options()
	clock := cfg.Clock
	if clock == nil {
		clock = opts.Clock
	}
	return &Auditor{b: b, cfg: cfg, clock: clock,
		events: &bus.Factory{Source: cfg.Source, Clock: clock, IDs: opts.IDs}}, nil
}

// Name is catalog.ComponentDeepVerify.
func (a *Auditor) Name() string { return catalog.ComponentDeepVerify }

// Consumes lists the types the catalogue says the auditor consumes.
func (a *Auditor) Consumes() []string { return catalog.ConsumedBy(catalog.ComponentDeepVerify) }

// Produces lists the types the catalogue says the auditor produces.
func (a *Auditor) Produces() []string { return catalog.ProducedBy(catalog.ComponentDeepVerify) }

// Run consumes vera.audit.requested and the auditor's vera.tool.finished
// until ctx ends, then drains and returns nil. Data the catalogue's schema
// rejects is dead-lettered with the reason (component.Consume).
func (a *Auditor) Run(ctx context.Context) error {
	return component.Consume(ctx, a.b, bus.ConsumerConfig{
		Durable:     a.cfg.Durable,
		Types:       []string{catalog.TypeAuditRequested, catalog.TypeToolFinished},
		Concurrency: a.cfg.Concurrency,
		AckWait:     a.cfg.AckWait,
	}, a.handle)
}

func (a *Auditor) handle(ctx context.Context, m *bus.Message) error {
	switch m.Event.Type {
	case catalog.TypeToolFinished:
		var d catalog.ToolFinished
		if err := m.Event.DecodeData(&d); err != nil {
			return bus.Permanent(fmt.Errorf("tool.finished data: %w", err))
		}
		if d.Requester != catalog.RequesterAuditor {
			return nil
		}
	case catalog.TypeAuditRequested:
		var d catalog.AuditRequested
		if err := m.Event.DecodeData(&d); err != nil {
			return bus.Permanent(fmt.Errorf("audit.requested data: %w", err))
		}
		if d.Round < 1 {
			return bus.Permanent(fmt.Errorf("audit.requested: round %d, want >= 1", d.Round))
		}
		if d.Answer == "" && d.AnswerBlob == nil && d.AnswerFile == "" {
			// An answer file may be empty; an inline answer may not.
			return bus.Permanent(errors.New("audit.requested: no answer"))
		}
	default:
		return nil
	}
	return a.Advance(ctx, m.Event.RunID)
}

// Advance rebuilds the audit state of a run from the stream and does
// whatever is missing: decomposition, the next step of every unfinished
// check, the judgement, the feedback. Doing it twice changes nothing twice.
func (a *Auditor) Advance(ctx context.Context, runID string) error {
	events, err := a.b.ReadRun(ctx, runID)
	if err != nil {
		return fmt.Errorf("read run %s: %w", runID, err)
	}
	st, err := rebuild(runID, events)
	if err != nil {
		return err
	}
	for _, n := range st.order {
		r := st.Rounds[n]
		if r.Feedback != nil {
			continue
		}
		if err := a.advanceRound(ctx, st, r, events); err != nil {
			return fmt.Errorf("run %s round %d: %w", runID, n, err)
		}
	}
	return nil
}

func (a *Auditor) answer(ctx context.Context, r *roundState) (string, error) {
	if r.Req.Answer != "" || r.Req.AnswerBlob == nil {
		return r.Req.Answer, nil
	}
	b, err := a.b.GetBlob(ctx, r.Req.AnswerBlob.Digest)
	if err != nil {
		return "", fmt.Errorf("answer blob: %w", err)
	}
	return string(b), nil
}

func (a *Auditor) publish(ctx context.Context, runID string, p bus.Payload, cause bus.Event, purpose string) (bus.Event, error) {
	ev, err := a.events.New(runID, p, bus.ReactionTo(cause, purpose))
	if err != nil {
		return bus.Event{}, err
	}
	if _, err := a.b.Publish(ctx, ev); err != nil {
		return bus.Event{}, fmt.Errorf("publish %s: %w", ev.Type, err)
	}
	return ev, nil
}

func (a *Auditor) advanceRound(ctx context.Context, st *runState, r *roundState, events []bus.Event) error {
	answer, err := a.answer(ctx, r)
	if err != nil {
		return err
	}
	shown, file := PromptAnswer(r.Req, answer)
	maxRounds, stopScore, mc, _ := st.auditorSettings()
	model, err := a.cfg.Models(st.RunID, mc)
	if errors.Is(err, llm.ErrKeyEnvNotAllowed) {
		return a.refuseRound(ctx, st, r, maxRounds, err)
	}
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	base := llm.Request{Model: mc.Name, RunID: st.RunID, Round: r.Round, Step: r.Req.CandidateStep, CauseID: r.Request.ID,
		Sampling: llmbus.Sampling(mc)}
	if base.Temperature == nil {
		zero := 0.0
		base.Temperature = &zero
	}

	// (a–c) decompose.
	if r.Decomposed == nil {
		start := a.clock.Now()
		req := base
		req.Scope, req.Purpose = string(catalog.ScopeVerifier), "decompose"
		req.CallID = fmt.Sprintf("call-audit-r%d-decompose", r.Round)
		prompt := RenderDecompose(DecomposeInput{Round: r.Round, Task: st.Room.Task, Answer: shown, File: file,
			CandidateStep: r.Req.CandidateStep, Notes: st.Room.Notes, Evidence: st.Room.Evidence, Edits: st.Room.Edits})
		var d Decomposition
		_, perr := a.ask(ctx, model, req, prompt, decompositionSchema, func(s string) error {
			var err error
			d, err = ParseDecomposition(s)
			return err
		})
		if perr != nil {
			if ctx.Err() != nil || !isParseError(perr) {
				return perr
			}
			a.cfg.Logger.Warn("decomposition reply unparseable; judging without checks", "run", st.RunID, "round", r.Round, "err", perr)
			d = Decomposition{}
		}
		ad := catalog.AuditDecomposed{Round: r.Round, Summary: d.Summary, LikelyErrors: d.LikelyErrors,
			ModelCallID: req.CallID, DurationMS: a.clock.Now().Sub(start).Milliseconds()}
		for i, c := range d.Checks {
			lb := c.LoadBearing == nil || *c.LoadBearing
			ad.Checks = append(ad.Checks, catalog.AuditCheckPlan{CheckID: CheckID(r.Round, i+1), Source: c.Source, Question: c.Question, LoadBearing: lb})
		}
		if _, err := a.publish(ctx, st.RunID, ad, r.Request, "decomposed"); err != nil {
			return err
		}
		r.Decomposed = &ad
		for i, p := range ad.Checks {
			r.Checks = append(r.Checks, &checkState{Plan: p, Index: i + 1})
		}
	}

	// (d) checks, concurrently; each advances by one step per delivery.
	var wg sync.WaitGroup
	errs := make([]error, len(r.Checks))
	for i, c := range r.Checks {
		if c.Result != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = a.advanceCheck(ctx, st, r, c, shown, file, model, base)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, c := range r.Checks {
		if c.Result == nil {
			return nil // waiting for a tool.finished
		}
	}

	// (e) judge, then SCOUT.
	if r.Judged == nil {
		req := base
		req.Scope, req.Purpose = string(catalog.ScopeJudge), "judge"
		req.CallID = fmt.Sprintf("call-audit-r%d-judge", r.Round)
		checks := make([]catalog.AuditCheck, len(r.Checks))
		for i, c := range r.Checks {
			checks[i] = *c.Result
		}
		prompt := RenderJudge(JudgeInput{Round: r.Round, Task: st.Room.Task, Answer: shown, File: file,
			Summary: r.Decomposed.Summary, LikelyErrors: r.Decomposed.LikelyErrors, Checks: checks})
		var j Judgement
		usage, perr := a.ask(ctx, model, req, prompt, judgementSchema, func(s string) error {
			var err error
			j, err = ParseJudgement(s)
			return err
		})
		if perr != nil {
			if ctx.Err() != nil || !isParseError(perr) {
				return perr
			}
			j = Judgement{Score: 1, Explanation: "The judge's reply could not be parsed: " + perr.Error()}
		}
		allowed, caps := Scout(answer, checks, citationsOf(answer, r.Req, st.Room))
		score := ApplyCap(j.Score, allowed)
		best := BestOf(st.judged()).Update(r.Round, score)
		aj := catalog.AuditJudged{Round: r.Round, Explanation: j.Explanation, Score: score, RawScore: j.Score,
			Instructions: j.Instructions, Caps: caps, BestRound: best.Round, BestScore: best.Score,
			DurationMS:  max(0, a.clock.Now().Sub(r.Request.Time).Milliseconds()),
			ModelTokens: roundTokens(events, r.Round) + usage.Total, ModelCallID: req.CallID}
		if _, err := a.publish(ctx, st.RunID, aj, r.Request, "judged"); err != nil {
			return err
		}
		r.Judged = &aj
	}

	// Feedback to the agent.
	j := r.Judged
	fb := catalog.AuditFeedback{Round: r.Round, Score: j.Score, Accepted: j.Score >= stopScore, Instructions: j.Instructions}
	fb.Final = fb.Accepted || r.Round >= maxRounds
	fb.Message = FeedbackMessage(*j, fb, maxRounds)
	if _, err := a.publish(ctx, st.RunID, fb, r.Request, "feedback"); err != nil {
		return err
	}
	r.Feedback = &fb
	return nil
}

// refuseRound ends the audit of a run whose auditor model names an API key
// variable this auditor may not read (its operator's --allow-api-key-env):
// no model is called, and no later round could call one. The round is
// judged 1 (not audited, so not accepted) with the refusal as its
// explanation, and its feedback is final, so that the agent finishes the
// run (UNRESOLVED, its answer kept) instead of waiting for an audit that
// never comes. The events say why; neither repeats a key.
func (a *Auditor) refuseRound(ctx context.Context, st *runState, r *roundState, maxRounds int, refusal error) error {
	a.cfg.Logger.Warn("auditor model refused: the run is not audited", "run", st.RunID, "round", r.Round, "err", refusal)
	if r.Judged == nil {
		best := BestOf(st.judged()).Update(r.Round, 1)
		aj := catalog.AuditJudged{Round: r.Round, Score: 1, RawScore: 1, BestRound: best.Round, BestScore: best.Score,
			Explanation: "Not audited: the auditor refused to call its model: " + refusal.Error(),
			DurationMS:  max(0, a.clock.Now().Sub(r.Request.Time).Milliseconds())}
		if _, err := a.publish(ctx, st.RunID, aj, r.Request, "judged"); err != nil {
			return err
		}
		r.Judged = &aj
	}
	if r.Feedback != nil {
		return nil
	}
	j := r.Judged
	fb := catalog.AuditFeedback{Round: r.Round, Score: j.Score, Accepted: false, Final: true}
	fb.Message = FeedbackMessage(*j, fb, maxRounds)
	if _, err := a.publish(ctx, st.RunID, fb, r.Request, "feedback"); err != nil {
		return err
	}
	r.Feedback = &fb
	return nil
}

// FeedbackMessage is the text injected into the agent's next prompt.
func FeedbackMessage(j catalog.AuditJudged, fb catalog.AuditFeedback, maxRounds int) string {
	var b strings.Builder
	verdict := "REJECTED"
	if fb.Accepted {
		verdict = "ACCEPTED"
	}
	fmt.Fprintf(&b, "AUDITOR FEEDBACK (round %d of %d): score %d/4, %s.\n", j.Round, maxRounds, j.Score, verdict)
	if j.Explanation != "" {
		fmt.Fprintf(&b, "Why: %s\n", j.Explanation)
	}
	for _, c := range j.Caps {
		fmt.Fprintf(&b, "Score capped at %d (%s): %s\n", c.Cap, c.Rule, c.Reason)
	}
	if len(fb.Instructions) > 0 && !fb.Accepted {
		b.WriteString("Corrective instructions:\n")
		for i, s := range fb.Instructions {
			fmt.Fprintf(&b, "%d. %s\n", i+1, s)
		}
	}
	switch {
	case fb.Final && !fb.Accepted && j.BestRound != j.Round:
		fmt.Fprintf(&b, "No further audit rounds: the answer of round %d (score %d) is kept as the run's answer.\n", j.BestRound, j.BestScore)
	case fb.Final && !fb.Accepted:
		b.WriteString("No further audit rounds: finish with this answer.\n")
	case !fb.Accepted:
		b.WriteString("Follow the instructions, then submit a revised answer.\n")
	}
	return strings.TrimSpace(b.String())
}

func (a *Auditor) advanceCheck(ctx context.Context, st *runState, r *roundState, c *checkState, shown string, file AnswerFile, model llm.Completer, base llm.Request) error {
	if c.Started == nil {
		ev, err := a.publish(ctx, st.RunID, catalog.AuditCheckStarted{Round: r.Round, CheckID: c.Plan.CheckID, Question: c.Plan.Question},
			r.Request, "check_started:"+c.Plan.CheckID)
		if err != nil {
			return err
		}
		c.Started = &ev
	}
	if n := len(c.Calls); n > 0 && c.Calls[n-1].Finished == nil {
		return nil // waiting for its tool.finished
	}
	mustDecide := len(c.Calls) >= a.cfg.MaxCheckSteps
	step := len(c.Calls) + 1
	req := base
	req.Scope, req.Purpose, req.CheckID = string(catalog.ScopeVerifier), "check", c.Plan.CheckID
	req.CallID = fmt.Sprintf("call-audit-%s-s%d", c.Plan.CheckID, step)
	in := CheckInput{CheckID: c.Plan.CheckID, Step: step, MaxSteps: a.cfg.MaxCheckSteps + 1, Task: st.Room.Task, Answer: shown, File: file,
		Question: c.Plan.Question, Source: c.Plan.Source, MustDecide: mustDecide}
	// The check's commands share their shell: each starts from the cwd,
	// exports and (in a persistent session) shell state its predecessors
	// left. A command that reports no shell state keeps the previous one.
	cwd, env, shellState := "", map[string]string{}, ""
	for _, tc := range c.Calls {
		in.Calls = append(in.Calls, CheckCall{Command: tc.Req.Command, ExitCode: tc.Finished.ExitCode, Output: toolOutput(tc.Finished)})
		cwd = tc.Finished.CwdAfter
		for k, v := range tc.Finished.Exports {
			env[k] = v
		}
		if tc.Finished.ShellStateAfter != "" {
			shellState = tc.Finished.ShellStateAfter
		}
	}
	var s CheckStep
	_, perr := a.ask(ctx, model, req, RenderCheck(in), checkStepSchema, func(reply string) error {
		var err error
		s, err = ParseCheckStep(reply)
		return err
	})
	if perr != nil {
		if ctx.Err() != nil || !isParseError(perr) {
			return perr
		}
		s = CheckStep{Verdict: catalog.CheckUnknown, Evidence: "check reply unparseable: " + perr.Error()}
	}
	if s.Verdict == "" && mustDecide {
		s = CheckStep{Verdict: catalog.CheckUnknown, Evidence: fmt.Sprintf("no verdict within %d commands", a.cfg.MaxCheckSteps)}
	}
	if s.Verdict == "" {
		if len(env) == 0 {
			env = nil
		}
		tr := catalog.ToolRequested{RequestID: RequestID(r.Round, c.Index, step), Requester: catalog.RequesterAuditor,
			Tool: catalog.ToolShell, Command: s.Command, Cwd: cwd, Env: env, ShellState: shellState, TimeoutMS: a.cfg.ToolTimeout.Milliseconds(),
			Step: r.Req.CandidateStep, Round: r.Round, CheckID: c.Plan.CheckID}
		_, err := a.publish(ctx, st.RunID, tr, r.Request, "tool:"+tr.RequestID)
		return err
	}
	ac := catalog.AuditCheck{Round: r.Round, CheckID: c.Plan.CheckID, Source: c.Plan.Source, Question: c.Plan.Question,
		LoadBearing: c.Plan.LoadBearing, Result: s.Verdict, Evidence: s.Evidence, Citations: s.Citations,
		DurationMS: max(0, a.clock.Now().Sub(c.Started.Time).Milliseconds())}
	for _, tc := range c.Calls {
		ac.ToolRequestIDs = append(ac.ToolRequestIDs, tc.Req.RequestID)
	}
	if _, err := a.publish(ctx, st.RunID, ac, r.Request, "check:"+c.Plan.CheckID); err != nil {
		return err
	}
	c.Result = &ac
	return nil
}

type parseError struct{ err error }

func (e parseError) Error() string { return e.err.Error() }
func (e parseError) Unwrap() error { return e.err }

func isParseError(err error) bool {
	var p parseError
	return errors.As(err, &p)
}

// ask calls the model with the auditor persona, requesting a reply of the
// schema (dropped by the client when the server refuses it), and parses
// the reply with parse; after an unparseable reply it asks once more, with
// the schema again.
func (a *Auditor) ask(ctx context.Context, model llm.Completer, req llm.Request, prompt string, schema llm.JSONSchema, parse func(string) error) (llm.Usage, error) {
	req.Messages = []llm.Message{{Role: "system", Content: SystemPrompt()}, {Role: "user", Content: prompt}}
	req.ResponseFormat, req.Optional = &schema, true
	var usage llm.Usage
	resp, err := model.Complete(ctx, req)
	if err != nil {
		return usage, err
	}
	usage = resp.Usage
	perr := parse(resp.Text)
	if perr == nil {
		return usage, nil
	}
	req.Messages = append(req.Messages, llm.Message{Role: "assistant", Content: resp.Text}, llm.Message{Role: "user", Content: reaskPrompt(perr)})
	req.CallID += "-reask"
	resp, err = model.Complete(ctx, req)
	if err != nil {
		return usage, err
	}
	usage.Prompt += resp.Usage.Prompt
	usage.Completion += resp.Usage.Completion
	usage.Total += resp.Usage.Total
	if perr := parse(resp.Text); perr != nil {
		return usage, parseError{perr}
	}
	return usage, nil
}

// roundTokens sums the auditor's recorded model usage for a round.
func roundTokens(events []bus.Event, round int) int64 {
	var n int64
	for _, ev := range events {
		if ev.Type != catalog.TypeModelResponded {
			continue
		}
		var d catalog.ModelResponded
		if ev.DecodeData(&d) == nil && d.Round == round && (d.Scope == catalog.ScopeVerifier || d.Scope == catalog.ScopeJudge) {
			n += d.Usage.Total
		}
	}
	return n
}

const maxOutputChars = 3000

func toolOutput(f *catalog.ToolFinished) string {
	var b strings.Builder
	switch {
	case f.Denied:
		fmt.Fprintf(&b, "[denied by rule %s]\n", f.DenyRule)
	case f.TimedOut:
		b.WriteString("[timed out]\n")
	case f.Interrupted:
		b.WriteString("[interrupted]\n")
	}
	if f.Error != "" {
		fmt.Fprintf(&b, "[sandbox error: %s]\n", f.Error)
	}
	b.WriteString(clip(outputText(f.Stdout), maxOutputChars))
	if s := outputText(f.Stderr); s != "" {
		b.WriteString("\n[stderr]\n")
		b.WriteString(clip(s, maxOutputChars/3))
	}
	return b.String()
}

func outputText(o catalog.Output) string {
	if o.Encoding != "" {
		return fmt.Sprintf("[%d bytes of binary output]", o.Bytes)
	}
	if o.Truncated {
		return o.Head + "\n[…]\n" + o.Tail
	}
	return o.Head
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

var evidenceRef = regexp.MustCompile(`\bev_\d{4,}\b`)

// citationsOf collects what supports the answer: the URLs it names and the
// evidence it cites (from the request and from ev_ ids in its text).
func citationsOf(answer string, req catalog.AuditRequested, room cleanRoom) []Citation {
	var out []Citation
	ids := append([]string(nil), req.EvidenceIDs...)
	ids = append(ids, evidenceRef.FindAllString(answer, -1)...)
	seen := map[string]bool{}
	for _, id := range ids {
		ev, ok := room.byID[id]
		if !ok || seen[id] {
			continue
		}
		seen[id] = true
		refs := append(append([]string(nil), ev.URLs...), ev.Paths...)
		if len(refs) == 0 {
			refs = []string{id}
		}
		for _, ref := range refs {
			out = append(out, Citation{Ref: ref, Excerpt: ev.Excerpt})
		}
	}
	for _, u := range URLs(answer) {
		excerpt := ""
		for _, ev := range room.Evidence {
			for _, eu := range ev.URLs {
				if eu == u {
					excerpt = ev.Excerpt
				}
			}
		}
		out = append(out, Citation{Ref: u, Excerpt: excerpt})
	}
	return out
}
