package shell

import (
	"regexp"
	"strings"
)

// This file reads the programs that run commands of their own, written
// in their own language or options: awk's system(), print | "cmd" and
// "cmd" | getline; GNU sed's e command and s///e; ed's and ex's !cmd;
// git aliases and the commands git runs from its configuration; tar's
// --checkpoint-action=exec, --to-command and -I; rsync -e; ssh's
// ProxyCommand; gdb's shell, pipe and python; expect's and Tcl's spawn,
// exec and system; at and batch; socat's EXEC and SYSTEM addresses; and
// more. What they run is reported as Nested code (BestEffort: the
// reading is by pattern) or Exec argument vectors, and the files their
// scripts write as Writes. The reading is best effort: a value computed
// at run time is Unknown.

// program records what a program that is not a wrapper runs.
func (inv *Invocation) program(name string, args []string) {
	switch {
	case Shells[name]:
		inv.shell(args)
	case name == "awk" || name == "gawk" || name == "mawk" || name == "nawk" || name == "original-awk" || name == "goawk":
		inv.awk(args)
	case name == "sed" || name == "gsed":
		inv.sed(args)
	case name == "ed" || name == "red":
		inv.ed(args)
	case name == "ex" || name == "vi" || name == "vim" || name == "nvim" || name == "view" || name == "vimdiff" ||
		name == "rvim" || name == "gvim" || name == "vim.basic" || name == "vim.tiny" || name == "evim":
		inv.vim(name, args)
	case name == "git":
		inv.git(args, 0)
	case name == "tar" || name == "gtar" || name == "bsdtar":
		inv.tar(args)
	case name == "rsync":
		p := ParseArgs(args, "eBfTM", "rsh", "block-size", "filter", "temp-dir", "exclude", "include", "chmod", "chown", "rsync-path")
		if rsh, ok := p.Value("e", "rsh"); ok {
			inv.argvOf(rsh, "host")
		}
	case name == "ssh" || name == "scp" || name == "sftp" || name == "autossh":
		inv.ssh(name, args)
	case name == "gdb" || name == "gdb-multiarch" || name == "cgdb":
		inv.gdb(args)
	case name == "lldb":
		inv.lldb(args)
	case name == "at" || name == "batch":
		inv.at(name, args)
	case name == "expect" || name == "tclsh" || name == "wish" || strings.HasPrefix(name, "tclsh8"):
		inv.tcl(name, args)
	case name == "socat":
		for _, a := range args {
			kind, rest, ok := strings.Cut(a, ":")
			if !ok {
				continue
			}
			cmd, _, _ := strings.Cut(rest, ",")
			switch strings.ToUpper(kind) {
			case "EXEC":
				inv.argvOf(cmd)
			case "SYSTEM":
				inv.code(cmd)
			}
		}
	case name == "ncat" || name == "nc" || name == "netcat" || name == "nc.traditional" || name == "nc.openbsd":
		p := ParseArgs(args, "ecpswiIqlxXOTMmdD", "exec", "sh-exec", "lua-exec", "source-port", "wait",
			"idle-timeout", "proxy", "proxy-type", "proxy-auth", "output", "hex-dump", "max-conns", "allow",
			"allowfile", "deny", "denyfile", "ssl-cert", "ssl-key", "ssl-trustfile", "ssl-ciphers", "ssl-alpn")
		for _, c := range p.Values("c", "sh-exec") {
			inv.code(c)
		}
		for _, e := range p.Values("e", "exec") {
			inv.argvOf(e)
		}
	case name == "zip":
		p := ParseArgs(args, "bnPtxiDYZ", "unzip-command", "TT")
		for i, a := range args {
			if a == "-TT" && i+1 < len(args) {
				inv.code(args[i+1])
			} else if v, ok := strings.CutPrefix(a, "--unzip-command="); ok {
				inv.code(v)
			}
		}
		if c, ok := p.Value("unzip-command"); ok {
			inv.code(c)
		}
	case name == "man":
		p := ParseArgs(args, "PCMLmSsepRrEIH", "pager", "config-file", "manpath", "locale", "systems", "sections",
			"preprocessor", "encoding", "html")
		if pg, ok := p.Value("P", "pager"); ok {
			inv.code(pg)
		}
	case name == "tmux":
		inv.tmux(args)
	case name == "hyperfine":
		p := ParseArgs(args, "wmMrspcSnuLPD", "warmup", "min-runs", "max-runs", "runs", "setup", "prepare",
			"cleanup", "shell", "command-name", "time-unit", "export-asciidoc", "export-csv", "export-json",
			"export-markdown", "export-orgmode", "output", "style", "sort", "input")
		for _, c := range p.Values("s", "setup", "p", "prepare", "c", "cleanup") {
			inv.code(c)
		}
		for _, c := range p.Ops {
			inv.code(c)
		}
	}
}

// code records shell code found in another program's arguments.
func (inv *Invocation) code(src string) {
	if strings.TrimSpace(src) != "" && len(inv.Scripts) < maxFound {
		inv.Scripts = append(inv.Scripts, Nested{Src: src, BestEffort: true})
	}
}

// codeWithStdin records a command line fed text on its standard input
// (awk's print "…" | "sh"): printf '%s' TEXT | CMD.
func (inv *Invocation) codeWithStdin(cmd, stdin string) {
	inv.code("printf '%s' " + Quote(stdin) + " | " + cmd)
}

// argvOf records a program run with an argument vector given as one
// string split on blanks (rsync -e, socat EXEC:), plus extra arguments.
func (inv *Invocation) argvOf(s string, extra ...string) {
	var argv []string
	for _, w := range Words(s) {
		argv = append(argv, w.Value)
	}
	if len(argv) > 0 && len(inv.Execs) < maxFound {
		inv.Execs = append(inv.Execs, Exec{Argv: append(argv, extra...), Dir: inv.Dir})
	}
}

// maxFound bounds the code found in one program's arguments.
const maxFound = 32

// Quote writes s as one shell word, in single quotes; an Unknown byte
// stays outside the quotes, so that a reader replacing it by an
// expansion gets a word of unknown value.
func Quote(s string) string {
	var b strings.Builder
	for i, part := range strings.Split(s, string(Unknown)) {
		if i > 0 {
			b.WriteByte(Unknown)
		}
		if part != "" || i == 0 && !strings.Contains(s, string(Unknown)) {
			b.WriteString("'" + strings.ReplaceAll(part, "'", `'\''`) + "'")
		}
	}
	return b.String()
}

// ---------------------------------------------------------------------
// awk

