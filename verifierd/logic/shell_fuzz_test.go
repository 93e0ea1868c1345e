package logic

import "testing"

// FuzzNormalizeShellCommand checks that normalising never panics and that
// the canonical form is a fixed point.
func FuzzNormalizeShellCommand(f *testing.F) {
	for _, s := range []string{
		"ls -la /work", "ls  -la|wc -l", `grep "a b" 'c' d\ e`, "make 2>&1 | tail", "cat <<'EOF'\nx  y\nEOF\necho",
		"echo $(date +%s) `id` ${HOME} $'a\\tb'", "if true; then echo 'if'; fi", "a=1 env # c", "echo \"it's\"", "(cd /w && ls) &", "\xc0 é \\\xc0", "<<'\n'\n", "cat <<'EOF'\n$HOME\nEOF",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := NormalizeShellCommand(s)
		if again := NormalizeShellCommand(n); again != n {
			t.Errorf("not a fixed point: %q -> %q -> %q", s, n, again)
		}
	})
}
