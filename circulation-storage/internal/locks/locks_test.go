package locks

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/recordstore"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

func TestAcquireGetListRelease(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	user := uuid.NewString()

	lock, outcome, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if outcome != storage.Acquired {
		t.Errorf("outcome = %v, want acquired", outcome)
	}
	if lock.UserID != user || lock.TTL != dbtest.TTL {
		t.Errorf("lock = %+v, want user %s ttl %s", lock, user, dbtest.TTL)
	}
	if got := lock.ExpiresAt.Sub(lock.CreationDate); got != dbtest.TTL {
		t.Errorf("expiresAt - creationDate = %s, want %s", got, dbtest.TTL)
	}

	got, err := NewLocks(f.DB).Get(ctx, f.Tenant, lock.ID)
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got != lock {
		t.Errorf("get = %+v, want %+v", got, lock)
	}

	list, total, err := NewLocks(f.DB).List(ctx, f.Tenant, storage.LockFilter{UserID: user, Limit: 10})
	if err != nil || total != 1 || len(list) != 1 || list[0] != lock {
		t.Fatalf("list = %+v, %d, %v; want the one lock", list, total, err)
	}

	if err := NewLocks(f.DB).Release(ctx, f.Tenant, lock.ID, storage.Caller{}, false); err != nil {
		t.Fatalf("release: %v", err)
	}
	if err := NewLocks(f.DB).Release(ctx, f.Tenant, lock.ID, storage.Caller{}, false); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("second release: %v, want not found", err)
	}
	if _, err := NewLocks(f.DB).Get(ctx, f.Tenant, lock.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("get after release: %v, want not found", err)
	}
	if n := f.Count(t, "check_out_lock", ""); n != 0 {
		t.Errorf("%d rows left, want 0", n)
	}
}

func TestAcquireHeldReportsHolder(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	user := uuid.NewString()
	lock, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	_, _, err = NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", time.Second, storage.Holder{})
	e, ok := errs.As(err)
	if !ok || e.Kind != errs.KindLocked {
		t.Fatalf("second acquire: %v, want KindLocked", err)
	}
	want := []errs.Parameter{
		{Key: "userId", Value: user},
		{Key: "expiresAt", Value: schemas.FormatTime(lock.ExpiresAt)},
	}
	if len(e.Parameters) != 2 || e.Parameters[0] != want[0] || e.Parameters[1] != want[1] {
		t.Errorf("parameters = %+v, want %+v", e.Parameters, want)
	}
	if e.RetryAfter <= 0 || e.RetryAfter > dbtest.TTL {
		t.Errorf("RetryAfter = %s, want within (0, %s]", e.RetryAfter, dbtest.TTL)
	}
	// The failed attempt changed nothing.
	got, err := NewLocks(f.DB).Get(ctx, f.Tenant, lock.ID)
	if err != nil || got != lock {
		t.Errorf("lock after failed acquire = %+v, %v; want unchanged %+v", got, err, lock)
	}
}

func TestExpiredLockIsTakenOverWithNewID(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	user := uuid.NewString()
	old, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	dbtest.Expire(t, f, old.ID)

	// An expired lock is the same as none for every read.
	if _, err := NewLocks(f.DB).Get(ctx, f.Tenant, old.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("get expired: %v, want not found", err)
	}
	if list, total, err := NewLocks(f.DB).List(ctx, f.Tenant, storage.LockFilter{Limit: 10}); err != nil || total != 0 || len(list) != 0 {
		t.Errorf("list with only an expired lock = %v, %d, %v; want empty", list, total, err)
	}

	lock, outcome, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
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
	if err := NewLocks(f.DB).Release(ctx, f.Tenant, old.ID, storage.Caller{}, false); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("release by old holder: %v, want not found", err)
	}
	if _, err := NewLocks(f.DB).Get(ctx, f.Tenant, lock.ID); err != nil {
		t.Errorf("new lock after old holder's release: %v", err)
	}
	if n := f.Count(t, "check_out_lock", "user_id = $1", user); n != 1 {
		t.Errorf("%d rows for the user, want 1", n)
	}
}

