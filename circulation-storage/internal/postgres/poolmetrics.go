package postgres

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// The pools' series, read from pgxpool's own counts when /metrics is
// scraped: how many sessions each pool holds and in what state, how often
// a caller had to wait for one, and how many it opened and retired. The
// pools are named by their part: main (requests, the sweeper's and the
// notice sender's work), locks (the lock statements, when they run on a
// pool of their own: LOCK_SYNCHRONOUS_COMMIT other than on) and lead (the
// background jobs' leads).
var (
	poolConnsDesc = prometheus.NewDesc("checkout_db_pool_connections",
		"Sessions the pool holds, by state: acquired (in use), idle, constructing (being opened).", []string{"pool", "state"}, nil)
	poolMaxDesc = prometheus.NewDesc("checkout_db_pool_max_connections",
		"The most sessions the pool opens (DB_MAX_CONNS for main, half of it for locks).", []string{"pool"}, nil)
	poolAcquiresDesc = prometheus.NewDesc("checkout_db_pool_acquires_total",
		"Sessions handed out by the pool.", []string{"pool"}, nil)
	poolEmptyAcquiresDesc = prometheus.NewDesc("checkout_db_pool_empty_acquires_total",
		"Sessions asked for when none was idle: the caller waited for one to be opened or given back.", []string{"pool"}, nil)
	poolEmptyWaitDesc = prometheus.NewDesc("checkout_db_pool_empty_acquire_wait_seconds_total",
		"Time callers spent waiting for a session when none was idle.", []string{"pool"}, nil)
	poolCanceledDesc = prometheus.NewDesc("checkout_db_pool_canceled_acquires_total",
		"Requests for a session given up before one came (the caller's deadline or cancellation).", []string{"pool"}, nil)
	poolOpenedDesc = prometheus.NewDesc("checkout_db_pool_connections_opened_total",
		"Sessions the pool opened: each is a new PostgreSQL backend, which plans the statements again.", []string{"pool"}, nil)
	poolRetiredDesc = prometheus.NewDesc("checkout_db_pool_connections_retired_total",
		"Sessions the pool closed for their age, by reason: lifetime (DB_MAX_CONN_LIFETIME), idle (unused too long).", []string{"pool", "reason"}, nil)
)

// PoolCollector reports the pools' series (above) of db.
type PoolCollector struct{ db *DB }

// NewPoolCollector returns the collector of db's pools' series.
func NewPoolCollector(db *DB) *PoolCollector { return &PoolCollector{db: db} }

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolConnsDesc, poolMaxDesc, poolAcquiresDesc, poolEmptyAcquiresDesc, poolEmptyWaitDesc,
		poolCanceledDesc, poolOpenedDesc, poolRetiredDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.db.named() {
		s := p.pool.Stat()
		gauge := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append([]string{p.name}, labels...)...)
		}
		counter := func(d *prometheus.Desc, v float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, append([]string{p.name}, labels...)...)
		}
		gauge(poolConnsDesc, float64(s.AcquiredConns()), "acquired")
		gauge(poolConnsDesc, float64(s.IdleConns()), "idle")
		gauge(poolConnsDesc, float64(s.ConstructingConns()), "constructing")
		gauge(poolMaxDesc, float64(s.MaxConns()))
		counter(poolAcquiresDesc, float64(s.AcquireCount()))
		counter(poolEmptyAcquiresDesc, float64(s.EmptyAcquireCount()))
		counter(poolEmptyWaitDesc, s.EmptyAcquireWaitTime().Seconds())
		counter(poolCanceledDesc, float64(s.CanceledAcquireCount()))
		counter(poolOpenedDesc, float64(s.NewConnsCount()))
		counter(poolRetiredDesc, float64(s.MaxLifetimeDestroyCount()), "lifetime")
		counter(poolRetiredDesc, float64(s.MaxIdleDestroyCount()), "idle")
	}
}

// namedPool is one of db's pools with the name its series carry.
type namedPool struct {
	name string
	pool *pgxpool.Pool
}

// named is db's pools, each once: the lock statements' pool only when it
// is not the main pool.
func (db *DB) named() []namedPool {
	pools := []namedPool{{"main", db.Pool.Pool}}
	if db.LockPool != db.Pool {
		pools = append(pools, namedPool{"locks", db.LockPool.Pool})
	}
	return append(pools, namedPool{"lead", db.LeadPool.Pool})
}
