// Package report renders an eval's Report (package eval) for people and
// programs: a terminal report (Text), the Report as indented JSON (JSON),
// and one self-contained HTML page with inline SVG charts (HTML) — the
// accuracy of the first answer, after each verification round and final,
// per profile; the auditor's precision and recall against the
// references; cost per task; per tag; and every task. Compare sets two
// evals side by side (CompareText, CompareHTML).
//
// Output is deterministic: the same Report renders to the same bytes.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
)

// JSON writes r as indented JSON, ending with a newline. Field order is
// the Report's, so the output is stable.
func JSON(w io.Writer, r eval.Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("eval report %s as JSON: %w", r.EvalID, err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write eval report %s as JSON: %w", r.EvalID, err)
	}
	return nil
}

// Text writes r as a terminal report: a header, the accuracy by
// verification round, the auditor against the references, cost per task,
// per tag, and the tasks that failed for infrastructure reasons. Columns
// are aligned with text/tabwriter.
func Text(w io.Writer, r eval.Report) error {
	var b strings.Builder
	for _, kv := range header(r) {
		fmt.Fprintf(&b, "%-9s %s\n", kv[0], oneLine(kv[1]))
	}
	for _, t := range []table{roundsTable(r), auditorTable(r), costTable(r), tagTable(r), infraTable(r)} {
		b.WriteString("\n")
		if err := t.writeText(&b); err != nil {
			return fmt.Errorf("eval report %s as text: %w", r.EvalID, err)
		}
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write eval report %s as text: %w", r.EvalID, err)
	}
	return nil
}

// table is one table of a report, shared by the text and HTML forms.
type table struct {
	ID    string // the HTML table's id
	Title string
	Head  []string
	Rows  [][]string
	// Empty is said instead of the table when it has no rows.
	Empty string
}

func (t table) writeText(b *strings.Builder) error {
	b.WriteString(t.Title)
	b.WriteString("\n")
	if len(t.Rows) == 0 {
		b.WriteString("  " + t.Empty + "\n")
		return nil
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	line := func(cells []string) {
		parts := make([]string, len(cells))
		for i, c := range cells {
			parts[i] = oneLine(c)
		}
		fmt.Fprintf(tw, "  %s\n", strings.Join(parts, "\t"))
	}
	line(t.Head)
	for _, row := range t.Rows {
		line(row)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("table %q: %w", t.Title, err)
	}
	return nil
}

// oneLine keeps user text from breaking a table: tabs, newlines and other
// control characters become spaces.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// header is the report's identification, as label and value pairs.
func header(r eval.Report) [][2]string {
	scored, infra := 0, 0
	for _, p := range r.Profiles {
		scored += p.Scored
		infra += p.Infra
	}
	h := [][2]string{
		{"eval", r.EvalID},
		{"name", r.Name},
		{"task set", r.TaskSet},
	}
	if !r.Started.IsZero() {
		h = append(h, [2]string{"started", r.Started.UTC().Format(time.RFC3339)})
	}
	h = append(h,
		[2]string{"tasks", fmt.Sprint(r.Tasks)},
		[2]string{"profiles", fmt.Sprint(len(r.Profiles))},
		[2]string{"scored", fmt.Sprintf("%d/%d (%d infra)", scored, r.Expected, infra)},
	)
	return h
}

// maxRounds is the most verification rounds any profile has figures for.
func maxRounds(r eval.Report) int {
	n := 0
	for _, p := range r.Profiles {
		n = max(n, len(p.ByRound))
	}
	return n
}

// roundColumns are the accuracy columns: first, r1 … rN, final.
func roundColumns(n int) []string {
	cols := []string{"first"}
	for i := 1; i <= n; i++ {
		cols = append(cols, fmt.Sprintf("r%d", i))
	}
	return append(cols, "final")
}

// accuracyPoint is one profile's accuracy at one column; OK is false
// where the profile has no such round.
type accuracyPoint struct {
	Column string
	Acc    float64
	OK     bool
}

// accuracyPoints are p's accuracies at the columns of roundColumns(n).
func accuracyPoints(p eval.ProfileReport, n int) []accuracyPoint {
	cols := roundColumns(n)
	pts := make([]accuracyPoint, len(cols))
	pts[0] = accuracyPoint{cols[0], p.FirstAccuracy, true}
	for i := 1; i <= n; i++ {
		if i <= len(p.ByRound) {
			pts[i] = accuracyPoint{cols[i], p.ByRound[i-1], true}
		} else {
			pts[i] = accuracyPoint{Column: cols[i]}
		}
	}
	pts[n+1] = accuracyPoint{cols[n+1], p.FinalAccuracy, true}
	return pts
}

// pct formats a fraction as a percentage with one decimal.
func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// accuracy formats a fraction of n as "65.0% (13/20)"; the count is the
// fraction times n, rounded (accuracies are counts over n).
func accuracy(f float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%d/%d)", pct(f), int(math.Round(f*float64(n))), n)
}

