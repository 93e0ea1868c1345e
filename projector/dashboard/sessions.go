package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
)

// Session states, in order.
const (
	StateNew       = "new"       // created on the page, no task yet
	StateSubmitted = "submitted" // vera.task.submitted, no agent yet
	StateRunning   = "running"   // vera.run.started
	StateCancelled = "cancelled" // vera.run.cancelled, not finished yet
	StateFinished  = "finished"  // vera.run.finished
)

// maxPending bounds the sessions created on the page and not started yet.
const maxPending = 1000

// maxTaskBytes bounds the task text of a run started from the page.
const maxTaskBytes = 64 << 10

// Session is one run as the session picker shows it.
type Session struct {
	RunID       string    `json:"run_id"`
	State       string    `json:"state"`
	Title       string    `json:"title,omitempty"` // the task's first 200 characters
	SubmittedBy string    `json:"submitted_by,omitempty"`
	SubmittedAt time.Time `json:"submitted_at,omitzero"`
	Outcome     string    `json:"outcome,omitempty"`
	Seq         uint64    `json:"seq,omitempty"` // stream sequence of vera.task.submitted
	// TraceID is the run's trace id (bus.TraceID in hex), a function of
	// the run id alone; TraceURL is its page in the trace UI, when the
	// dashboard has one (Options.TraceURL).
	TraceID  string `json:"trace_id"`
	TraceURL string `json:"trace_url,omitempty"`
	// ForkedFrom and ForkAtStep are set on a fork (its task's fork):
	// the run it forks and the fork point. Forks lists the runs that
	// fork this one, oldest first.
	ForkedFrom string   `json:"forked_from,omitempty"`
	ForkAtStep int      `json:"fork_at_step,omitempty"`
	Forks      []string `json:"forks,omitempty"`
	// EvalID is the eval the run belongs to (its task's label eval_id,
	// as vera eval sets it), when it does.
	EvalID  string `json:"eval_id,omitempty"`
	created time.Time
}

// SessionList is the answer of GET /api/sessions. LastSeq is the last
// stream sequence the list reflects: follow GET /api/events?after=LastSeq
// (types vera.task.submitted, vera.run.*) to hear of changes.
type SessionList struct {
	Sessions []Session `json:"sessions"`
	LastSeq  uint64    `json:"last_seq"`
}

// sessionIndex lists the runs and the evals: it folds the run-lifecycle
// and eval events of the stream (read incrementally, from the last
// sequence it saw) plus the sessions created on the page that have no
// task yet. An eval's id is the run-id segment of its events' subjects,
// but it is no run: it is listed as an eval, never as a session.
type sessionIndex struct {
	bus *bus.Bus

	mu       sync.Mutex // serialises refresh and guards the maps
	last     uint64
	loaded   bool // the history has been read once
	byRun    map[string]*Session
	pending  map[string]*Session
	starting map[string]bool // runs whose start is in flight
	evals    map[string]*evalEntry
}

// indexTypes are the event types the index folds: the run lifecycle and
// the evals'.
var indexTypes = []string{catalog.TypeTaskSubmitted, catalog.TypeRunStarted, catalog.TypeRunCancelled, catalog.TypeRunFinished,
	catalog.TypeEvalStarted, catalog.TypeEvalTaskScored, catalog.TypeEvalFinished}

func newSessionIndex(b *bus.Bus) *sessionIndex {
	return &sessionIndex{bus: b, byRun: map[string]*Session{}, pending: map[string]*Session{}, starting: map[string]bool{},
		evals: map[string]*evalEntry{}}
}

