package catalog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docsFile is docs/events.md seen from this package's directory.
var docsFile = filepath.Join("..", "..", filepath.FromSlash(DocsPath))

func TestEventsMarkdownUpToDate(t *testing.T) {
	want := EventsMarkdown()
	if os.Getenv(updateDocsEnv) == "1" {
		if err := os.WriteFile(docsFile, want, 0o644); err != nil {
			t.Fatalf("rewriting %s: %v", DocsPath, err)
		}
		t.Logf("rewrote %s (%d bytes)", DocsPath, len(want))
		return
	}
	got, err := os.ReadFile(docsFile)
	if err != nil {
		t.Fatalf("reading %s: %v\nGenerate it with:\n\t%s=1 go test ./bus/catalog/ -run TestEventsMarkdownUpToDate", DocsPath, err, updateDocsEnv)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date with the event catalogue (%s).\n"+
			"It is generated from the Go types in bus/catalog: do not edit it by hand. Regenerate it with:\n"+
			"\t%s=1 go test ./bus/catalog/ -run TestEventsMarkdownUpToDate",
			DocsPath, firstDifference(got, want), updateDocsEnv)
	}
}

func firstDifference(got, want []byte) string {
	gl := strings.Split(string(got), "\n")
	wl := strings.Split(string(want), "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w || i >= len(gl) || i >= len(wl) {
			return fmt.Sprintf("first difference at line %d:\n\tcommitted: %q\n\tgenerated: %q", i+1, g, w)
		}
	}
	return "files differ"
}

func TestEventsMarkdownContents(t *testing.T) {
	md := EventsMarkdown()
	if !bytes.Equal(md, EventsMarkdown()) {
		t.Fatal("EventsMarkdown is not deterministic")
	}
	s := string(md)
	for _, want := range []string{
		"`specversion`", "`id`", "`source`", "`type`", "`subject`", "`time`", "`datacontenttype`", "`data`",
		"`runid`", "`causationid`", "vera.run.<run_id>.<area>.<event>", "vera.ext.", "vera events schema",
		"\"specversion\": \"1.0\"",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("docs lack %q", want)
		}
	}
	// Every anchor used by a link exists as a heading.
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(s, -1) {
		anchors[githubAnchor(m[1])] = true
	}
	for _, m := range regexp.MustCompile(`\]\(#([^)]+)\)`).FindAllStringSubmatch(s, -1) {
		if !anchors[m[1]] {
			t.Errorf("link to missing anchor #%s", m[1])
		}
	}
	for _, e := range Entries() {
		area, event, _ := SplitType(e.Type)
		for _, want := range []string{
			"### `" + e.Type + "`\n",
			"`vera.run.<run_id>." + area + "." + event + "`",
			"`vera events schema " + e.Type + "`",
		} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: docs lack %q", e.Type, want)
			}
		}
		if strings.Count(s, "### `"+e.Type+"`\n") != 1 {
			t.Errorf("%s: documented more than once", e.Type)
		}
	}
	for _, area := range areas() {
		if areaTitles[area] == "" {
			t.Errorf("area %q has no title in areaTitles", area)
		}
	}
	// Field tables come from reflection: spot-check nested and shared members.
	for _, want := range []string{
		"| `stdout` | object: [Output](#output) | yes |",
		"| `checks[].load_bearing` | boolean | yes |",
		"| `config` | object: [RunConfig](#runconfig) | yes |",
		"| `task` | string | yes |",
		"| `messages[].role` | string | yes |",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("docs lack field row %q", want)
		}
	}
}

func TestGithubAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"`vera.audit.check_started`":     "veraauditcheck_started",
		"Outside types: `vera.ext.*`":    "outside-types-veraext",
		"Logic verifier (`logic`)":       "logic-verifier-logic",
		"BlobRef":                        "blobref",
		"DeepVerifier auditor (`audit`)": "deepverifier-auditor-audit",
	} {
		if got := githubAnchor(in); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", in, got, want)
		}
	}
}
