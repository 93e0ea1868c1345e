package protocol

import (
	_ "embed"

	"github.com/vera-run/vera/bus/catalog"
)

//go:embed system_prompt.en.txt
var systemPrompt string

// SystemPrompt returns the agent's system prompt (English), embedded from
// system_prompt.en.txt. It describes the sandbox, the reply format and every
// action shape [Parse] accepts, the evidence discipline, the notes gate, the
// epistemic states, the negative-claim rules, query mutation and the audit.
func SystemPrompt() string { return systemPrompt }

// Shape is one accepted form of the action JSON, with an example.
type Shape struct {
	Tool    catalog.ActionTool // the tool the shape parses to
	Name    string             // short description
	Example string             // an example, verbatim as in the system prompt
}

// Shapes returns the action shapes Parse accepts besides the aliases listed
// in the package documentation. Each Example appears verbatim in the system
// prompt (a test keeps them in step).
func Shapes() []Shape {
	return []Shape{
		{catalog.ActionShell, `shell: {"tool":"shell","args":{"cmd":…}}`, `{"tool":"shell","args":{"cmd":"curl -sL https://www.python.org/downloads/release/python-3130/ | grep -i -m 3 'release date'"}}`},
		{catalog.ActionShell, `shell, short form: {"tool":"shell","command":…}`, `{"tool":"shell","command":"ls -la /input"}`},
		{catalog.ActionNotesAppend, `notes: {"tool":"notes_append","args":{"text":…}}`, `{"tool":"notes_append","args":{"text":"- Python 3.13.0 release date: Oct. 7, 2024. Hook: https://www.python.org/downloads/release/python-3130/ \"Release Date: Oct. 7, 2024\" (ev_0004)"}}`},
		{catalog.ActionSubmit, `submit: {"tool":"submit","args":{"answer":…}}`, `{"tool":"submit","args":{"answer":"Python 3.13.0 was released on October 7, 2024.\n\nEvidence: https://www.python.org/downloads/release/python-3130/ - \"Release Date: Oct. 7, 2024\" (ev_0004)"}}`},
	}
}

// toolNames maps every accepted tool name (normalised by normTool) to its
// tool. Every key appears, quoted, in the system prompt.
var toolNames = map[string]catalog.ActionTool{
	"shell":        catalog.ActionShell,
	"bash":         catalog.ActionShell,
	"notes_append": catalog.ActionNotesAppend,
	"append_notes": catalog.ActionNotesAppend,
	"submit":       catalog.ActionSubmit,
	"final_answer": catalog.ActionSubmit,
}

// notesRewriteTools are tool names that ask to change notes other than by
// appending: refused as notes_overwrite rather than reported as unknown.
var notesRewriteTools = map[string]bool{
	"notes_write": true, "write_notes": true, "notes_overwrite": true, "overwrite_notes": true,
	"notes_replace": true, "replace_notes": true, "notes_edit": true, "edit_notes": true,
	"notes_delete": true, "delete_notes": true, "notes_clear": true, "clear_notes": true,
	"notes_set": true, "set_notes": true,
	"notes_reset": true, "reset_notes": true, "notes_truncate": true, "truncate_notes": true,
}
