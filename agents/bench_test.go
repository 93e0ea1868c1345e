package agents

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/bus/embedded"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// benchStepsPerRun is the length of one benchmarked run: a shell command
// (`true`) at two steps out of three and a notes append at every third
// (the notes gate's schedule), until the step budget ends the run.
const benchStepsPerRun = 30

// BenchmarkStep measures the agent's own cost per step: the wall time of
// a run (vera.run.started to vera.run.finished) minus the time spent in
// the model (each vera.model.requested to its vera.model.responded) and
// in the tool (vera.tool.finished duration_ms), divided by the steps.
// The model is the scripted server over real HTTP, the tool an in-test
// consumer that answers `true` at once; the bus is a real embedded
// JetStream server (file store, fsync on every write).
//
// Reported: overhead-ms/step (the agent, its bus round trips and its
// event recording), overhead-% (its share of a step), model-ms/step,
// step-ms, and overhead/raw-publish: the overhead per step as a multiple
// of one raw sequential publish on the same server (the agent stores
// about seven events per step, each acknowledged after its fsync, so a
// figure near 7 means the step costs what its events cost to store). With model=0s the overhead is the whole step but the model's
// loopback HTTP; model=50ms gives the share of a step with a typical
// fast model. Run with:
//
//	go test -run '^$' -bench BenchmarkStep -benchtime 5x ./agents
//
// The fsync=interval variants run the same on a server that flushes its
// store every 2 minutes instead of after every write (NATS's own default),
// to tell the agent's cost apart from the disk's.
func BenchmarkStep(b *testing.B) {
	for _, fsync := range []string{"always", "interval"} {
		for _, delay := range []time.Duration{0, 50 * time.Millisecond} {
			b.Run("fsync="+fsync+"/model="+delay.String(), func(b *testing.B) {
				opts := embedded.Options{DataDir: b.TempDir(), Listen: "127.0.0.1:0", ServerName: "bench"}
				if fsync == "interval" {
					opts.SyncInterval = 2 * time.Minute
				}
				srv, err := embedded.Start(opts)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(srv.Shutdown)
				benchStep(b, srv, delay)
			})
		}
	}
}

func benchStep(b *testing.B, srv *embedded.Server, delay time.Duration) {
	rule := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		n := stepOf(req.LastUserMessage())
		text := reply(shell("true"), "continuing")
		if n%3 == 0 {
			text = reply(notes(fmt.Sprintf("step %d: nothing new", n)), "continuing")
		}
		r := scriptedmodel.Text(text)
		r.Delay = delay
		return r, true
	})
	h := newHarnessOn(b, srv, scriptedmodel.WithRules(rule))
	h.tools(func(catalog.ToolRequested) catalog.ToolFinished {
		return catalog.ToolFinished{ExitCode: 0, DurationMS: 0}
	})
	h.start(h.newAgent("bench"))

	run := func(id string) (wall, model, tool time.Duration, steps int) {
		h.submit(id, catalog.RunConfig{MaxSteps: benchStepsPerRun})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for rec, err := range h.bus.Read(ctx, bus.ReadOptions{RunID: id, Types: []string{catalog.TypeRunFinished}, Follow: true}) {
			if err != nil {
				b.Fatalf("wait for %s: %v", id, err)
			}
			_ = rec
			break
		}
		var started, finished time.Time
		requested := map[string]time.Time{}
		for _, d := range h.events(id) {
			switch p := d.p.(type) {
			case *catalog.RunStarted:
				started = d.ev.Time
			case *catalog.RunFinished:
				finished = d.ev.Time
				steps = p.Steps
				if p.Outcome != catalog.OutcomeUnresolved || p.Reason != "step budget exhausted" {
					b.Fatalf("%s finished %+v", id, p)
				}
			case *catalog.ModelRequested:
				requested[fmt.Sprint(p.CallID, p.Attempt)] = d.ev.Time
			case *catalog.ModelResponded:
				model += d.ev.Time.Sub(requested[fmt.Sprint(p.CallID, p.Attempt)])
			case *catalog.ToolFinished:
				tool += time.Duration(p.DurationMS) * time.Millisecond
			}
		}
		return finished.Sub(started), model, tool, steps
	}

	run("warm-up")
	b.ResetTimer()
	var wall, model, tool time.Duration
	steps := 0
	for i := range b.N {
		w, m, t, n := run(fmt.Sprintf("bench-%d", i))
		wall, model, tool, steps = wall+w, model+m, tool+t, steps+n
	}
	b.StopTimer()
	// The raw thing on the same server: one sequential publish (stored
	// and fsynced before its ack), which bounds what a step can cost.
	const raws = 50
	t0 := time.Now()
	for i := range raws {
		ev, err := h.bus.Events.New("bench-raw", catalog.NotesAppended{Step: i + 1, Author: catalog.AuthorAgent, Text: "raw"})
		if err == nil {
			_, err = h.bus.Publish(context.Background(), ev)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	raw := time.Since(t0) / raws
	per := func(d time.Duration) float64 { return float64(d) / float64(steps) / float64(time.Millisecond) }
	overhead := wall - model - tool
	b.ReportMetric(per(overhead), "overhead-ms/step")
	b.ReportMetric(100*float64(overhead)/float64(wall), "overhead-%")
	b.ReportMetric(per(model), "model-ms/step")
	b.ReportMetric(per(wall), "step-ms")
	b.ReportMetric(float64(overhead)/float64(steps)/float64(raw), "overhead/raw-publish")
}
