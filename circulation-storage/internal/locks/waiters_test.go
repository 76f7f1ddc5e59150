package locks

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/waiting"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// countingLocks is the real lock service, counting acquisitions by lock id.
type countingLocks struct {
	storage.LockService
	mu       sync.Mutex
	attempts map[string]int
}

func (c *countingLocks) Acquire(ctx context.Context, t storage.Tenant, userID, lockID string, ttl time.Duration, h storage.Holder) (storage.Lock, storage.AcquireOutcome, error) {
	c.mu.Lock()
	c.attempts[lockID]++
	c.mu.Unlock()
	return c.LockService.Acquire(ctx, t, userID, lockID, ttl, h)
}

func (c *countingLocks) count(lockID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts[lockID]
}

// waitCounter is a WaitObserver that counts the requests waiting.
type waitCounter struct {
	mu      sync.Mutex
	waiting int
}

func (w *waitCounter) Waiters(delta int)                         { w.mu.Lock(); w.waiting += delta; w.mu.Unlock() }
func (w *waitCounter) now() int                                  { w.mu.Lock(); defer w.mu.Unlock(); return w.waiting }
func (*waitCounter) Woken(waiting.WakeCause)                     {}
func (*waitCounter) WaitEnded(waiting.WaitResult, time.Duration) {}
func (*waitCounter) GrantedToGone()                              {}
func (*waitCounter) WatchFailed(error)                           {}

// TestAWaiterBehindAGrantWaitsForTheRelease: two acquisitions wait for a
// patron's lock on one instance. When the first is granted the lock and
// leaves the line, the second becomes first and waits for that grant's
// release; it does not try a lock it knows was just taken (a burst of
// scans would pay for that try on every hand-off). So the second tries
// twice in all: when it arrives, and when the first's lock is released.
func TestAWaiterBehindAGrantWaitsForTheRelease(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	var waiters *waiting.Waiters
	service := NewLocks(f.DB, postgres.OnRelease(func(t storage.Tenant, userID string) { waiters.Notify(t, userID) }))
	locks := &countingLocks{LockService: service, attempts: map[string]int{}}
	obs := &waitCounter{}
	// Polling every minute: only releases wake the waiters in this test.
	waiters = waiting.NewWaiters(locks, obs, waiting.WaitConfig{Poll: time.Minute, PollUnlistened: time.Minute,
		MaxWaiters: 10, StatementTimeout: 5 * time.Second})

	user, holder, first, second := uuid.NewString(), uuid.NewString(), uuid.NewString(), uuid.NewString()
	if _, _, err := service.Acquire(ctx, f.Tenant, user, holder, dbtest.TTL, storage.Holder{}); err != nil {
		t.Fatal(err)
	}
	type result struct {
		lock storage.Lock
		err  error
	}
	wait := func(id string) chan result {
		out := make(chan result, 1)
		go func() {
			l, _, err := waiters.Acquire(ctx, f.Tenant, user, id, dbtest.TTL, 20*time.Second, storage.Holder{})
			out <- result{l, err}
		}()
		return out
	}
	firstDone := wait(first)
	dbtest.Eventually(t, "the first to wait", func() bool { return obs.now() == 1 })
	secondDone := wait(second)
	dbtest.Eventually(t, "the second to wait", func() bool { return obs.now() == 2 })

	if err := service.Release(ctx, f.Tenant, holder, storage.Caller{}, false); err != nil {
		t.Fatal(err)
	}
	r := <-firstDone
	if r.err != nil || r.lock.ID != first {
		t.Fatalf("first waiter: lock %+v, error %v; want its lock %s", r.lock, r.err, first)
	}
	// A try by the second, were it made on the first's grant, would come
	// at once: give it 200 ms to show before releasing.
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end) && locks.count(second) == 1; {
		time.Sleep(time.Millisecond) // watching for a try that must not come, bounded
	}
	if err := service.Release(ctx, f.Tenant, first, storage.Caller{}, false); err != nil {
		t.Fatal(err)
	}
	r = <-secondDone
	if r.err != nil || r.lock.ID != second {
		t.Fatalf("second waiter: lock %+v, error %v; want its lock %s", r.lock, r.err, second)
	}
	if n := locks.count(second); n != 2 {
		t.Errorf("the second waiter tried %d times, want 2 (on arrival, and on the first's release)", n)
	}
}

// TestAWaiterBehindAGrantNamesTheNewHolder: a waiter that became first in
// line behind a fresh grant, and whose time runs out before that holder
// releases, names the holder now in its answer and in the lock history,
// not the one before the grant it last saw itself.
func TestAWaiterBehindAGrantNamesTheNewHolder(t *testing.T) {
	t.Parallel()
	f := dbtest.Setup(t)
	ctx := context.Background()
	obs := &waitCounter{}
	var waiters *waiting.Waiters
	service := NewLocks(f.DB, postgres.OnRelease(func(t storage.Tenant, userID string) { waiters.Notify(t, userID) }))
	waiters = waiting.NewWaiters(service, obs, waiting.WaitConfig{Poll: time.Minute, PollUnlistened: time.Minute,
		MaxWaiters: 10, StatementTimeout: 5 * time.Second})
	user, old := uuid.NewString(), uuid.NewString()
	if _, _, err := service.Acquire(ctx, f.Tenant, user, old, time.Minute, storage.Holder{Instance: "old"}); err != nil {
		t.Fatal(err)
	}
	granted := make(chan error, 1)
	go func() {
		_, _, err := waiters.Acquire(ctx, f.Tenant, user, uuid.NewString(), time.Minute, 20*time.Second, storage.Holder{Instance: "new"})
		granted <- err
	}()
	dbtest.Eventually(t, "the first to wait", func() bool { return obs.now() == 1 })
	gaveUp := make(chan error, 1)
	go func() {
		// Its wait outlasts the release and the first waiter's grant,
		// however slowly those run, and ends while "new" holds the lock.
		_, _, err := waiters.Acquire(ctx, f.Tenant, user, uuid.NewString(), time.Minute, 3*time.Second, storage.Holder{Instance: "late"})
		gaveUp <- err
	}()
	dbtest.Eventually(t, "the second to wait", func() bool { return obs.now() == 2 })
	if err := service.Release(ctx, f.Tenant, old, storage.Caller{}, false); err != nil {
		t.Fatal(err)
	}
	if err := <-granted; err != nil {
		t.Fatalf("the first waiter: %v", err)
	}
	err := <-gaveUp
	e, ok := errs.As(err)
	if !ok || e.Code != schemas.CodeLockHeld {
		t.Fatalf("the second waiter: %v, want %s", err, schemas.CodeLockHeld)
	}
	if h := storage.HolderOf(e); h.Instance != "new" {
		t.Errorf("the second waiter's answer names holder %q, want the one holding the lock now, %q (parameters %v)", h.Instance, "new", e.Parameters)
	}
	if e.RetryAfter < 30*time.Second {
		t.Errorf("Retry-After %s, want the new holder's minute, not the old one's remains", e.RetryAfter)
	}
	events, _, err := service.History(ctx, f.Tenant, storage.HistoryFilter{UserID: user, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0].Type != storage.EventWaiterGaveUp || events[0].Holder.Instance != "new" {
		t.Errorf("history %+v, want one waiter_gave_up naming the holder %q", events, "new")
	}
}
