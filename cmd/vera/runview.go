package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/eventfmt"
	"github.com/vera-run/vera/internal/live"
)

// runPrinter renders the events of one run for a person following it in
// a terminal: one or two lines per step, command, result, piece of
// evidence, policy nudge and verdict, plus a live status line on stderr.
type runPrinter struct {
	w     io.Writer
	prog  *progress
	start time.Time
	blobs interface {
		GetBlob(ctx context.Context, digest string) ([]byte, error)
	}
	started atomic.Bool

	// showReasoning prints each step's reasoning whole, not its first
	// line.
	showReasoning bool

	mu      sync.Mutex
	step    int
	tools   int
	running string // the command in flight
	// edits are the agent's edit requests in flight, by request id (a
	// refused edit's result may carry no edit result).
	edits    map[string]bool
	evidence int
	tokens   int64
	calls    int
	phase    string

	// The agent's reply being generated (internal/live pieces), shown
	// on the status line until its vera.model.responded.
	ended         bool // the run ended: no more live lines
	liveCall      string
	liveStep      int
	liveText      string // the end of the answer (and tool arguments) so far
	liveReasoning string // the end of the reasoning so far
	// recorded are the calls whose reply is recorded (the last ones): a
	// piece of theirs that comes late is not shown again.
	recorded     map[string]bool
	recordedList []string
	// reasoning of the agent's step replies, by step, until the step's
	// line prints it.
	reasoning map[int]string
}

// liveKeep is how much of a reply's end the status line keeps (it shows
// at most liveShow characters of it).
const (
	liveKeep = 1024
	liveShow = 100
)

// livePiece takes a piece of the agent's reply as it streams in (called
// from the live subscription's goroutine) and redraws the status line.
func (p *runPrinter) livePiece(pc live.Piece) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if pc.CallID != p.liveCall {
		if p.recorded[pc.CallID] {
			return // a late piece of a reply already recorded
		}
		p.liveCall, p.liveStep, p.liveText, p.liveReasoning = pc.CallID, pc.Step, "", ""
	}
	if pc.ToolName != "" {
		pc.ToolArgs = pc.ToolName + "(" + pc.ToolArgs
	}
	p.liveText = keepEnd(p.liveText+pc.Content+pc.ToolArgs, liveKeep)
	p.liveReasoning = keepEnd(p.liveReasoning+pc.Reasoning, liveKeep)
	p.statusLocked()
}

// markRecorded remembers that call's reply is recorded (the last 64
// calls).
func (p *runPrinter) markRecorded(call string) {
	if p.recorded == nil {
		p.recorded = map[string]bool{}
	}
	if p.recorded[call] {
		return
	}
	p.recorded[call] = true
	p.recordedList = append(p.recordedList, call)
	if len(p.recordedList) > 64 {
		delete(p.recorded, p.recordedList[0])
		p.recordedList = p.recordedList[1:]
	}
}

// keepEnd keeps the last n bytes of s, cut on a character boundary.
func keepEnd(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}

// tailRunes is the end of s on one line, at most n runes, "…" first when
// cut.
func tailRunes(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return "…" + string(r[len(r)-n+1:])
	}
	return s
}

// line prints one line above the status line.
func (p *runPrinter) line(format string, args ...any) {
	p.prog.clear()
	fmt.Fprintln(p.w, eventfmt.TerminalSafe(fmt.Sprintf(format, args...)))
}

// status redraws the status line (on a terminal only).
func (p *runPrinter) status() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.statusLocked()
}

func (p *runPrinter) statusLocked() {
	if p.liveCall != "" {
		// The step being generated: the end of the reply so far, on
		// one line that fits the terminal.
		prefix := fmt.Sprintf("[%s] step %d ▸ ", time.Since(p.start).Truncate(time.Second), p.liveStep)
		text, what := p.liveText, ""
		if strings.TrimSpace(text) == "" {
			text, what = p.liveReasoning, "thinking: "
		}
		n := liveShow
		if w := termWidth(p.prog.w); w > 0 {
			n = min(n, w-utf8.RuneCountInString(prefix+what)-1)
		}
		if n > 10 {
			p.prog.update("%s%s%s", prefix, what, tailRunes(text, n))
			return
		}
	}
	phase := p.phase
	if p.running != "" {
		phase = "running: " + oneLine(p.running, 40)
	}
	p.prog.update("[%s] step %d · %d commands · %d evidence · %d model calls, %d tokens · %s",
		time.Since(p.start).Truncate(time.Second), p.step, p.tools, p.evidence, p.calls, p.tokens, phase)
}

