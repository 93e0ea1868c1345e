package policy

import (
	"maps"
	"path"
	"strconv"
	"strings"

	"github.com/vera-run/vera/internal/shell"
)

// scope is the shell state the analysis tracks through a command line:
// the working directory and the previous one, the directory stack,
// variables and arrays assigned literally, the positional parameters,
// and the functions and aliases defined so far.
type scope struct {
	cwd    string // "" if unknown
	oldpwd string // "" if unknown
	dirs   []string
	// dirsKnown is set while the pushd stack is known.
	dirsKnown bool
	vars      map[string]string
	arrays    map[string][]string
	// pos are the positional parameters ($1 …) when posKnown; arg0 is $0
	// ("" if unknown).
	pos      []string
	posKnown bool
	arg0     string
	funcs    map[string]*shell.Script
	aliases  map[string]string
	// gitAliases are git aliases defined by git config earlier.
	gitAliases map[string]string
	// stdin is what the script reads on standard input, when visible
	// (bash -c 'sh' <<< 'code': the inner sh reads it).
	stdin    string
	hasStdin bool
}

func (s *scope) clone() *scope {
	n := *s
	n.dirs = append([]string(nil), s.dirs...)
	if len(s.vars) > 0 {
		n.vars = maps.Clone(s.vars)
	}
	if len(s.arrays) > 0 {
		n.arrays = maps.Clone(s.arrays)
	}
	if len(s.funcs) > 0 {
		n.funcs = maps.Clone(s.funcs)
	}
	if len(s.aliases) > 0 {
		n.aliases = maps.Clone(s.aliases)
	}
	if len(s.gitAliases) > 0 {
		n.gitAliases = maps.Clone(s.gitAliases)
	}
	return &n
}

func (s *scope) set(name, val string) {
	if s.vars == nil {
		s.vars = make(map[string]string)
	}
	s.vars[name] = val
	if s.arrays != nil {
		delete(s.arrays, name)
	}
}

// setArray assigns an array (nil: its elements are not known).
func (s *scope) setArray(name string, elems []string) {
	if elems == nil {
		s.set(name, string(shell.Unknown))
		return
	}
	if s.vars != nil {
		delete(s.vars, name)
	}
	if s.arrays == nil {
		s.arrays = make(map[string][]string)
	}
	s.arrays[name] = elems[:min(len(elems), maxArray)]
}

// maxArray bounds the elements of an array the analysis keeps.
const maxArray = 64

// setParams sets the positional parameters: a new shell's (args[0] is
// $0, nil when it is given none) or a function's.
func (s *scope) setParams(args []string) {
	s.posKnown = true
	s.pos = nil
	s.arg0 = ""
	if len(args) > 0 {
		s.arg0 = args[0]
		s.pos = args[1:min(len(args), maxArray+1)]
	}
}

// The states of a variable: set (to a value that may hold Unknown),
// unset, or not assigned by the command line at all (it may come from
// the environment).
type varState uint8

const (
	varAbsent varState = iota
	varSet
	varUnset
	varUnknown
)

// get returns a parameter's value: a name, a positional or special
// parameter, or an array element (idx "@", "*" or a number).
func (s *scope) get(name, idx string) (string, varState) {
	unknown := string(shell.Unknown)
	switch {
	case name == "0":
		if s.arg0 != "" {
			return s.arg0, varSet
		}
		return unknown, varUnknown
	case name == "@" || name == "*":
		if s.posKnown {
			return strings.Join(s.pos, " "), varSet
		}
		return unknown, varUnknown
	case name == "#":
		if s.posKnown {
			return strconv.Itoa(len(s.pos)), varSet
		}
		return unknown, varUnknown
	case name[0] >= '1' && name[0] <= '9':
		n, err := strconv.Atoi(name)
		if err != nil || !s.posKnown {
			return unknown, varUnknown
		}
		if n <= len(s.pos) {
			return s.pos[n-1], varSet
		}
		return "", varUnset
	}
	if elems, ok := s.arrays[name]; ok {
		switch idx {
		case "@", "*":
			return strings.Join(elems, " "), varSet
		case "":
			idx = "0"
		}
		n, err := strconv.Atoi(idx)
		if err != nil {
			return unknown, varUnknown
		}
		if n < len(elems) {
			return elems[n], varSet
		}
		return "", varUnset
	}
	if idx != "" && idx != "0" && idx != "@" && idx != "*" {
		if _, ok := s.vars[name]; ok {
			return "", varUnset
		}
		return unknown, varAbsent
	}
	if v, ok := s.vars[name]; ok {
		if v == unknown {
			return v, varUnknown
		}
		return v, varSet
	}
	switch name {
	case "PWD":
		if s.cwd != "" {
			return s.cwd, varSet
		}
	case "OLDPWD":
		if s.oldpwd != "" {
			return s.oldpwd, varSet
		}
	case "HOME":
		return home, varSet
	}
	return unknown, varAbsent
}

