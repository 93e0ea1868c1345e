package runcompare

import (
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/llm"
)

func TestSteps(t *testing.T) {
	base := catalog.AgentStep{Step: 1, Thought: "a", ActionTool: catalog.ActionShell, Command: "ls", RequestID: "req-s0001", EvidenceUsed: []string{"ev_0001"}}
	same := base
	same.Thought, same.StatusUpdate = "another thought", "continuing"
	if d := Steps(base, same); d != "" {
		t.Errorf("thought and status only: %q, want no difference", d)
	}
	changed := base
	changed.Command, changed.RequestID, changed.EvidenceUsed = "ls -l", "", nil
	if d, want := Steps(base, changed), "command, policy gate (run or refused), evidence used differ"; d != want {
		t.Errorf("Steps = %q, want %q", d, want)
	}
	if s := StepText(changed); s != "ls -l (refused by the policy layer)" {
		t.Errorf("StepText = %q", s)
	}
}

func TestResults(t *testing.T) {
	out := func(s string) catalog.Output { return catalog.Output{Head: s, Bytes: int64(len(s))} }
	want := catalog.ToolFinished{ExitCode: 0, Stdout: out("one\n"), CwdAfter: "/work", DurationMS: 5}
	got := want
	got.DurationMS = 900
	if d := Results(want, got); d != "" {
		t.Errorf("duration only: %q", d)
	}
	got.Stdout, got.ExitCode = out("two\n"), 1
	if d, w := Results(want, got), "command result differs: exit code 1, recorded 0, stdout"; d != w {
		t.Errorf("Results = %q, want %q", d, w)
	}
	if s := ResultText(catalog.ToolFinished{ExitCode: 2, Stderr: out("boom")}); s != "exit 2: boom" {
		t.Errorf("ResultText = %q", s)
	}
}

func TestPrompts(t *testing.T) {
	want := []llm.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "step 1: alpha"}}
	if _, differs := Prompts(want, want); differs {
		t.Error("equal prompts differ")
	}
	got := []llm.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "step 1: beta"}}
	d, differs := Prompts(want, got)
	if !differs || d.Detail != "message 2 (user) differs from byte 8 on" || d.Recorded != "step 1: alpha" || d.Replayed != "step 1: beta" {
		t.Errorf("Prompts = %+v, %v", d, differs)
	}
	if d, differs := Prompts(want, want[:1]); !differs || d.Detail != "the prompt has 1 messages, the recording 2" {
		t.Errorf("shorter prompt: %+v, %v", d, differs)
	}
}

func TestAroundAndCut(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	a := Around(s, 101)           // inside a rune
	if !strings.HasPrefix(a, "…") || !strings.HasSuffix(a, "…") || !strings.Contains(strings.Trim(a, "…"), "é") {
		t.Errorf("Around = %q", a)
	}
	for _, r := range strings.Trim(a, "…") {
		if r != 'é' {
			t.Fatalf("Around cut a rune: %q", a)
		}
	}
	if c := Cut(s, 5); c != "éé…" {
		t.Errorf("Cut = %q", c)
	}
	if c := Cut("short", 500); c != "short" {
		t.Errorf("Cut = %q", c)
	}
}
