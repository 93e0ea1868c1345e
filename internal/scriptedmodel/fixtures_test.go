package scriptedmodel_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/vera-run/vera/internal/scriptedmodel"
)

// TestFixturesServedVerbatim: every fixture goes over the wire byte for
// byte, with its status, content type and headers, error statuses
// included, whole or in small pieces.
func TestFixturesServedVerbatim(t *testing.T) {
	all, err := scriptedmodel.Fixtures()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("no fixtures")
	}
	for _, f := range all {
		for _, chunk := range []int{0, 3} {
			reply := f.Reply()
			reply.WriteChunk = chunk
			srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(reply))
			body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
			if f.Stream {
				body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			}
			resp, err := http.Post(srv.URL()+"/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatalf("%s: %v", f.Name(), err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("%s: %v", f.Name(), err)
			}
			wantStatus := f.Status
			if wantStatus == 0 {
				wantStatus = http.StatusOK
			}
			if !bytes.Equal(got, f.Body) || resp.StatusCode != wantStatus {
				t.Errorf("%s (chunk %d): status %d (want %d), body %d bytes (want %d)", f.Name(), chunk, resp.StatusCode, wantStatus, len(got), len(f.Body))
			}
			ct := resp.Header.Get("Content-Type")
			switch {
			case f.ContentType != "" && ct != f.ContentType,
				f.ContentType == "" && f.Stream && !strings.HasPrefix(ct, "text/event-stream"),
				f.ContentType == "" && !f.Stream && ct != "application/json":
				t.Errorf("%s: Content-Type %q", f.Name(), ct)
			}
			for k, v := range f.Header {
				if resp.Header.Get(k) != v {
					t.Errorf("%s: header %s = %q, want %q", f.Name(), k, resp.Header.Get(k), v)
				}
			}
			srv.Close()
		}
	}
	if _, err := scriptedmodel.LoadFixture("openai", "no such case"); err == nil {
		t.Error("LoadFixture of an unknown case: no error")
	}
}
