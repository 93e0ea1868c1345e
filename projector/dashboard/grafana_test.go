package dashboard

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/vera-run/vera/bus"
	"github.com/vera-run/vera/bus/catalog"
	"github.com/vera-run/vera/projector"
)

// TestGrafanaDashboardCoversMetrics: docs/grafana-dashboard.json is valid
// JSON and queries every metric projector.Metrics exports.
func TestGrafanaDashboardCoversMetrics(t *testing.T) {
	data, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	var exprs strings.Builder
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs.WriteString(tg.Expr + "\n")
		}
	}
	m := projector.NewMetrics(nil, nil)
	f := bus.Factory{Source: "test"}
	ev, err := f.New("r1", catalog.NotesAppended{Step: 1, Author: catalog.AuthorAgent, Text: "x"})
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(ev) // so that vera_events_total has a series
	var buf bytes.Buffer
	if err := m.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mm := range regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(buf.String(), -1) {
		names[mm[1]] = true
	}
	for _, n := range projector.SpecMetricNames() {
		names[n] = true
	}
	// Bus health (a separate registry, sampled from the server).
	for _, n := range []string{"vera_bus_consumer_pending", "vera_bus_consumer_ack_pending", "vera_bus_consumer_redelivered",
		"vera_bus_dead_letters", "vera_bus_stream_messages", "vera_bus_health_errors_total"} {
		names[n] = true
	}
	all := exprs.String()
	for n := range names {
		if !regexp.MustCompile(`\b` + regexp.QuoteMeta(n) + `(_sum|_count|_bucket)?\b`).MatchString(all) {
			t.Errorf("docs/grafana-dashboard.json has no panel querying %s", n)
		}
	}
}
