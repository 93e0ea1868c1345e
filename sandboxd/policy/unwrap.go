package policy

import (
	"slices"
	"strings"
)

// This file unwraps wrapper commands (sudo, env, xargs, timeout, …),
// finds scripts nested in shells (bash -c, eval, here-documents) and
// provides the argument helpers the rules use.

type nestedScript struct {
	src  string
	same bool // eval: runs in the current shell, cd/assignments persist
}

type findExec struct {
	words []string
	cwd   string
}

var shells = map[string]bool{
	"bash": true, "sh": true, "dash": true, "zsh": true, "ksh": true, "ash": true,
	"mksh": true, "rbash": true, "fish": true, "yash": true, "posh": true,
}

// invoke unwraps wrappers around words, applies the rules to the final
// command and analyses the scripts it runs.
func (a *analyser) invoke(words []string, inv invocation, raw string, sc *scope, depth int) *Decision {
	if depth > maxDepth {
		return nil
	}
	var nested []nestedScript
	var execs []findExec
loop:
	for guard := 0; guard < 64 && len(words) > 0; guard++ {
		name := commandName(words[0])
		args := words[1:]
		var next []string
		switch name {
		case "sudo":
			p, rest := parseOptions(args, "ugChpDrtTUR", "user", "group", "close-from", "host", "prompt",
				"chdir", "role", "type", "command-timeout", "other-user", "chroot")
			if d, ok := p.value("D", "chdir"); ok {
				inv.cwd = resolveDir(d, inv.cwd)
			}
			next = rest
		case "doas":
			_, next = parseOptions(args, "uC")
		case "nohup", "setsid", "builtin", "unbuffer", "busybox":
			_, next = parseOptions(args, "")
		case "nice":
			_, next = parseOptions(args, "n", "adjustment")
		case "ionice":
			p, rest := parseOptions(args, "cnpPu", "class", "classdata", "pid", "pgid", "uid")
			if _, ok := p.value("p", "P", "u", "pid", "pgid", "uid"); !ok {
				next = rest
			}
		case "stdbuf":
			_, next = parseOptions(args, "ioe", "input", "output", "error")
		case "time":
			_, next = parseOptions(args, "fo", "format", "output")
		case "timeout":
			if _, rest := parseOptions(args, "sk", "signal", "kill-after"); len(rest) > 0 {
				next = rest[1:]
			}
		case "command":
			if p, rest := parseOptions(args, ""); !p.has('v') && !p.has('V') {
				next = rest
			}
		case "exec":
			_, next = parseOptions(args, "a")
		case "chroot":
			if _, rest := parseOptions(args, "", "userspec", "groups"); len(rest) > 0 {
				next = rest[1:]
				inv.cwd = "/"
			}
		case "taskset":
			p, rest := parseOptions(args, "")
			if !p.has('p') && !p.hasLong("pid") && len(rest) > 0 {
				next = rest[1:]
			}
		case "flock":
			if _, rest := parseOptions(args, "wE", "timeout", "wait", "conflict-exit-code"); len(rest) > 1 {
				if rest[1] == "-c" || rest[1] == "--command" {
					if len(rest) > 2 {
						nested = append(nested, nestedScript{src: rest[2]})
					}
				} else {
					next = rest[1:]
				}
			}
		case "env":
			next = envUnwrap(args, &inv)
		case "xargs":
			p, rest := parseOptions(args, "adEILnPs", "arg-file", "delimiter", "max-lines", "max-args",
				"max-procs", "max-chars", "process-slot-var")
			if !p.has('I') && !p.has('i') && !p.has('a') && !p.hasLong("replace", "arg-file") && inv.hasStdin && len(rest) > 0 {
				rest = append(slices.Clip(rest), strings.Fields(inv.stdin)...)
			}
			inv.stdin, inv.hasStdin = "", false
			next = rest
		case "watch":
			p, rest := parseOptions(args, "nq", "interval", "equexit")
			if p.has('x') || p.hasLong("exec") {
				next = rest
			} else if len(rest) > 0 {
				nested = append(nested, nestedScript{src: strings.Join(rest, " ")})
			}
		case "su", "runuser":
			if p, rest := parseOptions(args, "cgGsuw", "command", "group", "supp-group", "shell", "user",
				"whitelist-environment", "session-command"); name == "runuser" && p.has('u') {
				if c, ok := p.value("c", "command"); ok {
					nested = append(nested, nestedScript{src: c})
				} else {
					next = rest
				}
				break
			}
			p := parseArgs(args, "cgGsw", "command", "group", "supp-group", "shell",
				"whitelist-environment", "session-command")
			if c, ok := p.value("c", "command", "session-command"); ok {
				nested = append(nested, nestedScript{src: c})
			}
		case "eval":
			nested = append(nested, nestedScript{src: strings.Join(args, " "), same: true})
			break loop
		case "trap":
			if _, rest := parseOptions(args, ""); len(rest) >= 2 {
				nested = append(nested, nestedScript{src: rest[0], same: true})
			}
			break loop
		case "find":
			execs = findExecs(args, inv.cwd)
			break loop
		default:
			if shells[name] {
				if s, ok, stdin := shellScript(args); ok {
					nested = append(nested, nestedScript{src: s})
				} else if stdin && inv.hasStdin {
					nested = append(nested, nestedScript{src: inv.stdin})
				}
			}
			break loop
		}
		words = next
	}
	if len(words) > 0 {
		inv.name, inv.args = commandName(words[0]), words[1:]
	} else {
		inv.name, inv.args = "", nil
	}
	if d := a.apply(&inv, raw); d != nil {
		return d
	}
	for _, n := range nested {
		child := sc
		if !n.same {
			child = sc.clone()
			child.cwd = inv.cwd
		}
		if d := a.script(n.src, child, depth+1); d != nil {
			return d
		}
	}
	for _, e := range execs {
		if d := a.invoke(e.words, invocation{cwd: e.cwd}, raw, sc, depth+1); d != nil {
			return d
		}
	}
	return nil
}

