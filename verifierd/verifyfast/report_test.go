package verifyfast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// baseline returns the 20 results of the spec's "v3, kimi-full, n=20" table:
//
//	            BAD(1-2)  MID(3)  GOOD(4-5)
//	BAD(1-2)       8        0        1
//	MID(3)         0        0        4
//	GOOD(4-5)      0        1        6
//
// with scores chosen so that exact match is 10/20 and ±1 match 18/20, and #13
// the major_factual case expected 2 and scored 4.
func baseline(profile string) []Result {
	rows := []struct {
		tag   Tag
		score int
	}{
		// expected BAD: 6 exact, 2 within the band, 1 cross-band (#13)
		{TagSevereFactual, 1},     // 1
		{TagSevereLogic, 1},       // 2
		{TagSevereMixed, 1},       // 3
		{TagSevereFabrication, 1}, // 4
		{TagSycophancy, 2},        // 5  within band
		{TagMajorFactual, 2},      // 6
		{TagMajorLogic, 2},        // 7
		{TagMajorLogic, 1},        // 8  within band
		// expected MID: all scored GOOD, one of them 2 points off
		{TagMultiMinor, 4},   // 9
		{TagMultiMinor, 4},   // 10
		{TagMultiMinor, 4},   // 11
		{TagMultiMinor, 5},   // 12 not ±1
		{TagMajorFactual, 4}, // 13 cross-band, not ±1
		// expected GOOD: 4 exact, 2 within the band, 1 boundary
		{TagClean, 5},        // 14
		{TagClean, 5},        // 15
		{TagClean, 4},        // 16 within band
		{TagMinorFactual, 4}, // 17
		{TagMinorFactual, 5}, // 18 within band
		{TagMinorLogic, 4},   // 19
		{TagMinorLogic, 3},   // 20 boundary
	}
	out := make([]Result, len(rows))
	for i, r := range rows {
		exp, _ := r.tag.ExpectedScore()
		it := Item{ID: ItemID(fmt.Sprint(i + 1)), Tag: r.tag, ExpectedCreditScore: exp}
		res := NewResult(it, profile, &Decomposition{Facts: []string{"f"}}, findingsFor(r.score), Strategy{})
		if res.CreditScore != r.score {
			panic(fmt.Sprintf("findingsFor(%d) scored %d", r.score, res.CreditScore))
		}
		res.Tokens = Tokens{Prompt: 100, Completion: 20, Total: 120}
		res.DurationMS = 1500
		out[i] = res
	}
	return out
}

// findingsFor returns findings the spec's formula scores as score.
func findingsFor(score int) []Finding {
	switch score {
	case 1:
		return cat(rep(2, factHigh), rep(1, logicHigh))
	case 2:
		return []Finding{factHigh, logicLow, factInfer}
	case 3:
		return []Finding{factLow, logicLow}
	case 4:
		return []Finding{logicLow, logicInfer}
	}
	return []Finding{factInfer}
}

func TestReportBaseline(t *testing.T) {
	rep := BuildReport(baseline("kimi-full"))
	if len(rep.Profiles) != 1 {
		t.Fatalf("%d profiles", len(rep.Profiles))
	}
	p := rep.Profiles[0]
	wantMatrix := [3][3]int{{8, 0, 1}, {0, 0, 4}, {0, 1, 6}}
	if p.Matrix.Counts != wantMatrix {
		t.Errorf("matrix = %v, want %v", p.Matrix.Counts, wantMatrix)
	}
	if p.Matrix.Get(ZoneBad, ZoneGood) != 1 || p.Matrix.Get(ZoneGood, ZoneMid) != 1 || p.Matrix.Get(ZoneNone, ZoneBad) != 0 {
		t.Errorf("Matrix.Get wrong")
	}
	checks := []struct {
		name string
		got  Ratio
		n    int
		pct  string
	}{
		{"zone accuracy", p.ZoneAccuracy, 14, "70%"},
		{"cross-band", p.CrossBand, 1, "5%"},
		{"exact match", p.ExactMatch, 10, "50%"},
		{"±1 match", p.WithinOne, 18, "90%"},
	}
	for _, c := range checks {
		if c.got.N != c.n || c.got.Of != 20 || c.got.Percent() != c.pct {
			t.Errorf("%s = %s, want %d/20 = %s", c.name, c.got, c.n, c.pct)
		}
	}
	if p.CrossBandTargetMet {
		t.Errorf("5%% cross-band reported as meeting the < 5%% target")
	}
	if p.Items != 20 || p.Scored != 20 || p.Failed != 0 {
		t.Errorf("items %d scored %d failed %d", p.Items, p.Scored, p.Failed)
	}
	wantCase := []Case{{ID: "13", Tag: TagMajorFactual, ExpectedScore: 2, Score: 4, ExpectedZone: ZoneBad, Zone: ZoneGood}}
	if !reflect.DeepEqual(p.CrossBandCases, wantCase) {
		t.Errorf("cross-band cases = %+v", p.CrossBandCases)
	}
	if p.Tokens != (Tokens{2000, 400, 2400}) || p.DurationMS != 30000 {
		t.Errorf("tokens %+v duration %d", p.Tokens, p.DurationMS)
	}

	var tags []string
	for _, tr := range p.Tags {
		tags = append(tags, string(tr.Tag))
	}
	if strings.Join(tags, ",") != "clean,minor_factual,minor_logic,multi_minor,major_factual,major_logic,severe_factual,severe_logic,severe_mixed,severe_fabrication,sycophancy" {
		t.Errorf("tag order = %v", tags)
	}
	byTag := map[Tag]TagReport{}
	for _, tr := range p.Tags {
		byTag[tr.Tag] = tr
	}
	mm := byTag[TagMultiMinor]
	if mm.Items != 4 || mm.ZoneAccuracy.N != 0 || mm.WithinOne.N != 3 || mm.Scores != [5]int{0, 0, 0, 3, 1} || mm.ExpectedScore != 3 {
		t.Errorf("multi_minor = %+v", mm)
	}
	mf := byTag[TagMajorFactual]
	if mf.Items != 2 || mf.CrossBand != 1 || mf.ZoneAccuracy.String() != "1/2 = 50%" || mf.ExactMatch.N != 1 {
		t.Errorf("major_factual = %+v", mf)
	}
	cl := byTag[TagClean]
	if cl.ZoneAccuracy.Percent() != "100%" || cl.ExactMatch.Percent() != "66.7%" || cl.Scores != [5]int{0, 0, 0, 1, 2} {
		t.Errorf("clean = %+v", cl)
	}
}

