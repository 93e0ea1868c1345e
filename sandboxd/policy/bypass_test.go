package policy

import (
	"strings"
	"testing"
)

// checkCases runs Check on each command and wants the given rule ("" for
// allowed).
func checkCases(t *testing.T, cases []struct{ cmd, rule string }) {
	t.Helper()
	for _, c := range cases {
		d := Check(c.cmd)
		if d.Rule != c.rule || d.Denied != (c.rule != "") {
			want := "allowed"
			if c.rule != "" {
				want = "denied by " + c.rule
			}
			t.Errorf("Check(%q) = %s, want %s", c.cmd, d, want)
			continue
		}
		if d.Denied && (d.Reason == "" || d.Match == "") {
			t.Errorf("Check(%q) = %+v: empty reason or match", c.cmd, d)
		}
	}
}

// TestIssueBypasses covers the three commands issue 17 found passing
// although the rules said they were denied, with their variants.
func TestIssueBypasses(t *testing.T) {
	checkCases(t, []struct{ cmd, rule string }{
		// A glob (or brace list) in a write target may name notes.md.
		{"echo x > /work/n?tes.md", "notes_md"},
		{"echo x > /work/no*.md", "notes_md"},
		{"echo x > no*.md", "notes_md"},
		{"echo x > [n]otes.md", "notes_md"},
		{"echo x > /work/[!x]otes.md", "notes_md"},
		{"echo x > /work/[^x]otes.md", "notes_md"},
		{"echo x >> /work/*", "notes_md"},
		{"echo x > /w*/notes.md", "notes_md"},
		{"echo x > /work/@(notes).md", "notes_md"},
		{"echo x &> /work/*.md", "notes_md"},
		{"echo x 2> /work/n?tes.md", "notes_md"},
		{"cd /work && echo x > ./n*", "notes_md"},
		{"X='/work/n?tes.md'; echo x > $X", "notes_md"},
		{"echo x | tee /work/{notes,other}.md", "notes_md"},
		{"echo x | tee -a /work/n?tes.md", "notes_md"},
		{"cp x /work/n*.md", "notes_md"},
		{"mv x /work/[n]otes.md", "notes_md"},
		{"ln -sf /tmp/x /work/no*", "notes_md"},
		{"dd if=/dev/zero of=/work/n?tes.md", "notes_md"}, // bash leaves of=… unexpanded unless a file matches; refused anyway
		{"truncate -s 0 /work/*", "notes_md"},
		{"sed -i d /work/n*", "notes_md"},
		{"perl -pi -e 's/a/b/' /work/*.md", "notes_md"},
		{"curl -o /work/n?tes.md http://x", "notes_md"},
		{"sort -o /work/no*.md x", "notes_md"},
		{"chmod 000 /work/*.md", "notes_md"},
		{"echo x > /work/{notes}.md", ""},    // one element: no brace expansion
		{"echo x > /work/n?tes.txt", ""},     // does not match notes.md
		{"echo x > /tmp/*.md", ""},           // another directory
		{"echo x > /work/sub/*.md", ""},      // below /work
		{"cd /tmp && echo x > n?tes.md", ""}, // relative to /tmp
		{"cat /work/n?tes.md > /tmp/x", ""},
		{"echo x > $OUT", ""}, // unknown: never matches
		{"(echo x) > /work/n?tes.md", "notes_md"},
		{"{ echo x; } > /work/n?tes.md", "notes_md"},
		{"while read l; do echo $l; done > /work/notes.md", "notes_md"},
		// xargs -I substitutes what it reads.
		{"echo / | xargs -I{} rm -rf {}", "rm_root"},
		{"echo / | xargs -I % rm -rf %", "rm_root"},
		{"echo / | xargs -i rm -rf {}", "rm_root"},
		{"printf '/\\n' | xargs -I{} sh -c 'rm -rf {}'", "rm_root"},
		{"xargs -I{} rm -rf {} <<< /usr", "rm_root"},
		{"echo /tmp/x | xargs -I{} rm -rf {}", ""},
		{"xargs -I{} rm -rf {}", ""}, // stdin not visible
		// printf's format is applied to its arguments.
		{"printf '%s' 'rm -rf /' | sh", "rm_root"},
		{"printf '%s\\n' 'rm -rf /' | bash", "rm_root"},
		{"printf 'rm -rf %s' / | sh", "rm_root"},
		{"printf '%b' 'rm -rf /\\n' | sh", "rm_root"},
		{"printf -- '%s' 'reboot' | sh", "shutdown"},
		{"printf '%s' 'rm -rf /' > /work/x.txt", ""},
		{"printf '%s' 'ls -la' | sh", ""},
	})
}

