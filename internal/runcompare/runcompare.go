// Package runcompare compares a run with a recording of it, step by step:
// the agent's steps, the results of its commands and edits, and the
// prompts of its model calls. `vera replay --reexecute` (package replay)
// and forks (package agents, which reproduce a recorded run's first steps
// before going on live) judge with the same functions, so that "the same
// step" means one thing everywhere.
//
// Each comparison returns what differs in words ("" or false when nothing
// that decides the run does); the *Text functions render one side for a
// report.
package runcompare

import (
	"fmt"
	"slices"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
)

// Steps names what differs between a recorded step and its re-execution:
// the format error, the tool, the command, the notes text, the answer,
// whether the policy let the action run, the evidence cited. "" when
// nothing that decides the run does (the thought and status may differ).
func Steps(want, got catalog.AgentStep) string {
	var diffs []string
	if want.FormatError != got.FormatError {
		diffs = append(diffs, "format error")
	}
	if want.ActionTool != got.ActionTool {
		diffs = append(diffs, "tool")
	}
	if want.Command != got.Command {
		diffs = append(diffs, "command")
	}
	if want.NotesText != got.NotesText {
		diffs = append(diffs, "notes text")
	}
	if want.Answer != got.Answer {
		diffs = append(diffs, "answer")
	}
	if (want.RequestID == "") != (got.RequestID == "") {
		diffs = append(diffs, "policy gate (run or refused)")
	}
	if !slices.Equal(want.EvidenceUsed, got.EvidenceUsed) {
		diffs = append(diffs, "evidence used")
	}
	if len(diffs) == 0 {
		return ""
	}
	return strings.Join(diffs, ", ") + " differ"
}

// ActionText is a step's action in one short phrase: the command, the
// tool's name, "submit: ANSWER", or "(format error)".
func ActionText(st catalog.AgentStep) string {
	switch {
	case st.FormatError != "":
		return "(format error)"
	case st.ActionTool == catalog.ActionShell:
		return st.Command
	case st.ActionTool == catalog.ActionNotesAppend:
		return "notes_append"
	case st.ActionTool == catalog.ActionSubmit:
		return "submit: " + st.Answer
	}
	return string(st.ActionTool)
}

// StepText renders a step for a divergence report: its action, the notes
// text of an append, the format error of an invalid reply, and whether
// the policy refused its command.
func StepText(st catalog.AgentStep) string {
	if st.FormatError != "" {
		return "(format error: " + st.FormatError + ")"
	}
	s := ActionText(st)
	if st.ActionTool == catalog.ActionNotesAppend {
		s += ": " + st.NotesText
	}
	if st.ActionTool == catalog.ActionShell && st.RequestID == "" {
		s += " (refused by the policy layer)"
	}
	return s
}

// Results names what differs between a recorded command (or edit) result
// and its re-execution: the exit code, a denial or timeout, stdout and
// stderr (their inline head and size), the cwd after, the shell state
// after (when both ran in the same session mode) and the edited file's
// digest. "" when they are the same.
func Results(want, got catalog.ToolFinished) string {
	var diffs []string
	if want.ExitCode != got.ExitCode {
		diffs = append(diffs, fmt.Sprintf("exit code %d, recorded %d", got.ExitCode, want.ExitCode))
	}
	if want.Denied != got.Denied || want.TimedOut != got.TimedOut {
		diffs = append(diffs, "denied/timed out")
	}
	if want.Stdout.Head != got.Stdout.Head || want.Stdout.Bytes != got.Stdout.Bytes {
		diffs = append(diffs, "stdout")
	}
	if want.Stderr.Head != got.Stderr.Head || want.Stderr.Bytes != got.Stderr.Bytes {
		diffs = append(diffs, "stderr")
	}
	if want.CwdAfter != got.CwdAfter {
		diffs = append(diffs, "cwd after")
	}
	if want.Session == got.Session && want.ShellStateAfter != got.ShellStateAfter {
		// The functions, aliases, variables and options the next command
		// starts from.
		diffs = append(diffs, "shell state after")
	}
	if want.Edit != nil && got.Edit != nil && want.Edit.SHA256After != got.Edit.SHA256After {
		diffs = append(diffs, "edited file's content")
	}
	if len(diffs) == 0 {
		return ""
	}
	return "command result differs: " + strings.Join(diffs, ", ")
}

// ResultText renders a result for a divergence report: its exit code and
// its stdout (its stderr when stdout is blank).
func ResultText(f catalog.ToolFinished) string {
	out := f.Stdout.Head
	if strings.TrimSpace(out) == "" {
		out = f.Stderr.Head
	}
	return fmt.Sprintf("exit %d: %s", f.ExitCode, out)
}

// PromptDiff is where a prompt departs from the recorded one.
type PromptDiff struct {
	// Detail says where: the message count, a message's role, or the
	// first byte of a message that differs.
	Detail string
	// Recorded and Replayed are the two sides near the difference.
	Recorded, Replayed string
}

// Prompts reports where got differs from the recorded prompt want
// (differs false when the messages are equal, role and content).
func Prompts(want, got []llm.Message) (d PromptDiff, differs bool) {
	for i := 0; i < max(len(want), len(got)); i++ {
		switch {
		case i >= len(got):
			d.Detail = fmt.Sprintf("the prompt has %d messages, the recording %d", len(got), len(want))
			d.Recorded = want[i].Content
			return d, true
		case i >= len(want):
			d.Detail = fmt.Sprintf("the prompt has %d messages, the recording %d", len(got), len(want))
			d.Replayed = got[i].Content
			return d, true
		case want[i].Role != got[i].Role:
			d.Detail = fmt.Sprintf("message %d is from %s, recorded from %s", i+1, got[i].Role, want[i].Role)
			return d, true
		case want[i].Content != got[i].Content:
			at := FirstDiff(want[i].Content, got[i].Content)
			d.Detail = fmt.Sprintf("message %d (%s) differs from byte %d on", i+1, got[i].Role, at)
			d.Recorded, d.Replayed = Around(want[i].Content, at), Around(got[i].Content, at)
			return d, true
		}
	}
	return d, false
}

// FirstDiff returns the index of the first byte where a and b differ (the
// shorter one's length when one is a prefix of the other).
func FirstDiff(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// Around returns the text of s near byte at (40 bytes before, 80 after,
// on UTF-8 boundaries), with "…" where it was cut.
func Around(s string, at int) string {
	from, to := max(0, at-40), min(len(s), at+80)
	for from > 0 && from < len(s) && s[from]&0xC0 == 0x80 {
		from--
	}
	for to < len(s) && s[to]&0xC0 == 0x80 {
		to++
	}
	out := s[from:to]
	if from > 0 {
		out = "…" + out
	}
	if to < len(s) {
		out += "…"
	}
	return out
}

// Cut returns s cut to at most n bytes on a UTF-8 boundary, "…" appended
// when it was cut.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}
