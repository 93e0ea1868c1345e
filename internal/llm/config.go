package llm

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultTimeout = 150 * time.Second
	// DefaultIdleTimeout bounds the wait between two chunks of a stream.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultStreamTimeout caps a whole streamed reply: long enough for a
	// slow local model's long answer, which the chunks show alive.
	DefaultStreamTimeout = 30 * time.Minute
	DefaultMaxRetries    = 4

	DefaultBackoffBase   = 500 * time.Millisecond
	DefaultBackoffMax    = 20 * time.Second
	DefaultBackoffJitter = 0.5
	// DefaultMaxRetryAfter caps the wait a server may ask for with
	// Retry-After: a longer wait ends the call with the server's error
	// instead of sleeping (openai-go uses the same cap).
	DefaultMaxRetryAfter = 2 * time.Minute

	// TimeoutEnv names the environment variable holding the default
	// per-attempt timeout: seconds ("150", "2.5") or a Go duration ("90s").
	TimeoutEnv = "MODEL_TIMEOUT"
)

// Clock tells the time (bus.Clock has the same method, so a bus clock can
// be passed).
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Backoff shapes the waits between attempts: attempt n+1 waits
// min(Max, Base·2^(n-1)) shortened by up to Jitter of itself at random, or,
// when the failed attempt's response carried Retry-After-Ms / Retry-After,
// exactly what the server asked for (up to MaxRetryAfter; a longer demand
// ends the call).
type Backoff struct {
	Base          time.Duration // default 500ms
	Max           time.Duration // default 20s
	Jitter        float64       // fraction in [0,1]; default 0.5; negative = none
	MaxRetryAfter time.Duration // default 2m
	// Rand returns a number in [0,1) for the jitter; default math/rand/v2.
	Rand func() float64
}

func (b *Backoff) setDefaults() {
	if b.Base <= 0 {
		b.Base = DefaultBackoffBase
	}
	if b.Max <= 0 {
		b.Max = DefaultBackoffMax
	}
	if b.Max < b.Base {
		b.Max = b.Base
	}
	switch {
	case b.Jitter == 0:
		b.Jitter = DefaultBackoffJitter
	case b.Jitter < 0:
		b.Jitter = 0
	case b.Jitter > 1:
		b.Jitter = 1
	}
	if b.MaxRetryAfter <= 0 {
		b.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if b.Rand == nil {
		b.Rand = mrand.Float64
	}
}

// delay is the wait before retry number n (1 for the first retry).
func (b Backoff) delay(n int) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return d - time.Duration(float64(d)*b.Jitter*b.Rand())
}

// Config configures a [Client]. BaseURL is required; everything else has a
// default.
type Config struct {
	// BaseURL of the OpenAI-compatible API, normalised by NormalizeBaseURL
	// (http://127.0.0.1:1234 → http://127.0.0.1:1234/v1).
	BaseURL string
	// Model is the model name used when a Request names none.
	Model string
	// APIKeyEnv is the NAME of the environment variable holding the API key
	// (never the key: configs travel in events). Empty: no key, and no
	// Authorization header is sent (set the variable to "none" for a server
	// that insists on one). The variable is read once, by New; naming a
	// variable that is not set is an error.
	APIKeyEnv string
	// KeyEnvs, when set, is the allow-list of variables APIKeyEnv may
	// name: New refuses any other (a *KeyEnvError, errors.Is
	// ErrKeyEnvNotAllowed, naming --allow-api-key-env) before it reads the
	// environment. Every client made from settings that came in an event
	// (a task's model, its auditor's, VerifyFast's, an eval profile's) must
	// have one. Nil: any variable (settings that are the operator's own).
	KeyEnvs *KeyEnvs
	// Timeout bounds each attempt, from sending the request to the end of
	// the response body. When streaming it bounds the wait for the first
	// chunk (the prompt's processing) instead; IdleTimeout then bounds
	// each gap and StreamTimeout the whole reply. 0: the MODEL_TIMEOUT
	// environment variable (seconds or a Go duration), else 150s.
	// Negative: no per-attempt timeout (ctx still applies).
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt, on 429,
	// 408, 5xx, connection errors and attempt timeouts. 0: 4. Negative:
	// none.
	MaxRetries int
	Backoff    Backoff
	// Stream requests Server-Sent Events and accumulates the chunks (with
	// stream_options.include_usage, so usage is still reported).
	Stream bool
	// IdleTimeout bounds the wait for the next chunk of a stream once the
	// first has come. 0: 60 s, or Timeout when shorter. Negative: none.
	IdleTimeout time.Duration
	// StreamTimeout caps a whole streamed attempt. 0: 30 min, or Timeout
	// when longer. Negative: none (ctx still applies).
	StreamTimeout time.Duration
	// MaxCompletionTokens sends Request.MaxTokens as max_completion_tokens
	// (what OpenAI's newer models require) instead of max_tokens (what
	// most local servers understand).
	MaxCompletionTokens bool
	// HTTPClient carries the requests; default: a client on a clone of
	// http.DefaultTransport (which honours HTTP(S)_PROXY / NO_PROXY;
	// loopback addresses are never proxied).
	HTTPClient *http.Client
	// Recorder, when set, is told about every attempt (see [Recorder]).
	Recorder Recorder
	// Logger receives a debug line per attempt and a warning per retry.
	// Default: slog.Default().
	Logger *slog.Logger
	// Clock measures latency; default the wall clock.
	Clock Clock
	// NewCallID makes the id of a call whose Request has no CallID;
	// default "call-" and 16 random hex digits.
	NewCallID func() string
	// LookupEnv reads the environment (APIKeyEnv, MODEL_TIMEOUT); default
	// os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// TimeoutFromEnv returns the per-attempt timeout MODEL_TIMEOUT sets
// (lookup reads the environment; nil means os.LookupEnv): a number of
// seconds ("150", "2.5") or a Go duration ("90s", "2m30s"). Unset or empty
// gives DefaultTimeout.
func TimeoutFromEnv(lookup func(string) (string, bool)) (time.Duration, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, ok := lookup(TimeoutEnv)
	v = strings.TrimSpace(v)
	if !ok || v == "" {
		return DefaultTimeout, nil
	}
	return ParseTimeout(v)
}

// ParseTimeout parses a timeout given as seconds ("150", "2.5") or as a Go
// duration ("90s"). It must be positive.
func ParseTimeout(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	var d time.Duration
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		if f > 0 && f < float64(1<<62)/float64(time.Second) {
			d = time.Duration(f * float64(time.Second))
		}
	} else if pd, err := time.ParseDuration(v); err == nil {
		d = pd
	} else {
		return 0, fmt.Errorf("llm: %s=%q: want seconds (150) or a duration (90s)", TimeoutEnv, v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("llm: %s=%q: the timeout must be positive", TimeoutEnv, v)
	}
	return d, nil
}

func randomCallID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "call-" + hex.EncodeToString(b[:])
}
