package llmbus_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
	"github.com/vera-run/vera/internal/llm/llmbus"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

const secretKey = "sk-llmbus-test-0b9f3e6d2c1a4f58"

type stored struct {
	raw []byte
	ev  bus.Event
}

func readRun(t *testing.T, b *bus.Bus, runID string) []stored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []stored
	for rec, err := range b.Read(ctx, bus.ReadOptions{RunID: runID}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Err != nil {
			t.Fatalf("stored event %d is invalid: %v", rec.Sequence, rec.Err)
		}
		out = append(out, stored{raw: rec.Raw, ev: rec.Event})
	}
	return out
}

func newClient(t *testing.T, srv *scriptedmodel.Server, rec llm.Recorder, stream bool) *llm.Client {
	t.Helper()
	c, err := llm.New(llm.Config{
		BaseURL:   strings.TrimSuffix(srv.URL(), "/v1"),
		Model:     "test-model",
		APIKeyEnv: "VERA_LLMBUS_TEST_KEY",
		Timeout:   10 * time.Second,
		Stream:    stream,
		Backoff:   llm.Backoff{Base: time.Millisecond},
		Recorder:  rec,
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestPublishesModelIOWithBlobsAndDerivedIDs(t *testing.T) {
	t.Setenv("VERA_LLMBUS_TEST_KEY", secretKey)
	_, b := bustest.New(t)
	bigPrompt := strings.Repeat("ev_0001: the release page says 3.13.0 was released on 2024-10-07\n", 400) // ~26 KB
	bigAnswer := strings.Repeat("THOUGHT: long deliberation. ", 1000)                                      // ~28 KB
	srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(
		scriptedmodel.Reply{Status: 503, ErrorMessage: "overloaded; key " + secretKey + " rejected"},
		scriptedmodel.Reply{Content: bigAnswer, Usage: &scriptedmodel.Usage{PromptTokens: 6500, CompletionTokens: 7000}},
	))
	rec := llmbus.New(b, llmbus.Options{})
	c := newClient(t, srv, rec, true)

	cause, err := b.Events.New("run-llmbus", catalog.RunCancelled{Reason: "stand-in cause"})
	if err != nil {
		t.Fatal(err)
	}
	temp := 0.3
	req := llm.Request{
		Messages: []llm.Message{
			{Role: "system", Content: "You are VERA."},
			{Role: "user", Content: bigPrompt},
		},
		Sampling: llm.Sampling{Temperature: &temp, MaxTokens: 2048},
		RunID:    "run-llmbus", Scope: "agent", Purpose: "step", Step: 3,
		CallID: "call-agent-s0003", CauseID: cause.ID,
	}
	resp, err := c.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempts != 2 || resp.Text != bigAnswer {
		t.Fatalf("attempts %d, text %d bytes", resp.Attempts, len(resp.Text))
	}

	evs := readRun(t, b, "run-llmbus")
	if len(evs) != 4 {
		t.Fatalf("%d events, want 4 (two attempts)", len(evs))
	}
	for i, want := range []string{catalog.TypeModelRequested, catalog.TypeModelResponded, catalog.TypeModelRequested, catalog.TypeModelResponded} {
		if evs[i].ev.Type != want {
			t.Errorf("event %d is %s, want %s", i, evs[i].ev.Type, want)
		}
		if strings.Contains(string(evs[i].raw), secretKey) {
			t.Errorf("event %d carries the API key: %s", i, evs[i].raw)
		}
	}
	ctx := context.Background()
	for attempt := 1; attempt <= 2; attempt++ {
		reqEv, resEv := evs[2*attempt-2].ev, evs[2*attempt-1].ev
		wantReq, wantRes := llmbus.EventIDs(llm.CallRecord{RunID: "run-llmbus", CallID: "call-agent-s0003", CauseID: cause.ID, Attempt: attempt})
		if reqEv.ID != wantReq || resEv.ID != wantRes {
			t.Errorf("attempt %d ids %s/%s, want derived %s/%s", attempt, reqEv.ID, resEv.ID, wantReq, wantRes)
		}
		if reqEv.CausationID != cause.ID || resEv.CausationID != reqEv.ID {
			t.Errorf("attempt %d causation %q / %q", attempt, reqEv.CausationID, resEv.CausationID)
		}
		if reqEv.ID[:10] != cause.ID[:10] {
			t.Errorf("derived id %s does not carry the cause's timestamp (%s)", reqEv.ID, cause.ID)
		}

		var mr catalog.ModelRequested
		if err := reqEv.DecodeData(&mr); err != nil {
			t.Fatal(err)
		}
		if mr.CallID != "call-agent-s0003" || mr.Scope != catalog.ScopeAgent || mr.Purpose != "step" || mr.Step != 3 ||
			mr.Model != "test-model" || mr.BaseURL != srv.URL() || mr.Attempt != attempt || mr.MessageCount != 2 ||
			mr.Params.MaxTokens != 2048 || mr.Params.Temperature == nil || *mr.Params.Temperature != 0.3 || !mr.Params.Stream ||
			mr.TimeoutMS != 10000 {
			t.Errorf("attempt %d requested %+v", attempt, mr)
		}
		if mr.Messages != nil || mr.MessagesBlob == nil {
			t.Fatalf("big messages inline: blob %v, %d inline", mr.MessagesBlob, len(mr.Messages))
		}
		blob, err := b.GetBlob(ctx, mr.MessagesBlob.Digest)
		if err != nil {
			t.Fatal(err)
		}
		var got []catalog.Message
		if err := json.Unmarshal(blob, &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].Role != catalog.RoleSystem || got[1].Content != bigPrompt ||
			mr.MessagesBlob.ContentType != "application/json" || mr.MessagesBlob.Size != int64(len(blob)) || mr.MessagesBlob.Name != "messages.json" {
			t.Errorf("messages blob %+v holds %d messages", mr.MessagesBlob, len(got))
		}
	}

	var failed, ok catalog.ModelResponded
	if err := evs[1].ev.DecodeData(&failed); err != nil {
		t.Fatal(err)
	}
	if err := evs[3].ev.DecodeData(&ok); err != nil {
		t.Fatal(err)
	}
	if failed.Attempt != 1 || failed.HTTPStatus != 503 || !failed.Retryable || !strings.Contains(failed.Error, "503") ||
		!strings.Contains(failed.Error, "[REDACTED]") || failed.Text != "" || failed.TextBlob != nil {
		t.Errorf("failed attempt %+v", failed)
	}
	if ok.Attempt != 2 || ok.HTTPStatus != 200 || ok.Retryable || ok.Error != "" || ok.FinishReason != "stop" ||
		ok.Usage != (catalog.TokenUsage{Prompt: 6500, Completion: 7000, Total: 13500}) || ok.Model != "test-model" ||
		ok.Scope != catalog.ScopeAgent || ok.Step != 3 || ok.CallID != "call-agent-s0003" {
		t.Errorf("successful attempt %+v", ok)
	}
	if ok.Text != "" || ok.TextBlob == nil {
		t.Fatalf("big text inline (%d bytes), blob %v", len(ok.Text), ok.TextBlob)
	}
	text, err := b.GetBlob(ctx, ok.TextBlob.Digest)
	if err != nil || string(text) != bigAnswer || ok.TextBlob.ContentType != "text/plain; charset=utf-8" {
		t.Errorf("text blob %+v: %d bytes, %v", ok.TextBlob, len(text), err)
	}
	// Every stored event validates against the catalogue.
	for _, s := range evs {
		if _, err := catalog.Decode(s.ev.Type, s.ev.Data); err != nil {
			t.Errorf("%s does not decode: %v", s.ev.Type, err)
		}
	}

	// The same call made again (a crashed agent redoing it) stores nothing new.
	srv.SetFallback(scriptedmodel.Reply{Content: bigAnswer})
	if _, err := c.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if n := len(readRun(t, b, "run-llmbus")); n != 4 {
		t.Errorf("redoing call-agent-s0003 changed the stream: %d events", n)
	}
	if rec.Failures() != 0 {
		t.Errorf("%d publish failures", rec.Failures())
	}
}

func TestSmallCallInlineAndOnePair(t *testing.T) {
	t.Setenv("VERA_LLMBUS_TEST_KEY", secretKey)
	_, b := bustest.New(t)
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "short answer", Truncate: true, TruncateAt: 5}))
	rec := llmbus.New(b, llmbus.Options{})
	c := newClient(t, srv, rec, false)
	req := llm.Request{
		Messages: []llm.Message{{Role: "user", Content: "hello"}},
		RunID:    "run-small", Scope: "judge", Round: 2, CallID: "call-judge-r2",
	}
	for range 2 {
		resp, err := c.Complete(context.Background(), req)
		if err != nil || resp.FinishReason != "length" {
			t.Fatalf("%+v %v", resp, err)
		}
	}
	evs := readRun(t, b, "run-small")
	if len(evs) != 2 {
		t.Fatalf("two calls with one CallID stored %d events, want one pair", len(evs))
	}
	var mr catalog.ModelRequested
	var ms catalog.ModelResponded
	if err := evs[0].ev.DecodeData(&mr); err != nil {
		t.Fatal(err)
	}
	if err := evs[1].ev.DecodeData(&ms); err != nil {
		t.Fatal(err)
	}
	if mr.MessagesBlob != nil || len(mr.Messages) != 1 || mr.Messages[0].Content != "hello" || mr.Round != 2 || mr.Scope != catalog.ScopeJudge {
		t.Errorf("requested %+v", mr)
	}
	if ms.TextBlob != nil || ms.Text != "short" || ms.FinishReason != "length" || ms.Round != 2 {
		t.Errorf("responded %+v", ms)
	}
	if evs[0].ev.CausationID != "" || evs[1].ev.CausationID != evs[0].ev.ID {
		t.Errorf("causation %q %q", evs[0].ev.CausationID, evs[1].ev.CausationID)
	}
	if evs[0].ev.Source != b.Events.Source {
		t.Errorf("source %q", evs[0].ev.Source)
	}
}

