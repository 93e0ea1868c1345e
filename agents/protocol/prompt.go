package protocol

import (
	_ "embed"
	"regexp"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
)

//go:embed system_prompt.en.txt
var systemPrompt string

// SystemPrompt returns the agent's system prompt (English), embedded from
// system_prompt.en.txt. It describes the sandbox, the reply format and every
// action shape [Parse] accepts, the evidence discipline, the notes gate, the
// epistemic states, the negative-claim rules, query mutation and the audit.
func SystemPrompt() string { return systemPrompt }

//go:embed system_prompt_native.en.txt
var nativeSections string

//go:embed system_prompt_auto.en.txt
var autoSection string

// The prompts of the other protocols, built once from the text one.
var (
	nativePrompt = replaceSections(systemPrompt, nativeSections)
	autoPrompt   = systemPrompt + autoSection
)

// SystemPromptFor returns the system prompt of a run's tool protocol (its
// setting, not the auto decision: one prompt holds for the whole run, so
// that the prompt prefix stays the same from step to step):
//
//   - text: SystemPrompt(), byte for byte;
//   - native: the same guide with its sections 2 (replies), 3 (actions)
//     and 11 (examples) describing the function calls instead of the text
//     format (system_prompt_native.en.txt);
//   - auto ("" too): SystemPrompt() followed by a section 12 that lets a
//     model call the offered functions instead (system_prompt_auto.en.txt),
//     so that a model of either kind can succeed from the first step: the
//     text format stays the reference, the prompt is a byte prefix-extension
//     of the text one.
func SystemPromptFor(p catalog.ToolProtocol) string {
	switch p {
	case catalog.ToolProtocolText:
		return systemPrompt
	case catalog.ToolProtocolNative:
		return nativePrompt
	default:
		return autoPrompt
	}
}

var sectionRe = regexp.MustCompile(`(?m)^# ([0-9]+)\. `)

// replaceSections returns base with every "# N. " section that repl holds
// replaced by repl's. A section runs to the next section header.
func replaceSections(base, repl string) string {
	split := func(s string) (head string, secs map[string]string, order []string) {
		idx := sectionRe.FindAllStringSubmatchIndex(s, -1)
		if len(idx) == 0 {
			return s, nil, nil
		}
		head, secs = s[:idx[0][0]], map[string]string{}
		for i, m := range idx {
			end := len(s)
			if i+1 < len(idx) {
				end = idx[i+1][0]
			}
			n := s[m[2]:m[3]]
			secs[n] = s[m[0]:end]
			order = append(order, n)
		}
		return head, secs, order
	}
	head, secs, order := split(base)
	_, news, _ := split(repl)
	var b strings.Builder
	b.WriteString(head)
	for _, n := range order {
		sec := secs[n]
		if r, ok := news[n]; ok {
			r = strings.TrimRight(r, "\n") + "\n"
			if strings.HasSuffix(sec, "\n\n") {
				r += "\n"
			}
			sec = r
		}
		b.WriteString(sec)
	}
	return b.String()
}

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
		{catalog.ActionEdit, `edit: {"tool":"edit","args":{"op":"create","path":…,"file_text":…}}`, `{"tool":"edit","args":{"op":"create","path":"/work/extract.py","file_text":"import re, sys\nprint(re.findall(r'Release Date: [^<]+', open(sys.argv[1]).read()))\n"}}`},
		{catalog.ActionEdit, `edit: {"tool":"edit","args":{"op":"str_replace","path":…,"old_str":…,"new_str":…}}`, `{"tool":"edit","args":{"op":"str_replace","path":"/work/extract.py","old_str":"Release Date: [^<]+","new_str":"Release Date:\\s*[^<]+"}}`},
		{catalog.ActionEdit, `edit: {"tool":"edit","args":{"op":"view","path":…,"view_range":[…]}}`, `{"tool":"edit","args":{"op":"view","path":"/work/extract.py","view_range":[1,20]}}`},
		{catalog.ActionNotesAppend, `notes: {"tool":"notes_append","args":{"text":…}}`, `{"tool":"notes_append","args":{"text":"- Python 3.13.0 release date: Oct. 7, 2024. Hook: https://www.python.org/downloads/release/python-3130/ \"Release Date: Oct. 7, 2024\" (ev_0004)"}}`},
		{catalog.ActionSubmit, `submit: {"tool":"submit","args":{"answer":…}}`, `{"tool":"submit","args":{"answer":"Python 3.13.0 was released on October 7, 2024.\n\nEvidence: https://www.python.org/downloads/release/python-3130/ - \"Release Date: Oct. 7, 2024\" (ev_0004)"}}`},
		{catalog.ActionSubmit, `submit a file: {"tool":"submit","args":{"answer_file":…}}`, `{"tool":"submit","args":{"answer_file":"/work/output/answer.md"}}`},
	}
}

// toolNames maps every accepted tool name (normalised by normTool) to its
// tool. Every key appears, quoted, in the system prompt.
var toolNames = map[string]catalog.ActionTool{
	"shell":        catalog.ActionShell,
	"bash":         catalog.ActionShell,
	"edit":         catalog.ActionEdit,
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
