package ledger

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/vera-run/vera/bus/catalog"
	sh "github.com/vera-run/vera/internal/shell"
)

// ExtractQuery returns the search query a command issues, and whether it
// issues one. Recognised, in order of appearance in the command:
//
//   - a URL given to a download tool (curl, wget, lynx, w3m, httpie…; not
//     a HEAD or status-only check) or written in inline code that uses an
//     HTTP library, whose parameters carry a query: q, query,
//     search, wd (Baidu), srsearch (MediaWiki API, list=search), search_query
//     (arXiv, YouTube), text (Yandex), p (Yahoo), term (NCBI esearch),
//     keywords; or a MediaWiki Special:Search/TERM path. This covers
//     DuckDuckGo (html., lite. and api.duckduckgo.com ?q=), Bing and Google
//     /search?q=, Wikipedia's api.php?action=query&list=search&srsearch= and
//     action=opensearch&search=, GitHub's search API, HN Algolia and most
//     site searches;
//   - form data sent with curl -G (--data-urlencode 'q=…', -d q=…), or to a
//     search engine's host, and httpie's q==… parameters;
//   - a params dictionary ('q': '…') in inline code that calls a search
//     engine, or a quote('…') literal appended to a URL whose search
//     parameter is empty ('…&srsearch=' + quote('acme'));
//   - ddgr and googler arguments, gh search, apt-cache/apt/pip/npm search
//     terms;
//   - the pattern of a recursive grep (grep -r PATTERN, also -e PATTERN),
//     rg, ag, ack, git grep, and the -name/-iname/-path/-regex value of
//     find.
//
// The command is read through internal/shell like ClassifyMove's, and
// the first query wins, each command before the ones it runs (bash -c,
// eval, here-documents into a shell, substitutions, find -exec…). The query
// is returned decoded (percent-escapes and + undone) and trimmed. A query
// built by a command substitution gives the quoted literal inside it
// ($(echo 'acme widget' | sed 's/ /+/g') → acme widget); shell variables
// stay as written. A command that does not parse as shell issues no query
// this function can name.
func ExtractQuery(cmd string) (string, bool) {
	return read(cmd).query()
}

// query is ExtractQuery of a reading.
func (r *reading) query() (q string, found bool) {
	r.walk(func(s *step) bool {
		q, found = stepQuery(s)
		// An item xargs reads from an unknown input is no query.
		found = found && !strings.ContainsRune(q, sh.Unknown)
		return !found
	})
	if !found {
		return "", false
	}
	return q, true
}

// stepQuery returns the query one step issues on its own.
func stepQuery(s *step) (string, bool) {
	name, args := s.name, s.args
	switch {
	case networkTools[name]:
		d := downloadArgs(name, args)
		if d.query != "" && !d.head {
			return s.literalQuery(d.query), true
		}
	case name == "ddgr" || name == "googler":
		return joinQuery(optionFree(args, "nrtwcl")), true
	case name == "gh" || name == "apt-cache" || name == "apt" || name == "pip" || name == "pip3" || name == "npm":
		if len(args) > 1 && args[0] == "search" {
			rest := args[1:]
			if name == "gh" && len(rest) > 0 {
				rest = rest[1:] // gh search repos|issues|code …
			}
			if q := joinQuery(optionFree(rest, "LRSl")); q != "" {
				return q, true
			}
		}
	case name == "grep" || name == "egrep" || name == "fgrep" || name == "pdfgrep":
		if grepRecursive(args) {
			if p := grepPattern(args, "efmABCdD"); p != "" {
				return p, true
			}
		}
	case name == "rg" || name == "ag" || name == "ack" || name == "ack-grep":
		if p := grepPattern(args, "egtTfmABCMj"); p != "" {
			return p, true
		}
	case name == "git":
		if i := slices.Index(args, "grep"); i >= 0 {
			if p := grepPattern(args[i+1:], "efmABC"); p != "" {
				return p, true
			}
		}
	case name == "find":
		if p := findPattern(args); p != "" {
			return p, true
		}
	case name == "fd" || name == "fdfind" || name == "locate" || name == "plocate" || name == "mlocate":
		if nf := optionFree(args, "edtEcj"); len(nf) > 0 {
			return nf[0], true
		}
	default:
		if code, ok := s.code(); ok {
			return codeQuery(code)
		}
	}
	return "", false
}

