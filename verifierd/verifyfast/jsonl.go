package verifyfast

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// LineError is a JSONL line that was skipped, with the reason.
type LineError struct {
	Line   int    `json:"line"` // 1-based
	Reason string `json:"reason"`
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// eachLine calls fn with every non-blank line (number, bytes without the
// line ending). A read error is reported as a LineError on the line it
// happened at and ends the reading.
func eachLine(r io.Reader, fn func(n int, line []byte)) (readErr *LineError) {
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\ufeff"))
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if err != nil && err != io.EOF {
				return &LineError{Line: n, Reason: "read error: " + err.Error()}
			}
			fn(n, t)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return &LineError{Line: n, Reason: "read error: " + err.Error()}
		}
	}
}

// rawObject decodes a JSON object line into its raw fields.
func rawObject(line []byte) (map[string]json.RawMessage, string) {
	if !json.Valid(line) {
		err := json.Unmarshal(line, new(any))
		return nil, "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	if line[0] != '{' {
		return nil, "not a JSON object"
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	return m, ""
}

func isJSONNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// fieldDecoder decodes the fields of one line, collecting reasons.
type fieldDecoder struct {
	m       map[string]json.RawMessage
	reasons []string
}

func (f *fieldDecoder) failf(format string, args ...any) {
	f.reasons = append(f.reasons, fmt.Sprintf(format, args...))
}

// get returns the raw field; a missing or null required field is reported.
func (f *fieldDecoder) get(name string, required bool) (json.RawMessage, bool) {
	raw, ok := f.m[name]
	if !ok || isJSONNull(raw) {
		if required {
			f.failf("%s: required field missing", name)
		}
		return nil, false
	}
	return raw, true
}

func (f *fieldDecoder) str(name string, required, nonEmpty bool) string {
	raw, ok := f.get(name, required)
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		f.failf("%s: must be a string, got %s", name, short(raw))
		return ""
	}
	if nonEmpty && strings.TrimSpace(s) == "" {
		f.failf("%s: must not be empty", name)
	}
	return s
}

