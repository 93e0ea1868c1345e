package policy

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/vera-run/vera/internal/shell"
)

// This file is the one documented place for the sandbox's deny rules.
//
// Every rule is evaluated on every simple command of the command string,
// after parsing (internal/shell, on mvdan.cc/sh) and unwrapping (see
// doc.go): rm, /bin/rm, 'rm', r\m, {rm,-rf}, sudo rm, chrt 1 rm, env X=1
// rm, bash -c 'rm …', $(rm …), xargs -I{} rm {}, an alias or function
// defined earlier, awk's system("rm …") and git's !rm aliases are all
// seen as rm. The first command (in
// execution order) that matches a rule decides; among rules, the order of
// the list below decides. A command that does not parse is refused
// before any rule looks at it (unparseable).
//
// Each rule carries Denies and Allows examples; the tests run all of
// them, so the documentation below cannot drift from the behaviour.
// When adding a rule, prefer false negatives to false positives: the
// agent must stay free to explore, and the container is the security
// boundary.

var rules = []Rule{
	// unparseable blocks a command that is not valid shell (bash -c would
	// refuse it too: nothing of it runs, so nothing is lost) and one the
	// analysis cannot follow to the end: brackets or substitutions nested
	// deeper than internal/shell parses (1000 brackets, 32 substitutions),
	// scripts run by scripts more than 8 levels deep (bash -c "eval '…'"),
	// more than 256 scripts (substitutions, bash -c, eval …) in one
	// command, or 64 wrappers or more around one command (sudo sudo …).
	// A script that is understood only in part cannot be judged, so it is
	// refused rather than let through. The same holds for code a command
	// runs (bash -c 'echo (' is refused); command lines found by reading
	// another language (os.system("…") in Python, awk's system(), sed's
	// e, a git alias, gdb's shell …) are read best effort and skipped
	// when they do not parse.
	// Allowed: every command bash accepts, however unusual its quoting.
	{
		ID:          "unparseable",
		Description: "a command that is not valid shell (bash would refuse it too) or nests deeper than the analysis follows; a script understood only in part cannot be judged",
		Denies:      []string{"echo 'unterminated", "rm -rf / )", "if true; then rm -rf /", `bash -c 'echo $('`, "eval eval eval eval eval eval eval eval eval ls"},
		Allows:      []string{`echo "(" ')' \;`, "a=(1 2 3); echo ${a[@]}", "cat <<'EOF'\n)(\nEOF", `bash -c 'echo "$(date)"'`},
	},

	// rm_root blocks a recursive rm (-r, -R, --recursive, any cluster
	// such as -rf, -fr, -vRf, options before or after the operands) whose
	// target is:
	//   - / itself, /*, /., //, /usr/.. and so on (after normalisation);
	//   - ~, $HOME, ${HOME} (taken as /root, whatever the container's
	//     user), ~root (/root) or ~/*;
	//   - a top-level system directory: /bin /boot /dev /etc /home /lib
	//     /lib32 /lib64 /libx32 /proc /root /sbin /sys /usr /var, itself
	//     or all of its content (/usr/*, /var/.*), or a glob matching one
	//     (/u*);
	//   - the run's work directory /work itself or all of it (/work/,
	//     /work/*, `rm -rf .` or `rm -rf *` with cwd /work), and /input.
	// It also blocks any rm with --no-preserve-root; find -delete, or find
	// -exec rm -r {}, on such a target with no test narrowing what find
	// selects (find / -delete; find /work -name '*.pyc' -delete is fine);
	// python/perl/ruby/node code removing such a tree (shutil.rmtree('/'),
	// FileUtils.rm_rf, fs.rmSync) or running rm through system(…); and a
	// command word of unknown value ($(cat f), ${X}) given rm's
	// arguments: a recursive and a force flag and such a target — no
	// ordinary program is called with -rf / — or followed by an rm this
	// rule denies ($SUDO rm -rf /: the word may be empty).
	// Allowed: anything below those directories (rm -rf /work/build,
	// ./build, /tmp/*, /var/lib/apt/lists/*, ~/.cache/pip, /usr/local/x),
	// non-recursive rm, and targets whose value is unknown ($DIR/*).
	{
		ID:          "rm_root",
		Description: "recursive rm of /, ~, a top-level system directory, or the whole /work (or rm --no-preserve-root), also through find -delete, interpreter code (shutil.rmtree) or a command word of unknown value given -rf; anything below them is allowed",
		Denies: []string{"rm -rf /", "sudo rm -fr /*", "rm -r -f ~", "rm -rf /usr/", "rm -rf /work/*", "rm --no-preserve-root -rf /",
			"echo / | xargs -I{} rm -rf {}", "printf '%s' 'rm -rf /' | sh", "$(cat f) -rf /", "${RM} -fr /usr", "$SUDO rm -rf /",
			"find / -delete", "find /usr -depth -delete", "find / -maxdepth 1 -exec rm -rf {} +",
			`python3 -c "import shutil; shutil.rmtree('/')"`, `python3 -c "import os; os.system('rm -rf /')"`,
			`python3 -c "import subprocess; subprocess.run(['rm', '-rf', '/etc'])"`, `perl -e 'system("rm -rf /")'`,
			`ruby -e 'FileUtils.rm_rf("/")'`, "node -e \"require('child_process').execSync('rm -rf ~')\"",
			"setpriv --reuid=0 rm -rf /", "unshare -r rm -rf /", "script -qc 'rm -rf /' /dev/null",
			"parallel rm -rf ::: /", "sg root -c 'rm -rf /'", "nsenter -t 1 -m rm -rf /", "strace -f rm -rf /",
			"{rm,-rf,/}", "alias x=rm; x -rf /", `a=(rm -rf /); "${a[@]}"`, `set -- -rf /; rm "$@"`, `f(){ rm -rf "$1"; }; f /`,
			`sh -c 'rm -rf "$1"' _ /`, "printf -v X /; rm -rf $X", "rm -rf ${X:-/}", "rm -rf ~root", "cd /; rm -rf ~+",
			"cd /; cd /tmp; cd -; rm -rf *", "CDPATH=/ cd etc; rm -rf *", "source <(echo 'rm -rf /')",
			`BASH_ENV=<(echo 'rm -rf /') bash -c ls`, `echo -e 'rm -rf \x2f' | sh`, `awk 'BEGIN{system("rm -rf /")}'`,
			`echo x | sed 's/.*/rm -rf \//e'`, "ed -s f <<< '!rm -rf /'", `git -c alias.x='!rm -rf /' x`,
			`tar -cf /dev/null x --checkpoint-action=exec='rm -rf /'`, `rsync -e 'sh -c "rm -rf /"' a b:`,
			"chrt -f 1 rm -rf /", "setarch x86_64 rm -rf /", "linux64 rm -rf /", "valgrind rm -rf /", `gdb -batch -ex 'shell rm -rf /'`,
			"gdb --args rm -rf /", "echo 'rm -rf /' | at now", `expect -c 'spawn rm -rf /'`, "perf stat -- rm -rf /"},
		Allows: []string{"rm -rf /work/tmp", "rm -rf ./build", "rm -rf /tmp/*", "rm -rf /var/lib/apt/lists/*", "rm -f /etc/motd",
			"echo /tmp/x | xargs -I{} rm -rf {}", "printf '%s\\n' 'rm -rf /' > /work/x.txt", "$CC -o app main.c", `"$PYTHON" -m pytest -x /work/tests`,
			"find /work -name '*.pyc' -delete", "find / -name core -delete", "find /tmp -mindepth 1 -delete",
			`python3 -c "import shutil; shutil.rmtree('/work/build')"`, `python3 -c "print('shutil.rmtree(\'/\')')"`,
			"parallel gzip ::: /work/a.log /work/b.log", "script -qc 'ls /' /dev/null",
			"echo {a,b}", "mkdir -p /work/src/{a,b}", "alias ll='ls -l'; ll /", `f(){ rm -rf "$1"; }; f /tmp/x`,
			"rm -rf ${BUILD:-/tmp/build}", "cd /; cd /tmp; rm -rf *", `echo -e 'a\tb'`, "awk '{print}' f", "sed -e s/a/b/ f",
			"git log", "tar xf a.tar", "gdb --version", "source .venv/bin/activate"},
		check: checkRmRoot,
	},

	// mkfs blocks creating file systems and rewriting partition tables,
	// signatures or whole devices: mkfs, mkfs.*, mke2fs, mkswap,
	// mkdosfs, mkntfs, mkreiserfs, mkjfs, mkudffs, blkdiscard,
	// flash_erase; wipefs when it erases (-a, --all, -o); fdisk, cfdisk,
	// sfdisk on a device unless listing/dumping (-l, -d, -J, …), a script
	// fed on stdin included; parted on a device interactively or with a
	// modifying command (mklabel, mkpart, rm, resizepart, …); sgdisk
	// --zap/--zap-all/--clear/--delete; cryptsetup luksFormat, erase,
	// luksErase, reencrypt, luksKillSlot, plainOpen/create and open
	// --type plain; pvcreate, pvremove, vgcreate, vgextend, vgremove,
	// lvremove (also as lvm SUBCOMMAND, not with --test); nvme format,
	// sanitize, delete-ns, write-zeroes; hdparm --security-erase(-enhanced),
	// --trim-sector-ranges, --write-sector, --fwdownload …; zpool create,
	// labelclear, destroy (not -n); mdadm --create/-C, --build,
	// --zero-superblock; badblocks -w; sg_format --format, sg_sanitize;
	// flashrom -w/-E.
	// Allowed: listing and inspecting (fdisk -l, sfdisk -d, parted -l,
	// parted /dev/sda print, wipefs /dev/sda, cryptsetup status/luksDump,
	// pvs, nvme list, hdparm -I, zpool status, mdadm --detail, badblocks
	// -sv), opening a LUKS volume, lvcreate, --help/--version, and any
	// mention of these names that is not the command being run (which
	// mkfs, grep mkfs …, python3 -c "print('mkfs')", apt-get install
	// dosfstools).
	{
		ID:          "mkfs",
		Description: "creating file systems or rewriting partition tables, signatures or whole devices (mkfs*, mke2fs, mkswap, wipefs -a, fdisk/sfdisk/parted/sgdisk writing, cryptsetup luksFormat/erase, pvcreate, nvme format, hdparm --security-erase, zpool create, mdadm --create); listing is allowed",
		Denies: []string{"mkfs.ext4 /dev/sdb1", "sudo mkfs -t xfs /dev/nvme0n1", "wipefs -a /dev/sda", "parted -s /dev/sda mklabel gpt", `ruby -e 'system("mkfs.ext4 /dev/sda")'`,
			"cryptsetup luksFormat /dev/sda1", "cryptsetup erase /dev/sda1", "cryptsetup open --type plain /dev/sda x", "pvcreate /dev/sdb",
			"sgdisk -Z /dev/sda", "nvme format /dev/nvme0n1", "nvme sanitize /dev/nvme0 -a 2", "hdparm --security-erase p /dev/sda",
			"zpool create tank /dev/sdb", "zpool labelclear -f /dev/sdb", "mdadm --create /dev/md0 -l1 -n2 /dev/sda /dev/sdb",
			"mdadm --zero-superblock /dev/sda1", "mkdosfs /dev/sdc1", "printf 'o\\nw\\n' | fdisk /dev/sda"},
		Allows: []string{"fdisk -l", "parted /dev/sda print", "which mkfs.ext4", `python3 -c "print('mkfs')"`, "cryptsetup luksDump /dev/sda1",
			"cryptsetup open /dev/sda1 data", "pvs", "lvcreate -L 1G -n x vg0", "nvme list", "hdparm -I /dev/sda", "zpool status",
			"mdadm --detail /dev/md0", "sgdisk -p /dev/sda"},
		check: checkMkfs,
	},

	// dd_block_device blocks raw writes to a block device: dd of=DEV,
	// output redirections (>, >>, &>, <>, …) to DEV, tee DEV, cp/mv/
	// install … DEV, shred DEV, and a program's own script writing DEV
	// (sed's w, awk's print > "DEV", ed's w), where DEV is /dev/sd*, /dev/hd*,
	// /dev/vd*, /dev/xvd*, /dev/nvme*, /dev/mmcblk*, /dev/dm-*,
	// /dev/mapper/*, /dev/loop*, /dev/md*, /dev/disk/*, /dev/root,
	// /dev/mem, /dev/kmem or /dev/port (after normalising //dev//sda).
	// Allowed: reading a device (dd if=/dev/sda of=/work/mbr.bin),
	// writing files and pseudo-devices (of=/work/file, of=/dev/null,
	// > /dev/stderr, /dev/tty, /dev/shm/x).
	{
		ID:          "dd_block_device",
		Description: "writing to a block device (dd of=/dev/sda, > /dev/nvme0n1, tee/cp/shred to one); reading devices and writing files or /dev/null is allowed",
		Denies: []string{"dd if=/dev/zero of=/dev/sda bs=1M", "cat image.iso > /dev/sdb", "sudo dd if=x.img of=//dev//nvme0n1", "cat x > /dev/s?a", "cat x | tee /dev/sd[ab]",
			"shred -n 1 /dev/sda", "sed -n 'w /dev/sda' x"},
		Allows: []string{"dd if=/dev/zero of=/work/file bs=1M count=1", "dd if=/dev/sda of=/work/mbr.bin count=1", "dd if=/work/a of=/dev/null", "shred -u /work/secret.txt"},
		check:  checkBlockDevice,
	},

	// fork_bomb blocks a shell function that calls itself at least twice
	// with a pipe or in the background — the classic :(){ :|:& };: and
	// any renamed or reformatted variant (bomb(){ bomb|bomb& };bomb,
	// function f { f & f & }) — wherever it appears (bash -c, eval, …);
	// a shell loop without end (while :, while true, while [ 1 ], until
	// false, for ((;;))) whose body only starts commands in the
	// background (while :; do $0 & done); and, in interpreter code, a
	// loop that forks forever: fork as a loop's statement or condition
	// with a constant condition (fork while 1, fork while fork, 1 while
	// fork, fork until 0, {fork; redo}) or an endless loop around fork,
	// spawn or popen (while True: os.fork(), while(1){fork}, for(;;),
	// loop { fork }, iter(int, 1), itertools.count()).
	// Allowed: ordinary recursion (a function calling itself once, or
	// twice without | or &), background jobs and pipelines that are not
	// self-recursive, endless loops that wait or sleep in the foreground
	// (while true; do sleep 1 & wait; done), bounded loops (for i in 1 2
	// 3; do x & done), a single fork, and the text of a fork bomb inside
	// quotes (grep, echo).
	{
		ID:          "fork_bomb",
		Description: "fork bombs: a function that pipes/backgrounds itself into itself (:(){ :|:& };: and renamed variants), an endless shell loop that only starts background jobs, and interpreter loops that fork forever",
		Denies: []string{":(){ :|:& };:", "bomb() { bomb | bomb & }; bomb", `perl -e "fork while fork"`, `perl -e 'fork while 1'`,
			`perl -e '1 while fork'`, "python3 -c 'import os\nwhile True: os.fork()'", `ruby -e 'loop { fork }'`, "while :; do $0 & done",
			"while true; do sleep 1 & done"},
		Allows: []string{"f() { echo hi; }; f", "grep ':(){ :|:& };:' notes.txt", "sleep 10 & wait", `perl -e 'print 1'`,
			`perl -e 'my $p = fork; waitpid($p, 0)'`, "while true; do date; sleep 5; done", "for i in 1 2 3; do sleep 1 & done; wait"},
		check:       checkForkIdiom,
		checkScript: checkForkBombs,
	},

	// shutdown blocks stopping, restarting or suspending the machine and
	// killing every process: shutdown, reboot, halt, poweroff,
	// pm-suspend, pm-hibernate, zzz (except --help); init/telinit 0, 6, 1
	// or s; systemctl reboot|poweroff|halt|kexec|soft-reboot|suspend|
	// hibernate|hybrid-sleep|sleep|rescue|emergency, systemctl isolate
	// of any target, and start/restart of a unit that stops the machine
	// (reboot.target, systemd-poweroff.service, ctrl-alt-del.target …);
	// loginctl poweroff|reboot|halt|suspend|hibernate|… and
	// kill-user/terminate-user/-session/-seat; a D-Bus call (busctl,
	// dbus-send, gdbus, qdbus) of logind's or systemd's PowerOff, Reboot,
	// Halt, KExec, Suspend … or StartUnit of such a unit; kexec -e; kill
	// with pid -1 (every process) or 1 (init) with any signal but 0;
	// killall5; pkill or killall with a pattern that matches every name
	// (pkill ., killall -r '.*') or only a user (pkill -u root); and
	// writing /proc/sysrq-trigger (a redirection, tee, dd of=, cp,
	// interpreter code, a program's script).
	// Allowed: the words in arguments (grep reboot notes.txt, last
	// reboot), systemctl status/start of an ordinary unit, loginctl
	// list-sessions, D-Bus queries (CanPowerOff), kexec -l, kill of a
	// specific pid or job (kill -9 1234, kill %1), kill -0 1,
	// pkill/killall of a named process, and a local program called
	// ./reboot.
	{
		ID:          "shutdown",
		Description: "shutdown/reboot/halt/poweroff/suspend (also through systemctl, loginctl, init, D-Bus calls to logind or systemd, kexec -e, /proc/sysrq-trigger), kill -9 -1 (all processes), kill 1, pkill of every process; mentioning them or killing a specific pid is allowed",
		Denies: []string{"sudo reboot", "shutdown -h now", "systemctl poweroff", "kill -9 -1", "init 6",
			`python3 -c "import os; os.system('reboot')"`, "nsenter -t 1 -m -u reboot", "echo b > /proc/sysrq-*",
			"loginctl poweroff", "loginctl suspend", "systemctl kexec", "systemctl emergency", "systemctl isolate rescue.target", "telinit 0",
			"busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager PowerOff b false",
			"dbus-send --system --dest=org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager.Reboot boolean:true",
			"kill -SIGTERM -1", "kill -9 1", "pkill -9 .", "kexec -e", "dd of=/proc/sysrq-trigger <<< b"},
		Allows: []string{"grep reboot notes.txt", "systemctl status nginx", "kill -9 12345", "last reboot", `python3 -c "print('reboot')"`,
			"loginctl list-sessions", "systemctl start nginx", "pkill -f 'python server.py'", "kexec -l /boot/vmlinuz",
			"busctl call org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager CanPowerOff"},
		check: checkShutdown,
	},

	// notes_md blocks anything that writes, moves, truncates or deletes
	// /work/notes.md (or notes.md relative to a working directory of
	// /work), where the notes file used to be. The notes are not a file
	// in the sandbox: VERA keeps notes.md outside it, shows it to the
	// model every turn, and adds to it only through the notes_append
	// action. /work/notes.md is now an ordinary file of the model's, but
	// a write to it is almost always meant for the notes, and would never
	// reach them. The rule is feedback to the model, not a protection:
	// its reason says where the notes are and how to add to them. Every
	// write from a shell command is refused, appends included:
	//   - output redirections to it: >, >>, >|, &>, &>>, <>, n>, exec 3>>;
	//   - rm, unlink, shred, truncate, sponge, patch, tee (with or without
	//     -a) on it; chmod, chown, chgrp, chattr, setfacl of it; mv of a
	//     directory holding it (mv /work /tmp/x; rm -rf /work is rm_root's);
	//   - mv from it or over it; cp, install, rsync, ln (-sf) over it,
	//     including cp/mv x/notes.md /work/;
	//   - in-place editors: sed -i/--in-place, perl -i/-pi, awk -i inplace;
	//   - a program's own script writing it: sed's w and W (and s///w),
	//     awk's print > "file", ed's, ex's and vim's w (or w with no name
	//     when it is the file being edited); find -fprint/-fprintf/-fls;
	//   - dd of=, curl -o, wget -O, sort -o naming it;
	//   - python/perl/ruby/node/php inline code (-c/-e/-r or a here-doc)
	//     that names it literally in the same statement as a write (open
	//     with mode w/a/x/+, > or >>, write_text, os.remove, unlink,
	//     writeFileSync, …). This part is best effort.
	//   - find -delete, or find -exec … {}, whose starting point holds it
	//     and whose -name/-path/-type tests may select it (find /work
	//     -name '*.md' -delete; -regex is not evaluated);
	// In every write target — redirection, operand or option — a glob or
	// brace list that may expand to it counts as naming it: > /work/n?tes.md,
	// > no*.md, > [n]otes.md, > /work/*, tee /work/{notes,x}.md, cp x
	// /w*/notes.md (bash expands a redirection's glob when it matches one
	// file). A target whose value is unknown ($OUT, $(…)) does not.
	// Allowed: every read (cat, grep, head, tail, wc, less, diff, sed
	// without -i, cp /work/notes.md elsewhere, < /work/notes.md, python
	// open() for reading), other files with similar names
	// (/work/notes.md.bak, /work/sub/notes.md, ./notes.md when the working
	// directory is not /work), and the mere mention of the name in text
	// (echo "see notes.md" >> /work/summary.md).
	{
		ID:          "notes_md",
		Description: "writing, moving, truncating or deleting /work/notes.md (even >> is refused), as feedback: the notes are not a file in the sandbox (VERA keeps notes.md outside it, shows it to the model every turn, and adds to it with notes_append); reading it is allowed",
		Denies: []string{"rm /work/notes.md", "echo x >> /work/notes.md", "sed -i 's/a/b/' notes.md", "mv /tmp/n.md /work/notes.md", "tee -a /work/notes.md",
			"echo x > /work/n?tes.md", "echo x > no*.md", "echo x > [n]otes.md", "echo x >> /work/*", "echo x > /work/{notes,x}.md",
			"cat x | tee /w*/notes.md", "cp x /work/[!x]otes.md", "truncate -s0 /work/*.md", "sed -i d /work/no?es.md",
			"find /work -name '*.md' -delete", "find /work -maxdepth 1 -type f -newer x -delete", "find /work -name notes.md -exec rm {} \\;",
			`python3 -c "import os; os.system('echo > /work/notes.md')"`,
			"cd /work && truncate -s0 notes.md", "sed -n 'w /work/notes.md' x", `awk '{print > "/work/notes.md"}' x`,
			"ed -s /work/notes.md <<< $'1d\\nw\\nq'", "vim -c 'w! /work/notes.md' -c q x", "mv /work /tmp/x"},
		Allows: []string{"cat /work/notes.md", "cp /work/notes.md /tmp/x", `echo "see notes.md" >> /work/summary.md`, "grep -c TODO notes.md",
			"echo x > /work/n?tes.txt", "echo x > /tmp/*.md", "echo x > '$OUT'", "cat /work/n*.md", "find /work -name '*.pyc' -delete",
			"find /work/build -type f -delete", "find /work -type d -empty -delete", "cp /work/*.md /tmp/",
			"sed -n 'w /work/out.txt' x", "echo x > /work/sub/notes.md", "cd /tmp && echo x > notes.md"},
		check: checkNotes,
	},

	// decoded_script blocks a shell or interpreter that runs code decoded,
	// decrypted or decompressed on its way in: a shell (bash, sh …),
	// source /dev/stdin or python/perl/… with no program argument reading
	// a pipeline in which base64/base32 -d, xxd -r, openssl … -d,
	// uudecode, gunzip/zcat/xz -d/…, rev or interpreter code that decodes
	// (b64decode, unhexlify …) runs; and eval, bash -c, xargs … sh -c or
	// a script argument whose code comes from such a decoder through a
	// substitution. It also blocks interpreter code (python -c, perl -e,
	// ruby -e, node -e, php -r, or a here-document fed to them) that runs
	// code or a command it decodes: a code sink (exec, eval, compile, new
	// Function, instance_eval, create_function …) in code that calls a
	// decoder (b64decode, codecs.decode(…, 'rot13'), bytes.fromhex,
	// zlib.decompress, atob, Buffer.from(…, 'base64'), decode_base64,
	// pack, unpack, chr, str_rot13, gzinflate, a [::-1] reversal …), or a
	// call running a command (os.system, subprocess, execSync, system,
	// shell_exec …) whose argument decodes. Such code is hidden on
	// purpose and cannot be read before it runs. Code piped from other
	// producers (curl … | sh, cat script | bash) is not judged either
	// way: the rules see only what the command line shows, and the
	// container carries the rest.
	// Allowed: decoding into a file or another program (base64 -d x >
	// y.bin, … | tar -x), printing what is decoded (python3 -c 'print(
	// base64.b64decode(x))'), exec or eval of code that decodes nothing,
	// and echo/printf piped into a shell, whose code is visible and
	// analysed like any other.
	{
		ID:          "decoded_script",
		Description: "a shell or interpreter running code decoded or unpacked on the fly (… | base64 -d | sh, xxd -r | bash, eval \"$(… | base64 -d)\", python3 -c \"exec(base64.b64decode(…))\", eval(atob(…))): the code cannot be read before it runs",
		Denies: []string{"echo cm0gLXJmIC8K | base64 -d | sh", "base64 --decode payload.b64 | bash", "xxd -r -p x.hex | bash", "openssl enc -d -aes-256-cbc -in x.enc -k k | sh",
			"gunzip -c x.gz | bash", `eval "$(echo cm0gLXJmIC8K | base64 -d)"`, `bash -c "$(base64 -d <<< cm0gLXJmIC8K)"`, "sh <(base64 -d x.b64)",
			"cat x.b64 | base64 -d | sudo bash -s", "echo x | base64 -d | python3", "base64 -d x | xargs -I{} sh -c {}",
			`python3 -c "import base64;print(base64.b64decode('cm0gLXJmIC8K').decode())" | sh`,
			"base64 -d x | node", "base64 -d x | php", `python3 -c "exec(base64.b64decode('aW1wb3J0IG9z'))"`,
			`python3 -c "import codecs; exec(codecs.decode('vzcbeg bf', 'rot13'))"`, `python3 -c "exec(bytes.fromhex('7072696e74').decode())"`,
			`python3 -c "import zlib; exec(zlib.decompress(d))"`, `node -e "eval(atob('eA=='))"`, `perl -MMIME::Base64 -e 'eval decode_base64("eA==")'`,
			`ruby -e 'eval(Base64.decode64("eA=="))'`, `php -r 'eval(base64_decode("eA=="));'`},
		Allows: []string{"base64 -d blob.b64 > /work/blob.bin", "echo aGkK | base64 -d", "base64 -d x.b64 | tar -xz -C /work", "xxd -r -p x.hex > x.bin",
			"echo 'ls -la' | bash", "base64 x.sh | bash -c 'wc -c'", `python3 -c 'import base64; print(base64.b64decode(x))'`,
			`python3 -c "exec('print(1)')"`, `node -e "console.log(atob('aGk='))"`, `perl -MMIME::Base64 -e 'print decode_base64("aGk=")'`},
		check: checkDecoded,
	},

	// chmod_root blocks a recursive change of modes, owners, ACLs,
	// attributes or security contexts — chmod, chown, chgrp, setfacl,
	// chattr, chcon with -R or --recursive — of / or of a top-level
	// system directory (the rm_root list minus /work, /input and /home:
	// /root and ~root included), itself or its whole content.
	// Allowed: recursive changes below them or in the work tree (chown -R
	// 1000:1000 /work, setfacl -R -m u:x:rwx /work, chattr -R +i
	// /work/data), non-recursive changes (chmod 644 /etc/hosts, setfacl
	// -m u:x:r /work/f, chattr +i /work/f; note chmod -r is a mode, not
	// recursion), and reading (getfacl -R /, lsattr -R /etc).
	{
		ID:          "chmod_root",
		Description: "recursive chmod/chown/chgrp/setfacl/chattr/chcon of / or a top-level system directory; the work tree and anything deeper are allowed",
		Denies: []string{"chmod -R 777 /", "sudo chown -R nobody:nogroup /usr", "setfacl -R -m u:nobody:rwx /", "setfacl --recursive -b /etc",
			"chattr -R +i /", "chgrp -R nogroup /usr", "chown -R x ~root", "chcon -R -t tmp_t /"},
		Allows: []string{"chown -R 1000:1000 /work", "chmod -R 755 /work/bin", "chmod -r /work/secret", "setfacl -m u:x:r /work/f",
			"chattr +i /work/f", "setfacl -R -m u:x:rwx /work", "getfacl -R /"},
		check: checkChmodRoot,
	},
}

