package verifyfast

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vera-run/vera/internal/llm"
)

func TestCacheKey(t *testing.T) {
	t1, t2 := 0.1, 0.2
	base := llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "hi"}}, Sampling: llm.Sampling{Temperature: &t1, MaxTokens: 10}}
	k := CacheKey(base)
	if len(k) != 64 {
		t.Fatalf("key %q", k)
	}
	same := base
	same.Scope, same.Purpose, same.CallID, same.RunID, same.Round = "x", "y", "z", "r", 3
	same.Temperature = new(float64)
	*same.Temperature = 0.1
	if CacheKey(same) != k {
		t.Error("bookkeeping fields or the temperature pointer changed the key")
	}
	// The key of a request without the later options is the one it had
	// before they existed (caches written then stay valid).
	old, _ := json.Marshal(struct {
		V           string        `json:"v"`
		Model       string        `json:"model"`
		Messages    []llm.Message `json:"messages"`
		Temperature *float64      `json:"temperature"`
		MaxTokens   int           `json:"max_tokens"`
	}{cacheVersion, base.Model, base.Messages, base.Temperature, base.MaxTokens})
	if sum := sha256.Sum256(old); hex.EncodeToString(sum[:]) != k {
		t.Error("the key of a request without the later options changed")
	}
	topP, seed := 0.9, int64(1)
	variants := []func(*llm.Request){
		func(r *llm.Request) { r.TopP = &topP },
		func(r *llm.Request) { r.Seed = &seed },
		func(r *llm.Request) { r.Stop = []string{"x"} },
		func(r *llm.Request) { r.ExtraBody = map[string]any{"a": 1} },
		func(r *llm.Request) { s := findingsSchema; r.ResponseFormat = &s },
		func(r *llm.Request) { s := decompositionSchema; r.ResponseFormat = &s },
		func(r *llm.Request) { r.Model = "n" },
		func(r *llm.Request) { r.Temperature = &t2 },
		func(r *llm.Request) { r.Temperature = nil },
		func(r *llm.Request) { r.MaxTokens = 11 },
		func(r *llm.Request) { r.Messages = []llm.Message{{Role: "user", Content: "hi!"}} },
		func(r *llm.Request) { r.Messages = []llm.Message{{Role: "system", Content: "hi"}} },
		func(r *llm.Request) {
			r.Messages = []llm.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: ""}}
		},
	}
	seen := map[string]bool{k: true}
	for i, v := range variants {
		r := base
		v(&r)
		kv := CacheKey(r)
		if seen[kv] {
			t.Errorf("variant %d collides", i)
		}
		seen[kv] = true
	}
}

type countingCompleter struct {
	calls atomic.Int64
	delay time.Duration
	fail  error
}

func (c *countingCompleter) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	n := c.calls.Add(1)
	time.Sleep(c.delay)
	if c.fail != nil {
		return llm.Response{}, c.fail
	}
	return llm.Response{Text: "reply to " + req.Messages[0].Content, FinishReason: "stop", Model: req.Model + "-served",
		Usage: llm.Usage{Prompt: 7, Completion: 3, Total: 10}, Attempts: 1, Latency: time.Duration(n)}, nil
}

func TestCachingCompleter(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "c")
	cache, err := OpenCache(dir)
	if err != nil {
		t.Fatal(err)
	}
	next := &countingCompleter{delay: 20 * time.Millisecond}
	cc := cache.Completer(next)
	req := llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "q"}}}

	// Concurrent identical requests make one call.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			r, err := cc.Complete(context.Background(), req)
			if err != nil || r.Text != "reply to q" || r.Usage.Total != 10 {
				t.Errorf("got %+v, %v", r, err)
			}
		})
	}
	wg.Wait()
	if next.calls.Load() != 1 || cc.Stats().Misses != 1 || cc.Stats().Hits != 7 {
		t.Errorf("calls %d, stats %+v", next.calls.Load(), cc.Stats())
	}

	// A new process (new Cache on the same directory) hits too.
	cache2, _ := OpenCache(dir)
	r, err := cache2.Completer(next).Complete(context.Background(), req)
	if err != nil || r.Text != "reply to q" || r.Model != "m-served" || r.Attempts != 0 || r.FinishReason != "stop" ||
		r.Usage != (llm.Usage{Prompt: 7, Completion: 3, Total: 10}) {
		t.Errorf("hit = %+v, %v", r, err)
	}
	if next.calls.Load() != 1 || cache2.Stats().Hits != 1 {
		t.Errorf("calls %d", next.calls.Load())
	}

	// The entry is a complete JSON file at its sharded path; no temp file
	// is left behind.
	key := CacheKey(req)
	if _, err := os.Stat(filepath.Join(dir, key[:2], key+".json")); err != nil {
		t.Error(err)
	}
	entries, _ := filepath.Glob(filepath.Join(dir, "*", ".tmp-*"))
	if len(entries) != 0 {
		t.Errorf("temp files left: %v", entries)
	}
	if n, _ := cache.Len(); n != 1 {
		t.Errorf("Len = %d", n)
	}

	// A corrupt entry is a miss, and is rewritten.
	os.WriteFile(filepath.Join(dir, key[:2], key+".json"), []byte(`{"key": "`), 0o644)
	if _, ok := cache.Get(key); ok {
		t.Error("corrupt entry hit")
	}
	if _, err := cc.Complete(context.Background(), req); err != nil || next.calls.Load() != 2 {
		t.Errorf("corrupt entry: %v, calls %d", err, next.calls.Load())
	}
	if e, ok := cache.Get(key); !ok || e.Text != "reply to q" {
		t.Errorf("not rewritten: %+v", e)
	}

	// Errors are not cached.
	failing := &countingCompleter{fail: errors.New("boom")}
	fc := cache.Completer(failing)
	other := llm.Request{Model: "m", Messages: []llm.Message{{Role: "user", Content: "other"}}}
	for range 2 {
		if _, err := fc.Complete(context.Background(), other); err == nil || !strings.Contains(err.Error(), "boom") {
			t.Errorf("err = %v", err)
		}
	}
	if failing.calls.Load() != 2 {
		t.Errorf("failed call cached: %d calls", failing.calls.Load())
	}
	if _, err := OpenCache(""); err == nil {
		t.Error("OpenCache(\"\") succeeded")
	}
}
