package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/vera-run/vera/eval"
)

func renderHTML(t *testing.T, r eval.Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := HTML(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestHTMLEscapes: markup in the eval name, task set, profile, task id,
// tags, answers, run ids and reasons is written as text, never as a tag;
// the page holds no script element at all.
func TestHTMLEscapes(t *testing.T) {
	for name, page := range map[string]string{
		"report":  renderHTML(t, hostileReport()),
		"compare": renderCompareHTML(t, Compare(hostileReport(), hostileReport())),
	} {
		if i := strings.Index(strings.ToLower(page), "<script"); i >= 0 {
			t.Errorf("%s: a <script tag at %d: %s", name, i, page[max(0, i-80):min(len(page), i+80)])
		}
		if strings.Contains(page, "alert(1)</") {
			t.Errorf("%s: an unescaped closing tag of the hostile text", name)
		}
		if !strings.Contains(page, `data-profile="&lt;script&gt;alert(1)&lt;/script&gt;"`) {
			t.Errorf("%s: the profile's data attribute is not the escaped name", name)
		}
		if n := strings.Count(page, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < 5 {
			t.Errorf("%s: the hostile text appears escaped %d times, want it in many places", name, n)
		}
	}
}

var runLink = regexp.MustCompile(`href="([^"]*)"`)

// TestHTMLSelfContained: no outside resource of any kind; the only URLs
// are the dashboard's run links, one per result, and only when
// DashboardURL is set.
func TestHTMLSelfContained(t *testing.T) {
	noOutside := func(t *testing.T, page string) {
		t.Helper()
		lower := strings.ToLower(page)
		for _, bad := range []string{"<link", "<script", "src=", "@import", "url(", "<iframe", "<object", "<embed", "<img"} {
			if strings.Contains(lower, bad) {
				t.Errorf("page contains %q", bad)
			}
		}
	}

	t.Run("without dashboard", func(t *testing.T) {
		page := renderHTML(t, fixtureReport())
		noOutside(t, page)
		for _, bad := range []string{"http:", "https:", "<a ", "href="} {
			if strings.Contains(page, bad) {
				t.Errorf("page contains %q without a DashboardURL", bad)
			}
		}
		if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.HasSuffix(strings.TrimSpace(page), "</html>") {
			t.Error("not a whole HTML document")
		}
	})

	t.Run("with dashboard", func(t *testing.T) {
		r := fixtureReport()
		r.DashboardURL = "http://127.0.0.1:8080/"
		page := renderHTML(t, r)
		noOutside(t, page)
		var want []string
		for _, res := range r.Results {
			want = append(want, "http://127.0.0.1:8080/#run="+res.RunID)
		}
		var got []string
		for _, m := range runLink.FindAllStringSubmatch(page, -1) {
			got = append(got, m[1])
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("links:\n got %q\nwant %q", got, want)
		}
		stripped := runLink.ReplaceAllString(page, "")
		for _, bad := range []string{"http://", "https://", "//"} {
			if i := strings.Index(stripped, bad); i >= 0 {
				t.Errorf("%q outside a run link: %s", bad, stripped[max(0, i-60):min(len(stripped), i+60)])
			}
		}
	})

	t.Run("unsafe dashboard URL", func(t *testing.T) {
		r := fixtureReport()
		r.DashboardURL = "javascript:alert(1)//"
		page := renderHTML(t, r)
		if strings.Contains(page, "javascript:") {
			t.Error("a javascript: URL made it into the page")
		}
	})
}

// TestHTMLStructure: the charts and tables tests and tools look for are
// there, with one series per profile and the figures of Text.
func TestHTMLStructure(t *testing.T) {
	page := renderHTML(t, fixtureReport())
	for _, want := range []string{
		`<svg id="chart-rounds"`,
		`<svg id="chart-cost"`,
		`<polyline class="series" data-profile="no-audit"`,
		`<polyline class="series" data-profile="audit3"`,
		`<circle class="point" data-profile="audit3"`,
		`<title>audit3, r2: 60.0% (3/5)</title>`,
		`<title>audit3: mean tokens per task, 5.3k per task, final 80.0% (4/5)</title>`,
		`>mean tokens per task</text>`,
		`<td>audit3</td><td>11</td><td>3</td><td>1</td><td>2</td><td>5</td><td>75.0%</td><td>60.0%</td>`,
		`<table id="table-tasks">`,
		`<tr class="task-row infra" data-task="t5" data-profile="no-audit">`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if n := strings.Count(page, `class="task-row`); n != 10 {
		t.Errorf("%d task rows, want 10", n)
	}
	// t2 under audit3: wrong, wrong, right; the third is the final round.
	row := regexp.MustCompile(`data-task="t2" data-profile="audit3">.*</tr>`).FindString(page)
	if strings.Count(row, `class="round bad"`) != 2 || strings.Count(row, `class="round ok final"`) != 1 {
		t.Errorf("t2/audit3 rounds wrong: %s", row)
	}
	if !strings.Contains(row, `title="round 3: correct (score 1.00); audit 4, accepted"`) {
		t.Errorf("t2/audit3 round 3 title missing: %s", row)
	}
}

// TestHTMLDataProfile: data-profile holds the profile's name as text,
// quotes escaped, not percent-encoded or filtered as a URL.
func TestHTMLDataProfile(t *testing.T) {
	r := fixtureReport()
	odd := `javascript:x "quoted" & 'single'`
	r.Profiles[0].Name = odd
	for i := range r.Results {
		if r.Results[i].Profile == "no-audit" {
			r.Results[i].Profile = odd
		}
	}
	page := renderHTML(t, r)
	want := `<polyline class="series" data-profile="javascript:x &#34;quoted&#34; &amp; &#39;single&#39;"`
	if !strings.Contains(page, want) {
		t.Errorf("page lacks %s", want)
	}
	if strings.Contains(page, "ZgotmplZ") {
		t.Error("a value was filtered as unsafe")
	}
}

// TestEmptyReport: a report with nothing scored yet renders in every form.
func TestEmptyReport(t *testing.T) {
	r := eval.Report{EvalID: "01JEMPTY", Tasks: 3, Expected: 3}
	var b bytes.Buffer
	if err := Text(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "scored    0/3 (0 infra)\n") {
		t.Errorf("text:\n%s", b.String())
	}
	page := renderHTML(t, r)
	for _, want := range []string{`<svg id="chart-rounds"`, `<p class="empty" id="table-tasks">no tasks scored</p>`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if err := JSON(&b, r); err != nil {
		t.Fatal(err)
	}
}
