package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// feesLibrary is a library that charges fees: a fee/fine owner serving
// the harness's service point (with its own automatic "Overdue fine"
// type, as FOLIO's tests make one, and a payment method "Cash"), and the
// circulation rules choosing the overdue fine policy overdue and the
// lost item fee policy lost (documents) for every loan.
type feesLibrary struct {
	harness.Library
	Owner, OverdueType, OverduePolicy, LostPolicy string
}

func setUpFees(t *testing.T, c *harness.Cluster, patrons, items int, overdue, lost map[string]any) feesLibrary {
	t.Helper()
	lib := feesLibrary{Library: c.SetupLibrary(patrons, items, 0)}
	post := func(path string, body any) string {
		t.Helper()
		var out struct{ ID string }
		c.Do(c.Storage, "POST", path, body).Want(t, http.StatusCreated).Decode(t, &out)
		return out.ID
	}
	lib.Owner = post("/owners", map[string]any{"owner": "Main desk", "servicePointOwner": []map[string]string{{"value": harness.ServicePoint, "label": "Circ Desk 2"}}})
	lib.OverdueType = post("/feefines", map[string]any{"feeFineType": schemas.FeeFineOverdueFine, "automatic": true, "ownerId": lib.Owner})
	post("/payments", map[string]any{"nameMethod": "Cash", "ownerId": lib.Owner})
	lib.OverduePolicy = post("/overdue-fines-policies", overdue)
	lib.LostPolicy = post("/lost-item-fees-policies", lost)
	c.Do(c.Storage, "PUT", "/circulation-rules-storage", map[string]any{"fallbackLoanPolicyId": lib.PolicyID,
		"fallbackOverdueFinePolicyId": lib.OverduePolicy, "fallbackLostItemPolicyId": lib.LostPolicy, "rules": []any{}}).
		Want(t, http.StatusNoContent)
	return lib
}

// facultyStandard is FOLIO's test fixture of that name (mod-circulation's
// OverdueFinePoliciesFixture.facultyStandard): 5.00 a day, at most 50.00;
// a recalled loan 1.00 an hour, at most 50.00.
func facultyStandard() map[string]any {
	return map[string]any{"name": "Faculty standard", "overdueFine": map[string]any{"quantity": 5.0, "intervalId": "day"},
		"countClosed": true, "maxOverdueFine": 50.00, "forgiveOverdueFine": false,
		"overdueRecallFine": map[string]any{"quantity": 1.0, "intervalId": "hour"}, "gracePeriodRecall": false, "maxOverdueRecallFine": 50.00}
}

// lostPolicy is a lost item fee policy charging itemFee (anotherCost)
// and processingFee, each when above 0.
func lostPolicy(itemFee, processingFee float64) map[string]any {
	return map[string]any{"name": "Lost", "chargeAmountItem": map[string]any{"chargeType": "anotherCost", "amount": itemFee},
		"lostItemProcessingFee": processingFee, "chargeAmountItemPatron": processingFee > 0, "chargeAmountItemSystem": false,
		"returnedLostItemProcessingFee": true, "lostItemReturned": "Remove"}
}

// account is a fee/fine as storage answers it.
type account struct {
	ID, UserID, LoanID, ItemID, FeeFineID, FeeFineType, OwnerID, Barcode string
	Amount, Remaining                                                    json.Number
	Status, PaymentStatus                                                struct{ Name string }
	Version                                                              int `json:"_version"`
}

// action is a fee/fine action as storage answers it.
type action struct {
	ID, AccountID, UserID, TypeAction, PaymentMethod, Source string
	AmountAction, Balance                                    json.Number
}

// accountsOf are the fees/fines of the patron userID, oldest first.
func accountsOf(t *testing.T, c *harness.Cluster, userID string) []account {
	t.Helper()
	var page struct{ Accounts []account }
	c.Do(c.Storage, "GET", "/accounts?userId="+userID+"&limit=1000", nil).Want(t, http.StatusOK).Decode(t, &page)
	return page.Accounts
}

// actionsOf are the fee/fine actions of the account id, ordered by type.
func actionsOf(t *testing.T, c *harness.Cluster, id string) []action {
	t.Helper()
	var page struct{ Feefineactions []action }
	c.Do(c.Storage, "GET", "/feefineactions?accountId="+id+"&limit=1000", nil).Want(t, http.StatusOK).Decode(t, &page)
	sort.Slice(page.Feefineactions, func(i, j int) bool { return page.Feefineactions[i].TypeAction < page.Feefineactions[j].TypeAction })
	return page.Feefineactions
}

