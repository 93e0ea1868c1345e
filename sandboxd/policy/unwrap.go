package policy

import (
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/vera-run/vera/internal/shell"
)

// This file finds what a command runs besides itself — its wrappers are
// removed by shell.Unwrap — where the policy needs more than internal/shell
// offers: a command word of unknown value, find's -exec and -delete, and
// the commands an interpreter one-liner runs; plus the path helpers the
// rules use.

// ---------------------------------------------------------------------
// A command word of unknown value: $(cat f) -rf /, ${X} -rf /, $SUDO rm -rf /.

// unknownHead judges a command whose name is not known statically. Two
// readings are decidable without blocking ordinary commands:
//   - its arguments are rm's destructive ones (a recursive and a force
//     flag, or --no-preserve-root, and a target rm_root protects): no
//     ordinary program is called with "-rf /", so the word may well be rm;
//   - its arguments are themselves a command rm_root denies ($SUDO rm -rf
//     /): the unknown word may be empty or a wrapper.
func (a *analyser) unknownHead(inv *invocation, raw string) *Decision {
	u := shell.Unwrap(inv.args, shell.Context{Dir: inv.cwd})
	alt := &invocation{name: u.Name, args: u.Args, cwd: u.Dir}
	if why := checkRmRoot(alt); why != "" {
		return denied(ruleRmRoot, "a command word of unknown value (it may be empty or a wrapper) before "+why, raw)
	}
	p := shell.ParseArgs(inv.args, "")
	recursive := p.Has('r') || p.Has('R') || p.HasLongAbbrev("recursive", 3)
	force := p.Has('f') || p.HasLongAbbrev("force", 3)
	if (recursive && force) || p.HasLongAbbrev("no-preserve-root", 3) {
		if t := protectedTarget(inv, p.Ops, true); t != "" {
			return denied(ruleRmRoot, "a command word of unknown value (from a substitution or variable) given rm's arguments "+
				strings.Join(inv.args, " ")+": it may be rm, recursively removing "+t, raw)
		}
	}
	return nil
}

// ---------------------------------------------------------------------
// find: -delete and -exec.

// findPlan is what a find command visits and does.
type findPlan struct {
	starts  []string // starting points as written
	absSt   []string // and resolved ("" if unknown)
	narrow  bool     // a test selects some files only (-name x, -mtime, …)
	delete  bool     // -delete
	or      bool     // the expression has -o: tests are alternatives
	names   []findTest
	paths   []findTest
	types   []string
	regex   bool
	maxD    int // -maxdepth, -1 if none
	minD    int
	execDir bool
}

type findTest struct {
	pat      string
	fold     bool // -iname, -ipath
	negated  bool // ! or -not before it
	wildcard bool // * or similar: matches everything
}

// findArgTests are find's primaries that take one argument and select
// files; findArgOthers take one argument and do not.
var (
	findArgTests = map[string]bool{
		"-newer": true, "-mtime": true, "-mmin": true, "-atime": true, "-amin": true, "-ctime": true, "-cmin": true,
		"-size": true, "-user": true, "-group": true, "-uid": true, "-gid": true, "-perm": true, "-inum": true,
		"-links": true, "-samefile": true, "-used": true, "-lname": true, "-ilname": true, "-fstype": true,
		"-context": true, "-newerct": true, "-newermt": true, "-newerat": true, "-newercm": true, "-newermm": true,
	}
	findArgOthers = map[string]bool{
		"-printf": true, "-fprint": true, "-fprint0": true, "-fls": true, "-regextype": true, "-files0-from": true,
	}
	findNoArgOthers = map[string]bool{
		"-print": true, "-print0": true, "-ls": true, "-prune": true, "-quit": true, "-depth": true, "-d": true,
		"-xdev": true, "-mount": true, "-follow": true, "-noleaf": true, "-ignore_readdir_race": true,
		"-noignore_readdir_race": true, "-daystart": true, "-warn": true, "-nowarn": true, "-true": true,
		"-a": true, "-and": true, "(": true, ")": true, ",": true, "-delete": true,
	}
)

