package lending

import (
	"context"
	"testing"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/locks"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
)

// TestFenceRefusesAWriteUnderALockTakenOver is the fence's core case: two
// locks of one patron in turn. Check-out 1 acquires lock A and stalls past
// A's expiry; check-out 2 takes the patron's lock over as B, which is live.
// Check-out 1's write, naming A, must be refused LOCK_LOST while B lives:
// the fence is A's own id, not "a live lock of the patron". That holds
// also when B's owner is A's (two check-outs from one kiosk, through the
// same module), where the owner check cannot tell them apart. Nothing is
// written, B is not released by the refused write, and B's own write goes
// through. (mutations.txt: fence-lock-id.)
func TestFenceRefusesAWriteUnderALockTakenOver(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	lib := newLibrary(f.DB, testPolicy)
	kiosk := storage.Caller{User: "kiosk-1", Module: "circulation"}
	for _, c := range []struct {
		name         string
		second       storage.Caller
		patron       string
		stale, fresh string // the items check-outs 1 and 2 write
	}{
		{name: "by the same owner", second: kiosk, patron: "1001", stale: "book-061", fresh: "book-062"},
		{name: "by another owner", second: storage.Caller{User: "kiosk-2", Module: "circulation"}, patron: "1002",
			stale: "book-063", fresh: "book-064"},
	} {
		first := storage.WithCaller(context.Background(), kiosk)
		second := storage.WithCaller(context.Background(), c.second)
		user := sample.ID(c.patron)
		a, _, err := locks.NewLocks(f.DB).Acquire(first, f.Tenant, user, uuid.NewString(), dbtest.TTL, kiosk.Holder())
		if err != nil {
			t.Fatal(err)
		}
		dbtest.Expire(t, f, a.ID)
		b, outcome, err := locks.NewLocks(f.DB).Acquire(second, f.Tenant, user, uuid.NewString(), dbtest.TTL, c.second.Holder())
		if err != nil || outcome != storage.TookOverExpired || b.ID == a.ID {
			t.Fatalf("%s: takeover of the expired lock: %+v %v %v", c.name, b, outcome, err)
		}

		// Check-out 1 writes under A, as if A were still its own.
		_, err = lib.CreateCheckOutLoan(first, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user,
			Loan: loanDoc(user, sample.ID(c.stale)), LockID: a.ID, ItemVersion: 1, ReleaseLock: true})
		if e, ok := errs.As(err); !ok || e.Code != schemas.CodeLockLost || e.Kind != errs.KindConflict {
			t.Errorf("%s: a write under lock A after B took it over: %v, want %s", c.name, err, schemas.CodeLockLost)
		}
		if n := f.Count(t, "loan", "user_id = $1", user); n != 0 {
			t.Errorf("%s: %d loans written under the lost lock A, want 0", c.name, n)
		}
		if n := f.Count(t, "item", "id = $1 AND version = 1 AND status_name <> 'Checked out'", sample.ID(c.stale)); n != 1 {
			t.Errorf("%s: the item of the refused write changed", c.name)
		}
		if _, err := locks.NewLocks(f.DB).Get(context.Background(), f.Tenant, b.ID); err != nil {
			t.Errorf("%s: lock B after the refused write under A: %v, want it still held", c.name, err)
		}

		// Check-out 2's write under B goes through, and releases B.
		w, err := lib.CreateCheckOutLoan(second, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: user,
			Loan: loanDoc(user, sample.ID(c.fresh)), LockID: b.ID, ItemVersion: 1, ReleaseLock: true})
		if err != nil || !w.LockReleased {
			t.Errorf("%s: the write under lock B: %v (released %v), want the loan and B released", c.name, err, w.LockReleased)
		}
		if n := f.Count(t, "loan", "user_id = $1", user); n != 1 {
			t.Errorf("%s: %d loans after B's write, want 1", c.name, n)
		}
	}
}

// TestTenantsSharingIDsStayApart: two libraries whose records carry the
// same ids (FOLIO's reference data, the sample's patrons and items) share
// the tables and nothing else. The patron at the limit in one tenant
// borrows freely in the other, and a write in one changes no row of the
// other. (mutations.txt: tenant-limit-count, tenant-item-write.)
func TestTenantsSharingIDsStayApart(t *testing.T) {
	t.Parallel()
	a, b := dbtest.SetupLibrary(t, sample.LoadData), dbtest.SetupLibrary(t, sample.LoadData)
	ctx := context.Background()
	lib := newLibrary(a.DB, testPolicy)
	patron := sample.ID("1004") // faculty
	open := a.Count(t, postgres.TableLoan, "user_id = $1 AND status_name = 'Open'", patron)
	for _, f := range []dbtest.Fixture{a, b} {
		setItemLimit(t, f, sample.GroupFaculty, open+1)
	}
	write := func(f dbtest.Fixture, barcode string) error {
		_, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: patron,
			Loan: loanDoc(patron, sample.ID(barcode)), ItemVersion: 1})
		return err
	}
	if err := write(a, "book-071"); err != nil {
		t.Fatalf("tenant A's first loan: %v", err)
	}
	if err := write(a, "book-072"); !errs.IsKind(err, errs.KindInvalid) {
		t.Errorf("tenant A's second loan, past its limit: %v, want refused", err)
	}
	// The same patron id, the same item, in tenant B: nothing lent there.
	if err := write(b, "book-071"); err != nil {
		t.Errorf("tenant B's loan of its own book-071 to its own patron: %v", err)
	}
	for _, f := range []dbtest.Fixture{a, b} {
		if n := f.Count(t, postgres.TableLoan, "user_id = $1 AND status_name = 'Open'", patron); n != open+1 {
			t.Errorf("tenant %s: %d open loans, want %d", f.Tenant, n, open+1)
		}
		if n := f.Count(t, postgres.TableItem, "id = $1 AND version = 2 AND status_name = 'Checked out'", sample.ID("book-071")); n != 1 {
			t.Errorf("tenant %s: its book-071 not checked out once (version 2)", f.Tenant)
		}
		if n := f.Count(t, postgres.TableItem, "id = $1 AND version = 1 AND status_name = 'Available'", sample.ID("book-072")); n != 1 {
			t.Errorf("tenant %s: its book-072 changed", f.Tenant)
		}
	}
}
