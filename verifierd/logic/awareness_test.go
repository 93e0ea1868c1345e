package logic

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestVocabularySize(t *testing.T) {
	if n := len(Keywords()); n < 60 {
		t.Errorf("%d keywords, the spec asks for 60+", n)
	}
	if n := len(Patterns()); n < 9 {
		t.Errorf("%d patterns, the spec asks for at least 9", n)
	}
	groups := map[Group]int{}
	for _, k := range Keywords() {
		groups[k.Group]++
	}
	for _, g := range []Group{GroupRepetition, GroupFailure, GroupAlternative, GroupPrevious} {
		if groups[g] == 0 {
			t.Errorf("no keyword in group %s", g)
		}
	}
	// The spec's own examples are all there.
	for _, k := range []string{"tried before", "already tried", "repeated", "same action", "not working",
		"didn't work", "failed", "stuck", "loop", "different approach", "alternative", "another way",
		"try something else", "previously", "earlier", "multiple times", "again and again"} {
		if !slices.ContainsFunc(Keywords(), func(kw Keyword) bool { return kw.Phrase == k }) {
			t.Errorf("spec keyword %q missing", k)
		}
	}
	seen := map[string]bool{}
	for _, k := range Keywords() {
		if seen[k.Phrase] {
			t.Errorf("keyword %q listed twice", k.Phrase)
		}
		seen[k.Phrase] = true
		if k.Phrase != strings.ToLower(k.Phrase) || strings.ContainsAny(k.Phrase, "’‘“”") {
			t.Errorf("keyword %q: lists are lower-case ASCII", k.Phrase)
		}
	}
	for _, d := range Distractors() {
		for _, g := range d.Guards {
			if !seen[g] {
				t.Errorf("distractor %q guards %q, which is no keyword", d.Name, g)
			}
		}
		if _, err := regexp.Compile(d.Expr); err != nil {
			t.Errorf("distractor %q: %v", d.Name, err)
		}
	}
}

// Every keyword is found in a neutral sentence around it.
func TestEveryKeywordMatches(t *testing.T) {
	for _, k := range Keywords() {
		aw := DetectAwareness("So far, " + k.Phrase + " here.")
		if !slices.Contains(aw.IDs(), k.Phrase) {
			t.Errorf("keyword %q not found (cues %v, set aside %v)", k.Phrase, aw.IDs(), aw.SetAside)
		}
	}
}

func TestEveryPatternMatches(t *testing.T) {
	examples := map[string]string{
		"tried_already":            "I have already tried clicking the filter button.",
		"this_did_not_work":        "Scrolling down, that didn't seem to help.",
		"need_something_different": "I need to try something different here.",
		"keeps_failing":            "The click keeps failing with a timeout.",
		"previous_attempts_failed": "My previous attempts to fill the search box were unsuccessful.",
		"same_again":               "It seems I am making the same mistake again.",
		"stuck_in_loop":            "I am stuck in a clicking loop.",
		"no_change":                "The page has not changed after the click.",
		"tried_n_times":            "I clicked the All button three times already.",
		"instead_of_repeating":     "Instead of clicking it again, I will search for the report.",
		"since_it_did_not_work":    "Since scrolling the list did not help, I will use the search box.",
		"not_able_so_far":          "I haven't been able to open the filter panel.",
		"could_not":                "I couldn't find the settings link on this page.",
		"change_approach":          "I should change my strategy and open the menu first.",
		"still_no_progress":        "The results are still not visible.",
	}
	for _, p := range Patterns() {
		ex, ok := examples[p.Name]
		if !ok {
			t.Errorf("pattern %s has no example in this test", p.Name)
			continue
		}
		aw := DetectAwareness(ex)
		if !slices.Contains(aw.IDs(), "pattern:"+p.Name) {
			t.Errorf("pattern %s does not match %q (cues %v, set aside %v)", p.Name, ex, aw.IDs(), aw.SetAside)
		}
	}
}

