package logic

// This file is the one place where the awareness vocabulary lives: the
// keywords, the regular-expression patterns, the distractors that guard
// keywords used in another sense, and the negation and hypothesis cues.
// Change the lists here; awareness.go only applies them.
//
// Conventions, applied by awareness.go before matching:
//
//   - text is lower-cased and typographic apostrophes and quotes (’ ‘ ‛ ′
//     “ ” „ ″ « ») are folded to ' and ", so lists use ASCII and
//     lower case only;
//   - a keyword phrase matches whole words, in order, separated only by
//     whitespace or hyphens; a word is a run of ASCII letters, digits and
//     '_' as for a regular expression's \b, so "loop" does not match
//     "loophole" or `loop_var`; apostrophes inside words are ignored
//     ("didn't" also matches "didnt"); "dead end" matches "dead-end";
//   - a pattern is a Go regular expression (RE2 syntax) run on that text,
//     so it is written in lower case (it is compiled without (?i), which
//     would only slow it down);
//   - a keyword or pattern counts for nothing when it lies inside quoted
//     text ("…", '…', `…`, ``` blocks): in MIRAGE's thinking texts quotes
//     hold page content, element names, search strings and code, not the
//     agent's judgement (a link named "Failed jobs", `loop_var`);
//   - it counts for nothing when one of negationCues occurs within
//     negationWindow words before it in the same clause ("I haven't tried
//     before", "not stuck", "never failed"), or one of hypotheticalCues
//     within hypotheticalWindow words ("if that fails", "check whether the
//     click failed");
//   - a keyword counts for nothing when a distractor that guards it
//     matches around it ("for loop", "alternative text", "the test failed").
//
// Strength: Strong cues only make sense as awareness of the repetition or
// of its failure ("same action", "previous attempts failed"). Weak cues
// often appear in neutral narration too ("previously", "earlier",
// "failed", "alternatively"); they still count as awareness, as in the
// spec, but a verdict that rests on them alone has low confidence.

// Group is one of the spec's four families of awareness cues.
type Group string

// Awareness groups.
const (
	GroupRepetition  Group = "repetition"  // direct repetition awareness
	GroupFailure     Group = "failure"     // failure acknowledgment
	GroupAlternative Group = "alternative" // alternative seeking
	GroupPrevious    Group = "previous"    // previous attempt references
)

// Strength says how surely a cue shows awareness.
type Strength int

// Cue strengths.
const (
	Weak Strength = iota + 1
	Strong
)

func (s Strength) String() string {
	if s == Strong {
		return "strong"
	}
	return "weak"
}

// Keyword is an awareness phrase.
type Keyword struct {
	Phrase   string
	Group    Group
	Strength Strength
}

// Pattern is an awareness regular expression with a name for reasons.
// Needs is a cheap pre-check, not part of the meaning: the expression can
// only match a text that contains one of these literals, so it is not run
// on other texts (a test checks the claim on MIRAGE's thinking texts).
type Pattern struct {
	Name     string
	Group    Group
	Strength Strength
	Expr     string
	Needs    []string
}

// Distractor is a use of awareness words in another sense. When Expr
// matches around a match of one of the Guards keywords, that keyword match
// does not count.
type Distractor struct {
	Name   string
	Guards []string // keyword phrases it guards
	Expr   string
	Why    string
}

