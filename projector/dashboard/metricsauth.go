package dashboard

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// newToken is a random token: 32 bytes from crypto/rand in hex.
func newToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// RequireToken wraps a Prometheus /metrics handler: it serves next only to
// a request that carries one of the tokens tokens returns (called on every
// request), the same way the dashboard's reads take theirs — the
// X-Vera-Token header or Authorization: Bearer <token>, never the query.
// Any other request gets 401 with a plain-text body saying how to
// authenticate, and never the metrics.
func RequireToken(next http.Handler, tokens func() []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := presented(r); got != "" {
			for _, want := range tokens() {
				if equal(got, want) {
					next.ServeHTTP(w, r)
					return
				}
			}
		}
		h := w.Header()
		h.Set("WWW-Authenticate", `Bearer realm="vera-metrics"`)
		h.Set("Content-Type", "text/plain; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "401 unauthorized: /metrics needs a token: the read-only one in DATA_DIR/%s (or the full one in DATA_DIR/%s) "+
			"as \"Authorization: Bearer <token>\" (Prometheus: authorization: {credentials_file: DATA_DIR/%s}); "+
			"started with --metrics-public, VERA serves it without one.\n", ReadTokenFileName, TokenFileName, ReadTokenFileName)
	})
}

// metricsHandler is the dashboard's /metrics: the token or the read
// token, unless Options.MetricsPublic.
func (s *Server) metricsHandler() http.Handler {
	h := s.opts.Metrics.Handler()
	if s.opts.MetricsPublic {
		return h
	}
	return RequireToken(h, func() []string { return []string{s.token, s.readToken} })
}

// EnsureReadToken returns the read-only token kept in
// dataDir/dashboard.read-token, first making a random one there (mode
// 0600, as New does) when the file is missing or empty. It is for a
// process that serves /metrics without a dashboard (vera projector).
func EnsureReadToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, ReadTokenFileName)
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("dashboard: read token: %w", err)
	}
	if tok := strings.TrimSpace(string(data)); tok != "" {
		return tok, nil
	}
	tok, err := newToken()
	if err != nil {
		return "", fmt.Errorf("dashboard: read token: %w", err)
	}
	if err := writeTokenFile(path, tok); err != nil {
		return "", err
	}
	return tok, nil
}

// FileTokens returns the tokens in dataDir's token files as they are at
// the call: the read-only token (dashboard.read-token) and, when a
// dashboard has written one, the full token (dashboard.token). A file that
// cannot be read gives no token. Read on each request, it follows a
// dashboard that starts later on the same data dir and writes new tokens.
func FileTokens(dataDir string) func() []string {
	paths := []string{filepath.Join(dataDir, ReadTokenFileName), filepath.Join(dataDir, TokenFileName)}
	return func() []string {
		var out []string
		for _, p := range paths {
			if data, err := os.ReadFile(p); err == nil {
				if tok := strings.TrimSpace(string(data)); tok != "" {
					out = append(out, tok)
				}
			}
		}
		return out
	}
}
