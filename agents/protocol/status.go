package protocol

import (
	"fmt"
	"regexp"
	"strings"
)

// State is the epistemic state a STATUS_UPDATE line declares.
type State string

// States.
const (
	// StateResolved: the answer is established by cited evidence.
	StateResolved State = "RESOLVED"
	// StateUnresolved: the answer is not established; Reason says what is
	// missing (required).
	StateUnresolved State = "UNRESOLVED"
	// StateContinue: work goes on ("continuing").
	StateContinue State = "CONTINUE"
)

// StatusUpdate is the parsed STATUS_UPDATE line.
type StatusUpdate struct {
	State  State
	Reason string // why UNRESOLVED (required); an optional note otherwise
	Raw    string // the value as written
}

// String returns the canonical form: RESOLVED, CONTINUE, UNRESOLVED(reason),
// or STATE(note) when a note was given; "" for the zero value.
func (s StatusUpdate) String() string {
	if s.State == "" {
		return ""
	}
	if s.Reason == "" {
		return string(s.State)
	}
	return string(s.State) + "(" + s.Reason + ")"
}

var statusRe = regexp.MustCompile(`(?i)^(unresolved|resolved|continuing|continue|in[ _-]?progress)\b(.*)$`)

// parseStatus reads the value of STATUS_UPDATE.
func parseStatus(value string) (StatusUpdate, *FormatError) {
	raw := strings.TrimSpace(value)
	v := strings.TrimSpace(strings.Trim(raw, "*_`\"'"))
	su := StatusUpdate{Raw: raw}
	if v == "" {
		return su, &FormatError{CodeMissingStatusUpdate, "STATUS_UPDATE is empty. End with STATUS_UPDATE: continuing, STATUS_UPDATE: UNRESOLVED(<what is missing>) or STATUS_UPDATE: RESOLVED."}
	}
	m := statusRe.FindStringSubmatch(v)
	if m == nil {
		return su, &FormatError{CodeBadStatusUpdate, fmt.Sprintf("STATUS_UPDATE must be continuing, UNRESOLVED(<reason>) or RESOLVED; got %q.", clip(v, 120))}
	}
	switch strings.ToLower(m[1]) {
	case "unresolved":
		su.State = StateUnresolved
	case "resolved":
		su.State = StateResolved
	default:
		su.State = StateContinue
	}
	su.Reason = statusReason(m[2])
	if su.State == StateUnresolved && su.Reason == "" {
		return su, &FormatError{CodeBadStatusUpdate, "UNRESOLVED needs a reason saying what is missing, e.g. STATUS_UPDATE: UNRESOLVED(no official source for the date yet)."}
	}
	return su, nil
}

// statusReason extracts the reason or note after the state word: the text
// inside parentheses, or the text after a separator.
func statusReason(rest string) string {
	r := strings.TrimSpace(strings.TrimLeft(rest, "*_`"))
	if strings.HasPrefix(r, "(") {
		r = r[1:]
		if i := strings.LastIndex(r, ")"); i >= 0 {
			r = r[:i]
		}
	} else {
		r = strings.TrimLeft(r, ":-=–—> \t")
	}
	return strings.TrimSpace(strings.Trim(strings.TrimSpace(r), "*_`.\"'"))
}
