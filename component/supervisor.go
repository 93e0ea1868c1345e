package component

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Supervisor runs a set of components and other long-running units of one
// process (vera up, vera run, a single-component command, a replay) on one
// context: the first unit that fails stops all the others, and its name is
// in the error; when the context ends, every unit drains. A Supervisor is
// used once.
type Supervisor struct {
	// Logger records each unit's start and end; nil means slog.Default().
	Logger *slog.Logger

	mu      sync.Mutex
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	results []Result
	errs    []error
	failed  chan struct{}
	once    sync.Once
}

// Result is how one unit ended.
type Result struct {
	Name    string
	Started time.Time
	Ran     time.Duration
	Err     error // nil: it returned nil or stopped because its context ended
}

// Start begins running units on a context derived from ctx. Units added
// after Start run at once.
func (s *Supervisor) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx != nil {
		return
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	s.failed = make(chan struct{})
}

func (s *Supervisor) log() *slog.Logger {
	if s.Logger == nil {
		return slog.Default()
	}
	return s.Logger
}

// Add runs component c (named by c.Name()).
func (s *Supervisor) Add(c Component) { s.Go(c.Name(), c.Run) }

// Go runs unit name. Starting the Supervisor first is optional: Go starts
// it on context.Background() (stop it with Stop).
func (s *Supervisor) Go(name string, run func(ctx context.Context) error) {
	s.Start(context.Background())
	s.mu.Lock()
	ctx := s.ctx
	i := len(s.results)
	s.results = append(s.results, Result{Name: name, Started: time.Now()})
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := run(ctx)
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			err = nil // stopped because it was asked to
		}
		s.mu.Lock()
		s.results[i].Ran = time.Since(s.results[i].Started)
		s.results[i].Err = err
		if err != nil {
			s.errs = append(s.errs, fmt.Errorf("%s: %w", name, err))
		}
		s.mu.Unlock()
		if err != nil {
			s.log().Error("component failed; stopping the others", "component", name, "err", err)
			s.once.Do(func() { close(s.failed) })
			s.cancel()
			return
		}
		s.log().Debug("component stopped", "component", name)
	}()
}

// Failed is closed when a unit has failed (the others are then stopping).
func (s *Supervisor) Failed() <-chan struct{} {
	s.Start(context.Background())
	return s.failed
}

// Err returns the failures so far, each prefixed with its unit's name.
func (s *Supervisor) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// Stop cancels every unit, waits for all to return, and returns their
// failures.
func (s *Supervisor) Stop() error {
	s.Start(context.Background())
	s.cancel()
	s.wg.Wait()
	return s.Err()
}

// Wait runs until ctx ends or a unit fails, then stops every unit and
// returns their failures (nil when all drained cleanly).
func (s *Supervisor) Wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
	case <-s.Failed():
	}
	return s.Stop()
}

// Results reports how each unit has ended so far, in the order they were
// added (Ran is zero for a unit still running).
func (s *Supervisor) Results() []Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Result(nil), s.results...)
}

// Names lists the units added so far.
func (s *Supervisor) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.results))
	for i, r := range s.results {
		out[i] = r.Name
	}
	return out
}
