package bus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// BlobType is the type of the lines an export adds for the blobs its events
// reference. Such lines are never stored on the stream: import puts their
// bytes back into the object store.
const BlobType = "vera.bus.blob"

// RawType is the type of the lines an export writes for a stored message
// whose bytes cannot stand on a line of their own: a malformed message (not
// JSON, not a valid envelope, or an envelope that does not match its
// subject), and a valid event whose envelope has no runid (its run is named
// only by its subject, see ParseStored). The line is an ordinary VERA
// envelope of the run (source vera.export) whose data is a RawData: the
// message's bytes exactly as stored, the rest of its subject, and, for a
// malformed message, why it is one (and the headers of a malformed
// binary-mode CloudEvent, which carry its attributes). Import stores the
// bytes (and those headers) back verbatim on vera.run.<runid>.<subject_tail>,
// so nothing stored is lost on the way, and export → import → export gives
// the same file.
//
// Its time is the message's own time when it has one, else the Unix epoch
// (1970-01-01T00:00:00Z); its id is derived from the subject and the bytes.
// Neither depends on where or when the message was stored.
const RawType = "vera.bus.raw"

// RawData is the data of a RawType line.
type RawData struct {
	// SubjectTail is the NATS subject after vera.run.<runid>.: the
	// message was stored on vera.run.<runid>.<SubjectTail> (for a valid
	// event, its type without "vera.").
	SubjectTail string `json:"subject_tail"`
	// Raw is the message as stored, byte for byte (base64 in JSON).
	Raw []byte `json:"raw_base64"`
	// Malformed says why the message is not a valid event of its subject;
	// empty for a valid event that is carried here only because its
	// envelope has no runid.
	Malformed string `json:"malformed,omitempty"`
	// Header holds, for a malformed message in the CloudEvents binary
	// mode (see ParseStoredMsg), the headers that carry its attributes
	// (ce-* and Content-Type) as stored; import stores them with Raw.
	Header nats.Header `json:"header,omitempty"`
}

// ExportOptions select what Export writes.
type ExportOptions struct {
	RunID string // the run to export; empty exports every run
	// Progress, when set, is called after every message written.
	Progress func(ExportStats)
	// Warn, when set, is told about every message exported as malformed
	// and every message skipped.
	Warn func(msg string)
}

// ExportStats counts what an export wrote.
type ExportStats struct {
	Events    int // valid events written (as they are, or in a vera.bus.raw line when they have no runid)
	Malformed int // malformed messages written, marked, in vera.bus.raw lines
	Blobs     int // blob lines
	BlobBytes int64
	// Skipped counts messages that could not be written: only in an
	// export of every run, a message whose subject's run token is not a
	// valid run id (no line could name its run).
	Skipped int
}

