package verifyfast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vera-run/vera/internal/llm"
)

// LoadItems reads and validates an input JSONL file (ReadItems): the valid
// items, and the bad lines by number with their reasons. The error is for
// the file itself (it cannot be opened).
func LoadItems(path string) ([]Item, []LineError, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	items, bad := ReadItems(f)
	return items, bad, nil
}

// BatchConfig configures RunBatch.
type BatchConfig struct {
	// Items are the validated input items (ReadItems); their ids must be
	// unique.
	Items []Item
	// Profiles to run, by name; empty means every profile of Settings.
	Profiles []string
	Settings *Settings
	// Strategy is strategy.yaml; RunBatch resolves it per profile.
	Strategy Strategy
	// Completers returns the client of a settings.yaml llm entry (by its
	// name). It is called once per llm the selected profiles use.
	Completers func(llmName string) (llm.Completer, error)
	// Cache, when set, stores every model reply, so a rerun or a resume
	// repeats no call.
	Cache *Cache

	// Concurrency is the number of items (× profiles) audited at once;
	// default 4. Each audit makes at most two calls at a time (Phases 2
	// and 3), so at most 2×Concurrency calls are in flight.
	Concurrency int

	// OutPath is the results JSONL file. Without Resume it is created or
	// truncated; with Resume, the (profile, id) pairs it already holds are
	// skipped and new lines are appended (a last line cut off by a crash
	// is removed first).
	OutPath string
	// Out receives the results when OutPath is empty (no Resume then).
	Out io.Writer
	// Resume skips what OutPath already holds and appends to it.
	Resume bool

	// Progress, if set, is called once at the start and after every result
	// line written, never concurrently: done counts the results of this
	// batch's items×profiles in the output (resumed ones included), failed
	// those of them that failed.
	Progress func(done, total, failed int)

	// MaxRepairs and DecomposeWithRun are passed to every Auditor.
	MaxRepairs       int
	DecomposeWithRun bool

	// MaxRetries is how often one model call is retried after a
	// rate-limit or transient error (AdviseRetry); default 6, negative for
	// none. Every such error also pauses and narrows every call to the
	// same endpoint (base_url): see limiter.
	MaxRetries int
	// RetryBackoff is the first wait when the server named none (Retry-After
	// is always honoured); it doubles per retry up to a minute. Default 1s.
	RetryBackoff time.Duration
	// MaxRequestsPerSecond, when positive, spaces the calls to each
	// endpoint evenly.
	MaxRequestsPerSecond float64
}

// BatchStats sums up a batch.
type BatchStats struct {
	Total   int `json:"total"`   // items × profiles
	Skipped int `json:"skipped"` // already in the results file (Resume)
	Written int `json:"written"` // result lines written by this run
	Scored  int `json:"scored"`  // of Written, scored
	Failed  int `json:"failed"`  // of Written, failed (not scored)
	// Unfinished were neither skipped nor written: the batch stopped (ctx
	// ended, or writing failed) before they completed. A resume runs them.
	Unfinished int `json:"unfinished"`

	Requests    int64 `json:"requests"`     // model calls sent, retries included
	Retries     int64 `json:"retries"`      // calls retried after a transient error
	CacheHits   int64 `json:"cache_hits"`   // calls answered by the cache
	CacheErrors int64 `json:"cache_errors"` // replies that could not be cached

	Elapsed time.Duration `json:"elapsed"`
	// OutLines are the lines of an existing results file that could not be
	// read on Resume (they are left in place; the items run again).
	OutLines []LineError `json:"out_lines,omitempty"`
}

type taskKey struct {
	profile string
	id      ItemID
}

type task struct {
	item    Item
	auditor *Auditor
}

