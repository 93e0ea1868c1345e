package logic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/llm"
)

// Defaults of Live.
const (
	DefaultWindow = 3 // as in MIRAGE's repetitive_4 setting
	// DefaultDurable is component.Durable(catalog.ComponentLogic, ""): the
	// durable consumer name bus/auth reserves for the logic verifier.
	DefaultDurable     = "verifier-logic"
	DefaultConcurrency = 4
	DefaultMaxRuns     = 1024
)

// VerdictPurpose is the purpose bus.ReactionTo derives a verdict's event
// id with: the verdict on step event E has id bus.DeriveID(run, E.ID,
// VerdictPurpose), so one step gets at most one verdict.
const VerdictPurpose = "logic-verdict"

// Live is the logic verifier as a component: it watches vera.agent.step
// events on the bus and publishes a vera.logic.verdict when a step follows
// a repetition, so that the agent's repetition nudge and the dashboard can
// use it.
//
// # When a step is judged
//
// Only steps that carry an action count (see ParseStepAction): a step with
// a format error ran no tool and is skipped, and so is a step without an
// action. Skipped steps are transparent: they neither get a verdict nor
// break a streak, since the agent did nothing in the environment (A,
// format error, A, A is a streak of three A).
//
// With a window of W (default 3, at least 2), an acting step is judged
// when the W-1 acting steps before it, in the run's stream order, all took
// one action R (equal by meaning: ParseStepAction's canonical form and
// Action.Equal; for shell commands NormalizeShellCommand). R is then the
// repeated action, the step is scored by Verify as MIRAGE scores a
// snapshot whose history repeats R:
//
//   - the step repeats R: it is the W-th identical action in a row, and
//     thinking_eval is 0 (action_eval 0), whatever the thought says; every
//     further repetition is judged 0 again;
//   - the step takes another action: thinking_eval 2 when the thought shows
//     awareness of the repetition, 1 when it does not (action_eval 1); it
//     is the step that leaves the loop.
//
// Other steps get no verdict. With W = 3 and actions A, A, A, B, C the
// verdicts are step 3 (0) and step 4 (1 or 2).
//
// # The verdict event
//
// catalog.LogicVerdict: step, thinking_eval, action_eval, the reason
// (which steps repeated the action, then Verify's or the judge's reason),
// verifier_type and decided_by (logic/logic; with a Hybrid, hybrid/llm
// when the judge decided, and hybrid/logic-fallback when the judge failed
// and the logic verdict stands, the reason saying so), window (the catalogue's meaning: how many
// preceding steps the action was compared with, W-1), the action as
// written, repeated_action and repeated_step (the latest step of R, when
// the step repeats it), the awareness keywords and patterns found, and the
// judge's call id.
//
// # Idempotency and restarts
//
// The verdict's id is derived from the step event (bus.ReactionTo with
// VerdictPurpose): redelivery or a replay stores it once. State is rebuilt,
// not remembered: at the first step of a run it sees, and whenever a step
// arrives that does not follow the steps it knows (a gap in step numbers,
// as after a restart or behind another instance), Live reads the run's
// agent.step events from the stream with bus.Read, together with its
// logic.verdict events (a step that already has its verdict is not judged
// again: no second judge call after a restart) and the task (the judge's
// goal). The window of a step is always taken from the steps stored before
// it, so a restart, a redelivery out of order or a replay gives the
// verdicts an uninterrupted run gives.
//
// Malformed agent.step data (data the catalogue's schema rejects, checked
// by component.Consume before Live sees it; not an AgentStep object; step
// < 1) is dead-lettered with bus.Permanent and the reason. Other event
// types are ignored.
//
// Create it with New (Config holds its settings) and run it with Run.
type Live struct {
	b   *bus.Bus
	cfg Config // defaults filled by New; never written afterwards

	mu     sync.Mutex
	runs   map[string]*runState
	clock  uint64
	events *bus.Factory
	log    *slog.Logger
}

var _ component.Component = (*Live)(nil)