// parseFind reads find's starting points and expression.
func parseFind(inv *invocation) findPlan {
	f := findPlan{maxD: -1}
	args := inv.args
	i := 0
	for i < len(args) && (args[i] == "-H" || args[i] == "-L" || args[i] == "-P" || strings.HasPrefix(args[i], "-O") || args[i] == "-D") {
		if args[i] == "-D" {
			i++
		}
		i++
	}
	for ; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") || a == "(" || a == "!" || a == "," {
			break
		}
		f.starts = append(f.starts, a)
		abs, _ := inv.abs(a)
		f.absSt = append(f.absSt, abs)
	}
	if len(f.starts) == 0 {
		f.starts, f.absSt = []string{"."}, []string{""}
		if abs, ok := inv.abs("."); ok {
			f.absSt[0] = abs
		}
	}
	neg := false
	for ; i < len(args); i++ {
		a := args[i]
		val := ""
		if i+1 < len(args) {
			val = args[i+1]
		}
		switch {
		case a == "!" || a == "-not":
			neg = !neg
			continue
		case a == "-o" || a == "-or":
			f.or = true
		case a == "-delete":
			f.delete = true
		case a == "-name" || a == "-iname":
			t := findTest{pat: val, fold: a == "-iname", negated: neg, wildcard: wildcardOnly(val)}
			f.names = append(f.names, t)
			f.narrow = f.narrow || (!t.wildcard && !neg)
			i++
		case a == "-path" || a == "-ipath" || a == "-wholename" || a == "-iwholename":
			t := findTest{pat: val, fold: a[1] == 'i', negated: neg, wildcard: strings.Trim(val, "*") == ""}
			f.paths = append(f.paths, t)
			f.narrow = f.narrow || (!t.wildcard && !neg)
			i++
		case a == "-regex" || a == "-iregex":
			f.regex = true
			f.narrow = f.narrow || !neg
			i++
		case a == "-type" || a == "-xtype":
			if !neg {
				f.types = append(f.types, val)
			}
			i++
		case a == "-maxdepth" || a == "-mindepth":
			n, err := strconv.Atoi(val)
			if err == nil {
				if a == "-maxdepth" {
					f.maxD = n
				} else {
					f.minD = n
				}
			}
			i++
		case a == "-exec" || a == "-execdir" || a == "-ok" || a == "-okdir":
			f.execDir = f.execDir || strings.HasSuffix(a, "dir")
			for i+1 < len(args) && args[i+1] != ";" && args[i+1] != "+" {
				i++
			}
			i++
		case findArgTests[a]:
			f.narrow = f.narrow || !neg
			i++
		case findArgOthers[a]:
			i++
		case findNoArgOthers[a]:
		case strings.HasPrefix(a, "-"):
			// Another test (-empty, -readable, -newerXY …): it selects.
			f.narrow = f.narrow || !neg
		}
		neg = false
	}
	return f
}

// wipes returns the first starting point that rm_root protects, when no
// test narrows what find selects.
func (f *findPlan) wipes() string {
	if f.narrow || f.maxD == 0 && f.minD > 0 {
		return ""
	}
	for i, abs := range f.absSt {
		if abs != "" && wipesProtected(abs, true) {
			if abs != f.starts[i] {
				return fmt.Sprintf("%q (%s)", f.starts[i], abs)
			}
			return fmt.Sprintf("%q", abs)
		}
	}
	return ""
}

// mayMatchNotes reports whether the find may select /work/notes.md: a
// starting point contains it, within -maxdepth, and its -name, -path and
// -type tests may accept it (-regex is not evaluated: it counts as not
// matching).
func (f *findPlan) mayMatchNotes() bool {
	if f.regex {
		return false
	}
	if len(f.types) > 0 {
		ok := false
		for _, t := range f.types {
			ok = ok || strings.ContainsAny(t, "fl")
		}
		if !ok {
			return false
		}
	}
	for i, abs := range f.absSt {
		if abs == "" || (abs != NotesPath && abs != "/" && !strings.HasPrefix(NotesPath, abs+"/")) {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(NotesPath, abs), "/")
		depth := 0
		if rel != "" {
			depth = strings.Count(rel, "/") + 1
		}
		if (f.maxD >= 0 && depth > f.maxD) || depth < f.minD {
			continue
		}
		shown := f.starts[i]
		if rel != "" {
			shown = strings.TrimSuffix(shown, "/") + "/" + rel
		}
		if f.accepts(path.Base(NotesPath), shown) {
			return true
		}
	}
	return false
}

