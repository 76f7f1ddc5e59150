package locks

import (
	"context"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/waiting"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/pgtest"
)

// TestReleaseNotifiesOnlyWhenWatched: PostgreSQL serialises the commits of
// notifying transactions, so an uncontended release must not notify; a
// release of a patron someone watches notifies, from its own transaction,
// with the tenant and patron, and a listener hears it.
func TestReleaseNotifiesOnlyWhenWatched(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	listener, err := pgx.Connect(ctx, pgtest.Shared(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { listener.Close(context.Background()) })
	if _, err := listener.Exec(ctx, "LISTEN "+waiting.ReleaseChannel); err != nil {
		t.Fatal(err)
	}
	release := func(id string) (live, notified bool) {
		t.Helper()
		var holder, acquiredBy, acquiredByModule, userID any
		if err := f.DB.Pool.QueryRow(ctx, releaseSQL.SQL, releaseSQL.Bind(pgx.StrictNamedArgs{
			"lock_id": id, "tenant": string(f.Tenant), "by_user": nil, "by_module": nil, "others": false})).
			Scan(&live, &holder, &acquiredBy, &acquiredByModule, &notified, &userID); err != nil {
			t.Fatal(err)
		}
		return live, notified
	}

	quiet, watched := uuid.NewString(), uuid.NewString()
	for _, user := range []string{quiet, watched} {
		lock, _, err := NewLocks(f.DB).Acquire(ctx, f.Tenant, user, user, dbtest.TTL, storage.Holder{})
		if err != nil {
			t.Fatal(err)
		}
		if user == watched {
			if err := NewLocks(f.DB).Watch(ctx, f.Tenant, user, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		live, notified := release(lock.ID)
		if !live || notified != (user == watched) {
			t.Errorf("release of %s (watched %v): live %v, notified %v", user, user == watched, live, notified)
		}
	}
	// Only the watched release reached the listener (notifications of
	// other tests' tenants may arrive too, and are skipped).
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		n, err := listener.WaitForNotification(wctx)
		if err != nil {
			t.Fatalf("no notification for the watched release: %v", err)
		}
		switch n.Payload {
		case string(f.Tenant) + ":" + quiet:
			t.Fatalf("the unwatched release notified")
		case string(f.Tenant) + ":" + watched:
			return
		}
	}
}

// TestWatchOnlyExtends: a shorter registration never shortens a longer one.
func TestWatchOnlyExtends(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	user := uuid.NewString()
	for _, d := range []time.Duration{time.Minute, time.Second} {
		if err := NewLocks(f.DB).Watch(ctx, f.Tenant, user, d); err != nil {
			t.Fatal(err)
		}
	}
	var left time.Duration
	if err := f.DB.Pool.QueryRow(ctx, `SELECT expires_at - now() FROM `+dbtest.View(f.Tenant, "check_out_lock_waiter")+` WHERE user_id = $1`,
		user).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left < 50*time.Second {
		t.Errorf("registration has %s left, want the minute", left)
	}
}
