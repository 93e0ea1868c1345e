package domain

import "testing"

func TestRegistrable(t *testing.T) {
	for in, want := range map[string]string{
		"https://news.bbc.co.uk/x":         "bbc.co.uk",
		"docs.python.org":                  "python.org",
		"https://acme.github.io/p":         "acme.github.io",
		"github.io":                        "github.io",
		"http://127.0.0.1:8000/a":          "127.0.0.1",
		"localhost":                        "localhost",
		"https://WWW.Example.COM.":         "example.com",
		"example.com:8443/path?q=1":        "example.com",
		"https://a.b.c.example.com.au/x":   "example.com.au",
		"http://[::1]:80/":                 "::1",
		"":                                 "",
		"https://s3.amazonaws.com/bucket/": "s3.amazonaws.com",
		"https://x.s3.amazonaws.com/":      "x.s3.amazonaws.com",
	} {
		if got := Registrable(in); got != want {
			t.Errorf("Registrable(%q) = %q, want %q", in, got, want)
		}
	}
}
