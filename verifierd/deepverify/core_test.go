package deepverify

import (
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

func TestRegistrableDomain(t *testing.T) {
	for in, want := range map[string]string{
		"https://www.bbc.co.uk/news/x":      "bbc.co.uk",
		"https://docs.python.org/3/":        "python.org",
		"http://example.com":                "example.com",
		"https://a.b.example.com.au/p?q=1":  "example.com.au",
		"https://user.github.io/repo":       "user.github.io",
		"https://EN.Wikipedia.ORG/wiki/Go":  "wikipedia.org",
		"http://127.0.0.1:8080/x":           "127.0.0.1",
		"news.ycombinator.com":              "ycombinator.com",
		"localhost":                         "localhost",
		"":                                  "",
		"https://ec.europa.eu/commission/x": "ec.europa.eu",
	} {
		if got := RegistrableDomain(in); got != want {
			t.Errorf("RegistrableDomain(%q) = %q, want %q", in, got, want)
		}
	}
}

func yes(id, ev string, cites ...string) catalog.AuditCheck {
	return catalog.AuditCheck{CheckID: id, LoadBearing: true, Result: catalog.CheckYes, Evidence: ev, Citations: cites}
}

func TestScout(t *testing.T) {
	twoDomains := []Citation{{Ref: "https://www.python.org/downloads/"}, {Ref: "https://en.wikipedia.org/wiki/Python"}}
	list := "Releases:\n- 3.12.0\n- 3.12.1\n- 3.13.0\n"
	tests := []struct {
		name      string
		answer    string
		checks    []catalog.AuditCheck
		citations []Citation
		allowed   int
		rules     []string
	}{
		{name: "clean", answer: "Python 3.13 was released on 2024-10-07.", checks: []catalog.AuditCheck{yes("r1-c1", "quote")},
			citations: twoDomains, allowed: 4},
		{name: "unknown load-bearing", answer: "Python 3.13 was released in October.",
			checks:    []catalog.AuditCheck{yes("r1-c1", "q"), {CheckID: "r1-c2", LoadBearing: true, Result: catalog.CheckUnknown}},
			citations: twoDomains, allowed: 2, rules: []string{RuleUnknownLoadBearing}},
		{name: "unknown but not load-bearing", answer: "Python 3.13 was released in October.",
			checks:    []catalog.AuditCheck{{CheckID: "r1-c1", LoadBearing: false, Result: catalog.CheckUnknown}},
			citations: twoDomains, allowed: 4},
		{name: "a no is not unknown", answer: "It was released.",
			checks:    []catalog.AuditCheck{{CheckID: "r1-c1", LoadBearing: true, Result: catalog.CheckNo}},
			citations: twoDomains, allowed: 4},
		{name: "negative claim uncovered", answer: "There has been no official announcement of Python 4.",
			citations: twoDomains, allowed: 2, rules: []string{RuleNegativeClaimCoverage}},
		{name: "never uncovered", answer: "Guido never worked at Microsoft.",
			citations: twoDomains, allowed: 2, rules: []string{RuleNegativeClaimCoverage}},
		{name: "negative claim with candidate set in cited evidence", answer: "None of the releases is 4.0.",
			citations: []Citation{{Ref: "https://www.python.org/downloads/", Excerpt: list}, {Ref: "https://en.wikipedia.org/wiki/Python"}},
			allowed:   4},
		{name: "negative claim with candidate set from a yes check", answer: "No one has announced it.",
			checks: []catalog.AuditCheck{yes("r1-c1", "1. Alpha\n2. Beta\n3. Gamma", "https://example.org/list")}, citations: twoDomains, allowed: 4},
		{name: "negative claim asserted collectively", answer: "Python 4 has not been announced.",
			citations: []Citation{{Ref: "https://peps.python.org/", Excerpt: "none of the PEPs plans a 4.0"}, {Ref: "https://lwn.net/a"}},
			allowed:   4},
		{name: "single domain", answer: "Python 3.13 was released.",
			citations: []Citation{{Ref: "https://www.python.org/a"}, {Ref: "https://docs.python.org/b"}},
			allowed:   2, rules: []string{RuleIndependentCitations}},
		{name: "no web citation", answer: "The file says 42.", citations: []Citation{{Ref: "/work/data.csv"}},
			allowed: 2, rules: []string{RuleIndependentCitations}},
		{name: "yes-check citation adds the second domain", answer: "Python 3.13 was released.",
			checks:    []catalog.AuditCheck{yes("r1-c1", "q", "https://lwn.net/Articles/1")},
			citations: []Citation{{Ref: "https://www.python.org/a"}}, allowed: 4},
		{name: "unknown-check citations do not count", answer: "Python 3.13 was released.",
			checks:    []catalog.AuditCheck{{CheckID: "r1-c1", Result: catalog.CheckUnknown, Citations: []string{"https://lwn.net/x"}}},
			citations: []Citation{{Ref: "https://www.python.org/a"}}, allowed: 2, rules: []string{RuleIndependentCitations}},
		{name: "all three", answer: "Nobody ever released it: none.",
			checks:    []catalog.AuditCheck{{CheckID: "r1-c1", LoadBearing: true, Result: catalog.CheckUnknown}},
			citations: []Citation{{Ref: "https://x.com/a"}}, allowed: 2,
			rules: []string{RuleUnknownLoadBearing, RuleNegativeClaimCoverage, RuleIndependentCitations}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			allowed, caps := Scout(tt.answer, tt.checks, tt.citations)
			if allowed != tt.allowed {
				t.Errorf("allowed = %d, want %d (caps %+v)", allowed, tt.allowed, caps)
			}
			var rules []string
			for _, c := range caps {
				rules = append(rules, c.Rule)
				if c.Reason == "" || c.Cap != 2 {
					t.Errorf("cap %+v: want a reason and cap 2", c)
				}
			}
			if strings.Join(rules, ",") != strings.Join(tt.rules, ",") {
				t.Errorf("rules = %v, want %v", rules, tt.rules)
			}
		})
	}
}

