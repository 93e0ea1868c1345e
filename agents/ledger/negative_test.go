package ledger

import (
	"slices"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

func TestNegativeCues(t *testing.T) {
	negative := []string{
		"Has Acme launched Widget 2 yet?",
		"Has OpenAI released GPT-6?",
		"Is there any official announcement of Widget 2?",
		"Which EU countries have never hosted the Olympics?",
		"No one has climbed it in winter.",
		"None.",
		"Acme has not yet announced Widget 2.",
		"Widget 2 hasn't been released.",
		"No official announcement found in sources checked: acme.example.",
		"Find out whether Acme has launched Widget 2.",
		"Check if the EU announced the regulation.",
		"Widget 2 is not yet available.",
		"Did Acme ship Widget 2 in 2025?",
	}
	for _, s := range negative {
		if !IsNegativeClaim(s) || len(NegativeCues(s)) == 0 {
			t.Errorf("IsNegativeClaim(%q) = false", s)
		}
	}
	positive := []string{
		"Acme has officially launched Widget 2 on 3 May 2025 (ev_0004).",
		"What is the release date of Python 3.13.0?",
		"Python 3.13.0 was released on October 7, 2024.",
		"Summarise the GDPR export in /input.",
		"Acme launched Widget 2; the announcement is at acme.example/news.",
	}
	for _, s := range positive {
		if IsNegativeClaim(s) {
			t.Errorf("IsNegativeClaim(%q) = true, cues %q", s, NegativeCues(s))
		}
	}
	if c := NegativeCues("Has Acme launched Widget 2 yet? None so far."); !slices.Contains(c, "none") || len(c) < 2 {
		t.Errorf("cues = %q", c)
	}
}

func TestClaimSubjects(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"Has Acme launched Widget 2 yet?", []string{"Acme"}},
		{"Has OpenAI officially released GPT-6?", []string{"OpenAI"}},
		{"Has the Python Software Foundation released Python 4?", []string{"Python Software Foundation"}},
		{"Is there any official announcement from Globex Corp about Widget 3?", []string{"Globex Corp"}},
		{"Find out whether Initech has announced a merger.", []string{"Initech"}},
		{"Has GPT-6 been released by OpenAI?", []string{"GPT-6", "OpenAI"}},
		{"What is 2+2?", nil},
	}
	for _, tt := range tests {
		if got := ClaimSubjects(tt.text); !slices.Equal(got, tt.want) {
			t.Errorf("ClaimSubjects(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

// fetch is a successful fetch of a URL.
func fetch(n *NegativeClaim, url string) { n.ObserveCommand("curl -sL "+url, catalog.LedgerSuccess) }

func TestNegativeClaimProtocol(t *testing.T) {
	n := NegativeClaim{Vendors: []string{"Acme"}}

	// Nothing checked: both minimums missing; no conclusion, no shift.
	met, missing := n.Minimums()
	if met || !slices.Equal(missing, []string{"official domains: 0 of 2", "independent domains: 0 of 1"}) {
		t.Fatalf("Minimums = %v %q", met, missing)
	}
	if lines := n.Constraints(); !slices.Equal(lines, []string{
		"Check at least 2 official (vendor-owned) domains (owned by Acme)",
		"Check at least 1 independent domain",
		"Enumerate the candidate set from a cited source before concluding none",
	}) {
		t.Fatalf("Constraints = %q", lines)
	}

	// A search-engine query is a web move but checks no domain.
	n.ObserveCommand(`curl -s "https://html.duckduckgo.com/html/?q=acme+widget+2"`, catalog.LedgerSuccess)
	if n.Moves() != 1 || len(n.Checked()) != 0 {
		t.Fatalf("after a search: moves %d checked %q", n.Moves(), n.Checked())
	}

	// Three fetches on blog.acme.example: one official domain; the fourth
	// on it requires a shift, another domain does not.
	for _, p := range []string{"/", "/2025", "/widget"} {
		if req, _, _ := n.ShiftRequired("curl -s https://blog.acme.example" + p); req {
			t.Fatalf("shift required before the limit (%s)", p)
		}
		fetch(&n, "https://blog.acme.example"+p)
	}
	req, dom, count := n.ShiftRequired("curl -s https://blog.acme.example/widget-2")
	if !req || dom != "blog.acme.example" || count != 4 {
		t.Fatalf("ShiftRequired = %v %q %d, want true blog.acme.example 4", req, dom, count)
	}
	if req, _, _ := n.ShiftRequired("curl -s https://www.acme.example/press"); req {
		t.Fatal("shift required for another domain")
	}
	// A search-engine move in between does not reset the run.
	n.ObserveCommand(`curl -s "https://www.bing.com/search?q=acme+widget"`, catalog.LedgerSuccess)
	if req, _, _ := n.ShiftRequired("https://blog.acme.example/x"); !req {
		t.Fatal("a search-engine move reset the domain run")
	}

	// Second official domain (www. is dropped); a failed fetch of an
	// independent one counts as a move but not as checked.
	fetch(&n, "https://www.acme.example/press")
	n.ObserveCommand("curl -sf https://news.example.org/acme", catalog.LedgerFailure)
	if got := n.Official(); !slices.Equal(got, []string{"acme.example", "blog.acme.example"}) {
		t.Fatalf("Official = %q", got)
	}
	met, missing = n.Minimums()
	if met || !slices.Equal(missing, []string{"independent domains: 0 of 1"}) {
		t.Fatalf("Minimums = %v %q", met, missing)
	}
	if lines := n.Constraints(); lines[0] != "Check at least 1 independent domain" || len(lines) != 2 {
		t.Fatalf("Constraints = %q", lines)
	}

	// Independent domain: minimums met, the guard is off, the budget not
	// yet spent.
	fetch(&n, "https://news.example.org/acme")
	met, _ = n.Minimums()
	if !met || n.ConclusionReady() {
		t.Fatalf("met %v ready %v moves %d", met, n.ConclusionReady(), n.Moves())
	}
	if req, _, _ := n.ShiftRequired("https://news.example.org/acme2"); req {
		t.Fatal("shift required with the minimums met")
	}
	for n.Moves() < DefaultNegativeClaimBudget-1 {
		fetch(&n, "https://news.example.org/more")
	}
	if n.BudgetExhausted() || n.ConclusionReady() {
		t.Fatal("conclusion ready before the budget is spent")
	}
	fetch(&n, "https://www.theverge.com/acme")
	if !n.ConclusionReady() {
		t.Fatal("conclusion not ready with the budget spent and minimums met")
	}
	want := "no official announcement found in sources checked: acme.example, blog.acme.example, news.example.org, theverge.com"
	if n.Reason() != want {
		t.Fatalf("Reason = %q\nwant     %q", n.Reason(), want)
	}
	if n.Status() != "UNRESOLVED("+want+")" {
		t.Fatalf("Status = %q", n.Status())
	}
	lines := n.Constraints()
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "Source minimums met") || !strings.Contains(last, want) {
		t.Fatalf("Constraints = %q", lines)
	}
	if !strings.HasPrefix(n.OpenConstraints(), "OPEN CONSTRAINTS:\n- ") {
		t.Fatalf("OpenConstraints = %q", n.OpenConstraints())
	}

	c := n.Clone()
	fetch(&c, "https://acme.example/x")
	c.Vendors[0] = "Globex"
	if n.Vendors[0] != "Acme" || n.Moves() == c.Moves() {
		t.Fatal("Clone shares state")
	}
}

func TestNegativeClaimLimits(t *testing.T) {
	n := NegativeClaim{Vendors: []string{"acme.example"}, MinOfficial: 1, MinIndependent: -1, ShiftAfter: -1, Budget: 2}
	fetch(&n, "https://acme.example/a")
	if met, _ := n.Minimums(); !met {
		t.Fatal("custom minimums not met")
	}
	fetch(&n, "https://acme.example/b")
	if !n.ConclusionReady() {
		t.Fatal("budget of 2 not spent after 2 moves")
	}
	proxied := NegativeClaim{Vendors: []string{"Acme"}}
	fetch(&proxied, "https://r.jina.ai/https://www.acme.example/news")
	fetch(&proxied, "https://web.archive.org/web/2025/https://blog.acme.example/")
	if got := proxied.Official(); !slices.Equal(got, []string{"acme.example", "blog.acme.example"}) || len(proxied.Independent()) != 0 {
		t.Fatalf("proxied sources: official %q independent %q", got, proxied.Independent())
	}
	var noVendor NegativeClaim
	fetch(&noVendor, "https://acme.example/a")
	if _, missing := noVendor.Minimums(); len(missing) != 1 || !strings.Contains(missing[0], "vendor unknown") {
		t.Fatalf("missing = %q", missing)
	}
	noBudget := NegativeClaim{Budget: -1}
	for range 50 {
		fetch(&noBudget, "https://x.example/")
	}
	if noBudget.BudgetExhausted() {
		t.Fatal("a negative budget was exhausted")
	}
}