// accepts evaluates the name and path tests on one file: all must hold,
// or one of them with -o.
func (f *findPlan) accepts(base, shown string) bool {
	var results []bool
	for _, t := range f.names {
		results = append(results, t.holds(base, false))
	}
	for _, t := range f.paths {
		results = append(results, t.holds(shown, true))
	}
	if len(results) == 0 {
		return true
	}
	any, all := false, true
	for _, r := range results {
		any = any || r
		all = all && r
	}
	if f.or {
		return any
	}
	return all
}

// holds matches a find pattern (-path: * also matches /).
func (t findTest) holds(s string, slashes bool) bool {
	pat := t.pat
	if t.fold {
		pat, s = strings.ToLower(pat), strings.ToLower(s)
	}
	var m bool
	if slashes {
		m = globRegexp(pat).MatchString(s)
	} else {
		m = globMatch(pat, s)
	}
	return m != t.negated
}

// globRegexp compiles a find -path pattern (where * and ? match / too).
func globRegexp(pat string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(pat[i+1:], ']')
			if j < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := pat[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		case '\\':
			if i+1 < len(pat) {
				i++
				b.WriteString(regexp.QuoteMeta(pat[i : i+1]))
			}
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return regexp.MustCompile(`^\x00never$`)
	}
	return re
}

// findExecs returns the commands find runs with -exec/-execdir, with {}
// replaced by what find may pass: every starting point when no test
// narrows the selection, /work/notes.md when it may be selected, and an
// unknown value otherwise.
func findExecs(inv *invocation, execs []shell.Exec) []shell.Exec {
	f := parseFind(inv)
	var cands []string
	if !f.narrow {
		for _, abs := range f.absSt {
			if abs != "" {
				cands = append(cands, abs)
			}
		}
	}
	if f.mayMatchNotes() {
		cands = append(cands, NotesPath)
	}
	if len(cands) == 0 {
		cands = []string{string(shell.Unknown)}
	}
	var out []shell.Exec
	for _, e := range execs {
		for _, c := range cands[:min(len(cands), 8)] {
			argv := make([]string, len(e.Argv))
			for i, w := range e.Argv {
				argv[i] = strings.ReplaceAll(w, "{}", c)
			}
			out = append(out, shell.Exec{Argv: argv, Dir: e.Dir})
		}
	}
	return out
}

// ---------------------------------------------------------------------
// Interpreter one-liners: the commands they run (best effort).

// codeShellCalls are calls that run a shell command line (one string) or
// a program (a list, or several strings): os.system, subprocess.run,
// Perl/Ruby/PHP system and exec, Node's child_process. Python's exec is
// not one of them (it runs Python).
var codeShellCalls = regexp.MustCompile(`\b(system|popen|run|call|check_call|check_output|Popen|getoutput|getstatusoutput|spawn|spawnSync|execSync|execFile|execFileSync|shell_exec|passthru|proc_open|pcntl_exec|exec[lv]p?e?|spawn[lv]p?e?|capture2e?|capture3|popen2e?|popen3|exec)\b\s*(\()?\s*`)

// codeRecursiveDeletes are calls that remove a directory tree.
var codeRecursiveDeletes = regexp.MustCompile(`\b(rmtree|rm_rf|rm_r|remove_dir|remove_tree|removedirs|rmSync|rmdirSync|rimraf|deleteRecursively)\b\s*(\()?\s*`)

// codeBackticks are Perl/Ruby/PHP command substitutions.
var codeBackticks = regexp.MustCompile("`([^`]{1,1000})`|\\bqx\\s*[({/]([^)}/]{1,1000})[)}/]|%x[({]([^)}]{1,1000})[)}]")

// codeCommand is a command found in interpreter code.
type codeCommand struct {
	shell string   // a command line run through the shell
	argv  []string // or a program run directly
	what  string   // the call, for the reason
}

