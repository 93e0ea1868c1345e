package verifyfast

import (
	"context"
	"errors"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"
)

// RetryAdvice is what a batch reads from a model call error: whether the
// call may be retried and the wait the server asked for.
type RetryAdvice struct {
	Retryable  bool
	RetryAfter time.Duration // 0: the server asked for no particular wait
	Status     int           // HTTP status, 0 when unknown
}

// AdviseRetry inspects every error in err's chain. A model client tells a
// batch about transient errors through any of these methods:
//
//	RetryAfter() time.Duration   // > 0: retryable, wait that long
//	Retryable() bool             // or Temporary() bool
//	StatusCode() int             // or HTTPStatus() int; 408, 409, 425, 429, 5xx are retryable
//
// or, for error structs that carry them as fields (as llm.APIError does),
// exported fields of these names: RetryAfter (time.Duration), Retryable
// (bool), Status or StatusCode (int).
func AdviseRetry(err error) RetryAdvice {
	var a RetryAdvice
	var explicit *bool
	walkErrors(err, func(e error) {
		if x, ok := e.(interface{ RetryAfter() time.Duration }); ok {
			if d := x.RetryAfter(); d > 0 && a.RetryAfter == 0 {
				a.RetryAfter = d
			}
		}
		if x, ok := e.(interface{ Retryable() bool }); ok && explicit == nil {
			v := x.Retryable()
			explicit = &v
		} else if x, ok := e.(interface{ Temporary() bool }); ok && explicit == nil {
			v := x.Temporary()
			explicit = &v
		}
		if x, ok := e.(interface{ StatusCode() int }); ok && a.Status == 0 {
			a.Status = x.StatusCode()
		} else if x, ok := e.(interface{ HTTPStatus() int }); ok && a.Status == 0 {
			a.Status = x.HTTPStatus()
		}
		// Fields of an error struct.
		v := reflect.ValueOf(e)
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			if v.IsNil() {
				return
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return
		}
		if f := v.FieldByName("RetryAfter"); f.IsValid() && f.CanInterface() && f.Type() == reflect.TypeFor[time.Duration]() {
			if d := time.Duration(f.Int()); d > 0 && a.RetryAfter == 0 {
				a.RetryAfter = d
			}
		}
		if f := v.FieldByName("Retryable"); f.IsValid() && f.CanInterface() && f.Kind() == reflect.Bool && explicit == nil {
			b := f.Bool()
			explicit = &b
		}
		for _, name := range []string{"Status", "StatusCode"} {
			if f := v.FieldByName(name); f.IsValid() && f.CanInterface() && f.Kind() == reflect.Int && a.Status == 0 {
				a.Status = int(f.Int())
			}
		}
	})
	switch {
	case a.RetryAfter > 0:
		a.Retryable = true
	case explicit != nil:
		a.Retryable = *explicit
	default:
		switch a.Status {
		case 408, 409, 425, 429, 500, 502, 503, 504:
			a.Retryable = true
		}
	}
	if a.Status == 429 {
		a.Retryable = true
	}
	return a
}

// walkErrors calls fn on err and every error it wraps, depth first.
func walkErrors(err error, fn func(error)) {
	for depth := 0; err != nil && depth < 32; depth++ {
		fn(err)
		switch x := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range x.Unwrap() {
				walkErrors(e, fn)
			}
			return
		default:
			err = errors.Unwrap(err)
		}
	}
}

// limiter paces the model calls to one endpoint for a whole batch:
//
//   - a shared pause: a rate-limited (or otherwise transient) error makes
//     every call to the endpoint wait until the pause ends, not just the
//     one retrying;
//   - additive-increase / multiplicative-decrease of the calls in flight:
//     each such error halves the number of concurrent calls allowed (down
//     to 1) and each success adds 1/limit, back up to the maximum, so
//     after a pause the batch does not hammer the server with every
//     waiting call at once;
//   - optionally a fixed rate (minimum spacing between call starts).
type limiter struct {
	mu       sync.Mutex
	until    time.Time // shared pause
	limit    float64   // calls allowed in flight
	max      float64
	active   int
	interval time.Duration // minimum spacing between call starts; 0: none
	next     time.Time     // earliest start of the next call when paced
	wake     chan struct{} // closed and replaced when a slot frees
}

func newLimiter(maxInFlight int, perSecond float64) *limiter {
	l := &limiter{limit: float64(maxInFlight), max: float64(maxInFlight), wake: make(chan struct{})}
	if perSecond > 0 {
		l.interval = time.Duration(float64(time.Second) / perSecond)
	}
	return l
}

// acquire waits for the pause to end, a free slot and the pacing; it fails
// only when ctx ends.
func (l *limiter) acquire(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		l.mu.Lock()
		now := time.Now()
		if now.Before(l.until) {
			d, wake := l.until.Sub(now), l.wake
			l.mu.Unlock()
			if err := sleepOrWake(ctx, d, wake); err != nil {
				return err
			}
			continue
		}
		if l.active >= max(1, int(l.limit)) {
			wake := l.wake
			l.mu.Unlock()
			select {
			case <-wake:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		var wait time.Duration
		if l.interval > 0 {
			slot := l.next
			if slot.Before(now) {
				slot = now
			}
			l.next = slot.Add(l.interval)
			wait = slot.Sub(now)
		}
		l.active++
		l.mu.Unlock()
		if wait > 0 {
			if err := sleepOrWake(ctx, wait, nil); err != nil {
				l.release(false, 0)
				return err
			}
		}
		return nil
	}
}

// release frees the slot of a finished call. congested reports a
// rate-limited or transient error, pause the wait before any call to the
// endpoint may start again.
func (l *limiter) release(congested bool, pause time.Duration) {
	l.mu.Lock()
	l.active--
	if congested {
		l.limit = max(1, l.limit/2)
		if until := time.Now().Add(pause); until.After(l.until) {
			l.until = until
		}
	} else if l.limit < l.max {
		l.limit = min(l.max, l.limit+1/l.limit)
	}
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

// sleepOrWake sleeps d, returning early (nil) when wake is closed and with
// ctx's error when ctx ends.
func sleepOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-wake:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// backoff is the wait before retry n (0-based) when the server named none:
// base doubling, capped at maxBackoff, with ±20% jitter.
func backoff(base time.Duration, n int) time.Duration {
	d := base
	for i := 0; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	jitter := 0.8 + 0.4*rand.Float64()
	return time.Duration(float64(d) * jitter)
}

const maxBackoff = time.Minute
