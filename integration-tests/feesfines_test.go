package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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

// setUpFees is a library of patrons and items (each patron's set) that
// charges fees by the policies overdue and lost.
func setUpFees(t *testing.T, c *harness.Cluster, patrons, items int, overdue, lost map[string]any) feesLibrary {
	t.Helper()
	return chargeFees(t, c, c.SetupLibrary(patrons, items, 0), overdue, lost)
}

// chargeFees makes lib's loans charge fees by the policies overdue and
// lost, owned at harness.ServicePoint and payable in cash.
func chargeFees(t *testing.T, c *harness.Cluster, library harness.Library, overdue, lost map[string]any) feesLibrary {
	t.Helper()
	lib := feesLibrary{Library: library}
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
	lib := setUpFees(t, c, 9, 2, facultyStandard(), lostPolicy(10, 5))
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
	// Storage's action on it, its id in upper case: the same account.
	fine := strings.ToUpper(fees[0].ID)
	c.Do(c.Storage, "POST", "/fee-fine-storage/checks", map[string]any{"accountIds": []string{fine}, "action": "pay", "amount": "1.00"}).
		Want(t, http.StatusOK)
	var paid struct{ Amount, RemainingAmount string }
	c.Do(c.Storage, "POST", "/fee-fine-storage/actions", map[string]any{"accountIds": []string{fine}, "action": "pay", "amount": "1.00",
		"paymentMethod": "Cash", "servicePointId": harness.ServicePoint, "userName": "Desk"}).Want(t, http.StatusCreated).Decode(t, &paid)
	if fees = accountsOf(t, c, patron(0)); len(fees) != 1 || fees[0].Remaining.String() != "14.00" {
		t.Fatalf("the fine paid 1.00 by its id in upper case: %+v (answered %+v), want 14.00 remaining", fees, paid)
	}

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
	c.Do(c.Circulations[0], "POST", "/accounts/"+fees[0].ID+"/pay", payment("4.00")).Want(t, http.StatusCreated)
	// A librarian's replacement renaming the fee's feeFineType leaves it
	// the lost item fee it was charged as (its feeFineId).
	var renamed map[string]json.RawMessage
	c.Do(c.Storage, "GET", "/accounts/"+fees[0].ID, nil).Want(t, http.StatusOK).Decode(t, &renamed)
	renamed["feeFineType"] = json.RawMessage(`"Lost book"`)
	c.Do(c.Storage, "PUT", "/accounts/"+fees[0].ID, renamed).Want(t, http.StatusNoContent)
	// The patron's open fees/fines as mod-patron's patron account asks
	// for them: every match (limit 2147483647), by the status's name.
	openFees := func() int {
		t.Helper()
		var page struct {
			Accounts     []account
			TotalRecords int
		}
		q := url.QueryEscape("(userId==" + patron(3) + " and status.name==Open)")
		c.Do(c.Storage, "GET", "/accounts?limit=2147483647&query="+q, nil).Want(t, http.StatusOK).Decode(t, &page)
		if len(page.Accounts) != page.TotalRecords {
			t.Fatalf("mod-patron's open fees: %d listed of %d", len(page.Accounts), page.TotalRecords)
		}
		return page.TotalRecords
	}
	if n := openFees(); n != 2 {
		t.Fatalf("mod-patron's open fees before the lost item's return: %d, want the two", n)
	}
	checkInOn(t, c, lib.Items[3][0], harness.ServicePoint, "2026-01-20T12:00:00.000Z")
	if n := openFees(); n != 0 {
		t.Fatalf("mod-patron's open fees after the lost item's return: %d, want none", n)
	}
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

	// policy is a policy of its own; named makes the loan name it (as
	// FOLIO's loans name the policies they were made under).
	policy := func(path string, doc map[string]any) string {
		t.Helper()
		var p struct{ ID string }
		c.Do(c.Storage, "POST", path, doc).Want(t, http.StatusCreated).Decode(t, &p)
		return p.ID
	}
	named := func(loan map[string]any, field, id string) {
		t.Helper()
		var stored map[string]any
		c.Do(c.Storage, "GET", fmt.Sprint("/loan-storage/loans/", loan["id"]), nil).Want(t, http.StatusOK).Decode(t, &stored)
		stored[field] = id
		delete(stored, "metadata")
		c.Do(c.Storage, "PUT", fmt.Sprint("/loan-storage/loans/", loan["id"]), stored).Want(t, http.StatusNoContent)
	}

	// overdueFineCalculatedCorrectlyWhenHourlyFeeFinePolicyIsApplied, by
	// the policy the loan names: 1.00 an hour, for each hour begun of
	// 21.5 hours late (FOLIO's test expects 7.00 by its calendar).
	hourly := policy("/overdue-fines-policies", map[string]any{"name": "One per hour", "countClosed": true,
		"overdueFine": map[string]any{"quantity": 1.0, "intervalId": "hour"}, "maxOverdueFine": 50})
	loan = checkOutOn(t, c, lib.Items[4][0], lib.Patrons[4], "2020-01-01T12:00:00.000Z")
	named(loan, "overdueFinePolicyId", hourly)
	checkInOn(t, c, lib.Items[4][0], harness.ServicePoint, "2020-01-23T09:30:00.000Z")
	if fees := accountsOf(t, c, patron(4)); len(fees) != 1 || fees[0].Amount.String() != "22.00" {
		t.Fatalf("21.5 hours late at 1.00 an hour: %+v, want 22.00", fees)
	}

	// noOverdueFineShouldBeChargedForOverdueFinePolicyWithNoOverdueFine,
	// and overdueFineShouldNotBeChargedWhenShouldBeForgiven (a renewal).
	loan = checkOutOn(t, c, lib.Items[6][0], lib.Patrons[6], "2020-01-01T12:00:00.000Z")
	named(loan, "overdueFinePolicyId", policy("/overdue-fines-policies", map[string]any{"name": "No fine", "countClosed": true}))
	checkInOn(t, c, lib.Items[6][0], harness.ServicePoint, "2020-01-25T12:00:00.000Z")
	forgiving := facultyStandard()
	forgiving["name"], forgiving["forgiveOverdueFine"] = "Forgiving", true
	loan = checkOutOn(t, c, lib.Items[6][1], lib.Patrons[6], "2020-01-01T12:00:00.000Z")
	named(loan, "overdueFinePolicyId", policy("/overdue-fines-policies", forgiving))
	c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode", map[string]any{"itemBarcode": lib.Items[6][1], "userBarcode": lib.Patrons[6]}).
		Want(t, http.StatusOK)
	if fees := accountsOf(t, c, patron(6)); len(fees) != 0 {
		t.Fatalf("a policy with no overdue fine, and a renewal the policy forgives: %+v, want no fine", fees)
	}

	// shouldChargeItemFeeOnlyWhenNoProcessingFeeDefined and
	// shouldChargeProcessingFeeOnlyWhenNoItemCostDefined, by the policies
	// the loans name; a fee is rounded to the cent before it is judged
	// above 0 (0.004 is no fee at all, 5.004 charges 5.00).
	for p, fee := range map[int]struct {
		policy map[string]any
		want   string
	}{7: {lostPolicy(10, 0), schemas.FeeFineLostItemFee + " 10.00"}, 8: {lostPolicy(0.004, 5.004), schemas.FeeFineLostItemProcessing + " 5.00"}} {
		fee.policy["name"] = fmt.Sprint("Lost ", p)
		loan := checkOutOn(t, c, lib.Items[p][0], lib.Patrons[p], "2026-01-01T12:00:00.000Z")
		named(loan, "lostItemPolicyId", policy("/lost-item-fees-policies", fee.policy))
		c.Do(c.Circulations[0], "POST", fmt.Sprintf("/circulation/loans/%s/declare-item-lost", loan["id"]),
			map[string]any{"servicePointId": harness.ServicePoint}).Want(t, http.StatusNoContent)
		var got []string
		for _, a := range accountsOf(t, c, patron(p)) {
			got = append(got, a.FeeFineType+" "+a.Amount.String())
		}
		if len(got) != 1 || got[0] != fee.want {
			t.Fatalf("declared lost under %v: %v, want only %s", fee.policy, got, fee.want)
		}
	}

	// The loan policy's grace period: 23 hours late within a day's grace,
	// nothing; three days late, past it, every day counts.
	changePolicy(t, c, lib.Library, map[string]any{"loansPolicy": map[string]any{"profileId": "Rolling",
		"period": map[string]any{"duration": 3, "intervalId": "Weeks"}, "gracePeriod": map[string]any{"duration": 1, "intervalId": "Days"}}})
	checkOutOn(t, c, lib.Items[5][0], lib.Patrons[5], "2020-01-01T12:00:00.000Z")
	checkInOn(t, c, lib.Items[5][0], harness.ServicePoint, "2020-01-23T11:00:00.000Z")
	if fees := accountsOf(t, c, patron(5)); len(fees) != 0 {
		t.Fatalf("23 hours late within a day's grace: %+v, want no fine", fees)
	}
	checkOutOn(t, c, lib.Items[5][1], lib.Patrons[5], "2020-01-01T12:00:00.000Z")
	checkInOn(t, c, lib.Items[5][1], harness.ServicePoint, "2020-01-25T12:00:00.000Z")
	if fees := accountsOf(t, c, patron(5)); len(fees) != 1 || fees[0].Amount.String() != "15.00" {
		t.Fatalf("three days late past a day's grace: %+v, want 15.00", fees)
	}
	moneyHolds(t, c)
}

