package report

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/vera-run/vera/internal/browsertest"
)

// chromium and browser are internal/browsertest's.
func chromium(t *testing.T) string { t.Helper(); return browsertest.Chromium(t) }

func browser(t *testing.T, path string) context.Context {
	t.Helper()
	return browsertest.Browser(t, path)
}

// consoleEnd is logged by the test after its checks: the console stream
// keeps order, so every message of the page came before it.
const consoleEnd = "vera-report-test-end"

// openPage writes page to a file, opens it in a new tab of the browser,
// runs check in it, and returns the page's error-level console messages
// and uncaught exceptions.
func openPage(t *testing.T, browserCtx context.Context, page string, check func(ctx context.Context)) []string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := chromedp.NewContext(browserCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}

	console := chromedp.Console(ctx)
	errs := make(chan []string, 1)
	go func() {
		var bad []string
		for msg, err := range console {
			if err != nil {
				bad = append(bad, "console stream: "+err.Error())
				break
			}
			if msg.Type == chromedp.ConsoleLog && msg.Text == consoleEnd {
				break
			}
			if msg.Type == chromedp.ConsoleError || msg.IsException() {
				bad = append(bad, msg.String()+" at "+msg.URL)
			}
		}
		errs <- bad
	}()

	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+file)); err != nil {
		t.Fatalf("open %s: %v", file, err)
	}
	check(ctx)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any]("console.log("+jsString(consoleEnd)+")")); err != nil {
		t.Fatalf("log the end marker: %v", err)
	}
	select {
	case bad := <-errs:
		return bad
	case <-ctx.Done():
		t.Fatal("the console's end marker never arrived")
		return nil
	}
}

// cleanPage opens page with openPage and fails on any console error.
func cleanPage(t *testing.T, browserCtx context.Context, page string, check func(ctx context.Context)) {
	t.Helper()
	for _, b := range openPage(t, browserCtx, page, check) {
		t.Errorf("page console: %s", b)
	}
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pageState is what the test reads from the live DOM.
type pageState struct {
	Series []struct {
		Profile string   `json:"profile"`
		Side    string   `json:"side"`
		Points  int      `json:"points"`
		Width   float64  `json:"width"`
		Dots    int      `json:"dots"`
		Titles  []string `json:"titles"`
	} `json:"series"`
	Points []struct {
		Profile string  `json:"profile"`
		Left    float64 `json:"left"`
		Top     float64 `json:"top"`
		Width   float64 `json:"width"`
		Height  float64 `json:"height"`
	} `json:"points"`
	Charts  map[string][2]float64 `json:"charts"`
	Legend  []string              `json:"legend"`
	Scripts int                   `json:"scripts"`
	Links   []string              `json:"links"`
	Title   string                `json:"title"`
}

// readState reads the charts of the page: the polylines of chart (their
// point count and drawn width), the scatter points of scatter (if any),
// the size of every svg.chart, and the legend of chart.
func readState(t *testing.T, ctx context.Context, chart, scatter string) pageState {
	t.Helper()
	js := `(() => {
  const chart = document.getElementById(` + jsString(chart) + `);
  const scatter = document.getElementById(` + jsString(scatter) + `);
  const s = {series: [], points: [], charts: {}, legend: [], links: [], title: document.title};
  for (const l of chart.querySelectorAll('polyline.series')) {
    s.series.push({profile: l.dataset.profile, side: l.dataset.side || '', points: l.points.numberOfItems,
      width: l.getBoundingClientRect().width, dots: 0, titles: []});
    let n = l.nextElementSibling;
    const last = s.series[s.series.length - 1];
    while (n && n.tagName === 'circle' && n.classList.contains('pt')) {
      last.dots++;
      last.titles.push(n.querySelector('title').textContent);
      n = n.nextElementSibling;
    }
  }
  if (scatter) {
    for (const c of scatter.querySelectorAll('circle.point')) {
      const b = c.getBoundingClientRect();
      s.points.push({profile: c.dataset.profile, left: b.left, top: b.top, width: b.width, height: b.height});
    }
  }
  for (const svg of document.querySelectorAll('svg.chart')) {
    const b = svg.getBoundingClientRect();
    s.charts[svg.id] = [b.width, b.height];
  }
  for (const t of chart.querySelectorAll('.legend-item text')) s.legend.push(t.textContent);
  s.scripts = document.scripts.length;
  for (const a of document.querySelectorAll('a')) s.links.push(a.href);
  return JSON.stringify(s);
})()`
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	var s pageState
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		t.Fatalf("decode the page state %s: %v", raw, err)
	}
	return s
}

func chartsDrawn(t *testing.T, s pageState, ids ...string) {
	t.Helper()
	for _, id := range ids {
		wh, ok := s.Charts[id]
		if !ok || wh[0] < 100 || wh[1] < 100 {
			t.Errorf("chart %s not drawn: %v (charts %v)", id, wh, s.Charts)
		}
	}
}