// ---------------------------------------------------------------------
// rm_root and chmod_root

// systemDirs are the top-level directories a recursive rm/chmod/chown of
// which (or of all of whose content) is refused.
var systemDirs = []string{
	"/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32",
	"/proc", "/root", "/sbin", "/sys", "/usr", "/var",
}

// rmOnlyDirs are additionally protected against rm -r (but chown -R /work
// is a legitimate fix for root-owned files in the work dir).
var rmOnlyDirs = []string{"/work", "/input", "/home"}

// wildcardOnly reports whether a path component is only a wildcard (*,
// .*, ?*, .[!.]*): it stands for all the content of its directory.
func wildcardOnly(c string) bool {
	if !strings.ContainsAny(c, "*?") {
		return false
	}
	for i := 0; i < len(c); i++ {
		if isNameChar(c[i]) {
			return false
		}
	}
	return true
}

// wipesProtected reports whether abs (absolute, cleaned, maybe a glob) is
// /, a protected directory, all of one's content, or a glob matching one.
func wipesProtected(abs string, withRmOnly bool) bool {
	protected := func(p string) bool {
		return p == "/" || slices.Contains(systemDirs, p) || (withRmOnly && slices.Contains(rmOnlyDirs, p))
	}
	base := abs
	for base != "/" {
		dir, last := path.Split(base)
		if !wildcardOnly(last) {
			break
		}
		base = path.Clean(dir)
	}
	if protected(base) {
		return true
	}
	if shell.HasGlob(abs) {
		for _, d := range systemDirs {
			if globMatch(abs, d) {
				return true
			}
		}
		for _, d := range rmOnlyDirs {
			if withRmOnly && globMatch(abs, d) {
				return true
			}
		}
	}
	return false
}

