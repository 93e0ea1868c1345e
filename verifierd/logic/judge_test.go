package logic

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// webSnapshot is a snapshot whose last user message shows element 12 as
// a button labelled "Load more".
func webSnapshot(action string) Snapshot {
	return Snapshot{TaskName: "t", RepetitiveAction: js(action), Input: []Message{
		{Role: "user", Content: json.RawMessage(`"# Observation\n[11] link 'Home'\n[12] button 'Load more', clickable\n[13] textbox 'Search'\n"`)},
	}}
}

func TestNewReferent(t *testing.T) {
	sweInput := []Message{
		{Role: "assistant", Content: json.RawMessage(`"open it"`)},
		{Role: "tool", Content: json.RawMessage(`"[File: /repo/pkg/models.py (420 lines total)]\n1:import os"`)},
	}
	tests := []struct {
		name    string
		s       Snapshot
		fn      string
		verbs   []string
		targets []string
	}{
		{"click with label", webSnapshot("click('12')"), "click", []string{"clicking"}, []string{"12", "load more"}},
		{"fill", webSnapshot("fill('13', 'blue shirt')"), "fill", []string{"typed"}, []string{"13", "blue shirt", "search"}},
		{"scroll", webSnapshot("scroll(0, 300)"), "scroll", []string{"scrolled"}, []string{"300"}},
		{"noop has no target", webSnapshot("noop(1000)  # wait"), "noop", []string{"waiting"}, nil},
		{"go_back", webSnapshot("go_back()"), "go_back", []string{"went back"}, nil},
		{"goto", webSnapshot("goto('http://shop.local/search?q=x')"), "goto", []string{"navigated"}, []string{"http://shop.local/search?q=x", "http://shop.local/search"}},
		{"pyautogui", Snapshot{TaskName: "t", RepetitiveAction: js("import pyautogui\npyautogui.click(169, 670)")}, "", nil, nil},
		{"swe edit", Snapshot{TaskName: "t", Input: sweInput,
			RepetitiveAction: json.RawMessage(`{"type":"function","function":{"name":"edit","arguments":"{\"start_line\": 305, \"end_line\": 314, \"replacement_text\": \"x\"}"}}`)},
			"edit", []string{"editing"}, []string{"305", "314", "/repo/pkg/models.py", "models.py"}},
		{"swe bash edit", Snapshot{TaskName: "t", Input: sweInput,
			RepetitiveAction: json.RawMessage(`{"type":"function","function":{"name":"bash","arguments":"{\"command\": \"edit 78:104 sphinx/util/rst.py\\ndef f(): pass\\nend_of_edit\"}"}}`)},
			"edit", []string{"edited"}, []string{"78", "104", "rst.py", "/repo/pkg/models.py"}},
		{"shell command", Snapshot{TaskName: "t", RepetitiveAction: json.RawMessage(`{"name":"shell","arguments":{"cmd":"ls -la /work"}}`)},
			"shell", []string{"listing", "running"}, []string{"ls -la /work", "/work"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, _ := ReferenceAction(tt.s)
			r := NewReferent(tt.s, ref)
			if tt.fn != "" && r.Function != tt.fn {
				t.Errorf("function %q, want %q (%s)", r.Function, tt.fn, r)
			}
			for _, v := range tt.verbs {
				if !slices.Contains(r.Verbs, v) {
					t.Errorf("verb %q missing: %s", v, r)
				}
			}
			for _, x := range tt.targets {
				if !slices.Contains(r.Targets, x) {
					t.Errorf("target %q missing: %s", x, r)
				}
			}
			if tt.targets == nil && tt.fn != "" && len(r.Targets) > 0 {
				t.Errorf("targets %q, want none", r.Targets)
			}
		})
	}
}

// The element label read from the raw JSON line equals the one read from
// the decoded text, on every web snapshot of MIRAGE.
func TestElementLabelFromRawLine(t *testing.T) {
	files := snapshotFiles(t, sharedMirage)
	checked := 0
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(sharedMirage, rel))
		if err != nil {
			t.Fatal(err)
		}
		var s Snapshot
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		ra, ok := rawString(s.RepetitiveAction)
		if !ok {
			continue
		}
		m := webCall.FindStringSubmatch(ra)
		if m == nil || !slices.Contains(bidFunctions, m[1]) {
			continue
		}
		bid := pyArgs(m[2])[0]
		_, want := axLabel(s, bid)
		if len(want) < 3 {
			want = ""
		}
		if got := elementLabel(s, bid); got != strings.TrimSpace(want) {
			t.Errorf("%s: label of %s %q, want %q", rel, bid, got, want)
		}
		checked++
	}
	if checked < 30 {
		t.Errorf("only %d snapshots checked", checked)
	}
}

