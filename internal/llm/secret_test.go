package llm_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

func TestAPIKeyFromNamedVariable(t *testing.T) {
	t.Setenv("VERA_TEST_MODEL_KEY", secretKey)
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("authorised")))
	for _, stream := range []bool{false, true} {
		c := newTestClient(t, srv, func(cfg *llm.Config) {
			cfg.APIKeyEnv, cfg.Stream = "VERA_TEST_MODEL_KEY", stream
		})
		resp, err := c.Complete(context.Background(), ask("x"))
		if err != nil || resp.Text != "authorised" {
			t.Fatalf("%+v %v", resp, err)
		}
		if strings.Contains(c.rec.dump(), secretKey) || strings.Contains(c.log.String(), secretKey) {
			t.Errorf("the key is in a record or the log")
		}
	}
	for _, r := range srv.Requests() {
		if r.APIKey() != secretKey || r.Header.Get("Authorization") != "Bearer "+secretKey {
			t.Errorf("request %d sent Authorization %q", r.Index, r.Header.Get("Authorization"))
		}
	}
}

func TestAPIKeyVariableErrors(t *testing.T) {
	srv := scriptedmodel.Start(t)
	if _, err := llm.New(llm.Config{BaseURL: srv.URL(), APIKeyEnv: "VERA_TEST_UNSET_KEY_VARIABLE"}); err == nil ||
		!strings.Contains(err.Error(), "VERA_TEST_UNSET_KEY_VARIABLE") {
		t.Errorf("an unset key variable: %v", err)
	}
	// A key pasted where the variable name belongs is refused without
	// being echoed whole.
	if _, err := llm.New(llm.Config{BaseURL: srv.URL(), APIKeyEnv: secretKey}); err == nil || strings.Contains(err.Error(), secretKey) {
		t.Errorf("a key as api_key_env: %v", err)
	}
	if _, err := llm.New(llm.Config{BaseURL: srv.URL(), APIKeyEnv: "sk_live_abcdefghijklmnop1234"}); err == nil || strings.Contains(err.Error(), "sk_live_abcdefghijklmnop1234") {
		t.Errorf("a key-like api_key_env: %v", err)
	}
}

// The key never appears in error texts, records or logs, even when the
// server echoes it back and whatever goes wrong.
func TestAPIKeyNeverLeaks(t *testing.T) {
	t.Setenv("VERA_TEST_MODEL_KEY", secretKey)
	srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(
		scriptedmodel.Reply{Status: 401, ErrorCode: "invalid_api_key", ErrorMessage: "Incorrect API key provided: " + secretKey + "."},
		scriptedmodel.Reply{Status: 500, ErrorMessage: "upstream rejected key " + secretKey, Times: scriptedmodel.Forever},
	))
	c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.APIKeyEnv, cfg.MaxRetries = "VERA_TEST_MODEL_KEY", 1 })

	var errs []error
	_, err := c.Complete(context.Background(), ask("x"))
	errs = append(errs, err)
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Status != 401 || ae.Code != "invalid_api_key" || !strings.Contains(ae.Message, "[REDACTED]") {
		t.Fatalf("401: %v", err)
	}
	var oe *openai.Error
	if !errors.As(err, &oe) {
		t.Fatal("openai error not wrapped")
	}
	if dump := string(oe.DumpRequest(true)); strings.Contains(dump, secretKey) || !strings.Contains(dump, "Authorization") {
		t.Errorf("the wrapped openai error's request still carries the key:\n%s", dump)
	}
	_, err = c.Complete(context.Background(), ask("x"))
	errs = append(errs, err)

	// Timeouts and connection errors too.
	slow := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Delay: 5 * time.Second}))
	c2 := newTestClient(t, slow, func(cfg *llm.Config) {
		cfg.APIKeyEnv, cfg.Timeout, cfg.MaxRetries = "VERA_TEST_MODEL_KEY", 50*time.Millisecond, -1
	})
	_, err = c2.Complete(context.Background(), ask("x"))
	errs = append(errs, err)
	l, _ := net.Listen("tcp4", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c3, err := llm.New(llm.Config{BaseURL: "http://" + addr, Model: "m", APIKeyEnv: "VERA_TEST_MODEL_KEY", MaxRetries: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	_, err = c3.Complete(context.Background(), ask("x"))
	errs = append(errs, err)

	for i, err := range errs {
		if err == nil {
			t.Errorf("case %d: no error", i)
			continue
		}
		for _, text := range []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err), fmt.Sprintf("%v", errors.Unwrap(err))} {
			if strings.Contains(text, secretKey) {
				t.Errorf("case %d: the key is in the error: %s", i, text)
			}
		}
	}
	for name, text := range map[string]string{
		"records": c.rec.dump() + c2.rec.dump(),
		"logs":    c.log.String() + c2.log.String(),
	} {
		if strings.Contains(text, secretKey) {
			t.Errorf("the key is in the %s:\n%s", name, text)
		}
	}
	if !strings.Contains(c.rec.dump(), "[REDACTED]") {
		t.Errorf("the echoed key was not visibly redacted in the records:\n%s", c.rec.dump())
	}
}

// OPENAI_* variables in the environment change nothing: not where the
// client goes, not the key it sends, not the headers.
func TestOpenAIEnvironmentIsIgnored(t *testing.T) {
	t.Setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/bogus/v1")
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_ADMIN_KEY", "sk-admin-from-the-environment")
	t.Setenv("OPENAI_ORG_ID", "org-bogus")
	t.Setenv("OPENAI_PROJECT_ID", "proj-bogus")
	t.Setenv("OPENAI_CUSTOM_HEADERS", "X-Leaked: yes\nAuthorization: Bearer sk-custom-header")
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("here")))

	for _, withKey := range []bool{false, true} {
		t.Setenv("VERA_TEST_MODEL_KEY", secretKey)
		c := newTestClient(t, srv, func(cfg *llm.Config) {
			if withKey {
				cfg.APIKeyEnv = "VERA_TEST_MODEL_KEY"
			}
		})
		resp, err := c.Complete(context.Background(), ask("x"))
		if err != nil || resp.Text != "here" {
			t.Fatalf("withKey=%v: %+v %v", withKey, resp, err)
		}
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests reached the configured server", len(reqs))
	}
	for i, r := range reqs {
		want := ""
		if i == 1 {
			want = "Bearer " + secretKey
		}
		if got := r.Header.Get("Authorization"); got != want {
			t.Errorf("request %d: Authorization %q, want %q", i, got, want)
		}
		for _, h := range []string{"X-Leaked", "OpenAI-Organization", "OpenAI-Project"} {
			if v := r.Header.Get(h); v != "" {
				t.Errorf("request %d: header %s: %s leaked from the environment", i, h, v)
			}
		}
	}
}

func TestDefaultHTTPClientIsNotShared(t *testing.T) {
	// A custom client is used as given.
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("x")))
	used := false
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		used = true
		return http.DefaultTransport.RoundTrip(r)
	})}
	c := newTestClient(t, srv, func(cfg *llm.Config) { cfg.HTTPClient = hc })
	if _, err := c.Complete(context.Background(), ask("x")); err != nil || !used {
		t.Errorf("custom HTTP client used=%v err=%v", used, err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
