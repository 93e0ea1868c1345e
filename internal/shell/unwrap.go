package shell

import (
	"path"
	"slices"
	"strings"
)

// Nested is shell code that a command runs.
type Nested struct {
	Src string
	// Same is set when the code runs in the current shell (eval, trap,
	// source of a here-document): its cd and assignments persist.
	Same bool
}

// Exec is a command that another command runs with its own argument
// vector (find -exec).
type Exec struct {
	Argv []string
	Dir  string // its working directory, "" if not known
}

// Context is what a reader knows of a command's surroundings.
type Context struct {
	Dir      string // working directory, "" if not known
	Stdin    string // what the command reads on standard input
	HasStdin bool   // Stdin is known
}

// Invocation is a command after its wrappers are removed.
type Invocation struct {
	Name     string   // the program that runs (CommandName of argv[0]), "" if none or unknown
	Args     []string // its arguments
	Wrappers []string // the wrappers removed, outermost first
	Context           // its working directory and standard input after the wrappers
	Scripts  []Nested // shell code it runs (bash -c, eval, su -c, a shell reading its stdin…)
	Execs    []Exec   // commands it runs by argument vector (find -exec)
}

// Shells are the programs that run shell code given with -c or on stdin.
var Shells = map[string]bool{
	"bash": true, "sh": true, "dash": true, "zsh": true, "ksh": true, "ash": true,
	"mksh": true, "rbash": true, "fish": true, "yash": true, "posh": true, "busybox-sh": true,
}

// CommandName normalises argv[0]: an absolute path is reduced to its base
// name (/usr/bin/rm → rm); relative paths (./reboot) are kept, they are
// programs of the work tree. An unknown word gives "".
func CommandName(w string) string {
	if w == "" || strings.IndexByte(w, Unknown) >= 0 || strings.IndexByte(w, VarOpen) >= 0 {
		return ""
	}
	if w[0] == '/' {
		return path.Base(path.Clean(w))
	}
	return w
}

// ResolveDir resolves a directory against cwd; "" means unknown.
func ResolveDir(d, cwd string) string {
	if d == "" || strings.IndexByte(d, Unknown) >= 0 || strings.IndexByte(d, VarOpen) >= 0 {
		return ""
	}
	if d[0] != '/' {
		if cwd == "" {
			return ""
		}
		d = cwd + "/" + d
	}
	return path.Clean(d)
}

// maxUnwrap bounds the number of wrappers removed from one command.
const maxUnwrap = 64

