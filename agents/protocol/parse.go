package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/jsontext"
)

// Turn is one parsed model reply. Fields are filled as far as the reply
// allows even when Parse reports errors, so that the step can be recorded.
type Turn struct {
	Thought      string       // THOUGHT text (continuation lines joined by "\n")
	Action       Action       // the single action
	EvidenceUsed []string     // normalised ids (ev_0001…); nil for none
	StatusUpdate StatusUpdate // the declared epistemic state

	// Protocol says how ParseReply read the reply: native (a tool call) or
	// text; Parse leaves it empty.
	Protocol catalog.ToolProtocol
	// ToolCallID is the id the server gave the tool call read (native).
	ToolCallID string
	// Notice, when set, tells the model something about its reply that
	// was not an error: the part of it that was ignored (a text action
	// beside a tool call, a tool call in the text protocol). The agent
	// puts it in the next turn's FEEDBACK.
	Notice string
}

// Action is the single tool call of a reply.
type Action struct {
	// Tool is shell, edit, notes_append or submit; empty when the action
	// could not be parsed or names an unknown tool.
	Tool   catalog.ActionTool
	Cmd    string // shell: the command (args.cmd or command), trimmed
	Text   string // notes_append: the text to append (args.text), trailing space trimmed
	Answer string // submit: the answer (args.answer), trimmed; empty when AnswerFile is set
	// AnswerFile is submit's args.answer_file: the file under /work/output/
	// whose content is the answer. When set it wins over args.answer.
	AnswerFile string
	// Edit is the file operation of an edit action (its args).
	Edit *catalog.EditArgs
	// Raw is the action JSON on one line: as written when the model wrote
	// it on one line, else compacted. Set whenever an action was found,
	// even a malformed one.
	Raw string
}

// Bounds of the search for multi-line JSON: how many lines one action may
// span, and how many bytes all searches of one Parse may read in total
// (beyond it, a "{" line is taken alone), so that Parse stays linear.
const (
	maxJSONLines = 400
	extentBudget = 1 << 20
)

// Parse reads a model reply. It never panics. The returned errors are in a
// fixed order (thought, action, evidence, status); when there is any, the
// agent must run no tool, record Summary(errs) and send Feedback(errs) in
// the next turn.
func Parse(reply string) (Turn, []FormatError) {
	var t Turn
	text, unterminated := stripThink(normalizeNewlines(reply))
	if strings.TrimSpace(text) == "" {
		if unterminated {
			return t, []FormatError{{CodeUnterminatedThink, "Your reply ended inside an unclosed <think> block, so it held no THOUGHT, action, EVIDENCE_USED or STATUS_UPDATE. Keep the reasoning short, close it with </think>, then write the four required parts."}}
		}
		return t, []FormatError{{CodeEmptyReply, "Your reply was empty. Write THOUGHT, one JSON action, EVIDENCE_USED and STATUS_UPDATE."}}
	}

	s := scan(splitLines(text))
	var errs []FormatError

	// THOUGHT
	t.Thought = strings.TrimSpace(strings.Join(s.thought, "\n"))
	switch {
	case !s.thoughtSeen:
		errs = append(errs, FormatError{CodeMissingThought, "No THOUGHT line. Start your reply with THOUGHT: <what you know, what you do next and why>."})
	case t.Thought == "":
		errs = append(errs, FormatError{CodeMissingThought, "The THOUGHT line is empty. Say what you know, what you do next and why."})
	}

	// Action
	a, aerr := pickAction(s)
	t.Action = a
	if aerr != nil {
		errs = append(errs, *aerr)
	}

	// EVIDENCE_USED
	if !s.evidenceSeen {
		errs = append(errs, FormatError{CodeMissingEvidenceUsed, "No EVIDENCE_USED line. Add EVIDENCE_USED: <the ev_NNNN ids you rely on, comma-separated> or EVIDENCE_USED: none."})
	} else {
		ids, eerr := parseEvidence(strings.Join(s.evidence, " "))
		t.EvidenceUsed = ids
		if eerr != nil {
			errs = append(errs, *eerr)
		}
	}

	// STATUS_UPDATE
	if !s.statusSeen {
		errs = append(errs, FormatError{CodeMissingStatusUpdate, "No STATUS_UPDATE line. End your reply with STATUS_UPDATE: continuing, STATUS_UPDATE: UNRESOLVED(<what is missing>) or STATUS_UPDATE: RESOLVED."})
	} else {
		su, serr := parseStatus(s.status)
		t.StatusUpdate = su
		if serr != nil {
			errs = append(errs, *serr)
		}
	}
	return t, errs
}

