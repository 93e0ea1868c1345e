package verifyfast

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
)

// Defaults of Live.
const (
	// DefaultLiveDurable is component.Durable(catalog.ComponentVerifyFast,
	// ""): the durable consumer name bus/auth reserves for VerifyFast.
	DefaultLiveDurable     = "verifier-verifyfast"
	DefaultLiveConcurrency = 4
)

// The purposes bus.ReactionTo derives the ids of Live's events with: the
// phase-N event about answer event A of run R has id bus.DeriveID(R, A,
// "verifyfast-phase-N") (PhaseEventID) and the score bus.DeriveID(R, A,
// ScoredPurpose)
// (ScoredEventID), so an answer gets each at most once.
const (
	PhasePurposePrefix = "verifyfast-phase-"
	ScoredPurpose      = "verifyfast-scored"
)

// PhasePurpose is the purpose of the phase-p event: "verifyfast-phase-1"…
func PhasePurpose(p Phase) string { return fmt.Sprintf("%s%d", PhasePurposePrefix, int(p)) }

// PhaseEventID is the id of the vera.verifyfast.phase event of phase p
// about the answer event answerEventID of run runID.
func PhaseEventID(runID, answerEventID string, p Phase) string {
	return bus.DeriveID(runID, answerEventID, PhasePurpose(p))
}

// ScoredEventID is the id of the vera.verifyfast.scored event about the
// answer event answerEventID of run runID.
func ScoredEventID(runID, answerEventID string) string {
	return bus.DeriveID(runID, answerEventID, ScoredPurpose)
}