// moneyTypes are the typeActions that take from what remains of a
// fee/fine.
var moneyTypes = []string{schemas.ActionPay.Partial(), schemas.ActionPay.Full(), schemas.ActionWaive.Partial(), schemas.ActionWaive.Full(),
	schemas.ActionTransfer.Partial(), schemas.ActionTransfer.Full(), schemas.ActionCancel.Full(), schemas.PaymentStatusCancelledItemReturned}

// moneyHolds checks every fee/fine of the tenant in the database: what
// its actions took equals its amount less what remains, what remains is
// never below zero, it is open exactly while something remains, and it
// was charged once. It answers how many fees/fines it checked.
func moneyHolds(t *testing.T, c *harness.Cluster) int {
	t.Helper()
	accounts, actions := pgx.Identifier{c.Schema, "fee_fine_account"}.Sanitize(), pgx.Identifier{c.Schema, "fee_fine_action"}.Sanitize()
	types := pgx.Identifier{c.Schema, "fee_fine_type"}.Sanitize()
	rows, err := c.DB.Query(context.Background(), `
SELECT a.id::text, a.amount::text, a.remaining::text, a.status, coalesce(sum(x.amount_action) FILTER (WHERE x.type_action = ANY ($1)), 0)::text,
       count(*) FILTER (WHERE x.type_action = t.fee_fine_type AND x.amount_action = a.amount),
       a.amount - a.remaining = coalesce(sum(x.amount_action) FILTER (WHERE x.type_action = ANY ($1)), 0) AND a.remaining >= 0
         AND (a.status = 'Open') = (a.remaining > 0)
  FROM `+accounts+` a JOIN `+types+` t ON t.tenant_id = a.tenant_id AND t.id = a.fee_fine_id LEFT JOIN `+actions+` x ON x.account_id = a.id
 GROUP BY a.id, a.amount, a.remaining, a.status, t.fee_fine_type`, moneyTypes)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var id, amount, remaining, status, moved string
		var charges int
		var ok bool
		if err := rows.Scan(&id, &amount, &remaining, &status, &moved, &charges, &ok); err != nil {
			t.Fatal(err)
		}
		if !ok || charges != 1 {
			t.Errorf("fee/fine %s: amount %s, remaining %s, %s, actions took %s, charged %d times", id, amount, remaining, status, moved, charges)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// pay is a payment of amount of the fee/fine id through circulation
// instance i, with the Idempotency-Key key ("" for none).
func pay(c *harness.Cluster, i int, id, amount, key string) harness.Response {
	h := c.Headers()
	if key != "" {
		h[schemas.HeaderIdempotencyKey] = key
	}
	return c.DoWith(c.Circulations[i%len(c.Circulations)], "POST", "/accounts/"+id+"/pay", payment(amount), h)
}

// payment is the body of a cash payment of amount at the desk.
func payment(amount string) map[string]any {
	return map[string]any{"amount": amount, "paymentMethod": "Cash", "notifyPatron": false, "servicePointId": harness.ServicePoint, "userName": "Desk"}
}

// TestAFeeFineIsPaidOnceAndLiftsTheBlockAtOnce: a patron over their
// group's maximum outstanding fee/fine balance is refused a check-out in
// FOLIO's words; the same payment sent twenty times at once with one
// Idempotency-Key over two circulation instances pays once, every answer
// the first's; the balance under the maximum, the next check-out is
// allowed at once. Payments racing for what remains, each its own key,
// pay exactly what remained, the rest refused in mod-feesfines' words:
// never more than the amount, never a remaining below zero, round after
// round. What a payment is refused for changes nothing.
func TestAFeeFineIsPaidOnceAndLiftsTheBlockAtOnce(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	const rounds = 3
	lib := setUpFees(t, c, rounds, 3, facultyStandard(), lostPolicy(10, 5))
	blockWith(t, c, lib.Library, schemas.ConditionFeeFineBalance, "Patron has outstanding fees/fines", 10, true, false, false)
	for p := range rounds {
		checkOutOn(t, c, lib.Items[p][0], lib.Patrons[p], "2020-01-01T12:00:00.000Z")
		checkInOn(t, c, lib.Items[p][0], harness.ServicePoint, "2020-01-25T12:00:00.000Z")
	}
	patron := c.IDOf(t, "/users", "users", lib.Patrons[0])
	fine := accountsOf(t, c, patron)[0]

	// Blocked: 15.00 owed, at most 10.00 allowed.
	r := c.CheckOut(0, lib.Items[0][1], lib.Patrons[0])
	wantCode(t, r, http.StatusUnprocessableEntity, schemas.CodeUserBlockedAutomatically)
	if !strings.Contains(string(r.Body), "Patron has outstanding fees/fines") {
		t.Fatalf("blocked by the balance: %s, want the condition's message", r.Body)
	}

	// Refusals change nothing: too much, a method the owner does not
	// take, three decimal places, a replacement moving money.
	for _, bad := range []struct{ amount, method, code string }{{"15.01", "Cash", schemas.CodeFeeFineAmountExceeded},
		{"1.00", "Bitcoin", schemas.CodePaymentMethodUnknown}, {"1.001", "Cash", schemas.CodeFeeFineAmountInvalid},
		{"0", "Cash", schemas.CodeFeeFineAmountInvalid}} {
		r := c.Do(c.Circulations[0], "POST", "/accounts/"+fine.ID+"/pay", map[string]any{"amount": bad.amount, "paymentMethod": bad.method,
			"notifyPatron": false, "servicePointId": harness.ServicePoint, "userName": "Desk"})
		wantCode(t, r, http.StatusUnprocessableEntity, bad.code)
		var failure struct{ AccountID, Amount, ErrorMessage string }
		r.Decode(t, &failure)
		if failure.AccountID != fine.ID || failure.Amount != bad.amount || failure.ErrorMessage == "" {
			t.Fatalf("pay %s by %s: %s, want mod-feesfines' actionFailureResponse", bad.amount, bad.method, r.Body)
		}
	}
	var check struct {
		Allowed         bool
		RemainingAmount string
		ErrorMessage    string
	}
	c.Do(c.Circulations[1], "POST", "/accounts/"+fine.ID+"/check-pay", map[string]any{"amount": "6"}).Want(t, http.StatusOK).Decode(t, &check)
	if !check.Allowed || check.RemainingAmount != "9.00" {
		t.Fatalf("check-pay 6: %+v, want allowed, 9.00 remaining", check)
	}
	c.Do(c.Circulations[1], "POST", "/accounts/"+fine.ID+"/check-pay", map[string]any{"amount": "16"}).Want(t, http.StatusUnprocessableEntity).Decode(t, &check)
	if check.Allowed || check.ErrorMessage != "Requested amount exceeds remaining amount" {
		t.Fatalf("check-pay 16: %+v, want refused in mod-feesfines' words", check)
	}
	doc := map[string]any{"id": fine.ID, "userId": fine.UserID, "feeFineId": fine.FeeFineID, "ownerId": fine.OwnerID, "loanId": fine.LoanID,
		"amount": 15, "remaining": 0, "status": map[string]string{"name": "Closed"}, "paymentStatus": map[string]string{"name": "Paid fully"}}
	wantCode(t, c.Do(c.Storage, "PUT", "/accounts/"+fine.ID, doc), http.StatusUnprocessableEntity, schemas.CodeValidation)
	c.Do(c.Storage, "POST", "/feefineactions", map[string]any{"accountId": fine.ID, "userId": fine.UserID}).Want(t, http.StatusMethodNotAllowed)
	if got := accountsOf(t, c, patron)[0]; got.Remaining.String() != "15.00" || got.Version != 1 || len(actionsOf(t, c, fine.ID)) != 1 {
		t.Fatalf("after refusals: %+v, want the fee/fine as charged", got)
	}

	// Twenty at once, one key, two instances: one payment.
	answers := make([]harness.Response, 20)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() { defer wg.Done(); answers[i] = pay(c, i, fine.ID, "6.00", "kiosk-7-payment-0001") }()
	}
	wg.Wait()
	for i, a := range answers {
		a.Want(t, http.StatusCreated)
		if string(a.Body) != string(answers[0].Body) {
			t.Fatalf("answer %d: %s, want the first's %s", i, a.Body, answers[0].Body)
		}
	}
	if got := accountsOf(t, c, patron)[0]; got.Remaining.String() != "9.00" || got.PaymentStatus.Name != "Paid partially" || len(actionsOf(t, c, fine.ID)) != 2 {
		t.Fatalf("one payment of 6.00 sent 20 times: %+v with %d actions, want 9.00 remaining and one payment", got, len(actionsOf(t, c, fine.ID)))
	}
	// The key again with another amount: refused as the key reused,
	// nothing paid.
	wantCode(t, pay(c, 1, fine.ID, "1.00", "kiosk-7-payment-0001"), http.StatusUnprocessableEntity, schemas.CodeIdempotencyKeyReused)
	if got := accountsOf(t, c, patron)[0]; got.Remaining.String() != "9.00" || len(actionsOf(t, c, fine.ID)) != 2 {
		t.Fatalf("the key reused: %+v with %d actions, want 9.00 remaining and one payment", got, len(actionsOf(t, c, fine.ID)))
	}
	// Under the maximum now: the next check-out is allowed at once.
	c.CheckOut(1, lib.Items[0][1], lib.Patrons[0]).Want(t, http.StatusCreated)

	// Payments racing, each its own key: exactly what remained is paid.
	for p := range rounds {
		fine := accountsOf(t, c, c.IDOf(t, "/users", "users", lib.Patrons[p]))[0]
		remaining := 15
		if p == 0 {
			remaining = 9
		}
		answers := make([]harness.Response, remaining+4)
		for i := range answers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = pay(c, i, fine.ID, "1", fmt.Sprintf("round-%d-payment-%d", p, i))
			}()
		}
		wg.Wait()
		paid, refused := 0, 0
		for _, a := range answers {
			switch codes := a.ErrorCodes(); {
			case a.Status == http.StatusCreated:
				paid++
			case a.Status == http.StatusUnprocessableEntity && (slices.Equal(codes, []string{schemas.CodeFeeFineAmountExceeded}) ||
				slices.Equal(codes, []string{schemas.CodeFeeFineClosed})):
				refused++
			default:
				t.Fatalf("round %d: a payment answered %d %s", p, a.Status, a.Body)
			}
		}
		got := accountsOf(t, c, fine.UserID)[0]
		if paid != remaining || refused != 4 || got.Remaining.String() != "0.00" || got.Status.Name != "Closed" || got.PaymentStatus.Name != "Paid fully" {
			t.Fatalf("round %d: %d paid, %d refused, %+v; want %d paid, 4 refused, closed", p, paid, refused, got, remaining)
		}
		// Closed: paid or waived again, it is refused as closed, not as
		// more than remains.
		wantCode(t, pay(c, p, fine.ID, "1", ""), http.StatusUnprocessableEntity, schemas.CodeFeeFineClosed)
		wantCode(t, c.Do(c.Circulations[0], "POST", "/accounts/"+fine.ID+"/waive", map[string]any{"amount": "1", "paymentMethod": "Librarian's discretion",
			"notifyPatron": false, "servicePointId": harness.ServicePoint, "userName": "Desk"}), http.StatusUnprocessableEntity, schemas.CodeFeeFineClosed)
	}
	if n := moneyHolds(t, c); n != rounds {
		t.Fatalf("checked %d fees/fines, want %d", n, rounds)
	}
}

