package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
)

// Comparison sets two evals side by side: per profile the first and final
// accuracy of each and the change from A to B, and the tasks whose final
// correctness differs.
type Comparison struct {
	A, B EvalSide
	// Profiles are the profiles compared, in A's order: those of the same
	// name in both, or, when each eval has exactly one profile and their
	// names differ, those two.
	Profiles []ProfileComparison
	// OnlyA and OnlyB are the profiles without a match on the other side.
	OnlyA, OnlyB []string
	// Diffs are the tasks, under a compared profile and scored in both
	// evals, whose final answer is correct in one and not the other; in
	// A's result order (task, then profile).
	Diffs []TaskDiff
}

// EvalSide identifies one eval of a Comparison.
type EvalSide struct {
	EvalID   string
	Name     string
	TaskSet  string
	Tasks    int
	Scored   int
	Expected int
	// DashboardURL is the eval's Report.DashboardURL: CompareHTML links
	// the side's runs to it when set.
	DashboardURL string
}

// ProfileComparison is one profile's figures in both evals. Deltas are B
// minus A, as fractions (0.1 = ten percentage points).
type ProfileComparison struct {
	// Profile is the profile's name in A; ProfileB its name in B (the same
	// unless two single profiles of different names are compared).
	Profile, ProfileB string
	ScoredA, ScoredB  int
	FirstA, FirstB    float64
	FinalA, FinalB    float64
	FirstDelta        float64
	FinalDelta        float64
	// Common is how many tasks were scored under the profile in both
	// evals; Differ how many of them differ in final correctness.
	Common, Differ int
}

// Label names the profile for people: its name, or "a vs b" when the
// two sides' names differ.
func (p ProfileComparison) Label() string {
	if p.Profile == p.ProfileB {
		return p.Profile
	}
	return p.Profile + " vs " + p.ProfileB
}

// TaskDiff is a task whose final correctness differs between the evals.
type TaskDiff struct {
	TaskID string
	// Profile is the profile's name in A (see ProfileComparison).
	Profile            string
	ACorrect, BCorrect bool
	ARunID, BRunID     string
}

// Compare compares eval a with eval b. Profiles are matched by name; when
// each eval has exactly one profile and the names differ, those two are
// compared.
func Compare(a, b eval.Report) Comparison {
	c := Comparison{A: side(a), B: side(b)}
	pair := map[string]string{} // A's profile name → B's
	if len(a.Profiles) == 1 && len(b.Profiles) == 1 && a.Profiles[0].Name != b.Profiles[0].Name {
		pair[a.Profiles[0].Name] = b.Profiles[0].Name
	} else {
		inB := map[string]bool{}
		for _, p := range b.Profiles {
			inB[p.Name] = true
		}
		for _, p := range a.Profiles {
			if inB[p.Name] {
				pair[p.Name] = p.Name
			} else {
				c.OnlyA = append(c.OnlyA, p.Name)
			}
		}
		for _, p := range b.Profiles {
			if _, ok := pair[p.Name]; !ok {
				c.OnlyB = append(c.OnlyB, p.Name)
			}
		}
	}

	type key struct{ task, profile string }
	bResults := map[key]catalog.EvalTaskScored{}
	for _, res := range b.Results {
		bResults[key{res.TaskID, res.Profile}] = res
	}
	common, differ := map[string]int{}, map[string]int{}
	for _, ra := range a.Results {
		nameB, ok := pair[ra.Profile]
		if !ok {
			continue
		}
		rb, ok := bResults[key{ra.TaskID, nameB}]
		if !ok {
			continue
		}
		common[ra.Profile]++
		if ra.Correct != rb.Correct {
			differ[ra.Profile]++
			c.Diffs = append(c.Diffs, TaskDiff{TaskID: ra.TaskID, Profile: ra.Profile,
				ACorrect: ra.Correct, BCorrect: rb.Correct, ARunID: ra.RunID, BRunID: rb.RunID})
		}
	}

	for _, pa := range a.Profiles {
		nameB, ok := pair[pa.Name]
		if !ok {
			continue
		}
		for _, pb := range b.Profiles {
			if pb.Name != nameB {
				continue
			}
			c.Profiles = append(c.Profiles, ProfileComparison{
				Profile: pa.Name, ProfileB: pb.Name,
				ScoredA: pa.Scored, ScoredB: pb.Scored,
				FirstA: pa.FirstAccuracy, FirstB: pb.FirstAccuracy,
				FinalA: pa.FinalAccuracy, FinalB: pb.FinalAccuracy,
				FirstDelta: pb.FirstAccuracy - pa.FirstAccuracy,
				FinalDelta: pb.FinalAccuracy - pa.FinalAccuracy,
				Common:     common[pa.Name], Differ: differ[pa.Name],
			})
			break
		}
	}
	return c
}