func (inv *Invocation) awk(args []string) {
	var progs, ops []string
	vars := map[string]string{}
	assign := func(a string) {
		if name, val, ok := strings.Cut(a, "="); ok && IsName(name) {
			vars[name] = awkUnescape(val)
		}
	}
	file := func(f string) {
		if src, ok := inv.Files[f]; ok {
			progs = append(progs, src)
		} else {
			progs = append(progs, "") // a program file: not visible
		}
	}
	i := 0
opts:
	for ; i < len(args); i++ {
		a := args[i]
		val := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--":
			i++
			break opts
		case a == "-f" || a == "--file" || a == "-E" || a == "--exec":
			file(val())
		case strings.HasPrefix(a, "--file=") || strings.HasPrefix(a, "--exec="):
			_, v, _ := strings.Cut(a, "=")
			file(v)
		case a == "-e" || a == "--source":
			progs = append(progs, val())
		case strings.HasPrefix(a, "--source="):
			progs = append(progs, a[len("--source="):])
		case a == "-v" || a == "--assign":
			assign(val())
		case strings.HasPrefix(a, "--assign="):
			assign(a[len("--assign="):])
		case a == "-F" || a == "--field-separator" || a == "-i" || a == "--include" || a == "-l" || a == "--load" ||
			a == "-W":
			val()
		case strings.HasPrefix(a, "-v") && len(a) > 2:
			assign(a[2:])
		case strings.HasPrefix(a, "-f") && len(a) > 2:
			file(a[2:])
		case len(a) > 1 && a[0] == '-':
		default:
			break opts
		}
	}
	if len(progs) == 0 && i < len(args) {
		progs = []string{args[i]}
		i++
	}
	if i < len(args) {
		ops = args[i:]
	}
	files := false
	for _, o := range ops {
		assign(o) // operands var=value assign before the files are read
		files = files || !strings.Contains(o, "=")
	}
	if !files && inv.HasStdin {
		vars["$0"] = strings.TrimSuffix(inv.Stdin, "\n") // the records read
	}
	for _, p := range progs {
		inv.awkProgram(p, vars)
	}
}

// awkAssign finds NAME = "literal" in an awk program.
var awkAssign = regexp.MustCompile(`(?:^|[^=!<>~])\b([A-Za-z_]\w*)\s*=\s*"((?:[^"\\]|\\.)*)"`)

// awkProgram records the commands and files an awk program runs and
// writes.
func (inv *Invocation) awkProgram(prog string, vars map[string]string) {
	if !strings.ContainsAny(prog, "|>(") {
		return
	}
	for _, m := range awkAssign.FindAllStringSubmatch(prog, 64) {
		if _, ok := vars[m[1]]; !ok {
			vars[m[1]] = awkUnescape(m[2])
		}
	}
	for _, seg := range awkSegments(prog) {
		// system(EXPR)
		for rest := seg; ; {
			k := indexWord(rest, "system")
			if k < 0 {
				break
			}
			rest = strings.TrimLeft(rest[k+len("system"):], " \t")
			if strings.HasPrefix(rest, "(") {
				v, _ := awkExpr(rest[1:], vars, 0)
				inv.code(v)
			}
		}
		// EXPR | getline, EXPR |& getline
		for _, m := range awkGetline.FindAllStringIndex(seg, 8) {
			if v, ok := awkExprBefore(seg[:m[0]], vars); ok {
				inv.code(v)
			}
		}
		// print … | CMD, print … |& CMD, print … > FILE
		k := indexWord(seg, "printf")
		isPrintf := k >= 0
		if k < 0 {
			k = indexWord(seg, "print")
		}
		if k < 0 {
			continue
		}
		stmt := seg[k:]
		if isPrintf {
			stmt = stmt[len("printf"):]
		} else {
			stmt = stmt[len("print"):]
		}
		op, at := awkTopOperator(stmt)
		if at < 0 {
			continue
		}
		target, _ := awkExpr(strings.TrimLeft(stmt[at+len(op):], " \t"), vars, 0)
		if op == ">" || op == ">>" {
			if target != "" {
				inv.Writes = append(inv.Writes, target)
			}
			continue
		}
		out := awkPrinted(stmt[:at], vars, isPrintf)
		inv.codeWithStdin(target, out)
	}
}

var awkGetline = regexp.MustCompile(`\|&?\s*getline\b`)

// awkSegments splits an awk program into statements at ; { } and
// newlines outside strings.
func awkSegments(prog string) []string {
	var out []string
	start := 0
	for i := 0; i < len(prog) && len(out) < 256; i++ {
		switch prog[i] {
		case '"':
			i = skipQuoted(prog, i, '"')
		case '#':
			j := strings.IndexByte(prog[i:], '\n')
			if j < 0 {
				j = len(prog) - i
			}
			out = append(out, prog[start:i])
			i += j
			start = i
		case ';', '{', '}', '\n':
			out = append(out, prog[start:i])
			start = i + 1
		}
	}
	return append(out, prog[min(start, len(prog)):])
}

// skipQuoted returns the index of the quote closing the string that
// starts at s[i].
func skipQuoted(s string, i int, q byte) int {
	for j := i + 1; j < len(s); j++ {
		if s[j] == '\\' {
			j++
			continue
		}
		if s[j] == q {
			return j
		}
	}
	return len(s)
}

// indexWord finds word in s outside strings, not part of a longer name.
func indexWord(s, word string) int {
	for i := 0; i+len(word) <= len(s); i++ {
		if s[i] == '"' {
			i = skipQuoted(s, i, '"')
			continue
		}
		if strings.HasPrefix(s[i:], word) && (i == 0 || !isNameByte(s[i-1])) &&
			(i+len(word) == len(s) || !isNameByte(s[i+len(word)])) {
			return i
		}
	}
	return -1
}

func isNameByte(c byte) bool {
	return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (c >= '0' && c <= '9')
}

// awkTopOperator finds the first |&, |, >> or > of a print statement
// outside strings and parentheses.
func awkTopOperator(s string) (string, int) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			i = skipQuoted(s, i, '"')
		case '(':
			depth++
		case ')':
			depth--
		case '|', '>':
			if depth > 0 {
				continue
			}
			if i+1 < len(s) && (s[i+1] == '&' && c == '|' || s[i+1] == '>' && c == '>') {
				return s[i : i+2], i
			}
			if c == '|' && i+1 < len(s) && s[i+1] == '|' {
				i++ // ||
				continue
			}
			return string(c), i
		}
	}
	return "", -1
}

