package projector

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
)

// testHookAfterAppend, set by tests only, runs after each file append of
// an event; an error simulates a crash at that point.
var testHookAfterAppend func(file string) error

// FilesDurable is the durable consumer name of the live file projector:
// component.Durable(catalog.ComponentProjector, "files").
const FilesDurable = "projector-files"

// FilesConfig is the configuration of the file projector; the zero value
// works.
type FilesConfig struct {
	// Logger defaults to slog.Default() (component.Logger).
	Logger *slog.Logger
	// Root maps a run to the directory its files go to. Nil, or ok false,
	// means the work_dir of the run's vera.task.submitted (or
	// vera.run.started) event.
	Root func(runID string) (workDir string, ok bool)
	// Concurrency is the number of runs projected in parallel; default 4.
	Concurrency int
	// Durable is the durable consumer's name; default FilesDurable.
	Durable string
}

// SetDefaults fills in the defaults documented on each field.
func (c *FilesConfig) SetDefaults() error {
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.Durable == "" {
		c.Durable = FilesDurable
	}
	c.Logger = component.Logger(c.Logger, catalog.ComponentProjector)
	return nil
}

// Files projects every run's files into its work dir.
type Files struct {
	bus *bus.Bus
	cfg FilesConfig

	mu   sync.Mutex
	runs map[string]*runFiles

	gaps atomic.Int64 // runs rebuilt for a missing event (see checkProjected)
}

// GapsRepaired is the number of times the projector found an event of a
// run missing from its files (delivered after a later one of the run) and
// rebuilt the run from the stream.
func (f *Files) GapsRepaired() int64 { return f.gaps.Load() }

var _ component.Component = (*Files)(nil)

// NewFiles returns the file projector reading from b.
func NewFiles(b *bus.Bus, cfg FilesConfig) (*Files, error) {
	if b == nil {
		return nil, errors.New("projector: NewFiles needs a bus")
	}
	if err := cfg.SetDefaults(); err != nil {
		return nil, err
	}
	return &Files{bus: b, cfg: cfg}, nil
}

// Name is catalog.ComponentProjector.
func (f *Files) Name() string { return catalog.ComponentProjector }

// Consumes lists what the catalogue says the projector consumes: every
// type (it is an observer).
func (f *Files) Consumes() []string { return catalog.ConsumedBy(catalog.ComponentProjector) }

// Produces is empty: the projector writes files, not events.
func (f *Files) Produces() []string { return catalog.ProducedBy(catalog.ComponentProjector) }

// projState is the content of StateFile.
type projState struct {
	RunID   string           `json:"run_id"`
	LastSeq uint64           `json:"last_seq"`
	Sizes   map[string]int64 `json:"sizes"`
}

type runFiles struct {
	dir   string
	state *projState // nil: not loaded yet
	dirty bool       // a failure left files and state possibly apart
	buf   []byte
}

func (f *Files) log() *slog.Logger {
	if f.cfg.Logger == nil {
		return slog.New(slog.DiscardHandler) // a Files made in a test without NewFiles
	}
	return f.cfg.Logger
}

// Run consumes the stream with the durable consumer (FilesDurable) until
// ctx ends.
func (f *Files) Run(ctx context.Context) error {
	return component.Consume(ctx, f.bus, bus.ConsumerConfig{Durable: f.cfg.Durable, Concurrency: f.cfg.Concurrency}, f.Handle)
}

// Handle projects one delivered event. Events of one run must be handed to
// it in stream order by one goroutine at a time (bus.Consume does so).
func (f *Files) Handle(ctx context.Context, m *bus.Message) error {
	ev := &m.Event
	rf, err := f.run(ctx, ev)
	if err != nil {
		return err
	}
	if rf == nil {
		return nil // no work dir known: nothing to project into
	}
	if err := f.apply(ctx, rf, ev, m.Raw, m.Sequence); err != nil {
		rf.dirty = true
		return err
	}
	if ev.Type == catalog.TypeRunFinished {
		// Nothing is held open; forget the cached state (it is on disk).
		f.mu.Lock()
		delete(f.runs, ev.RunID)
		f.mu.Unlock()
	}
	return nil
}