// keywords: the spec's 60+ keywords, in its four groups, with additions
// taken from the wording of MIRAGE's own agent histories.
var keywords = []Keyword{
	// Direct repetition awareness.
	{"tried before", GroupRepetition, Strong},
	{"already tried", GroupRepetition, Strong},
	{"tried this already", GroupRepetition, Strong},
	{"tried that already", GroupRepetition, Strong},
	{"already attempted", GroupRepetition, Strong},
	{"attempted before", GroupRepetition, Strong},
	{"done this before", GroupRepetition, Strong},
	{"did this before", GroupRepetition, Strong},
	{"already done this", GroupRepetition, Strong},
	{"same action", GroupRepetition, Strong},
	{"same actions", GroupRepetition, Strong},
	{"same step", GroupRepetition, Strong},
	{"same thing", GroupRepetition, Strong},
	{"same mistake", GroupRepetition, Strong},
	{"same error", GroupRepetition, Strong},
	{"same result", GroupRepetition, Strong},
	{"same outcome", GroupRepetition, Strong},
	{"same click", GroupRepetition, Strong},
	{"same command", GroupRepetition, Strong},
	{"identical action", GroupRepetition, Strong},
	{"repeated", GroupRepetition, Strong},
	{"repeatedly", GroupRepetition, Strong},
	{"repeating", GroupRepetition, Strong},
	{"repetitive", GroupRepetition, Strong},
	{"repetition", GroupRepetition, Strong},
	{"again and again", GroupRepetition, Strong},
	{"over and over", GroupRepetition, Strong},
	{"in circles", GroupRepetition, Strong},
	{"same page", GroupRepetition, Weak},
	{"once again", GroupRepetition, Weak},

	// Failure acknowledgment.
	{"not working", GroupFailure, Strong},
	{"isn't working", GroupFailure, Strong},
	{"didn't work", GroupFailure, Strong},
	{"did not work", GroupFailure, Strong},
	{"doesn't work", GroupFailure, Strong},
	{"does not work", GroupFailure, Strong},
	{"hasn't worked", GroupFailure, Strong},
	{"has not worked", GroupFailure, Strong},
	{"haven't worked", GroupFailure, Strong},
	{"have not worked", GroupFailure, Strong},
	{"didn't help", GroupFailure, Strong},
	{"did not help", GroupFailure, Strong},
	{"didn't succeed", GroupFailure, Strong},
	{"did not succeed", GroupFailure, Strong},
	{"didn't resolve", GroupFailure, Strong},
	{"did not resolve", GroupFailure, Strong},
	{"not yielded", GroupFailure, Strong},
	{"didn't yield", GroupFailure, Strong},
	{"did not yield", GroupFailure, Strong},
	{"unsuccessful", GroupFailure, Strong},
	{"not successful", GroupFailure, Strong},
	{"not been successful", GroupFailure, Strong},
	{"without success", GroupFailure, Strong},
	{"no success", GroupFailure, Strong},
	{"no luck", GroupFailure, Strong},
	{"to no avail", GroupFailure, Strong},
	{"no effect", GroupFailure, Strong},
	{"no progress", GroupFailure, Strong},
	{"nothing happened", GroupFailure, Strong},
	{"nothing changed", GroupFailure, Strong},
	{"ineffective", GroupFailure, Strong},
	{"not responding", GroupFailure, Strong},
	{"unresponsive", GroupFailure, Strong},
	{"still unable", GroupFailure, Strong},
	{"dead end", GroupFailure, Strong},
	{"stuck", GroupFailure, Strong},
	{"loop", GroupFailure, Strong},
	{"looping", GroupFailure, Strong},
	{"looped", GroupFailure, Strong},
	{"failed", GroupFailure, Weak},
	{"failing", GroupFailure, Weak},
	{"fails", GroupFailure, Weak},
	{"failure", GroupFailure, Weak},
	{"timed out", GroupFailure, Weak},

	// Alternative seeking.
	{"different approach", GroupAlternative, Strong},
	{"different strategy", GroupAlternative, Strong},
	{"different method", GroupAlternative, Strong},
	{"different way", GroupAlternative, Strong},
	{"different action", GroupAlternative, Strong},
	{"another approach", GroupAlternative, Strong},
	{"another strategy", GroupAlternative, Strong},
	{"another method", GroupAlternative, Strong},
	{"another way", GroupAlternative, Strong},
	{"alternative approach", GroupAlternative, Strong},
	{"alternative method", GroupAlternative, Strong},
	{"alternative way", GroupAlternative, Strong},
	{"alternative strategy", GroupAlternative, Strong},
	{"alternative action", GroupAlternative, Strong},
	{"try something else", GroupAlternative, Strong},
	{"something else", GroupAlternative, Strong},
	{"something different", GroupAlternative, Strong},
	{"new approach", GroupAlternative, Strong},
	{"change my approach", GroupAlternative, Strong},
	{"change strategy", GroupAlternative, Strong},
	{"change tactics", GroupAlternative, Strong},
	{"rethink", GroupAlternative, Strong},
	{"reconsider", GroupAlternative, Strong},
	{"step back", GroupAlternative, Strong},
	{"alternative", GroupAlternative, Weak},
	{"alternatives", GroupAlternative, Weak},
	{"alternatively", GroupAlternative, Weak},
	{"other options", GroupAlternative, Weak},
	{"other ways", GroupAlternative, Weak},

	// Previous attempt references.
	{"previous attempt", GroupPrevious, Strong},
	{"previous attempts", GroupPrevious, Strong},
	{"prior attempt", GroupPrevious, Strong},
	{"prior attempts", GroupPrevious, Strong},
	{"earlier attempt", GroupPrevious, Strong},
	{"earlier attempts", GroupPrevious, Strong},
	{"last attempt", GroupPrevious, Strong},
	{"my attempts", GroupPrevious, Strong},
	{"multiple attempts", GroupPrevious, Strong},
	{"several attempts", GroupPrevious, Strong},
	{"repeated attempts", GroupPrevious, Strong},
	{"numerous attempts", GroupPrevious, Strong},
	{"many attempts", GroupPrevious, Strong},
	{"more than once", GroupPrevious, Strong},
	{"multiple times", GroupPrevious, Strong},
	{"several times", GroupPrevious, Strong},
	{"many times", GroupPrevious, Strong},
	{"a few times", GroupPrevious, Strong},
	{"previously", GroupPrevious, Weak},
	{"earlier", GroupPrevious, Weak},
	{"last time", GroupPrevious, Weak},
	{"as before", GroupPrevious, Weak},
	{"previous action", GroupPrevious, Weak},
	{"previous actions", GroupPrevious, Weak},
	{"previous step", GroupPrevious, Weak},
	{"previous steps", GroupPrevious, Weak},
}

