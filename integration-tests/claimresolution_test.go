package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// TestAClaimIsResolvedAtCheckIn replays over the real binaries what
// FOLIO's check-in does with claimedReturnedResolution (mod-circulation's
// LoanCheckInService and OverdueFineService, CheckInByBarcodeTests): an
// overdue item claimed returned and then found by the library is checked
// in as checkedInFoundByLibrary and charged no fine; one the patron
// returned, as checkedInReturnedByPatron, fined as any late return. A
// resolution of an item nobody claimed resolves nothing: it is checked in
// and fined as without one (FOLIO waives the fine:
// shouldNotCreateOverdueFineWithResolutionFoundByLibrary), and storage
// refuses a resolution's action for it sent directly (at the item's
// version; at an earlier one, the version's fence answers first). A
// resolution FOLIO does not know is refused in the envelope, changing
// nothing; a claimed returned item is checked in without one, as a
// kiosk's return.
func TestAClaimIsResolvedAtCheckIn(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 1, FeatureOn: true})
	lib := setUpFees(t, c, 5, 1, facultyStandard(), lostPolicy(10, 5))
	patron := func(p int) string { return c.IDOf(t, "/users", "users", lib.Patrons[p]) }
	// lent is patron p's item lent three weeks from 2020-01-01 and, when
	// claimed, claimed returned on 2020-01-20.
	lent := func(p int, claimed bool) map[string]any {
		t.Helper()
		loan := checkOutOn(t, c, lib.Items[p][0], lib.Patrons[p], "2020-01-01T12:00:00.000Z")
		if claimed {
			c.Do(c.Circulations[0], "POST", fmt.Sprintf("/circulation/loans/%s/claim-item-returned", loan["id"]),
				map[string]any{"itemClaimedReturnedDateTime": "2020-01-20T12:00:00.000Z"}).Want(t, http.StatusNoContent)
		}
		return loan
	}
	// checkIn checks patron p's item in three days late, resolved as
	// resolution ("" for none), and answers the status and the body.
	checkIn := func(p int, resolution string) harness.Response {
		t.Helper()
		body := map[string]any{"itemBarcode": lib.Items[p][0], "servicePointId": harness.ServicePoint, "checkInDate": "2020-01-25T12:00:00.000Z"}
		if resolution != "" {
			body["claimedReturnedResolution"] = resolution
		}
		return c.Do(c.Circulations[0], "POST", "/circulation/check-in-by-barcode", body)
	}
	// stored is the loan as storage holds it: its status, its action and
	// its item's status.
	stored := func(loan map[string]any) (string, string, string) {
		t.Helper()
		var l struct {
			Action string
			Status struct{ Name string }
		}
		c.Do(c.Storage, "GET", fmt.Sprint("/loan-storage/loans/", loan["id"]), nil).Want(t, http.StatusOK).Decode(t, &l)
		var item struct{ Status struct{ Name string } }
		c.Do(c.Storage, "GET", fmt.Sprint("/item-storage/items/", loan["itemId"]), nil).Want(t, http.StatusOK).Decode(t, &item)
		return l.Status.Name, l.Action, item.Status.Name
	}
	want := func(p int, loan map[string]any, action string, fined bool) {
		t.Helper()
		if status, got, item := stored(loan); status != schemas.LoanClosed || got != action || item != schemas.ItemAvailable {
			t.Fatalf("patron %d's loan: %s, %s, its item %s; want Closed, %s, Available", p, status, got, item, action)
		}
		fees := accountsOf(t, c, patron(p))
		switch {
		case fined && len(fees) == 1:
			wantCharge(t, c, fees[0], loan, lib.OverdueType, schemas.FeeFineOverdueFine, lib.Owner, "15.00")
		case fined || len(fees) != 0:
			t.Fatalf("patron %d's fees/fines: %+v, want fined %v", p, fees, fined)
		}
	}

	// Found by library: no fine; the answer's loan says how it closed.
	loan := lent(0, true)
	var answer struct{ Loan struct{ Action string } }
	checkIn(0, "Found by library").Want(t, http.StatusOK).Decode(t, &answer)
	if answer.Loan.Action != schemas.LoanCheckedInFoundByLibrary {
		t.Fatalf("the check-in's answer: loan action %q, want %s", answer.Loan.Action, schemas.LoanCheckedInFoundByLibrary)
	}
	want(0, loan, schemas.LoanCheckedInFoundByLibrary, false)

	// Returned by patron: fined three days at 5.00.
	loan = lent(1, true)
	checkIn(1, "Returned by patron").Want(t, http.StatusOK)
	want(1, loan, schemas.LoanCheckedInReturnedByPatron, true)

	// Not claimed: the resolution resolves nothing.
	loan = lent(2, false)
	checkIn(2, "Found by library").Want(t, http.StatusOK)
	want(2, loan, schemas.LoanCheckedIn, true)

	// Not a resolution FOLIO knows: refused, nothing changed; then
	// checked in without one.
	loan = lent(3, true)
	r := checkIn(3, "Found by the cat").Want(t, http.StatusUnprocessableEntity)
	var env struct {
		Errors []struct {
			Code       string
			Parameters []struct{ Key, Value string }
		}
	}
	r.Decode(t, &env)
	if len(env.Errors) != 1 || env.Errors[0].Code != schemas.CodeValidation || len(env.Errors[0].Parameters) != 1 ||
		env.Errors[0].Parameters[0].Key != "claimedReturnedResolution" || env.Errors[0].Parameters[0].Value != "Found by the cat" {
		t.Fatalf("an unknown resolution: %s", r.Body)
	}
	if status, action, item := stored(loan); status != schemas.LoanOpen || action != "claimedReturned" || item != schemas.ItemClaimedReturned {
		t.Fatalf("after the refusal: loan %s, %s, item %s; want Open, claimedReturned, Claimed returned", status, action, item)
	}
	if fees := accountsOf(t, c, patron(3)); len(fees) != 0 {
		t.Fatalf("after the refusal: %+v, want no fee/fine", fees)
	}
	checkIn(3, "").Want(t, http.StatusOK)
	want(3, loan, schemas.LoanCheckedIn, true)

	// Storage's write, sent a resolution's action for an item not
	// claimed returned: refused, nothing written.
	loan = lent(4, false)
	var item struct {
		Version int `json:"_version"`
	}
	c.Do(c.Storage, "GET", fmt.Sprint("/item-storage/items/", loan["itemId"]), nil).Want(t, http.StatusOK).Decode(t, &item)
	var doc map[string]any
	c.Do(c.Storage, "GET", fmt.Sprint("/loan-storage/loans/", loan["id"]), nil).Want(t, http.StatusOK).Decode(t, &doc)
	delete(doc, "metadata")
	doc["status"], doc["action"], doc["returnDate"] = map[string]any{"name": schemas.LoanClosed}, schemas.LoanCheckedInFoundByLibrary, "2020-01-25T12:00:00.000Z"
	doc["checkinServicePointId"] = harness.ServicePoint
	// Read at an earlier version of the item, the write is fenced by it
	// first: 409, to be read again, not a refusal of the resolution.
	r = c.DoWith(c.Storage, "PUT", fmt.Sprint("/loan-storage/loans/", loan["id"]), doc,
		c.HeadersWith(schemas.HeaderCheckInItemVersion, strconv.Itoa(item.Version-1))).Want(t, http.StatusConflict)
	if codes := r.ErrorCodes(); len(codes) != 1 || codes[0] != schemas.CodeVersionConflict {
		t.Fatalf("storage's check-in at an earlier version of the item: %s", r.Body)
	}
	r = c.DoWith(c.Storage, "PUT", fmt.Sprint("/loan-storage/loans/", loan["id"]), doc,
		c.HeadersWith(schemas.HeaderCheckInItemVersion, strconv.Itoa(item.Version))).Want(t, http.StatusUnprocessableEntity)
	env.Errors = nil
	if r.Decode(t, &env); len(env.Errors) != 1 || env.Errors[0].Code != schemas.CodeValidation || len(env.Errors[0].Parameters) != 1 ||
		env.Errors[0].Parameters[0].Key != "action" || env.Errors[0].Parameters[0].Value != schemas.LoanCheckedInFoundByLibrary {
		t.Fatalf("storage's check-in resolving no claim: %s", r.Body)
	}
	if status, action, itemStatus := stored(loan); status != schemas.LoanOpen || action != "checkedout" || itemStatus != schemas.ItemCheckedOut {
		t.Fatalf("after storage's refusal: loan %s, %s, item %s; want Open, checkedout, Checked out", status, action, itemStatus)
	}
	if fees := accountsOf(t, c, patron(4)); len(fees) != 0 {
		t.Fatalf("after storage's refusal: %+v, want no fee/fine", fees)
	}
	moneyHolds(t, c)
}
