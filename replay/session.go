package replay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/embedded"
)

// Session is a bus holding recorded runs: a private embedded server
// loaded from an export file ([OpenFile]), or a bus the caller opened
// ([OpenBus]). Close releases what the session started.
type Session struct {
	// Bus holds the recorded runs.
	Bus *bus.Bus
	// Runs lists the runs of the export file in the order they first
	// appear (OpenFile), or the run asked for (OpenBus).
	Runs []string
	// Imported reports the import of the file (OpenFile only).
	Imported bus.ImportStats

	scratch *Scratch // nil when the bus belongs to the caller
}

// Close closes the session's own server and connections; a caller's bus
// is left open.
func (s *Session) Close() error {
	if s == nil || s.scratch == nil {
		return nil
	}
	return s.scratch.Close()
}

// RunID returns the run to work on: want when set (it must be one of the
// session's runs when those are known), else the only run of the file.
func (s *Session) RunID(want string) (string, error) {
	if want != "" {
		if len(s.Runs) == 0 {
			return want, nil
		}
		for _, r := range s.Runs {
			if r == want {
				return want, nil
			}
		}
		return "", fmt.Errorf("run %s is not in the export file (it holds %s)", want, strings.Join(s.Runs, ", "))
	}
	switch len(s.Runs) {
	case 0:
		return "", errors.New("the export file holds no events")
	case 1:
		return s.Runs[0], nil
	}
	return "", fmt.Errorf("the export file holds %d runs (%s): pick one with --run", len(s.Runs), strings.Join(s.Runs, ", "))
}

// OpenOptions configure OpenFile.
type OpenOptions struct {
	// Bus, when set, receives the import instead of a private embedded
	// server (the import is idempotent: events already stored are
	// skipped).
	Bus    *bus.Bus
	Logger *slog.Logger
	// Progress is called during the import.
	Progress func(bus.ImportStats)
}

// ImportError reports the lines of an export file that could not be
// imported.
type ImportError struct {
	File string
	Bad  []bus.LineError
}

func (e *ImportError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d line(s) could not be imported (a replay of part of a run would not match it):", e.File, len(e.Bad))
	for i, le := range e.Bad {
		if i == 5 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(e.Bad)-5)
			break
		}
		fmt.Fprintf(&b, "\n  %s:%d: %v", e.File, le.Line, le.Err)
	}
	return b.String()
}

// OpenFile loads an export file (bus.Export format) into a private
// embedded NATS server, or into opts.Bus. A file with bad lines is
// refused with an *ImportError naming them.
func OpenFile(ctx context.Context, path string, opts OpenOptions) (*Session, error) {
	runs, err := scanRuns(path)
	if err != nil {
		return nil, err
	}
	s := &Session{Runs: runs, Bus: opts.Bus}
	if s.Bus == nil {
		sc, err := NewScratch(ctx, opts.Logger)
		if err != nil {
			return nil, err
		}
		s.scratch = sc
		if s.Bus, err = sc.Connect(ctx, "replay"); err != nil {
			sc.Close()
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open export file: %w", err)
	}
	defer f.Close()
	st, err := s.Bus.Import(ctx, f, bus.ImportOptions{Progress: opts.Progress})
	s.Imported = st
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("import %s: %w", path, err)
	}
	if len(st.Bad) > 0 {
		s.Close()
		return nil, &ImportError{File: path, Bad: st.Bad}
	}
	return s, nil
}

// OpenBus wraps a bus that holds run runID; it fails when the bus has no
// event of the run.
func OpenBus(ctx context.Context, b *bus.Bus, runID string) (*Session, error) {
	if err := checkRun(ctx, b, runID); err != nil {
		return nil, err
	}
	return &Session{Bus: b, Runs: []string{runID}}, nil
}

// checkRun fails when b holds no event of run runID.
func checkRun(ctx context.Context, b *bus.Bus, runID string) error {
	if err := bus.ValidateRunID(runID); err != nil {
		return fmt.Errorf("run id: %w", err)
	}
	f, err := bus.FilterSubject(runID, "")
	if err != nil {
		return err
	}
	seq, err := b.LastSequence(ctx, f)
	if err != nil {
		return fmt.Errorf("look up run %s: %w", runID, err)
	}
	if seq == 0 {
		return fmt.Errorf("unknown run %s: the bus holds no event of it", runID)
	}
	return nil
}

// scanRuns lists the run ids of an export file in order of appearance.
// Lines that are not events are left to the import to report.
func scanRuns(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open export file: %w", err)
	}
	defer f.Close()
	var runs []string
	seen := map[string]bool{}
	br := bufio.NewReaderSize(f, 1<<20)
	for {
		line, rerr := br.ReadBytes('\n')
		if len(line) > 0 {
			if ev, err := bus.ParseEvent(line); err == nil && ev.Type != bus.BlobType && !seen[ev.RunID] {
				seen[ev.RunID] = true
				runs = append(runs, ev.RunID)
			}
		}
		if rerr == io.EOF {
			return runs, nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("read export file %s: %w", path, rerr)
		}
	}
}

// Scratch is a private embedded NATS server with JetStream whose store is a
// temporary directory, removed by Close. Its stream is written without
// fsync: nothing in it outlives the process.
type Scratch struct {
	Server *embedded.Server
	dir    string
	log    *slog.Logger

	mu    sync.Mutex // components connect from their own goroutines
	buses []*bus.Bus
}

// NewScratch starts a scratch server that listens on no port: only this
// process reaches it, so no other local user can add to a replay.
func NewScratch(ctx context.Context, log *slog.Logger) (*Scratch, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dir, err := os.MkdirTemp("", "vera-replay-nats-")
	if err != nil {
		return nil, fmt.Errorf("scratch bus: %w", err)
	}
	srv, err := embedded.Start(embedded.Options{
		DataDir: dir, Listen: "127.0.0.1:0", ServerName: "vera-replay", InProcess: true,
		// Nothing here must survive a crash: flush lazily.
		SyncInterval: time.Minute,
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("scratch bus: %w", err)
	}
	return &Scratch{Server: srv, dir: dir, log: log}, nil
}

// Connect opens a bus connection stamping events with source; Close
// closes it.
func (s *Scratch) Connect(ctx context.Context, source string) (*bus.Bus, error) {
	return s.ConnectWith(ctx, bus.Options{Source: source})
}

// ConnectWith is Connect with more options (clock, ids).
func (s *Scratch) ConnectWith(ctx context.Context, opts bus.Options) (*bus.Bus, error) {
	opts.URL = s.Server.ClientURL()
	opts.NATSOptions = append(opts.NATSOptions, s.Server.InProcess())
	// The first connection creates the streams. Later ones must not
	// update them: a stream update racing with a consumer being created
	// is a data race inside nats-server (seen with -race).
	s.mu.Lock()
	opts.ReadOnly = opts.ReadOnly || len(s.buses) > 0
	s.mu.Unlock()
	if opts.Logger == nil {
		opts.Logger = s.log
	}
	b, err := bus.Connect(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("scratch bus: %w", err)
	}
	s.mu.Lock()
	s.buses = append(s.buses, b)
	s.mu.Unlock()
	return b, nil
}

// Close closes the connections, stops the server and removes its store.
func (s *Scratch) Close() error {
	var errs []error
	s.mu.Lock()
	buses := s.buses
	s.buses = nil
	s.mu.Unlock()
	for i := len(buses) - 1; i >= 0; i-- {
		if err := buses[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	s.Server.Shutdown()
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