func (f *fieldDecoder) score(name string, required bool) int {
	raw, ok := f.get(name, required)
	if !ok {
		return 0
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil {
		f.failf("%s: must be an integer 1..5, got %s", name, short(raw))
		return 0
	}
	if v < 1 || v > 5 {
		f.failf("%s: must be 1..5, got %d", name, v)
		return 0
	}
	return v
}

func (f *fieldDecoder) id() ItemID {
	raw, ok := f.get("id", true)
	if !ok {
		return ""
	}
	var id ItemID
	if err := json.Unmarshal(raw, &id); err != nil {
		f.failf("%s", err.Error())
		return ""
	}
	return id
}

func short(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

// ReadItems reads the input JSONL and validates every line: valid JSON
// object; id (integer or non-empty string, unique), tag (one of Tags()),
// context_input and model_output (non-empty strings) and
// expected_credit_score (integer 1..5, equal to the tag's score in the
// spec's tag table) present; difficulty and description strings if present.
// Other fields are ignored. Blank lines are skipped silently.
//
// Bad lines are returned in bad, by line number with every reason, and left
// out of items. For a duplicate id the first valid line wins. A read error
// ends the input and is reported as a LineError on the line it happened at.
func ReadItems(r io.Reader) (items []Item, bad []LineError) {
	firstLine := map[ItemID]int{}
	readErr := eachLine(r, func(n int, line []byte) {
		m, reason := rawObject(line)
		if reason != "" {
			bad = append(bad, LineError{n, reason})
			return
		}
		f := &fieldDecoder{m: m}
		it := Item{Line: n}
		it.ID = f.id()
		it.Tag = Tag(f.str("tag", true, true))
		it.Difficulty = f.str("difficulty", false, false)
		it.Description = f.str("description", false, false)
		it.ContextInput = f.str("context_input", true, true)
		it.ModelOutput = f.str("model_output", true, true)
		it.ExpectedCreditScore = f.score("expected_credit_score", true)
		if it.Tag != "" {
			if want, ok := it.Tag.ExpectedScore(); !ok {
				f.failf("tag: unknown tag %q (want one of %s)", it.Tag, tagList())
			} else if it.ExpectedCreditScore != 0 && it.ExpectedCreditScore != want {
				f.failf("expected_credit_score: tag %q means score %d, got %d", it.Tag, want, it.ExpectedCreditScore)
			}
		}
		if len(f.reasons) == 0 {
			if first, dup := firstLine[it.ID]; dup {
				f.failf("id: duplicate id %s (first on line %d)", it.ID, first)
			}
		}
		if len(f.reasons) > 0 {
			bad = append(bad, LineError{n, strings.Join(f.reasons, "; ")})
			return
		}
		firstLine[it.ID] = n
		items = append(items, it)
	})
	if readErr != nil {
		bad = append(bad, *readErr)
	}
	return items, bad
}

func tagList() string {
	tags := Tags()
	s := make([]string, len(tags))
	for i, t := range tags {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}

// ReadResults reads a results JSONL for the report, skipping bad lines and
// returning them by number with the reason. A line is bad when it is not a
// JSON object of Result shape, lacks id, profile or expected_credit_score
// (1..5), or is inconsistent: a scored result (no errors) needs
// credit_score 1..5, a failed one must carry no score, and zone /
// expected_zone, when present, must match the scores. Unknown fields are
// ignored, so do tags outside the spec's table.
//
// When the same (profile, id) appears more than once (a resumed run that
// retried an item), the last line wins and each earlier one is reported as
// superseded.
func ReadResults(r io.Reader) (results []Result, bad []LineError) {
	type key struct {
		profile string
		id      ItemID
	}
	type at struct{ line, index int }
	seen := map[key]at{}
	readErr := eachLine(r, func(n int, line []byte) {
		m, reason := rawObject(line)
		if reason != "" {
			bad = append(bad, LineError{n, reason})
			return
		}
		f := &fieldDecoder{m: m}
		f.id()
		f.str("profile", true, true)
		f.score("expected_credit_score", true)
		var res Result
		if len(f.reasons) == 0 {
			if err := json.Unmarshal(line, &res); err != nil {
				f.failf("%s", strings.TrimPrefix(err.Error(), "json: "))
			} else {
				f.reasons = append(f.reasons, checkResult(res, m)...)
			}
		}
		if len(f.reasons) > 0 {
			bad = append(bad, LineError{n, strings.Join(f.reasons, "; ")})
			return
		}
		k := key{res.Profile, res.ID}
		if prev, dup := seen[k]; dup {
			bad = append(bad, LineError{prev.line, fmt.Sprintf("superseded by line %d (same profile %q and id %s)", n, res.Profile, res.ID)})
			results[prev.index] = res
			seen[k] = at{n, prev.index}
			return
		}
		seen[k] = at{n, len(results)}
		results = append(results, res)
	})
	if readErr != nil {
		bad = append(bad, *readErr)
	}
	sortLineErrors(bad)
	return results, bad
}

func checkResult(res Result, m map[string]json.RawMessage) []string {
	var reasons []string
	failf := func(format string, args ...any) { reasons = append(reasons, fmt.Sprintf(format, args...)) }
	if res.Failed() {
		if res.CreditScore != 0 {
			failf("credit_score: a failed result (with errors) must not carry a score, got %d", res.CreditScore)
		}
		if res.Zone != ZoneNone {
			failf("zone: a failed result (with errors) has no zone, got %s", res.Zone)
		}
	} else {
		if _, ok := m["credit_score"]; !ok {
			failf("credit_score: required field missing (and no errors)")
		} else if ZoneOf(res.CreditScore) == ZoneNone {
			failf("credit_score: must be 1..5, got %d", res.CreditScore)
		} else if res.Zone != ZoneNone && res.Zone != ZoneOf(res.CreditScore) {
			failf("zone: %s does not match credit_score %d", res.Zone, res.CreditScore)
		}
	}
	if res.ExpectedZone != ZoneNone && res.ExpectedZone != ZoneOf(res.ExpectedCreditScore) {
		failf("expected_zone: %s does not match expected_credit_score %d", res.ExpectedZone, res.ExpectedCreditScore)
	}
	if res.HighCount < 0 || res.LowCount < 0 {
		failf("high_count, low_count: must not be negative")
	}
	for i, e := range res.Errors {
		if strings.TrimSpace(e) == "" {
			failf("errors[%d]: empty reason", i)
		}
	}
	return reasons
}

func sortLineErrors(es []LineError) {
	slices.SortStableFunc(es, func(a, b LineError) int { return a.Line - b.Line })
}
