package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector"
)

// TestReadNeedsAToken: every API read and the live feed need the token or
// the read-only one; the read-only token cannot change anything; the
// query parameter is taken on the live feed only; the page loads without
// a token; both token files are 0600.
func TestReadNeedsAToken(t *testing.T) {
	e := startEnv(t, false)
	id := e.newSession()
	reads := []string{"/api/config", "/api/sessions", "/api/metrics", "/api/events", "/api/runs/" + id + "/events", "/api/blobs/sha256:" + strings.Repeat("a", 64)}
	for _, p := range reads {
		for name, hdr := range map[string]map[string]string{
			"no token":     {TokenHeader: ""},
			"wrong token":  {TokenHeader: "nope"},
			"wrong bearer": {TokenHeader: "", "Authorization": "Bearer nope"},
			"prefix":       {TokenHeader: testReadToken[:4]},
		} {
			if code, body := e.request("GET", p, "", hdr); code != http.StatusUnauthorized {
				t.Errorf("GET %s with %s: %d %.100s, want 401", p, name, code, body)
			}
		}
	}
	// The query parameter opens the live feed only (EventSource cannot set
	// headers); anywhere else it is not a credential.
	q := "token=" + url.QueryEscape(testReadToken)
	for _, p := range []string{"/api/config?" + q, "/api/sessions?" + q} {
		if code, _ := e.request("GET", p, "", map[string]string{TokenHeader: ""}); code != http.StatusUnauthorized {
			t.Errorf("GET %s: %d, want 401", p, code)
		}
	}
	for _, p := range []string{"/api/events?" + q, "/api/runs/" + id + "/events?" + q, "/api/events?types=vera.run.*&" + q} {
		resp := rawGet(t, e.url+p, nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Errorf("GET %s: %d %s", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
	for _, p := range []string{"/api/config", "/api/sessions"} {
		for _, tok := range []string{testReadToken, e.srv.Token()} {
			if code, body := e.request("GET", p, "", map[string]string{TokenHeader: tok}); code != http.StatusOK {
				t.Errorf("GET %s with a token: %d %s", p, code, body)
			}
		}
		if code, _ := e.request("GET", p, "", map[string]string{TokenHeader: "", "Authorization": "Bearer " + testReadToken}); code != http.StatusOK {
			t.Errorf("GET %s with the read token as bearer: %d", p, code)
		}
	}
	// The read-only token changes nothing.
	ro := map[string]string{TokenHeader: testReadToken}
	for _, p := range []string{"/api/sessions", "/api/runs/" + id + "/start", "/api/runs/" + id + "/cancel"} {
		if code, _ := e.request("POST", p, `{"task":"x"}`, ro); code != http.StatusUnauthorized {
			t.Errorf("POST %s with the read-only token: %d, want 401", p, code)
		}
		if code, _ := e.request("POST", p+"?"+q, `{"task":"x"}`, nil); code != http.StatusUnauthorized {
			t.Errorf("POST %s with the token in the query: %d, want 401", p, code)
		}
	}
	if n := len(e.submitted(id)); n != 0 {
		t.Fatalf("refused requests published %d events", n)
	}
	// The page itself loads without a token.
	for _, p := range []string{"/", "/app.js", "/style.css"} {
		if code, _ := e.request("GET", p, "", map[string]string{TokenHeader: ""}); code != http.StatusOK {
			t.Errorf("GET %s without a token: %d", p, code)
		}
	}
	// Reads keep the Host check.
	if code, _ := e.request("GET", "/api/sessions", "", map[string]string{"Host": "evil.example"}); code != http.StatusForbidden {
		t.Errorf("foreign Host: %d, want 403", code)
	}
	// Both token files: 0600, holding the tokens.
	for name, want := range map[string]string{TokenFileName: e.srv.Token(), ReadTokenFileName: testReadToken} {
		path := filepath.Join(e.dataDir, name)
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(path)
		if st.Mode().Perm() != 0o600 || strings.TrimSpace(string(data)) != want {
			t.Errorf("%s: mode %v, holds %q", name, st.Mode().Perm(), data)
		}
	}
	// A read token is made when none is given, and differs from the token.
	d, err := New(Options{Bus: e.bus, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.ReadToken()) < 32 || d.ReadToken() == d.Token() {
		t.Errorf("made read token %q (token %q)", d.ReadToken(), d.Token())
	}
}

// TestStreamCap: beyond MaxStreams, a live stream is refused with 503 and
// Retry-After, before anything is read; a closed stream frees its place.
func TestStreamCap(t *testing.T) {
	e := startEnv(t, false, func(o *Options) { o.MaxStreams = 3 })
	var open []*sseClient
	for i := range 3 {
		open = append(open, openSSE(t, e.url+fmt.Sprintf("/api/runs/r%d/events", i), ""))
	}
	resp := rawGet(t, e.url+"/api/events", map[string]string{TokenHeader: testReadToken})
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a 4th stream: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Without a token it is 401, not a place in the queue.
	if resp := rawGet(t, e.url+"/api/events", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a stream without a token at the cap: %d", resp.StatusCode)
	} else {
		resp.Body.Close()
	}
	open[0].close()
	waitUntil(t, "a place freed", func() bool {
		resp := rawGet(t, e.url+"/api/events", map[string]string{TokenHeader: testReadToken})
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	for _, c := range open[1:] {
		c.close()
	}
}

// TestCatchUpTypesMerged: a stream filtered by several (overlapping) type
// patterns catches up with exactly the matching stored events, once each,
// in stream order.
func TestCatchUpTypesMerged(t *testing.T) {
	e := startEnv(t, false)
	var want []uint64
	for i := range 30 {
		e.publish("run-x", note(fmt.Sprintf("n%d", i)))
		want = append(want, e.publish("run-t", catalog.ContainerLog{Container: "c", Stream: catalog.StreamStdout, Line: fmt.Sprint(i), Time: time.Now()}))
		if i%3 == 0 {
			want = append(want, e.publish("run-t", note(fmt.Sprintf("t%d", i))))
		}
		e.publish("run-t", catalog.ContainerEvent{Container: "c", ContainerID: "id", Action: "start", Time: time.Now()})
	}
	c := openSSE(t, e.url+"/api/runs/run-t/events?types=vera.container.log,vera.notes.*,vera.container.log,vera.notes.appended", "")
	defer c.close()
	var got []uint64
	for range want {
		got = append(got, c.next(t, 10*time.Second).seq)
	}
	checkExact(t, got, want)
	select {
	case ev := <-c.C:
		t.Fatalf("one more event: %+v", ev)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestReadsMakeNoConsumers: streams (new, resumed, lagging) and session
// lists, many at once, leave the stream's consumer count where Serve put
// it: the hub's one consumer.
func TestReadsMakeNoConsumers(t *testing.T) {
	old := hubBuffer
	hubBuffer = 2 // every stream lags and catches up again and again
	t.Cleanup(func() { hubBuffer = old })
	e := startEnv(t, false)
	for i := range 50 {
		e.publish(fmt.Sprintf("run-%d", i%5), note(fmt.Sprint(i)))
	}
	e.request("GET", "/api/sessions", "", nil) // the first list reads the history once
	count := bustest.ConsumerCounter(t, e.pub)
	before := settledConsumers(t, count)
	var clients []*sseClient
	for i := range 40 {
		clients = append(clients, openSSE(t, e.url+fmt.Sprintf("/api/runs/run-%d/events", i%5), strconv.Itoa(i)))
	}
	stopPub := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stopPub:
				return
			default:
			}
			e.publish(fmt.Sprintf("run-%d", i%5), note(fmt.Sprint(i)))
		}
	})
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if code, body := e.request("GET", "/api/sessions", "", nil); code != http.StatusOK {
			t.Fatalf("sessions: %d %s", code, body)
		}
		if n := count(); n != before {
			t.Fatalf("the stream's consumers went from %d to %d", before, n)
		}
	}
	close(stopPub)
	wg.Wait()
	for _, c := range clients {
		c.close()
	}
	t.Logf("the stream's consumers: %d throughout", before)
}

// TestThousandClients is the dashboard attack of issue 11 against a real,
// authenticated NATS server (loopback, bounded in count and time): 1,000
// concurrent SSE clients, half with the read-only token in the header,
// half in the query. The dashboard serves its cap and answers the rest
// 503 with Retry-After; the stream's consumer count stays what it was
// before the clients came, sampled all along, although the stream has a
// consumer limit; meanwhile durable consumers (the Files projector and a
// sandboxd-like reactor publishing tool.started/tool.finished) handle a
// run with no dead letter and every event handled; the served streams of
// that run get each of its events once, in order, though their queues are
// made so short that many lag and catch up meanwhile; heap and RSS stay
// bounded.
func TestThousandClients(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 concurrent clients")
	}
	old := hubBuffer
	hubBuffer = 16 // streams lag in the run's bursts and catch up meanwhile
	t.Cleanup(func() { hubBuffer = old })
	srv, store := bustest.StartSecureServer(t)
	nurl := srv.ClientURL()
	admin := bustest.ConnectAs(t, nurl, store, auth.Admin, bus.Options{Source: "test"}) // makes the streams
	dash := bustest.ConnectAs(t, nurl, store, catalog.ComponentDashboard, bus.Options{})
	proj := bustest.ConnectAs(t, nurl, store, catalog.ComponentProjector, bus.Options{})
	sbx := bustest.ConnectAs(t, nurl, store, catalog.ComponentSandboxd, bus.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// A consumer limit on the stream, as in the issue (there, 1,000): were
	// the dashboard to make consumers per client, the components' own
	// would be refused.
	const consumerLimit = 32
	scfg := admin.Options().StreamConfig()
	scfg.MaxConsumers = consumerLimit
	if _, err := admin.JetStream().UpdateStream(ctx, scfg); err != nil {
		t.Fatalf("set the stream's consumer limit: %v", err)
	}

	d, err := New(Options{Bus: dash, DataDir: t.TempDir(), Logger: bustest.Logger(t), Heartbeat: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	stopDash := bustest.Start(t, "dashboard.Serve", func(ctx context.Context) error { return d.Serve(ctx, ln) })

	// The components: the Files projector and a reactor in sandboxd's
	// place, each a durable consumer on its own connection.
	var requests, reactions atomic.Int64
	files, err := projector.NewFiles(proj, projector.FilesConfig{Logger: bustest.Logger(t), Roots: []string{os.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	stopFiles := bustest.Start(t, "projector.Files", files.Run)
	const reactor = "test-sandboxd"
	stopReactor := bustest.Start(t, "reactor", func(ctx context.Context) error {
		return sbx.Consume(ctx, bus.ConsumerConfig{Durable: reactor, Types: []string{catalog.TypeToolRequested}, Concurrency: 4},
			func(ctx context.Context, m *bus.Message) error {
				var req catalog.ToolRequested
				if err := m.Event.DecodeData(&req); err != nil {
					return bus.Permanent(err)
				}
				requests.Add(1)
				started, err := sbx.Events.New(m.Event.RunID, catalog.ToolStarted{RequestID: req.RequestID, Container: "vera-test", ContainerID: "c0ffee", StartedAt: m.Event.Time},
					bus.ReactionTo(m.Event, "started"))
				if err != nil {
					return bus.Permanent(err)
				}
				finished, err := sbx.Events.New(m.Event.RunID, catalog.ToolFinished{RequestID: req.RequestID, Requester: req.Requester, DurationMS: 1,
					Stdout: catalog.Output{Head: "ok " + req.Command, Bytes: int64(3 + len(req.Command))}}, bus.ReactionTo(m.Event, "finished"))
				if err != nil {
					return bus.Permanent(err)
				}
				for _, ev := range []bus.Event{started, finished} {
					if _, err := sbx.Publish(ctx, ev); err != nil {
						return err
					}
				}
				reactions.Add(2)
				return nil
			})
	})
	count := bustest.ConsumerCounter(t, admin)
	waitUntil(t, "the hub's and the components' consumers", func() bool { return count() == 3 })
	consumersBefore := settledConsumers(t, count)

	readToken := d.ReadToken()
	get := func(ctx context.Context, client *http.Client, path string, hdr map[string]string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", base+path, nil)
		if err != nil {
			return nil, err
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		return client.Do(req)
	}
	// Without a token nothing is read.
	for _, p := range []string{"/api/events", "/api/sessions", "/api/runs/r1/events"} {
		resp, err := get(ctx, http.DefaultClient, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d, want 401", p, resp.StatusCode)
		}
	}

	heapBefore, rssBefore := memNow()
	const clients = 1000
	const run = "run-under-load"
	type client struct {
		path     string
		served   bool
		n        atomic.Int64
		seqs     []uint64 // of the run's followers
		follower bool
	}
	cs := make([]*client, clients)
	var served, refused, retryAfter, other atomic.Int64
	var connected, wg sync.WaitGroup
	cctx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	tr := &http.Transport{DisableKeepAlives: true, DisableCompression: true, MaxConnsPerHost: 0}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	connected.Add(clients)
	for i := range clients {
		c := &client{}
		switch i % 4 {
		case 0:
			c.path, c.follower = "/api/runs/"+run+"/events", true
		case 1:
			c.path = "/api/events"
		case 2:
			c.path = fmt.Sprintf("/api/runs/other-%d/events", i)
		case 3:
			c.path = "/api/events?types=vera.tool.*,vera.notes.appended"
		}
		hdr := map[string]string{TokenHeader: readToken}
		if i%2 == 1 {
			sep := "?"
			if strings.Contains(c.path, "?") {
				sep = "&"
			}
			c.path += sep + "token=" + url.QueryEscape(readToken)
			hdr = nil
		}
		cs[i] = c
		wg.Go(func() {
			resp, err := get(cctx, hc, c.path, hdr)
			if err != nil {
				other.Add(1)
				connected.Done()
				return
			}
			defer resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				served.Add(1)
				c.served = true
				br := bufio.NewReader(resp.Body)
				_, _ = br.ReadString('\n') // the stream's first line
				connected.Done()
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					if id, ok := bytes.CutPrefix(line, []byte("id: ")); ok {
						c.n.Add(1)
						if c.follower {
							seq, _ := strconv.ParseUint(string(bytes.TrimSpace(id)), 10, 64)
							c.seqs = append(c.seqs, seq)
						}
					}
				}
			case http.StatusServiceUnavailable:
				refused.Add(1)
				if resp.Header.Get("Retry-After") != "" {
					retryAfter.Add(1)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
			default:
				other.Add(1)
			}
			connected.Done()
		})
	}
	// The consumer count, sampled while the clients are connected.
	samplesDone := make(chan struct{})
	var samples, off atomic.Int64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-samplesDone:
				return
			case <-time.After(50 * time.Millisecond):
			}
			samples.Add(1)
			if count() != consumersBefore {
				off.Add(1)
			}
		}
	})
	connected.Wait()
	t.Logf("%d clients: %d served, %d refused with 503 (%d with Retry-After), %d other", clients, served.Load(), refused.Load(), retryAfter.Load(), other.Load())
	if served.Load() != DefaultMaxStreams || refused.Load() != clients-DefaultMaxStreams || retryAfter.Load() != refused.Load() || other.Load() != 0 {
		t.Errorf("want %d served and the rest refused with Retry-After", DefaultMaxStreams)
	}
	// At the cap, a request without a token is still 401, the read-only
	// token still cannot change anything.
	if resp, err := get(ctx, http.DefaultClient, "/api/events", nil); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("at the cap, no token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	preq, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/sessions", nil)
	preq.Header.Set(TokenHeader, readToken)
	if resp, err := http.DefaultClient.Do(preq); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("at the cap, POST with the read-only token: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// The run, meanwhile: published as its producers would, handled by
	// the components, followed by the served streams.
	work := filepath.Join(t.TempDir(), "work")
	const steps = 40
	s := &bustest.Synth{TB: t, RunID: run, T0: time.Now().UTC().Truncate(time.Millisecond)}
	cfg := catalog.RunConfig{Task: "load", WorkDir: work, Model: catalog.ModelConfig{BaseURL: "http://127.0.0.1:1", Name: "m"}}
	s.Add(catalog.ComponentCLI, catalog.TaskSubmitted{RunConfig: cfg, SubmittedBy: "cli:test"})
	s.Add(catalog.ComponentAgent, catalog.RunStarted{AgentID: "agent-1", Version: "test", Config: cfg})
	for st := 1; st <= steps; st++ {
		req := fmt.Sprintf("req-s%04d", st)
		s.Add(catalog.ComponentAgent, catalog.AgentStep{Step: st, Thought: "t", Action: `{"tool":"shell"}`, ActionTool: "shell", Command: "echo " + req, RequestID: req})
		s.Add(catalog.ComponentAgent, catalog.ToolRequested{RequestID: req, Requester: "agent", Tool: "shell", Command: "echo " + req, TimeoutMS: 1000, Step: st})
		s.Add(catalog.ComponentAgent, catalog.NotesAppended{Step: st, Author: "agent", Text: fmt.Sprintf("step %d", st)})
	}
	for _, ev := range s.Evs {
		if _, err := admin.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the reactions", func() bool { return reactions.Load() == 2*steps })
	fin, err := admin.Events.New(run, catalog.RunFinished{Outcome: "RESOLVED", Answer: "a", Steps: steps, Reason: "done"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Publish(ctx, fin); err != nil {
		t.Fatal(err)
	}
	for _, durable := range []string{projector.FilesDurable, reactor} {
		waitUntil(t, durable+" drained", func() bool {
			ok, err := admin.ConsumerDrained(ctx, durable)
			return err == nil && ok
		})
	}
	want := len(s.Evs) + 2*steps + 1
	var followers []*client
	for _, c := range cs {
		if c.served && c.follower {
			followers = append(followers, c)
		}
	}
	waitUntil(t, "the run's events on every served stream of the run", func() bool {
		for _, c := range followers {
			if c.n.Load() < int64(want) {
				return false
			}
		}
		return true
	})
	heapDuring, rssDuring := memNow()
	lagged := d.hub.Load().dropped.Load()
	close(samplesDone)
	sampler.Wait()
	t.Logf("the stream's consumers: %d before the clients; %d samples with them connected, %d different (limit %d)", consumersBefore, samples.Load(), off.Load(), consumerLimit)
	if off.Load() != 0 || count() != consumersBefore {
		t.Errorf("the stream's consumer count moved with the clients connected (%d of %d samples; now %d, before %d)", off.Load(), samples.Load(), count(), consumersBefore)
	}
	t.Logf("heap in use: %.1f MB before the clients, %.1f MB with %d streams open and %d refused (the test's own clients included); RSS %.1f MB → %.1f MB; %d lagging subscribers caught up",
		mb(heapBefore), mb(heapDuring), served.Load(), refused.Load(), mb(rssBefore), mb(rssDuring), lagged)
	if grown := int64(heapDuring) - int64(heapBefore); grown > 256<<20 {
		t.Errorf("heap grew by %d MB with the clients connected", grown>>20)
	}

	stopClients()
	wg.Wait()
	// Each served stream of the run got each of its events once, in order.
	runSeqs := make([]uint64, 0, want)
	var runEvents []bus.Event
	for rec, err := range admin.Read(ctx, bus.ReadOptions{RunID: run}) {
		if err != nil {
			t.Fatal(err)
		}
		runSeqs = append(runSeqs, rec.Sequence)
		runEvents = append(runEvents, rec.Event)
	}
	if len(runSeqs) != want || requests.Load() != steps {
		t.Fatalf("the run has %d events, want %d; %d requests handled, want %d", len(runSeqs), want, requests.Load(), steps)
	}
	for _, c := range followers {
		checkExact(t, c.seqs, runSeqs)
	}
	t.Logf("%d served streams of the run got its %d events each", len(followers), want)
	// The projector handled every event: its files are the run's.
	for name, data := range projector.Render(runEvents) {
		got, err := os.ReadFile(filepath.Join(work, name))
		if err != nil && len(data) > 0 {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s projected under load differs from the run's events (%d bytes, want %d)", name, len(got), len(data))
		}
	}
	// No dead letter.
	dlq, err := admin.JetStream().Stream(ctx, bus.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dlq.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("dead letters: %+v %v", info.State, err)
	}
	stopReactor()
	stopFiles()
	stopDash()
}

// settledConsumers waits until the stream's consumer count has not moved
// for longer than a read's consumer lives, and returns it.
func settledConsumers(t *testing.T, count func() int) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	n, since := count(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if m := count(); m != n {
			n, since = m, time.Now()
		} else if time.Since(since) > bus.ReadInactiveThreshold+time.Second {
			return n
		}
	}
	t.Fatalf("the stream's consumer count did not settle (last %d)", n)
	return n
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func rawGet(t *testing.T, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// memNow returns the heap in use after a GC and the process's resident
// set size.
func memNow() (heap, rss uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if data, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				rss = kb << 10
			}
		}
	}
	return ms.HeapInuse, rss
}

func mb(n uint64) float64 { return float64(n) / 1e6 }