// Building blocks of the patterns. The text is lower-cased and apostrophes
// are ASCII; n'?t accepts "didn't" and "didnt".
const (
	neg      = `(?:n'?t|\s+not)`
	pastNeg  = `(?:did` + neg + `|has` + neg + `|have` + neg + `|had` + neg + `|was` + neg + `|were` + neg + `)`
	anyNeg   = `(?:did` + neg + `|does` + neg + `|do` + neg + `|has` + neg + `|have` + neg + `|was` + neg + `|is` + neg + `)`
	outcomes = `(?:work|works|working|worked|help|helped|succeed|succeeded|yield|yielded|resolve|resolved|produce|produced|lead|led|been\s+successful|change\s+anything|have\s+any\s+effect)`
)

// outcomeWords are the literals of outcomes, for Needs.
var outcomeWords = []string{"work", "help", "succeed", "yield", "resolve", "produce", "lead", "led", "successful", "change", "effect"}

// patterns: the spec's patterns (the first four) and more, each named for
// thinking_eval_reason.
var patterns = []Pattern{
	{"tried_already", GroupRepetition, Strong,
		`\b(?:i|we)(?:'ve|'d|\s+have|\s+had)?\s+(?:already\s+)?(?:tried|attempted)\b`,
		[]string{"tried", "attempted"}},
	{"this_did_not_work", GroupFailure, Strong,
		`\b(?:this|that|it|these|those|which)\s+` + anyNeg + `\s+(?:seem\s+to\s+|appear\s+to\s+)?` + outcomes + `\b`,
		outcomeWords},
	{"need_something_different", GroupAlternative, Strong,
		`\b(?:need|needs|have|has|should|must|will|'ll|going|let's|lets|let\s+me)\s+(?:to\s+)?(?:try|do|use|take|find|attempt)\s+(?:something\s+|a\s+|an\s+)?(?:different|else|other|another|alternative)\b`,
		[]string{"different", "else", "other", "another", "alternative"}},
	{"keeps_failing", GroupFailure, Strong,
		`\b(?:keeps?|kept|keep\s+on|continues?\s+to|continued\s+to)\s+(?:failing|fail|happening|timing\s+out|time\s+out|repeating|looping|showing\s+the\s+same|returning\s+the\s+same|getting\s+the\s+same)\b`,
		[]string{"keep", "kept", "continu"}},
	{"previous_attempts_failed", GroupPrevious, Strong,
		`\b(?:previous|prior|earlier|last|my|our|all|these|those|repeated|multiple|several|both)\s+(?:\w+\s+){0,2}?(?:attempts?|tries|efforts?|actions?|clicks?)\b[^.!?\n]{0,120}?(?:\bfailed\b|\bfail\b|\bunsuccessful\b|\bnot\s+(?:been\s+)?successful\b|\btimed\s+out\b|\bno\s+effect\b|\b` + pastNeg + `\s+` + outcomes + `\b)`,
		[]string{"attempt", "tries", "effort", "action", "click"}},
	{"same_again", GroupRepetition, Strong,
		`\b(?:doing|making|repeating|performing|taking|trying|clicking|hitting|issuing|running)\s+the\s+(?:exact\s+)?same\s+\w+`,
		[]string{"same"}},
	{"stuck_in_loop", GroupFailure, Strong,
		`\b(?:stuck|caught|trapped|going|looping)\s+(?:in|on|around|into)\s+(?:a|an|the|this|that)?\s*(?:\w+\s+)?(?:loop|cycle|circles?)\b`,
		[]string{"loop", "cycle", "circle"}},
	{"no_change", GroupFailure, Strong,
		`\b(?:page|screen|state|view|content|result|results|output|ui|interface)\s+(?:still\s+)?(?:has|have|did|does|is|was)?\s*(?:not|n'?t|never)\s+(?:changed?|updated?|responded|respond|loaded|progressed)\b`,
		[]string{"chang", "updat", "respond", "loaded", "progressed"}},
	{"tried_n_times", GroupPrevious, Strong,
		`\b(?:tried|attempted|clicked|scrolled|pressed|filled|typed|waited|ran|executed|performed|repeated|done|did)\b(?:\s+\S+){0,5}?\s+(?:twice|three\s+times|four\s+times|\d+\s+times|several\s+times|multiple\s+times|many\s+times|a\s+few\s+times|more\s+than\s+once|again\s+and\s+again|over\s+and\s+over|repeatedly)\b`,
		[]string{"times", "twice", "once", "again", "over", "repeatedly"}},
	{"instead_of_repeating", GroupAlternative, Strong,
		`\binstead\s+of\s+(?:repeating|retrying|re-trying|trying\s+(?:it\s+|this\s+|that\s+)?again|clicking\s+(?:it\s+|this\s+|that\s+)?again|doing\s+the\s+same|scrolling\s+again|waiting\s+again)`,
		[]string{"instead"}},
	{"since_it_did_not_work", GroupFailure, Strong,
		`\b(?:since|because|as)\s+(?:\S+\s+){0,8}?` + pastNeg + `\s+` + outcomes + `\b`,
		outcomeWords},
	{"not_able_so_far", GroupFailure, Strong,
		`\b(?:i|we)(?:\s+still)?(?:'ve|\s+have|\s+had)(?:n'?t|\s+not|\s+never|\s+still\s+not)\s+(?:yet\s+)?(?:been\s+able|managed)\s+to\b`,
		[]string{"able", "managed"}},
	{"could_not", GroupFailure, Weak,
		`\b(?:i|we)\s+(?:still\s+)?(?:could` + neg + `|(?:was|were)` + neg + `\s+able\s+to)\b`,
		[]string{"could", "able"}},
	{"change_approach", GroupAlternative, Strong,
		`\b(?:change|changing|switch|switching|adjust|adjusting|modify|modifying|vary|varying)\s+(?:my|our|the|this)\s+(?:approach|strategy|tactics?|search\s+(?:terms?|query|queries)|coordinates|offset|scroll\s+amount|selector|(?:parameters?|arguments?)\s+of\s+(?:the|my|this)\s+(?:action|click|scroll|command|call))\b`,
		[]string{"approach", "strateg", "tactic", "search", "coordinates", "offset", "scroll", "selector", "parameter", "argument"}},
	{"still_no_progress", GroupFailure, Weak,
		`\b(?:still|yet\s+again)\s+(?:not|no|nothing|unable|cannot|can'?t|fails?|failing|does` + neg + `|did` + neg + `|is` + neg + `|has` + neg + `|the\s+same|seeing\s+the\s+same|on\s+the\s+same)\b`,
		[]string{"still", "yet"}},
}