// Live is VerifyFast as a component on the bus: it scores an agent's
// candidate answers against the evidence they cite and publishes the phase
// results (vera.verifyfast.phase) and the score (vera.verifyfast.scored).
//
// # Which events are scored
//
// Live is the durable consumer "verifier-verifyfast" (Config.Durable) of
// vera.audit.requested and vera.run.finished, the two events the
// catalogue lists VerifyFast as a consumer of for answers (and the two
// answer_event_id may name):
//
//   - vera.audit.requested: "VerifyFast, when enabled, scores the same
//     answer" the DeepVerifier audits. Every round's candidate is scored,
//     so the dashboard sees VerifyFast's score beside the auditor's.
//   - vera.run.finished with an answer (inline or answer_blob): the final
//     answer. When the auditor is disabled the agent finishes on submit
//     without any vera.audit.requested, so this is the only event carrying
//     the answer. When the same answer (same content digest) was already
//     submitted by a vera.audit.requested of the run — the auditor kept
//     that round's answer — it is not scored a second time: its score is
//     the one of that round's event. A run.finished without an answer
//     (UNRESOLVED, FAILED) is not scored.
//
// Nothing is scored unless the run's configuration enables VerifyFast
// (RunConfig.VerifyFast.Enabled, from vera.run.started's effective config,
// else vera.task.submitted's), nor once the run was cancelled (the
// catalogue: "the verifiers drop pending work"; an audit already running
// completes).
//
// # What is audited
//
// model_output is the answer. context_input is the run's task followed by
// the evidence the answer cites, resolved from the run's stream:
//
//   - the evidence ids are vera.audit.requested's evidence_ids; when it
//     has none (and for vera.run.finished), those cited on the
//     EVIDENCE_USED line (evidence_used, then unknown_evidence) of the
//     vera.agent.step that submitted the answer: the step named by
//     candidate_step, else the last submit step whose answer is this
//     answer, else the last submit step, stored before the answer event;
//   - each id is resolved to its vera.evidence.recorded: command, exit
//     code, URLs, paths and the excerpt; when there is no excerpt but an
//     output blob, the blob's text (blobs above MaxEvidenceBlobBytes are
//     not fetched). Each output is cut to MaxEvidenceBytes and all the
//     evidence to MaxContextEvidenceBytes, saying what was left out; an
//     id with no recorded evidence is listed as not found.
//
// The format (see formatContext):
//
//	TASK:
//	<the task>
//
//	EVIDENCE CITED BY THE ANSWER (2 items from the run's evidence ledger):
//
//	[ev_0003]
//	command: curl -sL https://…
//	exit code: 0
//	urls: https://…
//	output:
//	Release Date: Oct. 7, 2024
//
//	[ev_0009]
//	not found in the run's evidence ledger
//
// An answer that cites nothing is scored against the task alone and the
// context says so ("EVIDENCE CITED BY THE ANSWER: none. …"); the model
// request events carry that text. Such answers mostly come out
// "unsupported". Notes are deliberately left out: they are the agent's own
// words, not evidence, and an answer is not supported by having been
// written down before.
//
// # The model
//
// RunConfig.VerifyFast.Model, else the verify llm of the run's profile
// (RunConfig.VerifyFast.Profile in Settings), else the agent's model
// (RunConfig.Model). Every phase calls that model (the answer was produced
// by the agent, so the whole audit is verification). Config.Models makes
// the client (once per audited answer; a Close method is called
// afterwards); the CLI injects one that publishes model I/O events. Every
// request carries RunID, Scope "verifyfast", Purpose (decompose_facts,
// fact_check, logic_check), Step (the candidate step), Round (the audit
// round, 0 for vera.run.finished), CauseID (the answer event's id, so that
// the model events are caused by it) and a CallID derived from the answer
// event, the delivery, the phase and the ask: call-verifyfast-<answer
// event id>-p2, -p2-ask2 for the re-ask, -d2-p2 on the second delivery.
// The sampling options are Config.Settings' Defaults (temperature,
// max_tokens, top_p, seed, extra_body), or the spec's 0.1 and 4000; when
// the run names its own VerifyFast model (verifyfast.model), the sampling
// settings it sets replace those. Every call requests its phase's JSON
// Schema (see Auditor). The profile resolves Config.Strategy
// (Strategy.ForProfile); an empty profile uses the strategy's defaults.
//
// # Events and idempotency
//
// For a scored answer: one vera.verifyfast.phase per phase (1: facts and
// chains; 2 and 3: the errors found — reasonable inferences are not
// errors and not listed), then vera.verifyfast.scored (the counts, the
// credit score by the deterministic formula, the zone). Their ids are
// derived from the answer event (PhaseEventID, ScoredEventID), so a
// redelivery or a replay stores each once.
//
// Before any model call Live reads what the run already holds for the
// answer: a scored event means it is done; a phase event with a
// parse_error means it failed (see below) and is done too; three phase
// events without a score (a crash between publishes) are scored from the
// errors they list, with no model call. Otherwise it audits, and
// publishes the phase events the run lacks, then the score. So deleting
// the consumer and replaying the whole stream makes no model call and
// publishes nothing new.
//
// # Failures
//
// catalog.VerifyFastScored has no way to say "not scored" (its credit
// score is 1–5), so a failed audit publishes no scored event, never a
// guessed score. When a phase's replies stay unusable after the re-ask,
// the phases that ran are published, each failed one with parse_error
// giving the reason, and the failure is logged. When a model call fails
// (unreachable, timeouts, 5xx after the client's own retries) the event is
// redelivered with the consumer's backoff; on its last delivery
// (Config.MaxDeliver) the failure is recorded the same way (parse_error
// "phase 1 (decomposition): model call failed: …") and logged, and the
// consumer goes on. An audit interrupted by shutdown is redelivered.
//
// Malformed answer events (data the catalogue's schema rejects, checked by
// component.Consume before Live sees it; data that is not the catalogue's
// type; an audit.requested without an answer; an answer blob that does not
// exist) are dead-lettered with bus.Permanent and the reason, and so is an
// answer whose model client cannot be made (Config.Models' error: a
// configuration problem). Stream read and publish errors are retried.
//
// Create it with New (Config holds its settings) and run it with Run.
type Live struct {
	b      *bus.Bus
	cfg    Config // defaults filled by New; never written afterwards
	events *bus.Factory
	log    *slog.Logger
}