func TestJudgeAwareness(t *testing.T) {
	click := NewReferent(webSnapshot("click('12')"), ParseAction(js("click('12')")))
	scroll := NewReferent(webSnapshot("scroll(0, 300)"), ParseAction(js("scroll(0, 300)")))
	tests := []struct {
		name  string
		r     Referent
		text  string
		aware bool
		about string // a substring of About, when aware
		aside string // a substring of a set-aside reason, when not
	}{
		// Ways of saying it.
		{"counts the attempts", click, "This is the fourth time I click element 12. I will search instead.", true, "target", ""},
		{"names it by its label", click, "Pressing on Load more gives an identical page, so I will search.", true, "target", ""},
		{"unchanged outcome", scroll, "The page is unchanged. Let me use the search box.", true, "outcome", ""},
		{"futile, by verb", scroll, "Scrolling gets me nowhere; I will open the menu.", true, "verb", ""},
		{"anaphora after naming it", click, "I clicked '12' once more. It did nothing, so I will search.", true, "", ""},
		{"the same action", click, "Doing the same thing yet again makes no sense; I'll go back.", true, "own action", ""},
		{"classic keywords", click, "I have already tried clicking it several times and it did not work.", true, "", ""},
		{"nothing new after it", scroll, "Nothing new appears after scrolling down, so I will go back.", true, "verb", ""},
		{"result the same as before", click, "Clicking 12 returns the same result as before.", true, "", ""},
		{"no change, earlier clause", click, "I clicked 12, and there was no change at all.", true, "", ""},

		// Ways of not saying it.
		{"another sense: the page's alternative", click, "The page lists an alternative address. I will open it.", false, "", ""},
		{"another person tried", click, "The customer tried to pay twice before, per the log.", false, "", "not about the repeated action"},
		{"the task's loop", scroll, "The issue says the parser gets stuck in a loop on empty input.", false, "", "not about the repeated action"},
		{"negated", click, "I have not clicked element 12 before.", false, "", "negated"},
		{"hypothetical", click, "If clicking 12 does nothing, I will search.", false, "", "hypothetical"},
		{"alternative only", click, "I will try a different approach and use the search box.", false, "", "seeks an alternative"},
		{"page content the same", click, "Both rows show the same value.", false, "", ""},
		{"again about the goal", click, "Again, the goal asks for the latest order, so I will click the orders tab.", false, "", "not about the repeated action"},
		{"payment failed on the page", click, "The page says the payment failed for order 7.", false, "", ""},
		{"quoted", click, `The button is labelled "No change".`, false, "", "quoted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			aw := JudgeAwareness(tt.text, tt.r)
			if aw.Aware() != tt.aware {
				t.Fatalf("aware %v, want %v: cues %v about %v set aside %v", aw.Aware(), tt.aware, aw.IDs(), aw.About, aw.SetAside)
			}
			if tt.about != "" && !slices.ContainsFunc(aw.About, func(s string) bool { return strings.Contains(s, tt.about) }) {
				t.Errorf("about %v lacks %q", aw.About, tt.about)
			}
			if tt.aside != "" && !slices.ContainsFunc(aw.SetAside, func(s SetAside) bool { return strings.Contains(s.Why, tt.aside) }) {
				t.Errorf("set aside %v lacks %q", aw.SetAside, tt.aside)
			}
		})
	}
}

// Every claim's Needs pre-check is sound, on the thinking texts of the
// MIRAGE snapshots and on the filled dev templates; and every expression
// is written in lower case, as the text it runs on.
func TestClaimNeedsAreSound(t *testing.T) {
	texts := corpus(t, awareThinking, neutralThinking, weakThinking)
	w := actionWords{V: "click", Ving: "clicking", Ved: "clicked", Obj: "click", Targets: []string{"element '12'"}, Act: "click('12')", Next: "go back"}
	for _, ts := range devPool {
		for _, tmpl := range ts {
			texts = append(texts, strings.NewReplacer("{N}", "4th", "{Ving}", w.Ving, "{Ved}", w.Ved, "{V}", w.V, "{OBJ}", w.Obj, "{T}", "12", "{NEXT}", w.Next, "{ACT}", w.Act).Replace(tmpl))
		}
	}
	for _, c := range compiledClaims {
		for _, text := range texts {
			n := NormalizeThinking(text)
			if !containsAny(n, c.Needs) && c.re.MatchString(n) {
				t.Errorf("claim %s matches %q but its Needs %q are absent", c.Name, c.re.FindString(n), c.Needs)
			}
		}
	}
	escapes := regexp.MustCompile(`\\[A-Za-z]`)
	var exprs []string
	for _, c := range claims {
		exprs = append(exprs, c.Expr)
	}
	for _, p := range patterns {
		exprs = append(exprs, p.Expr)
	}
	for _, d := range distractors {
		exprs = append(exprs, d.Expr)
	}
	exprs = append(exprs, anaphora)
	exprs = append(exprs, selfReference...)
	for _, e := range exprs {
		if s := escapes.ReplaceAllString(e, ""); strings.ToLower(s) != s {
			t.Errorf("expression not in lower case: %s", clip(e, 80))
		}
	}
}