// TestHTMLInBrowser opens the HTML report in a headless Chromium: no
// console error or exception; the rounds chart has one drawn line per
// profile with a point per round it has; the scatter one drawn point per
// profile, audit3 right of (more tokens) and above (more accurate)
// no-audit; hostile text renders as text.
func TestHTMLInBrowser(t *testing.T) {
	ctx := browser(t, chromium(t))

	// The console check sees what it must catch.
	t.Run("console errors caught", func(t *testing.T) {
		bad := openPage(t, ctx, `<!DOCTYPE html><p>x</p><script>console.error("logged"); setTimeout(() => { throw new Error("thrown") }, 0)</script>`,
			func(ctx context.Context) { time.Sleep(200 * time.Millisecond) })
		if len(bad) != 2 || !strings.Contains(bad[0], "logged") || !strings.Contains(bad[1], "thrown") {
			t.Errorf("caught %q, want the console.error and the exception", bad)
		}
	})

	t.Run("report", func(t *testing.T) {
		r := fixtureReport()
		r.DashboardURL = "http://127.0.0.1:8080/"
		cleanPage(t, ctx, renderHTML(t, r), func(ctx context.Context) {
			s := readState(t, ctx, "chart-rounds", "chart-cost")
			chartsDrawn(t, s, "chart-rounds", "chart-cost")
			if len(s.Series) != 2 {
				t.Fatalf("%d series, want 2: %+v", len(s.Series), s.Series)
			}
			for i, want := range []struct {
				profile string
				points  int
			}{{"no-audit", 2}, {"audit3", 5}} {
				got := s.Series[i]
				if got.Profile != want.profile || got.Points != want.points || got.Dots != want.points || got.Width < 50 {
					t.Errorf("series %d: %+v, want profile %s with %d points, drawn", i, got, want.profile, want.points)
				}
			}
			wantTitles := []string{"audit3, first: 40.0% (2/5)", "audit3, r1: 40.0% (2/5)", "audit3, r2: 60.0% (3/5)",
				"audit3, r3: 80.0% (4/5)", "audit3, final: 80.0% (4/5)"}
			if !slices.Equal(s.Series[1].Titles, wantTitles) {
				t.Errorf("audit3 tooltips %q, want %q", s.Series[1].Titles, wantTitles)
			}
			if !slices.Equal(s.Legend, []string{"no-audit", "audit3"}) {
				t.Errorf("legend %q", s.Legend)
			}
			if len(s.Points) != 2 {
				t.Fatalf("%d scatter points, want 2: %+v", len(s.Points), s.Points)
			}
			na, a3 := s.Points[0], s.Points[1]
			if na.Profile != "no-audit" || a3.Profile != "audit3" || na.Width == 0 || na.Height == 0 || a3.Width == 0 || a3.Height == 0 {
				t.Errorf("scatter points not drawn: %+v", s.Points)
			}
			if !(a3.Left > na.Left && a3.Top < na.Top) {
				t.Errorf("audit3 (5300 tokens, 80%%) should be right of and above no-audit (1100 tokens, 40%%): %+v", s.Points)
			}
			if s.Scripts != 0 {
				t.Errorf("%d scripts on the page", s.Scripts)
			}
			if len(s.Links) != 10 || s.Links[0] != "http://127.0.0.1:8080/#run=run-t1-na" {
				t.Errorf("run links %q", s.Links)
			}
		})
	})

	t.Run("hostile", func(t *testing.T) {
		cleanPage(t, ctx, renderHTML(t, hostileReport()), func(ctx context.Context) {
			s := readState(t, ctx, "chart-rounds", "chart-cost")
			chartsDrawn(t, s, "chart-rounds", "chart-cost")
			if s.Scripts != 0 {
				t.Errorf("%d script elements: the hostile text became markup", s.Scripts)
			}
			if len(s.Series) != 1 || s.Series[0].Profile != hostile || s.Series[0].Points != 3 {
				t.Errorf("series %+v", s.Series)
			}
			if !slices.Equal(s.Legend, []string{hostile}) || s.Title != "Eval "+hostile {
				t.Errorf("legend %q, title %q: the hostile text should show as text", s.Legend, s.Title)
			}
			cell, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#table-tasks tbody td').textContent`))
			if err != nil || cell != hostile {
				t.Errorf("task id cell %q (%v)", cell, err)
			}
		})
	})

	t.Run("compare", func(t *testing.T) {
		page := renderCompareHTML(t, Compare(fixtureReport(), laterReport()))
		cleanPage(t, ctx, page, func(ctx context.Context) {
			s := readState(t, ctx, "chart-compare", "")
			chartsDrawn(t, s, "chart-compare")
			var got []string
			for _, sr := range s.Series {
				got = append(got, sr.Profile+"/"+sr.Side)
				if sr.Points != 2 || sr.Dots != 2 || sr.Width < 50 {
					t.Errorf("series %+v: want 2 drawn points", sr)
				}
			}
			if want := []string{"no-audit/a", "no-audit/b", "audit3/a", "audit3/b"}; !slices.Equal(got, want) {
				t.Errorf("series %q, want %q", got, want)
			}
			if len(s.Links) != 3 || !strings.HasPrefix(s.Links[0], "http://127.0.0.1:9090/#run=later-") {
				t.Errorf("links %q", s.Links)
			}
			rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#table-diffs tbody tr').length`))
			if err != nil || rows != 3 {
				t.Errorf("%d diff rows (%v), want 3", rows, err)
			}
		})
	})
}