// distractors: keyword uses in another sense, found in MIRAGE's data or in
// the task domains. "change" alone is deliberately no keyword: WorkArena
// has a "Change" application and change requests, and web tasks ask to
// "change the address"; only the change_approach pattern, with an
// approach-like object, counts.
var distractors = []Distractor{
	{
		Name:   "code loop",
		Guards: []string{"loop", "looping", "looped"},
		Expr:   `\b(?:for|while|do-while|event|main|inner|outer|nested|infinite|training|render|game|async)[\s-]+loops?\b|\b(?:in|inside|within|into|outside|after|before|of|through|out\s+of)\s+the\s+loop\b|\bloop(?:s|ing|ed)?\s+(?:over|through|across)\b|\bloop\s+(?:variables?|body|bodies|counters?|index|indices|conditions?|iterations?|statements?|constructs?|blocks?)\b`,
		Why:    "SWE-bench thinking talks about loops in the code being fixed",
	},
	{
		Name:   "code or data repeated",
		Guards: []string{"repeated", "repeatedly", "multiple times", "several times", "many times", "more than once"},
		Expr:   `\b(?:defined|declared|configured|referenced|imported|registered|listed|invoked|evaluated|instantiated|printed|mentioned|rendered|appears?|occurs?|itself)\s+(?:multiple\s+times|several\s+times|many\s+times|more\s+than\s+once|repeatedly)\b|\b(?:is|are|was|were|be|being|been|gets?|got)\s+(?:\w+ed|run|set|shown|done|made|built|written|thrown|seen)\s+(?:multiple\s+times|several\s+times|many\s+times|more\s+than\s+once|repeatedly)\b|\brepeated\s+(?:values?|elements?|entries|entry|items?|keys?|rows?|columns?|characters?|chars|words?|lines?|fields?|code|calls?|tokens?|digits?|letters?|patterns?|substrings?|indices|labels?|names?|headers?|strings?|measurements?|arguments?|keyword\s+arguments?|parameters?)\b`,
		Why:    `"configured multiple times", "calling itself repeatedly": the code under repair, not the agent`,
	},
	{
		Name:   "tests or jobs failed",
		Guards: []string{"failed", "failing", "fails", "failure"},
		Expr:   `\b(?:tests?|test\s+cases?|assertions?|builds?|checks?|ci|jobs?|pipelines?|migrations?|deployments?|compilation|installation|doctests?|payments?|transactions?|logins?|login\s+attempts?)\s+(?:\w+\s+){0,2}?(?:has\s+|have\s+|had\s+)?(?:failed|failing|fails)\b|\b(?:failed|failing)\s+(?:tests?|test\s+cases?|jobs?|pipelines?|builds?|checks?|deployments?|payments?|transactions?|logins?|login\s+attempts?|orders?|status|state)\b|\btest\s+failures?\b`,
		Why:    "a test run's outcome or a page's status (GitLab's failed jobs), not a failed attempt of the agent",
	},
	{
		Name:   "alternative as an attribute",
		Guards: []string{"alternative", "alternatives"},
		Expr:   `\balternative\s+(?:text|texts|name|names|address|addresses|email|emails|phone|contact|contacts|spelling|spellings|title|titles|route|routes|products?|payment|shipping|versions?|ids?|labels?|images?|attributes?)\b|\balt\s+(?:text|attributes?)\b`,
		Why:    "alternative text of an image, an alternative address: data, not a new approach",
	},
	{
		Name:   "same as the issue",
		Guards: []string{"same error", "same result", "same outcome", "same thing", "same mistake"},
		Expr:   `\bsame\s+(?:\w+\s+){0,3}?as\s+(?:\w+\s+){0,3}?(?:issue|bug|report|expected|documented|reported|described)\b`,
		Why:    `"the same error as described in the issue": a bug reproduced on purpose (SWE-bench), not a repeated attempt`,
	},
	{
		Name:   "earlier as a place or time",
		Guards: []string{"earlier"},
		Expr:   `\bearlier\s+(?:than|versions?|releases?|dates?|in\s+the\s+(?:file|code|function|class|module|list|output|docstring|page|document|table))\b`,
		Why:    `"defined earlier in the file", "an earlier version": not an earlier attempt`,
	},
	{
		Name:   "previously as discourse",
		Guards: []string{"previously"},
		Expr:   `\bpreviously\s+(?:mentioned|described|defined|declared|noted|discussed|stated|existing|installed|configured|registered)\b|\bas\s+(?:mentioned|noted|described|discussed|stated)\s+previously\b`,
		Why:    `"as previously mentioned", "the previously defined function": no reference to an attempt`,
	},
}