// refresh folds the lifecycle events stored since the last refresh. The
// caller holds mu, so one refresh runs at a time.
//
// The first one reads the history through one ordered consumer (fast on a
// long history; it expires bus.ReadInactiveThreshold after the read), to
// its end whether or not the request that started it stays. Later ones
// read what is new by direct gets, one per lifecycle or eval event, and
// create no consumer: no number of requests for the list adds consumers
// to the stream.
func (x *sessionIndex) refresh(ctx context.Context) error {
	recs := directRead(ctx, x.bus, "", indexTypes, x.last+1)
	if !x.loaded {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		recs = x.bus.Read(lctx, bus.ReadOptions{Types: indexTypes, FromSeq: x.last + 1})
	}
	for rec, err := range recs {
		if err != nil {
			return fmt.Errorf("list sessions: %w", err)
		}
		x.last = max(x.last, rec.Sequence)
		if rec.Err != nil {
			continue
		}
		ev := rec.Event
		if strings.HasPrefix(ev.Type, evalTypePrefix) {
			x.foldEval(rec)
			continue
		}
		s := x.byRun[ev.RunID]
		if s == nil {
			s = &Session{RunID: ev.RunID, State: StateSubmitted}
			x.byRun[ev.RunID] = s
			delete(x.pending, ev.RunID)
		}
		switch ev.Type {
		case catalog.TypeTaskSubmitted:
			if s.Seq != 0 {
				continue // a second task for the run is ignored, as the agent does
			}
			var d catalog.TaskSubmitted
			_ = ev.DecodeData(&d)
			s.Seq, s.SubmittedBy, s.SubmittedAt = rec.Sequence, d.SubmittedBy, ev.Time
			s.Title = cut(d.Task, 200)
			if d.Fork != nil && d.Fork.From != "" {
				s.ForkedFrom, s.ForkAtStep = d.Fork.From, d.Fork.AtStep
			}
			s.EvalID = d.Labels[eval.LabelEvalID]
		case catalog.TypeRunStarted:
			if s.State == StateSubmitted {
				s.State = StateRunning
			}
		case catalog.TypeRunCancelled:
			if s.State != StateFinished {
				s.State = StateCancelled
			}
		case catalog.TypeRunFinished:
			var d catalog.RunFinished
			_ = ev.DecodeData(&d)
			s.State, s.Outcome = StateFinished, string(d.Outcome)
		}
		if s.SubmittedAt.IsZero() {
			s.SubmittedAt = ev.Time
		}
	}
	x.loaded = true
	return nil
}

// list returns the pending sessions (newest first), then the runs (newest
// first). The ids of evals are not runs: they are left out, whatever
// else was published on them (a cancellation, say).
func (x *sessionIndex) list(ctx context.Context) ([]Session, uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if err := x.refresh(ctx); err != nil {
		return nil, 0, err
	}
	out := make([]Session, 0, len(x.pending)+len(x.byRun))
	for _, s := range x.pending {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Session) int { return b.created.Compare(a.created) })
	n := len(out)
	for id, s := range x.byRun {
		if _, isEval := x.evals[id]; isEval {
			continue
		}
		out = append(out, *s)
	}
	slices.SortFunc(out[n:], func(a, b Session) int {
		return cmp.Or(b.SubmittedAt.Compare(a.SubmittedAt), strings.Compare(b.RunID, a.RunID))
	})
	// Each run lists its forks (the list is newest first: walk it
	// backwards for oldest first).
	at := make(map[string]int, len(out)-n)
	for i := n; i < len(out); i++ {
		at[out[i].RunID] = i
	}
	for i := len(out) - 1; i >= n; i-- {
		if j, ok := at[out[i].ForkedFrom]; ok && out[i].ForkedFrom != "" {
			out[j].Forks = append(out[j].Forks, out[i].RunID)
		}
	}
	return out, x.last, nil
}

func cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// checkRunID accepts the ids the bus accepts: 1-128 letters, digits, '_'
// and '-' (one subject token; no dot, slash or other path syntax).
func checkRunID(id string) error {
	if err := bus.ValidateRunID(id); err != nil {
		return fmt.Errorf("bad run id: %w", err)
	}
	return nil
}

// checkULID accepts exactly a canonical ULID (26 characters of Crockford's
// base32 in upper case): the ids of sessions the dashboard makes, the only
// ones it creates directories for.
func checkULID(id string) error {
	if len(id) != 26 || id[0] > '7' {
		return fmt.Errorf("bad run id %q: runs started from the dashboard have ULID ids (create a session first)", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' && c != 'I' && c != 'L' && c != 'O' && c != 'U') {
			return fmt.Errorf("bad run id %q: runs started from the dashboard have ULID ids (create a session first)", id)
		}
	}
	return nil
}

// workDir is the run's directory, DataDir/runs/<run_id>, for a checked
// ULID. The dashboard makes nothing there: the projector and sandboxd
// make the run dir (and its work/, the sandbox's /work) when the run
// starts.
func (s *Server) workDir(runID string) (string, error) {
	if err := checkULID(runID); err != nil {
		return "", err
	}
	root := filepath.Join(s.opts.DataDir, "runs")
	dir := filepath.Join(root, runID)
	if rel, err := filepath.Rel(root, dir); err != nil || strings.HasPrefix(rel, "..") {
		return "", fmt.Errorf("bad run id %q", runID) // unreachable after checkULID
	}
	return dir, nil
}