// envUnwrap strips env's options and assignments, applying -C and -S.
func envUnwrap(args []string, inv *invocation) []string {
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
			for i+1 < len(args) && isAssignment(args[i+1]) {
				i++
			}
			return args[i+1:]
		case a == "-C" || a == "--chdir" || strings.HasPrefix(a, "--chdir=") || (strings.HasPrefix(a, "-C") && !strings.HasPrefix(a, "--")):
			inv.cwd = resolveDir(val("-C", "--chdir"), inv.cwd)
		case a == "-S" || a == "--split-string" || strings.HasPrefix(a, "--split-string=") || (strings.HasPrefix(a, "-S") && !strings.HasPrefix(a, "--")):
			s := val("-S", "--split-string")
			return append(splitWords(s), args[min(i+1, len(args)):]...)
		case a == "-u" || a == "--unset":
			i++
		case strings.HasPrefix(a, "-"), isAssignment(a):
		default:
			return args[i:]
		}
	}
	return nil
}

// splitWords tokenises s and returns its words (for env -S).
func splitWords(s string) []string {
	var out []string
	empty := &scope{}
	for _, t := range lex(s) {
		if t.kind == tkWord {
			out = append(out, empty.expand(t.val))
		}
	}
	return out
}

// shellScript finds the script a shell runs: the operand of -c (ok), or
// stdin when there is neither -c nor a script file (stdin).
func shellScript(args []string) (script string, ok, stdin bool) {
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
func findExecs(args []string, cwd string) []findExec {
	var out []findExec
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j] != ";" && args[j] != "+" {
				j++
			}
			e := findExec{words: args[i+1 : j]}
			if args[i] == "-exec" || args[i] == "-ok" {
				e.cwd = cwd
			}
			out = append(out, e)
			i = j
		}
	}
	return out
}

// ---------------------------------------------------------------------
// Argument parsing.

type optVal struct{ key, val string }

type parsedArgs struct {
	ops   []string // operands
	short []byte   // short flags seen (without arguments)
	long  []string // long options seen (name without --, before any =)
	vals  []optVal // options that took a value
}

func (p *parsedArgs) has(c byte) bool { return slices.Contains(p.short, c) }

func (p *parsedArgs) hasLong(names ...string) bool {
	for _, l := range p.long {
		if slices.Contains(names, l) {
			return true
		}
	}
	return false
}

