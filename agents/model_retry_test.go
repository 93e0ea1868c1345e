package agents

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// responses returns the run's vera.model.responded of one call, in order.
func responses(ds []decoded, callID string) []*catalog.ModelResponded {
	var out []*catalog.ModelResponded
	for _, r := range ofType[*catalog.ModelResponded](ds) {
		if r.CallID == callID {
			out = append(out, r)
		}
	}
	return out
}

// TestModel500sRetried: the model server answers 500 twice, then the
// reply; the real client retries, each attempt is recorded, and the run
// goes on as if nothing happened.
func TestModel500sRetried(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(
		scriptedmodel.Step(1, scriptedmodel.Reply{Status: 500}),
		scriptedmodel.Step(2, scriptedmodel.Reply{Status: 500}),
		byStep(map[int]string{
			1: reply(shell("ls"), "continuing"),
			2: reply(submitAns("ok"), "RESOLVED"),
		}),
	))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-500x2", catalog.RunConfig{})
	fin := h.waitFinished("run-500x2")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "ok" || fin.Steps != 2 {
		t.Fatalf("finished = %+v", fin)
	}
	if n := h.model.Count(); n != 4 {
		t.Errorf("%d model calls, want 4 (two 500s, then two replies)", n)
	}
	ds := h.events("run-500x2")
	assertOnce(t, ds)
	rs := responses(ds, CallID(1))
	if len(rs) != 3 || rs[0].HTTPStatus != 500 || !rs[0].Retryable || rs[1].HTTPStatus != 500 || rs[1].Attempt != 2 ||
		rs[2].Error != "" || rs[2].Attempt != 3 {
		t.Errorf("responses of step 1 = %s", dump(rs))
	}
	assertModelEventsOnce(t, ds, 2)
}

// TestModelTimeoutRetried: the first attempt takes longer than the run's
// per-attempt model timeout; the client gives up on it and retries, and
// the second attempt's reply is used.
func TestModelTimeoutRetried(t *testing.T) {
	slow := scriptedmodel.Text(reply(submitAns("late but fine"), "RESOLVED"))
	slow.Delay = 30 * time.Second // ends when the client gives up
	h := newHarness(t, scriptedmodel.WithRules(
		scriptedmodel.Step(1, slow),
		byStep(map[int]string{1: reply(submitAns("fine"), "RESOLVED")}),
	))
	h.start(h.newAgent("a1"))
	h.submit("run-timeout", catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", TimeoutMS: 300}})
	start := time.Now()
	fin := h.waitFinished("run-timeout")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "fine" {
		t.Fatalf("finished = %+v", fin)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the run took %v: the per-attempt timeout was not applied", d)
	}
	if n := h.model.Count(); n != 2 {
		t.Errorf("%d model calls, want 2", n)
	}
	ds := h.events("run-timeout")
	rs := responses(ds, CallID(1))
	if len(rs) != 2 || rs[0].Error == "" || !rs[0].Retryable || rs[1].Error != "" || rs[1].Attempt != 2 {
		t.Fatalf("responses = %s", dump(rs))
	}
	if !strings.Contains(rs[0].Error, "timed out") {
		t.Errorf("first attempt's error %q does not say it timed out", rs[0].Error)
	}
	reqs := ofType[*catalog.ModelRequested](ds)
	if len(reqs) != 2 || reqs[0].TimeoutMS != 300 {
		t.Errorf("requests = %s", dump(reqs))
	}
}

// TestCancelInterruptsModelCall: vera.run.cancelled ends the run's model
// call in flight at once (the scripted server would hold the reply for
// minutes), the attempt is recorded as cancelled and not retried, and
// nothing more is decided for the run.
func TestCancelInterruptsModelCall(t *testing.T) {
	slow := scriptedmodel.Text(reply(shell("ls"), "continuing"))
	slow.Delay = 5 * time.Minute
	h := newHarness(t, scriptedmodel.WithRules(scriptedmodel.Step(1, slow)))
	h.tools(echoTools)
	h.start(h.newAgent("a1"))
	h.submit("run-cancel", catalog.RunConfig{})
	ctx := context.Background()
	if err := h.model.WaitForRequests(ctx, 1); err != nil {
		t.Fatal(err)
	}
	ev, err := h.bus.Events.New("run-cancel", catalog.RunCancelled{RequestedBy: "test", Reason: "enough"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.bus.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitUntil(t, "the model call to end", func() bool {
		for _, r := range ofType[*catalog.ModelResponded](h.events("run-cancel")) {
			if r.CallID == CallID(1) {
				return true
			}
		}
		return false
	})
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the model call ended %v after the cancellation", d)
	}
	time.Sleep(500 * time.Millisecond) // anything the agent would still do
	ds := h.events("run-cancel")
	rs := responses(ds, CallID(1))
	if len(rs) != 1 || rs[0].Error == "" || rs[0].Retryable {
		t.Errorf("responses = %s, want one cancelled attempt", dump(rs))
	}
	if n := h.model.Count(); n != 1 {
		t.Errorf("%d model calls, want 1 (no retry after a cancellation)", n)
	}
	if n := len(ofType[*catalog.AgentStep](ds)); n != 0 {
		t.Errorf("%d steps after the cancellation", n)
	}
	if n := h.model.InFlight(); n != 0 {
		t.Errorf("%d model requests still in flight", n)
	}
}

// TestLostReplyRecordRetriesTheStep: the model answered but its
// vera.model.responded could not be stored (the recorder's publish
// failed: here it is dropped, as when the bus refuses it beyond its
// budget). The agent does not act on a reply that is not in the record:
// the step fails, is retried, the model is called again, and the step the
// run shows rests on a recorded reply.
func TestLostReplyRecordRetriesTheStep(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(
		byStep(map[int]string{1: reply(submitAns("recorded"), "RESOLVED")}),
	))
	var dropped atomic.Int32
	a := h.newAgent("a1", func(c *Config) {
		c.Models = func(run string, mc catalog.ModelConfig) (llm.Completer, error) {
			b := bustest.Connect(h.t, h.url, bus.Options{Source: "agents", ReadOnly: true})
			real := llmbus.New(b, llmbus.Options{Logger: bustest.Logger(h.t)})
			cfg := llmbus.Config(mc)
			cfg.Recorder = llm.RecorderFunc{
				OnRequested: real.Requested,
				OnResponded: func(ctx context.Context, rec llm.CallRecord, resp llm.Response, err error) {
					if err == nil && dropped.CompareAndSwap(0, 1) {
						return // the first reply's record is lost
					}
					real.Responded(ctx, rec, resp, err)
				},
			}
			c, err := llm.New(cfg)
			if err != nil {
				return nil, err
			}
			h.t.Cleanup(c.Close)
			return c, nil
		}
	})
	h.start(a)
	h.submit("run-lost-reply", catalog.RunConfig{})
	fin := h.waitFinished("run-lost-reply")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "recorded" {
		t.Fatalf("finished = %+v", fin)
	}
	if dropped.Load() != 1 || h.model.Count() != 2 {
		t.Fatalf("model called %d times (dropped %d records); want the step retried once", h.model.Count(), dropped.Load())
	}
	ds := h.events("run-lost-reply")
	steps := ofType[*catalog.AgentStep](ds)
	rs := responses(ds, CallID(1))
	if len(steps) != 1 || len(rs) != 1 || rs[0].Error != "" {
		t.Fatalf("%d steps, recorded responses %s", len(steps), dump(rs))
	}
}