// TestSignInAccountsMovedAnswerTheOldPath: FOLIO's fees/fines took
// /accounts, where sign-in accounts were kept; for one release a call
// about a sign-in account made there (created or replaced naming a
// username, listed by username, read or deleted by a sign-in account's
// id) is answered 308 to the same call at /sign-in-accounts, marked
// deprecated, and a client that follows it is served there; a call about
// a fee/fine is the fee/fine's.
func TestSignInAccountsMovedAnswerTheOldPath(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	lib := setUpFees(t, c, 1, 2, facultyStandard(), lostPolicy(10, 5))
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	send := func(client *http.Client, method, path, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, c.Storage.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range c.Headers() {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		return res, data
	}
	raw := func(method, path, body string) (int, string, string) {
		t.Helper()
		res, _ := send(noFollow, method, path, body)
		return res.StatusCode, res.Header.Get("Location"), res.Header.Get("Deprecation")
	}
	for _, call := range []struct{ method, path, body, to string }{
		{"POST", "/accounts", `{"username":"ada","roles":["circulation.role.librarian"]}`, "/sign-in-accounts"},
		{"GET", "/accounts?username=ada", "", "/sign-in-accounts?username=ada"},
		{"GET", "/accounts?query=username%3D%3Dada", "", "/sign-in-accounts?query=username%3D%3Dada"},
	} {
		if status, to, deprecated := raw(call.method, call.path, call.body); status != http.StatusPermanentRedirect || to != call.to || deprecated != "true" {
			t.Errorf("%s %s: %d to %q (deprecated %q), want 308 to %s", call.method, call.path, status, to, deprecated, call.to)
		}
	}
	// Followed, as a client does: the account is made where it lives now.
	var ada struct{ ID string }
	res, data := send(http.DefaultClient, "POST", "/accounts", `{"username":"ada","roles":["`+schemas.RoleLibrarian+`"]}`)
	if res.StatusCode != http.StatusCreated || json.Unmarshal(data, &ada) != nil || res.Request.URL.Path != "/sign-in-accounts" {
		t.Fatalf("POST /accounts of a sign-in account, followed: %d at %s %s", res.StatusCode, res.Request.URL.Path, data)
	}
	c.Do(c.Storage, "GET", "/sign-in-accounts/"+ada.ID, nil).Want(t, http.StatusOK)
	if status, to, _ := raw("GET", "/accounts/"+ada.ID, ""); status != http.StatusPermanentRedirect || to != "/sign-in-accounts/"+ada.ID {
		t.Errorf("GET /accounts/{a sign-in account}: %d to %q", status, to)
	}
	// A fee/fine's calls are its own.
	checkOutOn(t, c, lib.Items[0][0], lib.Patrons[0], "2020-01-01T12:00:00.000Z")
	checkInOn(t, c, lib.Items[0][0], harness.ServicePoint, "2020-01-25T12:00:00.000Z")
	fine := accountsOf(t, c, c.IDOf(t, "/users", "users", lib.Patrons[0]))[0]
	if status, _, _ := raw("GET", "/accounts/"+fine.ID, ""); status != http.StatusOK {
		t.Errorf("GET /accounts/{a fee/fine}: %d, want 200", status)
	}
	if status, _, _ := raw("GET", "/accounts/"+uuid.NewString(), ""); status != http.StatusNotFound {
		t.Errorf("GET /accounts/{nothing}: %d, want 404", status)
	}
}

// TestAKioskPaysEveryOpenFee: a kiosk's payment (POST
// /circulation/patron-fees/pay, SIP2's 37) takes every open fee/fine of
// the patron's, however many, as the balance the kiosk was told counts
// them, beyond the first storage.PatronSummaryFeesFines a summary lists:
// a part of it pays the oldest first; the newest, named, is paid alone;
// then the whole balance of 51 fees/fines is paid as one action. A
// barcode no patron has is refused as such. Another patron's fee/fine
// named is refused as none of this patron's and left as it was; once
// nothing is open, a payment is refused as owing nothing. Kiosks racing,
// each payment its own, pay each fee/fine once.
func TestAKioskPaysEveryOpenFee(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := setUpFees(t, c, 2, 1, facultyStandard(), lostPolicy(10, 5))
	patron, other := c.IDOf(t, "/users", "users", lib.Patrons[0]), c.IDOf(t, "/users", "users", lib.Patrons[1])
	charge := func(user string) string {
		t.Helper()
		var out struct{ ID string }
		c.Do(c.Storage, "POST", "/accounts", map[string]any{"amount": 1, "remaining": 1, "status": map[string]string{"name": schemas.FeeFineOpen},
			"paymentStatus": map[string]string{"name": schemas.PaymentStatusOutstanding}, "userId": user, "feeFineId": lib.OverdueType,
			"feeFineType": schemas.FeeFineOverdueFine, "ownerId": lib.Owner}).Want(t, http.StatusCreated).Decode(t, &out)
		return out.ID
	}
	const fees = 53
	for range fees {
		charge(patron)
	}
	theirs := charge(other)
	charged := accountsOf(t, c, patron)
	if len(charged) != fees {
		t.Fatalf("charged %d fees/fines, want %d", len(charged), fees)
	}
	payAtKiosk := func(barcode, amount, feeFineID string) harness.Response {
		body := map[string]any{"userBarcode": barcode, "amount": amount, "paymentMethod": "Cash", "servicePointId": harness.ServicePoint}
		if feeFineID != "" {
			body["feeFineId"] = feeFineID
		}
		return c.Do(c.Circulations[0], "POST", "/circulation/patron-fees/pay", body)
	}
	var paid struct {
		AccountID, Amount, RemainingAmount string
		Feefineactions                     []action
	}
	stands := func(i int, remaining, status string) {
		t.Helper()
		for _, f := range accountsOf(t, c, patron) {
			if f.ID == charged[i].ID && (f.Remaining.String() != remaining || f.PaymentStatus.Name != status) {
				t.Fatalf("fee/fine %d of %d: %s remaining, %s; want %s, %s", i+1, fees, f.Remaining, f.PaymentStatus.Name, remaining, status)
			}
		}
	}

	// No patron of that barcode: refused as such, nothing paid.
	wantCode(t, payAtKiosk("no-such-patron", "1.00", ""), http.StatusNotFound, schemas.CodeUserBarcodeNotFound)
	stands(0, "1", schemas.PaymentStatusOutstanding)

	// 1.50 of 53.00: the oldest paid fully, the next in part.
	payAtKiosk(lib.Patrons[0], "1.50", "").Want(t, http.StatusCreated).Decode(t, &paid)
	if paid.AccountID != charged[0].ID || paid.Amount != "1.50" || paid.RemainingAmount != "51.50" || len(paid.Feefineactions) != 2 {
		t.Fatalf("1.50 of the balance: %+v, want the oldest two paid, 51.50 remaining", paid)
	}
	stands(0, "0", schemas.ActionPay.Full())
	stands(1, "0.50", schemas.ActionPay.Partial())
	stands(2, "1", schemas.PaymentStatusOutstanding)
	// The newest, 52nd of the 52 open, named: paid alone.
	newest := charged[fees-1].ID
	payAtKiosk(lib.Patrons[0], "1.00", newest).Want(t, http.StatusCreated).Decode(t, &paid)
	if paid.AccountID != newest || paid.Amount != "1.00" || paid.RemainingAmount != "0.00" || len(paid.Feefineactions) != 1 {
		t.Fatalf("the newest fee/fine paid by name: %+v", paid)
	}
	wantCode(t, payAtKiosk(lib.Patrons[0], "1.00", theirs), http.StatusUnprocessableEntity, schemas.CodeFeeFineClosed)
	// The balance of the 51 open: paid, every one.
	payAtKiosk(lib.Patrons[0], "50.50", "").Want(t, http.StatusCreated).Decode(t, &paid)
	if paid.AccountID != charged[1].ID || paid.Amount != "50.50" || paid.RemainingAmount != "0.00" || len(paid.Feefineactions) != fees-2 {
		t.Fatalf("the balance of %d fees/fines paid: %s, %s remaining, %d actions, first %s; want 50.50, 0.00, %d, %s",
			fees-2, paid.Amount, paid.RemainingAmount, len(paid.Feefineactions), paid.AccountID, fees-2, charged[1].ID)
	}
	for _, f := range accountsOf(t, c, patron) {
		if f.Status.Name != schemas.FeeFineClosed || f.PaymentStatus.Name != schemas.ActionPay.Full() {
			t.Fatalf("after paying the balance: %+v, want every fee/fine paid fully", f)
		}
	}
	wantCode(t, payAtKiosk(lib.Patrons[0], "1.00", ""), http.StatusUnprocessableEntity, schemas.CodeFeeFineClosed)
	if got := accountsOf(t, c, other)[0]; got.ID != theirs || got.Remaining.String() != "1" || got.Version != 1 {
		t.Fatalf("the other patron's fee/fine: %+v, want it as charged", got)
	}
	if n := moneyHolds(t, c); n != fees+1 {
		t.Fatalf("checked %d fees/fines, want %d", n, fees+1)
	}

	// Kiosks racing, each payment its own: four fees/fines of 1.00, eight
	// payments of 1.00 at once, round after round. Each fee/fine is paid
	// once, by one of four payments; the other four are told the patron
	// owes nothing.
	for round := range 3 {
		racing := map[string]bool{}
		for range 4 {
			racing[charge(patron)] = true
		}
		answers := make([]harness.Response, 8)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Add(1)
			go func() { defer wg.Done(); answers[i] = payAtKiosk(lib.Patrons[0], "1.00", "") }()
		}
		wg.Wait()
		created := 0
		for _, a := range answers {
			if a.Status == http.StatusCreated {
				created++
				continue
			}
			wantCode(t, a, http.StatusUnprocessableEntity, schemas.CodeFeeFineClosed)
		}
		for id := range racing {
			var pays []action
			for _, a := range actionsOf(t, c, id) {
				if a.TypeAction != schemas.FeeFineOverdueFine {
					pays = append(pays, a)
				}
			}
			if len(pays) != 1 || pays[0].AmountAction.String() != "1" || pays[0].Balance.String() != "0" {
				t.Fatalf("round %d, fee/fine %s: paid by %+v, want one payment of 1.00", round, id, pays)
			}
		}
		if created != len(racing) {
			t.Fatalf("round %d: %d of %d payments of 1.00 taken for %d fees/fines of 1.00", round, created, len(answers), len(racing))
		}
	}
}