var _ component.Component = (*Live)(nil)

// Config is VerifyFast's configuration as a component. The zero value
// works but for Models, which is required; SetDefaults fills the defaults
// documented on each field.
type Config struct {
	// Models returns the model client of a run's model settings (see "The
	// model" on Live); required. Live calls it once per audited answer and
	// calls the client's Close method, if it has one, when the audit is
	// done, so it should return a client of its own. Its clients should
	// record their calls on Live's bus (llmbus).
	Models component.Models
	// Strategy is strategy.yaml; it is resolved per answer for the run's
	// profile. Default (the zero value): the spec's formula.
	Strategy Strategy
	// Settings, optional, holds the profiles (settings.yaml): a run naming
	// a profile is verified by that profile's verify llm. Default nil: no
	// profiles, the spec's temperature and max_tokens.
	Settings *Settings
	// Logger defaults to slog.Default(), tagged with the component's name
	// (component.Logger).
	Logger *slog.Logger
	// Concurrency is the number of runs handled at once (the answers of one
	// run are handled in stream order); default DefaultLiveConcurrency.
	Concurrency int
	// Durable names the consumer; default DefaultLiveDurable
	// (component.Durable(catalog.ComponentVerifyFast, "")).
	Durable string
	// MaxDeliver is how many deliveries an answer gets when model calls
	// fail; default bus.DefaultMaxDeliver.
	MaxDeliver int
	// Backoff is the redelivery delay after the n-th failed delivery;
	// default (nil) bus.DefaultBackoff.
	Backoff []time.Duration
	// MaxRepairs is passed to the Auditor: how many times a phase asks
	// again after an unusable reply; default 0: once (a negative value
	// never asks again).
	MaxRepairs int
	// Source stamps the events; default catalog.ComponentVerifyFast.
	Source string
}

// SetDefaults fills in the defaults documented on each field and checks
// the configuration: Models is required.
func (c *Config) SetDefaults() error {
	if c.Models == nil {
		return errors.New("verifyfast: Config.Models is nil")
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultLiveConcurrency
	}
	if c.Durable == "" {
		c.Durable = component.Durable(catalog.ComponentVerifyFast, "")
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = bus.DefaultMaxDeliver
	}
	if c.Backoff == nil {
		c.Backoff = bus.DefaultBackoff
	}
	if c.Source == "" {
		c.Source = catalog.ComponentVerifyFast
	}
	c.Logger = component.Logger(c.Logger, catalog.ComponentVerifyFast)
	return nil
}

// New returns the VerifyFast component that consumes and publishes on b.
func New(b *bus.Bus, cfg Config) (*Live, error) {
	if b == nil {
		return nil, errors.New("verifyfast: New needs a bus")
	}
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	opts := b.Options()
	return &Live{
		b:      b,
		cfg:    cfg,
		events: &bus.Factory{Source: cfg.Source, Clock: opts.Clock, IDs: opts.IDs},
		log:    cfg.Logger,
	}, nil
}

// Name is catalog.ComponentVerifyFast.
func (l *Live) Name() string { return catalog.ComponentVerifyFast }

// Consumes lists the types the catalogue says VerifyFast consumes.
func (l *Live) Consumes() []string { return catalog.ConsumedBy(catalog.ComponentVerifyFast) }

// Produces lists the types the catalogue says VerifyFast produces.
func (l *Live) Produces() []string { return catalog.ProducedBy(catalog.ComponentVerifyFast) }

// Run consumes answer events until ctx ends, then drains and returns nil;
// an error means the consumer could not start.
func (l *Live) Run(ctx context.Context) error {
	return component.Consume(ctx, l.b, bus.ConsumerConfig{
		Durable:     l.cfg.Durable,
		Types:       []string{catalog.TypeAuditRequested, catalog.TypeRunFinished},
		Concurrency: l.cfg.Concurrency,
		MaxDeliver:  l.cfg.MaxDeliver,
		Backoff:     l.cfg.Backoff,
	}, l.handle)
}

