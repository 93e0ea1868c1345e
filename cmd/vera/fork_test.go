package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// forkOrigRun is the run of demo/example-run.jsonl: 6 steps, its first
// audited answer at step 3 (so forks at 0 to 2).
const forkOrigRun = "01M7ZYE9KGP9KCTZ7PEG1E464K"

// busWithDemoRun is a bus holding the recorded demo run, imported with
// `vera events import`.
func busWithDemoRun(t *testing.T) string {
	t.Helper()
	t.Setenv("NATS_URL", "")
	veraDataDir(t)
	srv := bustest.StartServer(t)
	if _, errOut, code := runCLI(t, "events", "import", "--nats-url", srv.ClientURL(), filepath.Join("demo", "example-run.jsonl")); code != 0 {
		t.Fatalf("import the demo run: exit %d: %s", code, errOut)
	}
	return srv.ClientURL()
}

// TestForkRefusesBadForkPoints: an unknown run, a step beyond the
// recording, a step at or after the first audited answer and
// contradictory flags are usage errors that name the problem, and
// nothing is submitted.
func TestForkRefusesBadForkPoints(t *testing.T) {
	url := busWithDemoRun(t)
	work := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown run", []string{"NOSUCHRUN", "--at-step", "1"}, "run NOSUCHRUN: no such run on this bus"},
		{"no step", []string{forkOrigRun}, "--at-step N is required"},
		{"negative step", []string{forkOrigRun, "--at-step", "-1"}, "--at-step must be 0 or more"},
		{"beyond the recording", []string{forkOrigRun, "--at-step", "7"}, "--at-step: step 7: run " + forkOrigRun + " has 6 steps recorded; fork at 0 to 2"},
		{"at the audited answer", []string{forkOrigRun, "--at-step", "3"}, "step 3: run " + forkOrigRun + " submitted its first audited answer at step 3, and a fork must branch before it"},
		{"after the audited answer", []string{forkOrigRun, "--at-step", "5"}, "first audited answer at step 3"},
		{"rounds without auditor", []string{forkOrigRun, "--at-step", "1", "--no-auditor", "--audit-rounds", "2"}, "audit rounds given with the auditor off"},
		{"budget below the fork point", []string{forkOrigRun, "--at-step", "2", "--max-steps", "2"}, "the step budget (2) must be above the fork point (2)"},
		{"bad protocol", []string{forkOrigRun, "--at-step", "1", "--tool-protocol", "smoke"}, "--tool-protocol \"smoke\": want auto, native or text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"fork", "--nats-url", url, "--work-dir", filepath.Join(work, strings.ReplaceAll(c.name, " ", "-"))}, c.args...)
			_, errOut, code := runCLI(t, args...)
			if code != exitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("vera %s: exit %d, want %d with %q; stderr:\n%s", strings.Join(args, " "), code, exitUsage, c.want, errOut)
			}
		})
	}
	b := bustest.Connect(t, url, bus.Options{Source: "test"})
	n := 0
	for rec, err := range b.Read(context.Background(), bus.ReadOptions{Types: []string{catalog.TypeTaskSubmitted}}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Event.RunID != forkOrigRun {
			t.Errorf("a refused fork submitted run %s", rec.Event.RunID)
		}
		n++
	}
	if n != 1 {
		t.Errorf("%d tasks on the bus, want the demo run's alone", n)
	}

	// A work dir with files in it cannot hold a prefix re-run from scratch.
	_, errOut, code := runCLI(t, "fork", "--nats-url", url, forkOrigRun, "--at-step", "1", "--work-dir", ".")
	if code != exitUsage || !strings.Contains(errOut, "is not empty") {
		t.Errorf("fork into a non-empty work dir: exit %d: %s", code, errOut)
	}

	// Without --nats-url the embedded bus of the data dir is read.
	_, errOut, code = runCLI(t, "fork", forkOrigRun, "--at-step", "1", "--data-dir", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "run "+forkOrigRun+": no such run on this bus") {
		t.Errorf("fork from an empty embedded bus: exit %d: %s", code, errOut)
	}
}

