package ledger

import (
	"slices"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

func TestClassifyMove(t *testing.T) {
	tests := []struct {
		cmd  string
		want catalog.MoveType
	}{
		// search
		{`curl -s "https://html.duckduckgo.com/html/?q=python+3.13+release+date"`, catalog.MoveSearch},
		{`curl -sL 'https://www.bing.com/search?q=acme+widget+launch' | grep -o '<h2>.*</h2>'`, catalog.MoveSearch},
		{`wget -qO- "https://www.google.com/search?q=gpt-6"`, catalog.MoveSearch},
		{`curl -s "https://en.wikipedia.org/w/api.php?action=query&list=search&srsearch=Ada%20Lovelace&format=json" | jq .`, catalog.MoveSearch},
		{`curl -sG https://api.duckduckgo.com/ --data-urlencode "q=acme widget 2" -d format=json`, catalog.MoveSearch},
		{`curl -s https://html.duckduckgo.com/html/ -d 'q=acme+widget'`, catalog.MoveSearch},
		{`python3 -c "import requests; print(requests.get('https://api.github.com/search/repositories?q=vera+agent').json())"`, catalog.MoveSearch},
		{`grep -rn "release date" /input`, catalog.MoveSearch},
		{`grep -Ril --include='*.md' announcement /work/docs`, catalog.MoveSearch},
		{`rg -i "widget 2" /input`, catalog.MoveSearch},
		{`find / -name "*.pdf" 2>/dev/null | head`, catalog.MoveSearch},
		{`ddgr --json acme widget launch`, catalog.MoveSearch},
		{`apt-cache search poppler`, catalog.MoveSearch},
		{`lynx -dump "https://lite.duckduckgo.com/lite/?q=acme"`, catalog.MoveSearch},
		{`http GET https://hn.algolia.com/api/v1/search query==acme`, catalog.MoveSearch},
		// fetch
		{`curl -sL https://www.python.org/downloads/release/python-3130/`, catalog.MoveFetch},
		{`curl -sL https://acme.example/blog | grep -i widget`, catalog.MoveFetch},
		{`wget -q -O /work/page.html https://acme.example/news`, catalog.MoveFetch},
		{`curl -s https://acme.example/feed.xml > /work/feed.xml`, catalog.MoveFetch},
		{`curl -s https://acme.example/ | tee /work/acme.html | head -50`, catalog.MoveFetch},
		{`git clone --depth 1 https://github.com/acme/widget /work/widget`, catalog.MoveFetch},
		{`python3 -c "import urllib.request; print(urllib.request.urlopen('https://acme.example/').read()[:500])"`, catalog.MoveFetch},
		{`cd /work && curl -sSLo page.html https://acme.example/press && wc -c page.html`, catalog.MoveFetch},
		{`timeout 30 curl -s https://acme.example/`, catalog.MoveFetch},
		{`bash -c "curl -s https://acme.example/about"`, catalog.MoveFetch},
		{`w3m -dump https://acme.example/`, catalog.MoveFetch},
		// read
		{`cat /work/notes.md`, catalog.MoveRead},
		{`head -n 40 /work/page.html`, catalog.MoveRead},
		{`tail -20 /work/run.log`, catalog.MoveRead},
		{`sed -n '1,80p' /work/page.txt`, catalog.MoveRead},
		{`ls -la /work /input`, catalog.MoveRead},
		{`less /input/report.txt`, catalog.MoveRead},
		{`find /input -type f`, catalog.MoveRead},
		// extract
		{`grep -i "release date" /work/page.html`, catalog.MoveExtract},
		{`jq '.items[].title' /work/results.json`, catalog.MoveExtract},
		{`jq -r '.[] | .name' /work/a.json > /work/names.txt`, catalog.MoveExtract},
		{`awk -F, '{print $2}' /input/data.csv | sort | uniq -c`, catalog.MoveExtract},
		{`cat /work/page.html | sed 's/<[^>]*>//g' | grep -i widget`, catalog.MoveExtract},
		{`pdftotext /input/report.pdf - | head -100`, catalog.MoveExtract},
		{`python3 -c "import json; d=json.load(open('/work/a.json')); print(d['name'])"`, catalog.MoveExtract},
		{"python3 - <<'EOF'\nfrom bs4 import BeautifulSoup\nprint(BeautifulSoup(open('/work/p.html').read(), 'html.parser').title)\nEOF", catalog.MoveExtract},
		{`perl -ne 'print if /widget/i' /work/page.html`, catalog.MoveExtract},
		{`python3 -m json.tool /work/a.json`, catalog.MoveExtract},
		// compute
		{`python3 -c "print(2**10 * 3.5)"`, catalog.MoveCompute},
		{`echo "scale=4; 22/7" | bc -l`, catalog.MoveCompute},
		{`echo $((365*24))`, catalog.MoveCompute},
		{`awk 'BEGIN{print 3.14*2}'`, catalog.MoveCompute},
		{`python3 -c "import math; print(math.sqrt(2))"`, catalog.MoveCompute},
		{`expr 3 + 4`, catalog.MoveCompute},
		// install
		{`pip install pypdf`, catalog.MoveInstall},
		{`python3 -m pip install --quiet beautifulsoup4`, catalog.MoveInstall},
		{`apt-get update && apt-get install -y poppler-utils`, catalog.MoveInstall},
		{`npm install -g playwright`, catalog.MoveInstall},
		{`pip install requests && python3 -c "import requests; print(requests.get('https://acme.example').status_code)"`, catalog.MoveInstall},
		{`curl -fsSL https://get.example.sh | sh`, catalog.MoveInstall},
		{`sudo apt install -y jq`, catalog.MoveInstall},
		// write
		{"cat > /work/output/final_report.md <<'EOF'\n# Report\nAcme has not announced Widget 2.\nEOF", catalog.MoveWrite},
		{`echo "- found release date (ev_0003)" >> /work/notes.md`, catalog.MoveWrite},
		{`printf '%s\n' a b > /work/list.txt`, catalog.MoveWrite},
		{`echo done | tee -a /work/log.txt`, catalog.MoveWrite},
		{`mkdir -p /work/output`, catalog.MoveWrite},
		{`cp /input/a.pdf /work/a.pdf`, catalog.MoveWrite},
		{`sed -i 's/foo/bar/' /work/draft.md`, catalog.MoveWrite},
		{`python3 -c "open('/work/out.txt','w').write('x')"`, catalog.MoveWrite},
		{`cat /work/a.txt /work/b.txt > /work/c.txt`, catalog.MoveWrite},
		// verify
		{`sha256sum /work/a.pdf`, catalog.MoveVerify},
		{`curl -sI https://acme.example/widget-2`, catalog.MoveVerify},
		{`curl -s -o /dev/null -w "%{http_code}" https://acme.example/`, catalog.MoveVerify},
		{`diff /work/a.txt /work/b.txt`, catalog.MoveVerify},
		{`wget --spider https://acme.example/`, catalog.MoveVerify},
		{`curl -s https://acme.example/widget.tar.gz | sha256sum`, catalog.MoveVerify},
		// other
		{`python3 /work/analyze.py`, catalog.MoveOther},
		{`cd /work`, catalog.MoveOther},
		{`echo hello`, catalog.MoveOther},
		{`sleep 5`, catalog.MoveOther},
		{`tar -xzf /work/a.tar.gz -C /work`, catalog.MoveOther},
		{``, catalog.MoveOther},
	}
	if len(tests) < 40 {
		t.Fatalf("only %d cases", len(tests))
	}
	for _, tt := range tests {
		if got := ClassifyMove(tt.cmd); got != tt.want {
			t.Errorf("ClassifyMove(%q) = %s, want %s", tt.cmd, got, tt.want)
		}
		if !ClassifyMove(tt.cmd).Valid() {
			t.Errorf("ClassifyMove(%q) is not a catalogued move type", tt.cmd)
		}
	}
}

func TestOutcome(t *testing.T) {
	tests := []struct {
		exit     int
		bytes    int64
		timedOut bool
		denied   bool
		want     catalog.LedgerOutcome
	}{
		{0, 120, false, false, catalog.LedgerSuccess},
		{0, 0, false, false, catalog.LedgerEmpty},
		{1, 0, false, false, catalog.LedgerFailure},
		{22, 300, false, false, catalog.LedgerFailure},
		{-1, 0, true, false, catalog.LedgerTimeout},
		{-1, 0, false, true, catalog.LedgerDenied},
		{-1, 0, true, true, catalog.LedgerDenied}, // denied wins
		{-1, 10, false, false, catalog.LedgerFailure},
	}
	for _, tt := range tests {
		if got := Outcome(tt.exit, tt.bytes, tt.timedOut, tt.denied); got != tt.want {
			t.Errorf("Outcome(%d, %d, %v, %v) = %s, want %s", tt.exit, tt.bytes, tt.timedOut, tt.denied, got, tt.want)
		}
	}
	of := []struct {
		f    catalog.ToolFinished
		want catalog.LedgerOutcome
	}{
		{catalog.ToolFinished{Stdout: catalog.Output{Head: "ok\n", Bytes: 3}}, catalog.LedgerSuccess},
		{catalog.ToolFinished{Stdout: catalog.Output{Head: " \n\t", Bytes: 3}}, catalog.LedgerEmpty},
		{catalog.ToolFinished{Interrupted: true, ExitCode: 0}, catalog.LedgerFailure},
		{catalog.ToolFinished{Error: "container gone"}, catalog.LedgerFailure},
		{catalog.ToolFinished{Stdout: catalog.Output{Head: "  ", Tail: "x", Bytes: 9000, Truncated: true}}, catalog.LedgerSuccess},
	}
	for i, tt := range of {
		if got := OutcomeOf(tt.f); got != tt.want {
			t.Errorf("OutcomeOf #%d = %s, want %s", i, got, tt.want)
		}
	}
}

func TestFailureType(t *testing.T) {
	tests := []struct {
		cmd  string
		f    catalog.ToolFinished
		want string
	}{
		{`curl -fsS https://a.example/`, catalog.ToolFinished{ExitCode: 22, Stderr: catalog.Output{Head: "curl: (22) The requested URL returned error: 403"}}, "http_403"},
		{`wget https://a.example/`, catalog.ToolFinished{ExitCode: 8, Stderr: catalog.Output{Head: "ERROR 404: Not Found."}}, "http_404"},
		{`curl -s https://a.example/`, catalog.ToolFinished{ExitCode: 0, Stdout: catalog.Output{Head: "<html><title>403 Forbidden</title>", Bytes: 40}}, "http_403"},
		{`curl -s https://a.example/`, catalog.ToolFinished{ExitCode: 0, Stdout: catalog.Output{Head: "<title>Just a moment...</title>", Bytes: 40}}, "bot_block"},
		{`curl -s https://a.example/`, catalog.ToolFinished{ExitCode: 6, Stderr: catalog.Output{Head: "curl: (6) Could not resolve host: a.example"}}, "dns_error"},
		{`pdftotext x.pdf`, catalog.ToolFinished{ExitCode: 127, Stderr: catalog.Output{Head: "sh: pdftotext: command not found"}}, "command_not_found"},
		{`python3 -c "import bs4"`, catalog.ToolFinished{ExitCode: 1, Stderr: catalog.Output{Head: "ModuleNotFoundError: No module named 'bs4'"}}, "module_not_found"},
		{`grep widget /work/a.html`, catalog.ToolFinished{ExitCode: 1}, "no_match"},
		{`cat /work/nope`, catalog.ToolFinished{ExitCode: 1, Stderr: catalog.Output{Head: "cat: /work/nope: No such file or directory"}}, "no_such_file"},
		{`curl -s https://a.example/`, catalog.ToolFinished{ExitCode: 0}, "empty_output"},
		{`mkdir -p /work/x`, catalog.ToolFinished{ExitCode: 0}, ""},
		{`curl -s https://a.example/`, catalog.ToolFinished{ExitCode: 0, Stdout: catalog.Output{Head: "<html>hello</html>", Bytes: 18}}, ""},
		{`sleep 1000`, catalog.ToolFinished{ExitCode: -1, TimedOut: true}, "timeout"},
		{`rm -rf /`, catalog.ToolFinished{ExitCode: -1, Denied: true}, "denied"},
		{`false`, catalog.ToolFinished{ExitCode: 3, Stderr: catalog.Output{Head: "oops"}}, "exit_3"},
	}
	for _, tt := range tests {
		if got := FailureType(tt.cmd, tt.f); got != tt.want {
			t.Errorf("FailureType(%q) = %q, want %q", tt.cmd, got, tt.want)
		}
	}
}

func TestURLsAndDomains(t *testing.T) {
	cmd := `curl -s -H "User-Agent: x" https://WWW.Acme.Example/news?id=1 -o /work/a.html && wget -qO- docs.acme.example/api && python3 -c "import requests; requests.get('https://news.example.org/a')"`
	got := URLs(cmd)
	want := []string{"https://WWW.Acme.Example/news?id=1", "docs.acme.example/api", "https://news.example.org/a"}
	if !slices.Equal(got, want) {
		t.Errorf("URLs = %q, want %q", got, want)
	}
	if d, w := Domains(cmd), []string{"docs.acme.example", "news.example.org", "www.acme.example"}; !slices.Equal(d, w) {
		t.Errorf("Domains = %q, want %q", d, w)
	}
	if u := URLs(`curl -s "https://a.example/?q=$(echo 'x y' | sed 's/ /+/g')"`); len(u) != 1 {
		t.Errorf("URLs with a substitution = %q", u)
	}
	proxied := `curl -s https://r.jina.ai/https://blog.acme.example/x && curl -s https://web.archive.org/web/2025/https://www.acme.example/`
	if d, w := Domains(proxied), []string{"blog.acme.example", "r.jina.ai", "web.archive.org", "www.acme.example"}; !slices.Equal(d, w) {
		t.Errorf("Domains = %q, want %q", d, w)
	}
	for in, want := range map[string]string{
		"https://r.jina.ai/https://acme.example/x":                     "https://acme.example/x",
		"https://web.archive.org/web/2025*/http://acme.example/x":      "http://acme.example/x",
		"https://acme.example/x?next=https://evil.example/":            "https://acme.example/x?next=https://evil.example/",
		"https://r.jina.ai/https://acme.example/a?b=https://c.example": "https://acme.example/a?b=https://c.example",
		"https://acme.example/x":                                       "https://acme.example/x",
		"acme.example/x":                                               "acme.example/x",
	} {
		if got := SourceURL(in); got != want {
			t.Errorf("SourceURL(%q) = %q, want %q", in, got, want)
		}
	}
	if u := URLs(`grep -c foo /work/a.txt`); len(u) != 0 {
		t.Errorf("URLs of grep = %q", u)
	}
}

func TestFinalizationTarget(t *testing.T) {
	tests := []struct {
		cmd  string
		want string
		ok   bool
	}{
		{"cat > /work/output/final_report.md <<'EOF'\nx\nEOF", "/work/output/final_report.md", true},
		{`echo "answer: 42" > /work/answer.txt`, "/work/answer.txt", true},
		{`python3 -c "open('/work/summary.md','w').write('x')"`, "/work/summary.md", true},
		{`echo "- note" >> /work/notes.md`, "", false},
		{`echo x > /work/scratch.txt`, "", false},
		{`curl -s https://a.example/ > /work/report.html`, "", false}, // a fetch, not a write
	}
	for _, tt := range tests {
		got, ok := finalizationTarget(tt.cmd)
		if got != tt.want || ok != tt.ok {
			t.Errorf("finalizationTarget(%q) = %q, %v; want %q, %v", tt.cmd, got, ok, tt.want, tt.ok)
		}
	}
}

// TestRead replaces TestParseShell (the ledger's own reader is gone): the
// same command line read through internal/shell.
func TestRead(t *testing.T) {
	r := read("FOO=1 sudo -u me curl -s 'a b' \"c\\\"d\" 2>/dev/null | grep -e x && cat <<EOF > /work/o.txt\nline1\nline2\nEOF\necho $(date +%s) # comment | not a pipe")
	segs := r.steps
	if !r.parsed || len(segs) != 4 {
		t.Fatalf("steps = %d: %+v", len(segs), segs)
	}
	if name, args := segs[0].name, segs[0].args; name != "curl" || !slices.Equal(args, []string{"-s", "a b", `c"d`}) {
		t.Errorf("step 0: %q %q", name, args)
	}
	if segs[0].cmd.Op != "|" || !segs[1].piped() || segs[1].pipeFrom != segs[0] || segs[1].cmd.Op != "&&" {
		t.Errorf("operators: %q %v %q", segs[0].cmd.Op, segs[1].piped(), segs[1].cmd.Op)
	}
	if stdin, _ := stdinText(segs[2].cmd); stdin != "line1\nline2\n" || !segs[2].hasStdinDoc() || !slices.Equal(segs[2].stdoutFiles(), []string{"/work/o.txt"}) {
		t.Errorf("here-document: %q %q", stdin, segs[2].stdoutFiles())
	}
	if segs[3].name != "echo" || !slices.Equal(segs[3].args, []string{"$(date +%s)"}) {
		t.Errorf("step 3: %q %q", segs[3].name, segs[3].args)
	}
	if k := segs[3].kids; len(k) != 1 || k[0].name != "date" {
		t.Errorf("step 3 runs %+v, want date", k)
	}
}
