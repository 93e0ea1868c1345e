package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
	"github.com/vera-run/vera/eval/evaltest"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// TestSystemEvalKillAndResume is the scenario through the CLI:
// `vera up`, then `vera eval tasks.jsonl --profiles no-audit,audit3` in a
// process of its own, killed with SIGKILL once some tasks are scored, then
// `vera eval --resume`: it prints the round-by-round accuracy table,
// writes the HTML report, every task × profile is scored exactly once and
// no model call of a run is made twice. `vera eval report` renders the
// same figures from the bus, and `vera eval compare` the eval against its
// rescore.
func TestSystemEvalKillAndResume(t *testing.T) {
	t.Setenv("NATS_URL", "")
	data := veraDataDir(t)
	calls := &evaltest.Calls{}
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(evaltest.Script(calls)))
	tasks := evaltest.WriteTaskSet(t)
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, _ := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--work-root", os.TempDir(), "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })

	dir := t.TempDir()
	bin := filepath.Join(dir, "vera")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	const evalID = "01JEVALKILL0000000000000AA"
	out := filepath.Join(dir, "out")
	args := []string{"eval", tasks, "--profiles", "no-audit,audit3", "--nats-url", url, "--data-dir", data,
		"--model-base-url", model.URL(), "--model", "scripted", "--tool-protocol", "text", "--max-steps", "6",
		"--eval-concurrency", "4", "--runs-dir", filepath.Join(dir, "work"), "--out", out, "--log-level", "warn"}

	cli := bustest.ConnectAs(t, url, auth.Store{Dir: auth.DirOf(data)}, catalog.ComponentCLI, bus.Options{ReadOnly: true})
	scoredCount := func() int {
		evs, err := cli.ReadRun(context.Background(), evalID)
		if err != nil {
			return 0
		}
		n := 0
		for _, e := range evs {
			if e.Type == catalog.TypeEvalTaskScored {
				n++
			}
		}
		return n
	}
	child := exec.Command(bin, append(args, "--eval-id", evalID)...)
	child.Env = append(os.Environ(), "NATS_URL=")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	waitForLong(t, "10 tasks scored", 2*time.Minute, func() bool { return scoredCount() >= 10 })
	_ = child.Process.Signal(syscall.SIGKILL)
	_ = child.Wait()
	atKill := scoredCount()
	if atKill >= 40 {
		t.Fatalf("the eval finished before the kill (%d scored)", atKill)
	}

	// Resumed with the recorded profiles: no model flags needed.
	stdout, stderr, code := runCLIFor(t, 4*time.Minute, "eval", tasks, "--resume", evalID, "--nats-url", url, "--data-dir", data,
		"--eval-concurrency", "4", "--runs-dir", filepath.Join(dir, "work"), "--out", out, "--log-level", "warn")
	if code != 0 {
		t.Fatalf("vera eval --resume: exit %d\n%s\n%s", code, stdout, stderr)
	}
	t.Logf("vera eval --resume:\n%s", stdout)
	for _, want := range []string{"no-audit", "audit3", "70.0% (14/20)", "85.0% (17/20)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if n := scoredCount(); n != 40 {
		t.Errorf("%d vera.eval.task_scored events, want 40 (each task × profile exactly once; %d before the kill)", n, atKill)
	}
	for k, n := range calls.Counts() {
		if want := evaltest.Asked(k[1]); n != want {
			t.Errorf("task %d step %d asked %d times, want %d", k[0], k[1], n, want)
		}
	}
	var rep eval.Report
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	evaltest.CheckReport(t, rep)
	if html, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || !strings.Contains(string(html), "<svg") {
		t.Errorf("report.html: %v", err)
	}

	// The same figures re-rendered from the bus.
	again, _, code := runCLI(t, "eval", "report", evalID, "--nats-url", url, "--format", "json")
	if code != 0 {
		t.Fatalf("vera eval report: exit %d", code)
	}
	var fromBus eval.Report
	if err := json.Unmarshal([]byte(again), &fromBus); err != nil {
		t.Fatalf("vera eval report --format json: %v\n%s", err, again)
	}
	evaltest.CheckReport(t, fromBus)

	// Rescored with every scorer made "contains alpha-k": the same runs,
	// the same figures; compare shows no per-task difference.
	var lines []string
	for k := 1; k <= evaltest.NTasks; k++ {
		l, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("item-%02d", k), "task": "x", "answer": fmt.Sprintf("alpha-%d", k), "scorer": "contains"})
		lines = append(lines, string(l))
	}
	v2 := filepath.Join(dir, "tasks-v2.jsonl")
	os.WriteFile(v2, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	rs, errOut, code := runCLI(t, "eval", "rescore", evalID, v2, "--nats-url", url)
	if code != 0 {
		t.Fatalf("vera eval rescore: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(rs, "85.0% (17/20)") {
		t.Errorf("rescore report:\n%s", rs)
	}

	// Re-verified by "today's" auditor (the same script): each run is
	// copied and its answers judged again; the figures are the same.
	start := time.Now()
	rv, errOut, code := runCLIFor(t, 5*time.Minute, "eval", "rescore", evalID, tasks, "--nats-url", url, "--reverify", "--no-sandbox")
	if code != 0 {
		t.Fatalf("vera eval rescore --reverify: exit %d\n%s", code, errOut)
	}
	t.Logf("rescore --reverify took %s", time.Since(start))
	if !strings.Contains(rv, "85.0% (17/20)") || !strings.Contains(rv, "85.0%      94.4%") {
		t.Errorf("rescore --reverify report:\n%s", rv)
	}

	// The eval and its runs exported into one file.
	exp := filepath.Join(dir, "eval.jsonl")
	eo, errOut, code := runCLI(t, "eval", "export", evalID, "-o", exp, "--nats-url", url)
	if code != 0 || !strings.Contains(eo, "and 40 runs") {
		t.Fatalf("vera eval export: exit %d\n%s\n%s", code, eo, errOut)
	}
}

// runCLIFor is runCLI with a longer deadline.
func runCLIFor(t *testing.T, d time.Duration, args ...string) (string, string, int) {
	t.Helper()
	var out, errb syncBuffer
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	code := run(ctx, args, &out, &errb)
	return out.String(), errb.String(), code
}