// hasLongAbbrev reports whether an unambiguous abbreviation (at least min
// characters) of the long option full was given, as getopt_long accepts.
func (p *parsedArgs) hasLongAbbrev(full string, min int) bool {
	for _, l := range p.long {
		if len(l) >= min && strings.HasPrefix(full, l) {
			return true
		}
	}
	return false
}

func (p *parsedArgs) value(keys ...string) (string, bool) {
	for i := len(p.vals) - 1; i >= 0; i-- {
		if slices.Contains(keys, p.vals[i].key) {
			return p.vals[i].val, true
		}
	}
	return "", false
}

func (p *parsedArgs) values(keys ...string) []string {
	var out []string
	for _, v := range p.vals {
		if slices.Contains(keys, v.key) {
			out = append(out, v.val)
		}
	}
	return out
}

// parseArgs parses GNU-style arguments, options and operands in any order
// (up to "--"). shortWithArg lists the short options taking a value;
// longWithArg the long ones taking a separate value.
func parseArgs(args []string, shortWithArg string, longWithArg ...string) parsedArgs {
	var p parsedArgs
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			p.ops = append(p.ops, args[i+1:]...)
			break
		}
		if !p.option(args, &i, shortWithArg, longWithArg) {
			p.ops = append(p.ops, args[i])
		}
	}
	return p
}

// parseOptions parses options up to the first operand (POSIX style, as
// wrappers do) and returns the rest starting at that operand.
func parseOptions(args []string, shortWithArg string, longWithArg ...string) (parsedArgs, []string) {
	var p parsedArgs
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			return p, args[i+1:]
		}
		if !p.option(args, &i, shortWithArg, longWithArg) {
			return p, args[i:]
		}
	}
	return p, nil
}

func (p *parsedArgs) option(args []string, i *int, shortWithArg string, longWithArg []string) bool {
	a := args[*i]
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	if a[1] == '-' {
		name, val, hasVal := strings.Cut(a[2:], "=")
		p.long = append(p.long, name)
		if !hasVal && slices.Contains(longWithArg, name) && *i+1 < len(args) {
			*i++
			val, hasVal = args[*i], true
		}
		if hasVal {
			p.vals = append(p.vals, optVal{name, val})
		}
		return true
	}
	for k := 1; k < len(a); k++ {
		c := a[k]
		if strings.IndexByte(shortWithArg, c) >= 0 {
			v := a[k+1:]
			if v == "" && *i+1 < len(args) {
				*i++
				v = args[*i]
			}
			p.short = append(p.short, c)
			p.vals = append(p.vals, optVal{string(c), v})
			break
		}
		p.short = append(p.short, c)
	}
	return true
}

// onlyHelp reports whether args just ask for help or the version.
func onlyHelp(args []string) bool {
	if len(args) == 0 {
		return false
	}
	for _, a := range args {
		switch a {
		case "-h", "--help", "-V", "--version", "-?":
		default:
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------
// Paths.

func hasGlob(s string) bool { return strings.ContainsAny(s, "*?[") }

// braceExpand expands simple brace lists ({a,b}); words with many brace
// groups are returned unchanged, and the result is capped.
func braceExpand(s string) []string {
	if strings.IndexByte(s, '{') < 0 || strings.IndexByte(s, ',') < 0 || strings.Count(s, "{") > 4 {
		return []string{s}
	}
	out := make([]string, 0, 4)
	var rec func(string)
	rec = func(w string) {
		if len(out) >= 64 {
			return
		}
		for i := 0; i < len(w); i++ {
			if w[i] != '{' {
				continue
			}
			depth, parts, last := 0, []string(nil), i+1
			for j := i; j < len(w); j++ {
				switch w[j] {
				case '{':
					depth++
				case '}':
					depth--
				case ',':
					if depth == 1 {
						parts = append(parts, w[last:j])
						last = j + 1
					}
				}
				if depth == 0 {
					if parts != nil {
						parts = append(parts, w[last:j])
						for _, p := range parts {
							rec(w[:i] + p + w[j+1:])
						}
						return
					}
					break
				}
			}
		}
		out = append(out, w)
	}
	rec(s)
	return out
}
