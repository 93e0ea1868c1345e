package policy

import (
	"strings"
	"testing"
	"time"
)

// denyCases must be denied, by the given rule.
var denyCases = []struct{ cmd, rule string }{
	// rm_root: plain forms, flags order and spelling.
	{"rm -rf /", "rm_root"},
	{"rm -fr /", "rm_root"},
	{"rm -Rf /", "rm_root"},
	{"rm -r -f /", "rm_root"},
	{"rm -vfR /etc", "rm_root"},
	{"rm --recursive --force /", "rm_root"},
	{"rm --recur /usr", "rm_root"},
	{"rm / -rf", "rm_root"},
	{"rm -rf -- /", "rm_root"},
	{"rm -rf /*", "rm_root"},
	{"rm -rf /.*", "rm_root"},
	{"rm  -rf   //", "rm_root"},
	{"rm -rf /./", "rm_root"},
	{"rm -rf /usr/../", "rm_root"},
	{"rm -rf /work/..", "rm_root"},
	{"rm -rf /tmp/x /", "rm_root"},
	{"rm -rf /usr/", "rm_root"},
	{"rm -rf /etc/*", "rm_root"},
	{"rm -rf /var", "rm_root"},
	{"rm -rf /boot /bin /lib64", "rm_root"},
	{"rm -rf /{bin,etc}", "rm_root"},
	{"rm -rf /w*", "rm_root"},
	{"rm -rf ~", "rm_root"},
	{"rm -rf ~/", "rm_root"},
	{"rm -rf ~/*", "rm_root"},
	{"rm -rf $HOME", "rm_root"},
	{`rm -rf "${HOME}"/*`, "rm_root"},
	{"rm -rf /root", "rm_root"},
	{"rm --no-preserve-root -rf /", "rm_root"},
	{"rm -rf --no-preserve-root /tmp/x", "rm_root"},
	{"rm -rf /work", "rm_root"},
	{"rm -rf /work/", "rm_root"},
	{"rm -rf /work/*", "rm_root"},
	{"rm -rf /work/.", "rm_root"},
	{"rm -rf .", "rm_root"},
	{"rm -rf *", "rm_root"},
	{"rm -rf ./*", "rm_root"},
	{"rm -rf ..", "rm_root"},
	{`rm -rf "$PWD"`, "rm_root"},
	{"rm -rf /input", "rm_root"},
	// rm_root: quoting, absolute binaries, wrappers, nesting.
	{`"rm" "-rf" "/"`, "rm_root"},
	{`'rm' -rf '/'`, "rm_root"},
	{`r\m -rf /`, "rm_root"},
	{`\rm -rf /`, "rm_root"},
	{`$'\x72m' -rf /`, "rm_root"},
	{"/bin/rm -rf /", "rm_root"},
	{"/usr/bin/rm -rf /*", "rm_root"},
	{"//usr//bin//rm -rf /", "rm_root"},
	{"sudo rm -rf /", "rm_root"},
	{"sudo -u root -- rm -rf /", "rm_root"},
	{"sudo -E -H rm -rf /usr", "rm_root"},
	{"env FOO=1 rm -rf /", "rm_root"},
	{"env -i PATH=/bin rm -rf /", "rm_root"},
	{"FOO=1 BAR=2 rm -rf /", "rm_root"},
	{"nohup rm -rf / &", "rm_root"},
	{"timeout 10 rm -rf /", "rm_root"},
	{"timeout -s KILL 5s rm -rf /", "rm_root"},
	{"nice -n 10 rm -rf /usr", "rm_root"},
	{"ionice -c3 rm -rf /etc", "rm_root"},
	{"stdbuf -oL rm -rf /", "rm_root"},
	{"time rm -rf /", "rm_root"},
	{"command rm -rf /", "rm_root"},
	{"exec rm -rf /", "rm_root"},
	{"busybox rm -rf /", "rm_root"},
	{"setsid rm -rf /", "rm_root"},
	{"xargs rm -rf /", "rm_root"},
	{"echo / | xargs rm -rf", "rm_root"},
	{"xargs -0 -n1 rm -rf <<< /", "rm_root"},
	{"find /tmp -exec rm -rf / \\;", "rm_root"},
	{`bash -c "rm -rf /"`, "rm_root"},
	{`bash -c 'rm -rf /'`, "rm_root"},
	{`sh -c 'sudo rm -rf /*'`, "rm_root"},
	{`bash -lc "cd / && rm -rf *"`, "rm_root"},
	{`bash -euo pipefail -c 'rm -rf /'`, "rm_root"},
	{`sudo bash -c "sh -c 'rm -rf /'"`, "rm_root"},
	{`su -c "rm -rf /" root`, "rm_root"},
	{`eval "rm -rf /"`, "rm_root"},
	{`eval 'cd /'; rm -rf *`, "rm_root"},
	{`watch -n 1 rm -rf /`, "rm_root"},
	{"echo $(rm -rf /)", "rm_root"},
	{"echo \"$(rm -rf /)\"", "rm_root"},
	{"echo `rm -rf /`", "rm_root"},
	{"cat <(rm -rf /)", "rm_root"},
	{"X=$(sudo rm -rf /usr)", "rm_root"},
	{"ls; rm -rf / ; ls", "rm_root"},
	{"ls\nrm -rf /", "rm_root"},
	{"true && rm -rf ~", "rm_root"},
	{"false || rm -rf $HOME/*", "rm_root"},
	{"ls | rm -rf /", "rm_root"},
	{"if true; then rm -rf /; fi", "rm_root"},
	{"for i in 1 2; do rm -rf /etc; done", "rm_root"},
	{"{ rm -rf /; }", "rm_root"},
	{"(rm -rf /)", "rm_root"},
	{"! rm -rf /", "rm_root"},
	{"cd / && rm -rf *", "rm_root"},
	{"cd /tmp; cd ..; rm -rf *", "rm_root"},
	{"cd && rm -rf *", "rm_root"},
	{"X=/; rm -rf $X", "rm_root"},
	{"export T=/usr; rm -rf \"$T\"", "rm_root"},
	{"env -C / rm -rf *", "rm_root"},
	{"echo 'rm -rf /' | bash", "rm_root"},
	{"printf 'rm -rf /\\n' | sh", "rm_root"},
	{"bash <<< 'rm -rf /'", "rm_root"},
	{"bash <<'EOF'\necho hi\nrm -rf /\nEOF", "rm_root"},
	{"cat <<EOF\n$(rm -rf /)\nEOF", "rm_root"},
	{"rm -rf \\\n  /", "rm_root"},

	// mkfs
	{"mkfs.ext4 /dev/sdb1", "mkfs"},
	{"mkfs -t ext4 /dev/sdb", "mkfs"},
	{"sudo mkfs.xfs -f /dev/nvme0n1", "mkfs"},
	{"/sbin/mkfs.vfat /dev/sdc1", "mkfs"},
	{"mke2fs -F /dev/sda1", "mkfs"},
	{"mkswap /dev/sda2", "mkfs"},
	{"wipefs -a /dev/sda", "mkfs"},
	{"wipefs --all --force /dev/sda", "mkfs"},
	{"fdisk /dev/sda", "mkfs"},
	{`printf 'o\nw\n' | fdisk /dev/sda`, "mkfs"},
	{"sfdisk /dev/sda < layout.txt", "mkfs"},
	{"parted /dev/sda mklabel gpt", "mkfs"},
	{"parted -s /dev/sda rm 1", "mkfs"},
	{"parted /dev/sda", "mkfs"},
	{"sgdisk --zap-all /dev/sda", "mkfs"},
	{"blkdiscard /dev/nvme0n1", "mkfs"},
	{`bash -c "mkfs.ext4 /dev/sdb"`, "mkfs"},
	{"echo $(mkfs.btrfs /dev/vdb)", "mkfs"},
	{"echo /dev/sdb | xargs mkfs.ext4", "mkfs"},

	// dd_block_device
	{"dd if=/dev/zero of=/dev/sda", "dd_block_device"},
	{"dd if=/dev/urandom of=/dev/nvme0n1 bs=4M", "dd_block_device"},
	{"sudo dd if=img.iso of=/dev/sdb bs=4M status=progress", "dd_block_device"},
	{"dd of=/dev/vda if=/dev/zero", "dd_block_device"},
	{"dd if=/dev/zero of=//dev//sda", "dd_block_device"},
	{`dd if=/dev/zero of="/dev/sda"`, "dd_block_device"},
	{"dd if=x of=/dev/xvda1", "dd_block_device"},
	{"dd if=x of=/dev/hda", "dd_block_device"},
	{"dd if=x of=/dev/mmcblk0", "dd_block_device"},
	{"dd if=x of=/dev/mapper/root", "dd_block_device"},
	{"dd if=x of=/dev/dm-0", "dd_block_device"},
	{"dd if=x of=/dev/loop0", "dd_block_device"},
	{"cat /dev/zero > /dev/sda", "dd_block_device"},
	{"echo x >/dev/nvme0n1p1", "dd_block_device"},
	{"cat image.img 1> /dev/sdb", "dd_block_device"},
	{"cat img | tee /dev/sdb > /dev/null", "dd_block_device"},
	{"cp disk.img /dev/sdb", "dd_block_device"},
	{"shred -n 1 /dev/sda", "dd_block_device"},
	{`sh -c "dd if=/dev/zero of=/dev/sda"`, "dd_block_device"},
	{"cd /dev && dd if=/dev/zero of=sda", "dd_block_device"},

	// fork_bomb
	{":(){ :|:& };:", "fork_bomb"},
	{":(){ :|: & };:", "fork_bomb"},
	{": () { : | : & } ; :", "fork_bomb"},
	{":(){\n  :|:&\n};:", "fork_bomb"},
	{"bomb() { bomb | bomb & }; bomb", "fork_bomb"},
	{"x(){ x|x& };x", "fork_bomb"},
	{"function f { f | f & }; f", "fork_bomb"},
	{"function f() { f & f & }; f", "fork_bomb"},
	{"f() ( f | f & ); f", "fork_bomb"},
	{`bash -c ':(){ :|:& };:'`, "fork_bomb"},
	{`eval ':(){ :|:& };:'`, "fork_bomb"},
	{`perl -e "fork while fork"`, "fork_bomb"},
	{`python3 -c "import os
while True: os.fork()"`, "fork_bomb"},

	// shutdown
	{"shutdown -h now", "shutdown"},
	{"shutdown -r now", "shutdown"},
	{"sudo reboot", "shutdown"},
	{"reboot", "shutdown"},
	{"/sbin/reboot -f", "shutdown"},
	{"halt", "shutdown"},
	{"poweroff", "shutdown"},
	{"init 0", "shutdown"},
	{"init 6", "shutdown"},
	{"telinit 6", "shutdown"},
	{"systemctl reboot", "shutdown"},
	{"systemctl --force poweroff", "shutdown"},
	{"sudo systemctl halt", "shutdown"},
	{"systemctl kexec", "shutdown"},
	{"systemctl isolate reboot.target", "shutdown"},
	{"kill -9 -1", "shutdown"},
	{"kill -KILL -1", "shutdown"},
	{"kill -s KILL -1", "shutdown"},
	{"kill -SIGKILL -1", "shutdown"},
	{"kill -sigkill -1", "shutdown"},
	{"kill -- -1", "shutdown"},
	{"kill 1", "shutdown"},
	{"kill -9 1", "shutdown"},
	{"killall5 -9", "shutdown"},
	{"echo b > /proc/sysrq-trigger", "shutdown"},
	{`bash -c "sleep 5; reboot"`, "shutdown"},
	{"nohup shutdown now &", "shutdown"},
	{"case $1 in stop) reboot ;; esac", "shutdown"},
	{"sleep 1 && $(reboot)", "shutdown"},
	{"trap 'reboot' EXIT", "shutdown"},
	{"trap -- 'rm -rf /' INT TERM", "rm_root"},

	// notes_md
	{"rm /work/notes.md", "notes_md"},
	{"rm -f notes.md", "notes_md"},
	{"rm -- /work/notes.md", "notes_md"},
	{`rm "/work/notes.md"`, "notes_md"},
	{`rm /work/note\s.md`, "notes_md"},
	{"rm /work/./notes.md", "notes_md"},
	{"rm //work//notes.md", "notes_md"},
	{"rm /work/sub/../notes.md", "notes_md"},
	{"rm /work/*.md", "notes_md"},
	{"rm -f *.md", "notes_md"},
	{"unlink /work/notes.md", "notes_md"},
	{"mv /work/notes.md /tmp/", "notes_md"},
	{"mv notes.md notes.old", "notes_md"},
	{"mv /tmp/x.md /work/notes.md", "notes_md"},
	{"mv /tmp/notes.md /work/", "notes_md"},
	{"cp /tmp/x /work/notes.md", "notes_md"},
	{"cp -f new.md /work/notes.md", "notes_md"},
	{"cp /tmp/notes.md /work", "notes_md"},
	{"cp -t /work /tmp/notes.md", "notes_md"},
	{"install -m 644 x /work/notes.md", "notes_md"},
	{"ln -sf /tmp/x /work/notes.md", "notes_md"},
	{"truncate -s 0 /work/notes.md", "notes_md"},
	{"shred -u /work/notes.md", "notes_md"},
	{"echo x > /work/notes.md", "notes_md"},
	{"echo x >> /work/notes.md", "notes_md"},
	{"echo x >>/work/notes.md", "notes_md"},
	{"echo x>notes.md", "notes_md"},
	{": > notes.md", "notes_md"},
	{"> /work/notes.md", "notes_md"},
	{"cat a >| /work/notes.md", "notes_md"},
	{"make &>> /work/notes.md", "notes_md"},
	{"ls 2>/work/notes.md", "notes_md"},
	{"exec 3>>/work/notes.md", "notes_md"},
	{"cat <<EOF >> /work/notes.md\nhello\nEOF", "notes_md"},
	{"echo x | tee /work/notes.md", "notes_md"},
	{"echo x | tee -a /work/notes.md", "notes_md"},
	{"sudo tee /work/notes.md < x", "notes_md"},
	{"sed -i 's/a/b/' /work/notes.md", "notes_md"},
	{"sed -i.bak -e 's/a/b/' notes.md", "notes_md"},
	{"sed --in-place 's/x/y/' /work/notes.md", "notes_md"},
	{"sed -Ei 's/x/y/' /work/notes.md", "notes_md"},
	{"sed -i 's/x/y/g' /work/*.md", "notes_md"},
	{"perl -pi -e 's/a/b/' /work/notes.md", "notes_md"},
	{"perl -i -pe 's/a/b/' /work/notes.md", "notes_md"},
	{"awk -i inplace '{print}' /work/notes.md", "notes_md"},
	{"dd if=/dev/zero of=/work/notes.md", "notes_md"},
	{"chmod 000 /work/notes.md", "notes_md"},
	{"chown nobody /work/notes.md", "notes_md"},
	{"curl -sSLo /work/notes.md http://x", "notes_md"},
	{"wget -O /work/notes.md http://x", "notes_md"},
	{`python3 -c "open('/work/notes.md','w').write('x')"`, "notes_md"},
	{`python3 -c "open('notes.md', 'a').write('x')"`, "notes_md"},
	{`python3 -c "import os; os.remove('/work/notes.md')"`, "notes_md"},
	{`python3 -c "from pathlib import Path; Path('/work/notes.md').write_text('')"`, "notes_md"},
	{`perl -e 'open(my $f, ">", "/work/notes.md")'`, "notes_md"},
	{`perl -e 'open(F, ">>/work/notes.md")'`, "notes_md"},
	{`node -e "require('fs').writeFileSync('/work/notes.md','')"`, "notes_md"},
	{"python3 - <<'EOF'\nwith open('/work/notes.md', 'w') as f:\n    f.write('')\nEOF", "notes_md"},
	{"cd /work && rm notes.md", "notes_md"},
	{"cd /tmp && rm /work/notes.md", "notes_md"},
	{`bash -c 'echo > /work/notes.md'`, "notes_md"},
	{"echo $(rm /work/notes.md)", "notes_md"},
	{"find /work -name x -exec rm /work/notes.md \\;", "notes_md"},

	// chmod_root
	{"chmod -R 777 /", "chmod_root"},
	{"sudo chown -R nobody:nogroup /usr", "chmod_root"},
	{"chmod -R 000 /etc", "chmod_root"},
	{"chgrp -R staff /var", "chmod_root"},
	{"chmod --recursive 777 /*", "chmod_root"},

	// unparseable: bash would refuse these too.
	{"echo 'unterminated", "unparseable"},
	{"rm -rf / )", "unparseable"},
	{"echo $(", "unparseable"},
	{"if true; then rm -rf /", "unparseable"},

	// decoded_script
	{"echo cm0gLXJmIC8K | base64 -d | sh", "decoded_script"},
	{"xxd -r -p payload.hex | bash", "decoded_script"},
	{"openssl enc -d -aes-256-cbc -in x.enc -pass pass:k | sh", "decoded_script"},
}