func side(r eval.Report) EvalSide {
	s := EvalSide{EvalID: r.EvalID, Name: r.Name, TaskSet: r.TaskSet, Tasks: r.Tasks,
		Expected: r.Expected, DashboardURL: r.DashboardURL}
	for _, p := range r.Profiles {
		s.Scored += p.Scored
	}
	return s
}

// delta formats a change of accuracy in percentage points, with its sign.
func delta(d float64) string {
	pts := math.Round(d*1000) / 10
	if pts == 0 {
		pts = 0 // no "-0.0"
	}
	return fmt.Sprintf("%+.1f pts", pts)
}

func sideHeader(s EvalSide) [][2]string {
	return [][2]string{
		{"eval", s.EvalID},
		{"name", s.Name},
		{"task set", s.TaskSet},
		{"tasks", fmt.Sprint(s.Tasks)},
		{"scored", fmt.Sprintf("%d/%d", s.Scored, s.Expected)},
	}
}

func compareProfilesTable(c Comparison) table {
	t := table{ID: "table-compare", Title: "Accuracy, A against B",
		Head:  []string{"profile", "first A", "first B", "Δ first", "final A", "final B", "Δ final", "tasks in both", "differ"},
		Empty: "no profile to compare (no profile names in common)"}
	for _, p := range c.Profiles {
		t.Rows = append(t.Rows, []string{p.Label(),
			accuracy(p.FirstA, p.ScoredA), accuracy(p.FirstB, p.ScoredB), delta(p.FirstDelta),
			accuracy(p.FinalA, p.ScoredA), accuracy(p.FinalB, p.ScoredB), delta(p.FinalDelta),
			fmt.Sprint(p.Common), fmt.Sprint(p.Differ)})
	}
	return t
}

func unmatchedTable(c Comparison) table {
	t := table{ID: "table-unmatched", Title: "Profiles without a match",
		Head: []string{"eval", "profile"}, Empty: "none"}
	for _, n := range c.OnlyA {
		t.Rows = append(t.Rows, []string{"A", n})
	}
	for _, n := range c.OnlyB {
		t.Rows = append(t.Rows, []string{"B", n})
	}
	return t
}

func diffTable(c Comparison) table {
	t := table{ID: "table-diffs", Title: fmt.Sprintf("Tasks whose final answer differs (%d)", len(c.Diffs)),
		Head: []string{"task", "profile", "A", "B", "A run", "B run"}, Empty: "none"}
	for _, d := range c.Diffs {
		t.Rows = append(t.Rows, []string{d.TaskID, d.Profile, rightWrong(d.ACorrect), rightWrong(d.BCorrect), d.ARunID, d.BRunID})
	}
	return t
}

func rightWrong(ok bool) string {
	if ok {
		return "correct"
	}
	return "wrong"
}

// CompareText writes c for a terminal: the two evals, per profile the
// first and final accuracy of each and the change, the profiles without a
// match, and the tasks whose final answer differs.
func CompareText(w io.Writer, c Comparison) error {
	var b strings.Builder
	for i, s := range []EvalSide{c.A, c.B} {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "%s\n", []string{"A", "B"}[i])
		for _, kv := range sideHeader(s) {
			fmt.Fprintf(&b, "  %-9s %s\n", kv[0], oneLine(kv[1]))
		}
	}
	tables := []table{compareProfilesTable(c)}
	if len(c.OnlyA)+len(c.OnlyB) > 0 {
		tables = append(tables, unmatchedTable(c))
	}
	tables = append(tables, diffTable(c))
	for _, t := range tables {
		b.WriteString("\n")
		if err := t.writeText(&b); err != nil {
			return fmt.Errorf("comparison of %s and %s as text: %w", c.A.EvalID, c.B.EvalID, err)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write comparison of %s and %s as text: %w", c.A.EvalID, c.B.EvalID, err)
	}
	return nil
}