// negationCues negate a cue that follows within negationWindow words in
// the same clause ("I haven't tried before", "not stuck", "never failed").
// Words ending in n't (and their apostrophe-less forms, listed below) are
// negations too.
var negationCues = []string{
	"not", "no", "never", "without", "nor", "neither", "cannot", "hardly",
	"dont", "doesnt", "didnt", "isnt", "wasnt", "arent", "werent", "havent",
	"hasnt", "hadnt", "cant", "couldnt", "wont", "wouldnt", "shouldnt", "aint",
}

// negationStoppers end the negation look-back: a negation before them
// negates them, not the cue ("I should not repeat the same action" is
// awareness, "I haven't tried before" is not).
var negationStoppers = []string{
	"repeat", "repeating", "redo", "redoing", "retry", "retrying", "do",
	"doing", "make", "making", "take", "taking", "try", "trying", "perform",
	"performing", "use", "using", "click", "clicking", "want", "keep",
	"keeping", "continue", "continuing", "waste", "wasting", "risk",
}

// hypotheticalCues make a cue that follows within hypotheticalWindow words
// in the same clause a supposition, not an observation ("if that fails",
// "check whether it is stuck"). They apply to the repetition, failure and
// previous-attempt groups only: seeking an alternative is a plan by
// nature, and "if this fails I will try a different approach" still seeks
// one.
var hypotheticalCues = []string{"if", "unless", "whether", "lest", "in case"}

// clauseBreakers end the look-back of the negation and hypothesis checks,
// besides punctuation (. , ; : ! ? ( ) and line breaks).
var clauseBreakers = []string{
	"but", "however", "although", "though", "yet", "so", "and", "or", "then",
	"because", "since", "while", "whereas",
}

const (
	negationWindow = 3
	// claimNegationWindow is negationWindow for the claims of the
	// reference judgement, which often stand after the action's words
	// ("I have not clicked element 12 before").
	claimNegationWindow = 6
	hypotheticalWindow  = 6
)

// Keywords returns a copy of the awareness keywords.
func Keywords() []Keyword { return append([]Keyword(nil), keywords...) }

// Patterns returns a copy of the awareness patterns.
func Patterns() []Pattern { return append([]Pattern(nil), patterns...) }

// Distractors returns a copy of the distractors.
func Distractors() []Distractor {
	out := make([]Distractor, len(distractors))
	for i, d := range distractors {
		d.Guards = append([]string(nil), d.Guards...)
		out[i] = d
	}
	return out
}

// # The reference judgement's vocabulary
//
// JudgeAwareness (judge.go) decides whether the thinking speaks about the
// agent's own repeated action. It needs to know how a thinking names an
// action (actionVerbs, actionNouns, selfReference, anaphora, outcomeNouns)
// and which claims about an action are awareness when they are about it
// (claims). A claim is awareness only in a clause that refers to the
// repeated action; the same words about the page, the task, another
// person or a hypothetical do not count.

// actionVerbs lists the word forms (lower case, words separated by single
// spaces) by which a thinking names an action, by the action's function
// name: BrowserGym's click('12'), pyautogui.click(…), SWE-agent's tools.
// "_default" applies to any other function.
var actionVerbs = map[string][]string{
	"click":          {"click", "clicks", "clicked", "clicking", "tap", "tapped", "tapping", "click on", "clicking on"},
	"dblclick":       {"double click", "double clicked", "double clicking", "click", "clicked", "clicking"},
	"doubleclick":    {"double click", "double clicked", "double clicking", "click", "clicked", "clicking"},
	"rightclick":     {"right click", "right clicked", "right clicking"},
	"hover":          {"hover", "hovered", "hovering"},
	"fill":           {"fill", "fills", "filled", "filling", "type", "typed", "typing", "enter", "entered", "entering"},
	"type":           {"type", "typed", "typing", "enter", "entered", "entering"},
	"typewrite":      {"type", "typed", "typing", "write", "wrote", "writing"},
	"write":          {"type", "typed", "typing", "write", "wrote", "writing"},
	"press":          {"press", "pressed", "pressing", "key press", "keypress", "hit", "hitting"},
	"keyboard_press": {"press", "pressed", "pressing", "key press", "keypress"},
	"hotkey":         {"press", "pressed", "pressing", "hotkey", "shortcut"},
	"select_option":  {"select", "selected", "selecting", "choose", "chose", "choosing"},
	"scroll":         {"scroll", "scrolls", "scrolled", "scrolling"},
	"scroll_down":    {"scroll", "scrolls", "scrolled", "scrolling"},
	"scroll_up":      {"scroll", "scrolls", "scrolled", "scrolling"},
	"noop":           {"noop", "wait", "waits", "waited", "waiting", "pause", "paused", "pausing"},
	"wait":           {"wait", "waits", "waited", "waiting", "pause", "paused", "pausing"},
	"go_back":        {"go_back", "go back", "goes back", "going back", "went back", "gone back", "navigate back", "navigating back", "navigated back", "back navigation", "back button"},
	"go_forward":     {"go_forward", "go forward", "going forward", "went forward", "navigate forward"},
	"goto":           {"goto", "go to", "going to", "went to", "navigate", "navigated", "navigating", "navigation", "open", "opened", "opening", "visit", "visited", "visiting", "load", "loaded", "loading"},
	"open":           {"open", "opened", "opening"},
	"edit":           {"edit", "edits", "edited", "editing", "re edit", "re edited"},
	"create":         {"create", "created", "creating"},
	"search_file":    {"search", "searched", "searching"},
	"search_dir":     {"search", "searched", "searching"},
	"find_file":      {"find", "found", "finding", "search", "searched", "searching"},
	"submit":         {"submit", "submitted", "submitting"},
	"bash":           {"run", "ran", "running", "execute", "executed", "executing"},
	"_default":       {"run", "ran", "running", "execute", "executed", "executing"},
}

