package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are circulation-storage's Prometheus metrics, on a registry of
// their own (no global state, so tests can build as many servers as they like).
type Metrics struct {
	registry         *prometheus.Registry
	requestDuration  *prometheus.HistogramVec
	lockAcquisitions *prometheus.CounterVec
	sweeperDeleted   prometheus.Counter
}

// latencyBuckets resolve the sub-millisecond to second range a lock call
// lives in.
var latencyBuckets = []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// NewMetrics creates and registers the metrics, with the Go runtime and
// process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_request_duration_seconds",
			Help:    "Time to answer HTTP requests, by method, route and status.",
			Buckets: latencyBuckets,
		}, []string{"method", "route", "status"}),
		lockAcquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "checkout_lock_acquisitions_total",
			Help: "Lock acquisition attempts by outcome: acquired, took_over_expired, renewed, held.",
		}, []string{"outcome"}),
		sweeperDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "checkout_lock_sweeper_deleted_total",
			Help: "Expired locks deleted by the background sweeper.",
		}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requestDuration, m.lockAcquisitions, m.sweeperDeleted,
	)
	for _, outcome := range []string{"acquired", "took_over_expired", "renewed", "held"} {
		m.lockAcquisitions.WithLabelValues(outcome)
	}
	return m
}

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// SweeperDeleted counts locks deleted by the sweeper.
func (m *Metrics) SweeperDeleted(n int) { m.sweeperDeleted.Add(float64(n)) }

func (m *Metrics) observeRequest(method, route string, status int, elapsed time.Duration) {
	m.requestDuration.WithLabelValues(methodLabel(method), route, strconv.Itoa(status)).Observe(elapsed.Seconds())
}

// knownMethods are the HTTP methods that label metrics as themselves.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodOptions: true, http.MethodConnect: true, http.MethodTrace: true,
}

// methodLabel is the method as a metric label: a client may send any token
// as its method, and each new label value is a new series kept for ever, so
// every method HTTP does not define is counted as OTHER.
func methodLabel(method string) string {
	if knownMethods[method] {
		return method
	}
	return "OTHER"
}