// awkPrinted returns what print or printf writes for an argument list.
func awkPrinted(list string, vars map[string]string, isPrintf bool) string {
	list = strings.TrimSpace(list)
	if strings.HasPrefix(list, "(") && strings.HasSuffix(list, ")") {
		list = list[1 : len(list)-1]
	}
	var vals []string
	for n := 0; n < 32; n++ {
		v, rest := awkExpr(list, vars, 0)
		vals = append(vals, v)
		rest = strings.TrimLeft(rest, " \t")
		if !strings.HasPrefix(rest, ",") {
			break
		}
		list = rest[1:]
	}
	if isPrintf {
		if len(vals) == 0 {
			return ""
		}
		return Printf(vals[0], vals[1:])
	}
	if len(vals) == 1 && vals[0] == "" {
		if v, ok := vars["$0"]; ok {
			return v + "\n"
		}
		return string(Unknown) + "\n" // print alone prints $0
	}
	return strings.Join(vals, " ") + "\n"
}

// awkExpr evaluates a concatenation of string literals, numbers and
// variables at the start of s; anything else known only at run time
// ($1, a function call …) is Unknown. It returns the rest of s.
func awkExpr(s string, vars map[string]string, depth int) (string, string) {
	var b strings.Builder
	for n := 0; n < 64; n++ {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			break
		}
		c := s[0]
		switch {
		case c == '"':
			j := skipQuoted(s, 0, '"')
			b.WriteString(awkUnescape(s[1:min(j, len(s))]))
			s = s[min(j+1, len(s)):]
		case c == '$':
			if v, ok := vars["$0"]; ok && strings.HasPrefix(s, "$0") && (len(s) == 2 || !isNameByte(s[2])) {
				b.WriteString(v)
				s = s[2:]
				continue
			}
			b.WriteByte(Unknown)
			s = s[1:]
			if strings.HasPrefix(s, "(") {
				_, s = awkExpr(s[1:], vars, depth+1)
				s = strings.TrimPrefix(strings.TrimLeft(s, " \t"), ")")
			} else {
				j := 0
				for j < len(s) && isNameByte(s[j]) {
					j++
				}
				s = s[j:]
			}
		case c == '(' && depth < 4:
			v, rest := awkExpr(s[1:], vars, depth+1)
			b.WriteString(v)
			s = strings.TrimPrefix(strings.TrimLeft(rest, " \t"), ")")
		case c >= '0' && c <= '9':
			j := 0
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.') {
				j++
			}
			b.WriteString(s[:j])
			s = s[j:]
		case isNameByte(c):
			j := 0
			for j < len(s) && isNameByte(s[j]) {
				j++
			}
			name := s[:j]
			if name == "getline" || name == "in" {
				return b.String(), s
			}
			s = s[j:]
			if name == "sprintf" && strings.HasPrefix(s, "(") && depth < 4 {
				// sprintf(FORMAT, ARGS…) as printf formats them.
				var vals []string
				rest := s[1:]
				for n := 0; n < 32; n++ {
					v, r := awkExpr(rest, vars, depth+1)
					vals = append(vals, v)
					r = strings.TrimLeft(r, " \t")
					if !strings.HasPrefix(r, ",") {
						rest = strings.TrimPrefix(r, ")")
						break
					}
					rest = r[1:]
				}
				b.WriteString(Printf(vals[0], vals[1:]))
				s = rest
				continue
			}
			if strings.HasPrefix(strings.TrimLeft(s, " \t"), "(") || strings.HasPrefix(s, "[") {
				b.WriteByte(Unknown) // a call or an array element
				end := matchingClose(s)
				s = s[end:]
				continue
			}
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteByte(Unknown)
			}
		default:
			return b.String(), s
		}
	}
	return b.String(), s
}

// matchingClose returns the index after the bracket group s starts with
// (after blanks).
func matchingClose(s string) int {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '"':
			i = skipQuoted(s, i, '"')
		case '(', '[':
			depth++
		case ')', ']':
			depth--
			if depth <= 0 {
				return i + 1
			}
		}
	}
	return len(s)
}

// awkExprBefore evaluates the concatenation that ends s ("rm -rf " x |
// getline): string literals and variables, read backwards.
func awkExprBefore(s string, vars map[string]string) (string, bool) {
	var parts []string
	s = strings.TrimRight(s, " \t")
	for n := 0; n < 16 && s != ""; n++ {
		switch c := s[len(s)-1]; {
		case c == '"':
			j := strings.LastIndexByte(s[:len(s)-1], '"')
			for j > 0 && s[j-1] == '\\' {
				j = strings.LastIndexByte(s[:j-1], '"')
			}
			if j < 0 {
				return "", false
			}
			parts = append(parts, awkUnescape(s[j+1:len(s)-1]))
			s = s[:j]
		case isNameByte(c):
			j := len(s)
			for j > 0 && isNameByte(s[j-1]) {
				j--
			}
			name := s[j:]
			if v, ok := vars[name]; ok {
				parts = append(parts, v)
			} else {
				parts = append(parts, string(Unknown))
			}
			s = s[:j]
		default:
			n = 16
			continue
		}
		s = strings.TrimRight(s, " \t")
		if s != "" && !strings.HasSuffix(s, `"`) && !isNameByte(s[len(s)-1]) {
			break
		}
	}
	if len(parts) == 0 {
		return "", false
	}
	var b strings.Builder
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString(parts[i])
	}
	return b.String(), true
}

// awkUnescape resolves the escapes of an awk string literal.
func awkUnescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch e := s[i]; e {
		case '/', '"':
			b.WriteByte(e)
		default:
			i = formatEscape(&b, s, i) - 1
		}
	}
	return b.String()
}

// ---------------------------------------------------------------------
// sed

func (inv *Invocation) sed(args []string) {
	var scripts []string
	extended, sandbox := false, false
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		val := func(v string) string {
			if v != "" {
				return v
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--":
			i++
			goto operands
		case a == "--expression" || strings.HasPrefix(a, "--expression="):
			_, v, _ := strings.Cut(a, "=")
			scripts = append(scripts, val(v))
		case a == "--file" || strings.HasPrefix(a, "--file="):
			_, v, _ := strings.Cut(a, "=")
			scripts = append(scripts, inv.Files[val(v)])
		case a == "--regexp-extended":
			extended = true
		case a == "--sandbox":
			sandbox = true
		case a == "--line-length" || a == "-l":
			val("")
		case strings.HasPrefix(a, "--"):
		case len(a) > 1 && a[0] == '-':
			for k := 1; k < len(a); k++ {
				switch a[k] {
				case 'E', 'r':
					extended = true
				case 'e':
					scripts = append(scripts, val(a[k+1:]))
					k = len(a)
				case 'f':
					scripts = append(scripts, inv.Files[val(a[k+1:])])
					k = len(a)
				case 'l':
					val(a[k+1:])
					k = len(a)
				case 'i':
					k = len(a) // -i[SUFFIX]
				}
			}
		default:
			if scripts == nil {
				scripts = append(scripts, a)
				continue
			}
			goto operands
		}
	}
operands:
	if sandbox {
		return
	}
	if scripts == nil && i < len(args) {
		scripts = append(scripts, args[i])
	}
	for _, s := range scripts {
		inv.sedScript(s, extended)
	}
}

