package ledger

import (
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/vera-run/vera/bus/catalog"
	sh "github.com/vera-run/vera/internal/shell"
)

// neutral is the internal class of a step that does not say what kind of
// move a command is (cd, export, echo without redirection, a head or sort
// filter in a pipe, bash -c whose code says it…). A command made only of
// neutral steps is catalog.MoveOther.
const neutral catalog.MoveType = ""

// moveRank orders the move types for ClassifyMove: a command is typed by
// the highest-ranked type among its steps.
var moveRank = map[catalog.MoveType]int{
	catalog.MoveInstall: 9,
	catalog.MoveVerify:  8,
	catalog.MoveSearch:  7,
	catalog.MoveFetch:   6,
	catalog.MoveWrite:   5,
	catalog.MoveCompute: 4,
	catalog.MoveExtract: 3,
	catalog.MoveRead:    2,
	catalog.MoveOther:   1,
	neutral:             0,
}

// ClassifyMove types a shell command for the move ledger.
//
// The command is read once through internal/shell (see read): each
// simple command it runs, past wrappers such as sudo, env, timeout or
// xargs, is typed on its own, and so are the commands it runs in turn —
// command substitutions, the code of bash -c, sh -c, eval and of a
// here-document into a shell, find -exec — at any depth up to
// maxNesting:
//
//   - install: pip/pip3/pipx/uv/conda/mamba install, python -m pip install,
//     apt/apt-get/aptitude/yum/dnf/zypper install (and apt-get update),
//     apk add, npm/pnpm/yarn install|i|add|ci, gem/cargo/go/brew install,
//     playwright install, dpkg -i, make install, and a download piped into
//     a shell (curl … | sh);
//   - verify: sha*sum, md5sum, cksum, b2sum, diff, cmp, git diff, gpg
//     --verify, openssl dgst, curl -I/--head or a status-only curl (-o
//     /dev/null -w …http_code…), wget --spider;
//   - search: a download tool (curl, wget, lynx, w3m, links, elinks,
//     httpie, xh, aria2c) or inline code fetching a URL that carries a
//     search query (see ExtractQuery), ddgr/googler, gh search, apt-cache
//     search, grep -r, rg, ag, ack, find -name/-path/-regex, locate;
//   - fetch: any other use of those download tools, inline code using an
//     HTTP library on a URL, git clone/fetch/pull, yt-dlp;
//   - write: output redirected into a file (not /dev/*) by a command that
//     only produces text or reads files (echo, printf, cat, here-documents),
//     tee to a file, cp, mv, mkdir, touch, ln, truncate, dd, sed -i, perl
//     -i, and inline code that writes files (open(…, 'w'), to_csv,
//     savefig…);
//   - compute: bc, dc, expr, units, qalc, let, echo $((…)), awk 'BEGIN{…}'
//     with no input, and inline code (python -c CODE or -c'CODE', python -
//     <<EOF, echo CODE | python3, node -e, … as shell.InlineCode finds it)
//     doing arithmetic or using math, numpy, sympy, statistics…;
//   - extract: grep without -r, jq, yq, awk, sed (other than sed -n N,Mp on
//     files and sed -i), cut, tr, sort, uniq, wc, pdftotext, html2text,
//     pandoc, xmllint, pup, htmlq, csvkit, mlr, python -m json.tool, perl
//     -ne, and inline code that parses (json, re, bs4, lxml, csv, pandas,
//     sys.stdin, open(…) for reading);
//   - read: cat, head, tail, less, more, nl, bat, od, xxd, zcat with file
//     arguments, sed -n N,Mp on files, ls, tree, stat, file, du, find
//     without a name test;
//   - other: everything else (a script file run by python or bash, rm,
//     tar, chmod…, shell code that does not parse), commands made only of
//     neutral parts (cd, export, echo without redirection…), and a command
//     that does not parse as shell at all.
//
// Precedence: the command's type is the highest of its parts in the order
// install > verify > search > fetch > write > compute > extract > read >
// other. So curl URL | grep x is a fetch (the network is where the new
// information comes from), curl URL | sha256sum a verify, pip install x &&
// python -c … an install, cat f | jq .a an extract, and curl URL >
// /work/page.html stays a fetch: only text producers and file readers
// become writes by redirection, while jq … > out.json stays an extract.
func ClassifyMove(cmd string) catalog.MoveType {
	return read(cmd).move()
}

// move is ClassifyMove of a reading.
func (r *reading) move() catalog.MoveType {
	best := neutral
	r.walk(func(s *step) bool {
		if t := classifyStep(s); moveRank[t] > moveRank[best] {
			best = t
		}
		return true
	})
	if best == neutral {
		return catalog.MoveOther
	}
	return best
}

func isPython(n string) bool {
	return n == "py" || sh.Interpreter(n) == "python"
}

func (s *step) network() bool { return networkTools[s.name] }

var networkTools = map[string]bool{
	"curl": true, "wget": true, "lynx": true, "w3m": true, "links": true, "elinks": true,
	"http": true, "https": true, "xh": true, "xhs": true, "aria2c": true, "curlie": true,
}

