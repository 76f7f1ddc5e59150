package httpapi

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/schemas"
)

// acquiringWrite is a check-out's write of item to user that acquires its
// lock (lockID) with the terms given (X-Check-Out-Acquire-Lock) and
// releases it.
func (f *fixture) acquiringWrite(user, item, lockID, terms string) response {
	f.t.Helper()
	h := f.asUser(testUser)
	h[schemas.HeaderLockID], h[schemas.HeaderItemVersion], h[schemas.HeaderReleaseLock] = lockID, "1", "true"
	h[schemas.HeaderAcquireLock] = terms
	return f.doWith("POST", "/loan-storage/loans", jsonBody(loanDoc(user, item, "Open")), h)
}

// holdLock acquires the patron's lock as the test's user, who writes the
// check-outs, and answers its id.
func (f *fixture) holdLock(user string) string {
	f.t.Helper()
	id := uuid.NewString()
	f.doWith("POST", "/check-out-lock-storage", jsonBody(map[string]any{"id": id, "userId": user}), f.asUser(testUser)).
		wantStatus(http.StatusCreated)
	return id
}

// TestACheckOutAnsweredFromItsWriteIDReleasesItsLock: a check-out's write
// (the loan's POST under the patron's lock, releasing it) sent again with
// the write id of one that landed writes nothing and is answered from
// it, and the lock it names is gone when it answers: the first's, which
// the write that landed released, or one the call took itself before it
// found the write landed (two calls of one Idempotency-Key at once). The
// answer says so, and the caller releases nothing.
func TestACheckOutAnsweredFromItsWriteIDReleasesItsLock(t *testing.T) {
	t.Parallel()
	f := setup(t)
	group, mt, lt := f.newGroup("staff"), f.newMaterialType("book"), f.newLoanType("Can circulate")
	alice := f.newPatron("alice", group)
	item, writeID := f.newItem(itemDoc(uuid.NewString(), mt, lt)), uuid.NewString()
	write := func(lockID string) response {
		h := f.asUser(testUser)
		h[schemas.HeaderLockID], h[schemas.HeaderItemVersion], h[schemas.HeaderReleaseLock] = lockID, "1", "true"
		h[schemas.HeaderWriteID] = writeID
		return f.doWith("POST", "/loan-storage/loans", jsonBody(loanDoc(alice, item, "Open")), h).wantStatus(http.StatusCreated)
	}
	first := f.holdLock(alice)
	if res := write(first); res.header.Get(schemas.HeaderLockReleased) != "true" || res.header.Get(schemas.HeaderWriteReplayed) != "" {
		t.Fatalf("the write: headers %v, want its lock released with it", res.header)
	}
	for _, again := range []struct {
		what string
		lock func() string
	}{
		{"sent again", func() string { return first }},
		{"sent again under a lock of its own", func() string { return f.holdLock(alice) }},
	} {
		res := write(again.lock())
		if res.header.Get(schemas.HeaderWriteReplayed) != "true" || res.header.Get(schemas.HeaderLockReleased) != "true" {
			t.Errorf("%s: headers %v, want it answered from its write id, its lock released", again.what, res.header)
		}
		if n := f.rows(alice); n != 0 {
			t.Errorf("%s: %d locks of alice left, want none", again.what, n)
		}
	}
	if n := f.countRows("loan", "item_id = $1", item); n != 1 {
		t.Errorf("%d loans of the item, want the one, written once", n)
	}
}

