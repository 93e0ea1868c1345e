package agents

import (
	"strings"
	"testing"

	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// TestOversizedActionIsAFormatError: a model that writes an action bigger
// than an event may hold (here a 1.5 MB notes text, then a 1.5 MB
// answer, in the text format and as native tool calls) gets a format
// error that says so, and the run goes on: the reply is kept in the
// model's record (a blob), the step event stays small.
func TestOversizedActionIsAFormatError(t *testing.T) {
	huge := strings.Repeat("0123456789abcdef", 96<<10) // 1.5 MiB
	for _, protocolName := range []string{"text", "native"} {
		t.Run(protocolName, func(t *testing.T) {
			rule := scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
				n := stepOf(req.LastUserMessage())
				if protocolName == "native" {
					args := map[int]string{
						1: `{"thought":"dump","text":"` + huge + `","evidence_used":[],"status_update":"continuing"}`,
						2: `{"thought":"done","answer":"short","evidence_used":[],"status_update":"RESOLVED"}`,
					}
					name := map[int]string{1: "notes_append", 2: "submit"}[n]
					return scriptedmodel.Reply{ToolCalls: []scriptedmodel.ToolCall{{Name: name, Arguments: args[n]}}}, n <= 2
				}
				text := map[int]string{1: reply(notes(huge), "continuing"), 2: reply(submitAns("short"), "RESOLVED")}[n]
				return scriptedmodel.Text(text), n <= 2
			})
			h := newHarness(t, scriptedmodel.WithRules(rule))
			h.tools(echoTools)
			h.start(h.newAgent("a1"))
			run := "run-huge-" + protocolName
			cfg := catalog.RunConfig{}
			cfg.Model = catalog.ModelConfig{BaseURL: h.model.URL(), Name: "scripted", ToolProtocol: catalog.ToolProtocol(protocolName)}
			h.submit(run, cfg)
			fin := h.waitFinished(run)
			if fin.Outcome != catalog.OutcomeResolved {
				t.Fatalf("finished = %+v", fin)
			}
			steps := ofType[*catalog.AgentStep](h.events(run))
			if len(steps) != 2 || protocol.SummaryCode(steps[0].FormatError) != protocol.CodeActionTooLarge || len(steps[0].Action) > 8<<10 || steps[0].NotesText != "" {
				t.Fatalf("step 1: format error %q, action %d bytes, notes %d bytes", steps[0].FormatError, len(steps[0].Action), len(steps[0].NotesText))
			}
			if n := len(ofType[*catalog.NotesAppended](h.events(run))); n != 0 {
				t.Errorf("%d notes appended", n)
			}
			if p := h.model.Requests()[1].LastUserMessage(); !strings.Contains(p, "[action_too_large]") {
				t.Errorf("step 2 prompt lacks the feedback:\n%.3000s", p)
			}
		})
	}
}