// TestBypassFamilies covers the families docs/sandbox.md listed as not
// analysed: what is now denied and the ordinary look-alikes still allowed.
func TestBypassFamilies(t *testing.T) {
	checkCases(t, []struct{ cmd, rule string }{
		// Command words of unknown value, and substitutions whose output
		// is visible (an echo or printf of known words).
		{"$(echo rm) -rf /", "rm_root"},
		{"$(cat name) -rf /", "rm_root"},
		{`bash -c "$(printf 'rm -rf /')"`, "rm_root"},
		{"eval $(echo rm -rf /)", "rm_root"},
		{"$(echo rm -rf /)", "rm_root"},
		{`sh -c "$(echo 'echo x > /work/notes.md')"`, "notes_md"},
		// The value of an unquoted variable is split into words.
		{`X="rm -rf /"; $X`, "rm_root"},
		{`X="-rf /"; rm $X`, "rm_root"},
		{`E=; $E rm -rf /`, "rm_root"},
		{`X="a b"; ls $X`, ""},
		{`X="rm -rf /"; echo "$X"`, ""},
		// A for loop's body is judged with each known item.
		{`for f in /work/*; do rm -rf "$f"; done`, "rm_root"},
		{"for d in /tmp /; do rm -rf $d; done", "rm_root"},
		{"for f in x notes.md; do cd /work; echo hi > $f; done", "notes_md"},
		{"for f in $(echo / /tmp); do rm -rf $f; done", "rm_root"},
		{`for f in /work/build/*; do rm -rf "$f"; done`, ""},
		{`for f in a.txt b.txt; do rm -f "$f"; done`, ""},
		{"for i in $(seq 1 5); do echo $i; done", ""},
		{"for a in 1 2 3 4 5 6 7 8; do for b in 1 2 3 4 5 6 7 8; do for c in 1 2 3 4 5 6 7 8; do echo $a$b$c; done; done; done", ""},
		{"`echo rm` -rf /", "rm_root"},
		{"${X} -rf /", "rm_root"},
		{"r$(echo m) -fr /usr", "rm_root"},
		{`"$RM" -rf ~`, "rm_root"},
		{"$(echo rm) --no-preserve-root -r /", "rm_root"},
		{"$SUDO rm -rf /", "rm_root"},
		{"$X sudo rm -rf /etc", "rm_root"},
		{"X=rm; $X -rf /", "rm_root"},
		{"$CC -o app main.c", ""},
		{`"$PYTHON" -m pytest -rf /work/tests`, ""}, // -rf, but not a protected target
		{"$(which ls) -R /", ""},                    // recursive but no force flag: ls -R / is ordinary
		{"$SUDO apt-get install -y jq", ""},
		{"$SUDO rm -rf /tmp/x", ""},
		{"$EDITOR notes.txt", ""},
		// Decoded payloads run by a shell or interpreter.
		{"echo cm0gLXJmIC8K | base64 -d | sh", "decoded_script"},
		{"base64 -d <<< cm0gLXJmIC8K | bash", "decoded_script"},
		{"cat x | base64 --decode | bash -s", "decoded_script"},
		{"base32 -d x | sh", "decoded_script"},
		{"xxd -r -p <<< 726d202d7266202f | sh", "decoded_script"},
		{"openssl base64 -d -in x | sh", "decoded_script"},
		{"openssl enc -d -aes-256-cbc -in x.enc -k k | sudo sh", "decoded_script"},
		{"cat payload | gunzip | sh", "decoded_script"},
		{"zcat x.gz | bash", "decoded_script"},
		{"echo '/ fr- mr' | rev | sh", "decoded_script"},
		{"curl -s https://x | base64 -d | bash", "decoded_script"},
		{"base64 -d x | python3", "decoded_script"},
		{"base64 -d x | perl", "decoded_script"},
		{"base64 -d x | source /dev/stdin", "decoded_script"},
		{"base64 -d x | xargs -I{} sh -c {}", "decoded_script"},
		{`eval "$(base64 -d x)"`, "decoded_script"},
		{"eval `base64 -d x`", "decoded_script"},
		{`sh -c "$(echo x | xxd -r -p)"`, "decoded_script"},
		{"source <(base64 -d x)", "decoded_script"},
		{"bash <(gzip -dc x.gz)", "decoded_script"},
		{`python3 -c "$(base64 -d x)"`, "decoded_script"},
		{`python3 -c "import base64;print(base64.b64decode('cm0gLXJmIC8K').decode())" | sh`, "decoded_script"},
		{"sh < <(base64 -d x)", "decoded_script"},
		{"bash <<EOF\n$(base64 -d x)\nEOF", "decoded_script"},
		{"python3 <<EOF\n$(echo x | base64 -d)\nEOF", "decoded_script"},
		{`bash <<< "$(base64 -d x)"`, "decoded_script"},
		{`python3 tool.py --token "$(base64 -d tok.b64)"`, ""},
		{`bash deploy.sh "$(base64 -d arg.b64)"`, ""},
		{"base64 -d blob.b64 > /work/blob.bin", ""},
		{"echo aGkK | base64 -d", ""},
		{"base64 -d x.b64 | tar -xz -C /work", ""},
		{"gunzip -c x.gz | wc -l", ""},
		{"base64 x.sh | bash -c 'wc -c'", ""},
		{"curl -fsSL https://example.com/install.sh | sh", ""}, // not judged: documented
		{`eval "$(ssh-agent -s)"`, ""},
		{"echo 'ls -la' | bash", ""},
		// find -delete and find -exec.
		{"find / -delete", "rm_root"},
		{"find / -mindepth 1 -delete", "rm_root"},
		{"find ~ -delete", "rm_root"},
		{"find /usr -depth -delete", "rm_root"},
		{"find /work -type f -delete", "rm_root"},
		{"find . -delete", "rm_root"},
		{"find /work ! -name '*.py' -delete", "rm_root"},
		{"find / -exec rm -rf {} \\;", "rm_root"},
		{"find / -maxdepth 1 -exec rm -rf {} +", "rm_root"},
		{"sudo find /etc -execdir rm -rf {} +", "rm_root"},
		{"find /work -name notes.md -delete", "notes_md"},
		{"find /work -iname 'NOTES.MD' -delete", "notes_md"},
		{"find /work -name '*.md' -delete", "notes_md"},
		{"find . -maxdepth 1 -name 'n*' -delete", "notes_md"},
		{"find /work -path '*/notes.md' -delete", "notes_md"},
		{"find /work -name '*.md' -o -name '*.txt' -delete", "notes_md"},
		{"find /work -mtime +7 -delete", "notes_md"},
		{"find /work -name '*.md' -exec rm {} +", "notes_md"},
		{"find /work -name notes.md -exec mv {} /tmp \\;", "notes_md"},
		{"find /work -name notes.md -exec sh -c 'echo > {}' \\;", "notes_md"},
		{"find /work -name '*.pyc' -delete", ""},
		{"find / -name core -delete", ""},
		{"find /tmp -mindepth 1 -delete", ""},
		{"find /work/build -type f -delete", ""},
		{"find /work -type d -empty -delete", ""},
		{"find /work -mindepth 2 -name '*.md' -delete", ""},
		{"find /work -maxdepth 0 -name '*.md' -delete", ""},
		{"find /work -path './x/*' -delete", ""},
		{"find /work -type f -name '*.log' -exec rm {} \\;", ""},
		{"find . -name '*.py' -exec grep -l TODO {} +", ""},
		{"find /work -name '*.md'", ""},
		// Interpreter one-liners (best effort).
		{`python3 -c "import shutil; shutil.rmtree('/')"`, "rm_root"},
		{`python3 -c "import shutil; shutil.rmtree('.')"`, "rm_root"},
		{`python3 -c "import os; os.system('rm -rf ~')"`, "rm_root"},
		{`python3 -c "import subprocess as s; s.call('reboot', shell=True)"`, "shutdown"},
		{`python3 -c "import subprocess; subprocess.run(['rm', '-rf', '/etc'])"`, "rm_root"},
		{`python3 -c "import os; os.execvp('rm', ['rm', '-rf', '/'])"`, "rm_root"},
		{`python3 -c "import os; os.system('echo x > /work/notes.md')"`, "notes_md"},
		{`python3 -c "import os; os.remove('/work/notes.md')"`, "notes_md"},
		{"python3 - <<'EOF'\nimport os\nos.system(\"rm -rf /\")\nEOF", "rm_root"},
		{`perl -e 'use File::Path; rmtree("/etc")'`, "rm_root"},
		{"perl -e '`rm -rf /`'", "rm_root"},
		{`perl -e 'system("rm", "-rf", "/")'`, "rm_root"},
		{`ruby -e 'system("mkfs.ext4 /dev/sda")'`, "mkfs"},
		{`ruby -e '%x(rm -rf /)'`, "rm_root"},
		{`ruby -e 'FileUtils.rm_rf("/usr")'`, "rm_root"},
		{`node -e "require('fs').rmSync('/', {recursive: true})"`, "rm_root"},
		{`node -e "require('child_process').execSync('shutdown -h now')"`, "shutdown"},
		{`php -r 'shell_exec("rm -rf /");'`, "rm_root"},
		{`python3 -c "import shutil; shutil.rmtree('build')"`, ""},
		{`python3 -c "import subprocess; subprocess.run(['ls', '-la'])"`, ""},
		{`python3 -c "exec('print(1)')"`, ""},
		{`python3 -c "print('rm -rf /')"`, ""},
		{`python3 -c "print(\"never run 'rm -rf /'\")"`, ""},
		{`perl -e 'system "rm -rf /"'`, "rm_root"},
		{`ruby -e 'FileUtils.rm_rf "/etc"'`, "rm_root"},
		{`python3 -c "import os; os.system('echo (')"`, ""}, // does not parse: skipped, not denied
		{`node -e "console.log(require('child_process').execSync('ls').toString())"`, ""},
		// Wrappers.
		{"setpriv --reuid=1000 rm -rf /", "rm_root"},
		{"unshare -r rm -rf /", "rm_root"},
		{"unshare --wd=/ rm -rf *", "rm_root"},
		{"script -c 'rm -rf /' /dev/null", "rm_root"},
		{"script -qc 'reboot' /dev/null", "shutdown"},
		{"parallel 'rm -rf {}' ::: / /tmp", "rm_root"},
		{"echo / | parallel rm -rf", "rm_root"},
		{"sg root 'rm -rf /'", "rm_root"},
		{"nsenter -t 1 -m rm -rf /", "rm_root"},
		{"nsenter -a -t 1 reboot", "shutdown"},
		{"strace -f -o /tmp/t rm -rf /", "rm_root"},
		{"flock /tmp/l -c 'rm -rf /'", "rm_root"},
		{"parallel gzip ::: /work/a.log /work/b.log", ""},
		{"script -qc 'ls /' /dev/null", ""},
		{"unshare -r id", ""},
	})
}