// codeQuery finds a search query in inline program text.
func codeQuery(code string) (string, bool) {
	if !codeHTTP.MatchString(code) {
		return "", false
	}
	for _, u := range sh.TextURLs(code) {
		if q, ok := searchQueryFromURL(u); ok {
			return q, true
		}
	}
	if engineInText(code) {
		if m := codeSearchKey.FindStringSubmatch(code); m != nil {
			return strings.TrimSpace(m[2]), true
		}
	}
	for _, u := range sh.TextURLs(code) {
		if emptySearchParam(u) {
			if m := codeQuoteArg.FindStringSubmatch(code); m != nil {
				return strings.TrimSpace(m[1]), true
			}
		}
	}
	return "", false
}

// optionFree returns the arguments that are neither options nor values of
// the short options listed in valued.
func optionFree(args []string, valued string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			if !strings.HasPrefix(a, "--") && len(a) == 2 && strings.IndexByte(valued, a[1]) >= 0 {
				i++
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

func joinQuery(words []string) string { return strings.TrimSpace(strings.Join(words, " ")) }

// grepPattern returns the pattern of a grep-like command: the -e value or
// the first argument that is not an option.
func grepPattern(args []string, valued string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-e" || a == "--regexp":
			if i+1 < len(args) {
				return args[i+1]
			}
		case strings.HasPrefix(a, "--regexp="):
			return strings.TrimPrefix(a, "--regexp=")
		}
	}
	nf := optionFree(args, valued)
	if len(nf) > 0 {
		return nf[0]
	}
	return ""
}

// findPattern returns find's -name, -iname, -path, -ipath, -regex or
// -iregex value.
func findPattern(args []string) string {
	for i, a := range args {
		switch a {
		case "-name", "-iname", "-path", "-ipath", "-regex", "-iregex", "-wholename", "-iwholename":
			if i+1 < len(args) {
				return args[i+1]
			}
		}
	}
	return ""
}

// searchQueryFromURL returns the query a URL carries, if it is a search.
func searchQueryFromURL(raw string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" {
		if err == nil && u.Host == "" && bareHost.MatchString(raw) {
			u, err = url.Parse("http://" + raw)
		}
		if err != nil || u == nil || u.Host == "" {
			return "", false
		}
	}
	// MediaWiki: /wiki/Special:Search/TERM and Special:Search?search=TERM.
	if _, term, ok := strings.Cut(u.Path, "/Special:Search/"); ok && term != "" {
		if t, err := url.PathUnescape(term); err == nil {
			term = t
		}
		return strings.TrimSpace(strings.ReplaceAll(term, "_", " ")), true
	}
	// A ; is data here, not a separator (ParseQuery would drop the pair).
	vals, err := url.ParseQuery(strings.ReplaceAll(u.RawQuery, ";", "%3B"))
	if err != nil && len(vals) == 0 {
		return "", false
	}
	return queryParam(vals, strings.ToLower(u.Hostname()), u.Path)
}

// literalQuery returns the literal a query built by a command substitution
// searches for, read from the step's parsed substitutions: the argument of
// a URL-quoting call in their code ($(python3 -c "…quote('acme widget')")
// → acme widget), else their first quoted literal word with a letter
// ($(echo 'acme widget' | sed 's/ /+/g') → acme widget); the query itself
// when it has no substitution or they hold no such literal.
func (s *step) literalQuery(q string) string {
	if s.byArgv || !strings.Contains(q, "$(") && !strings.Contains(q, "`") {
		return q
	}
	subs := s.cmd.AllSubs()
	for _, sub := range subs {
		if m := codeQuoteArg.FindStringSubmatch(sub.Src); m != nil {
			return m[1]
		}
	}
	for _, sub := range subs {
		for _, c := range sub.Cmds {
			if c.Kind != sh.Simple {
				continue
			}
			for _, w := range c.Words[min(1, len(c.Words)):] {
				if w.Quoted && w.Literal() && strings.ContainsFunc(w.Value, unicode.IsLetter) {
					return w.Value
				}
			}
		}
	}
	return q
}