// lookup returns the value of a plain variable.
func (s *scope) lookup(name string) string {
	v, _ := s.get(name, "")
	return v
}

// resolve evaluates a marker's parameter specification (see
// shell.Word): NAME, a positional or special parameter, NAME[i], !NAME,
// then an operator and its word. A variable the command line does not
// assign counts as unset for the operators (${X:-/} is /), and as
// unknown otherwise.
func (s *scope) resolve(spec string, depth int) string {
	unknown := string(shell.Unknown)
	indirect := strings.HasPrefix(spec, "!")
	if indirect {
		spec = spec[1:]
	}
	n := 0
	switch {
	case spec == "":
		return unknown
	case spec[0] == '@' || spec[0] == '*' || spec[0] == '#':
		n = 1
	case spec[0] >= '0' && spec[0] <= '9':
		for n < len(spec) && spec[n] >= '0' && spec[n] <= '9' {
			n++
		}
	default:
		for n < len(spec) && isNameChar(spec[n]) {
			n++
		}
	}
	name, rest := spec[:n], spec[n:]
	if name == "" {
		return unknown
	}
	idx := ""
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return unknown
		}
		idx, rest = rest[1:end], rest[end+1:]
	}
	val, st := s.get(name, idx)
	if indirect {
		if st != varSet || !shell.IsName(val) {
			return unknown
		}
		val, st = s.get(val, "")
	}
	op := ""
	for _, o := range []string{":-", ":=", ":+", ":?", "-", "=", "+", "?"} {
		if strings.HasPrefix(rest, o) {
			op, rest = o, rest[len(o):]
			break
		}
	}
	word := func() string { return s.expandDepth(rest, depth+1) }
	empty := st == varSet && val == ""
	set := st == varSet
	switch op {
	case "":
		return val
	case ":-", ":=":
		switch {
		case set && !empty && val != unknown:
			return val
		case empty || st == varUnset || st == varAbsent:
			return s.assigned(op, name, idx, indirect, word())
		}
		return unknown
	case "-", "=":
		switch {
		case set:
			return val
		case st == varUnset || st == varAbsent:
			return s.assigned(op, name, idx, indirect, word())
		}
		return unknown
	case ":+":
		switch {
		case set && !empty && val != unknown:
			return word()
		case empty || st == varUnset || st == varAbsent:
			return ""
		}
		return unknown
	case "+":
		switch {
		case set:
			return word()
		case st == varUnset || st == varAbsent:
			return ""
		}
		return unknown
	}
	return val // :? and ?: the value, or an error
}

// assigned applies the assignment of ${NAME:=word} and ${NAME=word} to
// a plain variable, and returns the value.
func (s *scope) assigned(op, name, idx string, indirect bool, val string) string {
	if (op == ":=" || op == "=") && idx == "" && !indirect && shell.IsName(name) {
		s.set(name, val)
	}
	return val
}

// expand replaces the variable markers of a shell.Word value by their
// values (or by shell.Unknown).
func (s *scope) expand(v string) string { return s.expandDepth(v, 0) }

func (s *scope) expandDepth(v string, depth int) string {
	if strings.IndexByte(v, shell.VarOpen) < 0 {
		return v
	}
	if depth > 8 {
		return string(shell.Unknown)
	}
	var b strings.Builder
	for i := 0; i < len(v); {
		if v[i] != shell.VarOpen {
			b.WriteByte(v[i])
			i++
			continue
		}
		end := markerEnd(v, i)
		if end < 0 {
			b.WriteString(v[i:])
			break
		}
		b.WriteString(s.resolve(v[i+1:end], depth))
		i = end + 1
	}
	return b.String()
}

