package dashboard

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/vera-run/vera/bus"
)

// MetricSample is one series of a metric family.
type MetricSample struct {
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`           // counter, gauge; the sum for histograms and summaries
	Count  uint64            `json:"count,omitempty"` // histograms and summaries
}

// MetricFamily is one metric of the summary.
type MetricFamily struct {
	Name    string         `json:"name"`
	Help    string         `json:"help"`
	Type    string         `json:"type"`
	Samples []MetricSample `json:"samples"`
}

// handleMetrics serves the event-derived metrics (projector.Metrics'
// WriteText snapshot) as JSON for the metrics panel.
func (s *Server) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	if s.opts.Metrics == nil {
		httpError(w, http.StatusNotFound, "metrics are not enabled on this dashboard")
		return
	}
	fams, err := metricsSummary(s.opts.Metrics.WriteText)
	if err != nil {
		httpError(w, http.StatusInternalServerError, "metrics: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"metrics": fams})
}

func metricsSummary(write func(io.Writer) error) ([]MetricFamily, error) {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return nil, err
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(&buf)
	if err != nil {
		return nil, err
	}
	out := make([]MetricFamily, 0, len(mfs))
	for name, mf := range mfs {
		f := MetricFamily{Name: name, Help: mf.GetHelp(), Type: mf.GetType().String()}
		for _, m := range mf.GetMetric() {
			var smp MetricSample
			for _, lp := range m.GetLabel() {
				if smp.Labels == nil {
					smp.Labels = map[string]string{}
				}
				smp.Labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				smp.Value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				smp.Value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				smp.Value, smp.Count = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
			case dto.MetricType_SUMMARY:
				smp.Value, smp.Count = m.GetSummary().GetSampleSum(), m.GetSummary().GetSampleCount()
			default:
				smp.Value = m.GetUntyped().GetValue()
			}
			f.Samples = append(f.Samples, smp)
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// handleBlob serves a blob (big model I/O or tool output) by digest, always
// as text/plain and sandboxed, never as the stored content type.
func (s *Server) handleBlob(w http.ResponseWriter, r *http.Request) {
	digest := r.PathValue("digest")
	if !digestRE.MatchString(digest) {
		httpError(w, http.StatusBadRequest, "bad digest: want sha256:<64 hex digits>")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Minute)
	defer cancel()
	select { // a few fetches at a time: each reads the object store
	case s.blobs <- struct{}{}:
		defer func() { <-s.blobs }()
	case <-ctx.Done():
		w.Header().Set("Retry-After", "5")
		httpError(w, http.StatusServiceUnavailable, "busy: try again shortly")
		return
	}
	data, err := s.opts.Bus.GetBlob(ctx, digest)
	if errors.Is(err, bus.ErrBlobNotFound) {
		httpError(w, http.StatusNotFound, "no blob %s", digest)
		return
	}
	if err != nil {
		httpError(w, http.StatusBadGateway, "%v", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "private, max-age=86400, immutable")
	_, _ = w.Write(data)
}
