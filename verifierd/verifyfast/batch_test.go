package verifyfast

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

func readResultsFile(t *testing.T, path string) ([]Result, []LineError) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return ReadResults(f)
}

// scores maps "profile/id" to the credit score (0 for a failed result).
func scores(results []Result) map[string]int {
	m := map[string]int{}
	for _, r := range results {
		m[r.Profile+"/"+string(r.ID)] = r.CreditScore
	}
	return m
}

func wantScores() map[string]int {
	m := map[string]int{}
	for id, s := range fixtureScripts {
		m["kimi-full/"+string(id)] = s.wantKimi
		m["cross-verify/"+string(id)] = s.wantQwen
	}
	return m
}

// comparable strips what varies between runs (durations).
func comparable(rs []Result) map[string]Result {
	m := map[string]Result{}
	for _, r := range rs {
		r.DurationMS = 0
		m[r.Profile+"/"+string(r.ID)] = r
	}
	return m
}

func TestFixtureBadLines(t *testing.T) {
	items, bad := loadFixture(t)
	if len(items) != 14 {
		t.Fatalf("%d items, want 14", len(items))
	}
	tags := map[Tag]bool{}
	for _, it := range items {
		tags[it.Tag] = true
	}
	for _, tag := range Tags() {
		if !tags[tag] {
			t.Errorf("fixture lacks tag %s", tag)
		}
	}
	want := []struct {
		line   int
		reason string
	}{
		{5, `expected_credit_score: tag "clean" means score 5, got 3`},
		{11, "invalid JSON"},
		{15, "id: duplicate id 5 (first on line 6)"},
		{17, `tag: unknown tag "no_such_tag"`},
	}
	if len(bad) != len(want) {
		t.Fatalf("bad lines = %v", bad)
	}
	for i, w := range want {
		if bad[i].Line != w.line || !strings.Contains(bad[i].Reason, w.reason) {
			t.Errorf("bad line %d = %v, want line %d: %s", i, bad[i], w.line, w.reason)
		}
	}
}

