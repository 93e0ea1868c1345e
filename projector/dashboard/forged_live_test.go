package dashboard

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/llm"
)

// TestForgedLivePiecesAreDropped (issue 26): an identity that may create
// consumers made a push consumer whose deliver subject was the run's live
// subject, delivering a stored ext event shaped like a piece, and the
// page's live feed showed "event: live" with the attacker's text. The
// server does not check deliver subjects; the live reader now takes only
// what the agent publishes (a core publish, no reply, no headers).
func TestForgedLivePiecesAreDropped(t *testing.T) {
	e := startEnv(t, false)
	const run = "run-forged"
	seq := e.publish(run, note("before"))
	c := openSSE(t, e.url+"/api/runs/"+run+"/events?live=1&token="+testReadToken, "")
	defer c.close()
	if ev := c.next(t, 10*time.Second); ev.seq != seq {
		t.Fatalf("first event %+v", ev)
	}
	if err := e.bus.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)

	// A stored event shaped like a piece: an ext envelope with a piece's
	// fields at its top level.
	subject := bus.SubjectRoot + "." + run + ".ext.demo"
	forged := `{"specversion":"1.0","id":"01JFORGED00000000000000001","source":"ext","type":"vera.ext.demo","subject":"` + run +
		`","runid":"` + run + `","time":"2026-11-21T18:00:00Z","call_id":"forged","seq":1,"content":"ATTACKER TEXT","data":{}}`
	ctx := context.Background()
	if _, err := e.pub.PublishRaw(ctx, subject, "01JFORGED00000000000000001", []byte(forged)); err != nil {
		t.Fatal(err)
	}
	liveSubj, _ := live.Subject(run)
	req, _ := json.Marshal(map[string]any{"stream_name": bus.StreamName, "config": map[string]any{
		"name": "forge", "deliver_subject": liveSubj, "filter_subject": subject, "deliver_policy": "all", "ack_policy": "none"}})
	nc, err := nats.Connect(e.natsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if r, err := nc.Request("$JS.API.CONSUMER.CREATE."+bus.StreamName+".forge", req, 5*time.Second); err != nil || strings.Contains(string(r.Data), `"error"`) {
		t.Fatalf("push consumer: %v %s", err, r.Data)
	}
	time.Sleep(300 * time.Millisecond) // the delivery, had it been taken

	// Then the agent's own piece.
	pub := live.NewPublisher(e.pub.Conn(), live.Options{Interval: 10 * time.Millisecond})
	defer pub.Close()
	sink := pub.Deltas(run, 2, "call-2")
	sink(llm.Delta{Content: "the real reply"})
	sink(llm.Delta{})
	var got live.Reply
	for !got.Done {
		ev := c.next(t, 10*time.Second)
		if ev.Event != "live" {
			continue // the ext event itself, as stored: an event, not a piece
		}
		if strings.Contains(ev.Data, "ATTACKER TEXT") {
			t.Fatalf("the forged piece reached the page as the model's reply: %+v", ev)
		}
		p, err := live.Decode(liveSubj, []byte(ev.Data))
		if err != nil {
			t.Fatal(err)
		}
		got.Add(p)
	}
	if got.Content != "the real reply" || got.CallID != "call-2" {
		t.Fatalf("reply %+v", got)
	}
}
