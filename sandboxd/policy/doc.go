// Package policy decides, before the sandbox daemon executes a shell
// command written by the agent, whether the command matches one of a
// small set of obviously destructive patterns. A denied command is not
// run; the daemon reports it in tool.finished as denied together with the
// rule that matched (Decision.Rule) and a human-readable reason.
//
// Shell commands are deliberately not allowlisted: exploration must stay
// possible, and a false positive (refusing `rm -rf /work/tmp`, `grep
// reboot notes.txt` or `python3 -c "print('mkfs')"`) costs the agent a
// turn. The rules therefore target a narrow set of unambiguous
// destructive forms. Every rule lives in rules.go, with a comment saying
// what it blocks and what it deliberately allows, plus documented denied
// and allowed examples that the tests execute. Rules returns them for
// documentation and --help output; `vera sandbox check -- CMD` prints the
// decision for one command without running it.
//
// # How a command is analysed
//
// Check does not run regular expressions over the raw string. It parses
// the command with internal/shell, VERA's one shell parser (on
// mvdan.cc/sh/v3, the parser of shfmt), and walks the simple commands it
// runs:
//
//   - words after quote removal (r\m, 'rm', "rm" and $'\x72m' are all
//     rm), with redirections and their targets, here-documents,
//     here-strings and pipes; compound commands (if, while, for, case,
//     { … }, functions) contribute the commands they contain;
//   - command and process substitutions ($( … ), backticks, <( … )) are
//     analysed as scripts of their own, before the command that holds
//     them, in a copy of the scope (their cd does not leak);
//   - wrappers are removed by shell.Unwrap, recursively: sudo, doas, su
//     -c, runuser, env (-C, -S), nohup, setsid, timeout, nice, ionice,
//     stdbuf, time, command, builtin, exec, chroot, busybox, taskset,
//     flock, watch, trap, setpriv, unshare, nsenter, strace, sg, script
//     -c, parallel and xargs (with the items a visible echo, printf,
//     here-string or here-document feeds it, substituted for -I's
//     string), and find -exec (with {} standing for what find may select);
//   - nested shells: bash/sh/… -c 'script', eval '…', a script given to a
//     shell as a here-document or here-string, and echo/printf … | sh
//     (printf's format applied to its arguments; not bash -n, which does
//     not execute) are parsed and analysed in turn;
//   - interpreters' inline code (python -c, perl -e, ruby -e, node -e,
//     php -r, or a here-document fed to them, from shell.InlineCode) is
//     searched, best effort, for writes to /work/notes.md, fork-loop
//     idioms, recursive deletes of a literal path (shutil.rmtree,
//     FileUtils.rm_rf, fs.rmSync, rmtree) and commands run through
//     os.system, subprocess, system, exec, child_process or backticks,
//     whose command lines are analysed like any other;
//   - paths: //, /./, .., trailing slashes are normalised; relative
//     paths are resolved against the working directory given to CheckIn
//     (Check uses /work), following literal cd/pushd inside the command
//     (a subshell's cd does not leak out of the parentheses); ~, $HOME and
//     ${HOME} are /root (the container runs as root); $PWD is the tracked
//     working directory; simple brace expansion ({a,b}) is applied to
//     paths; /bin/rm and /usr/bin/rm are rm (but ./reboot, a program in
//     the work tree, is not reboot);
//   - variables assigned literally earlier in the same command (X=/;
//     rm -rf $X), exported or read (read makes them unknown) are tracked;
//     a for loop's body is judged once with its variable set to each of
//     its first 8 known items (for f in /work/*; do rm -rf "$f"; done is
//     rm -rf of /work/*), then read with the variable unknown;
//   - a substitution that visibly prints its text, one echo or printf of
//     known words, has that text as its value: eval $(echo rm -rf /)
//     runs rm -rf /;
//   - a glob or brace list in a write target (a redirection, tee, cp/mv
//     destinations, dd of=, sed -i …) is matched against the protected
//     file: echo x > /work/n?tes.md counts as writing /work/notes.md.
//
// A command that does not parse as shell is refused by the rule
// unparseable: bash would refuse it too, and a script understood only in
// part cannot be judged. So is a command the analysis cannot follow to
// its end: substitutions nested deeper than internal/shell flattens (32
// levels) or brackets deeper than it parses (1000), code run by code
// (bash -c, eval, su -c, a here-document fed to a shell …) nested more
// than 8 levels deep, more than 256 scripts (the command, its
// substitutions, bash -c, eval …) in one command, or 64 wrappers or more
// around one command. The cost of a check is
// linear in the input times that depth.
//
// # Limits
//
// This is a guard rail against accidents and obvious destruction, not a
// security boundary: the boundary is the container (read-only /input,
// isolated file system and process namespace, pids/memory/CPU limits).
// What the check cannot decide statically, and so lets through:
//
//   - Values known only at run time. A variable set elsewhere, the output
//     of $(…) other than a plain echo or printf, a loop variable over
//     unknown items or `cd "$DIR"` are unknown, and an unknown
//     value never matches a protected path (rm -rf "$DIR"/* is allowed).
//     A command word of unknown value is judged only where the rest of
//     the command decides it: given rm's -rf and a protected target
//     ($(cat f) -rf /), or followed by a command rm_root denies
//     ($SUDO rm -rf /). `$CMD /` or `$(echo reboot)` are not judged.
//   - Code the command line does not show: scripts and programs (bash
//     cleanup.sh, make, python3 tool.py), code piped in from a producer
//     other than echo/printf (curl … | sh, cat x | bash), aliases and
//     functions defined in files. Code decoded on its way to a shell or
//     interpreter (base64 -d, xxd -r, openssl … -d, gunzip, rev …) is
//     refused outright (rule decoded_script), since it is hidden on
//     purpose; other transformations (tr, sed, awk …) are not recognised.
//   - Interpreter code is read by pattern, not parsed: the path must be a
//     string literal in the call (shutil.rmtree('/'), not
//     shutil.rmtree(p)), and calls spelled otherwise (getattr, aliases of
//     modules other than the usual names) are missed.
//   - Globs are not expanded against the file system: they are matched
//     against the protected paths only (a write target that may expand to
//     /work/notes.md is refused, whatever the directory holds). find's
//     -regex is not evaluated.
//   - Fork bombs are recognised only as a function that calls itself at
//     least twice with a pipe or in the background (`:(){ :|:& };:` and
//     renamed variants) plus perl/python/ruby idioms; a loop that spawns
//     processes forever (`while true; do cmd & done`) is not detected;
//     the pids limit carries it.
//   - Symlinks and hard links are not followed; `rsync --delete`, `tar
//     -x`/`unzip` into /work, `git checkout`/`git restore` and
//     interactive editors are not considered.
package policy
