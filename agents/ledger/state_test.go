package ledger

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// actionPool is what the random runs draw from: every kind of move, failures,
// repeats, notes, format errors, cut replies and submits, on a negative-claim
// task so that every rule can fire.
var actionPool = []action{
	shell(`curl -s "https://html.duckduckgo.com/html/?q=acme+widget+2+launch"`, "results"),
	shell(`curl -s "https://www.bing.com/search?q=Acme+Widget+2+launched"`, "results"),
	shell(`curl -s "https://html.duckduckgo.com/html/?q=acme+widget+2+site:acme.example"`, "results"),
	shell("curl -sL https://blog.acme.example/", "Acme blog"),
	shell("curl -sL https://blog.acme.example/2025/", "Acme blog 2025"),
	shell("curl -sL https://www.acme.example/press", "press room"),
	shell("curl -sL https://news.example.org/acme", "coverage"),
	shell("curl -sI https://acme.example/widget-2", "HTTP/2 404"),
	failing("curl -fsS https://acme.example/widget-2", 22, "curl: (22) The requested URL returned error: 404"),
	failing("pdftotext /input/a.pdf -", 127, "sh: pdftotext: command not found"),
	shell("grep -i widget /work/page.html", "Widget 2 coming soon"),
	shell(`python3 -c "print(365*24)"`, "8760"),
	shell("pip install pypdf", "Successfully installed"),
	shell("cat > /work/output/final_report.md <<'EOF'\n# Report\nEOF", ""),
	shell(`echo "- lead" >> /work/scratch.md`, ""),
	notes("- blog has nothing on Widget 2 (ev_0002)"),
	thinking("UNRESOLVED(no announcement yet)"),
	thinking("IN_PROGRESS"),
	{formatErr: "missing STATUS_UPDATE"},
	{formatErr: "reply cut off", finish: "length"},
	submit("No official announcement: Acme has not launched Widget 2."),
	submit("Acme launched Widget 2 (ev_0003)."),
}

// randomRun plays steps random actions; logic verdicts arrive between
// steps, some of them 0.
func randomRun(t *testing.T, seed uint64, steps int) *sim {
	r := rand.New(rand.NewPCG(seed, 7))
	p := Policy{NegativeClaimBudget: 6, ReminderInterval: 7}
	m := newSim(t, p, negTask, catalog.PolicyConfig{QueryFamilyLimit: 2})
	for i := 0; i < steps; i++ {
		m.turn(actionPool[r.IntN(len(actionPool))])
		if r.IntN(3) == 0 {
			st := m.st.LastStep()
			m.apply(catalog.LogicVerdict{Step: st, ThinkingEval: r.IntN(3), RepeatedStep: max(st-1, 0), VerifierType: catalog.VerifierLogic})
		}
	}
	return m
}

// scriptedRun is the end-to-end negative-claim run plus a few of
// everything else.
func scriptedRun(t *testing.T) *sim {
	m := testNegativeClaimEndToEnd(t)
	m.turn(action{formatErr: "cut", finish: "length"})
	m.turn(action{formatErr: "cut", finish: "length"})
	m.apply(catalog.LogicVerdict{Step: 11, ThinkingEval: 0, RepeatedStep: 10})
	m.turn(failing("curl -fsS https://a.example/", 22, "returned error: 403"))
	m.turn(failing("curl -fsS https://b.example/", 22, "returned error: 403"))
	m.turn(notes("- 403s"))
	return m
}

func fold(p Policy, evs []catalog.Payload) *State {
	s := NewState(p)
	for _, e := range evs {
		s.Apply(e)
	}
	return s
}

