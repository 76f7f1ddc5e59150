package httpapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/checkoutlock/circulation-storage/relay"
)

// OutboxMetrics are the outbox relay's series: how far behind delivery is
// (the events waiting and the oldest one's age, as the leading relay last
// read them), what was published, and the broker's refusals.
type OutboxMetrics struct {
	leading   prometheus.Gauge
	depth     prometheus.Gauge
	age       prometheus.Gauge
	published prometheus.Counter
	retries   prometheus.Counter
	failures  prometheus.Counter
}

var _ relay.Observer = (*OutboxMetrics)(nil)

// Outbox registers the relay's series.
func (m *Metrics) Outbox() *OutboxMetrics {
	o := &OutboxMetrics{
		leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "checkout_outbox_relay_leading",
			Help: "1 while this instance is the outbox relay (one instance of those on a database leads)."}),
		depth: prometheus.NewGauge(prometheus.GaugeOpts{Name: "checkout_outbox_depth",
			Help: "Events committed and not yet published, as this instance last counted them (the leader from its own progress, every other from the marks the leader stored)."}),
		age: prometheus.NewGauge(prometheus.GaugeOpts{Name: "checkout_outbox_oldest_age_seconds",
			Help: "Age of the oldest event not yet published (0 when none waits): how far behind delivery is; every instance with NATS_URL reports it, read from the database."}),
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "checkout_outbox_published_total",
			Help: "Events published to the broker (and stored by it)."}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{Name: "checkout_outbox_publish_retries_total",
			Help: "Times the relay paused and tried again because the broker did not take an event."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "checkout_outbox_publish_failures_total",
			Help: "Publications the broker refused or did not acknowledge (their events are published again, in order)."}),
	}
	m.MustRegister(o.leading, o.depth, o.age, o.published, o.retries, o.failures)
	return o
}

// Leading implements relay.Observer.
func (o *OutboxMetrics) Leading(on bool) {
	if on {
		o.leading.Set(1)
		return
	}
	o.leading.Set(0)
}

// Backlog implements relay.Observer.
func (o *OutboxMetrics) Backlog(n int64, oldest time.Duration) {
	o.depth.Set(float64(n))
	o.age.Set(oldest.Seconds())
}

// Published implements relay.Observer.
func (o *OutboxMetrics) Published(n int) { o.published.Add(float64(n)) }

// Retried implements relay.Observer.
func (o *OutboxMetrics) Retried() { o.retries.Inc() }

// Failed implements relay.Observer.
func (o *OutboxMetrics) Failed() { o.failures.Inc() }