// sedScript records what a sed script runs (e, s///e) and writes (w, W,
// s///w).
func (inv *Invocation) sedScript(s string, extended bool) {
	for i, n := 0, 0; i < len(s) && n < 256; n++ {
		// Blanks, separators and an address (1, $, /re/, \cREc, a,b, ~N, !).
		for i < len(s) && strings.IndexByte(" \t\n;{}!", s[i]) >= 0 {
			i++
		}
		for i < len(s) {
			c := s[i]
			switch {
			case c >= '0' && c <= '9' || c == '$' || c == ',' || c == '~' || c == '+' || c == ' ' || c == '\t' || c == '!':
				i++
				continue
			case c == '/' || c == '\\':
				d := byte('/')
				if c == '\\' && i+1 < len(s) {
					i++
					d = s[i]
				}
				i = sedDelimited(s, i, d) + 1
				for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
					i++
				}
				continue
			}
			break
		}
		if i >= len(s) {
			return
		}
		cmd := s[i]
		i++
		switch cmd {
		case '#':
			i = lineEnd(s, i)
		case 'a', 'i', 'c', 'r', 'R', 'b', 't', 'T', ':', 'L', 'v':
			if cmd == 'b' || cmd == 't' || cmd == 'T' || cmd == 'v' {
				for i < len(s) && s[i] != ';' && s[i] != '\n' && s[i] != '}' {
					i++
				}
				continue
			}
			i = lineEnd(s, i)
		case 'w', 'W':
			end := lineEnd(s, i)
			if f := strings.TrimSpace(s[i:end]); f != "" {
				inv.Writes = append(inv.Writes, f)
			}
			i = end
		case 'e':
			end := lineEnd(s, i)
			if c := strings.TrimSpace(s[i:end]); c != "" {
				inv.code(c)
			} else if inv.HasStdin {
				inv.code(inv.Stdin) // e alone runs the pattern space: the input lines
			}
			i = end
		case 's', 'y':
			if i >= len(s) {
				return
			}
			d := s[i]
			j := sedDelimited(s, i, d)
			re := s[i+1 : min(j, len(s))]
			k := sedDelimited(s, j, d)
			if j >= len(s) || k >= len(s) {
				return // unterminated
			}
			repl := s[j+1 : min(k, len(s))]
			i = k + 1
			if cmd == 'y' {
				continue
			}
			flagsEnd := i
			for flagsEnd < len(s) && strings.IndexByte(";\n}#w", s[flagsEnd]) < 0 {
				flagsEnd++
			}
			flags := s[i:flagsEnd]
			i = flagsEnd
			if i < len(s) && s[i] == 'w' {
				end := lineEnd(s, i+1)
				if f := strings.TrimSpace(s[i+1 : end]); f != "" {
					inv.Writes = append(inv.Writes, f)
				}
				i = end
			}
			if strings.IndexByte(flags, 'e') >= 0 {
				inv.sedExec(re, repl, flags, d, extended)
			}
		}
	}
}

// sedExec records the command s/RE/REPL/e runs: the input lines with the
// substitution applied when the input is visible and RE is understood,
// else the replacement alone (& and \N unknown).
func (inv *Invocation) sedExec(re, repl, flags string, d byte, extended bool) {
	if inv.HasStdin {
		if rx, err := regexp.Compile(sedRegexp(re, d, extended, strings.ContainsAny(flags, "iI"))); err == nil {
			var out []string
			for l := range strings.SplitSeq(strings.TrimSuffix(inv.Stdin, "\n"), "\n") {
				r := sedReplacement(repl, d, true)
				if strings.IndexByte(flags, 'g') >= 0 {
					l = rx.ReplaceAllString(l, r)
				} else if m := rx.FindStringSubmatchIndex(l); m != nil {
					l = l[:m[0]] + string(rx.ExpandString(nil, r, l, m)) + l[m[1]:]
				}
				out = append(out, l)
			}
			inv.code(strings.Join(out, "\n"))
			return
		}
	}
	inv.code(sedReplacement(repl, d, false))
}

// sedDelimited returns the index of the delimiter d closing the part
// that starts after s[i].
func sedDelimited(s string, i int, d byte) int {
	j := i + 1
	for j < len(s) && s[j] != d {
		if s[j] == '\\' {
			j++
		} else if s[j] == '\n' {
			break
		}
		j++
	}
	return j
}

func lineEnd(s string, i int) int {
	if j := strings.IndexByte(s[min(i, len(s)):], '\n'); j >= 0 {
		return i + j
	}
	return len(s)
}