// Config is the logic verifier's configuration. The zero value is a
// working one (a window of DefaultWindow, no judge); SetDefaults fills
// the defaults documented on each field.
type Config struct {
	// Window is W above (see Live): the judged step and the W-1 acting
	// steps before it; default DefaultWindow (3), at least 2.
	Window int
	// Hybrid, when set, sends uncertain verdicts to its judge (it must
	// have one); default nil: logic alone.
	Hybrid *Hybrid
	// Logger defaults to slog.Default(), tagged with the component's name
	// (component.Logger).
	Logger *slog.Logger
	// Durable names the consumer; default DefaultDurable
	// (component.Durable(catalog.ComponentLogic, ""), "verifier-logic").
	Durable string
	// Concurrency is the number of runs handled at once (the steps of one
	// run are always handled in order); default DefaultConcurrency.
	Concurrency int
	// MaxRuns bounds the runs whose steps are kept in memory; the least
	// recently seen run beyond it is forgotten (and rebuilt from the stream
	// if it shows up again). Default DefaultMaxRuns.
	MaxRuns int
	// Source stamps the verdict events; default catalog.ComponentLogic.
	Source string
}

// SetDefaults fills in the defaults documented on each field and checks
// the configuration: a window below 2, or a Hybrid without a judge, is an
// error.
func (c *Config) SetDefaults() error {
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Window < 2 {
		return fmt.Errorf("logic: window %d: want at least 2 (the step and one step before it)", c.Window)
	}
	if c.Hybrid != nil && c.Hybrid.Judge == nil {
		return errors.New("logic: Live's hybrid verifier has no judge")
	}
	if c.Durable == "" {
		c.Durable = component.Durable(catalog.ComponentLogic, "")
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.MaxRuns <= 0 {
		c.MaxRuns = DefaultMaxRuns
	}
	if c.Source == "" {
		c.Source = catalog.ComponentLogic
	}
	c.Logger = component.Logger(c.Logger, catalog.ComponentLogic)
	return nil
}

// New returns the logic verifier that consumes and publishes on b.
func New(b *bus.Bus, cfg Config) (*Live, error) {
	if b == nil {
		return nil, errors.New("logic: New needs a bus")
	}
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	opts := b.Options()
	return &Live{
		b:      b,
		cfg:    cfg,
		runs:   map[string]*runState{},
		events: &bus.Factory{Source: cfg.Source, Clock: opts.Clock, IDs: opts.IDs},
		log:    cfg.Logger,
	}, nil
}

// Name is catalog.ComponentLogic.
func (l *Live) Name() string { return catalog.ComponentLogic }

// Consumes lists the types the catalogue says the logic verifier consumes.
func (l *Live) Consumes() []string { return catalog.ConsumedBy(catalog.ComponentLogic) }

// Produces lists the types the catalogue says the logic verifier produces.
func (l *Live) Produces() []string { return catalog.ProducedBy(catalog.ComponentLogic) }

// runState is what Live knows of one run's steps.
type runState struct {
	mu       sync.Mutex
	loaded   bool
	goal     string
	known    map[uint64]bool // stream sequences of the agent.step events folded in
	acts     []actEntry      // acting steps, by stream sequence
	maxStep  int
	maxSeq   uint64
	verdicts map[string]bool // ids of the run's logic.verdict events
	used     uint64
}

type actEntry struct {
	seq     uint64
	step    int
	action  StepAction
	thought string
}

// Run consumes agent steps until ctx ends, then drains and returns nil; an
// error means the consumer could not start. Every Run starts from an empty
// memory and rebuilds the runs it sees from the stream.
func (l *Live) Run(ctx context.Context) error {
	l.mu.Lock()
	l.runs = map[string]*runState{}
	l.mu.Unlock()
	return component.Consume(ctx, l.b, bus.ConsumerConfig{
		Durable:     l.cfg.Durable,
		Types:       []string{catalog.TypeAgentStep},
		Concurrency: l.cfg.Concurrency,
	}, l.handle)
}

// run returns the state of a run, forgetting the least recently used run
// beyond MaxRuns.
func (l *Live) run(id string) *runState {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clock++
	rs := l.runs[id]
	if rs == nil {
		if len(l.runs) >= l.cfg.MaxRuns {
			oldest, at := "", ^uint64(0)
			for k, r := range l.runs {
				if r.used < at {
					oldest, at = k, r.used
				}
			}
			delete(l.runs, oldest)
		}
		rs = &runState{}
		l.runs[id] = rs
	}
	rs.used = l.clock
	return rs
}

func (l *Live) handle(ctx context.Context, m *bus.Message) error {
	if m.Event.Type != catalog.TypeAgentStep {
		return nil
	}
	st, err := decodeStep(m.Event)
	if err != nil {
		return bus.Permanent(err)
	}
	runID := m.Event.RunID
	rs := l.run(runID)
	rs.mu.Lock()
	defer rs.mu.Unlock()

	follows := rs.known[m.Sequence] || st.Step == rs.maxStep+1 && m.Sequence > rs.maxSeq
	if !rs.loaded || !follows {
		if err := l.load(ctx, runID, rs); err != nil {
			return err // the bus failed: retry later
		}
	}
	rs.add(m.Sequence, st)

	act, ok := ParseStepAction(st)
	if !ok {
		return nil
	}
	win := rs.window(m.Sequence, l.cfg.Window-1)
	if len(win) < l.cfg.Window-1 {
		return nil
	}
	for _, e := range win[1:] {
		if !e.action.Action.Equal(win[0].action.Action) {
			return nil
		}
	}
	id := bus.DeriveID(m.Event.RunID, m.Event.ID, VerdictPurpose)
	if rs.verdicts[id] {
		return nil // judged already (redelivery, restart or replay)
	}
	lv, err := l.verdict(ctx, rs, m.Event, m.Sequence, st, act, win)
	if err != nil {
		return err
	}
	ev, err := l.events.New(runID, lv, bus.ReactionTo(m.Event, VerdictPurpose))
	if err != nil {
		return bus.Permanent(err)
	}
	if _, err := l.b.Publish(ctx, ev); err != nil {
		return err
	}
	rs.verdicts[id] = true
	l.log.Info("logic verdict", "run", runID, "step", st.Step, "thinking_eval", lv.ThinkingEval,
		"decided_by", lv.DecidedBy, "repeated_step", lv.RepeatedStep)
	return nil
}

// decodeStep decodes and checks agent.step data.
func decodeStep(ev bus.Event) (catalog.AgentStep, error) {
	p, err := catalog.Decode(ev.Type, ev.Data)
	if err != nil {
		return catalog.AgentStep{}, fmt.Errorf("logic: %w", err)
	}
	st := *p.(*catalog.AgentStep)
	if st.Step < 1 {
		return catalog.AgentStep{}, fmt.Errorf("logic: %s %s: step %d, want 1 or more", ev.Type, ev.ID, st.Step)
	}
	return st, nil
}

// load rebuilds the run's state from the stream.
func (l *Live) load(ctx context.Context, runID string, rs *runState) error {
	rs.reset()
	types := []string{catalog.TypeAgentStep, catalog.TypeLogicVerdict, catalog.TypeTaskSubmitted, catalog.TypeRunStarted}
	for rec, err := range l.b.Read(ctx, bus.ReadOptions{RunID: runID, Types: types}) {
		if err != nil {
			return fmt.Errorf("logic: rebuild run %s: %w", runID, err)
		}
		if rec.Err != nil {
			continue // dead-lettered when delivered
		}
		switch rec.Event.Type {
		case catalog.TypeAgentStep:
			if st, err := decodeStep(rec.Event); err == nil {
				rs.add(rec.Sequence, st)
			}
		case catalog.TypeLogicVerdict:
			rs.verdicts[rec.Event.ID] = true
		case catalog.TypeRunStarted:
			var v catalog.RunStarted
			if rec.Event.DecodeData(&v) == nil && v.Config.Task != "" {
				rs.goal = v.Config.Task
			}
		case catalog.TypeTaskSubmitted:
			var v catalog.TaskSubmitted
			if rec.Event.DecodeData(&v) == nil && rs.goal == "" {
				rs.goal = v.Task
			}
		}
	}
	rs.loaded = true
	l.log.Debug("run rebuilt from the stream", "run", runID, "acting_steps", len(rs.acts), "verdicts", len(rs.verdicts))
	return nil
}

// reset forgets everything but the lock and the use mark.
func (rs *runState) reset() {
	rs.loaded, rs.goal = false, ""
	rs.known, rs.verdicts = map[uint64]bool{}, map[string]bool{}
	rs.acts, rs.maxStep, rs.maxSeq = nil, 0, 0
}

// add folds an agent step in; folding one twice changes nothing.
func (rs *runState) add(seq uint64, st catalog.AgentStep) {
	if rs.known[seq] {
		return
	}
	rs.known[seq] = true
	rs.maxStep = max(rs.maxStep, st.Step)
	rs.maxSeq = max(rs.maxSeq, seq)
	act, ok := ParseStepAction(st)
	if !ok {
		return
	}
	e := actEntry{seq: seq, step: st.Step, action: act, thought: clip(strings.TrimSpace(st.Thought), maxThought)}
	i, _ := slices.BinarySearchFunc(rs.acts, seq, func(a actEntry, s uint64) int {
		switch {
		case a.seq < s:
			return -1
		case a.seq > s:
			return 1
		}
		return 0
	})
	rs.acts = slices.Insert(rs.acts, i, e)
}

// window returns the last n acting steps stored before seq, oldest first.
func (rs *runState) window(seq uint64, n int) []actEntry {
	end := len(rs.acts)
	for end > 0 && rs.acts[end-1].seq >= seq {
		end--
	}
	return rs.acts[max(0, end-n):end]
}

// maxJudgeHistory is how many acting steps before the judged one the
// judge is shown (at least the window).
const maxJudgeHistory = 6

// verdict scores the step against the repeated action of its window.
func (l *Live) verdict(ctx context.Context, rs *runState, ev bus.Event, seq uint64, st catalog.AgentStep, act StepAction, win []actEntry) (catalog.LogicVerdict, error) {
	ref := win[len(win)-1]
	f := InferenceFile{
		Snapshot: Snapshot{TaskName: fmt.Sprintf("run %s step %d", ev.RunID, st.Step), Goal: rs.goal, RepetitiveAction: ref.action.Canonical},
		Result:   Result{Thinking: st.Thought, Action: act.Canonical},
	}
	v := Verify(f)
	v.DecidedBy = DecidedByLogic
	if l.cfg.Hybrid != nil {
		var err error
		v, err = l.cfg.Hybrid.decide(ctx, v, l.liveCase(rs, seq, st, act, ref), llm.Request{
			RunID: ev.RunID, Scope: "logic", Step: st.Step, CallID: "logic-" + ev.ID, CauseID: ev.ID, Purpose: "judge",
		})
		if err != nil {
			return catalog.LogicVerdict{}, err
		}
	}

	prefix := fmt.Sprintf("the acting step before it (%s) is the reference; ", stepList(win))
	if len(win) > 1 {
		prefix = fmt.Sprintf("the %d acting steps before it (%s) took the same action; ", len(win), stepList(win))
	}
	lv := catalog.LogicVerdict{
		Step:               st.Step,
		ThinkingEval:       v.ThinkingEval,
		ActionEval:         v.ActionEval,
		ThinkingEvalReason: clip(prefix+v.ThinkingEvalReason, 1500),
		VerifierType:       catalog.VerifierLogic,
		DecidedBy:          catalog.DecidedByLogic,
		Window:             len(win),
		Action:             act.Display,
		ModelCallID:        v.ModelCallID,
	}
	if v.VerifierType == VerifierTypeHybrid {
		lv.VerifierType = catalog.VerifierHybrid
	}
	switch v.DecidedBy {
	case DecidedByLLM:
		lv.DecidedBy = catalog.DecidedByLLM
	case DecidedByLogicFallback:
		lv.DecidedBy = catalog.DecidedByLogicFallback
	}
	if v.ActionEval == ActionRepeated {
		lv.RepeatedAction = ref.action.Display
		lv.RepeatedStep = ref.step
	}
	for _, id := range v.MatchedKeywords {
		if name, ok := strings.CutPrefix(id, "pattern:"); ok {
			lv.MatchedPatterns = append(lv.MatchedPatterns, name)
		} else {
			lv.MatchedKeywords = append(lv.MatchedKeywords, id)
		}
	}
	return lv, nil
}

// liveCase is the judge's view of a live step.
func (l *Live) liveCase(rs *runState, seq uint64, st catalog.AgentStep, act StepAction, ref actEntry) judgeCase {
	hist := rs.window(seq, max(l.cfg.Window-1, maxJudgeHistory))
	var b strings.Builder
	for i, e := range hist {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "Step %d\nThinking: %s\nAction: %s", e.step, orEmpty(e.thought), e.action.Display)
	}
	return judgeCase{
		Goal:     clip(rs.goal, maxJudgeField),
		History:  b.String(),
		Repeated: ref.action.Display,
		Thinking: clip(st.Thought, maxJudgeField),
		Action:   act.Display,
	}
}

func orEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(empty)"
	}
	return s
}

// stepList names the steps of a window: "step 3", "steps 3, 5" or
// "steps 3-7".
func stepList(win []actEntry) string {
	if len(win) == 1 {
		return fmt.Sprint("step ", win[0].step)
	}
	consecutive := len(win) >= 3
	for i := 1; i < len(win); i++ {
		consecutive = consecutive && win[i].step == win[i-1].step+1
	}
	if consecutive {
		return fmt.Sprintf("steps %d-%d", win[0].step, win[len(win)-1].step)
	}
	parts := make([]string, len(win))
	for i, e := range win {
		parts[i] = fmt.Sprint(e.step)
	}
	return "steps " + strings.Join(parts, ", ")
}
