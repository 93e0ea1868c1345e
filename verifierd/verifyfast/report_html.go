package verifyfast

import (
	"html/template"
	"io"
	"strings"
	"time"
)

// WriteHTML writes the report as one self-contained HTML page: inline CSS,
// no scripts, no external resources; every value is escaped by html/template.
func (r Report) WriteHTML(w io.Writer) error {
	return reportHTML.Execute(w, r)
}

var reportHTML = template.Must(template.New("report").Funcs(template.FuncMap{
	"zoneLabel": func(i int) string { return Zones()[i].Label() },
	"cellClass": func(i, j int) string {
		switch d := i - j; {
		case d == 0:
			return "hit"
		case d == 2 || d == -2:
			return "cross"
		}
		return "boundary"
	},
	"short":       shortRatio,
	"duration":    func(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() },
	"join":        strings.Join,
	"crossTarget": func() string { return trimPct(CrossBandTarget*100) + "%" },
}).Parse(reportTemplate))

const reportTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>VerifyFast report</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto; max-width: 70rem; padding: 0 1rem; color: #1f2328; background: #fff; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.3rem; border-bottom: 1px solid #d0d7de; padding-bottom: 0.3rem; margin-top: 2.5rem; }
h3 { font-size: 1.05rem; margin-top: 1.5rem; }
table { border-collapse: collapse; margin: 0.5rem 0; }
th, td { border: 1px solid #d0d7de; padding: 0.3rem 0.7rem; text-align: left; }
th { background: #f6f8fa; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.matrix td { text-align: center; min-width: 5rem; font-variant-numeric: tabular-nums; }
td.hit { background: #dafbe1; }
td.boundary { background: #fff8c5; }
td.cross { background: #ffebe9; font-weight: 700; color: #a40e26; }
.bad { color: #a40e26; font-weight: 600; }
.good { color: #1a7f37; font-weight: 600; }
.muted { color: #656d76; }
ul { padding-left: 1.2rem; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; }
</style>
</head>
<body>
<h1>VerifyFast report</h1>
<p class="muted">Zones: BAD 1&ndash;2, MID 3, GOOD 4&ndash;5. Cross-band confusion (BAD&harr;GOOD) is the one unacceptable error; target below {{crossTarget}}.</p>
{{- if not .Profiles}}
<p>No results.</p>
{{- end}}
{{- range .Profiles}}
<section>
<h2>Profile <code>{{.Profile}}</code></h2>
<p>Items {{.Items}}: scored {{.Scored}}, failed {{.Failed}}.</p>

<h3>Zone confusion matrix</h3>
<table class="matrix">
<tr><th>expected &darr; / actual &rarr;</th>{{range .Matrix.Zones}}<th>{{.Label}}</th>{{end}}</tr>
{{- range $i, $row := .Matrix.Counts}}
<tr><th>{{zoneLabel $i}}</th>{{range $j, $n := $row}}<td class="{{cellClass $i $j}}">{{$n}}</td>{{end}}</tr>
{{- end}}
</table>

<h3>Metrics</h3>
<table>
<tr><th>Zone accuracy</th><td>{{.ZoneAccuracy}}</td></tr>
<tr><th>Cross-band confusion</th><td>{{.CrossBand}} {{if .CrossBandTargetMet}}<span class="good">target met</span>{{else}}<span class="bad">target not met</span>{{end}}</td></tr>
<tr><th>Exact match</th><td>{{.ExactMatch}}</td></tr>
<tr><th>&plusmn;1 match</th><td>{{.WithinOne}}</td></tr>
<tr><th>Tokens</th><td>prompt {{.Tokens.Prompt}}, completion {{.Tokens.Completion}}, total {{.Tokens.Total}}</td></tr>
<tr><th>Duration</th><td>{{duration .DurationMS}}</td></tr>
</table>

{{- if .Tags}}
<h3>Per tag</h3>
<table>
<tr><th>tag</th><th>expected</th><th>items</th><th>failed</th><th>zone ok</th><th>exact</th><th>&plusmn;1</th><th>cross-band</th><th>scores 1</th><th>2</th><th>3</th><th>4</th><th>5</th></tr>
{{- range .Tags}}
<tr><td><code>{{.Tag}}</code></td><td class="num">{{if .ExpectedScore}}{{.ExpectedScore}}{{else}}&ndash;{{end}}</td><td class="num">{{.Items}}</td><td class="num">{{.Failed}}</td><td class="num">{{short .ZoneAccuracy}}</td><td class="num">{{short .ExactMatch}}</td><td class="num">{{short .WithinOne}}</td><td class="num{{if .CrossBand}} bad{{end}}">{{.CrossBand}}</td>{{range .Scores}}<td class="num">{{.}}</td>{{end}}</tr>
{{- end}}
</table>
{{- end}}

{{- if .CrossBandCases}}
<h3>Cross-band cases</h3>
<table>
<tr><th>id</th><th>tag</th><th>expected</th><th>scored</th></tr>
{{- range .CrossBandCases}}
<tr><td>#{{.ID}}</td><td><code>{{.Tag}}</code></td><td>{{.ExpectedScore}} ({{.ExpectedZone}})</td><td class="bad">{{.Score}} ({{.Zone}})</td></tr>
{{- end}}
</table>
{{- end}}

{{- if .FailedItems}}
<h3>Failed items</h3>
<table>
<tr><th>id</th><th>tag</th><th>errors</th></tr>
{{- range .FailedItems}}
<tr><td>#{{.ID}}</td><td><code>{{.Tag}}</code></td><td><ul>{{range .Errors}}<li>{{.}}</li>{{end}}</ul></td></tr>
{{- end}}
</table>
{{- end}}
</section>
{{- end}}

{{- if .SkippedLines}}
<h2>Skipped lines</h2>
<ul>
{{- range .SkippedLines}}
<li>line {{.Line}}: {{.Reason}}</li>
{{- end}}
</ul>
{{- end}}
</body>
</html>
`