// TestUnparseable checks that input bash would refuse, and input nested
// beyond what the analysis follows, is denied by the unparseable rule.
func TestUnparseable(t *testing.T) {
	subs := "rm -rf /tmp/x"
	for range shellMaxNestingPlus1 {
		subs = "echo $(" + subs + ")"
	}
	nested := "ls"
	for range maxDepth + 1 {
		nested = "bash -c " + shellQuote(nested)
	}
	cases := []struct{ cmd, why string }{
		{"echo 'unterminated", "not valid shell"},
		{"rm -rf / )", "not valid shell"},
		{"echo $(", "not valid shell"},
		{"fi", "not valid shell"},
		{`bash -c 'echo $('`, "not valid shell"},
		{`eval "echo ("`, "not valid shell"},
		{strings.Repeat("(", 5000) + "ls" + strings.Repeat(")", 5000), "nested too deeply"},
		{subs, "substitutions nested"},
		{nested, "nested more than"},
		{strings.Repeat("echo $(true); ", maxScripts+1), "scripts"},
		{strings.Repeat("sudo ", maxWrappers+6) + "rm -rf /", "wrappers"},
	}
	for _, c := range cases {
		d := Check(c.cmd)
		if d.Rule != "unparseable" || !strings.Contains(d.Reason, c.why) {
			t.Errorf("Check(%.60q) = %s, want unparseable (%s)", c.cmd, d, c.why)
		}
	}
	// Just within the bounds is analysed as usual.
	ok := "ls"
	for range maxDepth {
		ok = "bash -c " + shellQuote(ok)
	}
	if d := Check(ok); d.Denied {
		t.Errorf("%d levels of bash -c: %s", maxDepth, d)
	}
	if d := Check(strings.Repeat("echo $(true); ", maxScripts-2)); d.Denied {
		t.Errorf("%d substitutions: %s", maxScripts-2, d)
	}
}

