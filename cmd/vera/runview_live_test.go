package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/llm"
)

// publishExample publishes the catalogue's example of typ on run, changed
// by edit.
func publishExample[T catalog.Payload](t *testing.T, ctx context.Context, b *bus.Bus, run, typ string, edit func(T)) {
	t.Helper()
	e, ok := catalog.Lookup(typ)
	if !ok {
		t.Fatalf("no type %s", typ)
	}
	data, err := json.Marshal(e.Example)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := catalog.Decode(e.Type, data)
	if err != nil {
		t.Fatal(err)
	}
	p := raw.(T)
	edit(p)
	ev, err := b.Events.New(run, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
}

var liveLineRE = regexp.MustCompile(`^\[\d+s\] step 1 ▸ (.*)$`)

// `vera run` on a terminal: the status line shows the end of the agent's
// reply while it streams in (the live pieces), and each step shows its
// reasoning collapsed to its first line, or whole with --show-reasoning.
func TestRunShowsTheReplyLiveAndItsReasoning(t *testing.T) {
	for _, full := range []bool{false, true} {
		_, b := bustest.New(t)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run := "live-view"
		var out, errOut syncBuffer
		type result struct {
			fin *catalog.RunFinished
			err error
		}
		done := make(chan result, 1)
		go func() {
			fin, err := followRun(ctx, b, run, &out, &errOut, followOptions{statusLine: true, showReasoning: full}, nil)
			done <- result{fin, err}
		}()
		publishExample(t, ctx, b, run, catalog.TypeRunStarted, func(*catalog.RunStarted) {})
		waitFor(t, "the run's start", func() bool { return strings.Contains(out.String(), "started by") })

		pub := live.NewPublisher(b.Conn(), live.Options{Interval: 10 * time.Millisecond, Logger: bustest.Logger(t)})
		defer pub.Close()
		sink := pub.Deltas(run, 1, "call-1")
		sink(llm.Delta{Reasoning: "Let me think about the release.\nThe date is on python.org."})
		waitFor(t, "the reasoning on the status line", func() bool {
			return strings.Contains(errOut.String(), "step 1 ▸ thinking: …") || strings.Contains(errOut.String(), "step 1 ▸ thinking: Let me think")
		})
		answer := strings.Repeat("filler words ", 20) + "THOUGHT: check python.org for the release date"
		for _, w := range strings.SplitAfter(answer, " ") {
			sink(llm.Delta{Content: w})
		}
		waitFor(t, "the end of the reply on the status line", func() bool {
			return strings.Contains(errOut.String(), "step 1 ▸ …") && strings.Contains(errOut.String(), "check python.org for the release date")
		})
		lines := 0
		for _, line := range strings.Split(errOut.String(), "\r\033[K") {
			if m := liveLineRE.FindStringSubmatch(line); m != nil {
				lines++
				if n := len([]rune(m[1])); n > liveShow {
					t.Fatalf("live line holds %d characters, want at most %d: %q", n, liveShow, m[1])
				}
			}
		}
		if lines == 0 {
			t.Fatalf("no live line in %q", errOut.String())
		}
		sink(llm.Delta{})

		publishExample(t, ctx, b, run, catalog.TypeModelResponded, func(d *catalog.ModelResponded) {
			d.CallID, d.Step = "call-1", 1
			d.Reasoning = "Let me think about the release.\nThe date is on python.org.\nCheck it."
		})
		// A piece that comes after the reply is recorded is not shown.
		waitFor(t, "the live line cleared", func() bool {
			view := errOut.String()
			return strings.HasSuffix(view, "\r\033[K") || !strings.Contains(view[strings.LastIndex(view, "\r\033[K"):], "▸")
		})
		lateSink := pub.Deltas(run, 1, "call-1")
		lateSink(llm.Delta{Content: "LATE PIECE"})
		time.Sleep(1500 * time.Millisecond) // the status line is redrawn every second
		if strings.Contains(errOut.String(), "LATE PIECE") {
			t.Fatalf("a late piece of a recorded reply was shown: %q", errOut.String())
		}
		publishExample(t, ctx, b, run, catalog.TypeAgentStep, func(d *catalog.AgentStep) { d.Step = 1 })
		publishExample(t, ctx, b, run, catalog.TypeRunFinished, func(*catalog.RunFinished) {})
		r := <-done
		if r.err != nil || r.fin == nil {
			t.Fatalf("follow: %v %v", r.fin, r.err)
		}
		got := out.String()
		if full {
			for _, want := range []string{"  reasoning:\n", "  │ Let me think about the release.\n", "  │ The date is on python.org.\n", "  │ Check it.\n"} {
				if !strings.Contains(got, want) {
					t.Errorf("--show-reasoning: output lacks %q:\n%s", want, got)
				}
			}
		} else if want := "  reasoning: Let me think about the release. (2 more lines; --show-reasoning)\n"; !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
		// The step's line comes first, its reasoning under it.
		if i, j := strings.Index(got, "step 1  "), strings.Index(got, "reasoning:"); i < 0 || j < i {
			t.Errorf("reasoning not under its step's line:\n%s", got)
		}
		// The live text is only ever on the status line (stderr).
		if strings.Contains(got, "filler words") {
			t.Errorf("the live reply leaked into the output:\n%s", got)
		}
	}
}

// Without a terminal (or with --json) nothing is drawn and no live
// subscription is made.
func TestRunWithoutTerminalShowsNoLiveLine(t *testing.T) {
	_, b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := "no-tty"
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := followRun(ctx, b, run, &out, &errOut, followOptions{}, nil)
		done <- err
	}()
	publishExample(t, ctx, b, run, catalog.TypeRunStarted, func(*catalog.RunStarted) {})
	waitFor(t, "the run's start", func() bool { return strings.Contains(out.String(), "started by") })
	pub := live.NewPublisher(b.Conn(), live.Options{Interval: 10 * time.Millisecond, Logger: bustest.Logger(t)})
	defer pub.Close()
	sink := pub.Deltas(run, 1, "call-1")
	sink(llm.Delta{Content: "partial reply"})
	sink(llm.Delta{})
	time.Sleep(300 * time.Millisecond)
	publishExample(t, ctx, b, run, catalog.TypeRunFinished, func(*catalog.RunFinished) {})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String()+errOut.String(), "partial reply") || errOut.String() != "" {
		t.Fatalf("without a terminal: stdout %q, stderr %q", out.String(), errOut.String())
	}
}
