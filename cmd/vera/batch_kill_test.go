package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

// TestVerifyFastBatchSurvivesKillAndInterrupt kills `vera verifyfast batch`
// mid-run (SIGKILL, then SIGINT in a second round) and resumes it. Every
// item ends up exactly once in the results; no call that completed before
// the kill is made again (only those in flight at a SIGKILL can be, since
// their replies never arrived); after a SIGINT, which lets calls in flight
// finish and be cached, nothing is repeated at all.
func TestVerifyFastBatchSurvivesKillAndInterrupt(t *testing.T) {
	const items, concurrency = 24, 4
	const latency = 150 * time.Millisecond
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		scriptedmodel.OnLastUser(`TASK: DECOMPOSE`, scriptedmodel.Reply{Content: `{"facts":["a fact"],"chains":[]}`, Delay: latency, Times: scriptedmodel.Forever}),
		scriptedmodel.OnLastUser(`TASK: (FACT|LOGIC)_CHECK`, scriptedmodel.Reply{Content: `{"findings":[]}`, Delay: latency, Times: scriptedmodel.Forever}),
	))
	dir := t.TempDir()
	bin := filepath.Join(dir, "vera")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	settings := filepath.Join(dir, "settings.yaml")
	os.WriteFile(settings, []byte("llms:\n  s:\n    base_url: \""+strings.TrimSuffix(srv.URL(), "/v1")+"\"\n    model: \"m\"\nprofiles:\n  p:\n    run: s\n    verify: s\n"), 0o644)
	data := filepath.Join(dir, "data.jsonl")
	var b strings.Builder
	for i := 1; i <= items; i++ {
		fmt.Fprintf(&b, `{"id":%d,"tag":"clean","context_input":"Context %d.","model_output":"Output %d.","expected_credit_score":5}`+"\n", i, i, i)
	}
	os.WriteFile(data, []byte(b.String()), 0o644)
	out := filepath.Join(dir, "results.jsonl")
	args := []string{"verifyfast", "batch", data, "--settings", settings, "--out", out, "--resume",
		"--concurrency", fmt.Sprint(concurrency), "--cache-dir", filepath.Join(dir, "cache")}
	lines := func() int {
		f, err := os.Open(out)
		if err != nil {
			return 0
		}
		defer f.Close()
		n := 0
		for sc := bufio.NewScanner(f); sc.Scan(); {
			n++
		}
		return n
	}
	runUntil := func(sig syscall.Signal, after int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "NATS_URL=")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("%d results", after), func() bool { return lines() >= after })
		cmd.Process.Signal(sig)
		cmd.Wait()
	}

	runUntil(syscall.SIGKILL, 6)
	atKill := srv.Count()
	runUntil(syscall.SIGINT, 14)
	atInterrupt := srv.Count()
	if _, stderr, code := runCLI(t, args...); code != 0 {
		t.Fatalf("final resume: exit %d\n%s", code, stderr)
	}

	f, _ := os.Open(out)
	results, bad := verifyfast.ReadResults(f)
	f.Close()
	seen := map[string]int{}
	for _, r := range results {
		seen[fmt.Sprint(r.ID)]++
		if r.CreditScore != 5 {
			t.Errorf("item %v scored %d", r.ID, r.CreditScore)
		}
	}
	if len(bad) != 0 || len(seen) != items {
		t.Fatalf("%d distinct items, %d bad lines (%v)", len(seen), len(bad), bad)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("item %s written %d times", id, n)
		}
	}
	full := items * 3
	repeated := srv.Count() - full
	t.Logf("model calls: %d for %d items × 3 phases (%d at the SIGKILL, %d at the SIGINT); %d repeated", srv.Count(), items, atKill, atInterrupt, repeated)
	if repeated < 0 || repeated > 2*concurrency {
		t.Fatalf("%d calls repeated; at most the %d that can be in flight at a SIGKILL may be", repeated, 2*concurrency)
	}
}
