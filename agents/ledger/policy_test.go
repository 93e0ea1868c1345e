package ledger

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

const plainTask = "What is the release date of Python 3.13.0? Quote the official source."

// quiet turns off the rules a test is not about, so that each test sees
// only its own rule.
var quiet = Policy{NotesInterval: -1, PreToolNudgeAfter: -1, ReminderInterval: -1, StagnationLimit: -1}

func TestDefaults(t *testing.T) {
	p := DefaultPolicy()
	if p.NotesInterval != 3 || p.StagnationLimit != 3 || p.FailureEscalationLimit != 2 || p.QueryFamilyLimit != 3 ||
		p.LengthNudgeAfter != 2 || p.FinalizationStopAfter != 3 || p.DomainShiftAfter != 3 || p.PreToolNudgeAfter != 2 ||
		p.ReminderAfter != 1 || p.ReminderInterval != 10 || p.NegativeClaimBudget != 10 ||
		p.MinOfficialDomains != 2 || p.MinIndependentDomains != 1 {
		t.Fatalf("defaults: %+v", p)
	}
	if DefaultPolicy().normalized().NotesInterval != 3 {
		t.Fatal("normalized is not idempotent")
	}
	off := Policy{NotesInterval: -1}.normalized()
	if off.NotesInterval != 0 {
		t.Fatalf("a negative limit is not off: %d", off.NotesInterval)
	}
	cfg := catalog.PolicyConfig{NotesInterval: 5, QueryFamilyLimit: 2}
	got := Policy{NotesInterval: 4, StagnationLimit: 7}.WithConfig(cfg).normalized()
	if got.NotesInterval != 5 || got.QueryFamilyLimit != 2 || got.StagnationLimit != 7 || got.FailureEscalationLimit != 2 {
		t.Fatalf("WithConfig: %+v", got)
	}
	s := NewState(Policy{StagnationLimit: 7})
	s.Apply(catalog.RunStarted{Config: catalog.RunConfig{Task: "x", Policy: cfg}})
	if p := s.Policy(); p.NotesInterval != 5 || p.StagnationLimit != 7 {
		t.Fatalf("State.Policy: %+v", p)
	}
}

func testPreToolNudge(t *testing.T) *sim {
	p := quiet
	p.PreToolNudgeAfter = 0 // default 2
	m := newSim(t, p, plainTask, catalog.PolicyConfig{})
	m.expectRule(m.turn(thinking("UNRESOLVED(planning)")), catalog.RulePreToolNudge, false)
	ev := m.expectRule(m.turn(thinking("UNRESOLVED(planning)")), catalog.RulePreToolNudge, true)
	if ev.Count != 2 || ev.Limit != 2 || ev.Effect != catalog.EffectNudge || ev.Step != 2 || ev.Message == "" {
		t.Fatalf("pre_tool_nudge: %+v", ev)
	}
	m.expectRule(m.turn(submit("Oct 7, 2024")), catalog.RulePreToolNudge, true) // still no tool
	m.expectRule(m.turn(shell("curl -s https://www.python.org/", "<html>")), catalog.RulePreToolNudge, false)
	m.expectRule(m.turn(thinking("UNRESOLVED(x)")), catalog.RulePreToolNudge, false) // a tool has run
	return m
}

func TestPreToolNudge(t *testing.T) { testPreToolNudge(t) }