// checkOutOn checks the item out to the patron dated at (FOLIO's tests'
// loan dates, years ago: the tenant administrator may backdate).
func checkOutOn(t *testing.T, c *harness.Cluster, item, patron, at string) map[string]any {
	t.Helper()
	var loan map[string]any
	c.Do(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": item, "userBarcode": patron,
		"servicePointId": harness.ServicePoint, "loanDate": at}).Want(t, http.StatusCreated).Decode(t, &loan)
	return loan
}

// checkInOn checks the item in at the service point servicePoint, dated at.
func checkInOn(t *testing.T, c *harness.Cluster, item, servicePoint, at string) {
	t.Helper()
	c.Do(c.Circulations[0], "POST", "/circulation/check-in-by-barcode", map[string]any{"itemBarcode": item,
		"servicePointId": servicePoint, "checkInDate": at}).Want(t, http.StatusOK)
}

// wantCharge holds the patron's one fee/fine to what a charge of amount
// of the type feeFineType (its id typeID) for the loan writes: open,
// outstanding, charged with one action of the whole amount.
func wantCharge(t *testing.T, c *harness.Cluster, a account, loan map[string]any, typeID, feeFineType, owner, amount string) {
	t.Helper()
	if a.Amount.String() != amount || a.Remaining.String() != amount || a.Status.Name != "Open" || a.PaymentStatus.Name != "Outstanding" ||
		a.FeeFineID != typeID || a.FeeFineType != feeFineType || a.OwnerID != owner || a.LoanID != loan["id"] ||
		a.UserID != loan["userId"] || a.ItemID != loan["itemId"] || a.Version != 1 {
		t.Fatalf("charge: %+v, want %s of %s (%s) for loan %v", a, amount, feeFineType, typeID, loan["id"])
	}
	acts := actionsOf(t, c, a.ID)
	if len(acts) != 1 || acts[0].TypeAction != feeFineType || acts[0].AmountAction.String() != amount || acts[0].Balance.String() != amount ||
		acts[0].UserID != a.UserID {
		t.Fatalf("the charge's actions: %+v, want one %s of %s", acts, feeFineType, amount)
	}
}