// codeQuoteArg is the literal passed to a URL-quoting call in code.
var codeQuoteArg = regexp.MustCompile(`(?:quote_plus|quote|urlencode|encodeURIComponent|escape)\(\s*['"]([^'"]+)['"]`)

// emptySearchParam reports a URL whose search parameter is present but
// empty, as when code appends the query: '…&srsearch=' + quote('x').
func emptySearchParam(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	for _, k := range []string{"q", "query", "search", "srsearch", "search_query", "wd", "text", "p", "term"} {
		if vs, ok := u.Query()[k]; ok && (len(vs) == 0 || vs[0] == "") {
			return true
		}
	}
	return false
}

// queryParam picks the query parameter of a search request.
func queryParam(vals url.Values, host, urlPath string) (string, bool) {
	lower := map[string]string{}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		lk := strings.ToLower(k)
		if _, seen := lower[lk]; !seen && len(vals[k]) > 0 {
			lower[lk] = vals[k][0]
		}
	}
	names := []string{"q", "query", "search", "wd", "srsearch", "search_query", "keywords"}
	reg := RegistrableDomain(host)
	label, _, _ := strings.Cut(reg, ".")
	switch {
	case label == "yandex":
		names = append(names, "text")
	case label == "yahoo":
		names = append(names, "p")
	case strings.Contains(urlPath, "search"):
		names = append(names, "term", "text")
	}
	for _, n := range names {
		if v := strings.TrimSpace(lower[n]); v != "" {
			return v, true
		}
	}
	return "", false
}

// stopWords are dropped from query families: function words, question
// words and search verbs that rephrasing adds or removes without changing
// what is searched for.
var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`a about above after again against all am an and any are as at be because been
	before being below between both but by can could did do does doing down during each few for from further
	had has have having he her here hers him his how i if in into is it its itself just me more most my no nor
	not now of off on once only or other our out over own same she should so some such than that the their them
	then there these they this those through to too under until up very was we were what when where which while
	who whom whose why will with would you your yours yet please find search show tell give vs versus via
	does did dont doesnt didnt hasnt havent isnt arent wasnt werent ever already still`) {
		stopWords[w] = true
	}
}

// protected words are never stemmed.
var protected = map[string]bool{
	"news": true, "series": true, "species": true, "status": true, "census": true, "thesis": true,
	"analysis": true, "basis": true, "crisis": true, "axis": true, "always": true, "perhaps": true,
	"whereas": true, "lens": true, "yes": true, "macos": true, "ios": true, "ipados": true, "watchos": true,
	"tvos": true, "visionos": true, "chaos": true, "kudos": true, "atlas": true, "alias": true, "canvas": true,
	"bias": true, "gas": true, "bus": true, "plus": true, "campus": true, "virus": true, "corpus": true,
	"physics": true, "mathematics": true, "economics": true, "politics": true, "statistics": true,
	"during": true, "thing": true, "string": true, "spring": true, "king": true, "ring": true, "bring": true,
}

// Search operators kept in a family as op:value; aliases map to one name.
var searchOps = map[string]string{
	"site": "site", "intitle": "intitle", "allintitle": "intitle", "inurl": "inurl", "allinurl": "inurl",
	"intext": "intext", "allintext": "intext", "filetype": "filetype", "ext": "filetype",
	"before": "before", "after": "after", "related": "site", "source": "source", "lang": "lang",
}