// actionNouns are nouns that name an action of the agent when a
// determiner points them at it: "this action", "the same click", "my
// attempts".
var actionNouns = []string{
	"action", "actions", "step", "steps", "attempt", "attempts", "try", "tries",
	"effort", "efforts", "move", "moves", "operation", "operations", "command",
	"commands", "call", "calls", "click", "clicks", "edit", "edits", "scroll",
	"scrolls", "wait", "waits", "thing", "approach", "strategy", "request",
	"query", "search", "fix", "patch", "change", "input", "navigation",
}

// Building blocks of the reference expressions.
const (
	firstPerson = `(?:i|we)`
	// pointer determiners: what points an action noun at an earlier action.
	pointer = `(?:the\s+(?:same|last|previous|prior|earlier|identical)|this|that|these|those|previous|prior|earlier|last|my|our|my\s+(?:last|previous|earlier|prior)|each|every|another|one\s+more|yet\s+another|any\s+more|further)`
)

// selfReference: expressions by which the agent speaks of its own earlier
// acting or of its own situation ("my attempts", "what I did", "I have
// tried", "I'm", "I keep"). %s is replaced by actionNouns.
var selfReference = []string{
	`\b` + pointer + `\s+(?:\w+\s+)?(?:%s)\b`,
	`\bwhat\s+` + firstPerson + `(?:'ve|\s+have|\s+had|'d)?\s+(?:just\s+)?(?:did|done|tried|been\s+doing|attempted)\b`,
	`\b` + firstPerson + `(?:'ve|'d|\s+have|\s+had)?\s+(?:already\s+|just\s+|now\s+|again\s+)?(?:tried|attempted|done|did|repeated|redone)\b`,
	`\b` + firstPerson + `(?:'m|'re|\s+am|\s+are|\s+was|\s+were|'ve\s+been|\s+have\s+been|\s+seem\s+to\s+be|\s+keep|\s+kept|\s+still)\b`,
	`\b(?:each|every)\s+time\s+` + firstPerson + `\b`,
}

// anaphora: a pronoun standing for the action named just before ("it did
// nothing", "doing so has no effect", "that was pointless"). It refers to
// the repeated action only when the clause or the two units before name
// that action.
const anaphora = `\b(?:it|doing\s+so|doing\s+this|doing\s+that)\b|\b(?:this|that)(?:\s+(?:is|was|has|had|did|does|didn'?t|doesn'?t|hasn'?t|isn'?t|wasn'?t|won'?t|will|would|keeps|kept|still|again|too|also|just|only|gets|got|leaves|left|led|leads|brings|brought|changes|changed|made|makes|gave|gives|yields|yielded|returns|returned|goes|went|seems|seemed)\b|\s*[.,;:!?]|\s*$)`

// outcomeNouns name what an action produced: a claim that one of them is
// unchanged is about the effect of the agent's action ("the page is
// unchanged", "the output stayed the same").
var outcomeNouns = []string{
	"page", "pages", "screen", "view", "output", "outputs", "result", "results",
	"observation", "observations", "response", "responses", "state", "display",
	"ui", "interface", "screenshot", "feedback",
}

// ClaimKind says what a claim asserts about the action it is about.
type ClaimKind string

// Claim kinds.
const (
	// ClaimRepeated: the action was done before, again, or N times.
	ClaimRepeated ClaimKind = "repeated"
	// ClaimNoEffect: the action failed, had no effect or is futile.
	ClaimNoEffect ClaimKind = "no-effect"
	// ClaimUnchanged: what the action produced is unchanged or the same
	// as before; said of an outcome noun ("the page is unchanged") it is
	// about the action's effect.
	ClaimUnchanged ClaimKind = "unchanged"
)

