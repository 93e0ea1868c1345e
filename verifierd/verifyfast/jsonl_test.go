package verifyfast

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReadItems(t *testing.T) {
	input := strings.Join([]string{
		/* 1 */ `{"id": 1, "tag": "clean", "difficulty": "easy", "description": "d", "context_input": "ctx", "model_output": "out", "expected_credit_score": 5}`,
		/* 2 */ `{"id": "b-2", "tag": "major_factual", "context_input": "ctx", "model_output": "out", "expected_credit_score": 2, "extra": true}`,
		/* 3 */ `not json`,
		/* 4 */ ``,
		/* 5 */ `{"id": 3, "tag": "clean", "context_input": "ctx", "model_output": "out", "expected_credit_score": 4}`,
		/* 6 */ `{"id": 4, "tag": "fabulous", "context_input": "ctx", "model_output": "out", "expected_credit_score": 1}`,
		/* 7 */ `{"id": 1, "tag": "sycophancy", "context_input": "ctx", "model_output": "out", "expected_credit_score": 1}`,
		/* 8 */ `{"id": 5, "tag": "multi_minor", "context_input": "", "expected_credit_score": "3"}`,
		/* 9 */ `[1, 2]`,
		/* 10 */ `{"id": 6.5, "tag": "clean", "context_input": "ctx", "model_output": "out", "expected_credit_score": 6}`,
		/* 11 */ `{"id": null, "tag": "clean", "context_input": "ctx", "model_output": "out", "expected_credit_score": 5, "difficulty": 3}`,
		/* 12 */ "   \t",
		/* 13 */ `{"id": 7, "tag": "severe_mixed", "context_input": "c", "model_output": "o", "expected_credit_score": 1}` + "\r",
		/* 14 */ `{"id": "1", "tag": "clean", "context_input": "ctx", "model_output": "out", "expected_credit_score": 5}`,
		/* 15 */ `{"id": 8, "tag": "clean", "context_input": "ctx", "model_output": "out", "expected_credit_score": 5`,
	}, "\n")
	items, bad := ReadItems(strings.NewReader(input))
	var ids []string
	for _, it := range items {
		ids = append(ids, string(it.ID)+"@"+itoa(it.Line))
	}
	if got := strings.Join(ids, " "); got != "1@1 b-2@2 7@13" {
		t.Errorf("items = %s", got)
	}
	if items[0].Difficulty != "easy" || items[0].Description != "d" || items[0].ContextInput != "ctx" || items[0].ModelOutput != "out" || items[0].ExpectedCreditScore != 5 || items[0].Tag != TagClean {
		t.Errorf("item 1 = %+v", items[0])
	}
	want := []string{
		`line 3: invalid JSON: invalid character 'o' in literal null (expecting 'u')`,
		`line 5: expected_credit_score: tag "clean" means score 5, got 4`,
		`line 6: tag: unknown tag "fabulous" (want one of clean, minor_factual, minor_logic, multi_minor, major_factual, major_logic, severe_factual, severe_logic, severe_mixed, severe_fabrication, sycophancy)`,
		`line 7: id: duplicate id 1 (first on line 1)`,
		`line 8: context_input: must not be empty; model_output: required field missing; expected_credit_score: must be an integer 1..5, got "3"`,
		`line 9: not a JSON object`,
		`line 10: id: must be an integer or a string, got 6.5; expected_credit_score: must be 1..5, got 6`,
		`line 11: id: required field missing; difficulty: must be a string, got 3`,
		`line 14: id: duplicate id 1 (first on line 1)`,
		`line 15: invalid JSON: unexpected end of JSON input`,
	}
	var got []string
	for _, b := range bad {
		got = append(got, b.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("bad lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestReadItemsEveryTag(t *testing.T) {
	var b strings.Builder
	for i, tag := range Tags() {
		score, _ := tag.ExpectedScore()
		line, _ := json.Marshal(Item{ID: ItemID(itoa(i + 1)), Tag: tag, ContextInput: "c", ModelOutput: "o", ExpectedCreditScore: score})
		b.Write(line)
		b.WriteByte('\n')
	}
	items, bad := ReadItems(strings.NewReader("\ufeff" + b.String()))
	if len(items) != 11 || len(bad) != 0 {
		t.Fatalf("items %d, bad %v", len(items), bad)
	}
	if !strings.HasPrefix(b.String(), `{"id":1,`) {
		t.Errorf("integer id not written as a number: %.20s", b.String())
	}
}

func TestReadItemsLongLineAndReadError(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	input := `{"id": 1, "tag": "clean", "context_input": "` + long + `", "model_output": "o", "expected_credit_score": 5}` + "\n"
	items, bad := ReadItems(strings.NewReader(input))
	if len(items) != 1 || len(bad) != 0 || len(items[0].ContextInput) != len(long) {
		t.Fatalf("long line: %d items, bad %v", len(items), bad)
	}

	r := iotest.DataErrReader(strings.NewReader(input + `{"id": 2, "tag": "cle`))
	r = &failAfter{r: r, err: errors.New("disk on fire")}
	items, bad = ReadItems(r)
	if len(items) != 1 || len(bad) != 1 || bad[0].Line != 2 || !strings.Contains(bad[0].Reason, "read error: disk on fire") {
		t.Errorf("read error: %d items, bad %v", len(items), bad)
	}
}

// failAfter returns err instead of io.EOF.
type failAfter struct {
	r   interface{ Read([]byte) (int, error) }
	err error
}

func (f *failAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err != nil {
		err = f.err
	}
	return n, err
}

func TestItemID(t *testing.T) {
	for _, tt := range []struct{ in, want, out string }{
		{`1`, "1", `1`},
		{`-3`, "-3", `-3`},
		{`"abc"`, "abc", `"abc"`},
		{`"7"`, "7", `7`},
		{`"007"`, "007", `"007"`},
	} {
		var id ItemID
		if err := json.Unmarshal([]byte(tt.in), &id); err != nil || string(id) != tt.want {
			t.Errorf("Unmarshal(%s) = %q, %v", tt.in, id, err)
		}
		if b, _ := json.Marshal(id); string(b) != tt.out {
			t.Errorf("Marshal(%q) = %s, want %s", id, b, tt.out)
		}
	}
	for _, in := range []string{`1.5`, `1e3`, `""`, `true`, `{}`} {
		var id ItemID
		if err := json.Unmarshal([]byte(in), &id); err == nil {
			t.Errorf("Unmarshal(%s) accepted", in)
		}
	}
}

func TestReadResults(t *testing.T) {
	good := func(id, profile string, expected, score int) string {
		r := Result{ID: ItemID(id), Tag: TagClean, Profile: profile, ExpectedCreditScore: expected, CreditScore: score,
			Zone: ZoneOf(score), ExpectedZone: ZoneOf(expected), Findings: []Finding{}, Tokens: Tokens{1, 2, 3}}
		b, _ := json.Marshal(r)
		return string(b)
	}
	input := strings.Join([]string{
		/* 1 */ good("1", "p", 5, 5),
		/* 2 */ `{"id": 2, "tag": "clean", "profile": "p", "expected_credit_score": 5, "errors": ["phase 2: invalid JSON after 2 attempts: unexpected end"], "future_field": 1}`,
		/* 3 */ `{"id": 3, "tag": "clean", "profile": "p", "expected_credit_score": 5}`,
		/* 4 */ `{"id": 4, "tag": "clean", "profile": "p", "expected_credit_score": 5, "credit_score": 4, "zone": "BAD"}`,
		/* 5 */ `{"id": 5, "tag": "clean", "profile": "p", "expected_credit_score": 5, "credit_score": 3, "errors": ["x"]}`,
		/* 6 */ `{"id": 6, "tag": "clean", "expected_credit_score": 5, "credit_score": 5}`,
		/* 7 */ `{"id": 7, "tag": "clean", "profile": "p", "expected_credit_score": 5, "credit_score": 5, "zone": "GREAT"}`,
		/* 8 */ `{"id": 8, "tag": "clean", "profile": "p", "expected_credit_score": 5, "credit_score": 5, "findings": [{"kind": "fact", "level": "Reasonable Inference"}]}`,
		/* 9 */ `{"id": 2, "tag": "clean", "profile": "p", "expected_credit_score": 5, "credit_score": 5}`,
		/* 10 */ good("1", "q", 5, 4),
		/* 11 */ `{"id": 9, "tag": "new_tag", "profile": "p", "expected_credit_score": 4, "expected_zone": "GOOD", "credit_score": 4}`,
		/* 12 */ `garbage`,
		/* 13 */ `{"id": 10, "tag": "clean", "profile": "p", "expected_credit_score": 4, "expected_zone": "MID", "credit_score": 4}`,
	}, "\n")
	results, bad := ReadResults(strings.NewReader(input))
	var got []string
	for _, r := range results {
		got = append(got, r.Profile+"/"+string(r.ID))
	}
	if strings.Join(got, " ") != "p/1 p/2 p/8 q/1 p/9" {
		t.Errorf("results = %v", got)
	}
	if results[1].Failed() || results[1].CreditScore != 5 {
		t.Errorf("line 9 did not supersede line 2: %+v", results[1])
	}
	if results[2].Findings[0].Level != LevelReasonableInference {
		t.Errorf("level not normalized: %+v", results[2].Findings)
	}
	want := []string{
		`line 2: superseded by line 9 (same profile "p" and id 2)`,
		`line 3: credit_score: required field missing (and no errors)`,
		`line 4: zone: BAD does not match credit_score 4`,
		`line 5: credit_score: a failed result (with errors) must not carry a score, got 3`,
		`line 6: profile: required field missing`,
		`line 7: unknown zone "GREAT" (want BAD, MID or GOOD)`,
		`line 12: invalid JSON: invalid character 'g' looking for beginning of value`,
		`line 13: expected_zone: MID does not match expected_credit_score 4`,
	}
	got = got[:0]
	for _, b := range bad {
		got = append(got, b.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("bad lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
