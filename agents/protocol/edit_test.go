package protocol

import (
	"reflect"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// TestParseEditAction: every op parses into its EditArgs, in the text
// and the native protocol alike, with the one-line summary of its request.
func TestParseEditAction(t *testing.T) {
	for _, tc := range []struct {
		args    string
		want    catalog.EditArgs
		summary string
	}{
		{`{"op":"str_replace","path":"/work/a.py","old_str":"x = 1","new_str":""}`,
			catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/a.py", OldStr: "x = 1"}, "edit str_replace /work/a.py"},
		{`{"op":"create","path":"/work/output/answer.md","file_text":"# Answer\n"}`,
			catalog.EditArgs{Op: catalog.EditCreate, Path: "/work/output/answer.md", FileText: "# Answer\n"}, "edit create /work/output/answer.md"},
		{`{"op":"View","path":"/input/data.csv","view_range":[3,-1]}`,
			catalog.EditArgs{Op: catalog.EditView, Path: "/input/data.csv", ViewRange: []int{3, -1}}, "edit view /input/data.csv 3:-1"},
		{`{"op":"insert","path":"/work/a.py","insert_line":0,"new_str":"import os\n"}`,
			catalog.EditArgs{Op: catalog.EditInsert, Path: "/work/a.py", NewStr: "import os\n"}, "edit insert /work/a.py after line 0"},
		{`{"op":"undo","path":"/work/a.py"}`, catalog.EditArgs{Op: catalog.EditUndo, Path: "/work/a.py"}, "edit undo /work/a.py"},
	} {
		turn, errs := Parse(reply(thoughtLine, `{"tool":"edit","args":`+tc.args+`}`, evLine, statusLine))
		if len(errs) > 0 || turn.Action.Tool != catalog.ActionEdit || turn.Action.Edit == nil || !reflect.DeepEqual(*turn.Action.Edit, tc.want) {
			t.Errorf("text %s: %v %+v", tc.args, errs, turn.Action.Edit)
			continue
		}
		if got := EditSummary(*turn.Action.Edit); got != tc.summary {
			t.Errorf("summary %q, want %q", got, tc.summary)
		}
		args := `{"thought":"fix it",` + strings.TrimPrefix(tc.args, "{") // the discipline arguments around the own ones
		args = strings.TrimSuffix(args, "}") + `,"evidence_used":[],"status_update":"continuing"}`
		nt, nerrs := ParseReply(native, Reply{ToolCalls: []catalog.ToolCall{call("edit", args)}})
		if len(nerrs) > 0 || nt.Action.Edit == nil || !reflect.DeepEqual(*nt.Action.Edit, tc.want) {
			t.Errorf("native %s: %v %+v", args, nerrs, nt.Action.Edit)
		}
	}
}

// TestNativeEditErrorsNameArguments: a bad edit call is a bad_edit
// format error whose example is in the call's terms, not the text format's.
func TestNativeEditErrorsNameArguments(t *testing.T) {
	_, errs := ParseReply(native, Reply{ToolCalls: []catalog.ToolCall{call("edit", `{"thought":"x","op":"replace","path":"/work/a.py","evidence_used":[],"status_update":"continuing"}`)}})
	if len(errs) != 1 || errs[0].Code != CodeBadEdit || !strings.Contains(errs[0].Message, `"replace"`) || strings.Contains(errs[0].Message, `{"tool"`) {
		t.Fatalf("errors %v", errs)
	}
}

// TestParseAnswerFile: submit names a file under /work/output/; given
// both, the file wins and the inline answer is dropped.
func TestParseAnswerFile(t *testing.T) {
	for _, args := range []string{
		`{"answer_file":"/work/output/answer.md"}`,
		`{"answer_file":" /work/output/answer.md ","answer":"inline"}`,
	} {
		turn, errs := Parse(reply(thoughtLine, `{"tool":"submit","args":`+args+`}`, evLine, statusLine))
		if len(errs) > 0 || turn.Action.Tool != catalog.ActionSubmit || turn.Action.AnswerFile != "/work/output/answer.md" || turn.Action.Answer != "" {
			t.Errorf("%s: %v %+v", args, errs, turn.Action)
		}
	}
	nt, errs := ParseReply(native, Reply{ToolCalls: []catalog.ToolCall{call("submit", `{"thought":"done","answer_file":"/work/output/report.md","evidence_used":["ev_0001"],"status_update":"RESOLVED"}`)}})
	if len(errs) > 0 || nt.Action.AnswerFile != "/work/output/report.md" {
		t.Errorf("native: %v %+v", errs, nt.Action)
	}
	for p, ok := range map[string]bool{
		"/work/output/a.md": true, "/work/output/sub/a.md": true, "/work/output/": false, "/work/output": false,
		"/work/output/../a": false, "/work/output//a": false, "/work/output/a/": false, "/work/a.md": false, "/work/output/a\nb": false,
	} {
		if ValidAnswerFile(p) != ok {
			t.Errorf("ValidAnswerFile(%q) = %v", p, !ok)
		}
	}
}