// allowCases are look-alikes that must not be denied.
var allowCases = []string{
	// rm
	"rm -rf /work/tmp",
	"rm -rf ./build",
	"rm -rf build dist",
	"rm -rf /work/build/*",
	"rm -rf /tmp/*",
	"rm -rf /tmp/x/",
	"rm -rf /var/lib/apt/lists/*",
	"rm -rf ~/.cache/pip",
	"rm -rf $HOME/.npm",
	"rm -rf /usr/local/lib/python3.12/site-packages/foo",
	"rm -f /etc/motd",
	"rm /work/*.log",
	"rm -rf /work/*.tmp",
	`rm -rf "$TMPDIR"/*`,
	`rm -rf $OUT/*`,
	`rm -rf "~"`,
	"cd /tmp && rm -rf *",
	"cd /tmp/x; rm -rf ..",
	"(cd /tmp && rm -rf *)",
	"env -C /tmp rm -rf *",
	"xargs -I{} rm -rf {}",
	"find . -name '*.pyc' -delete",
	"echo rm -rf /",
	`echo "rm -rf /" > /work/danger.txt`,
	`git commit -m "rm -rf / is bad"`,
	"grep -r 'rm -rf /' .",
	`python3 -c "print('rm -rf /')"`,
	"# rm -rf /",
	"ls # ; rm -rf /",
	"cat > /work/x.sh <<'EOF'\nrm -rf /\nEOF",
	"rmdir /work/empty",
	"X=/tmp/build; rm -rf $X",
	// mkfs
	"fdisk -l",
	"sudo fdisk -l /dev/sda",
	"sfdisk -d /dev/sda",
	"parted -l",
	"parted /dev/sda print",
	"wipefs /dev/sda",
	"which mkfs.ext4",
	"man mkfs",
	"apt-get install -y e2fsprogs dosfstools",
	"grep mkfs /var/log/syslog",
	`python3 -c "print('mkfs')"`,
	"echo mkfs",
	"mkdir mkfs && touch mkfs.log",
	"mkfs.ext4 --help",
	"mkfs",
	"echo rm -rf / | bash -n",
	`trap 'rm -rf "$TMP"' EXIT`,
	"ls /sbin/mkfs*",
	// dd / devices
	"dd if=/dev/zero of=/work/file bs=1M count=1",
	"dd if=/dev/sda of=/work/mbr.bin bs=512 count=1",
	"dd if=/dev/zero of=/dev/null count=1",
	"dd if=/work/a of=/work/b conv=notrunc",
	"echo hi > /dev/null",
	"echo hi >&2",
	"make 2>&1 | tee build.log",
	"echo hi > /dev/stderr",
	"ls -l /dev/sda",
	"lsblk /dev/sda",
	"cat /dev/sda | head -c 512 > /work/mbr",
	"cmd 2>/dev/null",
	"cp /dev/null /work/empty",
	// fork bombs
	"f() { echo hi; }; f",
	"f() { f; }",
	`retry() { "$@" || retry "$@"; }; retry curl -s x`,
	"countdown(){ [ $1 -gt 0 ] && countdown $(( $1 - 1 )); }; countdown 3",
	"a() { b | b & }; a",
	"grep ':(){ :|:& };:' notes.txt",
	`echo ":(){ :|:& };:"`,
	"sleep 10 & wait",
	"(sleep 1 &); wait",
	"for i in 1 2 3; do sleep 1 & done; wait",
	`python3 -c "import os; pid = os.fork()"`,
	// shutdown
	"grep reboot notes.txt",
	"echo reboot",
	"systemctl status ssh",
	"systemctl restart nginx",
	"kill -9 12345",
	"kill %1",
	"kill -HUP 1234",
	"kill -1 1234",
	"kill -0 1",
	"kill -l",
	"pkill -f 'python server.py'",
	"last reboot",
	"journalctl --list-boots",
	"cat /var/log/shutdown.log",
	"python3 reboot_test.py",
	"./reboot",
	"man shutdown",
	"shutdown --help",
	// notes.md
	"cat /work/notes.md",
	"grep -n TODO /work/notes.md",
	"head -20 notes.md",
	"tail -f /work/notes.md",
	"wc -l /work/notes.md",
	"wc -l < /work/notes.md",
	"cp /work/notes.md /tmp/x",
	"cp /work/notes.md /work/notes.md.bak",
	"sed -n '1,5p' /work/notes.md",
	"sed 's/a/b/' /work/notes.md > /work/clean.md",
	"perl -ne 'print if /x/' /work/notes.md",
	"awk '{print $1}' notes.md",
	`echo "see notes.md" >> /work/summary.md`,
	"echo notes.md",
	"rm /work/notes.md.bak",
	"rm /work/old/notes.md",
	"rm -f /work/*.tmp",
	"mv /work/draft.md /work/final.md",
	"tee /work/out.txt < /work/notes.md",
	`python3 -c "print(open('/work/notes.md').read())"`,
	`python3 -c "print(open('/work/notes.md').read().count('a'))"`,
	`python3 -c "open('/work/out.md','w').write(open('/work/notes.md').read())"`,
	"diff /work/notes.md /tmp/notes.md",
	"ls -l /work/notes.md",
	"less notes.md",
	"cat notes.md > /tmp/copy.md",
	"ln -s /work/notes.md /tmp/notes-link",
	"touch /work/notes.md.lock",
	"git diff notes.md",
	"cd /tmp && rm notes.md",
	"cp notes.md /work/",
	"case $1 in start) rm -rf /tmp/x ;; esac",
	"cat > x.sh <<'EOF'\n$(rm -rf /)\nEOF",
	"reboot() { echo no; }",
	"cd /tmp && echo x > notes.md",
	"chmod +x /work/run.sh",
	// chmod
	"chown -R 1000:1000 /work",
	"chmod -R 755 /work/bin",
	"chmod -R a+rX /usr/local/lib/foo",
	"chmod 644 /etc/hosts",
	"chmod -r /work/secret",
	// misc
	"ls -la",
	"apt-get update && apt-get install -y ripgrep",
	"pip install -r requirements.txt",
	"",
	"   ",
	"echo $((1 << 3))",
	"a=(1 2 3); echo ${a[@]}",
}