func TestReleaseOfExpiredLockIsNotFoundAndCleansUp(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	lock, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, uuid.NewString(), "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	dbtest.Expire(t, f, lock.ID)
	if err := NewLocks(f.DB).Release(ctx, f.Tenant, lock.ID, storage.Caller{}, false); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("release expired: %v, want not found", err)
	}
	if n := f.Count(t, "check_out_lock", ""); n != 0 {
		t.Errorf("%d rows left, want the expired row deleted", n)
	}
}

func TestListPagesAndCountsAllMatches(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	var ids []string
	for range 5 {
		l, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, uuid.NewString(), "", dbtest.TTL, storage.Holder{})
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		ids = append(ids, l.ID)
	}
	expired, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, uuid.NewString(), "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	dbtest.Expire(t, f, expired.ID)

	tests := []struct {
		offset, limit int
		wantLen       int
	}{
		{0, 10, 5}, {0, 2, 2}, {4, 2, 1}, {5, 2, 0}, {100, 10, 0}, {0, 0, 0},
	}
	for _, tt := range tests {
		list, total, err := NewLocks(f.DB).List(ctx, f.Tenant, storage.LockFilter{Offset: tt.offset, Limit: tt.limit})
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
		list, _, err := NewLocks(f.DB).List(ctx, f.Tenant, storage.LockFilter{Offset: offset, Limit: 2})
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
	f := dbtest.Setup(t)
	ctx := context.Background()
	const rounds, racers = 30, 40
	for round := range rounds {
		user := uuid.NewString()
		// Every other round races over an expired lock, so takeover races too.
		if round%2 == 1 {
			l, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
			if err != nil {
				t.Fatal(err)
			}
			dbtest.Expire(t, f, l.ID)
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
				l, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, "", dbtest.TTL, storage.Holder{})
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
		if n := f.Count(t, "check_out_lock", "user_id = $1 AND expires_at > now()", user); n != 1 {
			t.Fatalf("round %d: %d live rows for the user, want 1", round, n)
		}
		got, err := NewLocks(f.DB).Get(ctx, f.Tenant, won[0].ID)
		if err != nil || got != won[0] {
			t.Fatalf("round %d: stored lock %+v, %v; want the winner's %+v", round, got, err, won[0])
		}
	}
}

func TestTenantsAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := dbtest.Setup(t), dbtest.Setup(t)
	ctx := context.Background()
	user := uuid.NewString()
	lockA, _, err := NewLocks(a.DB).Acquire(ctx, a.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	// The same patron id in another tenant is another patron.
	lockB, _, err := NewLocks(b.DB).Acquire(ctx, b.Tenant, user, "", dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatalf("acquire in tenant B: %v", err)
	}
	if _, err := NewLocks(b.DB).Get(ctx, b.Tenant, lockA.ID); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("tenant B reads A's lock: %v, want not found", err)
	}
	if err := NewLocks(b.DB).Release(ctx, b.Tenant, lockA.ID, storage.Caller{}, false); !errs.IsKind(err, errs.KindNotFound) {
		t.Errorf("tenant B deletes A's lock: %v, want not found", err)
	}
	if _, err := NewLocks(a.DB).Get(ctx, a.Tenant, lockA.ID); err != nil {
		t.Errorf("A's lock after B's delete: %v", err)
	}
	if list, total, _ := NewLocks(b.DB).List(ctx, b.Tenant, storage.LockFilter{Limit: 10}); total != 1 || list[0].ID != lockB.ID {
		t.Errorf("tenant B lists %+v, want only its own lock", list)
	}
}

