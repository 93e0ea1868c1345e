package logic

// The case generator: MIRAGE-style inference results built from the real
// snapshots, six kinds of case per snapshot that has a repetitive_action,
// with thinking texts filled from a template pool with the snapshot's own
// repeated verb and target. Two pools exist: devPool (casepool_dev_test.go),
// which the unit tests use and the vocabulary may be tuned on, and
// heldOutPool (casepool_heldout_test.go), written separately with other
// sentence frames, which only TestHeldOut measures on.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// caseKind is one of the six kinds of generated case.
type caseKind int

const (
	kindRepeatNeutral     caseKind = iota + 1 // repeated action, neutral thinking → 0
	kindRepeatAware                           // repeated action, aware thinking → 0
	kindDifferentNeutral                      // different action, neutral thinking → 1
	kindDifferentClassic                      // different action, awareness with the classic keywords → 2
	kindDifferentDecoy                        // different action, awareness-like words in another sense, negated, hypothetical → 1
	kindDifferentImplicit                     // different action, awareness without the listed keywords → 2
)

var allKinds = []caseKind{kindRepeatNeutral, kindRepeatAware, kindDifferentNeutral, kindDifferentClassic, kindDifferentDecoy, kindDifferentImplicit}

func (k caseKind) String() string {
	return [...]string{"", "repeat+neutral", "repeat+aware", "different+neutral", "different+classic", "different+decoy", "different+implicit"}[k]
}

// want is the thinking_eval the rubric gives a case of the kind.
func (k caseKind) want() int {
	switch k {
	case kindRepeatNeutral, kindRepeatAware:
		return ScoreRepeated
	case kindDifferentNeutral, kindDifferentDecoy:
		return ScoreDifferent
	}
	return ScoreAware
}

// casePool holds thinking templates per kind. Placeholders: {V} {Ving}
// {Ved} (the repeated action's verb), {OBJ} (its noun: "click", "edit"),
// {T} (its target: "element '379'", "lines 12-14 of models.py"), {N} (an
// ordinal: "fourth"), {NEXT} (what the different action does), {ACT} (the
// repeated action as written).
type casePool map[caseKind][]string

// actionWords is what a template may say about the snapshot's repeated
// action and the different action generated for it.
type actionWords struct {
	V, Ving, Ved, Obj string
	Targets           []string // ways to name the target; one is chosen per case
	Act               string
	Next              string          // what the different action does
	Repeat, Different json.RawMessage // the result actions
	swe               bool
}

var (
	webCall   = regexp.MustCompile(`^\s*([a-z_]+)\((.*)\)`)
	pyString  = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"`)
	fileShown = regexp.MustCompile(`\[File: (\S+) \(`)
	editCmd   = regexp.MustCompile(`^edit (\d+):(\d+)(?: (\S+))?`)
)

// pyArgs returns the string literals of a call's argument list.
func pyArgs(s string) []string {
	var out []string
	for _, m := range pyString.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1]+m[2])
	}
	return out
}

// elementLabel finds "[bid] role 'name'" in the last user message.
func axLabel(s Snapshot, bid string) (role, name string) {
	re := regexp.MustCompile(`\[` + regexp.QuoteMeta(bid) + `\] ([A-Za-z]+) '([^'\n]{0,60})'`)
	for i := len(s.Input) - 1; i >= 0; i-- {
		if m := re.FindStringSubmatch(s.Input[i].Text()); m != nil {
			return strings.ToLower(m[1]), m[2]
		}
	}
	return "", ""
}

// describeAction extracts the verb and target of a snapshot's
// repetitive_action and builds a different action for the scenario.
func describeAction(tb testing.TB, rel string, s Snapshot) actionWords {
	tb.Helper()
	if ra, ok := rawString(s.RepetitiveAction); ok {
		return describeWeb(tb, rel, s, ra)
	}
	var call struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	if err := json.Unmarshal(s.RepetitiveAction, &call); err != nil {
		tb.Fatalf("%s: %v", rel, err)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Function.Arguments), &args); err != nil {
		tb.Fatalf("%s: arguments: %v", rel, err)
	}
	file := ""
	for _, m := range s.Input {
		if f := fileShown.FindAllStringSubmatch(m.Text(), -1); len(f) > 0 {
			file = f[len(f)-1][1]
		}
	}
	base := filepath.Base(file)
	w := actionWords{swe: true, V: "edit", Ving: "editing", Ved: "edited", Obj: "edit"}
	switch call.Function.Name {
	case "edit":
		a, b := fmt.Sprint(args["start_line"]), fmt.Sprint(args["end_line"])
		lines := "lines " + a + "-" + b
		if a == b {
			lines = "line " + a
		}
		w.Targets = []string{lines + " of " + base, lines, base + " at " + lines}
		w.Act = fmt.Sprintf("edit %s:%s", a, b)
	case "bash":
		cmd, _ := args["command"].(string)
		if m := editCmd.FindStringSubmatch(cmd); m != nil {
			if m[3] != "" {
				base = filepath.Base(m[3])
			}
			w.Targets = []string{"lines " + m[1] + "-" + m[2] + " of " + base, "lines " + m[1] + "-" + m[2]}
			w.Act = "edit " + m[1] + ":" + m[2]
		} else {
			first := strings.SplitN(cmd, "\n", 2)[0]
			w.V, w.Ving, w.Ved, w.Obj = "run", "running", "ran", "command"
			w.Targets = []string{"`" + first + "`"}
			w.Act = first
		}
	default:
		tb.Fatalf("%s: unexpected tool %q", rel, call.Function.Name)
	}
	calls := func(name, args, id string) json.RawMessage {
		b, _ := json.Marshal([]map[string]any{{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}})
		return b
	}
	w.Repeat = calls(call.Function.Name, call.Function.Arguments, "call_repeat")
	if base == "" || base == "." {
		base = "the module"
	}
	nexts := []struct{ name, args, desc string }{
		{"bash", `{"command": "python -m pytest -x -q"}`, "run the test suite"},
		{"search_file", `{"search_term": "def __init__"}`, "search the file for its constructor"},
		{"bash", `{"command": "git diff"}`, "look at the diff of my changes so far"},
		{"goto", `{"line_number": 1}`, "go to the top of " + base},
	}
	n := nexts[len(rel)%len(nexts)]
	w.Different = calls(n.name, n.args, "call_next")
	w.Next = n.desc
	return w
}

