package component_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vera-run/vera/component"
)

// A failing unit stops every other one, and the error names it.
func TestSupervisorStopsAllWhenOneFails(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	var s component.Supervisor
	s.Start(context.Background())
	stopped := make(chan string, 2)
	for _, name := range []string{"a", "b"} {
		s.Go(name, func(ctx context.Context) error {
			<-ctx.Done()
			stopped <- name
			return nil
		})
	}
	boom := errors.New("boom")
	s.Go("breaker", func(context.Context) error { return boom })
	select {
	case <-s.Failed():
	case <-time.After(5 * time.Second):
		t.Fatal("Failed not closed")
	}
	err := s.Stop()
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "breaker: ") {
		t.Fatalf("Stop = %v, want breaker: boom", err)
	}
	if len(stopped) != 2 {
		t.Fatalf("%d of 2 other units stopped", len(stopped))
	}
	for _, r := range s.Results() {
		if (r.Name == "breaker") != (r.Err != nil) {
			t.Errorf("result %+v", r)
		}
	}
}

// Cancelling the context drains every unit; a unit that returns
// context.Canceled on the way out is not a failure.
func TestSupervisorDrainsOnCancel(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	var s component.Supervisor
	s.Start(ctx)
	drained := make(chan struct{})
	s.Go("slow drain", func(ctx context.Context) error {
		<-ctx.Done()
		time.Sleep(50 * time.Millisecond)
		close(drained)
		return ctx.Err()
	})
	time.AfterFunc(20*time.Millisecond, cancel)
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("Wait = %v, want nil", err)
	}
	select {
	case <-drained:
	default:
		t.Fatal("Wait returned before the unit drained")
	}
	if got := s.Names(); len(got) != 1 || got[0] != "slow drain" {
		t.Errorf("Names = %v", got)
	}
}

func TestDurableConvention(t *testing.T) {
	for _, tc := range []struct{ component, purpose, want string }{
		{"agent", "", "agent"},
		{"verifier.logic", "", "verifier-logic"},
		{"sandboxd", "control", "sandboxd-control"},
		{"projector", "files", "projector-files"},
	} {
		if got := component.Durable(tc.component, tc.purpose); got != tc.want {
			t.Errorf("Durable(%q, %q) = %q, want %q", tc.component, tc.purpose, got, tc.want)
		}
	}
}
