package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
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

	mu       sync.Mutex
	step     int
	tools    int
	running  string // the command in flight
	evidence int
	tokens   int64
	calls    int
	phase    string
}

// line prints one line above the status line.
func (p *runPrinter) line(format string, args ...any) {
	p.prog.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
}

// status redraws the status line (on a terminal only).
func (p *runPrinter) status() {
	p.mu.Lock()
	defer p.mu.Unlock()
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
		if d.Error != "" {
			p.line("  model %s: error after %d ms: %s", d.CallID, d.LatencyMS, oneLine(d.Error, 160))
		} else if d.FinishReason == "length" {
			p.line("  model %s: reply cut by the token limit (finish_reason=length)", d.CallID)
		}
	case *catalog.AgentStep:
		p.step = d.Step
		p.phase = "deciding"
		p.line("step %d  %s", d.Step, oneLine(d.Thought, 150))
		switch {
		case d.FormatError != "":
			p.line("  format error (nothing ran): %s", oneLine(d.FormatError, 160))
		case d.ActionTool == catalog.ActionShell:
			p.line("  $ %s", oneLine(d.Command, 200))
		case d.ActionTool == catalog.ActionNotesAppend:
			p.line("  notes += %s", oneLine(d.NotesText, 160))
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
		p.line("  → %s in %s, %d bytes out", what, time.Duration(d.DurationMS)*time.Millisecond, d.Stdout.Bytes+d.Stderr.Bytes)
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
	case *catalog.VerifyFastScored:
		p.line("verifyfast: credit score %d/5 (%s), %d high and %d low errors", d.CreditScore, d.Zone, d.HighCount, d.LowCount)
	case *catalog.RunCancelled:
		p.line("cancelled by %s: %s", d.RequestedBy, d.Reason)
	case *catalog.RunFinished:
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
		if answer != "" {
			p.line("answer:\n%s", strings.TrimSpace(answer))
		}
	}
}
