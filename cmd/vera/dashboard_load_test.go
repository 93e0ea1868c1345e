package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/auth"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/projector/dashboard"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// TestThousandDashboardClientsStarveNoOne is the dashboard attack of issue
// 11 against a real `vera up`: 1,000 concurrent SSE clients (loopback,
// bounded in count and time). The dashboard serves at most its cap and
// answers the rest 503 with Retry-After; the stream's consumer count does
// not move; sandboxd, the agent and the projector take a run to RESOLVED
// meanwhile with no dead letter; and memory stays bounded.
func TestThousandDashboardClientsStarveNoOne(t *testing.T) {
	dockertest.Client(t)
	img := imagetest.Ensure(t)
	t.Setenv("NATS_URL", "")
	data := veraDataDir(t)
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", data, "--nats-listen", addr, "--http-listen", "127.0.0.1:0", "--image", img,
		"--work-root", os.TempDir(), "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	m := regexp.MustCompile(`dashboard: (http://[^/]+)/#token=`).FindStringSubmatch(upOut.String())
	if m == nil {
		t.Fatalf("no dashboard URL:\n%s", upOut)
	}
	base := m[1]
	readToken, err := os.ReadFile(filepath.Join(data, dashboard.ReadTokenFileName))
	if err != nil {
		t.Fatal(err)
	}
	admin := bustest.Connect(t, url, bus.Options{CredsFile: auth.Store{Dir: auth.DirOf(data)}.Path(auth.Admin), ReadOnly: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	consumers := bustest.ConsumerCounter(t, admin)

	// Without a token, nothing is read.
	resp, err := http.Get(base + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the live feed without a token: %d", resp.StatusCode)
	}

	// A history to catch up on: more than a reader gets by direct gets
	// before it would make a consumer.
	for i := range 100 {
		ev, _ := admin.Events.NewRaw("history", "vera.ext.note", []byte(fmt.Sprintf(`{"n":%d}`, i)))
		if _, err := admin.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}

	// Once the components have handled it, their reads' consumers expire
	// (bus.ReadInactiveThreshold): the count settles.
	settled := func() int {
		deadline := time.Now().Add(30 * time.Second)
		n, since := consumers(), time.Now()
		for time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
			if m := consumers(); m != n {
				n, since = m, time.Now()
			} else if time.Since(since) > bus.ReadInactiveThreshold+2*time.Second {
				return n
			}
		}
		t.Fatalf("the stream's consumer count did not settle (last %d)", n)
		return n
	}
	consumersBefore := settled()

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapBefore := ms.HeapInuse

	const clients = 1000
	var ok, refused, retryAfter, other atomic.Int64
	var connected sync.WaitGroup
	cctx, stopClients := context.WithCancel(ctx)
	var wg sync.WaitGroup
	tr := &http.Transport{DisableKeepAlives: true, DisableCompression: true}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	connected.Add(clients)
	for i := range clients {
		wg.Go(func() {
			path := "/api/events"
			if i%2 == 1 {
				path = fmt.Sprintf("/api/runs/r%d/events", i)
			}
			req, _ := http.NewRequestWithContext(cctx, "GET", base+path, nil)
			req.Header.Set(dashboard.TokenHeader, strings.TrimSpace(string(readToken)))
			resp, err := client.Do(req)
			if err != nil {
				other.Add(1)
				connected.Done()
				return
			}
			defer resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
				br := bufio.NewReader(resp.Body)
				_, _ = br.ReadString('\n') // the stream's first line
				connected.Done()
				for {
					if _, err := br.ReadString('\n'); err != nil {
						return
					}
				}
			case http.StatusServiceUnavailable:
				refused.Add(1)
				if resp.Header.Get("Retry-After") != "" {
					retryAfter.Add(1)
				}
			default:
				other.Add(1)
			}
			connected.Done()
		})
	}
	connected.Wait()
	t.Logf("%d clients: %d served, %d refused with 503 (%d with Retry-After), %d other", clients, ok.Load(), refused.Load(), retryAfter.Load(), other.Load())
	if ok.Load() != dashboard.DefaultMaxStreams || refused.Load() != clients-dashboard.DefaultMaxStreams || retryAfter.Load() != refused.Load() {
		t.Errorf("want %d served and the rest refused with Retry-After", dashboard.DefaultMaxStreams)
	}
	time.Sleep(500 * time.Millisecond) // catch-ups done
	if n := consumers(); n != consumersBefore {
		t.Errorf("the stream's consumers went from %d to %d with the clients connected", consumersBefore, n)
	}
	t.Logf("the stream's consumers: %d before the clients, %d with them connected", consumersBefore, consumers())
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("heap in use: %.1f MB before the clients, %.1f MB with %d streams open", float64(heapBefore)/1e6, float64(ms.HeapInuse)/1e6, ok.Load())
	if grown := int64(ms.HeapInuse) - int64(heapBefore); grown > 256<<20 {
		t.Errorf("heap grew by %d MB with the clients connected", grown>>20)
	}

	// Meanwhile a real run: the agent, sandboxd (a real command) and the
	// projector.
	model := scriptedmodel.Start(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: turn(`{"tool":"shell","args":{"cmd":"echo 42 > /work/answer.txt && cat /work/answer.txt"}}`, "none", "continuing"),
		2: turn(`{"tool":"notes_append","args":{"text":"answer.txt holds 42 (ev_0001)"}}`, "ev_0001", "continuing"),
		3: turn(`{"tool":"submit","args":{"answer":"42"}}`, "ev_0001", "RESOLVED"),
	}, "")))
	work := filepath.Join(t.TempDir(), "work")
	out, errOut, code := runCLI(t, "run", "--nats-url", url, "--task", "What number is in answer.txt?", "--work-dir", work,
		"--model-base-url", model.URL(), "--model", "scripted", "--no-network")
	if mm := regexp.MustCompile(`run (\S+) submitted`).FindStringSubmatch(out); mm != nil {
		t.Cleanup(func() { removeContainers(t, mm[1]) })
	}
	if code != 0 || !strings.Contains(out, "RESOLVED") {
		t.Fatalf("the run with 1,000 dashboard clients: exit %d\n%s\n%s", code, out, errOut)
	}
	waitFor(t, "notes.md from the projector", func() bool {
		b, err := os.ReadFile(filepath.Join(work, "notes.md"))
		return err == nil && strings.Contains(string(b), "answer.txt holds 42")
	})
	// Every event of the run names its producer as the catalogue does, and
	// is of a type the catalogue lets that producer publish.
	if mm := regexp.MustCompile(`run (\S+) submitted`).FindStringSubmatch(out); mm != nil {
		evs, err := admin.ReadRun(ctx, mm[1])
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if !slices.Contains(catalog.ProducedBy(ev.Source), ev.Type) {
				t.Errorf("%s from source %q: not a catalogued producer of it", ev.Type, ev.Source)
			}
		}
		if len(evs) < 10 {
			t.Errorf("the run has only %d events", len(evs))
		}
	}
	dlq, err := admin.JetStream().Stream(ctx, bus.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dlq.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Errorf("dead letters: %+v %v", info.State, err)
	}
	stopClients()
	wg.Wait()
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
}
