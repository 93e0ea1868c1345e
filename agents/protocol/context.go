package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vera-run/vera/bus/catalog"
)

// Message is one chat message: the catalogue's type, so that the messages
// Build returns go into vera.model.requested as they are.
type Message = catalog.Message

// Defaults of Options.
const (
	DefaultTailK          = 6    // actions kept in the ACTION TAIL
	DefaultObservationCap = 2048 // bytes of one observation in the tail
	DefaultActionCap      = 2048 // bytes of one action in the tail
)

// Section headers of the user message, in order.
const (
	HeaderTask        = "PRIMARY TASK:"
	HeaderNotes       = "PINNED notes.md:"
	HeaderConstraints = "OPEN CONSTRAINTS (hard requirements; satisfy them before you conclude):"
	HeaderTail        = "ACTION TAIL (last %d):"
	HeaderNewNotes    = "NOTES ADDED SINCE STEP %d (already in notes.md; pinned above from a later turn on):"
	HeaderFeedback    = "FEEDBACK:"
)

// Context is everything one step's prompt is made of. The agent rebuilds
// Notes, Tail and Feedback from the stream (vera.notes.appended,
// vera.agent.step, vera.tool.finished, policy and audit events), never from
// files.
type Context struct {
	// SystemPrompt is the system message; empty = SystemPrompt().
	SystemPrompt string
	// Task is the PRIMARY TASK, verbatim (never clipped).
	Task string
	// Notes is notes.md as rebuilt from events (never clipped): the
	// whole of it, or, with NewNotes, the part written before the step
	// NewNotesSince.
	Notes string
	// NewNotes are the appends to notes.md made at step NewNotesSince or
	// later (never clipped): shown after the action tail, so that the
	// prompt grows at its end while the tail's page lasts (see TailStart).
	// Empty = no such section.
	NewNotes      string
	NewNotesSince int
	// OpenConstraints are the policy layer's hard requirements in force,
	// in the order given; blank ones are skipped.
	OpenConstraints []string
	// Tail is the run's actions and observations, oldest first. Build
	// keeps the last Options.TailK of them.
	Tail []TailEntry
	// Feedback is this turn's feedback: format errors (see Feedback),
	// policy nudges, the auditor's instructions. Empty = no section.
	Feedback string
}

// TailEntry is one past action and what came of it.
type TailEntry struct {
	Step        int    // agent step, from 1
	Action      string // the action as the model wrote it (Action.Raw), or a note such as "(format error: missing_action)"
	Observation string // the result: see RenderObservation for tool results
}

// Options bound the action tail. Zero or negative values mean the defaults.
type Options struct {
	TailK int // entries kept at most; default 6
	// TailPage is the step by which the tail's window moves: it starts at
	// a multiple of TailPage and keeps between TailK-TailPage+1 and TailK
	// entries, so that for TailPage steps in a row each prompt extends the
	// one before (a server's prompt cache reuses it) instead of dropping
	// its oldest entry every step. Default TailK/2; 1 is a window sliding
	// every step.
	TailPage       int
	ObservationCap int // bytes per observation; default 2 KiB
	ActionCap      int // bytes per action; default 2 KiB
}

func (o Options) withDefaults() Options {
	if o.TailK <= 0 {
		o.TailK = DefaultTailK
	}
	if o.ObservationCap <= 0 {
		o.ObservationCap = DefaultObservationCap
	}
	if o.ActionCap <= 0 {
		o.ActionCap = DefaultActionCap
	}
	if o.TailPage <= 0 {
		o.TailPage = max(o.TailK/2, 1)
	}
	o.TailPage = min(o.TailPage, o.TailK)
	return o
}

// TailStart returns the index of the first of n tail entries that Build
// shows: 0 while n <= TailK, then the smallest multiple of TailPage that
// leaves at most TailK entries.
func TailStart(n int, opts Options) int {
	opts = opts.withDefaults()
	if n <= opts.TailK {
		return 0
	}
	p := opts.TailPage
	return (n - opts.TailK + p - 1) / p * p
}

