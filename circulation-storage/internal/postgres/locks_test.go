package postgres

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"

	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
)

func TestAcquireGetListRelease(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	user := uuid.NewString()

	lock, outcome, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if outcome != storage.Acquired {
		t.Errorf("outcome = %v, want acquired", outcome)
	}
	if lock.UserID != user || lock.TTL != ttl {
		t.Errorf("lock = %+v, want user %s ttl %s", lock, user, ttl)
	}
	if got := lock.ExpiresAt.Sub(lock.CreationDate); got != ttl {
		t.Errorf("expiresAt - creationDate = %s, want %s", got, ttl)
	}

	got, err := NewLocks(f.db).Get(ctx, f.tenant, lock.ID)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got != lock {
		t.Errorf("get = %+v, want %+v", got, lock)
	}

	list, total, err := NewLocks(f.db).List(ctx, f.tenant, storage.LockFilter{UserID: user, Limit: 10})
	if err != nil || total != 1 || len(list) != 1 || list[0] != lock {
		t.Fatalf("list = %+v, %d, %v; want the one lock", list, total, err)
	}

	if err := NewLocks(f.db).Release(ctx, f.tenant, lock.ID, storage.Caller{}, false); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := NewLocks(f.db).Release(ctx, f.tenant, lock.ID, storage.Caller{}, false); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("second release: %v, want not found", err)
	}
	if _, err := NewLocks(f.db).Get(ctx, f.tenant, lock.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("get after release: %v, want not found", err)
	}
	if n := f.count(t, "check_out_lock", ""); n != 0 {
		t.Errorf("%d rows left, want 0", n)
	}
}

func TestAcquireHeldReportsHolder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	user := uuid.NewString()
	lock, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	_, _, err = NewLocks(f.db).Acquire(ctx, f.tenant, user, "", time.Second, storage.Holder{})
	e, ok := errs.As(err)
	if !ok || e.Kind != errs.KindLocked {
		t.Fatalf("second acquire: %v, want KindLocked", err)
	}
	want := []errs.Parameter{
		{Key: "userId", Value: user},
		{Key: "expiresAt", Value: lock.ExpiresAt.UTC().Format(storage.TimeFormat)},
	}
	if len(e.Parameters) != 2 || e.Parameters[0] != want[0] || e.Parameters[1] != want[1] {
		t.Errorf("parameters = %+v, want %+v", e.Parameters, want)
	}
	if e.RetryAfter <= 0 || e.RetryAfter > ttl {
		t.Errorf("RetryAfter = %s, want within (0, %s]", e.RetryAfter, ttl)
	}
	// The failed attempt changed nothing.
	got, err := NewLocks(f.db).Get(ctx, f.tenant, lock.ID)
	if err != nil || got != lock {
		t.Errorf("lock after failed acquire = %+v, %v; want unchanged %+v", got, err, lock)
	}
}

func TestExpiredLockIsTakenOverWithNewID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	user := uuid.NewString()
	old, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	expire(t, f, old.ID)

	// An expired lock is the same as none for every read.
	if _, err := NewLocks(f.db).Get(ctx, f.tenant, old.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("get expired: %v, want not found", err)
	}
	if list, total, err := NewLocks(f.db).List(ctx, f.tenant, storage.LockFilter{Limit: 10}); err != nil || total != 0 || len(list) != 0 {
		t.Errorf("list with only an expired lock = %v, %d, %v; want empty", list, total, err)
	}

	lock, outcome, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire over expired: %v", err)
	}
	if outcome != storage.TookOverExpired {
		t.Errorf("outcome = %v, want took_over_expired", outcome)
	}
	if lock.ID == old.ID {
		t.Errorf("takeover kept the old id %s", old.ID)
	}
	// The old holder cannot release the new holder's lock.
	if err := NewLocks(f.db).Release(ctx, f.tenant, old.ID, storage.Caller{}, false); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("release by old holder: %v, want not found", err)
	}
	if _, err := NewLocks(f.db).Get(ctx, f.tenant, lock.ID); err != nil {
		t.Errorf("new lock after old holder's release: %v", err)
	}
	if n := f.count(t, "check_out_lock", "user_id = $1", user); n != 1 {
		t.Errorf("%d rows for the user, want 1", n)
	}
}

func TestReleaseOfExpiredLockIsNotFoundAndCleansUp(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	lock, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, uuid.NewString(), "", ttl, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	expire(t, f, lock.ID)
	if err := NewLocks(f.db).Release(ctx, f.tenant, lock.ID, storage.Caller{}, false); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("release expired: %v, want not found", err)
	}
	if n := f.count(t, "check_out_lock", ""); n != 0 {
		t.Errorf("%d rows left, want the expired row deleted", n)
	}
}

