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
// documentation and --help output.
//
// # How a command is analysed
//
// Check does not run regular expressions over the raw string. It does a
// light shell tokenisation:
//
//   - words, honouring single quotes, double quotes, $'…' and backslashes
//     (so r\m, 'rm' and "rm" are all rm);
//   - simple commands, split on ; && || | |& & newlines and ( );
//   - redirections (> >> >| &> &>> <> n> and so on), here-documents and
//     here-strings;
//   - command substitutions $( … ), backticks and process substitutions
//     <( … ) >( … ), analysed as scripts of their own;
//   - wrappers, unwrapped recursively: sudo, doas, su -c, runuser, env
//     (including env -C and env -S), nohup, setsid, timeout, nice,
//     ionice, stdbuf, time, command, builtin, exec, chroot, busybox,
//     taskset, flock, watch, trap, xargs (with arguments fed from a
//     visible echo/printf/here-string/here-document) and find -exec;
//   - nested shells: bash/sh/dash/zsh/ksh/… -c 'script', eval '…', a
//     script given to a shell as a here-document or here-string, and
//     echo/printf '…' | sh (but not bash -n, which does not execute);
//   - paths: //, /./, .., trailing slashes are normalised; relative
//     paths are resolved against the working directory given to CheckIn
//     (Check uses /work), following literal cd/pushd inside the command
//     (a subshell's cd does not leak out of the parentheses); ~, $HOME and
//     ${HOME} are /root (the container runs as root); $PWD is the tracked
//     working directory; simple brace expansion ({a,b}) is applied to
//     paths; /bin/rm and /usr/bin/rm are rm (but ./reboot, a program in
//     the work tree, is not reboot);
//   - variables assigned literally earlier in the same command (X=/;
//     rm -rf $X) are substituted.
//
// # Limits
//
// This is a guard rail against accidents and obvious destruction, not a
// security boundary: the boundary is the container (read-only /input,
// isolated file system and process namespace). Known limits:
//
//   - It is not a full shell parser. Aliases, shell functions shadowing
//     commands, arithmetic, case patterns containing ')' inside $( ),
//     here-documents inside $( ), and exotic quoting may be misread.
//   - Anything whose value is not known from the text is treated as
//     unknown and never matches (fail-open): variables set elsewhere,
//     $(…) results, loop variables, `cd "$DIR"`, and globs, which are not
//     expanded against the file system (they are only pattern-matched
//     against the protected paths and /work/notes.md).
//   - Programs and scripts are not inspected: `bash cleanup.sh`, `make`,
//     `python3 tool.py`. Inline code for python/perl/ruby/node/php is only
//     searched for literal writes to /work/notes.md and for well-known
//     fork-bomb idioms; `os.system("rm -rf /")` is not analysed.
//   - Nesting is analysed up to 8 levels below the command (sudo bash -c
//     "$(…)" is two: the -c script and the substitution) and at most 256
//     scripts per command; beyond that the rest is not analysed
//     (fail-open). Analysis is linear in the input times that depth.
//   - Fork bombs are recognised only as a function that calls itself at
//     least twice with a pipe or in the background (`:(){ :|:& };:` and
//     renamed variants) plus perl/python/ruby idioms; a loop that spawns
//     processes forever (`while true; do cmd & done`) is not detected.
//   - Symlinks and hard links are not followed; `find / -delete`, `rsync
//     --delete`, `tar -x`/`unzip` into /work, `git checkout`/`git restore`
//     and interactive editors are not considered.
package policy
