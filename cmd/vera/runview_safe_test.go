package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// TestRunViewIsTerminalSafe: a model and the commands it runs write what
// they like; vera run shows their escape sequences, carriage returns and
// bidi overrides escaped instead of letting them act on the user's
// terminal (clear the screen, set the clipboard with OSC 52, hide text
// behind a CR).
func TestRunViewIsTerminalSafe(t *testing.T) {
	_, b := bustest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := "hostile-view"
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := followRun(ctx, b, run, &out, &errOut, followOptions{statusLine: true, showReasoning: true}, nil)
		done <- err
	}()
	publishExample(t, ctx, b, run, catalog.TypeRunStarted, func(*catalog.RunStarted) {})
	publishExample(t, ctx, b, run, catalog.TypeModelResponded, func(r *catalog.ModelResponded) {
		r.Scope, r.Step, r.Reasoning = catalog.ScopeAgent, 1, "plan\x1b[2J\x1b[Hcleared"
	})
	publishExample(t, ctx, b, run, catalog.TypeAgentStep, func(s *catalog.AgentStep) {
		s.Step, s.Thought, s.Command = 1, "look\u202e\u2066 here", "echo '\x1b]52;c;cm0gLXJmIH4=\x07'"
	})
	publishExample(t, ctx, b, run, catalog.TypeToolFinished, func(f *catalog.ToolFinished) {
		f.Stdout = catalog.Output{Head: "\x1b]52;c;cm0gLXJmIH4=\x07safe\rrm -rf ~\n", Bytes: 40}
	})
	publishExample(t, ctx, b, run, catalog.TypeRunFinished, func(*catalog.RunFinished) {})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]string{"stdout": out.String(), "status line": strings.ReplaceAll(errOut.String(), "\r\033[K", "")} {
		for _, bad := range []string{"\x1b", "\r", "\x07", "\u202e", "\u2066"} {
			if strings.Contains(s, bad) {
				t.Errorf("%s holds %q:\n%q", name, bad, s)
			}
		}
	}
	if !strings.Contains(out.String(), `\x1b]52;c;`) || !strings.Contains(out.String(), `\x1b[2J`) {
		t.Errorf("the escapes are not shown escaped:\n%s", out.String())
	}
}
