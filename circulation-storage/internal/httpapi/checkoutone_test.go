package httpapi

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/checkoutlock/schemas"
)

// TestACheckOutInOneCall: POST /check-out-storage/check-outs reads the
// patron, the item and the policy the rules choose by their barcodes,
// writes the loan (due by the policy's period) with the item checked out,
// acquiring the lock it names and releasing it with the loan, and answers
// with the loan and what it read. Sent again with its write id it is
// answered with the loan alone, written once. What it cannot build a loan
// from, and what does not fit its schema, it refuses with nothing
// written.
func TestACheckOutInOneCall(t *testing.T) {
	t.Parallel()
	f := setup(t)
	group, mt, lt := f.newGroup("staff"), f.newMaterialType("book"), f.newLoanType("Can circulate")
	alice := f.newPatron("p-alice", group)
	item := f.newItem(itemDoc("i-one", mt, lt))
	policy := f.post("/loan-policy-storage/loan-policies", "loan-policy.json", map[string]any{"name": "two weeks", "loanable": true,
		"loansPolicy": map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": 2, "intervalId": "Weeks"}}})
	f.do("PUT", rulesPath, jsonBody(map[string]any{"fallbackLoanPolicyId": policy, "rules": []any{}})).wantStatus(http.StatusNoContent)

	servicePoint := f.post("/service-points", "service-point.json", map[string]any{"name": "Circ desk", "code": "cd1", "discoveryDisplayName": "Circ desk"})
	loanID, lockID, writeID := uuid.NewString(), uuid.NewString(), uuid.NewString()
	body := map[string]any{"id": loanID, "itemBarcode": "i-one", "userBarcode": "p-alice", "servicePointId": servicePoint,
		"loanDate": "2026-01-31T09:15:00.000Z"}
	send := func(body map[string]any, extra map[string]string) response {
		h := f.asUser(testUser)
		h[schemas.HeaderLockID], h[schemas.HeaderReleaseLock], h[schemas.HeaderAcquireLock] = lockID, "true", "ttlMs=3000"
		h[schemas.HeaderWriteID] = writeID
		for k, v := range extra {
			h[k] = v
		}
		return f.doWith("POST", "/check-out-storage/check-outs", jsonBody(body), h)
	}

	// Refused, nothing written: what does not fit, an override, an item
	// that does not exist.
	for _, bad := range []map[string]any{
		{"id": loanID, "itemBarcode": "i-one", "userBarcode": "p-alice", "loanDate": "2026-01-31T09:15:00.000Z"},
		{"id": "nope", "itemBarcode": "i-one", "userBarcode": "p-alice", "servicePointId": servicePoint, "loanDate": "2026-01-31T09:15:00.000Z"},
		{"id": loanID, "itemBarcode": "i-one", "userBarcode": "p-alice", "servicePointId": servicePoint, "loanDate": "soon"},
	} {
		send(bad, nil).wantError(http.StatusUnprocessableEntity, schemas.CodeValidation)
	}
	send(body, map[string]string{schemas.HeaderCheckOutOverride: "itemLimitBlock"}).wantError(http.StatusBadRequest, schemas.CodeInvalidHeader)
	missing := map[string]any{}
	for k, v := range body {
		missing[k] = v
	}
	missing["itemBarcode"] = "i-none"
	send(missing, nil).wantError(http.StatusUnprocessableEntity, schemas.CodeItemBarcodeNotFound)
	if n := f.countRows("loan", ""); n != 0 {
		t.Fatalf("%d loans written by refused check-outs", n)
	}

	res := send(body, nil).wantStatus(http.StatusCreated).wantSchema("check-out-storage-written.json")
	if res.header.Get(schemas.HeaderLockReleased) != "true" || res.header.Get(schemas.HeaderLockAcquired) == "" {
		t.Errorf("answer headers %v, want the lock acquired and released", res.header)
	}
	var written struct {
		Loan struct {
			ID, UserID, ItemID, DueDate, Action, LoanPolicyID, CheckoutServicePointID, PatronGroupIDAtCheckout string
		}
		User struct{ ID string }
		Item struct{ ID, Barcode string }
	}
	res.decode(&written)
	l := written.Loan
	if l.ID != loanID || l.UserID != alice || l.ItemID != item || l.DueDate != "2026-02-14T09:15:00.000Z" || l.Action != schemas.LoanCheckedOut ||
		l.LoanPolicyID != policy || l.CheckoutServicePointID != servicePoint || l.PatronGroupIDAtCheckout != group {
		t.Errorf("loan %+v, want %s's of %s, due in two weeks, by %s at %s", l, alice, item, policy, servicePoint)
	}
	if written.User.ID != alice || written.Item.ID != item || written.Item.Barcode != "i-one" {
		t.Errorf("answered user %+v and item %+v, want what the check-out read", written.User, written.Item)
	}
	if n := f.countRows("item", "id = $1 AND jsonb->'status'->>'name' = 'Checked out'", item); n != 1 {
		t.Errorf("the item is not checked out")
	}

	replay := send(body, nil).wantStatus(http.StatusCreated).wantSchema("check-out-storage-written.json")
	var again map[string]map[string]any
	replay.decode(&again)
	if replay.header.Get(schemas.HeaderWriteReplayed) != "true" || len(again) != 1 || again["loan"]["id"] != loanID {
		t.Errorf("sent again: headers %v, body %s; want the loan alone, replayed", replay.header, replay.body)
	}
	// Its lock went with the loan when it landed: the caller is told so,
	// and need not release it.
	if replay.header.Get(schemas.HeaderLockReleased) != "true" {
		t.Errorf("sent again: headers %v, want the lock said released", replay.header)
	}
	if n := f.countRows("loan", ""); n != 1 {
		t.Errorf("%d loans, want the one, written once", n)
	}
	if n := f.rows(alice); n != 0 {
		t.Errorf("%d locks of alice left, want none", n)
	}

	// Sent again with its write id after what it reads changed (here, a
	// barcode no patron has): still the loan it wrote, answered from its
	// id, not a refusal of a check-out that was made.
	changed := map[string]any{}
	for k, v := range body {
		changed[k] = v
	}
	changed["userBarcode"] = "p-nobody"
	replay = send(changed, nil).wantStatus(http.StatusCreated)
	replay.decode(&again)
	if replay.header.Get(schemas.HeaderWriteReplayed) != "true" || again["loan"]["id"] != loanID || replay.header.Get(schemas.HeaderLockReleased) != "true" {
		t.Errorf("sent again, its reads changed: headers %v, body %s; want the loan it wrote, replayed, its lock released", replay.header, replay.body)
	}

	// Sent again under a lock of its own, taken before (a second call of
	// the client's Idempotency-Key): answered from its id, and that lock
	// released.
	own := f.holdLock(alice)
	replay = send(body, map[string]string{schemas.HeaderLockID: own, schemas.HeaderAcquireLock: ""}).wantStatus(http.StatusCreated)
	if replay.header.Get(schemas.HeaderWriteReplayed) != "true" || replay.header.Get(schemas.HeaderLockReleased) != "true" {
		t.Errorf("sent again under a lock of its own: headers %v, want it replayed, its lock released", replay.header)
	}
	if n := f.rows(alice); n != 0 {
		t.Errorf("%d locks of alice left after the call sent again under its own, want none", n)
	}

	// A period that puts the due date past the year 9999 lends, due at
	// its last instant, as circulation's check-out does (schemas.DueDate).
	forever := f.post("/loan-policy-storage/loan-policies", "loan-policy.json", map[string]any{"name": "forever", "loanable": true,
		"loansPolicy": map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": 100000, "intervalId": "Months"}}})
	f.do("PUT", rulesPath, jsonBody(map[string]any{"fallbackLoanPolicyId": forever, "rules": []any{}})).wantStatus(http.StatusNoContent)
	f.newItem(itemDoc("i-two", mt, lt))
	writeID = uuid.NewString()
	far := map[string]any{"id": uuid.NewString(), "itemBarcode": "i-two", "userBarcode": "p-alice", "servicePointId": servicePoint,
		"loanDate": "2026-01-31T09:15:00.000Z"}
	var lent struct {
		Loan struct{ DueDate string }
	}
	send(far, nil).wantStatus(http.StatusCreated).decode(&lent)
	if lent.Loan.DueDate != "9999-12-31T23:59:59.999Z" {
		t.Errorf("a loan due past 9999 asked for: due %s, want 9999-12-31T23:59:59.999Z", lent.Loan.DueDate)
	}
	if n := f.countRows("loan", ""); n != 2 {
		t.Errorf("%d loans after a loan due past 9999 was asked for, want two", n)
	}
	if n := f.rows(alice); n != 0 {
		t.Errorf("%d locks of alice left after the check-out, want none", n)
	}
}
