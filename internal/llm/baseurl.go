package llm

import (
	"fmt"
	"net/url"
	"strings"
)

// NormalizeBaseURL turns what a user typed into the base URL of an
// OpenAI-compatible API, the URL that "chat/completions" is appended to:
//
//   - surrounding spaces are trimmed and the scheme must be http or https;
//   - an empty path (or "/") gets "/v1": http://127.0.0.1:1234 becomes
//     http://127.0.0.1:1234/v1;
//   - an explicit path is kept (/v1, /api/v1, /openai/v1, …), without its
//     trailing slash;
//   - a pasted endpoint loses its "/chat/completions" suffix:
//     http://h/v1/chat/completions becomes http://h/v1 (and
//     http://h/chat/completions becomes http://h/v1 by the rule above);
//   - a fragment is dropped; a query string is refused (the client would
//     drop it when it appends the endpoint path).
//
// The result is stable: normalising it again returns it unchanged. It may
// hold user:password; print it with [RedactURL].
func NormalizeBaseURL(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("llm: empty model base URL")
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("llm: model base URL %q: %v", RedactURL(s), urlErrText(err))
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("llm: model base URL %q: want an http:// or https:// URL, e.g. http://127.0.0.1:1234/v1", RedactURL(s))
	}
	if u.Opaque != "" || u.Host == "" {
		return "", fmt.Errorf("llm: model base URL %q: no host", RedactURL(s))
	}
	if u.RawQuery != "" || u.ForceQuery {
		return "", fmt.Errorf("llm: model base URL %q: a query string is not supported", RedactURL(s))
	}
	u.Fragment, u.RawFragment = "", ""

	path := strings.TrimRight(u.Path, "/")
	if p, ok := strings.CutSuffix(path, "/chat/completions"); ok {
		path = strings.TrimRight(p, "/")
	}
	if path == "" {
		path = "/v1"
	}
	u.Path, u.RawPath = path, ""
	return u.String(), nil
}

// RedactURL returns s with any password in it replaced by "xxxxx", for
// errors, logs and events. Strings that do not parse are returned with
// everything before an '@' in the authority replaced.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err == nil {
		return u.Redacted()
	}
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		if at := strings.LastIndex(rest, "@"); at >= 0 && !strings.Contains(rest[:at], "/") {
			return scheme + "://xxxxx@" + rest[at+1:]
		}
	}
	return s
}

// urlErrText is the reason of a url.Parse error without the URL it quotes
// (which may hold a password).
func urlErrText(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return err.Error()
}