func TestNegativeClaimCue(t *testing.T) {
	for answer, neg := range map[string]bool{
		"No official announcement was found in the sources checked.": true,
		"None.":                                true,
		"It has not yet been released.":        true,
		"The company hasn't announced it.":     true,
		"Nobody signed it.":                    true,
		"The release is 3.13.":                 false,
		"Nonetheless the figure is 42.":        false,
		"It was announced on 2024-01-01.":      false,
		"There is no evidence of a launch.":    true,
		"No such feature exists in version 2.": true,
	} {
		if got := NegativeClaimCue(answer) != ""; got != neg {
			t.Errorf("NegativeClaimCue(%q) = %q, want negative=%v", answer, NegativeClaimCue(answer), neg)
		}
	}
}

func TestInstructionConcreteness(t *testing.T) {
	tests := []struct {
		in             string
		url, path, cmd bool
	}{
		{"Look harder.", false, false, false},
		{"Open https://www.python.org/downloads/ and quote the date.", true, false, false},
		{"Read /work/notes.md again.", false, true, false},
		{"Run `grep -n 3.13 /work/releases.html` and cite the line.", false, true, true},
		{"curl -sL https://peps.python.org/pep-0745/ | grep -i date", true, false, true},
		{"Cite ev_0003 for the number.", false, true, false},
		{"Check the changelog.md file.", false, true, false},
	}
	for _, tt := range tests {
		c := InstructionConcreteness(tt.in)
		if c.HasURL != tt.url || c.HasPath != tt.path || c.HasCmd != tt.cmd || c.Chars != len([]rune(tt.in)) {
			t.Errorf("InstructionConcreteness(%q) = %+v, want url=%v path=%v cmd=%v", tt.in, c, tt.url, tt.path, tt.cmd)
		}
	}
}