// protectedTarget returns the first operand that wipes a protected path.
func protectedTarget(inv *invocation, ops []string, withRmOnly bool) string {
	for _, op := range ops {
		for _, alt := range braceExpand(op) {
			if abs, ok := inv.abs(alt); ok && wipesProtected(abs, withRmOnly) {
				if abs != op {
					return fmt.Sprintf("%q (%s)", op, abs)
				}
				return fmt.Sprintf("%q", op)
			}
		}
	}
	return ""
}

func checkRmRoot(inv *invocation) string {
	if inv.name == "find" {
		if f := parseFind(inv); f.delete {
			if t := f.wipes(); t != "" {
				return "find -delete of " + t + " with no test narrowing what it selects: /, ~, a top-level system directory or the whole work dir"
			}
		}
		return ""
	}
	if inv.name != "rm" {
		return ""
	}
	p := shell.ParseArgs(inv.args, "")
	if p.HasLongAbbrev("no-preserve-root", 3) {
		return "rm with --no-preserve-root"
	}
	if !p.Has('r') && !p.Has('R') && !p.HasLongAbbrev("recursive", 3) {
		return ""
	}
	if t := protectedTarget(inv, p.Ops, true); t != "" {
		return "recursive rm of " + t + ": /, ~, a top-level system directory or the whole work dir"
	}
	return ""
}

