package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
)

// TestOneInstanceSweepsAtATime: while another instance's pass holds the
// sweeper's lock, a pass is skipped and deletes nothing; once it is free,
// the pass sweeps.
func TestOneInstanceSweepsAtATime(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper's lock is the database's.
	url := pgtest.Fresh(t)
	db := openDB(t, url)
	f := setupTenant(t, db)
	ctx := context.Background()
	l, _, err := f.locks.Acquire(ctx, f.tenant, uuid.NewString(), "", ttl, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	expire(t, f, l.ID)
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, `SELECT pg_advisory_lock($1)`, sweeperLock); err != nil {
		t.Fatal(err)
	}
	sweeper := NewSweeper(db, discard, SweeperConfig{BatchSize: 10})
	if n, swept, err := sweeper.TrySweepOnce(ctx); err != nil || swept || n != 0 {
		t.Errorf("a pass while another sweeps: deleted %d, swept %t, %v; want it skipped", n, swept, err)
	}
	if n := f.count(t, tableLock, ""); n != 1 {
		t.Errorf("%d locks after the skipped pass, want the expired one still there", n)
	}
	if _, err := other.Exec(ctx, `SELECT pg_advisory_unlock($1)`, sweeperLock); err != nil {
		t.Fatal(err)
	}
	if n, swept, err := sweeper.TrySweepOnce(ctx); err != nil || !swept || n != 1 {
		t.Errorf("a pass with the lock free: deleted %d, swept %t, %v; want the one expired lock", n, swept, err)
	}
	// The pass let go of the lock: another instance can take it.
	var free bool
	if err := other.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, sweeperLock).Scan(&free); err != nil || !free {
		t.Errorf("the sweeper's lock after a pass: free %t, %v", free, err)
	}
}

// TestRunReportsEveryPass: Run tells OnPass of each pass, swept, or
// skipped while another instance holds the sweeper's lock.
func TestRunReportsEveryPass(t *testing.T) {
	t.Parallel()
	url := pgtest.Fresh(t)
	db := openDB(t, url)
	setupTenant(t, db)
	passes := make(chan string, 100)
	sweeper := NewSweeper(db, discard, SweeperConfig{BatchSize: 10,
		OnPass: func(d time.Duration, result string) {
			if d <= 0 {
				result = "no time"
			}
			select {
			case passes <- result:
			default:
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sweeper.Run(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()
	next := func() string {
		select {
		case r := <-passes:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no pass reported within 5 s")
			return ""
		}
	}
	if r := next(); r != "swept" {
		t.Fatalf("first pass %q, want swept", r)
	}
	other, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	if _, err := other.Exec(context.Background(), `SELECT pg_advisory_lock($1)`, sweeperLock); err != nil {
		t.Fatal(err)
	}
	// Passes reported before the lock was taken are dropped; one may
	// have been under way: one of the next two is skipped.
	for drained := false; !drained; {
		select {
		case <-passes:
		default:
			drained = true
		}
	}
	if a, b := next(), next(); a != "skipped" && b != "skipped" {
		t.Errorf("passes while another instance sweeps: %q, %q; want skipped", a, b)
	}
}
