package bench

import (
	"net/http"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/checkoutlock/integration-tests/harness"
)

// newHist records latencies in microseconds, from 1 µs to 60 s, with three
// significant digits.
func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

func record(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	if us < 1 {
		us = 1
	}
	_ = h.RecordValue(us)
}

// Stats summarise one measurement.
type Stats struct {
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	Seconds    float64 `json:"seconds"`
	Throughput float64 `json:"throughputPerSecond"`
	P50Ms      float64 `json:"p50Ms"`
	P95Ms      float64 `json:"p95Ms"`
	P99Ms      float64 `json:"p99Ms"`
}

func stats(h *hdrhistogram.Histogram, errors int64, elapsed time.Duration) Stats {
	ms := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
	s := Stats{Requests: h.TotalCount(), Errors: errors, Seconds: elapsed.Seconds(), P50Ms: ms(50), P95Ms: ms(95), P99Ms: ms(99)}
	if elapsed > 0 {
		s.Throughput = float64(h.TotalCount()) / elapsed.Seconds()
	}
	return s
}

// metricText is the value of an unlabelled metric in a Prometheus text
// exposition, as written there ("" when absent).
func metricText(body []byte, name string) string {
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// jsonHeader is a JSON request's headers as the cluster's tenant
// administrator.
func jsonHeader(c *harness.Cluster) http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	for k, v := range c.Headers() {
		h.Set(k, v)
	}
	return h
}

// ratio is a/b, 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
