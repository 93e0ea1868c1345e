package deepverify

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// Defaults of the audit loop.
const (
	DefaultMaxRounds     = 3
	DefaultStopScore     = 3
	DefaultMaxCheckSteps = 4
)

// cleanRoom is what the auditor may see of a run: the task, the notes and
// the evidence ledger — never model I/O nor the agent's thoughts.
type cleanRoom struct {
	Task     string
	Notes    string
	Evidence []catalog.EvidenceRecorded
	byID     map[string]catalog.EvidenceRecorded
	// Edits holds the request ids of the agent's file-tool requests, whose
	// evidence command is a summary ("edit str_replace /work/a.py"), not a
	// shell command.
	Edits map[string]bool
}

// toolCall is one auditor tool request and its result, if any.
type toolCall struct {
	Req      catalog.ToolRequested
	Finished *catalog.ToolFinished
}

// checkState is one check of a round as the stream tells it.
type checkState struct {
	Plan    catalog.AuditCheckPlan
	Index   int // 1-based
	Started *bus.Event
	Calls   []toolCall // in step order
	Result  *catalog.AuditCheck
}

// roundState is one audit round as the stream tells it.
type roundState struct {
	Round      int
	Request    bus.Event
	Req        catalog.AuditRequested
	Decomposed *catalog.AuditDecomposed
	Checks     []*checkState
	Judged     *catalog.AuditJudged
	Feedback   *catalog.AuditFeedback
}

// runState is the audit state of a run, rebuilt from its events.
type runState struct {
	RunID  string
	Config *catalog.RunConfig
	Room   cleanRoom
	Rounds map[int]*roundState
	order  []int
}

// rebuild folds a run's events into its audit state. The agent's steps and
// model I/O are not read: the clean room excludes them.
func rebuild(runID string, events []bus.Event) (*runState, error) {
	st := &runState{RunID: runID, Rounds: map[int]*roundState{}, Room: cleanRoom{byID: map[string]catalog.EvidenceRecorded{}, Edits: map[string]bool{}}}
	var notes []string
	requests := map[string]*toolCall{}
	var finished []catalog.ToolFinished
	var checks []catalog.AuditCheck
	var starts []struct {
		ev bus.Event
		d  catalog.AuditCheckStarted
	}
	for _, ev := range events {
		switch ev.Type {
		case catalog.TypeTaskSubmitted:
			if st.Config == nil {
				var d catalog.TaskSubmitted
				if ev.DecodeData(&d) == nil {
					c := d.RunConfig
					st.Config = &c
				}
			}
		case catalog.TypeRunStarted:
			var d catalog.RunStarted
			if ev.DecodeData(&d) == nil {
				c := d.Config
				st.Config = &c
			}
		case catalog.TypeNotesAppended:
			var d catalog.NotesAppended
			if ev.DecodeData(&d) == nil {
				notes = append(notes, d.Text)
			}
		case catalog.TypeEvidenceRecorded:
			var d catalog.EvidenceRecorded
			if ev.DecodeData(&d) == nil {
				if _, dup := st.Room.byID[d.EvidenceID]; !dup {
					st.Room.byID[d.EvidenceID] = d
					st.Room.Evidence = append(st.Room.Evidence, d)
				}
			}
		case catalog.TypeAuditRequested:
			var d catalog.AuditRequested
			if err := ev.DecodeData(&d); err != nil || d.Round < 1 {
				continue
			}
			if _, seen := st.Rounds[d.Round]; seen {
				continue // one request per round: the first counts
			}
			st.Rounds[d.Round] = &roundState{Round: d.Round, Request: ev, Req: d}
			st.order = append(st.order, d.Round)
		case catalog.TypeAuditDecomposed:
			var d catalog.AuditDecomposed
			if ev.DecodeData(&d) == nil {
				if r := st.Rounds[d.Round]; r != nil && r.Decomposed == nil {
					r.Decomposed = &d
					for i, p := range d.Checks {
						r.Checks = append(r.Checks, &checkState{Plan: p, Index: i + 1})
					}
				}
			}
		case catalog.TypeAuditCheckStarted:
			var d catalog.AuditCheckStarted
			if ev.DecodeData(&d) == nil {
				starts = append(starts, struct {
					ev bus.Event
					d  catalog.AuditCheckStarted
				}{ev, d})
			}
		case catalog.TypeToolRequested:
			var d catalog.ToolRequested
			if ev.DecodeData(&d) != nil {
				continue
			}
			if d.Requester == catalog.RequesterAgent && d.Tool == catalog.ToolEdit {
				st.Room.Edits[d.RequestID] = true
			}
			if d.Requester == catalog.RequesterAuditor {
				if _, dup := requests[d.RequestID]; !dup {
					requests[d.RequestID] = &toolCall{Req: d}
				}
			}
		case catalog.TypeToolFinished:
			var d catalog.ToolFinished
			if ev.DecodeData(&d) == nil && d.Requester == catalog.RequesterAuditor {
				finished = append(finished, d)
			}
		case catalog.TypeAuditCheck:
			var d catalog.AuditCheck
			if ev.DecodeData(&d) == nil {
				checks = append(checks, d)
			}
		case catalog.TypeAuditJudged:
			var d catalog.AuditJudged
			if ev.DecodeData(&d) == nil {
				if r := st.Rounds[d.Round]; r != nil && r.Judged == nil {
					r.Judged = &d
				}
			}
		case catalog.TypeAuditFeedback:
			var d catalog.AuditFeedback
			if ev.DecodeData(&d) == nil {
				if r := st.Rounds[d.Round]; r != nil && r.Feedback == nil {
					r.Feedback = &d
				}
			}
		}
	}
	st.Room.Notes = strings.Join(notes, "\n")
	if st.Config != nil {
		st.Room.Task = st.Config.Task
	}
	for _, f := range finished {
		if c := requests[f.RequestID]; c != nil && c.Finished == nil {
			f := f
			c.Finished = &f
		}
	}
	for _, s := range starts {
		if c := st.check(s.d.Round, s.d.CheckID); c != nil && c.Started == nil {
			ev := s.ev
			c.Started = &ev
		}
	}
	for i := range checks {
		if c := st.check(checks[i].Round, checks[i].CheckID); c != nil && c.Result == nil {
			c.Result = &checks[i]
		}
	}
	for _, tc := range requests {
		round, check, step, ok := parseRequestID(tc.Req.RequestID)
		if !ok {
			continue
		}
		r := st.Rounds[round]
		if r == nil || check < 1 || check > len(r.Checks) {
			continue
		}
		c := r.Checks[check-1]
		for len(c.Calls) < step {
			c.Calls = append(c.Calls, toolCall{})
		}
		c.Calls[step-1] = *tc
	}
	// A gap (a request lost) would leave an empty call: cut the list there.
	for _, r := range st.Rounds {
		for _, c := range r.Checks {
			for i, tc := range c.Calls {
				if tc.Req.RequestID == "" {
					c.Calls = c.Calls[:i]
					break
				}
			}
		}
	}
	sort.Ints(st.order)
	return st, nil
}

