package logic

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/component"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

const testGoal = "Find the release date of the project described in /work."

// shellStep is an agent step running cmd, its action line in one of the
// two shapes the agent accepts.
func shellStep(n int, thought, cmd string, commandField bool) catalog.AgentStep {
	var raw []byte
	if commandField {
		raw, _ = json.Marshal(map[string]any{"tool": "shell", "command": cmd})
	} else {
		raw, _ = json.Marshal(map[string]any{"tool": "shell", "args": map[string]any{"cmd": cmd}})
	}
	return catalog.AgentStep{
		Step: n, Thought: thought, Action: string(raw), ActionTool: catalog.ActionShell, Command: cmd,
		StatusUpdate: "UNRESOLVED(looking)", ModelCallID: fmt.Sprintf("call-agent-s%04d", n),
	}
}

// scenario is a run in which the agent lists /work again and again
// (written differently each time), then notices and reads the README.
func scenario() []catalog.AgentStep {
	return []catalog.AgentStep{
		shellStep(1, "Let me see what is in the work directory.", "ls -la /work", false),
		shellStep(2, "I will list the work directory.", "ls  -la   /work", true),
		{Step: 3, Thought: "List it.", Action: "shell: ls -la /work", FormatError: "the action is not a JSON object", ModelCallID: "call-agent-s0003"},
		shellStep(4, "Listing the work directory to find the files.", "ls -la '/work'", false),
		shellStep(5, "I already tried this listing several times, but let me run it once more.", "ls -la /work # again", false),
		shellStep(6, "Listing the directory again and again has not worked; I need a different approach, so I will read the README.", "cat /work/README.md", false),
		{Step: 7, Thought: "Record what the README says.", Action: `{"tool":"notes_append","args":{"text":"README: release notes are in CHANGELOG.md"}}`, ActionTool: catalog.ActionNotesAppend, NotesText: "README: release notes are in CHANGELOG.md", ModelCallID: "call-agent-s0007"},
		shellStep(8, "Read the changelog named by the README.", "cat /work/CHANGELOG.md", false),
	}
}

