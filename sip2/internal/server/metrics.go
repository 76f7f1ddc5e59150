package server

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the door's Prometheus series. Their labels take a bounded
// set of values: a message's code is one of SIP2's requests or "unknown",
// an outcome and a reason are the door's own words.
type Metrics struct {
	messages    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	connections prometheus.Gauge
	refused     *prometheus.CounterVec
	closed      *prometheus.CounterVec
}

// NewMetrics registers the door's series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sip2_messages_total",
			Help: "SIP2 messages answered, by request code and outcome."}, []string{"message", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sip2_message_duration_seconds",
			Help:    "Time from a SIP2 message read to its reply written, by request code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"message"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sip2_connections",
			Help: "Kiosk connections open now."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sip2_connections_refused_total",
			Help: "Connections closed at once: the door at its cap in total or for the client's address."}, []string{"reason"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sip2_connections_closed_total",
			Help: "Connections ended, by reason (too_long, line_timeout, idle, no_login, bad_messages, session_ended, tls, proxy_header, shutdown, closed)."},
			[]string{"reason"}),
	}
	reg.MustRegister(m.messages, m.duration, m.connections, m.refused, m.closed)
	return m
}