func TestOfflineCallsPublishNothing(t *testing.T) {
	t.Setenv("VERA_LLMBUS_TEST_KEY", secretKey)
	_, b := bustest.New(t)
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("offline")))
	rec := llmbus.New(b, llmbus.Options{})
	c := newClient(t, srv, rec, false)
	if _, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, Scope: "verifyfast"}); err != nil {
		t.Fatal(err)
	}
	if evs := readRun(t, b, ""); len(evs) != 0 {
		t.Errorf("an offline call published %d events", len(evs))
	}
}

func TestCancelledCallIsStillRecorded(t *testing.T) {
	t.Setenv("VERA_LLMBUS_TEST_KEY", secretKey)
	_, b := bustest.New(t)
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Reply{Content: "late", Delay: 30 * time.Second}))
	rec := llmbus.New(b, llmbus.Options{})
	c := newClient(t, srv, rec, false)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_ = srv.WaitForRequests(context.Background(), 1)
		cancel()
	}()
	_, err := c.Complete(ctx, llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, RunID: "run-cancel", Scope: "agent", CallID: "c1"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	evs := readRun(t, b, "run-cancel")
	if len(evs) != 2 {
		t.Fatalf("%d events", len(evs))
	}
	var ms catalog.ModelResponded
	if err := evs[1].ev.DecodeData(&ms); err != nil {
		t.Fatal(err)
	}
	if ms.Retryable || !strings.Contains(ms.Error, "cancel") || ms.HTTPStatus != 0 {
		t.Errorf("responded %+v", ms)
	}
}