func (st *runState) check(round int, id string) *checkState {
	r := st.Rounds[round]
	if r == nil {
		return nil
	}
	for _, c := range r.Checks {
		if c.Plan.CheckID == id {
			return c
		}
	}
	return nil
}

// judged returns the judged rounds, in round order.
func (st *runState) judged() []catalog.AuditJudged {
	var out []catalog.AuditJudged
	for _, n := range st.order {
		if j := st.Rounds[n].Judged; j != nil {
			out = append(out, *j)
		}
	}
	return out
}

func (st *runState) auditorSettings() (maxRounds, stopScore int, model catalog.ModelConfig, enabled bool) {
	maxRounds, stopScore = DefaultMaxRounds, DefaultStopScore
	if st.Config == nil {
		return maxRounds, stopScore, model, false
	}
	a := st.Config.Auditor
	if a.MaxRounds > 0 {
		maxRounds = a.MaxRounds
	}
	if a.StopScore > 0 {
		stopScore = a.StopScore
	}
	model = st.Config.Model
	if a.Model != nil {
		model = *a.Model
	}
	return maxRounds, stopScore, model, a.Enabled
}

// CheckID names the i-th (1-based) check of a round: r1-c2.
func CheckID(round, i int) string { return fmt.Sprintf("r%d-c%d", round, i) }

// RequestID names the n-th (1-based) tool call of a check:
// req-r<round>-c<check>-t<n>.
func RequestID(round, check, n int) string { return fmt.Sprintf("req-r%d-c%d-t%d", round, check, n) }

func parseRequestID(id string) (round, check, step int, ok bool) {
	rest, found := strings.CutPrefix(id, "req-r")
	if !found {
		return 0, 0, 0, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 || !strings.HasPrefix(parts[1], "c") || !strings.HasPrefix(parts[2], "t") {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	round, err1 = strconv.Atoi(parts[0])
	check, err2 = strconv.Atoi(parts[1][1:])
	step, err3 = strconv.Atoi(parts[2][1:])
	if err1 != nil || err2 != nil || err3 != nil || round < 1 || check < 1 || step < 1 {
		return 0, 0, 0, false
	}
	return round, check, step, true
}