func TestDenyTable(t *testing.T) {
	if len(denyCases) < 80 {
		t.Fatalf("want at least 80 denied cases, have %d", len(denyCases))
	}
	for _, c := range denyCases {
		d := Check(c.cmd)
		if !d.Denied || d.Rule != c.rule {
			t.Errorf("Check(%q) = %+v, want denied by %s", c.cmd, d, c.rule)
			continue
		}
		if d.Reason == "" || d.Match == "" {
			t.Errorf("Check(%q) = %+v: empty reason or match", c.cmd, d)
		}
	}
}

func TestAllowTable(t *testing.T) {
	if len(allowCases) < 40 {
		t.Fatalf("want at least 40 allowed cases, have %d", len(allowCases))
	}
	for _, c := range allowCases {
		if d := Check(c); d.Denied {
			t.Errorf("Check(%q) = %s, want allowed", c, d)
		}
	}
}

// TestRuleExamples runs the examples documented on each rule.
func TestRuleExamples(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Rules() {
		if r.ID == "" || r.Description == "" || len(r.Denies) == 0 || len(r.Allows) == 0 {
			t.Errorf("rule %q is not fully documented", r.ID)
		}
		if seen[r.ID] {
			t.Errorf("duplicate rule ID %q", r.ID)
		}
		seen[r.ID] = true
		for _, c := range r.Denies {
			if d := Check(c); !d.Denied || d.Rule != r.ID {
				t.Errorf("rule %s documents %q as denied; got %+v", r.ID, c, d)
			}
		}
		for _, c := range r.Allows {
			if d := Check(c); d.Denied {
				t.Errorf("rule %s documents %q as allowed; got %s", r.ID, c, d)
			}
		}
	}
	for _, id := range []string{"rm_root", "mkfs", "dd_block_device", "fork_bomb", "shutdown", "notes_md"} {
		if !seen[id] {
			t.Errorf("missing rule %s", id)
		}
	}
	// Every rule is exercised by the table too.
	inTable := map[string]bool{}
	for _, c := range denyCases {
		inTable[c.rule] = true
	}
	for id := range seen {
		if !inTable[id] {
			t.Errorf("rule %s has no case in denyCases", id)
		}
	}
}