// run returns the projection state of ev's run, resolving its work dir.
func (f *Files) run(ctx context.Context, ev *bus.Event) (*runFiles, error) {
	f.mu.Lock()
	if f.runs == nil {
		f.runs = map[string]*runFiles{}
	}
	rf := f.runs[ev.RunID]
	f.mu.Unlock()
	if rf != nil {
		return rf, nil
	}
	dir, ok, err := f.workDir(ctx, ev)
	if err != nil {
		return nil, err
	}
	if !ok {
		f.log().Warn("projector: run has no work dir; not projected", "run", ev.RunID, "type", ev.Type, "id", ev.ID)
		return nil, nil
	}
	rf = &runFiles{dir: dir}
	f.mu.Lock()
	f.runs[ev.RunID] = rf
	f.mu.Unlock()
	return rf, nil
}

func (f *Files) workDir(ctx context.Context, ev *bus.Event) (string, bool, error) {
	if f.cfg.Root != nil {
		if d, ok := f.cfg.Root(ev.RunID); ok {
			return d, true, nil
		}
	}
	if d := workDirOf(ev); d != "" {
		return d, true, nil
	}
	if f.bus == nil {
		return "", false, nil
	}
	for rec, err := range f.bus.Read(ctx, bus.ReadOptions{RunID: ev.RunID, Types: []string{catalog.TypeTaskSubmitted, catalog.TypeRunStarted}}) {
		if err != nil {
			return "", false, err
		}
		if rec.Err == nil {
			if d := workDirOf(&rec.Event); d != "" {
				return d, true, nil
			}
		}
	}
	return "", false, nil
}

func workDirOf(ev *bus.Event) string {
	switch ev.Type {
	case catalog.TypeTaskSubmitted:
		var d catalog.TaskSubmitted
		if ev.DecodeData(&d) == nil {
			return d.WorkDir
		}
	case catalog.TypeRunStarted:
		var d catalog.RunStarted
		if ev.DecodeData(&d) == nil {
			return d.Config.WorkDir
		}
	}
	return ""
}

// apply projects ev (stream sequence seq) into rf.
func (f *Files) apply(ctx context.Context, rf *runFiles, ev *bus.Event, raw []byte, seq uint64) error {
	if err := f.load(ctx, rf, ev); err != nil {
		return err
	}
	if seq <= rf.state.LastSeq {
		return f.checkProjected(ctx, rf, ev, raw, seq)
	}
	return f.applyOne(ctx, rf, ev, raw, seq)
}

// checkProjected handles a delivery at or below the last sequence
// projected. Deliveries come in stream order, and such a delivery is
// usually a redelivery of an event projected already (its ack was lost).
// But not always: after a consumer's leader changes (a node of a cluster
// lost), an event whose first delivery never arrived can come after a
// later event of its run. Skipping it as "projected already" would lose
// it for good; so such a delivery is looked for in trace.jsonl (which
// holds every event projected, one line each), and when it is not there
// the run is rebuilt from the stream, which projects every event in
// order. The fast path (a delivery after the last one) never pays for
// this; a redelivery pays one read of the run's trace.
func (f *Files) checkProjected(ctx context.Context, rf *runFiles, ev *bus.Event, raw []byte, seq uint64) error {
	if f.bus == nil {
		return nil
	}
	found, err := inTrace(filepath.Join(rf.dir, FileTrace), ev, raw)
	if err != nil {
		return fmt.Errorf("projector: look for %s (seq %d) in the trace of run %s: %w", ev.ID, seq, ev.RunID, err)
	}
	if found {
		return nil // projected already
	}
	f.log().Info("projector: an event arrived after a later one of its run and is not projected; rebuilding the run from the stream",
		"run", ev.RunID, "id", ev.ID, "type", ev.Type, "seq", seq, "last_seq", rf.state.LastSeq)
	st, err := f.rebuild(ctx, ev.RunID, rf.dir)
	if err != nil {
		return err
	}
	rf.state = st
	f.gaps.Add(1)
	return nil
}

