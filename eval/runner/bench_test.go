package runner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
	"github.com/vera-run/vera/eval/evaltest"
	"github.com/vera-run/vera/eval/runner"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/internal/wiring"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// benchModelDelay is the scripted model's time per reply: a small local
// model's latency, so that a run's wall time is mostly the model's, as
// with a real one.
const benchModelDelay = 150 * time.Millisecond

var benchStepRE = regexp.MustCompile(`\[step (\d+)\] ACTION`)

// benchScript: step 1 appends a note (or, withCommand, runs a shell
// command in the run's sandbox), step 2 submits the task's answer.
func benchScript(withCommand bool) scriptedmodel.Rule {
	return scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		u := req.LastUserMessage()
		m := evaltest.TaskRE.FindStringSubmatch(u)
		if m == nil {
			return scriptedmodel.Reply{}, false
		}
		step := 1
		for _, s := range benchStepRE.FindAllStringSubmatch(u, -1) {
			n, _ := strconv.Atoi(s[1])
			step = max(step, n+1)
		}
		var action map[string]any
		switch {
		case step == 1 && withCommand:
			action = map[string]any{"tool": "shell", "args": map[string]string{"cmd": "echo alpha-" + m[1] + " > /work/item.txt && cat /work/item.txt"}}
		case step == 1:
			action = map[string]any{"tool": "notes_append", "args": map[string]string{"text": "Item " + m[1] + " is known."}}
		default:
			k, _ := strconv.Atoi(m[1])
			action = map[string]any{"tool": "submit", "args": map[string]string{"answer": evaltest.Answer(k, true)}}
		}
		b, _ := json.Marshal(action)
		r := scriptedmodel.Text("THOUGHT: next.\nACTION: " + string(b) + "\nEVIDENCE_USED: none\nSTATUS_UPDATE: CONTINUE\n")
		r.Delay = benchModelDelay
		return r, true
	})
}

// BenchmarkEvalConcurrency: an eval of 50 two-step scripted tasks at
// concurrency 8, against the ideal ceil(50/8) × the wall time of one
// run alone measured in the same invocation (median of 5 runs, each from
// its submission to its end, as vera.eval.task_scored's wall_ms). It reports
// the ratio (aim ≤ 1.3) and the eval's overhead per task, (eval wall −
// ideal) / tasks.
//
//	go test ./eval/runner -run '^$' -bench EvalConcurrency -benchtime 1x
func BenchmarkEvalConcurrency(b *testing.B) { benchEval(b, false) }

// BenchmarkEvalConcurrencySandbox is BenchmarkEvalConcurrency with a
// shell command per run: every run gets a container of its own from a
// real sandboxd (Docker and the sandbox image needed).
func BenchmarkEvalConcurrencySandbox(b *testing.B) { benchEval(b, true) }

func benchEval(b *testing.B, withCommand bool) {
	const n, c = 50, 8
	srv, store := bustest.StartSecureServer(b)
	bustest.ConnectAs(b, srv.ClientURL(), store, auth.Admin, bus.Options{})
	model := scriptedmodel.Start(b, scriptedmodel.WithRules(benchScript(withCommand)))
	s := &stackT{url: srv.ClientURL(), store: store, model: model,
		cli: bustest.ConnectAs(b, srv.ClientURL(), store, catalog.ComponentCLI, bus.Options{})}
	if withCommand {
		docker := dockertest.Client(b)
		img := imagetest.Ensure(b)
		root := b.TempDir()
		s.sandbox = &wiring.Sandbox{Docker: docker, Config: sandboxd.Config{Image: img, WorkRoot: filepath.Join(root, "runs"), SpoolDir: filepath.Join(root, "spool"),
			Logger: bustest.Logger(b), WorkRoots: []string{os.TempDir()}}}
	}
	s.startComponents(b)

	var lines strings.Builder
	for k := 1; k <= n; k++ {
		fmt.Fprintf(&lines, `{"id":"b%02d","task":"Item %d: what is its name?","answer":"alpha-%d","scorer":"contains"}`+"\n", k, k, k)
	}
	path := filepath.Join(b.TempDir(), "bench.jsonl")
	if err := os.WriteFile(path, []byte(lines.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	tasks, digest, err := eval.ParseTaskFile(path)
	if err != nil {
		b.Fatal(err)
	}
	base := catalog.EvalProfile{Model: catalog.ModelConfig{BaseURL: model.URL(), Name: "scripted", ToolProtocol: catalog.ToolProtocolText}, MaxSteps: 4}
	profs, err := eval.ResolveProfiles([]string{"no-audit"}, nil, base)
	if err != nil {
		b.Fatal(err)
	}
	opts := func(ts []eval.Task, conc int) runner.Options {
		return runner.Options{TaskSet: path, TaskSetSHA256: digest, Tasks: ts, Profiles: profs, Concurrency: conc,
			Timeout: time.Minute, WorkRoot: b.TempDir(), Logger: bustest.Logger(b),
			ScorerFor: func(spec eval.ScorerSpec) (eval.Scorer, error) { return eval.NewScorer(spec, nil, "") }}
	}
	ctx := context.Background()
	for b.Loop() {
		// One run alone: an eval of one task (the same path, scoring
		// included), 5 times, median.
		var one, evalOfOne []time.Duration
		for i := range 5 {
			start := time.Now()
			res, err := runner.Run(ctx, s.cli, opts(tasks[i:i+1], 1))
			if err != nil || len(res.Report.Results) != 1 || !res.Report.Results[0].Correct || res.Report.Results[0].ToolCalls != boolInt(withCommand) {
				b.Fatalf("one run: %v %+v", err, res)
			}
			evalOfOne = append(evalOfOne, time.Since(start))
			// The run's own wall time, submission to end.
			one = append(one, time.Duration(res.Report.Results[0].WallMS)*time.Millisecond)
		}
		slices.Sort(one)
		slices.Sort(evalOfOne)
		alone := one[len(one)/2]
		start := time.Now()
		res, err := runner.Run(ctx, s.cli, opts(tasks, c))
		if err != nil {
			b.Fatal(err)
		}
		wall := time.Since(start)
		if len(res.Report.Results) != n || res.Report.Profiles[0].FinalAccuracy != 1 {
			b.Fatalf("eval: %d results, accuracy %v", len(res.Report.Results), res.Report.Profiles[0].FinalAccuracy)
		}
		ideal := time.Duration(math.Ceil(float64(n)/float64(c))) * alone
		b.ReportMetric(alone.Seconds(), "s/run-alone")
		b.ReportMetric(wall.Seconds(), "s/eval")
		b.ReportMetric(wall.Seconds()/ideal.Seconds(), "ratio-to-ideal")
		b.ReportMetric(float64((wall-ideal).Milliseconds())/n, "ms-overhead/task")
		b.Logf("%d tasks at concurrency %d: eval %s; one run alone %s (its submission to its end, median of 5: %v; an eval of that one task took %v); ideal ceil(%d/%d)×alone = %s; ratio %.2f; overhead %.0f ms/task",
			n, c, wall.Round(time.Millisecond), alone.Round(time.Millisecond), one, evalOfOne, n, c, ideal.Round(time.Millisecond), wall.Seconds()/ideal.Seconds(), float64((wall-ideal).Milliseconds())/n)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
