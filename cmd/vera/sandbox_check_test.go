package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSandboxCheck runs `vera sandbox check` in-process: the decision is
// printed and the exit status says it, without running anything.
func TestSandboxCheck(t *testing.T) {
	out, errOut, code := runCLI(t, "sandbox", "check", "--", "ls -la /work")
	if code != 0 || out != "allowed\n" || errOut != "" {
		t.Errorf("allowed: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, _, code = runCLI(t, "sandbox", "check", "--", "echo x > /work/n?tes.md")
	if code != exitDenied || !strings.HasPrefix(out, "denied\n") || !strings.Contains(out, "rule:   notes_md") ||
		!strings.Contains(out, "reason: output redirection > writes /work/notes.md") || !strings.Contains(out, "match:  echo x > /work/n?tes.md") {
		t.Errorf("denied: exit %d, stdout %q", code, out)
	}
	// The words are joined into one command line, as sandbox exec does.
	if out, _, code := runCLI(t, "sandbox", "check", "--", "rm", "-rf", "/"); code != exitDenied || !strings.Contains(out, "rm_root") {
		t.Errorf("several words: exit %d, stdout %q", code, out)
	}
	if out, _, code := runCLI(t, "sandbox", "check", "--", "echo 'unterminated"); code != exitDenied || !strings.Contains(out, "rule:   unparseable") {
		t.Errorf("unparseable: exit %d, stdout %q", code, out)
	}
	// --cwd: relative paths resolve against it.
	if out, _, code := runCLI(t, "sandbox", "check", "--cwd", "/tmp", "--", "rm -rf *"); code != 0 || out != "allowed\n" {
		t.Errorf("--cwd /tmp: exit %d, stdout %q", code, out)
	}
	if _, _, code := runCLI(t, "sandbox", "check", "--cwd", "/", "--", "rm -rf *"); code != exitDenied {
		t.Errorf("--cwd /: exit %d", code)
	}
}

func TestSandboxCheckJSON(t *testing.T) {
	out, _, code := runCLI(t, "sandbox", "check", "--json", "--", "printf '%s' 'rm -rf /' | sh")
	if code != exitDenied {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	var r sandboxCheckResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if !r.Denied || r.Rule != "rm_root" || r.Match != "rm -rf /" || r.Reason == "" || r.Cwd != "/work" || r.Command != "printf '%s' 'rm -rf /' | sh" {
		t.Errorf("result %+v", r)
	}
	out, _, code = runCLI(t, "sandbox", "check", "--json", "--", "echo hi")
	r = sandboxCheckResult{}
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || r.Denied || r.Rule != "" {
		t.Errorf("allowed: exit %d, %+v, %v", code, r, err)
	}
}

func TestSandboxCheckUsage(t *testing.T) {
	for _, args := range [][]string{{"sandbox", "check"}, {"sandbox", "check", "--"}, {"sandbox", "check", "--", "  "}} {
		out, errOut, code := runCLI(t, args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, "no command to check") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	out, _, code := runCLI(t, "sandbox", "check", "--help")
	if code != 0 || !strings.Contains(out, "writing their own rules") || !strings.Contains(out, "static") || !strings.Contains(out, "126") {
		t.Errorf("--help: exit %d\n%s", code, out)
	}
}
