package llm_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// TestKeyVariableNotAllowedIsNeverRead: with an allow-list, New refuses an
// api_key_env that is not on it before it looks at the environment (the
// lookup is never asked for that variable), names the flag that allows
// it, and never repeats the value; an allowed variable is read and sent.
func TestKeyVariableNotAllowedIsNeverRead(t *testing.T) {
	const canary = "canary-value-0123456789"
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("ok")))
	var asked []string
	lookup := func(name string) (string, bool) {
		asked = append(asked, name)
		if name == "VERA_CANARY_SECRET" {
			return canary, true
		}
		return "", false
	}
	keys := llm.AllowKeyEnvs("OPENAI_API_KEY", "VERA_MODEL_KEY").For("this agent")
	_, err := llm.New(llm.Config{BaseURL: srv.URL(), APIKeyEnv: "VERA_CANARY_SECRET", KeyEnvs: keys, LookupEnv: lookup, Timeout: -1})
	if !errors.Is(err, llm.ErrKeyEnvNotAllowed) {
		t.Fatalf("err = %v, want ErrKeyEnvNotAllowed", err)
	}
	const want = "api_key_env VERA_CANARY_SECRET is not one this agent may read; start it with --allow-api-key-env VERA_CANARY_SECRET"
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	var ke *llm.KeyEnvError
	if !errors.As(err, &ke) || ke.Name != "VERA_CANARY_SECRET" {
		t.Errorf("err is not a *KeyEnvError naming the variable: %#v", err)
	}
	if len(asked) != 0 {
		t.Errorf("the environment was read for %v", asked)
	}
	if strings.Contains(err.Error(), canary) {
		t.Errorf("the error repeats the value: %v", err)
	}

	// A lower-case "name" may be a key: not shown in full.
	_, err = llm.New(llm.Config{BaseURL: srv.URL(), APIKeyEnv: "sk_live_abcdefghijklmnop1234", KeyEnvs: keys, LookupEnv: lookup})
	if !errors.Is(err, llm.ErrKeyEnvNotAllowed) || strings.Contains(err.Error(), "sk_live_abcdefghijklmnop1234") || !strings.Contains(err.Error(), "--allow-api-key-env") {
		t.Errorf("a key-like name: %v", err)
	}
	// A pasted key is still refused as not being a name, not repeated.
	_, err = llm.New(llm.Config{BaseURL: srv.URL(), APIKeyEnv: secretKey, KeyEnvs: keys, LookupEnv: lookup})
	if err == nil || errors.Is(err, llm.ErrKeyEnvNotAllowed) || strings.Contains(err.Error(), secretKey) {
		t.Errorf("a pasted key: %v", err)
	}
	if len(asked) != 0 {
		t.Errorf("the environment was read for %v", asked)
	}
	if srv.Count() != 0 {
		t.Fatalf("%d requests reached the server", srv.Count())
	}

	// Allowed (and with no list at all), the variable is read and sent.
	for _, k := range []*llm.KeyEnvs{llm.AllowKeyEnvs("VERA_CANARY_SECRET"), nil} {
		c, err := llm.New(llm.Config{BaseURL: srv.URL(), APIKeyEnv: "VERA_CANARY_SECRET", KeyEnvs: k, LookupEnv: lookup, Timeout: -1, Model: "m"})
		if err != nil {
			t.Fatalf("allowed (%s): %v", k, err)
		}
		if _, err := c.Complete(context.Background(), ask("x")); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	for _, r := range srv.Requests() {
		if r.APIKey() != canary {
			t.Errorf("request %d sent key %q", r.Index, r.APIKey())
		}
	}
	// No key variable at all needs no allowance.
	if _, err := llm.New(llm.Config{BaseURL: srv.URL(), KeyEnvs: llm.AllowKeyEnvs(), LookupEnv: lookup, Timeout: -1}); err != nil {
		t.Errorf("no api_key_env: %v", err)
	}
}

func TestKeyEnvsLists(t *testing.T) {
	k := llm.AllowKeyEnvs("B", "", "A", "B", " C ")
	if got := strings.Join(k.Names(), ","); got != "A,B,C" {
		t.Errorf("names %s", got)
	}
	if !k.Allows("A") || k.Allows("D") || k.Check("") != nil || k.Check("A") != nil || k.Check("D") == nil {
		t.Error("Allows/Check")
	}
	var none *llm.KeyEnvs
	if !none.Allows("ANY") || none.Check("ANY") != nil || none.String() != "any" || llm.AllowKeyEnvs().String() != "none" {
		t.Error("a nil list allows everything; an empty one nothing")
	}
	d := llm.DefaultKeyEnvs(func(n string) (string, bool) {
		if n == "VERA_API_KEY_ENV" {
			return "MY_KEY", true
		}
		return "", false
	})
	if got := d.String(); got != "MY_KEY, OPENAI_API_KEY" {
		t.Errorf("defaults %s", got)
	}
	if err := d.For("this auditor").Check("OTHER"); err == nil || !strings.Contains(err.Error(), "not one this auditor may read") {
		t.Errorf("For: %v", err)
	}
}