// TestAWriteThatAcquiresItsLock: a check-out's write naming
// X-Check-Out-Acquire-Lock takes the borrower's lock first, as an
// acquisition would, writes, and releases it: the answer says it acquired
// the lock (and how long it waited) and released it, and the lock is
// gone. A lock held by someone else is answered as an acquisition
// answers it, with nothing written; storage waits for it when asked, and
// hands it on when its holder releases it.
func TestAWriteThatAcquiresItsLock(t *testing.T) {
	t.Parallel()
	f := setup(t)
	group, mt, lt := f.newGroup("staff"), f.newMaterialType("book"), f.newLoanType("Can circulate")
	alice := f.newPatron("alice", group)

	item, lockID := f.newItem(itemDoc(uuid.NewString(), mt, lt)), uuid.NewString()
	res := f.acquiringWrite(alice, item, lockID, "ttlMs=3000&instance=circ-1").wantStatus(http.StatusCreated)
	if res.header.Get(schemas.HeaderLockAcquired) == "" || res.header.Get(schemas.HeaderLockReleased) != "true" {
		t.Errorf("answer headers %v, want the lock acquired and released", res.header)
	}
	f.do("GET", "/check-out-lock-storage/"+lockID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	if n := f.countRows("loan", "item_id = $1", item); n != 1 {
		t.Errorf("%d loans of the item, want 1", n)
	}

	// Held by someone else, asked not to wait: refused at once, nothing
	// written, the holder's lock untouched.
	held := f.acquire(alice)
	item = f.newItem(itemDoc(uuid.NewString(), mt, lt))
	f.acquiringWrite(alice, item, uuid.NewString(), "ttlMs=3000").wantError(http.StatusServiceUnavailable, schemas.CodeLockHeld)
	if n := f.countRows("loan", "item_id = $1", item); n != 0 {
		t.Errorf("%d loans written without the lock", n)
	}
	f.do("GET", "/check-out-lock-storage/"+held.ID, "").wantStatus(http.StatusOK)

	// Asked to wait: the holder's release hands the lock on, and the
	// write goes through.
	done := make(chan response, 1)
	go func() { done <- f.acquiringWrite(alice, item, uuid.NewString(), "ttlMs=3000&waitMs=10000") }()
	for deadline := time.Now().Add(10 * time.Second); counterValue(t, f, "checkout_lock_waiters") != 1; {
		if time.Now().After(deadline) {
			t.Fatal("the write never waited for the lock")
		}
		time.Sleep(time.Millisecond) // polling what this test cannot be told of, with a deadline
	}
	f.do("DELETE", "/check-out-lock-storage/"+held.ID, "").wantStatus(http.StatusNoContent)
	res = (<-done).wantStatus(http.StatusCreated)
	if waited, err := strconv.Atoi(res.header.Get(schemas.HeaderLockAcquired)); err != nil || waited <= 0 {
		t.Errorf("%s = %q, want the wait in ms", schemas.HeaderLockAcquired, res.header.Get(schemas.HeaderLockAcquired))
	}
	if n := f.rows(alice); n != 0 {
		t.Errorf("%d locks of alice left, want none", n)
	}
}

// TestAWriteThatAcquiresItsLockAndWritesNothingReleasesIt: a write refused
// by a rule (here, an item not lent: its status) having acquired its lock
// releases it: the patron's next scan does not wait for it.
func TestAWriteThatAcquiresItsLockAndWritesNothingReleasesIt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	group, mt, lt := f.newGroup("staff"), f.newMaterialType("book"), f.newLoanType("Can circulate")
	alice := f.newPatron("alice", group)
	doc := itemDoc(uuid.NewString(), mt, lt)
	doc["status"] = map[string]any{"name": "Intellectual item"}
	item, lockID := f.newItem(doc), uuid.NewString()
	res := f.acquiringWrite(alice, item, lockID, "ttlMs=60000")
	res.wantError(http.StatusUnprocessableEntity, schemas.CodeItemStatusRefused)
	if res.header.Get(schemas.HeaderLockAcquired) == "" {
		t.Errorf("the refusal does not say the lock was acquired: %v", res.header)
	}
	f.do("GET", "/check-out-lock-storage/"+lockID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	if n := f.countRows("loan", "item_id = $1", item); n != 0 {
		t.Errorf("%d loans written", n)
	}
	if n := f.rows(alice); n != 0 {
		t.Errorf("%d lock rows of alice left, want none", n)
	}

	// So when the patron's lock row was there already (a stale lock, taken
	// over the ordinary way before the write).
	stale := f.acquire(alice)
	f.expire(stale.ID)
	lockID = uuid.NewString()
	f.acquiringWrite(alice, item, lockID, "ttlMs=60000").wantError(http.StatusUnprocessableEntity, schemas.CodeItemStatusRefused)
	if n := f.rows(alice); n != 0 {
		t.Errorf("%d lock rows of alice left after the write that took the stale one over, want none", n)
	}
}

// TestAWriteThatAcquiresItsLockIsReadAsAnAcquisition: the header's terms
// are an acquisition's, refused as its body's would be, before anything
// is acquired or written.
func TestAWriteThatAcquiresItsLockIsReadAsAnAcquisition(t *testing.T) {
	t.Parallel()
	f := setup(t)
	group, mt, lt := f.newGroup("staff"), f.newMaterialType("book"), f.newLoanType("Can circulate")
	alice := f.newPatron("alice", group)
	item := f.newItem(itemDoc(uuid.NewString(), mt, lt))
	for _, tc := range []struct {
		terms  string
		status int
		code   string
	}{
		{"ttlMs=1", http.StatusUnprocessableEntity, schemas.CodeValidation},                 // below the schema's minimum
		{"ttlMs=3000&waitMs=20001", http.StatusUnprocessableEntity, schemas.CodeValidation}, // above LOCK_MAX_WAIT
		{"ttlMs=soon", http.StatusBadRequest, schemas.CodeInvalidHeader},
		{"ttlMs=3000&ttlMs=4000", http.StatusBadRequest, schemas.CodeInvalidHeader},
		{"ttlMs=3000&holder=me", http.StatusBadRequest, schemas.CodeInvalidHeader},
		{"ttlMs=3000&itemBarcode=", http.StatusUnprocessableEntity, schemas.CodeValidation}, // the holder's minLength
		{"%zz", http.StatusBadRequest, schemas.CodeInvalidHeader},
	} {
		f.acquiringWrite(alice, item, uuid.NewString(), tc.terms).wantError(tc.status, tc.code)
	}
	// It acquires the lock the write names, and releases it.
	h := f.asUser(testUser)
	h[schemas.HeaderItemVersion], h[schemas.HeaderAcquireLock] = "1", "ttlMs=3000"
	f.doWith("POST", "/loan-storage/loans", jsonBody(loanDoc(alice, item, "Open")), h).
		wantError(http.StatusBadRequest, schemas.CodeInvalidHeader)
	h[schemas.HeaderLockID] = uuid.NewString()
	f.doWith("POST", "/loan-storage/loans", jsonBody(loanDoc(alice, item, "Open")), h).
		wantError(http.StatusBadRequest, schemas.CodeInvalidHeader)
	if n := f.countRows("loan", "item_id = $1", item); n != 0 {
		t.Errorf("%d loans written", n)
	}
	if n := f.rows(alice); n != 0 {
		t.Errorf("%d locks taken", n)
	}
}