func TestExtractAndParse(t *testing.T) {
	d, err := ParseDecomposition("Sure!\n```json\n{\"summary\":[{\"step\":1,\"source\":\"ev_0001\",\"finding\":\"x\"}],\"likely_errors\":[{\"class\":\"Reasoning\",\"justification\":\"j\"},{\"class\":\"bogus\"}],\"checks\":[{\"source\":\"a\",\"question\":\"q1?\"},{\"source\":\"b\",\"question\":\"q2?\",\"load_bearing\":false},{\"question\":\"q3?\"},{\"question\":\"q4?\"}]}\n```")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Checks) != 3 || len(d.LikelyErrors) != 1 || d.LikelyErrors[0].Class != catalog.ErrorReasoning || d.Checks[0].LoadBearing != nil || *d.Checks[1].LoadBearing {
		t.Errorf("decomposition = %+v", d)
	}
	if _, err := ParseJudgement(`{"explanation":"e","score":5}`); err == nil {
		t.Error("score 5 accepted")
	}
	j, err := ParseJudgement(`Verdict: {"explanation":"e","score":2,"instructions":["a","","b","c","d",],}`)
	if err != nil || j.Score != 2 || len(j.Instructions) != 3 {
		t.Errorf("judgement = %+v, %v", j, err)
	}
	s, err := ParseCheckStep(`{"command":"curl -s https://x.org"}`)
	if err != nil || s.Command == "" || s.Verdict != "" {
		t.Errorf("step = %+v, %v", s, err)
	}
	s, err = ParseCheckStep(`{"verdict":"YES","evidence":"quote"}`)
	if err != nil || s.Verdict != catalog.CheckYes {
		t.Errorf("step = %+v, %v", s, err)
	}
	for _, bad := range []string{"no json here", `{"verdict":"maybe"}`, `{}`, `{"score": }`} {
		if _, err := ParseCheckStep(bad); err == nil {
			t.Errorf("ParseCheckStep(%q) accepted", bad)
		}
	}
}

func TestBest(t *testing.T) {
	b := BestOf([]catalog.AuditJudged{{Round: 1, Score: 2}, {Round: 2, Score: 3}, {Round: 3, Score: 3}, {Round: 4, Score: 1}})
	if b != (Best{Round: 2, Score: 3}) {
		t.Errorf("best = %+v", b)
	}
	if (Best{}).Update(1, 1) != (Best{Round: 1, Score: 1}) {
		t.Error("first round is not best")
	}
}

func TestRequestIDs(t *testing.T) {
	id := RequestID(2, 3, 4)
	if id != "req-r2-c3-t4" {
		t.Fatal(id)
	}
	r, c, s, ok := parseRequestID(id)
	if !ok || r != 2 || c != 3 || s != 4 {
		t.Errorf("parse = %d %d %d %v", r, c, s, ok)
	}
	for _, bad := range []string{"req-s0007", "req-r1-c1", "req-r0-c1-t1", "req-rx-c1-t1"} {
		if _, _, _, ok := parseRequestID(bad); ok {
			t.Errorf("parseRequestID(%q) ok", bad)
		}
	}
}

func TestPromptsRender(t *testing.T) {
	p := RenderDecompose(DecomposeInput{Round: 1, Task: "T", Answer: "A", Evidence: []catalog.EvidenceRecorded{{EvidenceID: "ev_0001", Command: "curl x", URLs: []string{"https://x.org"}, Excerpt: "E"}}})
	for _, want := range []string{"AUDIT-DECOMPOSE round 1", "ev_0001", "https://x.org", "likely_errors"} {
		if !strings.Contains(p, want) {
			t.Errorf("decompose prompt lacks %q:\n%s", want, p)
		}
	}
	p = RenderCheck(CheckInput{CheckID: "r1-c2", Step: 2, MaxSteps: 5, Question: "Q?", Calls: []CheckCall{{Command: "ls", Output: "out"}}, MustDecide: true})
	for _, want := range []string{"AUDIT-CHECK r1-c2 step 2", "$ ls", "give your verdict now"} {
		if !strings.Contains(p, want) {
			t.Errorf("check prompt lacks %q:\n%s", want, p)
		}
	}
	p = RenderJudge(JudgeInput{Round: 2, Checks: []catalog.AuditCheck{{CheckID: "r2-c1", Result: catalog.CheckNo}}})
	if !strings.Contains(p, "AUDIT-JUDGE round 2") || !strings.Contains(p, "r2-c1") {
		t.Errorf("judge prompt:\n%s", p)
	}
	if SystemPrompt() == "" {
		t.Error("empty system prompt")
	}
}