// sedRegexp translates a sed regular expression to Go's syntax.
func sedRegexp(re string, d byte, extended, fold bool) string {
	var b strings.Builder
	if fold {
		b.WriteString("(?i)")
	}
	for i := 0; i < len(re); i++ {
		c := re[i]
		if c == '\\' && i+1 < len(re) {
			i++
			e := re[i]
			switch {
			case e == d:
				b.WriteString(regexp.QuoteMeta(string(e)))
			case !extended && strings.IndexByte("(){}+?|", e) >= 0:
				b.WriteByte(e)
			case e == 'n':
				b.WriteString(`\n`)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
			continue
		}
		if !extended && strings.IndexByte("(){}+?|", c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// sedReplacement translates a replacement: & and \N are the match and
// its groups (${0}, ${N} for Go, Unknown when the input is not known),
// \n a newline, \d the delimiter.
func sedReplacement(repl string, d byte, forGo bool) string {
	var b strings.Builder
	for i := 0; i < len(repl); i++ {
		c := repl[i]
		switch {
		case c == '&':
			if forGo {
				b.WriteString("${0}")
			} else {
				b.WriteByte(Unknown)
			}
		case c == '\\' && i+1 < len(repl):
			i++
			e := repl[i]
			switch {
			case e >= '0' && e <= '9':
				if forGo {
					b.WriteString("${" + string(e) + "}")
				} else {
					b.WriteByte(Unknown)
				}
			case e == 'n':
				b.WriteByte('\n')
			case e == 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(e)
			}
		case c == '$' && forGo:
			b.WriteString("$$")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// ---------------------------------------------------------------------
// ed, ex and vim

// ed reads ed's commands from its standard input.
func (inv *Invocation) ed(args []string) {
	p := ParseArgs(args, "p", "prompt")
	file := ""
	if len(p.Ops) > 0 {
		file = p.Ops[0]
	}
	if !inv.HasStdin {
		return
	}
	for l := range strings.SplitSeq(inv.Stdin, "\n") {
		inv.exCommand(l, file, true)
	}
}

// vim reads ex commands given by -c, +, --cmd, and standard input in ex
// mode (ex, vim -e, vim -es).
func (inv *Invocation) vim(name string, args []string) {
	var cmds []string
	exMode := name == "ex"
	file := ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		val := func() string {
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		switch {
		case a == "--cmd":
			cmds = append(cmds, val())
		case strings.HasPrefix(a, "+") && len(a) > 1:
			cmds = append(cmds, a[1:])
		case a == "--":
			if i+1 < len(args) && file == "" {
				file = args[i+1]
			}
			i = len(args)
		case strings.HasPrefix(a, "--"):
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// A cluster of one-letter options: -c, -S and the others that
			// take a value take the next argument; -e, -E (and -s in ex
			// mode) read commands from standard input.
			for k := 1; k < len(a); k++ {
				switch a[k] {
				case 'e', 'E':
					exMode = true
				case 's':
					if !exMode && name != "ex" {
						val() // -s {scriptin}: normal-mode keys
					}
				case 'c':
					cmds = append(cmds, val())
				case 'S':
					if src, ok := inv.Files[val()]; ok {
						cmds = append(cmds, strings.Split(src, "\n")...)
					}
				case 'u', 'U', 'i', 'T', 'w', 'W', 't':
					val()
				}
			}
		default:
			if file == "" {
				file = a
			}
		}
	}
	if exMode && inv.HasStdin {
		cmds = append(cmds, strings.Split(inv.Stdin, "\n")...)
	}
	for _, c := range cmds[:min(len(cmds), 256)] {
		inv.exCommand(c, file, false)
	}
}

// exRange matches a leading line range of an ed or ex command.
var exRange = regexp.MustCompile(`^[\s:]*(?:(?:[0-9]+|[.$%]|'[a-z<>]|/(?:[^/\\]|\\.)*/|\?(?:[^?\\]|\\.)*\?)(?:\s*[-+][0-9]*)*\s*[,;]?\s*)*`)

// exWrites are the ex commands that write the buffer to a file (the
// file being edited when no name is given).
var exWrites = map[string]bool{
	"w": true, "write": true, "wq": true, "x": true, "xit": true, "exit": true, "wa": true, "wall": true,
	"wqa": true, "wqall": true, "xa": true, "xall": true, "up": true, "update": true, "sav": true, "saveas": true,
	"W": true, "wn": true, "wnext": true,
}

// exCommand records what one ed or ex command line runs and writes.
func (inv *Invocation) exCommand(line, file string, ed bool) {
	for n := 0; n < 16; n++ {
		line = exRange.ReplaceAllString(line, "")
		line = strings.TrimLeft(line, " \t")
		for _, mod := range []string{"silent!", "silent", "sil!", "sil", "exe ", "execute ", "keepalt ", "noautocmd "} {
			if strings.HasPrefix(line, mod) {
				line = strings.TrimLeft(line[len(mod):], " \t")
				if mod == "exe " || mod == "execute " {
					line = strings.Trim(line, `"'`)
				}
			}
		}
		if line == "" {
			return
		}
		if line[0] == '!' {
			inv.code(line[1:]) // the rest of the line, | included
			return
		}
		name := line
		for k := 0; k < len(line); k++ {
			if !(line[k] >= 'a' && line[k] <= 'z' || line[k] >= 'A' && line[k] <= 'Z') {
				name = line[:k]
				break
			}
		}
		rest := strings.TrimLeft(strings.TrimPrefix(line[len(name):], "!"), " \t")
		next := ""
		if !ed {
			if k := strings.IndexByte(rest, '|'); k >= 0 && !strings.HasPrefix(rest, "!") {
				rest, next = rest[:k], rest[k+1:]
			}
		}
		switch {
		case strings.HasPrefix(rest, "!") && (exWrites[name] || name == "r" || name == "read" || name == "e" ||
			name == "edit" || name == "E"):
			inv.code(rest[1:]) // w !cmd, r !cmd, e !cmd
			return
		case exWrites[name]:
			target := strings.TrimSpace(strings.TrimPrefix(rest, ">>"))
			if target == "" {
				target = file
			}
			if target != "" {
				inv.Writes = append(inv.Writes, target)
			}
		case name == "call" || name == "cal" || name == "echo" || name == "let":
			for _, m := range vimSystem.FindAllStringSubmatch(rest, 8) {
				inv.code(unquoteLiteral(m[1]))
			}
		case !ed && (name == "py" || name == "python" || name == "py3" || name == "python3" || name == "pyx" || name == "pythonx"):
			inv.Execs = append(inv.Execs, Exec{Argv: []string{"python3", "-c", rest}, Dir: inv.Dir})
		case !ed && (name == "perl" || name == "ruby" || name == "lua"):
			inv.Execs = append(inv.Execs, Exec{Argv: []string{name, "-e", rest}, Dir: inv.Dir})
		case !ed && (name == "ter" || name == "terminal"):
			inv.code(rest)
		}
		if next == "" {
			return
		}
		line = next
	}
}

// vimSystem finds system('…') and systemlist("…") in vim script.
var vimSystem = regexp.MustCompile(`\b(?:system|systemlist|job_start|jobstart|term_start|termopen)\s*\(\s*(\[?\s*'[^']*'|\[?\s*"(?:[^"\\]|\\.)*")`)

// unquoteLiteral removes a literal's quotes (and a list's bracket).
func unquoteLiteral(s string) string {
	s = strings.TrimLeft(s, "[ \t")
	if len(s) >= 2 {
		return strings.ReplaceAll(s[1:len(s)-1], `\"`, `"`)
	}
	return s
}

// ---------------------------------------------------------------------
// git

// gitShellKeys are configuration keys whose value git runs through the
// shell (with a leading ! for aliases and credential helpers).
var gitShellKeys = regexp.MustCompile(`(?i)^(alias\.[^=]+|core\.(pager|editor|sshcommand|fsmonitor|askpass|hookspath)|sequence\.editor|pager\.[^=]+|diff\.external|diff\.[^=]+\.(textconv|command)|merge\.[^=]+\.driver|mergetool\.[^=]+\.cmd|difftool\.[^=]+\.cmd|filter\.[^=]+\.(clean|smudge|process)|credential(\.[^=]+)?\.helper|gpg\.(program|[^=]+\.program)|uploadpack\.packobjectshook|ssh\.variant|core\.gitproxy|remote\.[^=]+\.(receivepack|uploadpack|proxy)|sendemail\.(tocmd|cccmd|sendmailcmd))$`)

// git records the commands git runs: aliases (git -c alias.x='!cmd' x),
// configuration values it runs (core.pager, core.sshCommand …), and
// subcommands that run commands (rebase --exec, bisect run, submodule
// foreach, filter-branch filters, ext:: transports, --upload-pack).
func (inv *Invocation) git(args []string, depth int) {
	aliases := map[string]string{}
	for k, v := range inv.GitAliases {
		aliases[k] = v
	}
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-c" && i+1 < len(args):
			i++
			inv.gitConfig(args[i], aliases)
		case strings.HasPrefix(a, "-c") && len(a) > 2:
			inv.gitConfig(a[2:], aliases)
		case a == "-C" || a == "--git-dir" || a == "--work-tree" || a == "--namespace" || a == "--config-env" ||
			a == "--super-prefix" || a == "--attr-source" || a == "--list-cmds":
			if a == "-C" && i+1 < len(args) {
				inv.Dir = ResolveDir(args[i+1], inv.Dir)
			}
			i++
		case strings.HasPrefix(a, "-"):
		default:
			goto sub
		}
	}
	return
sub:
	sub, rest := args[i], args[i+1:]
	if v, ok := aliases[strings.ToLower(sub)]; ok {
		if cmd, ok := strings.CutPrefix(v, "!"); ok {
			for _, r := range rest {
				cmd += " " + Quote(r)
			}
			inv.code(cmd)
		} else if depth < 4 {
			var argv []string
			for _, w := range Words(v) {
				argv = append(argv, w.Value)
			}
			inv.git(append(argv, rest...), depth+1)
		}
		return
	}
	for _, r := range rest {
		if u, ok := strings.CutPrefix(r, "ext::"); ok && len(inv.Execs) < maxFound {
			inv.Execs = append(inv.Execs, Exec{Argv: extArgv(u), Dir: inv.Dir})
		}
	}
	switch sub {
	case "config":
		p := ParseArgs(rest, "f", "file", "blob", "default", "type", "comment", "value")
		ops := p.Ops
		if len(ops) > 0 && (ops[0] == "set" || ops[0] == "--add") {
			ops = ops[1:]
		}
		if len(ops) >= 2 {
			inv.gitConfig(ops[0]+"="+ops[1], aliases)
		}
	case "rebase":
		p := ParseArgs(rest, "xsXS", "exec", "strategy", "strategy-option", "onto", "gpg-sign")
		for _, c := range p.Values("x", "exec") {
			inv.code(c)
		}
	case "bisect":
		if len(rest) > 1 && rest[0] == "run" && len(inv.Execs) < maxFound {
			inv.Execs = append(inv.Execs, Exec{Argv: rest[1:], Dir: inv.Dir})
		}
	case "submodule":
		if len(rest) > 0 && rest[0] == "foreach" {
			p := ParseArgs(rest[1:], "")
			inv.code(strings.Join(p.Ops, " "))
		}
	case "filter-branch":
		p := ParseArgs(rest, "d", "env-filter", "tree-filter", "index-filter", "parent-filter", "msg-filter",
			"commit-filter", "tag-name-filter", "subdirectory-filter", "original", "state-branch", "setup")
		for _, c := range p.Values("env-filter", "tree-filter", "index-filter", "parent-filter", "msg-filter",
			"commit-filter", "tag-name-filter", "setup") {
			inv.code(c)
		}
	case "difftool", "mergetool":
		p := ParseArgs(rest, "xt", "extcmd", "tool")
		for _, c := range p.Values("x", "extcmd") {
			inv.code(c)
		}
	case "ls-remote", "clone", "fetch", "pull", "push", "archive", "send-pack", "fetch-pack":
		p := ParseArgs(rest, "uo", "upload-pack", "receive-pack", "exec", "origin", "branch", "depth", "reference",
			"config", "template", "separate-git-dir", "remote", "format", "output", "prefix", "server-option")
		for _, c := range p.Values("u", "upload-pack", "receive-pack", "exec") {
			inv.code(c)
		}
		for _, kv := range p.Values("config") {
			inv.gitConfig(kv, aliases)
		}
	}
}

// extArgv splits the command of git's ext:: transport: arguments are
// separated by spaces, "% " is a space within one and "%%" a percent.
func extArgv(s string) []string {
	var out []string
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '%' && i+1 < len(s) && (s[i+1] == ' ' || s[i+1] == '%'):
			i++
			b.WriteByte(s[i])
		case s[i] == ' ':
			if b.Len() > 0 {
				out = append(out, b.String())
				b.Reset()
			}
		default:
			b.WriteByte(s[i])
		}
	}
	if b.Len() > 0 {
		out = append(out, b.String())
	}
	return out
}

// GitAlias reports a git alias that git config defines (git config
// [--global] alias.NAME VALUE, git config set alias.NAME VALUE), for a
// reader to give later git commands as Context.GitAliases.
func GitAlias(name string, args []string) (alias, value string, ok bool) {
	if name != "git" {
		return "", "", false
	}
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		if args[i] == "-c" || args[i] == "-C" || args[i] == "--git-dir" || args[i] == "--work-tree" {
			i++
		}
		i++
	}
	if i >= len(args) || args[i] != "config" {
		return "", "", false
	}
	p := ParseArgs(args[i+1:], "f", "file", "blob", "default", "type", "comment", "value")
	ops := p.Ops
	if len(ops) > 0 && ops[0] == "set" {
		ops = ops[1:]
	}
	if len(ops) < 2 || len(ops[0]) < 7 || !strings.EqualFold(ops[0][:6], "alias.") {
		return "", "", false
	}
	return strings.ToLower(ops[0][6:]), ops[1], true
}

// gitConfig records a configuration value that git runs: an alias (its
// command is judged where it is defined, and where it is used with the
// arguments it is given) or a command-valued key.
func (inv *Invocation) gitConfig(kv string, aliases map[string]string) {
	key, val, _ := strings.Cut(kv, "=")
	if !gitShellKeys.MatchString(key) {
		return
	}
	lk := strings.ToLower(key)
	if name, ok := strings.CutPrefix(lk, "alias."); ok {
		aliases[name] = val
		if cmd, ok := strings.CutPrefix(val, "!"); ok {
			inv.code(cmd)
		}
		return
	}
	if lk == "core.hookspath" || lk == "core.fsmonitor" && (val == "true" || val == "false") {
		return
	}
	inv.code(strings.TrimPrefix(val, "!"))
}

// ---------------------------------------------------------------------
// tar

// tar records the commands GNU tar runs: --checkpoint-action=exec=CMD,
// --to-command, --use-compress-program (-I), --info-script (-F),
// --new-volume-script and --rsh-command.
func (inv *Invocation) tar(args []string) {
	withArg := "bCfFgHIKLNTVX"
	longs := map[string]bool{
		"checkpoint-action": true, "to-command": true, "use-compress-program": true, "info-script": true,
		"new-volume-script": true, "rsh-command": true,
	}
	run := func(opt, v string) {
		switch opt {
		case "checkpoint-action":
			if c, ok := strings.CutPrefix(v, "exec="); ok {
				inv.code(c)
			}
		case "I", "F", "to-command", "use-compress-program", "info-script", "new-volume-script", "rsh-command":
			inv.code(v)
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return
		case strings.HasPrefix(a, "--"):
			name, v, has := strings.Cut(a[2:], "=")
			if !has && longs[name] && i+1 < len(args) {
				i++
				v = args[i]
			}
			run(name, v)
		case len(a) > 1 && a[0] == '-':
			for k := 1; k < len(a); k++ {
				if strings.IndexByte(withArg, a[k]) < 0 {
					continue
				}
				v := a[k+1:]
				if v == "" && i+1 < len(args) {
					i++
					v = args[i]
				}
				run(string(a[k]), v)
				break
			}
		case i == 0:
			// Old-style options (tar cIf PROG x.tar): the letters that
			// take a value take the next arguments in order.
			n := i
			for k := 0; k < len(a); k++ {
				if strings.IndexByte(withArg, a[k]) >= 0 && n+1 < len(args) {
					n++
					run(string(a[k]), args[n])
				}
			}
			i = n
		}
	}
}

// ---------------------------------------------------------------------
// ssh, gdb, lldb, at, Tcl, tmux

// ssh records the commands ssh, scp and sftp run locally: ProxyCommand
// and LocalCommand (-o), and scp's or sftp's -S program.
func (inv *Invocation) ssh(name string, args []string) {
	p := ParseArgs(args, "BbcDEeFIiJLlmOoPpQRSWw")
	for _, o := range p.Values("o") {
		key, val, ok := strings.Cut(o, "=")
		if !ok {
			key, val, _ = strings.Cut(strings.TrimSpace(o), " ")
		}
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "proxycommand", "localcommand":
			inv.code(strings.TrimSpace(val))
		}
	}
	if name != "ssh" {
		if prog, ok := p.Value("S"); ok {
			inv.argvOf(prog, "host")
		}
	}
}

// gdb records what gdb's commands run: shell, !, pipe, python, and run
// or --args (the program with its arguments).
func (inv *Invocation) gdb(args []string) {
	var cmds []string
	prog := ""
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(args[i], "-")
		val := func() string {
			if k := strings.IndexByte(a, '='); k >= 0 {
				return a[k+1:]
			}
			if i+1 < len(args) {
				i++
				return args[i]
			}
			return ""
		}
		name, _, _ := strings.Cut(a, "=")
		switch {
		case !strings.HasPrefix(args[i], "-"):
			if prog == "" {
				prog = args[i]
			}
		case name == "ex" || name == "-ex" || name == "eval-command" || name == "-eval-command" ||
			name == "iex" || name == "-iex" || name == "init-eval-command" || name == "-init-eval-command":
			cmds = append(cmds, val())
		case name == "x" || name == "command" || name == "-command" || name == "ix" || name == "init-command":
			if src, ok := inv.Files[val()]; ok {
				cmds = append(cmds, strings.Split(src, "\n")...)
			}
		case name == "args" || name == "-args":
			if i+1 < len(args) && len(inv.Execs) < maxFound {
				inv.Execs = append(inv.Execs, Exec{Argv: args[i+1:], Dir: inv.Dir})
				prog = ""
			}
			i = len(args)
		case name == "p" || name == "pid" || name == "c" || name == "core" || name == "cd" || name == "d" ||
			name == "directory" || name == "s" || name == "symbols" || name == "e" || name == "exec" || name == "se" ||
			name == "b" || name == "tty" || name == "data-directory" || name == "D" || name == "l" || name == "i" ||
			name == "interpreter":
			if !strings.Contains(a, "=") {
				val()
			}
		}
	}
	if inv.HasStdin {
		cmds = append(cmds, strings.Split(inv.Stdin, "\n")...)
	}
	for _, c := range cmds[:min(len(cmds), 256)] {
		c = strings.TrimSpace(c)
		word, rest, _ := strings.Cut(c, " ")
		rest = strings.TrimSpace(rest)
		switch {
		case strings.HasPrefix(c, "!"):
			inv.code(c[1:])
		case word == "shell":
			inv.code(rest)
		case word == "pipe" || strings.HasPrefix(c, "|"):
			body := strings.TrimPrefix(strings.TrimPrefix(c, "pipe"), "|")
			if _, sh, ok := strings.Cut(body, "|"); ok {
				inv.code(sh)
			}
		case word == "python" || word == "py" || word == "python-interactive" || word == "pi":
			if rest != "" {
				inv.Execs = append(inv.Execs, Exec{Argv: []string{"python3", "-c", rest}, Dir: inv.Dir})
			}
		case (word == "run" || word == "r" || word == "start" || word == "starti") && prog != "":
			inv.code(Quote(prog) + " " + rest)
		default:
			// call system("…"), print system("…"): the inferior runs it.
			for _, m := range vimSystem.FindAllStringSubmatch(c, 4) {
				inv.code(unquoteLiteral(m[1]))
			}
		}
	}
}

