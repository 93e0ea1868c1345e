package ledger

import (
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

// Negative-claim cues. Each pattern matches case-insensitively; the
// question forms only at the start of a sentence so that an affirmative
// answer ("Acme has officially launched X") is not read as one.
var negativeCueRes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bnone\b`),
	regexp.MustCompile(`(?i)\bno[- ]one\b|\bnobody\b`),
	regexp.MustCompile(`(?i)\bnever\b`),
	regexp.MustCompile(`(?i)\bnot yet\b|\byet to\b`),
	regexp.MustCompile(`(?i)\bno (?:official |public |formal )?(?:announcement|release|launch|evidence|record|mention|confirmation|information)s?\b`),
	regexp.MustCompile(`(?i)\b(?:has|have|had|is|are|was|were|does|do|did)(?:n't|n’t| not)\s+(?:(?:yet|been|officially|publicly|formally)\s+)*(?:launch|releas|announc|ship|confirm|publish|exist|introduc|unveil|available)\w*`),
	regexp.MustCompile(`(?i)(?:^|[.!?]\s+|\n)\s*(?:has|have|did|does|is|are|was)\s+[^.?!\n]{1,80}?\b(?:launch|releas|announc|ship|introduc|unveil|publish|confirm|available|roll(?:ed)?\s+out|gone\s+live)\w*`),
	regexp.MustCompile(`(?i)\bis there (?:any|an?)\s+(?:official\s+)?(?:announcement|release|evidence|record|statement)\b`),
	regexp.MustCompile(`(?i)\b(?:whether|if)\b[^.?!\n]{0,80}?\b(?:launch|releas|announc|ship)\w*`),
}

// NegativeCues returns the negative-claim cues found in a task or an
// answer, lower-cased, in the order of the patterns: "none", "no one",
// "nobody", "never", "not yet", "yet to", "no official announcement" (and
// no release/launch/evidence/record…), "has not launched" (and other
// negated launch verbs), a question starting a sentence such as "has X
// launched", "did X release", "is X available", "is there any official
// announcement", and "whether/if … launched". These questions are
// negative claims in disguise: their honest answer may be "no", which
// needs coverage before it is given.
func NegativeCues(text string) []string {
	var out []string
	for _, re := range negativeCueRes {
		if m := re.FindString(text); m != "" {
			out = append(out, strings.Join(strings.Fields(strings.ToLower(strings.TrimLeft(m, ".!?"))), " "))
		}
	}
	return out
}

// IsNegativeClaim reports whether a task or answer carries a negative
// claim (any of NegativeCues). It is a keyword test: "never use Wikipedia"
// in a task counts too, which only means the coverage minimums apply.
func IsNegativeClaim(text string) bool {
	for _, re := range negativeCueRes {
		if re.MatchString(text) {
			return true
		}
	}
	return false
}

var (
	subjectQuestion = regexp.MustCompile(`(?i)(?:^|[.!?]\s+|\n)\s*(?:has|have|did|does|is|was)\s+(?:the\s+)?([^.?!\n]{1,60}?)\s+(?:(?:officially|already|yet|ever|been|actually|publicly)\s+)*(?:launch|releas|announc|ship|introduc|unveil|publish|confirm|roll)`)
	subjectWhether  = regexp.MustCompile(`(?i)\b(?:whether|if)\s+(?:the\s+)?([^.?!\n]{1,60}?)\s+(?:has|have|had|did)\b`)
	subjectBy       = regexp.MustCompile(`\b(?:by|from)\s+((?:[A-Z][\w&.'’-]*)(?:\s+[A-Z][\w&.'’-]*){0,3})`)
	capitalRun      = regexp.MustCompile(`[A-Z][\w&.'’-]*(?:\s+[A-Z][\w&.'’-]*)*`)
)

// ClaimSubjects guesses who a negative claim is about, as vendor names
// for IsOfficial: the subject of "has X launched …", "whether X has …"
// and the capitalised name after "by" or "from" ("an announcement from
// Acme"). Within a subject, a run of capitalised words is preferred
// ("Has Acme launched Widget" → Acme). It is a heuristic; configured
// vendors (Policy.Vendors) are the reliable source.
func ClaimSubjects(text string) []string {
	var out []string
	add := func(v string) {
		v = strings.Trim(strings.TrimSpace(v), ".,;:'’\"")
		if f := strings.Fields(strings.ToLower(v)); len(f) > 0 && stopWords[f[0]] {
			return // "is there any …", "has it …"
		}
		if c := capitalRun.FindString(v); c != "" {
			v = c
		}
		if v == "" || stopWords[strings.ToLower(v)] || slices.Contains(out, v) {
			return
		}
		out = append(out, v)
	}
	for _, re := range []*regexp.Regexp{subjectQuestion, subjectWhether, subjectBy} {
		for _, m := range re.FindAllStringSubmatch(text, -1) {
			add(m[1])
		}
	}
	return out
}

// NegativeClaim tracks the negative-claim protocol: before a run may
// conclude that something does not exist ("no official announcement
// found"), it must have evidence from at least MinOfficial official
// (vendor-owned) domains and MinIndependent independent ones.
//
// A URL behind a reader proxy or an archive counts for the site it wraps
// (see SourceURL): r.jina.ai/https://acme.example/x checks acme.example.
// Domains are host names without a leading www. (docs.acme.com and
// acme.com are two official domains); ownership is decided by IsOfficial
// against Vendors. A domain counts as checked when a fetch, or a search
// on that site (not on a search engine), succeeded on it; search-engine
// result pages, IP addresses and single-label hosts never count.
//
// The domain-shift guard: while the minimums are unmet, after ShiftAfter
// consecutive web moves on one domain the next move on that domain is
// refused (ShiftRequired). Moves on search engines neither extend nor
// break the run of moves on a domain. The budget: after Budget web moves
// (search, fetch or verify with a URL, search engines included) the
// search is exhausted; with the minimums met the conclusion is then ready
// (ConclusionReady), with Reason as the UNRESOLVED reason.
//
// Limits of zero mean the defaults (2 official, 1 independent, shift after
// 3, budget 10); a negative limit means none (no minimum, no guard, no
// budget). The zero value is an empty tracker with the defaults.
type NegativeClaim struct {
	Vendors        []string // vendor names, aliases or domains (see IsOfficial)
	MinOfficial    int
	MinIndependent int
	ShiftAfter     int
	Budget         int

	checked  []string // sorted
	lastHost string
	streak   int
	moves    int
}

func lim(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

func (n *NegativeClaim) minOfficial() int { return lim(n.MinOfficial, DefaultMinOfficialDomains) }
func (n *NegativeClaim) minIndependent() int {
	return lim(n.MinIndependent, DefaultMinIndependentDomains)
}
func (n *NegativeClaim) shiftAfter() int { return lim(n.ShiftAfter, DefaultDomainShiftAfter) }
func (n *NegativeClaim) budget() int     { return lim(n.Budget, DefaultNegativeClaimBudget) }

// sourceHost reports whether a canonical host can be a source.
func sourceHost(h string) bool {
	return h != "" && strings.Contains(h, ".") && net.ParseIP(h) == nil && !IsSearchEngine(h)
}

// primaryHost returns the first source host a command (or URL) targets.
func primaryHost(cmd string) string {
	for _, u := range URLs(cmd) {
		if h := canonHost(SourceURL(u)); sourceHost(h) {
			return h
		}
	}
	return ""
}

// Observe records one finished move: its type, the URLs it targeted (see
// URLs) and its outcome. Moves without a URL and moves other than search,
// fetch and verify are ignored.
func (n *NegativeClaim) Observe(move catalog.MoveType, urls []string, outcome catalog.LedgerOutcome) {
	if len(urls) == 0 || (move != catalog.MoveSearch && move != catalog.MoveFetch && move != catalog.MoveVerify) {
		return
	}
	n.moves++
	host := ""
	for _, u := range urls {
		if h := canonHost(SourceURL(u)); sourceHost(h) {
			host = h
			break
		}
	}
	if host == "" {
		return
	}
	if host == n.lastHost {
		n.streak++
	} else {
		n.lastHost, n.streak = host, 1
	}
	if outcome != catalog.LedgerSuccess || move == catalog.MoveVerify {
		return
	}
	for _, u := range urls {
		if h := canonHost(SourceURL(u)); sourceHost(h) {
			if i, found := slices.BinarySearch(n.checked, h); !found {
				n.checked = slices.Insert(n.checked, i, h)
			}
		}
	}
}

// ObserveCommand is Observe for a shell command: ClassifyMove(cmd),
// URLs(cmd).
func (n *NegativeClaim) ObserveCommand(cmd string, outcome catalog.LedgerOutcome) {
	n.Observe(ClassifyMove(cmd), URLs(cmd), outcome)
}

// Checked returns every domain checked, sorted.
func (n *NegativeClaim) Checked() []string { return slices.Clone(n.checked) }

// Official returns the checked domains owned by a vendor, sorted.
func (n *NegativeClaim) Official() []string {
	var out []string
	for _, h := range n.checked {
		if officialAny(h, n.Vendors) {
			out = append(out, h)
		}
	}
	return out
}

// Independent returns the checked domains not owned by any vendor, sorted.
func (n *NegativeClaim) Independent() []string {
	var out []string
	for _, h := range n.checked {
		if !officialAny(h, n.Vendors) {
			out = append(out, h)
		}
	}
	return out
}

// Moves returns the number of web moves observed (the budget spent).
func (n *NegativeClaim) Moves() int { return n.moves }

// Minimums reports whether the source minimums are met and, if not, what
// is missing, e.g. "official domains: 1 of 2".
func (n *NegativeClaim) Minimums() (met bool, missing []string) {
	off, ind := len(n.Official()), len(n.Independent())
	if mo := n.minOfficial(); off < mo {
		m := "official domains: " + strconv.Itoa(off) + " of " + strconv.Itoa(mo)
		if len(n.Vendors) == 0 {
			m += " (vendor unknown)"
		}
		missing = append(missing, m)
	}
	if mi := n.minIndependent(); ind < mi {
		missing = append(missing, "independent domains: "+strconv.Itoa(ind)+" of "+strconv.Itoa(mi))
	}
	return len(missing) == 0, missing
}

// ShiftRequired applies the domain-shift guard to the next move, given as
// a command or a URL: it returns true, the domain and the number of
// consecutive moves on it the next one would make, when the minimums are
// unmet and the last ShiftAfter (or more) moves were all on that domain.
func (n *NegativeClaim) ShiftRequired(next string) (required bool, domain string, count int) {
	after := n.shiftAfter()
	h := primaryHost(next)
	if after <= 0 || h == "" || h != n.lastHost || n.streak < after {
		return false, h, 0
	}
	if met, _ := n.Minimums(); met {
		return false, h, 0
	}
	return true, h, n.streak + 1
}

// BudgetExhausted reports whether the web moves observed reached the
// budget (never, with no budget).
func (n *NegativeClaim) BudgetExhausted() bool {
	b := n.budget()
	return b > 0 && n.moves >= b
}

// ConclusionReady reports whether the search is exhausted with the
// source minimums met: the run may conclude UNRESOLVED with Reason.
func (n *NegativeClaim) ConclusionReady() bool {
	met, _ := n.Minimums()
	return met && n.BudgetExhausted()
}

// Reason returns the UNRESOLVED reason of a concluded negative claim:
// "no official announcement found in sources checked: " and the official
// then the independent domains, each sorted.
func (n *NegativeClaim) Reason() string {
	srcs := append(n.Official(), n.Independent()...)
	if len(srcs) == 0 {
		return "no official announcement found in sources checked: none"
	}
	return "no official announcement found in sources checked: " + strings.Join(srcs, ", ")
}

// Status returns the status line of the conclusion: UNRESOLVED(reason).
func (n *NegativeClaim) Status() string {
	return string(catalog.OutcomeUnresolved) + "(" + n.Reason() + ")"
}

// Constraints returns the OPEN CONSTRAINTS lines to inject while the
// protocol is active: the unmet minimums (with the vendors and the
// domains checked so far), the SCOUT candidate rule, and once the
// minimums are met the conclusion to give if nothing is found.
func (n *NegativeClaim) Constraints() []string {
	off, ind := n.Official(), n.Independent()
	var lines []string
	if mo := n.minOfficial(); len(off) < mo {
		l := "Check at least " + strconv.Itoa(mo) + " official (vendor-owned) domain" + plural(mo)
		if len(n.Vendors) > 0 {
			l += " (owned by " + strings.Join(n.Vendors, ", ") + ")"
		}
		if len(off) > 0 {
			l += "; checked so far: " + strings.Join(off, ", ")
		}
		lines = append(lines, l)
	}
	if mi := n.minIndependent(); len(ind) < mi {
		l := "Check at least " + strconv.Itoa(mi) + " independent domain" + plural(mi)
		lines = append(lines, l)
	}
	lines = append(lines, "Enumerate the candidate set from a cited source before concluding none")
	if met, _ := n.Minimums(); met {
		lines = append(lines, "Source minimums met: if the search finds nothing, conclude "+n.Status())
	}
	return lines
}

// OpenConstraints returns Constraints as the block injected into the
// prompt: "OPEN CONSTRAINTS:" and one "- " line each.
func (n *NegativeClaim) OpenConstraints() string { return constraintBlock(n.Constraints()) }

func constraintBlock(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return "OPEN CONSTRAINTS:\n- " + strings.Join(lines, "\n- ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Clone returns an independent copy.
func (n *NegativeClaim) Clone() NegativeClaim {
	c := *n
	c.Vendors = slices.Clone(n.Vendors)
	c.checked = slices.Clone(n.checked)
	return c
}
