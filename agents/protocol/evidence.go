package protocol

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// FormatEvidenceID returns the id of the n-th evidence record of a run:
// ev_0001 for 1, ev_12345 for 12345.
func FormatEvidenceID(n int) string { return fmt.Sprintf("ev_%04d", n) }

var evidenceIDRe = regexp.MustCompile(`(?i)^ev[_-]?([0-9]+)$`)

// NormalizeEvidenceID returns the canonical form of an evidence id as a
// model may write it: "ev_1", "EV-0001", "ev1" and "ev_00001" are all
// ev_0001. It reports false for anything else, ev_0 included (ids start at
// 1) and numbers too large to be an id.
func NormalizeEvidenceID(s string) (string, bool) {
	m := evidenceIDRe.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return "", false
	}
	digits := strings.TrimLeft(m[1], "0")
	if digits == "" || len(digits) > 9 {
		return "", false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 1 {
		return "", false
	}
	return FormatEvidenceID(n), true
}

var (
	// evidenceTokenRe finds every ev-like token on an EVIDENCE_USED line:
	// "ev" at a word start, an optional _ or -, then a run of id characters.
	evidenceTokenRe = regexp.MustCompile(`(?i)\bev(?:[_-][^\s,;()\[\]{}<>"'` + "`" + `*|/]*|[0-9][^\s,;()\[\]{}<>"'` + "`" + `*|/]*)`)
)

// parseEvidence reads the value of EVIDENCE_USED: ids (normalised, in order
// of first mention, without duplicates), or none. Prose around ids is
// tolerated; a malformed ev-like token is an error, and so is a value with
// neither an id nor a "none".
func parseEvidence(value string) ([]string, *FormatError) {
	v := strings.TrimSpace(strings.Trim(strings.TrimSpace(value), "*_`"))
	if v == "" {
		return nil, &FormatError{CodeMissingEvidenceUsed, "EVIDENCE_USED is empty. List the evidence ids you rely on (e.g. EVIDENCE_USED: ev_0003, ev_0005) or write EVIDENCE_USED: none."}
	}
	var ids, bad []string
	seen := map[string]bool{}
	for _, tok := range evidenceTokenRe.FindAllString(v, -1) {
		tok = strings.TrimRight(tok, ".:!?")
		id, ok := NormalizeEvidenceID(tok)
		if !ok {
			bad = append(bad, tok)
			continue
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(bad) > 0 {
		return ids, &FormatError{CodeBadEvidenceID, fmt.Sprintf("EVIDENCE_USED has malformed evidence ids: %s. Ids are ev_ followed by the number shown with the observation (e.g. ev_0003), comma-separated; or write none.", quoteList(bad))}
	}
	if len(ids) == 0 && !isNone(v) {
		return nil, &FormatError{CodeBadEvidenceID, fmt.Sprintf("EVIDENCE_USED must list evidence ids (e.g. ev_0003, ev_0005) or say none; got %q.", clip(v, 120))}
	}
	return ids, nil
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(clip(s, 40))
	}
	return strings.Join(q, ", ")
}

// isNone reports whether an EVIDENCE_USED value without ids says "no
// evidence": none (followed by anything), n/a, nothing, "no evidence…", -,
// or an empty list [].
func isNone(v string) bool {
	v = strings.ToLower(strings.Trim(v, "\"'[]() .*_`"))
	if v == "" || v == "-" {
		return true
	}
	first := strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' || r == ';' || r == '.' || r == '(' || r == ':' })
	if len(first) == 0 {
		return false
	}
	switch first[0] {
	case "none", "n/a", "na", "nothing", "nil", "null":
		return true
	}
	return strings.HasPrefix(v, "no evidence")
}
