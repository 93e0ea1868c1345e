package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/internal/live"
)

// writeTimeout bounds one write to an SSE client: a client that stops
// reading is dropped instead of holding its goroutine.
const writeTimeout = 30 * time.Second

// maxTypes bounds the types= filters of one stream.
const maxTypes = 32

// streamSpec is what one SSE stream delivers.
type streamSpec struct {
	runID   string
	types   []string
	filters []string // NATS subject filters of runID and types
	after   uint64   // last sequence the client has (Last-Event-ID)
	// live forwards the run's live model pieces (live=1 on a run's
	// stream) as SSE events named "live".
	live bool
}

// liveQueue bounds the live pieces waiting for one client; more are
// dropped (live pieces are lossy by design: the record is
// vera.model.responded).
const liveQueue = 256

func (s *Server) handleRunEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := checkRunID(id); err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	s.serveStream(w, r, id)
}

func (s *Server) handleAllEvents(w http.ResponseWriter, r *http.Request) {
	s.serveStream(w, r, "")
}

func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, runID string) {
	spec, err := parseStreamSpec(r, runID)
	if err != nil {
		httpError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if n := s.streams.Add(1); n > int64(s.opts.MaxStreams) {
		s.streams.Add(-1)
		w.Header().Set("Retry-After", "5")
		httpError(w, http.StatusServiceUnavailable, "the dashboard serves %d live streams at most; try again shortly", s.opts.MaxStreams)
		return
	}
	defer s.streams.Add(-1)
	s.stream(w, r, spec)
}

// parseStreamSpec reads types= (repeated or comma-separated type patterns
// such as vera.model.* ) and the resume point: the Last-Event-ID header
// (what EventSource sends on reconnect) or the after= parameter.
func parseStreamSpec(r *http.Request, runID string) (streamSpec, error) {
	spec := streamSpec{runID: runID}
	for _, v := range r.URL.Query()["types"] {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				spec.types = append(spec.types, t)
			}
		}
	}
	if len(spec.types) > maxTypes {
		return spec, errors.New("too many types")
	}
	pats := spec.types
	if len(pats) == 0 {
		pats = []string{""}
	}
	for _, t := range pats {
		f, err := bus.FilterSubject(runID, t)
		if err != nil {
			return spec, err
		}
		spec.filters = append(spec.filters, f)
	}
	switch v := r.URL.Query().Get("live"); v {
	case "", "0":
	case "1":
		if runID == "" {
			return spec, errors.New("live=1 is for one run's stream (/api/runs/{id}/events)")
		}
		spec.live = true
	default:
		return spec, errors.New("live must be 1 or 0")
	}
	last := r.Header.Get("Last-Event-ID")
	if last == "" {
		last = r.URL.Query().Get("after")
	}
	if last != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(last), 10, 64)
		if err != nil {
			return spec, errors.New("Last-Event-ID must be a stream sequence number")
		}
		spec.after = n
	}
	return spec, nil
}

// sseWriter writes SSE frames to one client.
type sseWriter struct {
	w  *bufio.Writer
	rc *http.ResponseController
}

func (sw *sseWriter) deadline() { _ = sw.rc.SetWriteDeadline(time.Now().Add(writeTimeout)) }

func (sw *sseWriter) flush() error {
	sw.deadline()
	if err := sw.w.Flush(); err != nil {
		return err
	}
	return sw.rc.Flush()
}

// record writes one stored message: id = its stream sequence, data = the
// CloudEvents envelope as stored. A message that is not an envelope is sent
// as an event named malformed, so that it is seen and the id advances.
func (sw *sseWriter) record(rec bus.Record) error {
	sw.deadline() // a big record may be written through at once
	if sw.w.Buffered() > 8<<10 {
		if err := sw.w.Flush(); err != nil {
			return err
		}
	}
	w := sw.w
	w.WriteString("id: ")
	w.WriteString(strconv.FormatUint(rec.Sequence, 10))
	w.WriteByte('\n')
	data := rec.Raw
	if rec.Err == nil && rec.Event.Binary() {
		// A binary-mode CloudEvent: the feed carries its structured form.
		var err error
		if data, err = rec.Event.Marshal(); err != nil {
			return err
		}
	}
	if rec.Err != nil {
		w.WriteString("event: malformed\n")
		data, _ = json.Marshal(struct {
			Sequence uint64 `json:"sequence"`
			Subject  string `json:"subject"`
			Error    string `json:"error"`
			Raw      string `json:"raw"`
		}{rec.Sequence, rec.Subject, rec.Err.Error(), string(bytes.ToValidUTF8(rec.Raw[:min(len(rec.Raw), 4096)], []byte("?")))})
	}
	// An SSE data line ends at CR or LF: split on them (the client joins
	// the lines with LF, which JSON reads as whitespace).
	for len(data) > 0 {
		i := bytes.IndexAny(data, "\r\n")
		line := data
		if i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		w.WriteString("data: ")
		w.Write(line)
		w.WriteByte('\n')
	}
	_, err := w.WriteString("\n")
	return err
}