// lldb records what lldb's commands run: platform shell, script (Python)
// and the program after -- when it is run.
func (inv *Invocation) lldb(args []string) {
	var cmds []string
	var prog []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			prog = args[i+1:]
			i = len(args)
		case (a == "-o" || a == "--one-line" || a == "-O" || a == "--one-line-before-file" || a == "-k" ||
			a == "--one-line-on-crash") && i+1 < len(args):
			i++
			cmds = append(cmds, args[i])
		case (a == "-s" || a == "--source") && i+1 < len(args):
			i++
			if src, ok := inv.Files[args[i]]; ok {
				cmds = append(cmds, strings.Split(src, "\n")...)
			}
		}
	}
	for _, c := range cmds[:min(len(cmds), 256)] {
		c = strings.TrimSpace(c)
		switch {
		case strings.HasPrefix(c, "platform shell "):
			inv.code(strings.TrimPrefix(c, "platform shell "))
		case strings.HasPrefix(c, "script "):
			inv.Execs = append(inv.Execs, Exec{Argv: []string{"python3", "-c", strings.TrimPrefix(c, "script ")}, Dir: inv.Dir})
		case (c == "run" || c == "r" || strings.HasPrefix(c, "process launch")) && len(prog) > 0:
			inv.Execs = append(inv.Execs, Exec{Argv: prog, Dir: inv.Dir})
		}
	}
}