func describeWeb(tb testing.TB, rel string, s Snapshot, ra string) actionWords {
	tb.Helper()
	m := webCall.FindStringSubmatch(ra)
	if m == nil {
		tb.Fatalf("%s: cannot read repetitive_action %q", rel, ra)
	}
	fn, args := m[1], pyArgs(m[2])
	w := actionWords{Act: strings.TrimSpace(strings.SplitN(strings.SplitN(ra, "#", 2)[0], "<!--", 2)[0]), Repeat: js(ra)}
	elem := func(bid string) []string {
		t := []string{"element '" + bid + "'", "'" + bid + "'"}
		if role, name := axLabel(s, bid); name != "" && len([]rune(name)) <= 40 {
			t = append(t, "the '"+name+"' "+role, "the '"+name+"' "+role+" ["+bid+"]")
		}
		return t
	}
	switch fn {
	case "click":
		w.V, w.Ving, w.Ved, w.Obj = "click", "clicking", "clicked", "click"
		w.Targets = elem(args[0])
	case "fill":
		w.V, w.Ving, w.Ved, w.Obj = "fill", "filling", "filled", "fill"
		for _, t := range elem(args[0]) {
			w.Targets = append(w.Targets, t+" with '"+args[1]+"'")
		}
	case "press":
		w.V, w.Ving, w.Ved, w.Obj = "press", "pressing", "pressed", "key press"
		w.Targets = []string{args[1] + " in element '" + args[0] + "'", args[1]}
	case "scroll":
		w.V, w.Ving, w.Ved, w.Obj = "scroll", "scrolling", "scrolled", "scroll"
		w.Targets = []string{"down the page", "down", "the page down"}
		if strings.Contains(m[2], ", 0") || strings.Contains(m[2], "-") {
			w.Targets = []string{"to the top of the page", "back to the top"}
		}
	case "noop":
		w.V, w.Ving, w.Ved, w.Obj = "wait", "waiting", "waited", "wait"
		w.Targets = []string{"for the page to load", "for the page", "a second"}
	case "go_back":
		w.V, w.Ving, w.Ved, w.Obj = "go back", "going back", "went back", "back navigation"
		w.Targets = []string{"to the previous page", "one page"}
	case "goto":
		w.V, w.Ving, w.Ved, w.Obj = "open", "opening", "opened", "navigation"
		w.Targets = []string{args[0]}
		if u := args[0]; len(u) > 50 {
			w.Targets = []string{u[:strings.IndexAny(u+"?", "?")]}
		}
	default:
		tb.Fatalf("%s: unexpected web action %q", rel, fn)
	}
	nexts := []struct{ act, desc string }{
		{"go_back()", "go back to the previous page"},
		{"scroll(0, 400)", "scroll further down the list"},
		{"click('9999')", "open the search field at the top"},
		{"goto('http://localhost:7780/admin')", "open the admin dashboard directly"},
	}
	for i := range nexts {
		n := nexts[(len(rel)+i)%len(nexts)]
		if !SameAction(js(n.act), s.RepetitiveAction) && !strings.HasPrefix(n.act, fn+"(") {
			w.Different, w.Next = js(n.act), n.desc
			break
		}
	}
	return w
}

// ordinals for {N}.
var ordinals = []string{"third", "fourth", "fifth", "sixth"}

// fill puts the action's words into a template.
func (w actionWords) fill(tmpl string, r *rand.Rand) string {
	target := w.Targets[r.IntN(len(w.Targets))]
	s := strings.NewReplacer(
		"{Ving}", w.Ving, "{Ved}", w.Ved, "{V}", w.V, "{OBJ}", w.Obj, "{T}", target,
		"{N}", ordinals[r.IntN(len(ordinals))], "{NEXT}", w.Next, "{ACT}", w.Act,
	).Replace(tmpl)
	if s != "" {
		s = strings.ToUpper(s[:1]) + s[1:]
	}
	return s
}

