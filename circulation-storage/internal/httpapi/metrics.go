package httpapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/sweeper"
	"github.com/checkoutlock/circulation-storage/internal/waiting"
	"github.com/checkoutlock/serverkit"
)

// Metrics are circulation-storage's Prometheus metrics: the server's
// (serverkit.Metrics: the runtime, the process, the HTTP requests) and the
// lock's, the sweeper's, the release listener's and the sign-in's.
type Metrics struct {
	*serverkit.Metrics
	lockAcquisitions *prometheus.CounterVec
	// acquisitions are lockAcquisitions' series by outcome.
	acquisitions       map[string]prometheus.Counter
	sweeperDeleted     prometheus.Counter
	sweeperPass        *prometheus.HistogramVec
	sweeperWork        *prometheus.HistogramVec
	notices            *prometheus.CounterVec
	noticeRounds       *prometheus.CounterVec
	sweeperFailures    *prometheus.CounterVec
	waitDuration       *prometheus.HistogramVec
	waiters            prometheus.Gauge
	wakeups            *prometheus.CounterVec
	grantsToGone       prometheus.Counter
	watchFailures      prometheus.Counter
	listenerUp         prometheus.Gauge
	listenerReconnects prometheus.Counter
	lockEvents         *prometheus.CounterVec
	lockEventsLost     prometheus.Counter
	secretsChecked     *prometheus.CounterVec
	attemptsRefused    *prometheus.CounterVec
}

var (
	_ waiting.WaitObserver  = (*Metrics)(nil)
	_ storage.EventObserver = (*Metrics)(nil)
)

// latencyBuckets resolve the sub-millisecond to second range a lock call
// lives in.
var latencyBuckets = []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// NewMetrics creates and registers the metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		Metrics: serverkit.NewMetrics(latencyBuckets),
		lockAcquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "checkout_lock_acquisitions_total",
			Help: "Lock acquisition attempts by outcome: acquired, took_over_expired, renewed, held.",
		}, []string{"outcome"}),
		lockEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "checkout_lock_events_total",
			Help: "Lock history events by type: expired (a lock expired while held), taken_over, released_by_other, waiter_gave_up, lent_offline, returned_before_loan.",
		}, []string{"type"}),
		lockEventsLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "checkout_lock_events_lost_total",
			Help: "Lock history events that could not be written.",
		}),
		sweeperDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "checkout_lock_sweeper_deleted_total",
			Help: "Expired locks deleted by the background sweeper.",
		}),
		sweeperPass: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "checkout_lock_sweeper_pass_seconds",
			Help:    "Time the sweeper's passes took, by result: swept, skipped (another instance was sweeping), failed (a tenant or the listing failed).",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		sweeperWork: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "checkout_lock_sweeper_work_seconds",
			Help:    "Time each kind of the sweeper's work took in a pass, by work: locks, waiters, login, history, request_expiry, hold_shelf.",
			Buckets: latencyBuckets,
		}, []string{"work"}),
		sweeperFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "checkout_lock_sweeper_failures_total",
			Help: "The sweeper's work that failed, each tried again at the next pass while the rest was done, by work: locks, waiters, login, history, request_expiry, hold_shelf, and expired_request and hold_shelf_request (one request past its expiration date, or its hold shelf date, that could not be closed).",
		}, []string{"work"}),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patron_notices_total",
			Help: "Patron notices this instance settled, by status: Sent, No email (the patron has none), Failed (every try failed: the dead letter), Obsolete (no longer due), and Scheduled (a try failed; tried again later).",
		}, []string{"status"}),
		noticeRounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "patron_notice_rounds_total",
			Help: "Rounds of the notice sender this instance led, by result: done, failed (tried again at the next round).",
		}, []string{"result"}),
		waitDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "checkout_lock_wait_seconds",
			Help:    "Time acquisitions with waitMs spent waiting for a held lock, by result: acquired, timed_out, gone (client left), failed, shut_down (the instance shut down).",
			Buckets: latencyBuckets,
		}, []string{"result"}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "checkout_lock_waiters",
			Help: "Acquisitions waiting for a held lock on this instance now.",
		}),
		wakeups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "checkout_lock_wakeups_total",
			Help: "Wake-ups that made a waiter try the lock again, by cause: release (notified), expiry (timer at the holder's expiry), poll (safety net).",
		}, []string{"cause"}),
		grantsToGone: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "checkout_lock_grants_to_gone_clients_total",
			Help: "Locks granted to waiters whose client had gone, released at once.",
		}),
		watchFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "checkout_lock_watch_failures_total",
			Help: "Waits that could not be registered for release notifications; they are served by polling.",
		}),
		listenerUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "checkout_lock_listener_up",
			Help: "1 while the lock release listener receives notifications, else 0 (waiters then poll).",
		}),
		listenerReconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "checkout_lock_listener_reconnects_total",
			Help: "Times the lock release listener connected again after losing its connection.",
		}),
		secretsChecked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "login_secrets_checked_total",
			Help: "Passwords and PINs checked against their hash, by kind (password, pin) and result (match, mismatch): each was counted first.",
		}, []string{"kind", "result"}),
		attemptsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "login_attempts_refused_total",
			Help: "Sign-ins and PIN checks refused before anything was checked, by kind (password, pin) and reason: locked (wrong secrets lock their count) or busy (no turn came while as many others were being checked as the count lets be).",
		}, []string{"kind", "reason"}),
	}
	m.MustRegister(
		m.lockAcquisitions, m.sweeperDeleted, m.sweeperPass, m.sweeperWork, m.sweeperFailures, m.notices, m.noticeRounds,
		m.waitDuration, m.waiters, m.wakeups, m.grantsToGone, m.watchFailures, m.listenerUp, m.listenerReconnects,
		m.lockEvents, m.lockEventsLost, m.secretsChecked, m.attemptsRefused,
	)
	for _, work := range sweeper.Works {
		m.sweeperFailures.WithLabelValues(work)
	}
	for _, kind := range []string{"password", "pin"} {
		m.secretsChecked.WithLabelValues(kind, "match")
		m.secretsChecked.WithLabelValues(kind, "mismatch")
		m.attemptsRefused.WithLabelValues(kind, "locked")
		m.attemptsRefused.WithLabelValues(kind, "busy")
	}
	for _, t := range storage.EventTypes {
		m.lockEvents.WithLabelValues(string(t))
	}
	m.acquisitions = map[string]prometheus.Counter{}
	for _, outcome := range []string{"acquired", "took_over_expired", "renewed", "held"} {
		m.acquisitions[outcome] = m.lockAcquisitions.WithLabelValues(outcome)
	}
	for _, r := range waiting.WaitResults {
		m.waitDuration.WithLabelValues(string(r))
	}
	for _, c := range []waiting.WakeCause{waiting.WokenByRelease, waiting.WokenByExpiry, waiting.WokenByPoll} {
		m.wakeups.WithLabelValues(string(c))
	}
	return m
}

