package projector

import (
	"bufio"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// A small, dependency-free registry writing the Prometheus text exposition
// format (version 0.0.4) deterministically: families sorted by name, series
// by label value, no timestamps. Each family has at most one label.
//
// (client_golang is not linked: its dependencies are not in go.sum, which
// this package may not change. The output is the same format Prometheus
// scrapes; swapping in a prometheus.Registry later touches only this file.)

type metricKind int

const (
	kindCounter metricKind = iota
	kindGauge
	kindHistogram
	kindSummary
)

func (k metricKind) String() string {
	return [...]string{"counter", "gauge", "histogram", "summary"}[k]
}

type series struct {
	value   float64
	buckets []uint64 // histogram: per bucket (not cumulative)
	sum     float64
	count   uint64
}

type family struct {
	name, help string
	kind       metricKind
	label      string    // "" for an unlabelled family
	bounds     []float64 // histogram upper bounds
	series     map[string]*series
}

type registry struct {
	mu       sync.Mutex
	families map[string]*family
}

func newRegistry() *registry { return &registry{families: map[string]*family{}} }

func (r *registry) add(name, help string, kind metricKind, label string, bounds ...float64) *family {
	f := &family{name: name, help: help, kind: kind, label: label, bounds: bounds, series: map[string]*series{}}
	if label == "" {
		f.get("")
	}
	r.families[name] = f
	return f
}

// get returns the series for label value lv, creating it. Callers hold the
// registry's lock.
func (f *family) get(lv string) *series {
	s := f.series[lv]
	if s == nil {
		s = &series{}
		if f.kind == kindHistogram {
			s.buckets = make([]uint64, len(f.bounds))
		}
		f.series[lv] = s
	}
	return s
}

func (f *family) observe(lv string, v float64) {
	s := f.get(lv)
	s.sum += v
	s.count++
	for i, b := range f.bounds {
		if v <= b {
			s.buckets[i]++
			break
		}
	}
}

func (r *registry) write(w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	bw := bufio.NewWriter(w)
	names := make([]string, 0, len(r.families))
	for n := range r.families {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		f := r.families[n]
		bw.WriteString("# HELP " + n + " " + escapeHelp(f.help) + "\n")
		bw.WriteString("# TYPE " + n + " " + f.kind.String() + "\n")
		lvs := make([]string, 0, len(f.series))
		for lv := range f.series {
			lvs = append(lvs, lv)
		}
		slices.Sort(lvs)
		for _, lv := range lvs {
			s := f.series[lv]
			var labels []string
			if f.label != "" {
				labels = []string{f.label + `="` + escapeLabel(lv) + `"`}
			}
			switch f.kind {
			case kindCounter, kindGauge:
				writeSample(bw, n, labels, s.value)
			case kindHistogram:
				var cum uint64
				for i, b := range f.bounds {
					cum += s.buckets[i]
					writeSample(bw, n+"_bucket", append(slices.Clip(labels), `le="`+formatFloat(b)+`"`), float64(cum))
				}
				writeSample(bw, n+"_bucket", append(slices.Clip(labels), `le="+Inf"`), float64(s.count))
				writeSample(bw, n+"_sum", labels, s.sum)
				writeSample(bw, n+"_count", labels, float64(s.count))
			case kindSummary:
				writeSample(bw, n+"_sum", labels, s.sum)
				writeSample(bw, n+"_count", labels, float64(s.count))
			}
		}
	}
	return bw.Flush()
}

func writeSample(w *bufio.Writer, name string, labels []string, v float64) {
	w.WriteString(name)
	if len(labels) > 0 {
		w.WriteString("{" + strings.Join(labels, ",") + "}")
	}
	w.WriteString(" " + formatFloat(v) + "\n")
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func escapeHelp(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(s)
}

func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`).Replace(s)
}
