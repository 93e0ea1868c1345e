package verifyfast

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestZoneOf(t *testing.T) {
	want := map[int]Zone{-1: ZoneNone, 0: ZoneNone, 1: ZoneBad, 2: ZoneBad, 3: ZoneMid, 4: ZoneGood, 5: ZoneGood, 6: ZoneNone}
	for score, z := range want {
		if got := ZoneOf(score); got != z {
			t.Errorf("ZoneOf(%d) = %q, want %q", score, got, z)
		}
	}
	for i, z := range Zones() {
		if z.Index() != i {
			t.Errorf("%s.Index() = %d", z, z.Index())
		}
	}
	if ZoneNone.Index() != -1 || Zone("X").Index() != -1 {
		t.Error("Index of a non-zone")
	}
	if ZoneBad.Label() != "BAD(1-2)" || ZoneMid.Label() != "MID(3)" || ZoneGood.Label() != "GOOD(4-5)" {
		t.Error("labels")
	}
	if !CrossBand(ZoneBad, ZoneGood) || !CrossBand(ZoneGood, ZoneBad) || CrossBand(ZoneBad, ZoneMid) || CrossBand(ZoneGood, ZoneGood) {
		t.Error("CrossBand")
	}
}

func TestTags(t *testing.T) {
	tags := Tags()
	if len(tags) != 11 {
		t.Fatalf("%d tags", len(tags))
	}
	want := map[Tag]Zone{
		TagClean: ZoneGood, TagMinorFactual: ZoneGood, TagMinorLogic: ZoneGood, TagMultiMinor: ZoneMid,
		TagMajorFactual: ZoneBad, TagMajorLogic: ZoneBad, TagSevereFactual: ZoneBad, TagSevereLogic: ZoneBad,
		TagSevereMixed: ZoneBad, TagSevereFabrication: ZoneBad, TagSycophancy: ZoneBad,
	}
	for _, tag := range tags {
		score, ok := tag.ExpectedScore()
		if !ok || ZoneOf(score) != want[tag] {
			t.Errorf("%s: score %d (%v), zone %s, want zone %s", tag, score, ok, ZoneOf(score), want[tag])
		}
	}
	if s, _ := TagMajorFactual.ExpectedScore(); s != 2 {
		t.Errorf("major_factual = %d", s)
	}
	if Tag("nope").Valid() {
		t.Error("unknown tag valid")
	}
}

func TestParseLevelsAndSeverities(t *testing.T) {
	for in, want := range map[string]ErrorLevel{
		"Contradiction": LevelContradiction, " unsupported ": LevelUnsupported,
		"Reasonable Inference": LevelReasonableInference, "reasonable-inference": LevelReasonableInference,
		"REASONABLE_INFERENCE": LevelReasonableInference,
	} {
		if got, err := ParseErrorLevel(in); err != nil || got != want {
			t.Errorf("ParseErrorLevel(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseErrorLevel("wrong"); err == nil {
		t.Error("ParseErrorLevel(wrong) accepted")
	}
	for in, want := range map[string]Severity{"High": SeverityHigh, "LOW": SeverityLow, "": SeverityNone, "none": SeverityNone, "N/A": SeverityNone} {
		if got, err := ParseSeverity(in); err != nil || got != want {
			t.Errorf("ParseSeverity(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseSeverity("medium"); err == nil {
		t.Error("ParseSeverity(medium) accepted")
	}
	if LevelReasonableInference.IsError() || !LevelContradiction.IsError() || !LevelUnsupported.IsError() {
		t.Error("IsError")
	}
}

func TestFindingJSONAndValidate(t *testing.T) {
	// As a model might write it.
	var fs []Finding
	err := json.Unmarshal([]byte(`[
		{"kind": "fact", "level": "Contradiction", "severity": "High", "claim": "up 20%", "quote": "down 20%", "reason": "reversed"},
		{"kind": "logic", "level": "Reasonable Inference", "severity": null, "claim": "c"},
		{"kind": "fact", "level": "unsupported", "severity": "low"}
	]`), &fs)
	if err != nil {
		t.Fatal(err)
	}
	if fs[0].Level != LevelContradiction || fs[0].Severity != SeverityHigh || fs[1].Level != LevelReasonableInference || fs[1].Severity != SeverityNone {
		t.Errorf("decoded %+v", fs)
	}
	if err := fs[0].Validate(); err != nil {
		t.Errorf("valid finding: %v", err)
	}
	if err := fs[1].Validate(); err != nil {
		t.Errorf("inference needs no severity or quote: %v", err)
	}
	if err := fs[2].Validate(); err == nil || !strings.Contains(err.Error(), "quote") {
		t.Errorf("missing quote: %v", err)
	}
	if err := (Finding{Kind: "x", Level: LevelUnsupported, Quote: "q"}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "kind") || !strings.Contains(err.Error(), "severity") {
		t.Errorf("bad kind and severity: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"kind": "fact", "level": "maybe"}`), new(Finding)); err == nil {
		t.Error("unknown level decoded")
	}
	if err := json.Unmarshal([]byte(`{"kind": "fact", "level": "unsupported", "severity": "medium"}`), new(Finding)); err == nil {
		t.Error("unknown severity decoded")
	}
	b, _ := json.Marshal(Finding{Kind: KindLogic, Level: LevelReasonableInference})
	if string(b) != `{"kind":"logic","level":"reasonable_inference"}` {
		t.Errorf("marshal = %s", b)
	}
}

func TestDecompositionValidate(t *testing.T) {
	ok := Decomposition{Facts: []string{"a", "b", "c", "d", "e"}, Chains: []string{"a -> b"}}
	if err := ok.Validate(); err != nil {
		t.Errorf("5 facts: %v", err)
	}
	if err := (Decomposition{Facts: []string{"a", "b", "c", "d", "e", "f"}}).Validate(); err == nil {
		t.Error("6 facts accepted")
	}
	if err := (Decomposition{Facts: []string{" "}, Chains: []string{""}}).Validate(); err == nil ||
		!strings.Contains(err.Error(), "facts[0]") || !strings.Contains(err.Error(), "chains[0]") {
		t.Errorf("blank entries: %v", err)
	}
}

func TestNewAndFailedResult(t *testing.T) {
	it := Item{ID: "42", Tag: TagMinorFactual, ExpectedCreditScore: 4}
	r := NewResult(it, "kimi-full", nil, []Finding{factLow, factInfer}, DefaultStrategy().ForProfile("kimi-full"))
	if r.CreditScore != 4 || r.Zone != ZoneGood || r.ExpectedZone != ZoneGood || r.HighCount != 0 || r.LowCount != 1 || r.Failed() || r.Profile != "kimi-full" {
		t.Errorf("NewResult = %+v", r)
	}
	f := FailedResult(it, "kimi-full", "phase 1: no facts")
	if !f.Failed() || f.CreditScore != 0 || f.Zone != ZoneNone || f.ExpectedZone != ZoneGood {
		t.Errorf("FailedResult = %+v", f)
	}
	b, _ := json.Marshal(f)
	if !strings.Contains(string(b), `"id":42,`) || strings.Contains(string(b), `"zone":`) || !strings.Contains(string(b), `"errors":["phase 1: no facts"]`) {
		t.Errorf("failed JSON = %s", b)
	}
	if got := FailedResult(it, "p"); len(got.Errors) != 1 {
		t.Errorf("FailedResult without reasons: %+v", got)
	}
}