// SecretChecked counts a password or PIN checked (login.Config.Checked).
func (m *Metrics) SecretChecked(kind string, matched bool) {
	result := "mismatch"
	if matched {
		result = "match"
	}
	m.secretsChecked.WithLabelValues(kind, result).Inc()
}

// AttemptRefused counts an attempt refused unchecked (login.Config.Refused).
func (m *Metrics) AttemptRefused(kind, reason string) {
	m.attemptsRefused.WithLabelValues(kind, reason).Inc()
}

// Waiters implements waiting.WaitObserver.
func (m *Metrics) Waiters(delta int) { m.waiters.Add(float64(delta)) }

// Woken implements waiting.WaitObserver.
func (m *Metrics) Woken(cause waiting.WakeCause) { m.wakeups.WithLabelValues(string(cause)).Inc() }

// WaitEnded implements waiting.WaitObserver.
func (m *Metrics) WaitEnded(result waiting.WaitResult, waited time.Duration) {
	m.waitDuration.WithLabelValues(string(result)).Observe(waited.Seconds())
}

// GrantedToGone implements waiting.WaitObserver.
func (m *Metrics) GrantedToGone() { m.grantsToGone.Inc() }

// WatchFailed implements waiting.WaitObserver.
func (m *Metrics) WatchFailed(error) { m.watchFailures.Inc() }

// ListenerUp records whether the release listener is receiving.
func (m *Metrics) ListenerUp(up bool) {
	if up {
		m.listenerUp.Set(1)
	} else {
		m.listenerUp.Set(0)
	}
}

// ListenerReconnecting counts an attempt to listen again.
func (m *Metrics) ListenerReconnecting() { m.listenerReconnects.Inc() }

// SweeperPass records one pass of the sweeper: how long it took, and its
// result (swept, skipped or failed).
func (m *Metrics) SweeperPass(d time.Duration, result string) {
	m.sweeperPass.WithLabelValues(result).Observe(d.Seconds())
}

// SweeperWork records one kind of a sweeper pass's work (sweeper.Works):
// how long it took, and counts it failed.
func (m *Metrics) SweeperWork(work string, d time.Duration, err error) {
	if d > 0 {
		m.sweeperWork.WithLabelValues(work).Observe(d.Seconds())
	}
	if err != nil {
		m.sweeperFailures.WithLabelValues(work).Inc()
	}
}

// NoticeSettled counts a notice settled, or a try that failed
// (notices.SendConfig.OnSent).
func (m *Metrics) NoticeSettled(status string) { m.notices.WithLabelValues(status).Inc() }

// NoticeRound counts a round of the notice sender
// (notices.Runner.OnRound).
func (m *Metrics) NoticeRound(_, _ int, err error) {
	result := "done"
	if err != nil {
		result = "failed"
	}
	m.noticeRounds.WithLabelValues(result).Inc()
}

// SweeperDeleted counts locks deleted by the sweeper.
func (m *Metrics) SweeperDeleted(n int) {
	m.sweeperDeleted.Add(float64(n))
	m.lockEvents.WithLabelValues(string(storage.EventExpired)).Add(float64(n))
}

// Event implements storage.EventObserver.
func (m *Metrics) Event(t storage.EventType) { m.lockEvents.WithLabelValues(string(t)).Inc() }

// EventLost implements storage.EventObserver.
func (m *Metrics) EventLost(error) { m.lockEventsLost.Inc() }

// acquisition counts a lock acquisition attempt by its outcome: acquired,
// took_over_expired, renewed or held.
func (m *Metrics) acquisition(outcome string) {
	if c, ok := m.acquisitions[outcome]; ok {
		c.Inc()
		return
	}
	m.lockAcquisitions.WithLabelValues(outcome).Inc()
}