// at records the job at or batch schedules: its standard input or -f
// file, run by sh.
func (inv *Invocation) at(name string, args []string) {
	p := ParseArgs(args, "qft")
	if p.Has('l') || p.Has('d') || p.Has('r') || p.Has('c') || p.Has('V') && len(p.Ops) == 0 {
		return
	}
	if f, ok := p.Value("f"); ok && !isStdinFile(f) {
		if src, ok := inv.Files[f]; ok {
			inv.Scripts = append(inv.Scripts, Nested{Src: src})
		}
		return
	}
	if inv.HasStdin {
		inv.Scripts = append(inv.Scripts, Nested{Src: inv.Stdin})
	}
}

// tcl records what a Tcl or expect program runs: spawn and exec (by
// argument vector), system (through the shell), open "|cmd".
func (inv *Invocation) tcl(name string, args []string) {
	var progs []string
	script := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case name == "expect" && a == "-c" && i+1 < len(args):
			i++
			progs = append(progs, args[i])
		case name == "expect" && (a == "-f" || a == "-b") && i+1 < len(args):
			i++
			script = true
			if src, ok := inv.Files[args[i]]; ok {
				progs = append(progs, src)
			}
		case name == "expect" && a == "-D" && i+1 < len(args):
			i++
		case a == "--" || !strings.HasPrefix(a, "-"):
			if a == "--" {
				i++
			}
			if i < len(args) {
				script = true
				if src, ok := inv.Files[args[i]]; ok {
					progs = append(progs, src)
				}
			}
			i = len(args)
		}
	}
	if !script && len(progs) == 0 && inv.HasStdin {
		progs = append(progs, inv.Stdin)
	}
	for _, p := range progs {
		inv.tclProgram(p)
	}
}

