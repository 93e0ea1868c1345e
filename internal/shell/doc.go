// Package shell is VERA's one understanding of shell commands. The agent's
// move and query ledgers, sandboxd's deny rules and the logic verifier's
// action normaliser all read commands through it, so they cannot disagree
// about what a command runs.
//
// Parse reads a command with mvdan.cc/sh/v3's Bash parser into a syntax
// tree and flattens it into the simple commands it runs, in source order:
// each Cmd has its words (quotes removed), its redirections with their
// targets and here-document bodies, the command whose output is piped into
// it, the operator that follows it, and the scripts of the command and
// process substitutions inside it, parsed too. Compound commands (if,
// while, for, case, functions, { … }, [[ … ]], (( … ))) contribute the
// simple commands they contain; a for/select header, a case subject and a
// test are reported as Cmds of their own Kind so a reader can still see
// the substitutions in them.
//
// A Word carries two readings. Value is what a static reader can know of
// it: literal text, with every expansion whose value is not known written
// as Unknown (0x00), and a parameter expansion a caller tracking
// assignments can resolve written as VarOpen SPEC VarClose: $NAME and
// ${NAME} (SPEC is NAME), $1, $@, $* and $#, ${NAME[i]} with i a number,
// @ or *, ${!NAME}, and any of these with one of the operators :- - :=
// = :+ + :? ? followed by the Value of its word (${X:-/} is VarOpen
// "X:-/" VarClose; markers nest). A tilde prefix is $HOME (~), $PWD (~+),
// $OLDPWD (~-) or /root (~root); another user's home is Unknown. Text
// keeps expansions as written ($HOME/x, $(date)), which is what a
// classifier wants to show. Input bytes 0x01 and 0x02 are replaced by '?'
// so they cannot forge a variable marker; an input 0x00 stays and means
// "unknown". An unquoted brace expansion ({rm,-rf,/}, x{a,b}) is applied
// as bash does, into several words (at most MaxBraceWords; a word with
// substitutions is left whole), and the output of a command substitution
// that visibly prints (echo, printf, cat of a here-document) is its
// value.
//
// Unwrap removes the wrappers that run another command (sudo, env,
// timeout, nice, xargs, setpriv, unshare, chrt, setarch and its
// architecture links, valgrind, perf, systemd-run, the dynamic loader …:
// the full list is in unwrap.go) and reports the shell
// code a command runs in turn (bash -c with its positional parameters,
// eval, su -c, script -c, flock -c, parallel, at, a shell's --rcfile or
// BASH_ENV …), find's -exec commands, the commands programs run from
// their own language or options (awk's system(), sed's e, ed's and ex's
// !, git aliases, tar's --checkpoint-action, rsync -e, gdb's shell,
// expect's spawn …: programs.go), the files those scripts write, and
// interpreters' inline code (python -c, node -e, perl -e …), recursively
// usable by every reader. A Context may give it the content of files the
// command line shows (a process substitution <(echo …) sourced or run).
//
// A command that does not parse as Bash is reported by Parse as an error;
// each user decides what that means (the policy denies, the ledgers fall
// back to a neutral class, the normaliser keeps the text).
package shell