// Unwrap removes wrapper commands from argv and reports what finally runs,
// the shell code it runs and the commands it executes by argument vector.
func Unwrap(argv []string, ctx Context) Invocation {
	inv := Invocation{Context: ctx}
	words := argv
loop:
	for guard := 0; guard < maxUnwrap && len(words) > 0; guard++ {
		// NAME=value words before the program (FOO=1 cmd, sudo A=1 cmd) set
		// its environment; they do not name it.
		for len(words) > 0 && IsAssignment(words[0]) {
			words = words[1:]
		}
		if len(words) == 0 {
			break
		}
		name := CommandName(words[0])
		args := words[1:]
		var next []string
		switch name {
		case "sudo":
			p, rest := ParseOptions(args, "ugChpDrtTUR", "user", "group", "close-from", "host", "prompt",
				"chdir", "role", "type", "command-timeout", "other-user", "chroot")
			if d, ok := p.Value("D", "chdir"); ok {
				inv.Dir = ResolveDir(d, inv.Dir)
			}
			if p.Has('s') || p.Has('i') || p.HasLong("shell", "login") {
				// sudo -s CMD runs CMD through the shell.
				if len(rest) > 0 {
					inv.Scripts = append(inv.Scripts, Nested{Src: strings.Join(rest, " ")})
				}
				break loop
			}
			next = rest
		case "doas":
			_, next = ParseOptions(args, "uC")
		case "pkexec":
			_, next = ParseOptions(args, "", "user")
		case "nohup", "setsid", "builtin", "unbuffer", "busybox", "chronic", "eatmydata", "fakeroot",
			"caffeinate", "catchsegv", "run-one", "unshare-none", "nocache", "firejail", "proot":
			_, next = ParseOptions(args, "")
		case "nice":
			_, next = ParseOptions(args, "n", "adjustment")
		case "ionice":
			p, rest := ParseOptions(args, "cnpPu", "class", "classdata", "pid", "pgid", "uid")
			if _, ok := p.Value("p", "P", "u", "pid", "pgid", "uid"); !ok {
				next = rest
			}
		case "stdbuf":
			_, next = ParseOptions(args, "ioe", "input", "output", "error")
		case "time":
			_, next = ParseOptions(args, "fo", "format", "output")
		case "timeout":
			if _, rest := ParseOptions(args, "sk", "signal", "kill-after"); len(rest) > 0 {
				next = rest[1:]
			}
		case "command":
			if p, rest := ParseOptions(args, ""); !p.Has('v') && !p.Has('V') {
				next = rest
			}
		case "exec":
			_, next = ParseOptions(args, "a")
		case "chroot":
			if _, rest := ParseOptions(args, "", "userspec", "groups"); len(rest) > 0 {
				next = rest[1:]
				inv.Dir = "/"
			}
		case "taskset":
			p, rest := ParseOptions(args, "")
			if !p.Has('p') && !p.HasLong("pid") && len(rest) > 0 {
				next = rest[1:]
			}
		case "numactl":
			_, next = ParseOptions(args, "CNmipP", "cpunodebind", "membind", "interleave", "preferred",
				"physcpubind", "localalloc")
		case "prlimit":
			if p, rest := ParseOptions(args, "p", "pid"); !p.Has('p') && !p.HasLong("pid") {
				next = rest
			}
		case "strace", "ltrace":
			if p, rest := ParseOptions(args, "abeEIoOpPsSuUX", "output", "attach", "user", "trace",
				"signal", "status", "env"); !p.Has('p') && !p.HasLong("attach") {
				next = rest
			}
		case "setpriv":
			_, next = ParseOptions(args, "", "reuid", "regid", "groups", "inh-caps", "ambient-caps",
				"bounding-set", "securebits", "pdeathsig", "selinux-label", "apparmor-profile",
				"landlock-access", "landlock-rule", "seccomp-filter", "ruid", "euid", "rgid", "egid")
		case "unshare":
			p, rest := ParseOptions(args, "SGR", "setuid", "setgid", "root", "wd", "propagation",
				"map-user", "map-group", "map-users", "map-groups", "setgroups", "monotonic", "boottime")
			if d, ok := p.Value("wd"); ok {
				inv.Dir = ResolveDir(d, inv.Dir)
			}
			if len(rest) == 0 {
				// unshare with no program runs ${SHELL}: it reads stdin.
				if inv.HasStdin {
					inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin})
				}
				break loop
			}
			next = rest
		case "nsenter":
			// -m, -u, -i, -n, -p, -U, -C, -T, -r and -w take an optional
			// value, glued (-m/proc/1/ns/mnt) or after = (--mount=…).
			_, next = ParseOptions(args, "tSG", "target", "setuid", "setgid")
		case "runcon":
			if p, rest := ParseOptions(args, "turl", "type", "user", "role", "range"); len(p.Short)+len(p.Long) > 0 {
				next = rest
			} else if len(rest) > 0 {
				next = rest[1:] // runcon CONTEXT COMMAND
			}
		case "sg":
			p := ParseArgs(args, "c")
			if c, ok := p.Value("c"); ok {
				inv.Scripts = append(inv.Scripts, Nested{Src: c})
			} else if len(p.Ops) > 1 {
				inv.Scripts = append(inv.Scripts, Nested{Src: strings.Join(p.Ops[1:], " ")})
			}
			break loop
		case "flock":
			if _, rest := ParseOptions(args, "wE", "timeout", "wait", "conflict-exit-code"); len(rest) > 1 {
				if rest[1] == "-c" || rest[1] == "--command" {
					if len(rest) > 2 {
						inv.Scripts = append(inv.Scripts, Nested{Src: rest[2]})
					}
				} else {
					next = rest[1:]
				}
			}
		case "env":
			next = envUnwrap(args, &inv)
		case "xargs":
			next = xargsUnwrap(args, &inv)
		case "parallel", "sem":
			parallelUnwrap(args, &inv)
			break loop
		case "watch":
			p, rest := ParseOptions(args, "nqd", "interval", "equexit", "differences")
			if p.Has('x') || p.HasLong("exec") {
				next = rest
			} else if len(rest) > 0 {
				inv.Scripts = append(inv.Scripts, Nested{Src: strings.Join(rest, " ")})
			}
		case "script":
			// script [-q] [-c CMD] [file]: runs CMD (or an interactive shell
			// reading stdin) under a pseudo-terminal.
			p := ParseArgs(args, "cEIOBTtm", "command", "echo", "log-in", "log-out", "log-io",
				"log-timing", "timing", "logging-format", "output-limit")
			if c, ok := p.Value("c", "command"); ok {
				inv.Scripts = append(inv.Scripts, Nested{Src: c})
			} else if inv.HasStdin {
				inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin})
			}
			break loop
		case "su", "runuser":
			if p, rest := ParseOptions(args, "cgGsuw", "command", "group", "supp-group", "shell", "user",
				"whitelist-environment", "session-command"); name == "runuser" && p.Has('u') {
				if c, ok := p.Value("c", "command"); ok {
					inv.Scripts = append(inv.Scripts, Nested{Src: c})
				} else {
					next = rest
				}
				break
			}
			p := ParseArgs(args, "cgGsw", "command", "group", "supp-group", "shell",
				"whitelist-environment", "session-command")
			if c, ok := p.Value("c", "command", "session-command"); ok {
				inv.Scripts = append(inv.Scripts, Nested{Src: c})
			} else if inv.HasStdin {
				inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin})
			}
			break loop
		case "eval":
			inv.Scripts = append(inv.Scripts, Nested{Src: strings.Join(args, " "), Same: true})
			break loop
		case "trap":
			if _, rest := ParseOptions(args, ""); len(rest) >= 2 {
				inv.Scripts = append(inv.Scripts, Nested{Src: rest[0], Same: true})
			}
			break loop
		case "alias":
			// alias NAME=CODE defines code that runs where NAME is written
			// later (in a shell with expand_aliases): judge it now.
			for _, a := range args {
				if name, code, ok := strings.Cut(a, "="); ok && name != "" && !strings.HasPrefix(a, "-") {
					inv.Scripts = append(inv.Scripts, Nested{Src: code, Same: true})
				}
			}
			break loop
		case "source", ".":
			if len(args) > 0 && (args[0] == "/dev/stdin" || args[0] == "-" || args[0] == "/proc/self/fd/0") && inv.HasStdin {
				inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin, Same: true})
			}
			break loop
		case "find":
			inv.Execs = findExecs(args, inv.Dir)
			break loop
		default:
			if Shells[name] {
				if s, ok, stdin := ShellScript(args); ok {
					inv.Scripts = append(inv.Scripts, Nested{Src: s})
				} else if stdin && inv.HasStdin {
					inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin})
				}
			}
			break loop
		}
		inv.Wrappers = append(inv.Wrappers, name)
		words = next
	}
	if len(words) > 0 {
		inv.Name, inv.Args = CommandName(words[0]), words[1:]
	}
	return inv
}