// answer is an answer event to score.
type answer struct {
	ev     bus.Event
	seq    uint64
	final  bool // vera.run.finished (else vera.audit.requested)
	round  int
	step   int // the candidate step (0: unknown)
	inline string
	blob   *bus.BlobRef
	cites  []string // audit.requested's evidence_ids
	// fileSHA256 is the digest of the answer file, when the final answer
	// was submitted as one (it names its submit step).
	fileSHA256 string
}

// digest identifies the answer's content, inline or in a blob.
func (a *answer) digest() string { return answerDigest(a.inline, a.blob) }

func answerDigest(inline string, blob *bus.BlobRef) string {
	if inline == "" && blob != nil {
		return blob.Digest
	}
	return bus.Digest([]byte(inline))
}

// decodeAnswer returns the answer an event carries, nil when it carries
// none to score, and an error when its data is malformed.
func decodeAnswer(ev bus.Event, seq uint64) (*answer, error) {
	p, err := catalog.Decode(ev.Type, ev.Data)
	if err != nil {
		return nil, err
	}
	switch d := p.(type) {
	case *catalog.AuditRequested:
		if d.Answer == "" && d.AnswerBlob == nil && d.AnswerFile != "" {
			return nil, nil // an empty answer file: no text to score
		}
		if d.Answer == "" && d.AnswerBlob == nil {
			return nil, fmt.Errorf("%s %s: no answer (answer and answer_blob are both empty)", ev.Type, ev.ID)
		}
		return &answer{ev: ev, seq: seq, round: d.Round, step: d.CandidateStep, inline: d.Answer, blob: d.AnswerBlob, cites: d.EvidenceIDs}, nil
	case *catalog.RunFinished:
		if d.Answer == "" && d.AnswerBlob == nil {
			return nil, nil
		}
		return &answer{ev: ev, seq: seq, final: true, inline: d.Answer, blob: d.AnswerBlob, fileSHA256: d.AnswerSHA256}, nil
	}
	return nil, nil
}

