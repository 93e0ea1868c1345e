package dashboard

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/vera-run/vera/bus"
)

// TraceIDPlaceholder is what Options.TraceURL has in place of a run's
// trace id.
const TraceIDPlaceholder = "{trace_id}"

// sampleTraceID stands for a trace id while a template is checked. Every
// trace id is 32 lowercase hex digits, which mean the same thing wherever
// they go in a URL: a template that is a valid http(s) URL with this one is
// one with any.
const sampleTraceID = "0123456789abcdef0123456789abcdef"

// TraceIDHex is run runID's trace id (bus.TraceID) as the W3C trace
// context and Jaeger write it: 32 lowercase hex digits.
func TraceIDHex(runID string) string {
	id := bus.TraceID(runID)
	return hex.EncodeToString(id[:])
}

// TraceURLTemplate checks a trace UI URL template (Options.TraceURL) and
// returns it in its full form, with TraceIDPlaceholder. A template with
// the placeholder is kept as it is; one without is taken as the base URL
// of a Jaeger UI, and "/trace/{trace_id}" is appended. With the
// placeholder replaced by a trace id it must be an absolute http or https
// URL with a host and no user info. The empty template is valid (no
// links) and stays empty.
func TraceURLTemplate(tmpl string) (string, error) {
	if tmpl == "" {
		return "", nil
	}
	full := tmpl
	if !strings.Contains(tmpl, TraceIDPlaceholder) {
		if strings.ContainsAny(tmpl, "?#") {
			return "", fmt.Errorf("trace UI URL %q: a URL with a query or fragment must say where the trace id goes with %s (a URL without %s is a Jaeger UI base URL, to which /trace/%s is appended)", tmpl, TraceIDPlaceholder, TraceIDPlaceholder, TraceIDPlaceholder)
		}
		full = strings.TrimRight(tmpl, "/") + "/trace/" + TraceIDPlaceholder
	}
	u, err := url.Parse(strings.ReplaceAll(full, TraceIDPlaceholder, sampleTraceID))
	if err != nil {
		return "", fmt.Errorf("trace UI URL %q: %w", tmpl, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("trace UI URL %q: want an absolute http:// or https:// URL, such as http://127.0.0.1:16686/trace/%s", tmpl, TraceIDPlaceholder)
	case u.Host == "" || u.Opaque != "":
		return "", fmt.Errorf("trace UI URL %q: no host; want an absolute http:// or https:// URL, such as http://127.0.0.1:16686/trace/%s", tmpl, TraceIDPlaceholder)
	case u.User != nil:
		return "", errors.New("trace UI URL: user info (user:password@) is not allowed: the URL is shown to every reader of the dashboard")
	}
	return full, nil
}

// traceURL is run runID's trace page in the trace UI, or "" when none is
// configured.
func (s *Server) traceURL(traceID string) string {
	if s.traceTmpl == "" {
		return ""
	}
	return strings.ReplaceAll(s.traceTmpl, TraceIDPlaceholder, traceID)
}

// withTrace adds the run's trace id and, with a trace UI, its URL.
func (s *Server) withTrace(sess Session) Session {
	sess.TraceID = TraceIDHex(sess.RunID)
	sess.TraceURL = s.traceURL(sess.TraceID)
	return sess
}