// markerEnd returns the index of the VarClose matching the VarOpen at
// v[i], or -1.
func markerEnd(v string, i int) int {
	depth := 0
	for j := i; j < len(v); j++ {
		switch v[j] {
		case shell.VarOpen:
			depth++
		case shell.VarClose:
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}

// wholeArray returns the elements of a word that is exactly "${a[@]}"
// or "$@" (each element one word), when they are known.
func (s *scope) wholeArray(v string) ([]string, bool) {
	if len(v) < 3 || v[0] != shell.VarOpen || markerEnd(v, 0) != len(v)-1 {
		return nil, false
	}
	spec := v[1 : len(v)-1]
	if spec == "@" {
		return s.pos, s.posKnown
	}
	name, ok := strings.CutSuffix(spec, "[@]")
	if !ok {
		return nil, false
	}
	elems, ok := s.arrays[name]
	return elems, ok
}

// expandAll expands words with the variables known, splitting the value
// of an unquoted expansion into words as the shell does (X="rm -rf /";
// $X runs rm) and "${a[@]}" into its elements.
func (s *scope) expandAll(words []shell.Word) []string {
	out := make([]string, 0, len(words))
	for _, w := range words {
		if elems, ok := s.wholeArray(w.Value); ok {
			if w.Splits {
				for _, e := range elems {
					out = append(out, strings.Fields(e)...)
				}
			} else {
				out = append(out, elems...)
			}
			continue
		}
		v := s.expand(w.Value)
		if w.Splits && v != w.Value {
			out = append(out, strings.Fields(v)...)
			continue
		}
		out = append(out, v)
	}
	return out
}

// assign applies NAME=value, NAME+=value or NAME[i]=value; elems are the
// elements of an array assignment (NAME=(…)), when it is one.
func (s *scope) assign(w string, elems []string, isArray bool) {
	name, val, _ := strings.Cut(w, "=")
	appendTo := strings.HasSuffix(name, "+")
	name = strings.TrimSuffix(name, "+")
	idx := ""
	if i := strings.IndexByte(name, '['); i > 0 {
		idx, name = strings.TrimSuffix(name[i+1:], "]"), name[:i]
	}
	old, hasOld := s.arrays[name]
	switch {
	case isArray && appendTo:
		if _, isVar := s.vars[name]; hasOld || !isVar {
			s.setArray(name, append(append([]string(nil), old...), elems...))
		} else {
			s.setArray(name, nil)
		}
	case isArray:
		s.setArray(name, elems)
	case idx != "":
		n, err := strconv.Atoi(idx)
		if !hasOld || err != nil || n < 0 || n >= maxArray || appendTo {
			s.setArray(name, nil)
			break
		}
		arr := append([]string(nil), old...)
		for len(arr) <= n {
			arr = append(arr, "")
		}
		arr[n] = val
		s.setArray(name, arr)
	case appendTo:
		if v, st := s.get(name, ""); st == varSet && hasOld {
			arr := append([]string(nil), old...)
			arr[0] = v + val
			s.setArray(name, arr)
		} else if st == varSet {
			s.set(name, v+val)
		} else {
			s.set(name, string(shell.Unknown))
		}
	case hasOld:
		arr := append([]string(nil), old...)
		arr[0] = val
		s.setArray(name, arr)
	default:
		s.set(name, val)
	}
}

// chdir changes the working directory, remembering the previous one.
func (s *scope) chdir(dir string) {
	s.oldpwd, s.cwd = s.cwd, dir
}

// cdTarget resolves cd's operand: - is $OLDPWD, a relative name not
// starting with . is looked up in $CDPATH (its first entry: the
// analysis does not know which directories exist).
func (s *scope) cdTarget(arg string, env *scope) string {
	if arg == "-" {
		if old := env.lookup("OLDPWD"); strings.IndexByte(old, shell.Unknown) < 0 {
			return shell.ResolveDir(old, s.cwd)
		}
		return ""
	}
	if arg != "" && arg[0] != '/' && arg != "." && arg != ".." && !strings.HasPrefix(arg, "./") && !strings.HasPrefix(arg, "../") {
		if cdpath, st := env.get("CDPATH", ""); st == varSet && cdpath != "" && strings.IndexByte(cdpath, shell.Unknown) < 0 {
			entry, _, _ := strings.Cut(cdpath, ":")
			if entry != "" {
				return shell.ResolveDir(path.Join(entry, arg), s.cwd)
			}
		}
	}
	return shell.ResolveDir(arg, s.cwd)
}

// readInput applies read or mapfile reading a visible standard input
// (a here-string, a here-document, echo … |): read splits its first line
// into the names (or the array of -a), mapfile makes an array of its
// lines. It reports false for the options it does not follow.
func (s *scope) readInput(cmd string, args []string, stdin string) bool {
	withArg := "adinNptu" // read's options taking a value
	if cmd != "read" {
		withArg = "dnOsuCc"
	}
	p := shell.ParseArgs(args, withArg)
	if _, ok := p.Value("u", "d", "C", "O", "s", "n", "N", "i"); ok {
		return false
	}
	if cmd != "read" {
		name := "MAPFILE"
		if len(p.Ops) > 0 {
			name = p.Ops[0]
		}
		var lines []string
		for l := range strings.SplitAfterSeq(stdin, "\n") {
			if l == "" {
				continue
			}
			if p.Has('t') {
				l = strings.TrimSuffix(l, "\n")
			}
			lines = append(lines, l)
		}
		s.setArray(name, lines)
		return true
	}
	line, _, _ := strings.Cut(stdin, "\n")
	if arr, ok := p.Value("a"); ok {
		s.setArray(arr, strings.Fields(line))
		return true
	}
	names := p.Ops
	if len(names) == 0 {
		names = []string{"REPLY"}
	}
	for i, name := range names {
		line = strings.TrimLeft(line, " \t")
		if i == len(names)-1 {
			s.set(name, strings.TrimRight(line, " \t"))
			break
		}
		word, rest, _ := strings.Cut(line, " ")
		s.set(name, word)
		line = rest
	}
	return true
}

// builtin applies the effect of cd, pushd, popd, export, unset, read,
// set, shift, printf -v, alias … on the scope. env holds the variables
// the command sees, with its own assignments (CDPATH=/ cd etc); stdin is
// what it reads, when visible.
func (s *scope) builtin(words []string, env *scope, stdin string, hasStdin bool) {
	args := words[1:]
	switch words[0] {
	case "cd", "pushd":
		for len(args) > 0 && len(args[0]) > 1 && args[0][0] == '-' {
			if args[0] == "--" {
				args = args[1:]
				break
			}
			args = args[1:]
		}
		old := s.cwd
		switch {
		case len(args) == 0 && words[0] == "cd":
			h := env.lookup("HOME")
			if strings.IndexByte(h, shell.Unknown) >= 0 {
				h = ""
			}
			s.chdir(shell.ResolveDir(h, s.cwd))
		case len(args) == 0 || strings.HasPrefix(args[0], "+") || words[0] == "pushd" && strings.HasPrefix(args[0], "-"):
			// pushd alone or +N/-N rotates the stack.
			if len(args) == 0 && s.dirsKnown && len(s.dirs) > 0 {
				top := s.dirs[len(s.dirs)-1]
				s.dirs[len(s.dirs)-1] = s.cwd
				s.chdir(top)
				return
			}
			s.chdir("")
			s.dirsKnown = false
			return
		default:
			s.chdir(s.cdTarget(args[0], env))
		}
		if words[0] == "pushd" && len(s.dirs) < maxArray {
			s.dirs = append(s.dirs, old)
		}
	case "popd":
		switch {
		case len(args) > 0 || !s.dirsKnown:
			s.chdir("")
			s.dirsKnown = false
		case len(s.dirs) > 0:
			top := s.dirs[len(s.dirs)-1]
			s.dirs = s.dirs[:len(s.dirs)-1]
			s.chdir(top)
		}
	case "export", "declare", "typeset", "local", "readonly":
		for _, a := range args {
			if !strings.HasPrefix(a, "-") && shell.IsAssignment(a) {
				s.assign(a, nil, false)
			}
		}
	case "unset":
		for _, a := range args {
			delete(s.vars, a)
			delete(s.arrays, a)
			delete(s.funcs, a)
		}
	case "read", "mapfile", "readarray":
		if hasStdin && s.readInput(words[0], args, stdin) {
			return
		}
		for _, a := range args {
			if shell.IsName(a) {
				s.set(a, string(shell.Unknown))
			}
		}
		if words[0] != "read" {
			s.set("MAPFILE", string(shell.Unknown))
		}
	case "getopts":
		for _, a := range args {
			if shell.IsName(a) {
				s.set(a, string(shell.Unknown))
			}
		}
	case "set":
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--":
				s.setParams(append([]string{s.arg0}, args[i+1:]...))
				return
			case a == "-o" || a == "+o":
				i++
			case strings.HasPrefix(a, "-") || strings.HasPrefix(a, "+"):
			default:
				s.setParams(append([]string{s.arg0}, args[i:]...))
				return
			}
		}
	case "shift":
		n := 1
		if len(args) > 0 {
			var err error
			if n, err = strconv.Atoi(args[0]); err != nil {
				s.posKnown, s.pos = false, nil
				return
			}
		}
		if s.posKnown && n <= len(s.pos) {
			s.pos = s.pos[n:]
		} else if s.posKnown && n > len(s.pos) {
			// shift fails: nothing changes.
		} else {
			s.posKnown = false
		}
	case "printf":
		// printf -v NAME FORMAT ARGS… assigns what it would print.
		if len(args) >= 3 && args[0] == "-v" && shell.IsName(args[1]) {
			rest := args[2:]
			if rest[0] == "--" {
				rest = rest[1:]
			}
			if len(rest) > 0 {
				s.set(args[1], shell.Printf(rest[0], rest[1:]))
			}
		}
	case "alias":
		for _, a := range args {
			if name, code, ok := strings.Cut(a, "="); ok && name != "" && !strings.HasPrefix(a, "-") {
				if s.aliases == nil {
					s.aliases = make(map[string]string)
				}
				if len(s.aliases) < maxArray {
					s.aliases[name] = code
				}
			}
		}
	case "unalias":
		for _, a := range args {
			if a == "-a" {
				s.aliases = nil
			}
			delete(s.aliases, a)
		}
	}
}
