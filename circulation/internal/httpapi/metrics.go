package httpapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/serverkit"
)

// Metrics are the circulation service's Prometheus metrics: the server's
// (serverkit.Metrics: the runtime, the process, the HTTP requests) and the
// check-out's and its lock's. They implement circulation.Observer.
type Metrics struct {
	*serverkit.Metrics
	checkOuts    *prometheus.HistogramVec
	lockWait     *prometheus.HistogramVec
	lockAttempts prometheus.Histogram
	lockFailures prometheus.Counter
	releases     *prometheus.CounterVec
}

var _ circulation.Observer = (*Metrics)(nil)

var latencyBuckets = []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// NewMetrics creates and registers the metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		Metrics: serverkit.NewMetrics(latencyBuckets),
		checkOuts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "checkout_duration_seconds", Help: "Check-out latency by outcome: checked_out, refused (a wrong or locked PIN too), lock_unavailable, error.",
			Buckets: latencyBuckets,
		}, []string{"outcome"}),
		lockWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "checkout_lock_wait_seconds", Help: "Time from the first acquisition attempt to the lock (or to giving up), by result.",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		lockAttempts: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "checkout_lock_attempts", Help: "Acquisition attempts per check-out under the lock.",
			Buckets: []float64{1, 2, 3, 4, 5, 8, 16, 32},
		}),
		lockFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "checkout_lock_acquire_failures_total", Help: "Check-outs that could not acquire the patron's lock.",
		}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "checkout_lock_releases_total", Help: "Lock releases by result: released, expired (already gone), failed.",
		}, []string{"result"}),
	}
	m.MustRegister(m.checkOuts, m.lockWait, m.lockAttempts, m.lockFailures, m.releases)
	for _, r := range []string{"released", "expired", "failed"} {
		m.releases.WithLabelValues(r)
	}
	// Every outcome is exported from the start, so rates and alerts over
	// them are defined before the first check-out.
	for _, o := range []string{"checked_out", "refused", "lock_unavailable", "error"} {
		m.checkOuts.WithLabelValues(o)
	}
	return m
}

func (m *Metrics) observeCheckOut(err error, elapsed time.Duration) {
	outcome := "checked_out"
	_, refused := errs.Outermost(err).(*errs.Refusal)
	switch {
	case err == nil:
	case errs.IsCode(err, schemas.CodeUnableToAcquireLock):
		outcome = "lock_unavailable"
	case refused, errs.IsCode(err, schemas.CodePinInvalid), errs.IsCode(err, schemas.CodePinLocked):
		outcome = "refused"
	default:
		outcome = "error"
	}
	m.checkOuts.WithLabelValues(outcome).Observe(elapsed.Seconds())
}

// LockAcquired implements circulation.Observer.
func (m *Metrics) LockAcquired(attempts int, wait time.Duration) {
	m.lockAttempts.Observe(float64(attempts))
	m.lockWait.WithLabelValues("acquired").Observe(wait.Seconds())
}

// LockNotAcquired implements circulation.Observer.
func (m *Metrics) LockNotAcquired(attempts int, wait time.Duration) {
	m.lockAttempts.Observe(float64(attempts))
	m.lockWait.WithLabelValues("not_acquired").Observe(wait.Seconds())
	m.lockFailures.Inc()
}

// LockReleased implements circulation.Observer.
func (m *Metrics) LockReleased(err error) {
	switch {
	case err == nil:
		m.releases.WithLabelValues("released").Inc()
	case errs.IsKind(err, errs.KindNotFound):
		m.releases.WithLabelValues("expired").Inc()
	default:
		m.releases.WithLabelValues("failed").Inc()
	}
}