// codeCommands finds what interpreter code runs.
func codeCommands(lang, code string) []codeCommand {
	var out []codeCommand
	// Perl and Ruby call without parentheses (system "…"); elsewhere a
	// name followed by a string is more likely prose in a string.
	bare := lang == "perl" || lang == "ruby"
	for _, m := range codeShellCalls.FindAllStringSubmatchIndex(code, 32) {
		name := code[m[2]:m[3]]
		if (name == "exec" && lang == "python") || (m[4] < 0 && !bare) {
			continue
		}
		lits, list := callLiterals(code, m[1])
		switch {
		case len(lits) == 0:
		case list || len(lits) > 1:
			out = append(out, codeCommand{argv: lits, what: name})
		default:
			out = append(out, codeCommand{shell: lits[0], what: name})
		}
	}
	for _, m := range codeRecursiveDeletes.FindAllStringSubmatchIndex(code, 32) {
		if m[4] < 0 && !bare {
			continue
		}
		if lits, _ := callLiterals(code, m[1]); len(lits) > 0 {
			out = append(out, codeCommand{argv: []string{"rm", "-rf", "--", lits[0]}, what: code[m[2]:m[3]]})
		}
	}
	if lang != "python" && lang != "node" {
		for _, m := range codeBackticks.FindAllStringSubmatch(code, 32) {
			out = append(out, codeCommand{shell: m[1] + m[2] + m[3], what: "a command substitution"})
		}
	}
	return out
}

// callLiterals reads the string literals a call starts with at code[i:]:
// "a", 'b' or a list ["a", "b"] (list is then true).
func callLiterals(code string, i int) (lits []string, list bool) {
	skip := func() {
		for i < len(code) && (code[i] == ' ' || code[i] == '\t' || code[i] == '\n') {
			i++
		}
	}
	skip()
	if i < len(code) && (code[i] == '[' || code[i] == '(') {
		list = true
		i++
	}
	for len(lits) < 64 {
		skip()
		if i+1 < len(code) && strings.IndexByte("rRbBuUfF", code[i]) >= 0 && (code[i+1] == '\'' || code[i+1] == '"') {
			i++
		}
		if i >= len(code) || (code[i] != '\'' && code[i] != '"') {
			break
		}
		lit, end, ok := readLiteral(code, i)
		if !ok {
			break
		}
		lits = append(lits, lit)
		i = end
		skip()
		if i < len(code) && code[i] == ',' {
			i++
			skip()
			if !list && i < len(code) && code[i] == '[' {
				list = true
				i++
			}
			continue
		}
		break
	}
	return lits, list
}

