package report

import (
	"bytes"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/vera-run/vera/eval"
)

func renderCompareHTML(t *testing.T, c Comparison) string {
	t.Helper()
	var b bytes.Buffer
	if err := CompareHTML(&b, c); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// laterReport is the fixture's eval run again: no-audit now gets t2 right
// (first = final = 3/5); audit3 gets t1 wrong and t4 right, with only t3
// right at the first answer (first 1/5, final still 4/5).
func laterReport() eval.Report {
	r := fixtureReport()
	r.EvalID = "01JEVALLATER00000000000000"
	r.Name = "smoke-later"
	r.DashboardURL = "http://127.0.0.1:9090/"
	r.Results = fixtureResults()
	for i := range r.Results {
		res := &r.Results[i]
		res.RunID = strings.Replace(res.RunID, "run-", "later-", 1)
		switch res.TaskID + "/" + res.Profile {
		case "t2/no-audit", "t4/audit3":
			res.Correct = true
		case "t1/audit3":
			res.Correct = false
		}
	}
	r.Profiles[0].FirstAccuracy, r.Profiles[0].FinalAccuracy = 0.6, 0.6
	r.Profiles[1].FirstAccuracy, r.Profiles[1].FinalAccuracy = 0.2, 0.8
	return r
}

func TestCompare(t *testing.T) {
	c := Compare(fixtureReport(), laterReport())
	want := []ProfileComparison{
		{Profile: "no-audit", ProfileB: "no-audit", ScoredA: 5, ScoredB: 5, FirstA: 0.4, FirstB: 0.6, FinalA: 0.4, FinalB: 0.6,
			FirstDelta: 0.6 - 0.4, FinalDelta: 0.6 - 0.4, Common: 5, Differ: 1},
		{Profile: "audit3", ProfileB: "audit3", ScoredA: 5, ScoredB: 5, FirstA: 0.4, FirstB: 0.2, FinalA: 0.8, FinalB: 0.8,
			FirstDelta: 0.2 - 0.4, FinalDelta: 0, Common: 5, Differ: 2},
	}
	// Deltas are float differences: compare them within a tolerance,
	// then the rest exactly.
	got := append([]ProfileComparison(nil), c.Profiles...)
	for i := range got {
		if i < len(want) {
			for _, d := range [][2]*float64{{&got[i].FirstDelta, &want[i].FirstDelta}, {&got[i].FinalDelta, &want[i].FinalDelta}} {
				if math.Abs(*d[0]-*d[1]) > 1e-12 {
					t.Errorf("profile %d: delta %v, want %v", i, *d[0], *d[1])
				}
				*d[0], *d[1] = 0, 0
			}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("profiles:\n got %+v\nwant %+v", got, want)
	}
	wantDiffs := []TaskDiff{
		{TaskID: "t1", Profile: "audit3", ACorrect: true, BCorrect: false, ARunID: "run-t1-a3", BRunID: "later-t1-a3"},
		{TaskID: "t2", Profile: "no-audit", ACorrect: false, BCorrect: true, ARunID: "run-t2-na", BRunID: "later-t2-na"},
		{TaskID: "t4", Profile: "audit3", ACorrect: false, BCorrect: true, ARunID: "run-t4-a3", BRunID: "later-t4-a3"},
	}
	if !reflect.DeepEqual(c.Diffs, wantDiffs) {
		t.Errorf("diffs:\n got %+v\nwant %+v", c.Diffs, wantDiffs)
	}
	if len(c.OnlyA)+len(c.OnlyB) != 0 {
		t.Errorf("unmatched profiles %v %v, want none", c.OnlyA, c.OnlyB)
	}
	if c.A.EvalID != "01JEVALFIXTURE0000000000AA" || c.B.EvalID != "01JEVALLATER00000000000000" || c.A.Scored != 10 || c.B.Expected != 10 {
		t.Errorf("sides: %+v %+v", c.A, c.B)
	}

	var b bytes.Buffer
	if err := CompareText(&b, c); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	golden(t, "compare.txt", b.Bytes())
	wantRows(t, "accuracy", section(t, text, "Accuracy, A against B"),
		[]string{"profile", "first A", "first B", "Δ first", "final A", "final B", "Δ final", "tasks in both", "differ"},
		[]string{"no-audit", "40.0% (2/5)", "60.0% (3/5)", "+20.0 pts", "40.0% (2/5)", "60.0% (3/5)", "+20.0 pts", "5", "1"},
		[]string{"audit3", "40.0% (2/5)", "20.0% (1/5)", "-20.0 pts", "80.0% (4/5)", "80.0% (4/5)", "+0.0 pts", "5", "2"},
	)
	wantRows(t, "diffs", section(t, text, "Tasks whose final answer differs (3)"),
		[]string{"task", "profile", "A", "B", "A run", "B run"},
		[]string{"t1", "audit3", "correct", "wrong", "run-t1-a3", "later-t1-a3"},
		[]string{"t2", "no-audit", "wrong", "correct", "run-t2-na", "later-t2-na"},
		[]string{"t4", "audit3", "wrong", "correct", "run-t4-a3", "later-t4-a3"},
	)
	if strings.Contains(text, "Profiles without a match") {
		t.Error("an unmatched-profiles section with every profile matched")
	}

	page := renderCompareHTML(t, c)
	// B's runs link to B's dashboard; A has none, so its runs are plain text.
	for _, want := range []string{
		`<a class="run-link" href="http://127.0.0.1:9090/#run=later-t4-a3">later-t4-a3</a>`,
		`<td>run-t4-a3</td>`,
		`<td>audit3</td><td>40.0% (2/5)</td><td>20.0% (1/5)</td><td>-20.0 pts</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("comparison page lacks %s", want)
		}
	}
	if n := strings.Count(page, "href="); n != 3 {
		t.Errorf("%d links, want 3 (B's runs)", n)
	}
}

// TestCompareSingleProfiles: one profile each, of different names, are
// compared with each other.
func TestCompareSingleProfiles(t *testing.T) {
	a, b := fixtureReport(), laterReport()
	a.Profiles = a.Profiles[1:]
	b.Profiles = b.Profiles[1:]
	b.Profiles[0].Name = "audit5"
	var keepA, keepB = a.Results[:0:0], b.Results[:0:0]
	for _, res := range a.Results {
		if res.Profile == "audit3" {
			keepA = append(keepA, res)
		}
	}
	for _, res := range b.Results {
		if res.Profile == "audit3" {
			res.Profile = "audit5"
			keepB = append(keepB, res)
		}
	}
	a.Results, b.Results = keepA, keepB

	c := Compare(a, b)
	if len(c.Profiles) != 1 || c.Profiles[0].Label() != "audit3 vs audit5" || c.Profiles[0].Differ != 2 || c.Profiles[0].Common != 5 {
		t.Fatalf("profiles: %+v", c.Profiles)
	}
	if len(c.Diffs) != 2 || c.Diffs[0].TaskID != "t1" || c.Diffs[1].TaskID != "t4" || c.Diffs[1].BRunID != "later-t4-a3" {
		t.Errorf("diffs: %+v", c.Diffs)
	}
}

// TestCompareUnmatched: profiles are matched by name; the others are
// listed, and their tasks are not compared.
func TestCompareUnmatched(t *testing.T) {
	a, b := fixtureReport(), laterReport()
	b.Profiles[0].Name = "audit5"
	for i := range b.Results {
		if b.Results[i].Profile == "no-audit" {
			b.Results[i].Profile = "audit5"
		}
	}
	c := Compare(a, b)
	if len(c.Profiles) != 1 || c.Profiles[0].Profile != "audit3" {
		t.Fatalf("profiles: %+v", c.Profiles)
	}
	if !reflect.DeepEqual(c.OnlyA, []string{"no-audit"}) || !reflect.DeepEqual(c.OnlyB, []string{"audit5"}) {
		t.Errorf("unmatched: %v %v", c.OnlyA, c.OnlyB)
	}
	for _, d := range c.Diffs {
		if d.Profile != "audit3" {
			t.Errorf("a diff of an unmatched profile: %+v", d)
		}
	}
	var b2 bytes.Buffer
	if err := CompareText(&b2, c); err != nil {
		t.Fatal(err)
	}
	wantRows(t, "unmatched", section(t, b2.String(), "Profiles without a match"),
		[]string{"eval", "profile"}, []string{"A", "no-audit"}, []string{"B", "audit5"})
}
