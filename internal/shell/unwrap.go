package shell

import (
	"path"
	"regexp"
	"slices"
	"strings"
)

// Nested is shell code that a command runs.
type Nested struct {
	Src string
	// Same is set when the code runs in the current shell (eval, trap,
	// source of a here-document): its cd and assignments persist.
	Same bool
	// Args are $0 and the positional parameters of code run by a new
	// shell when the command line gives them (sh -c CODE NAME ARG…); a
	// new shell given none has none. Ignored when Same.
	Args []string
	// BestEffort is set for code found by reading another language (awk's
	// system(), sed's e, a git alias, gdb's shell …): a reader should
	// skip it, not refuse it, when it does not parse.
	BestEffort bool
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
	// Files are the contents of files the command line shows, by the
	// name a command sees (a process substitution <(echo …) whose output
	// is visible, named /dev/fd/N by the reader): a shell or source
	// reading one of them runs that code.
	Files map[string]string
	// GitAliases are git aliases defined earlier in the command line
	// (see GitAlias), by lower-case name.
	GitAliases map[string]string
}

// Invocation is a command after its wrappers are removed.
type Invocation struct {
	Name     string   // the program that runs (CommandName of argv[0]), "" if none or unknown
	Args     []string // its arguments
	Wrappers []string // the wrappers removed, outermost first
	Context           // its working directory and standard input after the wrappers
	Scripts  []Nested // shell code it runs (bash -c, eval, su -c, a shell reading its stdin…)
	Execs    []Exec   // commands it runs by argument vector (find -exec)
	// Writes are files the program's own script writes (sed's w, awk's
	// print > "f", ed's and ex's w), as written.
	Writes []string
	// Env are the NAME=value assignments the command line and its
	// wrappers (env, sudo) give the program's environment.
	Env []string
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
			inv.envFile(words[0])
			inv.addEnv(words[0])
			words = words[1:]
		}
		if len(words) > 1 && words[0] == "--" {
			words = words[1:] // a wrapper's end of options (chrt 1 -- CMD)
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
		case "nohup", "setsid", "builtin", "unbuffer", "busybox", "toybox", "chronic", "eatmydata", "fakeroot",
			"fakechroot", "caffeinate", "catchsegv", "run-one", "unshare-none", "nocache", "firejail", "proot",
			"valgrind", "flatpak-spawn", "dbus-launch", "dbus-run-session", "catatonit", "ifne", "nq", "tsocks":
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
		default:
			// The wrappers below, then the programs that run code of
			// their own (programs.go).
			n, ok := inv.wrapper(name, args)
			if !ok {
				inv.program(name, args)
				break loop
			}
			next = n
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
		case "export", "declare", "typeset", "readonly", "local":
			for _, a := range args {
				if IsAssignment(a) {
					inv.envFile(a)
				}
			}
			break loop
		case "source", ".":
			if len(args) > 0 && isStdinFile(args[0]) && inv.HasStdin {
				inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin, Same: true})
			} else if len(args) > 0 {
				if src, ok := inv.Files[args[0]]; ok {
					inv.Scripts = append(inv.Scripts, Nested{Src: src, Same: true})
				}
			}
			break loop
		case "find":
			inv.Execs = findExecs(args, inv.Dir)
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

// isStdinFile reports a name of standard input as a file.
func isStdinFile(f string) bool {
	return f == "/dev/stdin" || f == "-" || f == "/proc/self/fd/0" || f == "/dev/fd/0"
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
		case IsAssignment(a):
			inv.envFile(a)
			inv.addEnv(a)
		case strings.HasPrefix(a, "-"):
		default:
			return args[i:]
		}
	}
	return nil
}

// stdinItems splits what parallel reads into items; an unknown stdin
// gives one unknown item.
func stdinItems(inv *Invocation, lines bool) []string {
	if !inv.HasStdin {
		return []string{string(Unknown)}
	}
	return splitItems(inv.Stdin, lines)
}