// Export writes every message stored for a run as JSON Lines, in stream
// order. A valid event is one compact envelope per line, as stored (a
// CloudEvent stored in binary mode, as its structured envelope). A
// message whose bytes cannot stand alone (a malformed one, or an event
// without runid) is written verbatim inside a line of type vera.bus.raw
// (see RawType), marked with the reason when it is malformed, so that
// nothing stored is left out. Each blob an event references (any JSON
// object with a "digest": "sha256:…" member) is written once, on a line of
// type vera.bus.blob placed just before the first event that references
// it, so the file stands alone. The output depends only on the stored
// messages: exporting the same run twice, or after an import elsewhere,
// gives the same bytes.
func (b *Bus) Export(ctx context.Context, w io.Writer, opts ExportOptions) (ExportStats, error) {
	var st ExportStats
	bw := bufio.NewWriterSize(w, 1<<20)
	written := map[string]bool{}
	var line bytes.Buffer
	for rec, err := range b.Read(ctx, ReadOptions{RunID: opts.RunID}) {
		if err != nil {
			return st, fmt.Errorf("export: %w", err)
		}
		run := subjectRun(rec.Subject)
		tail, _ := strings.CutPrefix(rec.Subject, SubjectRoot+"."+run+".")
		if !validRunID(run) || tail == "" || tail == rec.Subject {
			st.Skipped++
			if opts.Warn != nil {
				opts.Warn(fmt.Sprintf("skipping stream sequence %d on %s: its subject names no valid run", rec.Sequence, rec.Subject))
			}
			continue
		}
		if rec.Err == nil {
			for _, digest := range blobDigests(rec.Event.Data) {
				if written[digest] {
					continue
				}
				written[digest] = true
				data, err := b.GetBlob(ctx, digest)
				if err != nil {
					return st, fmt.Errorf("export: event %s references %w", rec.Event.ID, err)
				}
				blob := Event{
					SpecVersion: SpecVersion, ID: DeriveID(rec.Event.RunID, rec.Event.ID, "blob "+digest), Source: "vera.export",
					Type: BlobType, Subject: rec.Event.RunID, RunID: rec.Event.RunID, Time: rec.Event.Time,
					DataContentType: "application/octet-stream", CausationID: rec.Event.ID, DataBase64: data,
				}
				raw, err := blob.Marshal()
				if err != nil {
					return st, err
				}
				bw.Write(raw)
				bw.WriteByte('\n')
				st.Blobs++
				st.BlobBytes += int64(len(data))
			}
		}
		line.Reset()
		switch {
		case rec.Err == nil && rec.Event.binary:
			// A binary-mode CloudEvent (an outside tool's SDK default):
			// its stored bytes are only its data, so its line is its
			// structured form, runid included (from the subject when the
			// headers had none). Imported, it is an ordinary event.
			raw, err := rec.Event.Marshal()
			if err != nil {
				return st, fmt.Errorf("export: sequence %d: %w", rec.Sequence, err)
			}
			line.Write(raw)
			st.Events++
		case rec.Err == nil && !rec.Event.runFromSubject:
			if err := json.Compact(&line, rec.Raw); err != nil {
				return st, fmt.Errorf("export: sequence %d: %w", rec.Sequence, err)
			}
			st.Events++
		default:
			malformed := ""
			if rec.Err != nil {
				malformed = rec.Err.Error()
				if opts.Warn != nil {
					opts.Warn(fmt.Sprintf("stream sequence %d on %s is not a valid event (%v): exported verbatim as a %s line", rec.Sequence, rec.Subject, rec.Err, RawType))
				}
			}
			var header nats.Header
			if rec.Err != nil {
				header = ceHeaders(rec.Header) // a binary-mode message's attributes
			}
			raw, err := rawLine(run, tail, header, rec.Raw, rec.Event.Time, malformed)
			if err != nil {
				return st, fmt.Errorf("export: sequence %d: %w", rec.Sequence, err)
			}
			line.Write(raw)
			if rec.Err != nil {
				st.Malformed++
			} else {
				st.Events++
			}
		}
		line.WriteByte('\n')
		if _, err := bw.Write(line.Bytes()); err != nil {
			return st, fmt.Errorf("export: write: %w", err)
		}
		if opts.Progress != nil {
			opts.Progress(st)
		}
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("export: write: %w", err)
	}
	return st, nil
}

// rawLine encodes the vera.bus.raw line of a message stored on
// vera.run.<run>.<tail>; t is the message's own time (zero if it has none).
func rawLine(run, tail string, header nats.Header, raw []byte, t time.Time, malformed string) ([]byte, error) {
	t = t.UTC()
	if t.IsZero() || t.Year() < 0 || t.Year() > 9999 {
		t = time.Unix(0, 0).UTC() // none, or none an envelope can carry
	}
	if raw == nil {
		raw = []byte{} // an empty message: "" whichever way it was read, never null
	}
	data, err := json.Marshal(RawData{SubjectTail: tail, Raw: raw, Malformed: malformed, Header: header})
	if err != nil {
		return nil, err
	}
	ev := Event{
		SpecVersion: SpecVersion, ID: KeyedID(t, RawType+" "+rawKey(SubjectRoot+"."+run+"."+tail, header, raw)), Source: "vera.export",
		Type: RawType, Subject: run, RunID: run, Time: t, DataContentType: ContentTypeJSON, Data: data, checked: data,
	}
	return ev.Marshal()
}