func testLengthNudge(t *testing.T) *sim {
	m := newSim(t, quiet, plainTask, catalog.PolicyConfig{})
	cut := action{formatErr: "reply cut off", finish: "length"}
	m.expectRule(m.turn(cut), catalog.RuleLengthNudge, false)
	ev := m.expectRule(m.turn(cut), catalog.RuleLengthNudge, true)
	if ev.Count != 2 || ev.Limit != 2 || !strings.Contains(ev.Message, "finish_reason=length") {
		t.Fatalf("length_nudge: %+v", ev)
	}
	m.expectRule(m.turn(cut), catalog.RuleLengthNudge, true)
	m.expectRule(m.turn(shell("ls /work", "a")), catalog.RuleLengthNudge, false)
	m.expectRule(m.turn(cut), catalog.RuleLengthNudge, false) // the streak restarted
	// A retried attempt with an error, or a verifier's call, does not count.
	m.apply(catalog.ModelResponded{CallID: "call-agent-s0099", Scope: catalog.ScopeAgent, Error: "503", Retryable: true, FinishReason: "length"})
	m.apply(catalog.ModelResponded{CallID: "call-verifier-1", Scope: catalog.ScopeVerifier, FinishReason: "length"})
	if m.st.lengthStreak != 1 {
		t.Fatalf("length streak %d", m.st.lengthStreak)
	}
	return m
}

func TestLengthNudge(t *testing.T) { testLengthNudge(t) }

func testReminder(t *testing.T) *sim {
	p := quiet
	p.ReminderAfter = 2
	p.ReminderInterval = 5
	m := newSim(t, p, plainTask, catalog.PolicyConfig{})
	bad := action{formatErr: "missing STATUS_UPDATE"}
	m.expectRule(m.turn(bad), catalog.RuleReminder, false)
	ev := m.expectRule(m.turn(bad), catalog.RuleReminder, true)
	if ev.Count != 2 || ev.Limit != 2 || ev.Details["kind"] != "format" {
		t.Fatalf("reminder: %+v", ev)
	}
	m.expectRule(m.turn(shell("ls", "a")), catalog.RuleReminder, false) // step 3
	m.expectRule(m.turn(shell("ls", "a")), catalog.RuleReminder, false) // step 4
	ev = m.expectRule(m.turn(shell("ls", "a")), catalog.RuleReminder, true)
	if ev.Step != 5 || ev.Details["kind"] != "periodic" || !strings.Contains(ev.Message, "Python 3.13.0") {
		t.Fatalf("periodic reminder: %+v", ev)
	}
	// The default: one format error is enough.
	d := newSim(t, Policy{}, plainTask, catalog.PolicyConfig{})
	d.expectRule(d.turn(bad), catalog.RuleReminder, true)
	return m
}

func TestReminder(t *testing.T) { testReminder(t) }

func testStagnation(t *testing.T) *sim {
	p := quiet
	p.StagnationLimit = 0 // default 3
	m := newSim(t, p, plainTask, catalog.PolicyConfig{})
	m.expectRule(m.turn(thinking("UNRESOLVED(need source)")), catalog.RuleStagnation, false)
	m.expectRule(m.turn(thinking("UNRESOLVED(need source)")), catalog.RuleStagnation, false)
	ev := m.expectRule(m.turn(thinking("UNRESOLVED(need source)")), catalog.RuleStagnation, true)
	if ev.Effect != catalog.EffectForceTool || ev.Count != 3 || ev.Limit != 3 || !Summarize([]catalog.PolicyTriggered{ev}).ForceTool {
		t.Fatalf("stagnation: %+v", ev)
	}
	// A tool call with new evidence resets the count…
	m.expectRule(m.turn(shell("curl -s https://www.python.org/downloads/", "Python 3.13.0 Oct. 7, 2024")), catalog.RuleStagnation, true)
	m.expectRule(m.turn(thinking("UNRESOLVED(x)")), catalog.RuleStagnation, false)
	m.expectRule(m.turn(thinking("UNRESOLVED(x)")), catalog.RuleStagnation, false)
	// …but the same output again is not new evidence.
	m.expectRule(m.turn(shell("curl -s https://www.python.org/downloads/", "Python 3.13.0 Oct. 7, 2024")), catalog.RuleStagnation, true)
	m.expectRule(m.turn(thinking("UNRESOLVED(x)")), catalog.RuleStagnation, true)
	// A status other than UNRESOLVED resets it; a format error is neutral.
	m.expectRule(m.turn(thinking("IN_PROGRESS")), catalog.RuleStagnation, false)
	m.expectRule(m.turn(thinking("UNRESOLVED(x)")), catalog.RuleStagnation, false)
	m.expectRule(m.turn(action{formatErr: "bad"}), catalog.RuleStagnation, false)
	m.expectRule(m.turn(thinking("UNRESOLVED(x)")), catalog.RuleStagnation, false)
	m.expectRule(m.turn(thinking("UNRESOLVED(x)")), catalog.RuleStagnation, true)
	return m
}