func publishSteps(t *testing.T, b *bus.Bus, runID string, steps []catalog.AgentStep) []bus.Event {
	t.Helper()
	var out []bus.Event
	for _, st := range steps {
		ev, err := b.Events.New(runID, st)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func publishTask(t *testing.T, b *bus.Bus, runID string) {
	t.Helper()
	ev, err := b.Events.New(runID, catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: testGoal, WorkDir: "/tmp/w"}, SubmittedBy: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(t.Context(), ev); err != nil {
		t.Fatal(err)
	}
}

// newLive makes a Live on b (logging to the test unless cfg says
// otherwise).
func newLive(t *testing.T, b *bus.Bus, cfg Config) *Live {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = bustest.Logger(t)
	}
	l, err := New(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// startLive runs a Live on b until the returned stop is called (or the
// test ends).
func startLive(t *testing.T, b *bus.Bus, cfg Config) (stop func()) {
	t.Helper()
	return bustest.Start(t, "Live.Run", newLive(t, b, cfg).Run)
}

// waitIdle waits until the durable consumer has acknowledged every step.
func waitIdle(t *testing.T, b *bus.Bus, durable string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c, err := b.JetStream().Consumer(t.Context(), bus.StreamName, durable)
		if err == nil {
			info, err := c.Info(t.Context())
			if err == nil && info.NumPending == 0 && info.NumAckPending == 0 && info.Delivered.Consumer > 0 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("consumer %s did not catch up", durable)
}

type storedVerdict struct {
	ID, CausationID, Source string
	V                       catalog.LogicVerdict
}

func verdicts(t *testing.T, b *bus.Bus, runID string) []storedVerdict {
	t.Helper()
	var out []storedVerdict
	for rec, err := range b.Read(t.Context(), bus.ReadOptions{RunID: runID, Types: []string{catalog.TypeLogicVerdict}}) {
		if err != nil {
			t.Fatal(err)
		}
		if rec.Err != nil {
			t.Fatalf("stored verdict: %v", rec.Err)
		}
		var v catalog.LogicVerdict
		if err := rec.Event.DecodeData(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, storedVerdict{ID: rec.Event.ID, CausationID: rec.Event.CausationID, Source: rec.Event.Source, V: v})
	}
	return out
}

func verdictData(vs []storedVerdict) []catalog.LogicVerdict {
	out := make([]catalog.LogicVerdict, len(vs))
	for i, v := range vs {
		out[i] = v.V
	}
	return out
}

func byStep(vs []storedVerdict) map[int]catalog.LogicVerdict {
	m := map[int]catalog.LogicVerdict{}
	for _, v := range vs {
		m[v.V.Step] = v.V
	}
	return m
}

func stepsOf(vs []storedVerdict) []int {
	var out []int
	for _, v := range vs {
		out = append(out, v.V.Step)
	}
	return out
}

func TestLiveReportsRepetitions(t *testing.T) {
	_, b := bustest.New(t)
	publishTask(t, b, "run-1")
	evs := publishSteps(t, b, "run-1", scenario())
	startLive(t, b, Config{})
	waitIdle(t, b, DefaultDurable)

	got := verdicts(t, b, "run-1")
	if steps := stepsOf(got); !reflect.DeepEqual(steps, []int{4, 5, 6}) {
		t.Fatalf("verdicts on steps %v, want [4 5 6]: %+v", steps, got)
	}
	for _, v := range got {
		if v.Source != catalog.ComponentLogic {
			t.Errorf("source %q", v.Source)
		}
	}
	// Ids derive from the step events.
	for i, stepIdx := range []int{3, 4, 5} {
		if want := bus.DeriveID(evs[stepIdx].RunID, evs[stepIdx].ID, VerdictPurpose); got[i].ID != want || got[i].CausationID != evs[stepIdx].ID {
			t.Errorf("verdict on step %d: id %s causation %s, want %s caused by %s", got[i].V.Step, got[i].ID, got[i].CausationID, want, evs[stepIdx].ID)
		}
	}

	v := byStep(got)
	// Step 4: the third listing of /work (step 3 had a format error and
	// does not count), no awareness.
	s4 := v[4]
	if s4.ThinkingEval != 0 || s4.ActionEval != 0 || s4.Window != 2 || s4.RepeatedStep != 2 || s4.RepeatedAction != "ls  -la   /work" ||
		s4.Action != "ls -la '/work'" || s4.VerifierType != catalog.VerifierLogic || s4.DecidedBy != catalog.DecidedByLogic || len(s4.MatchedKeywords) != 0 {
		t.Errorf("step 4: %+v", s4)
	}
	if !strings.Contains(s4.ThinkingEvalReason, "steps 1, 2") || !strings.Contains(s4.ThinkingEvalReason, "repeats") {
		t.Errorf("step 4 reason: %s", s4.ThinkingEvalReason)
	}
	// Step 5: a fourth listing; the thought notices, which does not change
	// the score.
	s5 := v[5]
	if s5.ThinkingEval != 0 || s5.ActionEval != 0 || s5.RepeatedStep != 4 || len(s5.MatchedKeywords) == 0 {
		t.Errorf("step 5: %+v", s5)
	}
	// Step 6: aware, and a different action.
	s6 := v[6]
	if s6.ThinkingEval != 2 || s6.ActionEval != 1 || s6.RepeatedAction != "" || s6.RepeatedStep != 0 || s6.Action != "cat /work/README.md" {
		t.Errorf("step 6: %+v", s6)
	}
	if !contains(s6.MatchedKeywords, "different approach") || !contains(s6.MatchedKeywords, "again and again") {
		t.Errorf("step 6 keywords %v patterns %v", s6.MatchedKeywords, s6.MatchedPatterns)
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func TestLiveWindowIsConfigurable(t *testing.T) {
	tests := []struct {
		window int
		steps  []int
		scores []int
	}{
		{2, []int{2, 4, 5, 6, 7, 8}, []int{0, 0, 0, 2, 1, 1}},
		{3, []int{4, 5, 6}, []int{0, 0, 2}},
		{4, []int{5, 6}, []int{0, 2}},
		{6, nil, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint("window ", tt.window), func(t *testing.T) {
			_, b := bustest.New(t)
			publishSteps(t, b, "run-w", scenario())
			startLive(t, b, Config{Window: tt.window})
			waitIdle(t, b, DefaultDurable)
			got := verdicts(t, b, "run-w")
			var scores []int
			for _, v := range got {
				scores = append(scores, v.V.ThinkingEval)
				if v.V.Window != tt.window-1 {
					t.Errorf("step %d: window %d, want %d", v.V.Step, v.V.Window, tt.window-1)
				}
			}
			if steps := stepsOf(got); !reflect.DeepEqual(steps, tt.steps) || !reflect.DeepEqual(scores, tt.scores) {
				t.Errorf("verdicts on steps %v scored %v, want %v scored %v", steps, scores, tt.steps, tt.scores)
			}
		})
	}
	if _, err := New(&bus.Bus{}, Config{Window: 1}); err == nil {
		t.Error("window 1 should be refused")
	}
}

// TestLiveRestartAndReplay checks that verdicts do not depend on when the
// verifier was stopped: a run verified across two restarts gets the
// verdicts of a run verified in one go, and replaying the whole stream
// through a fresh consumer publishes nothing twice.
func TestLiveRestartAndReplay(t *testing.T) {
	_, b := bustest.New(t)
	steps := scenario()

	stop := startLive(t, b, Config{})
	publishSteps(t, b, "straight", steps)
	waitIdle(t, b, DefaultDurable)
	stop()
	want := verdictData(verdicts(t, b, "straight"))
	if len(want) != 3 {
		t.Fatalf("uninterrupted run: %d verdicts, want 3", len(want))
	}

	// Stop after step 2 and after step 4: the window of steps 4 and 5
	// spans a restart, and the verifier that judges them never saw steps
	// 1 and 2 delivered.
	for _, part := range [][]catalog.AgentStep{steps[:2], steps[2:4], steps[4:]} {
		publishSteps(t, b, "restarted", part)
		stop := startLive(t, b, Config{})
		waitIdle(t, b, DefaultDurable)
		stop()
	}
	if got := verdictData(verdicts(t, b, "restarted")); !reflect.DeepEqual(got, want) {
		t.Errorf("verdicts across restarts differ:\n got %+v\nwant %+v", got, want)
	}

	// Replay: a new consumer reads every step of both runs again.
	before := append(verdicts(t, b, "straight"), verdicts(t, b, "restarted")...)
	if err := b.JetStream().DeleteConsumer(t.Context(), bus.StreamName, DefaultDurable); err != nil {
		t.Fatal(err)
	}
	stop = startLive(t, b, Config{})
	waitIdle(t, b, DefaultDurable)
	stop()
	after := append(verdicts(t, b, "straight"), verdicts(t, b, "restarted")...)
	if !reflect.DeepEqual(after, before) {
		t.Errorf("replay changed the verdicts:\nbefore %+v\n after %+v", before, after)
	}
}

// TestLiveHandlesStepsInAnyOrder feeds the handler the stored steps out of
// stream order (as redeliveries after errors, or several instances, would)
// and expects the verdicts of in-order handling.
func TestLiveHandlesStepsInAnyOrder(t *testing.T) {
	_, b := bustest.New(t)
	steps := scenario()
	publishSteps(t, b, "in-order", steps)
	stop := startLive(t, b, Config{})
	waitIdle(t, b, DefaultDurable)
	stop()
	want := verdictData(verdicts(t, b, "in-order"))

	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 4 {
		runID := fmt.Sprint("shuffled-", round)
		publishSteps(t, b, runID, steps)
		var msgs []*bus.Message
		for rec, err := range b.Read(t.Context(), bus.ReadOptions{RunID: runID}) {
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, &bus.Message{Event: rec.Event, Subject: rec.Subject, Sequence: rec.Sequence, Raw: rec.Raw})
		}
		if len(msgs) != len(steps) {
			t.Fatalf("%d stored steps, want %d", len(msgs), len(steps))
		}
		l := newLive(t, b, Config{Durable: "direct", Logger: discardLogger()})
		order := rng.Perm(len(msgs))
		if round == 0 {
			// In order, but with steps 3 and 4 handled by "another
			// instance": a gap in step numbers.
			order = []int{0, 1, 4, 5, 6, 7}
		}
		for _, i := range order {
			if err := l.handle(t.Context(), msgs[i]); err != nil {
				t.Fatalf("round %d: step %d: %v", round, i+1, err)
			}
		}
		// Each step once more (a redelivery) changes nothing.
		for _, i := range order {
			if err := l.handle(t.Context(), msgs[i]); err != nil {
				t.Fatal(err)
			}
		}
		got := verdicts(t, b, runID)
		sortByStep(got)
		w := want
		if round == 0 {
			w = want[1:] // step 4 was not handled here
		}
		if !reflect.DeepEqual(verdictData(got), w) {
			t.Errorf("round %d (order %v):\n got %+v\nwant %+v", round, order, verdictData(got), w)
		}
	}

	// Other types are ignored.
	other, err := b.Events.New("in-order", catalog.NotesAppended{Step: 1, Author: "agent", Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	l := newLive(t, b, Config{Logger: discardLogger()})
	if err := l.handle(t.Context(), &bus.Message{Event: other, Sequence: 1}); err != nil {
		t.Errorf("another type: %v", err)
	}
}

func sortByStep(vs []storedVerdict) {
	for i := 1; i < len(vs); i++ {
		for j := i; j > 0 && vs[j].V.Step < vs[j-1].V.Step; j-- {
			vs[j], vs[j-1] = vs[j-1], vs[j]
		}
	}
}

func TestLiveDeadLettersMalformedSteps(t *testing.T) {
	_, b := bustest.New(t)
	for _, data := range []string{`{"step": "seven", "thought": "x"}`, `{"step": 0, "action": "{}"}`, `[1, 2]`} {
		ev, err := b.Events.NewRaw("run-bad", catalog.TypeAgentStep, json.RawMessage(data))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
	}
	steps := scenario()
	for i := range steps {
		steps[i].Step += 10 // the good steps keep their numbering after the bad ones
	}
	publishSteps(t, b, "run-bad", steps)
	startLive(t, b, Config{})
	waitIdle(t, b, DefaultDurable)

	if got := stepsOf(verdicts(t, b, "run-bad")); !reflect.DeepEqual(got, []int{14, 15, 16}) {
		t.Errorf("verdicts on steps %v, want [14 15 16]", got)
	}
	s, err := b.JetStream().Stream(t.Context(), bus.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 3 {
		t.Fatalf("%d dead letters, want 3", info.State.Msgs)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		var dl bus.DeadLetter
		if err := json.Unmarshal(m.Data, &dl); err != nil {
			t.Fatal(err)
		}
		// The catalogue's schema rejects each before Live sees it.
		if dl.Consumer != DefaultDurable || dl.RunID != "run-bad" || !strings.HasPrefix(dl.Reason, "rejected: ") {
			t.Errorf("dead letter %+v", dl)
		}
	}
}

func TestLiveHybridAsksTheJudgeOncePerStep(t *testing.T) {
	_, b := bustest.New(t)
	srv := scriptedmodel.Start(t, scriptedmodel.WithReplies(scriptedmodel.Text(
		`{"thinking_eval": 1, "action_eval": 1, "reason": "It reads the README without noticing it listed /work twice."}`)))
	hybrid := &Hybrid{Judge: newHTTPJudge(t, srv), Model: "judge-model", Logger: discardLogger()}

	publishTask(t, b, "run-h")
	evs := publishSteps(t, b, "run-h", []catalog.AgentStep{
		shellStep(1, "List the work directory.", "ls /work", false),
		shellStep(2, "List the work directory.", "ls  /work", false),
		// A weak cue only ("previously"): logic is unsure between 1 and 2.
		shellStep(3, "I previously listed the directory; now I read the README.", "cat /work/README.md", false),
		shellStep(4, "Read the changelog.", "cat /work/CHANGELOG.md", false),
	})
	stop := startLive(t, b, Config{Window: 3, Hybrid: hybrid})
	waitIdle(t, b, DefaultDurable)
	stop()

	got := verdicts(t, b, "run-h")
	if len(got) != 1 || got[0].V.Step != 3 {
		t.Fatalf("verdicts %+v, want one on step 3", got)
	}
	v := got[0].V
	if v.ThinkingEval != 1 || v.ActionEval != 1 || v.DecidedBy != catalog.DecidedByLLM || v.VerifierType != catalog.VerifierHybrid ||
		v.ModelCallID != "logic-"+evs[2].ID+"-1" || !strings.Contains(v.ThinkingEvalReason, "without noticing") {
		t.Errorf("verdict %+v", v)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d judge calls, want 1", len(reqs))
	}
	user := reqs[0].Messages[1].Text
	for _, want := range []string{testGoal, "Step 1", "Step 2", "ls  /work", "I previously listed", "cat /work/README.md"} {
		if !strings.Contains(user, want) {
			t.Errorf("judge prompt lacks %q:\n%s", want, user)
		}
	}

	// A replay neither calls the judge again nor publishes again.
	if err := b.JetStream().DeleteConsumer(t.Context(), bus.StreamName, DefaultDurable); err != nil {
		t.Fatal(err)
	}
	stop = startLive(t, b, Config{Window: 3, Hybrid: hybrid})
	waitIdle(t, b, DefaultDurable)
	stop()
	if n := srv.Count(); n != 1 {
		t.Errorf("%d judge calls after the replay, want 1", n)
	}
	if again := verdicts(t, b, "run-h"); !reflect.DeepEqual(again, got) {
		t.Errorf("replay changed the verdicts: %+v", again)
	}
}

func TestNewChecksAndShape(t *testing.T) {
	if _, err := New(nil, Config{}); err == nil {
		t.Error("New without a bus succeeded")
	}
	if _, err := New(&bus.Bus{}, Config{Hybrid: &Hybrid{}}); err == nil {
		t.Error("a Hybrid without a judge was accepted")
	}
	var c Config
	if err := c.SetDefaults(); err != nil {
		t.Fatal(err)
	}
	if c.Window != DefaultWindow || c.Durable != DefaultDurable || c.Concurrency != DefaultConcurrency ||
		c.MaxRuns != DefaultMaxRuns || c.Source != catalog.ComponentLogic || c.Logger == nil {
		t.Errorf("defaults: %+v", c)
	}
	if DefaultDurable != component.Durable(catalog.ComponentLogic, "") {
		t.Errorf("DefaultDurable %q is not the convention's name", DefaultDurable)
	}
	cfg := Config{Window: 4}
	l, err := New(&bus.Bus{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if cfg != (Config{Window: 4}) {
		t.Errorf("New changed the caller's Config: %+v", cfg)
	}
	if l.Name() != catalog.ComponentLogic || !reflect.DeepEqual(l.Consumes(), catalog.ConsumedBy(catalog.ComponentLogic)) ||
		!reflect.DeepEqual(l.Produces(), catalog.ProducedBy(catalog.ComponentLogic)) {
		t.Errorf("name %q consumes %v produces %v", l.Name(), l.Consumes(), l.Produces())
	}
	if !contains(l.Consumes(), catalog.TypeAgentStep) || !contains(l.Produces(), catalog.TypeLogicVerdict) {
		t.Errorf("consumes %v produces %v", l.Consumes(), l.Produces())
	}
}

// TestLiveEditSteps: edit steps count as actions by their file operation.
// Distinct edits of one file (each a str_replace, each summarised "edit
// str_replace /work/a.py") are no repetition; the same view three times
// is, and the verdict shows the edits' summaries.
func TestLiveEditSteps(t *testing.T) {
	_, b := bustest.New(t)
	publishTask(t, b, "run-edit")
	edit := func(n int, thought string, e catalog.EditArgs) catalog.AgentStep {
		raw, _ := json.Marshal(map[string]any{"tool": "edit", "args": e})
		return catalog.AgentStep{Step: n, Thought: thought, Action: string(raw), ActionTool: catalog.ActionEdit, Edit: &e,
			Command: "edit " + string(e.Op) + " " + e.Path, StatusUpdate: "UNRESOLVED(fixing)", ModelCallID: fmt.Sprintf("call-agent-s%04d", n)}
	}
	repl := func(n int, old, new string) catalog.AgentStep {
		return edit(n, "Fix the parser.", catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/a.py", OldStr: old, NewStr: new})
	}
	view := catalog.EditArgs{Op: catalog.EditView, Path: "/work/a.py", ViewRange: []int{1, 40}}
	publishSteps(t, b, "run-edit", []catalog.AgentStep{
		repl(1, "a = 1", "a = 2"), repl(2, "b = 1", "b = 2"), repl(3, "c = 1", "c = 2"), repl(4, "d = 1", "d = 2"),
		edit(5, "Look at the file.", view), edit(6, "Look at the file.", view), edit(7, "Look at the file.", view),
	})
	startLive(t, b, Config{})
	waitIdle(t, b, DefaultDurable)

	got := verdicts(t, b, "run-edit")
	if steps := stepsOf(got); !reflect.DeepEqual(steps, []int{7}) {
		t.Fatalf("verdicts on steps %v, want [7]: %+v", steps, got)
	}
	v := got[0].V
	if v.ActionEval != 0 || v.RepeatedStep != 6 || v.Action != "edit view /work/a.py" || v.RepeatedAction != "edit view /work/a.py" {
		t.Errorf("step 7: %+v", v)
	}
}
