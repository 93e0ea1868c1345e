package ledger

import (
	"slices"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus/catalog"
)

// Code glued to python's -c (python3 -c'…') is the same program as with a
// space: the ledger reads it through shell.InlineCode as the policy does.
func TestGluedInlineCode(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want catalog.MoveType
	}{
		{`python3 -c'print(2**10 * 3.5)'`, catalog.MoveCompute},
		{`python3 -c"import math; print(math.sqrt(2))"`, catalog.MoveCompute},
		{`python3 -c'import json; print(json.load(open("/work/a.json"))["name"])'`, catalog.MoveExtract},
		{`python3 -c'open("/work/out.txt","w").write("x")'`, catalog.MoveWrite},
		{`python3 -Ic'import urllib.request; print(urllib.request.urlopen("https://acme.example/").read())'`, catalog.MoveFetch},
		{`python3 -c'import requests; print(requests.get("https://html.duckduckgo.com/html/?q=acme+widget").text)'`, catalog.MoveSearch},
	} {
		if got := ClassifyMove(tt.cmd); got != tt.want {
			t.Errorf("ClassifyMove(%q) = %s, want %s", tt.cmd, got, tt.want)
		}
	}
	q, ok := ExtractQuery(`python3 -c'import requests; print(requests.get("https://html.duckduckgo.com/html/?q=acme+widget").text)'`)
	if q != "acme widget" || !ok {
		t.Errorf("ExtractQuery of glued code = %q, %v", q, ok)
	}
	if got, ok := finalizationTarget(`python3 -c'open("/work/output/final.md","w").write("x")'`); got != "/work/output/final.md" || !ok {
		t.Errorf("finalizationTarget of glued code = %q, %v", got, ok)
	}
}

// bash -c inside bash -c is read by every helper, not only by ClassifyMove.
func TestNestedShellInEveryHelper(t *testing.T) {
	search := `bash -c "bash -c 'curl -s https://www.bing.com/search?q=nested+acme'"`
	if got := ClassifyMove(search); got != catalog.MoveSearch {
		t.Errorf("ClassifyMove = %s, want search", got)
	}
	if q, ok := ExtractQuery(search); q != "nested acme" || !ok {
		t.Errorf("ExtractQuery = %q, %v", q, ok)
	}
	// A bare host given to a download tool is only found by reading the
	// nested command, not by a URL pattern over the text.
	fetch := `sh -c "timeout 5 bash -c 'wget -qO- docs.acme.example/api'"`
	if got := URLs(fetch); !slices.Equal(got, []string{"docs.acme.example/api"}) {
		t.Errorf("URLs = %q", got)
	}
	if got := Domains(fetch); !slices.Equal(got, []string{"docs.acme.example"}) {
		t.Errorf("Domains = %q", got)
	}
	if got := ClassifyMove(fetch); got != catalog.MoveFetch {
		t.Errorf("ClassifyMove(%q) = %s, want fetch", fetch, got)
	}
	// Exit 22 of a download run by a nested shell is an HTTP error.
	if got := FailureType(fetch, catalog.ToolFinished{ExitCode: 22}); got != "http_error" {
		t.Errorf("FailureType = %q, want http_error", got)
	}
	if got := FailureType(`bash -c "bash -c 'tar xf a.tar'"`, catalog.ToolFinished{ExitCode: 22}); got != "exit_22" {
		t.Errorf("FailureType without a download = %q, want exit_22", got)
	}
	write := `bash -c "bash -c 'echo done > /work/output/answer.txt'"`
	if got, ok := finalizationTarget(write); got != "/work/output/answer.txt" || !ok {
		t.Errorf("finalizationTarget = %q, %v", got, ok)
	}
	if got := read(write).writeTargets(); !slices.Equal(got, []string{"/work/output/answer.txt"}) {
		t.Errorf("writeTargets = %q", got)
	}
	// eval and a here-document into a shell are nested scripts too.
	if q, ok := ExtractQuery(`eval "curl -s 'https://duckduckgo.com/html/?q=eval+acme'"`); q != "eval acme" || !ok {
		t.Errorf("ExtractQuery through eval = %q, %v", q, ok)
	}
	doc := "bash <<'EOF'\ncd /work\nwget -q -O page.html acme.example/press\nEOF"
	if got, d := ClassifyMove(doc), Domains(doc); got != catalog.MoveFetch || !slices.Equal(d, []string{"acme.example"}) {
		t.Errorf("here-document into bash: %s %q", got, d)
	}
	// Past the nesting bound the innermost code is not read: the shell
	// that runs it is other, and nothing panics.
	deep := "curl -s https://www.bing.com/search?q=deep"
	for range 3 {
		deep = "bash -c " + shellQuote(deep)
	}
	if got := ClassifyMove(deep); got != catalog.MoveSearch {
		t.Errorf("ClassifyMove three shells deep = %s, want search", got)
	}
	for range maxNesting {
		deep = "bash -c " + shellQuote(deep)
	}
	if got := ClassifyMove(deep); got != catalog.MoveOther {
		t.Errorf("ClassifyMove past the nesting bound = %s, want other", got)
	}
}

