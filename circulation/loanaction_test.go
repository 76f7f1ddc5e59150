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

// oneBookStack is a stack whose patron may borrow one item of the seeded
// material type (FOLIO's CheckOutByBarcodeTests: a book limit of 1), with
// a second item to borrow.
func oneBookStack(t *testing.T) *stack {
	t.Helper()
	s := newStack(t, lockOn)
	const onePolicy = "66666666-6666-4666-8666-000000000001"
	s.store.AddLoanPolicy(storagetest.LoanPolicy{ID: onePolicy, Name: "One book", Loanable: true, Duration: 3, Interval: "Weeks", ItemLimit: 1})
	s.store.SetRules(policyID, storagetest.Rule{MaterialTypeID: materialType, LoanPolicyID: onePolicy})
	s.store.AddItem(storagetest.Item{ID: secondItem, Barcode: "i-2002", Title: "Second", Status: schemas.ItemAvailable,
		MaterialTypeID: materialType, PermanentLoanTypeID: loanType})
	return s
}

const secondItem = "33333333-3333-4333-8333-000000000002"

func checkOutSecond(t *testing.T, s *stack) error {
	t.Helper()
	req := request()
	req.ItemBarcode = "i-2002"
	_, err := s.svc.CheckOut(okapi(t), req)
	return err
}

// TestClaimedReturnedIsNotCountedInTheLimit: a patron at a book limit of
// 1 is refused a second book; once they claim the first returned (the
// item Claimed returned, the loan open, its action, date and comment),
// the second is lent, as FOLIO's
// canCheckOutWhenItemLimitWasReachedForBookMaterialAndItemIsClaimedReturned
// expects.
func TestClaimedReturnedIsNotCountedInTheLimit(t *testing.T) {
	t.Parallel()
	s := oneBookStack(t)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	wantStrings(t, "refusals", refusals(t, checkOutSecond(t, s)), []string{
		"ITEM_LIMIT_MATERIAL_TYPE: Patron has reached maximum limit of 1 items for material type [itemBarcode=i-2002] [itemLimit=1]"})
	at := time.Date(2025, 3, 5, 12, 0, 0, 0, time.UTC)
	if err := s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: at, Comment: "In the book drop"}); err != nil {
		t.Fatalf("claim returned: %v", err)
	}
	wantItem(t, s.store, schemas.ItemClaimedReturned, 3)
	loans := s.store.Loans()
	if len(loans) != 1 || loans[0].Status != "Open" || loans[0].Action != circulation.ActionClaimedReturned ||
		loans[0].ActionComment != "In the book drop" {
		t.Fatalf("loans %+v, want the loan open, claimed returned, with the comment", loans)
	}
	if err := checkOutSecond(t, s); err != nil {
		t.Fatalf("the second book after the first was claimed returned: %v", err)
	}
}

// TestDeclaredLostStillCounts: an item declared lost (Declared lost, the
// loan open, its action and date) still counts against the limit, as
// FOLIO counts it; declaring it lost again is refused with FOLIO's
// message.
func TestDeclaredLostStillCounts(t *testing.T) {
	t.Parallel()
	s := oneBookStack(t)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	declare := circulation.DeclareItemLostRequest{Comment: "Not seen since March", ServicePointID: servicePoint}
	if err := s.svc.DeclareItemLost(okapi(t), res.Loan.ID, declare); err != nil {
		t.Fatalf("declare lost: %v", err)
	}
	wantItem(t, s.store, schemas.ItemDeclaredLost, 3)
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].Status != "Open" || loans[0].Action != circulation.ActionDeclaredLost {
		t.Fatalf("loans %+v, want the loan open, declared lost", loans)
	}
	wantStrings(t, "refusals", refusals(t, checkOutSecond(t, s)), []string{
		"ITEM_LIMIT_MATERIAL_TYPE: Patron has reached maximum limit of 1 items for material type [itemBarcode=i-2002] [itemLimit=1]"})
	before := s.store.Snapshot()
	err = s.svc.DeclareItemLost(okapi(t), res.Loan.ID, declare)
	wantStrings(t, "refusals", refusals(t, err), []string{"VALIDATION_FAILED: The item is already declared lost [itemId=" + itemID + "]"})
	s.store.WantUnchanged(before)
}

