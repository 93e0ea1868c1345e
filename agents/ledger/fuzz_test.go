package ledger

import (
	"testing"
	"unicode/utf8"
)

// FuzzCommand feeds arbitrary commands and queries to the pure functions:
// none may panic, each must be deterministic, and the move type must be a
// catalogued one.
func FuzzCommand(f *testing.F) {
	for _, a := range actionPool {
		f.Add(a.cmd)
	}
	for _, s := range []string{
		`bash -c "bash -c 'bash -c \"curl https://a.example\"'"`, "cat <<EOF", "echo $((1+", `"unterminated`, "a | | b",
		"2>&1 >", "((x))", "curl -", "grep -r", "find -name", "python3 -c", "$(", "`", "<(curl x", "site:", "'s",
		"c++ c# f# -x site: \"\" ''", "GPT‑6 ×", "www.", "[::1]:80", "http://%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cmd string) {
		mt := ClassifyMove(cmd)
		if !mt.Valid() || ClassifyMove(cmd) != mt {
			t.Fatalf("ClassifyMove(%q) = %q", cmd, mt)
		}
		q1, ok1 := ExtractQuery(cmd)
		q2, ok2 := ExtractQuery(cmd)
		if q1 != q2 || ok1 != ok2 {
			t.Fatalf("ExtractQuery not deterministic on %q", cmd)
		}
		if fam := Family(cmd); fam != Family(cmd) || (utf8.ValidString(cmd) && !utf8.ValidString(fam)) {
			t.Fatalf("Family(%q) = %q", cmd, fam)
		}
		_ = URLs(cmd)
		_ = Domains(cmd)
		_ = RegistrableDomain(cmd)
		_ = IsOfficial(cmd, "Acme")
		_ = IsNegativeClaim(cmd)
		_ = ClaimSubjects(cmd)
		_, _ = finalizationTarget(cmd)
	})
}