func TestListPagesAndCountsAllMatches(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	var ids []string
	for range 5 {
		l, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, uuid.NewString(), "", ttl, storage.Holder{})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		ids = append(ids, l.ID)
	}
	expired, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, uuid.NewString(), "", ttl, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	expire(t, f, expired.ID)

	tests := []struct {
		offset, limit int
		wantLen       int
	}{
		{0, 10, 5}, {0, 2, 2}, {4, 2, 1}, {5, 2, 0}, {100, 10, 0}, {0, 0, 0},
	}
	for _, tt := range tests {
		list, total, err := NewLocks(f.db).List(ctx, f.tenant, storage.LockFilter{Offset: tt.offset, Limit: tt.limit})
		if err != nil {
			t.Fatalf("list %+v: %v", tt, err)
		}
		if total != 5 || len(list) != tt.wantLen {
			t.Errorf("list offset %d limit %d: %d locks, total %d; want %d, total 5", tt.offset, tt.limit, len(list), total, tt.wantLen)
		}
	}
	// Pages are in creation order and cover every live lock once.
	var seen []string
	for offset := 0; offset < 5; offset += 2 {
		list, _, err := NewLocks(f.db).List(ctx, f.tenant, storage.LockFilter{Offset: offset, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list {
			seen = append(seen, l.ID)
		}
	}
	if len(seen) != 5 {
		t.Fatalf("paged through %d locks, want 5", len(seen))
	}
	for i := range ids {
		if seen[i] != ids[i] {
			t.Errorf("page order %v, want %v", seen, ids)
			break
		}
	}
}

// TestConcurrentAcquireGrantsOnce is the lock's promise: however many
// acquisitions for one patron race, exactly one wins while the lock lives.
// Many rounds, so that a rare double grant would show.
func TestConcurrentAcquireGrantsOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const rounds, racers = 30, 40
	for round := range rounds {
		user := uuid.NewString()
		// Every other round races over an expired lock, so takeover races too.
		if round%2 == 1 {
			l, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, "", ttl, storage.Holder{})
			if err != nil {
				t.Fatal(err)
			}
			expire(t, f, l.ID)
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []storage.Lock
		var failures []error
		start := make(chan struct{})
		for range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				l, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, "", ttl, storage.Holder{})
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					won = append(won, l)
				} else if !errs.IsKind(err, errs.KindLocked) {
					failures = append(failures, err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(failures) > 0 {
			t.Fatalf("round %d: unexpected errors: %v", round, failures)
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d acquisitions succeeded, want exactly 1", round, len(won))
		}
		if n := f.count(t, "check_out_lock", "user_id = $1 AND expires_at > now()", user); n != 1 {
			t.Fatalf("round %d: %d live rows for the user, want 1", round, n)
		}
		got, err := NewLocks(f.db).Get(ctx, f.tenant, won[0].ID)
		if err != nil || got != won[0] {
			t.Fatalf("round %d: stored lock %+v, %v; want the winner's %+v", round, got, err, won[0])
		}
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := setup(t), setup(t)
	ctx := context.Background()
	user := uuid.NewString()
	lockA, _, err := NewLocks(a.db).Acquire(ctx, a.tenant, user, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	// The same patron id in another tenant is another patron.
	lockB, _, err := NewLocks(b.db).Acquire(ctx, b.tenant, user, "", ttl, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire in tenant B: %v", err)
	}
	if _, err := NewLocks(b.db).Get(ctx, b.tenant, lockA.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("tenant B reads A's lock: %v, want not found", err)
	}
	if err := NewLocks(b.db).Release(ctx, b.tenant, lockA.ID, storage.Caller{}, false); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("tenant B deletes A's lock: %v, want not found", err)
	}
	if _, err := NewLocks(a.db).Get(ctx, a.tenant, lockA.ID); err != nil {
		t.Errorf("A's lock after B's delete: %v", err)
	}
	if list, total, _ := NewLocks(b.db).List(ctx, b.tenant, storage.LockFilter{Limit: 10}); total != 1 || list[0].ID != lockB.ID {
		t.Errorf("tenant B lists %+v, want only its own lock", list)
	}
}

func TestUninitialisedTenant(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	ghost := storage.Tenant("ghost" + f.tenant[1:])
	if enabled, err := f.tenants.Enabled(ctx, ghost); err != nil || enabled {
		t.Fatalf("a tenant never enabled: enabled %t, %v", enabled, err)
	}
	// Durable records refer to their tenant: none is written for a tenant
	// that is not enabled, whoever skips the check at the door.
	_, err := NewRecords(f.db).Create(ctx, ghost, storage.PatronGroups, uuid.NewString(), []byte(`{"group":"ghosts"}`))
	e, ok := errs.As(err)
	if !ok || e.Code != schemas.CodeTenantNotInitialized || e.Kind != errs.KindBadRequest {
		t.Fatalf("a record in an uninitialised tenant: %v, want %s", err, schemas.CodeTenantNotInitialized)
	}
	if enabled, err := f.tenants.Enabled(ctx, f.tenant); err != nil || !enabled {
		t.Fatalf("an enabled tenant: enabled %t, %v", enabled, err)
	}
}

func TestTenantInitIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	tenant := storage.Tenant("c" + f.tenant[1:])
	t.Cleanup(func() { _ = f.tenants.Purge(context.Background(), tenant) })
	var wg sync.WaitGroup
	results := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.tenants.Init(ctx, tenant, storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.0"})
			results <- err
		}()
	}
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Errorf("concurrent init: %v", err)
		}
	}
	if _, _, err := NewLocks(f.db).Acquire(ctx, tenant, uuid.NewString(), "", ttl, storage.Holder{}); err != nil {
		t.Errorf("acquire in the new tenant: %v", err)
	}
	// Events of the tenant, one commit not numbered yet and one numbered
	// (each found through an index of its own by the purge).
	if _, err := f.db.pool.Exec(ctx, withTables(`INSERT INTO %s (tenant_id, xid, events, seq)
		VALUES ($1, pg_current_xact_id(), 1, NULL), ($1, pg_current_xact_id(), 1, 1)`, tableOutboxCommit), string(tenant)); err != nil {
		t.Fatalf("record the tenant's commits: %v", err)
	}
	if err := f.tenants.Purge(ctx, tenant); err != nil {
		t.Fatalf("purge: %v", err)
	}
	if enabled, err := f.tenants.Enabled(ctx, tenant); err != nil || enabled {
		t.Errorf("after purge: enabled %t, %v", enabled, err)
	}
	// Nothing of the tenant is left: no row in any shared table, no
	// schema.
	for _, name := range append(tenantTables, tableTenant) {
		column := "tenant_id"
		if name == tableTenant {
			column = "id"
		}
		var n int
		if err := f.db.pool.QueryRow(ctx, withTables(`SELECT count(*) FROM %s WHERE `+column+` = $1`, name), string(tenant)).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s after purge: %d rows, %v", name, n, err)
		}
	}
	var schema bool
	if err := f.db.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, tenant.Schema()).Scan(&schema); err != nil || schema {
		t.Errorf("schema %s after purge: %t, %v", tenant.Schema(), schema, err)
	}
}