func (l *Live) handle(ctx context.Context, m *bus.Message) error {
	if m.Event.Type != catalog.TypeAuditRequested && m.Event.Type != catalog.TypeRunFinished {
		return nil
	}
	ans, err := decodeAnswer(m.Event, m.Sequence)
	if err != nil {
		return bus.Permanent(err)
	}
	if ans == nil {
		return nil
	}
	runID, aid := m.Event.RunID, m.Event.ID
	log := l.log.With("run", runID, "answer_event", aid, "type", m.Event.Type)

	rv, err := l.readRun(ctx, runID, m.Sequence)
	if err != nil {
		return err // the bus failed: retry
	}
	switch {
	case rv.cfg == nil:
		log.Warn("no run configuration (vera.run.started or vera.task.submitted) on the stream; not scored")
		return nil
	case !rv.cfg.VerifyFast.Enabled:
		log.Debug("VerifyFast is disabled for the run")
		return nil
	case rv.ids[ScoredEventID(runID, aid)]:
		log.Debug("already scored")
		return nil
	}
	done := rv.phasesOf(aid)
	for _, p := range Phases() {
		if vp, ok := done[p]; ok && vp.ParseError != "" {
			log.Debug("audit failure already recorded", "phase", int(p), "parse_error", vp.ParseError)
			return nil
		}
	}
	if rv.cancelled {
		log.Info("run cancelled; answer not scored")
		return nil
	}
	if ans.final {
		if round, ok := rv.audited[ans.digest()]; ok {
			log.Debug("final answer already scored as an audit round", "round", round)
			return nil
		}
	}
	profile := rv.cfg.VerifyFast.Profile
	if len(done) == len(Phases()) {
		// Crashed between the phases and the score: score from the events.
		return l.scoreFromPhases(ctx, ans, done, log)
	}

	text, err := l.answerText(ctx, ans)
	if err != nil {
		return err
	}
	ids, from := citedIDs(ans, text, rv)
	contextInput, err := l.buildContext(ctx, rv, ids)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		log.Info("the answer cites no evidence: scoring it against the task alone")
	}
	mc, modelFrom := l.modelFor(rv.cfg, log)
	comp, err := l.cfg.Models(runID, mc)
	if errors.Is(err, llm.ErrKeyEnvNotAllowed) {
		// An API key variable this scorer's operator did not allow
		// (--allow-api-key-env): no model is called, and the answer's
		// phase 1 says why (an audit failure, so no score and no retry).
		log.Error("VerifyFast model refused; the answer is not scored", "model", mc.Name, "model_from", modelFrom, "err", err)
		vp := catalog.VerifyFastPhase{AnswerEventID: aid, Profile: profile, Phase: int(PhaseDecompose), Name: catalog.PhaseDecompose,
			ParseError: "not audited: VerifyFast refused to call its model (" + modelFrom + "): " + err.Error()}
		return l.publish(ctx, ans.ev, vp, PhasePurpose(PhaseDecompose))
	}
	if err != nil {
		return bus.Permanent(fmt.Errorf("verifyfast: model client for %s at %s: %w", mc.Name, llm.RedactURL(mc.BaseURL), err))
	}
	if comp == nil {
		return bus.Permanent(fmt.Errorf("verifyfast: no model client for %s at %s", mc.Name, llm.RedactURL(mc.BaseURL)))
	}
	if c, ok := comp.(interface{ Close() }); ok {
		defer c.Close()
	}

	gen := Generation{Temperature: DefaultTemperature, MaxTokens: DefaultMaxTokens}
	if l.cfg.Settings != nil {
		gen = l.cfg.Settings.Defaults
	}
	sampling := gen.Sampling()
	if modelFrom == modelFromRun {
		sampling = overlaySampling(sampling, llmbus.Sampling(mc))
	}
	calls := &callIDs{last: map[Phase]string{}}
	aud := &Auditor{
		Run: comp, Verify: comp,
		RunModel: mc.Name, VerifyModel: mc.Name,
		Strategy:   l.cfg.Strategy.ForProfile(profile),
		Profile:    profile,
		MaxRepairs: l.cfg.MaxRepairs,
		Sampling:   sampling,
		Annotate: func(req *llm.Request, p Phase, ask int) {
			req.RunID, req.CauseID = runID, aid
			req.Step, req.Round = ans.step, ans.round
			req.CallID = calls.set(p, CallID(aid, int(m.Delivered), p, ask))
		},
	}
	log.Info("auditing answer", "model", mc.Name, "model_from", modelFrom, "profile", profile,
		"evidence", ids, "evidence_from", from, "delivery", m.Delivered)
	res, aerr := aud.Audit(ctx, contextInput, text)
	if aerr != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("verifyfast: audit interrupted: %w", ctx.Err())
		}
		if callFailed(aerr) && m.Delivered < uint64(l.cfg.MaxDeliver) {
			log.Warn("model call failed; the answer will be redelivered", "delivery", m.Delivered, "max_deliver", l.cfg.MaxDeliver, "err", aerr)
			return aerr
		}
	}
	evs := phaseEvents(aid, profile, res, aerr, calls)
	for _, vp := range evs {
		if _, ok := done[Phase(vp.Phase)]; ok {
			continue
		}
		if err := l.publish(ctx, ans.ev, vp, PhasePurpose(Phase(vp.Phase))); err != nil {
			return err
		}
	}
	if aerr != nil {
		log.Error("VerifyFast audit failed; no score published", "model", mc.Name, "err", aerr)
		return nil
	}
	sc := catalog.VerifyFastScored{
		AnswerEventID: aid,
		Profile:       profile,
		HighCount:     res.HighCount,
		LowCount:      res.LowCount,
		CreditScore:   res.CreditScore,
		Zone:          catalog.Zone(res.Zone),
		DurationMS:    res.Duration.Milliseconds(),
	}
	if err := l.publish(ctx, ans.ev, sc, ScoredPurpose); err != nil {
		return err
	}
	log.Info("answer scored", "credit_score", sc.CreditScore, "zone", sc.Zone, "high", sc.HighCount, "low", sc.LowCount)
	return nil
}

