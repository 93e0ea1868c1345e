package shell

import (
	"slices"
	"strings"
	"testing"
)

// unwrapLast unwraps the last simple command of src with what it reads.
func unwrapLast(t *testing.T, src string, files map[string]string) Invocation {
	t.Helper()
	cs := simple(mustParse(t, src))
	c := cs[len(cs)-1]
	in, has := CmdStdin(c)
	return Unwrap(c.Args(), Context{Stdin: in, HasStdin: has, Files: files})
}

func scriptsOf(inv Invocation) []string {
	var out []string
	for _, n := range inv.Scripts {
		out = append(out, n.Src)
	}
	return out
}

func TestWrappers(t *testing.T) {
	for _, tc := range []struct{ src, name, args string }{
		{`chrt -f 99 rm -rf /`, "rm", "-rf /"},
		{`chrt -r 1 -- rm -rf /`, "rm", "-rf /"},
		{`chrt --idle rm x`, "rm", "x"},
		{`setarch x86_64 -R rm -rf /`, "rm", "-rf /"},
		{`linux64 --addr-no-randomize rm x`, "rm", "x"},
		{`i386 rm x`, "rm", "x"},
		{`valgrind --tool=none -q rm x`, "rm", "x"},
		{`cpulimit -l 50 -- rm x`, "rm", "x"},
		{`faketime '2020-01-01' rm x`, "rm", "x"},
		{`proxychains4 -q -f p.conf rm x`, "rm", "x"},
		{`torsocks -i rm x`, "rm", "x"},
		{`perf record -g -o /tmp/p -- rm x`, "rm", "x"},
		{`perf stat -e cycles rm x`, "rm", "x"},
		{`systemd-run --user --scope -p MemoryMax=1G rm x`, "rm", "x"},
		{`daemonize -c / /bin/rm x`, "rm", "x"},
		{`start-stop-daemon --start --exec /bin/rm -- -rf /`, "rm", "-rf /"},
		{`flatpak-spawn --host rm x`, "rm", "x"},
		{`xvfb-run -a -s '-screen 0' rm x`, "rm", "x"},
		{`schedtool -B -e rm x`, "rm", "x"},
		{`cgexec -g cpu:g rm x`, "rm", "x"},
		{`/lib64/ld-linux-x86-64.so.2 --library-path /lib /bin/rm x`, "rm", "x"},
		{`gosu nobody rm x`, "rm", "x"},
		{`tini -s -- rm x`, "rm", "x"},
		{`capsh --caps=x -- -c 'rm x'`, "bash", "-c rm x"},
		{`ip netns exec ns rm x`, "rm", "x"},
		{`bwrap --bind / / --dev /dev rm x`, "rm", "x"},
		{`gdb --args rm x`, "gdb", "--args rm x"},
		{`chrt -p 12`, "", ""},
		{`ld.so --list /bin/ls`, "", ""},
		{`ip addr`, "ip", "addr"},
	} {
		inv := unwrapLast(t, tc.src, nil)
		if inv.Name != tc.name || strings.Join(inv.Args, " ") != tc.args {
			t.Errorf("%q: %q %q, want %q %q", tc.src, inv.Name, inv.Args, tc.name, tc.args)
		}
	}
	if inv := unwrapLast(t, `start-stop-daemon -S -d /etc -x /bin/rm -- -rf x`, nil); inv.Dir != "/etc" {
		t.Errorf("start-stop-daemon -d: dir %q", inv.Dir)
	}
}