// splitItems splits input into xargs' items: lines, or blank-separated
// words.
func splitItems(in string, lines bool) []string {
	var items []string
	if lines {
		for l := range strings.SplitSeq(in, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				items = append(items, l)
			}
		}
	} else {
		items = strings.Fields(in)
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
	in, known := inv.Stdin, inv.HasStdin
	if fromFile {
		f, _ := p.Value("a", "arg-file")
		in, known = inv.Files[f]
	}
	switch d, hasD := p.Value("d", "delimiter"); {
	case !known:
		items = []string{string(Unknown)}
	case p.Has('0') || p.HasLong("null") || hasD:
		// Items end at a NUL (-0) or at the delimiter: blanks and quotes
		// are kept (-0 of "rm -rf /" is one item).
		sep := "\x00"
		if hasD {
			sep, _ = EchoEscapes(d)
		}
		for it := range strings.SplitSeq(in, sep) {
			// A trailing newline (of a here-string) is kept by xargs but
			// read as the end of the item here: conservatively.
			if it = strings.TrimRight(it, "\n"); it != "" && len(items) < 64 {
				items = append(items, it)
			}
		}
	default:
		items = splitItems(in, hasRepl)
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
			// Arguments from files: known when the command line shows them.
			var files []string
			for _, f := range set {
				if src, ok := inv.Files[f]; ok {
					files = append(files, splitItems(src, true)...)
				} else {
					files = append(files, string(Unknown))
				}
			}
			set = files
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
	a := shellArgs(args)
	return a.script, a.ok, a.stdin
}

// shellCall is what a shell's arguments say it runs.
type shellCall struct {
	script  string   // the -c operand
	ok      bool     // there is one
	stdin   bool     // the program is read from standard input
	file    string   // or from this script file
	params  []string // $0 and the positional parameters, when given
	rcfiles []string // --rcfile and --init-file
}

func shellArgs(args []string) shellCall {
	var c shellCall
	hasC, hasS := false, false
	operands := func(rest []string) shellCall {
		switch {
		case hasC:
			if len(rest) > 0 {
				c.script, c.ok = rest[0], true
			}
			if len(rest) > 1 {
				c.params = rest[1:]
			}
		case hasS || len(rest) == 0:
			c.stdin = true
			if len(rest) > 0 {
				c.params = append([]string{"bash"}, rest...)
			}
		default:
			c.file, c.params = rest[0], rest
		}
		return c
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || a == "-" {
			return operands(args[i+1:])
		}
		if len(a) > 1 && (a[0] == '-' || a[0] == '+') {
			switch a {
			case "--rcfile", "--init-file":
				if i+1 < len(args) {
					c.rcfiles = append(c.rcfiles, args[i+1])
				}
				i++
				continue
			case "-o", "+o", "-O", "+O":
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
				if a[0] == '-' && strings.IndexByte(a[1:], 's') >= 0 {
					hasS = true
				}
				if a[0] == '-' && strings.IndexByte(a[1:], 'n') >= 0 {
					return shellCall{} // -n: read but do not execute
				}
				if last := a[len(a)-1]; last == 'o' || last == 'O' {
					i++ // -euo pipefail
				}
			}
			continue
		}
		return operands(args[i:])
	}
	if hasC {
		return c // -c without its operand: an error
	}
	return operands(nil)
}

// shell records what a shell runs: its -c code with the parameters after
// it, its standard input, or a script file or --rcfile whose content is
// known (Context.Files).
func (inv *Invocation) shell(args []string) {
	c := shellArgs(args)
	for _, rc := range c.rcfiles {
		if src, ok := inv.Files[rc]; ok {
			inv.Scripts = append(inv.Scripts, Nested{Src: src})
		}
	}
	switch {
	case c.ok:
		inv.Scripts = append(inv.Scripts, Nested{Src: c.script, Args: c.params})
	case c.stdin && inv.HasStdin:
		inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin, Args: c.params})
	case c.file != "":
		if src, ok := inv.Files[c.file]; ok {
			inv.Scripts = append(inv.Scripts, Nested{Src: src, Args: c.params})
		}
	}
}

// addEnv records an environment assignment (a bounded number).
func (inv *Invocation) addEnv(a string) {
	if len(inv.Env) < 64 {
		inv.Env = append(inv.Env, a)
	}
}