// CallID is the call id of Live's model call for phase p, ask ask (1 for
// the first), on delivery delivery of the answer event answerEventID:
// "call-verifyfast-<id>-p<phase>", with "-d<delivery>" before the phase
// from the second delivery on and "-ask<n>" after it for re-asks. A
// redone call after a crash (same delivery count) has the same id.
func CallID(answerEventID string, delivery int, p Phase, ask int) string {
	id := "call-verifyfast-" + answerEventID
	if delivery > 1 {
		id += fmt.Sprintf("-d%d", delivery)
	}
	id += fmt.Sprintf("-p%d", int(p))
	if ask > 1 {
		id += fmt.Sprintf("-ask%d", ask)
	}
	return id
}

// callIDs remembers the last call id of each phase (phases 2 and 3 run
// concurrently).
type callIDs struct {
	mu   sync.Mutex
	last map[Phase]string
}

func (c *callIDs) set(p Phase, id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[p] = id
	return id
}

func (c *callIDs) get(p Phase) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last[p]
}

// callFailed reports whether a phase failed because a model call did.
func callFailed(err error) bool {
	for _, e := range unjoin(err) {
		var pe *PhaseError
		if errors.As(e, &pe) && pe.Call {
			return true
		}
	}
	return false
}

// phaseEvents turns an audit into phase events: one per phase that ran,
// a failed phase with its reason in parse_error.
func phaseEvents(aid, profile string, res Audit, aerr error, calls *callIDs) []catalog.VerifyFastPhase {
	var out []catalog.VerifyFastPhase
	for _, tr := range res.Phases {
		vp := catalog.VerifyFastPhase{
			AnswerEventID: aid,
			Profile:       profile,
			Phase:         int(tr.Phase),
			Name:          phaseName(tr.Phase),
			ModelCallID:   calls.get(tr.Phase),
			DurationMS:    tr.Duration.Milliseconds(),
			ParseError:    tr.Error,
		}
		if tr.Error == "" {
			switch tr.Phase {
			case PhaseDecompose:
				vp.Facts, vp.Chains = res.Decomposition.Facts, res.Decomposition.Chains
			case PhaseFactCheck:
				vp.Errors = catalogErrors(res.Findings, KindFact)
			case PhaseLogicCheck:
				vp.Errors = catalogErrors(res.Findings, KindLogic)
			}
		}
		out = append(out, vp)
	}
	if len(out) == 0 && aerr != nil {
		// The audit failed before any model call (a prompt could not be
		// rendered): record it on phase 1.
		out = append(out, catalog.VerifyFastPhase{
			AnswerEventID: aid, Profile: profile, Phase: int(PhaseDecompose),
			Name: catalog.PhaseDecompose, ParseError: aerr.Error(),
		})
	}
	return out
}

func phaseName(p Phase) catalog.VerifyFastPhaseName {
	switch p {
	case PhaseFactCheck:
		return catalog.PhaseFactCheck
	case PhaseLogicCheck:
		return catalog.PhaseLogicCheck
	}
	return catalog.PhaseDecompose
}

// catalogErrors lists the error findings of one kind as the catalogue
// writes them; reasonable inferences are not errors and are left out.
func catalogErrors(fs []Finding, kind Kind) []catalog.VerifyFastError {
	var out []catalog.VerifyFastError
	for _, f := range fs {
		if f.Kind != kind || !f.IsError() {
			continue
		}
		out = append(out, catalog.VerifyFastError{
			Kind:     catalog.ErrorKind(f.Kind),
			Level:    catalog.ErrorLevel(f.Level),
			Severity: catalog.Severity(f.Severity),
			Claim:    f.Claim,
			Quote:    f.Quote,
			Reason:   f.Reason,
		})
	}
	return out
}