// Claim is an assertion that is awareness when it is about the repeated
// action. Negatable claims are set aside after a negation ("I have not
// clicked it before"); the others carry their negation in themselves
// ("nothing changed"). Every claim is set aside when hypothetical.
//
// Needs is a cheap pre-check, as for patterns: the expression can only
// match a text that contains one of these literals (a test checks it).
type Claim struct {
	Name      string
	Kind      ClaimKind
	Expr      string
	Negatable bool
	Needs     []string
}

const (
	ordinalWords = `(?:second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|\d+(?:st|nd|rd|th)|nth|n-th|umpteenth|latest)`
	countWords   = `(?:two|three|four|five|six|seven|eight|nine|ten|several|multiple|many|numerous|countless|a\s+few|a\s+couple\s+of|\d+)`
	changeVerbs  = `(?:change|changed|changes|move|moved|moves|budge|budged|update|updated|updates|respond|responded|react|reacted|load|loaded|progress|progressed|advance|advanced|differ|differed|help|helped|helps|work|worked|works|succeed|succeeded|improve|improved|matter|mattered|do\s+anything|did\s+anything|done\s+anything|lead\s+anywhere|led\s+anywhere|get\s+(?:me\s+|us\s+)?anywhere|got\s+(?:me\s+|us\s+)?anywhere|gotten\s+(?:me\s+|us\s+)?anywhere|go\s+anywhere|make\s+(?:a|any)\s+difference|made\s+(?:a|any)\s+difference|bring\s+anything|brought\s+anything|reveal\s+anything|revealed\s+anything|show\s+anything|shown\s+anything|showed\s+anything|produce\s+anything|produced\s+anything|fix\s+anything|fixed\s+anything|solve\s+anything|solved\s+anything)`
	nothingVerbs = `(?:does|did|do|doing|done|achieves?|achieved|changes?|changed|yields?|yielded|gives?|gave|returns?|returned|brings?|brought|shows?|showed|reveals?|revealed|produces?|produced|accomplish(?:es|ed)?|happens?|happened|moves?|moved|comes?|came|appears?|appeared)`
)

// claims: assertions about an action that show awareness of its
// repetition or futility when the clause is about the repeated action.
var claims = []Claim{
	{"again", ClaimRepeated, `\b(?:again|once\s+more|one\s+more\s+time|another\s+time|anew|afresh|yet\s+another|one\s+more|another\s+round)\b`, true, []string{"again", "more", "another", "anew", "afresh"}},
	{"retry", ClaimRepeated, `\bre-?(?:try|tries|tried|trying|attempt|attempts|attempted|attempting|click|clicks|clicked|clicking|run|runs|ran|running|do|does|did|doing|done|issue|issued|issuing|submit|submitted|apply|applied|applying|execute|executed|edit|edited|editing)\b`, true, []string{"retr", "re-", "rerun", "reran", "redo", "redid", "redone", "reissu", "resubmit", "reappl", "reexecut", "reclick", "reattempt", "reedit", "reran", "reruns"}},
	{"repeat", ClaimRepeated, `\brepeat(?:s|ed|ing|edly)?\b|\brepetitions?\b|\brepetitive\b`, true, []string{"repeat", "repetit"}},
	{"already", ClaimRepeated, `\balready\b`, true, []string{"already"}},
	{"before", ClaimRepeated, `\b(?:as\s+before|before\s*(?:[.,;:!?)]|$|and\b|but\b|so\b|too\b|already\b|without\b|with\b)|previously|earlier|so\s+far|until\s+now|up\s+to\s+now|by\s+now|last\s+(?:time|round|turn|attempt|try|step))`, true, []string{"before", "previously", "earlier", "so far", "until now", "up to now", "by now", "last"}},
	{"count", ClaimRepeated, `\b(?:twice|thrice|` + countWords + `\s+(?:times|attempts|tries|rounds)|in\s+a\s+row|in\s+succession|consecutive(?:ly)?|back\s+to\s+back)\b`, true, []string{"twice", "thrice", "times", "attempts", "tries", "rounds", "in a row", "succession", "consecutive", "back to back"}},
	{"ordinal", ClaimRepeated, `\b` + ordinalWords + `\s+(?:\w+\s+)?(?:time|times|attempt|try|round|go|click|scroll|edit|wait|run|pass|iteration|repetition)\b`, true, []string{"second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth", "nth", "n-th", "umpteenth", "latest", "1st", "2nd", "3rd", "0th", "1th", "2th", "3th", "4th", "5th", "6th", "7th", "8th", "9th"}},
	{"each_time", ClaimRepeated, `\b(?:each|every)\s+(?:single\s+)?(?:time|attempt|try|round)\b`, true, []string{"each", "every"}},
	{"keep", ClaimRepeated, `\b(?:keep|keeps|kept|keeping)\s+(?:on\s+)?\w+ing\b|\b(?:keep|keeps|kept)\s+(?:ending|getting|landing|coming)\b`, true, []string{"keep", "kept"}},
	{"same", ClaimUnchanged, `\bsame\s+(?:way|thing|place|spot|point|state|screen|page|view|result|results|outcome|outcomes|output|response|content|contents|observation|position|situation|picture|list|data)\b|\bsame\s+as\s+(?:before|last|the\s+last|previously|earlier)\b|\bthe\s+same\s*(?:[.,;:!?]|$|again|each|every|as\s+before)`, false, []string{"same"}},
	{"unchanged", ClaimUnchanged, `\b(?:unchanged|identical|unaltered|unmodified|unaffected|static|frozen)\b|\bas\s+it\s+(?:was|is|were|had\s+been)\b|\bno\s+different\b|\bexactly\s+(?:like|as)\b`, false, []string{"unchanged", "identical", "unaltered", "unmodified", "unaffected", "static", "frozen", "as it", "no different", "exactly"}},
	{"nothing", ClaimUnchanged, `\bnothing\s+(?:new|different|else|happens|happened|changes|changed|moves|moved|appears|appeared|shows|showed|comes|came|loads|loaded|useful|at\s+all|has\s+changed|seems\s+to\s+(?:happen|change))\b|\b` + nothingVerbs + `\s+(?:absolutely\s+|simply\s+|still\s+)?nothing\b`, false, []string{"nothing"}},
	{"no_change", ClaimUnchanged, `\b(?:no|not\s+any|without\s+any|without)\s+(?:visible\s+|apparent\s+|noticeable\s+|real\s+|further\s+|new\s+|observable\s+)?(?:change|changes|effect|effects|difference|progress|response|reaction|update|updates|luck|success|result|results)\b`, false, []string{"no", "not any", "without"}},
	{"not_anything", ClaimUnchanged, `(?:n'?t|\bnot|\bnever)\s+(?:\w+\s+){0,2}?(?:anything|any)\s+(?:new|different|else|useful|more)\b`, false, []string{"any"}},
	{"did_not_change", ClaimNoEffect, `\b(?:did|does|do|has|have|had|is|was|were|are|will|would|could|can|wo)\s*(?:n'?t|\s+not|\s+never)\s+(?:\w+\s+)?` + changeVerbs + `\b|\bnot\s+(?:working|helping|changing|moving|responding|loading|progressing)\b`, false, []string{"nt", "n't", "not", "never"}},
	{"futile", ClaimNoEffect, `\b(?:nowhere|pointless|useless|futile|fruitless|in\s+vain|no\s+use|no\s+point|unhelpful|not\s+helpful|ineffective|ineffectual|unproductive|unsuccessful|to\s+no\s+avail|dead\s+end|in\s+circles|waste\s+of\s+time|wasted)\b`, false, []string{"nowhere", "pointless", "useless", "futile", "fruitless", "in vain", "no use", "no point", "unhelpful", "not helpful", "ineffect", "unproductive", "unsuccessful", "no avail", "dead end", "in circles", "waste"}},
	{"failed", ClaimNoEffect, `\b(?:fail|fails|failed|failing|stuck|loop|looping|looped|no\s+luck)\b`, true, []string{"fail", "stuck", "loop", "no luck"}},
}