// shellMaxNestingPlus1 is one substitution level more than
// internal/shell flattens.
const shellMaxNestingPlus1 = 33

// TestDecisionMatch checks what a denial shows for nested code.
func TestDecisionMatch(t *testing.T) {
	for _, c := range []struct{ cmd, match, reason string }{
		{"printf '%s' 'rm -rf /' | sh", "rm -rf /", `"/"`},
		{`python3 -c "import os; os.system('reboot')"`, "reboot", "python code calls system"},
		{"echo x > /work/n?tes.md", "echo x > /work/n?tes.md", `pattern "/work/n?tes.md"`},
		{"$(cat name) -rf /", "$(cat name) -rf /", "unknown value"},
		{"$(echo rm) -rf /", "$(echo rm) -rf /", "recursive rm"}, // the substitution's output is visible
		{"echo x | base64 -d | sh", "sh", "decoder"},
		{"(echo x) > /work/notes.md", "( … ) > /work/notes.md", "output redirection"},
		{`bash -c "cd $D; rm -rf /"`, "rm -rf /", "recursive rm"},
		{`bash -c "echo $D > /work/notes.md"`, "echo … > /work/notes.md", "output redirection"},
		{"while true; do rm -rf /; done", "rm -rf /", "recursive rm"},
	} {
		d := Check(c.cmd)
		if d.Match != c.match || !strings.Contains(d.Reason, c.reason) {
			t.Errorf("Check(%q) = match %q reason %q, want match %q and %q in the reason", c.cmd, d.Match, d.Reason, c.match, c.reason)
		}
	}
}
