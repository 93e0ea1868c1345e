package llm_test

import (
	"strings"
	"testing"

	"github.com/vera-run/vera/internal/llm"
)

func TestNormalizeBaseURL(t *testing.T) {
	cases := []struct{ in, want string }{
		{"http://127.0.0.1:1234", "http://127.0.0.1:1234/v1"},
		{"http://127.0.0.1:1234/", "http://127.0.0.1:1234/v1"},
		{"  http://127.0.0.1:1234  ", "http://127.0.0.1:1234/v1"},
		{"http://127.0.0.1:1234/v1", "http://127.0.0.1:1234/v1"},
		{"http://127.0.0.1:1234/v1/", "http://127.0.0.1:1234/v1"},
		{"http://localhost:11434/v1//", "http://localhost:11434/v1"},
		{"https://api.openai.com/v1", "https://api.openai.com/v1"},
		{"HTTPS://api.example.com", "https://api.example.com/v1"},
		{"https://example.com/api/v1", "https://example.com/api/v1"},
		{"https://example.com/openai/v1/", "https://example.com/openai/v1"},
		{"https://example.com/openai", "https://example.com/openai"},
		{"http://127.0.0.1:1234/v1/chat/completions", "http://127.0.0.1:1234/v1"},
		{"http://127.0.0.1:1234/v1/chat/completions/", "http://127.0.0.1:1234/v1"},
		{"https://example.com/api/v1/chat/completions", "https://example.com/api/v1"},
		{"http://127.0.0.1:1234/chat/completions", "http://127.0.0.1:1234/v1"},
		{"http://[::1]:8080", "http://[::1]:8080/v1"},
		{"http://h:1/v1#frag", "http://h:1/v1"},
		{"http://user:secret@h:1", "http://user:secret@h:1/v1"},
	}
	for _, c := range cases {
		got, err := llm.NormalizeBaseURL(c.in)
		if err != nil {
			t.Errorf("NormalizeBaseURL(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("NormalizeBaseURL(%q) = %q, want %q", c.in, got, c.want)
		}
		again, err := llm.NormalizeBaseURL(got)
		if err != nil || again != got {
			t.Errorf("NormalizeBaseURL is not stable on %q: %q, %v", got, again, err)
		}
	}
}

func TestNormalizeBaseURLErrors(t *testing.T) {
	for _, in := range []string{
		"",
		"   ",
		"127.0.0.1:1234",
		"localhost:1234",
		"ftp://example.com/v1",
		"http://",
		"http:///v1",
		"http://h:1/v1?api-version=1",
		"://nope",
		"http://user:hunter2@h:1/v1?x=1",
	} {
		got, err := llm.NormalizeBaseURL(in)
		if err == nil {
			t.Errorf("NormalizeBaseURL(%q) = %q, want an error", in, got)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	if got := llm.RedactURL("http://user:hunter2@h:1/v1"); strings.Contains(got, "hunter2") {
		t.Errorf("RedactURL kept the password: %s", got)
	}
	if got := llm.RedactURL("http://h:1/v1"); got != "http://h:1/v1" {
		t.Errorf("RedactURL changed a URL without password: %s", got)
	}
}