// inTrace reports whether trace.jsonl at path has ev's line.
func inTrace(path string, ev *bus.Event, raw []byte) (bool, error) {
	var want []byte
	if err := RenderEvent(ev, raw, func(file string, line []byte) {
		if file == FileTrace {
			want = append(want[:0], line...)
		}
	}); err != nil && want == nil {
		return false, err
	}
	fh, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 256<<10)
	for {
		line, err := r.ReadBytes('\n')
		if bytes.Equal(line, want) {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// load reads the run's projection state (or rebuilds the run) when it is
// not loaded or a failure left it in doubt.
func (f *Files) load(ctx context.Context, rf *runFiles, ev *bus.Event) error {
	if rf.state == nil || rf.dirty {
		st, ok := readState(rf.dir)
		switch {
		case ok && st.RunID == ev.RunID && !rf.dirty && repair(rf.dir, st) == nil:
			rf.state = st
		case !ok && ev.Type == catalog.TypeTaskSubmitted && noFiles(rf.dir):
			// The run's first event: start empty.
			if err := os.MkdirAll(rf.dir, 0o755); err != nil {
				return err
			}
			rf.state = &projState{RunID: ev.RunID, Sizes: map[string]int64{}}
		default:
			st, err := f.rebuild(ctx, ev.RunID, rf.dir)
			if err != nil {
				return err
			}
			rf.state = st
		}
		rf.dirty = false
	}
	return nil
}

// applyOne projects ev (stream sequence seq) into rf's loaded state.
func (f *Files) applyOne(ctx context.Context, rf *runFiles, ev *bus.Event, raw []byte, seq uint64) error {
	st := rf.state
	if seq <= st.LastSeq {
		return nil // projected already
	}
	// Gather the event's lines per file.
	type chunk struct {
		file string
		from int
		to   int
	}
	var chunks []chunk
	buf := rf.buf[:0]
	if err := RenderEvent(ev, raw, func(file string, line []byte) {
		from := len(buf)
		buf = append(buf, line...)
		chunks = append(chunks, chunk{file, from, len(buf)})
	}); err != nil {
		f.log().Warn("projector: event data not projected", "run", ev.RunID, "type", ev.Type, "id", ev.ID, "err", err)
	}
	rf.buf = buf
	next := &projState{RunID: st.RunID, LastSeq: seq, Sizes: make(map[string]int64, len(st.Sizes)+2)}
	for k, v := range st.Sizes {
		next.Sizes[k] = v
	}
	for _, c := range chunks {
		n, err := appendSynced(filepath.Join(rf.dir, c.file), st.Sizes[c.file], buf[c.from:c.to])
		if err != nil {
			return err
		}
		next.Sizes[c.file] = n
		if testHookAfterAppend != nil {
			if err := testHookAfterAppend(c.file); err != nil {
				return err
			}
		}
	}
	if err := writeState(rf.dir, next); err != nil {
		return err
	}
	rf.state = next
	return nil
}

// appendSynced appends data to path, first cutting the file back to size
// (bytes past it were written by an append whose state was never saved),
// and fsyncs it. It returns the new size.
func appendSynced(path string, size int64, data []byte) (int64, error) {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return 0, err
	}
	if fi.Size() < size {
		return 0, fmt.Errorf("projector: %s is %d bytes, %d were projected", path, fi.Size(), size)
	}
	if fi.Size() > size {
		if err := fh.Truncate(size); err != nil {
			return 0, err
		}
	}
	if _, err := fh.WriteAt(data, size); err != nil {
		return 0, err
	}
	if err := fh.Sync(); err != nil {
		return 0, err
	}
	return size + int64(len(data)), fh.Close()
}

func noFiles(dir string) bool {
	for _, name := range FileNames() {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Size() > 0 {
			return false
		}
	}
	return true
}

// repair cuts every file back to its recorded size (bytes past it come from
// an append whose state was never saved, possibly a torn line). It fails
// when a file is shorter than recorded: then only a rebuild helps.
func repair(dir string, st *projState) error {
	for _, name := range FileNames() {
		size := st.Sizes[name]
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) && size == 0 {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Size() < size {
			return fmt.Errorf("projector: %s is %d bytes, %d were projected", path, fi.Size(), size)
		}
		if fi.Size() > size {
			if err := os.Truncate(path, size); err != nil {
				return err
			}
		}
	}
	return nil
}

func readState(dir string) (*projState, bool) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, false
	}
	var st projState
	if json.Unmarshal(data, &st) != nil || st.RunID == "" {
		return nil, false
	}
	if st.Sizes == nil {
		st.Sizes = map[string]int64{}
	}
	return &st, true
}

func writeState(dir string, st *projState) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	// The directory is not fsynced: a state lost to a crash is an older one,
	// and resuming from an older state is safe (files are cut back to its
	// sizes and the later events projected again); a missing or garbled
	// state means a rebuild.
	return writeFileAtomic(filepath.Join(dir, StateFile), false, func(w *bufio.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	})
}

// writeFileAtomic writes path through a temporary file in the same
// directory: write, fsync, rename, and with dirSync fsync the directory.
func writeFileAtomic(path string, dirSync bool, write func(*bufio.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 256<<10)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	ok = true
	if !dirSync {
		return nil
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return err
	}
	return nil
}