func TestStagnation(t *testing.T) { testStagnation(t) }

func testFailureEscalation(t *testing.T) *sim {
	m := newSim(t, quiet, plainTask, catalog.PolicyConfig{})
	forbidden := "curl: (22) The requested URL returned error: 403"
	m.expectRule(m.turn(failing("curl -fsS https://a.example/x", 22, forbidden)), catalog.RuleFailureEscalation, false)
	m.expectRule(m.turn(failing("curl -fsS https://a.example/y", 22, forbidden)), catalog.RuleFailureEscalation, false)
	ev := m.expectRule(m.turn(notes("403 twice")), catalog.RuleFailureEscalation, true)
	if ev.FailureType != "http_403" || ev.Count != 2 || ev.Limit != 2 || !strings.Contains(ev.Message, "HTTP 403") {
		t.Fatalf("failure_escalation: %+v", ev)
	}
	if c := m.expectRule(m.decisions[3], catalog.RuleChoice, true); c.Details["for"] != catalog.RuleFailureEscalation || len(c.Choices) != 3 {
		t.Fatalf("choice: %+v", c)
	}
	m.expectRule(m.turn(notes("again")), catalog.RuleFailureEscalation, false) // no new result
	// A different failure type restarts the count; a success resets it.
	m.turn(failing("pdftotext a.pdf", 127, "sh: pdftotext: command not found"))
	m.expectRule(m.turn(failing("curl -fsS https://a.example/z", 22, forbidden)), catalog.RuleFailureEscalation, false)
	m.turn(shell("echo ok", "ok"))
	m.expectRule(m.turn(failing("curl -fsS https://a.example/w", 22, forbidden)), catalog.RuleFailureEscalation, false)
	m.expectRule(m.turn(notes("x")), catalog.RuleFailureEscalation, false)
	return m
}

func TestFailureEscalation(t *testing.T) { testFailureEscalation(t) }

func testNotesGate(t *testing.T) *sim {
	p := quiet
	p.NotesInterval = 0 // default 3
	m := newSim(t, p, plainTask, catalog.PolicyConfig{})
	m.expectRule(m.turn(shell("ls /work", "a")), catalog.RuleNotesGate, false)
	m.expectRule(m.turn(shell("ls /input", "b")), catalog.RuleNotesGate, false)
	cmd := "curl -sL https://peps.python.org/pep-0719/"
	ev := m.expectRule(m.turn(shell(cmd, "c")), catalog.RuleNotesGate, true) // step 3
	if ev.Effect != catalog.EffectBlock || ev.BlockedCommand != cmd || ev.Limit != 3 || ev.Count != 3 {
		t.Fatalf("notes_gate: %+v", ev)
	}
	if m.st.ToolCalls() != 2 {
		t.Fatalf("the blocked command ran: %d tool calls", m.st.ToolCalls())
	}
	m.expectRule(m.turn(notes("- PEP 719 is the schedule")), catalog.RuleNotesGate, false) // step 4 appends
	m.expectRule(m.turn(shell(cmd, "c")), catalog.RuleNotesGate, false)                    // step 5
	m.expectRule(m.turn(shell("ls", "d")), catalog.RuleNotesGate, false)                   // step 6: notes at 4 are in the window
	m.expectRule(m.turn(shell("ls", "e")), catalog.RuleNotesGate, false)                   // step 7
	m.expectRule(m.turn(shell("ls", "f")), catalog.RuleNotesGate, false)                   // step 8
	m.expectRule(m.turn(shell("ls", "g")), catalog.RuleNotesGate, true)                    // step 9: none in 7..9
	m.expectRule(m.turn(shell("ls", "g")), catalog.RuleNotesGate, true)                    // step 10: still held
	m.expectRule(m.turn(submit("x")), catalog.RuleNotesGate, false)                        // only tools are held
	// System notes (evidence ids) do not count.
	m.apply(catalog.NotesAppended{Step: 12, Author: catalog.AuthorSystem, Text: "ev_0009"})
	m.expectRule(m.turn(shell("ls", "h")), catalog.RuleNotesGate, true) // step 12
	return m
}

