package circulation_test

import (
	"context"
	"github.com/checkoutlock/schemas/errs"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/storagetest"
	"github.com/checkoutlock/schemas"
)

// The retry budget (500|500|1000 in lockOn) is what a check-out may spend
// getting a held lock: it waits at storage for up to all of it, and the
// intervals keep their schedule only for what waiting cannot cover.

// acquireWaits lists the waitMs of every acquisition a check-out made (its
// writes that acquire the lock, or its calls of their own), in order.
func acquireWaits(f *storagetest.Storage) []int {
	var out []int
	for _, c := range f.Calls() {
		if c.Acquires() && c.RequestID == requestID {
			out = append(out, c.WaitMs())
		}
	}
	return out
}

// asFOLIOStorage makes the stack's storage answer a held lock at once, as
// FOLIO's storage does: it never reads waitMs.
func asFOLIOStorage(s *stack) { s.store.AsIfUnread(storagetest.RouteAcquire, -1, "waitMs") }

// TestCheckOutWaitsAtStorageForTheRelease: the lock is held; the check-out
// asks storage to wait for it with its whole budget, and gets it when the
// holder releases it, in one attempt, sleeping not at all.
func TestCheckOutWaitsAtStorageForTheRelease(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	holder := s.store.Hold(patronID, time.Minute)
	// The holder works for 100 ms, then releases.
	released := make(chan struct{})
	time.AfterFunc(100*time.Millisecond, func() {
		defer close(released)
		s.store.Release(holder)
	})
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	<-released
	if got := acquireWaits(s.store); !slices.Equal(got, []int{2000}) {
		t.Errorf("acquires with waitMs %v, want one with the whole budget, 2000", got)
	}
	wantWaits(t, s.clock, nil)
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
	if len(s.obs.acquired) != 1 || s.obs.acquired[0].attempts != 1 {
		t.Errorf("observer acquisitions %+v, want one of 1 attempt", s.obs.acquired)
	}
}

// TestCheckOutGivesUpWhenStorageWaitedInVain: storage waited the whole
// budget and the lock is still held: no more attempts, nothing written.
func TestCheckOutGivesUpWhenStorageWaitedInVain(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	holdLock(s, -1) // storage waits the whole budget for it, in vain
	before := s.store.Snapshot()
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
	if got := acquireWaits(s.store); !slices.Equal(got, []int{2000}) {
		t.Errorf("acquires with waitMs %v, want one of 2000", got)
	}
	wantWaits(t, s.clock, nil)
	wantNoWrites(t, s.store)
	s.store.WantUnchanged(before)
}

// TestCheckOutPollsAStorageThatDoesNotWait: a storage that answers a held
// lock at once (FOLIO's) gets exactly FOLIO's schedule: attempts after 500,
// 500 and 1000 ms, each asking for the budget left.
func TestCheckOutPollsAStorageThatDoesNotWait(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	asFOLIOStorage(s)
	holdLock(s, -1)
	_, err := s.checkOut(t)
	wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
	if got := acquireWaits(s.store); !slices.Equal(got, []int{2000, 1500, 1000, 0}) {
		t.Errorf("acquires with waitMs %v, want 2000, 1500, 1000, 0", got)
	}
	wantWaits(t, s.clock, ms(500, 500, 1000))
	for _, c := range s.store.Calls() {
		if c.Route == storagetest.RouteAcquire && c.WaitMs() == 0 && strings.Contains(c.Body, "waitMs") {
			t.Errorf("an acquire with nothing left to wait sent waitMs: %s", c.Body)
		}
	}
}

// TestCheckOutWithWaitingOffPolls: LOCK_WAIT_AT_STORAGE=false never asks
// storage to wait: the intervals are sleeps, FOLIO's way.
func TestCheckOutWithWaitingOffPolls(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn, withoutWaitAtStorage())
	holdLock(s, 2)
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	if got := acquireWaits(s.store); !slices.Equal(got, []int{0, 0, 0}) {
		t.Errorf("acquires with waitMs %v, want three without", got)
	}
	wantWaits(t, s.clock, ms(500, 500))
}

// TestCheckOutRetriesStorageFailuresWithTheBudgetLeft: storage answers the
// first attempt's held lock at once, without waiting (its waiters full);
// after the first interval the retry asks to wait for what is left of the
// budget, and gets the lock.
func TestCheckOutRetriesStorageFailuresWithTheBudgetLeft(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.Refuse(storagetest.RouteAcquire, 1, http.StatusServiceUnavailable, schemas.CodeLockHeld)
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	if got := acquireWaits(s.store); !slices.Equal(got, []int{2000, 1500}) {
		t.Errorf("acquires with waitMs %v, want 2000 then 1500", got)
	}
	wantWaits(t, s.clock, ms(500))
}

// TestCheckOutWaitEndsBeforeTheRequestDeadline: a request whose deadline
// is nearer than the budget waits at most until a second before it.
func TestCheckOutWaitEndsBeforeTheRequestDeadline(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	holdLock(s, -1) // storage waits for it in vain
	// The budget is 2 s; the deadline leaves 1.5 s once its last second is
	// kept, and validation has the rest however slowly it runs.
	ctx, cancel := context.WithTimeout(okapi(t), 2500*time.Millisecond)
	defer cancel()
	_, err := s.svc.CheckOut(ctx, request())
	wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
	got := acquireWaits(s.store)
	if len(got) != 1 || got[0] <= 0 || got[0] > 1500 {
		t.Errorf("acquires with waitMs %v, want one of at most 1500 (2.5 s deadline less a second)", got)
	}
}

// TestCheckOutSaysWhoHoldsTheLock: a check-out's lock names the check-out
// (instance, request id, item, service point), and a check-out refused
// because the lock stayed held names the check-out that held it.
func TestCheckOutSaysWhoHoldsTheLock(t *testing.T) {
	t.Parallel()
	env := lockOn
	env.RetryIntervals = ms(10, 10)
	s := newStack(t, env, withInstance("circ-a:8080"), withoutWaitAtStorage())
	other := circulation.LockHolder{Instance: "circ-b:8080", RequestID: "req-b", ItemBarcode: "book-b", ServicePointID: servicePoint}
	held, err := s.storage.AcquireLock(okapi(t), patronID, uuid.NewString(), time.Minute, 0, other)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.checkOut(t)
	e := wantError(t, err, errs.KindInvalid, schemas.CodeUnableToAcquireLock)
	wantParams := []errs.Parameter{{Key: "userBarcode", Value: userBarcode}, {Key: "attempts", Value: "3"},
		{Key: "holderInstance", Value: "circ-b:8080"}, {Key: "holderRequestId", Value: "req-b"},
		{Key: "holderItemBarcode", Value: "book-b"}, {Key: "holderServicePointId", Value: servicePoint}}
	if !slices.Equal(e.Parameters, wantParams) {
		t.Errorf("refusal parameters %+v, want %+v", e.Parameters, wantParams)
	}
	if err := s.storage.ReleaseLock(okapi(t), held.ID); err != nil {
		t.Fatal(err)
	}
	// Its own lock names it.
	if _, err := s.checkOut(t); err != nil {
		t.Fatalf("check-out: %v", err)
	}
	locks := s.store.Granted()
	want := map[string]any{"instance": "circ-a:8080", "requestId": requestID, "itemBarcode": itemBarcode, "servicePointId": servicePoint}
	if got := locks[len(locks)-1].Holder; !maps.Equal(got, want) {
		t.Errorf("the check-out's lock holder %v, want %v", got, want)
	}
}
