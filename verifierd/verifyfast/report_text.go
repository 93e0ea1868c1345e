package verifyfast

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the report as plain text, one section per profile.
func (r Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "VerifyFast report")
	if len(r.Profiles) == 0 {
		fmt.Fprintln(bw, "\nNo results.")
	}
	for _, p := range r.Profiles {
		writeProfileText(bw, p)
	}
	if len(r.SkippedLines) > 0 {
		fmt.Fprintf(bw, "\nSkipped lines (%d)\n", len(r.SkippedLines))
		for _, l := range r.SkippedLines {
			fmt.Fprintf(bw, "  line %d: %s\n", l.Line, oneLine(l.Reason))
		}
	}
	return bw.Flush()
}

func writeProfileText(w *bufio.Writer, p ProfileReport) {
	fmt.Fprintf(w, "\n== Profile %s ==\n", oneLine(p.Profile))
	fmt.Fprintf(w, "Items %d: scored %d, failed %d\n", p.Items, p.Scored, p.Failed)

	fmt.Fprintln(w, "\nZone confusion matrix (rows = expected, columns = actual)")
	fmt.Fprintf(w, "  %-11s", "")
	for _, z := range p.Matrix.Zones {
		fmt.Fprintf(w, "%11s", z.Label())
	}
	fmt.Fprintln(w)
	for i, ez := range p.Matrix.Zones {
		fmt.Fprintf(w, "  %-11s", ez.Label())
		for j := range p.Matrix.Zones {
			fmt.Fprintf(w, "%11d", p.Matrix.Counts[i][j])
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	target := "met"
	if !p.CrossBandTargetMet {
		target = "not met"
	}
	fmt.Fprintf(tw, "Zone accuracy\t%s\n", p.ZoneAccuracy)
	fmt.Fprintf(tw, "Cross-band confusion\t%s  (target < %s: %s)\n", p.CrossBand, trimPct(CrossBandTarget*100)+"%", target)
	fmt.Fprintf(tw, "Exact match\t%s\n", p.ExactMatch)
	fmt.Fprintf(tw, "±1 match\t%s\n", p.WithinOne)
	fmt.Fprintf(tw, "Tokens\tprompt %d, completion %d, total %d\n", p.Tokens.Prompt, p.Tokens.Completion, p.Tokens.Total)
	fmt.Fprintf(tw, "Duration\t%s\n", time.Duration(p.DurationMS)*time.Millisecond)
	tw.Flush()

	if len(p.Tags) > 0 {
		fmt.Fprintln(w, "\nPer tag")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  tag\texpected\titems\tfailed\tzone ok\texact\t±1\tcross-band\tscores 1/2/3/4/5")
		for _, t := range p.Tags {
			exp := "-"
			if t.ExpectedScore > 0 {
				exp = fmt.Sprint(t.ExpectedScore)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%d/%d/%d/%d/%d\n",
				oneLine(string(t.Tag)), exp, t.Items, t.Failed,
				shortRatio(t.ZoneAccuracy), shortRatio(t.ExactMatch), shortRatio(t.WithinOne), t.CrossBand,
				t.Scores[0], t.Scores[1], t.Scores[2], t.Scores[3], t.Scores[4])
		}
		tw.Flush()
	}

	if len(p.CrossBandCases) > 0 {
		fmt.Fprintf(w, "\nCross-band cases (%d)\n", len(p.CrossBandCases))
		for _, c := range p.CrossBandCases {
			fmt.Fprintf(w, "  #%s %s: expected %d (%s), scored %d (%s)\n",
				oneLine(string(c.ID)), oneLine(string(c.Tag)), c.ExpectedScore, c.ExpectedZone, c.Score, c.Zone)
		}
	}
	if len(p.FailedItems) > 0 {
		fmt.Fprintf(w, "\nFailed items (%d)\n", len(p.FailedItems))
		for _, f := range p.FailedItems {
			fmt.Fprintf(w, "  #%s %s: %s\n", oneLine(string(f.ID)), oneLine(string(f.Tag)), oneLine(strings.Join(f.Errors, "; ")))
		}
	}
}

// shortRatio is "3/4 75%" for table cells.
func shortRatio(r Ratio) string {
	if r.Of == 0 {
		return "-"
	}
	return fmt.Sprintf("%d/%d %s", r.N, r.Of, r.Percent())
}

// oneLine keeps a value on its line and out of the tab columns.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' || r == '\v' || r == '\f' {
			return ' '
		}
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
}
