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
//     rm) and brace expansion ({rm,-rf,/} is rm -rf /), with
//     redirections and their targets, here-documents, here-strings and
//     pipes; compound commands (if, while, for, case, { … }) contribute
//     the commands they contain;
//   - command and process substitutions ($( … ), backticks, <( … )) are
//     analysed as scripts of their own, before the command that holds
//     them, in a copy of the scope (their cd does not leak);
//   - wrappers are removed by shell.Unwrap, recursively: sudo, doas, su
//     -c, runuser, env (-C, -S), nohup, setsid, timeout, nice, ionice,
//     stdbuf, time, command, builtin, exec, chroot, busybox, taskset,
//     flock, watch, trap, setpriv, unshare, nsenter, strace, ltrace, sg,
//     script -c, parallel and xargs (with the items a visible echo,
//     printf, here-string, here-document or <( … ) feeds it, split at
//     blanks, lines, NULs (-0) or -d's delimiter and substituted for
//     -I's string), chrt, setarch and its links (linux64, i386, x86_64
//     …), valgrind, perf record/stat/trace, catchsegv, cpulimit,
//     firejail, unbuffer, faketime, proxychains, torsocks, systemd-run,
//     run0, systemd-cat, daemonize, start-stop-daemon, flatpak-spawn,
//     dbus-launch, xvfb-run, schedtool, numactl, cgexec, prlimit, gosu,
//     su-exec, tini, dumb-init, capsh --, bwrap, screen, ip netns exec,
//     the dynamic loader (ld-linux*.so) and others, and find
//     -exec/-execdir/-ok/-okdir (with {} standing for what find may
//     select);
//   - nested shells: bash/sh/… -c 'script' (with the positional
//     parameters that follow it: sh -c 'rm -rf "$1"' _ /), eval '…', a
//     script given to a shell as a here-document, a here-string, on a
//     pipe from echo, printf or cat of a here-document (escapes of echo
//     -e and printf applied; not bash -n, which does not execute), or as
//     a process substitution whose output is visible (bash <(echo …),
//     source <(echo …), --rcfile, --init-file, BASH_ENV=<(…)), at and
//     batch jobs, are parsed and analysed in turn; the code a shell runs
//     sees the variables the command line puts in its environment (X=/
//     bash -c 'rm -rf $X', env X=/ sh -c …) and reads what the shell
//     reads (bash -c 'sh' <<< 'code');
//   - programs that run commands of their own: awk's system(), print |
//     "cmd", print |& "cmd" and "cmd" | getline (string literals,
//     concatenation and -v or literal assignments); GNU sed's e command
//     and s///e flag (the substitution applied to a visible input);
//     ed's and ex's/vim's !cmd, r !cmd, w !cmd, call system(), :py3; git
//     aliases starting with ! (git -c alias.x=…, git config alias.x …
//     earlier in the line), core.pager, core.sshCommand and the other
//     command-valued keys, rebase --exec, bisect run, submodule foreach,
//     filter-branch filters, ext:: URLs; tar's --checkpoint-action=exec,
//     --to-command, --use-compress-program/-I, --info-script; rsync -e;
//     ssh's ProxyCommand and LocalCommand; gdb's shell, !, pipe, python,
//     run and --args; lldb's platform shell; expect's and Tcl's spawn,
//     exec, system and open "|…"; socat EXEC: and SYSTEM:; ncat -c;
//     zip -TT; tmux's shell commands; GIT_SSH_COMMAND, EDITOR, PAGER and
//     the like in a command's environment. These command lines are read
//     best effort: one that does not parse is skipped, not refused;
//   - the files such programs' scripts write (sed's w, awk's print >
//     "f", ed's w) count as writes of the command; awk's $0 is the input
//     when it is visible, and sprintf() is formatted as printf;
//   - interpreters' inline code (python -c, perl -e, ruby -e, node -e,
//     php -r, a here-document or a visible <( … ) fed to them, from
//     shell.InlineCode) is searched, best effort, for writes to the notes
//     file and /proc/sysrq-trigger, fork loops, recursive deletes of a
//     literal path (shutil.rmtree, FileUtils.rm_rf, fs.rmSync, rmtree),
//     code it decodes before running it (exec(b64decode(…))), and
//     commands run through os.system, subprocess, system, exec,
//     child_process or backticks, whose command lines are analysed like
//     any other;
//   - paths: //, /./, .., trailing slashes are normalised; relative
//     paths are resolved against the working directory given to CheckIn
//     (Check uses /work), following literal cd/pushd/popd inside the
//     command (a subshell's cd does not leak out of the parentheses),
//     cd - and $OLDPWD, and $CDPATH (its first entry) for a relative cd;
//     ~, $HOME and ${HOME} are /root (as if the container ran as root:
//     rm -rf ~ stays refused whatever $HOME is), ~root is /root, ~+ and
//     $PWD are the tracked working directory, ~- is the previous one;
//     /bin/rm and /usr/bin/rm are rm (but ./reboot, a program in the
//     work tree, is not reboot);
//   - values assigned literally earlier in the same command are tracked:
//     variables (X=/; rm -rf $X), exported or declared ones (also after
//     builtin or command), printf -v, read and mapfile from a visible
//     here-string or pipe (read makes a variable unknown otherwise),
//     ${X:=/}; arrays (a=(rm -rf /); "${a[@]}", ${a[1]}, a+=(…)); the
//     positional parameters ($1, "$@", $#), which are empty at the top
//     level (the command runs with none), set by set -- and shift, by a
//     function's call and by sh -c's arguments; ${X:-word} and
//     ${X-word}, which give word for a variable the command does not
//     assign, ${X:+word}, ${!X}; a for loop's body is judged once with
//     its variable set to each of its first 8 known items (for f in
//     /work/*; do rm -rf "$f"; done is rm -rf of /work/*), then read
//     with the variable unknown;
//   - a function's body is read where it is defined, with its parameters
//     unknown, and again where it is called, with the call's arguments
//     (f(){ rm -rf "$1"; }; f /), in the caller's scope; recursion is not
//     followed. An alias defined earlier in the line (alias x=rm; x -rf
//     /) is expanded where its name is the command word, as with
//     expand_aliases, and judged besides the command as written;
//   - a substitution that visibly prints its text, an echo, printf or
//     cat of a here-document of known words, has that text as its value:
//     eval $(echo rm -rf /) runs rm -rf /; $(pwd) is the working
//     directory;
//   - a glob or brace list in a write target (a redirection, tee, cp/mv
//     destinations, dd of=, sed -i …) is matched against the notes
//     file: echo x > /work/n?tes.md counts as writing /work/notes.md.
//
// A command that does not parse as shell is refused by the rule
// unparseable: bash would refuse it too, and a script understood only in
// part cannot be judged. So is a command the analysis cannot follow to
// its end: substitutions nested deeper than internal/shell flattens (32
// levels) or brackets deeper than it parses (1000), code run by code
// (bash -c, eval, su -c, a here-document fed to a shell, an alias …)
// nested more than 8 levels deep, more than 256 scripts (the command,
// its substitutions, bash -c, eval …) in one command, or 64 wrappers or
// more around one command. Bodies read again (a for loop's with a known
// item, a function's where it is called) are 32 at most in one command;
// a brace expansion gives 64 words at most, a program's arguments 32
// command lines at most. The cost of a check is linear in the input
// times that depth and those bounds.
//
// # Limits
//
// This is a guard rail against accidents and obvious destruction, not a
// security boundary: the boundary is the container (read-only /input,
// isolated file system and process namespace, pids/memory/CPU limits).
// What the check cannot decide statically, and so lets through:
//
//   - Values known only at run time. A variable set elsewhere (in an
//     earlier command, the environment, a file), the output of $(…) other
//     than a plain echo, printf or cat of a here-document, what read
//     takes from a file or a program, a loop variable over unknown items,
//     $((…)) arithmetic, expansions with patterns or slices (${X%/*},
//     ${X/a/b}, ${X:1}), associative arrays and `cd "$DIR"` are
//     unknown, and an unknown value never matches a protected path (rm
//     -rf "$DIR"/* is allowed). A literal cd is assumed to succeed.
//     ${X:-/} is read as / when the command does not assign X, although
//     the environment might. A command word of unknown value is judged
//     only where the rest of the command decides it: given rm's -rf and
//     a protected target ($(cat f) -rf /), or followed by a command
//     rm_root denies ($SUDO rm -rf /). `$CMD /` or `$(ls) -rf /tmp` are
//     not judged. Only the first entry of $CDPATH is followed, since
//     which directories exist is not known.
//   - Code the command line does not show: scripts and programs on disk
//     (bash cleanup.sh, make, python3 tool.py, a file written earlier in
//     the same line and then run or sourced), code piped in from a
//     producer other than echo, printf or cat of a here-document (curl …
//     | sh, cat x | bash, awk '{print}' f | sh), configuration files
//     (~/.gitconfig aliases, ~/.bashrc, crontabs), aliases and functions
//     defined in files or in earlier commands, exported functions, and
//     what a program started in the background does later. Code decoded
//     on its way to a shell or interpreter (base64 -d, xxd -r, openssl …
//     -d, gunzip, rev …) is refused outright (rule decoded_script), since
//     it is hidden on purpose; other transformations on the way (tr,
//     sed, awk, cut, a here-document with expansions) are not applied.
//   - Interpreter code is read by pattern, not parsed: a path or command
//     must be a string literal in the call (shutil.rmtree('/'), not
//     shutil.rmtree(p)), calls spelled otherwise (getattr, aliases of
//     modules other than the usual names, string building) are missed,
//     and decoding is recognised by the names of the usual decoders.
//     The same holds for the languages of other programs: awk, sed, ed,
//     ex and vim, Tcl, gdb and git's configuration are read for the
//     constructs listed above only, with run-time values (awk's $1,
//     ENVIRON, a sed input that is not visible) unknown. Programs that
//     run commands in ways not listed (less's !, make's recipes, a
//     plugin's configuration …) are not looked into.
//   - Globs are not expanded against the file system: they are matched
//     against the protected paths only (a write target that may expand to
//     the notes file is refused, whatever the directory holds). find's
//     -regex is not evaluated; brace sequences longer than 64 words are
//     left unexpanded.
//   - Fork bombs are recognised as a function that calls itself at least
//     twice with a pipe or in the background (`:(){ :|:& };:` and
//     renamed variants), an endless shell loop (while :, while true,
//     while [ 1 ], until false, for ((;;))) whose body only starts
//     commands in the background, and the perl/python/ruby/node loop
//     idioms above. A loop that also does something in the foreground
//     (while :; do x & sleep 1; done), one whose condition is computed,
//     or a script that re-executes itself from a file is not detected;
//     the pids limit carries it.
//   - Symlinks and hard links are not followed; `rsync --delete`, `tar
//     -x`/`unzip` into /work, `git checkout`/`git restore` and
//     interactive editors are not considered. Block devices are
//     recognised by their usual names under /dev; a device reached
//     through a link elsewhere is not.
package policy
