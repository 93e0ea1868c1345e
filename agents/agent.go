package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/vera-run/vera/agents/ledger"
	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/llm"
)

// Defaults of Agent.
const (
	DefaultDurable       = "agent" // component.Durable(catalog.ComponentAgent, "")
	DefaultToolTimeoutMS = 900_000
	// DefaultAuditRounds and DefaultAuditStopScore fill the effective
	// auditor settings of a run that enables the auditor without them
	// (the DeepVerifier defaults: 3 rounds, stop at a score of 3).
	DefaultAuditRounds    = 3
	DefaultAuditStopScore = 3
	// maxConflicts bounds how often one delivery re-reads a run after
	// losing a fencing race before it gives up (and is redelivered).
	maxConflicts = 32
)

// Types the agent consumes.
var consumedTypes = []string{
	catalog.TypeTaskSubmitted,
	catalog.TypeToolFinished,
	catalog.TypeLogicVerdict,
	catalog.TypeAuditFeedback,
}

// errRunCancelled is the cause of an Advance interrupted by
// vera.run.cancelled.
var errRunCancelled = errors.New("run cancelled")

// Config is the agent's configuration. The zero value works but for
// Models, which is required. SetDefaults fills the rest.
type Config struct {
	// Models returns the model client of a run's model settings. The
	// client should record its calls on the bus (llmbus.BusRecorder):
	// a recorded response is what lets a restarted agent reuse a reply
	// instead of calling the model again. Clients are kept per settings
	// and shared by the runs that use them.
	Models component.Models
	// Deltas, when set, returns where the pieces of a step's reply go as
	// they stream in (llm.Request.OnDelta), for live display only: the
	// record is vera.model.responded. A nil result means none. The
	// agent calls it with an empty Delta when the call is over.
	Deltas func(runID string, step int, callID string) func(llm.Delta)
	// Policy is the base policy; the run's PolicyConfig overrides it.
	// Zero limits mean ledger's defaults.
	Policy ledger.Policy
	// Logger defaults to slog.Default() (component.Logger).
	Logger *slog.Logger
	// ID names this instance in vera.run.started (agent_id); default
	// "agent".
	ID string
	// Version is stamped into vera.run.started.
	Version string
	// Durable is the durable consumer name; default
	// component.Durable(catalog.ComponentAgent, "") ("agent"). Instances
	// sharing it share the work; instances with different names each see
	// every event and are kept apart by the fence alone.
	Durable string
	// Concurrency is the number of runs advanced at once; default 4.
	Concurrency int
	// AckWait is the consumer's ack wait (a delivery whose worker vanished
	// comes back after it); default bus.DefaultAckWait.
	AckWait time.Duration
	// Backoff is the consumer's redelivery backoff; default bus.DefaultBackoff.
	Backoff []time.Duration
	// DrainTimeout bounds in-flight work after ctx ends; default 10s.
	DrainTimeout time.Duration
	// Context bounds the action tail of the prompts.
	Context protocol.Options
}

// SetDefaults fills in the defaults documented on each field and checks
// the configuration.
func (c *Config) SetDefaults() error {
	if c.Models == nil {
		return errors.New("agents: Config.Models is nil")
	}
	if c.ID == "" {
		c.ID = "agent"
	}
	if c.Durable == "" {
		c.Durable = DefaultDurable
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 10 * time.Second
	}
	c.Logger = component.Logger(c.Logger, catalog.ComponentAgent)
	return nil
}

// Agent is the VERA research agent as a bus consumer. It keeps no state
// between deliveries: every delivery rebuilds its run from the stream and
// takes the next decision (see the package documentation).
type Agent struct {
	// Bus is the connection the agent reads and publishes on. Its event
	// factory stamps the source (catalog.ComponentAgent, "agent": the
	// name of its identity on the bus).
	Bus *bus.Bus
	cfg Config

	// afterModel, when set (tests), is called after a model call returned
	// and before its step is published; an error aborts the delivery as
	// if the process died there.
	afterModel func(runID string, step int) error
	// beforeLedger, when set (tests), is called after a result's evidence
	// was published and before its ledger lines are.
	beforeLedger func(runID, requestID string)

	mu      sync.Mutex
	clients map[string]llm.Completer // by ModelConfig.ClientKey
	runs    map[string]*runEntry     // guarded by mu
}