// commandVerbs names the verbs of a shell command by its program, for the
// shell tools of SWE-bench agents and of VERA's own agent: "listing the
// directory again" names ls -la.
var commandVerbs = map[string][]string{
	"ls":      {"list", "lists", "listed", "listing"},
	"cat":     {"read", "reads", "reading", "print", "printed", "printing", "show", "showed", "showing", "display", "displayed", "displaying", "view", "viewed", "viewing"},
	"head":    {"read", "reading", "print", "printed", "printing", "view", "viewing"},
	"tail":    {"read", "reading", "print", "printed", "printing", "view", "viewing"},
	"less":    {"read", "reading", "view", "viewing"},
	"grep":    {"search", "searched", "searching", "grep", "grepped", "grepping", "look for", "looked for", "looking for"},
	"rg":      {"search", "searched", "searching", "look for", "looked for", "looking for"},
	"find":    {"find", "found", "finding", "search", "searched", "searching", "look for", "looked for", "looking for"},
	"python":  {"run", "ran", "running", "execute", "executed", "executing"},
	"python3": {"run", "ran", "running", "execute", "executed", "executing"},
	"pytest":  {"run", "ran", "running", "test", "tested", "testing"},
	"sed":     {"edit", "edited", "editing", "replace", "replaced", "replacing"},
	"cd":      {"change directory", "changed directory", "changing directory", "cd", "enter", "entered", "entering"},
	"curl":    {"fetch", "fetched", "fetching", "request", "requested", "requesting", "download", "downloaded", "downloading"},
	"wget":    {"fetch", "fetched", "fetching", "download", "downloaded", "downloading"},
	"git":     {"run", "ran", "running", "check", "checked", "checking"},
	"pip":     {"install", "installed", "installing"},
	"make":    {"build", "built", "building", "make", "run", "ran", "running"},
	"go":      {"build", "built", "building", "run", "ran", "running", "test", "tested", "testing"},
}

// clauseSplitters cut a sentence into the clauses a claim cannot reach
// across ("again, the goal asks for X, so I will open Y"); "so far" and
// "so that" do not cut.
var clauseSplitters = []string{"so", "but", "however", "then", "instead", "whereas", "although", "though"}

// bidFunctions are BrowserGym functions whose first argument is an
// element id, whose label the accessibility tree gives.
var bidFunctions = []string{"click", "dblclick", "hover", "fill", "press", "select_option", "focus", "clear", "check", "uncheck", "upload_file"}
