package shell

import (
	"slices"
	"strings"
)

// OptVal is an option that took a value.
type OptVal struct{ Key, Val string }

// Options is a parsed argument list.
type Options struct {
	Ops   []string // operands
	Short []byte   // short flags seen
	Long  []string // long options seen (name without --, before any =)
	Vals  []OptVal // options that took a value
}

// Has reports whether the short flag c was given.
func (p *Options) Has(c byte) bool { return slices.Contains(p.Short, c) }

// HasLong reports whether one of the long options was given.
func (p *Options) HasLong(names ...string) bool {
	for _, l := range p.Long {
		if slices.Contains(names, l) {
			return true
		}
	}
	return false
}

// HasLongAbbrev reports whether an unambiguous abbreviation (at least min
// characters) of the long option full was given, as getopt_long accepts.
func (p *Options) HasLongAbbrev(full string, min int) bool {
	for _, l := range p.Long {
		if len(l) >= min && strings.HasPrefix(full, l) {
			return true
		}
	}
	return false
}

// Value returns the last value given to one of keys (short letters or
// long names).
func (p *Options) Value(keys ...string) (string, bool) {
	for i := len(p.Vals) - 1; i >= 0; i-- {
		if slices.Contains(keys, p.Vals[i].Key) {
			return p.Vals[i].Val, true
		}
	}
	return "", false
}

// Values returns every value given to one of keys, in order.
func (p *Options) Values(keys ...string) []string {
	var out []string
	for _, v := range p.Vals {
		if slices.Contains(keys, v.Key) {
			out = append(out, v.Val)
		}
	}
	return out
}

// ParseArgs parses GNU-style arguments, options and operands in any order
// (up to "--"). shortWithArg lists the short options taking a value;
// longWithArg the long ones taking a separate value.
func ParseArgs(args []string, shortWithArg string, longWithArg ...string) Options {
	var p Options
	for i := 0; i < len(args); i++ {
		if args[i] == "--" {
			p.Ops = append(p.Ops, args[i+1:]...)
			break
		}
		if !p.option(args, &i, shortWithArg, longWithArg) {
			p.Ops = append(p.Ops, args[i])
		}
	}
	return p
}

// ParseOptions parses options up to the first operand (POSIX style, as
// wrappers do) and returns the rest starting at that operand.
func ParseOptions(args []string, shortWithArg string, longWithArg ...string) (Options, []string) {
	var p Options
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

func (p *Options) option(args []string, i *int, shortWithArg string, longWithArg []string) bool {
	a := args[*i]
	if len(a) < 2 || a[0] != '-' {
		return false
	}
	if a[1] == '-' {
		name, val, hasVal := strings.Cut(a[2:], "=")
		p.Long = append(p.Long, name)
		if !hasVal && slices.Contains(longWithArg, name) && *i+1 < len(args) {
			*i++
			val, hasVal = args[*i], true
		}
		if hasVal {
			p.Vals = append(p.Vals, OptVal{name, val})
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
			p.Short = append(p.Short, c)
			p.Vals = append(p.Vals, OptVal{string(c), v})
			break
		}
		p.Short = append(p.Short, c)
	}
	return true
}

// IsAssignment reports whether w is a NAME=value (or NAME+=, NAME[i]=)
// word.
func IsAssignment(w string) bool {
	eq := strings.IndexByte(w, '=')
	if eq <= 0 {
		return false
	}
	name := strings.TrimSuffix(w[:eq], "+")
	if i := strings.IndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
		name = name[:i]
	}
	return IsName(name)
}
