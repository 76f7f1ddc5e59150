package serverkit

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is a service's Prometheus registry, its own (no global state,
// so tests can build as many servers as they like): the Go runtime's and
// the process's collectors, and the latency of the HTTP requests the
// request path records, by method, route and status. The service
// registers its own series beside them (MustRegister).
type Metrics struct {
	registry        *prometheus.Registry
	requestDuration *prometheus.HistogramVec
	// requestSeries are requestDuration's series by seriesKey, resolved
	// once each: finding a series by its label values hashes and checks
	// them on every request. The keys are bounded as the series are: the
	// router's routes, methodLabel's methods and the statuses the service
	// answers.
	requestSeries sync.Map
}

// NewMetrics makes the registry, with the request histogram's buckets
// (in seconds) fit for the service's latencies.
func NewMetrics(buckets []float64) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "http_request_duration_seconds", Help: "Time to answer HTTP requests, by method, route and status.",
			Buckets: buckets,
		}, []string{"method", "route", "status"}),
	}
	m.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requestDuration)
	return m
}

// MustRegister registers the service's own series.
func (m *Metrics) MustRegister(cs ...prometheus.Collector) { m.registry.MustRegister(cs...) }

// Handler serves the metrics in Prometheus' text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// seriesKey names a series of the request histogram.
type seriesKey struct {
	method, route string
	status        int
}

// observe records a request's latency.
func (m *Metrics) observe(method, route string, status int, elapsed time.Duration) {
	key := seriesKey{methodLabel(method), route, status}
	o, ok := m.requestSeries.Load(key)
	if !ok {
		o, _ = m.requestSeries.LoadOrStore(key, m.requestDuration.WithLabelValues(key.method, route, strconv.Itoa(status)))
	}
	o.(prometheus.Observer).Observe(elapsed.Seconds())
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
