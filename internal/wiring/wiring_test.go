package wiring_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/agents"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/projector"
	"github.com/vera-run/vera/verifierd/logic"
)

// Every component connects as its own identity; one that cannot stops the
// others, and the error names it.
func TestSetStartsEachAsItsIdentityAndNamesTheFailure(t *testing.T) {
	srv, store := bustest.StartSecureServer(t)
	bustest.ConnectAs(t, srv.ClientURL(), store, auth.Admin, bus.Options{}) // creates the streams
	set := wiring.Set{
		Logger: bustest.Logger(t),
		Connect: func(ctx context.Context, identity string) (*bus.Bus, error) {
			if identity == catalog.ComponentAgent {
				return nil, errors.New("no route to the bus")
			}
			return bus.Connect(ctx, bus.Options{URL: srv.ClientURL(), CredsFile: store.Path(identity), Source: identity, ReadOnly: true})
		},
		Logic:     &logic.Config{},
		Projector: &projector.FilesConfig{},
	}
	var sup component.Supervisor
	sup.Start(context.Background())
	set.Start(context.Background(), &sup)
	// Added last, so the others are running when it fails.
	set2 := set
	set2.Logic, set2.Projector = nil, nil
	set2.Agent = &agents.Config{}
	time.Sleep(200 * time.Millisecond)
	set2.Start(context.Background(), &sup)
	select {
	case <-sup.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the failing component did not stop the set")
	}
	err := sup.Stop()
	if err == nil || !strings.HasPrefix(err.Error(), "agent: connect: no route to the bus") {
		t.Fatalf("err = %v, want it to name the agent", err)
	}
	for _, r := range sup.Results() {
		if r.Name != catalog.ComponentAgent && r.Err != nil {
			t.Errorf("%s: %v (it should have drained cleanly)", r.Name, r.Err)
		}
	}
	if got := strings.Join(sup.Names(), ","); got != "verifier.logic,projector,agent" {
		t.Errorf("units %s", got)
	}
}
