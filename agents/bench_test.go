package agents

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/bus/embedded"
	"github.com/vera-run/vera/internal/llm"
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
		return measureRun(b, h, id, catalog.RunConfig{MaxSteps: benchStepsPerRun})
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

// measureRun runs one benchmarked run to its step budget and returns its
// wall time, the time spent in the model and in the tool, and its steps.
func measureRun(b *testing.B, h *harness, id string, cfg catalog.RunConfig) (wall, model, tool time.Duration, steps int) {
	h.submit(id, cfg)
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
		case *catalog.AgentStep:
			if p.FormatError != "" {
				b.Fatalf("%s step %d: %s", id, p.Step, p.FormatError)
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

// BenchmarkStepProtocol compares the agent's overhead per step (as in
// BenchmarkStep: wall time minus model and tool time) with native tools
// and a streamed reply (its pieces passed to Config.Deltas) against the
// text protocol without streaming, on the same scripted 30-step run and
// the same server, the two runs alternating in every iteration. Reported:
// text-overhead-ms/step, native-overhead-ms/step and native/text, the
// ratio (the aim is at most 1.1). Run with:
//
//	go test -run '^$' -bench BenchmarkStepProtocol -benchtime 5x ./agents
func BenchmarkStepProtocol(b *testing.B) {
	srv, err := embedded.Start(embedded.Options{DataDir: b.TempDir(), Listen: "127.0.0.1:0", ServerName: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(srv.Shutdown)
	rule := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		n := stepOf(req.LastUserMessage())
		tool, arg, val, text := "shell", "cmd", "true", reply(shell("true"), "continuing")
		if n%3 == 0 {
			note := fmt.Sprintf("step %d: nothing new", n)
			tool, arg, val, text = "notes_append", "text", note, reply(notes(note), "continuing")
		}
		if len(req.Tools) > 0 {
			return toolCall(tool, callArgs(arg, val, nil, "continuing")), true
		}
		return scriptedmodel.Text(text), true
	})
	h := newHarnessOn(b, srv, scriptedmodel.WithRules(rule))
	h.tools(func(catalog.ToolRequested) catalog.ToolFinished {
		return catalog.ToolFinished{ExitCode: 0, DurationMS: 0}
	})
	var pieces atomic.Int64
	h.start(h.newAgent("bench", func(c *Config) {
		c.Deltas = func(string, int, string) func(llm.Delta) { return func(llm.Delta) { pieces.Add(1) } }
	}))
	off, on := false, true
	textCfg := catalog.RunConfig{MaxSteps: benchStepsPerRun, Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted",
		ToolProtocol: catalog.ToolProtocolText, Stream: &off}}
	nativeCfg := catalog.RunConfig{MaxSteps: benchStepsPerRun, Model: catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted",
		ToolProtocol: catalog.ToolProtocolNative, Stream: &on}}
	measureRun(b, h, "warm-up-text", textCfg)
	measureRun(b, h, "warm-up-native", nativeCfg)
	b.ResetTimer()
	var textOver, nativeOver time.Duration
	var textSteps, nativeSteps int
	for i := range b.N {
		w, m, t, n := measureRun(b, h, fmt.Sprintf("bench-text-%d", i), textCfg)
		textOver, textSteps = textOver+w-m-t, textSteps+n
		w, m, t, n = measureRun(b, h, fmt.Sprintf("bench-native-%d", i), nativeCfg)
		nativeOver, nativeSteps = nativeOver+w-m-t, nativeSteps+n
	}
	b.StopTimer()
	if pieces.Load() == 0 {
		b.Fatal("the native runs streamed no pieces to Config.Deltas")
	}
	text := float64(textOver) / float64(textSteps) / float64(time.Millisecond)
	native := float64(nativeOver) / float64(nativeSteps) / float64(time.Millisecond)
	b.ReportMetric(text, "text-overhead-ms/step")
	b.ReportMetric(native, "native-overhead-ms/step")
	b.ReportMetric(native/text, "native/text")
}