// findingsOf turns the errors of published phase events back into
// findings for Score.
func findingsOf(phases map[Phase]catalog.VerifyFastPhase) []Finding {
	var out []Finding
	for _, p := range []Phase{PhaseFactCheck, PhaseLogicCheck} {
		for _, e := range phases[p].Errors {
			out = append(out, Finding{
				Kind:     Kind(e.Kind),
				Level:    ErrorLevel(e.Level),
				Severity: Severity(e.Severity),
				Claim:    e.Claim,
				Quote:    e.Quote,
				Reason:   e.Reason,
			})
		}
	}
	return out
}

// scoreFromPhases publishes the score of an answer whose three phase
// events are stored already, from the errors they list.
func (l *Live) scoreFromPhases(ctx context.Context, ans *answer, phases map[Phase]catalog.VerifyFastPhase, log *slog.Logger) error {
	profile := phases[PhaseDecompose].Profile
	score, high, low := Score(findingsOf(phases), l.cfg.Strategy.ForProfile(profile))
	sc := catalog.VerifyFastScored{
		AnswerEventID: ans.ev.ID,
		Profile:       profile,
		HighCount:     high,
		LowCount:      low,
		CreditScore:   score,
		Zone:          catalog.Zone(ZoneOf(score)),
		DurationMS:    phases[PhaseDecompose].DurationMS + max(phases[PhaseFactCheck].DurationMS, phases[PhaseLogicCheck].DurationMS),
	}
	if err := l.publish(ctx, ans.ev, sc, ScoredPurpose); err != nil {
		return err
	}
	log.Info("answer scored from its stored phase events", "credit_score", score, "zone", sc.Zone)
	return nil
}

func (l *Live) publish(ctx context.Context, cause bus.Event, p bus.Payload, purpose string) error {
	ev, err := l.events.New(cause.RunID, p, bus.ReactionTo(cause, purpose))
	if err != nil {
		return bus.Permanent(fmt.Errorf("verifyfast: build %s: %w", p.EventType(), err))
	}
	if _, err := l.b.Publish(ctx, ev); err != nil {
		return fmt.Errorf("verifyfast: %w", err)
	}
	return nil
}

// modelFromRun is where modelFor says a run's own VerifyFast model came
// from.
const modelFromRun = "verifyfast.model"

// overlaySampling returns base with the options that over sets replacing
// its own.
func overlaySampling(base, over llm.Sampling) llm.Sampling {
	if over.Temperature != nil {
		base.Temperature = over.Temperature
	}
	if over.TopP != nil {
		base.TopP = over.TopP
	}
	if over.MaxTokens > 0 {
		base.MaxTokens = over.MaxTokens
	}
	if over.Seed != nil {
		base.Seed = over.Seed
	}
	if len(over.Stop) > 0 {
		base.Stop = over.Stop
	}
	if len(over.ExtraBody) > 0 {
		base.ExtraBody = over.ExtraBody
	}
	return base
}

// modelFor picks the verification model of a run and says where it came
// from.
func (l *Live) modelFor(cfg *catalog.RunConfig, log *slog.Logger) (catalog.ModelConfig, string) {
	if m := cfg.VerifyFast.Model; m != nil {
		return *m, modelFromRun
	}
	if name := cfg.VerifyFast.Profile; name != "" {
		if l.cfg.Settings != nil {
			if p, ok := l.cfg.Settings.Profiles[name]; ok {
				if v, ok := l.cfg.Settings.LLMs[p.Verify]; ok {
					return catalog.ModelConfig{BaseURL: v.BaseURL, Name: v.Model, APIKeyEnv: v.APIKeyEnv, TimeoutMS: cfg.Model.TimeoutMS}, "profile " + name
				}
			}
		}
		log.Warn("the run's VerifyFast profile is not in the settings; verifying with the agent's model", "profile", name)
	}
	return cfg.Model, "agent model"
}