// recursiveOwnerOpts are, per command that changes ownership, modes,
// attributes, ACLs or security contexts, its short options taking a
// value and its long ones taking a separate value.
var recursiveOwnerOpts = map[string][]string{
	"chmod":   {""},
	"chown":   {""},
	"chgrp":   {""},
	"chattr":  {"vp"},
	"setfacl": {"mMxX", "modify", "modify-file", "remove", "remove-file", "set", "set-file"},
	"chcon":   {"urtl", "user", "role", "type", "range"},
}

func checkChmodRoot(inv *invocation) string {
	opts, ok := recursiveOwnerOpts[inv.name]
	if !ok {
		return ""
	}
	p := shell.ParseArgs(inv.args, opts[0], opts[1:]...)
	if !p.Has('R') && !p.HasLong("recursive") {
		return ""
	}
	if t := protectedTarget(inv, p.Ops, false); t != "" {
		return "recursive " + inv.name + " of " + t + ": / or a top-level system directory"
	}
	return ""
}

// ---------------------------------------------------------------------
// mkfs

var mkfsNames = []string{"mkfs", "mke2fs", "mke4fs", "mkswap", "mkdosfs", "mkfatfs", "mkntfs", "mkexfatfs", "mkexfat",
	"mkreiserfs", "mkjfs", "mkudffs", "mkbtrfs", "blkdiscard", "flash_erase", "flash_eraseall"}

// lvmWrites are LVM commands that write or remove physical volume labels
// or volumes.
var lvmWrites = []string{"pvcreate", "pvremove", "vgcreate", "vgextend", "vgremove", "lvremove"}

// cryptsetupWrites are cryptsetup actions that overwrite a device's
// header or content (open of a plain mapping hands its raw sectors out).
var cryptsetupWrites = []string{"luksformat", "erase", "lukserase", "reencrypt", "plainopen", "create", "lukskillslot"}

// nvmeWrites are nvme-cli commands that erase or overwrite a namespace.
var nvmeWrites = []string{"format", "sanitize", "delete-ns", "write-zeroes", "write-uncor"}

// hdparmWrites are hdparm's erasing and sector-writing options.
var hdparmWrites = []string{"--security-erase", "--security-erase-enhanced", "--trim-sector-ranges",
	"--trim-sector-ranges-stdin", "--write-sector", "--make-bad-sector", "--dco-restore", "--fwdownload",
	"--fwdownload-mode3", "--fwdownload-mode3-max", "--fwdownload-mode7"}

// checkDiskTools covers the disk tools besides mkfs and partitioners:
// cryptsetup, LVM, nvme, hdparm, zpool, mdadm, badblocks -w, sg_format.
func checkDiskTools(inv *invocation) string {
	n := inv.name
	if onlyHelp(inv.args) {
		return ""
	}
	switch {
	case n == "cryptsetup":
		p := shell.ParseArgs(inv.args, "chsdSilopbTtM", "type", "cipher", "hash", "key-size", "key-file", "key-slot",
			"iter-time", "keyfile-size", "offset", "skip", "size", "tries", "timeout", "header", "label", "subsystem",
			"pbkdf", "sector-size", "uuid", "integrity", "keyfile-offset", "new-keyfile", "master-key-file",
			"volume-key-file", "pbkdf-memory", "pbkdf-parallel", "pbkdf-force-iterations", "luks2-metadata-size",
			"luks2-keyslots-size", "resilience", "hotzone-size", "reduce-device-size", "device-size")
		if len(p.Ops) == 0 || p.HasLong("test-passphrase") {
			return ""
		}
		action := strings.ToLower(p.Ops[0])
		if slices.Contains(cryptsetupWrites, action) {
			return "cryptsetup " + p.Ops[0] + " overwrites the device"
		}
		if t, _ := p.Value("M", "type"); (action == "open" || action == "luksopen") && strings.EqualFold(t, "plain") {
			return "cryptsetup open --type plain maps the raw device for writing over it"
		}
	case n == "lvm" && len(inv.args) > 0 && slices.Contains(lvmWrites, inv.args[0]):
		sub := &invocation{name: inv.args[0], args: inv.args[1:], cwd: inv.cwd}
		return checkDiskTools(sub)
	case slices.Contains(lvmWrites, n):
		p := shell.ParseArgs(inv.args, "")
		if len(p.Ops) == 0 || p.Has('t') || p.HasLong("test") {
			return ""
		}
		return n + " writes or removes LVM labels or volumes"
	case n == "nvme":
		p := shell.ParseArgs(inv.args, "")
		if len(p.Ops) > 0 && slices.Contains(nvmeWrites, p.Ops[0]) && !p.Has('h') {
			return "nvme " + p.Ops[0] + " erases the namespace"
		}
	case n == "hdparm":
		for _, a := range inv.args {
			name, _, _ := strings.Cut(a, "=")
			if slices.Contains(hdparmWrites, name) {
				return "hdparm " + name + " erases or overwrites the disk"
			}
		}
	case n == "zpool":
		p := shell.ParseArgs(inv.args, "omOR")
		if len(p.Ops) > 0 && (p.Ops[0] == "create" || p.Ops[0] == "labelclear" || p.Ops[0] == "destroy") && !p.Has('n') {
			return "zpool " + p.Ops[0] + " overwrites or destroys a pool's devices"
		}
	case n == "mdadm":
		for _, a := range inv.args {
			if a == "-C" || a == "--create" || strings.HasPrefix(a, "--create=") || a == "--zero-superblock" ||
				a == "-B" || a == "--build" {
				return "mdadm " + a + " overwrites the member devices"
			}
		}
	case n == "badblocks":
		if p := shell.ParseArgs(inv.args, "bcdeiopt"); p.Has('w') {
			return "badblocks -w overwrites the device"
		}
	case n == "sg_format" || n == "sg_sanitize":
		p := shell.ParseArgs(inv.args, "")
		if p.Has('F') || p.HasLong("format") || n == "sg_sanitize" && (p.Has('B') || p.Has('C') || p.Has('O') ||
			p.HasLong("block", "crypto", "overwrite")) {
			return n + " erases the device"
		}
	case n == "flashrom":
		p := shell.ParseArgs(inv.args, "pcrwvlio", "programmer", "chip", "read", "write", "verify", "layout", "image", "output")
		if p.Has('w') || p.Has('E') || p.HasLong("write", "erase") {
			return "flashrom writes or erases flash"
		}
	}
	return ""
}

var partedWrites = []string{
	"mklabel", "mktable", "mkpart", "mkpartfs", "mkfs", "rm", "resize", "resizepart",
	"rescue", "move", "cp", "set", "toggle", "name", "disk_set", "disk_toggle",
}