func TestNotesGate(t *testing.T) { testNotesGate(t) }

func testQueryMutation(t *testing.T) *sim {
	m := newSim(t, quiet, plainTask, catalog.PolicyConfig{})
	qs := []string{
		`curl -s "https://html.duckduckgo.com/html/?q=python+3.13.0+release+date"`,
		`curl -s "https://www.bing.com/search?q=Python+3.13.0+released+date"`,
		`wget -qO- "https://lite.duckduckgo.com/lite/?q=release%20date%20of%20python%203.13.0"`,
	}
	for i, q := range qs {
		m.expectRule(m.turn(shell(q, "results")), catalog.RuleQueryMutationRequired, false)
		line, ok := m.st.QueryLine(m.reqOf(i + 1))
		if !ok || line.FamilyCount != i+1 || line.MutationRequired != (i == 2) || line.Family != "3.13.0 dat python releas" {
			t.Fatalf("query line %d: %+v %v", i+1, line, ok)
		}
	}
	again := `curl -s "https://duckduckgo.com/html/?q=%22Python+3.13.0%22+release+date"`
	ts := m.turn(shell(again, "results"))
	ev := m.expectRule(ts, catalog.RuleQueryMutationRequired, true)
	if ev.Effect != catalog.EffectBlock || ev.Count != 3 || ev.Limit != 3 || ev.QueryFamily != "3.13.0 dat python releas" || ev.BlockedCommand != again {
		t.Fatalf("query_mutation_required: %+v", ev)
	}
	choice := m.expectRule(ts, catalog.RuleChoice, true)
	if choice.Details["for"] != catalog.RuleQueryMutationRequired || !strings.HasPrefix(choice.Choices[1], "fetch:") {
		t.Fatalf("choice: %+v", choice)
	}
	if _, ok := m.st.QueryLine(m.reqOf(4)); ok || m.st.queries.Count(ev.QueryFamily) != 3 {
		t.Fatal("a blocked query was counted")
	}
	// The next step fetches: the option matched; a mutated query runs.
	ts = m.turn(shell("curl -sL https://www.python.org/downloads/release/python-3130/", "Release Date: Oct. 7, 2024"))
	if cm := m.expectRule(ts, catalog.RuleChoiceMatched, true); cm.Matched != choice.Choices[1] {
		t.Fatalf("choice_matched: %+v", cm)
	}
	m.expectRule(m.turn(shell(`curl -s "https://html.duckduckgo.com/html/?q=python+3.13.0+release+date+site:python.org"`, "r")), catalog.RuleQueryMutationRequired, false)
	// The choice is spent after one step.
	m.expectRule(m.turn(shell("curl -s https://docs.python.org/3.13/whatsnew/", "w")), catalog.RuleChoiceMatched, false)
	return m
}

func (m *sim) reqOf(step int) string { return fmt.Sprintf("req-s%04d", step) }

func TestQueryMutation(t *testing.T) { testQueryMutation(t) }

