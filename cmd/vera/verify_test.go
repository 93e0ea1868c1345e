package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/verifierd/verifyfast"
)

// mirageResults turns the bundled MIRAGE snapshots into inference results:
// for each, one that repeats the repetitive action without awareness and
// one that takes another action with awareness. It returns the folder.
func mirageResults(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	filepath.WalkDir(filepath.Join("..", "..", "testdata", "mirage"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return nil
	})
	if len(files) == 0 {
		t.Fatal("no testdata snapshots")
	}
	n := 0
	for _, p := range files {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var snap map[string]any
		if err := json.Unmarshal(raw, &snap); err != nil {
			t.Fatal(err)
		}
		rep, ok := snap["repetitive_action"]
		if !ok || rep == nil {
			continue // OSWorld snapshots carry none
		}
		for i, res := range []map[string]any{
			{"thinking": "Let me click it.", "action": rep},
			{"thinking": "I have already tried this several times and it did not work; I need a different approach.", "action": "scroll(0, 300)"},
		} {
			if _, isCall := rep.(map[string]any); isCall && i == 1 {
				res["action"] = map[string]any{"type": "function", "function": map[string]any{"name": "bash", "arguments": `{"command":"ls -la"}`}}
			}
			res["model"], res["good_format"] = "test", true
			snap["result"] = res
			out, _ := json.Marshal(snap)
			name := filepath.Join(dir, strings.TrimSuffix(filepath.Base(p), ".json")+"_"+string(rune('a'+i))+".json")
			if err := os.WriteFile(name, out, 0o644); err != nil {
				t.Fatal(err)
			}
			n++
		}
	}
	os.WriteFile(filepath.Join(dir, "broken.json"), []byte("{not json"), 0o644)
	if n < 4 {
		t.Fatalf("only %d results built", n)
	}
	return dir
}