// shellQuote quotes s as one single-quoted shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// A here-document into python is the program python runs, for every
// helper; so is text echoed into it.
func TestHeredocIntoPython(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want catalog.MoveType
	}{
		{"python3 - <<'EOF'\nimport math\nprint(math.factorial(20))\nEOF", catalog.MoveCompute},
		{"python3 <<EOF\nimport json\nprint(json.load(open('/work/a.json')))\nEOF", catalog.MoveExtract},
		{"python3 - <<'PY'\nopen('/work/output/report.md', 'w').write('x')\nPY", catalog.MoveWrite},
		{"python3 - <<'EOF' > /work/x.txt\nimport requests\nprint(requests.get('https://acme.example/').text)\nEOF", catalog.MoveFetch},
		{"python3 <<< 'print(6*7)'", catalog.MoveCompute},
		{`echo "print(6*7)" | python3`, catalog.MoveCompute},
		{"python3 /work/run.py <<'EOF'\nprint(6*7)\nEOF", catalog.MoveOther}, // the script reads the here-document
	} {
		if got := ClassifyMove(tt.cmd); got != tt.want {
			t.Errorf("ClassifyMove(%q) = %s, want %s", tt.cmd, got, tt.want)
		}
	}
	cmd := "python3 - <<'PY'\nimport requests\nr = requests.get('https://en.wikipedia.org/w/api.php?action=query&list=search&srsearch=Ada+Lovelace&format=json')\nprint(r.json())\nPY"
	if q, ok := ExtractQuery(cmd); q != "Ada Lovelace" || !ok {
		t.Errorf("ExtractQuery = %q, %v", q, ok)
	}
	if d := Domains(cmd); !slices.Equal(d, []string{"en.wikipedia.org"}) {
		t.Errorf("Domains = %q", d)
	}
	if got, ok := finalizationTarget("python3 - <<'PY'\nopen('/work/output/report.md', 'w').write('x')\nPY"); got != "/work/output/report.md" || !ok {
		t.Errorf("finalizationTarget = %q, %v", got, ok)
	}
}