func testFinalizationStop(t *testing.T) *sim {
	m := newSim(t, quiet, plainTask, catalog.PolicyConfig{})
	write := "cat > /work/output/final_report.md <<'EOF'\n# Report\nEOF"
	m.expectRule(m.turn(shell(write, "")), catalog.RuleFinalizationStop, false)
	m.expectRule(m.turn(shell(`echo "- scratch" > /work/scratch.txt`, "")), catalog.RuleFinalizationStop, false)
	m.expectRule(m.turn(shell(write, "")), catalog.RuleFinalizationStop, false)
	ts := m.turn(shell(write, ""))
	ev := m.expectRule(ts, catalog.RuleFinalizationStop, true)
	if ev.Effect != catalog.EffectStop || ev.Count != 3 || ev.Limit != 3 || ev.BlockedCommand != write || ev.Details["path"] != "/work/output/final_report.md" {
		t.Fatalf("finalization_stop: %+v", ev)
	}
	if e := Summarize(ts); !e.Stop || !e.Block {
		t.Fatalf("effects: %+v", e)
	}
	// A submit resets the count.
	r := newSim(t, quiet, plainTask, catalog.PolicyConfig{})
	r.turn(shell(write, ""))
	r.turn(shell(write, ""))
	r.turn(submit("Oct 7, 2024"))
	r.expectRule(r.turn(shell(write, "")), catalog.RuleFinalizationStop, false)
	return m
}

func TestFinalizationStop(t *testing.T) { testFinalizationStop(t) }

func testRepetitionNudge(t *testing.T) *sim {
	m := newSim(t, quiet, plainTask, catalog.PolicyConfig{})
	m.turn(shell("curl -s https://a.example/", "a"))
	m.turn(shell("curl -s https://a.example/", "a"))
	m.apply(catalog.LogicVerdict{Step: 1, ThinkingEval: 1, ActionEval: 1})
	m.expectRule(m.turn(notes("x")), catalog.RuleRepetitionNudge, false)
	m.apply(catalog.LogicVerdict{Step: 2, ThinkingEval: 0, RepeatedStep: 1, RepeatedAction: "curl -s https://a.example/"})
	m.apply(catalog.LogicVerdict{Step: 2, ThinkingEval: 0, RepeatedStep: 1}) // redelivered
	ev := m.expectRule(m.turn(notes("y")), catalog.RuleRepetitionNudge, true)
	if ev.LogicVerdictStep != 2 || ev.Message != "Step 2 repeated the action of step 1 without acknowledging it. Try a different approach." {
		t.Fatalf("repetition_nudge: %+v", ev)
	}
	m.expectRule(m.turn(notes("z")), catalog.RuleRepetitionNudge, false) // once per verdict
	return m
}

func TestRepetitionNudge(t *testing.T) { testRepetitionNudge(t) }

const negTask = "Has Acme launched Widget 2 yet? Answer with the official source."

func testNegativeClaim(t *testing.T) *sim {
	m := newSim(t, quiet, negTask, catalog.PolicyConfig{})
	ev := m.expectRule(m.turn(thinking("UNRESOLVED(start)")), catalog.RuleNegativeClaim, true)
	want := []string{
		"Check at least 2 official (vendor-owned) domains (owned by Acme)",
		"Check at least 1 independent domain",
		"Enumerate the candidate set from a cited source before concluding none",
	}
	if ev.Step != 1 || ev.Effect != catalog.EffectNudge || !slices.Equal(ev.Constraints, want) ||
		ev.Message != "OPEN CONSTRAINTS:\n- "+strings.Join(want, "\n- ") {
		t.Fatalf("negative_claim: %+v", ev)
	}
	if !slices.Equal(m.st.OpenConstraints(), want) {
		t.Fatalf("OpenConstraints = %q", m.st.OpenConstraints())
	}
	m.expectRule(m.turn(thinking("UNRESOLVED(x)")), catalog.RuleNegativeClaim, false) // once
	// A negative answer without coverage is blocked.
	ts := m.turn(submit("No official announcement: Acme has not launched Widget 2."))
	blk := m.expectRule(ts, catalog.RuleNegativeClaim, true)
	if blk.Effect != catalog.EffectBlock || !strings.Contains(blk.Message, "official domains: 0 of 2") {
		t.Fatalf("negative_claim block: %+v", blk)
	}
	// A positive answer is not.
	m.expectRule(m.turn(submit("Acme launched Widget 2 on 3 May (ev_0002).")), catalog.RuleNegativeClaim, false)

	// A plain task gets no constraints, until a negative answer activates the protocol.
	p := newSim(t, quiet, plainTask, catalog.PolicyConfig{})
	p.expectRule(p.turn(thinking("UNRESOLVED(start)")), catalog.RuleNegativeClaim, false)
	if p.st.OpenConstraints() != nil {
		t.Fatal("constraints for a plain task")
	}
	p.expectRule(p.turn(submit("None.")), catalog.RuleNegativeClaim, true)
	if !p.st.NegativeClaimActive() || p.st.OpenConstraints() == nil {
		t.Fatal("a negative answer did not activate the protocol")
	}
	return m
}

