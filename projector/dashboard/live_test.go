package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/live"
	"github.com/vera-run/vera/internal/llm"
)

// A run started from the page may choose the agent model's settings; the
// template's others stay; a bad one is refused before anything is
// published.
func TestStartTakesModelSettings(t *testing.T) {
	seed := int64(5)
	e := startEnv(t, false, func(o *Options) {
		o.Template.Model.Seed = &seed
		o.Template.Model.ExtraBody = map[string]any{"reasoning_effort": "low"}
	})
	code, body := e.request("GET", "/api/config", "", nil)
	var c Config
	if code != http.StatusOK || json.Unmarshal([]byte(body), &c) != nil || c.ModelSettings.Seed == nil || *c.ModelSettings.Seed != 5 {
		t.Fatalf("config: %d %s", code, body)
	}
	for _, bad := range []struct{ body, want string }{
		{`{"task":"t","model":{"temperature":5}}`, "model: temperature 5: want 0 to 2"},
		{`{"task":"t","model":{"tool_protocol":"json"}}`, `model: tool_protocol \"json\": want auto, native or text`},
		{`{"task":"t","model":{"top_p":0}}`, "model: top_p 0"},
		{`{"task":"t","model":{"max_tokens":-1}}`, "model: max_tokens -1"},
		{`{"task":"t","model":{"stop":["x"]}}`, "unknown field"},
	} {
		id := e.newSession()
		code, body := e.request("POST", "/api/runs/"+id+"/start", bad.body, e.auth())
		if code != http.StatusBadRequest || !strings.Contains(body, bad.want) {
			t.Errorf("start %s: %d %s, want 400 saying %q", bad.body, code, body, bad.want)
		}
		if n := len(e.submitted(id)); n != 0 {
			t.Errorf("start %s published %d tasks", bad.body, n)
		}
	}
	id := e.newSession()
	code, body = e.request("POST", "/api/runs/"+id+"/start",
		`{"task":"t","model":{"tool_protocol":"native","temperature":0,"top_p":0.95,"max_tokens":4096,"seed":11,"stream":false}}`, e.auth())
	if code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, body)
	}
	var d catalog.TaskSubmitted
	if err := e.submitted(id)[0].DecodeData(&d); err != nil {
		t.Fatal(err)
	}
	m := d.Model
	if m.Name != "test-model" || m.ToolProtocol != catalog.ToolProtocolNative || m.Temperature == nil || *m.Temperature != 0 ||
		m.TopP == nil || *m.TopP != 0.95 || m.MaxTokens != 4096 || m.Seed == nil || *m.Seed != 11 || m.Stream == nil || *m.Stream ||
		m.ExtraBody["reasoning_effort"] != "low" {
		t.Fatalf("submitted model %+v", m)
	}
	// Without settings: the template's, the seed included.
	id = e.newSession()
	if code, body := e.request("POST", "/api/runs/"+id+"/start", `{"task":"t"}`, e.auth()); code != http.StatusCreated {
		t.Fatalf("start: %d %s", code, body)
	}
	d = catalog.TaskSubmitted{}
	if err := e.submitted(id)[0].DecodeData(&d); err != nil || d.Model.Seed == nil || *d.Model.Seed != 5 || d.Model.Temperature != nil || d.Model.Stream != nil {
		t.Fatalf("submitted model %+v (%v)", d.Model, err)
	}
}

// A run's stream with live=1 forwards the live pieces of that run's
// replies as SSE events named "live" (without an id: a reconnect resumes
// after the last stored record); other runs' pieces and streams without
// live=1 get none.
func TestSSEForwardsLivePieces(t *testing.T) {
	e := startEnv(t, false)
	const run = "run-live"
	seq := e.publish(run, note("before"))
	withLive := openSSE(t, e.url+"/api/runs/"+run+"/events?live=1&token="+testReadToken, "")
	defer withLive.close()
	without := openSSE(t, e.url+"/api/runs/"+run+"/events?token="+testReadToken, "")
	defer without.close()
	for _, c := range []*sseClient{withLive, without} {
		if ev := c.next(t, 10*time.Second); ev.seq != seq {
			t.Fatalf("first event %+v, want the stored note %d", ev, seq)
		}
	}
	// The streams are subscribed once they sent what was stored; give the
	// live subscription a round trip.
	if err := e.bus.Conn().Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	pub := live.NewPublisher(e.pub.Conn(), live.Options{Interval: 10 * time.Millisecond})
	defer pub.Close()
	pub.Deltas("run-other", 1, "other-call")(llm.Delta{Content: "not this run"})
	sink := pub.Deltas(run, 4, "call-4")
	sink(llm.Delta{Reasoning: "first I think\n"})
	sink(llm.Delta{Content: `THOUGHT: "quoted" </script>`})
	sink(llm.Delta{})
	var got live.Reply
	for !got.Done {
		ev := withLive.next(t, 10*time.Second)
		if ev.Event != "live" || ev.ID != "" {
			t.Fatalf("event %+v, want a live piece without id", ev)
		}
		p, err := live.Decode("vera.live."+run+".model", []byte(ev.Data))
		if err != nil {
			t.Fatal(err)
		}
		if p.CallID != "call-4" || p.Step != 4 {
			t.Fatalf("piece of another call: %+v", p)
		}
		got.Add(p)
	}
	if got.Reasoning != "first I think\n" || got.Content != `THOUGHT: "quoted" </script>` || got.Missed {
		t.Fatalf("reply %+v", got)
	}
	after := e.publish(run, note("after"))
	if ev := withLive.next(t, 10*time.Second); ev.seq != after {
		t.Fatalf("next event %+v, want the stored note %d", ev, after)
	}
	if ev := without.next(t, 10*time.Second); ev.seq != after || ev.Event != "" {
		t.Fatalf("stream without live=1: %+v, want only the stored note %d", ev, after)
	}
	if code, body := e.request("GET", "/api/events?live=1", "", nil); code != http.StatusBadRequest {
		t.Fatalf("live=1 on every run's stream: %d %s", code, body)
	}
}
