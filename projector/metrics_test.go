package projector

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

func foldText(tb testing.TB, evs []bus.Event) string {
	tb.Helper()
	m := NewMetrics(nil, nil)
	for _, ev := range evs {
		m.Observe(ev)
	}
	var buf bytes.Buffer
	if err := m.WriteText(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.String()
}

func TestMetricsFoldValues(t *testing.T) {
	evs := synthRun(t, "m", "/w", 10)
	text := foldText(t, evs)
	for _, name := range SpecMetricNames() {
		if !strings.Contains(text, "# TYPE "+name+" ") {
			t.Errorf("metric %s missing", name)
		}
	}
	for _, want := range []string{
		`dra_verifier_scores_total{score="1"} 0`,
		`dra_verifier_scores_total{score="2"} 1`,
		`dra_verifier_scores_total{score="4"} 1`,
		"dra_verifier_last_score 4\n",
		"dra_verifier_duration_seconds_sum 49.5\n",
		"dra_verifier_duration_seconds_count 2\n",
		`dra_verifier_duration_seconds_bucket{le="10"} 1`,
		"dra_verifier_model_tokens_total 2700\n",
		`dra_model_tokens_total{scope="judge"} 900`,
		"dra_verifier_instruction_chars_count 3\n",
		"dra_verifier_instruction_has_url_total 1\n",
		"dra_verifier_instruction_has_path_total 2\n",
		"dra_verifier_instruction_has_cmd_total 2\n",
		"dra_verifier_before_tools_total 1\n",
		"dra_model_finish_reason_length_total 2\n",
		"dra_verifier_gradient_total 1\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("want %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "\n\n") {
		t.Error("blank line in exposition")
	}
	// A second copy of an event (same id) in a run counts once.
	last := len(evs) - 1
	dup := append(append(append([]bus.Event{}, evs[:last]...), evs[:last]...), evs[last])
	if got := foldText(t, dup); got != text {
		t.Error("duplicate events changed the fold")
	}
}

func TestMetricsLiveEqualsReplayFold(t *testing.T) {
	_, b := bustest.New(t)
	root := t.TempDir()
	evA := synthRun(t, "ma", filepath.Join(root, "ma"), 12)
	evB := synthRun(t, "mb", filepath.Join(root, "mb"), 5)

	m := NewMetrics(b, bustest.Logger(t))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := m.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	publish(t, b, evA)
	publish(t, b, evB)

	// The fold of a replay of the stream, in stream order.
	var replay []bus.Event
	for rec, err := range b.Read(context.Background(), bus.ReadOptions{}) {
		if err != nil {
			t.Fatal(err)
		}
		replay = append(replay, rec.Event)
	}
	want := foldText(t, replay)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var buf bytes.Buffer
		if err := m.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		if buf.String() == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("live metrics differ from the replay fold:\n%s\n--- want\n%s", buf.String(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The same values as folding the events directly (two runs summed).
	if direct := foldText(t, append(append([]bus.Event{}, evA...), evB...)); direct != want {
		// The interleaving differs only in last_score; both runs end with 4.
		t.Errorf("direct fold differs from replay fold")
	}

	// /metrics serves the same text plus bus health.
	files := startFiles(t, b)
	if _, err := b.PublishRaw(context.Background(), "vera.run.ma.tool.finished", "bad-1", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	var body string
	for {
		if err := m.SampleHealth(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		data, _ := io.ReadAll(rec.Body)
		body = string(data)
		if strings.Contains(body, `vera_bus_dead_letters{consumer="projector-files"} 1`) &&
			strings.Contains(body, `vera_bus_consumer_pending{consumer="projector-files"} 0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bus health not reported:\n%s", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	files()
	if !strings.Contains(body, "dra_verifier_last_score 4\n") || !strings.Contains(body, "vera_events_malformed_total 1\n") {
		t.Errorf("handler does not serve the event metrics:\n%s", body)
	}
}

func TestMetricsHealthApartAndNegativeTokens(t *testing.T) {
	m := NewMetrics(nil, nil)
	// Data breaking the catalogue's minimum=0 must not panic a counter
	// (client_golang panics on a negative Add) nor lower it.
	for _, ev := range []bus.Event{
		{ID: "n1", RunID: "r", Type: "vera.audit.judged", Data: []byte(`{"score":3,"model_tokens":-5}`)},
		{ID: "n2", RunID: "r", Type: "vera.model.responded", Data: []byte(`{"scope":"judge","usage":{"total":-7}}`)},
	} {
		m.Observe(ev)
	}
	var buf bytes.Buffer
	if err := m.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	text := buf.String()
	for _, want := range []string{"dra_verifier_model_tokens_total 0\n", `dra_model_tokens_total{scope="judge"} 0` + "\n", `dra_verifier_scores_total{score="3"} 1` + "\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("want %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "vera_bus_") {
		t.Errorf("bus health in the metrics.prom snapshot:\n%s", text)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{"vera_bus_health_errors_total 0\n", "vera_bus_stream_messages 0\n", `dra_verifier_scores_total{score="3"} 1` + "\n"} {
		if !strings.Contains(body, want) {
			t.Errorf("want %q in /metrics:\n%s", want, body)
		}
	}
}

func TestModelReplyMetrics(t *testing.T) {
	s := &bustest.Synth{TB: t, RunID: "mr", T0: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	s.Add("agent", catalog.ModelResponded{CallID: "c1", Scope: "agent", Step: 1, Model: "m", Attempt: 1,
		Usage: catalog.TokenUsage{Total: 50, Reasoning: 30}, ToolCalls: []catalog.ToolCall{{Name: "shell", Arguments: "{}"}}, Dropped: []string{"response_format"}})
	s.Add("verifier.deepverify", catalog.ModelResponded{CallID: "c2", Scope: "judge", Model: "m", Attempt: 1,
		Usage: catalog.TokenUsage{Total: 10, Reasoning: 4}, Dropped: []string{"response_format"}})
	s.Add("verifier.deepverify", catalog.ModelResponded{CallID: "c3", Scope: "judge", Model: "m", Attempt: 1,
		Error: "HTTP 500", Dropped: []string{"tools"}})
	text := foldText(t, s.Evs)
	for _, want := range []string{
		`vera_model_reasoning_tokens_total{scope="agent"} 30`,
		`vera_model_reasoning_tokens_total{scope="judge"} 4`,
		`vera_model_tool_calls_total{scope="agent"} 1`,
		`vera_model_tool_calls_total{scope="judge"} 0`,
		`vera_model_dropped_features_total{feature="response_format"} 2`,
		`vera_model_dropped_features_total{feature="tools"} 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("want %q in\n%s", want, text)
		}
	}
}