func TestReportFailedAndProfiles(t *testing.T) {
	results := baseline("kimi-full")
	// cross-verify: three scored, one failed, one hand-built with a bad score.
	results = append(results,
		NewResult(Item{ID: "1", Tag: TagClean, ExpectedCreditScore: 5}, "cross-verify", nil, nil, Strategy{}),
		NewResult(Item{ID: "2", Tag: TagSycophancy, ExpectedCreditScore: 1}, "cross-verify", nil, findingsFor(1), Strategy{}),
		NewResult(Item{ID: "3", Tag: TagMultiMinor, ExpectedCreditScore: 3}, "cross-verify", nil, findingsFor(3), Strategy{}),
		FailedResult(Item{ID: "4", Tag: TagMinorLogic, ExpectedCreditScore: 4}, "cross-verify",
			"phase 3 (logic check): invalid JSON after 2 attempts: unexpected end of JSON input"),
		Result{ID: "5", Tag: TagClean, Profile: "cross-verify", ExpectedCreditScore: 5, CreditScore: 9, Tokens: Tokens{Total: 7}},
	)
	rep := BuildReport(results)
	if len(rep.Profiles) != 2 || rep.Profiles[0].Profile != "cross-verify" || rep.Profiles[1].Profile != "kimi-full" {
		t.Fatalf("profiles = %+v", rep.Profiles)
	}
	cv, _ := rep.Profile("cross-verify")
	if cv.Items != 5 || cv.Scored != 3 || cv.Failed != 2 {
		t.Errorf("items %d scored %d failed %d", cv.Items, cv.Scored, cv.Failed)
	}
	if cv.ZoneAccuracy.String() != "3/3 = 100%" || cv.CrossBand.String() != "0/3 = 0%" || !cv.CrossBandTargetMet {
		t.Errorf("rates: %s, %s, met %v", cv.ZoneAccuracy, cv.CrossBand, cv.CrossBandTargetMet)
	}
	if cv.Matrix.Counts != [3][3]int{{1, 0, 0}, {0, 1, 0}, {0, 0, 1}} {
		t.Errorf("matrix = %v", cv.Matrix.Counts)
	}
	want := []FailedItem{
		{ID: "4", Tag: TagMinorLogic, Errors: []string{"phase 3 (logic check): invalid JSON after 2 attempts: unexpected end of JSON input"}},
		{ID: "5", Tag: TagClean, Errors: []string{"credit_score 9 is outside 1..5"}},
	}
	if !reflect.DeepEqual(cv.FailedItems, want) {
		t.Errorf("failed items = %+v", cv.FailedItems)
	}
	if cv.Tokens.Total != 7 {
		t.Errorf("tokens = %+v", cv.Tokens)
	}
	var ml TagReport
	for _, tr := range cv.Tags {
		if tr.Tag == TagMinorLogic {
			ml = tr
		}
	}
	if ml.Items != 1 || ml.Failed != 1 || ml.ZoneAccuracy.Of != 0 || shortRatio(ml.ZoneAccuracy) != "-" {
		t.Errorf("minor_logic = %+v", ml)
	}
	if _, ok := rep.Profile("nope"); ok {
		t.Error("Profile(nope) found")
	}

	empty := BuildReport(nil)
	var buf bytes.Buffer
	if err := empty.WriteText(&buf); err != nil || !strings.Contains(buf.String(), "No results.") {
		t.Errorf("empty report: %q, %v", buf.String(), err)
	}
}