func TestProgramsRunning(t *testing.T) {
	for _, tc := range []struct {
		src     string
		scripts []string
	}{
		{`awk 'BEGIN{system("rm -rf " "/")}'`, []string{"rm -rf /"}},
		{`awk -v c='rm x' 'BEGIN{system(c)}'`, []string{"rm x"}},
		{`awk 'BEGIN{c="rm x"; c | getline}'`, []string{"rm x"}},
		{`awk 'BEGIN{print "rm x" | "sh"}'`, []string{`printf '%s' 'rm x` + "\n" + `' | sh`}},
		{`awk '{system("echo " $1)}'`, []string{"echo \x00"}},
		{`awk '{print $1}' f`, nil},
		{`sed 'e rm x' f`, []string{"rm x"}},
		{`echo a | sed 's/a/rm x/e'`, []string{"rm x"}},
		{`sed 's/^/rm x/e' f`, []string{"rm x"}},
		{`sed -n 's/a/b/gp; /x/d' f`, nil},
		{`sed --sandbox 'e rm x' f`, nil},
		{"ed -s f <<< $'!rm x\\nq'", []string{"rm x"}},
		{`vim -es -c '!rm x' -c 'q!'`, []string{"rm x"}},
		{`ex -c 'r !rm x'`, []string{"rm x"}},
		{`git -c alias.x='!rm -rf' x /`, []string{"rm -rf", "rm -rf '/'"}},
		{`git -c core.pager='rm x' log`, []string{"rm x"}},
		{`git rebase -x 'rm x' main`, []string{"rm x"}},
		{`git log --oneline`, nil},
		{`tar -cf x.tar . --checkpoint-action=exec='rm x'`, []string{"rm x"}},
		{`tar -I 'rm x' -cf x.tar .`, []string{"rm x"}},
		{`tar cIf 'rm x' x.tar .`, []string{"rm x"}},
		{`tar xzf a.tgz`, nil},
		{`ssh -o ProxyCommand='rm x' h`, []string{"rm x"}},
		{`gdb -batch -ex 'shell rm x' -ex '!rm y'`, []string{"rm x", "rm y"}},
		{`gdb -batch -ex 'run -rf x' /bin/rm`, []string{"'/bin/rm' -rf x"}},
		{`echo 'rm x' | at now`, []string{"rm x\n"}},
		{`expect -c 'system rm x'`, []string{"rm x"}},
		{`socat - SYSTEM:'rm x',pty`, []string{"rm x"}},
		{`tmux new-session -d -s s 'rm x'`, []string{"rm x"}},
		{`GIT_SSH_COMMAND='rm x' git fetch`, []string{"rm x"}},
	} {
		inv := unwrapLast(t, tc.src, nil)
		if got := scriptsOf(inv); !slices.Equal(got, tc.scripts) {
			t.Errorf("%q: scripts %q, want %q", tc.src, got, tc.scripts)
		}
	}
	for _, tc := range []struct {
		src  string
		argv []string
	}{
		{`rsync -e 'sh -c "rm x"' a h:b`, []string{"sh", "-c", "rm x", "host"}},
		{`expect -c 'spawn -noecho rm -rf {/a b}'`, []string{"rm", "-rf", "/a b"}},
		{`echo 'exec rm x' | tclsh`, []string{"rm", "x"}},
		{`git clone 'ext::sh -c rm% x' d`, []string{"sh", "-c", "rm x"}},
		{`git bisect run rm x`, []string{"rm", "x"}},
		{`socat - EXEC:'rm x'`, []string{"rm", "x"}},
		{`gdb -batch -ex 'python import os'`, []string{"python3", "-c", "import os"}},
	} {
		inv := unwrapLast(t, tc.src, nil)
		if len(inv.Execs) != 1 || !slices.Equal(inv.Execs[0].Argv, tc.argv) {
			t.Errorf("%q: execs %+v, want %q", tc.src, inv.Execs, tc.argv)
		}
	}
	for _, tc := range []struct {
		src    string
		writes []string
	}{
		{`sed -n 'w /tmp/a' f`, []string{"/tmp/a"}},
		{`sed 's/a/b/w /tmp/b' f`, []string{"/tmp/b"}},
		{`sed '/x/W /tmp/c' f`, []string{"/tmp/c"}},
		{`awk '{print > "/tmp/d"}' f`, []string{"/tmp/d"}},
		{`awk '{print $1 >> "/tmp/e"}' f`, []string{"/tmp/e"}},
		{`awk '$1 > "m" {print}' f`, nil},
		{"ed -s /tmp/f <<< $'1d\\nw\\nq'", []string{"/tmp/f"}},
		{`ex -sc '%d|x' /tmp/g`, []string{"/tmp/g"}},
		{`vim -c 'w! /tmp/h' -c q f`, []string{"/tmp/h"}},
	} {
		if got := unwrapLast(t, tc.src, nil).Writes; !slices.Equal(got, tc.writes) {
			t.Errorf("%q: writes %q, want %q", tc.src, got, tc.writes)
		}
	}
	for _, n := range unwrapLast(t, `awk 'BEGIN{system("x")}'`, nil).Scripts {
		if !n.BestEffort {
			t.Errorf("awk's system(): %+v not best effort", n)
		}
	}
}

func TestShellParametersAndFiles(t *testing.T) {
	inv := unwrapLast(t, `sh -c 'rm -rf "$1"' name /x`, nil)
	if len(inv.Scripts) != 1 || !slices.Equal(inv.Scripts[0].Args, []string{"name", "/x"}) {
		t.Errorf("sh -c parameters: %+v", inv.Scripts)
	}
	if inv := unwrapLast(t, `bash -c 'ls'`, nil); len(inv.Scripts) != 1 || inv.Scripts[0].Args != nil {
		t.Errorf("bash -c without parameters: %+v", inv.Scripts)
	}
	inv = unwrapLast(t, `echo 'rm "$1"' | bash -s /x`, nil)
	if len(inv.Scripts) != 1 || !slices.Equal(inv.Scripts[0].Args, []string{"bash", "/x"}) {
		t.Errorf("bash -s parameters: %+v", inv.Scripts)
	}
	files := map[string]string{"/dev/fd/63": "rm x\n"}
	for _, src := range []string{
		"source /dev/fd/63", ". /dev/fd/63", "bash /dev/fd/63", "bash --rcfile /dev/fd/63 -i",
		"BASH_ENV=/dev/fd/63 bash -c ls", "env ENV=/dev/fd/63 sh", "at -f /dev/fd/63 now", "export BASH_ENV=/dev/fd/63",
	} {
		if got := scriptsOf(unwrapLast(t, src, files)); !slices.Contains(got, "rm x\n") {
			t.Errorf("%q: scripts %q, want the file's code", src, got)
		}
	}
	if in, _ := InlineCode("python3", []string{"/dev/fd/63"}, Context{Files: files}); len(in.Codes) != 1 || in.Script {
		t.Errorf("python3 FILE: %+v", in)
	}
	if inv := unwrapLast(t, "cat /dev/fd/63", files); len(inv.Scripts) != 0 {
		t.Errorf("cat runs nothing: %+v", inv.Scripts)
	}
	if a, v, ok := GitAlias("git", []string{"config", "--global", "alias.X", "!rm"}); !ok || a != "x" || v != "!rm" {
		t.Errorf("GitAlias: %q %q %v", a, v, ok)
	}
}