// TestFeesAreChargedAsFOLIOChargesThem replays, black-box over the real
// binaries, mod-circulation's API tests of overdue fines at check-in and
// renewal and of lost item fees at a declaration of loss and their
// return (CheckInByBarcodeTests, RenewalAPITests, DeclareLostAPITests,
// CheckInDeclaredLostItemTest), with their fixtures' policies and dates.
// Where this service differs (no calendars: every closed day counts),
// the expectation is this service's and docs/api.md says why.
func TestFeesAreChargedAsFOLIOChargesThem(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, Storages: 1, FeatureOn: true})
	lib := setUpFees(t, c, 4, 2, facultyStandard(), lostPolicy(10, 5))
	renewable(t, c, lib.Library, map[string]any{"unlimited": true, "renewFromId": "SYSTEM_DATE"})
	patron := func(p int) string { return c.IDOf(t, "/users", "users", lib.Patrons[p]) }

	// overdueFineShouldBeChargedWhenItemIsOverdue: lent 2020-01-01 12:00
	// for three weeks, returned three days late: 3 days at 5.00 (FOLIO's
	// test expects 5.00 for the policy that does not count closed days,
	// by its calendar; this one counts every day).
	loan := checkOutOn(t, c, lib.Items[0][0], lib.Patrons[0], "2020-01-01T12:00:00.000Z")
	checkInOn(t, c, lib.Items[0][0], harness.ServicePoint, "2020-01-25T12:00:00.000Z")
	fees := accountsOf(t, c, patron(0))
	if len(fees) != 1 {
		t.Fatalf("an overdue loan returned: %d fees/fines, want 1", len(fees))
	}
	wantCharge(t, c, fees[0], loan, lib.OverdueType, schemas.FeeFineOverdueFine, lib.Owner, "15.00")

	// overdueFineIsNotCreatedWhenThereIsNoOwnerForServicePoint.
	other := "7c5abc9f-f3d7-4856-b8d7-6712462ca007"
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"id": other, "name": "Annex", "code": "ax", "discoveryDisplayName": "Annex"}).
		Want(t, http.StatusCreated)
	checkOutOn(t, c, lib.Items[1][0], lib.Patrons[1], "2020-01-01T12:00:00.000Z")
	checkInOn(t, c, lib.Items[1][0], other, "2020-01-25T12:00:00.000Z")
	// Returned within the loan period: no fine.
	checkOutOn(t, c, lib.Items[1][1], lib.Patrons[1], "2020-01-01T12:00:00.000Z")
	checkInOn(t, c, lib.Items[1][1], harness.ServicePoint, "2020-01-21T12:00:00.000Z")
	if fees := accountsOf(t, c, patron(1)); len(fees) != 0 {
		t.Fatalf("no owner at the service point, and a loan returned in time: %+v, want no fee/fine", fees)
	}

	// overdueFineShouldBeChargedWhenItemIsOverdue (renewal): a loan
	// renewed years late is fined at once, at the policy's maximum.
	loan = checkOutOn(t, c, lib.Items[2][0], lib.Patrons[2], "2020-01-01T12:00:00.000Z")
	c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode", map[string]any{"itemBarcode": lib.Items[2][0], "userBarcode": lib.Patrons[2]}).
		Want(t, http.StatusOK)
	fees = accountsOf(t, c, patron(2))
	if len(fees) != 1 {
		t.Fatalf("an overdue loan renewed: %d fees/fines, want 1", len(fees))
	}
	wantCharge(t, c, fees[0], loan, lib.OverdueType, schemas.FeeFineOverdueFine, lib.Owner, "50.00")

	// shouldChargeItemAndProcessingFee (declared lost), then the item
	// returned (CheckInDeclaredLostItemTest): the lost item fee cancelled
	// what remains of it and refunded what was paid, the processing fee
	// cancelled as the policy says (returnedLostItemProcessingFee).
	loan = checkOutOn(t, c, lib.Items[3][0], lib.Patrons[3], "2026-01-01T12:00:00.000Z")
	c.Do(c.Circulations[0], "POST", fmt.Sprintf("/circulation/loans/%s/declare-item-lost", loan["id"]),
		map[string]any{"servicePointId": harness.ServicePoint, "declaredLostDateTime": "2026-01-10T12:00:00.000Z"}).Want(t, http.StatusNoContent)
	fees = accountsOf(t, c, patron(3))
	if len(fees) != 2 {
		t.Fatalf("declared lost: %d fees/fines, want the lost item fee and its processing fee", len(fees))
	}
	sort.Slice(fees, func(i, j int) bool { return fees[i].FeeFineType < fees[j].FeeFineType })
	var types struct {
		Feefines []struct{ ID, FeeFineType, OwnerID string }
	}
	c.Do(c.Storage, "GET", "/feefines?limit=100", nil).Want(t, http.StatusOK).Decode(t, &types)
	typeID := map[string]string{}
	for _, ft := range types.Feefines {
		if ft.OwnerID == "" {
			typeID[ft.FeeFineType] = ft.ID
		}
	}
	wantCharge(t, c, fees[0], loan, typeID[schemas.FeeFineLostItemFee], schemas.FeeFineLostItemFee, lib.Owner, "10.00")
	wantCharge(t, c, fees[1], loan, typeID[schemas.FeeFineLostItemProcessing], schemas.FeeFineLostItemProcessing, lib.Owner, "5.00")
	c.Do(c.Circulations[0], "POST", "/accounts/"+fees[0].ID+"/pay", map[string]any{"amount": "4.00", "paymentMethod": "Cash",
		"notifyPatron": false, "servicePointId": harness.ServicePoint, "userName": "Desk"}).Want(t, http.StatusCreated)
	checkInOn(t, c, lib.Items[3][0], harness.ServicePoint, "2026-01-20T12:00:00.000Z")
	fees = accountsOf(t, c, patron(3))
	sort.Slice(fees, func(i, j int) bool { return fees[i].FeeFineType < fees[j].FeeFineType })
	for _, f := range fees {
		if f.Remaining.String() != "0" && f.Remaining.String() != "0.00" || f.Status.Name != "Closed" {
			t.Fatalf("a lost item returned: %+v, want it closed", f)
		}
	}
	var got []string
	for _, a := range actionsOf(t, c, fees[0].ID) {
		got = append(got, a.TypeAction+" "+a.AmountAction.String())
	}
	if want := []string{"Cancelled item returned 6.00", "Lost item fee 10.00", "Paid partially 4.00", "Refunded fully 4.00"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the lost item fee's actions: %q, want %q", got, want)
	}
}