func TestNegativeClaim(t *testing.T) { testNegativeClaim(t) }

// testNegativeClaimEndToEnd plays the protocol through the policy layer: a
// sequence of fetches with the minimums unmet, a domain shift, the
// minimums met, and the conclusion with its reason.
func testNegativeClaimEndToEnd(t *testing.T) *sim {
	p := quiet
	p.NegativeClaimBudget = 8
	m := newSim(t, p, negTask, catalog.PolicyConfig{})
	m.expectRule(m.turn(shell(`curl -s "https://html.duckduckgo.com/html/?q=acme+widget+2"`, "results")), catalog.RuleNegativeClaim, true)
	for _, path := range []string{"/", "/2025/", "/products/"} {
		ts := m.turn(shell("curl -sL https://blog.acme.example"+path, "Acme blog"))
		m.expectRule(ts, catalog.RuleDomainShift, false)
	}
	hammer := "curl -sL https://blog.acme.example/widget"
	ts := m.turn(shell(hammer, "Acme blog"))
	ev := m.expectRule(ts, catalog.RuleDomainShift, true)
	if ev.Effect != catalog.EffectBlock || ev.Count != 4 || ev.Limit != 3 || !slices.Equal(ev.Domains, []string{"blog.acme.example"}) ||
		!slices.Equal(ev.OfficialDomains, []string{"blog.acme.example"}) || ev.BlockedCommand != hammer ||
		!strings.Contains(ev.Message, "blog.acme.example 3 times") {
		t.Fatalf("domain_shift: %+v", ev)
	}
	if mv := BlockedMove(5, hammer); mv.Outcome != catalog.LedgerDenied || mv.MoveType != catalog.MoveFetch || mv.Domains[0] != "blog.acme.example" {
		t.Fatalf("BlockedMove: %+v", mv)
	}
	choice := m.expectRule(ts, catalog.RuleChoice, true)
	if choice.Details["for"] != catalog.RuleDomainShift || !strings.Contains(choice.Choices[0], "not blog.acme.example") {
		t.Fatalf("choice: %+v", choice)
	}
	// Shift: another official domain (the option matched), then an independent one.
	ts = m.turn(shell("curl -sL https://www.acme.example/press", "Acme press room"))
	m.expectRule(ts, catalog.RuleDomainShift, false)
	m.expectRule(ts, catalog.RuleChoiceMatched, true)
	m.expectRule(m.turn(shell("curl -sL https://news.example.org/acme", "Acme coverage")), catalog.RuleConclusionReady, false)
	if met, _ := m.st.NegativeClaim().Minimums(); !met {
		t.Fatal("minimums not met")
	}
	// Minimums met: the guard is off; the budget (8 web moves) is not spent yet.
	m.expectRule(m.turn(shell("curl -sL https://news.example.org/acme2", "more")), catalog.RuleDomainShift, false)
	if got := m.st.NegativeClaim().Moves(); got != 7 {
		t.Fatalf("moves = %d", got)
	}
	m.expectRule(m.turn(shell("curl -sL https://news.example.org/acme3", "more")), catalog.RuleConclusionReady, false)
	// Budget spent: the next decision concludes, and only that.
	ts = m.turn(thinking("UNRESOLVED(no announcement yet)"))
	if len(ts) != 1 {
		t.Fatalf("conclusion with other events: %q", rules(ts))
	}
	ev = m.expectRule(ts, catalog.RuleConclusionReady, true)
	reason := "no official announcement found in sources checked: acme.example, blog.acme.example, news.example.org"
	if ev.Effect != catalog.EffectConclude || ev.Details["reason"] != reason || ev.Message != "N"+reason[1:]+"." ||
		!slices.Equal(ev.OfficialDomains, []string{"acme.example", "blog.acme.example"}) ||
		!slices.Equal(ev.IndependentDomains, []string{"news.example.org"}) || ev.Count != 8 || ev.Limit != 8 {
		t.Fatalf("conclusion_ready: %+v", ev)
	}
	if e := Summarize(ts); !e.Conclude || e.Reason != reason {
		t.Fatalf("effects: %+v", e)
	}
	// A submitted answer is not overridden by the conclusion.
	c := m.st.Clone()
	if ts := Decide(*c, Proposed{Step: 99, Tool: catalog.ActionSubmit, Answer: "Acme launched Widget 2", Status: "RESOLVED"}); len(ts) != 0 {
		t.Fatalf("decided on a submit: %q", rules(ts))
	}
	return m
}