func TestPublishFailureIsReported(t *testing.T) {
	t.Setenv("VERA_LLMBUS_TEST_KEY", secretKey)
	_, b := bustest.New(t)
	srv := scriptedmodel.Start(t, scriptedmodel.WithFallback(scriptedmodel.Text("fine")))
	var reported []error
	rec := llmbus.New(b, llmbus.Options{OnError: func(err error) { reported = append(reported, err) }, Logger: slog.New(slog.DiscardHandler)})
	c := newClient(t, srv, rec, false)
	// "bad run id" is not a valid run id: the events cannot be built, the
	// call itself succeeds.
	resp, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "x"}}, RunID: "bad run id", Scope: "agent"})
	if err != nil || resp.Text != "fine" {
		t.Fatalf("%+v %v", resp, err)
	}
	if rec.Failures() != 2 || len(reported) != 2 || !errors.Is(reported[0], bus.ErrInvalidEvent) {
		t.Errorf("failures %d, reported %v", rec.Failures(), reported)
	}
}

func TestConfigFromModelConfig(t *testing.T) {
	cfg := llmbus.Config(catalog.ModelConfig{BaseURL: "http://127.0.0.1:1234", Name: "qwen", APIKeyEnv: "LMSTUDIO_KEY", TimeoutMS: 90000})
	if cfg.BaseURL != "http://127.0.0.1:1234" || cfg.Model != "qwen" || cfg.APIKeyEnv != "LMSTUDIO_KEY" || cfg.Timeout != 90*time.Second {
		t.Errorf("%+v", cfg)
	}
	if llmbus.Config(catalog.ModelConfig{}).Timeout != 0 {
		t.Error("timeout_ms 0 must leave the default to llm.New")
	}
}

