package projector

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// Names of the files projected into a run's work dir.
const (
	FileNotes           = "notes.md"
	FileEvidence        = "evidence.jsonl"
	FileMoveLedger      = "move_ledger.jsonl"
	FileQueryLedger     = "query_ledger.jsonl"
	FileTrace           = "trace.jsonl"
	FileContainerLog    = "container.log"
	FileContainerEvents = "container_events.log"
	FileSession         = "session.log"
)

// FileNames lists every projected file, sorted.
func FileNames() []string {
	return []string{FileContainerLog, FileContainerEvents, FileEvidence, FileMoveLedger, FileNotes, FileQueryLedger, FileSession, FileTrace}
}

// Render returns the exact bytes of every projected file for a run's events
// in stream order. Every file is present, empty when no event feeds it.
func Render(events []bus.Event) map[string][]byte {
	bufs := make(map[string]*bytes.Buffer, 8)
	for _, f := range FileNames() {
		bufs[f] = new(bytes.Buffer)
	}
	var scratch []byte
	var ext int64
	for i := range events {
		ev := &events[i]
		scratch = appendEvent(scratch[:0], ev, nil, func(file string, line []byte) {
			if file == FileTrace {
				var keep bool
				if keep, ext = extTraceFits(ev, len(line), ext); !keep {
					return
				}
			}
			bufs[file].Write(line)
		})
	}
	out := make(map[string][]byte, len(bufs))
	for f, b := range bufs {
		out[f] = b.Bytes()
	}
	return out
}

// ExtTraceCap bounds the trace.jsonl lines of outside events (vera.ext.*
// types, published by outside tools) in one run's trace: past it, an
// outside event is not written to trace.jsonl (it stays on the stream, in
// every export and in `vera events tail`). VERA's own events are never
// left out. The cap depends only on the run's events in order, so a live
// projection, a rebuild and a replay still give the same bytes.
const ExtTraceCap = 1 << 20

// extTraceFits reports whether ev's trace line of n bytes is written, the
// run's outside events having taken used bytes of the trace before it,
// and what they take after it.
func extTraceFits(ev *bus.Event, n int, used int64) (bool, int64) {
	if !strings.HasPrefix(ev.Type, "vera.ext.") {
		return true, used
	}
	if used+int64(n) > ExtTraceCap {
		return false, used
	}
	return true, used + int64(n)
}

// RenderEvent calls emit with each file line ev contributes, in a fixed
// order (the event's own file first, trace.jsonl last). It returns any
// problem with the event's data; the lines that could be rendered are
// emitted all the same. emit must not retain line.
//
// raw is the envelope as stored on the stream, or nil: the trace.jsonl line
// is raw (compacted if it has insignificant whitespace), else ev.Marshal(),
// which is what bus.Publish stores, so both give the same line for events
// published through package bus. For an event stored in CloudEvents binary
// mode (ev.Binary(): raw is its data, not an envelope) the line is
// ev.Marshal(), its structured form.
func RenderEvent(ev *bus.Event, raw []byte, emit func(file string, line []byte)) error {
	var err error
	appendEventErr(nil, ev, raw, emit, &err)
	return err
}

func appendEvent(buf []byte, ev *bus.Event, raw []byte, emit func(string, []byte)) []byte {
	return appendEventErr(buf, ev, raw, emit, nil)
}