var (
	readers = map[string]bool{
		"cat": true, "head": true, "tail": true, "less": true, "more": true, "most": true,
		"nl": true, "bat": true, "batcat": true, "view": true, "od": true, "xxd": true,
		"hexdump": true, "zcat": true, "zless": true, "bzcat": true, "xzcat": true, "tac": true,
	}
	listers    = map[string]bool{"ls": true, "tree": true, "stat": true, "file": true, "du": true, "exa": true, "eza": true, "pdfinfo": true}
	extractors = map[string]bool{
		"grep": true, "egrep": true, "fgrep": true, "zgrep": true, "jq": true, "yq": true, "xq": true,
		"gojq": true, "jaq": true, "cut": true, "tr": true, "sort": true, "uniq": true, "wc": true,
		"column": true, "paste": true, "join": true, "comm": true, "xmllint": true, "xmlstarlet": true,
		"xpath": true, "pup": true, "htmlq": true, "hxselect": true, "hxnormalize": true,
		"html2text": true, "pandoc": true, "pdftotext": true, "pdfgrep": true, "strings": true,
		"csvcut": true, "csvgrep": true, "csvlook": true, "csvjson": true, "csvstat": true, "in2csv": true,
		"mlr": true, "xsv": true, "qsv": true, "fold": true, "fmt": true, "iconv": true, "base64": true,
		"gawk": true, "mawk": true, "nawk": true, "awk": true, "sed": true, "gsed": true, "perl": true,
		"readability": true, "trafilatura": true, "markitdown": true,
	}
	computers = map[string]bool{"bc": true, "dc": true, "expr": true, "units": true, "qalc": true, "calc": true, "let": true, "factor": true}
	verifiers = map[string]bool{
		"sha256sum": true, "sha1sum": true, "sha512sum": true, "sha224sum": true, "sha384sum": true,
		"md5sum": true, "cksum": true, "b2sum": true, "shasum": true, "diff": true, "cmp": true,
		"colordiff": true, "sdiff": true, "md5": true,
	}
	fileWriters = map[string]bool{
		"cp": true, "mv": true, "mkdir": true, "touch": true, "ln": true, "truncate": true,
		"dd": true, "install": true, "rsync": true, "patch": true,
	}
	// neutralNames neither read nor write anything the ledger cares about.
	neutralNames = map[string]bool{
		"": true, "cd": true, "pushd": true, "popd": true, "export": true, "set": true, "unset": true,
		"source": true, ".": true, "true": true, "false": true, ":": true, "sleep": true, "pwd": true,
		"echo": true, "printf": true, "clear": true, "which": true, "type": true, "alias": true,
		"fi": true, "done": true, "esac": true, "for": true, "case": true, "wait": true, "date": true,
		"whoami": true, "id": true, "hash": true, "ulimit": true, "umask": true, "shopt": true,
		"test": true, "[": true, "[[": true, "]]": true, "read": true, "exit": true, "return": true,
	}
)

// classifyStep types one step on its own (the commands it runs are typed
// as steps of their own); neutral when it says nothing.
func classifyStep(s *step) catalog.MoveType {
	t := classifyCommand(s)
	if t == neutral && s.unread {
		t = catalog.MoveOther // it runs shell code that could not be read
	}
	// A download piped into a shell or an interpreter is an install script.
	if p := s.pipeFrom; p != nil && s.piped() && p.network() && (sh.Shells[s.name] || (isPython(s.name) && len(s.args) == 0)) {
		t = catalog.MoveInstall
	}
	// Redirecting a text producer or a file reader into a file is a write.
	if (t == neutral || t == catalog.MoveRead) && len(s.stdoutFiles()) > 0 {
		return catalog.MoveWrite
	}
	return t
}

