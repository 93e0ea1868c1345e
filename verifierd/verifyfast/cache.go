package verifyfast

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/vera-run/vera/internal/llm"
)

// cacheVersion is hashed into every key: bump it when the entry format or
// the meaning of a key changes, and old entries are simply never hit.
const cacheVersion = "verifyfast-cache-v1"

// Cache is a directory of model replies, one JSON file per call, keyed by
// the SHA-256 of the model name, the full messages, the temperature and
// max_tokens (CacheKey). An entry is written to a temporary file, synced and
// renamed into place, so a crash never leaves a partial entry under a key;
// an unreadable entry is treated as a miss and rewritten.
//
// Entries live at DIR/ab/abcdef….json (the first two hex digits shard the
// directory). A Cache is safe for concurrent use, also by several
// processes.
type Cache struct {
	dir string

	hits, misses, writeErrors atomic.Int64

	mu       sync.Mutex
	inflight map[string]*flight // calls in flight, by key
}

// CacheEntry is one cached reply.
type CacheEntry struct {
	Key string `json:"key"`
	// Model, Temperature, MaxTokens and Messages (the count) describe the
	// request, for someone reading the file.
	Model        string   `json:"model"`
	Temperature  *float64 `json:"temperature,omitempty"`
	MaxTokens    int      `json:"max_tokens,omitempty"`
	Messages     int      `json:"messages"`
	Text         string   `json:"text"`
	FinishReason string   `json:"finish_reason,omitempty"`
	// ResponseModel is the model the server reported.
	ResponseModel string `json:"response_model,omitempty"`
	Usage         Tokens `json:"usage"`
}

// OpenCache opens (creating it if need be) a cache directory.
func OpenCache(dir string) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("verifyfast: cache directory not given")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("verifyfast: cache: %w", err)
	}
	return &Cache{dir: dir}, nil
}

// Dir returns the cache directory.
func (c *Cache) Dir() string { return c.dir }

// CacheKey returns the hex SHA-256 identifying a request: model, every
// message (role and content, in order), temperature (nil and a value
// differ), max_tokens, and, when set, top_p, seed, stop, extra_body and
// the response format (name, strictness and schema). The bookkeeping
// fields of llm.Request (RunID, Scope, Purpose, CallID, …) are not part of
// it. A request without the later options has the key it had before they
// existed.
func CacheKey(req llm.Request) string {
	k := struct {
		V           string          `json:"v"`
		Model       string          `json:"model"`
		Messages    []llm.Message   `json:"messages"`
		Temperature *float64        `json:"temperature"`
		MaxTokens   int             `json:"max_tokens"`
		TopP        *float64        `json:"top_p,omitempty"`
		Seed        *int64          `json:"seed,omitempty"`
		Stop        []string        `json:"stop,omitempty"`
		ExtraBody   map[string]any  `json:"extra_body,omitempty"`
		Format      *llm.JSONSchema `json:"response_format,omitempty"`
	}{cacheVersion, req.Model, req.Messages, req.Temperature, req.MaxTokens, req.TopP, req.Seed, req.Stop, req.ExtraBody, req.ResponseFormat}
	if k.Messages == nil {
		k.Messages = []llm.Message{}
	}
	b, err := json.Marshal(k)
	if err != nil {
		// Only a NaN or infinite temperature gets here; hash its text.
		b = fmt.Appendf(nil, "%s\x00%s\x00%v\x00%v\x00%d", cacheVersion, req.Model, req.Messages, req.Temperature, req.MaxTokens)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (c *Cache) path(key string) string {
	return filepath.Join(c.dir, key[:2], key+".json")
}

// Get returns the entry stored under key. A missing or unreadable entry is
// a miss (false).
func (c *Cache) Get(key string) (CacheEntry, bool) {
	if len(key) < 3 {
		return CacheEntry{}, false
	}
	b, err := os.ReadFile(c.path(key))
	if err != nil {
		return CacheEntry{}, false
	}
	var e CacheEntry
	if err := json.Unmarshal(b, &e); err != nil || e.Key != key {
		return CacheEntry{}, false
	}
	return e, true
}

// Put stores e under e.Key atomically: temporary file in the same
// directory, fsync, rename.
func (c *Cache) Put(e CacheEntry) error {
	if len(e.Key) < 3 {
		return fmt.Errorf("verifyfast: cache: bad key %q", e.Key)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("verifyfast: cache: %w", err)
	}
	final := c.path(e.Key)
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("verifyfast: cache: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+e.Key[:8]+"-*")
	if err != nil {
		return fmt.Errorf("verifyfast: cache: %w", err)
	}
	name := tmp.Name()
	_, werr := tmp.Write(append(b, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(name)
		return fmt.Errorf("verifyfast: cache: writing %s: %w", final, err)
	}
	if err := os.Rename(name, final); err != nil {
		os.Remove(name)
		return fmt.Errorf("verifyfast: cache: %w", err)
	}
	return nil
}

// Len counts the entries in the cache.
func (c *Cache) Len() (int, error) {
	n := 0
	err := filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && filepath.Ext(p) == ".json" && filepath.Base(p)[0] != '.' {
			n++
		}
		return nil
	})
	return n, err
}

// CacheStats counts what went through CachingCompleters.
type CacheStats struct {
	Hits   int64 `json:"hits"`   // calls answered from the cache (or by a call in flight for the same key)
	Misses int64 `json:"misses"` // calls passed on to the model
	// WriteErrors counts replies that could not be stored; the call still
	// succeeded, only a rerun will repeat it.
	WriteErrors int64 `json:"write_errors"`
}

// Stats returns the counters of every CachingCompleter over this cache.
func (c *Cache) Stats() CacheStats {
	return CacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), WriteErrors: c.writeErrors.Load()}
}

