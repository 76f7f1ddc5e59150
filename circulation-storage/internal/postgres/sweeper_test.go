package postgres

import (
	"context"
	neturl "net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
)

// TestSweeperGoesOnPastAFailingTenant: the sweeper connects as a role that
// may not read one tenant's schema. The pass still deletes every other
// tenant's expired locks, keeps their live ones, and reports the one tenant
// it could not sweep.
func TestSweeperGoesOnPastAFailingTenant(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper looks at every tenant in it.
	url := pgtest.Fresh(t)
	db := openDB(t, url)
	fixtures := []fixture{setupTenant(t, db), setupTenant(t, db), setupTenant(t, db)}
	// The failing tenant is the first the pass comes to.
	slices.SortFunc(fixtures, func(a, b fixture) int { return strings.Compare(string(a.tenant), string(b.tenant)) })
	ctx := context.Background()
	for _, f := range fixtures {
		for i := range 4 {
			l, _, err := f.locks.Acquire(ctx, f.tenant, uuid.NewString(), "", ttl, storage.Holder{})
			if err != nil {
				t.Fatal(err)
			}
			if i < 3 {
				expire(t, f, l.ID)
			}
		}
	}
	broken := fixtures[0]
	role := "sweeper_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	broken.exec(t, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() { broken.exec(t, "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	for _, f := range fixtures[1:] {
		schema := pgx.Identifier{f.tenant.Schema()}.Sanitize()
		f.exec(t, "GRANT USAGE ON SCHEMA "+schema+" TO "+role+"; GRANT ALL ON ALL TABLES IN SCHEMA "+schema+" TO "+role+
			"; GRANT ALL ON ALL SEQUENCES IN SCHEMA "+schema+" TO "+role)
	}
	asRole, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	asRole.User = neturl.User(role)

	deleted, err := NewSweeper(openDB(t, asRole.String()), discard, SweeperConfig{BatchSize: 2, History: true}).SweepOnce(ctx)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 tenants not swept") || !strings.Contains(err.Error(), broken.tenant.Schema()) {
		t.Errorf("sweep: %v, want it to report the one tenant it could not sweep", err)
	}
	if deleted != 6 {
		t.Errorf("deleted %d, want the 6 expired locks of the two other tenants", deleted)
	}
	for _, f := range fixtures[1:] {
		if n := f.count(t, "check_out_lock", ""); n != 1 {
			t.Errorf("tenant %s: %d locks left, want its 1 live lock", f.tenant, n)
		}
	}
	if n := broken.count(t, "check_out_lock", ""); n != 4 {
		t.Errorf("the failing tenant has %d locks, want its 4 untouched", n)
	}
}

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