func TestDetectAwareness(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		aware   bool
		strong  bool
		want    []string // IDs that must count
		notWant []string // IDs that must not count
		aside   string   // a substring of a set-aside reason, if any
	}{
		{name: "empty", text: "   "},
		{name: "neutral", text: "The page shows the expense lines. I will open the first one to read its amount."},
		{name: "plain keyword", text: "I am stuck on this page.", aware: true, strong: true, want: []string{"stuck"}},
		{name: "case insensitive", text: "ALREADY TRIED that.", aware: true, strong: true, want: []string{"already tried"}},
		{name: "hyphen between words", text: "This is a dead-end.", aware: true, strong: true, want: []string{"dead end"}},

		// Word boundaries.
		{name: "loophole is not loop", text: "There may be a loophole in the form validation.", notWant: []string{"loop"}},
		{name: "loop_var is not loop", text: "I will rename loop_var to idx.", notWant: []string{"loop"}},
		{name: "looped counts", text: "I have looped back to the home page.", aware: true, strong: true, want: []string{"looped"}},
		{name: "looping counts", text: "I am looping between the same two pages.", aware: true, strong: true, want: []string{"looping"}},
		{name: "RepeatedKFold is not repeated", text: "The class RepeatedKFold is defined in _split.py.", notWant: []string{"repeated"}},
		{name: "unfailed is not failed", text: "The unfailedness metric is fine.", notWant: []string{"failed"}},
		{name: "earliest is not earlier", text: "Pick the earliest date in the list.", notWant: []string{"earlier"}},

		// Typographic apostrophes and quotes.
		{name: "typographic apostrophe", text: "That didn’t work, so I will search instead.", aware: true, strong: true, want: []string{"didn't work"}},
		{name: "left single quote as apostrophe", text: "It didn‘t work.", aware: true, strong: true, want: []string{"didn't work"}},
		{name: "apostrophe missing", text: "It didnt work.", aware: true, strong: true, want: []string{"didn't work"}},
		{name: "typographic negation", text: "I haven’t tried before to open this menu.", notWant: []string{"tried before"}, aside: "negated"},
		{name: "typographic quotes hold page content", text: "The tab “Failed jobs” lists nothing.", notWant: []string{"failed"}, aside: "quoted"},
		{name: "typographic apostrophe before quote", text: "I’ve clicked “Submit” repeatedly.", aware: true, strong: true, want: []string{"repeatedly"}},

		// Negations.
		{name: "haven't tried", text: "I haven't tried before to use the search box.", notWant: []string{"tried before"}, aside: `negated by "haven't"`},
		{name: "not stuck", text: "I'm not stuck, the page just loaded.", notWant: []string{"stuck"}, aside: `negated by "not"`},
		{name: "never failed", text: "The click never failed.", notWant: []string{"failed"}, aside: `negated by "never"`},
		{name: "no longer stuck", text: "The list is no longer stuck.", notWant: []string{"stuck"}},
		{name: "negation too far", text: "I do not see the menu, and I am stuck.", aware: true, strong: true, want: []string{"stuck"}},
		{name: "negation in another clause", text: "It did not load; stuck again.", aware: true, strong: true, want: []string{"stuck"}},
		{name: "negated verb is not a negated cue", text: "I should not repeat the same action.", aware: true, strong: true, want: []string{"same action"}},
		{name: "negation inside the phrase counts", text: "My attempts have not been successful.", aware: true, strong: true, want: []string{"not been successful"}},

		// Hypotheses.
		{name: "if that fails", text: "I will click the button. If that fails I will wait.", notWant: []string{"fails"}, aside: "hypothetical"},
		{name: "check whether", text: "Let me check whether the page is stuck.", notWant: []string{"stuck"}, aside: "hypothetical"},
		{name: "alternative after if still counts", text: "If this is slow, I will try a different approach.", aware: true, strong: true, want: []string{"different approach"}},

		// Distractors.
		{name: "change the address", text: "I need to change the address of the customer to 2495 Bancroft Way.", aware: false},
		{name: "Change application", text: "Navigate to the All module of the Change application and open the change requests.", aware: false},
		{name: "change approach counts", text: "I will change my approach and use the search bar.", aware: true, strong: true, want: []string{"pattern:change_approach"}},
		{name: "alternative text", text: "The image has alternative text describing the logo.", notWant: []string{"alternative"}, aside: "another sense"},
		{name: "alt text", text: "Read the alt text of the product image.", aware: false},
		{name: "alternative address", text: "Add an alternative address for shipping.", notWant: []string{"alternative"}},
		{name: "alternative alone counts (weak)", text: "As an alternative, I can use the search box.", aware: true, strong: false, want: []string{"alternative"}},
		{name: "for loop", text: "The bug is in the for loop that builds the list.", notWant: []string{"loop"}, aside: "code loop"},
		{name: "inside the loop", text: "We should reset final_attrs inside the loop.", notWant: []string{"loop"}},
		{name: "loop over", text: "We loop over the fields to build the form.", notWant: []string{"loop"}},
		{name: "stuck in a loop counts", text: "I seem to be stuck in a loop of clicking the same link.", aware: true, strong: true, want: []string{"stuck", "pattern:stuck_in_loop"}},
		{name: "test failed", text: "The test failed because sys.argv was wrong.", notWant: []string{"failed"}, aside: "tests or jobs failed"},
		{name: "failed jobs page", text: "Open the failed jobs tab of the pipeline.", notWant: []string{"failed"}},
		{name: "quoted failed", text: `It sets the outcome to "failed" or "skipped".`, notWant: []string{"failed"}, aside: "quoted"},
		{name: "single-quoted failed", text: `Click the 'Retry failed' button.`, notWant: []string{"failed"}, aside: "quoted"},
		{name: "backticked code", text: "Rename `loop` to `step` in the helper.", notWant: []string{"loop"}},
		{name: "my failed click counts", text: "My click on the link failed.", aware: true, strong: true, want: []string{"failed", "pattern:previous_attempts_failed"}},
		{name: "failed alone is weak", text: "The navigation failed.", aware: true, strong: false, want: []string{"failed"}},
		{name: "configured multiple times", text: "The settings are being configured multiple times.", notWant: []string{"multiple times"}},
		{name: "clicked multiple times counts", text: "I have clicked the All button multiple times.", aware: true, strong: true, want: []string{"multiple times"}},
		{name: "calling itself repeatedly", text: "The method is calling itself repeatedly.", notWant: []string{"repeatedly"}},
		{name: "same error as the issue", text: "We are seeing the same error as described in the issue.", notWant: []string{"same error"}},
		{name: "earlier in the file", text: "The helper is defined earlier in the file.", notWant: []string{"earlier"}},
		{name: "earlier attempt counts", text: "The search I ran earlier returned nothing.", aware: true, strong: false, want: []string{"earlier"}},
		{name: "previously mentioned", text: "As previously mentioned, the form has two fields.", notWant: []string{"previously"}},

		// Strength.
		{name: "weak only", text: "I previously opened the reports page.", aware: true, strong: false, want: []string{"previously"}},
		{name: "nested keyword reported once", text: "Let me take an alternative approach.", aware: true, strong: true, want: []string{"alternative approach"}, notWant: []string{"alternative"}},

		// Real thinking from MIRAGE histories.
		{name: "mirage workarena", text: "Since the previous attempts to click on the filter option have failed, I will try to find a different way to access the filter options.",
			aware: true, strong: true, want: []string{"previous attempts", "pattern:previous_attempts_failed", "different way"}},
		{name: "mirage swebench", text: "It seems I have been making the same mistake repeatedly. Let's correct the indentation properly this time.",
			aware: true, strong: true, want: []string{"same mistake", "repeatedly", "pattern:same_again"}},
		{name: "mirage webarena", text: `Since my previous attempts to search for "airports" did not work, I will try to zoom out on the map.`,
			aware: true, strong: true, want: []string{"did not work", "pattern:previous_attempts_failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aw := DetectAwareness(tt.text)
			if aw.Aware() != tt.aware {
				t.Errorf("Aware() = %v, want %v (cues %v, set aside %v)", aw.Aware(), tt.aware, aw.IDs(), aw.SetAside)
			}
			if tt.aware && aw.Strong() != tt.strong {
				t.Errorf("Strong() = %v, want %v (cues %v)", aw.Strong(), tt.strong, aw.IDs())
			}
			for _, w := range tt.want {
				if !slices.Contains(aw.IDs(), w) {
					t.Errorf("cue %q missing (cues %v)", w, aw.IDs())
				}
			}
			for _, w := range tt.notWant {
				if slices.Contains(aw.IDs(), w) {
					t.Errorf("cue %q should not count (cues %v)", w, aw.IDs())
				}
			}
			if tt.aside != "" && !slices.ContainsFunc(aw.SetAside, func(s SetAside) bool { return strings.Contains(s.Why, tt.aside) }) {
				t.Errorf("no cue set aside with %q (set aside %v)", tt.aside, aw.SetAside)
			}
		})
	}
}