// The fixture end to end under both profiles: per-item scores, the zone
// matrices, the failed item, re-asks, parameters in the prompts; then a
// second run served entirely by the cache.
func TestBatchEndToEnd(t *testing.T) {
	items, _ := loadFixture(t)
	model := newFixtureModel(items, 0)
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(model.rule()))
	set := testSettings(t, srv.URL())
	cache, err := OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results.jsonl")
	var progress []int
	cfg := BatchConfig{
		Items:       items,
		Settings:    set,
		Strategy:    DefaultStrategy(),
		Completers:  completersFor(set),
		Cache:       cache,
		Concurrency: 4,
		OutPath:     out,
		Progress: func(done, total, failed int) {
			if total != 28 {
				t.Errorf("progress total %d", total)
			}
			progress = append(progress, done)
		},
	}
	stats, err := RunBatch(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.AssertNoMisses(t)
	if got := srv.Count(); got != fullRunRequests {
		t.Errorf("%d model requests, want %d", got, fullRunRequests)
	}
	if stats.Total != 28 || stats.Written != 28 || stats.Failed != 2 || stats.Scored != 26 || stats.Skipped != 0 || stats.Unfinished != 0 {
		t.Errorf("stats = %+v", stats)
	}
	if stats.Requests != fullRunRequests || stats.CacheHits != 0 || stats.Retries != 0 {
		t.Errorf("stats = %+v", stats)
	}
	if len(progress) != 29 || progress[0] != 0 || progress[28] != 28 {
		t.Errorf("progress = %v", progress)
	}

	results, bad := readResultsFile(t, out)
	if len(bad) != 0 || len(results) != 28 {
		t.Fatalf("%d results, bad %v", len(results), bad)
	}
	if got, want := scores(results), wantScores(); !reflect.DeepEqual(got, want) {
		t.Errorf("scores:\n got %v\nwant %v", got, want)
	}
	for _, r := range results {
		calls := 3
		switch r.ID {
		case "2", "13", "14":
			calls = 4
		}
		if r.Tokens != (Tokens{Prompt: 100 * calls, Completion: 20 * calls, Total: 120 * calls}) {
			t.Errorf("%s/%s tokens = %+v, want %d calls", r.Profile, r.ID, r.Tokens, calls)
		}
		if r.ID == "14" {
			if !r.Failed() || r.CreditScore != 0 || r.Zone != ZoneNone || len(r.Errors) != 1 ||
				!strings.HasPrefix(r.Errors[0], "phase 2 (fact check): no usable reply after 2 attempts: invalid JSON") {
				t.Errorf("item 14 = %+v", r)
			}
			continue
		}
		if r.Failed() || r.Decomposition == nil || len(r.Decomposition.Facts) == 0 && len(r.Decomposition.Chains) == 0 {
			t.Errorf("%s/%s = %+v", r.Profile, r.ID, r)
		}
	}
	byKey := comparable(results)
	if r := byKey["kimi-full/1"]; len(r.Findings) != 1 || r.Findings[0].Level != LevelReasonableInference || r.Findings[0].Kind != KindLogic || r.CreditScore != 5 {
		t.Errorf("item 1 = %+v", r)
	}
	if r := byKey["cross-verify/9"]; r.HighCount != 3 || r.LowCount != 0 || len(r.Findings) != 3 {
		t.Errorf("item 9 = %+v", r)
	}
	if r := byKey["kimi-full/4"]; r.HighCount != 0 || r.LowCount != 3 || r.Zone != ZoneMid {
		t.Errorf("item 4 = %+v", r)
	}

	rep := BuildReport(results)
	kimi, _ := rep.Profile("kimi-full")
	if kimi.Matrix.Counts != [3][3]int{{7, 0, 1}, {0, 1, 0}, {0, 0, 4}} || kimi.Failed != 1 || kimi.Scored != 13 {
		t.Errorf("kimi-full matrix %v, scored %d, failed %d", kimi.Matrix.Counts, kimi.Scored, kimi.Failed)
	}
	if kimi.CrossBand.String() != "1/13 = 7.7%" || kimi.CrossBandTargetMet || len(kimi.CrossBandCases) != 1 || kimi.CrossBandCases[0].ID != "12" {
		t.Errorf("kimi-full cross-band %s %v", kimi.CrossBand, kimi.CrossBandCases)
	}
	qwen, _ := rep.Profile("cross-verify")
	if qwen.Matrix.Counts != [3][3]int{{8, 0, 0}, {0, 1, 0}, {0, 0, 4}} || !qwen.CrossBandTargetMet || qwen.ZoneAccuracy.String() != "13/13 = 100%" {
		t.Errorf("cross-verify matrix %v, %s", qwen.Matrix.Counts, qwen.ZoneAccuracy)
	}
	if len(qwen.FailedItems) != 1 || qwen.FailedItems[0].ID != "14" {
		t.Errorf("cross-verify failed items %+v", qwen.FailedItems)
	}

	// The strategy's parameters reach the prompts per profile; re-asks carry
	// the bad reply and the reason.
	var sawKimi, sawQwen, sawRepair bool
	for _, req := range srv.Requests() {
		sys := req.Messages[0].Text
		if !strings.Contains(req.Transcript(), "TASK: FACT_CHECK") {
			continue
		}
		switch req.Model {
		case kimiModel:
			sawKimi = true
			if !strings.Contains(sys, "numerical deviation above 8%") || !strings.Contains(sys, "Report at most 3 errors") {
				t.Errorf("kimi-full fact-check prompt lacks its params:\n%s", sys)
			}
		case qwenModel:
			sawQwen = true
			if !strings.Contains(sys, "numerical deviation above 10%") || !strings.Contains(sys, "Report at most 5 errors") {
				t.Errorf("cross-verify fact-check prompt lacks its params:\n%s", sys)
			}
		}
		if len(req.Messages) == 4 {
			sawRepair = true
			if req.Messages[2].Role != "assistant" || req.Messages[3].Role != "user" ||
				!strings.Contains(req.Messages[3].Text, "TASK: REPAIR") {
				t.Errorf("re-ask = %v", req.Messages)
			}
			if strings.Contains(req.Messages[2].Text, `"claim":"grew by about 14%"`) && !strings.Contains(req.Messages[3].Text, `severity "": an error needs high or low`) {
				t.Errorf("re-ask of item 2 lacks the reason: %s", req.Messages[3].Text)
			}
		}
		if *req.Temperature != 0.1 || *req.MaxTokens != 1000 {
			t.Errorf("temperature %v max_tokens %v", *req.Temperature, *req.MaxTokens)
		}
	}
	if !sawKimi || !sawQwen || !sawRepair {
		t.Errorf("saw kimi %v qwen %v repair %v", sawKimi, sawQwen, sawRepair)
	}

	// A rerun is served by the cache: no model request, the same results.
	out2 := filepath.Join(t.TempDir(), "rerun.jsonl")
	cfg.OutPath, cfg.Progress = out2, nil
	stats2, err := RunBatch(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Count(); got != fullRunRequests {
		t.Errorf("the rerun made %d model requests", got-fullRunRequests)
	}
	if stats2.Requests != 0 || stats2.CacheHits != fullRunRequests || stats2.Written != 28 {
		t.Errorf("rerun stats = %+v", stats2)
	}
	again, _ := readResultsFile(t, out2)
	if !reflect.DeepEqual(comparable(again), comparable(results)) {
		t.Errorf("the rerun's results differ")
	}
	if n, _ := cache.Len(); n != fullRunRequests {
		t.Errorf("cache holds %d entries", n)
	}
}

// Cancelled mid-way, then resumed: every (profile, id) exactly once, and
// no model call made twice.
func TestBatchResumeAfterCancel(t *testing.T) {
	items, _ := loadFixture(t)
	model := newFixtureModel(items, 10*time.Millisecond)
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(model.rule()))
	set := testSettings(t, srv.URL())
	cache, err := OpenCache(filepath.Join(t.TempDir(), "cache"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results.jsonl")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const k = 7
	cfg := BatchConfig{
		Items:       items,
		Settings:    set,
		Strategy:    DefaultStrategy(),
		Completers:  completersFor(set),
		Cache:       cache,
		Concurrency: 4,
		OutPath:     out,
		Progress: func(done, total, failed int) {
			if done >= k {
				cancel()
			}
		},
	}
	stats, err := RunBatch(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	if stats.Written < k || stats.Unfinished == 0 || stats.Written+stats.Unfinished != 28 {
		t.Fatalf("first run stats = %+v", stats)
	}
	first := srv.Count()
	if first >= fullRunRequests {
		t.Fatalf("the cancelled run made %d requests", first)
	}
	// A crash while writing leaves a cut line; the resume removes it.
	f, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":13,"tag":"minor_factual","profile":"kimi-fu`)
	f.Close()

	cfg.Resume = true
	var resumedFrom int
	cfg.Progress = func(done, total, failed int) {
		if resumedFrom == 0 {
			resumedFrom = done
		}
	}
	stats2, err := RunBatch(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if stats2.Skipped != stats.Written || stats2.Written != 28-stats.Written || stats2.Unfinished != 0 || resumedFrom != stats.Written {
		t.Errorf("resume stats = %+v (first run wrote %d, progress from %d)", stats2, stats.Written, resumedFrom)
	}
	if len(stats2.OutLines) != 1 || !strings.Contains(stats2.OutLines[0].Reason, "incomplete last line") || stats2.OutLines[0].Line != stats.Written+1 {
		t.Errorf("out lines = %v", stats2.OutLines)
	}
	if got := srv.Count(); got != fullRunRequests {
		t.Errorf("cancel + resume made %d model requests, one full run makes %d", got, fullRunRequests)
	}
	srv.AssertNoMisses(t)

	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	results, bad := ReadResults(bytes.NewReader(data))
	if len(bad) != 0 {
		t.Errorf("bad lines in the resumed file: %v", bad)
	}
	for _, r := range results {
		seen[r.Profile+"/"+string(r.ID)]++
	}
	if n := bytes.Count(data, []byte("\n")); n != 28 || len(seen) != 28 {
		t.Errorf("%d lines, %d distinct results", n, len(seen))
	}
	if got, want := scores(results), wantScores(); !reflect.DeepEqual(got, want) {
		t.Errorf("scores:\n got %v\nwant %v", got, want)
	}
}

// A 429 with Retry-After pauses the whole batch, the call is retried after
// the wait, and the batch completes.
func TestBatchRateLimit(t *testing.T) {
	items, _ := loadFixture(t)
	model := newFixtureModel(items, 15*time.Millisecond)
	const retryAfter = 400 * time.Millisecond
	srv := scriptedmodel.Start(t, scriptedmodel.WithRules(
		scriptedmodel.Step(6, scriptedmodel.Reply{Status: 429, RetryAfter: retryAfter}),
		model.rule(),
	))
	set := testSettings(t, srv.URL())
	var buf bytes.Buffer
	stats, err := RunBatch(context.Background(), BatchConfig{
		Items:       items,
		Profiles:    []string{"kimi-full"},
		Settings:    set,
		Strategy:    DefaultStrategy(),
		Completers:  completersFor(set),
		Concurrency: 4,
		Out:         &buf,
	})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Written != 14 || stats.Retries != 1 || stats.Requests != fullRunRequests/2+1 {
		t.Errorf("stats = %+v", stats)
	}
	results, bad := ReadResults(&buf)
	if len(bad) != 0 || len(results) != 14 {
		t.Fatalf("%d results, bad %v", len(results), bad)
	}
	for _, r := range results {
		if want := fixtureScripts[r.ID].wantKimi; r.CreditScore != want {
			t.Errorf("item %s scored %d, want %d", r.ID, r.CreditScore, want)
		}
	}

	reqs := srv.Requests()
	limited := reqs[5]
	if limited.Rule != "step 6" {
		t.Fatalf("request 6 answered by %q", limited.Rule)
	}
	var retried *scriptedmodel.Request
	for i := range reqs[6:] {
		r := &reqs[6+i]
		if bytes.Equal(r.Body, limited.Body) {
			retried = r
			break
		}
	}
	if retried == nil {
		t.Fatal("the rate-limited call was never retried")
	}
	if wait := retried.Received.Sub(limited.Received); wait < retryAfter {
		t.Errorf("retried after %v, Retry-After was %v", wait, retryAfter)
	}
	// Nobody else called during the pause either: the whole batch waited.
	for _, r := range reqs {
		if d := r.Received.Sub(limited.Received); d > 50*time.Millisecond && d < retryAfter-20*time.Millisecond {
			t.Errorf("request #%d sent %v into the %v pause", r.Index, d, retryAfter)
		}
	}
}

func TestBatchConfigErrors(t *testing.T) {
	items, _ := loadFixture(t)
	set := testSettings(t, "http://127.0.0.1:1/v1")
	base := BatchConfig{Items: items, Settings: set, Completers: completersFor(set), Out: &bytes.Buffer{}}
	cases := []struct {
		name string
		edit func(*BatchConfig)
		want string
	}{
		{"no settings", func(c *BatchConfig) { c.Settings = nil }, "no settings"},
		{"no completers", func(c *BatchConfig) { c.Completers = nil }, "no Completers"},
		{"no output", func(c *BatchConfig) { c.Out = nil }, "no output"},
		{"resume without path", func(c *BatchConfig) { c.Resume = true }, "Resume needs OutPath"},
		{"unknown profile", func(c *BatchConfig) { c.Profiles = []string{"nope"} }, `unknown profile "nope"`},
		{"duplicate id", func(c *BatchConfig) { c.Items = append(c.Items, c.Items[0]) }, "item id 1 given twice"},
	}
	for _, c := range cases {
		cfg := base
		c.edit(&cfg)
		if _, err := RunBatch(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// A call error that is not transient fails the item with the reason; the
// batch goes on.
func TestBatchCallErrorFailsItem(t *testing.T) {
	items, _ := loadFixture(t)
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Status: 401, ErrorMessage: "bad key"}))
	set := testSettings(t, srv.URL())
	var buf bytes.Buffer
	var calls atomic.Int64
	stats, err := RunBatch(context.Background(), BatchConfig{
		Items: items[:3], Profiles: []string{"cross-verify"}, Settings: set, Strategy: DefaultStrategy(),
		Completers: func(name string) (llm.Completer, error) {
			calls.Add(1)
			return completersFor(set)(name)
		},
		Out: &buf,
	})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Failed != 3 || stats.Requests != 3 || calls.Load() != 1 {
		t.Errorf("stats = %+v, Completers called %d times", stats, calls.Load())
	}
	results, _ := ReadResults(&buf)
	for _, r := range results {
		if len(r.Errors) != 1 || !strings.HasPrefix(r.Errors[0], "phase 1 (decomposition): model call failed:") || !strings.Contains(r.Errors[0], "HTTP 401") {
			t.Errorf("result %s errors %v", r.ID, r.Errors)
		}
	}
}
