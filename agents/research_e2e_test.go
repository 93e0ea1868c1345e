package agents

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/vera-run/vera/agents/ledger"
	"github.com/vera-run/vera/agents/protocol"
	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/bustest"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/internal/dockertest"
	"github.com/vera-run/vera/internal/scriptedmodel"
	"github.com/vera-run/vera/sandboxd"
	"github.com/vera-run/vera/sandboxd/image/imagetest"
)

// webPages are the pages of the test's web server, one container on the
// test's network answering for three domains (Docker network aliases): two
// official domains of the vendor (Acme) and an independent news site.
var webPages = []dockertest.Page{
	{Host: "technews.example", Path: "/search/", Body: "<html><title>TechNews search</title><body>TechNews search: 0 articles match. Latest Acme coverage: Widget 8 review (2024-03-04).</body></html>"},
	{Host: "technews.example", Path: "/news.html", Body: "<html><title>TechNews</title><body>TechNews, independent: Acme ships Widget 8; the company declined to comment on a successor.</body></html>"},
	{Host: "newsroom.acme.example", Path: "/search/", Body: "<html><title>Acme Newsroom</title><body>Acme Newsroom search: no press release matches your query.</body></html>"},
	{Host: "acme.example", Path: "/press.html", Body: "<html><title>Acme press</title><body>Acme press releases: Widget 8 now shipping (2024-03-01). Acme reports Q3 results.</body></html>"},
	{Host: "acme.example", Path: "/docs.html", Body: "<html><title>Acme docs</title><body>Widget 8 specification: 4 cores, 8 GB RAM.</body></html>"},
}

// removeRunContainers removes the sandbox containers of the given runs.
func removeRunContainers(docker *client.Client, runs ...string) {
	ctx := context.Background()
	list, _ := docker.ContainerList(ctx, container.ListOptions{All: true})
	for _, c := range list {
		for _, n := range c.Names {
			for _, run := range runs {
				if strings.HasPrefix(n, "/vera-"+run) {
					_ = docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
				}
			}
		}
	}
}

// turn is a well-formed agent reply.
func turn(action, evidence, status string) string {
	return "THOUGHT: next move\n" + action + "\nEVIDENCE_USED: " + evidence + "\nSTATUS_UPDATE: " + status + "\n"
}

// policyOf returns the policy events of a rule, in stream order.
func policyOf(ds []decoded, rule string) []*catalog.PolicyTriggered {
	var out []*catalog.PolicyTriggered
	for _, p := range ofType[*catalog.PolicyTriggered](ds) {
		if p.Rule == rule {
			out = append(out, p)
		}
	}
	return out
}

// promptsByStep indexes a scripted server's requests by the step their
// prompt is for.
func promptsByStep(srv *scriptedmodel.Server) map[int][]string {
	out := map[int][]string{}
	for _, r := range srv.Requests() {
		p := r.LastUserMessage()
		out[stepOf(p)] = append(out[stepOf(p)], p)
	}
	return out
}

