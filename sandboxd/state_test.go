package sandboxd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseState(t *testing.T) {
	st, err := parseState([]byte("vera-state-1\x00/work/sub dir\x00A=1\x00B=x=y\x00EMPTY=\x00bad-name=1\x00BASH_FUNC_f%%=() { :; }\x00NOEQ\x00BIN=\xff\x00"))
	if err != nil || st.cwd != "/work/sub dir" || len(st.env) != 3 || st.env["A"] != "1" || st.env["B"] != "x=y" || st.env["EMPTY"] != "" {
		t.Fatalf("%+v %v", st, err)
	}
	for _, bad := range []string{
		"",
		"vera-state-1",
		"vera-state-1\x00/work",         // cut short: no final NUL
		"vera-state-2\x00/work\x00",     // unknown version
		"/work\x00A=1\x00",              // no header
		"vera-state-1\x00work\x00",      // relative cwd
		"vera-state-1\x00\x00A=1\x00",   // empty cwd
		"vera-state-1\x00/w\xffork\x00", // not UTF-8
		"vera-state-1\x00/" + strings.Repeat("a", maxCwdBytes) + "\x00",
	} {
		if st, err := parseState([]byte(bad)); err == nil {
			t.Errorf("%q accepted: %+v", bad, st)
		}
	}
}

func TestReadStateOnlyReadsABoundedRegularFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := readState(filepath.Join(dir, "missing")); err != errNoState {
		t.Fatalf("missing file: %v", err)
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, []byte("vera-state-1\x00/tmp\x00X=1\x00"), 0o644)
	if st, err := readState(good); err != nil || st.cwd != "/tmp" || st.env["X"] != "1" {
		t.Fatalf("%+v %v", st, err)
	}
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("vera-state-1\x00/secret\x00"), 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(secret, link)
	if _, err := readState(link); err == nil {
		t.Fatal("a symlink was followed")
	}
	big := filepath.Join(dir, "big")
	os.WriteFile(big, append([]byte("vera-state-1\x00/tmp\x00X="), make([]byte, maxStateBytes)...), 0o644)
	if _, err := readState(big); err == nil {
		t.Fatal("an oversized state was read")
	}
	if _, err := readState(dir); err == nil {
		t.Fatal("a directory was read")
	}
}
