package verifyfast

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
)

// Limits on what Live puts in front of the model.
const (
	// MaxEvidenceBytes caps the output text of one evidence item.
	MaxEvidenceBytes = 8 << 10
	// MaxContextEvidenceBytes caps all the cited evidence together; items
	// beyond it are listed as omitted.
	MaxContextEvidenceBytes = 64 << 10
	// MaxEvidenceBlobBytes: output blobs bigger than this are not fetched.
	MaxEvidenceBlobBytes = 4 << 20
	// MaxAnswerBytes caps the answer audited (model_output).
	MaxAnswerBytes = 64 << 10
)

// runView is what Live needs of a run, rebuilt from its stream.
type runView struct {
	runID     string
	cfg       *catalog.RunConfig
	cancelled bool
	// Stored before the answer event:
	steps    []catalog.AgentStep
	evidence map[string]catalog.EvidenceRecorded
	audited  map[string]int // answer digest → round, of audit.requested events
	// Stored at any time: VerifyFast's own events, by id.
	ids    map[string]bool
	phases map[string]catalog.VerifyFastPhase
}

// phasesOf returns the phase events stored for an answer event.
func (rv *runView) phasesOf(aid string) map[Phase]catalog.VerifyFastPhase {
	out := map[Phase]catalog.VerifyFastPhase{}
	for _, p := range Phases() {
		if vp, ok := rv.phases[PhaseEventID(rv.runID, aid, p)]; ok {
			out[p] = vp
		}
	}
	return out
}

var liveReadTypes = []string{
	catalog.TypeTaskSubmitted, catalog.TypeRunStarted, catalog.TypeRunCancelled,
	catalog.TypeAgentStep, catalog.TypeEvidenceRecorded, catalog.TypeAuditRequested,
	catalog.TypeVerifyFastPhase, catalog.TypeVerifyFastScored,
}

// readRun reads the run's stream. The steps, evidence and audit requests
// are those stored before the answer (stream sequence below before), so
// that a replay sees what the live run saw.
func (l *Live) readRun(ctx context.Context, runID string, before uint64) (*runView, error) {
	rv := &runView{
		runID:    runID,
		evidence: map[string]catalog.EvidenceRecorded{},
		audited:  map[string]int{},
		ids:      map[string]bool{},
		phases:   map[string]catalog.VerifyFastPhase{},
	}
	var submitted *catalog.RunConfig
	for rec, err := range l.b.Read(ctx, bus.ReadOptions{RunID: runID, Types: liveReadTypes}) {
		if err != nil {
			return nil, fmt.Errorf("verifyfast: read run %s: %w", runID, err)
		}
		if rec.Err != nil {
			continue
		}
		ev := rec.Event
		earlier := rec.Sequence < before
		switch ev.Type {
		case catalog.TypeRunStarted:
			var d catalog.RunStarted
			if ev.DecodeData(&d) == nil && rv.cfg == nil {
				rv.cfg = &d.Config
			}
		case catalog.TypeTaskSubmitted:
			var d catalog.TaskSubmitted
			if ev.DecodeData(&d) == nil && submitted == nil {
				submitted = &d.RunConfig
			}
		case catalog.TypeRunCancelled:
			rv.cancelled = true
		case catalog.TypeAgentStep:
			var d catalog.AgentStep
			if earlier && ev.DecodeData(&d) == nil {
				rv.steps = append(rv.steps, d)
			}
		case catalog.TypeEvidenceRecorded:
			var d catalog.EvidenceRecorded
			if earlier && ev.DecodeData(&d) == nil && d.EvidenceID != "" {
				if _, dup := rv.evidence[d.EvidenceID]; !dup {
					rv.evidence[d.EvidenceID] = d
				}
			}
		case catalog.TypeAuditRequested:
			var d catalog.AuditRequested
			if earlier && ev.DecodeData(&d) == nil && (d.Answer != "" || d.AnswerBlob != nil) {
				rv.audited[answerDigest(d.Answer, d.AnswerBlob)] = d.Round
			}
		case catalog.TypeVerifyFastPhase:
			var d catalog.VerifyFastPhase
			if ev.DecodeData(&d) == nil {
				rv.ids[ev.ID] = true
				rv.phases[ev.ID] = d
			}
		case catalog.TypeVerifyFastScored:
			rv.ids[ev.ID] = true
		}
	}
	if rv.cfg == nil {
		rv.cfg = submitted
	}
	return rv, nil
}

// answerText returns the answer, fetching its blob when it is not inline,
// cut to MaxAnswerBytes.
func (l *Live) answerText(ctx context.Context, a *answer) (string, error) {
	if a.inline != "" || a.blob == nil {
		return cut(a.inline, MaxAnswerBytes), nil
	}
	data, err := l.b.GetBlob(ctx, a.blob.Digest)
	if err != nil {
		if errors.Is(err, bus.ErrBlobNotFound) {
			return "", bus.Permanent(fmt.Errorf("verifyfast: answer blob of %s: %w", a.ev.ID, err))
		}
		return "", fmt.Errorf("verifyfast: answer blob of %s: %w", a.ev.ID, err)
	}
	return cut(string(data), MaxAnswerBytes), nil
}

