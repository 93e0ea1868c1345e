package wiring_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/internal/wiring"
)

// An agent started by a Set, streaming its step from a model over HTTP,
// sends the pieces of the reply live as it is generated: `vera run` (the
// cli identity) gathers from them the reply that vera.model.responded
// then records.
func TestAgentStreamsItsStepLive(t *testing.T) {
	srv, store := bustest.StartSecureServer(t)
	bustest.ConnectAs(t, srv.ClientURL(), store, auth.Admin, bus.Options{}) // creates the streams
	thought := strings.Repeat("I will look at the input directory first. ", 20)
	model := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{
		Content:      "THOUGHT: " + thought + "\nACTION: {\"tool\":\"shell\",\"args\":{\"cmd\":\"ls /input\"}}\nEVIDENCE_USED: none\nSTATUS_UPDATE: continuing\n",
		Reasoning:    "The task asks for a file listing.",
		StreamChunks: 80, ChunkDelay: 2 * time.Millisecond,
	}))
	cli := bustest.ConnectAs(t, srv.ClientURL(), store, catalog.ComponentCLI, bus.Options{})
	const run = "01J9LIVE00000000000000000A"
	var r live.Reply
	pieces := make(chan live.Piece, 1024)
	sub, err := live.Subscribe(cli.Conn(), run, func(p live.Piece) { pieces <- p })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := cli.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	set := wiring.Set{
		Logger: bustest.Logger(t),
		Connect: func(ctx context.Context, identity string) (*bus.Bus, error) {
			return bus.Connect(ctx, bus.Options{URL: srv.ClientURL(), CredsFile: store.Path(identity), Source: identity, ReadOnly: true})
		},
		Agent: &agents.Config{},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sup component.Supervisor
	sup.Start(ctx)
	set.Start(ctx, &sup)
	defer func() { cancel(); _ = sup.Stop() }()

	ev, err := cli.Events.New(run, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "list /input", WorkDir: t.TempDir(),
		Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted"}, MaxSteps: 3}, SubmittedBy: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	var responded *catalog.ModelResponded
	deadline := time.After(30 * time.Second)
	for responded == nil {
		select {
		case p := <-pieces:
			r.Add(p)
		case <-deadline:
			t.Fatalf("no vera.model.responded; live so far %+v", r)
		case <-time.After(50 * time.Millisecond):
			evs, err := cli.ReadRun(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if e.Type == catalog.TypeModelResponded {
					var d catalog.ModelResponded
					if err := e.DecodeData(&d); err != nil {
						t.Fatal(err)
					}
					responded = &d
				}
			}
		}
	}
	// The last pieces may come just after the record.
	wait := time.After(2 * time.Second)
	for r.Content != responded.Text {
		select {
		case p := <-pieces:
			r.Add(p)
		case <-wait:
			t.Fatalf("live reply %q\nrecorded %q", r.Content, responded.Text)
		}
	}
	if r.CallID != responded.CallID || r.Step != responded.Step || r.Reasoning != responded.Reasoning || r.Missed {
		t.Fatalf("live %+v\nrecorded %+v", r, responded)
	}
	t.Logf("step %d: %d bytes streamed in %d live pieces", r.Step, len(r.Content)+len(r.Reasoning), r.LastSeq)
}
