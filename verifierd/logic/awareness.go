package logic

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// CueKind says whether a cue is a keyword or a pattern.
type CueKind string

// Cue kinds.
const (
	CueKeyword CueKind = "keyword"
	CuePattern CueKind = "pattern"
)

// Cue is one awareness keyword or pattern found in a thinking text.
type Cue struct {
	Kind     CueKind
	Name     string // the keyword phrase, or the pattern's name
	Group    Group
	Strength Strength
	Text     string // the matched text, lower-cased
	Start    int    // byte offsets of Text in the normalised thinking
	End      int
}

// ID names the cue in matched_keywords: the keyword phrase, or
// "pattern:" and the pattern's name.
func (c Cue) ID() string {
	switch c.Kind {
	case CuePattern:
		return "pattern:" + c.Name
	case CueClaim:
		return "claim:" + c.Name
	}
	return c.Name
}

// Label describes the cue for thinking_eval_reason.
func (c Cue) Label() string {
	switch c.Kind {
	case CuePattern:
		return fmt.Sprintf("pattern %s (%q)", c.Name, clip(c.Text, 70))
	case CueClaim:
		return fmt.Sprintf("claim %s (%q)", c.Name, clip(c.Text, 70))
	}
	return fmt.Sprintf("%q", c.Name)
}

// SetAside is a cue that was found but does not count, and why.
type SetAside struct {
	Cue
	Why string
}

// Awareness is what DetectAwareness found in a thinking text.
type Awareness struct {
	Cues     []Cue      // the cues that count, in text order
	SetAside []SetAside // cues found but not counted, in text order
	// About says how the counted cues refer to the repeated action (set
	// by JudgeAwareness): `verb "clicking"`, `target "12"`, ….
	About []string
}

// Aware reports whether any cue counts.
func (a Awareness) Aware() bool { return len(a.Cues) > 0 }

// Strong reports whether a strong cue counts.
func (a Awareness) Strong() bool {
	for _, c := range a.Cues {
		if c.Strength == Strong {
			return true
		}
	}
	return false
}

