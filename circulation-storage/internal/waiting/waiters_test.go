package waiting

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// heldLocks is a lock service whose every lock is held by someone else:
// whoever waits, waits until the wait ends. It counts the statements a
// waiter runs after it joined the line.
type heldLocks struct {
	storage.LockService
	acquires, records atomic.Int64
}

func (l *heldLocks) Acquire(_ context.Context, _ storage.Tenant, userID, _ string, _ time.Duration, _ storage.Holder) (storage.Lock, storage.AcquireOutcome, error) {
	l.acquires.Add(1)
	return storage.Lock{}, 0, storage.LockHeld(userID, time.Now().Add(time.Hour), time.Hour, storage.Holder{Instance: "holder"})
}

func (l *heldLocks) Watch(context.Context, storage.Tenant, string, time.Duration) error { return nil }

func (l *heldLocks) Record(context.Context, storage.Tenant, storage.LockEvent) error {
	l.records.Add(1)
	return nil
}

// waitCounts is a WaitObserver that keeps the gauge and the results.
type waitCounts struct {
	mu      sync.Mutex
	waiting int
	results map[WaitResult]int
}

func (o *waitCounts) Waiters(delta int) { o.mu.Lock(); o.waiting += delta; o.mu.Unlock() }
func (o *waitCounts) Woken(WakeCause)   {}
func (o *waitCounts) WaitEnded(r WaitResult, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.results == nil {
		o.results = map[WaitResult]int{}
	}
	o.results[r]++
}
func (o *waitCounts) GrantedToGone()    {}
func (o *waitCounts) WatchFailed(error) {}

func (o *waitCounts) gauge() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.waiting
}

// TestCloseEndsEveryWait: twenty acquisitions wait for one patron's held
// lock, with a minute to go; Close answers every one of them at once with
// the 503 SHUTTING_DOWN, takes them out of line (the gauge back to zero),
// and records no history event for them. An acquisition after Close does
// not wait.
func TestCloseEndsEveryWait(t *testing.T) {
	t.Parallel()
	locks := &heldLocks{}
	obs := &waitCounts{}
	// Polls an hour apart: only Close can end these waits in time.
	w := NewWaiters(locks, obs, WaitConfig{Poll: time.Hour, PollUnlistened: time.Hour, MaxWaiters: 100, StatementTimeout: time.Second})
	const n = 20
	errc := make(chan error, n)
	for range n {
		go func() {
			_, _, err := w.Acquire(context.Background(), "diku", "user-1", "", time.Minute, time.Minute, storage.Holder{})
			errc <- err
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for obs.gauge() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d waiting, want %d", obs.gauge(), n)
		}
		time.Sleep(time.Millisecond)
	}
	before := locks.acquires.Load()
	closed := time.Now()
	w.Close()
	w.Close() // a second Close does nothing
	for range n {
		select {
		case err := <-errc:
			e, ok := errs.As(err)
			if !ok || e.Kind != errs.KindUnavailable || e.Code != schemas.CodeShuttingDown || errhttp.Status(e.Kind) != 503 {
				t.Fatalf("a wait ended by Close answered %v, want the 503 %s", err, schemas.CodeShuttingDown)
			}
		case <-time.After(time.Second):
			t.Fatalf("a waiter still waits a second after Close")
		}
	}
	t.Logf("every waiter answered %s after Close", time.Since(closed))
	if g := obs.gauge(); g != 0 {
		t.Errorf("gauge %d after Close, want 0", g)
	}
	w.mu.Lock()
	count, queues := w.count, len(w.queues)
	w.mu.Unlock()
	if count != 0 || queues != 0 {
		t.Errorf("%d waiters in %d lines after Close, want none", count, queues)
	}
	if obs.results[WaitShutDown] != n {
		t.Errorf("wait results %v, want %d %s", obs.results, n, WaitShutDown)
	}
	if r := locks.records.Load(); r != 0 {
		t.Errorf("%d history events recorded for waits ended by Close, want none", r)
	}
	if a := locks.acquires.Load() - before; a > n {
		t.Errorf("%d attempts after Close, want at most one each", a)
	}

	// After Close a held lock is answered at once, as without a wait.
	start := time.Now()
	_, _, err := w.Acquire(context.Background(), "diku", "user-1", "", time.Minute, time.Minute, storage.Holder{})
	if !errs.IsKind(err, errs.KindLocked) || time.Since(start) > time.Second {
		t.Errorf("an acquisition after Close answered %v after %s, want LOCK_HELD at once", err, time.Since(start))
	}
}
