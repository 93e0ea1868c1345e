package report

import (
	"bytes"
	"fmt"
	"html"
	"html/template"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/vera-run/vera/eval"
)

// HTML writes r as one self-contained HTML page: inline CSS, the charts
// as inline SVG (accuracy against verification round, cost against
// accuracy), the tables of Text and a per-task table. It refers to no
// outside resource; the only URLs in it are the links to the dashboard's
// runs when r.DashboardURL is set. All text from the report is escaped.
func HTML(w io.Writer, r eval.Report) error {
	p := reportPage{
		Title:    "Eval " + r.Name,
		Header:   header(r),
		Rounds:   roundsChart(r),
		Cost:     costChart(r),
		Tables:   []table{roundsTable(r), auditorTable(r), costTable(r), tagTable(r), infraTable(r)},
		Profiles: profileNames(r),
		Tasks:    taskRows(r),
	}
	if r.Name == "" {
		p.Title = "Eval " + r.EvalID
	}
	return render(w, "report", p, "eval report "+r.EvalID)
}

func render(w io.Writer, name string, data any, what string) error {
	var b bytes.Buffer
	if err := pages.ExecuteTemplate(&b, name, data); err != nil {
		return fmt.Errorf("%s as HTML: %w", what, err)
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write %s as HTML: %w", what, err)
	}
	return nil
}

type reportPage struct {
	Title    string
	Header   [][2]string
	Rounds   chart
	Cost     chart
	Tables   []table
	Profiles []string
	Tasks    []taskRow
}

func profileNames(r eval.Report) []string {
	names := make([]string, len(r.Profiles))
	for i, p := range r.Profiles {
		names[i] = p.Name
	}
	return names
}

// roundsChart is "accuracy against verification round": one polyline per
// profile over first, r1 … rN, final (a profile's missing rounds are
// left out of its line).
func roundsChart(r eval.Report) chart {
	c := newChart("chart-rounds", "Accuracy against verification round", 760, 360)
	cols := roundColumns(maxRounds(r))
	c.XLabel = "answer: first, after audit round 1 … n, final"
	for i, col := range cols {
		c.XTicks = append(c.XTicks, tick{c.categoryX(i, len(cols)), col})
	}
	c.accuracyAxis("accuracy")
	for i, p := range r.Profiles {
		s := series{Profile: p.Name, Color: colour(i)}
		for j, pt := range accuracyPoints(p, len(cols)-2) {
			if !pt.OK {
				continue
			}
			s.Dots = append(s.Dots, dot{Profile: p.Name, X: c.categoryX(j, len(cols)), Y: c.y(pt.Acc),
				Color: s.Color, Title: fmt.Sprintf("%s, %s: %s", p.Name, pt.Column, accuracy(pt.Acc, p.Scored))})
		}
		s.Points = pointsAttr(s.Dots)
		c.Series = append(c.Series, s)
		c.addLegend(s.Color, false, p.Name)
	}
	return c
}

// costChart is "cost against accuracy": one point per profile at its mean
// tokens per task (mean wall time when no profile reports tokens) and its
// final accuracy.
func costChart(r eval.Report) chart {
	c := newChart("chart-cost", "Cost against accuracy", 760, 360)
	byTokens := false
	for _, p := range r.Profiles {
		if p.MeanTokens > 0 {
			byTokens = true
		}
	}
	cost := func(p eval.ProfileReport) float64 { return p.MeanWallMS }
	format := wall
	c.XLabel = "mean wall time per task"
	if byTokens {
		cost = func(p eval.ProfileReport) float64 { return p.MeanTokens }
		format = compact
		c.XLabel = "mean tokens per task"
	}
	top := 0.0
	for _, p := range r.Profiles {
		top = max(top, cost(p))
	}
	top = niceCeil(top * 1.05)
	xOf := func(v float64) float64 { return c.Left + v/top*(c.Right-c.Left) }
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		c.XTicks = append(c.XTicks, tick{xOf(v), format(v)})
	}
	c.accuracyAxis("final accuracy")
	for i, p := range r.Profiles {
		c.Points = append(c.Points, dot{Profile: p.Name, X: xOf(cost(p)), Y: c.y(p.FinalAccuracy), Color: colour(i),
			Title: fmt.Sprintf("%s: %s, %s per task, final %s", p.Name, c.XLabel, format(cost(p)), accuracy(p.FinalAccuracy, p.Scored)),
			Label: p.Name})
	}
	return c
}