func TestTenantJobs(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	attrs := storage.TenantAttributes{ModuleTo: "mod-circulation-storage-1.0.1", ModuleFrom: "mod-circulation-storage-1.0.0",
		Parameters: []errs.Parameter{{Key: "loadReference", Value: "false"}}}
	job, err := f.tenants.Init(ctx, f.tenant, attrs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.tenants.Job(ctx, f.tenant, job.ID)
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	if got.ID != job.ID || !got.Complete || got.Attributes.ModuleTo != attrs.ModuleTo || got.Attributes.ModuleFrom != attrs.ModuleFrom ||
		len(got.Attributes.Parameters) != 1 || len(got.Messages) != len(job.Messages) {
		t.Errorf("job = %+v, want %+v", got, job)
	}
	if err := f.tenants.DeleteJob(ctx, f.tenant, job.ID); err != nil {
		t.Fatalf("delete job: %v", err)
	}
	if _, err := f.tenants.Job(ctx, f.tenant, job.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("job after delete: %v, want not found", err)
	}
	if err := f.tenants.DeleteJob(ctx, f.tenant, job.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("second delete: %v, want not found", err)
	}
}

func TestSweeperDeletesOnlyExpiredLocksOfEveryTenant(t *testing.T) {
	t.Parallel()
	// A database of its own: the sweeper looks at every tenant in it.
	db := openDB(t, pgtest.Fresh(t))
	a, b := setupTenant(t, db), setupTenant(t, db)
	ctx := context.Background()
	var live []string
	for _, f := range []fixture{a, b} {
		for i := range 7 {
			l, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, uuid.NewString(), "", ttl, storage.Holder{})
			if err != nil {
				t.Fatal(err)
			}
			if i < 5 {
				expire(t, f, l.ID)
			} else {
				live = append(live, l.ID)
			}
		}
	}
	var reported int
	sweeper := NewSweeper(db, discard, SweeperConfig{BatchSize: 2, OnDeleted: func(n int) { reported += n }, History: true})
	deleted, err := sweeper.SweepOnce(ctx)
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if deleted != 10 || reported != 10 {
		t.Errorf("deleted %d (reported %d), want 10 in batches of 2", deleted, reported)
	}
	for _, f := range []fixture{a, b} {
		if n := f.count(t, "check_out_lock", ""); n != 2 {
			t.Errorf("tenant %s: %d rows left, want the 2 live locks", f.tenant, n)
		}
	}
	// Each swept lock is in its tenant's history as expired while held.
	for _, f := range []fixture{a, b} {
		if n := f.count(t, "check_out_lock_event", "type = 'expired' AND lock_id IS NOT NULL"); n != 5 {
			t.Errorf("tenant %s: %d expired events, want 5", f.tenant, n)
		}
	}
	if deleted, err := sweeper.SweepOnce(ctx); err != nil || deleted != 0 {
		t.Errorf("second sweep deleted %d, %v; want 0", deleted, err)
	}
	// The history is trimmed to its bounds: the newest 3, then none older
	// than the retention.
	sweeper = NewSweeper(db, discard, SweeperConfig{BatchSize: 2, History: true, Retention: time.Hour, MaxEvents: 3})
	if _, err := sweeper.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	a.exec(t, "UPDATE "+view(a.tenant, "check_out_lock_event")+" SET occurred_at = now() - interval '2 hours'")
	if _, err := sweeper.SweepOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if na, nb := a.count(t, "check_out_lock_event", ""), b.count(t, "check_out_lock_event", ""); na != 0 || nb != 3 {
		t.Errorf("events after trimming: %d and %d, want 0 (all past retention) and 3 (the bound)", na, nb)
	}
	for i, id := range live {
		f := []fixture{a, a, b, b}[i]
		if _, err := NewLocks(f.db).Get(ctx, f.tenant, id); err != nil {
			t.Errorf("live lock %s after the sweep: %v", id, err)
		}
	}
}