// TestResearchEndToEnd is the agent's research loop against the real bus,
// the real sandbox daemon (in-process, real containers) and the scripted
// model over real HTTP. The agent's commands fetch pages with curl from a
// web server container the test starts on its own Docker network, which
// answers for an official domain of the vendor, a second official domain
// (its newsroom) and an independent news site.
//
// Run "negative" asks whether Acme announced Widget 9: the agent searches,
// cites evidence (and one id that does not exist, which is flagged), keeps
// notes on schedule, tries to submit "no official announcement" too early
// (blocked by the negative-claim protocol), repeats a query family past its
// limit (blocked until mutated, then a mutated query runs), recovers from a
// format error and, once two official domains and one independent domain
// are covered and the budget is spent, the run concludes UNRESOLVED with
// the reason naming the sources checked.
//
// Run "final" writes a final deliverable again and again without
// submitting: the finalization stop ends it.
func TestResearchEndToEnd(t *testing.T) {
	docker := dockertest.Client(t)
	img := imagetest.Ensure(t)
	netName := dockertest.Network(t, docker)
	dockertest.WebServer(t, docker, img, netName, webPages)

	const runNeg, runFinal = "e2e-research-neg", "e2e-research-final"
	t.Cleanup(func() { removeRunContainers(docker, runNeg, runFinal) })

	search := func(host, q string) string {
		return shell("curl -sS --max-time 10 'http://" + host + "/search/?q=" + q + "'")
	}
	negSteps := map[int]string{
		1:  turn(search("technews.example", "acme+widget+9+launch"), "none", "continuing"),
		2:  turn(search("technews.example", "acme+widget+9+launch"), "ev_0001", "continuing"),
		3:  turn(notes("- technews.example search: no Widget 9 article (ev_0001, ev_0002)"), "ev_0001, ev_0002, ev_0099", "continuing"),
		4:  turn(submitAns("No official announcement of Widget 9 was found."), "ev_0001", "RESOLVED"),
		5:  turn(search("technews.example", "acme+widget+9+launch"), "ev_0002", "continuing"),
		6:  turn(notes("- query family 'acme widget 9 launch' exhausted; try the vendor's newsroom"), "ev_0002", "continuing"),
		7:  turn(search("newsroom.acme.example", "widget+9+release"), "none", "continuing"),
		8:  "THOUGHT: the press page is next\nI will fetch the press page now.\nEVIDENCE_USED: ev_0003\nSTATUS_UPDATE: continuing\n",
		9:  turn(notes("- newsroom.acme.example: no press release on Widget 9 (ev_0003)"), "ev_0003", "continuing"),
		10: turn(shell("curl -sS --max-time 10 http://acme.example/press.html"), "ev_0003", "continuing"),
		11: turn(shell("curl -sS --max-time 10 http://technews.example/news.html"), "ev_0004", "continuing"),
		12: turn(notes("- nothing on Widget 9 anywhere (ev_0003, ev_0004, ev_0005)"), "ev_0004, ev_0005", "UNRESOLVED(no official announcement found)"),
	}
	finalSteps := map[int]string{
		1: turn(shell("curl -sS --max-time 10 http://acme.example/docs.html"), "none", "continuing"),
		2: turn(shell("mkdir -p /work/output && echo 'Widget 8: 4 cores (ev_0001)' > /work/output/final_report.md"), "ev_0001", "continuing"),
		3: turn(notes("- spec read (ev_0001); report drafted"), "ev_0001", "continuing"),
		4: turn(shell("echo 'Widget 8: 4 cores, 8 GB RAM (ev_0001)' > /work/output/final_report.md"), "ev_0001", "continuing"),
		5: turn(shell("echo 'Widget 8: 4 cores, 8 GB RAM (ev_0001). Final.' > /work/output/final_report.md"), "ev_0001", "continuing"),
	}
	h := newHarness(t, scriptedmodel.WithRules(byStep(negSteps)))
	finalModel := scriptedmodel.Start(t, scriptedmodel.WithRules(byStep(finalSteps)))

	root := t.TempDir()
	d, err := sandboxd.New(bustest.Connect(t, h.url, bus.Options{Source: "sandboxd", ReadOnly: true}), docker, sandboxd.Config{
		Image: img, WorkRoot: filepath.Join(root, "runs"), SpoolDir: filepath.Join(root, "spool"),
		Network: netName, Logger: bustest.Logger(t), Memory: 512 << 20, PidsLimit: 256,
		WorkRoots: []string{root}, // the runs' work dirs are under the test's temp dir
	})
	if err != nil {
		t.Fatal(err)
	}
	bustest.Start(t, "sandboxd", d.Run)
	a := h.newAgent("e2e", func(c *Config) { c.Policy = ledger.Policy{NegativeClaimBudget: 5} })
	h.start(a)

	sandbox := catalog.SandboxConfig{Network: true, ToolTimeoutMS: 60_000}
	h.submit(runNeg, catalog.RunConfig{
		Task:    "Has Acme announced the launch of Widget 9? Check Acme's own sites and independent news before concluding.",
		WorkDir: filepath.Join(root, "work-neg"), Sandbox: sandbox,
		Policy: catalog.PolicyConfig{QueryFamilyLimit: 2},
	})
	finalWork := filepath.Join(root, "work-final")
	h.submit(runFinal, catalog.RunConfig{
		Task:    "Write a short report of the Widget 8 specification from Acme's documentation.",
		WorkDir: finalWork, Sandbox: sandbox,
		Model: catalog.ModelConfig{BaseURL: finalModel.URL(), Name: "scripted"},
	})

	t.Run("negative-claim", func(t *testing.T) {
		fin := h.waitFinished(runNeg)
		ds := h.events(runNeg)
		assertOnce(t, ds)
		wantReason := "no official announcement found in sources checked: acme.example, newsroom.acme.example, technews.example"
		if fin.Outcome != catalog.OutcomeUnresolved || fin.Reason != wantReason || fin.Steps != 12 {
			t.Fatalf("finished = %+v, want UNRESOLVED(%s) after 12 steps", fin, wantReason)
		}

		// Evidence is numbered in the order the results arrived, and its
		// excerpts are the pages the web server served.
		evs := ofType[*catalog.EvidenceRecorded](ds)
		wantEv := []struct{ req, page string }{
			{"req-s0001", "TechNews search: 0 articles match"},
			{"req-s0002", "TechNews search: 0 articles match"},
			{"req-s0007", "Acme Newsroom search: no press release"},
			{"req-s0010", "Acme press releases: Widget 8 now shipping"},
			{"req-s0011", "TechNews, independent: Acme ships Widget 8"},
		}
		if len(evs) != len(wantEv) {
			t.Fatalf("%d evidence lines, want %d: %+v", len(evs), len(wantEv), evs)
		}
		for i, w := range wantEv {
			e := evs[i]
			if e.EvidenceID != protocol.FormatEvidenceID(i+1) || e.RequestID != w.req || e.ExitCode != 0 || !strings.Contains(e.Excerpt, w.page) || len(e.URLs) != 1 {
				t.Errorf("evidence %d = %+v, want %s of %s with %q", i+1, e, protocol.FormatEvidenceID(i+1), w.req, w.page)
			}
		}

		steps := ofType[*catalog.AgentStep](ds)
		if len(steps) != 12 {
			t.Fatalf("%d steps", len(steps))
		}
		// Cited ids are checked against the evidence recorded: the unknown
		// one is flagged.
		if s := steps[2]; !slices.Equal(s.EvidenceUsed, []string{"ev_0001", "ev_0002"}) || !slices.Equal(s.UnknownEvidence, []string{"ev_0099"}) {
			t.Errorf("step 3 evidence used %v, unknown %v", s.EvidenceUsed, s.UnknownEvidence)
		}
		if s := steps[11]; !slices.Equal(s.EvidenceUsed, []string{"ev_0004", "ev_0005"}) || len(s.UnknownEvidence) != 0 {
			t.Errorf("step 12 evidence used %v, unknown %v", s.EvidenceUsed, s.UnknownEvidence)
		}
		if s := steps[7]; s.FormatError == "" || s.RequestID != "" {
			t.Errorf("step 8 = %+v, want a format error and no request", s)
		}

		// Notes on schedule (every 3 steps), pinned in the next prompts.
		var noteSteps []int
		for _, n := range ofType[*catalog.NotesAppended](ds) {
			noteSteps = append(noteSteps, n.Step)
		}
		if !slices.Equal(noteSteps, []int{3, 6, 9}) {
			t.Errorf("notes appended at steps %v, want 3, 6, 9 (the conclusion at 12 ends the run)", noteSteps)
		}
		if g := policyOf(ds, catalog.RuleNotesGate); len(g) != 0 {
			t.Errorf("notes gate fired although notes were on schedule: %+v", g[0])
		}

		// The policy layer's decisions.
		nudge := policyOf(ds, catalog.RuleNegativeClaim)
		if len(nudge) != 2 || nudge[0].Step != 1 || nudge[0].Effect != catalog.EffectNudge ||
			nudge[1].Step != 4 || nudge[1].Effect != catalog.EffectBlock || !strings.Contains(nudge[1].Message, "official domains: 0 of 2") ||
			!slices.Equal(nudge[1].IndependentDomains, []string{"technews.example"}) {
			t.Errorf("negative_claim events = %s", dump(nudge))
		}
		qm := policyOf(ds, catalog.RuleQueryMutationRequired)
		if len(qm) != 1 || qm[0].Step != 5 || qm[0].Effect != catalog.EffectBlock || qm[0].Count != 2 || qm[0].Limit != 2 || qm[0].QueryFamily == "" {
			t.Fatalf("query_mutation_required = %s", dump(qm))
		}
		if c := policyOf(ds, catalog.RuleChoice); len(c) != 1 || c[0].Step != 5 || c[0].Details["for"] != catalog.RuleQueryMutationRequired {
			t.Errorf("choice = %s", dump(c))
		}
		if r := policyOf(ds, catalog.RuleReminder); len(r) == 0 || r[0].Step != 8 || r[0].Details["kind"] != "format" {
			t.Errorf("reminder = %s", dump(r))
		}
		cr := policyOf(ds, catalog.RuleConclusionReady)
		if len(cr) != 1 || cr[0].Step != 12 || cr[0].Effect != catalog.EffectConclude ||
			!slices.Equal(cr[0].OfficialDomains, []string{"acme.example", "newsroom.acme.example"}) ||
			!slices.Equal(cr[0].IndependentDomains, []string{"technews.example"}) || cr[0].Details["reason"] != wantReason {
			t.Errorf("conclusion_ready = %s", dump(cr))
		}
		if n := len(policyOf(ds, catalog.RuleDomainShift)); n != 0 {
			t.Errorf("%d domain_shift events: the scenario never stays on one domain 3 times", n)
		}

		// No tool ran for a refused action: the early submit, the
		// repeated query, the format error; the conclusion ran nothing.
		var reqs []string
		for _, r := range ofType[*catalog.ToolRequested](ds) {
			reqs = append(reqs, r.RequestID)
		}
		if !slices.Equal(reqs, []string{"req-s0001", "req-s0002", "req-s0007", "req-s0010", "req-s0011"}) {
			t.Errorf("tool requests = %v", reqs)
		}

		// The ledgers: a move per executed or blocked shell action, a
		// query line per executed search; the mutated query is a new family.
		var moves []string
		for _, m := range ofType[*catalog.LedgerMove](ds) {
			moves = append(moves, strings.Join([]string{itoa(m.Step), string(m.MoveType), string(m.Outcome), m.EvidenceID}, ":"))
		}
		wantMoves := []string{"1:search:success:ev_0001", "2:search:success:ev_0002", "5:search:denied:", "7:search:success:ev_0003", "10:fetch:success:ev_0004", "11:fetch:success:ev_0005"}
		if !slices.Equal(moves, wantMoves) {
			t.Errorf("move ledger = %v, want %v", moves, wantMoves)
		}
		qs := ofType[*catalog.LedgerQuery](ds)
		if len(qs) != 3 || qs[0].Family != qm[0].QueryFamily || qs[1].Family != qs[0].Family || qs[1].FamilyCount != 2 || !qs[1].MutationRequired ||
			qs[2].Family == qs[0].Family || qs[2].FamilyCount != 1 || qs[2].RequestID != "req-s0007" || qs[2].EvidenceID != "ev_0003" {
			t.Errorf("query ledger = %s", dump(qs))
		}

		// What the model was told: one call per step, the constraints, the
		// refusals and the format error fed back, the notes shown after the
		// tail while its page lasts, then pinned.
		if n := h.model.Count(); n != 12 {
			t.Errorf("%d model calls, want 12", n)
		}
		h.model.AssertNoMisses(t)
		ps := promptsByStep(h.model)
		for step, want := range map[int]string{
			1:  "OPEN CONSTRAINTS (hard requirements",
			2:  "Check at least 2 official (vendor-owned) domains (owned by Acme)",
			5:  "NOTES ADDED SINCE STEP 1 (already in notes.md; pinned above from a later turn on):\n- technews.example search: no Widget 9 article (ev_0001, ev_0002)",
			8:  "PINNED notes.md:\n- technews.example search: no Widget 9 article (ev_0001, ev_0002)",
			6:  qm[0].Message,
			9:  "FORMAT ERROR",
			11: "Source minimums met: if the search finds nothing, conclude UNRESOLVED(" + wantReason + ")",
		} {
			if len(ps[step]) != 1 || !strings.Contains(ps[step][0], want) {
				t.Errorf("prompt of step %d (%d calls) lacks %q:\n%s", step, len(ps[step]), want, strings.Join(ps[step], "\n---\n"))
			}
		}
		if p := ps[5]; len(p) != 1 || !strings.Contains(p[0], nudge[1].Message[:40]) {
			t.Errorf("prompt of step 5 lacks the refusal of the early negative answer")
		}
	})

	t.Run("finalization-stop", func(t *testing.T) {
		fin := h.waitFinished(runFinal)
		ds := h.events(runFinal)
		assertOnce(t, ds)
		if fin.Outcome != catalog.OutcomeUnresolved || !strings.HasPrefix(fin.Reason, "finalization stop: ") || fin.Steps != 5 {
			t.Fatalf("finished = %+v", fin)
		}
		fs := policyOf(ds, catalog.RuleFinalizationStop)
		if len(fs) != 1 || fs[0].Step != 5 || fs[0].Effect != catalog.EffectStop || fs[0].Count != 3 || fs[0].Details["path"] != "/work/output/final_report.md" {
			t.Fatalf("finalization_stop = %s", dump(fs))
		}
		if n := len(ofType[*catalog.ToolRequested](ds)); n != 3 {
			t.Errorf("%d tool requests, want 3 (the stopped write never ran)", n)
		}
		// The writes really ran in the sandbox, the stopped one did not.
		data, err := os.ReadFile(filepath.Join(finalWork, "work", "output", "final_report.md"))
		if err != nil || string(data) != "Widget 8: 4 cores, 8 GB RAM (ev_0001)\n" {
			t.Errorf("final_report.md = %q (%v), want the write of step 4", data, err)
		}
		if evs := ofType[*catalog.EvidenceRecorded](ds); len(evs) != 3 || !strings.Contains(evs[0].Excerpt, "Widget 8 specification: 4 cores") {
			t.Errorf("evidence = %s", dump(evs))
		}
		if n := finalModel.Count(); n != 5 {
			t.Errorf("%d model calls, want 5", n)
		}
		finalModel.AssertNoMisses(t)
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// dump renders events for a failure message.
func dump[T any](items []T) string {
	data, _ := json.Marshal(items)
	return string(data)
}