// envUnwrap strips env's options and assignments, applying -C and -S.
func envUnwrap(args []string, inv *Invocation) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func(short, long string) string {
			if a == short || a == long {
				i++
				if i < len(args) {
					return args[i]
				}
				return ""
			}
			if strings.HasPrefix(a, long+"=") {
				return a[len(long)+1:]
			}
			return a[len(short):]
		}
		switch {
		case a == "--":
			for i+1 < len(args) && IsAssignment(args[i+1]) {
				i++
			}
			return args[i+1:]
		case a == "-C" || a == "--chdir" || strings.HasPrefix(a, "--chdir=") || (strings.HasPrefix(a, "-C") && !strings.HasPrefix(a, "--")):
			inv.Dir = ResolveDir(val("-C", "--chdir"), inv.Dir)
		case a == "-S" || a == "--split-string" || strings.HasPrefix(a, "--split-string=") || (strings.HasPrefix(a, "-S") && !strings.HasPrefix(a, "--")):
			s := val("-S", "--split-string")
			var split []string
			for _, w := range Words(s) {
				split = append(split, w.Value)
			}
			return append(split, args[min(i+1, len(args)):]...)
		case a == "-u" || a == "--unset":
			i++
		case strings.HasPrefix(a, "-"), IsAssignment(a):
		default:
			return args[i:]
		}
	}
	return nil
}

// stdinItems splits what xargs or parallel reads into items; an unknown
// stdin gives one unknown item.
func stdinItems(inv *Invocation, lines bool) []string {
	if !inv.HasStdin {
		return []string{string(Unknown)}
	}
	var items []string
	if lines {
		for l := range strings.SplitSeq(inv.Stdin, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				items = append(items, l)
			}
		}
	} else {
		items = strings.Fields(inv.Stdin)
	}
	if len(items) > 64 {
		items = items[:64]
	}
	return items
}

