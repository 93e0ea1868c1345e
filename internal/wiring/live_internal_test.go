package wiring

import (
	"context"
	"testing"
	"time"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/llm"
)

// The agent a Set starts sends its streamed replies' pieces live, as the
// agent identity, where `vera run` (cli) and the dashboard see them; with
// NoLive it sends none.
func TestSetGivesTheAgentItsLivePublisher(t *testing.T) {
	srv, store := bustest.StartSecureServer(t)
	bustest.ConnectAs(t, srv.ClientURL(), store, auth.Admin, bus.Options{}) // creates the streams
	viewers := map[string]*bus.Bus{}
	pieces := make(chan live.Piece, 16)
	for _, name := range []string{catalog.ComponentCLI, catalog.ComponentDashboard} {
		b := bustest.ConnectAs(t, srv.ClientURL(), store, name, bus.Options{ReadOnly: true})
		sub, err := live.Subscribe(b.Conn(), "wired", func(p live.Piece) { pieces <- p })
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
		if err := b.Conn().Flush(); err != nil {
			t.Fatal(err)
		}
		viewers[name] = b
	}
	for _, noLive := range []bool{false, true} {
		got := make(chan agents.Config, 1)
		newAgent = func(b *bus.Bus, cfg agents.Config) (*agents.Agent, error) {
			got <- cfg
			return agents.New(b, cfg)
		}
		t.Cleanup(func() { newAgent = agents.New })
		set := Set{
			Logger: bustest.Logger(t),
			Connect: func(ctx context.Context, identity string) (*bus.Bus, error) {
				return bus.Connect(ctx, bus.Options{URL: srv.ClientURL(), CredsFile: store.Path(identity), Source: identity, ReadOnly: true})
			},
			Agent:  &agents.Config{},
			NoLive: noLive,
		}
		ctx, cancel := context.WithCancel(context.Background())
		var sup component.Supervisor
		sup.Start(ctx)
		set.Start(ctx, &sup)
		var cfg agents.Config
		select {
		case cfg = <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("the agent was not built")
		}
		if noLive {
			if cfg.Deltas != nil {
				t.Fatal("NoLive: the agent still has a live sink")
			}
		} else {
			if cfg.Deltas == nil {
				t.Fatal("the agent has no live sink")
			}
			sink := cfg.Deltas("wired", 2, "call-9")
			sink(llm.Delta{Content: "partial"})
			sink(llm.Delta{})
			for range viewers {
				select {
				case p := <-pieces:
					if p.CallID != "call-9" || p.Step != 2 || p.Content != "partial" || !p.Done {
						t.Fatalf("piece %+v", p)
					}
				case <-time.After(5 * time.Second):
					t.Fatal("a viewer received no live piece from the agent's connection")
				}
			}
		}
		cancel()
		if err := sup.Stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
}