func TestVerifyRepetitiveCLI(t *testing.T) {
	dir := mirageResults(t)
	outFile := filepath.Join(t.TempDir(), "verdicts.jsonl")
	stdout, stderr, code := runCLI(t, "verify", "repetitive", dir, "--out", outFile, "--summary")
	if code != exitFailure || !strings.Contains(stderr, "1 of") {
		t.Fatalf("exit %d (want 1 for the broken file), stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "hallucination_rate") {
		t.Fatalf("no summary on stdout: %q", stdout)
	}
	data, _ := os.ReadFile(outFile)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	evals := map[string]int{}
	for _, l := range lines {
		var line struct {
			File           string
			Error          string
			VerifiedResult *struct {
				ThinkingEval int    `json:"thinking_eval"`
				VerifierType string `json:"verifier_type"`
			} `json:"verified_result"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("bad line %q: %v", l, err)
		}
		switch {
		case strings.HasSuffix(line.File, "broken.json"):
			if line.Error == "" || !strings.Contains(line.Error, "broken.json") {
				t.Errorf("broken file: %q", l)
			}
		case strings.HasSuffix(line.File, "_a.json"):
			evals["repeat"] += 1
			if line.VerifiedResult == nil || line.VerifiedResult.ThinkingEval != 0 {
				t.Errorf("repeated action not scored 0: %s", l)
			}
		case strings.HasSuffix(line.File, "_b.json"):
			evals["aware"] += 1
			if line.VerifiedResult == nil || line.VerifiedResult.ThinkingEval != 2 {
				t.Errorf("aware different action not scored 2: %s", l)
			}
		}
	}
	if evals["repeat"] == 0 || evals["repeat"] != evals["aware"] {
		t.Fatalf("lines %v", evals)
	}
}

func TestVerifyFastReportCLI(t *testing.T) {
	dir := t.TempDir()
	results := filepath.Join(dir, "results.jsonl")
	lines := []string{
		`{"id":1,"tag":"clean","profile":"kimi-full","expected_credit_score":5,"credit_score":5,"high_count":0,"low_count":0,"zone":"GOOD","expected_zone":"GOOD"}`,
		`{"id":2,"tag":"major_factual","profile":"kimi-full","expected_credit_score":2,"credit_score":4,"high_count":0,"low_count":1,"zone":"GOOD","expected_zone":"BAD"}`,
		`{"id":3,"tag":"multi_minor","profile":"kimi-full","expected_credit_score":3,"credit_score":3,"high_count":0,"low_count":2,"zone":"MID","expected_zone":"MID"}`,
		`not json`,
	}
	os.WriteFile(results, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	out, _, code := runCLI(t, "verifyfast", "report", results)
	if code != 0 || !strings.Contains(out, "kimi-full") || !strings.Contains(strings.ToLower(out), "cross-band") {
		t.Fatalf("text report: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, "verifyfast", "report", results, "--json")
	var rep map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("json report: exit %d\n%.300s", code, out)
	}
	html := filepath.Join(dir, "r.html")
	if _, _, code := runCLI(t, "verifyfast", "report", results, "--html", html); code != 0 {
		t.Fatalf("html: exit %d", code)
	}
	page, _ := os.ReadFile(html)
	if !strings.Contains(string(page), "<html") || strings.Contains(string(page), "http://") && strings.Contains(string(page), "<script src") {
		t.Fatal("html report is not a self-contained page")
	}
	if _, _, code := runCLI(t, "verifyfast", "report", filepath.Join(dir, "absent.jsonl")); code == 0 {
		t.Fatal("missing file accepted")
	}
}

// TestVerifyFastBatchCLI runs `vera verifyfast batch` against a scripted
// OpenAI-compatible server through the real client: one clean item, one
// with a high-severity contradiction; then a rerun hits only the cache.
func TestVerifyFastBatchCLI(t *testing.T) {
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		scriptedmodel.OnLastUser(`TASK: DECOMPOSE`, scriptedmodel.Reply{Content: `{"facts":["revenue grew 12%"],"chains":[]}`, Times: scriptedmodel.Forever}),
		scriptedmodel.OnLastUser(`(?s)TASK: FACT_CHECK.*fell by 12%`, scriptedmodel.Reply{Content: `{"findings":[{"claim":"revenue fell by 12%","level":"contradiction","severity":"high","quote":"revenue grew 12%","reason":"opposite direction"}]}`, Times: scriptedmodel.Forever}),
		scriptedmodel.OnLastUser(`TASK: (FACT|LOGIC)_CHECK`, scriptedmodel.Reply{Content: `{"findings":[]}`, Times: scriptedmodel.Forever}),
	))
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.yaml")
	os.WriteFile(settings, []byte(`defaults:
  max_tokens: 1000
  temperature: 0.1
llms:
  scripted:
    base_url: "`+strings.TrimSuffix(srv.URL(), "/v1")+`"
    model: "scripted-model"
profiles:
  solo:
    run: scripted
    verify: scripted
`), 0o644)
	data := filepath.Join(dir, "data.jsonl")
	os.WriteFile(data, []byte(`{"id":1,"tag":"clean","context_input":"Revenue grew 12% in 2025.","model_output":"Revenue grew 12%.","expected_credit_score":5}
{"id":2,"tag":"major_factual","context_input":"Revenue grew 12% in 2025.","model_output":"Revenue fell by 12%.","expected_credit_score":2}
{"id":3,"tag":"clean"}
`), 0o644)
	out := filepath.Join(dir, "results.jsonl")
	args := []string{"verifyfast", "batch", data, "--settings", settings, "--out", out, "--cache-dir", filepath.Join(dir, "cache")}
	stdout, stderr, code := runCLI(t, args...)
	if code != 0 || !strings.Contains(stderr, "line 3") || !strings.Contains(stdout, "solo") {
		t.Fatalf("batch: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}
	f, _ := os.Open(out)
	defer f.Close()
	results, bad := verifyfast.ReadResults(f)
	if len(bad) != 0 || len(results) != 2 {
		t.Fatalf("results %d, bad %v", len(results), bad)
	}
	for _, r := range results {
		want := map[string]int{"1": 5, "2": 2}[fmt.Sprint(r.ID)]
		if r.CreditScore != want || r.Profile != "solo" {
			t.Errorf("item %v: score %v, profile %q; want %d", r.ID, r.CreditScore, r.Profile, want)
		}
	}
	calls := srv.Count()
	if calls != 6 {
		t.Errorf("%d model calls, want 3 phases × 2 items", calls)
	}
	// Again: every reply comes from the cache.
	if _, stderr, code := runCLI(t, args...); code != 0 {
		t.Fatalf("rerun: %s", stderr)
	}
	if srv.Count() != calls {
		t.Errorf("rerun made %d more model calls", srv.Count()-calls)
	}
}
