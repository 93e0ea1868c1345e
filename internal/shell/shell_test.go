package shell

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustParse(t *testing.T, src string) *Script {
	t.Helper()
	s, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return s
}

func simple(s *Script) []*Cmd {
	var out []*Cmd
	for _, c := range s.Cmds {
		if c.Kind == Simple {
			out = append(out, c)
		}
	}
	return out
}

func TestParseWords(t *testing.T) {
	for _, tc := range []struct {
		src   string
		value []string
		text  []string
	}{
		{`echo "a b" 'c d' e\ f`, []string{"echo", "a b", "c d", "e f"}, nil},
		{`python3 -c'print(1)'`, []string{"python3", "-cprint(1)"}, nil},
		{`echo $HOME/x "${USER}" $1 ${X:-y}`, []string{"echo", "\x01HOME\x02/x", "\x01USER\x02", "\x011\x02", "\x01X:-y\x02"}, []string{"echo", "$HOME/x", "${USER}", "$1", "${X:-y}"}},
		{`echo $(date) ` + "`id`", []string{"echo", "\x00", "\x00"}, []string{"echo", "$(date)", "`id`"}},
		{`echo $'a\nb' $'\x41'`, []string{"echo", "a\nb", "A"}, nil},
		{`cat ~/f ~`, []string{"cat", "\x01HOME\x02/f", "\x01HOME\x02"}, []string{"cat", "~/f", "~"}},
		{`X=1 Y="$Z" cmd`, []string{"X=1", "Y=\x01Z\x02", "cmd"}, nil},
		{`export A=b C`, []string{"export", "A=b", "C"}, nil},
		{"echo \"a\\\"b\\$c\"", []string{"echo", "a\"b$c"}, nil},
		{"echo a\x01b", []string{"echo", "a?b"}, nil},
	} {
		s := mustParse(t, tc.src)
		cs := simple(s)
		if len(cs) != 1 {
			t.Fatalf("%q: %d commands", tc.src, len(cs))
		}
		if got := cs[0].Args(); !slices.Equal(got, tc.value) {
			t.Errorf("%q: values %q, want %q", tc.src, got, tc.value)
		}
		if tc.text != nil {
			if got := cs[0].Texts(); !slices.Equal(got, tc.text) {
				t.Errorf("%q: texts %q, want %q", tc.src, got, tc.text)
			}
		}
	}
}

func TestParseStructure(t *testing.T) {
	s := mustParse(t, "cd /tmp && curl -s https://x.example | sh; (rm a) & if true; then echo hi > out 2>&1; fi\nfor f in $(ls); do cat \"$f\"; done")
	var names []string
	for _, c := range s.Cmds {
		switch c.Kind {
		case Simple:
			names = append(names, c.Words[0].Value+":"+c.Op)
		case SubshellOpen:
			names = append(names, "(")
		case SubshellClose:
			names = append(names, ")")
		case ForHeader:
			names = append(names, "for "+c.Words[0].Value)
		}
	}
	want := []string{"cd:&&", "curl:|", "sh:;", "(", "rm:&", ")", "true:;", "echo:;", "for f", "cat:;"}
	if !slices.Equal(names, want) {
		t.Fatalf("commands %q, want %q", names, want)
	}
	cs := simple(s)
	if cs[2].PipeFrom != cs[1] {
		t.Error("sh is not piped from curl")
	}
	echo := cs[5]
	if len(echo.Redirs) != 2 || !echo.Redirs[0].StdoutFile() || echo.Redirs[0].Target.Value != "out" || echo.Redirs[1].Output() {
		t.Errorf("echo redirs %+v", echo.Redirs)
	}
	var hdr *Cmd
	for _, c := range s.Cmds {
		if c.Kind == ForHeader {
			hdr = c
		}
	}
	if subs := hdr.AllSubs(); len(subs) != 1 || subs[0].Src != "ls" || simple(subs[0])[0].Words[0].Value != "ls" {
		t.Errorf("for header subs %+v", subs)
	}
}