// Every pattern's Needs pre-check is sound: wherever the expression
// matches, the text contains one of the literals. Checked on the examples
// and on the thinking texts of the MIRAGE snapshots at hand.
func TestPatternNeedsAreSound(t *testing.T) {
	texts := corpus(t, append([]string{awareThinking, neutralThinking, weakThinking}, awareThinkings...)...)
	normalized := make([]string, len(texts))
	for i, text := range texts {
		normalized[i] = NormalizeThinking(text)
	}
	for _, p := range compiledPatterns {
		for _, n := range normalized {
			if !containsAny(n, p.Needs) && p.re.MatchString(n) {
				t.Errorf("pattern %s matches %q but its Needs %q are absent", p.Name, p.re.FindString(n), p.Needs)
			}
		}
	}
	t.Logf("%d texts", len(texts))
}

// The keyword matcher finds what the documented regular expression would:
// the phrase's words at \b boundaries, separated by [\s-]+, apostrophes
// optional.
func TestKeywordMatcherAgreesWithRegexp(t *testing.T) {
	texts := corpus(t, "dead-end, dead  end; dead\nend", "didn't didnt did n't", "loop_var loop-based loophole 'loop'", "café stuckée", "I'VE TRIED BEFORE")
	res := map[string]*regexp.Regexp{}
	for _, k := range Keywords() {
		words := strings.Fields(k.Phrase)
		for i, w := range words {
			words[i] = strings.ReplaceAll(regexp.QuoteMeta(w), "'", "'?")
		}
		res[k.Phrase] = regexp.MustCompile(`\b` + strings.Join(words, `[\s-]+`) + `\b`)
	}
	for _, text := range texts {
		n := NormalizeThinking(text)
		got := map[string][][2]int{}
		for _, c := range matchKeywords(n) {
			got[c.Name] = append(got[c.Name], [2]int{c.Start, c.End})
		}
		for phrase, re := range res {
			if first, _, _ := strings.Cut(strings.Fields(phrase)[0], "'"); !strings.Contains(n, first) {
				continue // the expression cannot match
			}
			var want [][2]int
			for _, loc := range re.FindAllStringIndex(n, -1) {
				want = append(want, [2]int{loc[0], loc[1]})
			}
			if !slices.Equal(got[phrase], want) {
				t.Errorf("keyword %q in %q: matcher %v, regexp %v", phrase, clip(n, 80), got[phrase], want)
			}
		}
	}
}