// TestDeclaredLostWithoutACommentStoresAnEmptyOne: a declaration of loss
// without a comment stores actionComment "", as FOLIO's does, in place of
// the comment the loan carried (an override's, say).
func TestDeclaredLostWithoutACommentStoresAnEmptyOne(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: start, Comment: "In the book drop"}); err != nil {
		t.Fatal(err)
	}
	if err := s.svc.DeclareItemLost(okapi(t), res.Loan.ID, circulation.DeclareItemLostRequest{ServicePointID: servicePoint}); err != nil {
		t.Fatal(err)
	}
	var loan map[string]any
	s.store.Send(http.MethodGet, "/loan-storage/loans/"+res.Loan.ID, nil, &loan, http.StatusOK)
	if c, ok := loan["actionComment"]; !ok || c != "" || loan["action"] != circulation.ActionDeclaredLost {
		t.Errorf("the loan declared lost without a comment: action %v, actionComment %#v (present %v); want declaredLost and \"\"",
			loan["action"], c, ok)
	}
}

// TestLoanActionRefusals: FOLIO's refusals, each writing nothing: a
// claim without its date, a declaration without a service point, a
// closed loan, a loan that does not exist.
func TestLoanActionRefusals(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	before := s.store.Snapshot()
	err = s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{})
	wantStrings(t, "refusals", refusals(t, err), []string{
		"VALIDATION_FAILED: Item claimed returned date is a required field [itemClaimedReturnedDateTime=]"})
	err = s.svc.DeclareItemLost(okapi(t), res.Loan.ID, circulation.DeclareItemLostRequest{})
	wantStrings(t, "refusals", refusals(t, err), []string{
		"VALIDATION_FAILED: A service point is required for item to be declared lost [servicePointId=]"})
	err = s.svc.ClaimItemReturned(okapi(t), otherLoan, circulation.ClaimItemReturnedRequest{At: start})
	wantError(t, err, errs.KindNotFound, schemas.CodeNotFound)
	s.store.WantUnchanged(before)

	if _, err := s.svc.CheckIn(okapi(t), circulation.CheckInRequest{ItemBarcode: itemBarcode, ServicePointID: servicePoint}); err != nil {
		t.Fatal(err)
	}
	before = s.store.Snapshot()
	for _, err := range []error{
		s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: start}),
		s.svc.DeclareItemLost(okapi(t), res.Loan.ID, circulation.DeclareItemLostRequest{ServicePointID: servicePoint}),
	} {
		wantStrings(t, "refusals", refusals(t, err), []string{"VALIDATION_FAILED: Loan is closed [loanId=" + res.Loan.ID + "]"})
	}
	s.store.WantUnchanged(before)
}

// TestLoanActionRefusedByTheItemsStatus: schemas' table of loan actions
// refuses a second claim of an item claimed returned and a second
// declaration of an item declared lost, each writing nothing; a claimed
// item may still be declared lost.
func TestLoanActionRefusedByTheItemsStatus(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: start}); err != nil {
		t.Fatal(err)
	}
	before := s.store.Snapshot()
	err = s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: start.Add(time.Hour)})
	wantStrings(t, "refusals", refusals(t, err), []string{"VALIDATION_FAILED: The item is already claimed returned [itemId=" + itemID + "]"})
	s.store.WantUnchanged(before)

	if err := s.svc.DeclareItemLost(okapi(t), res.Loan.ID, circulation.DeclareItemLostRequest{ServicePointID: servicePoint}); err != nil {
		t.Fatalf("declaring lost an item claimed returned: %v", err)
	}
	before = s.store.Snapshot()
	err = s.svc.DeclareItemLost(okapi(t), res.Loan.ID, circulation.DeclareItemLostRequest{ServicePointID: servicePoint})
	wantStrings(t, "refusals", refusals(t, err), []string{"VALIDATION_FAILED: The item is already declared lost [itemId=" + itemID + "]"})
	s.store.WantUnchanged(before)
}

// TestLoanActionWithTheItemChangedMeanwhile: the item changed between the
// action's read and its write (a check-in, say): nothing is written, the
// loan and the item still agree, and the caller hears the item changed.
func TestLoanActionWithTheItemChangedMeanwhile(t *testing.T) {
	t.Parallel()
	s := newStack(t, lockOn)
	res, err := s.checkOut(t)
	if err != nil {
		t.Fatal(err)
	}
	s.store.Before(storagetest.RoutePutLoan, 1, func(storagetest.Call) {
		s.store.Exec(`UPDATE circulation_storage.item SET jsonb = jsonb_set(jsonb, '{_version}', '7') WHERE tenant_id = $1 AND id = $2`, itemID)
	})
	err = s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: start})
	wantError(t, err, errs.KindConflict, schemas.CodeItemChanged)
	if loans := s.store.Loans(); len(loans) != 1 || loans[0].Action != "checkedout" {
		t.Errorf("loans %+v, want the loan as it was", loans)
	}
	wantItem(t, s.store, schemas.ItemCheckedOut, 7)
}