// stream serves one SSE stream until the client goes or the server stops.
//
// Each phase subscribes to the hub first, then reads what is stored after
// the client's last sequence (catch-up, by direct gets: no consumer), then
// forwards the hub's records, skipping any at or below the last one sent:
// no gap and no duplicate. A subscriber dropped for lagging starts a new
// phase from where it is. No phase creates a JetStream consumer: the hub's
// is the only one, whatever the number of streams.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, spec streamSpec) {
	ctx := r.Context()
	sub, err := s.subscribe(ctx, spec.filters)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("dashboard: live feed unavailable", "err", err)
			w.Header().Set("Retry-After", "5")
			httpError(w, http.StatusServiceUnavailable, "the live feed is unavailable; try again shortly")
		}
		return
	}
	defer func() { sub.cancel() }()
	var pieces chan []byte // nil (never ready) without live
	if spec.live {
		pieces = make(chan []byte, liveQueue)
		lsub, err := live.Subscribe(s.opts.Bus.Conn(), spec.runID, func(p live.Piece) {
			data, err := json.Marshal(p)
			if err != nil {
				return
			}
			select {
			case pieces <- data:
			default: // the client is behind: drop it
			}
		})
		if err != nil {
			s.log.Warn("dashboard: live pieces unavailable", "run", spec.runID, "err", err)
		} else {
			defer func() { _ = lsub.Unsubscribe() }()
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := &sseWriter{w: bufio.NewWriterSize(w, 16<<10), rc: http.NewResponseController(w)}
	sw.w.WriteString("retry: 2000\n: vera dashboard stream\n\n")
	if sw.flush() != nil {
		return
	}
	last := spec.after
	hb := time.NewTicker(s.opts.Heartbeat)
	defer hb.Stop()
	for phaseStart := time.Now(); ; {
		if !s.catchUp(ctx, sw, spec, &last) || sw.flush() != nil {
			return
		}
		if !s.forward(ctx, sw, sub, hb.C, pieces, &last) {
			return
		}
		// Dropped for lagging, or the hub stopped: a new phase. One that
		// ended at once (bus trouble) is not retried hot.
		sub.cancel()
		if time.Since(phaseStart) < time.Second {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		phaseStart = time.Now()
		if sub, err = s.subscribe(ctx, spec.filters); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("dashboard: live feed unavailable", "err", err)
			}
			return
		}
	}
}

// A catch-up read holds one of the server's few catch-up slots only while
// it reads one batch from the bus, never while it writes to its client: a
// slow client delays no one else's catch-up. Variables so that tests can
// make batches small.
var (
	catchUpRecords = 256
	catchUpBytes   = 256 << 10
)

// catchUp writes what is stored after *last on spec's filters, batch by
// batch; false when the client or the read failed.
func (s *Server) catchUp(ctx context.Context, sw *sseWriter, spec streamSpec, last *uint64) bool {
	for {
		batch, more, ok := s.catchUpBatch(ctx, spec, *last)
		if !ok {
			return false
		}
		for i := range batch {
			if batch[i].Sequence <= *last {
				continue
			}
			if sw.record(batch[i]) != nil {
				return false
			}
			*last = batch[i].Sequence
		}
		if !more {
			return true
		}
		if sw.flush() != nil {
			return false
		}
	}
}

// catchUpBatch reads up to catchUpRecords records (or catchUpBytes) stored
// after after, holding a catch-up slot; more tells that the batch is full.
func (s *Server) catchUpBatch(ctx context.Context, spec streamSpec, after uint64) (batch []bus.Record, more, ok bool) {
	select {
	case s.catchUps <- struct{}{}:
	case <-ctx.Done():
		return nil, false, false
	}
	defer func() { <-s.catchUps }()
	size := 0
	for rec, err := range directRead(ctx, s.opts.Bus, spec.runID, spec.types, after+1) {
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("dashboard: catch-up read", "run", spec.runID, "err", err)
			}
			return nil, false, false
		}
		if rec.Sequence <= after {
			continue
		}
		batch = append(batch, rec)
		if size += len(rec.Raw); len(batch) >= catchUpRecords || size >= catchUpBytes {
			return batch, true, true
		}
	}
	return batch, false, true
}

// forward writes the subscription's records until it is dropped or the hub
// stops (true: start a new phase) or the client or server goes (false).
func (s *Server) forward(ctx context.Context, sw *sseWriter, sub *subscription, hb <-chan time.Time, pieces <-chan []byte, last *uint64) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case data := <-pieces:
			// A live piece: no id, so that a reconnect resumes after the
			// last stored record.
			sw.deadline()
			sw.w.WriteString("event: live\ndata: ")
			sw.w.Write(data)
			sw.w.WriteString("\n\n")
			if sw.flush() != nil {
				return false
			}
		case <-hb:
			sw.w.WriteString(": heartbeat\n\n")
			if sw.flush() != nil {
				return false
			}
		case rec, ok := <-sub.C:
			if !ok {
				return true
			}
			for {
				sub.received(rec)
				if rec.Sequence > *last {
					if sw.record(*rec) != nil {
						return false
					}
					*last = rec.Sequence
				}
				// Send what is already queued in one flush.
				select {
				case rec, ok = <-sub.C:
					if ok {
						continue
					}
				default:
				}
				break
			}
			if sw.flush() != nil {
				return false
			}
			if !ok {
				return true
			}
		}
	}
}