// xargsUnwrap returns the command xargs runs, with the items it reads
// (when known) appended or substituted for the -I replacement string.
func xargsUnwrap(args []string, inv *Invocation) []string {
	// -i, -l and -e take optional values, glued only (-i% is not read:
	// it counts as -i with {}).
	p, rest := ParseOptions(args, "adEILnPs", "arg-file", "delimiter", "max-lines", "max-args",
		"max-procs", "max-chars", "process-slot-var", "eof", "replace")
	fromFile := p.Has('a') || p.HasLong("arg-file")
	repl, hasRepl := p.Value("I", "replace")
	if !hasRepl && (p.Has('i') || p.HasLong("replace")) {
		repl, hasRepl = "{}", true
	}
	if hasRepl && repl == "" {
		repl = "{}"
	}
	if len(rest) == 0 {
		rest = []string{"echo"}
	}
	var items []string
	if fromFile {
		items = []string{string(Unknown)}
	} else {
		items = stdinItems(inv, hasRepl)
	}
	inv.Stdin, inv.HasStdin = "", false
	if hasRepl {
		// Each item runs the command once with the string replaced; the
		// first is analysed as the command, every other one as a nested
		// argument vector.
		subst := func(item string) []string {
			out := make([]string, len(rest))
			for i, a := range rest {
				out[i] = strings.ReplaceAll(a, repl, item)
			}
			return out
		}
		for _, it := range items[min(1, len(items)):] {
			inv.Execs = append(inv.Execs, Exec{Argv: subst(it), Dir: inv.Dir})
		}
		if len(items) == 0 {
			return subst("")
		}
		return subst(items[0])
	}
	return append(slices.Clip(rest), items...)
}

// parallelUnwrap reads GNU parallel's command template and arguments
// (after :::, or stdin lines) into the scripts it runs.
func parallelUnwrap(args []string, inv *Invocation) {
	var tmpl []string
	var argSets [][]string
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if a == ":::" || a == "::::" || a == ":::+" {
			break
		}
		if len(tmpl) == 0 && strings.HasPrefix(a, "-") {
			switch a {
			case "-j", "-S", "--jobs", "-a", "--arg-file", "--delay", "--timeout", "-N", "-n", "-L",
				"--colsep", "-C", "--joblog", "--results", "--tmpdir", "--workdir", "--wd", "-I", "--sshlogin":
				i++
			}
			continue
		}
		tmpl = append(tmpl, a)
	}
	for i < len(args) {
		op := args[i]
		i++
		var set []string
		for ; i < len(args) && args[i] != ":::" && args[i] != "::::" && args[i] != ":::+"; i++ {
			set = append(set, args[i])
		}
		if op == "::::" {
			set = []string{string(Unknown)} // arguments from files
		}
		argSets = append(argSets, set)
	}
	var items []string
	if len(argSets) == 0 {
		items = stdinItems(inv, true)
	} else {
		for _, s := range argSets {
			items = append(items, s...)
		}
	}
	inv.Stdin, inv.HasStdin = "", false
	if len(items) > 64 {
		items = items[:64]
	}
	t := strings.Join(tmpl, " ")
	for _, it := range items {
		var src string
		switch {
		case t == "":
			src = it
		case strings.Contains(t, "{}"):
			src = strings.ReplaceAll(t, "{}", it)
		default:
			src = t + " " + it
		}
		inv.Scripts = append(inv.Scripts, Nested{Src: src})
	}
}

// ShellScript finds the script a shell runs: the operand of -c (ok), or
// stdin when there is neither -c nor a script file (stdin).
func ShellScript(args []string) (script string, ok, stdin bool) {
	hasC := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" {
			if hasC && i+1 < len(args) {
				return args[i+1], true, false
			}
			return "", false, !hasC && i+1 >= len(args)
		}
		if len(a) > 1 && (a[0] == '-' || a[0] == '+') {
			switch a {
			case "-o", "+o", "-O", "+O", "--rcfile", "--init-file":
				i++
				continue
			case "--command":
				hasC = true
				continue
			}
			if a[1] != '-' {
				if a[0] == '-' && strings.IndexByte(a[1:], 'c') >= 0 {
					hasC = true
				}
				if a[0] == '-' && strings.IndexByte(a[1:], 'n') >= 0 {
					return "", false, false // -n: read but do not execute
				}
				if last := a[len(a)-1]; last == 'o' || last == 'O' {
					i++ // -euo pipefail
				}
			}
			continue
		}
		if hasC {
			return a, true, false
		}
		return "", false, false // a script file
	}
	return "", false, !hasC
}

// findExecs returns the commands run by find's -exec/-execdir/-ok.
func findExecs(args []string, cwd string) []Exec {
	var out []Exec
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j] != ";" && args[j] != "+" {
				j++
			}
			e := Exec{Argv: args[i+1 : j]}
			if args[i] == "-exec" || args[i] == "-ok" {
				e.Dir = cwd
			}
			out = append(out, e)
			i = j
		}
	}
	return out
}
