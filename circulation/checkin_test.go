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

func TestCheckInClosesTheOpenLoan(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatalf("check-out: %v", err)
	}
	checkInDate := time.Date(2025, 3, 8, 9, 30, 0, 0, time.UTC)
	s.clock.Advance(10 * 24 * time.Hour) // the book came back two days ago
	in, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint,
		CheckInDate: checkInDate})
	if err != nil {
		t.Fatalf("check-in: %v", err)
	}
	wantItem(t, s.store, schemas.ItemAvailable, 3)
	loans := s.store.Loans()
	if len(loans) != 1 {
		t.Fatalf("loans %+v, want one", loans)
	}
	l := loans[0]
	if l.ID != res.Loan.ID || l.Status != "Closed" || l.Action != "checkedin" || l.ReturnDate != "2025-03-08T09:30:00.000Z" ||
		l.CheckinServicePointID != servicePoint || l.LoanDate != "2025-03-01T10:00:00.000Z" {
		t.Errorf("stored loan %+v", l)
	}
	if in.Loan == nil || in.Loan.ID != res.Loan.ID || in.Item.Status != schemas.ItemAvailable {
		t.Errorf("result %+v", in)
	}
	// Check-in takes no lock.
	wantCount(t, s.store, storagetest.RouteAcquire, 1)
}

func TestCheckInWithoutALoanMakesTheItemAvailable(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.AddItem(storagetest.Item{ID: "33333333-3333-4333-8333-00000000000b", Barcode: "t-1", Title: "Travelling",
		Status: "In transit", MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	in, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: "t-1", ServicePointID: servicePoint})
	if err != nil {
		t.Fatalf("check-in: %v", err)
	}
	item, _ := s.store.Item("33333333-3333-4333-8333-00000000000b")
	if item.Status != schemas.ItemAvailable || item.Version != 2 || in.Loan != nil || in.Item.Status != schemas.ItemAvailable {
		t.Errorf("stored item %+v, result %+v", item, in)
	}
	wantCount(t, s.store, storagetest.RoutePutLoan, 0)
	wantCount(t, s.store, storagetest.RoutePutItem, 1)
}

func TestCheckInOfAnUnknownBarcodeIsRefused(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	_, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: "nope", ServicePointID: servicePoint})
	wantStrings(t, "refusals", refusals(t, err), []string{
		"ITEM_BARCODE_NOT_FOUND: No item with barcode nope could be found [itemBarcode=nope]"})
	if w := s.store.Writes(); len(w) != 0 {
		t.Errorf("writes %+v, want none", w)
	}
}

// TestAmbiguousCheckInItemUpdateIsSettled: an item with no loan to close
// is checked in, and the answer to its update is lost. If the write had
// not happened, writing the same version again succeeds; if it had, the
// second write conflicts and the read-back shows it applied. Either way
// the item is available.
func TestAmbiguousCheckInItemUpdateIsSettled(t *testing.T) {
	t.Parallel()
	for _, committed := range []bool{false, true} {
		// The lost write is sent again until it is answered: half a
		// second is not always enough on a loaded machine.
		s := newStack(t, lockOn, withSettleTimeout(10*time.Second))
		s.store.AddItem(storagetest.Item{ID: "33333333-3333-4333-8333-00000000000a", Barcode: "in-transit", Title: "Travelling",
			Status: "In transit", MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
		// The first update's answer is lost: before storage saw it, or
		// after it committed.
		if committed {
			s.store.Lose(storagetest.RoutePutItem, 1, storagetest.LostUnavailable)
		} else {
			s.store.Refuse(storagetest.RoutePutItem, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
		}
		res, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: "in-transit", ServicePointID: servicePoint})
		if err != nil {
			t.Fatalf("committed=%v: check-in: %v", committed, err)
		}
		if item, _ := s.store.Item("33333333-3333-4333-8333-00000000000a"); item.Status != schemas.ItemAvailable || item.Version != 2 {
			t.Errorf("committed=%v: item %+v, want Available at version 2", committed, item)
		}
		if res.Loan != nil || res.Item.Status != schemas.ItemAvailable {
			t.Errorf("committed=%v: answered %+v", committed, res)
		}
		wantCount(t, s.store, storagetest.RoutePutItem, 2)
	}
}

// TestCheckInIsOneWrite: a check-in makes the item available and closes
// its loan in one storage call; no item update of its own.
func TestCheckInIsOneWrite(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	res, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loan == nil || res.Item.Status != schemas.ItemAvailable || res.Item.Version != 3 {
		t.Errorf("check-in answered item %+v, loan %+v", res.Item, res.Loan)
	}
	wantItem(t, s.store, schemas.ItemAvailable, 3)
	wantCount(t, s.store, storagetest.RoutePutItem, 0)
	wantCount(t, s.store, storagetest.RoutePutLoan, 1)
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].Status != "Closed" {
		t.Errorf("loans %+v, want the loan closed", loans)
	}
}