// A command that does not parse as shell is other, issues no query and
// writes no deliverable, but its http(s) URLs still reach the domain
// ledger.
func TestUnparseableCommand(t *testing.T) {
	for _, cmd := range []string{
		`curl -s "https://www.bing.com/search?q=acme+widget`,                                                           // unclosed quote
		"cat > /work/output/final.md <<EOF\nsee https://acme.example/widget-2 and (http://news.example.org/a.\nEOF\n)", // a stray )
		`echo it's https://acme.example/widget-2 > /work/answer.txt`,
		"<html><a href='https://acme.example/widget-2'>x</a></html>",
	} {
		if r := read(cmd); r.parsed {
			t.Fatalf("%q parses", cmd)
		}
		if got := ClassifyMove(cmd); got != catalog.MoveOther {
			t.Errorf("ClassifyMove(%q) = %s, want other", cmd, got)
		}
		if q, ok := ExtractQuery(cmd); ok {
			t.Errorf("ExtractQuery(%q) = %q", cmd, q)
		}
		if got, ok := finalizationTarget(cmd); ok {
			t.Errorf("finalizationTarget(%q) = %q", cmd, got)
		}
		if got := FailureType(cmd, catalog.ToolFinished{ExitCode: 22}); got != "exit_22" {
			t.Errorf("FailureType(%q) = %q, want exit_22 (no download is known to run)", cmd, got)
		}
	}
	if got := URLs(`curl -s "https://www.bing.com/search?q=acme+widget`); !slices.Equal(got, []string{"https://www.bing.com/search?q=acme+widget"}) {
		t.Errorf("URLs = %q", got)
	}
	cmd := "cat > /work/output/final.md <<EOF\nsee https://acme.example/widget-2 and (http://news.example.org/a.\nEOF\n)"
	if got := URLs(cmd); !slices.Equal(got, []string{"https://acme.example/widget-2", "http://news.example.org/a"}) {
		t.Errorf("URLs = %q", got)
	}
	if got := Domains(cmd); !slices.Equal(got, []string{"acme.example", "news.example.org"}) {
		t.Errorf("Domains = %q", got)
	}
	// A here-document left open at the end is read to the end, as bash
	// runs it.
	open := "cat > /work/output/final.md <<EOF\nsee https://acme.example/widget-2\n"
	if got, ok := finalizationTarget(open); got != "/work/output/final.md" || !ok {
		t.Errorf("finalizationTarget(open here-document) = %q, %v", got, ok)
	}
	// Nested code that does not parse makes only its shell other.
	if got := ClassifyMove(`bash -c "echo 'unclosed"`); got != catalog.MoveOther {
		t.Errorf("unparseable bash -c = %s, want other", got)
	}
	if got := ClassifyMove(`curl -s https://acme.example/ && bash -c "echo 'unclosed"`); got != catalog.MoveFetch {
		t.Errorf("fetch beside unparseable bash -c = %s, want fetch", got)
	}
}

// The ledger reads the commands internal/shell unwraps and the ones they
// run by argument vector.
func TestWrappersAndRunners(t *testing.T) {
	for _, tt := range []struct {
		cmd  string
		want catalog.MoveType
	}{
		{`FOO=1 env -C /work LANG=C nice -n 5 curl -s https://acme.example/`, catalog.MoveFetch},
		{`/usr/bin/Curl -s https://acme.example/`, catalog.MoveFetch},
		{`find /work -type f -name '*.pdf' -exec sha256sum {} +`, catalog.MoveVerify},
		{`find /work -type f -exec sha256sum {} \;`, catalog.MoveVerify},
		{`ls /work/*.txt | xargs cat`, catalog.MoveRead},
		{`echo https://acme.example/a | xargs -I{} curl -s {}`, catalog.MoveFetch},
		{`command -v curl`, catalog.MoveOther},
		{`perl -pi -e 's/a/b/' /work/draft.md`, catalog.MoveWrite},
		{`{ echo "# Report"; echo "none"; } > /work/output/report.md`, catalog.MoveWrite},
		{`let n=6*7`, catalog.MoveCompute},
	} {
		if got := ClassifyMove(tt.cmd); got != tt.want {
			t.Errorf("ClassifyMove(%q) = %s, want %s", tt.cmd, got, tt.want)
		}
	}
	if u := URLs(`echo https://acme.example/a | xargs -I{} curl -s {}`); !slices.Equal(u, []string{"https://acme.example/a"}) {
		t.Errorf("URLs through xargs -I = %q", u)
	}
	// An item xargs reads from a file is not a query.
	if q, ok := ExtractQuery(`cat terms.txt | xargs -I{} rg {} /input`); ok {
		t.Errorf("ExtractQuery of unknown xargs items = %q", q)
	}
	if q, ok := ExtractQuery(`echo widget | xargs -I{} rg {} /input`); q != "widget" || !ok {
		t.Errorf("ExtractQuery of known xargs items = %q, %v", q, ok)
	}
	// The literal of a query built by a backquoted substitution.
	if q, ok := ExtractQuery("curl -s \"https://duckduckgo.com/html/?q=`echo 'acme widget' | tr ' ' +`\""); q != "acme widget" || !ok {
		t.Errorf("ExtractQuery with backquotes = %q, %v", q, ok)
	}
}
