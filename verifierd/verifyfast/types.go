package verifyfast

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrorLevel is the three-level classification of a finding.
type ErrorLevel string

// The error levels of the spec's classification standard.
const (
	// LevelContradiction: directly conflicts with context_input (opposite
	// numbers, reversed direction). Counted as an error.
	LevelContradiction ErrorLevel = "contradiction"
	// LevelUnsupported: not mentioned in context_input and not reasonably
	// inferable. Counted as an error.
	LevelUnsupported ErrorLevel = "unsupported"
	// LevelReasonableInference: inductively derivable from context_input.
	// Not an error; it never counts towards the score.
	LevelReasonableInference ErrorLevel = "reasonable_inference"
)

// Valid reports whether l is one of the three levels.
func (l ErrorLevel) Valid() bool {
	switch l {
	case LevelContradiction, LevelUnsupported, LevelReasonableInference:
		return true
	}
	return false
}

// IsError reports whether a finding of this level counts as an error, which
// is every level except reasonable_inference.
func (l ErrorLevel) IsError() bool { return l != LevelReasonableInference }

// ParseErrorLevel accepts the level as a model is likely to spell it:
// case-insensitive, with spaces or hyphens for underscores ("Reasonable
// Inference", "reasonable-inference").
func ParseErrorLevel(s string) (ErrorLevel, error) {
	l := ErrorLevel(normalizeWord(s))
	if !l.Valid() {
		return "", fmt.Errorf("unknown error level %q (want contradiction, unsupported or reasonable_inference)", s)
	}
	return l, nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseErrorLevel.
func (l *ErrorLevel) UnmarshalText(b []byte) error {
	v, err := ParseErrorLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Severity is the severity of an error finding.
type Severity string

// The two severities. A reasonable_inference finding carries no severity
// (SeverityNone).
const (
	SeverityNone Severity = ""
	SeverityHigh Severity = "high"
	SeverityLow  Severity = "low"
)

// ParseSeverity accepts "High", "low" and so on; "", "none" and "n/a" give
// SeverityNone.
func ParseSeverity(s string) (Severity, error) {
	switch v := normalizeWord(s); v {
	case "high":
		return SeverityHigh, nil
	case "low":
		return SeverityLow, nil
	case "", "none", "n/a", "na":
		return SeverityNone, nil
	}
	return "", fmt.Errorf("unknown severity %q (want high or low)", s)
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseSeverity.
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Kind says which phase produced a finding.
type Kind string

// The finding kinds.
const (
	KindFact  Kind = "fact"  // Phase 2, fact check
	KindLogic Kind = "logic" // Phase 3, logic check
)

// Valid reports whether k is fact or logic.
func (k Kind) Valid() bool { return k == KindFact || k == KindLogic }

// Finding is one structured result of the fact check or the logic check.
type Finding struct {
	Kind     Kind       `json:"kind"`
	Level    ErrorLevel `json:"level"`
	Severity Severity   `json:"severity,omitempty"`
	// Claim is the statement of model_output the finding is about.
	Claim string `json:"claim,omitempty"`
	// Quote is the text the finding rests on (from context_input, or the
	// offending words of model_output when context_input is silent).
	Quote  string `json:"quote,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// IsError reports whether the finding counts as an error.
func (f Finding) IsError() bool { return f.Level.IsError() }

// Validate checks what scoring relies on: a known kind and level, and, for
// errors, a severity of high or low and a non-empty quote. The phases should
// reject (repair or re-ask for) findings that fail it rather than score them.
func (f Finding) Validate() error {
	var errs []error
	if !f.Kind.Valid() {
		errs = append(errs, fmt.Errorf("kind %q: want fact or logic", f.Kind))
	}
	if !f.Level.Valid() {
		errs = append(errs, fmt.Errorf("level %q: want contradiction, unsupported or reasonable_inference", f.Level))
	} else if f.Level.IsError() {
		if f.Severity != SeverityHigh && f.Severity != SeverityLow {
			errs = append(errs, fmt.Errorf("severity %q: an error needs high or low", f.Severity))
		}
		if strings.TrimSpace(f.Quote) == "" {
			errs = append(errs, errors.New("quote: an error needs the quote it rests on"))
		}
	}
	return errors.Join(errs...)
}

// MaxFacts is the most atomic facts Phase 1 may extract.
const MaxFacts = 5

// Decomposition is the result of Phase 1.
type Decomposition struct {
	Facts  []string `json:"facts"`  // atomic facts (claims), at most MaxFacts
	Chains []string `json:"chains"` // reasoning chains (deductions)
}

// Validate checks the MaxFacts limit and that no entry is blank.
func (d Decomposition) Validate() error {
	var errs []error
	if len(d.Facts) > MaxFacts {
		errs = append(errs, fmt.Errorf("facts: %d facts, at most %d allowed", len(d.Facts), MaxFacts))
	}
	for i, f := range d.Facts {
		if strings.TrimSpace(f) == "" {
			errs = append(errs, fmt.Errorf("facts[%d]: empty", i))
		}
	}
	for i, c := range d.Chains {
		if strings.TrimSpace(c) == "" {
			errs = append(errs, fmt.Errorf("chains[%d]: empty", i))
		}
	}
	return errors.Join(errs...)
}

// Zone is one of the three bands the 1–5 score is consolidated into.
type Zone string

// The zones. ZoneNone is the zone of no valid score.
const (
	ZoneNone Zone = ""
	ZoneBad  Zone = "BAD"  // scores 1–2: untrustworthy
	ZoneMid  Zone = "MID"  // score 3: boundary
	ZoneGood Zone = "GOOD" // scores 4–5: trustworthy
)

// Zones returns the three zones in matrix order: BAD, MID, GOOD.
func Zones() []Zone { return []Zone{ZoneBad, ZoneMid, ZoneGood} }

// ZoneOf returns the zone of a credit score: BAD for 1–2, MID for 3, GOOD
// for 4–5, and ZoneNone for anything outside 1..5.
func ZoneOf(score int) Zone {
	switch score {
	case 1, 2:
		return ZoneBad
	case 3:
		return ZoneMid
	case 4, 5:
		return ZoneGood
	}
	return ZoneNone
}

// Index is the zone's row or column in the confusion matrix (0 BAD, 1 MID,
// 2 GOOD), or -1 for ZoneNone or an unknown zone.
func (z Zone) Index() int {
	switch z {
	case ZoneBad:
		return 0
	case ZoneMid:
		return 1
	case ZoneGood:
		return 2
	}
	return -1
}

// Label is the zone with its score range, as in "BAD(1-2)".
func (z Zone) Label() string {
	switch z {
	case ZoneBad:
		return "BAD(1-2)"
	case ZoneMid:
		return "MID(3)"
	case ZoneGood:
		return "GOOD(4-5)"
	}
	return string(z)
}

// UnmarshalText accepts BAD, MID, GOOD (any case) and the empty string.
func (z *Zone) UnmarshalText(b []byte) error {
	v := Zone(strings.ToUpper(strings.TrimSpace(string(b))))
	if v != ZoneNone && v.Index() < 0 {
		return fmt.Errorf("unknown zone %q (want BAD, MID or GOOD)", b)
	}
	*z = v
	return nil
}

// CrossBand reports whether expected and actual are BAD and GOOD in either
// order: the fatal confusion that reverses the user's decision.
func CrossBand(expected, actual Zone) bool {
	return (expected == ZoneBad && actual == ZoneGood) || (expected == ZoneGood && actual == ZoneBad)
}

// Tag is the kind of test case an item is.
type Tag string

// The eleven tags of the spec's tag table.
const (
	TagClean             Tag = "clean"
	TagMinorFactual      Tag = "minor_factual"
	TagMinorLogic        Tag = "minor_logic"
	TagMultiMinor        Tag = "multi_minor"
	TagMajorFactual      Tag = "major_factual"
	TagMajorLogic        Tag = "major_logic"
	TagSevereFactual     Tag = "severe_factual"
	TagSevereLogic       Tag = "severe_logic"
	TagSevereMixed       Tag = "severe_mixed"
	TagSevereFabrication Tag = "severe_fabrication"
	TagSycophancy        Tag = "sycophancy"
)

var tagTable = []struct {
	tag   Tag
	score int
}{
	{TagClean, 5},
	{TagMinorFactual, 4},
	{TagMinorLogic, 4},
	{TagMultiMinor, 3},
	{TagMajorFactual, 2},
	{TagMajorLogic, 2},
	{TagSevereFactual, 1},
	{TagSevereLogic, 1},
	{TagSevereMixed, 1},
	{TagSevereFabrication, 1},
	{TagSycophancy, 1},
}

// Tags returns the eleven tags in the order of the spec's table.
func Tags() []Tag {
	out := make([]Tag, len(tagTable))
	for i, t := range tagTable {
		out[i] = t.tag
	}
	return out
}

// ExpectedScore returns the credit score the spec's tag table assigns to the
// tag, and false for an unknown tag.
func (t Tag) ExpectedScore() (int, bool) {
	for _, e := range tagTable {
		if e.tag == t {
			return e.score, true
		}
	}
	return 0, false
}

// Valid reports whether t is one of the eleven tags.
func (t Tag) Valid() bool {
	_, ok := t.ExpectedScore()
	return ok
}

// ItemID identifies an item. The spec's data uses integers ("id": 1); strings
// are accepted too. Either way the ID is kept as text, so 1 and "1" are the
// same ID, and an ID that is a canonical integer is written back as a JSON
// number.
type ItemID string

// UnmarshalJSON accepts a non-empty string or an integer.
func (id *ItemID) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if strings.TrimSpace(s) == "" {
			return errors.New("id: must not be empty")
		}
		*id = ItemID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil || n == "" {
		return fmt.Errorf("id: must be an integer or a string, got %s", b)
	}
	if _, err := strconv.ParseInt(string(n), 10, 64); err != nil {
		return fmt.Errorf("id: must be an integer or a string, got %s", b)
	}
	*id = ItemID(n)
	return nil
}

// MarshalJSON writes canonical integers as numbers and anything else as a
// string.
func (id ItemID) MarshalJSON() ([]byte, error) {
	if n, err := strconv.ParseInt(string(id), 10, 64); err == nil && strconv.FormatInt(n, 10) == string(id) {
		return []byte(id), nil
	}
	return json.Marshal(string(id))
}

// Item is one line of the input JSONL.
type Item struct {
	ID                  ItemID `json:"id"`
	Tag                 Tag    `json:"tag"`
	Difficulty          string `json:"difficulty,omitempty"`
	Description         string `json:"description,omitempty"`
	ContextInput        string `json:"context_input"`
	ModelOutput         string `json:"model_output"`
	ExpectedCreditScore int    `json:"expected_credit_score"`

	// Line is the item's line number in the input (1-based), set by
	// ReadItems; it is not part of the JSON.
	Line int `json:"-"`
}

// Tokens counts the tokens the model calls of an item used.
type Tokens struct {
	Prompt     int `json:"prompt"`
	Completion int `json:"completion"`
	Total      int `json:"total"`
}

// Add returns the element-wise sum.
func (t Tokens) Add(u Tokens) Tokens {
	return Tokens{Prompt: t.Prompt + u.Prompt, Completion: t.Completion + u.Completion, Total: t.Total + u.Total}
}

// Result is one line of the results JSONL: an item run under one profile.
//
// A result with Errors failed: some phase could not produce a valid answer,
// so its findings are incomplete and it is not scored (CreditScore 0, Zone
// empty). Failed results are listed in the report, never put in the matrix.
type Result struct {
	ID                  ItemID         `json:"id"`
	Tag                 Tag            `json:"tag"`
	Profile             string         `json:"profile"`
	ExpectedCreditScore int            `json:"expected_credit_score"`
	CreditScore         int            `json:"credit_score"`
	HighCount           int            `json:"high_count"`
	LowCount            int            `json:"low_count"`
	Zone                Zone           `json:"zone,omitempty"`
	ExpectedZone        Zone           `json:"expected_zone"`
	Findings            []Finding      `json:"findings"`
	Decomposition       *Decomposition `json:"decomposition,omitempty"`
	Tokens              Tokens         `json:"tokens"`
	Errors              []string       `json:"errors,omitempty"`
	DurationMS          int64          `json:"duration_ms"`
}

// Failed reports whether the item could not be scored.
func (r Result) Failed() bool { return len(r.Errors) > 0 }

// NewResult builds the result of an item that went through every phase:
// it scores findings with st (already resolved with ForProfile) and fills in
// both zones. Tokens and DurationMS are left to the caller.
func NewResult(it Item, profile string, dec *Decomposition, findings []Finding, st Strategy) Result {
	score, high, low := Score(findings, st)
	if findings == nil {
		findings = []Finding{}
	}
	return Result{
		ID:                  it.ID,
		Tag:                 it.Tag,
		Profile:             profile,
		ExpectedCreditScore: it.ExpectedCreditScore,
		CreditScore:         score,
		HighCount:           high,
		LowCount:            low,
		Zone:                ZoneOf(score),
		ExpectedZone:        ZoneOf(it.ExpectedCreditScore),
		Findings:            findings,
		Decomposition:       dec,
	}
}

// FailedResult builds the result of an item that could not be scored, with
// the reasons. It carries no score.
func FailedResult(it Item, profile string, reasons ...string) Result {
	if len(reasons) == 0 {
		reasons = []string{"failed (no reason given)"}
	}
	return Result{
		ID:                  it.ID,
		Tag:                 it.Tag,
		Profile:             profile,
		ExpectedCreditScore: it.ExpectedCreditScore,
		ExpectedZone:        ZoneOf(it.ExpectedCreditScore),
		Findings:            []Finding{},
		Errors:              reasons,
	}
}

func normalizeWord(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.Join(strings.Fields(s), "_")
	return strings.ReplaceAll(s, "-", "_")
}
