package deepverify

import (
	"github.com/vera-run/vera/internal/domain"

	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

// SCOUT rule names as recorded in catalog.ScoreCap.Rule.
const (
	RuleUnknownLoadBearing    = "unknown_load_bearing"
	RuleNegativeClaimCoverage = "negative_claim_coverage"
	RuleIndependentCitations  = "independent_citations"
)

// ScoutCap is the highest score a SCOUT rule allows.
const ScoutCap = 2

// Citation is a source supporting the answer: a URL or a sandbox path, with
// the text seen there (an evidence excerpt) when known.
type Citation struct {
	Ref     string
	Excerpt string
}

// Scout applies the SCOUT gating rules to an answer, given the round's
// checks and the citations supporting the answer (the answer's own URLs and
// the evidence it cites). It returns the highest score allowed (4 when no
// rule applies) and the caps that applied, with their reasons. The checks'
// citations and evidence count as support when their result is yes.
//
//  1. unknown_load_bearing: a load-bearing check came back unknown.
//  2. negative_claim_coverage: the answer makes a negative claim ("none",
//     "never", "no official announcement", …) and no cited source either
//     enumerates a candidate set or asserts the negative collectively.
//  3. independent_citations: fewer than two distinct registrable domains
//     support the answer.
func Scout(answer string, checks []catalog.AuditCheck, citations []Citation) (int, []catalog.ScoreCap) {
	var caps []catalog.ScoreCap
	var unknown []string
	for _, c := range checks {
		if c.LoadBearing && c.Result == catalog.CheckUnknown {
			unknown = append(unknown, c.CheckID)
		}
	}
	if len(unknown) > 0 {
		caps = append(caps, catalog.ScoreCap{Rule: RuleUnknownLoadBearing, Cap: ScoutCap,
			Reason: "load-bearing check(s) unknown: " + strings.Join(unknown, ", ")})
	}

	support := append([]Citation(nil), citations...)
	for _, c := range checks {
		if c.Result != catalog.CheckYes {
			continue
		}
		for _, ref := range c.Citations {
			support = append(support, Citation{Ref: ref, Excerpt: c.Evidence})
		}
		if len(c.Citations) == 0 && c.Evidence != "" {
			support = append(support, Citation{Ref: c.Source, Excerpt: c.Evidence})
		}
	}

	if cue := NegativeClaimCue(answer); cue != "" {
		if !coversNegative(support) {
			caps = append(caps, catalog.ScoreCap{Rule: RuleNegativeClaimCoverage, Cap: ScoutCap,
				Reason: fmt.Sprintf("negative claim (%q) without a candidate set enumerated from a cited source or a source asserting it collectively", cue)})
		}
	}

	domains := IndependentDomains(support)
	if len(domains) < 2 {
		reason := "no web citation supports the answer"
		if len(domains) == 1 {
			reason = "all citations are on one domain: " + domains[0]
		}
		caps = append(caps, catalog.ScoreCap{Rule: RuleIndependentCitations, Cap: ScoutCap,
			Reason: reason + " (two independent domains are required)"})
	}
	allowed := 4
	for _, c := range caps {
		allowed = min(allowed, c.Cap)
	}
	return allowed, caps
}

// ApplyCap returns score limited to allowed.
func ApplyCap(score, allowed int) int { return max(1, min(score, allowed)) }

var negativeCues = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bno official (announcement|statement|release|confirmation|source)\b`),
	regexp.MustCompile(`(?i)\bno (one|body)\b|\bnobody\b`),
	regexp.MustCompile(`(?i)\bnone\b`),
	regexp.MustCompile(`(?i)\bnever\b`),
	regexp.MustCompile(`(?i)\b(has|have|had|did|does|do|is|are|was|were)\s*(not|n't)\s+(yet\s+)?(been\s+)?(announc|releas|launch|publish|exist|found|made|happen)`),
	regexp.MustCompile(`(?i)\b(hasn't|haven't|hadn't|didn't|doesn't|don't|isn't|aren't|wasn't|weren't)\s+(yet\s+)?(been\s+)?(announc|releas|launch|publish|exist|found|made|happen)`),
	regexp.MustCompile(`(?i)\bno (evidence|record|mention|announcement|results?)\b`),
	regexp.MustCompile(`(?i)\bnot (yet )?(been )?(announced|released|launched|available)\b`),
	regexp.MustCompile(`(?i)\bdoes not exist\b|\bno such\b`),
}

// NegativeClaimCue returns the first negative-claim wording found in the
// answer ("none", "never", "no official announcement", …), or "".
func NegativeClaimCue(answer string) string {
	for _, re := range negativeCues {
		if m := re.FindString(answer); m != "" {
			return strings.ToLower(m)
		}
	}
	return ""
}

var (
	listLine   = regexp.MustCompile(`(?m)^\s*(?:[-*•]|\d+[.)]|\|)\s*\S`)
	collective = regexp.MustCompile(`(?i)\b(none of (the|these|them)|complete list|full list|exhaustive|comprehensive list|all (known|of the)|every (one|single)|no other|the only)\b`)
)

// coversNegative reports whether some cited source enumerates a candidate
// set (at least three list items: bullets, numbered lines or table rows) or
// asserts the negative collectively.
func coversNegative(support []Citation) bool {
	for _, c := range support {
		if IsCandidateSet(c.Excerpt) || collective.MatchString(c.Excerpt) {
			return true
		}
	}
	return false
}

// IsCandidateSet reports whether text enumerates a candidate set: three or
// more list items (bullets, numbered lines or table rows).
func IsCandidateSet(text string) bool {
	return len(listLine.FindAllStringIndex(text, -1)) >= 3
}

// IndependentDomains returns the distinct registrable domains (eTLD+1) of
// the citations that are URLs, sorted.
func IndependentDomains(cs []Citation) []string {
	seen := map[string]bool{}
	for _, c := range cs {
		for _, u := range urlsIn(c.Ref) {
			if d := RegistrableDomain(u); d != "" {
				seen[d] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

var urlRe = regexp.MustCompile(`(?i)\bhttps?://[^\s"'<>()\[\]{}` + "`" + `]+`)

// URLs returns the http(s) URLs in text, trailing punctuation trimmed.
func URLs(text string) []string {
	ms := urlRe.FindAllString(text, -1)
	for i, m := range ms {
		ms[i] = strings.TrimRight(m, ".,;:!?")
	}
	return ms
}

func urlsIn(ref string) []string {
	ref = strings.TrimSpace(ref)
	if us := URLs(ref); len(us) > 0 {
		return us
	}
	return nil
}

// RegistrableDomain returns the registrable domain (eTLD+1) of a URL or
// host: www.bbc.co.uk → bbc.co.uk, docs.python.org → python.org. It knows
// single-label suffixes and a list of common multi-part ones; IP addresses
// are returned as they are, "" when there is no host.
func RegistrableDomain(urlOrHost string) string { return domain.Registrable(urlOrHost) }