// appendEventErr renders ev using buf as scratch space and returns it.
func appendEventErr(buf []byte, ev *bus.Event, raw []byte, emit func(string, []byte), errp *error) []byte {
	fail := func(err error) {
		if errp != nil && *errp == nil {
			*errp = err
		}
	}
	switch ev.Type {
	case catalog.TypeNotesAppended:
		var d catalog.NotesAppended
		if err := ev.DecodeData(&d); err != nil {
			fail(err)
			break
		}
		buf = append(buf[:0], d.Text...)
		buf = append(buf, '\n')
		emit(FileNotes, buf)
	case catalog.TypeEvidenceRecorded:
		buf = appendDataLine(buf[:0], ev, &catalog.EvidenceRecorded{}, FileEvidence, emit, fail)
	case catalog.TypeLedgerMove:
		buf = appendDataLine(buf[:0], ev, &catalog.LedgerMove{}, FileMoveLedger, emit, fail)
	case catalog.TypeLedgerQuery:
		buf = appendDataLine(buf[:0], ev, &catalog.LedgerQuery{}, FileQueryLedger, emit, fail)
	case catalog.TypeContainerLog:
		var d catalog.ContainerLog
		if err := ev.DecodeData(&d); err != nil {
			fail(err)
			break
		}
		buf = appendTime(buf[:0], d.Time)
		buf = append(buf, ' ')
		buf = appendValue(buf, string(d.Stream))
		buf = append(buf, ' ')
		buf = appendLine(buf, d.Line)
		if d.Truncated {
			buf = append(buf, " [truncated]"...)
		}
		buf = append(buf, '\n')
		emit(FileContainerLog, buf)
	case catalog.TypeContainerEvent:
		var d catalog.ContainerEvent
		if err := ev.DecodeData(&d); err != nil {
			fail(err)
			break
		}
		buf = appendTime(buf[:0], d.Time)
		buf = append(buf, ' ')
		buf = appendValue(buf, d.Action)
		buf = append(buf, ' ')
		name := d.Container
		if name == "" {
			name = d.ContainerID
		}
		buf = appendValue(buf, name)
		for _, k := range slices.Sorted(maps.Keys(d.Attributes)) {
			buf = appendKV(buf, k, d.Attributes[k])
		}
		buf = append(buf, '\n')
		emit(FileContainerEvents, buf)
	case catalog.TypeTaskSubmitted, catalog.TypeRunStarted, catalog.TypeRunCancelled, catalog.TypeRunFinished, catalog.TypeToolSession:
		b, err := appendSession(buf[:0], ev)
		buf = b
		if err != nil {
			fail(err)
			break
		}
		emit(FileSession, buf)
	}
	// trace.jsonl: the envelope itself. A binary-mode CloudEvent's stored
	// bytes are its data alone: its line is its structured form.
	if raw == nil || ev.Binary() {
		var err error
		if raw, err = ev.Marshal(); err != nil {
			fail(err)
			return buf
		}
	}
	var err error
	if buf, err = appendCompact(buf[:0], raw); err != nil {
		fail(err)
		return buf
	}
	buf = append(buf, '\n')
	emit(FileTrace, buf)
	return buf
}

// appendCompact appends the JSON value js without insignificant
// whitespace. Compact input (the usual case) is copied without
// json.Compact.
func appendCompact(buf, js []byte) ([]byte, error) {
	if compactJSON(js) {
		return append(buf, js...), nil
	}
	b := bytes.NewBuffer(buf)
	if err := json.Compact(b, js); err != nil {
		return buf, err
	}
	return b.Bytes(), nil
}

// compactJSON reports whether js has no whitespace outside strings. It
// jumps over strings with bytes.IndexByte, so long text costs little.
func compactJSON(js []byte) bool {
	for {
		q := bytes.IndexByte(js, '"')
		seg := js
		if q >= 0 {
			seg = js[:q]
		}
		for _, c := range seg {
			if c == ' ' || c == '\n' || c == '\t' || c == '\r' {
				return false
			}
		}
		if q < 0 {
			return true
		}
		js = js[q+1:]
		for { // to the closing quote: one not preceded by an odd run of '\\'
			e := bytes.IndexByte(js, '"')
			if e < 0 {
				return false // unterminated string: let json.Compact judge
			}
			n := 0
			for i := e - 1; i >= 0 && js[i] == '\\'; i-- {
				n++
			}
			js = js[e+1:]
			if n%2 == 0 {
				break
			}
		}
	}
}

func appendDataLine(buf []byte, ev *bus.Event, typed any, file string, emit func(string, []byte), fail func(error)) []byte {
	if err := ev.DecodeData(typed); err != nil {
		fail(err)
		return buf
	}
	buf, err := appendCompact(buf, ev.Data)
	if err != nil {
		fail(err)
		return buf
	}
	buf = append(buf, '\n')
	emit(file, buf)
	return buf
}