// TestAutomaticFeeFineTypesAreKept: FOLIO's four automatic fee/fine
// types, which every tenant has, are neither created again, changed nor
// removed through the API, as mod-feesfines' own test
// (FeeFinesAPITest.cannotChangeAutomaticFeeFineType) asks, with its
// request bodies: each POST, PUT and DELETE is 422 "Attempt to change an
// automatic fee/fine type", and the type is as it was. The tenant has
// exactly these four (schemas.AutomaticFeeFineTypes is what migration 34
// gives it); a type of the library's own is changed and removed as ever.
// A default amount may be sent as a decimal in a string, as those bodies
// and FOLIO's settings page send it.
func TestAutomaticFeeFineTypesAreKept(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := setUpFees(t, c, 1, 1, facultyStandard(), lostPolicy(10, 5))
	var seeded []string
	if err := c.DB.QueryRow(context.Background(), `SELECT coalesce(array_agg(t.id::text ORDER BY t.id), '{}')
		FROM `+pgx.Identifier{c.Schema, "fee_fine_type"}.Sanitize()+` t WHERE t.tenant_id = $1 AND t.automatic AND t.owner_id IS NULL`, c.Tenant).Scan(&seeded); err != nil {
		t.Fatal(err)
	}
	if want := slices.Sorted(slices.Values(schemas.AutomaticFeeFineTypes)); !slices.Equal(seeded, want) {
		t.Fatalf("the tenant's automatic fee/fine types %v, want %v", seeded, want)
	}
	folio := func(id, name string) map[string]any {
		return map[string]any{"id": id, "automatic": false, "feeFineType": name, "defaultAmount": "1.00",
			"chargeNoticeId": uuid.NewString(), "actionNoticeId": uuid.NewString(), "ownerId": uuid.NewString()}
	}
	refused := func(res harness.Response, what string) {
		t.Helper()
		var body struct {
			Errors []struct{ Message string }
		}
		res.Want(t, http.StatusUnprocessableEntity).Decode(t, &body)
		if len(body.Errors) == 0 || body.Errors[0].Message != schemas.AutomaticFeeFineTypeKept {
			t.Errorf("%s: %+v, want %q", what, body, schemas.AutomaticFeeFineTypeKept)
		}
	}
	for _, id := range schemas.AutomaticFeeFineTypes {
		var before, after json.RawMessage
		c.Do(c.Storage, "GET", "/feefines/"+id, nil).Want(t, http.StatusOK).Decode(t, &before)
		refused(c.Do(c.Storage, "POST", "/feefines", folio(id, "type")), "POST "+id)
		refused(c.Do(c.Storage, "PUT", "/feefines/"+id, folio(id, "type")), "PUT "+id)
		refused(c.Do(c.Storage, "PUT", "/feefines/"+strings.ToUpper(id), folio(strings.ToUpper(id), "type")), "PUT "+strings.ToUpper(id))
		refused(c.Do(c.Storage, "DELETE", "/feefines/"+id, nil), "DELETE "+id)
		refused(c.Do(c.Storage, "DELETE", "/feefines/"+strings.ToUpper(id), nil), "DELETE "+strings.ToUpper(id))
		c.Do(c.Storage, "GET", "/feefines/"+id, nil).Want(t, http.StatusOK).Decode(t, &after)
		var kept struct {
			ID        string
			Automatic bool
		}
		if err := json.Unmarshal(after, &kept); err != nil || kept.ID != id || !kept.Automatic || string(after) != string(before) {
			t.Errorf("fee/fine type %s after the writes: %s, want as before: %s", id, after, before)
		}
	}
	// A default amount in a string, as FOLIO's settings page sends it, is
	// taken and kept as sent; one that is no amount of two places is not.
	var damage map[string]any
	c.Do(c.Storage, "POST", "/feefines", map[string]any{"feeFineType": "Damaged book", "automatic": false, "ownerId": lib.Owner,
		"defaultAmount": "5.00"}).Want(t, http.StatusCreated).Decode(t, &damage)
	if damage["defaultAmount"] != "5.00" {
		t.Errorf("a fee/fine type of defaultAmount \"5.00\": %v", damage)
	}
	for _, bad := range []any{"5.005", "five", "-1", -1, "", "123456789"} {
		wantCode(t, c.Do(c.Storage, "POST", "/feefines", map[string]any{"feeFineType": fmt.Sprintf("Damaged %v", bad), "automatic": false,
			"ownerId": lib.Owner, "defaultAmount": bad}), http.StatusUnprocessableEntity, schemas.CodeValidation)
	}
	// The library's own automatic type is its own to change and remove.
	own := map[string]any{"id": lib.OverdueType, "feeFineType": schemas.FeeFineOverdueFine, "automatic": true, "ownerId": lib.Owner,
		"defaultAmount": "2.00"}
	c.Do(c.Storage, "PUT", "/feefines/"+lib.OverdueType, own).Want(t, http.StatusNoContent)
	c.Do(c.Storage, "DELETE", "/feefines/"+lib.OverdueType, nil).Want(t, http.StatusNoContent)
}