// wall formats milliseconds of wall time: 850ms, 23.4s, 2m03.5s.
func wall(ms float64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%.0fms", ms)
	case ms < 60000:
		return fmt.Sprintf("%.1fs", ms/1000)
	default:
		m := math.Floor(ms / 60000)
		return fmt.Sprintf("%.0fm%04.1fs", m, (ms-m*60000)/1000)
	}
}

func roundsTable(r eval.Report) table {
	n := maxRounds(r)
	t := table{ID: "table-rounds", Title: "Accuracy by verification round",
		Head: append([]string{"profile"}, roundColumns(n)...), Empty: "no profiles"}
	for _, p := range r.Profiles {
		row := []string{p.Name}
		for _, pt := range accuracyPoints(p, n) {
			if pt.OK {
				row = append(row, accuracy(pt.Acc, p.Scored))
			} else {
				row = append(row, "-")
			}
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func auditorTable(r eval.Report) table {
	t := table{ID: "table-auditor", Title: "Auditor against the references",
		Head:  []string{"profile", "judged", "accepted right", "accepted wrong", "rejected right", "rejected wrong", "precision", "recall"},
		Empty: "no profile ran the auditor"}
	for _, p := range r.Profiles {
		a := p.AuditorStats
		if a == nil {
			continue
		}
		t.Rows = append(t.Rows, []string{p.Name, fmt.Sprint(a.Judged),
			fmt.Sprint(a.AcceptedRight), fmt.Sprint(a.AcceptedWrong),
			fmt.Sprint(a.RejectedRight), fmt.Sprint(a.RejectedWrong),
			pct(a.Precision), pct(a.Recall)})
	}
	return t
}

func costTable(r eval.Report) table {
	t := table{ID: "table-cost", Title: "Cost per task (means)",
		Head:  []string{"profile", "steps", "tool calls", "tokens", "total tokens", "wall time"},
		Empty: "no profiles"}
	for _, p := range r.Profiles {
		t.Rows = append(t.Rows, []string{p.Name,
			fmt.Sprintf("%.1f", p.MeanSteps), fmt.Sprintf("%.1f", p.MeanToolCalls),
			fmt.Sprintf("%.0f", p.MeanTokens), fmt.Sprint(p.TotalTokens), wall(p.MeanWallMS)})
	}
	return t
}

func tagTable(r eval.Report) table {
	t := table{ID: "table-tags", Title: "By tag",
		Head: []string{"tag", "profile", "scored", "first", "final"}, Empty: "no tags"}
	var tags []string
	for _, p := range r.Profiles {
		for _, tr := range p.ByTag {
			if !slices.Contains(tags, tr.Tag) {
				tags = append(tags, tr.Tag)
			}
		}
	}
	slices.Sort(tags)
	for _, tag := range tags {
		for _, p := range r.Profiles {
			for _, tr := range p.ByTag {
				if tr.Tag == tag {
					t.Rows = append(t.Rows, []string{tag, p.Name, fmt.Sprint(tr.Scored),
						accuracy(tr.FirstAccuracy, tr.Scored), accuracy(tr.FinalAccuracy, tr.Scored)})
				}
			}
		}
	}
	return t
}

func infraTable(r eval.Report) table {
	t := table{ID: "table-infra", Head: []string{"task", "profile", "attempt", "run", "reason"},
		Empty: "none"}
	for _, res := range r.Results {
		if res.Infra {
			t.Rows = append(t.Rows, []string{res.TaskID, res.Profile, fmt.Sprint(res.Attempt), res.RunID, res.Reason})
		}
	}
	t.Title = fmt.Sprintf("Failed for infrastructure reasons (%d)", len(t.Rows))
	return t
}

// firstRound is a result's round-1 answer, nil when it submitted none.
func firstRound(res catalog.EvalTaskScored) *catalog.EvalRoundScore {
	for i := range res.Rounds {
		if res.Rounds[i].Round == 1 {
			return &res.Rounds[i]
		}
	}
	return nil
}
