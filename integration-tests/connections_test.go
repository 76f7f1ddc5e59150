package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// hog holds database connections, as other clients of a shared server
// would.
type hog struct {
	t     *testing.T
	url   string
	conns []*pgx.Conn
}

// fill connects until the server refuses (too many connections) and
// reports how many it took.
func (h *hog) fill() int {
	h.t.Helper()
	n := 0
	for range 1000 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, h.url)
		cancel()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "53300" { // too_many_connections
			return n
		}
		if err != nil {
			h.t.Fatalf("take a connection: %v", err)
		}
		h.conns = append(h.conns, conn)
		n++
	}
	h.t.Fatal("the server took 1000 connections more: its max_connections is not what the test set")
	return n
}

// free closes every connection held.
func (h *hog) free() {
	for _, c := range h.conns {
		_ = c.Close(context.Background())
	}
	h.conns = nil
}

// TestDatabaseOutOfConnections: other clients take every connection a
// PostgreSQL server has left. What storage's pools already hold keeps
// serving (check-outs one after another go through). Once storage's own
// sessions end too (as a failover or a pooler would end them), storage
// cannot connect: a check-out is answered 503 with Retry-After at once,
// well inside the request deadline, storage's readiness says the database
// is unavailable, nothing is written; and within seconds of the
// connections being freed, check-outs go through again by themselves.
func TestDatabaseOutOfConnections(t *testing.T) {
	t.Parallel()
	pg := harness.StartPostgres(t, "max_connections=40", "superuser_reserved_connections=0")
	ctx := context.Background()
	c := harness.NewCluster(t, harness.Options{DatabaseURL: pg.CreateDatabase("circulation"), Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 3, 0)
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated)
	// A connection of the test's own, to look at the database while the
	// server is full.
	watch, err := pgx.Connect(ctx, pg.URL("circulation"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Close(context.Background()) })
	others := &hog{t: t, url: pg.URL("postgres")}
	t.Cleanup(others.free)
	took := others.fill()

	// What the pools hold serves on.
	for _, item := range lib.Items[1] {
		c.CheckOut(0, item, lib.Patrons[1]).Want(t, http.StatusCreated)
	}

	// Storage's sessions end, and every slot they leave is taken.
	storageSessions := func() []int32 {
		var pids []int32
		if err := watch.QueryRow(ctx, `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
			WHERE datname = 'circulation' AND application_name LIKE 'circulation-storage%'`).Scan(&pids); err != nil {
			t.Fatal(err)
		}
		return pids
	}
	waitFor(t, "storage to have no session and the server no free slot", func() bool {
		pids := storageSessions()
		if len(pids) > 0 {
			if _, err := watch.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) pid`, pids); err != nil {
				t.Fatal(err)
			}
		}
		took += others.fill()
		return len(pids) == 0 && len(storageSessions()) == 0
	})

	item, patron := lib.Items[2][0], lib.Patrons[2]
	start := time.Now()
	r := c.CheckOut(0, item, patron)
	answered := time.Since(start)
	if r.Status != http.StatusServiceUnavailable || r.ErrorCodes()[0] != schemas.CodeStorageUnavailable || r.Header.Get("Retry-After") != "1" {
		t.Errorf("a check-out with no connection to be had: %d %s (Retry-After %q), want 503 STORAGE_UNAVAILABLE with Retry-After 1",
			r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if answered > 5*time.Second {
		t.Errorf("the check-out was answered after %s, want well inside storage's 10 s request deadline", answered.Round(time.Millisecond))
	}
	ready := c.Do(c.Storage, "GET", "/admin/ready", nil)
	if ready.Status != http.StatusServiceUnavailable || ready.ErrorCodes()[0] != schemas.CodeDatabaseUnavailable || ready.Header.Get("Retry-After") != "1" {
		t.Errorf("storage's readiness with no connection to be had: %d %s, want 503 DATABASE_UNAVAILABLE with Retry-After", ready.Status, ready.Body)
	}
	var loans int
	var status string
	if err := watch.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM %[1]s.loan l JOIN %[1]s.patron p ON p.id = l.user_id
		WHERE p.barcode = $1), (SELECT status_name FROM %[1]s.item WHERE barcode = $2)`, pgx.Identifier{c.Schema}.Sanitize()), patron, item).
		Scan(&loans, &status); err != nil {
		t.Fatal(err)
	}
	if loans != 0 || status != "Available" {
		t.Errorf("after the refused check-out: %d loans of the patron, the item %q; want nothing written", loans, status)
	}

	others.free()
	freed := time.Now()
	waitFor(t, "a check-out to go through once connections are free", func() bool {
		return c.CheckOut(0, item, patron).Status == http.StatusCreated
	})
	t.Logf("others held %d connections; a check-out with none to be had answered 503 in %s; check-outs went through %s after they were freed",
		took, answered.Round(time.Millisecond), time.Since(freed).Round(time.Millisecond))
}

// TestOneConnectionServesWhileTheBackgroundJobsLead: storage given one
// database connection (DB_MAX_CONNS=1, the lock statements on it too)
// lends while its sweeper and its notice sender lead, pass after pass:
// each leads on a session of its own (postgres.DB.LeadPool), so none
// holds the one connection while it waits for another, for ever.
func TestOneConnectionServesWhileTheBackgroundJobsLead(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true,
		StorageEnv: []string{"DB_MAX_CONNS=1", "LOCK_SYNCHRONOUS_COMMIT=on", "LOCK_SWEEP_INTERVAL=50ms", "NOTICE_INTERVAL=50ms"}})
	lib := c.SetupLibrary(2, 3, 0)
	led := func() (swept, rounds float64) {
		swept, _ = c.Metric(t, c.Storage, `checkout_lock_sweeper_pass_seconds_count{result="swept"}`)
		rounds, _ = c.Metric(t, c.Storage, `patron_notice_rounds_total{result="done"}`)
		return swept, rounds
	}
	waitFor(t, "storage's sweeper and notice sender to lead twice each", func() bool {
		swept, rounds := led()
		return swept >= 2 && rounds >= 2
	})
	for i, patron := range lib.Patrons {
		for _, item := range lib.Items[i] {
			c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
		}
		if n := c.OpenLoans(t, patron); n != len(lib.Items[i]) {
			t.Errorf("patron %s has %d open loans, want %d", patron, n, len(lib.Items[i]))
		}
	}
	swept, rounds := led()
	waitFor(t, "both jobs to lead again after the check-outs", func() bool {
		s, r := led()
		return s > swept && r > rounds
	})
	// The pools' series say so: a main pool of one session, which opened
	// one and never made a caller give up; a lead pool of two, which
	// opened at least one; no pool of the lock statements' own.
	for series, want := range map[string]float64{
		`checkout_db_pool_max_connections{pool="main"}`:          1,
		`checkout_db_pool_connections_opened_total{pool="main"}`: 1,
		`checkout_db_pool_canceled_acquires_total{pool="main"}`:  0,
		`checkout_db_pool_max_connections{pool="lead"}`:          2,
	} {
		if got, found := c.Metric(t, c.Storage, series); !found || got != want {
			t.Errorf("%s = %g (found %t), want %g", series, got, found, want)
		}
	}
	if opened, _ := c.Metric(t, c.Storage, `checkout_db_pool_connections_opened_total{pool="lead"}`); opened < 1 {
		t.Errorf("the lead pool opened %g sessions, want at least one", opened)
	}
	if _, found := c.Metric(t, c.Storage, `checkout_db_pool_max_connections{pool="locks"}`); found {
		t.Error("a pool of the lock statements' own, with LOCK_SYNCHRONOUS_COMMIT=on")
	}
}