func (s *Server) handleSessions(w http.ResponseWriter, r *http.Request) {
	list, last, err := s.sessions.list(r.Context())
	if err != nil {
		s.log.Warn("dashboard: list sessions", "err", err)
		httpError(w, http.StatusBadGateway, "list sessions: %v", err)
		return
	}
	for i := range list {
		list[i] = s.withTrace(list[i])
	}
	writeJSON(w, http.StatusOK, SessionList{Sessions: list, LastSeq: last})
}

// handleNewSession makes a run id (a ULID from the bus's id source); the
// session is listed until a task is started on it.
func (s *Server) handleNewSession(w http.ResponseWriter, r *http.Request) {
	id := s.events.IDs.NewID(s.events.Clock.Now())
	x := s.sessions
	x.mu.Lock()
	if len(x.pending) >= maxPending {
		var oldest *Session
		for _, p := range x.pending {
			if oldest == nil || p.created.Before(oldest.created) {
				oldest = p
			}
		}
		delete(x.pending, oldest.RunID)
	}
	sess := &Session{RunID: id, State: StateNew, created: time.Now()}
	x.pending[id] = sess
	x.mu.Unlock()
	s.log.Info("dashboard: new session", "run", id)
	writeJSON(w, http.StatusCreated, s.withTrace(*sess))
}

// StartRequest is the body of POST /api/runs/{id}/start.
type StartRequest struct {
	Task     string `json:"task"`
	MaxSteps *int   `json:"max_steps,omitempty"` // nil: the template's
	// Model overrides the template's model settings (the endpoint and
	// model stay the template's); nil: the template's.
	Model *ModelSettings `json:"model,omitempty"`
}

// ModelSettings are the agent's model settings a run started from the
// page may choose (catalog.ModelConfig's members of the same names); an
// absent member keeps the template's.
type ModelSettings struct {
	ToolProtocol catalog.ToolProtocol `json:"tool_protocol,omitempty"`
	Temperature  *float64             `json:"temperature,omitempty"`
	TopP         *float64             `json:"top_p,omitempty"`
	MaxTokens    *int                 `json:"max_tokens,omitempty"`
	Seed         *int64               `json:"seed,omitempty"`
	Stream       *bool                `json:"stream,omitempty"`
}

// apply sets the given settings on mc and checks the result.
func (m *ModelSettings) apply(mc *catalog.ModelConfig) error {
	if m == nil {
		return nil
	}
	if m.ToolProtocol != "" {
		mc.ToolProtocol = m.ToolProtocol
	}
	if m.Temperature != nil {
		mc.Temperature = m.Temperature
	}
	if m.TopP != nil {
		mc.TopP = m.TopP
	}
	if m.MaxTokens != nil {
		mc.MaxTokens = *m.MaxTokens
	}
	if m.Seed != nil {
		mc.Seed = m.Seed
	}
	if m.Stream != nil {
		mc.Stream = m.Stream
	}
	if err := mc.ValidateSampling(); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	return nil
}

// settingsOf are the settings of mc the page may override.
func settingsOf(mc catalog.ModelConfig) ModelSettings {
	s := ModelSettings{ToolProtocol: mc.ToolProtocol, Temperature: mc.Temperature, TopP: mc.TopP, Seed: mc.Seed, Stream: mc.Stream}
	if mc.MaxTokens > 0 {
		s.MaxTokens = &mc.MaxTokens
	}
	return s
}

// StartResponse answers a started run.
type StartResponse struct {
	RunID   string `json:"run_id"`
	EventID string `json:"event_id"`
	Seq     uint64 `json:"seq"`
}

