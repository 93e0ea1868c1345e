package ledger

import "testing"

func TestHost(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://WWW.Example.COM:8443/a?b#c", "www.example.com"},
		{"http://user:pw@example.org/x", "example.org"},
		{"example.com/path?q=1", "example.com"},
		{"example.com:8080", "example.com"},
		{"//cdn.example.net/x.js", "cdn.example.net"},
		{"https://example.com./", "example.com"},
		{"http://[2001:db8::1]:80/", "2001:db8::1"},
		{"127.0.0.1:5000/x", "127.0.0.1"},
		{"", ""},
		{"not a host", ""},
	}
	for _, tt := range tests {
		if got := Host(tt.in); got != tt.want {
			t.Errorf("Host(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRegistrableDomain(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://docs.python.org/3/", "python.org"},
		{"www.python.org", "python.org"},
		{"python.org", "python.org"},
		{"https://news.bbc.co.uk/x", "bbc.co.uk"},
		{"bbc.co.uk", "bbc.co.uk"},
		{"a.b.c.example.com.au", "example.com.au"},
		{"https://acme.github.io/widget/", "acme.github.io"},
		{"github.io", "github.io"},
		{"raw.githubusercontent.com", "raw.githubusercontent.com"},
		{"my-app.vercel.app", "my-app.vercel.app"},
		{"blog.google", "blog.google"},
		{"deepmind.google", "deepmind.google"},
		{"www.gov.uk", "www.gov.uk"},
		{"stability.ai", "stability.ai"},
		{"sub.example.co.jp", "example.co.jp"},
		{"https://192.168.1.10/x", "192.168.1.10"},
		{"localhost:8080", "localhost"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RegistrableDomain(tt.in); got != tt.want {
			t.Errorf("RegistrableDomain(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCanonHost(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://www.acme.example/x", "acme.example"},
		{"www2.acme.example", "acme.example"},
		{"blog.acme.example", "blog.acme.example"},
		{"www.example", "www.example"},
		{"wwwfoo.example", "wwwfoo.example"},
	}
	for _, tt := range tests {
		if got := canonHost(tt.in); got != tt.want {
			t.Errorf("canonHost(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIsOfficial(t *testing.T) {
	tests := []struct {
		domain, vendor string
		want           bool
	}{
		{"openai.com", "OpenAI", true},
		{"https://help.openai.com/en/articles/1", "OpenAI", true},
		{"cdn.openai.com", "openai", true},
		{"openai.org", "OpenAI", true},
		{"openai.github.io", "OpenAI", true},
		{"acme.co.uk", "Acme Corp", true},
		{"acme-corp.com", "Acme Corp", true},
		{"blog.acme.example", "Acme", true},
		{"acme.example", "acme.example", true},
		{"docs.acme.example", "https://www.acme.example/", true},
		{"blog.google", "Google", true},
		{"deepmind.google", "Google DeepMind", true},
		{"deepmind.com", "Google DeepMind", true},
		{"huggingface.co", "Hugging Face", true},
		{"python.org", "Python Software Foundation", true},
		{"stability.ai", "Stability AI", true},
		// independent
		{"theverge.com", "OpenAI", false},
		{"openai-news.example", "OpenAI", false},
		{"notopenai.com", "OpenAI", false},
		{"github.com", "OpenAI", false},
		{"software.com", "Python Software Foundation", false},
		{"open.com", "Open AI", false},
		{"acme.example", "", false},
		{"", "Acme", false},
		{"10.0.0.1", "Acme", false},
		{"chatgpt.com", "OpenAI", false}, // owned under another name: an alias is needed
		{"chatgpt.com", "ChatGPT", true},
	}
	for _, tt := range tests {
		if got := IsOfficial(tt.domain, tt.vendor); got != tt.want {
			t.Errorf("IsOfficial(%q, %q) = %v, want %v", tt.domain, tt.vendor, got, tt.want)
		}
	}
}

func TestIsSearchEngine(t *testing.T) {
	engines := []string{"https://www.google.com/search?q=x", "google.co.uk", "html.duckduckgo.com", "www.bing.com",
		"search.yahoo.com", "yandex.ru", "www.baidu.com", "searx.example.org", "search.brave.com", "news.google.com"}
	for _, e := range engines {
		if !IsSearchEngine(e) {
			t.Errorf("IsSearchEngine(%q) = false", e)
		}
	}
	sources := []string{"blog.google", "developers.google.com", "ai.google.dev", "yahoo.com", "news.yahoo.com",
		"en.wikipedia.org", "acme.example", "duckduckgo.example", ""}
	for _, s := range sources {
		if IsSearchEngine(s) {
			t.Errorf("IsSearchEngine(%q) = true", s)
		}
	}
}
