// Package evaltest is the scripted eval of VERA's eval tests: a task set
// of 20 tasks, a scripted model that answers as the agent and as the
// auditor, and the report's figures worked out by hand from the script.
// Test-only: production code never imports it.
package evaltest

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/eval"
	"github.com/vera-run/vera/internal/scriptedmodel"
)

// The scripted eval: 20 tasks. Task k's right answer names alpha-k, a
// wrong one beta-k. The agent's first answer is wrong for k divisible by
// 3, its second answer (after a rejection) always right. The auditor
// (audit3) rejects the right first answer of task 1, catches the wrong
// first answers of tasks 6, 12 and 18, misses those of 3, 9 and 15, and
// accepts every other answer.
// NTasks is the number of tasks of the task set.
const NTasks = 20

func firstWrong(k int) bool { return k%3 == 0 }

var (
	// TaskRE finds the task number in an agent prompt.
	TaskRE   = regexp.MustCompile(`Item (\d+):`)
	stepRE   = regexp.MustCompile(`\[step (\d+)\] ACTION`)
	answerRE = regexp.MustCompile(`The answer is (alpha|beta)-(\d+)`)
	judgeRE  = regexp.MustCompile(`^AUDIT-JUDGE round (\d+)`)
)

// answer is task k's answer text: two independent sources, so that the
// auditor's SCOUT rules leave its score alone.
func Answer(k int, right bool) string {
	word, value := "beta", fmt.Sprintf("%d", k*10+7)
	if right {
		word, value = "alpha", fmt.Sprintf("%d.5", k*10)
	}
	return fmt.Sprintf("The answer is %s-%d, measured at %s units (http://registry.example/items/%d and http://mirror.example.org/items/%d).", word, k, value, k, k)
}

func agentTurn(k, step int) string {
	a := Answer(k, !(step == 1 && firstWrong(k)))
	b, _ := json.Marshal(map[string]any{"tool": "submit", "args": map[string]string{"answer": a}})
	return "THOUGHT: I know this item.\nACTION: " + string(b) + "\nEVIDENCE_USED: none\nSTATUS_UPDATE: RESOLVED\n"
}

func judgeScore(k, round int, right bool) int {
	if round > 1 {
		return 4
	}
	switch {
	case k == 1, !right && k%6 == 0:
		return 2
	}
	return 4
}

// Script answers as the agent (by task and step) and as the auditor
// (decomposition without checks, then the judge); it counts the
// agent's calls in calls.
func Script(calls *Calls) scriptedmodel.Rule {
	return scriptedmodel.OnFunc(func(req scriptedmodel.Request) (scriptedmodel.Reply, bool) {
		u := req.LastUserMessage()
		if strings.HasPrefix(u, "AUDIT-DECOMPOSE") {
			return scriptedmodel.Text(`{"summary":[],"likely_errors":[],"checks":[]}`), true
		}
		if m := judgeRE.FindStringSubmatch(u); m != nil {
			a := answerRE.FindStringSubmatch(u)
			if a == nil {
				return scriptedmodel.Reply{}, false
			}
			round, _ := strconv.Atoi(m[1])
			k, _ := strconv.Atoi(a[2])
			s := judgeScore(k, round, a[1] == "alpha")
			return scriptedmodel.Text(fmt.Sprintf(`{"explanation":"scripted","score":%d,"instructions":["Check the item again."]}`, s)), true
		}
		m := TaskRE.FindStringSubmatch(u)
		if m == nil {
			return scriptedmodel.Reply{}, false
		}
		k, _ := strconv.Atoi(m[1])
		step := 1
		for _, s := range stepRE.FindAllStringSubmatch(u, -1) {
			n, _ := strconv.Atoi(s[1])
			step = max(step, n+1)
		}
		calls.add(k, step)
		return scriptedmodel.Text(agentTurn(k, step)), true
	})
}

// Calls counts the agent's calls per task and step: no step is
// asked twice, even across a resumed eval.
type Calls struct {
	mu sync.Mutex
	n  map[[2]int]int
}

// Counts returns how many times the agent was asked for each task and
// step.
func (c *Calls) Counts() map[[2]int]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[[2]int]int{}
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func (c *Calls) add(k, step int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[[2]int]int{}
	}
	c.n[[2]int{k, step}]++
}

