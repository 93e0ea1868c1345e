package logic

import (
	"bytes"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Referent is what a thinking may name when it speaks of the action the
// agent has been repeating: the word forms of its verb and its targets
// (element ids and labels, typed text, URLs, file names, line numbers,
// command words). Build it with NewReferent.
type Referent struct {
	Function string   // the action's function, lower case: click, scroll, edit, bash…
	Verbs    []string // word forms of the verb, lower case
	Targets  []string // lower-case targets
}

// CueClaim is the kind of a cue found by the reference judgement: a claim
// of claims (keywords.go) about the repeated action.
const CueClaim CueKind = "claim"

var (
	callExpr   = regexp.MustCompile(`([A-Za-z_][\w.]*)\s*\(([^\n]*)\)`)
	litExpr    = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|(-?\d+(?:\.\d+)?)`)
	editBash   = regexp.MustCompile(`^\s*edit\s+(\d+):(\d+)(?:\s+(\S+))?`)
	fileToken  = regexp.MustCompile(`[\w./-]*\w\.\w{1,5}\b`)
	bidRoleTag = regexp.MustCompile(`^\s*([A-Za-z]+)\s+'([^'\n]{0,80})'`)
)

// NewReferent extracts the verb and targets of the reference action; the
// snapshot's messages give the label of a clicked element (the
// accessibility tree line "[12] button 'Save'") and the file an edit
// changes (SWE-agent's "[File: path (N lines total)]").
func NewReferent(s Snapshot, ref Action) Referent {
	var r Referent
	add := func(t string) {
		t = strings.ToLower(strings.TrimSpace(t))
		if len(t) >= 1 && !slices.Contains(r.Targets, t) {
			r.Targets = append(r.Targets, t)
		}
	}
	switch ref.Kind {
	case ActionText:
		text := strings.TrimSpace(ref.Text)
		if m := callExpr.FindStringSubmatch(text); m != nil {
			fn := strings.ToLower(m[1][strings.LastIndexByte(m[1], '.')+1:])
			r.Function = fn
			for i, lm := range litExpr.FindAllStringSubmatch(m[2], -1) {
				switch {
				case lm[3] != "":
					if n := strings.TrimLeft(lm[3], "-"); len(n) >= 2 && fn != "noop" && fn != "wait" && fn != "sleep" {
						add(n)
					}
				default:
					v := lm[1] + lm[2]
					add(v)
					if i == 0 && slices.Contains(bidFunctions, fn) {
						if label := elementLabel(s, v); label != "" {
							add(label)
						}
					}
					if strings.HasPrefix(v, "http") {
						if q := strings.IndexAny(v, "?#"); q > 0 {
							add(v[:q])
						}
					}
				}
			}
		} else {
			w := strings.ToLower(strings.Fields(text)[0])
			if w == "wait" || w == "done" || w == "fail" {
				r.Function = w
			}
		}
	case ActionCalls:
		c := ref.Calls[0]
		r.Function = strings.ToLower(c.Name)
		args, _ := c.Arguments.(map[string]any)
		program := ""
		for _, k := range slices.Sorted(maps.Keys(args)) {
			switch x := args[k].(type) {
			case jsonNumber:
				if k == "start_line" || k == "end_line" || k == "line_number" || k == "line" {
					add(string(x))
				}
			case string:
				if k == "command" || k == "cmd" {
					first := strings.SplitN(strings.TrimSpace(x), "\n", 2)[0]
					if f := strings.Fields(first); len(f) > 0 {
						program = path.Base(f[0])
						for _, w := range f[1:] {
							if strings.ContainsAny(w, "/.") && len(w) > 1 {
								add(strings.Trim(w, `'"`))
							}
						}
					}
					if m := editBash.FindStringSubmatch(first); m != nil {
						r.Function = "edit"
						add(m[1])
						add(m[2])
						if m[3] != "" {
							add(m[3])
							add(path.Base(m[3]))
						}
						continue
					}
					if len(first) <= 80 {
						add(first)
					}
					for _, f := range fileToken.FindAllString(first, -1) {
						add(f)
						add(path.Base(f))
					}
				} else if k != "replacement_text" && len(x) <= 80 {
					add(x)
				}
			}
		}
		if r.Function != "edit" && program != "" {
			r.Verbs = append(r.Verbs, commandVerbs[program]...)
		}
		if r.Function == "edit" {
			if f := lastFileShown(s); f != "" {
				add(f)
				add(path.Base(f))
			}
		}
	}
	verbs, ok := actionVerbs[r.Function]
	if !ok && r.Function != "" {
		verbs = append([]string{r.Function}, actionVerbs["_default"]...)
	}
	r.Verbs = append(r.Verbs, verbs...)
	return r
}