// TestAcquireWithOwnIDRenews: the holder asking again with its lock's id
// (its first answer lost) gets the same lock back, renewed; anyone else, or
// the holder with another id, is refused while it lives.
func TestAcquireWithOwnIDRenews(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	user, id := uuid.NewString(), uuid.NewString()
	first, outcome, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, id, ttl, storage.Holder{})
	if err != nil || outcome != storage.Acquired || first.ID != id {
		t.Fatalf("acquire with an id: %+v %v %v", first, outcome, err)
	}
	again, outcome, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, id, 2*ttl, storage.Holder{})
	if err != nil || outcome != storage.Renewed {
		t.Fatalf("acquire again with the same id: %v %v, want renewed", outcome, err)
	}
	if again.ID != id || !again.CreationDate.Equal(first.CreationDate) || !again.ExpiresAt.After(first.ExpiresAt) || again.TTL != 2*ttl {
		t.Errorf("renewed lock %+v, want id and creation date kept, a later expiry and the new TTL (first %+v)", again, first)
	}
	for _, other := range []string{"", uuid.NewString()} {
		if _, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, other, ttl, storage.Holder{}); !errs.IsKind(err, errs.KindLocked) {
			t.Errorf("acquire with id %q while held: %v, want held", other, err)
		}
	}
	// The id cannot be borrowed for another patron's lock.
	if _, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, uuid.NewString(), id, ttl, storage.Holder{}); !errs.IsKind(err, errs.KindConflict) {
		t.Errorf("another patron's lock under the same id: %v, want a conflict", err)
	}
	// A takeover with a client id uses that id and a fresh creation date.
	expire(t, f, id)
	next := uuid.NewString()
	taken, outcome, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, next, ttl, storage.Holder{})
	if err != nil || outcome != storage.TookOverExpired || taken.ID != next {
		t.Errorf("takeover with an id: %+v %v %v", taken, outcome, err)
	}
	if n := f.count(t, "check_out_lock", "user_id = $1", user); n != 1 {
		t.Errorf("%d rows for the patron, want 1", n)
	}
}

// TestOwnExpiredLockIsTakenOverNotRenewed: an expired lock is the same as
// none, also for its former holder: asking again with its id after expiry
// (and before the sweeper) starts a new lock with a fresh creation date.
func TestOwnExpiredLockIsTakenOverNotRenewed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	user, id := uuid.NewString(), uuid.NewString()
	first, _, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, id, ttl, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	expire(t, f, id)
	again, outcome, err := NewLocks(f.db).Acquire(ctx, f.tenant, user, id, ttl, storage.Holder{})
	if err != nil || outcome != storage.TookOverExpired || again.ID != id || !again.CreationDate.After(first.CreationDate) {
		t.Errorf("own expired lock asked for again: %+v %v %v, want taken over with a fresh creation date (first %+v)",
			again, outcome, err, first)
	}
}