// TestAChargeIsNamedByItsType: a fee/fine's charge is named by the
// fee/fine type its feeFineId names, not by the free text of its
// feeFineType: an account written without one (FOLIO's schema does not
// ask for it) is charged as its type; one whose feeFineType reads "Paid
// fully" is charged as its type too, so nothing of it counts as paid and
// a refund of money never paid is refused. No fee/fine type may be named
// as an action writes.
func TestAChargeIsNamedByItsType(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := setUpFees(t, c, 1, 1, facultyStandard(), lostPolicy(10, 5))
	patron := c.IDOf(t, "/users", "users", lib.Patrons[0])
	for _, name := range schemas.ActionWords() {
		wantCode(t, c.Do(c.Storage, "POST", "/feefines", map[string]any{"feeFineType": name, "automatic": false, "ownerId": lib.Owner}),
			http.StatusUnprocessableEntity, schemas.CodeValidation)
	}
	charge := func(feeFineType any) string {
		t.Helper()
		doc := map[string]any{"amount": 5, "remaining": 5, "status": map[string]string{"name": schemas.FeeFineOpen},
			"paymentStatus": map[string]string{"name": schemas.PaymentStatusOutstanding}, "userId": patron, "feeFineId": lib.OverdueType,
			"ownerId": lib.Owner}
		if feeFineType != nil {
			doc["feeFineType"] = feeFineType
		}
		var out struct{ ID string }
		c.Do(c.Storage, "POST", "/accounts", doc).Want(t, http.StatusCreated).Decode(t, &out)
		return out.ID
	}
	for _, feeFineType := range []any{nil, schemas.ActionPay.Full()} {
		id := charge(feeFineType)
		acts := actionsOf(t, c, id)
		if len(acts) != 1 || acts[0].TypeAction != schemas.FeeFineOverdueFine || acts[0].AmountAction.String() != "5" {
			t.Fatalf("an account of feeFineType %v: actions %+v, want one charge named %q", feeFineType, acts, schemas.FeeFineOverdueFine)
		}
		refund := map[string]any{"amount": "1.00", "paymentMethod": "Cash", "notifyPatron": false, "servicePointId": harness.ServicePoint,
			"userName": "Desk"}
		wantCode(t, c.Do(c.Circulations[0], "POST", "/accounts/"+id+"/refund", refund), http.StatusUnprocessableEntity,
			schemas.CodeFeeFineAmountExceeded)
		if acts := actionsOf(t, c, id); len(acts) != 1 {
			t.Fatalf("a refund of nothing paid refused: actions %+v, want the charge alone", acts)
		}
	}
	if n := moneyHolds(t, c); n != 2 {
		t.Fatalf("checked %d fees/fines, want 2", n)
	}
}