// blobDigests finds blob references in JSON data, in document order.
func blobDigests(data json.RawMessage) []string {
	if len(data) == 0 || !bytes.Contains(data, []byte(`"sha256:`)) {
		return nil
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return nil
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if d, ok := x["digest"].(string); ok && digestPattern.MatchString(d) {
				out = append(out, d)
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// ImportOptions tune Import.
type ImportOptions struct {
	// Progress, when set, is called after every line.
	Progress func(ImportStats)
	// BatchSize is the number of events published per async batch.
	BatchSize int
}

// ImportStats counts what an import did.
type ImportStats struct {
	Lines     int
	Imported  int // events appended
	Malformed int // malformed messages (vera.bus.raw lines) stored back verbatim
	Existing  int // events and malformed messages the run already held (skipped)
	Blobs     int // blobs stored or already present
	Bad       []LineError
}

// LineError is a line of an import file that could not be used.
type LineError struct {
	Line int
	Err  error
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Import appends the messages of an export file to the stream, in file
// order, with their recorded bytes: an event line as it is, on its
// subject; a vera.bus.raw line's message verbatim on
// vera.run.<runid>.<subject_tail> (see RawType), malformed or not; a blob
// line's bytes into the object store. It is idempotent at any distance in
// time: events whose id the run already holds, and malformed messages the
// run already holds on the same subject with the same bytes, are skipped
// (the stream is checked, not just the dedup window), so importing a file
// twice leaves one copy. Lines that are neither (not JSON, not a valid
// envelope, a blob or raw line that does not check out) are reported in
// the stats by line number and skipped; the rest is imported.
func (b *Bus) Import(ctx context.Context, r io.Reader, opts ImportOptions) (ImportStats, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	var st ImportStats
	known := map[string]map[string]bool{} // run → keys (eventKey, rawMsgKey) of messages already stored or queued
	var q importQueue
	flush := func() error {
		if len(q.msgs) == 0 {
			return nil
		}
		acks, err := b.publishAsync(ctx, q.msgs, q.ids)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		for i, ack := range acks {
			switch {
			case ack.Duplicate:
				st.Existing++
			case q.malformed[i]:
				st.Malformed++
			default:
				st.Imported++
			}
		}
		q = importQueue{msgs: q.msgs[:0], ids: q.ids[:0], malformed: q.malformed[:0]}
		return nil
	}
	br := bufio.NewReaderSize(r, 1<<20)
	lineNo := 0 // the file's line number, blank lines included
	for {
		line, rerr := br.ReadBytes('\n')
		if len(line) > 0 {
			lineNo++
		}
		if len(bytes.TrimSpace(line)) > 0 {
			st.Lines++
			if err := b.importLine(ctx, bytes.TrimSpace(line), known, &q, &st); err != nil {
				var le LineError
				if !errors.As(err, &le) {
					return st, err
				}
				le.Line = lineNo
				st.Bad = append(st.Bad, le)
			}
			if len(q.msgs) >= opts.BatchSize {
				if err := flush(); err != nil {
					return st, err
				}
			}
			if opts.Progress != nil {
				opts.Progress(st)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return st, fmt.Errorf("import: read: %w", rerr)
		}
	}
	return st, flush()
}

// importQueue holds the messages of the next batch, their Nats-Msg-Ids and
// whether each is a malformed message.
type importQueue struct {
	msgs      []*nats.Msg
	ids       []string
	malformed []bool
}

// Import's duplicate check knows a stored valid event by its id (in its
// run), and any other stored message by its subject, its CloudEvents
// headers when it is in binary mode, and its bytes.
func eventKey(id string) string { return "e " + id }

func rawMsgKey(subject string, header nats.Header, raw []byte) string {
	return "r " + rawKey(subject, header, raw)
}

func (b *Bus) importLine(ctx context.Context, line []byte, known map[string]map[string]bool, q *importQueue, st *ImportStats) error {
	var compact bytes.Buffer
	if err := json.Compact(&compact, line); err != nil {
		return LineError{Err: fmt.Errorf("not JSON: %v", err)}
	}
	ev, err := ParseEvent(compact.Bytes())
	if err != nil {
		return LineError{Err: err}
	}
	var subj, msgID string
	var data []byte
	var header nats.Header // a binary-mode message's, from a vera.bus.raw line
	malformed := false
	switch ev.Type {
	case BlobType:
		if len(ev.DataBase64) == 0 {
			return LineError{Err: errors.New("blob line without data_base64")}
		}
		// Export names a blob line after the event that first references
		// the blob and the blob's digest: bytes changed since do not give
		// the same id, and would be stored under a digest no event names.
		if got := Digest(ev.DataBase64); ev.CausationID != "" && DeriveID(ev.RunID, ev.CausationID, "blob "+got) != ev.ID {
			return LineError{Err: fmt.Errorf("blob line %s: its bytes (%s) are not the blob it was exported with; not imported", ev.ID, got)}
		}
		if _, err := b.PutBlob(ctx, ev.DataBase64, ""); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		st.Blobs++
		return nil
	case RawType:
		var d RawData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return LineError{Err: fmt.Errorf("%s line %s: data: %v", RawType, ev.ID, err)}
		}
		if !literalSubjectTail(d.SubjectTail) {
			return LineError{Err: fmt.Errorf("%s line %s: subject_tail %q is not a subject (tokens separated by '.', no wildcard, no space)", RawType, ev.ID, d.SubjectTail)}
		}
		if err := checkHeader(d.Header); err != nil {
			return LineError{Err: fmt.Errorf("%s line %s: %v", RawType, ev.ID, err)}
		}
		subj, data, header = SubjectRoot+"."+ev.RunID+"."+d.SubjectTail, d.Raw, d.Header
		// What the message is, is decided here, not by the line's own
		// "malformed": the bytes are parsed as the stream's readers will.
		if inner, perr := ParseStoredMsg(subj, header, data); perr == nil {
			ev, msgID = inner, MsgID(ev.RunID, inner.ID)
		} else {
			malformed, msgID = true, rawMsgID(ev.RunID, subj, header, data)
		}
	default:
		subj, err = ev.NATSSubject()
		if err != nil {
			return LineError{Err: err}
		}
		data, msgID = compact.Bytes(), MsgID(ev.RunID, ev.ID)
	}
	if len(data) > int(b.opts.MaxMsgSize) {
		return LineError{Err: fmt.Errorf("%w: the message on %s is %d bytes, this server's limit is %d", ErrTooLarge, subj, len(data), b.opts.MaxMsgSize)}
	}
	run := ev.RunID
	seen, ok := known[run]
	if !ok {
		seen = map[string]bool{}
		for rec, err := range b.Read(ctx, ReadOptions{RunID: run}) {
			if err != nil {
				return fmt.Errorf("import: scan run %s: %w", run, err)
			}
			if rec.Err == nil {
				seen[eventKey(rec.Event.ID)] = true
			} else {
				seen[rawMsgKey(rec.Subject, ceHeaders(rec.Header), rec.Raw)] = true
			}
		}
		known[run] = seen
	}
	key := eventKey(ev.ID)
	if malformed {
		key = rawMsgKey(subj, header, data)
	}
	if seen[key] {
		st.Existing++
		return nil
	}
	seen[key] = true
	var msg *nats.Msg
	switch {
	case len(header) > 0:
		// A binary-mode message from a raw line: its headers as they were.
		msg = &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
		for k, v := range header {
			msg.Header[k] = slices.Clone(v)
		}
	case malformed:
		msg = &nats.Msg{Subject: subj, Data: data, Header: nats.Header{}}
	default:
		msg = eventMsg(subj, data) // an envelope: marked as structured mode
	}
	q.msgs = append(q.msgs, msg)
	q.ids = append(q.ids, msgID)
	q.malformed = append(q.malformed, malformed)
	return nil
}

// checkHeader reports whether a raw line's header is one a NATS message
// can carry: names of printable ASCII without ':' or spaces, values
// without CR or LF, and none of the server's own (Nats-*).
func checkHeader(h nats.Header) error {
	for k, vs := range h {
		if k == "" || len(k) >= 5 && strings.EqualFold(k[:5], "nats-") {
			return fmt.Errorf("header %q cannot be stored", k)
		}
		for i := 0; i < len(k); i++ {
			if c := k[i]; c <= ' ' || c > '~' || c == ':' {
				return fmt.Errorf("header name %q is not a header name", k)
			}
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n") {
				return fmt.Errorf("header %q has a line break", k)
			}
		}
	}
	return nil
}

// literalSubjectTail reports whether tail is one or more '.'-separated
// tokens that make a literal NATS subject: none empty, none a wildcard
// (* or >), no whitespace or control characters.
func literalSubjectTail(tail string) bool {
	if tail == "" {
		return false
	}
	for tok := range strings.SplitSeq(tail, ".") {
		if tok == "" || tok == "*" || tok == ">" {
			return false
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; c <= ' ' || c == 0x7f {
				return false
			}
		}
	}
	return true
}