func TestNegativeClaimEndToEnd(t *testing.T) { testNegativeClaimEndToEnd(t) }

// TestEveryCatalogRule checks that the rules decided cover the catalogue's
// policy types, and that every event decided is a valid policy event.
func TestEveryCatalogRule(t *testing.T) {
	fired := map[string]bool{}
	for _, f := range []func(*testing.T) *sim{
		testPreToolNudge, testLengthNudge, testReminder, testStagnation, testFailureEscalation, testNotesGate,
		testQueryMutation, testFinalizationStop, testRepetitionNudge, testNegativeClaim, testNegativeClaimEndToEnd,
	} {
		m := f(t)
		for rule := range m.fired {
			fired[rule] = true
		}
		for step, ts := range m.decisions {
			seen := map[string]bool{}
			for _, e := range ts {
				if seen[e.Rule] {
					t.Errorf("step %d: rule %s fired twice", step, e.Rule)
				}
				seen[e.Rule] = true
				if e.Step != step || !e.Effect.Valid() {
					t.Errorf("step %d: bad event %+v", step, e)
				}
				if _, ok := catalog.Lookup(e.EventType()); !ok {
					t.Errorf("rule %s has no catalogue type", e.Rule)
				}
				if _, data, err := catalog.Encode(e); err != nil || len(data) == 0 {
					t.Errorf("encode %s: %v", e.Rule, err)
				}
			}
		}
	}
	for _, r := range catalog.PolicyRules() {
		if !fired[r] {
			t.Errorf("catalogue rule %s never decided", r)
		}
	}
}

func TestSummarize(t *testing.T) {
	e := Summarize([]catalog.PolicyTriggered{
		{Rule: catalog.RuleLengthNudge, Effect: catalog.EffectNudge, Message: "a"},
		{Rule: catalog.RuleChoiceMatched, Effect: catalog.EffectNudge},
		{Rule: catalog.RuleNotesGate, Effect: catalog.EffectBlock, Message: "b"},
	})
	if !e.Block || e.ForceTool || e.Stop || e.Conclude || !slices.Equal(e.Messages, []string{"a", "b"}) {
		t.Fatalf("%+v", e)
	}
	if e := Summarize(nil); e.Block || e.Messages != nil {
		t.Fatalf("%+v", e)
	}
}