// TestCheckInOfAnAvailableItemIsConditionalToo: an item that says
// Available although it has an open loan (as a check-in sees it when a
// check-out came in between its reads) has the loan closed only at the item
// version read: the same one-transaction write, which a check-out that
// moved the item on would make fail.
func TestCheckInOfAnAvailableItemIsConditionalToo(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	s.store.AddLoan(storagetest.Loan{ID: "66666666-6666-4666-8666-000000000001", UserID: patronID, ItemID: itemID, Status: "Open",
		Action: "checkedout", LoanDate: "2025-02-01T10:00:00.000Z", DueDate: "2025-02-22T10:00:00.000Z"})
	res, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint})
	if err != nil {
		t.Fatal(err)
	}
	if res.Loan == nil {
		t.Errorf("check-in answered no loan")
	}
	wantItem(t, s.store, schemas.ItemAvailable, 2) // written at the version read, 1
	wantCount(t, s.store, storagetest.RoutePutLoan, 1)
	wantCount(t, s.store, storagetest.RoutePutItem, 0)
}

// TestCheckInThatFailsChangesNothing: the loan cannot be closed (storage
// refuses every loan write), so the item stays Checked out with its open
// loan: they never disagree.
func TestCheckInThatFailsChangesNothing(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	s.store.Refuse(storagetest.RoutePutLoan, -1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
	_, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint})
	wantError(t, err, errs.KindUnavailable, schemas.CodeStorageUnavailable)
	wantItem(t, s.store, schemas.ItemCheckedOut, 2)
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].Status != "Open" {
		t.Errorf("loans %+v, want the loan still open", loans)
	}
	wantCount(t, s.store, storagetest.RouteLoan, 0) // nothing read back
	wantWrittenOnce(t, s.store, storagetest.RoutePutLoan, s.store.Count(storagetest.RoutePutLoan), 0)
}

// TestCheckInReadsBackALostAnswer: the check-in's write commits but its
// answer is lost (as when a database fails over during COMMIT), and so is
// every other answer storage gives for a while: sent again with its write
// id, the write is answered from the id once an answer comes through, so
// the check-in succeeded, written once, and nothing is undone.
func TestCheckInReadsBackALostAnswer(t *testing.T) {
	t.Parallel()
	// The lost write is sent again until it is answered: half a second
	// is not always enough on a loaded machine.
	s := newStack(t, lockOn, withSettleTimeout(10*time.Second))
	if _, err := s.checkOut(t); err != nil {
		t.Fatal(err)
	}
	s.store.Lose(storagetest.RoutePutLoan, 2, storagetest.LostUnavailable)
	res, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint})
	if err != nil {
		t.Fatalf("check-in: %v", err)
	}
	if res.Loan == nil || res.Loan.Status != "Closed" || res.Item.Status != schemas.ItemAvailable {
		t.Errorf("check-in answered item %+v, loan %+v", res.Item, res.Loan)
	}
	wantItem(t, s.store, schemas.ItemAvailable, 3)
	wantCount(t, s.store, storagetest.RoutePutItem, 0)
	wantWrittenOnce(t, s.store, storagetest.RoutePutLoan, 3, 2)
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].Status != "Closed" {
		t.Errorf("loans %+v, want the loan closed", loans)
	}
}