// RunBatch audits every item under every selected profile, Concurrency at a
// time, and writes one results JSONL line (with its profile) per item and
// profile as soon as it completes, synced to disk, so a crash loses at
// most the items in flight.
//
// When ctx ends the batch stops gracefully: no new audit and no new model
// call starts, the calls in flight complete (and are cached), the items
// they complete are written, and RunBatch returns the stats with ctx's
// error. The unfinished items are left for a resume, which repeats no call
// when a Cache is set. Interrupting the calls in flight too is the
// caller's business (a second Ctrl-C ending the process, say).
//
// A model call failing with a rate-limit or transient error is retried
// (MaxRetries), honouring Retry-After, and slows every call to that
// endpoint. An item whose phase fails — a call error left after the
// retries, or replies still unusable after the re-ask — is written as a
// failed result with the reasons, never scored. The error is not nil when
// the configuration is unusable, the output cannot be written, or ctx
// ended.
func RunBatch(ctx context.Context, cfg BatchConfig) (BatchStats, error) {
	start := time.Now()
	var stats BatchStats
	if cfg.Settings == nil {
		return stats, errors.New("verifyfast: batch: no settings")
	}
	if cfg.Completers == nil {
		return stats, errors.New("verifyfast: batch: no Completers")
	}
	if cfg.OutPath == "" && cfg.Out == nil {
		return stats, errors.New("verifyfast: batch: no output (OutPath or Out)")
	}
	if cfg.Resume && cfg.OutPath == "" {
		return stats, errors.New("verifyfast: batch: Resume needs OutPath")
	}
	profiles, err := cfg.Settings.SelectProfiles(cfg.Profiles)
	if err != nil {
		return stats, fmt.Errorf("verifyfast: batch: %w", err)
	}
	seen := map[ItemID]bool{}
	for _, it := range cfg.Items {
		if seen[it.ID] {
			return stats, fmt.Errorf("verifyfast: batch: item id %s given twice", it.ID)
		}
		seen[it.ID] = true
	}
	conc := cfg.Concurrency
	if conc <= 0 {
		conc = 4
	}

	stop, stopWith := context.WithCancelCause(ctx)
	defer stopWith(nil)
	b := &batchRun{
		stop:       stop,
		maxRetries: cfg.MaxRetries,
		backoff:    cfg.RetryBackoff,
		limiters:   map[string]*limiter{},
	}
	if b.maxRetries == 0 {
		b.maxRetries = 6
	}
	if b.backoff <= 0 {
		b.backoff = time.Second
	}

	// One client per llm entry, wrapped: limiter and retries, then cache.
	completers := map[string]llm.Completer{}
	var caching []*CachingCompleter
	wrap := func(name string) (llm.Completer, error) {
		if c, ok := completers[name]; ok {
			return c, nil
		}
		spec, ok := cfg.Settings.LLMs[name]
		if !ok {
			return nil, fmt.Errorf("verifyfast: batch: unknown llm %q", name)
		}
		base, err := cfg.Completers(name)
		if err != nil {
			return nil, fmt.Errorf("verifyfast: batch: llm %s: %w", name, err)
		}
		if base == nil {
			return nil, fmt.Errorf("verifyfast: batch: llm %s: no completer", name)
		}
		lim := b.limiters[spec.BaseURL]
		if lim == nil {
			lim = newLimiter(2*conc, cfg.MaxRequestsPerSecond)
			b.limiters[spec.BaseURL] = lim
		}
		var c llm.Completer = &batchCompleter{next: base, lim: lim, b: b}
		if cfg.Cache != nil {
			cc := cfg.Cache.Completer(c)
			caching = append(caching, cc)
			c = cc
		}
		completers[name] = c
		return c, nil
	}
	auditors := make([]*Auditor, len(profiles))
	for i, p := range profiles {
		a := &Auditor{
			RunModel:         cfg.Settings.LLMs[p.Run].Model,
			VerifyModel:      cfg.Settings.LLMs[p.Verify].Model,
			Strategy:         cfg.Strategy.ForProfile(p.Name),
			Profile:          p.Name,
			MaxRepairs:       cfg.MaxRepairs,
			Sampling:         cfg.Settings.Defaults.Sampling(),
			DecomposeWithRun: cfg.DecomposeWithRun,
		}
		if a.Verify, err = wrap(p.Verify); err != nil {
			return stats, err
		}
		if cfg.DecomposeWithRun {
			if a.Run, err = wrap(p.Run); err != nil {
				return stats, err
			}
		}
		auditors[i] = a
	}

	// Output.
	out, done, err := openResults(cfg, &stats)
	if err != nil {
		return stats, err
	}
	defer out.close()

	var tasks []task
	for _, it := range cfg.Items {
		for i, p := range profiles {
			stats.Total++
			if r, ok := done[taskKey{p.Name, it.ID}]; ok {
				stats.Skipped++
				if r.Failed() {
					out.failed++
				}
				continue
			}
			tasks = append(tasks, task{item: it, auditor: auditors[i]})
		}
	}
	out.done = stats.Skipped
	out.total = stats.Total
	out.progress = cfg.Progress
	out.report()

	// Workers.
	queue := make(chan task)
	var wg sync.WaitGroup
	for range min(conc, max(1, len(tasks))) {
		wg.Go(func() {
			for t := range queue {
				if stop.Err() != nil {
					continue
				}
				// The audit runs detached from ctx: stopping is done by
				// refusing new calls (batchCompleter), so calls in flight
				// complete and are cached.
				res, err := t.auditor.AuditItem(context.WithoutCancel(stop), t.item)
				if err != nil {
					continue
				}
				if err := out.write(res); err != nil {
					stopWith(err)
				}
			}
		})
	}
feed:
	for _, t := range tasks {
		select {
		case queue <- t:
		case <-stop.Done():
			break feed
		}
	}
	close(queue)
	wg.Wait()

	stats.Written, stats.Scored, stats.Failed = out.written, out.written-out.writtenFailed, out.writtenFailed
	stats.Unfinished = stats.Total - stats.Skipped - stats.Written
	stats.Requests = b.requests.Load()
	stats.Retries = b.retries.Load()
	for _, cc := range caching {
		stats.CacheHits += cc.Stats().Hits
	}
	if cfg.Cache != nil {
		stats.CacheErrors = cfg.Cache.Stats().WriteErrors
	}
	if err := out.close(); err != nil {
		stopWith(err)
	}
	stats.Elapsed = time.Since(start)
	if cause := context.Cause(stop); cause != nil {
		return stats, cause
	}
	return stats, nil
}