func (p *runPrinter) event(ctx context.Context, ev bus.Event) {
	pl, err := catalog.Decode(ev.Type, ev.Data)
	if err != nil {
		if strings.HasPrefix(ev.Type, "vera.ext.") {
			p.line("  %s (outside tool event)", ev.Type)
		}
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch d := pl.(type) {
	case *catalog.RunStarted:
		p.started.Store(true)
		p.phase = "thinking"
		p.line("started by %s", d.AgentID)
	case *catalog.ModelRequested:
		if d.Scope == catalog.ScopeAgent {
			p.phase = "waiting for the model"
		}
	case *catalog.ModelResponded:
		p.calls++
		p.tokens += d.Usage.Total
		if d.CallID == p.liveCall {
			p.liveCall = ""
		}
		p.markRecorded(d.CallID)
		if d.Scope == catalog.ScopeAgent && d.Error == "" {
			if r := p.reasoningOf(ctx, d); r != "" {
				if p.reasoning == nil {
					p.reasoning = map[int]string{}
				}
				p.reasoning[d.Step] = r
			}
		}
		if d.Error != "" {
			p.line("  model %s: error after %d ms: %s", d.CallID, d.LatencyMS, oneLine(d.Error, 160))
		} else if d.FinishReason == "length" {
			p.line("  model %s: reply cut by the token limit (finish_reason=length)", d.CallID)
		}
	case *catalog.AgentStep:
		p.step = d.Step
		p.phase = "deciding"
		p.line("step %d  %s", d.Step, oneLine(d.Thought, 150))
		if r, ok := p.reasoning[d.Step]; ok {
			delete(p.reasoning, d.Step)
			p.printReasoning(r)
		}
		switch {
		case d.FormatError != "":
			p.line("  format error (nothing ran): %s", oneLine(d.FormatError, 160))
		case d.ActionTool == catalog.ActionShell:
			p.line("  $ %s", oneLine(d.Command, 200))
		case d.ActionTool == catalog.ActionNotesAppend:
			p.line("  notes += %s", oneLine(d.NotesText, 160))
		case d.ActionTool == catalog.ActionEdit:
			p.line("  %s", editLine(d.Edit, d.Command))
		case d.ActionTool == catalog.ActionSubmit && d.AnswerFile != "":
			p.line("  submits the file %s (%s)%s", d.AnswerFile, shortDigest(d.AnswerSHA256), answerHead(d.Answer))
		case d.ActionTool == catalog.ActionSubmit:
			p.line("  submits: %s", oneLine(d.Answer, 200))
		}
		if len(d.UnknownEvidence) > 0 {
			p.line("  cites unknown evidence: %s", strings.Join(d.UnknownEvidence, ", "))
		}
		if d.StatusUpdate != "" {
			p.line("  status: %s", oneLine(d.StatusUpdate, 160))
		}
	case *catalog.ToolRequested:
		if d.Requester == catalog.RequesterAgent {
			p.running = d.Command
			if d.Tool == catalog.ToolEdit {
				if p.edits == nil {
					p.edits = map[string]bool{}
				}
				p.edits[d.RequestID] = true
			}
		}
	case *catalog.ToolFinished:
		if d.Requester != catalog.RequesterAgent {
			return
		}
		p.tools++
		p.running = ""
		p.phase = "thinking"
		what := fmt.Sprintf("exit %d", d.ExitCode)
		switch {
		case d.Denied:
			what = "denied by the sandbox policy"
		case d.TimedOut:
			what = "timed out"
		case d.Interrupted:
			what = "interrupted"
		}
		if d.Edit != nil || p.edits[d.RequestID] {
			delete(p.edits, d.RequestID)
			p.line("  → %s", editResultLine(d, what))
			return
		}
		p.line("  → %s in %s, %d bytes out", what, time.Duration(d.DurationMS)*time.Millisecond, d.Stdout.Bytes+d.Stderr.Bytes)
	case *catalog.ToolSession:
		p.line("  %s", sessionLine(d))
	case *catalog.EvidenceRecorded:
		p.evidence++
		p.line("  evidence %s: %s", d.EvidenceID, oneLine(d.Excerpt, 120))
	case *catalog.NotesAppended:
		if d.Author != catalog.AuthorAgent {
			p.line("  notes (%s) += %s", d.Author, oneLine(d.Text, 140))
		}
	case *catalog.PolicyTriggered:
		p.line("  policy %s (%s): %s", d.Rule, d.Effect, oneLine(d.Message, 160))
	case *catalog.LogicVerdict:
		if d.RepeatedAction != "" {
			p.line("  logic verifier: step %d repeats step %d (thinking %d/2)", d.Step, d.RepeatedStep, d.ThinkingEval)
		}
	case *catalog.AuditRequested:
		p.phase = fmt.Sprintf("auditor: round %d", d.Round)
		p.line("audit round %d requested (%d evidence cited)", d.Round, len(d.EvidenceIDs))
	case *catalog.AuditDecomposed:
		p.line("  auditor: %d checks", len(d.Checks))
		for _, c := range d.Checks {
			p.line("    %s %s", c.CheckID, oneLine(c.Question, 150))
		}
	case *catalog.AuditCheck:
		p.line("  auditor: %s → %s", d.CheckID, d.Result)
	case *catalog.AuditJudged:
		p.line("  auditor: round %d score %d/4 (judge %d)", d.Round, d.Score, d.RawScore)
		for _, c := range d.Caps {
			p.line("    capped at %d by %s: %s", c.Cap, c.Rule, oneLine(c.Reason, 140))
		}
		for i, s := range d.Instructions {
			p.line("    %d. %s", i+1, oneLine(s, 160))
		}
	case *catalog.AuditFeedback:
		verdict := "rejected"
		if d.Accepted {
			verdict = "accepted"
		}
		p.line("  auditor: round %d %s", d.Round, verdict)
		p.phase = "thinking"
	case *catalog.ForkPrefix:
		for _, l := range strings.Split(forkPrefixText(d), "\n") {
			p.line("%s", l)
		}
	case *catalog.VerifyFastScored:
		p.line("verifyfast: credit score %d/5 (%s), %d high and %d low errors", d.CreditScore, d.Zone, d.HighCount, d.LowCount)
	case *catalog.RunCancelled:
		p.ended, p.liveCall = true, ""
		p.line("cancelled by %s: %s", d.RequestedBy, d.Reason)
	case *catalog.RunFinished:
		p.ended, p.liveCall = true, ""
		answer := d.Answer
		if d.AnswerBlob != nil && p.blobs != nil {
			if b, err := p.blobs.GetBlob(ctx, d.AnswerBlob.Digest); err == nil {
				answer = string(b)
			}
		}
		outcome := string(d.Outcome)
		if d.Reason != "" {
			outcome += "(" + d.Reason + ")"
		}
		p.line("\n%s after %d steps, %s, %d tokens", outcome, d.Steps, (time.Duration(d.DurationMS) * time.Millisecond).Truncate(time.Millisecond), d.Usage.Total)
		switch {
		case d.AnswerFile != "":
			p.line("answer (the file %s, %s):\n%s", d.AnswerFile, shortDigest(d.AnswerSHA256), strings.TrimSpace(answer))
		case answer != "":
			p.line("answer:\n%s", strings.TrimSpace(answer))
		}
	}
}

// reasoningOf is the reasoning of a reply, read from its blob when big
// ("" when there is none or the blob cannot be read).
func (p *runPrinter) reasoningOf(ctx context.Context, d *catalog.ModelResponded) string {
	r := d.Reasoning
	if r == "" && d.ReasoningBlob != nil && p.blobs != nil {
		if b, err := p.blobs.GetBlob(ctx, d.ReasoningBlob.Digest); err == nil {
			r = string(b)
		} else {
			r = fmt.Sprintf("(%d bytes, unreadable: %v)", d.ReasoningBlob.Size, err)
		}
	}
	return strings.TrimSpace(r)
}

// printReasoning shows a step's reasoning: its first line and how many
// lines follow, or all of it with --show-reasoning.
func (p *runPrinter) printReasoning(r string) {
	lines := strings.Split(r, "\n")
	if p.showReasoning {
		p.line("  reasoning:")
		for _, l := range lines {
			p.line("  │ %s", strings.TrimRight(l, " \t\r"))
		}
		return
	}
	first := oneLine(lines[0], 150)
	if rest := len(lines) - 1; rest > 0 {
		p.line("  reasoning: %s (%d more lines; --show-reasoning)", first, rest)
	} else {
		p.line("  reasoning: %s", first)
	}
}

// editLine shows an edit step: its op and path, and for an insert the
// line it goes after ("edit insert /work/a.py after line 12"); summary
// (the step's command) stands in when the step carries no edit.
func editLine(e *catalog.EditArgs, summary string) string {
	if e == nil {
		if summary = oneLine(summary, 200); summary == "" {
			return "edit (no operation)"
		}
		if !strings.HasPrefix(summary, "edit ") {
			summary = "edit " + summary
		}
		return summary
	}
	s := "edit " + string(e.Op) + " " + e.Path
	switch e.Op {
	case catalog.EditView:
		if len(e.ViewRange) == 2 {
			last := fmt.Sprint(e.ViewRange[1])
			if e.ViewRange[1] < 0 {
				last = "end"
			}
			s += fmt.Sprintf(" lines %d-%s", e.ViewRange[0], last)
		}
	case catalog.EditInsert:
		s += fmt.Sprintf(" after line %d", e.InsertLine)
	}
	return s
}

// editResultLine shows what an edit did: "str_replace /work/a.py: +3/-1
// lines", "unchanged", or why it did not run or was refused. what is the
// generic outcome (exit N, denied, timed out, interrupted).
func editResultLine(d *catalog.ToolFinished, what string) string {
	name := "edit"
	if d.Edit != nil {
		name = string(d.Edit.Op) + " " + d.Edit.Path
	}
	switch {
	case d.Denied || d.TimedOut || d.Interrupted:
		return name + ": " + what
	case d.Error != "":
		return name + ": sandbox error: " + oneLine(d.Error, 160)
	case d.ExitCode != 0:
		why := oneLine(outputText(d.Stderr), 160)
		if why == "" {
			why = what
		}
		return name + ": refused: " + why
	case d.Edit == nil:
		return name + ": done"
	case d.Edit.Changed:
		add, del := diffStat(d.Edit.Diff)
		s := fmt.Sprintf("%s: +%d/-%d lines", name, add, del)
		if d.Edit.DiffTruncated {
			s += " (diff cut: counts are partial)"
		}
		return s
	case d.Edit.Op == catalog.EditView:
		return fmt.Sprintf("%s: %d bytes shown", name, d.Stdout.Bytes)
	}
	return name + ": unchanged"
}

// outputText is an output's text as far as it is inline.
func outputText(o catalog.Output) string {
	if o.Encoding != "" {
		return ""
	}
	return o.Head
}

// diffStat counts the added and removed lines of a unified diff (not its
// ---/+++ file headers).
func diffStat(diff string) (add, del int) {
	for line := range strings.SplitSeq(diff, "\n") {
		switch {
		case strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "--- "):
		case strings.HasPrefix(line, "+"):
			add++
		case strings.HasPrefix(line, "-"):
			del++
		}
	}
	return add, del
}

// sessionLine shows a vera.tool.session event: "shell session restarted
// in vera-x: reason; lost: a; b".
func sessionLine(d *catalog.ToolSession) string {
	s := fmt.Sprintf("shell session %s in %s: %s", d.Action, d.Container, oneLine(d.Reason, 160))
	if len(d.Lost) > 0 {
		s += "; lost: " + oneLine(strings.Join(d.Lost, "; "), 200)
	}
	return s
}

// shortDigest shows a sha256 digest by its first 12 hex digits.
func shortDigest(sha string) string {
	if sha == "" {
		return "no digest"
	}
	if len(sha) > 12 {
		sha = sha[:12] + "…"
	}
	return "sha256 " + sha
}

// answerHead is the start of an answer file's content, when inline, for
// the step's line.
func answerHead(answer string) string {
	if strings.TrimSpace(answer) == "" {
		return ""
	}
	return ": " + oneLine(answer, 120)
}