// elementLabel finds the accessibility-tree line of element bid in the
// snapshot's last user message that has one, and returns its name.
func elementLabel(s Snapshot, bid string) string {
	needle := "[" + bid + "]"
	for i := len(s.Input) - 1; i >= 0; i-- {
		if s.Input[i].Role != "user" {
			continue
		}
		line, ok := lineAfter(s.Input[i], needle, false)
		if !ok {
			continue
		}
		if m := bidRoleTag.FindStringSubmatch(line); m != nil {
			if name := strings.TrimSpace(m[2]); len(name) >= 3 {
				return name
			}
		}
		return ""
	}
	return ""
}

// lastFileShown is the file SWE-agent last showed in the snapshot.
func lastFileShown(s Snapshot) string {
	const needle = "[File: "
	for i := len(s.Input) - 1; i >= 0; i-- {
		if s.Input[i].Role == "assistant" || s.Input[i].Role == "system" {
			continue
		}
		if line, ok := lineAfter(s.Input[i], needle, true); ok {
			if f := strings.Fields(line); len(f) > 0 {
				return strings.TrimRight(f[0], "]")
			}
		}
	}
	return ""
}

// maxLineAfter bounds what lineAfter returns.
const maxLineAfter = 300

// lineAfter returns the text that follows the first (or last) occurrence
// of needle
// (ASCII, without characters JSON escapes) in the message's text, up to
// the end of its line. It finds the needle in the raw JSON content and
// decodes only that line, so the large observation texts of a snapshot
// are not decoded as a whole; it falls back to decoding the whole text
// when the raw bytes do not allow that.
func lineAfter(m Message, needle string, last bool) (string, bool) {
	raw := m.Content
	j := bytes.Index(raw, []byte(needle))
	if last {
		j = bytes.LastIndex(raw, []byte(needle))
	}
	if j < 0 {
		return "", false
	}
	seg := raw[j+len(needle) : min(len(raw), j+len(needle)+maxLineAfter)]
	// The line ends at an escaped line break or at the end of the string.
	for k := 0; k < len(seg); k++ {
		if seg[k] == '"' {
			seg = seg[:k]
			break
		}
		if seg[k] == '\\' {
			if k+1 < len(seg) && (seg[k+1] == 'n' || seg[k+1] == 'r') {
				seg = seg[:k]
				break
			}
			k++
		}
	}
	if n := len(seg); n > 0 && seg[n-1] == '\\' && (n < 2 || seg[n-2] != '\\') {
		seg = seg[:n-1]
	}
	if line, err := jsonString(append(append([]byte{'"'}, seg...), '"')); err == nil {
		return line, true
	}
	text := m.Text()
	k := strings.Index(text, needle)
	if last {
		k = strings.LastIndex(text, needle)
	}
	if k < 0 {
		return "", false
	}
	line := text[k+len(needle):]
	if e := strings.IndexAny(line, "\r\n"); e >= 0 {
		line = line[:e]
	}
	return line, true
}

type compiledClaim struct {
	Claim
	re *regexp.Regexp
}