// tclCommand finds the commands of Tcl that run programs, at the start
// of a command (after a newline, ;, [ or {).
var tclCommand = regexp.MustCompile(`(?:^|[\n;\[{]|\bthen\b|\belse\b)\s*(spawn|exec|system|open)\s`)

func (inv *Invocation) tclProgram(prog string) {
	for _, m := range tclCommand.FindAllStringSubmatchIndex(prog, maxFound) {
		cmd := prog[m[2]:m[3]]
		words := tclWords(prog[m[1]:])
		switch cmd {
		case "system":
			inv.code(strings.Join(words, " "))
		case "open":
			if len(words) > 0 && strings.HasPrefix(words[0], "|") {
				inv.argvOf(words[0][1:])
			}
		default:
			for len(words) > 0 && strings.HasPrefix(words[0], "-") {
				if words[0] == "--" {
					words = words[1:]
					break
				}
				if words[0] == "-open" || words[0] == "-leaveopen" || words[0] == "-ignore" {
					words = words[1:]
				}
				words = words[1:]
			}
			for k, w := range words {
				if w == "|" || w == "&" || strings.HasPrefix(w, "<") || strings.HasPrefix(w, ">") || strings.HasPrefix(w, "2>") {
					words = words[:k]
					break
				}
			}
			if len(words) > 0 && len(inv.Execs) < maxFound {
				inv.Execs = append(inv.Execs, Exec{Argv: words, Dir: inv.Dir})
			}
		}
	}
}

// tclWords splits one Tcl command into words: {braced} text is literal,
// "quoted" and bare words have their backslash escapes resolved, and a
// [command substitution] or $variable is Unknown. It ends at a newline,
// ; or ] outside words.
func tclWords(s string) []string {
	var out []string
	i := 0
	for len(out) < 64 {
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\\' && i+1 < len(s) && s[i+1] == '\n') {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		if i >= len(s) || s[i] == '\n' || s[i] == ';' || s[i] == ']' || s[i] == '}' {
			return out
		}
		var b strings.Builder
		switch s[i] {
		case '{':
			depth, j := 0, i
			for ; j < len(s); j++ {
				if s[j] == '\\' {
					j++
					continue
				}
				if s[j] == '{' {
					depth++
				} else if s[j] == '}' {
					if depth--; depth == 0 {
						break
					}
				}
			}
			b.WriteString(s[i+1 : min(j, len(s))])
			i = j + 1
		default:
			quoted := s[i] == '"'
			if quoted {
				i++
			}
			for i < len(s) {
				c := s[i]
				if quoted && c == '"' {
					i++
					break
				}
				if !quoted && (c == ' ' || c == '\t' || c == '\n' || c == ';' || c == ']') {
					break
				}
				switch c {
				case '\\':
					if i+1 < len(s) {
						i = formatEscape(&b, s, i+1)
						continue
					}
				case '[':
					b.WriteByte(Unknown)
					i += matchingClose(s[i:])
					continue
				case '$':
					b.WriteByte(Unknown)
					i++
					for i < len(s) && (isNameByte(s[i]) || s[i] == ':') {
						i++
					}
					continue
				}
				b.WriteByte(c)
				i++
			}
		}
		out = append(out, b.String())
	}
	return out
}

// tmuxShellCommands are tmux's commands that run a shell command given
// after their options, with the options that take a value.
var tmuxShellCommands = map[string]string{
	"new-session": "cefFnstxy", "new": "cefFnstxy", "new-window": "ceFnt", "neww": "ceFnt",
	"split-window": "celtF", "splitw": "celtF", "respawn-pane": "cet", "respawnp": "cet",
	"respawn-window": "cet", "respawnw": "cet", "display-popup": "bcdehsStTwxy", "popup": "bcdehsStTwxy",
}

// tmux records the shell commands tmux runs: new-session, new-window,
// split-window, respawn-pane, run-shell, display-popup and if-shell take
// one, send-keys types keys into a shell (its words, Enter dropped).
func (inv *Invocation) tmux(args []string) {
	p, rest := ParseOptions(args, "cfLST")
	if c, ok := p.Value("c"); ok {
		inv.code(c)
	}
	for guard := 0; len(rest) > 0 && guard < 16; guard++ {
		sub, more := rest[0], rest[1:]
		end := len(more)
		for k, w := range more {
			if w == ";" || w == `\;` {
				end = k
				break
			}
		}
		cmdArgs := more[:end]
		if withArg, ok := tmuxShellCommands[sub]; ok {
			_, c := ParseOptions(cmdArgs, withArg)
			if len(c) > 0 {
				inv.code(strings.Join(c, " "))
			}
		}
		switch sub {
		case "run-shell", "run", "if-shell", "if":
			_, c := ParseOptions(cmdArgs, "dt")
			if len(c) > 0 {
				inv.code(c[0])
			}
		case "send-keys", "send":
			_, keys := ParseOptions(cmdArgs, "Nt")
			var typed []string
			for _, k := range keys {
				switch k {
				case "Enter", "C-m", "KPEnter":
					typed = append(typed, "\n")
				default:
					typed = append(typed, k)
				}
			}
			inv.code(strings.Join(typed, " "))
		}
		if end >= len(more) {
			return
		}
		rest = more[end+1:]
	}
}
