package policy

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// This file is the one documented place for the sandbox's deny rules.
//
// Every rule is evaluated on every simple command of the command string,
// after tokenisation and unwrapping (see doc.go): rm, /bin/rm, 'rm', r\m,
// sudo rm, env X=1 rm, bash -c 'rm …', $(rm …) are all seen as rm. The
// first command (in execution order) that matches a rule decides; among
// rules, the order of the list below decides.
//
// Each rule carries Denies and Allows examples; the tests run all of
// them, so the documentation below cannot drift from the behaviour.
// When adding a rule, prefer false negatives to false positives: the
// agent must stay free to explore, and the container is the security
// boundary.

var rules = []Rule{
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
	// It also blocks any rm with --no-preserve-root.
	// Allowed: anything below those directories (rm -rf /work/build,
	// ./build, /tmp/*, /var/lib/apt/lists/*, ~/.cache/pip, /usr/local/x),
	// non-recursive rm, and targets whose value is unknown ($DIR/*).
	{
		ID:          "rm_root",
		Description: "recursive rm of /, ~, a top-level system directory, or the whole /work (or rm --no-preserve-root); anything below them is allowed",
		Denies:      []string{"rm -rf /", "sudo rm -fr /*", "rm -r -f ~", "rm -rf /usr/", "rm -rf /work/*", "rm --no-preserve-root -rf /"},
		Allows:      []string{"rm -rf /work/tmp", "rm -rf ./build", "rm -rf /tmp/*", "rm -rf /var/lib/apt/lists/*", "rm -f /etc/motd"},
		check:       checkRmRoot,
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
		Denies:      []string{"mkfs.ext4 /dev/sdb1", "sudo mkfs -t xfs /dev/nvme0n1", "wipefs -a /dev/sda", "parted -s /dev/sda mklabel gpt"},
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
		Denies:      []string{"dd if=/dev/zero of=/dev/sda bs=1M", "cat image.iso > /dev/sdb", "sudo dd if=x.img of=//dev//nvme0n1"},
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
		Denies:      []string{"sudo reboot", "shutdown -h now", "systemctl poweroff", "kill -9 -1", "init 6"},
		Allows:      []string{"grep reboot notes.txt", "systemctl status nginx", "kill -9 12345", "last reboot"},
		check:       checkShutdown,
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
	// For rm/unlink/shred/truncate/tee/sponge/mv/sed -i/perl -i a glob
	// that matches it (rm /work/*.md) counts as naming it.
	// Allowed: every read (cat, grep, head, tail, wc, less, diff, sed
	// without -i, cp /work/notes.md elsewhere, < /work/notes.md, python
	// open() for reading), other files with similar names
	// (/work/notes.md.bak, /work/sub/notes.md, ./notes.md when the working
	// directory is not /work), and the mere mention of the name in text
	// (echo "see notes.md" >> /work/summary.md).
	{
		ID:          "notes_md",
		Description: "writing, moving, truncating or deleting /work/notes.md (append-only, owned by the projector; even >> is refused); reading it is allowed",
		Denies:      []string{"rm /work/notes.md", "echo x >> /work/notes.md", "sed -i 's/a/b/' notes.md", "mv /tmp/n.md /work/notes.md", "tee -a /work/notes.md"},
		Allows:      []string{"cat /work/notes.md", "cp /work/notes.md /tmp/x", `echo "see notes.md" >> /work/summary.md`, "grep -c TODO notes.md"},
		check:       checkNotes,
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
	if hasGlob(abs) {
		for _, d := range systemDirs {
			if m, _ := path.Match(abs, d); m {
				return true
			}
		}
		for _, d := range rmOnlyDirs {
			if m, _ := path.Match(abs, d); withRmOnly && m {
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
	if inv.name != "rm" {
		return ""
	}
	p := parseArgs(inv.args, "")
	if p.hasLongAbbrev("no-preserve-root", 3) {
		return "rm with --no-preserve-root"
	}
	if !p.has('r') && !p.has('R') && !p.hasLongAbbrev("recursive", 3) {
		return ""
	}
	if t := protectedTarget(inv, p.ops, true); t != "" {
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
	p := parseArgs(inv.args, "")
	if !p.has('R') && !p.hasLong("recursive") {
		return ""
	}
	if t := protectedTarget(inv, p.ops, false); t != "" {
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
		p := parseArgs(inv.args, "otO", "offset", "types", "output", "backup")
		if p.has('n') || p.hasLong("no-act") {
			return ""
		}
		if p.has('a') || p.hasLong("all") || p.has('o') || p.hasLong("offset") {
			return "wipefs erasing signatures"
		}
	case n == "fdisk" || n == "cfdisk" || n == "sfdisk":
		p := parseArgs(inv.args, "bcuLNoOwWXYSHt", "sector-size", "compatibility", "units", "color",
			"label", "label-nested", "output", "backup-file", "wipe", "wipe-partitions", "type", "lock")
		for _, c := range []byte("ldJsgFVvhrx") {
			if c == 'r' && n == "sfdisk" {
				continue // sfdisk -r reorders
			}
			if p.has(c) {
				return ""
			}
		}
		if p.hasLong("list", "list-details", "dump", "json", "show-size", "show-geometry", "list-free",
			"verify", "version", "help", "list-types", "show-pt-geometry") || len(p.ops) == 0 {
			return ""
		}
		return n + " on a device rewrites its partition table"
	case n == "parted":
		p := parseArgs(inv.args, "a", "align")
		if p.has('l') || p.has('h') || p.has('v') || p.hasLong("list", "help", "version") || len(p.ops) == 0 {
			return ""
		}
		if len(p.ops) == 1 {
			return "interactive parted on " + p.ops[0]
		}
		for _, w := range p.ops[1:] {
			if slices.Contains(partedWrites, strings.ToLower(w)) {
				return "parted " + w + " rewrites the partition table"
			}
		}
	case n == "sgdisk":
		p := parseArgs(inv.args, "")
		if p.has('z') || p.has('Z') || p.has('o') || p.hasLong("zap", "zap-all", "clear") {
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

// blockDevice returns the normalised device if target is a block device.
func blockDevice(inv *invocation, target string) string {
	abs, ok := inv.abs(target)
	if !ok || !strings.HasPrefix(abs, "/dev/") {
		return ""
	}
	if slices.Contains(blockDevExact, abs) {
		return abs
	}
	for _, p := range blockDevPrefixes {
		if strings.HasPrefix(abs, p) && len(abs) > len(p) || abs+"/" == p {
			return abs
		}
	}
	return ""
}

// copyDest returns the destination and sources of cp/mv/install/ln/rsync.
func copyDest(inv *invocation, p *parsedArgs) (dest string, srcs []string, ok bool) {
	if t, has := p.value("t", "target-directory"); has {
		return t, p.ops, true
	}
	if len(p.ops) >= 2 {
		return p.ops[len(p.ops)-1], p.ops[:len(p.ops)-1], true
	}
	if inv.name == "ln" && len(p.ops) == 1 {
		return ".", p.ops, true
	}
	return "", nil, false
}

func copyArgs(inv *invocation) parsedArgs {
	switch inv.name {
	case "install":
		return parseArgs(inv.args, "tSmog", "target-directory", "suffix", "mode", "owner", "group")
	case "rsync":
		return parseArgs(inv.args, "eBfT", "rsh", "block-size", "filter", "temp-dir", "exclude", "include", "chmod", "chown")
	}
	return parseArgs(inv.args, "tS", "target-directory", "suffix")
}

func checkBlockDevice(inv *invocation) string {
	for _, r := range inv.redirs {
		if r.isOutput() {
			if dev := blockDevice(inv, r.target); dev != "" {
				return fmt.Sprintf("output redirection %s to block device %s", r.op, dev)
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
		for _, op := range parseArgs(inv.args, "ns", "iterations", "size").ops {
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

// checkForkBomb looks for NAME() BODY or function NAME BODY where BODY
// runs NAME at least twice (in command position) and contains | or &.
func checkForkBomb(src string, toks []token) (match, reason string) {
	defs := 0
	for i := 0; i < len(toks) && defs < 32; i++ {
		var name string
		var body int
		switch {
		case toks[i].kind == tkWord && i+2 < len(toks) && isOp(&toks[i+1], "(") && isOp(&toks[i+2], ")"):
			name, body = toks[i].val, i+3
		case toks[i].kind == tkWord && toks[i].val == "function" && i+1 < len(toks) && toks[i+1].kind == tkWord:
			name, body = toks[i+1].val, i+2
			if body+1 < len(toks) && isOp(&toks[body], "(") && isOp(&toks[body+1], ")") {
				body += 2
			}
		default:
			continue
		}
		defs++
		for body < len(toks) && isOp(&toks[body], "\n") {
			body++
		}
		if body >= len(toks) {
			break
		}
		end, calls, spawn := scanBody(toks, body, name)
		if calls >= 2 && spawn {
			return src[toks[i].start:toks[end].end],
				fmt.Sprintf("fork bomb: function %q runs itself %d times with a pipe or in the background", name, calls)
		}
	}
	return "", ""
}

// scanBody scans a function body starting at toks[b] ({ or ( ). It
// returns the index of the closing token, the number of self-calls in
// command position, and whether the body pipes or backgrounds.
func scanBody(toks []token, b int, name string) (end, calls int, spawn bool) {
	braces := toks[b].kind == tkWord && toks[b].val == "{"
	parens := isOp(&toks[b], "(")
	if !braces && !parens {
		return b, 0, false
	}
	depth, cmdPos := 1, true
	for j := b + 1; j < len(toks); j++ {
		t := &toks[j]
		switch t.kind {
		case tkWord:
			if cmdPos {
				switch t.val {
				case "{":
					if braces {
						depth++
					}
					continue
				case "}":
					if braces {
						if depth--; depth == 0 {
							return j, calls, spawn
						}
					}
					continue
				case "then", "do", "else", "elif", "if", "while", "until", "!", "time":
					continue
				}
				if t.val == name {
					calls++
				}
			}
			cmdPos = false
		case tkRedir:
			if j+1 < len(toks) && toks[j+1].kind == tkWord {
				j++
			}
		case tkOp:
			switch t.val {
			case "|", "|&", "&":
				spawn = true
			case "(":
				if parens {
					depth++
				}
			case ")":
				if parens {
					if depth--; depth == 0 {
						return j, calls, spawn
					}
				}
			}
			cmdPos = true
		}
	}
	return len(toks) - 1, calls, spawn
}

var forkIdioms = []string{
	"forkwhilefork", "fork()whilefork()", "forkwhile1", "fork()while1", "forkwhiletrue",
	"whiletrue:os.fork()", "while1:os.fork()", "whiletrue:fork()", "loop{fork}", "whiletrue{fork",
}

// checkForkIdiom looks for fork-loop idioms in inline interpreter code.
func checkForkIdiom(inv *invocation) string {
	for _, code := range interpreterCode(inv) {
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
		if r.isOutput() {
			if abs, ok := inv.abs(r.target); ok && abs == "/proc/sysrq-trigger" {
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
		if p := parseArgs(inv.args, ""); len(p.ops) > 0 && (p.ops[0] == "0" || p.ops[0] == "6") {
			return n + " " + p.ops[0] + " stops the machine"
		}
	case "systemctl":
		p := parseArgs(inv.args, "HMtpsno", "host", "machine", "type", "property", "signal", "lines", "output", "root", "kill-whom", "job-mode")
		if len(p.ops) == 0 {
			return ""
		}
		if slices.Contains(systemctlStop, p.ops[0]) {
			return "systemctl " + p.ops[0] + " stops the machine"
		}
		if p.ops[0] == "isolate" || p.ops[0] == "start" {
			for _, t := range p.ops[1:] {
				if slices.Contains(systemctlStopTargets, t) {
					return "systemctl " + p.ops[0] + " " + t + " stops the machine"
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
		for _, op := range parseArgs(inv.args, "").ops {
			if abs, ok := inv.abs(op); ok && abs == "/proc/sysrq-trigger" {
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

// isNotes reports whether arg names /work/notes.md; with globs, a glob
// matching it counts too.
func (inv *invocation) isNotes(arg string, globs bool) bool {
	for _, alt := range braceExpand(arg) {
		abs, ok := inv.abs(alt)
		if !ok {
			continue
		}
		if abs == NotesPath {
			return true
		}
		if globs && hasGlob(abs) {
			if m, _ := path.Match(abs, NotesPath); m {
				return true
			}
		}
	}
	return false
}

func (inv *invocation) anyNotes(ops []string, globs bool) bool {
	for _, op := range ops {
		if inv.isNotes(op, globs) {
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
		if r.isOutput() && inv.isNotes(r.target, false) {
			return "output redirection " + r.op + " writes" + notesWhy
		}
	}
	switch n := inv.name; n {
	case "rm", "unlink", "shred", "truncate", "tee", "sponge":
		if inv.anyNotes(parseArgs(inv.args, notesArgOpts[n], "iterations", "size", "reference", "random-source").ops, true) {
			return n + " rewrites or deletes" + notesWhy
		}
	case "chmod", "chown", "chgrp", "chattr", "setfacl", "patch":
		if inv.anyNotes(parseArgs(inv.args, notesArgOpts[n], "modify-file", "remove-file", "input", "output", "directory", "strip").ops, false) {
			return n + " modifies" + notesWhy
		}
	case "mv", "cp", "install", "ln", "link", "rsync":
		p := copyArgs(inv)
		dest, srcs, ok := copyDest(inv, &p)
		if !ok {
			break
		}
		if n == "mv" && inv.anyNotes(srcs, true) {
			return "mv moves away" + notesWhy
		}
		if inv.isNotes(dest, false) {
			return n + " overwrites" + notesWhy
		}
		if d, ok := inv.abs(dest); ok && d == WorkDir {
			for _, s := range srcs {
				if path.Base(s) == "notes.md" && !inv.isNotes(s, false) { // itself: a no-op
					return n + " " + s + " into " + WorkDir + " overwrites" + notesWhy
				}
			}
		}
	case "sed":
		if in, ops := sedInPlace(inv.args); in && inv.anyNotes(ops, true) {
			return "sed -i rewrites" + notesWhy
		}
	case "perl":
		if _, in, ops := perlArgs(inv.args); in && inv.anyNotes(ops, true) {
			return "perl -i rewrites" + notesWhy
		}
	case "awk", "gawk":
		p := parseArgs(inv.args, "fvFilE", "file", "assign", "field-separator", "include", "load")
		for _, v := range p.values("i", "include") {
			if v == "inplace" || v == "inplace.awk" {
				if inv.anyNotes(p.ops, true) {
					return n + " -i inplace rewrites" + notesWhy
				}
			}
		}
	case "dd":
		for _, a := range inv.args {
			if of, ok := strings.CutPrefix(a, "of="); ok && inv.isNotes(of, false) {
				return "dd of= overwrites" + notesWhy
			}
		}
	case "curl", "wget", "sort":
		if inv.isNotes(outputOption(inv), false) {
			return n + " output overwrites" + notesWhy
		}
	}
	for _, code := range interpreterCode(inv) {
		if codeWritesNotes(code, inv) {
			return inv.name + " code writes or deletes" + notesWhy
		}
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

// perlArgs returns perl's inline code (-e/-E), whether it edits in place
// (-i, -pi, -i.bak) and its operands.
func perlArgs(args []string) (codes []string, inPlace bool, ops []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return codes, inPlace, append(ops, args[i+1:]...)
		}
		if len(a) < 2 || a[0] != '-' {
			ops = append(ops, a) // script file (when no -e), then arguments
			continue
		}
	cluster:
		for k := 1; k < len(a); k++ {
			switch a[k] {
			case 'e', 'E':
				if k+1 < len(a) {
					codes = append(codes, a[k+1:])
				} else if i+1 < len(args) {
					i++
					codes = append(codes, args[i])
				}
				break cluster
			case 'i':
				inPlace = true
				break cluster
			case 'M', 'm', 'I', 'x', 'C', 'd', 'D', 'l', '0', 'F':
				break cluster
			}
		}
	}
	return codes, inPlace, ops
}

// interpreterCode returns inline code given to python, perl, ruby, node
// or php (-c/-e/-r, or a here-document/here-string when no script file).
func interpreterCode(inv *invocation) []string {
	n := inv.name
	var codes []string
	script := false
	switch {
	case strings.HasPrefix(n, "python") || strings.HasPrefix(n, "pypy"):
		for i := 0; i < len(inv.args); i++ {
			a := inv.args[i]
			if a == "-c" {
				if i+1 < len(inv.args) {
					return []string{inv.args[i+1]}
				}
				return nil
			}
			if strings.HasPrefix(a, "-c") && len(a) > 2 {
				return []string{a[2:]}
			}
			if a == "-m" || (a != "-" && !strings.HasPrefix(a, "-")) {
				script = true
				break
			}
			if a == "-W" || a == "-X" {
				i++
			}
		}
	case n == "perl":
		var ops []string
		codes, _, ops = perlArgs(inv.args)
		script = len(codes) == 0 && len(ops) > 0 && ops[0] != "-"
	case n == "ruby" || n == "node" || n == "nodejs" || n == "php" || n == "deno" || n == "bun":
		flags := map[string][]string{"ruby": {"-e"}, "php": {"-r"}}[n]
		if flags == nil {
			flags = []string{"-e", "--eval", "-p", "--print"}
		}
		for i := 0; i < len(inv.args); i++ {
			a := inv.args[i]
			if slices.Contains(flags, a) && i+1 < len(inv.args) {
				i++
				codes = append(codes, inv.args[i])
			} else if !strings.HasPrefix(a, "-") {
				script = len(codes) == 0
				break
			}
		}
	default:
		return nil
	}
	if len(codes) == 0 && !script && inv.hasStdin {
		codes = append(codes, inv.stdin)
	}
	return codes
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
		if !strings.HasSuffix(name, "notes.md") || !inv.isNotes(name, false) {
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
