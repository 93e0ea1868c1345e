package agents

import (
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/catalog"
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
