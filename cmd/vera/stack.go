package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/wiring"
)

// stack runs VERA's components (and this process's other long-running
// parts: metrics, the dashboard) under one component.Supervisor: each
// component on its own bus connection, as separate processes would; the
// first that fails stops the others, named in the error.
type stack struct {
	g   *globals
	url string
	log *slog.Logger
	sup component.Supervisor
}

func newStack(g *globals, url string, log *slog.Logger) *stack {
	s := &stack{g: g, url: url, log: log}
	s.sup.Logger = log
	return s
}

// connect opens a connection stamped with source, as the identity of the
// same name.
func (s *stack) connect(ctx context.Context, source string) (*bus.Bus, error) {
	return bus.Connect(ctx, bus.Options{URL: s.url, CredsFile: s.g.credsFor("", source), Source: source, Logger: s.log,
		Replicas: s.g.replicas, ConnectWait: 30 * time.Second})
}

// start runs the components of set until ctx ends (the first call's ctx
// is the stack's).
func (s *stack) start(ctx context.Context, set wiring.Set) {
	s.sup.Start(ctx)
	set.Connect = s.connect
	if set.Logger == nil {
		set.Logger = s.log
	}
	set.Start(ctx, &s.sup)
}

// addFunc starts a unit that is not a component (metrics, HTTP).
func (s *stack) addFunc(ctx context.Context, name string, run func(context.Context) error) {
	s.sup.Start(ctx)
	s.sup.Go(name, run)
}

// components returns the names of the units started so far.
func (s *stack) components() []string { return s.sup.Names() }

// Failed is closed when a unit stopped with an error.
func (s *stack) Failed() <-chan struct{} { return s.sup.Failed() }

// err returns the failures so far.
func (s *stack) err() error { return s.sup.Err() }

// wait stops every unit, waits for them to drain, and returns their
// failures.
func (s *stack) wait() error { return s.sup.Stop() }

// until waits for ctx to end or a unit to fail, then cancels the units'
// context (cancel) and waits for them to drain.
func (s *stack) until(ctx context.Context, cancel context.CancelFunc) error {
	select {
	case <-ctx.Done():
	case <-s.sup.Failed():
	}
	cancel()
	return s.sup.Stop()
}