// taskRow is one task under one profile in the per-task table; the first
// row of a task carries its id and tags over Span rows.
type taskRow struct {
	First      bool
	Span       int
	TaskID     string
	Tags       string
	Profile    string
	FirstMark  mark
	FinalMark  mark
	Rounds     []roundMark
	Outcome    string
	Infra      bool
	Steps      int
	ToolCalls  int
	Tokens     int64
	Wall       string
	Answer     string // cut for the cell
	FullAnswer string
	RunID      string
	RunURL     string // empty: no link
}

type mark struct {
	Text, Class, Title string
}

type roundMark struct {
	Mark  mark
	Final bool
}

func correctMark(correct, present bool) mark {
	switch {
	case !present:
		return mark{"–", "none", "no answer"}
	case correct:
		return mark{"✓", "ok", "correct"}
	default:
		return mark{"✗", "bad", "wrong"}
	}
}

func taskRows(r eval.Report) []taskRow {
	var rows []taskRow
	start := 0
	for i, res := range r.Results {
		row := taskRow{
			TaskID:     res.TaskID,
			Tags:       strings.Join(res.Tags, ", "),
			Profile:    res.Profile,
			FinalMark:  correctMark(res.Correct, res.FinalRound > 0 || res.FinalAnswer != ""),
			Outcome:    string(res.Outcome),
			Infra:      res.Infra,
			Steps:      res.Steps,
			ToolCalls:  res.ToolCalls,
			Tokens:     res.Tokens.Total,
			Wall:       wall(float64(res.WallMS)),
			Answer:     cut(res.FinalAnswer, 120),
			FullAnswer: res.FinalAnswer,
			RunID:      res.RunID,
		}
		if row.Outcome == "" {
			row.Outcome = "did not end"
		}
		if fr := firstRound(res); fr != nil {
			row.FirstMark = correctMark(fr.Correct, true)
		} else {
			row.FirstMark = correctMark(false, false)
		}
		for _, rs := range res.Rounds {
			m := correctMark(rs.Correct, true)
			m.Title = fmt.Sprintf("round %d: %s (score %.2f)", rs.Round, m.Title, rs.Score)
			if rs.Audited {
				verdict := "rejected"
				if rs.Accepted {
					verdict = "accepted"
				}
				m.Title += fmt.Sprintf("; audit %d, %s", rs.AuditScore, verdict)
				m.Text += verdict[:1]
			}
			row.Rounds = append(row.Rounds, roundMark{Mark: m, Final: rs.Round == res.FinalRound})
		}
		if r.DashboardURL != "" && res.RunID != "" {
			row.RunURL = r.DashboardURL + "#run=" + res.RunID
		}
		if i == 0 || res.TaskID != r.Results[i-1].TaskID {
			start = len(rows)
			row.First = true
		}
		rows = append(rows, row)
		rows[start].Span++
	}
	return rows
}

// cut shortens s to at most n runes, marking the cut with an ellipsis.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

var pages = template.Must(template.New("pages").Funcs(template.FuncMap{
	"f":           coord,
	"add":         func(a, b float64) float64 { return a + b },
	"half":        func(a, b float64) float64 { return (a + b) / 2 },
	"neg":         func(a float64) float64 { return -a },
	"dataProfile": dataProfile,
}).Parse(pageTemplates))

// dataProfile is the attribute data-profile="name". html/template takes
// an attribute named profile (data- stripped) for a URL and would
// percent-encode the name, or replace it when it looks like a
// javascript: URL; the name is a plain text value, so the attribute is
// written whole, with the name escaped by html.EscapeString.
func dataProfile(name string) template.HTMLAttr {
	return template.HTMLAttr(`data-profile="` + html.EscapeString(name) + `"`)
}