// Build assembles the messages of one step, always in this order:
//
//	system: the system prompt
//	user:   PRIMARY TASK:\n<task>
//	        \n\nPINNED notes.md:\n<notes, or (empty)>
//	        \n\nACTION TAIL (last K):\n<entries, or (no actions yet)>
//	        \n\nNOTES ADDED SINCE STEP N (…):\n<new notes>  only when not empty
//	        \n\nOPEN CONSTRAINTS (…):\n- <constraint>…      only when there are any
//	        \n\nFEEDBACK:\n<feedback>                      only when not empty
//
// What changes from one step to the next is at the end: while the tail's
// page lasts (TailStart), a step's prompt begins with the whole of the
// previous one but its last sections (new notes, constraints, feedback),
// which a local server's prompt cache then reuses.
//
// Each tail entry is "[step N] ACTION: <action>\nOBSERVATION:\n<observation>",
// entries separated by a blank line. The task and the notes are copied
// whole (only surrounding blank lines are trimmed); only tail actions and
// observations are capped, by CapText. The result depends on c and opts
// alone: the same input gives the same bytes.
func Build(c Context, opts Options) []Message {
	opts = opts.withDefaults()
	sys := c.SystemPrompt
	if sys == "" {
		sys = SystemPrompt()
	}

	var b strings.Builder
	b.WriteString(HeaderTask)
	b.WriteByte('\n')
	b.WriteString(orEmpty(strings.Trim(c.Task, "\r\n"), "(empty)"))

	b.WriteString("\n\n")
	b.WriteString(HeaderNotes)
	b.WriteByte('\n')
	b.WriteString(orEmpty(strings.Trim(c.Notes, "\r\n"), "(empty)"))

	b.WriteString("\n\n")
	fmt.Fprintf(&b, HeaderTail, opts.TailK)
	tail := c.Tail[TailStart(len(c.Tail), opts):]
	if len(tail) == 0 {
		b.WriteString("\n(no actions yet)")
	}
	for i, e := range tail {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("\n[step ")
		b.WriteString(strconv.Itoa(e.Step))
		b.WriteString("] ACTION: ")
		b.WriteString(orEmpty(CapText(strings.TrimSpace(e.Action), opts.ActionCap), "(none)"))
		b.WriteString("\nOBSERVATION:\n")
		b.WriteString(orEmpty(CapText(strings.Trim(e.Observation, "\r\n"), opts.ObservationCap), "(no output)"))
	}

	if nn := strings.Trim(c.NewNotes, "\r\n"); strings.TrimSpace(nn) != "" {
		b.WriteString("\n\n")
		fmt.Fprintf(&b, HeaderNewNotes, c.NewNotesSince)
		b.WriteByte('\n')
		b.WriteString(nn)
	}

	var cons []string
	for _, oc := range c.OpenConstraints {
		if oc = strings.TrimSpace(oc); oc != "" {
			cons = append(cons, oc)
		}
	}
	if len(cons) > 0 {
		b.WriteString("\n\n")
		b.WriteString(HeaderConstraints)
		for _, oc := range cons {
			b.WriteString("\n- ")
			b.WriteString(strings.ReplaceAll(oc, "\n", "\n  "))
		}
	}

	if fb := strings.TrimSpace(c.Feedback); fb != "" {
		b.WriteString("\n\n")
		b.WriteString(HeaderFeedback)
		b.WriteByte('\n')
		b.WriteString(fb)
	}

	return []Message{
		{Role: catalog.RoleSystem, Content: sys},
		{Role: catalog.RoleUser, Content: b.String()},
	}
}

func orEmpty(s, empty string) string {
	if strings.TrimSpace(s) == "" {
		return empty
	}
	return s
}

// CapText bounds s to n bytes of content: when s is longer, it keeps the
// first n/2 and the last n-n/2 bytes (both cut at UTF-8 boundaries, so a
// little less when a rune straddles a cut) around a marker line
// "[... K bytes omitted ...]". n <= 0 means no cap.
func CapText(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	h := n / 2
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - (n - n/2)
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return s[:h] + "\n[... " + strconv.Itoa(t-h) + " bytes omitted ...]\n" + s[t:]
}

// RenderObservation renders a tool result as the observation of a tail
// entry: the evidence id recorded for it (when not empty), the exit code
// and what stopped the command, stdout and stderr (head, an omission marker
// and tail when sandboxd truncated them) and the working directory after.
// Build caps the result further.
func RenderObservation(evidenceID string, f catalog.ToolFinished) string {
	var b strings.Builder
	if evidenceID != "" {
		b.WriteString("evidence: ")
		b.WriteString(evidenceID)
		b.WriteByte('\n')
	}
	b.WriteString("exit_code: ")
	b.WriteString(strconv.Itoa(f.ExitCode))
	switch {
	case f.Denied:
		b.WriteString(" (refused by the sandbox, rule " + orEmpty(f.DenyRule, "unknown") + "; nothing ran)")
	case f.TimedOut:
		b.WriteString(" (timed out after " + strconv.FormatInt(f.DurationMS/1000, 10) + "s; output so far below)")
	case f.Interrupted:
		b.WriteString(" (interrupted)")
	}
	if f.Error != "" {
		b.WriteString("\nsandbox error: ")
		b.WriteString(f.Error)
	}
	if f.Notice != "" {
		b.WriteString("\nsandbox notice: ")
		b.WriteString(f.Notice)
	}
	renderStream(&b, "stdout", f.Stdout)
	renderStream(&b, "stderr", f.Stderr)
	if f.CwdAfter != "" {
		b.WriteString("\ncwd: ")
		b.WriteString(f.CwdAfter)
	}
	return b.String()
}

func renderStream(b *strings.Builder, name string, o catalog.Output) {
	b.WriteByte('\n')
	b.WriteString(name)
	switch {
	case o.Bytes == 0 && o.Head == "" && o.Tail == "":
		b.WriteString(": (empty)")
		return
	case o.Encoding != "":
		fmt.Fprintf(b, ": (%d bytes of binary output, not shown)", o.Bytes)
		return
	}
	b.WriteString(":\n")
	b.WriteString(strings.TrimRight(o.Head, "\n"))
	if o.Truncated {
		omitted := o.Bytes - int64(len(o.Head)) - int64(len(o.Tail))
		fmt.Fprintf(b, "\n[... %d bytes omitted ...]\n", max(omitted, 0))
		b.WriteString(strings.TrimRight(o.Tail, "\n"))
	}
}
