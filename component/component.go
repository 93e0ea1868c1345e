package component

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
)

// Component is one of VERA's consumers of the bus.
type Component interface {
	// Name is the component's catalogue name (catalog.ComponentAgent…),
	// which is also the name of its identity on the bus.
	Name() string
	// Consumes lists the catalogue types the component reacts to.
	Consumes() []string
	// Produces lists the catalogue types the component publishes.
	Produces() []string
	// Run consumes until ctx ends, lets the deliveries in flight finish,
	// and returns nil; an error means the component could not run.
	Run(ctx context.Context) error
}

// Models returns the model client of a run's model settings. The clients
// of a component should record their calls on its bus (llmbus), and may be
// shared between runs with the same settings.
type Models func(runID string, mc catalog.ModelConfig) (llm.Completer, error)

// Durable returns the name of a component's durable consumer: the
// component's catalogue name with its dots as dashes, followed by
// "-"+purpose when the component has more than one consumer
// (Durable("verifier.logic", "") is "verifier-logic", Durable("sandboxd",
// "control") "sandboxd-control").
func Durable(component, purpose string) string {
	name := strings.ReplaceAll(component, ".", "-")
	if purpose != "" {
		name += "-" + purpose
	}
	return name
}

// Logger returns l, or slog.Default() when l is nil, tagged with the
// component's name: the one logger default of every component.
func Logger(l *slog.Logger, component string) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return l.With("component", component)
}

// Consume runs b.Consume with h behind Checked.
func Consume(ctx context.Context, b *bus.Bus, cfg bus.ConsumerConfig, h bus.Handler) error {
	return b.Consume(ctx, cfg, Checked(h))
}

// Checked returns a handler that checks a catalogued event's data against
// its type's schema before calling h: data that does not decode or that
// the schema rejects (a requester "root", a negative timeout) is
// dead-lettered at once with the reason (bus.Permanent). Events of types
// the catalogue does not know (outside tools' ext types, a newer VERA's)
// reach h unchecked; a component ignores what it does not know.
func Checked(h bus.Handler) bus.Handler { return CheckedWith(h, nil) }

// Rejected is told of an event Checked rejects, before it is
// dead-lettered, so that the component can record the rejection where its
// users look (the agent finishes a run whose task was rejected). An error
// leaves the event to be redelivered and rejected again.
type Rejected func(ctx context.Context, m *bus.Message, reason error) error

// CheckedWith is Checked, calling onReject (when not nil) for each event
// it rejects.
func CheckedWith(h bus.Handler, onReject Rejected) bus.Handler {
	return func(ctx context.Context, m *bus.Message) error {
		if _, ok := catalog.Lookup(m.Event.Type); ok {
			if err := catalog.Validate(m.Event.Type, m.Event.Data); err != nil {
				if onReject != nil {
					if rerr := onReject(ctx, m, err); rerr != nil {
						return fmt.Errorf("record the rejection of %s: %w", m.Event.Type, rerr)
					}
				}
				return bus.Permanent(fmt.Errorf("rejected: %w", err))
			}
		}
		return h(ctx, m)
	}
}
