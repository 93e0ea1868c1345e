package protocol

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

const (
	thoughtLine = "THOUGHT: The release page should state the date."
	shellJSON   = `{"tool":"shell","args":{"cmd":"curl -sL https://example.org | head"}}`
	evLine      = "EVIDENCE_USED: ev_0002"
	statusLine  = "STATUS_UPDATE: UNRESOLVED(need the release page)"
)

func reply(lines ...string) string { return strings.Join(lines, "\n") }

func codes(errs []FormatError) []Code {
	var out []Code
	for _, e := range errs {
		out = append(out, e.Code)
	}
	return out
}

// TestParseAccepted covers every accepted variant: each must parse with no
// error into the expected turn.
func TestParseAccepted(t *testing.T) {
	curl := "curl -sL https://example.org | head"
	wantShell := Action{Tool: catalog.ActionShell, Cmd: curl, Raw: shellJSON}
	wantStatus := StatusUpdate{State: StateUnresolved, Reason: "need the release page", Raw: "UNRESOLVED(need the release page)"}
	base := Turn{Thought: "The release page should state the date.", Action: wantShell, EvidenceUsed: []string{"ev_0002"}, StatusUpdate: wantStatus}
	with := func(f func(*Turn)) Turn {
		t := base
		t.EvidenceUsed = append([]string(nil), base.EvidenceUsed...)
		f(&t)
		return t
	}

	tests := []struct {
		name  string
		reply string
		want  Turn
	}{
		{"canonical", reply(thoughtLine, shellJSON, evLine, statusLine), base},
		{"shell command shape", reply(thoughtLine, `{"tool":"shell","command":"ls -la /input"}`, evLine, statusLine),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionShell, Cmd: "ls -la /input", Raw: `{"tool":"shell","command":"ls -la /input"}`}
			})},
		{"shell args.command alias", reply(thoughtLine, `{"tool":"shell","args":{"command":"ls"}}`, evLine, statusLine),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionShell, Cmd: "ls", Raw: `{"tool":"shell","args":{"command":"ls"}}`}
			})},
		{"bash alias, both keys agreeing", reply(thoughtLine, `{"tool":"Bash","args":{"cmd":"ls"},"command":"ls"}`, evLine, statusLine),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionShell, Cmd: "ls", Raw: `{"tool":"Bash","args":{"cmd":"ls"},"command":"ls"}`}
			})},
		{"ACTION: prefix", reply(thoughtLine, "ACTION: "+shellJSON, evLine, statusLine), base},
		{"Action - prefix, backticks", reply(thoughtLine, "Action - `"+shellJSON+"`", evLine, statusLine), base},
		{"ACTION: label, JSON on next line", reply(thoughtLine, "ACTION:", "", shellJSON, evLine, statusLine), base},
		{"json fence", reply(thoughtLine, "```json", shellJSON, "```", evLine, statusLine), base},
		{"plain fence", reply(thoughtLine, "```", shellJSON, "```", evLine, statusLine), base},
		{"tilde fence", reply(thoughtLine, "~~~json", shellJSON, "~~~", evLine, statusLine), base},
		{"ACTION: with fence on its line", reply(thoughtLine, "ACTION: ```json", shellJSON, "```", evLine, statusLine), base},
		{"one-line fence", reply(thoughtLine, "```json "+shellJSON+" ```", evLine, statusLine), base},
		{"fenced multi-line JSON is re-serialised", reply(thoughtLine, "```json", "{", `  "tool": "shell",`, `  "args": {`, `    "cmd": "curl -sL https://example.org | head"`, "  }", "}", "```", evLine, statusLine), base},
		{"unfenced multi-line JSON", reply(thoughtLine, "{", `  "tool": "shell",`, `  "args": {"cmd": "curl -sL https://example.org | head"}`, "}", evLine, statusLine), base},
		{"raw newline inside a JSON string (heredoc)", reply(thoughtLine, "```json", `{"tool":"shell","args":{"cmd":"cat > /work/a.py <<'EOF'`, `print(1)`, `EOF"}}`, "```", evLine, statusLine),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionShell, Cmd: "cat > /work/a.py <<'EOF'\nprint(1)\nEOF", Raw: `{"tool":"shell","args":{"cmd":"cat > /work/a.py <<'EOF'\nprint(1)\nEOF"}}`}
			})},
		{"text after the JSON on its line is ignored", reply(thoughtLine, shellJSON+"   <- run this", evLine, statusLine), base},
		{"same action twice counts once", reply(thoughtLine, "ACTION: "+shellJSON, "```json", shellJSON, "```", evLine, statusLine), base},
		{"data JSON without tool is not an action", reply("THOUGHT: the API returned", `{"status":"ok"}`, shellJSON, evLine, statusLine),
			with(func(t *Turn) { t.Thought = "the API returned\n{\"status\":\"ok\"}" })},
		{"think block ignored", reply("<think>", "Maybe THOUGHT: x and {\"tool\":\"submit\"}", "</think>", thoughtLine, shellJSON, evLine, statusLine), base},
		{"THINK tags any case, inline", "<THINK>plan {\"tool\":\"bash\"}</Think>" + reply(thoughtLine, shellJSON, evLine, statusLine), base},
		{"thinking tag", reply("<thinking>hmm</thinking>", thoughtLine, shellJSON, evLine, statusLine), base},
		{"orphan closing think tag", reply("reasoning from the template", "STATUS_UPDATE: RESOLVED", "</think>", thoughtLine, shellJSON, evLine, statusLine), base},
		{"CRLF", strings.Join([]string{thoughtLine, shellJSON, evLine, statusLine}, "\r\n") + "\r\n", base},
		{"lone CR", strings.Join([]string{thoughtLine, shellJSON, evLine, statusLine}, "\r"), base},
		{"BOM", "\uFEFF" + reply(thoughtLine, shellJSON, evLine, statusLine), base},
		{"label variants", reply("Thought - The release page should state the date.", shellJSON, "Evidence used: ev_0002", "status-update = UNRESOLVED (need the release page)"),
			with(func(t *Turn) { t.StatusUpdate.Raw = "UNRESOLVED (need the release page)" })},
		{"markdown labels", reply("**THOUGHT:** The release page should state the date.", shellJSON, "- **EVIDENCE_USED**: ev_0002", "## STATUS UPDATE: UNRESOLVED(need the release page)"), base},
		{"lower-case labels and spaces", reply("  thought:The release page should state the date.", shellJSON, "evidence_used :ev_0002", "status_update:   UNRESOLVED(need the release page)  "), base},
		{"capital label without separator", reply("THOUGHT The release page should state the date.", shellJSON, evLine, statusLine), base},
		{"other order", reply(statusLine, evLine, shellJSON, thoughtLine), base},
		{"multi-line thought", reply("THOUGHT: first line", "second line", "", shellJSON, evLine, statusLine),
			with(func(t *Turn) { t.Thought = "first line\nsecond line" })},
		{"braces in prose stay in the thought", reply("THOUGHT: the set", "{a, b}", `{"k":"v"}`, "is complete", shellJSON, evLine, statusLine),
			with(func(t *Turn) { t.Thought = "the set\n{a, b}\n{\"k\":\"v\"}\nis complete" })},
		{"preamble ignored", reply("Sure, here is my next step.", thoughtLine, shellJSON, evLine, statusLine), base},
		{"prose label-like line is not a label", reply(thoughtLine, "Action items are listed below.", shellJSON, evLine, statusLine),
			with(func(t *Turn) { t.Thought += "\nAction items are listed below." })},
		{"values on the next line", reply("THOUGHT:", "The release page should state the date.", shellJSON, "EVIDENCE_USED:", "- ev_0002", "STATUS_UPDATE:", "UNRESOLVED(need the release page)"), base},
		{"evidence none", reply(thoughtLine, shellJSON, "EVIDENCE_USED: none", statusLine),
			with(func(t *Turn) { t.EvidenceUsed = nil })},
		{"evidence NONE yet", reply(thoughtLine, shellJSON, "EVIDENCE_USED: NONE yet.", statusLine),
			with(func(t *Turn) { t.EvidenceUsed = nil })},
		{"evidence []", reply(thoughtLine, shellJSON, "EVIDENCE_USED: []", statusLine),
			with(func(t *Turn) { t.EvidenceUsed = nil })},
		{"evidence normalised, deduped, prose tolerated", reply(thoughtLine, shellJSON, `EVIDENCE_USED: EV-2 (release page), ev_0002; ev7, ["ev_00011"], ev_12345.`, statusLine),
			with(func(t *Turn) { t.EvidenceUsed = []string{"ev_0002", "ev_0007", "ev_0011", "ev_12345"} })},
		{"evidence over several lines", reply(thoughtLine, shellJSON, "EVIDENCE_USED: ev_0002", "EVIDENCE_USED: ev_0003", statusLine),
			with(func(t *Turn) { t.EvidenceUsed = []string{"ev_0002", "ev_0003"} })},
		{"status continuing", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: continuing"),
			with(func(t *Turn) { t.StatusUpdate = StatusUpdate{State: StateContinue, Raw: "continuing"} })},
		{"status CONTINUE with note", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: **CONTINUE** - fetching the page"),
			with(func(t *Turn) {
				t.StatusUpdate = StatusUpdate{State: StateContinue, Reason: "fetching the page", Raw: "**CONTINUE** - fetching the page"}
			})},
		{"status in progress", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: in progress"),
			with(func(t *Turn) { t.StatusUpdate = StatusUpdate{State: StateContinue, Raw: "in progress"} })},
		{"status RESOLVED.", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: RESOLVED."),
			with(func(t *Turn) { t.StatusUpdate = StatusUpdate{State: StateResolved, Raw: "RESOLVED."} })},
		{"status unresolved: reason", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: unresolved: no source (yet)"),
			with(func(t *Turn) {
				t.StatusUpdate = StatusUpdate{State: StateUnresolved, Reason: "no source (yet)", Raw: "unresolved: no source (yet)"}
			})},
		{"status nested parentheses", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: UNRESOLVED(need (a) source)"),
			with(func(t *Turn) {
				t.StatusUpdate = StatusUpdate{State: StateUnresolved, Reason: "need (a) source", Raw: "UNRESOLVED(need (a) source)"}
			})},
		{"status last wins", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: continuing", statusLine), base},
		{"notes_append", reply(thoughtLine, `{"tool":"notes_append","args":{"text":"- date: Oct 7 (ev_0002)\n"}}`, evLine, statusLine),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionNotesAppend, Text: "- date: Oct 7 (ev_0002)", Raw: `{"tool":"notes_append","args":{"text":"- date: Oct 7 (ev_0002)\n"}}`}
			})},
		{"notes append mode a", reply(thoughtLine, `{"tool":"append_notes","args":{"text":"x","mode":"a"}}`, evLine, statusLine),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionNotesAppend, Text: "x", Raw: `{"tool":"append_notes","args":{"text":"x","mode":"a"}}`}
			})},
		{"notes.append spelled with a dot", reply(thoughtLine, `{"tool":"Notes.Append","args":{"text":"x","overwrite":false}}`, evLine, statusLine),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionNotesAppend, Text: "x", Raw: `{"tool":"Notes.Append","args":{"text":"x","overwrite":false}}`}
			})},
		{"submit", reply(thoughtLine, `{"tool":"submit","args":{"answer":" Released Oct 7.\nEvidence: ev_0002 "}}`, evLine, "STATUS_UPDATE: RESOLVED"),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionSubmit, Answer: "Released Oct 7.\nEvidence: ev_0002", Raw: `{"tool":"submit","args":{"answer":" Released Oct 7.\nEvidence: ev_0002 "}}`}
				t.StatusUpdate = StatusUpdate{State: StateResolved, Raw: "RESOLVED"}
			})},
		{"final_answer alias", reply(thoughtLine, `{"tool":"final_answer","args":{"answer":"42"}}`, evLine, statusLine),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionSubmit, Answer: "42", Raw: `{"tool":"final_answer","args":{"answer":"42"}}`}
			})},
		{"final-answer spelled with a dash", reply(thoughtLine, `{"tool":"FINAL-ANSWER","args":{"answer":"42"}}`, evLine, statusLine),
			with(func(t *Turn) {
				t.Action = Action{Tool: catalog.ActionSubmit, Answer: "42", Raw: `{"tool":"FINAL-ANSWER","args":{"answer":"42"}}`}
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := Parse(tt.reply)
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

var errorCases = []struct {
	name  string
	reply string
	want  []Code
	msg   string // substring of the first error's message
}{
	{"empty reply", " \r\n\t", []Code{CodeEmptyReply}, "empty"},
	{"think only", "<think>all reasoning</think>\n", []Code{CodeEmptyReply}, ""},
	{"unterminated think", "<think>I will first check", []Code{CodeUnterminatedThink}, "</think>"},
	{"missing thought", reply(shellJSON, evLine, statusLine), []Code{CodeMissingThought}, "THOUGHT"},
	{"empty thought", reply("THOUGHT:", shellJSON, evLine, statusLine), []Code{CodeMissingThought}, "empty"},
	{"missing action", reply(thoughtLine, "I will run curl on the page.", evLine, statusLine), []Code{CodeMissingAction}, `{"tool":"shell"`},
	{"fenced command is not an action", reply(thoughtLine, "```bash", "curl -sL https://example.org", "```", evLine, statusLine), []Code{CodeMissingAction}, "fenced command"},
	{"empty ACTION label", reply(thoughtLine, "ACTION:", evLine, statusLine), []Code{CodeMissingAction}, "ACTION:"},
	{"JSON with no tool outside a label", reply(thoughtLine, `{"cmd":"ls"}`, evLine, statusLine), []Code{CodeMissingAction}, `no "tool"`},
	{"multiple actions", reply(thoughtLine, shellJSON, `{"tool":"shell","command":"ls"}`, evLine, statusLine), []Code{CodeMultipleActions}, "2 actions"},
	{"multiple actions in one fence", reply(thoughtLine, "```json", shellJSON, `{"tool":"notes_append","args":{"text":"x"}}`, "```", evLine, statusLine), []Code{CodeMultipleActions}, "shell, notes_append"},
	{"valid plus broken action", reply(thoughtLine, shellJSON, `{"tool":"shell","args":{"cmd":"ls"}`, evLine, statusLine), []Code{CodeMultipleActions}, "unparseable"},
	{"bad json single quotes", reply(thoughtLine, `{'tool':'shell','args':{'cmd':'ls'}}`, evLine, statusLine), []Code{CodeBadJSON}, "not valid JSON"},
	{"bad json trailing comma in fence", reply(thoughtLine, "```json", `{"tool":"shell","args":{"cmd":"ls"},}`, "```", evLine, statusLine), []Code{CodeBadJSON}, "not valid JSON"},
	{"bad json after ACTION label", reply(thoughtLine, "ACTION: shell ls -la", evLine, statusLine), []Code{CodeBadJSON}, "shell ls -la"},
	{"unclosed JSON", reply(thoughtLine, `{"tool":"shell","args":{"cmd":"ls"}`, evLine, statusLine), []Code{CodeBadJSON}, ""},
	{"unknown tool", reply(thoughtLine, `{"tool":"browser","args":{"url":"x"}}`, evLine, statusLine), []Code{CodeUnknownTool}, `"browser"`},
	{"tool not a string", reply(thoughtLine, `{"tool":1,"args":{"cmd":"ls"}}`, evLine, statusLine), []Code{CodeUnknownTool}, "string"},
	{"labelled JSON without tool", reply(thoughtLine, `ACTION: {"cmd":"ls"}`, evLine, statusLine), []Code{CodeUnknownTool}, `no "tool"`},
	{"args not an object", reply(thoughtLine, `{"tool":"shell","args":["ls"]}`, evLine, statusLine), []Code{CodeBadArgs}, "object"},
	{"args a string", reply(thoughtLine, `{"tool":"shell","args":"ls"}`, evLine, statusLine), []Code{CodeBadArgs}, "object"},
	{"cmd not a string", reply(thoughtLine, `{"tool":"shell","args":{"cmd":["ls","-la"]}}`, evLine, statusLine), []Code{CodeBadArgs}, "args.cmd"},
	{"two different commands", reply(thoughtLine, `{"tool":"shell","args":{"cmd":"ls"},"command":"pwd"}`, evLine, statusLine), []Code{CodeBadArgs}, "two different"},
	{"answer not a string", reply(thoughtLine, `{"tool":"submit","args":{"answer":{"date":"x"}}}`, evLine, statusLine), []Code{CodeBadArgs}, "args.answer"},
	{"notes text not a string", reply(thoughtLine, `{"tool":"notes_append","args":{"text":["a"]}}`, evLine, statusLine), []Code{CodeBadArgs}, "args.text"},
	{"empty command", reply(thoughtLine, `{"tool":"shell","args":{"cmd":"   "}}`, evLine, statusLine), []Code{CodeEmptyCommand}, "args.cmd"},
	{"no command", reply(thoughtLine, `{"tool":"shell","args":{}}`, evLine, statusLine), []Code{CodeEmptyCommand}, ""},
	{"top-level cmd is not a shape", reply(thoughtLine, `{"tool":"shell","cmd":"ls"}`, evLine, statusLine), []Code{CodeEmptyCommand}, ""},
	{"empty notes", reply(thoughtLine, `{"tool":"notes_append","args":{"text":"\n"}}`, evLine, statusLine), []Code{CodeEmptyNotes}, "args.text"},
	{"empty answer", reply(thoughtLine, `{"tool":"submit","args":{}}`, evLine, statusLine), []Code{CodeEmptyAnswer}, "args.answer"},
	{"answer file outside /work/output", reply(thoughtLine, `{"tool":"submit","args":{"answer_file":"/work/answer.md"}}`, evLine, statusLine), []Code{CodeBadAnswerFile}, "/work/output/"},
	{"answer file escaping /work/output", reply(thoughtLine, `{"tool":"submit","args":{"answer_file":"/work/output/../notes.md"}}`, evLine, statusLine), []Code{CodeBadAnswerFile}, "clean absolute"},
	{"answer file relative", reply(thoughtLine, `{"tool":"submit","args":{"answer_file":"output/answer.md"}}`, evLine, statusLine), []Code{CodeBadAnswerFile}, ""},
	{"answer file the directory", reply(thoughtLine, `{"tool":"submit","args":{"answer_file":"/work/output/"}}`, evLine, statusLine), []Code{CodeBadAnswerFile}, ""},
	{"answer file not a string", reply(thoughtLine, `{"tool":"submit","args":{"answer_file":["/work/output/a.md"]}}`, evLine, statusLine), []Code{CodeBadAnswerFile}, "string"},
	{"edit without op", reply(thoughtLine, `{"tool":"edit","args":{"path":"/work/a.py"}}`, evLine, statusLine), []Code{CodeBadEdit}, "no op"},
	{"edit unknown op", reply(thoughtLine, `{"tool":"edit","args":{"op":"delete","path":"/work/a.py"}}`, evLine, statusLine), []Code{CodeBadEdit}, `"delete"`},
	{"edit without path", reply(thoughtLine, `{"tool":"edit","args":{"op":"view"}}`, evLine, statusLine), []Code{CodeBadEdit}, "no path"},
	{"edit relative path", reply(thoughtLine, `{"tool":"edit","args":{"op":"view","path":"a.py"}}`, evLine, statusLine), []Code{CodeBadEdit}, "absolute"},
	{"edit unknown argument", reply(thoughtLine, `{"tool":"edit","args":{"op":"create","path":"/work/a.py","content":"x"}}`, evLine, statusLine), []Code{CodeBadEdit}, `"content"`},
	{"edit wrong type", reply(thoughtLine, `{"tool":"edit","args":{"op":"insert","path":"/work/a.py","insert_line":"3","new_str":"x"}}`, evLine, statusLine), []Code{CodeBadEdit}, "wrong type"},
	{"edit create without text", reply(thoughtLine, `{"tool":"edit","args":{"op":"create","path":"/work/a.py"}}`, evLine, statusLine), []Code{CodeBadEdit}, "file_text"},
	{"edit str_replace without old_str", reply(thoughtLine, `{"tool":"edit","args":{"op":"str_replace","path":"/work/a.py","new_str":"x"}}`, evLine, statusLine), []Code{CodeBadEdit}, "old_str"},
	{"edit insert without line", reply(thoughtLine, `{"tool":"edit","args":{"op":"insert","path":"/work/a.py","new_str":"x"}}`, evLine, statusLine), []Code{CodeBadEdit}, "insert_line"},
	{"edit of /input", reply(thoughtLine, `{"tool":"edit","args":{"op":"create","path":"/input/a.py","file_text":"x"}}`, evLine, statusLine), []Code{CodeBadEdit}, "read-only"},
	{"edit outside /work", reply(thoughtLine, `{"tool":"edit","args":{"op":"create","path":"/etc/passwd","file_text":"x"}}`, evLine, statusLine), []Code{CodeBadEdit}, "/work"},
	{"edit bad view range", reply(thoughtLine, `{"tool":"edit","args":{"op":"view","path":"/work/a.py","view_range":[5]}}`, evLine, statusLine), []Code{CodeBadEdit}, "view_range"},
	{"edit of notes.md", reply(thoughtLine, `{"tool":"edit","args":{"op":"str_replace","path":"/work/notes.md","old_str":"a","new_str":"b"}}`, evLine, statusLine), []Code{CodeNotesOverwrite}, "append-only"},
	{"missing evidence", reply(thoughtLine, shellJSON, statusLine), []Code{CodeMissingEvidenceUsed}, "none"},
	{"empty evidence", reply(thoughtLine, shellJSON, "EVIDENCE_USED:", statusLine), []Code{CodeMissingEvidenceUsed}, "none"},
	{"bad evidence id", reply(thoughtLine, shellJSON, "EVIDENCE_USED: ev_0002, ev_abc, ev_0", statusLine), []Code{CodeBadEvidenceID}, `"ev_abc", "ev_0"`},
	{"evidence prose only", reply(thoughtLine, shellJSON, "EVIDENCE_USED: the curl output above", statusLine), []Code{CodeBadEvidenceID}, "the curl output"},
	{"missing status", reply(thoughtLine, shellJSON, evLine), []Code{CodeMissingStatusUpdate}, "STATUS_UPDATE"},
	{"empty status", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE:"), []Code{CodeMissingStatusUpdate}, "empty"},
	{"bad status", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: done"), []Code{CodeBadStatusUpdate}, `"done"`},
	{"unresolved without reason", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: UNRESOLVED"), []Code{CodeBadStatusUpdate}, "reason"},
	{"unresolved with empty parentheses", reply(thoughtLine, shellJSON, evLine, "STATUS_UPDATE: UNRESOLVED()"), []Code{CodeBadStatusUpdate}, "reason"},
	{"everything missing but a thought", thoughtLine, []Code{CodeMissingAction, CodeMissingEvidenceUsed, CodeMissingStatusUpdate}, ""},
	{"prose only", "I think the answer is 42.", []Code{CodeMissingThought, CodeMissingAction, CodeMissingEvidenceUsed, CodeMissingStatusUpdate}, ""},
}

// TestParseErrors covers every format error code.
func TestParseErrors(t *testing.T) {
	for _, tt := range errorCases {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := Parse(tt.reply)
			if got := codes(errs); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("codes %v, want %v (%v)", got, tt.want, errs)
			}
			if !strings.Contains(errs[0].Message, tt.msg) {
				t.Errorf("message %q does not contain %q", errs[0].Message, tt.msg)
			}
			for _, e := range errs {
				if e.Message == "" {
					t.Errorf("%s: empty message", e.Code)
				}
			}
		})
	}
}

// TestEveryCodeIsExercised keeps errorCases and replyErrorCases
// complete: every code has a case (notes_overwrite has its own test).
func TestEveryCodeIsExercised(t *testing.T) {
	seen := map[Code]bool{CodeNotesOverwrite: true}
	for _, tc := range errorCases {
		for _, c := range tc.want {
			seen[c] = true
		}
	}
	for _, tc := range replyErrorCases {
		for _, c := range tc.want {
			seen[c] = true
		}
	}
	for _, c := range Codes() {
		if !seen[c] {
			t.Errorf("code %s has no case in errorCases", c)
		}
	}
}

func TestNotesOverwriteRefused(t *testing.T) {
	for _, action := range []string{
		`{"tool":"notes_append","args":{"text":"x","mode":"w"}}`,
		`{"tool":"notes_append","args":{"text":"x","mode":"overwrite"}}`,
		`{"tool":"notes_append","mode":"w","args":{"text":"x"}}`,
		`{"tool":"notes_append","args":{"text":"x","mode":null,"overwrite":true}}`,
		`{"tool":"notes_append","args":{"text":"x","replace":true}}`,
		`{"tool":"notes_append","args":{"text":"","delete":true}}`,
		`{"tool":"notes_append","args":{"truncate":"yes"}}`,
		`{"tool":"notes_append","args":{"text":"x","op":"delete"}}`,
		`{"tool":"notes_append","args":{"text":"x","mode":1}}`,
		`{"tool":"notes_write","args":{"text":"x"}}`,
		`{"tool":"write_notes","args":{"text":"x"}}`,
		`{"tool":"delete_notes","args":{}}`,
		`{"tool":"notes-clear"}`,
		`{"tool":"notes_overwrite","args":{"text":"x"}}`,
	} {
		turn, errs := Parse(reply(thoughtLine, action, evLine, statusLine))
		if got := codes(errs); !reflect.DeepEqual(got, []Code{CodeNotesOverwrite}) {
			t.Errorf("%s: codes %v, want [notes_overwrite]", action, got)
			continue
		}
		if turn.Action.Tool != catalog.ActionNotesAppend || turn.Action.Raw != action {
			t.Errorf("%s: action %#v", action, turn.Action)
		}
		if !strings.Contains(errs[0].Message, "append-only") {
			t.Errorf("%s: message %q", action, errs[0].Message)
		}
	}
}

func TestNormalizeEvidenceID(t *testing.T) {
	for in, want := range map[string]string{
		"ev_0001": "ev_0001", "ev_1": "ev_0001", "EV_1": "ev_0001", "ev-1": "ev_0001", "ev1": "ev_0001",
		"ev_00001": "ev_0001", "ev_0042": "ev_0042", "ev_12345": "ev_12345", " ev_7 ": "ev_0007",
		"ev_0": "", "ev_": "", "ev_x1": "", "ev_1a": "", "e_1": "", "1": "", "ev_1234567890": "", "ev__1": "",
	} {
		got, ok := NormalizeEvidenceID(in)
		if got != want || ok != (want != "") {
			t.Errorf("NormalizeEvidenceID(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if FormatEvidenceID(3) != "ev_0003" || FormatEvidenceID(10000) != "ev_10000" {
		t.Error("FormatEvidenceID")
	}
}

func TestStatusString(t *testing.T) {
	for _, tc := range []struct {
		s    StatusUpdate
		want string
	}{
		{StatusUpdate{}, ""},
		{StatusUpdate{State: StateResolved}, "RESOLVED"},
		{StatusUpdate{State: StateContinue}, "CONTINUE"},
		{StatusUpdate{State: StateUnresolved, Reason: "need x"}, "UNRESOLVED(need x)"},
	} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("%#v: %q, want %q", tc.s, got, tc.want)
		}
	}
}

func TestFeedbackAndSummary(t *testing.T) {
	if Feedback(nil) != "" || Summary(nil) != "" {
		t.Fatal("no errors must give empty feedback and summary")
	}
	_, errs := Parse(reply(thoughtLine, evLine))
	fb := Feedback(errs)
	for _, want := range []string{"no tool ran", "[missing_action]", "[missing_status_update]", "THOUGHT:", "EVIDENCE_USED:", "STATUS_UPDATE:", `{"tool":"shell"`} {
		if !strings.Contains(fb, want) {
			t.Errorf("feedback lacks %q:\n%s", want, fb)
		}
	}
	sum := Summary(errs)
	if strings.Contains(sum, "\n") || !strings.HasPrefix(sum, "missing_action: ") || !strings.Contains(sum, "; missing_status_update: ") {
		t.Errorf("summary %q", sum)
	}
	if !HasCode(errs, CodeMissingAction) || HasCode(errs, CodeBadJSON) {
		t.Error("HasCode")
	}
}

func TestParseDeterministicAndRawSingleLine(t *testing.T) {
	r := reply(thoughtLine, "```json", "{", `"tool": "notes_append",`, `"args": {"text": "line1`, `line2"}`, "}", "```", evLine, statusLine)
	a, errs := Parse(r)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	b, _ := Parse(r)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("Parse is not deterministic")
	}
	if strings.Contains(a.Action.Raw, "\n") || a.Action.Raw != `{"tool":"notes_append","args":{"text":"line1\nline2"}}` {
		t.Errorf("raw %q", a.Action.Raw)
	}
	if a.Action.Text != "line1\nline2" {
		t.Errorf("text %q", a.Action.Text)
	}
}