func classifyCommand(s *step) catalog.MoveType {
	name, args := s.name, s.args
	switch {
	case s.runsCode():
		return neutral // its nested steps say what it does
	case sh.Shells[name]:
		if _, ok, stdin := sh.ShellScript(args); !ok && !stdin {
			return catalog.MoveOther // a script file
		}
		return neutral
	case installs(name, args):
		return catalog.MoveInstall
	case verifiers[name]:
		return catalog.MoveVerify
	case name == "gpg" || name == "gpg2":
		if slices.Contains(args, "--verify") {
			return catalog.MoveVerify
		}
		return catalog.MoveOther
	case name == "openssl":
		if len(args) > 0 && (args[0] == "dgst" || args[0] == "verify") {
			return catalog.MoveVerify
		}
		return catalog.MoveOther
	case networkTools[name]:
		d := downloadArgs(name, args)
		switch {
		case d.head:
			return catalog.MoveVerify
		case d.query != "":
			return catalog.MoveSearch
		}
		return catalog.MoveFetch
	case name == "ddgr" || name == "googler" || name == "locate" || name == "plocate" || name == "mlocate":
		return catalog.MoveSearch
	case name == "apt-cache" || name == "apt" || name == "pip" || name == "pip3" || name == "npm" || name == "gh":
		if len(args) > 0 && args[0] == "search" {
			return catalog.MoveSearch
		}
		if name == "gh" && len(args) > 0 && (args[0] == "api" || args[0] == "release" || args[0] == "repo") {
			return catalog.MoveFetch
		}
		return catalog.MoveOther
	case name == "git":
		return classifyGit(args)
	case name == "yt-dlp" || name == "youtube-dl" || name == "svn":
		return catalog.MoveFetch
	case name == "rg" || name == "ag" || name == "ack" || name == "ack-grep":
		return catalog.MoveSearch
	case name == "grep" || name == "egrep" || name == "fgrep" || name == "pdfgrep":
		if grepRecursive(args) {
			return catalog.MoveSearch
		}
		return catalog.MoveExtract
	case name == "find" || name == "fd" || name == "fdfind":
		if name != "find" || findPattern(args) != "" {
			return catalog.MoveSearch
		}
		return catalog.MoveRead
	case name == "sed" || name == "gsed":
		return classifySed(args)
	case name == "awk" || name == "gawk" || name == "mawk" || name == "nawk":
		if awkCompute(s) {
			return catalog.MoveCompute
		}
		return catalog.MoveExtract
	case isPython(name) || sh.Interpreter(name) != "":
		return classifyInterpreter(s)
	case name == "tee":
		if len(nonFlags(args)) > 0 {
			return catalog.MoveWrite
		}
		return neutral
	case name == "echo" || name == "printf":
		for _, a := range args {
			if strings.Contains(a, "$((") {
				return catalog.MoveCompute
			}
		}
		return neutral
	case computers[name]:
		return catalog.MoveCompute
	case fileWriters[name]:
		return catalog.MoveWrite
	case readers[name]:
		if len(fileArgs(name, args)) > 0 && !s.hasStdinDoc() {
			return catalog.MoveRead
		}
		if s.hasStdinFile() {
			return catalog.MoveRead
		}
		return neutral
	case listers[name]:
		return catalog.MoveRead
	case extractors[name]:
		return catalog.MoveExtract
	case neutralNames[name]:
		return neutral
	}
	return catalog.MoveOther
}

// installs reports whether the command installs packages.
func installs(name string, args []string) bool {
	first, second := "", ""
	if len(args) > 0 {
		first = args[0]
	}
	if len(args) > 1 {
		second = args[1]
	}
	switch {
	case strings.HasPrefix(name, "pip") && name != "pipe":
		return first == "install" || (name == "pipx" && (first == "install" || first == "inject"))
	case name == "uv":
		return first == "add" || (first == "pip" || first == "tool") && second == "install"
	case name == "conda" || name == "mamba" || name == "micromamba":
		return first == "install" || first == "create"
	case name == "apt" || name == "apt-get" || name == "aptitude":
		i := slices.IndexFunc(args, func(a string) bool { return !strings.HasPrefix(a, "-") })
		return i >= 0 && (args[i] == "install" || args[i] == "update" || args[i] == "upgrade" || args[i] == "build-dep")
	case name == "yum" || name == "dnf" || name == "zypper" || name == "pacman":
		return first == "install" || first == "in" || first == "-S" || first == "-Sy" || first == "-Syu"
	case name == "apk":
		return first == "add"
	case name == "npm" || name == "pnpm" || name == "yarn" || name == "bun":
		return first == "install" || first == "i" || first == "add" || first == "ci" || (name == "yarn" && first == "")
	case name == "npx" || name == "pnpx":
		return slices.Contains(args, "install") && (slices.Contains(args, "playwright") || slices.Contains(args, "puppeteer"))
	case name == "gem" || name == "cargo" || name == "brew" || name == "playwright" || name == "go":
		return first == "install" || (name == "cargo" && first == "add") || (name == "go" && first == "get")
	case name == "dpkg":
		return first == "-i" || first == "--install"
	case name == "make":
		return slices.Contains(args, "install")
	case isPython(name):
		i := slices.Index(args, "-m")
		return i >= 0 && i+2 < len(args) && args[i+1] == "pip" && args[i+2] == "install"
	}
	return false
}

func classifyGit(args []string) catalog.MoveType {
	i := slices.IndexFunc(args, func(a string) bool { return !strings.HasPrefix(a, "-") })
	if i < 0 {
		return catalog.MoveOther
	}
	switch args[i] {
	case "clone", "fetch", "pull", "ls-remote":
		return catalog.MoveFetch
	case "diff":
		return catalog.MoveVerify
	case "grep":
		return catalog.MoveSearch
	case "log", "show", "status", "blame":
		return catalog.MoveRead
	}
	return catalog.MoveOther
}

var sedLinePrint = regexp.MustCompile(`^\s*(\d+|\$)(\s*,\s*(\d+|\$|\+\d+))?\s*p\s*(;\s*(\d+|\$)(\s*,\s*(\d+|\$|\+\d+))?\s*p\s*)*;?\s*$`)