// IDs lists the IDs of the counted cues, each once, in text order.
func (a Awareness) IDs() []string {
	var ids []string
	for _, c := range a.Cues {
		if id := c.ID(); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

type compiledKeyword struct {
	Keyword
	words []string // the phrase's words, apostrophes removed
}

type compiledPattern struct {
	Pattern
	re *regexp.Regexp
}

type compiledDistractor struct {
	Distractor
	re *regexp.Regexp
}

var (
	compiledKeywords    = compileKeywords(keywords)
	compiledPatterns    = compilePatterns(patterns)
	compiledDistractors = compileDistractors(distractors)
	negationSet         = setOf(negationCues)
	stopperSet          = setOf(negationStoppers)
	breakerSet          = setOf(clauseBreakers)
)

func setOf(words []string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// compileKeywords indexes the keywords by their first word.
func compileKeywords(ks []Keyword) map[string][]compiledKeyword {
	idx := map[string][]compiledKeyword{}
	for _, k := range ks {
		var words []string
		for _, w := range strings.FieldsFunc(k.Phrase, func(r rune) bool { return r == ' ' || r == '-' }) {
			words = append(words, strings.ReplaceAll(w, "'", ""))
		}
		idx[words[0]] = append(idx[words[0]], compiledKeyword{Keyword: k, words: words})
	}
	return idx
}

// token is a word of the normalised thinking: a run of ASCII letters,
// digits, '_' and inner apostrophes (the characters of a regular
// expression's \b), with the apostrophes removed.
type token struct {
	word       string
	start, end int
}

func tokenize(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		if !isASCIIWord(s[i]) {
			i++
			continue
		}
		j := i
		apostrophes := false
		for j < len(s) && (isASCIIWord(s[j]) || s[j] == '\'' && j+1 < len(s) && isASCIIWord(s[j+1])) {
			apostrophes = apostrophes || s[j] == '\''
			j++
		}
		w := s[i:j]
		if apostrophes {
			w = strings.ReplaceAll(w, "'", "")
		}
		out = append(out, token{w, i, j})
		i = j
	}
	return out
}

func isASCIIWord(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// onlySeparators reports whether s is a run of whitespace and hyphens.
func onlySeparators(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\f', '\v', '-':
		default:
			return false
		}
	}
	return true
}

// matchKeywords finds the keyword phrases in the normalised text: their
// words in sequence, separated by whitespace or hyphens only.
func matchKeywords(text string) []Cue {
	toks := tokenize(text)
	var found []Cue
	for i, t := range toks {
		for _, k := range compiledKeywords[t.word] {
			if i+len(k.words) > len(toks) {
				continue
			}
			ok := true
			for j := 1; j < len(k.words) && ok; j++ {
				ok = toks[i+j].word == k.words[j] && onlySeparators(text[toks[i+j-1].end:toks[i+j].start])
			}
			if ok {
				end := toks[i+len(k.words)-1].end
				found = append(found, Cue{Kind: CueKeyword, Name: k.Phrase, Group: k.Group, Strength: k.Strength,
					Text: text[t.start:end], Start: t.start, End: end})
			}
		}
	}
	return found
}

func compilePatterns(ps []Pattern) []compiledPattern {
	out := make([]compiledPattern, len(ps))
	for i, p := range ps {
		out[i] = compiledPattern{Pattern: p, re: regexp.MustCompile(p.Expr)}
	}
	return out
}

func compileDistractors(ds []Distractor) []compiledDistractor {
	out := make([]compiledDistractor, len(ds))
	for i, d := range ds {
		out[i] = compiledDistractor{Distractor: d, re: regexp.MustCompile(d.Expr)}
	}
	return out
}

// foldQuotes folds typographic apostrophes and quotes (and non-breaking
// spaces) to ASCII.
var foldQuotes = strings.NewReplacer(
	"\u2019", "'", "\u2018", "'", "\u201b", "'", "\u2032", "'",
	"\u201c", `"`, "\u201d", `"`, "\u201e", `"`, "\u2033", `"`, "\u00ab", `"`, "\u00bb", `"`,
	"\u00a0", " ",
)

// NormalizeThinking is the text awareness detection works on: typographic
// apostrophes and quotes folded to ASCII, lower case.
func NormalizeThinking(s string) string { return strings.ToLower(foldQuotes.Replace(s)) }

type span struct{ start, end int }

func (s span) contains(start, end int) bool { return s.start <= start && end <= s.end }

// DetectAwareness finds the awareness keywords and patterns of keywords.go
// in a thinking text and sorts them into cues that count and cues set
// aside (inside quotes, in another sense, negated, hypothetical).
func DetectAwareness(thinking string) Awareness {
	text := NormalizeThinking(thinking)
	if strings.TrimSpace(text) == "" {
		return Awareness{}
	}
	found := dropNestedKeywords(matchKeywords(text))
	for _, p := range compiledPatterns {
		if !containsAny(text, p.Needs) {
			continue
		}
		for _, loc := range p.re.FindAllStringIndex(text, -1) {
			found = append(found, Cue{Kind: CuePattern, Name: p.Name, Group: p.Group, Strength: p.Strength,
				Text: text[loc[0]:loc[1]], Start: loc[0], End: loc[1]})
		}
	}
	if len(found) == 0 {
		return Awareness{}
	}
	slices.SortStableFunc(found, func(a, b Cue) int { return a.Start - b.Start })

	quotes := quotedSpans(text)
	distractorSpans := map[int][]span{} // computed on first use, by distractor index
	var aw Awareness
	for _, c := range found {
		if why := setAsideReason(text, c, quotes, distractorSpans); why != "" {
			aw.SetAside = append(aw.SetAside, SetAside{Cue: c, Why: why})
			continue
		}
		aw.Cues = append(aw.Cues, c)
	}
	return aw
}

// containsAny reports whether s contains one of the literals, or whether
// there are none.
func containsAny(s string, literals []string) bool {
	if len(literals) == 0 {
		return true
	}
	for _, l := range literals {
		if strings.Contains(s, l) {
			return true
		}
	}
	return false
}

// dropNestedKeywords removes keyword matches lying inside a longer keyword
// match ("alternative" inside "alternative approach"). cs is in text order
// of the keywords' first words.
func dropNestedKeywords(cs []Cue) []Cue {
	sorted := slices.Clone(cs)
	slices.SortStableFunc(sorted, func(a, b Cue) int {
		if a.Start != b.Start {
			return a.Start - b.Start
		}
		return b.End - a.End
	})
	out := sorted[:0]
	maxEnd, maxStart := -1, -1 // the cue reaching furthest so far
	for _, c := range sorted {
		nested := maxEnd > c.End || maxEnd == c.End && maxStart < c.Start
		if c.End > maxEnd {
			maxEnd, maxStart = c.End, c.Start
		}
		if !nested {
			out = append(out, c)
		}
	}
	return out
}

// spanAround returns the span of sorted, non-overlapping spans that
// contains [start, end), if any.
func spanAround(spans []span, start, end int) (span, bool) {
	i, _ := slices.BinarySearchFunc(spans, start, func(s span, t int) int { return s.start - t })
	// spans[i-1] is the last span starting before start; spans[i] may start at start.
	for _, j := range []int{i, i - 1} {
		if j >= 0 && j < len(spans) && spans[j].contains(start, end) {
			return spans[j], true
		}
	}
	return span{}, false
}

func setAsideReason(text string, c Cue, quotes []span, cache map[int][]span) string {
	if q, ok := spanAround(quotes, c.Start, c.End); ok {
		return "inside quoted text " + clip(text[q.start:q.end], 50)
	}
	if c.Kind == CueKeyword {
		for i, d := range compiledDistractors {
			if !slices.Contains(d.Guards, c.Name) {
				continue
			}
			spans, ok := cache[i]
			if !ok {
				for _, loc := range d.re.FindAllStringIndex(text, -1) {
					spans = append(spans, span{loc[0], loc[1]})
				}
				cache[i] = spans
			}
			if s, ok := spanAround(spans, c.Start, c.End); ok {
				return fmt.Sprintf("another sense: %s (%q)", d.Name, clip(text[s.start:s.end], 50))
			}
		}
	}
	before := clauseWordsBefore(text, c.Start)
	if w := negationIn(before); w != "" {
		return fmt.Sprintf("negated by %q", w)
	}
	if c.Group != GroupAlternative {
		if w := hypothesisIn(before); w != "" {
			return fmt.Sprintf("hypothetical (%q)", w)
		}
	}
	return ""
}

// lookBehind bounds, in bytes, the text clauseWordsBefore looks at: more
// than the words of the longest window.
const lookBehind = 160

// clauseWordsBefore returns the words of the clause before offset i,
// nearest last, cut at punctuation and at clause-breaking conjunctions.
func clauseWordsBefore(text string, i int) []string {
	seg := text[max(0, i-lookBehind):i]
	if j := strings.LastIndexAny(seg, ".,;:!?()[]{}\n"); j >= 0 {
		seg = seg[j+1:]
	}
	words := strings.FieldsFunc(seg, func(r rune) bool {
		return r != '\'' && !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	for k := len(words) - 1; k >= 0; k-- {
		if breakerSet[strings.Trim(words[k], "'")] {
			return words[k+1:]
		}
	}
	return words
}

// negationIn returns the negation among the last negationWindow words, if
// no negation stopper comes between it and the cue.
func negationIn(words []string) string { return negationWithin(words, negationWindow) }

// negationWithin is negationIn with another window.
func negationWithin(words []string, window int) string {
	for k, n := len(words)-1, 0; k >= 0 && n < window; k, n = k-1, n+1 {
		w := strings.Trim(words[k], "'")
		if stopperSet[w] {
			return ""
		}
		if negationSet[w] || strings.HasSuffix(w, "n't") {
			return w
		}
	}
	return ""
}

// hypothesisIn returns the hypothetical cue among the last
// hypotheticalWindow words.
func hypothesisIn(words []string) string {
	for k, n := len(words)-1, 0; k >= 0 && n < hypotheticalWindow; k, n = k-1, n+1 {
		w := strings.Trim(words[k], "'")
		for _, h := range hypotheticalCues {
			hw := strings.Fields(h)
			if len(hw) == 1 && w == h {
				return h
			}
			if len(hw) == 2 && w == hw[1] && k > 0 && strings.Trim(words[k-1], "'") == hw[0] {
				return h
			}
		}
	}
	return ""
}

// Limits of quoted spans: a longer "quote" is more likely an unbalanced
// quote mark than quoted content.
const (
	maxQuoteLen    = 160
	maxBacktickLen = 240
)

// quotedSpans finds quoted content: ``` blocks, `code`, "text" and 'text'
// (a single quote opens only at a word start and closes only at a word
// end, so apostrophes in "didn't" and "users'" are not quotes). Quotes do
// not span lines, except ``` blocks.
func quotedSpans(s string) []span {
	var out []span
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "```") {
			end := len(s)
			if j := strings.Index(s[i+3:], "```"); j >= 0 {
				end = i + 3 + j + 3
			}
			out = append(out, span{i, end})
			i = end
			continue
		}
		switch c := s[i]; c {
		case '`', '"':
			limit := maxQuoteLen
			if c == '`' {
				limit = maxBacktickLen
			}
			if j := closeOnLine(s, i+1, c, limit); j > 0 {
				out = append(out, span{i, j + 1})
				i = j + 1
				continue
			}
		case '\'':
			if (i == 0 || !isWordByte(s[i-1])) && i+1 < len(s) && !isSpaceByte(s[i+1]) {
				if j := closeSingleQuote(s, i+1); j > 0 {
					out = append(out, span{i, j + 1})
					i = j + 1
					continue
				}
			}
		}
		i++
	}
	return out
}

func closeOnLine(s string, from int, q byte, limit int) int {
	for j := from; j < len(s) && j-from <= limit; j++ {
		switch s[j] {
		case q:
			return j
		case '\n':
			return -1
		}
	}
	return -1
}

func closeSingleQuote(s string, from int) int {
	for j := from; j < len(s) && j-from <= maxQuoteLen; j++ {
		switch s[j] {
		case '\n':
			return -1
		case '\'':
			if j > from && !isSpaceByte(s[j-1]) && (j+1 == len(s) || !isWordByte(s[j+1])) {
				return j
			}
		}
	}
	return -1
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 0x80 || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isSpaceByte(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
