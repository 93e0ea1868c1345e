package shell

import (
	"slices"
	"strings"
)

// Inline is the program text an interpreter runs without a script file.
type Inline struct {
	Lang   string   // python, perl, ruby, node, php, lua, r, julia, deno, bun
	Codes  []string // inline code (-c/-e/-r…), or standard input when that is the program
	Module string   // python -m MODULE
	Script bool     // a script file is run (its text is not visible)
	Stdin  bool     // Codes is the program read from standard input
	// InPlace is perl's -i (edits its file operands); Operands are the
	// arguments after the code.
	InPlace  bool
	Operands []string
}

// Interpreter reports the language of an interpreter's name, or "".
func Interpreter(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.HasPrefix(n, "python") || strings.HasPrefix(n, "pypy"):
		if rest := strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(n, "python"), "pypy"), "0123456789."); rest == "" || rest == "-dbg" {
			return "python"
		}
	case n == "perl" || strings.HasPrefix(n, "perl5"):
		return "perl"
	case n == "ruby" || n == "irb":
		return "ruby"
	case n == "node" || n == "nodejs":
		return "node"
	case n == "deno", n == "bun", n == "php", n == "lua", n == "julia", n == "osascript":
		return n
	case strings.HasPrefix(n, "lua5") || n == "luajit":
		return "lua"
	case n == "rscript" || n == "r":
		return "r"
	}
	return ""
}

// InlineCode returns the program an interpreter invocation runs, and false
// when name is not an interpreter.
func InlineCode(name string, args []string, ctx Context) (Inline, bool) {
	lang := Interpreter(name)
	if lang == "" {
		return Inline{}, false
	}
	in := Inline{Lang: lang}
	switch lang {
	case "python":
		for i := 0; i < len(args); i++ {
			a := args[i]
			if a == "-" {
				break
			}
			if a == "--" || !strings.HasPrefix(a, "-") {
				in.Script = true
				in.Operands = args[i:]
				break
			}
			if a == "-m" || (strings.HasPrefix(a, "-m") && !strings.HasPrefix(a, "--")) {
				if a == "-m" && i+1 < len(args) {
					in.Module = args[i+1]
				} else if len(a) > 2 {
					in.Module = a[2:]
				}
				return in, true
			}
			if a == "-W" || a == "-X" || a == "--check-hash-based-pycs" {
				i++
				continue
			}
			if strings.HasPrefix(a, "-W") || strings.HasPrefix(a, "-X") {
				continue
			}
			if strings.HasPrefix(a, "--") {
				continue
			}
			// A cluster of short flags: -c may end it (-Ic CODE) or be
			// glued to its code (-c'…').
			if k := strings.IndexByte(a, 'c'); k > 0 {
				if k+1 < len(a) {
					in.Codes = append(in.Codes, a[k+1:])
				} else if i+1 < len(args) {
					in.Codes = append(in.Codes, args[i+1])
					i++
				}
				in.Operands = args[min(i+1, len(args)):]
				return in, true
			}
		}
	case "perl":
		for i := 0; i < len(args); i++ {
			a := args[i]
			if a == "--" {
				in.Operands = append(in.Operands, args[i+1:]...)
				break
			}
			if len(a) < 2 || a[0] != '-' {
				in.Operands = append(in.Operands, a)
				continue
			}
		cluster:
			for k := 1; k < len(a); k++ {
				switch a[k] {
				case 'e', 'E':
					if k+1 < len(a) {
						in.Codes = append(in.Codes, a[k+1:])
					} else if i+1 < len(args) {
						i++
						in.Codes = append(in.Codes, args[i])
					}
					break cluster
				case 'i':
					in.InPlace = true
					break cluster
				case 'M', 'm', 'I', 'x', 'C', 'd', 'D', 'l', '0', 'F':
					break cluster
				}
			}
		}
		in.Script = len(in.Codes) == 0 && len(in.Operands) > 0 && in.Operands[0] != "-"
	default:
		flags := map[string][]string{
			"ruby": {"-e"}, "php": {"-r"}, "lua": {"-e"}, "r": {"-e", "--expr"}, "julia": {"-e", "--eval", "-E", "--print"},
			"osascript": {"-e"}, "deno": {"eval"},
		}[lang]
		if flags == nil {
			flags = []string{"-e", "--eval", "-p", "--print"}
		}
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case slices.Contains(flags, a) && i+1 < len(args):
				i++
				in.Codes = append(in.Codes, args[i])
			case glued(a, flags) != "":
				in.Codes = append(in.Codes, glued(a, flags))
			case !strings.HasPrefix(a, "-"):
				if len(in.Codes) == 0 {
					in.Script = true
				}
				in.Operands = args[i:]
				i = len(args)
			}
		}
	}
	if in.Script && len(in.Codes) == 0 && len(in.Operands) > 0 {
		// A script file whose content the command line shows
		// (python3 <(echo …)).
		if src, ok := ctx.Files[in.Operands[0]]; ok {
			in.Codes, in.Script = []string{src}, false
		}
	}
	if len(in.Codes) == 0 && !in.Script && in.Module == "" && ctx.HasStdin {
		in.Codes, in.Stdin = []string{ctx.Stdin}, true
	}
	return in, true
}

// glued returns the code of a flag written with its value (--eval=CODE).
func glued(a string, flags []string) string {
	for _, f := range flags {
		if strings.HasPrefix(f, "--") && strings.HasPrefix(a, f+"=") {
			return a[len(f)+1:]
		}
	}
	return ""
}