var _ component.Component = (*Agent)(nil)

// New returns the agent that consumes and publishes on b.
func New(b *bus.Bus, cfg Config) (*Agent, error) {
	if b == nil {
		return nil, errors.New("agents: New needs a bus")
	}
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	return &Agent{Bus: b, cfg: cfg}, nil
}

// Name is catalog.ComponentAgent.
func (a *Agent) Name() string { return catalog.ComponentAgent }

// Consumes lists the types the catalogue says the agent consumes.
func (a *Agent) Consumes() []string { return catalog.ConsumedBy(catalog.ComponentAgent) }

// Produces lists the types the catalogue says the agent produces.
func (a *Agent) Produces() []string { return catalog.ProducedBy(catalog.ComponentAgent) }

func (a *Agent) log() *slog.Logger { return a.cfg.Logger }

// Run consumes vera.task.submitted, vera.tool.finished, vera.logic.verdict
// and vera.audit.feedback with the durable consumer until ctx ends, and
// advances the run of every event it receives. It also follows
// vera.run.cancelled: a cancellation interrupts the run's model call in
// flight.
func (a *Agent) Run(ctx context.Context) error {
	cfg := bus.ConsumerConfig{
		Durable:      a.cfg.Durable,
		Types:        consumedTypes,
		Concurrency:  a.cfg.Concurrency,
		AckWait:      a.cfg.AckWait,
		Backoff:      a.cfg.Backoff,
		DrainTimeout: a.cfg.DrainTimeout,
	}
	// vera.run.cancelled is followed apart from the consumer, whose
	// deliveries of one run wait for each other: it must reach the
	// delivery in progress.
	fctx, stopFollow := context.WithCancel(ctx)
	followed := make(chan struct{})
	go func() {
		defer close(followed)
		a.followCancels(fctx)
	}()
	defer func() { stopFollow(); <-followed }()
	return a.Bus.Consume(ctx, cfg, component.CheckedWith(func(hctx context.Context, m *bus.Message) error {
		return a.Advance(hctx, m.Event.RunID)
	}, a.rejected))
}

// rejected finishes, FAILED, a run whose vera.task.submitted the
// catalogue's schema rejects (component.CheckedWith dead-letters the event
// itself): whoever follows the run learns why it never started. A run
// that has started or finished already is left alone: a second, bad
// submission must not end a good run.
func (a *Agent) rejected(ctx context.Context, m *bus.Message, reason error) error {
	if m.Event.Type != catalog.TypeTaskSubmitted {
		return nil
	}
	for rec, err := range a.Bus.Read(ctx, bus.ReadOptions{RunID: m.Event.RunID, Types: []string{catalog.TypeRunStarted, catalog.TypeRunFinished}}) {
		if err != nil {
			return err
		}
		_ = rec
		return nil
	}
	p := catalog.RunFinished{Outcome: catalog.OutcomeFailed, Reason: "task refused: " + reason.Error()}
	ev, err := a.Bus.Events.New(m.Event.RunID, p, bus.ReactionTo(m.Event, "agent/rejected"))
	if err != nil {
		return err
	}
	_, err = a.Bus.Publish(ctx, ev)
	return err
}

// Advance takes every decision run runID is ready for, then returns: when
// the run waits for a tool result, or is finished. A lost fencing race
// (another worker decided first) is followed by a re-read, which finds the
// work done. Deliveries of one run are advanced one at a time by an Agent
// (see runEntry).
func (a *Agent) Advance(ctx context.Context, runID string) error {
	e, err := a.acquire(ctx, runID)
	if err != nil {
		return err
	}
	defer a.release(runID, e)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	a.mu.Lock()
	e.cancel = cancel // for interrupt
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		e.cancel = nil
		a.mu.Unlock()
	}()
	e.stale = true // the delivery says something was stored
	conflicts := 0
	for {
		done, err := a.next(ctx, e, runID)
		switch {
		case errors.Is(err, bus.ErrConflict):
			e.stale = true // read what the other writer stored
			conflicts++
			if conflicts > maxConflicts {
				return fmt.Errorf("run %s: %w (gave up after %d re-reads)", runID, err, conflicts)
			}
			a.log().Debug("fenced out; re-reading", "run", runID, "err", err)
			continue
		case err != nil:
			e.view = nil
			if errors.Is(context.Cause(ctx), errRunCancelled) {
				return nil // nothing more is decided for a cancelled run
			}
			return err
		case done:
			return nil
		}
		if ctx.Err() != nil {
			if errors.Is(context.Cause(ctx), errRunCancelled) {
				return nil
			}
			return ctx.Err()
		}
	}
}