func classifySed(args []string) catalog.MoveType {
	quiet := false
	var script string
	var files []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-i" || strings.HasPrefix(a, "-i") && !strings.HasPrefix(a, "--") || strings.HasPrefix(a, "--in-place"):
			return catalog.MoveWrite
		case a == "-n" || a == "--quiet" || a == "--silent":
			quiet = true
		case a == "-e" || a == "--expression" || a == "-f" || a == "--file":
			if i+1 < len(args) {
				script += args[i+1] + ";"
				i++
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			if strings.ContainsRune(a[1:], 'i') && !strings.HasPrefix(a, "--") {
				return catalog.MoveWrite
			}
			if strings.ContainsRune(a[1:], 'n') && !strings.HasPrefix(a, "--") {
				quiet = true
			}
		default:
			if script == "" {
				script = a
			} else {
				files = append(files, a)
			}
		}
	}
	if quiet && len(files) > 0 && sedLinePrint.MatchString(strings.TrimSuffix(script, ";")) {
		return catalog.MoveRead
	}
	return catalog.MoveExtract
}

// awkCompute reports an awk program that only computes: a BEGIN block,
// no input file and no piped or redirected input.
func awkCompute(s *step) bool {
	args := s.args
	var prog string
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if prog == "" && (a == "-F" || a == "-v" || a == "-f") {
			i++
			continue
		}
		if prog == "" && strings.HasPrefix(a, "-") && len(a) > 1 {
			continue
		}
		if prog == "" {
			prog = a
			continue
		}
		rest = append(rest, a)
	}
	p := strings.TrimSpace(prog)
	if !strings.HasPrefix(p, "BEGIN") || s.piped() || s.hasStdinFile() || s.hasStdinDoc() {
		return false
	}
	if len(rest) > 0 || strings.Contains(p, "getline") {
		return false
	}
	// Only a BEGIN block: nothing after its closing brace.
	open := strings.IndexByte(p, '{')
	return open >= 0 && awkBlockEnd(p, open) == len(p)
}

// awkBlockEnd returns the index after the brace closing the awk block
// that opens at p[open], skipping awk's string literals; len(p) when it is
// not closed.
func awkBlockEnd(p string, open int) int {
	depth := 0
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '"':
			for i++; i < len(p) && p[i] != '"'; i++ {
				if p[i] == '\\' {
					i++
				}
			}
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(p)
}

// grepRecursive reports grep -r/-R/--recursive.
func grepRecursive(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--recursive" || a == "--dereference-recursive" || a == "--directories=recurse" {
			return true
		}
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && strings.ContainsAny(a[1:], "rR") {
			return true
		}
	}
	return false
}

// Options taking a value, per command, for file-argument detection.
var valuedOpts = map[string]string{
	"head": "nc", "tail": "ncs", "less": "xyzb", "cat": "", "nl": "bdfhilnpsvw", "od": "AjNtw",
	"xxd": "cglos", "bat": "lLHmr", "batcat": "lLHmr",
}

// fileArgs returns the file arguments of a reader command.
func fileArgs(name string, args []string) []string {
	valued := valuedOpts[name]
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-" {
			continue
		}
		if strings.HasPrefix(a, "--") {
			continue
		}
		if strings.HasPrefix(a, "-") && len(a) > 1 {
			if strings.Trim(a[1:], "0123456789") == "" { // head -20
				continue
			}
			if strings.IndexByte(valued, a[len(a)-1]) >= 0 && len(a) == 2 {
				i++
			}
			continue
		}
		if strings.HasPrefix(a, "+") && (name == "tail" || name == "less") {
			continue
		}
		out = append(out, a)
	}
	return out
}

func nonFlags(args []string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			out = append(out, a)
		}
	}
	return out
}

// Inline code of interpreters.
var (
	codeHTTP      = regexp.MustCompile(`\b(requests|urllib|httpx|aiohttp|http\.client|urlopen|fetch\s*\(|axios|playwright|selenium|pyppeteer|LWP|HTTP::Tiny|open-uri|Net::HTTP|file_get_contents|download\.file|HTTP\.get|curl_)`)
	codeWrite     = regexp.MustCompile(`open\s*\([^)]*,\s*['"][wax]b?\+?['"]|\.write_text\(|\.write_bytes\(|\.to_csv\(|\.to_excel\(|\.to_json\(|\.to_parquet\(|savefig\(|json\.dump\(|writeFileSync|writeFile\(|write\.csv|\bFile\.write|fs\.write|\.save\(\s*['"]`)
	codeParse     = regexp.MustCompile(`\b(json\.loads?|re\.(search|findall|match|sub|finditer|compile|split)|BeautifulSoup|bs4|lxml|html\.parser|HTMLParser|csv\.|pandas|pd\.read_|read_csv|sys\.stdin|yaml\.|xml\.|ElementTree|pypdf|PyPDF2|pdfplumber|fitz|\.read\(\)|readlines|open\s*\(|JSON\.parse|split\(|\.find\(|\.select\(|xpath)`)
	codeMath      = regexp.MustCompile(`\b(math\.|import math|numpy|np\.|sympy|scipy|statistics|decimal|Decimal|fractions|Fraction|sum\(|round\(|sqrt|log\(|exp\(|pow\(|abs\(|mean|median|stdev|Math\.)`)
	codeArith     = regexp.MustCompile(`\d\s*(\*\*|[-+*/%])\s*[\d(]`)
	codeSearchKey = regexp.MustCompile(`['"](q|query|search|wd|srsearch|search_query)['"]\s*:\s*['"]([^'"]+)['"]`)
)

