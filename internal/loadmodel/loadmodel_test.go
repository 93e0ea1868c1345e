package loadmodel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
)

// agentPrompt is the user message of step done+1, built by the agent's
// own context assembly.
func agentPrompt(done int, feedback string) string {
	c := protocol.Context{Task: "load", Feedback: feedback}
	for k := 1; k <= done; k++ {
		c.Tail = append(c.Tail, protocol.TailEntry{Step: k, Action: "x", Observation: fmt.Sprintf("step %d\n[evidence ev_%04d]", k, k)})
	}
	msgs := protocol.Build(c, protocol.Options{})
	return msgs[len(msgs)-1].Content
}

// TestScriptThroughTheRealClient: the agent's client (openai-go, streamed
// and not) gets S-1 shell commands then a RESOLVED submit, each reply
// parsing cleanly with the agent's parser.
func TestScriptThroughTheRealClient(t *testing.T) {
	s, err := Start(Config{Steps: 4, Latency: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, stream := range []bool{false, true} {
		c, err := llm.New(llm.Config{BaseURL: s.URL(), Model: "load", Stream: stream, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		for done := 0; done < 4; done++ {
			began := time.Now()
			resp, err := c.Complete(context.Background(), llm.Request{Messages: []llm.Message{
				{Role: "system", Content: protocol.SystemPrompt()}, {Role: "user", Content: agentPrompt(done, "")}}})
			if err != nil {
				t.Fatalf("stream=%v step %d: %v", stream, done+1, err)
			}
			if time.Since(began) < 20*time.Millisecond {
				t.Errorf("stream=%v step %d: reply came before the latency", stream, done+1)
			}
			turn, errs := protocol.Parse(resp.Text)
			if len(errs) > 0 {
				t.Fatalf("stream=%v step %d: format errors %v in %q", stream, done+1, errs, resp.Text)
			}
			switch step := done + 1; {
			case step < 4:
				want := fmt.Sprintf(`echo "step %d" | tee -a /work/load.txt`, step)
				if turn.Action.Tool != catalog.ActionShell || turn.Action.Cmd != want {
					t.Errorf("step %d: %+v, want shell %q", step, turn.Action, want)
				}
			default:
				if turn.Action.Tool != catalog.ActionSubmit || turn.StatusUpdate.State != protocol.StateResolved ||
					strings.Join(turn.EvidenceUsed, ",") != "ev_0001,ev_0002,ev_0003" {
					t.Errorf("step 4: %+v", turn)
				}
			}
		}
		c.Close()
	}
	if s.Replies() != 8 || s.Refused() != 0 {
		t.Errorf("replies %d refused %d", s.Replies(), s.Refused())
	}
}

func TestNotesGateAndOtherCallers(t *testing.T) {
	r, err := Reply(5, []Message{{Role: "user", Content: agentPrompt(3, "Update notes.md (notes_append) before running more tools: notes are due every 3 steps.")}})
	if err != nil {
		t.Fatal(err)
	}
	if turn, errs := protocol.Parse(r); len(errs) > 0 || turn.Action.Tool != catalog.ActionNotesAppend {
		t.Errorf("notes gate: %+v %v", turn, errs)
	}
	for _, p := range []string{"AUDIT-DECOMPOSE round 1\n\nPRIMARY TASK:\nx", "AUDIT-CHECK r1-c1 step 1 of 4\n", "AUDIT-JUDGE round 2\n"} {
		r, err := Reply(4, []Message{{Role: "user", Content: p}})
		var v map[string]any
		if err != nil || json.Unmarshal([]byte(r), &v) != nil {
			t.Errorf("%q: %q, %v", p, r, err)
		}
	}
	if _, err := Reply(4, []Message{{Role: "user", Content: "What is 2+2?"}}); !errors.Is(err, ErrNotScripted) {
		t.Errorf("unknown prompt: %v", err)
	}

	s, err := Start(Config{Steps: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, err := http.Post(s.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error struct{ Message, Code string }
	}
	json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if resp.StatusCode != 400 || e.Error.Code != "not_scripted" || !strings.Contains(e.Error.Message, "load script") {
		t.Errorf("unknown prompt: %d %+v", resp.StatusCode, e)
	}
	resp, err = http.Get(s.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct{ Data []struct{ ID string } }
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if len(models.Data) != 1 || models.Data[0].ID != DefaultModel {
		t.Errorf("models: %+v", models)
	}
	if _, err := Start(Config{Steps: 0}); err == nil {
		t.Error("steps 0 accepted")
	}
}
