package report

import (
	"fmt"
	"math"
	"strings"
)

// chart is an inline SVG chart ready for the page template: every
// coordinate is computed here, every text is escaped by the template.
type chart struct {
	ID, Title      string
	W, H           int
	Left, Right    float64 // the plot area's x range
	Top, Bottom    float64 // the plot area's y range
	XLabel, YLabel string
	XTicks, YTicks []tick
	Series         []series // polylines with their points
	Points         []dot    // scatter points
	Legend         []legendItem
}

type tick struct {
	Pos   float64 // x for an x tick, y for a y tick
	Label string
}

type series struct {
	Profile string
	Side    string // "a" or "b" in a comparison, else empty
	Color   string
	Dash    bool
	Points  string // the polyline's points attribute
	Dots    []dot
}

type dot struct {
	Profile string
	X, Y    float64
	Color   string
	Title   string // the tooltip
	Label   string // shown beside a scatter point
}

type legendItem struct {
	X, Y  float64
	Color string
	Dash  bool
	Label string
}

// palette colours the profiles in report order.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

func colour(i int) string { return palette[i%len(palette)] }

// newChart lays out a chart of w×h with room on the right for a legend.
func newChart(id, title string, w, h int) chart {
	return chart{ID: id, Title: title, W: w, H: h,
		Left: 64, Right: float64(w) - 190, Top: 40, Bottom: float64(h) - 56}
}

// y maps an accuracy (0–1) to the plot's y.
func (c *chart) y(acc float64) float64 { return c.Bottom - clamp01(acc)*(c.Bottom-c.Top) }

func clamp01(f float64) float64 { return math.Max(0, math.Min(1, f)) }

// accuracyAxis puts 0–100 % ticks on the y axis.
func (c *chart) accuracyAxis(label string) {
	c.YLabel = label
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		c.YTicks = append(c.YTicks, tick{c.y(f), fmt.Sprintf("%.0f%%", 100*f)})
	}
}

// categoryX places n categories evenly on the x axis.
func (c *chart) categoryX(i, n int) float64 {
	if n < 2 {
		return (c.Left + c.Right) / 2
	}
	return c.Left + float64(i)*(c.Right-c.Left)/float64(n-1)
}

func (c *chart) addLegend(colour string, dash bool, label string) {
	c.Legend = append(c.Legend, legendItem{X: c.Right + 24, Y: c.Top + 8 + float64(len(c.Legend))*22,
		Color: colour, Dash: dash, Label: label})
}

func pointsAttr(dots []dot) string {
	parts := make([]string, len(dots))
	for i, d := range dots {
		parts[i] = coord(d.X) + "," + coord(d.Y)
	}
	return strings.Join(parts, " ")
}

// coord formats a coordinate for an SVG attribute.
func coord(f float64) string { return fmt.Sprintf("%.1f", f) }

// niceCeil is the smallest "round" number at or above v (1, 1.2, 1.5, 2,
// 2.5, 3, 4, 5, 6, 8 times a power of ten); 1 for v ≤ 0.
func niceCeil(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if v <= m*e*(1+1e-9) {
			return m * e
		}
	}
	return 10 * e
}

// compact formats a count briefly: 950, 1.5k, 12k, 2.3M.
func compact(f float64) string {
	switch {
	case f < 1000:
		return fmt.Sprintf("%.0f", f)
	case f < 1e6:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", f/1000), ".0") + "k"
	default:
		return strings.TrimSuffix(fmt.Sprintf("%.1f", f/1e6), ".0") + "M"
	}
}
