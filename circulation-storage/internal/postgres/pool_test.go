package postgres_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
)

// TestStatementsOutliveTerminatedBackends fills both pools with
// connections, ends every one of their server processes
// (pg_terminate_backend, waiting until they are gone) and then runs at
// once as many statements as the pools held connections: the lock
// statements, a read, a transaction and a single-statement write. None may
// fail: a connection the server closed is dropped before it is handed out,
// and a statement that met one anyway runs again on a fresh one. Three
// rounds.
func TestStatementsOutliveTerminatedBackends(t *testing.T) {
	url := pgtest.Shared(t)
	db := dbtest.OpenDB(t, url)
	f := dbtest.SetupTenant(t, db)
	// A statement that cannot have a connection fails the test in seconds
	// rather than wait for one until go test's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })

	for round := range 3 {
		pids := append(holdAll(ctx, t, db.Pool), holdAll(ctx, t, db.LockPool)...)
		terminate(t, admin, pids)

		var wg sync.WaitGroup
		failures := make(chan error, 4*len(pids))
		for range len(pids) {
			wg.Add(4)
			go func() {
				defer wg.Done()
				lock, _, err := locks.NewLocks(f.DB).Acquire(ctx, f.Tenant, uuid.NewString(), "", time.Minute, storage.Holder{})
				if err == nil {
					err = locks.NewLocks(f.DB).Release(ctx, f.Tenant, lock.ID, storage.Caller{}, false)
				}
				failures <- err
			}()
			go func() {
				defer wg.Done()
				var n int
				failures <- db.Pool.QueryRow(ctx, `SELECT count(*) FROM `+dbtest.View(f.Tenant, "check_out_lock")).Scan(&n)
			}()
			go func() {
				defer wg.Done()
				failures <- db.InTx(ctx, f.Tenant, func(tx pgx.Tx) error {
					_, err := tx.Exec(ctx, `SELECT 1`)
					return err
				})
			}()
			go func() {
				defer wg.Done()
				failures <- db.Write(ctx, f.Tenant, func(c *pgx.Conn) error {
					_, err := c.Exec(ctx, `SELECT 1`)
					return err
				})
			}()
		}
		wg.Wait()
		close(failures)
		for err := range failures {
			if err != nil {
				t.Errorf("round %d: a statement after the backends ended failed: %v", round, err)
			}
		}
	}
}

// holdAll takes every connection p may hold at once, so that the pool is
// full, and returns their server processes' ids, the connections idle again:
// given back before the test fails too, so that closing the pool does not
// wait for them.
func holdAll(ctx context.Context, t *testing.T, p *postgres.Pool) []int32 {
	t.Helper()
	var conns []*pgxpool.Conn
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	pids := make([]int32, p.Config().MaxConns)
	for i := range pids {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Fatalf("take connection %d of %d: %v", i+1, len(pids), err)
		}
		conns = append(conns, c)
		pids[i] = int32(c.Conn().PgConn().PID())
	}
	return pids
}

// terminate ends the server processes pids and returns once they are gone.
// It polls rather than have pg_terminate_backend wait, which looks only
// every 100 ms per process: a pool's connections idle for a second are
// pinged before use, and would hide what the test is after.
func terminate(t *testing.T, admin *pgx.Conn, pids []int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid`, pids); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var left int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pids).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left == 0 && gone(pids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d backends still running 5 s after pg_terminate_backend", left)
		}
	}
}

// gone says whether every process of pids has ended, where the server
// runs on this machine: a backend leaves pg_stat_activity as it exits,
// before its socket is closed, and a connection whose server has sent its
// last message but not yet closed the socket looks alive to the pool.
// Reaped (kill answers ESRCH), its socket is closed. Where the processes
// are not this machine's (EPERM, another user's), pg_stat_activity alone
// says.
func gone(pids []int32) bool {
	for _, pid := range pids {
		if err := syscall.Kill(int(pid), 0); err == nil {
			return false
		}
	}
	return true
}

// TestConnectionsAreRetiredAtTheirLifetime: with a lifetime of a second, the
// server process behind the pool's connection is replaced within a few
// seconds, as a busy pool's would be: what a backend keeps for the tenants
// it served does not outlive DB_MAX_CONN_LIFETIME by much.
func TestConnectionsAreRetiredAtTheirLifetime(t *testing.T) {
	db, err := postgres.Open(context.Background(), pgtest.Shared(t), postgres.PoolConfig{MaxConns: 1, MaxConnLifetime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	ctx := context.Background()
	backend := func() int {
		var pid int
		if err := db.Pool.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	first := backend()
	deadline := time.Now().Add(10 * time.Second)
	for backend() == first {
		if time.Now().After(deadline) {
			t.Fatal("the connection outlived its one-second lifetime by 9 s")
		}
		time.Sleep(50 * time.Millisecond) // a pool in use, polled with a deadline
	}
	if n := db.Pool.Stat().MaxLifetimeDestroyCount(); n == 0 {
		t.Errorf("the pool retired no connection for its lifetime")
	}
}

// TestAFrozenTransactionLetsGo: a transaction that holds a lock and then
// falls silent (its instance frozen between two statements) is ended by
// PostgreSQL after IdleInTransaction: another session waiting for the same
// lock has it about then, not never; the frozen one's next statement
// fails, and its connection is not handed out again.
func TestAFrozenTransactionLetsGo(t *testing.T) {
	t.Parallel()
	db, err := postgres.Open(context.Background(), pgtest.Shared(t), postgres.PoolConfig{MaxConns: 4, IdleInTransaction: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbtest.CloseWithin(t, db, 10*time.Second) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	key := time.Now().UnixNano()
	frozen, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := frozen.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = db.InTx(ctx, "", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, key)
		return err
	})
	waited := time.Since(start)
	if err != nil {
		t.Fatalf("the other session's lock: %v", err)
	}
	if waited < 500*time.Millisecond || waited > 5*time.Second {
		t.Errorf("the other session had the lock after %s, want about the 1 s idle limit", waited.Round(time.Millisecond))
	}
	if _, err := frozen.Exec(ctx, `SELECT 1`); err == nil {
		t.Error("the frozen transaction's next statement succeeded; its session should have ended")
	}
	_ = frozen.Rollback(ctx)
	t.Logf("the lock passed %s after the frozen transaction's last statement", waited.Round(time.Millisecond))
}