var (
	compiledClaims = func() []compiledClaim {
		out := make([]compiledClaim, len(claims))
		for i, c := range claims {
			out[i] = compiledClaim{c, regexp.MustCompile(c.Expr)}
		}
		return out
	}()
	selfReferenceRe = func() *regexp.Regexp {
		nouns := strings.Join(actionNouns, "|")
		parts := make([]string, len(selfReference))
		for i, p := range selfReference {
			parts[i] = strings.ReplaceAll(p, "%s", nouns)
		}
		return regexp.MustCompile(strings.Join(parts, "|"))
	}()
	anaphoraRe = regexp.MustCompile(anaphora)
	outcomeRe  = regexp.MustCompile(`\b(?:` + strings.Join(outcomeNouns, "|") + `)\b`)
	// clauseSplit separates the clauses of a unit that a claim cannot
	// reach across: "again, the goal asks for X, so I will open Y".
	clauseSplit = regexp.MustCompile(`,?\s+(?:` + strings.Join(clauseSplitters, "|") + `)\b(?:\s+(?:far|that)\b)?|\s+-+\s+`)
)

// unit is a sentence or semicolon-separated part of the thinking, cut into
// clauses.
type unit struct {
	start, end int
	clauses    []span
}

// units cuts text into sentences (at . ! ? ; and line breaks followed by
// a space or the end) and those into clauses.
func units(text string) []unit {
	var out []unit
	start := 0
	flush := func(end int) {
		if strings.TrimSpace(text[start:end]) == "" {
			start = end
			return
		}
		u := unit{start: start, end: end}
		cs := start
		for _, loc := range clauseSplit.FindAllStringIndex(text[start:end], -1) {
			// "so far" and "so that" are no clause break.
			if m := text[start+loc[0] : start+loc[1]]; strings.HasSuffix(m, " far") || strings.HasSuffix(m, " that") {
				continue
			}
			u.clauses = append(u.clauses, span{cs, start + loc[0]})
			cs = start + loc[0]
		}
		u.clauses = append(u.clauses, span{cs, end})
		out = append(out, u)
		start = end
	}
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '\n', ';':
			flush(i + 1)
		case '.', '!', '?':
			if i+1 == len(text) || isSpaceByte(text[i+1]) || text[i+1] == '"' || text[i+1] == '\'' {
				flush(i + 1)
			}
		}
	}
	if start < len(text) {
		flush(len(text))
	}
	return out
}

// refKind says how a clause names the repeated action.
type refKind int

const (
	refNone    refKind = iota
	refOutcome         // an outcome noun: "the page", "the output"
	refAnaphor         // "it", "doing so", with the action named just before
	refDirect          // the verb, a target, or the agent's own acting
)

// reference is how one clause refers to the repeated action.
type reference struct {
	kind refKind
	how  string // for the reason: `verb "clicking"`, `target "12"`
}

// findReference looks for the repeated action in text[c.start:c.end].
func (r Referent) findReference(text string, c span, antecedent bool) reference {
	s := text[c.start:c.end]
	for _, t := range r.Targets {
		if containsWord(s, t) {
			return reference{refDirect, fmt.Sprintf("target %q", clip(t, 40))}
		}
	}
	for _, v := range r.Verbs {
		if containsWord(s, v) {
			return reference{refDirect, fmt.Sprintf("verb %q", v)}
		}
	}
	if loc := selfReferenceRe.FindStringIndex(s); loc != nil {
		return reference{refDirect, fmt.Sprintf("own action %q", clip(strings.TrimSpace(s[loc[0]:loc[1]]), 40))}
	}
	if antecedent {
		if loc := anaphoraRe.FindStringIndex(s); loc != nil {
			return reference{refAnaphor, fmt.Sprintf("%q pointing at it", strings.TrimRight(strings.TrimSpace(s[loc[0]:loc[1]]), ".,;:!? "))}
		}
	}
	if loc := outcomeRe.FindStringIndex(s); loc != nil {
		return reference{refOutcome, fmt.Sprintf("its outcome %q", s[loc[0]:loc[1]])}
	}
	return reference{}
}