// followCancels interrupts the run of every vera.run.cancelled stored
// from now on until ctx ends (a run cancelled earlier is not advanced:
// its view says so).
func (a *Agent) followCancels(ctx context.Context) {
	for {
		for rec, err := range a.Bus.Read(ctx, bus.ReadOptions{Types: []string{catalog.TypeRunCancelled}, Follow: true, OnlyNew: true}) {
			if err != nil {
				a.log().Warn("following run cancellations", "err", err)
				break
			}
			if rec.Err == nil {
				a.interrupt(rec.Event.RunID)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// interrupt cancels the Advance in progress for run runID, if any: its
// model call ends at once (the run was cancelled; the delivery of
// vera.run.cancelled then finds nothing more to decide).
func (a *Agent) interrupt(runID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e := a.runs[runID]; e != nil && e.cancel != nil {
		e.cancel(errRunCancelled)
	}
}

// publish stores one event built for run v unless the run already holds
// an event with its id.
//
// Without options it is fenced on the run at the last sequence v holds
// (RunFilter): every decision and follow-up is. When v is exact (not
// dirty), a publish that stores a new event is then applied to v as if
// read back (encoded and decoded): v stays exactly the stream's run
// without a re-read, since nothing else of the run was stored between
// v.lastSeq and the event. Any other
// publish (fenced otherwise, or a duplicate of an event stored earlier)
// marks v dirty: the next decision re-reads the run. A lost race returns
// bus.ErrConflict; the caller re-reads and decides again, and skips what
// the other writer stored.
func (a *Agent) publish(ctx context.Context, v *runView, p bus.Payload, id, cause string, opts ...bus.PublishOption) error {
	if v.ids[id] || v.sent[id] {
		return nil
	}
	ev, err := a.Bus.Events.New(v.runID, p, bus.WithID(id), func(e *bus.Event) { e.CausationID = cause })
	if err != nil {
		return fmt.Errorf("build %s: %w", p.EventType(), err)
	}
	onRun := len(opts) == 0
	if onRun {
		opts = []bus.PublishOption{a.fence(v)}
	}
	ack, err := a.Bus.Publish(ctx, ev, opts...)
	if err != nil {
		return fmt.Errorf("publish %s for run %s: %w", p.EventType(), v.runID, err)
	}
	if onRun && !v.dirty && !ack.Duplicate && ack.Sequence > v.lastSeq && v.applyOwn(ev, ack.Sequence) {
		return nil
	}
	if v.sent == nil {
		v.sent = map[string]bool{}
	}
	v.sent[id] = true
	v.dirty = true
	return nil
}

func (a *Agent) fence(v *runView) bus.PublishOption {
	return bus.ExpectLastSequence(RunFilter(v.runID), v.lastSeq)
}

// RunFilter is the subject filter the agent's decisions of run runID are
// fenced on: vera.run.<run_id>.>, the whole run. A decision (a step, the
// end of the run for the budget or a model failure) is published with the
// sequence of the last event the agent read, so it lands only if nothing
// was stored since: not another worker's decision, and not an event that
// would have changed it (a late verdict). The loser re-reads and decides
// again from the longer history.
func RunFilter(runID string) string { return bus.SubjectRoot + "." + runID + ".>" }

// CallID returns the model call id of an agent step: agent-s0007.
func CallID(step int) string { return fmt.Sprintf("agent-s%04d", step) }

// RequestID returns the tool request id of an agent step: req-s0007.
func RequestID(step int) string { return fmt.Sprintf("req-s%04d", step) }

// answerReadSuffix ends the request id of an answer file's read.
const answerReadSuffix = "-answer"

// AnswerRequestID returns the id of the request that reads the answer
// file of the submit of an agent step: req-s0007-answer.
func AnswerRequestID(step int) string { return RequestID(step) + answerReadSuffix }

// IsAnswerRead reports whether an agent request id is an answer file's
// read.
func IsAnswerRead(requestID string) bool { return strings.HasSuffix(requestID, answerReadSuffix) }
