package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, bustest.LeakIgnores...) }

// testEnv is a bus, a dashboard on it and the dashboard's base URL.
type testEnv struct {
	t       testing.TB
	bus     *bus.Bus
	pub     *bus.Bus // a second connection, as another component would publish
	srv     *Server
	url     string
	dataDir string
	natsURL string
	stop    func()
}

type envOpt func(*Options)

// testReadToken is the read-only token of the tests' dashboards: GETs and
// streams carry it unless a test says otherwise.
const testReadToken = "test-read-token"

// startEnv serves a dashboard with Serve (its hub started with it) unless
// direct, in which case it is Handler alone behind httptest (the first
// stream starts a hub; Close stops it).
func startEnv(tb testing.TB, direct bool, opts ...envOpt) *testEnv {
	tb.Helper()
	s := bustest.StartServer(tb)
	b := bustest.Connect(tb, s.ClientURL(), bus.Options{Source: catalog.ComponentDashboard})
	pub := bustest.Connect(tb, s.ClientURL(), bus.Options{Source: "test"})
	o := Options{Bus: b, DataDir: tb.TempDir(), Logger: bustest.Logger(tb), Heartbeat: 200 * time.Millisecond, ReadToken: testReadToken,
		Template: catalog.RunConfig{Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "test-model"}, MaxSteps: 7}}
	for _, f := range opts {
		f(&o)
	}
	d, err := New(o)
	if err != nil {
		tb.Fatal(err)
	}
	e := &testEnv{t: tb, bus: b, pub: pub, srv: d, dataDir: o.DataDir, natsURL: s.ClientURL()}
	if direct {
		tb.Cleanup(func() { d.Close() })
		hs := httptest.NewServer(d.Handler())
		tb.Cleanup(hs.Close)
		e.url = hs.URL
		e.stop = hs.Close
		return e
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	e.url = "http://" + ln.Addr().String()
	e.stop = bustest.Start(tb, "dashboard.Serve", func(ctx context.Context) error { return d.Serve(ctx, ln) })
	return e
}

// publish stores one event of run runID and returns its stream sequence.
func (e *testEnv) publish(runID string, p bus.Payload) uint64 {
	e.t.Helper()
	ev, err := e.pub.Events.New(runID, p)
	if err != nil {
		e.t.Fatal(err)
	}
	ack, err := e.pub.Publish(context.Background(), ev)
	if err != nil {
		e.t.Fatal(err)
	}
	return ack.Sequence
}

// note is a small event with a recognisable text.
func note(text string) catalog.NotesAppended {
	return catalog.NotesAppended{Step: 1, Author: catalog.NotesAuthor("agent"), Text: text}
}

// runSeqs lists the stream sequences of a run's events (the expected SSE
// ids).
func (e *testEnv) runSeqs(runID string) []uint64 {
	e.t.Helper()
	var out []uint64
	for rec, err := range e.bus.Read(context.Background(), bus.ReadOptions{RunID: runID}) {
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, rec.Sequence)
	}
	return out
}

// request sends a request to the dashboard; hdr holds extra headers.
func (e *testEnv) request(method, path, body string, hdr map[string]string) (int, string) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if _, set := hdr[TokenHeader]; method == "GET" && !set {
		req.Header.Set(TokenHeader, testReadToken)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

func (e *testEnv) auth() map[string]string { return map[string]string{TokenHeader: e.srv.Token()} }

// newSession creates a session and returns its run id.
func (e *testEnv) newSession() string {
	e.t.Helper()
	code, body := e.request("POST", "/api/sessions", "", e.auth())
	if code != http.StatusCreated {
		e.t.Fatalf("new session: %d %s", code, body)
	}
	var s Session
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		e.t.Fatal(err)
	}
	return s.RunID
}

// sseEvent is one event read from an SSE stream.
type sseEvent struct {
	ID    string
	Event string
	Data  string
	seq   uint64
	at    time.Time
}

// sseClient reads one SSE stream in a goroutine.
type sseClient struct {
	C        chan sseEvent
	comments chan string
	cancel   context.CancelFunc
	done     chan struct{}
}

func openSSE(tb testing.TB, url, lastID string) *sseClient {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	req.Header.Set(TokenHeader, testReadToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		tb.Fatalf("SSE %s: %d %s", url, resp.StatusCode, b)
	}
	c := &sseClient{C: make(chan sseEvent, 1<<16), comments: make(chan string, 1024), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		defer close(c.C)
		defer resp.Body.Close()
		r := bufio.NewReaderSize(resp.Body, 1<<16)
		var ev sseEvent
		var data bytes.Buffer
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if data.Len() > 0 || ev.ID != "" {
					ev.Data = strings.TrimSuffix(data.String(), "\n")
					ev.seq, _ = strconv.ParseUint(ev.ID, 10, 64)
					ev.at = time.Now()
					c.C <- ev
				}
				ev, data = sseEvent{}, bytes.Buffer{}
			case strings.HasPrefix(line, ":"):
				select {
				case c.comments <- line:
				default:
				}
			default:
				k, v, _ := strings.Cut(line, ":")
				v = strings.TrimPrefix(v, " ")
				switch k {
				case "id":
					ev.ID = v
				case "event":
					ev.Event = v
				case "data":
					data.WriteString(v + "\n")
				}
			}
		}
	}()
	return c
}

func (c *sseClient) close() {
	c.cancel()
	<-c.done
}

// next returns the next event or fails after timeout.
func (c *sseClient) next(tb testing.TB, timeout time.Duration) sseEvent {
	tb.Helper()
	select {
	case ev, ok := <-c.C:
		if !ok {
			tb.Fatal("SSE stream ended")
		}
		return ev
	case <-time.After(timeout):
		tb.Fatalf("no SSE event within %v", timeout)
	}
	return sseEvent{}
}
