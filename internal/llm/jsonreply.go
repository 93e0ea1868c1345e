package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/vera-run/vera/internal/jsontext"
)

// maxJSONStarts bounds how many '{' ExtractJSONObject tries as the start of
// the object, so that a long reply full of braces costs little.
const maxJSONStarts = 64

var thinkRE = regexp.MustCompile(`(?is)<think>.*?</think>`)

// ExtractJSONObject finds the JSON object in a model reply; every
// component that asks a model for JSON reads the answer with it. It tolerates
// what models wrap around JSON:
//
//   - <think>…</think> reasoning blocks (removed first);
//   - Markdown code fences and prose before or after the object: the first
//     balanced {…} (braces inside strings do not count) that is valid JSON
//     is taken;
//   - trailing commas before } or ], which are removed.
//
// It returns the object's text, or an error saying what is wrong (no
// object, an object cut off, invalid JSON) in words fit to send back to the
// model.
func ExtractJSONObject(reply string) (string, error) {
	s := thinkRE.ReplaceAllString(reply, "")
	if strings.TrimSpace(s) == "" {
		return "", errors.New("the reply is empty: expected one JSON object")
	}
	var firstErr error
	starts := 0
	for i := 0; i < len(s) && starts < maxJSONStarts; i++ {
		if s[i] != '{' {
			continue
		}
		starts++
		end, ok := balancedEnd(s, i)
		if !ok {
			if firstErr == nil {
				firstErr = errors.New("the JSON object is not complete (unbalanced braces or an unterminated string; was the reply cut off?)")
			}
			continue
		}
		cand := s[i:end]
		if json.Valid([]byte(cand)) {
			return cand, nil
		}
		if fixed := removeTrailingCommas(cand); json.Valid([]byte(fixed)) {
			return fixed, nil
		}
		if firstErr == nil {
			err := json.Unmarshal([]byte(cand), new(any))
			firstErr = fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
	}
	if firstErr == nil {
		firstErr = errors.New("no JSON object found in the reply")
	}
	return "", firstErr
}

// balancedEnd returns the end (exclusive) of the {…} starting at s[start],
// skipping braces inside JSON strings.
func balancedEnd(s string, start int) (int, bool) {
	var sc jsontext.Scanner
	for i := start; i < len(s); i++ {
		c := s[i]
		if sc.Step(c) != jsontext.Structure || (c != '}' && c != ']') {
			continue
		}
		switch d := sc.Depth(); {
		case d == 0 && c == '}':
			return i + 1, true
		case d <= 0:
			return 0, false
		}
	}
	return 0, false
}

// removeTrailingCommas drops commas (outside strings) that are followed,
// after blanks, by } or ].
func removeTrailingCommas(s string) string {
	var b strings.Builder
	var sc jsontext.Scanner
	for i := 0; i < len(s); i++ {
		c := s[i]
		if sc.Step(c) == jsontext.Structure && c == ',' {
			j := i + 1
			for j < len(s) && (s[j] == ' ' || s[j] == '\n' || s[j] == '\r' || s[j] == '\t') {
				j++
			}
			if j < len(s) && (s[j] == '}' || s[j] == ']') {
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}
