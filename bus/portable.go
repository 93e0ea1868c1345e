package bus

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/nats-io/nats.go"
)

// BlobType is the type of the lines an export adds for the blobs its events
// reference. Such lines are never stored on the stream: import puts their
// bytes back into the object store.
const BlobType = "vera.bus.blob"

// ExportOptions select what Export writes.
type ExportOptions struct {
	RunID string // the run to export; empty exports every run
	// Progress, when set, is called after every event written.
	Progress func(ExportStats)
	// Warn, when set, is told about messages that are skipped.
	Warn func(msg string)
}

// ExportStats counts what an export wrote.
type ExportStats struct {
	Events    int // event lines
	Blobs     int // blob lines
	BlobBytes int64
	Skipped   int // stored messages that are not valid envelopes
}

// Export writes the events of a run as JSON Lines: one compact envelope per
// line in stream order. Each blob an event references (any JSON object with
// a "digest": "sha256:…" member) is written once, on a line of type
// vera.bus.blob placed just before the first event that references it, so
// the file stands alone. The output depends only on the stored events:
// exporting the same run twice, or after an import elsewhere, gives the
// same bytes.
func (b *Bus) Export(ctx context.Context, w io.Writer, opts ExportOptions) (ExportStats, error) {
	var st ExportStats
	bw := bufio.NewWriterSize(w, 1<<20)
	written := map[string]bool{}
	var line bytes.Buffer
	for rec, err := range b.Read(ctx, ReadOptions{RunID: opts.RunID}) {
		if err != nil {
			return st, fmt.Errorf("export: %w", err)
		}
		if rec.Err != nil {
			st.Skipped++
			if opts.Warn != nil {
				opts.Warn(fmt.Sprintf("skipping stream sequence %d on %s: %v", rec.Sequence, rec.Subject, rec.Err))
			}
			continue
		}
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
		line.Reset()
		if err := json.Compact(&line, rec.Raw); err != nil {
			return st, fmt.Errorf("export: sequence %d: %w", rec.Sequence, err)
		}
		line.WriteByte('\n')
		if _, err := bw.Write(line.Bytes()); err != nil {
			return st, fmt.Errorf("export: write: %w", err)
		}
		st.Events++
		if opts.Progress != nil {
			opts.Progress(st)
		}
	}
	if err := bw.Flush(); err != nil {
		return st, fmt.Errorf("export: write: %w", err)
	}
	return st, nil
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
	Lines    int
	Imported int // events appended
	Existing int // events the stream already held (skipped)
	Blobs    int // blobs stored or already present
	Bad      []LineError
}

// LineError is a line of an import file that could not be used.
type LineError struct {
	Line int
	Err  error
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Import appends the events of an export file to the stream, in file order,
// with their recorded bytes. It is idempotent at any distance in time:
// events whose id the run already holds are skipped (the stream is checked,
// not just the dedup window), so importing a file twice leaves one copy.
// Bad lines are reported in the stats and skipped; the rest is imported.
func (b *Bus) Import(ctx context.Context, r io.Reader, opts ImportOptions) (ImportStats, error) {
	if opts.BatchSize <= 0 {
		opts.BatchSize = 256
	}
	var st ImportStats
	known := map[string]map[string]bool{} // run → ids already stored or queued
	var batch []*nats.Msg
	var ids []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := b.publishAsync(ctx, batch, ids); err != nil {
			return fmt.Errorf("import: %w", err)
		}
		st.Imported += len(batch)
		batch, ids = batch[:0], ids[:0]
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
			if err := b.importLine(ctx, bytes.TrimSpace(line), known, &batch, &ids, &st); err != nil {
				var le LineError
				if !errors.As(err, &le) {
					return st, err
				}
				le.Line = lineNo
				st.Bad = append(st.Bad, le)
			}
			if len(batch) >= opts.BatchSize {
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

func (b *Bus) importLine(ctx context.Context, line []byte, known map[string]map[string]bool, batch *[]*nats.Msg, ids *[]string, st *ImportStats) error {
	var compact bytes.Buffer
	if err := json.Compact(&compact, line); err != nil {
		return LineError{Err: fmt.Errorf("not JSON: %v", err)}
	}
	ev, err := ParseEvent(compact.Bytes())
	if err != nil {
		return LineError{Err: err}
	}
	if ev.Type == BlobType {
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
	}
	seen, ok := known[ev.RunID]
	if !ok {
		seen = map[string]bool{}
		for rec, err := range b.Read(ctx, ReadOptions{RunID: ev.RunID}) {
			if err != nil {
				return fmt.Errorf("import: scan run %s: %w", ev.RunID, err)
			}
			if rec.Err == nil {
				seen[rec.Event.ID] = true
			}
		}
		known[ev.RunID] = seen
	}
	if seen[ev.ID] {
		st.Existing++
		return nil
	}
	seen[ev.ID] = true
	subj, err := ev.NATSSubject()
	if err != nil {
		return LineError{Err: err}
	}
	*batch = append(*batch, &nats.Msg{Subject: subj, Data: compact.Bytes(), Header: nats.Header{}})
	*ids = append(*ids, ev.ID)
	return nil
}