// batchRun is the state the completers of one batch share.
type batchRun struct {
	stop       context.Context
	maxRetries int
	backoff    time.Duration
	limiters   map[string]*limiter // by base_url

	requests, retries atomic.Int64
}

// batchCompleter refuses new calls once the batch stops, paces calls
// through the endpoint's limiter and retries transient errors.
type batchCompleter struct {
	next llm.Completer
	lim  *limiter
	b    *batchRun
}

func (c *batchCompleter) Complete(ctx context.Context, req llm.Request) (llm.Response, error) {
	for attempt := 0; ; attempt++ {
		if err := c.lim.acquire(c.b.stop); err != nil {
			return llm.Response{}, errStopped
		}
		c.b.requests.Add(1)
		resp, err := c.next.Complete(ctx, req)
		if err == nil {
			c.lim.release(false, 0)
			return resp, nil
		}
		adv := AdviseRetry(err)
		if !adv.Retryable || ctx.Err() != nil {
			c.lim.release(false, 0)
			return resp, err
		}
		wait := adv.RetryAfter
		if wait <= 0 {
			wait = backoff(c.b.backoff, attempt)
		}
		c.lim.release(true, wait)
		if c.b.maxRetries < 0 || attempt >= c.b.maxRetries {
			return resp, fmt.Errorf("%w (gave up after %d retries)", err, attempt)
		}
		c.b.retries.Add(1)
	}
}

// resultsOut writes result lines, one Write and one sync per line.
type resultsOut struct {
	mu       sync.Mutex
	w        io.Writer
	f        *os.File // when writing to OutPath
	closed   bool
	progress func(done, total, failed int)

	done, total, failed    int
	written, writtenFailed int
}

func (o *resultsOut) write(res Result) error {
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("verifyfast: batch: encoding result %s: %w", res.ID, err)
	}
	b = append(b, '\n')
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, err := o.w.Write(b); err != nil {
		return fmt.Errorf("verifyfast: batch: writing results: %w", err)
	}
	if fl, ok := o.w.(interface{ Flush() error }); ok {
		if err := fl.Flush(); err != nil {
			return fmt.Errorf("verifyfast: batch: writing results: %w", err)
		}
	}
	if o.f != nil {
		if err := o.f.Sync(); err != nil {
			return fmt.Errorf("verifyfast: batch: syncing results: %w", err)
		}
	}
	o.written++
	o.done++
	if res.Failed() {
		o.writtenFailed++
		o.failed++
	}
	o.reportLocked()
	return nil
}

func (o *resultsOut) report() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reportLocked()
}

func (o *resultsOut) reportLocked() {
	if o.progress != nil {
		o.progress(o.done, o.total, o.failed)
	}
}

func (o *resultsOut) close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.f == nil {
		o.closed = true
		return nil
	}
	o.closed = true
	return o.f.Close()
}

// openResults opens the output and, on Resume, reads what it holds.
func openResults(cfg BatchConfig, stats *BatchStats) (*resultsOut, map[taskKey]Result, error) {
	done := map[taskKey]Result{}
	if cfg.OutPath == "" {
		return &resultsOut{w: cfg.Out}, done, nil
	}
	if !cfg.Resume {
		f, err := os.OpenFile(cfg.OutPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("verifyfast: batch: %w", err)
		}
		return &resultsOut{w: f, f: f}, done, nil
	}
	f, err := os.OpenFile(cfg.OutPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("verifyfast: batch: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("verifyfast: batch: reading %s: %w", cfg.OutPath, err)
	}
	if n := len(data); n > 0 && data[n-1] != '\n' {
		// The last line was cut off by a crash: drop it.
		keep := bytes.LastIndexByte(data, '\n') + 1
		line := bytes.Count(data[:keep], []byte("\n")) + 1
		stats.OutLines = append(stats.OutLines, LineError{Line: line, Reason: "incomplete last line (cut off) removed"})
		if err := f.Truncate(int64(keep)); err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("verifyfast: batch: %s: %w", cfg.OutPath, err)
		}
		data = data[:keep]
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("verifyfast: batch: %s: %w", cfg.OutPath, err)
	}
	results, bad := ReadResults(bytes.NewReader(data))
	stats.OutLines = append(stats.OutLines, bad...)
	for _, r := range results {
		done[taskKey{r.Profile, r.ID}] = r
	}
	return &resultsOut{w: f, f: f}, done, nil
}
