package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
)

// TestThePoolsAreCounted: the pools' series name each pool (main, locks
// when the lock statements have a pool of their own, lead) with its size,
// count the sessions handed out and opened, and say which are in use: one
// held is acquired until it is given back. A main pool of one, asked
// while its session is held, counts an acquire that waited, and one given
// up at its deadline.
func TestThePoolsAreCounted(t *testing.T) {
	t.Parallel()
	url := pgtest.Shared(t)
	ctx := context.Background()
	db := dbtest.OpenDB(t, url) // MaxConns 8, the lock statements on a pool of their own
	collector := postgres.NewPoolCollector(db)
	for range 3 {
		if _, err := db.Pool.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := `
# HELP checkout_db_pool_connections Sessions the pool holds, by state: acquired (in use), idle, constructing (being opened).
# TYPE checkout_db_pool_connections gauge
checkout_db_pool_connections{pool="lead",state="acquired"} 0
checkout_db_pool_connections{pool="lead",state="constructing"} 0
checkout_db_pool_connections{pool="lead",state="idle"} 0
checkout_db_pool_connections{pool="locks",state="acquired"} 0
checkout_db_pool_connections{pool="locks",state="constructing"} 0
checkout_db_pool_connections{pool="locks",state="idle"} 0
checkout_db_pool_connections{pool="main",state="acquired"} 1
checkout_db_pool_connections{pool="main",state="constructing"} 0
checkout_db_pool_connections{pool="main",state="idle"} 0
# HELP checkout_db_pool_max_connections The most sessions the pool opens (DB_MAX_CONNS for main, half of it for locks).
# TYPE checkout_db_pool_max_connections gauge
checkout_db_pool_max_connections{pool="lead"} 2
checkout_db_pool_max_connections{pool="locks"} 4
checkout_db_pool_max_connections{pool="main"} 8
# HELP checkout_db_pool_acquires_total Sessions handed out by the pool.
# TYPE checkout_db_pool_acquires_total counter
checkout_db_pool_acquires_total{pool="lead"} 0
checkout_db_pool_acquires_total{pool="locks"} 0
checkout_db_pool_acquires_total{pool="main"} 4
# HELP checkout_db_pool_connections_opened_total Sessions the pool opened: each is a new PostgreSQL backend, which plans the statements again.
# TYPE checkout_db_pool_connections_opened_total counter
checkout_db_pool_connections_opened_total{pool="lead"} 0
checkout_db_pool_connections_opened_total{pool="locks"} 0
checkout_db_pool_connections_opened_total{pool="main"} 1
`
	names := []string{"checkout_db_pool_connections", "checkout_db_pool_max_connections", "checkout_db_pool_acquires_total",
		"checkout_db_pool_connections_opened_total"}
	if err := testutil.CollectAndCompare(collector, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	conn.Release()
	idle := strings.Replace(strings.Replace(want, `pool="main",state="acquired"} 1`, `pool="main",state="acquired"} 0`, 1),
		`pool="main",state="idle"} 0`, `pool="main",state="idle"} 1`, 1)
	if err := testutil.CollectAndCompare(collector, strings.NewReader(idle), names...); err != nil {
		t.Errorf("after the session is given back: %v", err)
	}

	one, err := postgres.Open(ctx, url, postgres.PoolConfig{MaxConns: 1, LockCommit: "on"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbtest.CloseWithin(t, one, 10*time.Second) })
	held, err := one.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waiting, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if c, err := one.Pool.Acquire(waiting); err == nil {
		c.Release()
		t.Fatal("a second session from a pool of one, while the first is held")
	}
	held.Release()
	if err := testutil.CollectAndCompare(postgres.NewPoolCollector(one), strings.NewReader(`
# HELP checkout_db_pool_canceled_acquires_total Requests for a session given up before one came (the caller's deadline or cancellation).
# TYPE checkout_db_pool_canceled_acquires_total counter
checkout_db_pool_canceled_acquires_total{pool="lead"} 0
checkout_db_pool_canceled_acquires_total{pool="main"} 1
# HELP checkout_db_pool_empty_acquires_total Sessions asked for when none was idle: the caller waited for one to be opened or given back.
# TYPE checkout_db_pool_empty_acquires_total counter
checkout_db_pool_empty_acquires_total{pool="lead"} 0
checkout_db_pool_empty_acquires_total{pool="main"} 1
`), "checkout_db_pool_canceled_acquires_total", "checkout_db_pool_empty_acquires_total"); err != nil {
		t.Errorf("a pool of one (no pool of its own for the locks), asked while held: %v", err)
	}
}