func checkMkfs(inv *invocation) string {
	n := inv.name
	switch {
	case slices.Contains(mkfsNames, n) || strings.HasPrefix(n, "mkfs."):
		if len(inv.args) == 0 || onlyHelp(inv.args) {
			return "" // prints its usage
		}
		return n + " creates a file system / erases a device"
	case n == "wipefs":
		p := shell.ParseArgs(inv.args, "otO", "offset", "types", "output", "backup")
		if p.Has('n') || p.HasLong("no-act") {
			return ""
		}
		if p.Has('a') || p.HasLong("all") || p.Has('o') || p.HasLong("offset") {
			return "wipefs erasing signatures"
		}
	case n == "fdisk" || n == "cfdisk" || n == "sfdisk":
		p := shell.ParseArgs(inv.args, "bcuLNoOwWXYSHt", "sector-size", "compatibility", "units", "color",
			"label", "label-nested", "output", "backup-file", "wipe", "wipe-partitions", "type", "lock")
		for _, c := range []byte("ldJsgFVvhrx") {
			if c == 'r' && n == "sfdisk" {
				continue // sfdisk -r reorders
			}
			if p.Has(c) {
				return ""
			}
		}
		if p.HasLong("list", "list-details", "dump", "json", "show-size", "show-geometry", "list-free",
			"verify", "version", "help", "list-types", "show-pt-geometry") || len(p.Ops) == 0 {
			return ""
		}
		return n + " on a device rewrites its partition table"
	case n == "parted":
		p := shell.ParseArgs(inv.args, "a", "align")
		if p.Has('l') || p.Has('h') || p.Has('v') || p.HasLong("list", "help", "version") || len(p.Ops) == 0 {
			return ""
		}
		if len(p.Ops) == 1 {
			return "interactive parted on " + p.Ops[0]
		}
		for _, w := range p.Ops[1:] {
			if slices.Contains(partedWrites, strings.ToLower(w)) {
				return "parted " + w + " rewrites the partition table"
			}
		}
	case n == "sgdisk":
		p := shell.ParseArgs(inv.args, "")
		if p.Has('z') || p.Has('Z') || p.Has('o') || p.Has('d') || p.HasLong("zap", "zap-all", "clear", "delete") {
			return "sgdisk wiping the partition table"
		}
	}
	return checkDiskTools(inv)
}

// ---------------------------------------------------------------------
// dd_block_device

var blockDevPrefixes = []string{
	"/dev/sd", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/nvme", "/dev/mmcblk", "/dev/dm-",
	"/dev/mapper/", "/dev/loop", "/dev/md", "/dev/disk/",
}

var blockDevExact = []string{"/dev/root", "/dev/mem", "/dev/kmem", "/dev/port"}

// blockDevSamples are names a glob of a device target (/dev/s?a) is
// matched against.
var blockDevSamples = append([]string{
	"/dev/sda", "/dev/sda1", "/dev/hda", "/dev/vda", "/dev/vda1", "/dev/xvda", "/dev/xvda1", "/dev/nvme0n1",
	"/dev/nvme0n1p1", "/dev/mmcblk0", "/dev/mmcblk0p1", "/dev/dm-0", "/dev/loop0", "/dev/md0",
}, blockDevExact...)

// blockDevice returns the normalised device if target is a block device.
func blockDevice(inv *invocation, target string) string {
	abs, ok := inv.abs(target)
	if !ok || !strings.HasPrefix(abs, "/dev/") {
		return ""
	}
	if slices.Contains(blockDevExact, abs) {
		return abs
	}
	if shell.HasGlob(abs) {
		for _, d := range blockDevSamples {
			if globMatch(abs, d) {
				return abs
			}
		}
	}
	for _, p := range blockDevPrefixes {
		if strings.HasPrefix(abs, p) && len(abs) > len(p) || abs+"/" == p {
			return abs
		}
	}
	return ""
}

// copyDest returns the destination and sources of cp/mv/install/ln/rsync.
func copyDest(inv *invocation, p *shell.Options) (dest string, srcs []string, ok bool) {
	if t, has := p.Value("t", "target-directory"); has {
		return t, p.Ops, true
	}
	if len(p.Ops) >= 2 {
		return p.Ops[len(p.Ops)-1], p.Ops[:len(p.Ops)-1], true
	}
	if inv.name == "ln" && len(p.Ops) == 1 {
		return ".", p.Ops, true
	}
	return "", nil, false
}

func copyArgs(inv *invocation) shell.Options {
	switch inv.name {
	case "install":
		return shell.ParseArgs(inv.args, "tSmog", "target-directory", "suffix", "mode", "owner", "group")
	case "rsync":
		return shell.ParseArgs(inv.args, "eBfT", "rsh", "block-size", "filter", "temp-dir", "exclude", "include", "chmod", "chown")
	}
	return shell.ParseArgs(inv.args, "tS", "target-directory", "suffix")
}

func checkBlockDevice(inv *invocation) string {
	for _, r := range inv.redirs {
		if r.Output() {
			if dev := blockDevice(inv, r.target); dev != "" {
				return fmt.Sprintf("output redirection %s to block device %s", r.Op, dev)
			}
		}
	}
	for _, w := range inv.writes {
		if dev := blockDevice(inv, w); dev != "" {
			return inv.name + "'s script writing to block device " + dev
		}
	}
	switch inv.name {
	case "dd":
		for _, a := range inv.args {
			if of, ok := strings.CutPrefix(a, "of="); ok {
				if dev := blockDevice(inv, of); dev != "" {
					return "dd writing to block device " + dev
				}
			}
		}
	case "tee", "shred":
		for _, op := range shell.ParseArgs(inv.args, "ns", "iterations", "size").Ops {
			if dev := blockDevice(inv, op); dev != "" {
				return inv.name + " writing to block device " + dev
			}
		}
	case "cp", "mv", "install":
		p := copyArgs(inv)
		if dest, _, ok := copyDest(inv, &p); ok {
			if dev := blockDevice(inv, dest); dev != "" {
				return inv.name + " writing to block device " + dev
			}
		}
	}
	return ""
}

// ---------------------------------------------------------------------
// fork_bomb

// checkForkBombs applies checkForkBomb and checkSpawnLoop.
func checkForkBombs(s *shell.Script) (match, reason string) {
	if m, why := checkForkBomb(s); why != "" {
		return m, why
	}
	return checkSpawnLoop(s)
}

// checkForkBomb looks for a function definition whose body runs the
// function itself at least twice (in command position) and pipes or
// backgrounds a command.
func checkForkBomb(s *shell.Script) (match, reason string) {
	defs := 0
	for i, c := range s.Cmds {
		if c.Kind != shell.FuncDef || len(c.Words) == 0 {
			continue
		}
		if defs++; defs > 32 {
			break
		}
		name := c.Words[0].Value
		calls, spawn := 0, false
		for _, b := range s.Cmds[i+1 : min(len(s.Cmds), i+1+c.Body)] {
			if b.Kind != shell.Simple {
				continue
			}
			if b.Op == "|" || b.Op == "|&" || b.Op == "&" || b.PipeFrom != nil || b.Background {
				spawn = true
			}
			k := 0
			for k < len(b.Words) && shell.IsAssignment(b.Words[k].Value) {
				k++
			}
			if k < len(b.Words) && b.Words[k].Value == name {
				calls++
			}
		}
		if calls >= 2 && spawn {
			return c.Decl, fmt.Sprintf("fork bomb: function %q runs itself %d times with a pipe or in the background", name, calls)
		}
	}
	return "", ""
}

// forkLoops match, in interpreter code lowercased with blanks removed,
// a loop that forks forever: fork as the condition or the statement of a
// loop with a constant condition (fork while 1, 1 while fork, fork until
// 0, while(fork()) …), or a loop without end around a fork (while
// True: os.fork(), loop { fork }, for(;;){fork}, {fork; redo},
// iter(int, 1)).
var (
	forkModifier = regexp.MustCompile(`fork(\(\))?(while|until)\(?(1|true|fork|!0|0|false|not0)\b|(while|until)\(?((os|process)\.)?fork\b|fork[^;{}]{0,12};?redo`)
	endlessLoop  = regexp.MustCompile(`while\(?(true|1|!0|not0|:)\)?|until\(?(false|0)\)?|for\(;;\)|\bloop(do|\{)|\bdo\{|iter\(int,1\)|itertools\.(count|repeat|cycle)\(|\{[^{}]{0,40}redo`)
)

// checkForkIdiom looks for fork-loop idioms in inline interpreter code.
func checkForkIdiom(inv *invocation) string {
	for _, code := range inlineCodes(inv) {
		if !spawnsIn(strings.ToLower(code)) {
			continue
		}
		squashed := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, strings.ToLower(code))
		if forkModifier.MatchString(squashed) {
			return "fork bomb idiom in " + inv.name + " code: a loop that forks forever"
		}
		for _, m := range endlessLoop.FindAllStringIndex(squashed, 16) {
			window := squashed[max(0, m[0]-60):min(len(squashed), m[1]+60)]
			if spawnsIn(window) && !strings.Contains(squashed[m[1]:min(len(squashed), m[1]+80)], "break") {
				return "fork bomb idiom in " + inv.name + " code: an endless loop around fork"
			}
		}
	}
	return ""
}

// spawnsIn reports a call that starts a process without waiting for it
// (fork, spawn, popen, child_process.exec) in a piece of code.
func spawnsIn(code string) bool {
	return strings.Contains(code, "fork") || strings.Contains(code, "spawn(") || strings.Contains(code, "popen(") ||
		strings.Contains(code, ".exec(") || strings.Contains(code, "process.spawn")
}

