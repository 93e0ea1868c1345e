package main

import (
	"context"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
)

// TestUpRunsTheLogicVerifier: agent steps that repeat one shell command,
// published to `vera up`'s bus, get a vera.logic.verdict.
func TestUpRunsTheLogicVerifier(t *testing.T) {
	t.Setenv("NATS_URL", "")
	addr := bustest.FreeAddr(t)
	url := "nats://" + addr
	upOut, _, stopUp := start(t, "up", "--data-dir", t.TempDir(), "--nats-listen", addr, "--no-sandboxd", "--log-level", "warn")
	waitFor(t, "vera up banner", func() bool { return strings.Contains(upOut.String(), "Press Ctrl-C") })
	if !strings.Contains(upOut.String(), "verifiers (logic)") {
		t.Fatalf("banner: %s", upOut.String())
	}
	b := bustest.Connect(t, url, bus.Options{Source: catalog.ComponentAgent})
	ctx := context.Background()
	for step := 1; step <= 3; step++ {
		ev, err := b.Events.New("loop-run", catalog.AgentStep{
			Step: step, Thought: "Let me look at the page again.", Action: `{"tool":"shell","args":{"cmd":"curl -s https://example.org"}}`,
			ActionTool: catalog.ActionShell, Command: "curl -s https://example.org",
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "a logic verdict", func() bool {
		evs, _ := b.ReadRun(ctx, "loop-run")
		for _, ev := range evs {
			var v catalog.LogicVerdict
			if ev.Type == catalog.TypeLogicVerdict && ev.DecodeData(&v) == nil && v.Step == 3 && v.ThinkingEval == 0 {
				return true
			}
		}
		return false
	})
	if code := stopUp(); code != 0 {
		t.Errorf("vera up exited %d", code)
	}
	if _, errOut, code := runCLI(t, "verifierd", "--hybrid"); code != exitUsage || !strings.Contains(errOut, "--judge-base-url") {
		t.Errorf("--hybrid without a judge: exit %d, %s", code, errOut)
	}
}
