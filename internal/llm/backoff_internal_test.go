package llm

import (
	"net/http"
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Rand: func() float64 { return 0 }}
	b.setDefaults()
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 20 * time.Second, 20 * time.Second}
	for i, w := range want {
		if got := b.delay(i + 1); got != w {
			t.Errorf("delay(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := b.delay(1000); got != 20*time.Second {
		t.Errorf("delay(1000) = %v", got)
	}
	b.Rand = func() float64 { return 0.999999 }
	if got := b.delay(1); got < 250*time.Millisecond || got > 251*time.Millisecond {
		t.Errorf("full jitter of 0.5 on 500ms = %v, want ~250ms", got)
	}
	nb := Backoff{Jitter: -1, Rand: func() float64 { return 0.9 }}
	nb.setDefaults()
	if got := nb.delay(2); got != time.Second {
		t.Errorf("no jitter: %v", got)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		h    http.Header
		want time.Duration
		ok   bool
	}{
		{http.Header{}, 0, false},
		{http.Header{"Retry-After-Ms": {"250"}}, 250 * time.Millisecond, true},
		{http.Header{"Retry-After-Ms": {"1.5"}, "Retry-After": {"9"}}, 1500 * time.Microsecond, true},
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second, true},
		{http.Header{"Retry-After": {"0"}}, 0, true},
		{http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, 7 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(-time.Hour).Format(http.TimeFormat)}}, 0, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{"Retry-After-Ms": {"-5"}}, 0, false},
		{http.Header{"Retry-After": {"1e300"}}, 1<<63 - 1, true},
	}
	for _, c := range cases {
		got, ok := parseRetryAfter(c.h, now)
		if got != c.want || ok != c.ok {
			t.Errorf("%v: %v %v, want %v %v", c.h, got, ok, c.want, c.ok)
		}
	}
}

func TestRedactor(t *testing.T) {
	r := redactor{key: "sk-secret-123"}
	if got := r.string("bad key sk-secret-123!"); got != "bad key [REDACTED]!" {
		t.Errorf("%q", got)
	}
	if (redactor{}).string("x") != "x" {
		t.Error("empty key changed the text")
	}
}