// checkSpawnLoop looks for a shell loop without end whose body only
// starts commands in the background (while :; do $0 & done, while true;
// do sleep 1 & done): it starts processes as fast as it can, forever.
func checkSpawnLoop(s *shell.Script) (match, reason string) {
	for _, l := range s.Loops {
		if l.Start+l.Cond+l.Body > len(s.Cmds) || !endlessCondition(s.Cmds[l.Start:l.Start+l.Cond], l.Until) {
			continue
		}
		if spawnsOnly(s.Cmds[l.Start+l.Cond : l.Start+l.Cond+l.Body]) {
			kw := "while"
			if l.Until {
				kw = "until"
			}
			return kw + " … do … & done", "fork bomb: an endless " + kw + " loop that only starts commands in the background"
		}
	}
	for i, c := range s.Cmds {
		if c.Kind != shell.ForHeader || len(c.Words) > 0 || c.Body == 0 || i+1+c.Body > len(s.Cmds) {
			continue
		}
		if strings.TrimRight(squash(c.Raw), ";") == "for((;;))" && spawnsOnly(s.Cmds[i+1:i+1+c.Body]) {
			return c.Raw + " … & done", "fork bomb: an endless for loop that only starts commands in the background"
		}
	}
	return "", ""
}

func squash(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\t' || r == '\n' {
			return -1
		}
		return r
	}, s)
}

// endlessCondition reports a loop condition that always holds (while :,
// while true, while [ 1 ], while ((1))) or, for until, never does
// (until false).
func endlessCondition(cond []*shell.Cmd, until bool) bool {
	if len(cond) != 1 {
		return false
	}
	c := cond[0]
	holds, fails := false, false
	switch c.Kind {
	case shell.Arith:
		v := squash(c.Raw)
		holds, fails = v == "((1))" || v == "((true))", v == "((0))"
	case shell.Test:
		holds = len(c.Words) == 1 && c.Words[0].Literal() && c.Words[0].Value != ""
	case shell.Simple:
		if len(c.Words) == 0 {
			return false
		}
		nonEmpty := func(k int) bool { return c.Words[k].Literal() && c.Words[k].Value != "" }
		switch args := c.Args(); shell.CommandName(args[0]) {
		case ":", "true":
			holds = true
		case "false":
			fails = true
		case "[":
			holds = len(args) == 3 && nonEmpty(1) && args[2] == "]" ||
				len(args) == 5 && args[4] == "]" && sameOperands(c.Words[1:4])
		case "test":
			holds = len(args) == 2 && nonEmpty(1) || len(args) == 4 && sameOperands(c.Words[1:4])
		}
	}
	if c.Negated {
		holds, fails = fails, holds
	}
	if until {
		return fails
	}
	return holds
}

// sameOperands reports a test of two equal literals (1 -eq 1, x = x).
func sameOperands(w []shell.Word) bool {
	switch w[1].Value {
	case "=", "==", "-eq", "-le", "-ge":
		return w[0].Literal() && w[2].Literal() && w[0].Value == w[2].Value
	}
	return false
}

// spawnsOnly reports a loop body whose commands all run in the
// background (at least one).
func spawnsOnly(body []*shell.Cmd) bool {
	n := 0
	for _, c := range body {
		switch c.Kind {
		case shell.Simple:
			if !c.Background {
				if args := c.Args(); len(args) == 1 && (args[0] == ":" || args[0] == "true") {
					continue
				}
				return false
			}
			n++
		case shell.SubshellOpen, shell.SubshellClose:
		default:
			return false
		}
	}
	return n > 0
}

// ---------------------------------------------------------------------
// shutdown

var systemctlStop = []string{"reboot", "poweroff", "halt", "kexec", "soft-reboot", "suspend", "hibernate",
	"hybrid-sleep", "suspend-then-hibernate", "sleep", "rescue", "emergency"}

// stopUnits are the units whose start stops or suspends the machine
// (without their .target or .service suffix).
var stopUnits = []string{"reboot", "poweroff", "halt", "kexec", "soft-reboot", "suspend", "hibernate", "hybrid-sleep",
	"suspend-then-hibernate", "sleep", "rescue", "emergency", "ctrl-alt-del", "exit", "shutdown", "final",
	"systemd-reboot", "systemd-poweroff", "systemd-halt", "systemd-kexec", "systemd-soft-reboot", "systemd-suspend",
	"systemd-hibernate", "systemd-hybrid-sleep", "systemd-suspend-then-hibernate"}

// loginctlStop are loginctl's verbs that stop or suspend the machine or
// end every process of a user, session or seat.
var loginctlStop = []string{"poweroff", "reboot", "halt", "kexec", "suspend", "hibernate", "hybrid-sleep",
	"suspend-then-hibernate", "sleep", "kill-user", "terminate-user", "kill-session", "terminate-session",
	"terminate-seat"}

// powerMethods are the D-Bus methods of logind and systemd that stop or
// suspend the machine.
var powerMethods = []string{"PowerOff", "Reboot", "Halt", "KExec", "SoftReboot", "Suspend", "Hibernate",
	"HybridSleep", "SuspendThenHibernate", "Sleep", "PowerOffWithFlags", "RebootWithFlags", "HaltWithFlags",
	"KExecWithFlags", "SuspendWithFlags", "HibernateWithFlags", "HybridSleepWithFlags",
	"SuspendThenHibernateWithFlags", "SleepWithFlags", "Exit", "RebootWithParameter"}

// powerCommands stop or suspend the machine whatever their arguments.
var powerCommands = []string{"shutdown", "reboot", "halt", "poweroff", "pm-suspend", "pm-hibernate",
	"pm-suspend-hybrid", "zzz", "ZZZ", "s2ram", "s2disk", "s2both", "openrc-shutdown"}

const sysrq = "/proc/sysrq-trigger"

func isStopUnit(u string) bool {
	u = strings.TrimSuffix(strings.TrimSuffix(u, ".target"), ".service")
	return slices.Contains(stopUnits, u)
}

func checkShutdown(inv *invocation) string {
	for _, r := range inv.redirs {
		if r.Output() && inv.names(r.target, sysrq) {
			return "writing " + sysrq
		}
	}
	for _, w := range inv.writes {
		if inv.names(w, sysrq) {
			return "writing " + sysrq
		}
	}
	for _, code := range inlineCodes(inv) {
		if codeWritesFile(code, inv, sysrq) {
			return inv.name + " code writing " + sysrq
		}
	}
	switch n := inv.name; {
	case slices.Contains(powerCommands, n):
		if onlyHelp(inv.args) || (n == "shutdown" && slices.Contains(inv.args, "-c")) {
			return ""
		}
		return n + " stops the machine"
	case n == "init" || n == "telinit":
		if p := shell.ParseArgs(inv.args, ""); len(p.Ops) > 0 {
			switch p.Ops[0] {
			case "0", "6", "1", "s", "S", "single":
				return n + " " + p.Ops[0] + " stops the machine or every service"
			}
		}
	case n == "systemctl":
		p := shell.ParseArgs(inv.args, "HMtpsno", "host", "machine", "type", "property", "signal", "lines", "output", "root", "kill-whom", "job-mode", "when")
		if len(p.Ops) == 0 {
			return ""
		}
		if slices.Contains(systemctlStop, p.Ops[0]) {
			return "systemctl " + p.Ops[0] + " stops the machine"
		}
		switch p.Ops[0] {
		case "isolate":
			if len(p.Ops) > 1 {
				return "systemctl isolate " + p.Ops[1] + " stops every unit it does not need"
			}
		case "start", "restart", "try-restart", "reload-or-restart", "try-reload-or-restart", "enqueue-marked-jobs":
			for _, t := range p.Ops[1:] {
				if isStopUnit(t) {
					return "systemctl " + p.Ops[0] + " " + t + " stops the machine"
				}
			}
		}
	case n == "loginctl":
		p := shell.ParseArgs(inv.args, "HMpsn", "host", "machine", "property", "signal", "kill-whom", "lines", "output", "when")
		if len(p.Ops) > 0 && slices.Contains(loginctlStop, p.Ops[0]) {
			return "loginctl " + p.Ops[0] + " stops the machine or a user's processes"
		}
	case n == "busctl" || n == "dbus-send" || n == "gdbus" || n == "qdbus" || n == "qdbus6" || n == "dbus":
		return dbusPowerCall(inv)
	case n == "kexec":
		if p := shell.ParseArgs(inv.args, ""); p.Has('e') || p.HasLong("exec") {
			return "kexec -e reboots into another kernel"
		}
	case n == "killall5":
		if !onlyHelp(inv.args) {
			return "killall5 signals every process"
		}
	case n == "kill":
		return killEverything(inv.args)
	case n == "pkill" || n == "killall":
		return killByPattern(inv)
	case n == "tee":
		for _, op := range shell.ParseArgs(inv.args, "").Ops {
			if inv.names(op, sysrq) {
				return "writing " + sysrq
			}
		}
	case n == "dd":
		for _, a := range inv.args {
			if of, ok := strings.CutPrefix(a, "of="); ok && inv.names(of, sysrq) {
				return "writing " + sysrq
			}
		}
	case n == "cp" || n == "install":
		p := copyArgs(inv)
		if dest, _, ok := copyDest(inv, &p); ok && inv.names(dest, sysrq) {
			return "writing " + sysrq
		}
	}
	return ""
}

// dbusPowerCall reports a D-Bus call of logind's or systemd's methods
// that stop the machine (busctl call org.freedesktop.login1 …
// PowerOff, dbus-send … org.freedesktop.login1.Manager.Reboot).
func dbusPowerCall(inv *invocation) string {
	service := false
	for _, a := range inv.args {
		service = service || strings.Contains(a, "login1") || strings.Contains(a, "systemd1")
	}
	if !service {
		return ""
	}
	for k, a := range inv.args {
		m := a
		if i := strings.LastIndexByte(m, '.'); i >= 0 {
			m = m[i+1:]
		}
		if slices.Contains(powerMethods, m) {
			return inv.name + " calls " + m + " of logind or systemd: it stops the machine"
		}
		if strings.HasPrefix(m, "StartUnit") || m == "RestartUnit" {
			for _, u := range inv.args[k+1:] {
				if isStopUnit(strings.Trim(u, `"'`)) || strings.HasPrefix(u, "string:") && isStopUnit(u[len("string:"):]) {
					return inv.name + " starts " + u + ": it stops the machine"
				}
			}
		}
	}
	return ""
}

