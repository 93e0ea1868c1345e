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
	"strings"
	"sync"
	"sync/atomic"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/rundir"
)

// testHookAfterAppend, set by tests only, runs after each file append of
// an event; an error simulates a crash at that point.
var testHookAfterAppend func(file string) error

// FilesDurable is the durable consumer name of the live file projector:
// component.Durable(catalog.ComponentProjector, "files").
const FilesDurable = "projector-files"

// FilesConfig is the configuration of the file projector. The zero value
// works but projects no run from the stream (it has no Roots): give it
// the roots runs may use, as sandboxd has.
type FilesConfig struct {
	// Logger defaults to slog.Default() (component.Logger).
	Logger *slog.Logger
	// Roots are the directories under which a run's work_dir (the run
	// dir) may lie: the operator's, the same as sandboxd's work roots. A
	// run whose work_dir is elsewhere, or is not a directory VERA may use
	// (package rundir), is not projected; the projector says so once.
	Roots []string
	// StateDir keeps each run's projection state (how far its files have
	// got), DATA_DIR/projector in vera up; never a directory the sandbox
	// can write. "" keeps it in memory: after a restart, a run's next
	// event rebuilds its files from the stream.
	StateDir string
	// Root maps a run to a directory the operator named for its files (a
	// replay's output), taken as trusted. Nil, or ok false, means the
	// work_dir of the run's vera.task.submitted (or vera.run.started)
	// event, under Roots.
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
	if c.StateDir != "" {
		if err := os.MkdirAll(c.StateDir, 0o700); err != nil {
			return fmt.Errorf("projector: state dir: %w", err)
		}
	}
	return nil
}

// Files projects every run's files into its work dir.
type Files struct {
	bus   *bus.Bus
	cfg   FilesConfig
	roots *rundir.Roots

	mu   sync.Mutex
	runs map[string]*runFiles

	gaps    atomic.Int64 // runs rebuilt for a missing event (see checkProjected)
	refused atomic.Int64 // runs not projected: their work_dir was refused
}

// Refused is the number of runs the projector did not project because
// their work_dir is not a directory VERA may use.
func (f *Files) Refused() int64 { return f.refused.Load() }

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
	roots, err := rundir.NewRoots(cfg.Roots...)
	if err != nil {
		return nil, fmt.Errorf("projector: %w", err)
	}
	return &Files{bus: b, cfg: cfg, roots: roots}, nil
}

// Name is catalog.ComponentProjector.
func (f *Files) Name() string { return catalog.ComponentProjector }

// Consumes lists what the catalogue says the projector consumes: every
// type (it is an observer).
func (f *Files) Consumes() []string { return catalog.ConsumedBy(catalog.ComponentProjector) }

// Produces is empty: the projector writes files, not events.
func (f *Files) Produces() []string { return catalog.ProducedBy(catalog.ComponentProjector) }

// projState is how far a run's projection has got: kept in
// FilesConfig.StateDir as <run_id>.json, never in the run dir.
type projState struct {
	RunID string `json:"run_id"`
	// Dir is the run dir the state describes: a state of another dir is
	// not believed.
	Dir     string           `json:"dir"`
	LastSeq uint64           `json:"last_seq"`
	Sizes   map[string]int64 `json:"sizes"`
	// ExtTrace is what outside events' lines take of trace.jsonl
	// (ExtTraceCap).
	ExtTrace int64 `json:"ext_trace,omitempty"`
}

type runFiles struct {
	dir    *rundir.Dir // nil when refused
	refuse error       // why the run is not projected
	state  *projState  // nil: not loaded yet
	dirty  bool        // a failure left files and state possibly apart
	busy   int         // handlers using it (Files.mu)
	buf    []byte
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
	rf, err := f.acquire(ctx, ev)
	if err != nil {
		return err
	}
	if rf == nil {
		return nil // no work dir known: nothing to project into
	}
	defer f.release(ev.RunID, rf, ev.Type == catalog.TypeRunFinished)
	if rf.dir == nil {
		return nil // refused (logged once)
	}
	if err := f.apply(ctx, rf, ev, m.Raw, m.Sequence); err != nil {
		rf.dirty = true
		return err
	}
	return nil
}