func TestHeredocAndGlobs(t *testing.T) {
	s := mustParse(t, "bash <<'EOF'\nrm -rf /\nEOF\necho x > /work/n?tes.md\ncat <<E\n$(id)\nE")
	cs := simple(s)
	if r := cs[0].Redirs[0]; !r.HasBody || r.Body != "rm -rf /\n" || !r.BodyQuoted {
		t.Errorf("quoted heredoc %+v", r)
	}
	if r := cs[1].Redirs[0]; !r.Target.Glob || r.Target.Value != "/work/n?tes.md" {
		t.Errorf("glob target %+v", r.Target)
	}
	if r := cs[2].Redirs[0]; r.BodyQuoted || len(r.BodySubs) != 1 || r.BodySubs[0].Src != "id" {
		t.Errorf("unquoted heredoc %+v", r)
	}
	if s := mustParse(t, `echo '*' \*`); simple(s)[0].Words[1].Glob || simple(s)[0].Words[2].Glob {
		t.Error("quoted * taken as a glob")
	}
}

func TestParseError(t *testing.T) {
	for _, src := range []string{`echo "unclosed`, `if true; then`, `echo $(`, `(`} {
		if _, err := Parse(src); !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%q) = %v, want ErrSyntax", src, err)
		}
	}
}

func TestUnwrap(t *testing.T) {
	for _, tc := range []struct {
		src     string
		name    string
		args    string
		scripts []string
	}{
		{`sudo -u root env A=1 timeout 5 nice -n 3 rm -rf /`, "rm", "-rf /", nil},
		{`setpriv --reuid=0 unshare -r rm -rf /x`, "rm", "-rf /x", nil},
		{`bash -c 'rm -rf /'`, "bash", "-c rm -rf /", []string{"rm -rf /"}},
		{`script -qc "rm -rf /" /dev/null`, "script", "-qc rm -rf / /dev/null", []string{"rm -rf /"}},
		{`parallel rm -rf ::: / /x`, "parallel", "rm -rf ::: / /x", []string{"rm -rf /", "rm -rf /x"}},
		{`echo / | xargs -I{} rm -rf {}`, "rm", "-rf /", nil},
		{`printf '%s' 'rm -rf /' | sh`, "sh", "", []string{"rm -rf /"}},
		{`echo 'rm -rf /' | bash -s`, "bash", "-s", []string{"rm -rf /\n"}},
		{`eval "rm -rf /"`, "eval", "rm -rf /", []string{"rm -rf /"}},
		{`env -S 'rm -rf /'`, "rm", "-rf /", nil},
		{`alias ll='ls -l' x='rm -rf /'`, "alias", "ll=ls -l x=rm -rf /", []string{"ls -l", "rm -rf /"}},
		{`FOO=1 B="$x" sudo -u me A=2 rm -rf /`, "rm", "-rf /", nil},
		{`X=1`, "", "", nil},
		{`nsenter -t 1 -m -u rm -rf /`, "rm", "-rf /", nil},
		{`echo / | xargs -i rm -rf {}`, "rm", "-rf /", nil},
		{`echo a b | xargs -l -0 rm -f`, "rm", "-f a b", nil},
		{`nsenter --target 1 --mount=/proc/1/ns/mnt -p/proc/1/ns/pid rm -rf /`, "rm", "-rf /", nil},
	} {
		s := mustParse(t, tc.src)
		cs := simple(s)
		c := cs[len(cs)-1]
		in, has := CmdStdin(c)
		inv := Unwrap(c.Args(), Context{Stdin: in, HasStdin: has})
		if inv.Name != tc.name || strings.Join(inv.Args, " ") != tc.args {
			t.Errorf("%q: %q %q, want %q %q", tc.src, inv.Name, inv.Args, tc.name, tc.args)
		}
		var got []string
		for _, n := range inv.Scripts {
			got = append(got, n.Src)
		}
		if !slices.Equal(got, tc.scripts) {
			t.Errorf("%q: scripts %q, want %q", tc.src, got, tc.scripts)
		}
	}
}