type comparePage struct {
	Title string
	A, B  [][2]string
	Chart chart
	// Tables are the profile figures and the unmatched profiles; Diffs is
	// the per-task table, with links to the runs.
	Tables []table
	Diffs  []diffRow
}

type diffRow struct {
	TaskID, Profile string
	A, B            mark
	ARun, BRun      string
	AURL, BURL      string
}

// CompareHTML writes c as one self-contained HTML page: a chart of each
// compared profile's first and final accuracy in A (solid) and B
// (dashed), the tables of CompareText, and links to the runs when the
// evals' DashboardURL is set.
func CompareHTML(w io.Writer, c Comparison) error {
	p := comparePage{
		Title:  fmt.Sprintf("Eval %s against %s", orID(c.A), orID(c.B)),
		A:      sideHeader(c.A),
		B:      sideHeader(c.B),
		Chart:  compareChart(c),
		Tables: []table{compareProfilesTable(c), unmatchedTable(c)},
	}
	for _, d := range c.Diffs {
		row := diffRow{TaskID: d.TaskID, Profile: d.Profile, A: correctMark(d.ACorrect, true), B: correctMark(d.BCorrect, true),
			ARun: d.ARunID, BRun: d.BRunID}
		if c.A.DashboardURL != "" && d.ARunID != "" {
			row.AURL = c.A.DashboardURL + "#run=" + d.ARunID
		}
		if c.B.DashboardURL != "" && d.BRunID != "" {
			row.BURL = c.B.DashboardURL + "#run=" + d.BRunID
		}
		p.Diffs = append(p.Diffs, row)
	}
	return render(w, "compare", p, fmt.Sprintf("comparison of %s and %s", c.A.EvalID, c.B.EvalID))
}

func orID(s EvalSide) string {
	if s.Name != "" {
		return s.Name
	}
	return s.EvalID
}

// compareChart draws each compared profile's first and final accuracy:
// A as a solid line, B as a dashed one, in the profile's colour.
func compareChart(c Comparison) chart {
	ch := newChart("chart-compare", "First and final accuracy, A against B", 760, 360)
	cols := []string{"first", "final"}
	ch.XLabel = "answer"
	for i, col := range cols {
		ch.XTicks = append(ch.XTicks, tick{ch.categoryX(i, 2), col})
	}
	ch.accuracyAxis("accuracy")
	for i, p := range c.Profiles {
		for _, s := range []struct {
			side         string
			eval         EvalSide
			first, final float64
			scored       int
			dash         bool
		}{
			{"a", c.A, p.FirstA, p.FinalA, p.ScoredA, false},
			{"b", c.B, p.FirstB, p.FinalB, p.ScoredB, true},
		} {
			sr := series{Profile: p.Label(), Side: s.side, Color: colour(i), Dash: s.dash}
			for j, acc := range []float64{s.first, s.final} {
				sr.Dots = append(sr.Dots, dot{Profile: p.Label(), X: ch.categoryX(j, 2), Y: ch.y(acc), Color: sr.Color,
					Title: fmt.Sprintf("%s, %s (%s), %s: %s", p.Label(), strings.ToUpper(s.side), orID(s.eval), cols[j], accuracy(acc, s.scored))})
			}
			sr.Points = pointsAttr(sr.Dots)
			ch.Series = append(ch.Series, sr)
		}
		ch.addLegend(colour(i), false, p.Label())
	}
	ch.addLegend("#57606a", false, "A: "+orID(c.A))
	ch.addLegend("#57606a", true, "B: "+orID(c.B))
	return ch
}