// TestBigReasoningAndToolArgumentsGoToBlobs: a reply whose reasoning and
// tool-call arguments are over the threshold is stored with both in
// blobs, so that the event stays small, and the blobs hold them byte for
// byte.
func TestBigReasoningAndToolArgumentsGoToBlobs(t *testing.T) {
	t.Setenv("VERA_LLMBUS_TEST_KEY", secretKey)
	_, b := bustest.New(t)
	reasoning := strings.Repeat("I weigh the sources once more. ", 2000)                          // ~62 KB
	args := `{"answer":"` + strings.Repeat("42 ", 200000) + `","evidence_used":[],"thought":"t"}` // ~600 KB
	srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Reply{NullContent: true, Reasoning: reasoning,
		ToolCalls: []scriptedmodel.ToolCall{{ID: "call_big", Name: "submit", Arguments: args}}}))
	c := newClient(t, srv, llmbus.New(b, llmbus.Options{}), true)
	if _, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{{Role: "user", Content: "go"}},
		RunID: "run-big", Scope: "agent", Step: 1, CallID: "call-agent-s0001"}); err != nil {
		t.Fatal(err)
	}
	var resp *catalog.ModelResponded
	var size int
	for _, s := range readRun(t, b, "run-big") {
		if s.ev.Type == catalog.TypeModelResponded {
			resp, size = new(catalog.ModelResponded), len(s.raw)
			if err := s.ev.DecodeData(resp); err != nil {
				t.Fatal(err)
			}
		}
	}
	if resp == nil || size > 8<<10 || resp.ReasoningBlob == nil || resp.Reasoning != "" || len(resp.ToolCalls) != 1 ||
		resp.ToolCalls[0].ArgumentsBlob == nil || resp.ToolCalls[0].Arguments != "" || resp.ToolCalls[0].ID != "call_big" {
		t.Fatalf("responded (%d bytes): %+v", size, resp)
	}
	for ref, want := range map[*catalog.BlobRef]string{resp.ReasoningBlob: strings.TrimSpace(reasoning), resp.ToolCalls[0].ArgumentsBlob: args} {
		got, err := b.GetBlob(context.Background(), ref.Digest)
		if err != nil || string(got) != want {
			t.Fatalf("blob %s: %d bytes, %v; want %d bytes", ref.Name, len(got), err, len(want))
		}
	}
}