func TestInlineCode(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		code string
	}{
		{`python3 -c 'import os'`, "import os"},
		{`python3 -c'import os'`, "import os"},
		{`python3 -Ic 'x'`, "x"},
		{`perl -ne 'print' f`, "print"},
		{`node -e 'fs.rmSync("/")'`, `fs.rmSync("/")`},
		{`ruby -e 'puts 1'`, "puts 1"},
		{"python3 <<EOF\nprint(2)\nEOF", "print(2)\n"},
	} {
		c := simple(mustParse(t, tc.cmd))[0]
		in, has := CmdStdin(c)
		args := c.Args()
		code, ok := InlineCode(args[0], args[1:], Context{Stdin: in, HasStdin: has})
		if !ok || len(code.Codes) != 1 || code.Codes[0] != tc.code {
			t.Errorf("%q: %+v, want code %q", tc.cmd, code, tc.code)
		}
	}
	if c, _ := InlineCode("python3", []string{"-m", "http.server"}, Context{}); c.Module != "http.server" {
		t.Errorf("module %+v", c)
	}
	if c, _ := InlineCode("python3", []string{"x.py"}, Context{}); !c.Script {
		t.Errorf("script %+v", c)
	}
}

func TestWalk(t *testing.T) {
	s := mustParse(t, `echo $(curl https://a.example/x) | bash -c "wget https://b.example/y; find . -exec rm {} +"`)
	var seen []string
	Walk(s, func(v Visit) bool {
		seen = append(seen, v.Inv.Name)
		return true
	}, nil)
	want := []string{"curl", "echo", "bash", "wget", "find", "rm"}
	if !slices.Equal(seen, want) {
		t.Errorf("walk order %q, want %q", seen, want)
	}
	for text, want := range map[string]string{
		"see https://a.example/x?q=1, then":                              "https://a.example/x?q=1,",
		"https://en.wikipedia.org/wiki/Python_(programming_language) is": "https://en.wikipedia.org/wiki/Python_(programming_language)",
		"(see https://a.example/b)":                                      "https://a.example/b",
		"f('https://a.example/c')":                                       "https://a.example/c",
		"curl(https://a.example/d(x)) ok":                                "https://a.example/d(x)",
		"x=$(curl https://a.example/e)":                                  "https://a.example/e",
		"https://a.example/f(g":                                          "https://a.example/f",
	} {
		if u := TextURLs(text); len(u) != 1 || u[0] != want {
			t.Errorf("TextURLs(%q) = %q, want %q", text, u, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"echo hi", "a | b && c", "cat <<E\nx\nE", "$(( 1 + $(id) ))", "f() { f | f & }; f",
		`awk 'BEGIN{x="a"; system("b" x); print "c" | "sh"; "d" | getline}'`, `echo a | sed 's/a/b/e;w f'`,
		"ed <<< $'!x\\nw f'", `vim -es -c '%s/a/b/|x' f`, `git -c alias.a='!x' a`, `tar cIf x y`,
		`expect -c 'spawn {a} [b]; exec c'`, `gdb -ex 'pipe a | b' --args c`, `{a,b}{c,d} ~root ${X:-${Y:+z}} "${a[@]}"`,
		`sh -c 'x "$1"' _ y`, `source <(echo x)`, `tmux new -d 'x' \; send-keys y Enter`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		s, err := Parse(src)
		if err != nil {
			return
		}
		Walk(s, func(Visit) bool { return true }, nil)
	})
}

func TestParseBoundsDepth(t *testing.T) {
	for _, src := range []string{
		strings.Repeat("(", 200000),
		strings.Repeat("$(", 5000) + "x" + strings.Repeat(")", 5000),
		strings.Repeat("{ ", 100000),
		strings.Repeat("`", 100000),
		strings.Repeat("a | ", 50000) + "b",
		"echo '" + strings.Repeat(")", 5000) + "'; " + strings.Repeat("(", 5000),
	} {
		if _, err := Parse(src); !errors.Is(err, ErrTooDeep) || !errors.Is(err, ErrSyntax) {
			t.Errorf("Parse(%.20q…) = %v, want ErrTooDeep", src, err)
		}
	}
	deep := strings.Repeat("x=$(", 200) + "rm -rf /" + strings.Repeat(")", 200)
	s, err := Parse(deep)
	if err != nil {
		t.Fatal(err)
	}
	if !s.TooDeep {
		t.Error("200 nested substitutions not reported as TooDeep")
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{
		"ls   -la|wc -l":      "ls -la | wc -l",
		"  cd /work\nls ;  ":  "cd /work; ls",
		`grep 'a b' "c" d\ e`: `grep 'a b' c 'd e'`,
		`echo "it's" '*' *`:   `echo "it's" '*' *`,
		`'if' true`:           `'if' true`,
		"echo $(date  '+%s')": "echo $(date +%s)",
		"# only a comment":    "",
		"cat <<'E'\n a  b\nE": "cat <<'E'\n a  b\nE",
		`echo "$HOME"  x"y"z`: `echo "$HOME" xyz`,
	} {
		got, err := Canonical(in)
		if err != nil || got != want {
			t.Errorf("Canonical(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := Canonical(`echo "open`); !errors.Is(err, ErrSyntax) {
		t.Errorf("unparseable: %v", err)
	}
}

func TestUnclosedHeredocEndsAtEOF(t *testing.T) {
	for src, body := range map[string]string{
		"cat <<EOF":                      "",
		"cat <<'EOF'\nx y":               "x y\n",
		"python3 - <<\"PY\"\nprint(1)\n": "print(1)\n",
		"cat <<-E\n\tx\n":                "\tx\n",
		"cat <<A; cat <<B\na\nA\nb":      "b\n",
	} {
		s, err := Parse(src)
		if err != nil {
			t.Errorf("Parse(%q): %v", src, err)
			continue
		}
		cs := simple(s)
		r := cs[len(cs)-1].Redirs[0]
		if !r.HasBody || r.Body != body {
			t.Errorf("Parse(%q): body %q, want %q", src, r.Body, body)
		}
	}
}

func TestFuncDefBody(t *testing.T) {
	s := mustParse(t, "f() { a | b & }; g() ( c ); f")
	var defs []*Cmd
	for i, c := range s.Cmds {
		if c.Kind == FuncDef {
			defs = append(defs, c)
			if c.Body > 0 && s.Cmds[i+c.Body].Kind == FuncDef {
				t.Errorf("%s: body runs into the next definition", c.Words[0].Value)
			}
		}
	}
	if len(defs) != 2 {
		t.Fatalf("%d definitions", len(defs))
	}
	if defs[0].Decl != "f() { a | b & }" || defs[0].Body != 2 {
		t.Errorf("f: Decl %q Body %d, want the declaration and 2", defs[0].Decl, defs[0].Body)
	}
	// The subshell body is bracketed: open, c, close.
	if defs[1].Decl != "g() ( c )" || defs[1].Body != 3 {
		t.Errorf("g: Decl %q Body %d", defs[1].Decl, defs[1].Body)
	}
}

func TestVisibleSubstitutions(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"eval $(echo rm -rf /)", []string{"eval", "rm", "-rf", "/"}},
		{`bash -c "$(printf '%s' 'rm -rf /')"`, []string{"bash", "-c", "rm -rf /"}},
		{"x$(echo y)z `echo w`", []string{"xyz", "w"}},
		{"echo $(date) $(echo a | tr a b) $(echo $HOME)", []string{"echo", "\x00", "\x00", "\x01HOME\x02"}},
		{"echo \"$(echo '  a  ')\"", []string{"echo", "  a  "}},
	} {
		cs := simple(mustParse(t, tc.src))
		if got := cs[len(cs)-1].Args(); !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.src, got, tc.want)
		}
	}
}

func TestSplits(t *testing.T) {
	cs := simple(mustParse(t, `A=$X echo $X "$Y" x$(id) "$(id)" $((1+2)) lit`))
	var got []bool
	for _, w := range cs[0].Words {
		got = append(got, w.Splits)
	}
	if want := []bool{false, false, true, false, true, false, true, false}; !slices.Equal(got, want) {
		t.Errorf("Splits %v, want %v", got, want)
	}
}