// commandVars are environment variables whose value programs run as a
// command line (git's editor and ssh command, pagers, editors).
var commandVars = map[string]bool{
	"GIT_SSH_COMMAND": true, "GIT_EDITOR": true, "GIT_PAGER": true, "GIT_SEQUENCE_EDITOR": true,
	"GIT_EXTERNAL_DIFF": true, "GIT_ASKPASS": true, "SSH_ASKPASS": true, "PAGER": true, "MANPAGER": true,
	"SYSTEMD_PAGER": true, "EDITOR": true, "VISUAL": true, "SUDO_EDITOR": true, "PROMPT_COMMAND": true,
}

// envFile records the code an environment assignment gives a program:
// the file BASH_ENV or ENV names, when its content is known, read by a
// shell at start; a command line in a variable of commandVars.
func (inv *Invocation) envFile(assign string) {
	name, val, _ := strings.Cut(assign, "=")
	switch {
	case name == "BASH_ENV" || name == "ENV":
		if src, ok := inv.Files[val]; ok {
			inv.Scripts = append(inv.Scripts, Nested{Src: src})
		}
	case commandVars[name] && strings.TrimSpace(val) != "":
		inv.Scripts = append(inv.Scripts, Nested{Src: val, BestEffort: true})
	}
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

// ---------------------------------------------------------------------
// The wrappers Unwrap removes besides the common ones of its switch:
// schedulers, emulators, tracers, sandboxes, service launchers and init
// shims, each of which runs the command it is given (chrt -f 1 CMD,
// setarch x86_64 CMD, valgrind CMD …).

// setarchAliases are setarch's links named after an architecture
// (linux64 CMD is setarch linux64 CMD).
var setarchAliases = map[string]bool{
	"linux32": true, "linux64": true, "i386": true, "i486": true, "i586": true, "i686": true, "x86_64": true,
	"athlon": true, "ia64": true, "parisc": true, "parisc32": true, "parisc64": true, "ppc": true, "ppc32": true,
	"ppc64": true, "ppc64le": true, "ppcle": true, "s390": true, "s390x": true, "sparc": true, "sparc32": true,
	"sparc32bash": true, "sparc64": true, "mips": true, "mips32": true, "mips64": true, "arm": true, "armh": true,
	"arm64": true, "aarch64": true, "armv7l": true, "armv8l": true, "uname26": true, "alpha": true, "riscv64": true,
}

// ldso matches the dynamic loader run as a program
// (/lib64/ld-linux-x86-64.so.2 /bin/rm …).
var ldso = regexp.MustCompile(`^ld(-linux[-\w.]*|-musl-[-\w.]*|64)?\.so(\.\d+)*$`)

// wrapper removes one of the wrappers of this file: ok reports that name
// is one, next is the command it runs (nil when none).
func (inv *Invocation) wrapper(name string, args []string) (next []string, ok bool) {
	switch name {
	case "chrt":
		p, rest := ParseOptions(args, "TPD", "sched-runtime", "sched-period", "sched-deadline")
		if p.Has('p') || p.HasLong("pid") || p.Has('m') || p.HasLong("max") {
			return nil, true
		}
		if len(rest) > 0 && allDigits(rest[0]) {
			rest = rest[1:] // the priority
		}
		return rest, true
	case "setarch":
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			args = args[1:] // the architecture
		}
		return inv.setarch(args), true
	case "cpulimit":
		p, rest := ParseOptions(args, "lpePcs", "limit", "pid", "exe", "path", "cpu", "signal")
		if p.Has('p') || p.Has('e') || p.Has('P') || p.HasLong("pid", "exe", "path") {
			return nil, true
		}
		return rest, true
	case "faketime":
		if _, rest := ParseOptions(args, "", "date-prog"); len(rest) > 0 {
			return rest[1:], true // faketime TIMESTAMP CMD
		}
		return nil, true
	case "proxychains", "proxychains4", "proxychains-ng":
		_, next = ParseOptions(args, "f")
		return next, true
	case "torsocks", "torify":
		_, rest := ParseOptions(args, "upaP", "user", "pass", "address", "port")
		if len(rest) > 0 && (rest[0] == "on" || rest[0] == "off" || rest[0] == "show") {
			return nil, true
		}
		return rest, true
	case "perf":
		return perfCommand(args), true
	case "systemd-run", "run0":
		p, rest := ParseOptions(args, "puEMHgD", "property", "unit", "description", "slice", "setenv", "uid",
			"gid", "nice", "machine", "host", "working-directory", "on-active", "on-boot", "on-startup",
			"on-unit-active", "on-unit-inactive", "on-calendar", "path-property", "socket-property",
			"timer-property", "service-type", "user", "group", "chdir", "background", "shell-prompt-prefix")
		if d, ok := p.Value("working-directory", "chdir", "D"); ok {
			inv.Dir = ResolveDir(d, inv.Dir)
		}
		if len(rest) == 0 && (p.Has('S') || p.HasLong("shell")) && inv.HasStdin {
			inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin})
		}
		return rest, true
	case "systemd-cat":
		_, next = ParseOptions(args, "tp", "identifier", "priority", "stderr-priority")
		return next, true
	case "systemd-inhibit":
		_, next = ParseOptions(args, "", "what", "who", "why", "mode")
		return next, true
	case "daemonize":
		p, rest := ParseOptions(args, "ceopluE")
		if d, ok := p.Value("c"); ok {
			inv.Dir = ResolveDir(d, inv.Dir)
		}
		return rest, true
	case "start-stop-daemon":
		return inv.startStopDaemon(args), true
	case "xvfb-run":
		_, next = ParseOptions(args, "efnpsw", "error-file", "auth-file", "server-num", "xauth-protocol",
			"server-args", "wait")
		return next, true
	case "schedtool":
		for i, a := range args {
			if a == "-e" {
				return args[i+1:], true
			}
		}
		return nil, true
	case "cgexec":
		_, next = ParseOptions(args, "g")
		return next, true
	case "gosu", "su-exec", "setuidgid", "envuidgid":
		if len(args) > 0 {
			return args[1:], true // USER CMD
		}
		return nil, true
	case "envdir":
		if len(args) > 0 {
			return args[1:], true // DIR CMD
		}
		return nil, true
	case "softlimit":
		_, next = ParseOptions(args, "madslfcoptr")
		return next, true
	case "chpst":
		_, next = ParseOptions(args, "uUbe/nlLmdopfct")
		return next, true
	case "tini":
		_, next = ParseOptions(args, "pe")
		return next, true
	case "dumb-init":
		_, next = ParseOptions(args, "r", "rewrite")
		return next, true
	case "aa-exec":
		_, next = ParseOptions(args, "pn", "profile", "namespace")
		return next, true
	case "tsp":
		_, next = ParseOptions(args, "LNDW")
		return next, true
	case "capsh":
		// capsh … -- ARGS runs /bin/bash ARGS.
		for i, a := range args {
			if a == "--" {
				return append([]string{"bash"}, args[i+1:]...), true
			}
		}
		return nil, true
	case "ip":
		// ip [-n NS] netns exec NAME CMD
		for i := 0; i+3 < len(args); i++ {
			if args[i] == "netns" && args[i+1] == "exec" {
				return args[i+3:], true
			}
		}
		return nil, false
	case "screen":
		p, rest := ParseOptions(args, "SchepTtX", "Logfile")
		if p.Has('r') || p.Has('R') || p.Has('x') || p.Has('X') || p.Has('l') || p.Has('Q') || p.Has('v') {
			return nil, true
		}
		return rest, true
	case "sshpass":
		_, next = ParseOptions(args, "pfdP")
		return next, true
	case "bwrap":
		return bwrapCommand(args), true
	}
	if setarchAliases[name] {
		return inv.setarch(args), true
	}
	if strings.HasPrefix(name, "ld") && ldso.MatchString(name) {
		p, rest := ParseOptions(args, "", "library-path", "inhibit-rpath", "audit", "preload", "argv0",
			"glibc-hwcaps-prefix", "glibc-hwcaps-mask")
		if p.HasLong("list", "verify", "help", "version", "list-tunables", "list-diagnostics") {
			return nil, true
		}
		return rest, true
	}
	return nil, false
}