// classifyInterpreter types an interpreter step by the program it runs
// (shell.InlineCode): python -m json.tool extracts, perl filters (-n, -p,
// a script) extract and perl -i writes, inline code is typed by what it
// does (classifyCode), and a script file or another module is other.
func classifyInterpreter(s *step) catalog.MoveType {
	in, _ := s.inline()
	perl := in.Lang == "perl"
	switch {
	case in.Module != "":
		if in.Module == "json.tool" {
			return catalog.MoveExtract
		}
		return catalog.MoveOther
	case perl && in.InPlace:
		return catalog.MoveWrite
	case len(in.Codes) == 0:
		if perl {
			return catalog.MoveExtract
		}
		return catalog.MoveOther
	}
	t := classifyCode(strings.Join(in.Codes, "\n"))
	if t == catalog.MoveOther && perl {
		return catalog.MoveExtract // perl -ne/-pe filters
	}
	return t
}

// code returns the inline code of an interpreter step, and whether there
// is any.
func (s *step) code() (string, bool) {
	if !isPython(s.name) && sh.Interpreter(s.name) == "" {
		return "", false
	}
	in, _ := s.inline()
	if len(in.Codes) == 0 {
		return "", false
	}
	return strings.Join(in.Codes, "\n"), true
}

// classifyCode types inline program text.
func classifyCode(code string) catalog.MoveType {
	if codeHTTP.MatchString(code) {
		for _, u := range sh.TextURLs(code) {
			if _, ok := searchQueryFromURL(u); ok {
				return catalog.MoveSearch
			}
		}
		if codeSearchKey.MatchString(code) && engineInText(code) {
			return catalog.MoveSearch
		}
		if len(sh.TextURLs(code)) > 0 || strings.Contains(code, "url") || strings.Contains(code, "URL") {
			return catalog.MoveFetch
		}
	}
	switch {
	case codeWrite.MatchString(code):
		return catalog.MoveWrite
	case codeMath.MatchString(code) && !codeParse.MatchString(code):
		return catalog.MoveCompute
	case codeParse.MatchString(code):
		return catalog.MoveExtract
	case codeArith.MatchString(code):
		return catalog.MoveCompute
	}
	return catalog.MoveOther
}

func engineInText(code string) bool {
	for _, u := range sh.TextURLs(code) {
		if IsSearchEngine(u) {
			return true
		}
	}
	return false
}

// download is what a download tool's arguments say.
type download struct {
	urls  []string
	head  bool   // a HEAD request or a status-only check
	query string // a search query (URL parameter or form data)
}

// Options of curl and wget that take a value (short letters; long names).
const curlShortValued = "AbcdDeEFHKmorTuUwxXyYzCPQt"

