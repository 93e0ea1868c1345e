package logic

import (
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

func TestNormalizeShellCommand(t *testing.T) {
	same := [][]string{
		{"ls -la /work", "  ls   -la\t/work  ", "ls -la /work;", "ls -la /work\n", "ls -la '/work'", `ls -la "/work"`, `ls -la /wo'rk'`, `l\s -la /work`, "ls -la \\\n /work", "ls -la /work # list it"},
		{"ls -la|wc -l", "ls -la | wc -l", "ls -la |\n  wc -l"},
		{"cd /work && ls", "cd /work&&ls", "cd /work &&\nls"},
		{"cd /work; ls", "cd /work\nls", "cd /work ;ls", "cd /work\n\n  ls\n"},
		{`grep -rn "release date" /work`, `grep -rn 'release date' /work`, `grep  -rn 'release'" date" /work`},
		{"echo hi > out.txt", "echo hi >out.txt", "echo hi>out.txt"},
		{"make 2>&1 | tail", "make 2>& 1|tail"},
		{`echo "$HOME"`, `echo  "$HOME"`},
		{"echo $(date  +%s)", "echo   $(date  +%s)", "echo $(date +%s)", "echo $(date '+%s')"}, // substitutions by the same rules
		{"cat > f.py <<'EOF'\ndef f():\n    return 1\nEOF\npython3 f.py", "cat >f.py  <<'EOF'\ndef f():\n    return 1\nEOF\n python3   f.py"},
		{`curl -s "https://example.com/a?b=1"`, `curl -s 'https://example.com/a?b=1'`},
	}
	for _, group := range same {
		want := NormalizeShellCommand(group[0])
		for _, s := range group[1:] {
			if got := NormalizeShellCommand(s); got != want {
				t.Errorf("NormalizeShellCommand(%q) = %q, want %q (as for %q)", s, got, want, group[0])
			}
		}
	}

	different := [][2]string{
		{"ls -la /work", "ls -l /work"},
		{`grep "a  b" f`, `grep "a b" f`},                // spaces inside quotes matter
		{`echo "$HOME"`, `echo '$HOME'`},                 // expansion vs literal
		{"echo 2>f", "echo 2 >f"},                        // IO number vs argument
		{"echo *", "echo '*'"},                           // glob vs literal
		{"echo ~", "echo '~'"},                           // tilde expansion vs literal
		{"if true; then :; fi", "'if' true; then :; fi"}, // reserved word vs command
		{"a=1 env", "'a=1' env"},                         // assignment vs command
		{"echo a # b", "echo 'a # b'"},                   // comment vs text
		{"sleep 1 &", "sleep 1"},                         // background
		{"cat > f.py <<'EOF'\ndef f():\n    return 1\nEOF", "cat > f.py <<'EOF'\ndef f():\n  return 1\nEOF"}, // here-document bodies verbatim
		{"cat <<'EOF'\n$HOME\nEOF", "cat <<EOF\n$HOME\nEOF"},                                                 // a quoted delimiter stops expansion
	}
	for _, d := range different {
		if a, b := NormalizeShellCommand(d[0]), NormalizeShellCommand(d[1]); a == b {
			t.Errorf("NormalizeShellCommand equates %q and %q (both %q)", d[0], d[1], a)
		}
	}

	exact := map[string]string{
		"ls   -la|wc -l":             "ls -la | wc -l",
		"  cd /work\nls ;  ":         "cd /work; ls",
		`grep 'a b' "c" d\ e`:        `grep 'a b' c 'd e'`,
		"make 2>&1":                  "make 2>&1",
		"echo '' \"\"":               "echo '' ''",
		"# only a comment":           "",
		"echo \"it's\"":              `echo "it's"`,
		"unterminated 'quote here":   "unterminated 'quote here",
		"cat <<EOF\na  b\nEOF\necho": "cat <<EOF; echo\na  b\nEOF",
	}
	for in, want := range exact {
		if got := NormalizeShellCommand(in); got != want {
			t.Errorf("NormalizeShellCommand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseStepAction(t *testing.T) {
	shell := func(action, command string) catalog.AgentStep {
		return catalog.AgentStep{Step: 1, Action: action, ActionTool: catalog.ActionShell, Command: command}
	}
	same := [][]catalog.AgentStep{
		{
			shell(`{"tool":"shell","args":{"cmd":"ls -la /work"}}`, "ls -la /work"),
			shell(`{"tool":"shell","command":"ls  -la   /work"}`, "ls  -la   /work"),
			shell(`{"args": {"cmd": "ls -la '/work'"}, "tool": "shell"}`, ""),
			shell(`{"name":"shell","arguments":"{\"cmd\": \"ls -la /work\"}"}`, ""),
			shell(`not json at all`, "ls -la /work"), // the agent's parsed fields
		},
		{
			{Step: 2, Action: `{"tool":"notes_append","args":{"text":"Found the  date.\n"}}`, ActionTool: catalog.ActionNotesAppend, NotesText: "Found the  date.\n"},
			{Step: 3, Action: `{"tool":"notes_append","args":{"text":"Found the date."}}`},
		},
		{
			{Step: 4, Action: `{"tool":"submit","args":{"answer":"2024-05-01"}}`},
			{Step: 5, Action: `{"tool":"submit","answer":" 2024-05-01 "}`},
		},
		{
			{Step: 6, Action: `{"tool":"browse","args":{"url":"https://a.example","n":1}}`},
			{Step: 7, Action: `{"tool":"browse","args":{"n":1.0,"url":"https://a.example"}}`},
		},
	}
	for gi, group := range same {
		first, ok := ParseStepAction(group[0])
		if !ok {
			t.Fatalf("group %d: no action in %+v", gi, group[0])
		}
		for _, st := range group[1:] {
			a, ok := ParseStepAction(st)
			if !ok {
				t.Errorf("group %d: no action in %+v", gi, st)
				continue
			}
			if !a.Action.Equal(first.Action) {
				t.Errorf("group %d: %s and %s differ", gi, a.Canonical, first.Canonical)
			}
		}
	}

	a, _ := ParseStepAction(shell(`{"tool":"shell","args":{"cmd":"ls -la /work"}}`, ""))
	for _, st := range []catalog.AgentStep{
		shell(`{"tool":"shell","args":{"cmd":"ls -l /work"}}`, ""),
		{Step: 1, Action: `{"tool":"notes_append","args":{"text":"ls -la /work"}}`},
	} {
		b, ok := ParseStepAction(st)
		if !ok || b.Action.Equal(a.Action) {
			t.Errorf("%q should be another action than %q", st.Action, a.Display)
		}
	}
	if a.Tool != "shell" || a.Display != "ls -la /work" {
		t.Errorf("tool %q display %q", a.Tool, a.Display)
	}

	none := []catalog.AgentStep{
		{Step: 1, Action: `{"tool":"shell","args":{"cmd":"ls"}}`, ActionTool: catalog.ActionShell, Command: "ls", FormatError: "missing STATUS_UPDATE line"},
		{Step: 1},
		{Step: 1, Action: `{"tool":"shell","args":{"cmd":"  # nothing"}}`},
		{Step: 1, Action: `{"args":{"cmd":"ls"}}`}, // no tool named anywhere
	}
	for _, st := range none {
		if a, ok := ParseStepAction(st); ok {
			t.Errorf("ParseStepAction(%+v) = %s, want no action", st, a.Canonical)
		}
	}
}

// TestParseStepActionEdit: edit steps compare by their file operation, not
// by tool name alone, and not by the summary in their command.
func TestParseStepActionEdit(t *testing.T) {
	step := func(raw string, e *catalog.EditArgs) catalog.AgentStep {
		st := catalog.AgentStep{Step: 1, Action: raw, ActionTool: catalog.ActionEdit, Edit: e}
		if e != nil {
			st.Command = "edit " + string(e.Op) + " " + e.Path
		}
		return st
	}
	parse := func(st catalog.AgentStep) StepAction {
		t.Helper()
		a, ok := ParseStepAction(st)
		if !ok {
			t.Fatalf("ParseStepAction(%+v) gives no action", st)
		}
		return a
	}
	view := &catalog.EditArgs{Op: catalog.EditView, Path: "/work/a.py", ViewRange: []int{1, 40}}
	repl := &catalog.EditArgs{Op: catalog.EditStrReplace, Path: "/work/a.py", OldStr: "x = 1\n", NewStr: "x = 2\n"}
	native := "edit" // a native tool call's action line is not the JSON of the VERA protocol
	a := parse(step(native, view))
	if a.Tool != "edit" || a.Display != "edit view /work/a.py" {
		t.Errorf("view: tool %q display %q", a.Tool, a.Display)
	}
	same := [][2]catalog.AgentStep{
		{step(native, view), step(`{"tool":"edit","args":{"op":"view","path":"/work/a.py","view_range":[1,40]}}`, nil)},
		{step(native, repl), step(`{"tool":"edit","args":{"command":"str_replace","path":"/work/a.py","old_str":"x = 1\n","new_str":"x = 2\n"}}`, nil)},
		{step(native, repl), step(native, &catalog.EditArgs{Op: catalog.EditStrReplace, Path: " /work/a.py", OldStr: "x = 1\n", NewStr: "x = 2\n", FileText: "ignored"})},
	}
	for _, p := range same {
		if x, y := parse(p[0]), parse(p[1]); !x.Action.Equal(y.Action) {
			t.Errorf("%s and %s should be the same action", x.Canonical, y.Canonical)
		}
	}
	different := [][2]*catalog.EditArgs{
		{view, {Op: catalog.EditView, Path: "/work/a.py", ViewRange: []int{41, 80}}},
		{view, {Op: catalog.EditView, Path: "/work/b.py", ViewRange: []int{1, 40}}},
		{repl, {Op: catalog.EditStrReplace, Path: "/work/a.py", OldStr: "y = 1\n", NewStr: "y = 2\n"}},
		{repl, {Op: catalog.EditStrReplace, Path: "/work/a.py", OldStr: "x = 1\n", NewStr: "  x = 2\n"}}, // indentation matters
		{{Op: catalog.EditInsert, Path: "/work/a.py", InsertLine: 3, NewStr: "z\n"}, {Op: catalog.EditInsert, Path: "/work/a.py", InsertLine: 4, NewStr: "z\n"}},
		{{Op: catalog.EditUndo, Path: "/work/a.py"}, repl},
	}
	for _, d := range different {
		if x, y := parse(step(native, d[0])), parse(step(native, d[1])); x.Action.Equal(y.Action) {
			t.Errorf("%s and %s should be different actions", x.Canonical, y.Canonical)
		}
	}
	// An edit is never the shell command its summary reads like.
	sh := parse(catalog.AgentStep{Step: 1, ActionTool: catalog.ActionShell, Command: "edit str_replace /work/a.py"})
	if sh.Action.Equal(parse(step(native, repl)).Action) {
		t.Error("an edit equals the shell command of its summary")
	}
	// Without an operation there is nothing to compare.
	for _, st := range []catalog.AgentStep{step(native, nil), step(`{"tool":"edit","args":{"path":"/work/a.py"}}`, nil), step(native, &catalog.EditArgs{Op: "view"})} {
		if a, ok := ParseStepAction(st); ok {
			t.Errorf("ParseStepAction(%+v) = %s, want no action", st, a.Canonical)
		}
	}
}