func TestEscapesAndPrinted(t *testing.T) {
	for _, tc := range []struct{ src, out string }{
		{`echo -e 'a\x2fb\tc' | cat`, "a/b\tc\n"},
		{`echo -ne '\0101\u0042' | cat`, "AB"},
		{`echo -e 'a\cb' | cat`, "a"},
		{`echo 'a\x2f' | cat`, "a\\x2f\n"},
		{`printf 'r\x6d \057\n' | cat`, "rm /\n"},
		{`printf '%b' '\x2f\0101' | cat`, "/A"},
		{`printf '%c%s' xyz w | cat`, "xw"},
		{`builtin echo -E 'a\tb' | cat`, "a\\tb\n"},
		{"cat <<'EOF' | cat\nx $y\nEOF", "x $y\n"},
		{`cat <(echo a) <(printf b) | cat`, "a\nb"},
		{`cat < <(echo a)`, "a\n"},
	} {
		cs := simple(mustParse(t, tc.src))
		out, ok := CmdStdin(cs[len(cs)-1])
		if !ok || out != tc.out {
			t.Errorf("%q: stdin %q (%v), want %q", tc.src, out, ok, tc.out)
		}
	}
	s := mustParse(t, "echo a; printf b; cat <<< c")
	if out, ok := Printed(s, func(w Word) string { return w.Value }); !ok || out != "a\nbc\n" {
		t.Errorf("Printed = %q, %v", out, ok)
	}
	if _, ok := Printed(mustParse(t, "echo a; ls"), func(w Word) string { return w.Value }); ok {
		t.Error("Printed of ls")
	}
}

func TestBracesTildesParams(t *testing.T) {
	for _, tc := range []struct {
		src   string
		value []string
	}{
		{`{rm,-rf,/}`, []string{"rm", "-rf", "/"}},
		{`echo x{a,b}y`, []string{"echo", "xay", "xby"}},
		{`echo "{a,b}" '{a,b}' \{a,b\}`, []string{"echo", "{a,b}", "{a,b}", "{a,b}"}},
		{`echo {a..c}`, []string{"echo", "a", "b", "c"}},
		{`echo {1..100}`, []string{"echo", "{1..100}"}},
		{`echo {a,b}$(id)`, []string{"echo", "{a,b}\x00"}},
		{`echo {}`, []string{"echo", "{}"}},
		{`echo ~root/x ~+ ~- ~bob ~/y`, []string{"echo", "/root/x", "\x01PWD\x02", "\x01OLDPWD\x02", "\x00", "\x01HOME\x02/y"}},
		{`echo $1 "$@" ${a[@]} ${a[2]} ${!x} ${X:-/} ${X:-$Y} ${#X} ${X%/}`, []string{"echo", "\x011\x02", "\x01@\x02",
			"\x01a[@]\x02", "\x01a[2]\x02", "\x01!x\x02", "\x01X:-/\x02", "\x01X:-\x01Y\x02\x02", "\x00", "\x00"}},
	} {
		cs := simple(mustParse(t, tc.src))
		if got := cs[len(cs)-1].Args(); !slices.Equal(got, tc.value) {
			t.Errorf("%q: values %q, want %q", tc.src, got, tc.value)
		}
	}
	cs := simple(mustParse(t, `a=(x {y,z} "w v") b=([0]=p [1]=q) c=([1]=r)`))
	var elems [][]string
	for _, w := range cs[0].Words {
		var e []string
		for _, x := range w.Elems {
			e = append(e, x.Value)
		}
		elems = append(elems, e)
	}
	if !slices.Equal(elems[0], []string{"x", "y", "z", "w v"}) || !slices.Equal(elems[1], []string{"p", "q"}) || elems[2] != nil {
		t.Errorf("array elements %q", elems)
	}
	s := mustParse(t, "while :; do x & done; until false; do y; done")
	if len(s.Loops) != 2 || s.Loops[0].Until || !s.Loops[1].Until || s.Loops[0].Cond != 1 || s.Loops[0].Body != 1 {
		t.Errorf("loops %+v", s.Loops)
	}
}
