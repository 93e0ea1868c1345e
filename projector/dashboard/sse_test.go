package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// checkExact fails unless got is exactly want: every sequence once, in
// order (no gap, no duplicate).
func checkExact(t *testing.T, got, want []uint64) {
	t.Helper()
	seen := map[uint64]int{}
	for _, s := range got {
		seen[s]++
	}
	for s, n := range seen {
		if n > 1 {
			t.Errorf("sequence %d delivered %d times", s, n)
		}
	}
	for _, s := range want {
		if seen[s] == 0 {
			t.Errorf("sequence %d never delivered (gap)", s)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("delivered %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("event %d has sequence %d, want %d (order)", i, got[i], want[i])
		}
	}
}

// TestSSEResume reconnects a client again and again with Last-Event-ID
// while another run's events and this run's events are published, with
// the hub of Serve, with a subscriber queue so small (in records, or in
// bytes) that the stream lags out of it all the time, with catch-up
// batches of 3 records, and with the Handler alone (whose first stream
// starts the hub): the client gets every event of its run exactly once,
// in stream order, and each data is the envelope as stored.
func TestSSEResume(t *testing.T) {
	for _, mode := range []string{"hub", "hub-lagging", "hub-bytes", "small-batches", "direct"} {
		t.Run(mode, func(t *testing.T) {
			oldBuf, oldBytes, oldBatch := hubBuffer, subscriberBytes, catchUpRecords
			t.Cleanup(func() { hubBuffer, subscriberBytes, catchUpRecords = oldBuf, oldBytes, oldBatch })
			switch mode {
			case "hub-lagging":
				hubBuffer = 2
			case "hub-bytes":
				subscriberBytes = 1 // one record queued at most
			case "small-batches":
				hubBuffer, catchUpRecords = 2, 3
			}
			e := startEnv(t, mode == "direct")
			const run, other = "run-resume", "run-other"
			for i := range 20 {
				e.publish(run, note(fmt.Sprintf("before %d", i)))
				e.publish(other, note(fmt.Sprintf("other %d", i)))
			}
			const live = 150
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := range live {
					e.publish(run, note(fmt.Sprintf("live %d", i)))
					if i%3 == 0 {
						e.publish(other, note(fmt.Sprintf("other live %d", i)))
					}
					if i%10 == 0 {
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
			var got []uint64
			ids := map[uint64]string{}
			last := ""
			for reconnects := 0; len(got) < 20+live; reconnects++ {
				if reconnects > 200 {
					t.Fatalf("too many reconnects; have %d events", len(got))
				}
				c := openSSE(t, e.url+"/api/runs/"+run+"/events", last)
				for range 7 + reconnects%5 {
					if len(got) == 20+live {
						break
					}
					ev := c.next(t, 30*time.Second)
					var env bus.Event
					if err := json.Unmarshal([]byte(ev.Data), &env); err != nil {
						t.Fatalf("data of %s is not an envelope: %v: %q", ev.ID, err, ev.Data)
					}
					if env.RunID != run {
						t.Fatalf("event of run %q in the stream of %q", env.RunID, run)
					}
					got = append(got, ev.seq)
					ids[ev.seq] = env.ID
					last = ev.ID
				}
				c.close()
			}
			wg.Wait()
			checkExact(t, got, e.runSeqs(run))
			// Each id is the stored event's: compare with a bus read.
			for rec, err := range e.bus.Read(context.Background(), bus.ReadOptions{RunID: run}) {
				if err != nil {
					t.Fatal(err)
				}
				if ids[rec.Sequence] != rec.Event.ID {
					t.Fatalf("seq %d: SSE event id %q, stored %q", rec.Sequence, ids[rec.Sequence], rec.Event.ID)
				}
			}
		})
	}
}

// TestSSELiveAndFilters: a stream of every run filtered by type sees only
// those types, live; after= resumes like Last-Event-ID; heartbeats flow.
func TestSSELiveAndFilters(t *testing.T) {
	e := startEnv(t, false)
	first := e.publish("run-a", note("old"))
	c := openSSE(t, e.url+"/api/events?types=vera.container.log,vera.task.*&after="+strconv.FormatUint(first, 10), "")
	defer c.close()
	e.publish("run-a", note("not wanted"))
	want := []uint64{
		e.publish("run-a", catalog.ContainerLog{Container: "c", Stream: catalog.StreamStdout, Line: "hello", Time: time.Now()}),
		e.publish("run-b", catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "t", WorkDir: "/tmp/x"}, SubmittedBy: "cli"}),
	}
	var got []uint64
	for range want {
		ev := c.next(t, 10*time.Second)
		got = append(got, ev.seq)
	}
	checkExact(t, got, want)
	select {
	case hb := <-c.comments:
		if !strings.HasPrefix(hb, ":") {
			t.Fatalf("comment %q", hb)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no heartbeat comment")
	}
	code, body := e.request("GET", "/api/events?types=vera.bad..type", "", nil)
	if code != 400 {
		t.Fatalf("bad type filter: %d %s", code, body)
	}
	code, body = e.request("GET", "/api/runs/run-a/events", "", map[string]string{"Last-Event-ID": "x"})
	if code != 400 {
		t.Fatalf("bad Last-Event-ID: %d %s", code, body)
	}
}

// TestSSEMalformed: a message on a run subject that is not an envelope is
// sent as event "malformed" with its sequence as id, not dropped.
func TestSSEMalformed(t *testing.T) {
	e := startEnv(t, false)
	ack, err := e.pub.PublishRaw(context.Background(), "vera.run.run-m.notes.appended", "bad-1", []byte("{not json\nline two"))
	if err != nil {
		t.Fatal(err)
	}
	good := e.publish("run-m", note("fine"))
	c := openSSE(t, e.url+"/api/runs/run-m/events", "")
	defer c.close()
	ev := c.next(t, 10*time.Second)
	if ev.Event != "malformed" || ev.seq != ack.Sequence || !strings.Contains(ev.Data, "not json") {
		t.Fatalf("malformed message sent as %+v", ev)
	}
	if ev := c.next(t, 10*time.Second); ev.seq != good || ev.Event != "" {
		t.Fatalf("next event %+v, want seq %d", ev, good)
	}
}

// TestSSEBinaryMode: an outside CloudEvent stored in binary mode (ce-
// headers, the body its data alone) is sent as its structured envelope,
// not as its bare data, and not as malformed.
func TestSSEBinaryMode(t *testing.T) {
	e := startEnv(t, false)
	h := nats.Header{}
	for k, v := range map[string]string{"ce-specversion": "1.0", "ce-id": "acme-1", "ce-source": "acme", "ce-type": "vera.ext.acme.scanned", "ce-time": "2026-11-21T12:00:00Z"} {
		h.Set(k, v)
	}
	msg := &nats.Msg{Subject: "vera.run.run-b.ext.acme.scanned", Header: h, Data: []byte(`{"hosts":3}`)}
	ack, err := e.pub.JetStream().PublishMsg(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	c := openSSE(t, e.url+"/api/runs/run-b/events", "")
	defer c.close()
	ev := c.next(t, 10*time.Second)
	if ev.Event != "" || ev.seq != ack.Sequence {
		t.Fatalf("binary-mode event sent as %+v", ev)
	}
	got, err := bus.ParseEvent([]byte(ev.Data))
	if err != nil || got.ID != "acme-1" || got.RunID != "run-b" || string(got.Data) != `{"hosts":3}` {
		t.Fatalf("data %s is not the structured envelope: %+v, %v", ev.Data, got, err)
	}
}

// TestServeStopsStreams: ending Serve's context ends every open stream
// promptly; goleak (TestMain) checks that nothing is left running.
func TestServeStopsStreams(t *testing.T) {
	e := startEnv(t, false)
	var clients []*sseClient
	for i := range 10 {
		clients = append(clients, openSSE(t, e.url+fmt.Sprintf("/api/runs/run-%d/events", i), ""))
	}
	clients = append(clients, openSSE(t, e.url+"/api/events", ""))
	e.publish("run-1", note("x"))
	clients[1].next(t, 10*time.Second)
	t0 := time.Now()
	e.stop()
	if d := time.Since(t0); d > 4*time.Second {
		t.Errorf("Serve took %v to stop with open streams", d)
	}
	for _, c := range clients {
		select {
		case <-c.done:
		case <-time.After(5 * time.Second):
			t.Fatal("a client stream did not end when the server stopped")
		}
		c.close()
	}
}

func TestMatchSubject(t *testing.T) {
	for _, tc := range []struct {
		f, s string
		ok   bool
	}{
		{"vera.run.*.>", "vera.run.r1.notes.appended", true},
		{"vera.run.r1.>", "vera.run.r2.notes.appended", false},
		{"vera.run.r1.model.*", "vera.run.r1.model.requested", true},
		{"vera.run.r1.model.*", "vera.run.r1.model.requested.x", false},
		{"vera.run.*.task.submitted", "vera.run.r9.task.submitted", true},
		{"vera.run.r1.>", "vera.run.r1", false},
		{"a.b", "a.b", true},
		{"a.b", "a.b.c", false},
	} {
		if got := bus.MatchSubject(tc.f, tc.s); got != tc.ok {
			t.Errorf("MatchSubject(%q, %q) = %v", tc.f, tc.s, got)
		}
	}
}
