package integration

import (
	"context"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
)

// heldFor is how long heldWhile waits for its burst to meet at storage.
const heldFor = 2 * time.Second

// heldEnv is the circulation environment of a cluster whose calls
// heldWhile holds: each waits at storage while the test holds its rows
// (up to heldFor), and on a loaded machine the last of a burst is
// answered a while after they are let go, so circulation waits for
// storage longer than the harness's 3 s before it answers 503.
var heldEnv = []string{"STORAGE_TIMEOUT=10s"}

// heldWhile runs burst while a transaction of the test's own holds the
// row locks hold (a statement, run with args) takes, and commits it once
// at least want of the burst's statements wait at storage for those rows,
// or behind another statement waiting for them: the burst's requests
// then meet where the rule at stake is decided, whatever pace they kept
// on the way there. It returns when burst has, and fails the test, after
// letting go and waiting for burst, when the burst does not meet within
// heldFor.
func heldWhile(t *testing.T, c *harness.Cluster, want int, hold string, args []any, burst func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := c.DB.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var holder int
	if tag, err := tx.Exec(ctx, hold, args...); err != nil {
		t.Fatal(err)
	} else if tag.RowsAffected() == 0 {
		t.Fatalf("the hold took no row: %s", hold)
	}
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&holder); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		burst()
	}()
	// The burst's requests fail the test from their own goroutines: it
	// ends only once they have.
	failed := func(format string, args ...any) {
		t.Helper()
		tx.Rollback(ctx)
		<-done
		t.Fatalf(format, args...)
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	// Circulation gives up on storage after STORAGE_TIMEOUT (heldEnv's
	// 10 s): the burst must be let go well before.
	deadline := time.After(heldFor)
	for waiting := 0; waiting < want; {
		// Not in tx: a transaction sees pg_stat_activity as it was at
		// its first look.
		if err := c.DB.QueryRow(ctx, `WITH RECURSIVE w(pid) AS (
    SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))
    UNION
    SELECT a.pid FROM pg_stat_activity a JOIN w ON w.pid = ANY(pg_blocking_pids(a.pid))
) SELECT count(*) FROM w`, holder).Scan(&waiting); err != nil {
			failed("%v", err)
		}
		select {
		case <-tick.C:
		case <-done:
			t.Fatalf("the burst ended with %d statements waiting for the held rows, want %d", waiting, want)
		case <-deadline:
			failed("%d statements of the burst waited for the held rows within %v, want %d", waiting, heldFor, want)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		failed("%v", err)
	}
	<-done
}