// killByPattern reports pkill or killall of every process: a pattern
// that matches any name, or only a user to select by.
func killByPattern(inv *invocation) string {
	short := "sgGuUtPFO" // pkill's
	if inv.name == "killall" {
		short = "sunoyZ"
	}
	p := shell.ParseArgs(inv.args, short, "signal", "session", "pgroup", "euid", "uid", "group", "terminal",
		"parent", "pidfile", "ns", "nslist", "cgroup", "user", "context", "older-than", "younger-than", "older")
	if onlyHelp(inv.args) || p.Has('l') && inv.name == "killall" && len(p.Ops) == 0 {
		return ""
	}
	regex := inv.name == "pkill" || p.Has('r') || p.HasLong("regexp")
	if len(p.Ops) == 0 {
		if _, ok := p.Value("u", "U", "user", "euid", "uid"); ok {
			return inv.name + " of every process of a user"
		}
		return ""
	}
	if !regex {
		return ""
	}
	for _, pat := range p.Ops {
		re, err := regexp.Compile(pat)
		if err != nil {
			continue
		}
		all := true
		for _, name := range []string{"init", "bash", "sh", "tail", "python3", "sleep", "x"} {
			all = all && re.MatchString(name)
		}
		if all {
			return fmt.Sprintf("%s of the pattern %q, which matches every process", inv.name, pat)
		}
	}
	return ""
}

// killEverything reports kill with pid -1 (every process) or 1 (init).
func killEverything(args []string) string {
	sig := "TERM"
	i := 0
	if len(args) > 0 {
		switch a := args[0]; {
		case a == "-l" || a == "-L" || a == "--list" || a == "--table" || strings.HasPrefix(a, "--list="):
			return ""
		case a == "-s" || a == "-n" || a == "--signal":
			if len(args) > 1 {
				sig = args[1]
			}
			i = 2
		case strings.HasPrefix(a, "--signal="):
			sig, i = a[len("--signal="):], 1
		case a == "--":
		case len(a) > 1 && a[0] == '-' && a != "-1":
			sig, i = a[1:], 1
		case a == "-1" && len(args) > 1:
			sig, i = "1", 1 // kill -1 PID: signal 1
		}
	}
	s := strings.TrimPrefix(strings.ToUpper(sig), "SIG")
	if s == "0" || s == "" {
		return ""
	}
	for ; i < len(args); i++ {
		switch args[i] {
		case "-1":
			return "kill -" + sig + " -1 signals every process"
		case "1":
			return "kill of PID 1 (the container's init)"
		}
	}
	return ""
}

// ---------------------------------------------------------------------
// notes_md

// notesHint tells the model where its notes are and how to add to them.
const notesHint = "; your notes are not a file in the sandbox: VERA keeps notes.md outside it and shows it to you every turn; add to them with the notes_append action"

// isNotes reports whether arg names /work/notes.md (relative to the
// working directory, maybe a glob or a brace list that may expand to it).
func (inv *invocation) isNotes(arg string) bool { return inv.names(arg, NotesPath) }

// anyNotes reports whether one of ops names /work/notes.md.
func (inv *invocation) anyNotes(ops []string) bool {
	for _, op := range ops {
		if inv.isNotes(op) {
			return true
		}
	}
	return false
}

// notesDir returns the operand of ops that names a directory holding
// /work/notes.md (/work, /work/, /w*), or "".
func notesDir(inv *invocation, ops []string) string {
	for _, op := range ops {
		for d := path.Dir(NotesPath); d != "/"; d = path.Dir(d) {
			if inv.names(op, d) {
				return op
			}
		}
	}
	return ""
}

// notesArgOpts are the short options taking a value, per command.
var notesArgOpts = map[string]string{
	"shred": "ns", "truncate": "sr", "chattr": "vp", "setfacl": "mMxX", "patch": "ioDBFVYzdp",
}

// notesWhy ends a reason: the file written, how a pattern may name it,
// and where the notes really are.
func notesWhy(pattern string) string {
	return " " + NotesPath + globNote(pattern) + notesHint
}

func checkNotes(inv *invocation) string {
	for _, r := range inv.redirs {
		if r.Output() && inv.isNotes(r.target) {
			return "output redirection " + r.Op + " writes" + notesWhy(r.target)
		}
	}
	for _, w := range inv.writes {
		if inv.isNotes(w) {
			return inv.name + "'s script writes" + notesWhy(w)
		}
	}
	switch n := inv.name; n {
	case "rm", "unlink", "shred", "truncate", "tee", "sponge":
		p := shell.ParseArgs(inv.args, notesArgOpts[n], "iterations", "size", "reference", "random-source")
		if inv.anyNotes(p.Ops) {
			return n + " rewrites or deletes" + notesWhy("")
		}
		if n == "rm" && (p.Has('r') || p.Has('R') || p.HasLongAbbrev("recursive", 3)) {
			if dir := notesDir(inv, p.Ops); dir != "" {
				return "recursive rm of " + dir + " deletes" + notesWhy("")
			}
		}
	case "chmod", "chown", "chgrp", "chattr", "setfacl", "patch":
		if inv.anyNotes(shell.ParseArgs(inv.args, notesArgOpts[n], "modify-file", "remove-file", "input", "output", "directory", "strip").Ops) {
			return n + " modifies" + notesWhy("")
		}
	case "mv", "cp", "install", "ln", "link", "rsync":
		p := copyArgs(inv)
		dest, srcs, ok := copyDest(inv, &p)
		if !ok {
			break
		}
		if n == "mv" && inv.anyNotes(srcs) {
			return "mv moves away" + notesWhy("")
		}
		if dir := notesDir(inv, srcs); n == "mv" && dir != "" {
			return "mv of " + dir + " moves away" + notesWhy("")
		}
		if inv.isNotes(dest) {
			return n + " overwrites" + notesWhy(dest)
		}
		if inv.names(dest, WorkDir) {
			for _, s := range srcs {
				if path.Base(s) == "notes.md" && !inv.isNotes(s) { // itself: a no-op
					return n + " " + s + " into " + WorkDir + " overwrites" + notesWhy("")
				}
			}
		}
	case "sed":
		if in, ops := sedInPlace(inv.args); in && inv.anyNotes(ops) {
			return "sed -i rewrites" + notesWhy("")
		}
	case "perl":
		if inv.inline != nil && inv.inline.InPlace && inv.anyNotes(inv.inline.Operands) {
			return "perl -i rewrites" + notesWhy("")
		}
	case "awk", "gawk":
		p := shell.ParseArgs(inv.args, "fvFilE", "file", "assign", "field-separator", "include", "load")
		for _, v := range p.Values("i", "include") {
			if (v == "inplace" || v == "inplace.awk") && inv.anyNotes(p.Ops) {
				return n + " -i inplace rewrites" + notesWhy("")
			}
		}
	case "dd":
		for _, a := range inv.args {
			if of, ok := strings.CutPrefix(a, "of="); ok && inv.isNotes(of) {
				return "dd of= overwrites" + notesWhy(of)
			}
		}
	case "curl", "wget", "sort":
		if o := outputOption(inv); o != "" && inv.isNotes(o) {
			return n + " output overwrites" + notesWhy(o)
		}
	case "find":
		if f := parseFind(inv); f.delete && f.mayMatchNotes() {
			return "find -delete reaches" + notesWhy("")
		}
		for i, a := range inv.args {
			switch a {
			case "-fprint", "-fprint0", "-fprintf", "-fls":
				if i+1 < len(inv.args) && inv.isNotes(inv.args[i+1]) {
					return "find " + a + " writes" + notesWhy(inv.args[i+1])
				}
			}
		}
	}
	for _, code := range inlineCodes(inv) {
		if codeWritesFile(code, inv, NotesPath) {
			return inv.name + " code writes or deletes" + notesWhy("")
		}
	}
	return ""
}

// globNote explains a denial of a pattern.
func globNote(target string) string {
	if target == "" {
		return ""
	}
	if shell.HasGlob(target) || extGlob.MatchString(target) || strings.ContainsAny(target, "{,}") && len(braceExpand(target)) > 1 {
		return fmt.Sprintf(": the pattern %q may expand to it", strings.ReplaceAll(target, string(shell.Unknown), "…"))
	}
	return ""
}

// outputOption returns the file named by curl -o, wget -O or sort -o.
func outputOption(inv *invocation) string {
	short, long := byte('o'), "output"
	switch inv.name {
	case "wget":
		short, long = 'O', "output-document"
	case "sort":
		long = "output"
	}
	out := ""
	for i, a := range inv.args {
		switch {
		case a == "--"+long:
			if i+1 < len(inv.args) {
				out = inv.args[i+1]
			}
		case strings.HasPrefix(a, "--"+long+"="):
			out = a[len(long)+3:]
		case len(a) > 1 && a[0] == '-' && a[1] != '-':
			if k := strings.IndexByte(a, short); k > 0 {
				if k == len(a)-1 {
					if i+1 < len(inv.args) {
						out = inv.args[i+1]
					}
				} else {
					out = a[k+1:]
				}
			}
		}
	}
	return out
}