// corpus returns the given texts and the distinct thinking texts of the
// MIRAGE snapshots at hand (only the testdata ones with -short).
func corpus(t *testing.T, texts ...string) []string {
	dirs := []string{testdataMirage, sharedMirage}
	if testing.Short() {
		dirs = dirs[:1]
	}
	seen := map[string]bool{}
	for _, text := range texts {
		seen[text] = true
	}
	for _, dir := range dirs {
		files, _ := jsonFilesUnder(dir)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var s Snapshot
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatal(err)
			}
			for _, text := range historyThinking(s) {
				if !seen[text] {
					seen[text] = true
					texts = append(texts, text)
				}
			}
		}
	}
	return texts
}

// historyThinking returns the thinking texts of a snapshot's history.
func historyThinking(s Snapshot) []string {
	var out []string
	for _, m := range s.Input {
		switch m.Role {
		case "assistant":
			out = append(out, m.Text())
		case "user":
			for _, sm := range thinkBlock.FindAllStringSubmatch(m.Text(), -1) {
				out = append(out, sm[1])
			}
		}
	}
	return out
}

var thinkBlock = regexp.MustCompile(`(?s)<think>(.*?)</think>`)

func TestQuotedSpans(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{`click "All" and 'Reports'`, []string{`"All"`, `'Reports'`}},
		{`I didn't see the users' list`, nil},
		{"run `ls -la` now", []string{"`ls -la`"}},
		{"```python\nx = 1 # failed\n```", []string{"```python\nx = 1 # failed\n```"}},
		{"an \"unbalanced quote\nacross lines\"", nil},
		{`it's 'quoted' and it's fine`, []string{`'quoted'`}},
	}
	for _, tt := range tests {
		var got []string
		for _, s := range quotedSpans(tt.text) {
			got = append(got, tt.text[s.start:s.end])
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("quotedSpans(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}