// handleStart publishes vera.task.submitted for a session once: the
// prompt locks after start. A second start, or a start on a run that
// already has a task, is 409; two racing starts are decided by the stream
// (a publish expecting no earlier vera.task.submitted on the run).
func (s *Server) handleStart(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	dir, err := s.workDir(id)
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		httpError(w, http.StatusUnsupportedMediaType, "send the request as application/json")
		return
	}
	var req StartRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "bad request body: %v", err)
		return
	}
	req.Task = strings.TrimSpace(req.Task)
	switch {
	case req.Task == "":
		httpError(w, http.StatusBadRequest, "the task is empty")
		return
	case len(req.Task) > maxTaskBytes:
		httpError(w, http.StatusRequestEntityTooLarge, "the task is longer than %d bytes", maxTaskBytes)
		return
	case !utf8.ValidString(req.Task):
		httpError(w, http.StatusBadRequest, "the task is not valid UTF-8")
		return
	case req.MaxSteps != nil && *req.MaxSteps < 0:
		httpError(w, http.StatusBadRequest, "max_steps must be 0 (unlimited) or more")
		return
	}
	model := s.opts.Template.Model
	if err := req.Model.apply(&model); err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}

	x := s.sessions
	x.mu.Lock()
	busy := x.starting[id]
	x.starting[id] = true
	x.mu.Unlock()
	if busy {
		httpError(w, http.StatusConflict, "run %s is being started", id)
		return
	}
	defer func() {
		x.mu.Lock()
		delete(x.starting, id)
		x.mu.Unlock()
	}()

	ctx := r.Context()
	subject, err := bus.Subject(id, catalog.TypeTaskSubmitted)
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if seq, err := s.opts.Bus.LastSequence(ctx, subject); err != nil {
		httpError(w, http.StatusBadGateway, "%v", err)
		return
	} else if seq != 0 {
		httpError(w, http.StatusConflict, "run %s has already started: its task is locked", id)
		return
	}
	cfg := s.opts.Template
	cfg.Task, cfg.WorkDir, cfg.Model = req.Task, dir, model
	if req.MaxSteps != nil {
		cfg.MaxSteps = *req.MaxSteps
	}
	ev, err := s.events.New(id, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: catalog.ComponentDashboard})
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ack, err := s.opts.Bus.Publish(ctx, ev, bus.ExpectLastSequence("", 0))
	switch {
	case errors.Is(err, bus.ErrConflict):
		httpError(w, http.StatusConflict, "run %s has already started: its task is locked", id)
		return
	case err != nil:
		s.log.Error("dashboard: publish task", "run", id, "err", err)
		httpError(w, http.StatusBadGateway, "publish the task: %v", err)
		return
	}
	x.mu.Lock()
	delete(x.pending, id)
	x.mu.Unlock()
	s.log.Info("dashboard: run started", "run", id, "seq", ack.Sequence, "work_dir", dir)
	writeJSON(w, http.StatusCreated, StartResponse{RunID: id, EventID: ev.ID, Seq: ack.Sequence})
}

// CancelRequest is the (optional) body of POST /api/runs/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// handleCancel publishes vera.run.cancelled for a run that has a task and
// has not finished.
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkRunID(id); err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	var req CancelRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		httpError(w, http.StatusBadRequest, "bad request body: %v", err)
		return
	}
	ctx := r.Context()
	x := s.sessions
	x.mu.Lock()
	err := x.refresh(ctx)
	var state string
	if sess := x.byRun[id]; sess != nil && sess.Seq != 0 {
		state = sess.State
	}
	x.mu.Unlock()
	switch {
	case err != nil:
		httpError(w, http.StatusBadGateway, "%v", err)
		return
	case state == "":
		httpError(w, http.StatusNotFound, "run %s has no task", id)
		return
	case state == StateFinished:
		httpError(w, http.StatusConflict, "run %s has finished", id)
		return
	}
	ev, err := s.events.New(id, catalog.RunCancelled{RequestedBy: catalog.ComponentDashboard, Reason: cut(req.Reason, 2000)})
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ack, err := s.opts.Bus.Publish(ctx, ev)
	if err != nil {
		httpError(w, http.StatusBadGateway, "publish the cancellation: %v", err)
		return
	}
	writeJSON(w, http.StatusAccepted, StartResponse{RunID: id, EventID: ev.ID, Seq: ack.Sequence})
}

// Config is what GET /api/config tells the page.
type Config struct {
	Model      string `json:"model,omitempty"`
	MaxSteps   int    `json:"max_steps"`
	Auditor    bool   `json:"auditor"`
	VerifyFast bool   `json:"verifyfast"`
	Network    bool   `json:"network"`
	Metrics    bool   `json:"metrics"`
	TokenFile  string `json:"token_file"`
	// ModelSettings are the template's model settings (what a run gets
	// when the page leaves them alone).
	ModelSettings ModelSettings `json:"model_settings"`
}

func (s *Server) handleConfig(w http.ResponseWriter, _ *http.Request) {
	t := s.opts.Template
	writeJSON(w, http.StatusOK, Config{
		Model: t.Model.Name, MaxSteps: t.MaxSteps, Auditor: t.Auditor.Enabled, VerifyFast: t.VerifyFast.Enabled,
		Network: t.Sandbox.Network, Metrics: s.opts.Metrics != nil, TokenFile: s.tokenFile, ModelSettings: settingsOf(t.Model),
	})
}