// checkDeterminism checks the fold and decision properties on a played run.
func checkDeterminism(t *testing.T, m *sim, splits []int) {
	t.Helper()
	base := m.st.base
	full := fold(base, m.events)
	if !reflect.DeepEqual(full, m.st) {
		t.Fatal("folding the run's events again gives another state")
	}
	if again := fold(base, m.events); !reflect.DeepEqual(full, again) {
		t.Fatal("two folds differ")
	}

	// Replay: deciding each step from the refolded state gives the
	// decisions taken live.
	s := NewState(base)
	for _, e := range m.events {
		if st, ok := e.(catalog.AgentStep); ok {
			if got := Decide(*s.Clone(), ProposedFrom(st)); !reflect.DeepEqual(got, m.decisions[st.Step]) {
				t.Fatalf("step %d: replay decided %+v, live %+v", st.Step, got, m.decisions[st.Step])
			}
		}
		s.Apply(e)
	}
	// Ledger lines are the same on replay.
	for id, r := range m.st.requests {
		lm, ok1 := full.MoveLine(id)
		lq, ok2 := full.QueryLine(id)
		om, _ := m.st.MoveLine(id)
		oq, _ := m.st.QueryLine(id)
		if ok1 != r.done || ok2 != r.hasQuery || !reflect.DeepEqual(lm, om) || lq != oq {
			t.Fatalf("ledger lines of %s differ", id)
		}
	}

	// Split: a fold stopped at k, cloned and resumed, ends where the whole
	// fold does, and resuming the clone leaves the prefix state untouched.
	for _, k := range splits {
		prefix := fold(base, m.events[:k])
		snapshot := prefix.Clone()
		resumed := prefix.Clone()
		for _, e := range m.events[k:] {
			resumed.Apply(e)
		}
		if !reflect.DeepEqual(resumed, full) {
			t.Fatalf("split at %d/%d: resumed state differs", k, len(m.events))
		}
		if !reflect.DeepEqual(prefix, snapshot) {
			t.Fatalf("split at %d: resuming a clone changed the original", k)
		}
	}

	// Redelivery: every event twice in a row, then the whole stream again.
	dup := NewState(base)
	for _, e := range m.events {
		dup.Apply(e)
		dup.Apply(e)
	}
	if !reflect.DeepEqual(dup, full) {
		t.Fatal("immediate redelivery changed the state")
	}
	for _, e := range m.events {
		dup.Apply(e)
	}
	if !reflect.DeepEqual(dup, full) {
		t.Fatal("replaying the stream over the state changed it")
	}

	// The wire: events encoded and decoded (as pointers) fold the same.
	wire := NewState(base)
	for _, e := range m.events {
		typ, data, err := catalog.Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		p, err := catalog.Decode(typ, data)
		if err != nil {
			t.Fatal(err)
		}
		wire.Apply(p)
	}
	if !reflect.DeepEqual(wire, full) {
		t.Fatal("the decoded events fold differently")
	}
}

func TestDeterminismScripted(t *testing.T) {
	m := scriptedRun(t)
	splits := make([]int, len(m.events)+1)
	for k := range splits {
		splits[k] = k
	}
	checkDeterminism(t, m, splits)
}

func TestDeterminismRandom(t *testing.T) {
	seeds := 24
	if testing.Short() {
		seeds = 4
	}
	fired := map[string]bool{}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := randomRun(t, seed, 40)
			for r := range m.fired {
				fired[r] = true
			}
			// Two plays of the same seed are identical.
			if o := randomRun(t, seed, 40); !reflect.DeepEqual(o.events, m.events) || !reflect.DeepEqual(o.decisions, m.decisions) {
				t.Fatal("the same run played twice differs")
			}
			r := rand.New(rand.NewPCG(seed, 99))
			splits := []int{0, len(m.events)}
			for range 10 {
				splits = append(splits, r.IntN(len(m.events)+1))
			}
			checkDeterminism(t, m, splits)
		})
	}
	if len(fired) < 10 {
		t.Errorf("random runs fired only %d rules: %v", len(fired), fired)
	}
}

func TestApplyIgnores(t *testing.T) {
	s := NewState(Policy{})
	before := s.Clone()
	s.Apply(catalog.ToolFinished{RequestID: "req-r1-c1-t1", Requester: catalog.RequesterAuditor, ExitCode: 1})
	s.Apply(catalog.ToolRequested{RequestID: "req-r1-c1-t1", Requester: catalog.RequesterAuditor, Command: "curl https://a.example/"})
	s.Apply(catalog.LedgerMove{Step: 1, MoveType: catalog.MoveFetch})
	s.Apply(catalog.LedgerQuery{Step: 1, Query: "x", Family: "x", FamilyCount: 1})
	s.Apply(catalog.RunFinished{Outcome: catalog.OutcomeResolved})
	s.Apply((*catalog.AgentStep)(nil))
	s.Apply(nil)
	if !reflect.DeepEqual(s, before) {
		t.Fatal("ignored events changed the state")
	}
	// vera.run.started wins over a later task.submitted.
	s.Apply(catalog.RunStarted{Config: catalog.RunConfig{Task: "Has Acme launched X?"}})
	s.Apply(catalog.TaskSubmitted{RunConfig: catalog.RunConfig{Task: "other"}})
	if s.Task() != "Has Acme launched X?" || !s.NegativeClaimActive() || s.Vendors()[0] != "Acme" {
		t.Fatalf("task %q active %v vendors %q", s.Task(), s.NegativeClaimActive(), s.Vendors())
	}
}
