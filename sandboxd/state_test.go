package sandboxd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestStateFifoIsBoundedAndNeverHangs: the state report comes through a
// fifo sandboxd makes (mode 0622) in place of whatever was there (a link
// is not followed); a writer never waits on sandboxd, whatever it
// writes; a report larger than the bound, none, or one whose fifo a
// process keeps open is not carried over, and sandboxd waits for it at
// most the given time.
func TestStateFifoIsBoundedAndNeverHangs(t *testing.T) {
	dir := t.TempDir()
	// write writes a report as the keeper does (a blocking open: it finds
	// its reader at once); done says when it wrote (and, unless it holds
	// the fifo open, closed it).
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	write := func(name string, data []byte, hold bool) chan error {
		done := make(chan error, 1)
		go func() {
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY, 0)
			if err != nil {
				done <- err
				return
			}
			_, err = f.Write(data)
			if !hold {
				f.Close()
			}
			done <- err
			if hold {
				<-release
				f.Close()
			}
		}()
		return done
	}
	writeFinished := func(done chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the writer hung")
		}
	}

	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("vera-state-1\x00/secret\x00"), 0o644)
	os.Symlink(secret, filepath.Join(dir, "good"))
	sf, err := openStateFifo(dir, "good")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, "good"))
	if err != nil || fi.Mode().Type() != os.ModeNamedPipe || fi.Mode().Perm() != 0o622 {
		t.Fatalf("state fifo: %v %v", fi.Mode(), err)
	}
	writeFinished(write("good", []byte("vera-state-1\x00/tmp\x00X=1\x00"), false))
	if st, err := sf.result(time.Second); err != nil || st.cwd != "/tmp" || st.env["X"] != "1" {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "good")); !os.IsNotExist(err) {
		t.Fatalf("the fifo was not removed: %v", err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "vera-state-1\x00/secret\x00" {
		t.Fatal("the link was followed")
	}

	sf, _ = openStateFifo(dir, "none")
	if _, err := sf.result(time.Second); err != errNoState {
		t.Fatalf("no report: %v", err)
	}

	sf, _ = openStateFifo(dir, "big")
	done := write("big", append([]byte("vera-state-1\x00/tmp\x00X="), make([]byte, 16*maxStateBytes)...), false)
	writeFinished(done)
	if _, err := sf.result(time.Second); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("an oversized state: %v", err)
	}

	sf, _ = openStateFifo(dir, "held")
	writeFinished(write("held", []byte("vera-state-1\x00/tmp\x00"), true))
	start := time.Now()
	if _, err := sf.result(200 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not end") {
		t.Fatalf("a fifo held open: %v", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("waited %s for a fifo held open", el)
	}

	if _, err := openStateFifo("", "x"); err == nil {
		t.Fatal("no state dir accepted")
	}
}