// readLiteral reads a quoted string at code[i], resolving the common
// backslash escapes.
func readLiteral(code string, i int) (string, int, bool) {
	q := code[i]
	var b strings.Builder
	for j := i + 1; j < len(code); j++ {
		c := code[j]
		switch {
		case c == q:
			return b.String(), j + 1, true
		case c == '\\' && j+1 < len(code):
			j++
			switch code[j] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			default:
				b.WriteByte(code[j])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", len(code), false
}

// inlineCode analyses the commands an interpreter's inline code runs.
// Code whose command line does not parse as shell is skipped: the
// extraction is heuristic, and a false reading must not deny.
func (a *analyser) inlineCode(inv *invocation, raw string, sc *scope, depth int) *Decision {
	for _, code := range inv.inline.Codes {
		for _, cc := range codeCommands(inv.inline.Lang, code) {
			if depth+1 > maxDepth {
				return denied(ruleUnparseable, fmt.Sprintf("scripts nested more than %d levels deep (bash -c, eval, …) cannot be judged", maxDepth), raw)
			}
			var d *Decision
			if cc.argv != nil {
				d = a.run(cc.argv, nil, shell.Context{Dir: inv.cwd}, inv.cmd, raw, sc, depth+1)
			} else if s, err := shell.Parse(cc.shell); err == nil {
				child := sc.clone()
				child.cwd = inv.cwd
				d = a.script(s, child, depth+1)
			}
			if d != nil {
				if d.Rule != ruleUnparseable.ID {
					d.Reason = inv.inline.Lang + " code calls " + cc.what + ": " + d.Reason
				}
				return d
			}
		}
	}
	return nil
}

// ---------------------------------------------------------------------
// Decoders: code that is decoded or unpacked on its way to a shell.

var decompressors = map[string]bool{
	"gunzip": true, "zcat": true, "gzcat": true, "bzcat": true, "bunzip2": true, "xzcat": true, "unxz": true,
	"unlzma": true, "lzcat": true, "zstdcat": true, "unzstd": true, "lz4cat": true, "unlz4": true, "uncompress": true,
	"uudecode": true, "uudeview": true, "rev": true,
}

// decodeHints are words of interpreter code that decodes its output.
var decodeHints = []string{"b64decode", "decodebytes", "a85decode", "b32decode", "unhexlify", "fromhex", "atob(", "unpack(", "decode64", "base64_decode", "zlib", "gzip"}

// isDecoder reports whether a command decodes, decrypts or decompresses
// its input into its output.
func isDecoder(argv []string) bool {
	u := shell.Unwrap(argv, shell.Context{})
	args := u.Args
	switch u.Name {
	case "base64", "base32", "basenc", "gbase64":
		p := shell.ParseArgs(args, "w", "wrap")
		return p.Has('d') || p.Has('D') || p.HasLongAbbrev("decode", 3)
	case "xxd":
		for _, a := range args {
			if a == "-r" || a == "-revert" || (strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.Contains(a, "r") && len(a) <= 4) {
				return true
			}
		}
	case "openssl":
		for _, a := range args {
			if a == "-d" || a == "-decrypt" || a == "-decode" || a == "-base64" && len(args) > 0 && args[0] == "enc" {
				return true
			}
		}
	case "gzip", "bzip2", "xz", "zstd", "lzma", "lz4", "brotli", "compress", "pigz":
		p := shell.ParseArgs(args, "")
		return p.Has('d') || p.HasLong("decompress", "uncompress")
	case "":
		return false
	}
	if decompressors[u.Name] {
		return true
	}
	if in, ok := shell.InlineCode(u.Name, args, shell.Context{}); ok {
		for _, c := range in.Codes {
			lc := strings.ToLower(c)
			for _, h := range decodeHints {
				if strings.Contains(lc, h) {
					return true
				}
			}
		}
	}
	return false
}

// pipedFromDecoder reports whether a command of c's pipeline before it
// decodes (base64 -d | gunzip | sh: either one).
func pipedFromDecoder(c *shell.Cmd) bool {
	if c == nil || redirectsStdin(c) {
		return false
	}
	for p, n := c.PipeFrom, 0; p != nil && n < 32; p, n = p.PipeFrom, n+1 {
		if isDecoder(p.Args()) {
			return true
		}
	}
	return false
}

// substitutesDecoder reports whether a substitution in c's words (or the
// here-string or here-document fed to it) runs a decoder.
func substitutesDecoder(c *shell.Cmd) bool {
	if c == nil {
		return false
	}
	var walk func(subs []*shell.Script, depth int) bool
	walk = func(subs []*shell.Script, depth int) bool {
		if depth > 4 {
			return false
		}
		for _, s := range subs {
			for _, sc := range s.Cmds {
				if sc.Kind == shell.Simple && isDecoder(sc.Args()) {
					return true
				}
				if walk(sc.AllSubs(), depth+1) {
					return true
				}
			}
		}
		return false
	}
	return walk(c.AllSubs(), 0)
}

// ---------------------------------------------------------------------
// Paths.

func isNameChar(c byte) bool {
	return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') || (c >= '0' && c <= '9')
}

// names reports whether arg (relative to the working directory, maybe a
// glob or a brace list) is target or a pattern that may expand to it. A
// value that is not known (a variable set elsewhere, $(…)) never names
// it.
func (inv *invocation) names(arg, target string) bool {
	if strings.IndexByte(arg, '{') < 0 {
		return inv.namesOne(arg, target)
	}
	for _, alt := range braceExpand(arg) {
		if inv.namesOne(alt, target) {
			return true
		}
	}
	return false
}

// namesOne is names for a word without brace lists.
func (inv *invocation) namesOne(arg, target string) bool {
	if arg == "" {
		return false
	}
	if b := path.Base(arg); b != path.Base(target) && b != "." && b != ".." && b != "/" && !strings.ContainsAny(arg, "*?[(") {
		return false // another file name, and no pattern: not it
	}
	abs, ok := inv.abs(arg)
	if !ok {
		return false
	}
	pattern := shell.HasGlob(abs) || strings.IndexByte(abs, '(') >= 0 && extGlob.MatchString(abs)
	return abs == target || pattern && globMatch(abs, target)
}

// extGlob matches bash's extended glob groups: ?(…) *(…) +(…) @(…) !(…).
var extGlob = regexp.MustCompile(`[?*+@!]\([^()/]*\)`)

// globMatch reports whether the bash pattern pat matches name: * ? and
// […] (with ! or ^ negation) within one path component; an extended glob
// group may match anything within its component.
func globMatch(pat, name string) bool {
	if strings.Contains(pat, "(") {
		pat = extGlob.ReplaceAllString(pat, "*")
	}
	pat = strings.ReplaceAll(pat, "[!", "[^")
	m, err := path.Match(pat, name)
	return err == nil && m
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