func appendSession(buf []byte, ev *bus.Event) ([]byte, error) {
	buf = appendTime(buf, ev.Time)
	buf = append(buf, ' ')
	buf = append(buf, strings.TrimPrefix(ev.Type, "vera.")...)
	switch ev.Type {
	case catalog.TypeTaskSubmitted:
		var d catalog.TaskSubmitted
		if err := ev.DecodeData(&d); err != nil {
			return buf, err
		}
		buf = appendKV(buf, "by", d.SubmittedBy)
		buf = appendKV(buf, "work_dir", d.WorkDir)
		buf = appendKV(buf, "model", d.Model.Name)
		buf = appendKV(buf, "max_steps", strconv.Itoa(d.MaxSteps))
		buf = appendKV(buf, "task", d.Task)
	case catalog.TypeRunStarted:
		var d catalog.RunStarted
		if err := ev.DecodeData(&d); err != nil {
			return buf, err
		}
		buf = appendKV(buf, "agent", d.AgentID)
		if d.Version != "" {
			buf = appendKV(buf, "version", d.Version)
		}
		buf = appendKV(buf, "model", d.Config.Model.Name)
		buf = appendKV(buf, "max_steps", strconv.Itoa(d.Config.MaxSteps))
	case catalog.TypeRunCancelled:
		var d catalog.RunCancelled
		if err := ev.DecodeData(&d); err != nil {
			return buf, err
		}
		buf = appendKV(buf, "by", d.RequestedBy)
		if d.Reason != "" {
			buf = appendKV(buf, "reason", d.Reason)
		}
	case catalog.TypeRunFinished:
		var d catalog.RunFinished
		if err := ev.DecodeData(&d); err != nil {
			return buf, err
		}
		buf = appendKV(buf, "outcome", string(d.Outcome))
		buf = appendKV(buf, "steps", strconv.Itoa(d.Steps))
		buf = appendKV(buf, "duration_ms", strconv.FormatInt(d.DurationMS, 10))
		if d.BestScore > 0 {
			buf = appendKV(buf, "best_score", strconv.Itoa(d.BestScore))
			buf = appendKV(buf, "best_round", strconv.Itoa(d.BestAuditRound))
		}
		buf = appendKV(buf, "tokens", strconv.FormatInt(d.Usage.Total, 10))
		if d.AnswerFile != "" {
			buf = appendKV(buf, "answer_file", d.AnswerFile)
			buf = appendKV(buf, "answer_sha256", d.AnswerSHA256)
		}
		if d.Reason != "" {
			buf = appendKV(buf, "reason", d.Reason)
		}
	case catalog.TypeToolSession:
		var d catalog.ToolSession
		if err := ev.DecodeData(&d); err != nil {
			return buf, err
		}
		buf = appendKV(buf, "action", d.Action)
		buf = appendKV(buf, "container", d.Container)
		buf = appendKV(buf, "session", d.SessionID)
		buf = appendKV(buf, "reason", d.Reason)
		if len(d.Lost) > 0 {
			buf = appendKV(buf, "lost", strings.Join(d.Lost, "; "))
		}
	default:
		return buf, fmt.Errorf("not a session event: %s", ev.Type)
	}
	return append(buf, '\n'), nil
}

func appendTime(buf []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(buf, '-')
	}
	return t.UTC().AppendFormat(buf, "2006-01-02T15:04:05.000000000Z07:00")
}

func appendKV(buf []byte, k, v string) []byte {
	buf = append(buf, ' ')
	buf = append(buf, k...)
	buf = append(buf, '=')
	return appendValue(buf, v)
}

// appendValue writes v bare when it is a non-empty run of printable
// non-space characters other than '"' and '=', else Go-quoted.
func appendValue(buf []byte, v string) []byte {
	if v != "" && plain(v) {
		return append(buf, v...)
	}
	return strconv.AppendQuote(buf, v)
}

func plain(v string) bool {
	for _, r := range v {
		if r <= ' ' || r == '"' || r == '=' || r == 0x7f || r == utf8.RuneError || r == '\u2028' || r == '\u2029' || r == 0x85 {
			return false
		}
	}
	return true
}

// appendLine writes a container log line verbatim unless it holds a line
// break or another control character other than tab; then it is Go-quoted.
func appendLine(buf []byte, v string) []byte {
	for _, r := range v {
		if (r < ' ' && r != '\t') || r == 0x7f || r == 0x85 || r == '\u2028' || r == '\u2029' {
			return strconv.AppendQuote(buf, v)
		}
	}
	return append(buf, v...)
}