// setarch returns what setarch runs after its architecture: the program,
// or a shell reading standard input when there is none.
func (inv *Invocation) setarch(args []string) []string {
	p, rest := ParseOptions(args, "")
	if p.HasLong("list", "help", "version") || p.Has('h') || p.Has('V') {
		return nil
	}
	if len(rest) == 0 && inv.HasStdin {
		inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin})
	}
	return rest
}

// perfCommand returns the program perf record/stat/trace runs.
func perfCommand(args []string) []string {
	if len(args) == 0 {
		return nil
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "record", "stat", "trace", "ftrace", "timechart":
	case "sched", "lock", "mem", "c2c", "kmem", "kwork", "kvm":
		if len(rest) == 0 || rest[0] != "record" {
			return nil
		}
		rest = rest[1:]
	default:
		return nil
	}
	_, next := ParseOptions(rest, "eoptFcCmuGDjrxIM", "event", "output", "pid", "tid", "freq", "count", "cpu",
		"mmap-pages", "uid", "cgroup", "delay", "branch-filter", "repeat", "field-separator", "interval-print",
		"metrics", "call-graph", "filter", "duration", "exclude-perf", "clang-path")
	return next
}

// startStopDaemon returns what start-stop-daemon --start runs: the
// program of --startas or --exec, with the arguments after --.
func (inv *Invocation) startStopDaemon(args []string) []string {
	p, rest := ParseOptions(args, "xanpucrdNPIksRg", "exec", "startas", "name", "pidfile", "user", "chuid",
		"chroot", "chdir", "nicelevel", "procsched", "iosched", "umask", "signal", "retry", "group", "ppid",
		"output", "notify-timeout")
	if !p.Has('S') && !p.HasLong("start") {
		return nil
	}
	if d, ok := p.Value("d", "chdir"); ok {
		inv.Dir = ResolveDir(d, inv.Dir)
	}
	prog, ok := p.Value("a", "startas")
	if !ok {
		if prog, ok = p.Value("x", "exec"); !ok {
			return nil
		}
	}
	// ParseOptions stops at the first operand; the program's arguments
	// follow a "--".
	for i, a := range args {
		if a == "--" {
			rest = args[i+1:]
			break
		}
	}
	return append([]string{prog}, rest...)
}

