package harness

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric reads one series of a process's /metrics ("name" or
// `name{label="value"}`, a histogram's name_count and name_sum among them);
// found is false when the process does not export it. The series must name
// every label of the sample it reads, in any order.
func (c *Cluster) Metric(t testing.TB, p *Process, series string) (value float64, found bool) {
	t.Helper()
	want := parseSamples(t, strings.NewReader(series+" 0\n"))
	if len(want) != 1 {
		t.Fatalf("%q names %d series, want 1", series, len(want))
	}
	for _, s := range c.samples(t, p) {
		if s.Metric.Equal(want[0].Metric) {
			return float64(s.Value), true
		}
	}
	return 0, false
}

// Served is how many requests to method and route (its pattern, as the
// process's request metric names it) process p has answered, in every
// status: the sum of its http_request_duration_seconds counts. A process
// counts a request once it has answered it.
func (c *Cluster) Served(t testing.TB, p *Process, method, route string) int {
	t.Helper()
	n := 0
	for _, s := range c.samples(t, p) {
		if s.Metric[model.MetricNameLabel] == "http_request_duration_seconds_count" &&
			s.Metric["method"] == model.LabelValue(method) && s.Metric["route"] == model.LabelValue(route) {
			n += int(s.Value)
		}
	}
	return n
}

// samples is every sample of process p's /metrics.
func (c *Cluster) samples(t testing.TB, p *Process) model.Vector {
	t.Helper()
	res := c.DoWith(p, "GET", "/metrics", nil, nil).Want(t, http.StatusOK)
	return parseSamples(t, bytes.NewReader(res.Body))
}

// parseSamples reads Prometheus's text format into its samples, each named
// by its labels and its name (as __name__); a histogram gives its _bucket,
// _sum and _count series.
func parseSamples(t testing.TB, text io.Reader) model.Vector {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(text)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	samples, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, slices.Collect(maps.Values(families))...)
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	return samples
}