// containsWord reports whether w occurs in s with no word character on
// either side; spaces in w match any run of spaces, hyphens or
// underscores.
func containsWord(s, w string) bool {
	if w == "" {
		return false
	}
	if strings.ContainsAny(w, " ") {
		for _, sep := range []string{" ", "-", "_"} {
			if containsWordExact(s, strings.ReplaceAll(w, " ", sep)) {
				return true
			}
		}
		return false
	}
	return containsWordExact(s, w)
}

func containsWordExact(s, w string) bool {
	for from := 0; ; {
		i := strings.Index(s[from:], w)
		if i < 0 {
			return false
		}
		i += from
		j := i + len(w)
		before := i == 0 || !isASCIIWord(s[i-1]) || !isASCIIWord(w[0])
		after := j == len(s) || !isASCIIWord(s[j]) || !isASCIIWord(w[len(w)-1])
		if before && after {
			return true
		}
		from = i + 1
	}
}

// JudgeAwareness decides whether the thinking is aware of the repetition:
// whether it says that the agent's own earlier action — named by its verb,
// its target, as the agent's own acting ("my attempts", "I have tried",
// "the same click"), or by "it"/"this"/"doing so" right after it is named
// — was repeated or had no effect. The awareness keywords and patterns
// of DetectAwareness and the claims of keywords.go count only in a clause
// that refers to the action that way; a claim that the page, the output
// or the result is unchanged refers to the action's effect. Cues about
// something else (the page content, the task, another person), negated or
// hypothetical are set aside with the reason. Alternative-seeking cues
// ("a different approach") never decide alone: they are listed when the
// thinking is aware for another reason.
func JudgeAwareness(thinking string, r Referent) Awareness {
	text := NormalizeThinking(thinking)
	if strings.TrimSpace(text) == "" {
		return Awareness{}
	}
	lex := DetectAwareness(thinking)
	found := slices.Clone(lex.Cues)
	for _, c := range compiledClaims {
		if !containsAny(text, c.Needs) {
			continue
		}
		for _, loc := range c.re.FindAllStringIndex(text, -1) {
			found = append(found, Cue{Kind: CueClaim, Name: c.Name, Group: claimGroup(c.Kind), Strength: Strong,
				Text: text[loc[0]:loc[1]], Start: loc[0], End: loc[1]})
		}
	}
	if len(found) == 0 {
		return lex
	}
	slices.SortStableFunc(found, func(a, b Cue) int { return a.Start - b.Start })

	us := units(text)
	quotes := quotedSpans(text)
	aw := Awareness{SetAside: lex.SetAside}
	var alternatives []Cue
	direct := -10 // index of the last unit with a direct reference
	for ui, u := range us {
		unitDirect := false
		for _, c := range u.clauses {
			antecedent := unitDirect || direct >= ui-2
			var ref reference
			looked := false
			lookup := func() {
				if !looked {
					looked = true
					ref = r.findReference(text, c, antecedent)
					if ref.kind == refDirect {
						unitDirect = true
					}
				}
			}
			for _, cue := range found {
				if cue.Start < c.start || cue.Start >= c.end {
					continue
				}
				lookup()
				if cue.Kind == CueClaim {
					if why := claimSetAside(text, cue, quotes, lex); why == "duplicate" {
						continue
					} else if why != "" {
						aw.SetAside = append(aw.SetAside, SetAside{Cue: cue, Why: why})
						continue
					}
				}
				if cue.Group == GroupAlternative {
					alternatives = append(alternatives, cue)
					continue
				}
				kind := cueClaimKind(cue)
				switch {
				case ref.kind == refDirect || ref.kind == refAnaphor:
				case kind == ClaimUnchanged && (ref.kind == refOutcome || unitDirect):
				case kind == ClaimNoEffect && unitDirect:
				default:
					aw.SetAside = append(aw.SetAside, SetAside{Cue: cue, Why: "not about the repeated action (the clause names neither it nor its outcome)"})
					continue
				}
				if ref.kind != refDirect {
					if unitDirect && ref.kind == refNone {
						ref.how = "the action named earlier in the sentence"
					}
				}
				if !slices.Contains(aw.About, ref.how) && ref.how != "" {
					aw.About = append(aw.About, ref.how)
				}
				aw.Cues = append(aw.Cues, cue)
			}
		}
		// A unit without cues matters only as the antecedent of "it" in
		// the next two units: look for its reference only then.
		if !unitDirect && ui+1 < len(us) && unitHasCue(found, us[ui+1].start, us[min(ui+2, len(us)-1)].end) {
			for _, c := range u.clauses {
				if r.findReference(text, c, false).kind == refDirect {
					unitDirect = true
					break
				}
			}
		}
		if unitDirect {
			direct = ui
		}
	}
	if len(aw.Cues) > 0 {
		aw.Cues = append(aw.Cues, alternatives...)
		slices.SortStableFunc(aw.Cues, func(a, b Cue) int { return a.Start - b.Start })
	} else {
		for _, c := range alternatives {
			aw.SetAside = append(aw.SetAside, SetAside{Cue: c, Why: "seeks an alternative without saying the repeated action failed or repeated"})
		}
	}
	slices.SortStableFunc(aw.SetAside, func(a, b SetAside) int { return a.Start - b.Start })
	return aw
}