// Family normalises a query into its family: two queries share a family
// when they search for the same thing in other words.
//
// Normalisation: lower case; typographic quotes folded; quotes, brackets
// and punctuation dropped (a quoted phrase is its words); hyphens,
// underscores and slashes split words (GPT-6 = gpt 6); a dot between
// letters or digits is kept (3.13.0, python.org); c++, c# and f# keep their
// sign; a possessive 's is dropped; stop words (articles, prepositions,
// auxiliaries, question words, yet, please, find/search/show…) are
// dropped; each word is stemmed lightly (plural -s/-es/-ies, -ed, -ing,
// -ly, -ment, a final -e, a final consonant+y as i: release, released,
// releases and releasing are all "releas"; announced and announcement are
// "announc"; company and companies "compani"); duplicates are
// removed and the words sorted. Search operators stay as operator:value
// tokens with their value normalised: site:https://www.OpenAI.com/blog is
// site:openai.com, ext: is filetype:, allintitle: is intitle:; an
// excluded word (-word) stays excluded. When only stop words remain, they
// are kept (stemmed) so that the family is not empty; an empty query has
// the empty family.
//
// So a new key term, a different site: or filetype:, or a different
// entity (another product, version or year) makes a new family, while
// reordering, changing case, quoting, pluralising or adding function
// words does not. The search engine is not part of the family: the same
// query on Bing and on DuckDuckGo is the same family. A family is a key,
// not prose: "3.13.0 dat python releas".
func Family(query string) string {
	fields := strings.Fields(foldQuotes(strings.ToLower(query)))
	var toks, all []string
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if op, val, ok := strings.Cut(strings.TrimLeft(f, `"'([{+`), ":"); ok && searchOps[op] != "" {
			name := searchOps[op]
			val = strings.Trim(val, `"'()[]{}<>,;`)
			if val == "" && i+1 < len(fields) {
				i++
				val = strings.Trim(fields[i], `"'()[]{}<>,;`)
			}
			if val == "" {
				continue
			}
			if name == "site" || name == "source" {
				val = strings.TrimPrefix(Host(val), "www.")
			}
			if val != "" {
				toks = append(toks, name+":"+val)
				all = append(all, name+":"+val)
			}
			continue
		}
		exclude := strings.HasPrefix(f, "-") && len(f) > 1 && isWordRune(firstRune(f[1:]))
		for _, w := range words(f) {
			s := stem(w)
			if exclude {
				s = "-" + s
			}
			all = append(all, s)
			if !stopWords[w] {
				toks = append(toks, s)
			}
		}
	}
	if len(toks) == 0 {
		toks = all
	}
	slices.Sort(toks)
	return strings.Join(slices.Compact(toks), " ")
}

func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

func foldQuotes(s string) string {
	return strings.NewReplacer("\u2018", "'", "\u2019", "'", "\u201c", `"`, "\u201d", `"`, "\u00ab", `"`, "\u00bb", `"`).Replace(s)
}

// words splits a lower-cased field into words (see Family).
func words(f string) []string {
	var out []string
	rs := []rune(f)
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = cur[:0]
		}
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case isWordRune(r):
			cur = append(cur, r)
		case r == '.' && len(cur) > 0 && i+1 < len(rs) && isWordRune(rs[i+1]):
			cur = append(cur, r)
		case r == '\'' && len(cur) > 0:
			// Possessive 's is dropped; other apostrophes join (dont).
			if i+1 < len(rs) && rs[i+1] == 's' && (i+2 == len(rs) || !isWordRune(rs[i+2])) {
				i++
			}
		case (r == '+' || r == '#') && len(cur) > 0 && len(cur) <= 2 && unicode.IsLetter(cur[len(cur)-1]):
			// c++, c#, f#
			cur = append(cur, r)
			for i+1 < len(rs) && rs[i+1] == r {
				i++
				cur = append(cur, r)
			}
		default:
			flush()
		}
	}
	flush()
	return out
}