// TestLoanActionWhoseAnswerIsLost: the action's write commits but its
// answer is lost: sent again with its write id, it is answered from the
// id (replayed, nothing written again), and the action succeeds once. One
// refused before storage saw it is sent again too, and written then.
func TestLoanActionWhoseAnswerIsLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		fault    func(*storagetest.Storage)
		replayed int
	}{
		{"answer lost after the write", func(st *storagetest.Storage) { st.Lose(storagetest.RoutePutLoan, 1, storagetest.LostUnavailable) }, 1},
		{"answer cut after the write", func(st *storagetest.Storage) { st.Lose(storagetest.RoutePutLoan, 1, storagetest.LostCut) }, 1},
		{"refused before storage saw it", func(st *storagetest.Storage) {
			st.Refuse(storagetest.RoutePutLoan, 1, http.StatusServiceUnavailable, schemas.CodeDatabaseUnavailable)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The lost write is sent again until it is answered: half a
			// second is not always enough on a loaded machine.
			s := newStack(t, lockOn, withSettleTimeout(10*time.Second))
			res, err := s.checkOut(t)
			if err != nil {
				t.Fatal(err)
			}
			tc.fault(s.store)
			at := time.Date(2025, 3, 5, 12, 0, 0, 0, time.UTC)
			if err := s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: at}); err != nil {
				t.Fatalf("claim returned: %v", err)
			}
			wantItem(t, s.store, schemas.ItemClaimedReturned, 3)
			wantWrittenOnce(t, s.store, storagetest.RoutePutLoan, 2, tc.replayed)
		})
	}
}

// wantWrittenOnce checks that route was called sent times, each with one
// write id, and storage answered replayed of them from the id.
func wantWrittenOnce(t *testing.T, st *storagetest.Storage, route string, sent, replayed int) {
	t.Helper()
	ids, n, r := map[string]bool{}, 0, 0
	for _, c := range st.Calls() {
		if c.Route != route {
			continue
		}
		n++
		ids[c.WriteID] = true
		if c.Replayed {
			r++
		}
	}
	if n != sent || len(ids) != 1 || r != replayed {
		t.Errorf("%s: %d calls with %d write ids, %d answered from the id; want %d with one, %d", route, n, len(ids), r, sent, replayed)
	}
}

// TestAnActionIsDatedNoLaterThanNow: a claim returned and a declaration of
// loss dated after now (a client's clock ahead) are dated now, as a
// check-in is: what has not happened yet is not recorded as happened; one
// dated before now keeps its date.
func TestAnActionIsDatedNoLaterThanNow(t *testing.T) {
	t.Parallel()
	const now, hourAgo = "2025-03-01T10:00:00.000Z", "2025-03-01T09:00:00.000Z"
	for _, tc := range []struct {
		claimAt, lostAt     time.Time
		wantClaim, wantLost string
	}{
		{start.Add(24 * time.Hour), start.Add(-time.Hour), now, hourAgo},
		{start.Add(-time.Hour), start.Add(time.Hour), hourAgo, now},
	} {
		s := newStack(t, lockOn)
		res, err := s.checkOut(t)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.svc.ClaimItemReturned(okapi(t), res.Loan.ID, circulation.ClaimItemReturnedRequest{At: tc.claimAt}); err != nil {
			t.Fatal(err)
		}
		if err := s.svc.DeclareItemLost(okapi(t), res.Loan.ID, circulation.DeclareItemLostRequest{At: tc.lostAt, ServicePointID: servicePoint}); err != nil {
			t.Fatal(err)
		}
		var loan map[string]any
		s.store.Send(http.MethodGet, "/loan-storage/loans/"+res.Loan.ID, nil, &loan, http.StatusOK)
		if loan["claimedReturnedDate"] != tc.wantClaim || loan["declaredLostDate"] != tc.wantLost {
			t.Errorf("claimed returned at %s and declared lost at %s with now %s: dated %v and %v, want %s and %s",
				tc.claimAt.Format(time.RFC3339), tc.lostAt.Format(time.RFC3339), now, loan["claimedReturnedDate"], loan["declaredLostDate"],
				tc.wantClaim, tc.wantLost)
		}
	}
}