func TestRulesReturnsCopy(t *testing.T) {
	r := Rules()
	r[0].Denies[0] = "changed"
	r[0].ID = "changed"
	if Rules()[0].ID == "changed" || Rules()[0].Denies[0] == "changed" {
		t.Fatal("Rules exposes internal state")
	}
}

func TestCheckIn(t *testing.T) {
	cases := []struct {
		cmd, cwd, rule string
	}{
		{"rm notes.md", "/work", "notes_md"},
		{"rm notes.md", "/tmp", ""},
		{"rm ../notes.md", "/work/sub", "notes_md"},
		{"rm -rf *", "/", "rm_root"},
		{"rm -rf *", "/work/build", ""},
		{"rm -rf ..", "/work/build", "rm_root"},
		{"rm -rf *", "", ""},
		{"rm notes.md", "", ""},
		{"rm notes.md", "relative/dir", ""},
		{"rm -rf /", "", "rm_root"},
		{"cd /work; rm notes.md", "", "notes_md"},
		{"echo x >> notes.md", "/work/", "notes_md"},
	}
	for _, c := range cases {
		d := CheckIn(c.cmd, c.cwd)
		if d.Rule != c.rule || d.Denied != (c.rule != "") {
			t.Errorf("CheckIn(%q, %q) = %+v, want rule %q", c.cmd, c.cwd, d, c.rule)
		}
	}
}