// taskSet writes the task set: the scorers cycle through contains,
// exact, regex and numeric; tags say odd/even and whether k ≤ 10.
// WriteTaskSet writes the task set into a temporary directory of t and
// returns its path.
func WriteTaskSet(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for k := 1; k <= NTasks; k++ {
		line := map[string]any{"id": fmt.Sprintf("item-%02d", k), "task": fmt.Sprintf("Item %d: what is its name?", k)}
		switch k % 4 {
		case 1:
			line["answer"], line["scorer"] = fmt.Sprintf("alpha-%d", k), "contains"
		case 2:
			line["answer"], line["scorer"] = fmt.Sprintf("alpha-%d\\b", k), "regex"
		case 3:
			line["answer"], line["scorer"] = fmt.Sprintf("%d.5", k*10), map[string]any{"type": "numeric", "tolerance": 0.1}
		case 0:
			line["answer"], line["scorer"] = strings.TrimSuffix(Answer(k, true), "."), "exact"
		}
		tags := []string{"odd"}
		if k%2 == 0 {
			tags = []string{"even"}
		}
		if k <= 10 {
			tags = append(tags, "low")
		}
		line["tags"] = tags
		data, _ := json.Marshal(line)
		b.Write(data)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// CheckReport checks a report of the scripted eval against the figures
// worked out by hand.
func CheckReport(t testing.TB, r eval.Report) {
	t.Helper()
	if len(r.Profiles) != 2 || r.Expected != 40 || len(r.Results) != 40 {
		t.Fatalf("report: %d profiles, expected %d, %d results", len(r.Profiles), r.Expected, len(r.Results))
	}
	no, au := r.Profiles[0], r.Profiles[1]
	// no-audit: the first answer is the final one; wrong for k = 3, 6, …,
	// 18 (6 tasks): 14/20.
	if no.Name != "no-audit" || no.Scored != 20 || !near(no.FirstAccuracy, 0.70) || !near(no.FinalAccuracy, 0.70) || no.ByRound != nil || no.AuditorStats != nil {
		t.Errorf("no-audit: %+v", no)
	}
	// audit3: first answers as above (0.70); capped at 1 round the run
	// keeps round 1's answer (0.70); by round 2, tasks 6, 12 and 18 were
	// corrected (17/20); round 3 changes nothing; final 17/20.
	if au.Name != "audit3" || au.Scored != 20 || !near(au.FirstAccuracy, 0.70) || !near(au.FinalAccuracy, 0.85) {
		t.Errorf("audit3: %+v", au)
	}
	if len(au.ByRound) != 3 || !near(au.ByRound[0], 0.70) || !near(au.ByRound[1], 0.85) || !near(au.ByRound[2], 0.85) {
		t.Errorf("audit3 by round: %v", au.ByRound)
	}
	// The auditor judged 20 first answers and 4 second ones (tasks 1, 6,
	// 12, 18). Accepted right: 13 first answers (right and k ≠ 1) + 4
	// second answers = 17; accepted wrong: 3, 9, 15; rejected right: 1;
	// rejected wrong: 6, 12, 18. Precision 17/20, recall 17/18.
	want := eval.AuditorStats{Judged: 24, AcceptedRight: 17, AcceptedWrong: 3, RejectedRight: 1, RejectedWrong: 3, Precision: 17.0 / 20, Recall: 17.0 / 18}
	if st := au.AuditorStats; st == nil || st.Judged != want.Judged || st.AcceptedRight != want.AcceptedRight || st.AcceptedWrong != want.AcceptedWrong ||
		st.RejectedRight != want.RejectedRight || st.RejectedWrong != want.RejectedWrong || !near(st.Precision, want.Precision) || !near(st.Recall, want.Recall) {
		t.Errorf("auditor stats %+v, want %+v", au.AuditorStats, want)
	}
	// Per tag, audit3: even tasks (10): wrong first answers 6, 12, 18 →
	// first 7/10, all corrected → final 10/10. odd (10): wrong first
	// answers 3, 9, 15, accepted → 7/10 both. low (k ≤ 10): wrong first 3,
	// 6, 9 → 7/10; 6 corrected → final 8/10.
	tags := map[string][2]float64{"even": {0.7, 1.0}, "low": {0.7, 0.8}, "odd": {0.7, 0.7}}
	if len(au.ByTag) != 3 {
		t.Fatalf("audit3 tags: %+v", au.ByTag)
	}
	for _, tr := range au.ByTag {
		w := tags[tr.Tag]
		if tr.Scored != 10 || !near(tr.FirstAccuracy, w[0]) || !near(tr.FinalAccuracy, w[1]) {
			t.Errorf("audit3 tag %s: %+v, want first %v final %v", tr.Tag, tr, w[0], w[1])
		}
	}
	// Cost: no-audit runs take one step; audit3 runs two for tasks 1, 6,
	// 12 and 18: (16×1 + 4×2)/20 = 1.2 steps. No tool calls.
	if !near(no.MeanSteps, 1) || !near(au.MeanSteps, 1.2) || no.MeanToolCalls != 0 {
		t.Errorf("mean steps: no-audit %v, audit3 %v", no.MeanSteps, au.MeanSteps)
	}
	for _, res := range r.Results {
		k, _ := strconv.Atoi(strings.TrimPrefix(res.TaskID, "item-"))
		wantRounds := 1
		if res.Profile == "audit3" && (k == 1 || k%6 == 0) {
			wantRounds = 2
		}
		if len(res.Rounds) != wantRounds || res.Outcome != catalog.OutcomeResolved || res.Infra || res.WallMS <= 0 || res.Tokens.Total == 0 {
			t.Errorf("%s × %s: %d rounds (want %d), outcome %s, infra %v, wall %d, tokens %d", res.TaskID, res.Profile, len(res.Rounds), wantRounds, res.Outcome, res.Infra, res.WallMS, res.Tokens.Total)
		}
	}
}

// Asked is how many times the agent is asked for a step of a task in the
// eval of both profiles: step 1 once per profile, step 2 (a second
// answer, audit3 only) once.
func Asked(step int) int {
	if step == 1 {
		return 2
	}
	return 1
}
