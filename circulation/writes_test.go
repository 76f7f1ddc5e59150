package circulation_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/storagetest"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// A write whose answer was lost is sent again with its write id, never
// settled by reading the records back: a read-back cannot tell this
// write's outcome from another write's that left the same record, and
// cannot tell a write that never reached storage from one not yet
// committed. Each test here is a case where what is read back says "done"
// for a write that was not done, or "not done" for one that can be.

// TestACheckOutSentAgainIsTheSameWrite: a check-out's write lost on its
// way to storage is sent again with its id and written, once; its loan
// read back would have said it was not written.
func TestACheckOutSentAgainIsTheSameWrite(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.Refuse(storagetest.RoutePostLoan, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	wantOneLoanAnswered(t, s, "a check-out whose first send never reached storage")
	wantWrittenOnce(t, s.store, storagetest.RoutePostLoan, 2, 0)
	wantCount(t, s.store, storagetest.RouteLoan, 0)
}

// TestALostCheckInIsNotAnotherCheckInsDone: two check-ins of one item; the
// other's closes the loan while this one's write is refused unseen (lost
// on its way). The loan read back is closed, as this one would have left
// it; sent again with its id, this one is judged now and refused: its
// item changed since it was read. It is never answered done for the
// other's write.
func TestALostCheckInIsNotAnotherCheckInsDone(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	other := stackOver(t, s.store, lockOn)
	s.store.Before(storagetest.RoutePutLoan, 1, func(storagetest.Call) {
		if _, err := other.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint}); err != nil {
			t.Errorf("the other check-in: %v", err)
		}
		s.store.Refuse(storagetest.RoutePutLoan, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	})
	res, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint})
	if err == nil {
		t.Fatalf("a check-in never written answered done: %+v", res.Loan)
	}
	wantError(t, err, errs.KindConflict, schemas.CodeItemChanged)
	wantItem(t, s.store, schemas.ItemAvailable, 3)
}

// TestALostReturnIsNotAnotherWritesDone: the check-in of an item with no
// open loan; another write moves the item one version on while this one's
// write is refused unseen. The item read back is one version past the one
// this write read, as it would have left it; sent again with its id, the
// write is refused, the item changed: never answered done.
func TestALostReturnIsNotAnotherWritesDone(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.SetItemStatus(itemID, schemas.ItemInTransit)
	s.store.Before(storagetest.RoutePutItem, 1, func(storagetest.Call) {
		s.store.Exec(`UPDATE circulation_storage.item SET jsonb = jsonb_set(jsonb, '{_version}', to_jsonb(version + 1)) WHERE tenant_id = $1 AND id = $2`, itemID)
		s.store.Refuse(storagetest.RoutePutItem, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	})
	before, _ := s.store.Item(itemID)
	_, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint})
	wantError(t, err, errs.KindConflict, schemas.CodeItemChanged)
	wantItem(t, s.store, schemas.ItemInTransit, before.Version+1)
}

// TestALostClaimIsNotAnotherClaimsDone: two claims of one loan's item
// returned, the same date, other comments; the other's is written while
// this one's write is refused unseen. The loan read back carries the same
// action and date this one would have written; sent again with its id,
// this one is refused (the item changed): never answered done, and the
// other's comment stays.
func TestALostClaimIsNotAnotherClaimsDone(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 3, 5, 12, 0, 0, 0, time.UTC)
	other := stackOver(t, s.store, lockOn)
	s.store.Before(storagetest.RoutePutLoan, 1, func(storagetest.Call) {
		if err := other.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: at, Comment: "Y"}); err != nil {
			t.Errorf("the other claim: %v", err)
		}
		s.store.Refuse(storagetest.RoutePutLoan, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	})
	err = s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: at, Comment: "X"})
	wantError(t, err, errs.KindConflict, schemas.CodeItemChanged)
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].ActionComment != "Y" {
		t.Errorf("loans %+v, want the other claim's", loans)
	}
	wantItem(t, s.store, schemas.ItemClaimedReturned, 3)
}