// bwrapArgs are bubblewrap's options taking one value, bwrapArgs2 those
// taking two.
var (
	bwrapArgs1 = map[string]bool{
		"--args": true, "--argv0": true, "--userns": true, "--userns2": true, "--pidns": true, "--uid": true,
		"--gid": true, "--hostname": true, "--chdir": true, "--unsetenv": true, "--lock-file": true,
		"--sync-fd": true, "--remount-ro": true, "--proc": true, "--dev": true, "--tmpfs": true, "--mqueue": true,
		"--dir": true, "--seccomp": true, "--add-seccomp-fd": true, "--block-fd": true, "--userns-block-fd": true,
		"--info-fd": true, "--json-status-fd": true, "--cap-add": true, "--cap-drop": true, "--perms": true,
		"--size": true, "--exec-label": true, "--file-label": true,
	}
	bwrapArgs2 = map[string]bool{
		"--setenv": true, "--bind": true, "--bind-try": true, "--dev-bind": true, "--dev-bind-try": true,
		"--ro-bind": true, "--ro-bind-try": true, "--file": true, "--bind-data": true, "--ro-bind-data": true,
		"--symlink": true, "--chmod": true, "--bind-fd": true, "--ro-bind-fd": true,
	}
)

// bwrapCommand returns the program bubblewrap runs.
func bwrapCommand(args []string) []string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return args[i+1:]
		case bwrapArgs2[a]:
			i += 2
		case bwrapArgs1[a]:
			i++
		case strings.HasPrefix(a, "--"):
		default:
			return args[i:]
		}
	}
	return nil
}