// normalizeNewlines turns CRLF and lone CR into LF and drops a BOM.
func normalizeNewlines(s string) string {
	s = strings.TrimPrefix(s, "\uFEFF")
	if strings.IndexByte(s, '\r') < 0 {
		return s
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// stripThink removes reasoning blocks: <think>…</think> and
// <thinking>…</thinking> (any case; a nested opening tag is part of the
// block). A closing tag outside a block removes everything before it; an
// opening tag with no closing tag removes everything after it, and
// unterminated is true. One pass, linear in len(s).
func stripThink(s string) (out string, unterminated bool) {
	if indexFold(s, "<think") < 0 && indexFold(s, "</think") < 0 {
		return s, false
	}
	var b strings.Builder
	seg, in := 0, false
	for i := 0; i < len(s); i++ {
		if s[i] != '<' {
			continue
		}
		if n := tagAt(s, i, "<think>", "<thinking>"); n > 0 && !in {
			b.WriteString(s[seg:i])
			in = true
			i += n - 1
			continue
		}
		if n := tagAt(s, i, "</think>", "</thinking>"); n > 0 {
			if in {
				b.WriteByte('\n')
				in = false
			} else {
				b.Reset()
			}
			seg = i + n
			i += n - 1
		}
	}
	if in {
		return b.String(), true
	}
	b.WriteString(s[seg:])
	return b.String(), false
}

// tagAt returns the length of the tag (ASCII case-insensitive) found at
// s[i:], or 0.
func tagAt(s string, i int, tags ...string) int {
	for _, tag := range tags {
		if len(s)-i >= len(tag) && strings.EqualFold(s[i:i+len(tag)], tag) {
			return len(tag)
		}
	}
	return 0
}

// indexFold is strings.Index with ASCII case folding for a sub starting
// with '<'; byte offsets stay valid in s whatever else s holds.
func indexFold(s, sub string) int {
	for i := strings.IndexByte(s, '<'); i >= 0; {
		if len(s)-i >= len(sub) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
		j := strings.IndexByte(s[i+1:], '<')
		if j < 0 {
			return -1
		}
		i += 1 + j
	}
	return -1
}

// line is one line of the reply outside fence markers.
type line struct {
	s         string
	fence     int  // 0 outside fences, else the fence's number
	jsonFence bool // inside a fence marked json
}

// splitLines splits the reply into lines and drops the fence marker lines
// (``` or ~~~, three or more), remembering which fence each line was in.
// An unclosed fence runs to the end. A fence on a single line
// (```json {…}```) becomes one fenced line.
func splitLines(text string) []line {
	var out []line
	fence, marker, jsonF := 0, "", false
	var raw []string
	for _, l := range strings.Split(text, "\n") {
		// "ACTION: ```json" opens a fence on the label's line: split it.
		if kind, val, ok := matchLabel(strings.TrimSpace(l)); ok && kind == labelAction && fenceMarker(val) != "" {
			raw = append(raw, "ACTION:", val)
			continue
		}
		raw = append(raw, l)
	}
	for _, l := range raw {
		t := strings.TrimSpace(l)
		if marker != "" {
			if isFenceClose(t, marker) {
				marker = ""
				continue
			}
			out = append(out, line{l, fence, jsonF})
			continue
		}
		m := fenceMarker(t)
		if m == "" {
			out = append(out, line{l, 0, false})
			continue
		}
		fence++
		info := t[len(m):]
		if strings.HasSuffix(info, m) && len(strings.TrimSpace(strings.TrimSuffix(info, m))) > 0 {
			// one-line fence
			inner := strings.TrimSpace(strings.TrimSuffix(info, m))
			j := false
			if len(inner) >= 4 && strings.EqualFold(inner[:4], "json") {
				inner, j = strings.TrimSpace(inner[4:]), true
			}
			out = append(out, line{inner, fence, j || strings.HasPrefix(inner, "{")})
			continue
		}
		marker = m
		jsonF = strings.HasPrefix(strings.ToLower(strings.TrimSpace(info)), "json")
	}
	return out
}

// fenceMarker returns the run of ` or ~ (three or more) t starts with.
func fenceMarker(t string) string {
	if len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	i := 0
	for i < len(t) && t[i] == t[0] {
		i++
	}
	if i < 3 {
		return ""
	}
	return t[:i]
}

func isFenceClose(t, marker string) bool {
	m := fenceMarker(t)
	return m != "" && m[0] == marker[0] && len(m) >= len(marker) && len(m) == len(t)
}

// label kinds.
type labelKind int

const (
	labelNone labelKind = iota
	labelThought
	labelAction
	labelEvidence
	labelStatus
)

// labelRe matches a label line: markdown decoration, the label, an
// optional separator, the value.
var labelRe = regexp.MustCompile("^[\\s>#*_~`-]*(?i:(thoughts?|action|evidence[ _-]*used|status[ _-]*update))\\b[*_`]*[ \\t]*(:|=|->|=>|-|–|—)?[*_`]*[ \\t]*(.*)$")

// matchLabel recognises a label at the start of a trimmed line.
func matchLabel(t string) (labelKind, string, bool) {
	m := labelRe.FindStringSubmatch(t)
	if m == nil {
		return labelNone, "", false
	}
	name, sep, val := m[1], m[2], strings.TrimSpace(m[3])
	if sep == "" && val != "" && name != strings.ToUpper(name) {
		return labelNone, "", false // prose such as "Action items…"
	}
	switch l := strings.ToLower(name); {
	case strings.HasPrefix(l, "thought"):
		return labelThought, val, true
	case l == "action":
		return labelAction, val, true
	case strings.HasPrefix(l, "evidence"):
		return labelEvidence, val, true
	default:
		return labelStatus, val, true
	}
}

// candidate is a piece of text that may be the action JSON.
type candidate struct {
	text      string
	multiline bool // spans several lines
	labelled  bool // came after an ACTION: label
	jsonFence bool // came from a fence marked json
}

// scanned is what the line scanner found.
type scanned struct {
	thought          []string
	thoughtSeen      bool
	evidence         []string
	evidenceSeen     bool
	status           string
	statusSeen       bool
	cands            []candidate
	emptyActionLabel bool // an ACTION: label with nothing after it
	codeFence        bool // a fenced block that held no JSON
}

func scan(lines []line) scanned {
	var s scanned
	budget := extentBudget
	cur := labelNone // the label whose continuation lines we are reading
	expectAction := false
	for i := 0; i < len(lines); {
		ln := lines[i]
		t := strings.TrimSpace(ln.s)
		if t == "" {
			i++
			continue
		}
		if kind, val, ok := matchLabel(t); ok {
			if expectAction {
				s.emptyActionLabel = true
				expectAction = false
			}
			cur = labelNone
			switch kind {
			case labelThought:
				s.thoughtSeen = true
				if val != "" {
					s.thought = append(s.thought, val)
				}
				cur = labelThought
			case labelEvidence:
				s.evidenceSeen = true
				if val != "" {
					s.evidence = append(s.evidence, val)
				} else {
					cur = labelEvidence
				}
			case labelStatus:
				s.statusSeen = true
				s.status = val
				if val == "" {
					cur = labelStatus
				}
			case labelAction:
				if val == "" {
					expectAction = true
					break
				}
				if js, ok := jsonStart(val); ok {
					c, next := extent(lines, i, js, &budget)
					c.labelled = true
					s.cands = append(s.cands, c)
					i = next
					continue
				}
				s.cands = append(s.cands, candidate{text: val, labelled: true, jsonFence: ln.jsonFence})
			}
			i++
			continue
		}
		if js, ok := jsonStart(t); ok {
			c, next := extent(lines, i, js, &budget)
			c.labelled = expectAction
			expectAction = false
			s.cands = append(s.cands, c)
			if c.labelled || c.jsonFence || strings.Contains(strings.ToLower(c.text), "tool") {
				cur = labelNone
			} else if cur == labelThought {
				// braces in prose or a data sample: part of the thought
				for _, l := range lines[i:next] {
					if l := strings.TrimSpace(l.s); l != "" {
						s.thought = append(s.thought, l)
					}
				}
			}
			i = next
			continue
		}
		if expectAction {
			s.cands = append(s.cands, candidate{text: t, labelled: true, jsonFence: ln.jsonFence})
			expectAction = false
			i++
			continue
		}
		if ln.fence != 0 && !ln.jsonFence {
			s.codeFence = true
		}
		switch cur {
		case labelThought:
			s.thought = append(s.thought, t)
		case labelEvidence:
			s.evidence = append(s.evidence, t)
		case labelStatus:
			s.status = t
			cur = labelNone
		}
		i++
	}
	if expectAction {
		s.emptyActionLabel = true
	}
	return s
}

// jsonStart returns t from its "{" when t (a trimmed line or label value)
// starts with one, possibly after inline-code backticks.
func jsonStart(t string) (string, bool) {
	u := strings.TrimLeft(t, "`")
	if strings.HasPrefix(u, "{") {
		return u, true
	}
	return "", false
}

// extent collects the JSON object that starts at first (a suffix of line
// i) and may continue over the following lines of the same fence. It stops
// at the brace that balances the first one; text after it on that line is
// dropped. When the object never closes (or the budget runs out), the
// candidate is line i alone.
func extent(lines []line, i int, first string, budget *int) (candidate, int) {
	var b strings.Builder
	var sc jsontext.Scanner
	fence := lines[i].fence
	for j := i; j < len(lines) && j < i+maxJSONLines; j++ {
		if j > i && lines[j].fence != fence {
			break
		}
		seg := lines[j].s
		if j == i {
			seg = first
		} else {
			b.WriteByte('\n')
		}
		if *budget -= len(seg) + 1; *budget < 0 {
			break
		}
		for k := 0; k < len(seg); k++ {
			c := seg[k]
			b.WriteByte(c)
			if sc.Step(c) == jsontext.Structure && (c == '}' || c == ']') && sc.Depth() <= 0 {
				return candidate{text: b.String(), multiline: j > i, jsonFence: lines[i].jsonFence}, j + 1
			}
		}
	}
	return candidate{text: first, jsonFence: lines[i].jsonFence}, i + 1
}

// stripInlineCode removes inline-code backticks around a candidate.
func stripInlineCode(s string) string {
	s = strings.TrimSpace(s)
	for strings.HasPrefix(s, "`") && strings.HasSuffix(s, "`") && len(s) >= 2 {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return strings.TrimSpace(strings.TrimLeft(s, "`"))
}

// decoded is a candidate that parsed as a JSON object.
type decoded struct {
	obj     map[string]json.RawMessage
	raw     string // one line: as written, or compacted
	compact string // compacted, for de-duplication
}

// decodeObject parses a candidate as one JSON object. Raw control
// characters inside strings (a literal newline in a heredoc) are escaped
// before a second attempt.
func decodeObject(text string, multiline bool) (decoded, error) {
	var d decoded
	err := json.Unmarshal([]byte(text), &d.obj)
	src := text
	if err != nil {
		fixed, changed := escapeControlInStrings(text)
		if !changed {
			return d, err
		}
		if err2 := json.Unmarshal([]byte(fixed), &d.obj); err2 != nil {
			return d, err
		}
		src, multiline = fixed, true
	}
	if d.obj == nil {
		return d, fmt.Errorf("not a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(src)); err != nil { // cannot fail after Unmarshal
		return d, err
	}
	d.compact = buf.String()
	d.raw = strings.TrimSpace(text)
	if multiline {
		d.raw = d.compact
	}
	return d, nil
}

// escapeControlInStrings escapes raw control characters inside JSON
// strings.
func escapeControlInStrings(s string) (string, bool) {
	var b strings.Builder
	var sc jsontext.Scanner
	changed := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if sc.Step(c) == jsontext.Content && c < 0x20 {
			changed = true
			switch c {
			case '\n':
				b.WriteString(`\n`)
			case '\t':
				b.WriteString(`\t`)
			case '\r':
				b.WriteString(`\r`)
			default:
				fmt.Fprintf(&b, `\u%04x`, c)
			}
			continue
		}
		b.WriteByte(c)
	}
	return b.String(), changed
}

// pickAction classifies the candidates and returns the single action.
func pickAction(s scanned) (Action, *FormatError) {
	type broken struct {
		text string
		err  error
	}
	var (
		actions  []decoded
		seen     = map[string]bool{}
		brokens  []broken
		toolless []decoded // labelled JSON objects without "tool"
		dataObjs int       // unlabelled JSON objects without "tool"
		attempts int       // broken candidates that mention a tool
	)
	for _, c := range s.cands {
		text := stripInlineCode(c.text)
		d, err := decodeObject(text, c.multiline)
		if err != nil {
			mentionsTool := strings.Contains(strings.ToLower(text), "tool")
			if c.labelled || c.jsonFence || mentionsTool {
				brokens = append(brokens, broken{text, err})
				if mentionsTool {
					attempts++
				}
			}
			continue
		}
		if _, ok := d.obj["tool"]; !ok {
			if c.labelled {
				toolless = append(toolless, d)
			} else {
				dataObjs++
			}
			continue
		}
		if !seen[d.compact] {
			seen[d.compact] = true
			actions = append(actions, d)
		}
	}

	switch {
	case len(actions)+attempts > 1 && len(actions) >= 1:
		var tools []string
		for _, d := range actions {
			var name string
			_ = json.Unmarshal(d.obj["tool"], &name)
			tools = append(tools, name)
		}
		for range attempts {
			tools = append(tools, "unparseable")
		}
		return Action{}, &FormatError{CodeMultipleActions, fmt.Sprintf("Found %d actions (%s); write exactly one action per reply. You will see its result before you choose the next.", len(tools), strings.Join(tools, ", "))}
	case len(actions) == 1:
		return buildAction(actions[0])
	case len(brokens) > 0:
		b := brokens[0]
		return Action{Raw: oneLine(b.text)}, &FormatError{CodeBadJSON, fmt.Sprintf("The action is not valid JSON (%v): %s. Write one JSON object on one line, with double-quoted keys and strings, newlines inside strings escaped as \\n, e.g. {\"tool\":\"shell\",\"args\":{\"cmd\":\"ls -la /work\"}}.", err2msg(b.err), clip(oneLine(b.text), 160))}
	case len(toolless) > 0:
		return Action{Raw: toolless[0].raw}, &FormatError{CodeUnknownTool, fmt.Sprintf("The action %s has no \"tool\" field. Name the tool: shell, edit, notes_append or submit, e.g. {\"tool\":\"shell\",\"args\":{\"cmd\":\"ls -la /work\"}}.", clip(toolless[0].raw, 160))}
	default:
		msg := "No action found. Put exactly one JSON action on its own line, e.g. {\"tool\":\"shell\",\"args\":{\"cmd\":\"ls -la /work\"}}; use notes_append to add notes and submit for the final answer."
		if dataObjs > 0 {
			msg = "No action found: the JSON in your reply has no \"tool\" field. " + msg[len("No action found. "):]
		} else if s.codeFence {
			msg = "No action found: a fenced command is not an action, wrap it as {\"tool\":\"shell\",\"args\":{\"cmd\":\"…\"}}. " + msg[len("No action found. "):]
		} else if s.emptyActionLabel {
			msg = "No action found: the ACTION: label was not followed by JSON. " + msg[len("No action found. "):]
		}
		return Action{}, &FormatError{CodeMissingAction, msg}
	}
}

// oneLine joins the lines of s with spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// err2msg shortens a JSON error for the model.
func err2msg(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// normTool normalises a tool name: lower case, "-", "." and spaces as "_".
func normTool(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	return strings.NewReplacer("-", "_", ".", "_", " ", "_").Replace(n)
}

// getString reads obj[key] as a string: present reports the key exists
// (and is not null), ok that it is a string.
func getString(obj map[string]json.RawMessage, key string) (val string, present, ok bool) {
	r, has := obj[key]
	if !has || string(bytes.TrimSpace(r)) == "null" {
		return "", false, true
	}
	if err := json.Unmarshal(r, &val); err != nil {
		return "", true, false
	}
	return val, true, true
}

// argsObject returns the "args" object (empty when absent or null).
// isString reports that args is a JSON string instead; err that it is
// neither object, string nor null.
func argsObject(obj map[string]json.RawMessage) (args map[string]json.RawMessage, isString bool, err error) {
	r, has := obj["args"]
	if !has || string(bytes.TrimSpace(r)) == "null" {
		return map[string]json.RawMessage{}, false, nil
	}
	if json.Unmarshal(r, &args) == nil && args != nil {
		return args, false, nil
	}
	var str string
	if json.Unmarshal(r, &str) == nil {
		return map[string]json.RawMessage{}, true, nil
	}
	return nil, false, fmt.Errorf(`"args" must be a JSON object`)
}

// buildAction validates a decoded action object.
func buildAction(d decoded) (Action, *FormatError) {
	a := Action{Raw: d.raw}
	name, _, ok := getString(d.obj, "tool")
	if !ok {
		return a, &FormatError{CodeUnknownTool, `The "tool" field must be a string: shell, edit, notes_append or submit.`}
	}
	n := normTool(name)
	tool, known := toolNames[n]
	if !known && notesRewriteTools[n] {
		a.Tool = catalog.ActionNotesAppend
		return a, &FormatError{CodeNotesOverwrite, fmt.Sprintf("notes.md is append-only: tool %q (overwrite, replace, edit or delete) is refused. Add to your notes with {\"tool\":\"notes_append\",\"args\":{\"text\":\"…\"}}; to correct a note, append a correction.", name)}
	}
	if !known {
		return a, &FormatError{CodeUnknownTool, fmt.Sprintf("Unknown tool %q. The tools are shell (run a command), edit (view or change a file), notes_append (add to notes.md) and submit (final answer).", clip(name, 60))}
	}
	a.Tool = tool
	args, argIsString, err := argsObject(d.obj)
	if err != nil {
		return a, &FormatError{CodeBadArgs, err.Error() + `, e.g. "args":{"cmd":"ls -la /work"}.`}
	}
	switch tool {
	case catalog.ActionShell:
		return shellAction(a, d.obj, args, argIsString)
	case catalog.ActionNotesAppend:
		return notesAction(a, d.obj, args, argIsString)
	case catalog.ActionEdit:
		return editAction(a, args, argIsString)
	default:
		return submitAction(a, args, argIsString)
	}
}

func shellAction(a Action, obj, args map[string]json.RawMessage, argIsString bool) (Action, *FormatError) {
	var cmds []string
	if argIsString {
		return a, &FormatError{CodeBadArgs, `"args" must be a JSON object: {"tool":"shell","args":{"cmd":"<command>"}}.`}
	}
	for _, src := range []struct {
		m   map[string]json.RawMessage
		key string
		at  string
	}{{args, "cmd", "args.cmd"}, {args, "command", "args.command"}, {obj, "command", "command"}} {
		v, present, ok := getString(src.m, src.key)
		if !ok {
			return a, &FormatError{CodeBadArgs, fmt.Sprintf("%s must be a string holding the shell command (join a list of words with spaces).", src.at)}
		}
		if present {
			cmds = append(cmds, strings.TrimSpace(v))
		}
	}
	for _, c := range cmds[min(1, len(cmds)):] {
		if c != cmds[0] {
			return a, &FormatError{CodeBadArgs, "The shell action gives two different commands (args.cmd and command); give exactly one."}
		}
	}
	if len(cmds) == 0 || cmds[0] == "" {
		return a, &FormatError{CodeEmptyCommand, `The shell action has no command. Put it in args.cmd: {"tool":"shell","args":{"cmd":"ls -la /work"}}.`}
	}
	a.Cmd = cmds[0]
	return a, nil
}

// appendModes are the "mode" values that mean appending.
var appendModes = map[string]bool{"a": true, "a+": true, "ab": true, "append": true}

// rewriteFlags are boolean fields that ask to change notes other than by
// appending.
var rewriteFlags = []string{"overwrite", "replace", "truncate", "delete", "clear", "reset", "rewrite"}

func notesAction(a Action, obj, args map[string]json.RawMessage, argIsString bool) (Action, *FormatError) {
	refuse := func(why string) (Action, *FormatError) {
		return a, &FormatError{CodeNotesOverwrite, fmt.Sprintf("notes.md is append-only: %s is refused. Drop it and append with {\"tool\":\"notes_append\",\"args\":{\"text\":\"…\"}}; to correct a note, append a correction that says which note it replaces.", why)}
	}
	if argIsString {
		return a, &FormatError{CodeBadArgs, `"args" must be a JSON object: {"tool":"notes_append","args":{"text":"<markdown>"}}.`}
	}
	for _, m := range []map[string]json.RawMessage{args, obj} {
		for _, key := range []string{"mode", "op", "operation"} {
			v, present, ok := getString(m, key)
			if present && (!ok || !appendModes[strings.ToLower(strings.TrimSpace(v))]) {
				return refuse(fmt.Sprintf("%q:%s", key, clip(string(m[key]), 40)))
			}
		}
		for _, f := range rewriteFlags {
			if r, has := m[f]; has {
				var b bool
				if json.Unmarshal(r, &b) != nil || b {
					return refuse(fmt.Sprintf("%q:%s", f, clip(string(r), 40)))
				}
			}
		}
	}
	text, present, ok := getString(args, "text")
	if !ok {
		return a, &FormatError{CodeBadArgs, `args.text must be a string (markdown to append to notes.md).`}
	}
	a.Text = strings.TrimRight(text, " \t\n")
	if !present || strings.TrimSpace(text) == "" {
		return a, &FormatError{CodeEmptyNotes, `The notes_append action has no text. Put the markdown to append in args.text: {"tool":"notes_append","args":{"text":"- finding … (ev_0003)"}}.`}
	}
	return a, nil
}

func submitAction(a Action, args map[string]json.RawMessage, argIsString bool) (Action, *FormatError) {
	if argIsString {
		return a, &FormatError{CodeBadArgs, `"args" must be a JSON object: {"tool":"submit","args":{"answer":"<final answer>"}}.`}
	}
	file, filePresent, ok := getString(args, "answer_file")
	if !ok {
		return a, &FormatError{CodeBadAnswerFile, `args.answer_file must be a string: the path of the answer file under /work/output/, e.g. "/work/output/answer.md".`}
	}
	if filePresent && strings.TrimSpace(file) != "" {
		p := strings.TrimSpace(file)
		if !ValidAnswerFile(p) {
			return a, &FormatError{CodeBadAnswerFile, fmt.Sprintf("args.answer_file must be a clean absolute path of a file under %s (no .., no trailing /), e.g. \"%sanswer.md\"; got %q. Write the answer there first (edit create or the shell), then submit it.", AnswerDir, AnswerDir, clip(p, 120))}
		}
		// The file wins over an inline answer given beside it.
		a.AnswerFile = p
		return a, nil
	}
	ans, present, ok := getString(args, "answer")
	if !ok {
		return a, &FormatError{CodeBadArgs, `args.answer must be a string: the final answer as text (use \n for line breaks).`}
	}
	a.Answer = strings.TrimSpace(ans)
	if !present || a.Answer == "" {
		return a, &FormatError{CodeEmptyAnswer, `The submit action has no answer. Put the final answer, with its evidence hooks, in args.answer: {"tool":"submit","args":{"answer":"…"}}, or name the file under /work/output/ that holds it in args.answer_file.`}
	}
	return a, nil
}
