package dashboard

import (
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/forkspec"
)

// Bounds of a fork request's free text.
const (
	maxForkNote  = 2000
	maxModelName = 256
)

// ForkRequest is the body of POST /api/runs/{id}/fork: fork the run at
// a step (see internal/forkspec). An absent member keeps the original's
// setting.
type ForkRequest struct {
	AtStep       *int                 `json:"at_step"` // required: steps of the original reproduced
	Model        string               `json:"model,omitempty"`
	ToolProtocol catalog.ToolProtocol `json:"tool_protocol,omitempty"`
	Auditor      *bool                `json:"auditor,omitempty"`
	AuditRounds  *int                 `json:"audit_rounds,omitempty"`
	Note         string               `json:"note,omitempty"`
}

// ForkResponse answers a fork: the new run and where it forks from.
type ForkResponse struct {
	StartResponse
	ForkedFrom string `json:"forked_from"`
	AtStep     int    `json:"at_step"`
	WorkDir    string `json:"work_dir"`
}

// handleFork starts a fork of run {id}: it reads the original's
// vera.run.started, checks the fork point as `vera fork` does, and
// publishes vera.task.submitted on a new run (a ULID; its work dir is
// DataDir/runs/<new id>/work) with fork set and the labels forked_from
// and fork_at_step. 404: no such run; 409: it has not started; 400: a bad
// fork point or setting.
func (s *Server) handleFork(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkRunID(id); err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		httpError(w, http.StatusUnsupportedMediaType, "send the request as application/json")
		return
	}
	var req ForkRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "bad request body: %v", err)
		return
	}
	req.Model, req.Note = strings.TrimSpace(req.Model), strings.TrimSpace(req.Note)
	switch {
	case req.AtStep == nil:
		httpError(w, http.StatusBadRequest, "at_step is required: how many of the run's steps the fork reproduces")
		return
	case len(req.Model) > maxModelName || !utf8.ValidString(req.Model) || strings.ContainsAny(req.Model, "\n\r\t"):
		httpError(w, http.StatusBadRequest, "model: want a model name of at most %d characters on one line", maxModelName)
		return
	case len(req.Note) > maxForkNote || !utf8.ValidString(req.Note):
		httpError(w, http.StatusBadRequest, "note: want at most %d bytes of UTF-8 text", maxForkNote)
		return
	}
	ctx := r.Context()
	orig, err := forkspec.Read(ctx, s.opts.Bus, id)
	switch {
	case errors.Is(err, forkspec.ErrUnknownRun):
		httpError(w, http.StatusNotFound, "%v", err)
		return
	case errors.Is(err, forkspec.ErrNotStarted):
		httpError(w, http.StatusConflict, "%v", err)
		return
	case errors.Is(err, forkspec.ErrInvalid):
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	case err != nil:
		httpError(w, http.StatusBadGateway, "%v", err)
		return
	}
	newID := s.events.IDs.NewID(s.events.Clock.Now())
	dir, err := s.workDir(newID)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	sub, err := forkspec.Build(orig, forkspec.Spec{
		AtStep: *req.AtStep, Note: req.Note, WorkDir: dir, SubmittedBy: catalog.ComponentDashboard,
		Overrides: forkspec.Overrides{Model: req.Model, ToolProtocol: req.ToolProtocol, Auditor: req.Auditor, AuditRounds: req.AuditRounds},
	})
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ev, err := s.events.New(newID, sub)
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	ack, err := s.opts.Bus.Publish(ctx, ev, bus.ExpectLastSequence(bus.SubjectRoot+"."+newID+".>", 0))
	if err != nil {
		s.log.Error("dashboard: publish fork", "run", newID, "from", id, "err", err)
		httpError(w, http.StatusBadGateway, "publish the fork's task: %v", err)
		return
	}
	s.log.Info("dashboard: fork started", "run", newID, "from", id, "at_step", *req.AtStep, "seq", ack.Sequence)
	writeJSON(w, http.StatusCreated, ForkResponse{
		StartResponse: StartResponse{RunID: newID, EventID: ev.ID, Seq: ack.Sequence},
		ForkedFrom:    id, AtStep: *req.AtStep, WorkDir: dir,
	})
}