// result is a MIRAGE result in the shape the inference script writes for
// the scenario.
func (w actionWords) result(thinking string, action json.RawMessage) map[string]any {
	if w.swe {
		var calls any
		_ = json.Unmarshal(action, &calls)
		return map[string]any{"model": "casegen", "completion": map[string]any{"role": "assistant", "content": thinking, "tool_calls": calls},
			"thinking": thinking, "action": calls, "good_format": true, "parse_error": ""}
	}
	a, _ := rawString(action)
	return map[string]any{"model": "casegen", "completion": "<think>\n" + thinking + "\n</think>\n<action>\n" + a + "\n</action>",
		"thinking": thinking, "action": a, "good_format": true, "parse_error": ""}
}

// genCase is one generated inference-result file.
type genCase struct {
	rel      string // path under the output folder
	kind     caseKind
	thinking string
	data     []byte
}

// generateCases builds one case of every kind for every snapshot under
// dir that has a repetitive_action, with templates from pool chosen by a
// generator seeded with seed.
func generateCases(tb testing.TB, dir string, pool casePool, seed uint64) []genCase {
	tb.Helper()
	files := snapshotFiles(tb, dir)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var out []genCase
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			tb.Fatal(err)
		}
		var s Snapshot
		if err := json.Unmarshal(data, &s); err != nil {
			tb.Fatalf("%s: %v", rel, err)
		}
		if len(s.RepetitiveAction) == 0 {
			continue // OSWorld: no repeated action to build cases on
		}
		w := describeAction(tb, rel, s)
		for _, k := range allKinds {
			ts := pool[k]
			thinking := w.fill(ts[r.IntN(len(ts))], r)
			action := w.Different
			if k == kindRepeatNeutral || k == kindRepeatAware {
				action = w.Repeat
			}
			name := filepath.Join(filepath.Dir(rel), fmt.Sprintf("k%d_%s", k, filepath.Base(rel)))
			out = append(out, genCase{rel: name, kind: k, thinking: thinking, data: withResult(tb, data, w.result(thinking, action))})
		}
	}
	return out
}

// writeCases writes the cases under dir and returns the wanted score by
// path.
func writeCases(tb testing.TB, dir string, cases []genCase) map[string]genCase {
	tb.Helper()
	byPath := make(map[string]genCase, len(cases))
	for _, c := range cases {
		p := filepath.Join(dir, c.rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, c.data, 0o644); err != nil {
			tb.Fatal(err)
		}
		byPath[p] = c
	}
	return byPath
}

// tally counts right answers per kind.
type tally struct {
	right, total [7]int
}

func (t *tally) add(k caseKind, ok bool) {
	t.total[k]++
	if ok {
		t.right[k]++
	}
}

func (t *tally) overall() (right, total int) {
	for _, k := range allKinds {
		right += t.right[k]
		total += t.total[k]
	}
	return right, total
}

func (t *tally) pct(k caseKind) float64 {
	return 100 * float64(t.right[k]) / float64(max(1, t.total[k]))
}

func (t *tally) String() string {
	right, total := t.overall()
	var b strings.Builder
	fmt.Fprintf(&b, "overall %d/%d = %.1f %%\n", right, total, 100*float64(right)/float64(max(1, total)))
	for _, k := range allKinds {
		fmt.Fprintf(&b, "  kind %d %-19s (want %d): %3d/%3d = %5.1f %%\n", k, k, k.want(), t.right[k], t.total[k], t.pct(k))
	}
	return b.String()
}

// measure generates pool's cases into a temporary folder, runs the offline
// verifier (Lines, as vera verify repetitive does) over it and tallies the
// thinking_eval against the kind's label.
func measure(t *testing.T, pool casePool, seed uint64, failures int) *tally {
	t.Helper()
	dir := t.TempDir()
	cases := generateCases(t, sharedMirage, pool, seed)
	byPath := writeCases(t, dir, cases)
	var tl tally
	shown := 0
	for l := range Lines([]string{dir}) {
		c, ok := byPath[l.File]
		if !ok {
			t.Fatalf("unexpected line for %s", l.File)
		}
		delete(byPath, l.File)
		if l.Error != "" {
			t.Errorf("%s: %s", l.File, l.Error)
			tl.add(c.kind, false)
			continue
		}
		good := l.VerifiedResult.ThinkingEval == c.kind.want()
		tl.add(c.kind, good)
		if !good && shown < failures {
			shown++
			t.Logf("MISS %s kind %s: got %d\n  thinking: %s\n  reason: %s", c.rel, c.kind, l.VerifiedResult.ThinkingEval, c.thinking, l.VerifiedResult.ThinkingEvalReason)
		}
	}
	if len(byPath) != 0 {
		t.Errorf("%d files without a line", len(byPath))
	}
	return &tl
}