// sedInPlace reports whether sed edits in place, and its operands.
func sedInPlace(args []string) (inPlace bool, ops []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return inPlace, append(ops, args[i+1:]...)
		case strings.HasPrefix(a, "--"):
			if a == "--in-place" || strings.HasPrefix(a, "--in-place=") {
				inPlace = true
			}
			if a == "--expression" || a == "--file" || a == "--line-length" {
				i++
			}
		case len(a) > 1 && a[0] == '-':
			for k := 1; k < len(a); k++ {
				if c := a[k]; c == 'i' {
					inPlace = true
					break
				} else if c == 'e' || c == 'f' || c == 'l' {
					if k == len(a)-1 {
						i++
					}
					break
				}
			}
		default:
			ops = append(ops, a)
		}
	}
	return inPlace, ops
}

// inlineCodes returns the program text an interpreter runs (-c/-e/-r
// code, or a here-document or here-string when there is no script file).
func inlineCodes(inv *invocation) []string {
	if inv.inline == nil {
		return nil
	}
	return inv.inline.Codes
}

// Write indicators for codeWritesNotes, looked for in the statement that
// names notes.md.
var codeWrites = []string{
	"write_text", "write_bytes", "os.remove", "os.unlink", ".unlink(", "os.rename", "os.replace",
	"shutil.move", "shutil.rmtree", "truncate", "writefile", "appendfile", "rmsync", "unlinksync",
	"renamesync", "createwritestream", "file.write", "file.delete", "fileutils.rm", "fileutils.mv",
	"unlink ", "unlink(", "rename ", "rename(", "file_put_contents",
}

type literal struct {
	val        string
	start, end int // offsets of the quotes
}

func stringLiterals(code string) []literal {
	var out []literal
	for i := 0; i < len(code) && len(out) < 256; i++ {
		q := code[i]
		if q != '\'' && q != '"' {
			continue
		}
		j := i + 1
		for j < len(code) && code[j] != q {
			if code[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(code) {
			break
		}
		out = append(out, literal{code[i+1 : j], i, j + 1})
		i = j
	}
	return out
}

func isWriteMode(m string) bool {
	if m == "" || len(m) > 4 {
		return false
	}
	for i := 0; i < len(m); i++ {
		if strings.IndexByte("rwabxt+U", m[i]) < 0 {
			return false
		}
	}
	return strings.ContainsAny(m, "wax+")
}

func isPerlWriteMode(m string) bool {
	m, _, _ = strings.Cut(m, ":") // ">:utf8"
	switch strings.TrimSpace(m) {
	case ">", ">>", "+<", "+>", "+>>", "|-":
		return true
	}
	return false
}

// codeWritesFile is the best-effort check of inline code: a string
// literal naming target (a relative name is resolved against the working
// directory) in a statement that writes.
func codeWritesFile(code string, inv *invocation, target string) bool {
	if !strings.Contains(code, path.Base(target)) {
		return false
	}
	lits := stringLiterals(code)
	for k, l := range lits {
		name := strings.TrimLeft(l.val, "+<>| \t")
		if !strings.HasSuffix(name, path.Base(target)) || !inv.names(name, target) {
			continue
		}
		if name != l.val && strings.ContainsAny(l.val[:len(l.val)-len(name)], ">+") {
			return true // perl two-argument open(F, ">/work/notes.md")
		}
		if k+1 < len(lits) && strings.TrimSpace(code[l.end:lits[k+1].start]) == "," && isWriteMode(lits[k+1].val) {
			return true // open('/work/notes.md', 'w')
		}
		if k > 0 && strings.TrimSpace(code[lits[k-1].end:l.start]) == "," && isPerlWriteMode(lits[k-1].val) {
			return true // open(my $f, '>>', '/work/notes.md')
		}
		stmtStart := strings.LastIndexAny(code[:l.start], ";\n") + 1
		stmtEnd := strings.IndexAny(code[l.end:], ";\n")
		if stmtEnd < 0 {
			stmtEnd = len(code)
		} else {
			stmtEnd += l.end
		}
		stmt := strings.ToLower(code[stmtStart:stmtEnd])
		for _, w := range codeWrites {
			if strings.Contains(stmt, w) {
				return true
			}
		}
		if i := strings.Index(stmt, "mode="); i >= 0 {
			rest := strings.TrimLeft(stmt[i+5:], "'\"")
			if end := strings.IndexAny(rest, "'\""); end > 0 && isWriteMode(rest[:end]) {
				return true
			}
		}
	}
	return false
}

// ---------------------------------------------------------------------
// decoded_script

// codeSinks are calls of interpreter code that run code given as a
// value (exec, eval, compile, new Function …), not as a method of
// another object (re.compile, /x/.exec).
var codeSinks = regexp.MustCompile(`(?:^|[^.\w$])(exec|eval|compile|execfile|instance_eval|class_eval|module_eval|instance_exec|create_function|loadstring)\b|\bnew\s+Function\b|(?:^|[^.\w$])Function\s*\(|\bvm\.run\w*|\bruby_eval\b`)

// decodeCalls are the decoders, decompressors and reversals interpreter
// code hides code with.
var decodeCalls = regexp.MustCompile(`(?i)b(16|32|64|85)decode|a85decode|decodebytes|decodestring|unhexlify|fromhex|\batob\s*\(|decode64|base64_decode|decode_base64|str_rot13|\brot_?13\b|gzinflate|gzuncompress|gzdecode|hex2bin|\bzlib\b|decompress|inflate|marshal\.loads|pickle\.loads|codecs\.decode|\b(un)?pack1?\b|\bchr\b|fromcharcode|\[::-1\]|reversed\s*\(|\.reverse\b|strrev|['"](base64|hex|base64url|rot13|rot_13|zlib)['"]|bytes\s*\(\s*\[|bytearray\s*\(\s*\[|\.unpack\(|\bdecode\s*\(\s*['"]`)

// codeRunsDecoded reports interpreter code that runs code or a command
// it decodes: a code sink (exec, eval …) in code that decodes anything,
// or a call that runs a command (os.system, execSync …) whose argument
// decodes.
func codeRunsDecoded(lang, code string) string {
	if len(code) > 1<<16 {
		code = code[:1<<16]
	}
	dec := decodeCalls.FindString(code)
	if dec == "" {
		return ""
	}
	if m := codeSinks.FindStringSubmatch(code); m != nil {
		sink := strings.TrimSpace(strings.TrimLeft(m[0], "(;= \t\n"))
		if lang == "php" || sink != "assert" {
			return sink + " of " + dec + "(…)"
		}
	}
	if lang == "php" && strings.Contains(code, "assert(") {
		return "assert of " + dec + "(…)"
	}
	for _, m := range codeShellCalls.FindAllStringIndex(code, 32) {
		span := code[m[1]:min(len(code), m[1]+512)]
		if end := strings.IndexAny(span, ";\n"); end >= 0 {
			span = span[:end]
		}
		if d := decodeCalls.FindString(span); d != "" {
			return strings.TrimSpace(code[m[0]:m[1]]) + " " + d + "(…)"
		}
	}
	return ""
}

// checkDecoded reports a shell or interpreter fed decoded code.
func checkDecoded(inv *invocation) string {
	if inv.inline != nil {
		for _, c := range inv.inline.Codes {
			if what := codeRunsDecoded(inv.inline.Lang, c); what != "" {
				return inv.name + " code runs what it decodes (" + what + "): it cannot be read before it runs"
			}
		}
	}
	unknown := func(s string) bool { return strings.IndexByte(s, shell.Unknown) >= 0 }
	// runsStdin: the program is read on standard input; codeUnknown: the
	// code it runs (a -c string, eval's words, a script file's name, a
	// here-document with substitutions) is not fully known.
	runsStdin, runsCode, codeUnknown := false, len(inv.scripts) > 0, false
	for _, s := range inv.scripts {
		codeUnknown = codeUnknown || unknown(s.Src)
	}
	switch {
	case shell.Shells[inv.name]:
		_, ok, stdin := shell.ShellScript(inv.args)
		runsStdin, runsCode = !ok && stdin, true
		if !ok && !stdin {
			for _, a := range inv.args {
				if !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "+") {
					codeUnknown = codeUnknown || unknown(a) // the script file
					break
				}
			}
		}
	case inv.name == "source" || inv.name == ".":
		runsCode = true
		if len(inv.args) > 0 {
			a := inv.args[0]
			runsStdin = a == "/dev/stdin" || a == "-" || a == "/proc/self/fd/0"
			codeUnknown = codeUnknown || unknown(a)
		}
	case inv.inline != nil:
		in := inv.inline
		runsStdin = in.Stdin || (len(in.Codes) == 0 && !in.Script && in.Module == "")
		runsCode = true
		for _, c := range in.Codes {
			codeUnknown = codeUnknown || (!in.Stdin && unknown(c))
		}
		if in.Script && len(in.Operands) > 0 {
			codeUnknown = codeUnknown || unknown(in.Operands[0])
		}
	}
	if !runsCode {
		return ""
	}
	if runsStdin {
		for _, r := range inv.redirs {
			if r.Stdin() && (unknown(r.target) || len(r.BodySubs) > 0 || len(r.Target.Subs) > 0) {
				codeUnknown = true
			}
		}
	}
	if pipedFromDecoder(inv.cmd) && (runsStdin || codeUnknown) {
		return inv.displayName() + " runs code a decoder in its pipeline produces: it cannot be read before it runs"
	}
	if codeUnknown && substitutesDecoder(inv.cmd) {
		return inv.displayName() + " runs code a substitution decodes: it cannot be read before it runs"
	}
	return ""
}

func (inv *invocation) displayName() string {
	if inv.name == "" {
		return "the command"
	}
	return inv.name
}
