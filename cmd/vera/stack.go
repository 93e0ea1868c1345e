package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/vera-run/vera/bus"
)

// stack runs VERA's components in this process, each on its own bus
// connection (as separate processes would), until ctx ends; wait then
// waits for every one of them to drain.
type stack struct {
	g   *globals
	url string
	log *slog.Logger

	wg     sync.WaitGroup
	mu     sync.Mutex
	names  []string
	errs   []error
	failed chan struct{} // closed at the first component failure
	once   sync.Once
}

func newStack(g *globals, url string, log *slog.Logger) *stack {
	return &stack{g: g, url: url, log: log, failed: make(chan struct{})}
}

// connect opens a connection stamped with source, as the identity of the
// same name.
func (s *stack) connect(ctx context.Context, source string) (*bus.Bus, error) {
	return bus.Connect(ctx, bus.Options{URL: s.url, CredsFile: s.g.credsFor("", source), Source: source, Logger: s.log,
		Replicas: s.g.replicas, ConnectWait: 30 * time.Second})
}

// add starts component name on its own connection, stamped with source.
func (s *stack) add(ctx context.Context, name, source string, run func(context.Context, *bus.Bus) error) {
	s.spawn(name, func() error {
		b, err := s.connect(ctx, source)
		if err != nil {
			return err
		}
		defer b.Close()
		return run(ctx, b)
	})
}

// addFunc starts component name, which opens its own connections.
func (s *stack) addFunc(ctx context.Context, name string, run func(context.Context) error) {
	s.spawn(name, func() error { return run(ctx) })
}

func (s *stack) spawn(name string, fn func() error) {
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := fn()
		if err == nil || errors.Is(err, context.Canceled) {
			return
		}
		s.log.Error("component stopped", "component", name, "err", err)
		s.mu.Lock()
		s.errs = append(s.errs, fmt.Errorf("%s: %w", name, err))
		s.mu.Unlock()
		s.once.Do(func() { close(s.failed) })
	}()
}

// components returns the names of the components started so far.
func (s *stack) components() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.names...)
}

// Failed is closed when a component stopped with an error.
func (s *stack) Failed() <-chan struct{} { return s.failed }

// err returns the failures so far.
func (s *stack) err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// wait waits for every component to return (cancel their ctx first) and
// returns their failures.
func (s *stack) wait() error {
	s.wg.Wait()
	return s.err()
}

// until waits for ctx to end or a component to fail, then cancels the
// components' context (cancel) and waits for them to drain.
func (s *stack) until(ctx context.Context, cancel context.CancelFunc) error {
	select {
	case <-ctx.Done():
	case <-s.failed:
	}
	cancel()
	return s.wait()
}