func TestDecisionFields(t *testing.T) {
	d := Check("ls -la && sudo rm -rf / ; echo done")
	if d.Match != "sudo rm -rf /" {
		t.Errorf("Match = %q, want the offending simple command", d.Match)
	}
	if !strings.Contains(d.String(), "rm_root") || !strings.Contains(d.Reason, `"/"`) {
		t.Errorf("String() = %q, Reason = %q", d.String(), d.Reason)
	}
	if got := Check("bash -c 'ls; rm -rf /usr'"); got.Match != "rm -rf /usr" {
		t.Errorf("nested Match = %q, want the innermost command", got.Match)
	}
	if got := Check(":(){ :|:& };:"); got.Match != ":(){ :|:& }" {
		t.Errorf("fork bomb Match = %q", got.Match)
	}
	if s := Check("ls").String(); s != "allowed" {
		t.Errorf("allowed String() = %q", s)
	}
}

// TestPathological checks that adversarial shapes terminate quickly.
func TestPathological(t *testing.T) {
	inputs := []string{
		strings.Repeat("$(", 100000),
		strings.Repeat("$(echo ", 5000) + "rm -rf /" + strings.Repeat(")", 5000),
		strings.Repeat("bash -c '", 2000),
		strings.Repeat(`bash -c "`, 2000),
		strings.Repeat("(", 200000),
		strings.Repeat(")", 200000),
		strings.Repeat("f(){ ", 20000),
		strings.Repeat("`", 100001),
		strings.Repeat(`"`, 100001),
		strings.Repeat("{a,b}", 5000),
		"rm -rf " + strings.Repeat("{a,{b,c}}", 4),
		strings.Repeat("<<EOF\n", 10000),
		strings.Repeat("echo $(echo $(echo x)) | ", 5000),
		strings.Repeat("sudo ", 50000) + "rm -rf /",
		strings.Repeat("eval ", 10000) + "rm -rf /",
		strings.Repeat("x", 1<<20),
		strings.Repeat("'", 100001),
		strings.Repeat("${", 100000),
		strings.Repeat("\\", 100001),
	}
	// The bound catches blow-ups (exponential or quadratic in these sizes
	// take minutes), not constant factors: under -race, with the other
	// packages' tests sharing a 2-core CI machine, 200 000 '(' took 2.3 s.
	const bound = 6 * time.Second
	for i, in := range inputs {
		start := time.Now()
		Check(in)
		if el := time.Since(start); el > bound {
			t.Errorf("input %d (%d bytes) took %v", i, len(in), el)
		}
	}
	// Deep but within the bound is still analysed; beyond it is fail-open.
	nest := "rm -rf /"
	for range 3 {
		nest = "bash -c " + shellQuote(nest)
	}
	if d := Check(nest); d.Rule != "rm_root" {
		t.Errorf("3-level nesting not analysed: %+v", d)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// typical is a ~200-character command of the kind the agent runs.
const typical = `cd /work && mkdir -p build && python3 -m venv .venv && . .venv/bin/activate && pip install -q -r requirements.txt 2>&1 | tail -n 5; grep -rn "TODO" src/ | head -20 > /work/todo.txt; ls -la build`

func BenchmarkCheck(b *testing.B) {
	if d := Check(typical); d.Denied {
		b.Fatalf("typical command denied: %s", d)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(typical)))
	for b.Loop() {
		Check(typical)
	}
}

// FuzzCheck checks that Check never panics and stays fast on arbitrary
// input, that its decisions are consistent, that every documented Denies
// entry of every rule is denied by that rule, and that no text written
// after a denied command (on the next line) makes it allowed: either the
// whole still parses and the first command is still refused, or it does
// not parse and is refused as unparseable.
func FuzzCheck(f *testing.F) {
	documented := map[string]string{}
	var prefixes []string
	for _, r := range Rules() {
		for _, c := range r.Denies {
			documented[c] = r.ID
			f.Add(c)
			if r.ID != "unparseable" { // the suffix may close its quote or bracket
				prefixes = append(prefixes, c)
			}
		}
		for _, c := range r.Allows {
			f.Add(c)
		}
	}
	for _, c := range denyCases {
		f.Add(c.cmd)
	}
	for _, c := range allowCases {
		f.Add(c)
	}
	f.Add(typical)
	f.Add("a=(\"$(x\" '\\\n")
	f.Add("cat <<-'E'\n\tx\n\tE\n$((1<<2))`")
	f.Fuzz(func(t *testing.T, s string) {
		start := time.Now()
		d := Check(s)
		if el := time.Since(start); el > 2*time.Second {
			t.Fatalf("Check took %v on %d bytes", el, len(s))
		}
		if d.Denied != (d.Rule != "") || (d.Denied && (d.Reason == "" || d.Match == "")) {
			t.Fatalf("inconsistent decision %+v", d)
		}
		known := false
		for _, r := range rules {
			known = known || r.ID == d.Rule
		}
		if d.Denied && !known {
			t.Fatalf("unknown rule %q", d.Rule)
		}
		if id, ok := documented[s]; ok && d.Rule != id {
			t.Fatalf("Check(%q) = %s, documented as denied by %s", s, d, id)
		}
		CheckIn(s, "/work/sub")
		p := prefixes[len(s)%len(prefixes)]
		if d := Check(p + "\n" + s); !d.Denied {
			t.Fatalf("Check(%q + newline + %q) allowed; the first line alone is denied", p, s)
		}
	})
}
