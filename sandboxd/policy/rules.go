package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/vera-run/vera/internal/shell"
)

// This file is the one documented place for the sandbox's deny rules.
//
// Every rule is evaluated on every simple command of the command string,
// after parsing (internal/shell, on mvdan.cc/sh) and unwrapping (see
// doc.go): rm, /bin/rm, 'rm', r\m, sudo rm, env X=1 rm, bash -c 'rm …',
// $(rm …), xargs -I{} rm {} are all seen as rm. The first command (in
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
	// command, or 64 wrappers or more around one command (sudo sudo …). A script that is understood only in part cannot be judged,
	// so it is refused rather than let through. The same holds for code a
	// command runs (bash -c 'echo (' is refused); command lines found in
	// interpreter code (os.system("…")) are read best effort and skipped
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
	//   - ~, $HOME, ${HOME} (the container's home, /root) or ~/*;
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
			"parallel rm -rf ::: /", "sg root -c 'rm -rf /'", "nsenter -t 1 -m rm -rf /", "strace -f rm -rf /"},
		Allows: []string{"rm -rf /work/tmp", "rm -rf ./build", "rm -rf /tmp/*", "rm -rf /var/lib/apt/lists/*", "rm -f /etc/motd",
			"echo /tmp/x | xargs -I{} rm -rf {}", "printf '%s\\n' 'rm -rf /' > /work/x.txt", "$CC -o app main.c", `"$PYTHON" -m pytest -x /work/tests`,
			"find /work -name '*.pyc' -delete", "find / -name core -delete", "find /tmp -mindepth 1 -delete",
			`python3 -c "import shutil; shutil.rmtree('/work/build')"`, `python3 -c "print('shutil.rmtree(\'/\')')"`,
			"parallel gzip ::: /work/a.log /work/b.log", "script -qc 'ls /' /dev/null"},
		check: checkRmRoot,
	},

	// mkfs blocks creating file systems and rewriting partition tables
	// or signatures: mkfs, mkfs.*, mke2fs, mkswap, mkdosfs, mkntfs,
	// blkdiscard; wipefs when it erases (-a, --all, -o); fdisk, cfdisk,
	// sfdisk on a device unless listing/dumping (-l, -d, -J, …); parted
	// on a device interactively or with a modifying command (mklabel,
	// mkpart, rm, resizepart, …); sgdisk --zap/--zap-all/--clear.
	// Allowed: listing (fdisk -l, sfdisk -d, parted -l, parted /dev/sda
	// print, wipefs /dev/sda), --help/--version, and any mention of these
	// names that is not the command being run (which mkfs, grep mkfs …,
	// python3 -c "print('mkfs')", apt-get install dosfstools).
	{
		ID:          "mkfs",
		Description: "creating file systems or rewriting partition tables/signatures (mkfs*, mke2fs, mkswap, wipefs -a, fdisk/sfdisk/parted writing); listing is allowed",
		Denies:      []string{"mkfs.ext4 /dev/sdb1", "sudo mkfs -t xfs /dev/nvme0n1", "wipefs -a /dev/sda", "parted -s /dev/sda mklabel gpt", `ruby -e 'system("mkfs.ext4 /dev/sda")'`},
		Allows:      []string{"fdisk -l", "parted /dev/sda print", "which mkfs.ext4", `python3 -c "print('mkfs')"`},
		check:       checkMkfs,
	},

	// dd_block_device blocks raw writes to a block device: dd of=DEV,
	// output redirections (>, >>, &>, <>, …) to DEV, tee DEV, cp/mv/
	// install … DEV and shred DEV, where DEV is /dev/sd*, /dev/hd*,
	// /dev/vd*, /dev/xvd*, /dev/nvme*, /dev/mmcblk*, /dev/dm-*,
	// /dev/mapper/*, /dev/loop*, /dev/md*, /dev/disk/*, /dev/root,
	// /dev/mem, /dev/kmem or /dev/port (after normalising //dev//sda).
	// Allowed: reading a device (dd if=/dev/sda of=/work/mbr.bin),
	// writing files and pseudo-devices (of=/work/file, of=/dev/null,
	// > /dev/stderr, /dev/tty, /dev/shm/x).
	{
		ID:          "dd_block_device",
		Description: "writing to a block device (dd of=/dev/sda, > /dev/nvme0n1, tee/cp/shred to one); reading devices and writing files or /dev/null is allowed",
		Denies:      []string{"dd if=/dev/zero of=/dev/sda bs=1M", "cat image.iso > /dev/sdb", "sudo dd if=x.img of=//dev//nvme0n1", "cat x > /dev/s?a", "cat x | tee /dev/sd[ab]"},
		Allows:      []string{"dd if=/dev/zero of=/work/file bs=1M count=1", "dd if=/dev/sda of=/work/mbr.bin count=1", "dd if=/work/a of=/dev/null"},
		check:       checkBlockDevice,
	},

	// fork_bomb blocks a shell function that calls itself at least twice
	// with a pipe or in the background — the classic :(){ :|:& };: and
	// any renamed or reformatted variant (bomb(){ bomb|bomb& };bomb,
	// function f { f & f & }) — wherever it appears (bash -c, eval, …),
	// plus the perl/python/ruby idioms `fork while fork`, `fork while 1`,
	// `while True: os.fork()` and `loop { fork }`.
	// Allowed: ordinary recursion (a function calling itself once, or
	// twice without | or &), background jobs and pipelines that are not
	// self-recursive, and the text of a fork bomb inside quotes (grep,
	// echo). Not detected (documented limit): loops that spawn forever,
	// such as while true; do sleep 1 & done.
	{
		ID:          "fork_bomb",
		Description: "fork bombs: a function that pipes/backgrounds itself into itself (:(){ :|:& };: and renamed variants) and perl/python fork-loop idioms",
		Denies:      []string{":(){ :|:& };:", "bomb() { bomb | bomb & }; bomb", `perl -e "fork while fork"`},
		Allows:      []string{"f() { echo hi; }; f", "grep ':(){ :|:& };:' notes.txt", "sleep 10 & wait"},
		check:       checkForkIdiom,
		checkScript: checkForkBomb,
	},

	// shutdown blocks stopping or restarting the machine or killing
	// every process: shutdown, reboot, halt, poweroff (except --help),
	// init/telinit 0 or 6, systemctl reboot|poweroff|halt|kexec|
	// soft-reboot (and isolate/start of their targets), kill with pid -1
	// (every process) or 1 (init) with any signal but 0, killall5, and
	// writing /proc/sysrq-trigger.
	// Allowed: the words in arguments (grep reboot notes.txt, last
	// reboot), systemctl status, kill of a specific pid or job (kill -9
	// 1234, kill %1), kill -0 1, pkill/killall of a named process, and a
	// local program called ./reboot.
	{
		ID:          "shutdown",
		Description: "shutdown/reboot/halt/poweroff, init 0|6, systemctl reboot|poweroff|halt|kexec, kill -9 -1 (all processes) or kill 1; mentioning them or killing a specific pid is allowed",
		Denies: []string{"sudo reboot", "shutdown -h now", "systemctl poweroff", "kill -9 -1", "init 6",
			`python3 -c "import os; os.system('reboot')"`, "nsenter -t 1 -m -u reboot", "echo b > /proc/sysrq-*"},
		Allows: []string{"grep reboot notes.txt", "systemctl status nginx", "kill -9 12345", "last reboot", `python3 -c "print('reboot')"`},
		check:  checkShutdown,
	},

	// notes_md blocks anything that rewrites or deletes /work/notes.md
	// (or notes.md relative to a working directory of /work). The file is
	// append-only and owned by the projector, which writes it only through
	// the notes-append action; so every write from a shell command is
	// refused, appends included:
	//   - output redirections to it: >, >>, >|, &>, &>>, <>, n>, exec 3>>;
	//   - rm, unlink, shred, truncate, sponge, patch, tee (with or without
	//     -a) on it; chmod, chown, chgrp, chattr, setfacl of it;
	//   - mv from it or over it; cp, install, rsync, ln (-sf) over it,
	//     including cp/mv x/notes.md /work/;
	//   - in-place editors: sed -i/--in-place, perl -i/-pi, awk -i inplace;
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
		Description: "writing, moving, truncating or deleting /work/notes.md (append-only, owned by the projector; even >> is refused); reading it is allowed",
		Denies: []string{"rm /work/notes.md", "echo x >> /work/notes.md", "sed -i 's/a/b/' notes.md", "mv /tmp/n.md /work/notes.md", "tee -a /work/notes.md",
			"echo x > /work/n?tes.md", "echo x > no*.md", "echo x > [n]otes.md", "echo x >> /work/*", "echo x > /work/{notes,x}.md",
			"cat x | tee /w*/notes.md", "cp x /work/[!x]otes.md", "truncate -s0 /work/*.md", "sed -i d /work/no?es.md",
			"find /work -name '*.md' -delete", "find /work -maxdepth 1 -type f -newer x -delete", "find /work -name notes.md -exec rm {} \\;",
			`python3 -c "import os; os.system('echo > /work/notes.md')"`},
		Allows: []string{"cat /work/notes.md", "cp /work/notes.md /tmp/x", `echo "see notes.md" >> /work/summary.md`, "grep -c TODO notes.md",
			"echo x > /work/n?tes.txt", "echo x > /tmp/*.md", "echo x > '$OUT'", "cat /work/n*.md", "find /work -name '*.pyc' -delete",
			"find /work/build -type f -delete", "find /work -type d -empty -delete", "cp /work/*.md /tmp/"},
		check: checkNotes,
	},

	// decoded_script blocks a shell or interpreter that runs code decoded,
	// decrypted or decompressed on its way in: a shell (bash, sh …),
	// source /dev/stdin or python/perl/… with no program argument reading
	// a pipeline in which base64/base32 -d, xxd -r, openssl … -d,
	// uudecode, gunzip/zcat/xz -d/…, rev or interpreter code that decodes
	// (b64decode, unhexlify …) runs; and eval, bash -c, xargs … sh -c or
	// a script argument whose code comes from such a decoder through a
	// substitution. Such code is hidden on purpose and cannot be read
	// before it runs. Code piped from other producers (curl … | sh, cat
	// script | bash) is not judged either way: the rules see only what
	// the command line shows, and the container carries the rest.
	// Allowed: decoding into a file or another program (base64 -d x >
	// y.bin, … | tar -x), and echo/printf piped into a shell, whose code is
	// visible and analysed like any other.
	{
		ID:          "decoded_script",
		Description: "a shell or interpreter running code decoded or unpacked on the fly (… | base64 -d | sh, xxd -r | bash, eval \"$(… | base64 -d)\"): the code cannot be read before it runs",
		Denies: []string{"echo cm0gLXJmIC8K | base64 -d | sh", "base64 --decode payload.b64 | bash", "xxd -r -p x.hex | bash", "openssl enc -d -aes-256-cbc -in x.enc -k k | sh",
			"gunzip -c x.gz | bash", `eval "$(echo cm0gLXJmIC8K | base64 -d)"`, `bash -c "$(base64 -d <<< cm0gLXJmIC8K)"`, "sh <(base64 -d x.b64)",
			"cat x.b64 | base64 -d | sudo bash -s", "echo x | base64 -d | python3", "base64 -d x | xargs -I{} sh -c {}",
			`python3 -c "import base64;print(base64.b64decode('cm0gLXJmIC8K').decode())" | sh`},
		Allows: []string{"base64 -d blob.b64 > /work/blob.bin", "echo aGkK | base64 -d", "base64 -d x.b64 | tar -xz -C /work", "xxd -r -p x.hex > x.bin",
			"echo 'ls -la' | bash", "base64 x.sh | bash -c 'wc -c'"},
		check: checkDecoded,
	},

	// chmod_root blocks recursive chmod/chown/chgrp (-R, --recursive) of
	// / or of a top-level system directory (the rm_root list minus /work,
	// /input and /home), itself or its whole content.
	// Allowed: recursive changes below them or in the work tree (chown -R
	// 1000:1000 /work, chmod -R 755 /work/bin), and non-recursive changes
	// (chmod 644 /etc/hosts; note chmod -r is a mode, not recursion).
	{
		ID:          "chmod_root",
		Description: "recursive chmod/chown/chgrp of / or a top-level system directory; the work tree and anything deeper are allowed",
		Denies:      []string{"chmod -R 777 /", "sudo chown -R nobody:nogroup /usr"},
		Allows:      []string{"chown -R 1000:1000 /work", "chmod -R 755 /work/bin", "chmod -r /work/secret"},
		check:       checkChmodRoot,
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

func checkChmodRoot(inv *invocation) string {
	switch inv.name {
	case "chmod", "chown", "chgrp":
	default:
		return ""
	}
	p := shell.ParseArgs(inv.args, "")
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

var mkfsNames = []string{"mkfs", "mke2fs", "mkswap", "mkdosfs", "mkntfs", "mkexfatfs", "blkdiscard"}

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
		if p.Has('z') || p.Has('Z') || p.Has('o') || p.HasLong("zap", "zap-all", "clear") {
			return "sgdisk wiping the partition table"
		}
	}
	return ""
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

var forkIdioms = []string{
	"forkwhilefork", "fork()whilefork()", "forkwhile1", "fork()while1", "forkwhiletrue",
	"whiletrue:os.fork()", "while1:os.fork()", "whiletrue:fork()", "loop{fork}", "whiletrue{fork",
}

// checkForkIdiom looks for fork-loop idioms in inline interpreter code.
func checkForkIdiom(inv *invocation) string {
	for _, code := range inlineCodes(inv) {
		squashed := strings.Map(func(r rune) rune {
			if r == ' ' || r == '\t' || r == '\n' || r == '\r' {
				return -1
			}
			return r
		}, strings.ToLower(code))
		for _, idiom := range forkIdioms {
			if strings.Contains(squashed, idiom) {
				return "fork bomb idiom in " + inv.name + " code"
			}
		}
	}
	return ""
}

// ---------------------------------------------------------------------
// shutdown

var systemctlStop = []string{"reboot", "poweroff", "halt", "kexec", "soft-reboot"}
var systemctlStopTargets = []string{"reboot.target", "poweroff.target", "halt.target", "kexec.target", "soft-reboot.target"}

func checkShutdown(inv *invocation) string {
	for _, r := range inv.redirs {
		if r.Output() {
			if inv.names(r.target, "/proc/sysrq-trigger") {
				return "writing /proc/sysrq-trigger"
			}
		}
	}
	switch n := inv.name; n {
	case "shutdown", "reboot", "halt", "poweroff":
		if onlyHelp(inv.args) || (n == "shutdown" && slices.Contains(inv.args, "-c")) {
			return ""
		}
		return n + " stops the machine"
	case "init", "telinit":
		if p := shell.ParseArgs(inv.args, ""); len(p.Ops) > 0 && (p.Ops[0] == "0" || p.Ops[0] == "6") {
			return n + " " + p.Ops[0] + " stops the machine"
		}
	case "systemctl":
		p := shell.ParseArgs(inv.args, "HMtpsno", "host", "machine", "type", "property", "signal", "lines", "output", "root", "kill-whom", "job-mode")
		if len(p.Ops) == 0 {
			return ""
		}
		if slices.Contains(systemctlStop, p.Ops[0]) {
			return "systemctl " + p.Ops[0] + " stops the machine"
		}
		if p.Ops[0] == "isolate" || p.Ops[0] == "start" {
			for _, t := range p.Ops[1:] {
				if slices.Contains(systemctlStopTargets, t) {
					return "systemctl " + p.Ops[0] + " " + t + " stops the machine"
				}
			}
		}
	case "killall5":
		if !onlyHelp(inv.args) {
			return "killall5 signals every process"
		}
	case "kill":
		return killEverything(inv.args)
	case "tee":
		for _, op := range shell.ParseArgs(inv.args, "").Ops {
			if inv.names(op, "/proc/sysrq-trigger") {
				return "writing /proc/sysrq-trigger"
			}
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

// isNotes reports whether arg names /work/notes.md, or is a pattern
// (glob or brace list) one of whose expansions may be it.
func (inv *invocation) isNotes(arg string) bool { return inv.names(arg, NotesPath) }

func (inv *invocation) anyNotes(ops []string) bool {
	for _, op := range ops {
		if inv.isNotes(op) {
			return true
		}
	}
	return false
}

// notesArgOpts are the short options taking a value, per command.
var notesArgOpts = map[string]string{
	"shred": "ns", "truncate": "sr", "chattr": "vp", "setfacl": "mMxX", "patch": "ioDBFVYzdp",
}

const notesWhy = " " + NotesPath + " (append-only, owned by the projector)"

func checkNotes(inv *invocation) string {
	for _, r := range inv.redirs {
		if r.Output() && inv.isNotes(r.target) {
			return "output redirection " + r.Op + " writes" + notesWhy + globNote(r.target)
		}
	}
	switch n := inv.name; n {
	case "rm", "unlink", "shred", "truncate", "tee", "sponge":
		if inv.anyNotes(shell.ParseArgs(inv.args, notesArgOpts[n], "iterations", "size", "reference", "random-source").Ops) {
			return n + " rewrites or deletes" + notesWhy
		}
	case "chmod", "chown", "chgrp", "chattr", "setfacl", "patch":
		if inv.anyNotes(shell.ParseArgs(inv.args, notesArgOpts[n], "modify-file", "remove-file", "input", "output", "directory", "strip").Ops) {
			return n + " modifies" + notesWhy
		}
	case "mv", "cp", "install", "ln", "link", "rsync":
		p := copyArgs(inv)
		dest, srcs, ok := copyDest(inv, &p)
		if !ok {
			break
		}
		if n == "mv" && inv.anyNotes(srcs) {
			return "mv moves away" + notesWhy
		}
		if inv.isNotes(dest) {
			return n + " overwrites" + notesWhy + globNote(dest)
		}
		if inv.names(dest, WorkDir) {
			for _, s := range srcs {
				if path.Base(s) == "notes.md" && !inv.isNotes(s) { // itself: a no-op
					return n + " " + s + " into " + WorkDir + " overwrites" + notesWhy
				}
			}
		}
	case "sed":
		if in, ops := sedInPlace(inv.args); in && inv.anyNotes(ops) {
			return "sed -i rewrites" + notesWhy
		}
	case "perl":
		if inv.inline != nil && inv.inline.InPlace && inv.anyNotes(inv.inline.Operands) {
			return "perl -i rewrites" + notesWhy
		}
	case "awk", "gawk":
		p := shell.ParseArgs(inv.args, "fvFilE", "file", "assign", "field-separator", "include", "load")
		for _, v := range p.Values("i", "include") {
			if v == "inplace" || v == "inplace.awk" {
				if inv.anyNotes(p.Ops) {
					return n + " -i inplace rewrites" + notesWhy
				}
			}
		}
	case "dd":
		for _, a := range inv.args {
			if of, ok := strings.CutPrefix(a, "of="); ok && inv.isNotes(of) {
				return "dd of= overwrites" + notesWhy
			}
		}
	case "curl", "wget", "sort":
		if o := outputOption(inv); o != "" && inv.isNotes(o) {
			return n + " output overwrites" + notesWhy
		}
	case "find":
		if f := parseFind(inv); f.delete && f.mayMatchNotes() {
			return "find -delete reaches" + notesWhy
		}
	}
	for _, code := range inlineCodes(inv) {
		if codeWritesNotes(code, inv) {
			return inv.name + " code writes or deletes" + notesWhy
		}
	}
	return ""
}

// globNote explains a denial of a pattern.
func globNote(target string) string {
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

// codeWritesNotes is the best-effort check of inline code: a string
// literal naming /work/notes.md (a relative "notes.md" is resolved against
// the working directory) in a statement that writes.
func codeWritesNotes(code string, inv *invocation) bool {
	if !strings.Contains(code, "notes.md") {
		return false
	}
	lits := stringLiterals(code)
	for k, l := range lits {
		name := strings.TrimLeft(l.val, "+<>| \t")
		if !strings.HasSuffix(name, "notes.md") || !inv.isNotes(name) {
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

// checkDecoded reports a shell or interpreter fed decoded code.
func checkDecoded(inv *invocation) string {
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
