package verifyfast

import (
	"strings"
	"testing"
)

func TestParseDecomposition(t *testing.T) {
	d, err := ParseDecomposition(`{"facts": [" a ", "b"]}`)
	if err != nil || len(d.Facts) != 2 || d.Facts[0] != "a" || d.Chains == nil || len(d.Chains) != 0 {
		t.Errorf("got %+v, %v", d, err)
	}
	for in, want := range map[string]string{
		`{"chains": []}`:                              `"facts": required field missing`,
		`{"facts": ["a", " "], "chains": [""]}`:       "facts[1]: empty; chains[0]: empty",
		`{"facts": [1]}`:                              "JSON does not follow the schema",
		`{"facts": ["1","2","3","4","5","6"]}`:        "6 facts, at most 5 allowed",
		`{"facts": "one"}`:                            "JSON does not follow the schema",
		"```\n{\"facts\": [\"a\"], \"chains\": []}\n": "", // unclosed fence is fine
	} {
		_, err := ParseDecomposition(in)
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
	}
}

func TestParseFindings(t *testing.T) {
	fs, err := ParseFindings(`{"findings": [
		{"claim": "c1", "level": "Contradiction", "severity": "High", "quote": " q1 ", "reason": "r"},
		{"claim": "c2", "level": "Reasonable Inference", "severity": "low"},
		{"claim": "c3", "level": "unsupported", "severity": "LOW", "quote": "q3"},
		{"claim": "c4", "level": "reasonable-inference", "severity": null}
	]}`, KindLogic)
	if err != nil {
		t.Fatal(err)
	}
	want := []Finding{
		{Kind: KindLogic, Level: LevelContradiction, Severity: SeverityHigh, Claim: "c1", Quote: "q1", Reason: "r"},
		{Kind: KindLogic, Level: LevelReasonableInference, Claim: "c2"},
		{Kind: KindLogic, Level: LevelUnsupported, Severity: SeverityLow, Claim: "c3", Quote: "q3"},
		{Kind: KindLogic, Level: LevelReasonableInference, Claim: "c4"},
	}
	if len(fs) != len(want) {
		t.Fatalf("got %+v", fs)
	}
	for i := range want {
		if fs[i] != want[i] {
			t.Errorf("finding %d = %+v, want %+v", i, fs[i], want[i])
		}
	}
	if fs, err := ParseFindings(`{"findings": []}`, KindFact); err != nil || fs == nil || len(fs) != 0 {
		t.Errorf("empty findings: %v, %v", fs, err)
	}

	for in, want := range map[string]string{
		`{}`:               `"findings": required field missing`,
		`{"findings": {}}`: "JSON does not follow the schema",
		`{"findings": [{"level": "wrong", "severity": "high", "quote": "q"}]}`:                                                                    `findings[0]: level: unknown error level "wrong"`,
		`{"findings": [{"level": "contradiction", "quote": "q"}]}`:                                                                                `findings[0]: severity "": an error needs high or low`,
		`{"findings": [{"level": "unsupported", "severity": "high"}]}`:                                                                            "findings[0]: quote: an error needs the quote it rests on",
		`{"findings": [{"level": "unsupported", "severity": "high", "quote": "q"}, {"level": "contradiction", "severity": "mid", "quote": "q"}]}`: `findings[1]: severity: unknown severity "mid"`,
	} {
		_, err := ParseFindings(in, KindFact)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: multi-line error %q", in, err)
		}
	}
}

func TestPrompts(t *testing.T) {
	st := DefaultStrategy()
	for _, p := range Phases() {
		msgs, err := PhaseMessages(p, NewPromptData("THE CONTEXT", "THE OUTPUT", &Decomposition{Facts: []string{"fact one"}, Chains: []string{"a -> b"}}, st.ForProfile("kimi-full").Effective()))
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 2 || msgs[0].Role != "system" || msgs[1].Role != "user" {
			t.Fatalf("%v: messages %+v", p, msgs)
		}
		sys, user := msgs[0].Content, msgs[1].Content
		if !strings.Contains(user, "<context_input>\nTHE CONTEXT\n</context_input>") || !strings.Contains(user, "<model_output>\nTHE OUTPUT\n</model_output>") {
			t.Errorf("%v: inputs missing from\n%s", p, user)
		}
		if !strings.Contains(sys, "JSON") || !strings.Contains(sys, "TASK: ") {
			t.Errorf("%v: no schema or task marker", p)
		}
		switch p {
		case PhaseDecompose:
			if !strings.Contains(sys, "at most 5 atomic facts") {
				t.Errorf("decompose prompt lacks the fact limit")
			}
		case PhaseFactCheck:
			for _, want := range []string{"| contradiction |", "| unsupported |", "| reasonable_inference |", "NOT an error",
				"numerical deviation above 8% with the opposite direction", "at most 8% with the same direction",
				"numeric_deviation_threshold = 0.08", "Report at most 3 errors", "1. fact one", "fabrication"} {
				if !strings.Contains(sys+user, want) {
					t.Errorf("fact-check prompt lacks %q", want)
				}
			}
		case PhaseLogicCheck:
			for _, want := range []string{"Causal direction completely reversed", "sycophancy", "Overgeneralization", "1. a -> b", "Report at most 3 errors"} {
				if !strings.Contains(sys+user, want) {
					t.Errorf("logic-check prompt lacks %q", want)
				}
			}
		}
	}
	// No cap: nothing said about one.
	msgs, _ := PhaseMessages(PhaseFactCheck, NewPromptData("c", "o", nil, Strategy{}.Effective()))
	if strings.Contains(msgs[0].Content, "Report at most") || !strings.Contains(msgs[0].Content, "above 10%") {
		t.Errorf("uncapped prompt:\n%s", msgs[0].Content)
	}
	if !strings.Contains(msgs[1].Content, "(none extracted") {
		t.Errorf("no facts: %s", msgs[1].Content)
	}
	r, err := RepairMessage("bad thing")
	if err != nil || r.Role != "user" || !strings.Contains(r.Content, "bad thing") {
		t.Errorf("repair = %+v, %v", r, err)
	}
	if _, err := PhaseMessages(Phase(9), PromptData{}); err == nil {
		t.Error("unknown phase rendered")
	}
	if PhaseLogicCheck.String() != "phase 3 (logic check)" {
		t.Error(PhaseLogicCheck.String())
	}
}