// stem strips common English inflections from a lower-case word (see
// Family). Words with digits or other signs, and short words, are kept.
func stem(w string) string {
	if len(w) <= 3 || protected[w] {
		return w
	}
	for _, r := range w {
		if r < 'a' || r > 'z' {
			return w
		}
	}
	switch {
	case strings.HasSuffix(w, "ies") && len(w) > 4:
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "sses"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ss") || strings.HasSuffix(w, "us") || strings.HasSuffix(w, "is"):
	case strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "zes"):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "s"):
		w = w[:len(w)-1]
	}
	switch {
	case strings.HasSuffix(w, "ied") && len(w) > 4:
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ing") && stemOK(w[:len(w)-3]):
		w = undouble(w[:len(w)-3])
	case strings.HasSuffix(w, "ed") && stemOK(w[:len(w)-2]):
		w = undouble(w[:len(w)-2])
	case strings.HasSuffix(w, "ly") && len(w) >= 6 && !strings.ContainsRune("aeioupb", rune(w[len(w)-3])):
		w = w[:len(w)-2]
	case strings.HasSuffix(w, "ment") && len(w) >= 9:
		w = w[:len(w)-4]
	}
	n := len(w)
	switch {
	case n >= 4 && w[n-1] == 'e' && w[n-2] != 'e':
		w = w[:n-1]
	case n >= 4 && w[n-1] == 'y' && !strings.ContainsRune("aeiou", rune(w[n-2])):
		w = w[:n-1] + "i"
	}
	return w
}

// stemOK reports whether s can stand as a stem: three letters or more
// with a vowel.
func stemOK(s string) bool {
	return len(s) >= 3 && strings.ContainsAny(s, "aeiouy")
}

// undouble drops one of a final double consonant (planned → plan) other
// than l, s and z, in stems longer than three letters.
func undouble(s string) string {
	n := len(s)
	if n > 3 && s[n-1] == s[n-2] && !strings.ContainsRune("aeioulsz", rune(s[n-1])) {
		return s[:n-1]
	}
	return s
}

// QueryLedger is the fold of the queries a run issued: how many of each
// family. The zero value is empty and ready. It is a plain value: Clone
// copies it.
type QueryLedger struct {
	counts   map[string]int
	families []string // in order of first appearance
}

// Observe records one issued query and returns its query-ledger line:
// the family, the family's count including this query, the outcome, and
// mutation_required when that count has reached limit (limit ≤ 0: never).
// The caller fills in the request and evidence ids.
func (l *QueryLedger) Observe(step int, query string, outcome catalog.LedgerOutcome, limit int) catalog.LedgerQuery {
	fam := Family(query)
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	if l.counts[fam] == 0 {
		l.families = append(l.families, fam)
	}
	l.counts[fam]++
	n := l.counts[fam]
	return catalog.LedgerQuery{
		Step:             step,
		Query:            query,
		Family:           fam,
		FamilyCount:      n,
		Outcome:          outcome,
		MutationRequired: limit > 0 && n >= limit,
	}
}

// Count returns how many queries of a family (as returned by Family) were
// observed.
func (l *QueryLedger) Count(family string) int { return l.counts[family] }

// NeedsMutation reports whether a family has been issued limit times or
// more, so that the next query must come from another family. A limit ≤ 0
// never requires a mutation.
func (l *QueryLedger) NeedsMutation(family string, limit int) bool {
	return limit > 0 && l.counts[family] >= limit
}

// Families returns the families observed, in order of first appearance.
func (l *QueryLedger) Families() []string { return slices.Clone(l.families) }

// Len returns the number of queries observed.
func (l *QueryLedger) Len() int {
	n := 0
	for _, c := range l.counts {
		n += c
	}
	return n
}

// Clone returns an independent copy.
func (l *QueryLedger) Clone() QueryLedger {
	c := QueryLedger{families: slices.Clone(l.families)}
	if l.counts != nil {
		c.counts = make(map[string]int, len(l.counts))
		for k, v := range l.counts {
			c.counts[k] = v
		}
	}
	return c
}
