package replay

import (
	"bufio"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/vera-run/vera/bus/catalog"
)

// WriteText writes the re-verification summary for people: the verdict of
// every agent step, recorded and replayed, and the audit scores.
func (r *ReverifyResult) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "replay run %s re-verifies run %s (%d events, work dir %s)\n", r.NewRun, r.OriginalRun, r.Events, r.WorkDir)
	fmt.Fprintf(bw, "logic verifier: %d verdict(s) on %d step(s); thinking_eval/action_eval, - = no verdict\n", r.Verdicts, len(r.Steps))
	fmt.Fprintf(bw, "  %-5s %-9s %-9s %s\n", "step", "recorded", "replayed", "action")
	for _, s := range r.Steps {
		mark := ""
		if s.Changed {
			mark = "  [changed]"
		}
		fmt.Fprintf(bw, "  %-5d %-9s %-9s %s%s\n", s.Step, verdictKey(s.Recorded), verdictKey(s.Replayed), clip(oneLine(s.Action), 60), mark)
		if s.Replayed != nil && s.Changed {
			fmt.Fprintf(bw, "        %s\n", clip(oneLine(s.Replayed.ThinkingEvalReason), 160))
		}
	}
	if r.Audited {
		fmt.Fprintf(bw, "auditor: %d round(s)\n", len(r.Audits))
		for _, a := range r.Audits {
			rec, now := "-", "-"
			if a.Recorded != nil {
				rec = fmt.Sprint(a.Recorded.Score)
			}
			if a.Replayed != nil {
				now = fmt.Sprint(a.Replayed.Score)
				if a.Replayed.RawScore != a.Replayed.Score {
					now += fmt.Sprintf(" (judge %d, capped)", a.Replayed.RawScore)
				}
			}
			verdict := "unfinished"
			if a.Accepted != nil {
				verdict = map[bool]string{true: "ACCEPTED", false: "REJECTED"}[*a.Accepted]
			}
			fmt.Fprintf(bw, "  round %d (step %d): score recorded %s, replayed %s %s: %s\n", a.Round, a.CandidateStep, rec, now, verdict, clip(oneLine(a.Answer), 60))
			if a.Replayed != nil && a.Replayed.Explanation != "" {
				fmt.Fprintf(bw, "        %s\n", clip(oneLine(a.Replayed.Explanation), 160))
			}
			if a.Replayed != nil {
				for _, c := range a.Replayed.Caps {
					fmt.Fprintf(bw, "        capped at %d (%s): %s\n", c.Cap, c.Rule, clip(oneLine(c.Reason), 120))
				}
			}
		}
	} else {
		fmt.Fprintln(bw, "auditor: not run (no model given and the recorded run did not enable it)")
	}
	for _, s := range r.Incomplete {
		fmt.Fprintf(bw, "INCOMPLETE: %s\n", s)
	}
	if r.Files != nil {
		fmt.Fprintf(bw, "files of the replay run: %s\n", r.Files.Dir)
	}
	if r.Copied {
		fmt.Fprintf(bw, "stored on the bus as run %s (the original is unchanged)\n", r.NewRun)
	}
	return bw.Flush()
}

// WriteText writes the re-execution report for people.
func (r *ReexecuteResult) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "replay run %s re-executes run %s (work dir %s)\n", r.NewRun, r.OriginalRun, r.WorkDir)
	fmt.Fprintf(bw, "steps: %d recorded, %d re-executed; model calls served from the recording: %d\n", r.RecordedSteps, r.Steps, r.Served)
	fmt.Fprintf(bw, "end: recorded %s, re-executed %s\n", endText(r.RecordedEnd), endText(r.End))
	if len(r.Divergences) == 0 {
		fmt.Fprintln(bw, "no divergence: the re-execution reproduced the recording")
	} else {
		fmt.Fprintf(bw, "%d divergence(s):\n", len(r.Divergences))
		for _, d := range r.Divergences {
			fmt.Fprintf(bw, "  step %d %s: %s\n", d.Step, d.Kind, d.Detail)
			if d.Recorded != "" || d.Replayed != "" {
				fmt.Fprintf(bw, "      recorded: %s\n      replayed: %s\n", clip(oneLine(d.Recorded), 160), clip(oneLine(d.Replayed), 160))
			}
		}
	}
	if r.Stopped != "" {
		fmt.Fprintf(bw, "stopped: %s\n", r.Stopped)
	}
	for _, s := range r.Incomplete {
		fmt.Fprintf(bw, "INCOMPLETE: %s\n", s)
	}
	if r.Files != nil {
		fmt.Fprintf(bw, "files of the replay run: %s\n", r.Files.Dir)
	}
	if r.Copied {
		fmt.Fprintf(bw, "stored on the bus as run %s (the original is unchanged)\n", r.NewRun)
	}
	return bw.Flush()
}

func endText(e *RunEnd) string {
	if e == nil {
		return "(not finished)"
	}
	s := string(e.Outcome)
	if e.Cancelled {
		s = "CANCELLED"
	}
	if e.Answer != "" {
		s += " " + clip(oneLine(e.Answer), 60)
	}
	if e.Reason != "" {
		s += " (" + clip(oneLine(e.Reason), 80) + ")"
	}
	return fmt.Sprintf("%s after %d step(s)", s, e.Steps)
}

// RunEnd is how a run ended.
type RunEnd struct {
	Outcome   catalog.Outcome `json:"outcome,omitempty"`
	Cancelled bool            `json:"cancelled,omitempty"`
	Answer    string          `json:"answer,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Steps     int             `json:"steps"`
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clip shortens s to n runes with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
