package verifyfast

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// apiLikeError has the shape of llm.APIError: fields, no methods.
type apiLikeError struct {
	Status     int
	Retryable  bool
	RetryAfter time.Duration
}

func (e *apiLikeError) Error() string { return fmt.Sprintf("HTTP %d", e.Status) }

type tempError struct{}

func (tempError) Error() string   { return "temporary" }
func (tempError) Temporary() bool { return true }

func TestAdviseRetry(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want RetryAdvice
	}{
		{"plain", errors.New("x"), RetryAdvice{}},
		{"methods 429", &statusError{status: 429, retryAfter: 2 * time.Second}, RetryAdvice{true, 2 * time.Second, 429}},
		{"methods 503", fmt.Errorf("wrapped: %w", &statusError{status: 503}), RetryAdvice{true, 0, 503}},
		{"methods 401", &statusError{status: 401}, RetryAdvice{false, 0, 401}},
		{"fields", fmt.Errorf("call: %w", &apiLikeError{Status: 429, Retryable: true, RetryAfter: 300 * time.Millisecond}), RetryAdvice{true, 300 * time.Millisecond, 429}},
		{"fields not retryable", &apiLikeError{Status: 400}, RetryAdvice{false, 0, 400}},
		{"fields retryable says so", &apiLikeError{Status: 500, Retryable: false}, RetryAdvice{false, 0, 500}},
		{"temporary", tempError{}, RetryAdvice{Retryable: true}},
		{"joined", errors.Join(errors.New("a"), &apiLikeError{Status: 429}), RetryAdvice{true, 0, 429}},
	}
	for _, c := range cases {
		if got := AdviseRetry(c.err); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestLimiterAIMD(t *testing.T) {
	l := newLimiter(4, 0)
	ctx := context.Background()
	for range 4 {
		if err := l.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A fifth waits until a slot frees.
	ctx5, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	if err := l.acquire(ctx5); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("fifth acquire: %v", err)
	}
	cancel()
	// A congestion signal halves the limit and pauses everyone.
	l.release(true, 80*time.Millisecond)
	if l.limit != 2 {
		t.Errorf("limit %v after congestion", l.limit)
	}
	start := time.Now()
	l.release(false, 0)
	l.release(false, 0)
	l.release(false, 0) // all free now
	if err := l.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 70*time.Millisecond {
		t.Errorf("acquired %v into an 80ms pause", waited)
	}
	l.release(false, 0)
	if l.limit <= 2 || l.limit > 4 {
		t.Errorf("limit %v did not recover additively", l.limit)
	}
	// Stopping ends the wait.
	if err := l.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	l.release(true, time.Hour)
	stop, cancelStop := context.WithCancel(ctx)
	go func() { time.Sleep(20 * time.Millisecond); cancelStop() }()
	if err := l.acquire(stop); !errors.Is(err, context.Canceled) {
		t.Errorf("acquire during a pause after stop: %v", err)
	}

	// Pacing.
	p := newLimiter(10, 50) // 20ms apart
	start = time.Now()
	for range 4 {
		if err := p.acquire(ctx); err != nil {
			t.Fatal(err)
		}
		p.release(false, 0)
	}
	if d := time.Since(start); d < 55*time.Millisecond {
		t.Errorf("4 paced calls at 50/s took %v", d)
	}
}

func TestBackoff(t *testing.T) {
	for n, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		d := backoff(time.Second, n)
		if d < want*8/10 || d > want*12/10 {
			t.Errorf("backoff(%d) = %v", n, d)
		}
	}
	if d := backoff(time.Second, 30); d > maxBackoff*12/10 {
		t.Errorf("backoff not capped: %v", d)
	}
}

func TestProgressBar(t *testing.T) {
	var buf bytes.Buffer
	bar := ProgressBar(&buf)
	bar(0, 40, 0)
	bar(14, 40, 1)
	bar(40, 40, 1)
	bar(40, 40, 1)
	out := buf.String()
	for _, want := range []string{
		"\r[------------------------------]  0/40   0%",
		"\r[##########--------------------] 14/40  35%  1 failed",
		"\r[##############################] 40/40 100%  1 failed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("bar lacks %q in %q", want, out)
		}
	}
	if strings.Count(out, "\n") != 1 {
		t.Errorf("bar = %q", out)
	}
}
