package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// Labels set on the vera.task.submitted of a replay run.
const (
	LabelReplayOf   = "replay_of"
	LabelReplayMode = "replay_mode"
)

// SourceReplay stamps the events `vera replay` itself adds to a replay
// run (the audit requests of a recording made before the audit loop).
const SourceReplay = "replay"

// NewRunID returns a fresh run id (a ULID).
func NewRunID() string { return bus.NewULIDSource(nil).NewID(time.Now()) }

// copySpec says how a recorded run becomes a new run.
type copySpec struct {
	NewRun  string
	WorkDir string            // "" keeps the recorded one
	Labels  map[string]string // added to vera.task.submitted
	// Keep reports whether an event of the recording is copied.
	Keep func(ev *bus.Event) bool
	// After returns events (payloads, in the new run) to add after a
	// copied event.
	After func(ev *bus.Event) []bus.Payload
	// Defer reports whether a kept event is held back: copyRun returns it
	// (remapped) instead of storing it.
	Defer func(ev *bus.Event) bool
}

// mapID is the id of an event's copy in run newRun.
func mapID(id, newRun string) string { return bus.DeriveID(newRun, id, "replay") }

// copyRun copies run runID of src into spec.NewRun on dst: events in
// stream order, ids derived from the originals, causes remapped, times
// and sources kept, blobs copied. It returns the events stored and those
// held back (spec.Defer).
func copyRun(ctx context.Context, src *bus.Bus, runID string, dst *bus.Bus, spec copySpec) (copied, deferred []bus.Event, err error) {
	var exp bytes.Buffer
	if _, err := src.Export(ctx, &exp, bus.ExportOptions{RunID: runID}); err != nil {
		return nil, nil, fmt.Errorf("read recorded run %s: %w", runID, err)
	}
	var out bytes.Buffer
	emit := func(ev bus.Event) error {
		raw, err := ev.Marshal()
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", ev.Type, ev.ID, err)
		}
		out.Write(raw)
		out.WriteByte('\n')
		if ev.Type != bus.BlobType {
			copied = append(copied, ev)
		}
		return nil
	}
	extra := 0
	handle := func(line []byte) error {
		ev, err := bus.ParseEvent(line)
		if err != nil {
			return fmt.Errorf("recorded run %s: %w", runID, err)
		}
		if ev.Type == bus.BlobType {
			out.Write(line) // the import stores the bytes; the line is never an event
			out.WriteByte('\n')
			return nil
		}
		if spec.Keep != nil && !spec.Keep(&ev) {
			return nil
		}
		orig := ev
		if err := remap(&ev, spec); err != nil {
			return err
		}
		if spec.Defer != nil && spec.Defer(&ev) {
			deferred = append(deferred, ev)
			return nil
		}
		if err := emit(ev); err != nil {
			return err
		}
		if spec.After == nil {
			return nil
		}
		for _, p := range spec.After(&orig) {
			extra++
			data, err := json.Marshal(p)
			if err != nil {
				return err
			}
			add := bus.Event{SpecVersion: bus.SpecVersion, ID: bus.DeriveID(spec.NewRun, ev.ID, fmt.Sprintf("replay/%s/%d", p.EventType(), extra)),
				Source: SourceReplay, Type: p.EventType(), Subject: spec.NewRun, RunID: spec.NewRun, Time: ev.Time,
				DataContentType: bus.ContentTypeJSON, DataSchema: bus.DataSchemaOf(p.EventType()),
				Traceparent: bus.Traceparent(spec.NewRun), Data: data, CausationID: ev.ID}
			if err := emit(add); err != nil {
				return err
			}
		}
		return nil
	}
	br := bufio.NewReaderSize(&exp, 1<<20)
	for {
		line, rerr := br.ReadBytes('\n')
		if line = bytes.TrimSpace(line); len(line) > 0 {
			if err := handle(line); err != nil {
				return nil, nil, err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, nil, rerr
		}
	}
	st, err := dst.Import(ctx, &out, bus.ImportOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("store replay run %s: %w", spec.NewRun, err)
	}
	if len(st.Bad) > 0 {
		return nil, nil, fmt.Errorf("store replay run %s: %v", spec.NewRun, st.Bad[0])
	}
	return copied, deferred, nil
}

// remap moves ev into the new run.
func remap(ev *bus.Event, spec copySpec) error {
	ev.ID = mapID(ev.ID, spec.NewRun)
	if ev.CausationID != "" {
		ev.CausationID = mapID(ev.CausationID, spec.NewRun)
	}
	if ev.Traceparent != "" && ev.Traceparent == bus.Traceparent(ev.RunID) {
		// In the recorded run's trace: the copy is in the new run's.
		ev.Traceparent = bus.Traceparent(spec.NewRun)
	}
	ev.RunID, ev.Subject = spec.NewRun, spec.NewRun
	switch ev.Type {
	case catalog.TypeTaskSubmitted:
		var d catalog.TaskSubmitted
		if err := ev.DecodeData(&d); err != nil {
			return fmt.Errorf("recorded task: %w", err)
		}
		if spec.WorkDir != "" {
			d.WorkDir = spec.WorkDir
		}
		if len(spec.Labels) > 0 {
			if d.Labels == nil {
				d.Labels = map[string]string{}
			}
			maps.Copy(d.Labels, spec.Labels)
		}
		return setData(ev, d)
	case catalog.TypeRunStarted:
		var d catalog.RunStarted
		if err := ev.DecodeData(&d); err != nil {
			return fmt.Errorf("recorded run.started: %w", err)
		}
		if spec.WorkDir != "" {
			d.Config.WorkDir = spec.WorkDir
		}
		return setData(ev, d)
	}
	return nil
}

func setData(ev *bus.Event, p any) error {
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	ev.Data = data
	return nil
}

// verifierOutput reports whether ev was produced by a verifier (or for
// one: the auditor's commands and their container), tracking the
// auditor's request ids in auditorReqs.
func verifierOutput(ev *bus.Event, auditorReqs map[string]bool) bool {
	area, _, _ := catalog.SplitType(ev.Type)
	switch {
	case area == "logic" || area == "verifyfast":
		return true
	case area == "audit":
		return ev.Type != catalog.TypeAuditRequested
	case ev.Type == catalog.TypeModelRequested || ev.Type == catalog.TypeModelResponded:
		var d struct {
			Scope string `json:"scope"`
		}
		return ev.DecodeData(&d) == nil && d.Scope != string(catalog.ScopeAgent)
	case ev.Type == catalog.TypeToolRequested:
		var d catalog.ToolRequested
		if ev.DecodeData(&d) == nil && d.Requester == catalog.RequesterAuditor {
			auditorReqs[d.RequestID] = true
			return true
		}
	case ev.Type == catalog.TypeToolStarted || ev.Type == catalog.TypeToolFinished:
		var d struct {
			RequestID string `json:"request_id"`
		}
		return ev.DecodeData(&d) == nil && auditorReqs[d.RequestID]
	case area == "container":
		var d struct {
			Container string `json:"container"`
		}
		return ev.DecodeData(&d) == nil && strings.HasSuffix(d.Container, "-auditor")
	}
	return false
}
