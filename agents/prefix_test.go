package agents

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// prefixRunSteps is the length of the run the prompt-prefix measure uses.
const prefixRunSteps = 30

// promptBytes is a request's prompt as a server's prompt cache sees it:
// the messages in order (the chat template adds the same bytes around
// each, so the template does not change which part is a shared prefix).
func promptBytes(req scriptedmodel.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		b.WriteString(m.Role)
		b.WriteByte(0)
		b.WriteString(m.Text)
		b.WriteByte(0)
	}
	return b.String()
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// prefixShares runs a 30-step research run (shell commands with outputs
// of realistic size, a notes append every third step) and returns, for
// each step's prompt after the first, the share of the previous prompt
// that is a prefix of it: what a local server's prompt (KV) cache can
// reuse.
func prefixShares(t testing.TB) []float64 {
	rule := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		n := stepOf(req.LastUserMessage())
		text := reply(shell(fmt.Sprintf("curl -s https://example.org/page/%d | head -40", n)), "UNRESOLVED(still looking)")
		if n%3 == 0 {
			text = reply(notes(fmt.Sprintf("step %d: page %d lists nothing new about the release date", n, n-1)), "UNRESOLVED(still looking)")
		}
		return scriptedmodel.Text(text), true
	})
	h := newHarness(t, scriptedmodel.WithRules(rule))
	h.tools(func(req catalog.ToolRequested) catalog.ToolFinished {
		var out strings.Builder
		for i := 0; out.Len() < 1500; i++ {
			fmt.Fprintf(&out, "line %d of %q: lorem ipsum dolor sit amet, consectetur adipiscing elit\n", i, req.Command)
		}
		return catalog.ToolFinished{ExitCode: 0, DurationMS: 1, Stdout: stdout(out.String())}
	})
	h.start(h.newAgent("prefix"))
	h.submit("prefix-run", catalog.RunConfig{MaxSteps: prefixRunSteps})
	if f := h.waitFinished("prefix-run"); f.Reason != "step budget exhausted" {
		t.Fatalf("run finished %+v", f)
	}
	reqs := h.model.Requests()
	if len(reqs) != prefixRunSteps {
		t.Fatalf("%d model requests, want %d", len(reqs), prefixRunSteps)
	}
	var shares []float64
	for i := 1; i < len(reqs); i++ {
		prev, next := promptBytes(reqs[i-1]), promptBytes(reqs[i])
		shares = append(shares, float64(commonPrefix(prev, next))/float64(len(prev)))
	}
	return shares
}

// TestPromptPrefixReuse: consecutive step prompts share a long prefix, so
// that a local server reuses its KV cache instead of reading the whole
// prompt again at every step.
func TestPromptPrefixReuse(t *testing.T) {
	shares := prefixShares(t)
	sorted := slices.Clone(shares)
	slices.Sort(sorted)
	mean := 0.0
	for _, s := range shares {
		mean += s
	}
	mean /= float64(len(shares))
	t.Logf("prefix share over %d step pairs: min %.3f, p10 %.3f, median %.3f, mean %.3f; per step: %.2f",
		len(shares), sorted[0], sorted[len(sorted)/10], sorted[len(sorted)/2], mean, shares)
	// Step i+2's prompt holds i+1 tail entries. Within a page of the tail
	// nothing before its end changes: only the last sections (new notes,
	// feedback) are not part of the next prompt.
	turns := 0
	for i, sh := range shares {
		if protocol.TailStart(i+1, protocol.Options{}) != protocol.TailStart(i, protocol.Options{}) {
			turns++
			continue
		}
		if sh < 0.95 {
			t.Errorf("step %d's prompt shares only %.3f of step %d's, within a page of the tail", i+2, sh, i+1)
		}
	}
	if turns > len(shares)/2 {
		t.Errorf("%d page turns in %d steps", turns, len(shares))
	}
}
