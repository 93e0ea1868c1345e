package ledger

import (
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

func TestExtractQuery(t *testing.T) {
	tests := []struct {
		cmd  string
		want string
		ok   bool
	}{
		{`curl -s "https://html.duckduckgo.com/html/?q=python+3.13+release+date"`, "python 3.13 release date", true},
		{`curl -s "https://lite.duckduckgo.com/lite/?q=acme%20widget%202&kl=us-en"`, "acme widget 2", true},
		{`curl -s "https://api.duckduckgo.com/?q=acme&format=json&no_html=1"`, "acme", true},
		{`wget -qO- 'https://www.bing.com/search?q=%22widget+2%22+site%3Aacme.example'`, `"widget 2" site:acme.example`, true},
		{`curl -sL "https://www.google.com/search?hl=en&q=gpt-6+launch"`, "gpt-6 launch", true},
		{`curl -s "https://www.baidu.com/s?wd=acme"`, "acme", true},
		{`curl -s "https://yandex.ru/search/?text=acme+widget"`, "acme widget", true},
		{`curl -s "https://search.yahoo.com/search?p=acme+widget"`, "acme widget", true},
		{`curl -s "https://en.wikipedia.org/w/api.php?action=query&list=search&srsearch=Ada%20Lovelace&format=json"`, "Ada Lovelace", true},
		{`curl -s "https://en.wikipedia.org/w/api.php?action=opensearch&search=Lovelace"`, "Lovelace", true},
		{`curl -s "https://en.wikipedia.org/wiki/Special:Search/Ada_Lovelace"`, "Ada Lovelace", true},
		{`curl -s "https://export.arxiv.org/api/query?search_query=all:verification&max_results=5"`, "all:verification", true},
		{`curl -s "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/esearch.fcgi?db=pubmed&term=crispr"`, "crispr", true},
		{`curl -sG https://api.duckduckgo.com/ --data-urlencode "q=acme widget 2" -d format=json`, "acme widget 2", true},
		{`curl -s https://html.duckduckgo.com/html/ -d 'q=acme+widget'`, "acme widget", true},
		{`http GET https://hn.algolia.com/api/v1/search query==acme`, "acme", true},
		{`python3 -c "import requests; r=requests.get('https://duckduckgo.com/html/', params={'q': 'acme widget'})"`, "acme widget", true},
		{`ddgr --json -n 5 acme widget launch`, "acme widget launch", true},
		{`grep -rn "release date" /input`, "release date", true},
		{`grep -r -e widget --include=*.md .`, "widget", true},
		{`rg -i -g '*.md' "widget 2" /input`, "widget 2", true},
		{`find / -iname "*widget*" 2>/dev/null`, "*widget*", true},
		{`apt-cache search poppler utils`, "poppler utils", true},
		{`bash -c 'curl -s "https://www.bing.com/search?q=acme"'`, "acme", true},
		{`cd /work && curl -s "https://duckduckgo.com/html/?q=acme" | grep -o result`, "acme", true},
		{`curl -s "https://duckduckgo.com/html/?q=$(echo 'acme widget' | sed 's/ /+/g')"`, "acme widget", true},
		{`curl -s "https://html.duckduckgo.com/html/?q=$(python3 -c "import urllib.parse;print(urllib.parse.quote('acme widget'))")"`, "acme widget", true},
		{`curl -s "https://html.duckduckgo.com/html/?q=acme+widget;launch"`, "acme widget;launch", true},
		{`python3 -c "import urllib.parse,urllib.request;print(urllib.request.urlopen('https://en.wikipedia.org/w/api.php?action=query&list=search&format=json&srsearch='+urllib.parse.quote('acme widget')).read())"`, "acme widget", true},
		{"python3 - <<'PY'\nimport requests\nr = requests.get('https://html.duckduckgo.com/html/', params={'q':'acme widget 2'})\nprint(r.text[:3000])\nPY", "acme widget 2", true},
		{`curl -s "https://r.jina.ai/https://duckduckgo.com/html/?q=acme"`, "acme", true},
		// not searches
		{`curl -s https://acme.example/news`, "", false},
		{`curl -sI "https://www.bing.com/search?q=acme"`, "", false}, // a HEAD check
		{`grep -i widget /work/page.html`, "", false},
		{`curl -s "https://en.wikipedia.org/w/api.php?action=query&titles=Ada&prop=extracts"`, "", false},
		{`cat /work/notes.md`, "", false},
		{`curl -s https://acme.example/api -d 'q=x'`, "", false}, // a POST to a non-engine without -G
	}
	for _, tt := range tests {
		got, ok := ExtractQuery(tt.cmd)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ExtractQuery(%q) = %q, %v; want %q, %v", tt.cmd, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFamilyRephrasingsShare(t *testing.T) {
	groups := [][]string{
		{
			"OpenAI GPT-6 release date",
			"gpt 6 release date openai",
			`"GPT-6" OpenAI release dates`,
			"release date of OpenAI's GPT-6",
			"What is the release date of OpenAI GPT‑6?",
			"openai gpt-6 released date",
		},
		{
			"has Acme announced Widget 2",
			"Acme Widget 2 announcement",
			"acme announces widget 2?",
			"Widget 2 announced by Acme",
			"did acme announce the widget 2 yet",
		},
		{
			"python 3.13.0 release date",
			"Python 3.13.0 Release Date",
			"release date python 3.13.0",
			"python 3.13.0 -- release date!",
		},
		{
			"site:acme.example widget launch",
			"widget launching site:https://www.acme.example/",
			"site: acme.example widget launches",
		},
		{
			"companies pricing updates",
			"company price updated",
			"the pricing of companies updating",
		},
	}
	for _, g := range groups {
		want := Family(g[0])
		if want == "" {
			t.Fatalf("empty family for %q", g[0])
		}
		for _, q := range g[1:] {
			if got := Family(q); got != want {
				t.Errorf("Family(%q) = %q, want %q (the family of %q)", q, got, want, g[0])
			}
		}
	}
}

func TestFamilyMutationsDiffer(t *testing.T) {
	base := "OpenAI GPT-6 release date"
	mutations := []string{
		"OpenAI GPT-6 release date site:openai.com",   // a site:
		"OpenAI GPT-6 release date announcement",      // a new key term
		"OpenAI GPT-5 release date",                   // another entity (version)
		"Anthropic GPT-6 release date",                // another entity (vendor)
		"OpenAI GPT-6 release date filetype:pdf",      // another operator
		"OpenAI GPT-6 release date -rumor",            // an exclusion
		"OpenAI GPT-6 release date 2026",              // a year
		"OpenAI GPT-6 pricing",                        // a different aspect
		"OpenAI GPT-6 release date site:theverge.com", // another site
	}
	seen := map[string]string{Family(base): base}
	for _, m := range mutations {
		f := Family(m)
		if prev, dup := seen[f]; dup {
			t.Errorf("Family(%q) = %q, the same as for %q", m, f, prev)
		}
		seen[f] = m
	}
}

func TestFamilyDetails(t *testing.T) {
	tests := []struct{ q, want string }{
		{"python 3.13.0 release date", "3.13.0 dat python releas"},
		{"site:https://www.OpenAI.com/blog GPT", "gpt site:openai.com"},
		{"ext:pdf report", "filetype:pdf report"},
		{"allintitle: widget", "intitle:widget"},
		{"C++ vs C# performance", "c# c++ performanc"},
		{"what is it", "is it what"},
		{"", ""},
		{"   ", ""},
	}
	for _, tt := range tests {
		if got := Family(tt.q); got != tt.want {
			t.Errorf("Family(%q) = %q, want %q", tt.q, got, tt.want)
		}
	}
}

func TestQueryLedger(t *testing.T) {
	var l QueryLedger
	q1 := l.Observe(1, "acme widget 2 launch", catalog.LedgerEmpty, 3)
	q2 := l.Observe(2, "Acme Widget 2 launched", catalog.LedgerSuccess, 3)
	other := l.Observe(3, "acme widget 2 site:acme.example", catalog.LedgerSuccess, 3)
	if q1.Family != q2.Family || q1.FamilyCount != 1 || q2.FamilyCount != 2 || q2.MutationRequired {
		t.Fatalf("lines: %+v %+v", q1, q2)
	}
	if other.Family == q1.Family || other.FamilyCount != 1 {
		t.Fatalf("mutation shares the family: %+v", other)
	}
	if l.NeedsMutation(q1.Family, 3) {
		t.Fatal("mutation required before the limit")
	}
	q3 := l.Observe(4, "launch of acme widget 2", catalog.LedgerFailure, 3)
	if q3.FamilyCount != 3 || !q3.MutationRequired || !l.NeedsMutation(q1.Family, 3) || l.Count(q1.Family) != 3 {
		t.Fatalf("at the limit: %+v count %d", q3, l.Count(q1.Family))
	}
	if l.NeedsMutation(q1.Family, 0) || l.NeedsMutation(q1.Family, -1) {
		t.Fatal("a limit ≤ 0 must never require a mutation")
	}
	if l.NeedsMutation(other.Family, 3) {
		t.Fatal("the mutated family needs a mutation")
	}
	if fs := l.Families(); len(fs) != 2 || fs[0] != q1.Family || l.Len() != 4 {
		t.Fatalf("families %q len %d", fs, l.Len())
	}
	c := l.Clone()
	c.Observe(5, "acme widget 2 launch", catalog.LedgerEmpty, 3)
	if l.Count(q1.Family) != 3 || c.Count(q1.Family) != 4 {
		t.Fatal("Clone shares state")
	}
	var zero QueryLedger
	if zero.Count("x") != 0 || zero.NeedsMutation("x", 1) || zero.Len() != 0 {
		t.Fatal("zero ledger not empty")
	}
}
