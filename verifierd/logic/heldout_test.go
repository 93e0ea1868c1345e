package logic

import (
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Seeds of the generated sets.
const (
	heldOutSeed = 20261125
	devSeed     = 17
)

// The aims.
const (
	aimOverall = 97.0
	aimPerKind = 90.0
)

// casesPerKind is the number of MIRAGE snapshots with a repetitive_action
// (28 WebArena, 49 WorkArena, 117 SWE-bench): one case of each kind each.
const casesPerKind = 194

func checkAims(t *testing.T, name string, tl *tally) {
	t.Helper()
	right, total := tl.overall()
	t.Logf("%s:\n%s", name, tl)
	if total != casesPerKind*len(allKinds) {
		t.Errorf("%d cases, want %d", total, casesPerKind*len(allKinds))
	}
	if pct := 100 * float64(right) / float64(max(1, total)); pct < aimOverall {
		t.Errorf("%s: overall %.1f %% < %.0f %%", name, pct, aimOverall)
	}
	for _, k := range allKinds {
		if tl.total[k] != casesPerKind {
			t.Errorf("kind %s: %d cases, want %d", k, tl.total[k], casesPerKind)
		}
		if p := tl.pct(k); p < aimPerKind {
			t.Errorf("%s: kind %s %.1f %% < %.0f %%", name, k, p, aimPerKind)
		}
	}
}

// TestHeldOut is the measurement: 1,164 results built from the held-out
// pool, verified from files by Lines as the command does, scored against
// the kinds' labels. Run it with -v to see the figures.
func TestHeldOut(t *testing.T) {
	checkAims(t, "held-out", measure(t, heldOutPool, heldOutSeed, 0))
}

// TestDevPool runs the same over the dev pool, listing the misses.
func TestDevPool(t *testing.T) {
	checkAims(t, "dev", measure(t, devPool, devSeed, 20))
}

var awarenessLikeWord = regexp.MustCompile(`(?i)\b(alternative|alternatively|previously|previous|adjust|tried|again|loop|stuck|same|failed|fails|fail|earlier|another way|something else|work)\b`)

// TestCasePools checks the pools mean what their kinds say, lexically: the
// implicit kind uses none of the listed keywords or patterns, the classic
// kind uses some, the decoys use awareness-like words, and the two pools
// share no template.
func TestCasePools(t *testing.T) {
	w := actionWords{V: "click", Ving: "clicking", Ved: "clicked", Obj: "click", Targets: []string{"element '12'"},
		Act: "click('12')", Next: "go back to the previous page"}
	r := rand.New(rand.NewPCG(1, 2))
	for name, pool := range map[string]casePool{"dev": devPool, "held-out": heldOutPool} {
		for _, k := range allKinds {
			if len(pool[k]) < 4 {
				t.Errorf("%s pool, kind %s: %d templates", name, k, len(pool[k]))
			}
			for _, tmpl := range pool[k] {
				text := w.fill(tmpl, r)
				aw := DetectAwareness(text)
				switch k {
				case kindDifferentImplicit:
					if aw.Aware() || len(aw.SetAside) > 0 {
						t.Errorf("%s pool, implicit template uses listed keywords %v %v: %q", name, aw.IDs(), aw.SetAside, text)
					}
				case kindDifferentClassic:
					if !aw.Aware() {
						t.Errorf("%s pool, classic template without keywords: %q", name, text)
					}
				case kindDifferentDecoy:
					if !awarenessLikeWord.MatchString(text) {
						t.Errorf("%s pool, decoy without awareness-like words: %q", name, text)
					}
				}
			}
		}
	}
	for _, k := range allKinds {
		for _, tmpl := range devPool[k] {
			for _, k2 := range allKinds {
				if slices.Contains(heldOutPool[k2], tmpl) {
					t.Errorf("template in both pools: %q", tmpl)
				}
			}
		}
	}
	// Frames differ too: no held-out template starts like a dev one.
	for _, k := range allKinds {
		for _, h := range heldOutPool[k] {
			for _, d := range devPool[k] {
				if a, b := strings.Fields(h), strings.Fields(d); len(a) > 3 && len(b) > 3 && slices.Equal(a[:4], b[:4]) {
					t.Errorf("kind %s: held-out %q opens like dev %q", k, h, d)
				}
			}
		}
	}
}

// TestGeneratedCases checks the generator: 194 cases of each kind,
// deterministic for a seed, thinking filled with the snapshot's target.
func TestGeneratedCases(t *testing.T) {
	a := generateCases(t, sharedMirage, devPool, devSeed)
	b := generateCases(t, sharedMirage, devPool, devSeed)
	if len(a) != casesPerKind*len(allKinds) {
		t.Fatalf("%d cases, want %d", len(a), casesPerKind*len(allKinds))
	}
	for i := range a {
		if a[i].rel != b[i].rel || string(a[i].data) != string(b[i].data) {
			t.Fatalf("case %d differs between two runs with the same seed", i)
		}
		if strings.Contains(a[i].thinking, "{") && strings.Contains(a[i].thinking, "}") && regexp.MustCompile(`\{[A-Za-z]+\}`).MatchString(a[i].thinking) {
			t.Errorf("unfilled placeholder: %q", a[i].thinking)
		}
		f, err := ParseFile(a[i].data)
		if err != nil {
			t.Fatalf("%s: %v", a[i].rel, err)
		}
		ref, _ := ReferenceAction(f.Snapshot)
		repeats := resultAction(f.Result).Equal(ref)
		if want := a[i].kind == kindRepeatNeutral || a[i].kind == kindRepeatAware; repeats != want {
			t.Errorf("%s: action repeats %v, want %v", a[i].rel, repeats, want)
		}
	}
}

// TestWriteHeldOut writes the held-out set to $VERA_WRITE_CASES (for
// timing the command: vera verify repetitive DIR); it is skipped without
// the variable.
func TestWriteHeldOut(t *testing.T) {
	dir := os.Getenv("VERA_WRITE_CASES")
	if dir == "" {
		t.Skip("set VERA_WRITE_CASES=DIR to write the held-out set there")
	}
	cases := generateCases(t, sharedMirage, heldOutPool, heldOutSeed)
	if len(cases) != casesPerKind*len(allKinds) {
		t.Fatalf("%d cases", len(cases))
	}
	writeCases(t, dir, cases)
	t.Logf("%d files written under %s", len(cases), dir)
}