// cueClaimKind is what a cue claims: a claim's kind, ClaimRepeated for
// keywords and patterns of the repetition and previous-attempt groups,
// ClaimNoEffect for those of the failure group.
func cueClaimKind(c Cue) ClaimKind {
	if c.Kind == CueClaim {
		for _, cl := range claims {
			if cl.Name == c.Name {
				return cl.Kind
			}
		}
	}
	if c.Group == GroupFailure {
		return ClaimNoEffect
	}
	return ClaimRepeated
}

// unitHasCue reports whether a cue starts in [start, end).
func unitHasCue(found []Cue, start, end int) bool {
	for _, c := range found {
		if c.Start >= start && c.Start < end {
			return true
		}
	}
	return false
}

func claimGroup(k ClaimKind) Group {
	switch k {
	case ClaimRepeated:
		return GroupRepetition
	case ClaimUnchanged:
		return GroupFailure
	}
	return GroupFailure
}

// claimSetAside applies the quote, negation and hypothesis checks to a
// claim; a claim overlapping a keyword or pattern that DetectAwareness set
// aside (in another sense, say) shares its fate, and one overlapping a
// counted keyword or pattern is left to it.
func claimSetAside(text string, c Cue, quotes []span, lex Awareness) string {
	for _, s := range lex.SetAside {
		if s.Start < c.End && c.Start < s.End {
			return s.Why
		}
	}
	for _, k := range lex.Cues {
		if k.Start <= c.Start && c.End <= k.End {
			return "duplicate"
		}
	}
	if q, ok := spanAround(quotes, c.Start, c.End); ok {
		return "inside quoted text " + clip(text[q.start:q.end], 50)
	}
	before := clauseWordsBefore(text, c.Start)
	if w := hypothesisIn(before); w != "" {
		return fmt.Sprintf("hypothetical (%q)", w)
	}
	negatable := false
	for _, cl := range claims {
		if cl.Name == c.Name {
			negatable = cl.Negatable
		}
	}
	if negatable {
		if w := negationWithin(before, claimNegationWindow); w != "" {
			return fmt.Sprintf("negated by %q", w)
		}
	}
	return ""
}

// String describes the referent for reasons and tests.
func (r Referent) String() string {
	return fmt.Sprintf("%s verbs=%s targets=%s", r.Function, strconv.Quote(strings.Join(r.Verbs, "|")), strconv.Quote(strings.Join(r.Targets, "|")))
}
