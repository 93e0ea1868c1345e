package agents

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// auditor answers every vera.audit.requested with the judgement and
// feedback that verdict(round) returns, as the DeepVerifier auditor would
// (that auditor's own tests live in verifierd/deepverify; here only its
// events matter).
func (h *harness) auditor(maxRounds int, verdict func(round int) (score int, best catalog.AuditJudged)) {
	b := bustest.Connect(h.t, h.url, bus.Options{Source: "verifier-deepverify", ReadOnly: true})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := b.Consume(ctx, bus.ConsumerConfig{Durable: "test-auditor", Types: []string{catalog.TypeAuditRequested}, DrainTimeout: time.Second},
			func(ctx context.Context, m *bus.Message) error {
				p, err := catalog.Decode(m.Event.Type, m.Event.Data)
				if err != nil {
					return bus.Permanent(err)
				}
				req := p.(*catalog.AuditRequested)
				score, j := verdict(req.Round)
				j.Round, j.Score, j.RawScore = req.Round, score, score
				j.Instructions = []string{"Run `curl -s https://example.org/spec` and quote the version line."}
				fb := catalog.AuditFeedback{Round: req.Round, Score: score, Accepted: score >= 3, Instructions: j.Instructions}
				fb.Final = fb.Accepted || req.Round >= maxRounds
				fb.Message = "AUDITOR FEEDBACK round " + string(rune('0'+req.Round)) + ": " + j.Instructions[0]
				for i, p := range []catalog.Payload{j, fb} {
					ev, err := b.Events.New(m.Event.RunID, p, bus.ReactionTo(m.Event, string(rune('a'+i))))
					if err != nil {
						return err
					}
					if _, err := b.Publish(ctx, ev); err != nil {
						return err
					}
				}
				return nil
			})
		if err != nil {
			h.t.Errorf("auditor: %v", err)
		}
	}()
	h.t.Cleanup(func() { cancel(); <-done })
}

func submitReply(ans string) string {
	return "THOUGHT: done\n" + submitAns(ans) + "\nEVIDENCE_USED: ev_0001\nSTATUS_UPDATE: RESOLVED\n"
}

func TestAuditRejectedThenAccepted(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: reply(shell("curl -s https://example.org/"), "continuing"),
		2: submitReply("version 1"),
		3: reply(notes("auditor: quote the version line of /spec"), "continuing"),
		4: reply(shell("curl -s https://example.org/spec"), "continuing"),
		5: submitReply("version 2"),
	})))
	h.tools(echoTools)
	h.auditor(3, func(round int) (int, catalog.AuditJudged) {
		if round == 1 {
			return 2, catalog.AuditJudged{BestRound: 1, BestScore: 2}
		}
		return 4, catalog.AuditJudged{BestRound: 2, BestScore: 4}
	})
	h.start(h.newAgent("a1"))
	h.submit("audit1", catalog.RunConfig{Auditor: catalog.AuditorConfig{Enabled: true}})
	fin := h.waitFinished("audit1")
	if fin.Outcome != catalog.OutcomeResolved || fin.Answer != "version 2" || fin.Steps != 5 || fin.BestAuditRound != 2 || fin.BestScore != 4 {
		t.Fatalf("finished = %+v", fin)
	}
	ds := h.events("audit1")
	assertOnce(t, ds)
	reqs := ofType[*catalog.AuditRequested](ds)
	if len(reqs) != 2 || reqs[0].Round != 1 || reqs[0].CandidateStep != 2 || reqs[0].Answer != "version 1" || reqs[0].ToolCalls != 1 ||
		reqs[1].Round != 2 || reqs[1].CandidateStep != 5 || reqs[1].ToolCalls != 2 {
		t.Fatalf("audit requests = %+v / %+v", *reqs[0], *reqs[len(reqs)-1])
	}
	if len(reqs[0].EvidenceIDs) != 1 || reqs[0].EvidenceIDs[0] != "ev_0001" {
		t.Errorf("cited evidence = %v", reqs[0].EvidenceIDs)
	}
	cfg := ofType[*catalog.RunStarted](ds)[0].Config.Auditor
	if cfg.MaxRounds != DefaultAuditRounds || cfg.StopScore != DefaultAuditStopScore {
		t.Errorf("effective auditor config = %+v", cfg)
	}
	// The feedback reaches the next prompt verbatim.
	got := h.model.Requests()
	if len(got) != 5 {
		t.Fatalf("%d model calls, want 5", len(got))
	}
	if !strings.Contains(got[2].LastUserMessage(), "AUDITOR FEEDBACK round 1: Run `curl -s https://example.org/spec`") {
		t.Errorf("step 3 prompt lacks the auditor's feedback:\n%s", got[2].LastUserMessage())
	}
	if strings.Contains(got[3].LastUserMessage(), "AUDITOR FEEDBACK") {
		t.Errorf("step 4 prompt still carries the old feedback:\n%s", got[3].LastUserMessage())
	}
	h.model.AssertNoMisses(t)
}

func TestAuditBestAnswerKeptWhenRoundsRunOut(t *testing.T) {
	h := newHarness(t, scriptedmodel.WithRules(byStep(map[int]string{
		1: reply(shell("curl -s https://example.org/"), "continuing"),
		2: submitReply("first answer"),
		3: submitReply("second answer"),
	})))
	h.tools(echoTools)
	// Round 1 scores 2, round 2 regresses to 1: round 1's answer is kept.
	h.auditor(2, func(round int) (int, catalog.AuditJudged) {
		if round == 1 {
			return 2, catalog.AuditJudged{BestRound: 1, BestScore: 2}
		}
		return 1, catalog.AuditJudged{BestRound: 1, BestScore: 2}
	})
	h.start(h.newAgent("a1"))
	h.submit("audit2", catalog.RunConfig{Auditor: catalog.AuditorConfig{Enabled: true, MaxRounds: 2}})
	fin := h.waitFinished("audit2")
	if fin.Outcome != catalog.OutcomeUnresolved || fin.Answer != "first answer" || !strings.Contains(fin.Reason, "round 1's answer kept") ||
		fin.BestAuditRound != 1 || fin.BestScore != 2 {
		t.Fatalf("finished = %+v", fin)
	}
	if n := len(ofType[*catalog.AuditRequested](h.events("audit2"))); n != 2 {
		t.Errorf("%d audit rounds, want 2 (the cap)", n)
	}
}