// TestForkSubmitsAndFollows: a fork's vera.task.submitted is the
// original's effective configuration with the overrides, fork {from,
// at_step, note} and the labels; the fork is followed with the run view,
// the agent's vera.fork.prefix is printed with its divergence, and a fork
// that ends FAILED exits 4.
func TestForkSubmitsAndFollows(t *testing.T) {
	url := busWithDemoRun(t)
	work := filepath.Join(t.TempDir(), "fork-work")
	out, errOut, stop := start(t, "fork", "--nats-url", url, forkOrigRun, "--at-step", "2", "--run-id", "fork1",
		"--model", "other-model", "--tool-protocol", "text", "--temperature", "0.5", "--no-auditor", "--max-steps", "20",
		"--stagnation-limit", "5", "--note", "text protocol from step 3", "--work-dir", work, "--label", "team=a")
	waitFor(t, "the fork to be submitted", func() bool { return strings.Contains(out.String(), "run fork1 submitted") })
	if !strings.Contains(out.String(), "a fork of run "+forkOrigRun+" at step 2 of 6") {
		t.Errorf("header:\n%s", out.String())
	}

	b := bustest.Connect(t, url, bus.Options{Source: catalog.ComponentAgent})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got []catalog.TaskSubmitted
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: "fork1", Types: []string{catalog.TypeTaskSubmitted}}) {
		if err != nil {
			t.Fatal(err)
		}
		var d catalog.TaskSubmitted
		if err := rec.Event.DecodeData(&d); err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	if len(got) != 1 {
		t.Fatalf("%d tasks on run fork1, want 1", len(got))
	}
	d := got[0]
	if d.Fork == nil || *d.Fork != (catalog.ForkConfig{From: forkOrigRun, AtStep: 2, Note: "text protocol from step 3"}) {
		t.Errorf("fork = %+v", d.Fork)
	}
	if d.Labels["forked_from"] != forkOrigRun || d.Labels["fork_at_step"] != "2" || d.Labels["team"] != "a" {
		t.Errorf("labels = %v", d.Labels)
	}
	// Overridden...
	if d.Model.Name != "other-model" || d.Model.ToolProtocol != catalog.ToolProtocolText || d.Model.Temperature == nil || *d.Model.Temperature != 0.5 ||
		d.Auditor.Enabled || d.MaxSteps != 20 || d.Policy.StagnationLimit != 5 || d.WorkDir != work {
		t.Errorf("overrides not applied: %+v", d.RunConfig)
	}
	// ...the rest is the original's effective configuration.
	if d.Task != "When was VERA 1.2.0 released? Cite independent sources." || d.Model.BaseURL != "http://127.0.0.1:46277/v1" ||
		d.Policy.NotesInterval != 3 || d.Policy.QueryFamilyLimit != 3 || !d.Sandbox.Network || d.Sandbox.ToolTimeoutMS != 900000 {
		t.Errorf("not the original's settings: %+v", d.RunConfig)
	}

	// The agent's side, as it would publish it: the prefix diverged.
	for _, p := range []bus.Payload{
		catalog.ForkPrefix{From: forkOrigRun, AtStep: 2, StepsCompared: 1, CommandsCompared: 1,
			Divergence: &catalog.ForkDivergence{Step: 1, Kind: "tool_result", Detail: "stdout differs", Recorded: "VERA 1.2.0 released", Replayed: "404 Not Found"}},
		catalog.RunFinished{Outcome: catalog.OutcomeFailed, Reason: "fork of run " + forkOrigRun + " at step 2: the prefix did not reproduce at step 1 (tool_result): stdout differs", Steps: 1},
	} {
		ev, err := b.Events.New("fork1", p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the fork to end", func() bool { return strings.Contains(out.String(), "FAILED(") })
	if code := stop(); code != exitRunFailed {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, exitRunFailed, errOut.String())
	}
	for _, want := range []string{
		"prefix did not reproduce (1 steps, 1 commands compared): step 1 differs (tool_result): stdout differs",
		"recorded: VERA 1.2.0 released", "replayed: 404 Not Found",
		"FAILED(fork of run " + forkOrigRun + " at step 2: the prefix did not reproduce",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestForkPrefixReproducedLine: the line of a reproduced prefix.
func TestForkPrefixReproducedLine(t *testing.T) {
	got := forkPrefixText(&catalog.ForkPrefix{From: forkOrigRun, AtStep: 4, Reproduced: true, StepsCompared: 4, CommandsCompared: 2})
	if got != "prefix reproduced: 4 steps, 2 commands compared; live from step 5" {
		t.Errorf("got %q", got)
	}
}