func TestUninitialisedTenant(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	ghost := storage.Tenant("ghost" + f.Tenant[1:])
	if enabled, err := f.Tenants.Enabled(ctx, ghost); err != nil || enabled {
		t.Fatalf("a tenant never enabled: enabled %t, %v", enabled, err)
	}
	// Durable records refer to their tenant: none is written for a tenant
	// that is not enabled, whoever skips the check at the door.
	_, err := recordstore.NewRecords(f.DB).Create(ctx, ghost, storage.PatronGroups, uuid.NewString(), []byte(`{"group":"ghosts"}`))
	e, ok := errs.As(err)
	if !ok || e.Code != schemas.CodeTenantNotInitialized || e.Kind != errs.KindBadRequest {
		t.Fatalf("a record in an uninitialised tenant: %v, want %s", err, schemas.CodeTenantNotInitialized)
	}
	if enabled, err := f.Tenants.Enabled(ctx, f.Tenant); err != nil || !enabled {
		t.Fatalf("an enabled tenant: enabled %t, %v", enabled, err)
	}
}

// TestAcquireWithOwnIDRenews: the holder asking again with its lock's id
// (its first answer lost) gets the same lock back, renewed; anyone else, or
// the holder with another id, is refused while it lives.
func TestAcquireWithOwnIDRenews(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	user, id := uuid.NewString(), uuid.NewString()
	first, outcome, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, id, dbtest.TTL, storage.Holder{})
	if err != nil || outcome != storage.Acquired || first.ID != id {
		t.Fatalf("acquire with an id: %+v %v %v", first, outcome, err)
	}
	again, outcome, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, id, 2*dbtest.TTL, storage.Holder{})
	if err != nil || outcome != storage.Renewed {
		t.Fatalf("acquire again with the same id: %v %v, want renewed", outcome, err)
	}
	if again.ID != id || !again.CreationDate.Equal(first.CreationDate) || !again.ExpiresAt.After(first.ExpiresAt) || again.TTL != 2*dbtest.TTL {
		t.Errorf("renewed lock %+v, want id and creation date kept, a later expiry and the new TTL (first %+v)", again, first)
	}
	for _, other := range []string{"", uuid.NewString()} {
		if _, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, other, dbtest.TTL, storage.Holder{}); !errs.IsKind(err, errs.KindLocked) {
			t.Errorf("acquire with id %q while held: %v, want held", other, err)
		}
	}
	// The id cannot be borrowed for another patron's lock.
	if _, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, uuid.NewString(), id, dbtest.TTL, storage.Holder{}); !errs.IsKind(err, errs.KindConflict) {
		t.Errorf("another patron's lock under the same id: %v, want a conflict", err)
	}
	// A takeover with a client id uses that id and a fresh creation date.
	dbtest.Expire(t, f, id)
	next := uuid.NewString()
	taken, outcome, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, next, dbtest.TTL, storage.Holder{})
	if err != nil || outcome != storage.TookOverExpired || taken.ID != next {
		t.Errorf("takeover with an id: %+v %v %v", taken, outcome, err)
	}
	if n := f.Count(t, "check_out_lock", "user_id = $1", user); n != 1 {
		t.Errorf("%d rows for the patron, want 1", n)
	}
}

// TestOwnExpiredLockIsTakenOverNotRenewed: an expired lock is the same as
// none, also for its former holder: asking again with its id after expiry
// (and before the sweeper) starts a new lock with a fresh creation date.
func TestOwnExpiredLockIsTakenOverNotRenewed(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	user, id := uuid.NewString(), uuid.NewString()
	first, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, id, dbtest.TTL, storage.Holder{})
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Expire(t, f, id)
	again, outcome, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, id, dbtest.TTL, storage.Holder{})
	if err != nil || outcome != storage.TookOverExpired || again.ID != id || !again.CreationDate.After(first.CreationDate) {
		t.Errorf("own expired lock asked for again: %+v %v %v, want taken over with a fresh creation date (first %+v)",
			again, outcome, err, first)
	}
}