// Rebuild writes every file of run runID into dir from the stream, each
// through a temporary file and a rename, and then the projection state, so
// that the live projector resumes after the last event read.
func (f *Files) Rebuild(ctx context.Context, runID, dir string) error {
	_, err := f.rebuild(ctx, runID, dir)
	return err
}

func (f *Files) rebuild(ctx context.Context, runID, dir string) (*projState, error) {
	if f.bus == nil {
		return nil, errors.New("projector: rebuild needs a bus (NewFiles)")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Without a state the live projector rebuilds again rather than trust
	// half-renamed files.
	if err := os.Remove(filepath.Join(dir, StateFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	st, tmps, err := f.renderTemps(ctx, runID, dir)
	defer func() {
		for _, t := range tmps {
			os.Remove(t)
		}
	}()
	if err != nil {
		return nil, err
	}
	for name, t := range tmps {
		if st.Sizes[name] == 0 {
			// Nothing feeds this file: the live projection makes a file
			// only when it first writes to it, and so does a rebuild, so
			// that both leave the same files.
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			continue
		}
		if err := os.Rename(t, filepath.Join(dir, name)); err != nil {
			return nil, err
		}
		delete(tmps, name)
	}
	if err := syncDir(dir); err != nil {
		return nil, err
	}
	if err := writeState(dir, st); err != nil {
		return nil, err
	}
	f.log().Info("projector: run rebuilt", "run", runID, "dir", dir, "last_seq", st.LastSeq)
	return st, nil
}

// renderTemps renders the run into one fsynced temporary file per
// projected file; it returns them by file name.
func (f *Files) renderTemps(ctx context.Context, runID, dir string) (*projState, map[string]string, error) {
	type out struct {
		fh *os.File
		w  *bufio.Writer
		n  int64
	}
	tmps := map[string]string{}
	outs := map[string]*out{}
	defer func() {
		for _, o := range outs {
			o.fh.Close()
		}
	}()
	for _, name := range FileNames() {
		fh, err := os.CreateTemp(dir, "."+name+".tmp-*")
		if err != nil {
			return nil, tmps, err
		}
		tmps[name] = fh.Name()
		if err := fh.Chmod(0o644); err != nil {
			fh.Close()
			return nil, tmps, err
		}
		outs[name] = &out{fh: fh, w: bufio.NewWriterSize(fh, 256<<10)}
	}
	st := &projState{RunID: runID, Sizes: map[string]int64{}}
	var werr error
	emit := func(file string, line []byte) {
		o := outs[file]
		if _, err := o.w.Write(line); err != nil && werr == nil {
			werr = err
		}
		o.n += int64(len(line))
	}
	// Reading (fetch and parse) and rendering (and writing) overlap: a
	// goroutine reads batches of records while this one renders them.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []bus.Record, 4)
	var rerr error
	go func() {
		defer close(batches)
		batch := make([]bus.Record, 0, 256)
		for rec, err := range f.bus.Read(rctx, bus.ReadOptions{RunID: runID}) {
			if err != nil {
				rerr = err
				return
			}
			batch = append(batch, rec)
			if len(batch) == cap(batch) {
				select {
				case batches <- batch:
				case <-rctx.Done():
					rerr = rctx.Err()
					return
				}
				batch = make([]bus.Record, 0, 256)
			}
		}
		if len(batch) > 0 {
			select {
			case batches <- batch:
			case <-rctx.Done():
				rerr = rctx.Err()
			}
		}
	}()
	var scratch []byte
	for batch := range batches {
		if werr != nil {
			continue // drain so the reader ends
		}
		for i := range batch {
			rec := &batch[i]
			st.LastSeq = rec.Sequence
			if rec.Err != nil {
				f.log().Warn("projector: malformed message skipped", "run", runID, "seq", rec.Sequence, "err", rec.Err)
				continue
			}
			scratch = appendEvent(scratch[:0], &rec.Event, rec.Raw, emit)
			if werr != nil {
				cancel()
				break
			}
		}
	}
	if werr != nil {
		return nil, tmps, werr
	}
	if rerr != nil {
		return nil, tmps, rerr
	}
	for name, o := range outs {
		if err := o.w.Flush(); err != nil {
			return nil, tmps, err
		}
		if err := o.fh.Sync(); err != nil {
			return nil, tmps, err
		}
		if err := o.fh.Close(); err != nil {
			return nil, tmps, err
		}
		delete(outs, name)
		st.Sizes[name] = o.n
	}
	return st, tmps, nil
}