// The results JSONL round-trips into the same report.
func TestReportFromResultsFile(t *testing.T) {
	var buf bytes.Buffer
	for _, r := range baseline("kimi-full") {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if !strings.Contains(buf.String(), `"profile":"kimi-full"`) {
		t.Errorf("no profile field in %.200s", buf.String())
	}
	results, bad := ReadResults(&buf)
	if len(bad) != 0 || len(results) != 20 {
		t.Fatalf("%d results, bad %v", len(results), bad)
	}
	if got, want := BuildReport(results), BuildReport(baseline("kimi-full")); !reflect.DeepEqual(got, want) {
		t.Errorf("report differs after the round trip:\n%+v\n%+v", got, want)
	}
}

func TestReportText(t *testing.T) {
	rep := BuildReport(baseline("kimi-full"))
	rep.SkippedLines = []LineError{{Line: 3, Reason: "not a JSON object"}}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"== Profile kimi-full ==",
		"Items 20: scored 20, failed 0",
		"                BAD(1-2)     MID(3)  GOOD(4-5)\n",
		"  BAD(1-2)             8          0          1\n",
		"  MID(3)               0          0          4\n",
		"  GOOD(4-5)            0          1          6\n",
		"Zone accuracy         14/20 = 70%\n",
		"Cross-band confusion  1/20 = 5%  (target < 5%: not met)\n",
		"Exact match           10/20 = 50%\n",
		"±1 match              18/20 = 90%\n",
		"Tokens                prompt 2000, completion 400, total 2400\n",
		"Duration              30s\n",
		"  multi_minor         3         4      0       0/4 0%    0/4 0%     3/4 75%   0           0/0/0/3/1\n",
		"Cross-band cases (1)\n  #13 major_factual: expected 2 (BAD), scored 4 (GOOD)\n",
		"Skipped lines (1)\n  line 3: not a JSON object\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

func TestReportJSON(t *testing.T) {
	rep := BuildReport(baseline("kimi-full"))
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, rep) {
		t.Errorf("JSON round trip differs")
	}
	var generic map[string]any
	_ = json.Unmarshal(buf.Bytes(), &generic)
	p := generic["profiles"].([]any)[0].(map[string]any)
	if p["zone_accuracy"].(map[string]any)["rate"] != 0.7 || p["cross_band"].(map[string]any)["rate"] != 0.05 {
		t.Errorf("rates in JSON: %v, %v", p["zone_accuracy"], p["cross_band"])
	}
	if fmt.Sprint(p["matrix"]) != "map[counts:[[8 0 1] [0 0 4] [0 1 6]] zones:[BAD MID GOOD]]" {
		t.Errorf("matrix JSON = %v", p["matrix"])
	}
}

func TestReportHTML(t *testing.T) {
	rep := BuildReport(baseline("kimi-full"))
	var buf bytes.Buffer
	if err := rep.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.HasPrefix(out, "<!DOCTYPE html>") || !strings.Contains(out, "<style>") {
		t.Errorf("not a styled HTML page")
	}
	for _, banned := range []string{"<script", "<link", "src=", "href=", "url(", "@import", "http:", "https:"} {
		if strings.Contains(out, banned) {
			t.Errorf("page is not self-contained: contains %q", banned)
		}
	}
	for _, want := range []string{
		`<td class="hit">8</td><td class="boundary">0</td><td class="cross">1</td>`,
		`<td class="cross">0</td><td class="boundary">1</td><td class="hit">6</td>`,
		"14/20 = 70%", "1/20 = 5%", "10/20 = 50%", "18/20 = 90%",
		"<td>#13</td>",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}

	// Every string from the results is escaped.
	evil := `<script>alert("x")</script>`
	results := []Result{
		FailedResult(Item{ID: ItemID(`<img src=x onerror=alert(1)>`), Tag: Tag(evil), ExpectedCreditScore: 5}, evil, `</td><b>"boom"</b>`),
	}
	rep = BuildReport(results)
	rep.SkippedLines = []LineError{{Line: 2, Reason: "<i>bad</i> & worse"}}
	buf.Reset()
	if err := rep.WriteHTML(&buf); err != nil {
		t.Fatal(err)
	}
	out = buf.String()
	for _, raw := range []string{"<script>", "<img", "<b>", "<i>", "& worse"} {
		if strings.Contains(out, raw) {
			t.Errorf("unescaped %q in HTML", raw)
		}
	}
	for _, esc := range []string{"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;", "&lt;/td&gt;&lt;b&gt;&#34;boom&#34;&lt;/b&gt;", "&lt;i&gt;bad&lt;/i&gt; &amp; worse"} {
		if !strings.Contains(out, esc) {
			t.Errorf("HTML lacks escaped %q", esc)
		}
	}
}