// citedIDs returns the evidence ids the answer cites, in citation order
// without repeats, and where they were read. When the answer event names
// no candidate step (vera.run.finished), it sets a.step to the submit
// step found, for the model requests.
func citedIDs(a *answer, text string, rv *runView) ([]string, string) {
	if len(a.cites) > 0 {
		return dedup(a.cites), "audit.requested evidence_ids"
	}
	st, ok := submitStep(a, text, rv.steps)
	if !ok {
		return nil, "no agent step found"
	}
	if a.step == 0 {
		a.step = st.Step
	}
	ids := append(slices.Clone(st.EvidenceUsed), st.UnknownEvidence...)
	return dedup(ids), fmt.Sprintf("agent.step %d evidence_used", st.Step)
}

// submitStep finds the agent step that submitted the answer: the one
// named by the answer event's candidate step, else the last submit step
// with this answer (or, for an answer file, with its digest), else the
// last submit step.
func submitStep(a *answer, text string, steps []catalog.AgentStep) (catalog.AgentStep, bool) {
	if a.step > 0 {
		for i := len(steps) - 1; i >= 0; i-- {
			if steps[i].Step == a.step {
				return steps[i], true
			}
		}
	}
	last := -1
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].ActionTool != catalog.ActionSubmit {
			continue
		}
		if steps[i].Answer == text && text != "" || a.fileSHA256 != "" && steps[i].AnswerSHA256 == a.fileSHA256 {
			return steps[i], true
		}
		if last < 0 {
			last = i
		}
	}
	if last >= 0 {
		return steps[last], true
	}
	return catalog.AgentStep{}, false
}

func dedup(ids []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	return out
}

// citedItem is one cited evidence id as it goes into the context.
type citedItem struct {
	ID       string
	Found    bool
	Command  string
	ExitCode int
	URLs     []string
	Paths    []string
	Output   string
	Note     string // why the output is missing, if it is
}

// buildContext resolves the cited ids and formats the context.
func (l *Live) buildContext(ctx context.Context, rv *runView, ids []string) (string, error) {
	items := make([]citedItem, 0, len(ids))
	for _, id := range ids {
		ev, ok := rv.evidence[id]
		if !ok {
			items = append(items, citedItem{ID: id})
			continue
		}
		it := citedItem{ID: id, Found: true, Command: ev.Command, ExitCode: ev.ExitCode, URLs: ev.URLs, Paths: ev.Paths, Output: ev.Excerpt}
		if strings.TrimSpace(it.Output) == "" && ev.OutputBlob != nil {
			switch {
			case ev.OutputBlob.Size > MaxEvidenceBlobBytes:
				it.Note = fmt.Sprintf("the output (%d bytes) is too big to include", ev.OutputBlob.Size)
			default:
				data, err := l.b.GetBlob(ctx, ev.OutputBlob.Digest)
				switch {
				case errors.Is(err, bus.ErrBlobNotFound):
					it.Note = "the output blob is not in the object store"
				case err != nil:
					return "", fmt.Errorf("verifyfast: output blob of %s: %w", id, err)
				default:
					it.Output = string(data)
				}
			}
		}
		items = append(items, it)
	}
	task := ""
	if rv.cfg != nil {
		task = rv.cfg.Task
	}
	return formatContext(task, items), nil
}

// formatContext renders context_input: the task, then each cited item.
func formatContext(task string, items []citedItem) string {
	var b strings.Builder
	b.WriteString("TASK:\n")
	b.WriteString(strings.TrimSpace(task))
	b.WriteString("\n\n")
	if len(items) == 0 {
		b.WriteString("EVIDENCE CITED BY THE ANSWER: none. The answer cites no evidence; the task above is the whole context.\n")
		return b.String()
	}
	found := 0
	for _, it := range items {
		if it.Found {
			found++
		}
	}
	fmt.Fprintf(&b, "EVIDENCE CITED BY THE ANSWER (%d %s, %d found in the run's evidence ledger):\n", len(items), pluralWord(len(items), "item"), found)
	budget := MaxContextEvidenceBytes
	for _, it := range items {
		fmt.Fprintf(&b, "\n[%s]\n", it.ID)
		if !it.Found {
			b.WriteString("not found in the run's evidence ledger\n")
			continue
		}
		if budget <= 0 {
			b.WriteString("omitted: the context's evidence limit was reached\n")
			continue
		}
		if it.Command != "" {
			fmt.Fprintf(&b, "command: %s\n", oneLine(it.Command))
		}
		fmt.Fprintf(&b, "exit code: %d\n", it.ExitCode)
		if len(it.URLs) > 0 {
			fmt.Fprintf(&b, "urls: %s\n", strings.Join(it.URLs, ", "))
		}
		if len(it.Paths) > 0 {
			fmt.Fprintf(&b, "paths: %s\n", strings.Join(it.Paths, ", "))
		}
		out := strings.TrimRight(it.Output, "\n")
		switch {
		case it.Note != "":
			fmt.Fprintf(&b, "output: (%s)\n", it.Note)
		case strings.TrimSpace(out) == "":
			b.WriteString("output: (empty)\n")
		default:
			out = cut(out, min(MaxEvidenceBytes, budget))
			budget -= len(out)
			b.WriteString("output:\n")
			b.WriteString(out)
			b.WriteString("\n")
		}
	}
	return b.String()
}

func pluralWord(n int, w string) string {
	if n == 1 {
		return w
	}
	return w + "s"
}

// cut shortens s to at most n bytes (on a rune boundary), saying how much
// was left out.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	k := n
	for k > 0 && !utf8.RuneStart(s[k]) {
		k--
	}
	return s[:k] + fmt.Sprintf("\n[… %d more bytes not shown]", len(s)-k)
}