var (
	curlLongValued = map[string]bool{
		"--data": true, "--data-raw": true, "--data-binary": true, "--data-urlencode": true, "--data-ascii": true,
		"--json": true, "--header": true, "--user-agent": true, "--referer": true, "--output": true,
		"--max-time": true, "--connect-timeout": true, "--retry": true, "--retry-delay": true,
		"--retry-max-time": true, "--cookie": true, "--cookie-jar": true, "--user": true, "--proxy": true,
		"--request": true, "--write-out": true, "--form": true, "--form-string": true, "--upload-file": true,
		"--range": true, "--cert": true, "--cacert": true, "--key": true, "--resolve": true, "--limit-rate": true,
		"--max-filesize": true, "--output-dir": true, "--config": true, "--dump-header": true, "--interface": true,
		"--max-redirs": true, "--proto": true, "--proto-redir": true, "--noproxy": true, "--socks5": true,
		"--socks5-hostname": true, "--ciphers": true, "--speed-limit": true, "--speed-time": true,
		"--keepalive-time": true, "--dns-servers": true, "--tls-max": true, "--stderr": true, "--trace": true,
		"--trace-ascii": true, "--variable": true, "--expand-url": true, "--aws-sigv4": true, "--oauth2-bearer": true,
	}
	wgetShortValued = "OoaUTtPewQBlARDIXi"
	wgetLongValued  = map[string]bool{
		"--header": true, "--user-agent": true, "--output-document": true, "--output-file": true,
		"--timeout": true, "--tries": true, "--directory-prefix": true, "--post-data": true, "--body-data": true,
		"--method": true, "--wait": true, "--level": true, "--referer": true, "--load-cookies": true,
		"--save-cookies": true, "--user": true, "--password": true, "--input-file": true, "--accept": true,
		"--reject": true, "--domains": true, "--execute": true, "--append-output": true, "--post-file": true,
	}
	bareHost = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]*(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}(:\d+)?([/?#].*)?$`)
)

// downloadArgs reads the arguments of a download tool.
func downloadArgs(name string, args []string) download {
	var d download
	shortValued, longValued := "", map[string]bool(nil)
	switch name {
	case "curl", "curlie":
		shortValued, longValued = curlShortValued, curlLongValued
	case "wget":
		shortValued, longValued = wgetShortValued, wgetLongValued
	case "aria2c":
		shortValued = "odxsjU"
	}
	var data []string // name=value pairs sent as form data
	get, nullOut, statusOut := false, false, false
	addURL := func(a string) {
		if strings.Contains(a, "://") || bareHost.MatchString(a) {
			d.urls = append(d.urls, a)
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case strings.HasPrefix(a, "--"):
			opt, val, hasVal := strings.Cut(a, "=")
			if !hasVal && longValued[opt] && i+1 < len(args) {
				val = args[i+1]
				i++
			}
			switch opt {
			case "--head", "--spider":
				d.head = true
			case "--get":
				get = true
			case "--url":
				addURL(val)
			case "--output", "--output-document":
				nullOut = nullOut || val == "/dev/null"
			case "--write-out":
				statusOut = statusOut || strings.Contains(val, "http_code") || strings.Contains(val, "response_code")
			case "--data-urlencode":
				data = append(data, "\x00"+val)
			case "--data", "--data-raw", "--data-ascii", "--post-data":
				data = append(data, val)
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for j := 1; j < len(a); j++ {
				c := a[j]
				if strings.IndexByte(shortValued, c) < 0 {
					switch {
					case c == 'I' && name != "wget":
						d.head = true
					case c == 'G' && name != "wget":
						get = true
					}
					continue
				}
				val := a[j+1:]
				if val == "" && i+1 < len(args) {
					val = args[i+1]
					i++
				}
				switch {
				case c == 'o' && name != "wget", c == 'O' && name == "wget":
					nullOut = nullOut || val == "/dev/null"
				case c == 'w' && name != "wget":
					statusOut = statusOut || strings.Contains(val, "http_code") || strings.Contains(val, "response_code")
				case c == 'd' && name != "wget":
					data = append(data, val)
				}
				break
			}
		default:
			if (name == "http" || name == "https" || name == "xh" || name == "xhs") && strings.Contains(a, "==") {
				k, v, _ := strings.Cut(a, "==")
				data = append(data, "\x00"+k+"="+v)
				get = true
				continue
			}
			addURL(a)
		}
	}
	if nullOut && statusOut {
		d.head = true
	}
	for _, u := range d.urls {
		if q, ok := searchQueryFromURL(u); ok {
			d.query = q
			return d
		}
	}
	if len(data) > 0 && len(d.urls) > 0 && (get || IsSearchEngine(d.urls[0])) {
		vals := url.Values{}
		for _, p := range data {
			if raw, ok := strings.CutPrefix(p, "\x00"); ok {
				k, v, _ := strings.Cut(raw, "=")
				vals.Add(k, v)
				continue
			}
			if pv, err := url.ParseQuery(p); err == nil {
				for k, vs := range pv {
					for _, v := range vs {
						vals.Add(k, v)
					}
				}
			}
		}
		if q, ok := queryParam(vals, Host(d.urls[0]), ""); ok {
			d.query = q
		}
	}
	return d
}

// URLs returns the URLs a command targets: the URL arguments of download
// tools (also bare host names such as example.com/page given to them) and
// the http(s) URLs written anywhere else in it (inline code, here-documents,
// git clone…), without duplicates (a URL that is the start of one already
// found, as a $(…) cut at a space leaves, is dropped). Each command comes
// with its download arguments first, then the commands it runs (bash -c,
// substitutions…), then the URLs written in its words. A command that does
// not parse as shell still gives the http(s) URLs written in it.
func URLs(cmd string) []string {
	return read(cmd).urls()
}

// urls is URLs of a reading.
func (r *reading) urls() []string {
	var out []string
	add := func(u string) {
		u = strings.TrimRight(u, ".,;:")
		if u == "" {
			return
		}
		for _, o := range out {
			if strings.HasPrefix(o, u) {
				return
			}
		}
		out = append(out, u)
	}
	if !r.parsed {
		for _, u := range sh.TextURLs(r.src) {
			add(u)
		}
		return out
	}
	var visit func([]*step)
	visit = func(steps []*step) {
		for _, s := range steps {
			if s.network() {
				for _, u := range downloadArgs(s.name, s.args).urls {
					add(u)
				}
			}
			visit(s.kids)
			for _, t := range s.texts() {
				for _, u := range sh.TextURLs(t) {
					add(u)
				}
			}
		}
	}
	visit(r.steps)
	return out
}

// SourceURL returns the URL a reader proxy or an archive wraps
// (https://r.jina.ai/https://acme.example/x, https://web.archive.org/web/2025/https://acme.example/x
// → https://acme.example/x): the URL written in the path after the first
// one's host; raw itself when there is none (a URL in the query string, a
// redirect parameter, is not unwrapped).
func SourceURL(raw string) string {
	for depth := 0; depth < 4; depth++ {
		_, rest, ok := strings.Cut(raw, "://")
		if !ok {
			return raw
		}
		slash := strings.IndexByte(rest, '/')
		if slash < 0 {
			return raw
		}
		tail := rest[slash:]
		i := strings.Index(tail, "http://")
		if j := strings.Index(tail, "https://"); j >= 0 && (i < 0 || j < i) {
			i = j
		}
		if i < 0 || strings.ContainsAny(tail[:i], "?#") {
			return raw // none, or in the query (a redirect parameter)
		}
		raw = tail[i:]
	}
	return raw
}

// Domains returns the lower-cased hosts of the command's URLs (see URLs),
// and of the sources they wrap (see SourceURL), sorted and without
// duplicates: the domains of a catalog.LedgerMove.
func Domains(cmd string) []string {
	return read(cmd).domains()
}

// domains is Domains of a reading.
func (r *reading) domains() []string {
	var out []string
	for _, u := range r.urls() {
		for _, x := range []string{u, SourceURL(u)} {
			if h := Host(x); h != "" {
				out = append(out, h)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Outcome is the ledger outcome of a finished tool call: denied when a
// deny rule or gate stopped it, timeout when it was killed at its
// timeout, failure on a non-zero exit (or -1: did not run to an exit),
// empty when it exited 0 with no output, success otherwise.
func Outcome(exitCode int, stdoutBytes int64, timedOut, denied bool) catalog.LedgerOutcome {
	switch {
	case denied:
		return catalog.LedgerDenied
	case timedOut:
		return catalog.LedgerTimeout
	case exitCode != 0:
		return catalog.LedgerFailure
	case stdoutBytes <= 0:
		return catalog.LedgerEmpty
	}
	return catalog.LedgerSuccess
}

// OutcomeOf is Outcome for a vera.tool.finished. Interrupted commands and
// sandbox errors are failures; stdout made only of white space is empty.
func OutcomeOf(f catalog.ToolFinished) catalog.LedgerOutcome {
	n := f.Stdout.Bytes
	if !f.Stdout.Truncated && f.Stdout.Encoding == "" && strings.TrimSpace(f.Stdout.Head) == "" && n <= int64(len(f.Stdout.Head)) {
		n = 0
	}
	exit := f.ExitCode
	if (f.Interrupted || f.Error != "") && exit == 0 {
		exit = -1
	}
	return Outcome(exit, n, f.TimedOut, f.Denied)
}

// Failure types: what FailureType reports.
var (
	botBlockRe   = regexp.MustCompile(`(?i)<title>\s*just a moment|cf-chl|captcha|are you a robot|unusual traffic`)
	httpTitleRe  = regexp.MustCompile(`(?i)<title>\s*(4\d\d|5\d\d)\b`)
	httpStatusRe = regexp.MustCompile(`(?i)(?:HTTP/[0-9.]+\s+|ERROR\s+|returned error:\s*|status(?: code)?[:= ]+|<title>\s*)(4\d\d|5\d\d)\b`)
	failurePats  = []struct {
		re  *regexp.Regexp
		typ string
	}{
		{regexp.MustCompile(`(?i)command not found|not found in \$?PATH|executable file not found`), "command_not_found"},
		{regexp.MustCompile(`(?i)could not resolve host|name or service not known|temporary failure in name resolution|unable to resolve host`), "dns_error"},
		{regexp.MustCompile(`(?i)connection refused|failed to connect|network is unreachable|no route to host`), "connection_error"},
		{regexp.MustCompile(`(?i)\bssl\b|SSL_ERROR|certificate verify failed|tls handshake`), "tls_error"},
		{regexp.MustCompile(`(?i)operation timed out|timed out after|read timeout|connecttimeout`), "timeout"},
		{regexp.MustCompile(`ModuleNotFoundError|ImportError|No module named`), "module_not_found"},
		{regexp.MustCompile(`SyntaxError|IndentationError|syntax error`), "syntax_error"},
		{regexp.MustCompile(`(?i)no such file or directory|cannot open|can't open`), "no_such_file"},
		{regexp.MustCompile(`(?i)permission denied|operation not permitted|read-only file system`), "permission_denied"},
		{regexp.MustCompile(`Traceback \(most recent call last\)`), "python_error"},
	}
)

// FailureType names why a finished tool call failed, for the failure
// escalation rule: timeout, denied, interrupted, sandbox_error,
// command_not_found (exit 127 or the message), http_NNN (an HTTP status
// ≥ 400 in the output or curl's exit 22), dns_error, connection_error,
// tls_error, module_not_found, syntax_error, no_such_file,
// permission_denied, bot_block (a challenge page, even with exit 0),
// python_error, no_match (a grep-like search or extract that exited 1
// silently), empty_output (a search, fetch or extract that printed
// nothing) or exit_N. It returns "" for a call that did not fail.
func FailureType(cmd string, f catalog.ToolFinished) string {
	return read(cmd).failureType(f)
}

// failureType is FailureType of a reading.
func (r *reading) failureType(f catalog.ToolFinished) string {
	text := f.Stderr.Head + "\n" + f.Stderr.Tail + "\n" + f.Stdout.Head + "\n" + f.Stdout.Tail
	switch {
	case f.Denied:
		return "denied"
	case f.TimedOut:
		return "timeout"
	case f.Interrupted:
		return "interrupted"
	case f.Error != "":
		return "sandbox_error"
	}
	if f.ExitCode == 0 {
		head := f.Stdout.Head
		if len(head) > 4096 {
			head = head[:4096]
		}
		if botBlockRe.MatchString(head) {
			return "bot_block"
		}
		if m := httpTitleRe.FindStringSubmatch(head); m != nil {
			return "http_" + m[1]
		}
		if OutcomeOf(f) == catalog.LedgerEmpty {
			switch r.move() {
			case catalog.MoveSearch, catalog.MoveFetch, catalog.MoveExtract:
				return "empty_output"
			}
		}
		return ""
	}
	if f.ExitCode == 127 {
		return "command_not_found"
	}
	if f.ExitCode == 1 && strings.TrimSpace(text) == "" {
		switch r.move() {
		case catalog.MoveSearch, catalog.MoveExtract:
			return "no_match" // grep found nothing
		}
	}
	if m := httpStatusRe.FindStringSubmatch(text); m != nil {
		return "http_" + m[1]
	}
	for _, p := range failurePats {
		if p.re.MatchString(text) {
			return p.typ
		}
	}
	if f.ExitCode == 22 && r.network() {
		return "http_error"
	}
	if f.ExitCode == 28 && r.network() {
		return "timeout"
	}
	if f.ExitCode == 6 && r.network() {
		return "dns_error"
	}
	if f.ExitCode == 7 && r.network() {
		return "connection_error"
	}
	return "exit_" + strconv.Itoa(f.ExitCode)
}

// network reports whether the command runs a download tool anywhere.
func (r *reading) network() bool {
	found := false
	r.walk(func(s *step) bool {
		found = s.network()
		return !found
	})
	return found
}

// Finalization-style writes: deliverables rather than working files.
var (
	finalName = regexp.MustCompile(`(?i)(final|report|answer|deliverable|summary|conclusion|submission)`)
	codePath  = regexp.MustCompile(`open\s*\(\s*['"]([^'"]+)['"]\s*,\s*['"][wa]|Path\(\s*['"]([^'"]+)['"]\s*\)\.write_text|to_csv\(\s*['"]([^'"]+)['"]|savefig\(\s*['"]([^'"]+)['"]`)
)

// EditMove types an operation of the file tool: view is a read; create,
// str_replace, insert and undo change a file and are writes. An unknown
// op is other.
func EditMove(e catalog.EditArgs) catalog.MoveType {
	switch e.Op {
	case catalog.EditView:
		return catalog.MoveRead
	case catalog.EditCreate, catalog.EditStrReplace, catalog.EditInsert, catalog.EditUndo:
		return catalog.MoveWrite
	}
	return catalog.MoveOther
}

// editFinalizationTarget is finalizationTarget for an edit: the file a
// create writes when it looks like a final deliverable. Only create
// writes a whole file, as a redirection does; the small fixes that follow
// (str_replace, insert, undo) are not new deliverables and do not count
// towards the finalization stop.
func editFinalizationTarget(e catalog.EditArgs) (string, bool) {
	if e.Op != catalog.EditCreate {
		return "", false
	}
	base := path.Base(e.Path)
	if base == "notes.md" || strings.HasSuffix(base, ".jsonl") {
		return "", false
	}
	if strings.HasPrefix(e.Path, "/work/output/") || finalName.MatchString(base) {
		return e.Path, true
	}
	return "", false
}

// finalizationTarget returns the file a write move writes when it looks
// like a final deliverable: anything under /work/output/ or a file whose
// name mentions final, report, answer, deliverable, summary, conclusion
// or submission (notes.md and the ledgers never count).
func finalizationTarget(cmd string) (string, bool) {
	return read(cmd).finalizationTarget()
}

// finalizationTarget is finalizationTarget of a reading.
func (r *reading) finalizationTarget() (string, bool) {
	if r.move() != catalog.MoveWrite {
		return "", false
	}
	for _, t := range r.writeTargets() {
		base := path.Base(t)
		if base == "notes.md" || strings.HasSuffix(base, ".jsonl") || strings.HasPrefix(t, "/dev/") {
			continue
		}
		if strings.HasPrefix(t, "/work/output/") || strings.HasPrefix(t, "output/") || finalName.MatchString(base) {
			return t, true
		}
	}
	return "", false
}

// writeTargets returns the files a command writes: redirection targets,
// tee arguments, cp/mv/install destinations and paths written by inline
// code, of every command it runs.
func (r *reading) writeTargets() []string {
	var out []string
	r.walk(func(s *step) bool {
		out = append(out, s.stdoutFiles()...)
		switch s.name {
		case "tee":
			out = append(out, nonFlags(s.args)...)
		case "cp", "mv", "install", "rsync":
			if nf := nonFlags(s.args); len(nf) > 1 {
				out = append(out, nf[len(nf)-1])
			}
		}
		for _, t := range s.texts() {
			for _, m := range codePath.FindAllStringSubmatch(t, -1) {
				for _, g := range m[1:] {
					if g != "" {
						out = append(out, g)
					}
				}
			}
		}
		return true
	})
	return out
}