const pageTemplates = `
{{define "style"}}<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1400px;padding:0 16px;color:#1b1f24;background:#fff}
h1{font-size:22px;margin:0 0 8px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
table{border-collapse:collapse;margin:4px 0 8px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f5f7;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
dl.header{display:grid;grid-template-columns:max-content auto;gap:2px 16px;margin:0}
dl.header dt{font-weight:600}
dl.header dd{margin:0}
.ok{color:#1a7f37;font-weight:600}
.bad{color:#cf222e;font-weight:600}
.none{color:#6e7781}
.round{display:inline-block;margin-right:4px;padding:0 3px;border:1px solid transparent;border-radius:3px}
.round.final{border-color:#57606a}
tr.infra td{background:#fff8c5}
.empty{color:#6e7781;font-style:italic}
.note{color:#57606a;margin:4px 0}
.charts{display:flex;flex-wrap:wrap;gap:16px}
svg.chart{border:1px solid #d0d7de;background:#fff;max-width:100%;height:auto}
svg.chart text{font:12px system-ui,sans-serif;fill:#1b1f24}
svg.chart .chart-title{font-size:14px;font-weight:600}
svg.chart .grid{stroke:#eaeef2}
svg.chart .axis{stroke:#57606a}
td.answer{max-width:360px;word-break:break-word}
</style>{{end}}

{{define "table"}}<h2>{{.Title}}</h2>
{{if .Rows}}<table id="{{.ID}}"><thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{end}}</tbody></table>
{{else}}<p class="empty" id="{{.ID}}">{{.Empty}}</p>{{end}}{{end}}

{{define "chart"}}<svg id="{{.ID}}" class="chart" viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" role="img" aria-label="{{.Title}}">
<text class="chart-title" x="{{f .Left}}" y="22">{{.Title}}</text>
{{- $c := .}}
{{range .YTicks}}<line class="grid" x1="{{f $c.Left}}" x2="{{f $c.Right}}" y1="{{f .Pos}}" y2="{{f .Pos}}"/><text class="tick y-tick" x="{{f (add $c.Left -6)}}" y="{{f (add .Pos 4)}}" text-anchor="end">{{.Label}}</text>
{{end}}{{range .XTicks}}<line class="axis" x1="{{f .Pos}}" x2="{{f .Pos}}" y1="{{f $c.Bottom}}" y2="{{f (add $c.Bottom 5)}}"/><text class="tick x-tick" x="{{f .Pos}}" y="{{f (add $c.Bottom 19)}}" text-anchor="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{f .Left}}" x2="{{f .Right}}" y1="{{f .Bottom}}" y2="{{f .Bottom}}"/>
<line class="axis" x1="{{f .Left}}" x2="{{f .Left}}" y1="{{f .Top}}" y2="{{f .Bottom}}"/>
<text class="axis-label x-label" x="{{f (half .Left .Right)}}" y="{{.H}}" dy="-12" text-anchor="middle">{{.XLabel}}</text>
<text class="axis-label y-label" transform="rotate(-90)" x="{{f (neg (half .Top .Bottom))}}" y="18" text-anchor="middle">{{.YLabel}}</text>
{{range .Series}}<polyline class="series" {{dataProfile .Profile}}{{if .Side}} data-side="{{.Side}}"{{end}} points="{{.Points}}" fill="none" stroke="{{.Color}}" stroke-width="2"{{if .Dash}} stroke-dasharray="6 4"{{end}}/>
{{range .Dots}}<circle class="pt" {{dataProfile .Profile}} cx="{{f .X}}" cy="{{f .Y}}" r="4" fill="{{.Color}}"><title>{{.Title}}</title></circle>
{{end}}{{end}}{{range .Points}}<circle class="point" {{dataProfile .Profile}} cx="{{f .X}}" cy="{{f .Y}}" r="6" fill="{{.Color}}"><title>{{.Title}}</title></circle><text class="point-label" x="{{f (add .X 9)}}" y="{{f (add .Y -8)}}">{{.Label}}</text>
{{end}}{{range .Legend}}<g class="legend-item"><line x1="{{f .X}}" x2="{{f (add .X 22)}}" y1="{{f .Y}}" y2="{{f .Y}}" stroke="{{.Color}}" stroke-width="3"{{if .Dash}} stroke-dasharray="6 4"{{end}}/><text x="{{f (add .X 28)}}" y="{{f (add .Y 4)}}">{{.Label}}</text></g>
{{end}}</svg>{{end}}

{{define "header"}}<dl class="header">{{range .}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>{{end}}

{{define "report"}}<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
{{template "style"}}</head>
<body>
<h1>{{.Title}}</h1>
{{template "header" .Header}}
<h2>Charts</h2>
<div class="charts">{{template "chart" .Rounds}}
{{template "chart" .Cost}}</div>
{{range .Tables}}{{template "table" .}}{{end}}
<h2>Tasks</h2>
<p class="note">rounds: one mark per answer the run submitted, ✓ correct or ✗ wrong against the reference; a = the auditor accepted it, r = rejected it; the boxed mark is the run's final answer; – = no answer.</p>
{{if .Tasks}}<table id="table-tasks"><thead><tr><th>task</th><th>tags</th><th>profile</th><th>first</th><th>final</th><th>rounds</th><th>outcome</th><th>steps</th><th>tool calls</th><th>tokens</th><th>wall time</th><th>final answer</th><th>run</th></tr></thead>
<tbody>{{range .Tasks}}<tr class="task-row{{if .Infra}} infra{{end}}" data-task="{{.TaskID}}" {{dataProfile .Profile}}>{{if .First}}<td rowspan="{{.Span}}">{{.TaskID}}</td><td rowspan="{{.Span}}">{{.Tags}}</td>{{end}}<td>{{.Profile}}</td><td class="{{.FirstMark.Class}}" title="{{.FirstMark.Title}}">{{.FirstMark.Text}}</td><td class="{{.FinalMark.Class}}" title="{{.FinalMark.Title}}">{{.FinalMark.Text}}</td><td>{{range .Rounds}}<span class="round {{.Mark.Class}}{{if .Final}} final{{end}}" title="{{.Mark.Title}}">{{.Mark.Text}}</span>{{end}}</td><td>{{.Outcome}}{{if .Infra}} (infra){{end}}</td><td class="num">{{.Steps}}</td><td class="num">{{.ToolCalls}}</td><td class="num">{{.Tokens}}</td><td class="num">{{.Wall}}</td><td class="answer" title="{{.FullAnswer}}">{{.Answer}}</td><td>{{if .RunURL}}<a class="run-link" href="{{.RunURL}}">{{.RunID}}</a>{{else}}{{.RunID}}{{end}}</td></tr>
{{end}}</tbody></table>
{{else}}<p class="empty" id="table-tasks">no tasks scored</p>{{end}}
</body></html>
{{end}}

{{define "compare"}}<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
{{template "style"}}</head>
<body>
<h1>{{.Title}}</h1>
<h2>A</h2>
{{template "header" .A}}
<h2>B</h2>
{{template "header" .B}}
<h2>Charts</h2>
<div class="charts">{{template "chart" .Chart}}</div>
{{range .Tables}}{{template "table" .}}{{end}}
<h2>Tasks whose final answer differs ({{len .Diffs}})</h2>
{{if .Diffs}}<table id="table-diffs"><thead><tr><th>task</th><th>profile</th><th>A</th><th>B</th><th>A run</th><th>B run</th></tr></thead>
<tbody>{{range .Diffs}}<tr class="diff-row" data-task="{{.TaskID}}" {{dataProfile .Profile}}><td>{{.TaskID}}</td><td>{{.Profile}}</td><td class="{{.A.Class}}">{{.A.Text}} {{.A.Title}}</td><td class="{{.B.Class}}">{{.B.Text}} {{.B.Title}}</td><td>{{if .AURL}}<a class="run-link" href="{{.AURL}}">{{.ARun}}</a>{{else}}{{.ARun}}{{end}}</td><td>{{if .BURL}}<a class="run-link" href="{{.BURL}}">{{.BRun}}</a>{{else}}{{.BRun}}{{end}}</td></tr>
{{end}}</tbody></table>
{{else}}<p class="empty" id="table-diffs">none</p>{{end}}
</body></html>
{{end}}
`