// maxOpenRuns bounds the runs whose directory the projector keeps open
// (and whose refusal it remembers): past it, idle ones are closed. A
// closed run's next event opens its directory again and resumes from its
// state (or, without a StateDir, rebuilds it from the stream).
const maxOpenRuns = 256

// acquire returns the projection state of ev's run, opening its run dir
// when it is not open, and marks it in use.
func (f *Files) acquire(ctx context.Context, ev *bus.Event) (*runFiles, error) {
	f.mu.Lock()
	if f.runs == nil {
		f.runs = map[string]*runFiles{}
	}
	if rf := f.runs[ev.RunID]; rf != nil {
		rf.busy++
		f.mu.Unlock()
		return rf, nil
	}
	f.mu.Unlock()
	path, trusted, ok, err := f.workDir(ctx, ev)
	if err != nil {
		return nil, err
	}
	if !ok {
		f.log().Warn("projector: run has no work dir; not projected", "run", ev.RunID, "type", ev.Type, "id", ev.ID)
		return nil, nil
	}
	rf := &runFiles{}
	if trusted {
		rf.dir, err = rundir.OpenTrusted(path, true)
	} else {
		rf.dir, err = rundir.Open(f.roots, path, ev.RunID, true)
	}
	if errors.Is(err, rundir.ErrRefused) {
		// Not a directory VERA may write: the run's events stay on the
		// stream (and in every export); its files are not made.
		f.refused.Add(1)
		f.log().Warn("projector: the run's work dir is refused; its files are not projected", "run", ev.RunID, "work_dir", path, "err", err)
		rf.refuse, rf.dir = err, nil
	} else if err != nil {
		return nil, fmt.Errorf("projector: open the run dir of %s: %w", ev.RunID, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if have := f.runs[ev.RunID]; have != nil {
		rf.dir.Close()
		have.busy++
		return have, nil
	}
	rf.busy = 1
	f.runs[ev.RunID] = rf
	return rf, nil
}

// release ends a use of rf; a finished run is forgotten (its directory
// closed, its state on disk), and past maxOpenRuns idle runs are.
func (f *Files) release(runID string, rf *runFiles, finished bool) {
	var closing []*rundir.Dir
	f.mu.Lock()
	rf.busy--
	if finished && rf.busy == 0 && f.runs[runID] == rf {
		delete(f.runs, runID)
		closing = append(closing, rf.dir)
	}
	for id, other := range f.runs {
		if len(f.runs) <= maxOpenRuns {
			break
		}
		if other.busy == 0 && !other.dirty {
			delete(f.runs, id)
			closing = append(closing, other.dir)
		}
	}
	f.mu.Unlock()
	for _, d := range closing {
		d.Close()
	}
}

// workDir finds the directory of ev's run: the Root hook's (trusted), or
// the work_dir its task named.
func (f *Files) workDir(ctx context.Context, ev *bus.Event) (dir string, trusted, ok bool, err error) {
	if f.cfg.Root != nil {
		if d, ok := f.cfg.Root(ev.RunID); ok {
			return d, true, true, nil
		}
	}
	if d := workDirOf(ev); d != "" {
		return d, false, true, nil
	}
	if f.bus == nil {
		return "", false, false, nil
	}
	for rec, err := range f.bus.Read(ctx, bus.ReadOptions{RunID: ev.RunID, Types: []string{catalog.TypeTaskSubmitted, catalog.TypeRunStarted}}) {
		if err != nil {
			return "", false, false, err
		}
		if rec.Err == nil {
			if d := workDirOf(&rec.Event); d != "" {
				return d, false, true, nil
			}
		}
	}
	return "", false, false, nil
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
	found, err := inTrace(rf.dir, ev, raw)
	if err != nil {
		return fmt.Errorf("projector: look for %s (seq %d) in the trace of run %s: %w", ev.ID, seq, ev.RunID, err)
	}
	if found {
		return nil // projected already
	}
	if strings.HasPrefix(ev.Type, "vera.ext.") && rf.state.ExtTrace > 0 {
		if keep, _ := extTraceFits(ev, len(raw)+1, rf.state.ExtTrace); !keep {
			return nil // an outside event past the cap: never in the trace
		}
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

// inTrace reports whether the run dir's trace.jsonl has ev's line.
func inTrace(dir *rundir.Dir, ev *bus.Event, raw []byte) (bool, error) {
	var want []byte
	if err := RenderEvent(ev, raw, func(file string, line []byte) {
		if file == FileTrace {
			want = append(want[:0], line...)
		}
	}); err != nil && want == nil {
		return false, err
	}
	fh, err := dir.OpenFile(FileTrace, os.O_RDONLY, 0)
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
		st, ok := f.readState(ev.RunID)
		if ok && st.Dir != rf.dir.Path() {
			ok = false // the state of another directory
		}
		switch {
		case ok && st.RunID == ev.RunID && !rf.dirty && repair(rf.dir, st) == nil:
			rf.state = st
		case !ok && ev.Type == catalog.TypeTaskSubmitted && noFiles(rf.dir):
			// The run's first event: start empty.
			rf.state = &projState{RunID: ev.RunID, Dir: rf.dir.Path(), Sizes: map[string]int64{}}
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
	next := &projState{RunID: st.RunID, Dir: rf.dir.Path(), LastSeq: seq, Sizes: make(map[string]int64, len(st.Sizes)+2), ExtTrace: st.ExtTrace}
	for k, v := range st.Sizes {
		next.Sizes[k] = v
	}
	for _, c := range chunks {
		if c.file == FileTrace {
			var keep bool
			if keep, next.ExtTrace = extTraceFits(ev, c.to-c.from, next.ExtTrace); !keep {
				f.log().Warn("projector: an outside event past the run's cap on them is not written to trace.jsonl (it stays on the stream)",
					"run", ev.RunID, "id", ev.ID, "type", ev.Type, "cap", ExtTraceCap)
				continue
			}
		}
		n, err := appendSynced(rf.dir, c.file, st.Sizes[c.file], buf[c.from:c.to])
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
	if err := f.writeState(next); err != nil {
		return err
	}
	rf.state = next
	return nil
}

// appendSynced appends data to the file name of dir, first cutting it
// back to size (bytes past it were written by an append whose state was
// never saved), and fsyncs it. It returns the new size.
func appendSynced(dir *rundir.Dir, name string, size int64, data []byte) (int64, error) {
	path := filepath.Join(dir.Path(), name)
	fh, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE, rundir.FileMode)
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

// noFiles reports whether no projected file of dir has anything in it
// (anything in a file's place that is not a regular file counts as
// something: a rebuild replaces it).
func noFiles(dir *rundir.Dir) bool {
	for _, name := range FileNames() {
		fh, err := dir.OpenFile(name, os.O_RDONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false
		}
		fi, err := fh.Stat()
		fh.Close()
		if err != nil || fi.Size() > 0 {
			return false
		}
	}
	return true
}

// repair cuts every file back to its recorded size (bytes past it come from
// an append whose state was never saved, possibly a torn line). It fails
// when a file is shorter than recorded, or is not a regular file of
// VERA's: then only a rebuild helps.
func repair(dir *rundir.Dir, st *projState) error {
	for _, name := range FileNames() {
		size := st.Sizes[name]
		fh, err := dir.OpenFile(name, os.O_WRONLY, 0)
		if errors.Is(err, fs.ErrNotExist) && size == 0 {
			continue
		}
		if err != nil {
			return err
		}
		err = cutBack(fh, size)
		fh.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// cutBack truncates an open file to size; a shorter file is an error.
func cutBack(fh *os.File, size int64) error {
	fi, err := fh.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < size {
		return fmt.Errorf("projector: %s is %d bytes, %d were projected", fh.Name(), fi.Size(), size)
	}
	if fi.Size() > size {
		return fh.Truncate(size)
	}
	return nil
}

// statePath is where run runID's projection state is kept ("": in
// memory only).
func (f *Files) statePath(runID string) string {
	if f.cfg.StateDir == "" || bus.ValidateRunID(runID) != nil {
		return ""
	}
	return filepath.Join(f.cfg.StateDir, runID+".json")
}

func (f *Files) readState(runID string) (*projState, bool) {
	path := f.statePath(runID)
	if path == "" {
		return nil, false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, false
	}
	var st projState
	if json.Unmarshal(data, &st) != nil || st.RunID != runID {
		return nil, false
	}
	if st.Sizes == nil {
		st.Sizes = map[string]int64{}
	}
	return &st, true
}

func (f *Files) writeState(st *projState) error {
	path := f.statePath(st.RunID)
	if path == "" {
		return nil
	}
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	// The directory is not fsynced: a state lost to a crash is an older one,
	// and resuming from an older state is safe (files are cut back to its
	// sizes and the later events projected again); a missing or garbled
	// state means a rebuild.
	return writeFileAtomic(path, false, func(w *bufio.Writer) error {
		_, err := w.Write(append(data, '\n'))
		return err
	})
}

// removeState drops run runID's projection state.
func (f *Files) removeState(runID string) error {
	path := f.statePath(runID)
	if path == "" {
		return nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// writeFileAtomic writes path (in VERA's own state dir, never a run dir)
// through a temporary file in the same directory: write, fsync, rename,
// and with dirSync fsync the directory.
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

// Rebuild writes every file of run runID into dir, a directory the
// operator named (a replay's output; made when missing), from the stream,
// each through a temporary file and a rename. It keeps no projection
// state: a live projector does not resume from it.
func (f *Files) Rebuild(ctx context.Context, runID, dir string) error {
	d, err := rundir.OpenTrusted(dir, true)
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = f.renderInto(ctx, runID, d)
	return err
}

// rebuild rebuilds a run's files in its run dir and saves the state, so
// that the live projector resumes after the last event read.
func (f *Files) rebuild(ctx context.Context, runID string, dir *rundir.Dir) (*projState, error) {
	if f.bus == nil {
		return nil, errors.New("projector: rebuild needs a bus (NewFiles)")
	}
	// Without a state the live projector rebuilds again rather than trust
	// half-renamed files.
	if err := f.removeState(runID); err != nil {
		return nil, err
	}
	st, err := f.renderInto(ctx, runID, dir)
	if err != nil {
		return nil, err
	}
	if err := f.writeState(st); err != nil {
		return nil, err
	}
	f.log().Info("projector: run rebuilt", "run", runID, "dir", dir.Path(), "last_seq", st.LastSeq)
	return st, nil
}

// renderInto writes every file of the run into dir from the stream,
// through temporary files renamed into place, and returns the state the
// files are in.
func (f *Files) renderInto(ctx context.Context, runID string, dir *rundir.Dir) (*projState, error) {
	if f.bus == nil {
		return nil, errors.New("projector: rebuild needs a bus (NewFiles)")
	}
	st, tmps, err := f.renderTemps(ctx, runID, dir)
	defer func() {
		for _, t := range tmps {
			_ = dir.Remove(t)
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
			if err := dir.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			continue
		}
		if err := dir.Rename(t, name); err != nil {
			return nil, err
		}
		delete(tmps, name)
	}
	if err := dir.Sync(); err != nil {
		return nil, err
	}
	return st, nil
}

// renderTemps renders the run into one fsynced temporary file per
// projected file in dir; it returns their names by file name.
func (f *Files) renderTemps(ctx context.Context, runID string, dir *rundir.Dir) (*projState, map[string]string, error) {
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
	mode := rundir.FileMode
	for _, name := range FileNames() {
		fh, tmp, err := dir.CreateTemp(name, mode)
		if err != nil {
			return nil, tmps, err
		}
		tmps[name] = tmp
		if err := fh.Chmod(mode); err != nil { // past the umask
			fh.Close()
			return nil, tmps, err
		}
		outs[name] = &out{fh: fh, w: bufio.NewWriterSize(fh, 256<<10)}
	}
	st := &projState{RunID: runID, Dir: dir.Path(), Sizes: map[string]int64{}}
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
			ev := &rec.Event
			scratch = appendEvent(scratch[:0], ev, rec.Raw, func(file string, line []byte) {
				if file == FileTrace {
					var keep bool
					if keep, st.ExtTrace = extTraceFits(ev, len(line), st.ExtTrace); !keep {
						return
					}
				}
				emit(file, line)
			})
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