// Completer wraps next so that every call goes through the cache.
func (c *Cache) Completer(next llm.Completer) *CachingCompleter {
	return &CachingCompleter{Cache: c, Next: next}
}

// CachingCompleter is an llm.Completer that answers a request from its
// Cache when it can and otherwise calls Next and stores the reply (only
// successful replies are stored; errors never are). Concurrent identical
// requests through the same Cache make one call: the others wait for it and
// share its reply.
//
// A reply from the cache has Attempts 0 and Latency 0 (no call was made)
// and the usage the original call reported, so a rerun reproduces the
// token counts.
type CachingCompleter struct {
	Cache *Cache
	Next  llm.Completer

	hits, misses atomic.Int64
}

type flight struct {
	done chan struct{}
	resp llm.Response
	err  error
}

// Stats returns this completer's own counters.
func (cc *CachingCompleter) Stats() CacheStats {
	return CacheStats{Hits: cc.hits.Load(), Misses: cc.misses.Load()}
}

// Complete implements llm.Completer.
func (cc *CachingCompleter) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	key := CacheKey(req)
	c := cc.Cache
	for {
		if e, ok := c.Get(key); ok {
			cc.hit()
			return e.response(), nil
		}
		c.mu.Lock()
		f, waiting := c.inflight[key]
		if !waiting {
			break // with c.mu held: this call leads
		}
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return llm.Response{}, ctx.Err()
		}
		if f.err == nil {
			cc.hit()
			r := f.resp
			r.Attempts, r.Latency = 0, 0
			return r, nil
		}
		// The call we waited for failed (perhaps for reasons of its own
		// caller): try ourselves.
	}
	// Another process (or a call that just finished) may have stored it.
	if e, ok := c.Get(key); ok {
		c.mu.Unlock()
		cc.hit()
		return e.response(), nil
	}
	f := &flight{done: make(chan struct{})}
	if c.inflight == nil {
		c.inflight = map[string]*flight{}
	}
	c.inflight[key] = f
	c.mu.Unlock()

	cc.misses.Add(1)
	c.misses.Add(1)
	f.resp, f.err = cc.Next.Complete(ctx, req)
	if f.err == nil {
		e := CacheEntry{
			Key:           key,
			Model:         req.Model,
			Temperature:   req.Temperature,
			MaxTokens:     req.MaxTokens,
			Messages:      len(req.Messages),
			Text:          f.resp.Text,
			FinishReason:  f.resp.FinishReason,
			ResponseModel: f.resp.Model,
			Usage:         tokensOf(f.resp.Usage),
		}
		if err := c.Put(e); err != nil {
			c.writeErrors.Add(1)
		}
	}
	c.mu.Lock()
	delete(c.inflight, key)
	c.mu.Unlock()
	close(f.done)
	return f.resp, f.err
}

func (cc *CachingCompleter) hit() {
	cc.hits.Add(1)
	cc.Cache.hits.Add(1)
}

func (e CacheEntry) response() llm.Response {
	return llm.Response{
		Text:         e.Text,
		FinishReason: e.FinishReason,
		Model:        e.ResponseModel,
		Usage: llm.Usage{
			Prompt:     int64(e.Usage.Prompt),
			Completion: int64(e.Usage.Completion),
			Total:      int64(e.Usage.Total),
		},
	}
}

func tokensOf(u llm.Usage) Tokens {
	t := Tokens{Prompt: int(u.Prompt), Completion: int(u.Completion), Total: int(u.Total)}
	if t.Total == 0 {
		t.Total = t.Prompt + t.Completion
	}
	return t
}
