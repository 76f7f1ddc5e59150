package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// Every write knows itself, across the real binaries: whether a write
// landed is asked of its own id, never guessed from what is read back, and
// a call sent again with its Idempotency-Key is the same call.

// writeKind is one kind of write through circulation, made on a record of
// its own: its call, the storage request that makes its write (what the
// proxy loses), its answer when done, and how much it moved the record it
// writes (written once: one version on, or one request more).
type writeKind struct {
	name string
	// storage is how the write's request to storage starts (one of).
	storage []string
	ok      int
	// prepare makes the record the write is made on and answers the call
	// and what reads the record's version.
	prepare func(t *testing.T) (method, path string, body map[string]any, version func() int)
}

// itemsPerWriteKinds is how many of the library's items one use of
// writeKinds takes.
const itemsPerWriteKinds = 12

// writeKinds are the writes of loans, items, requests and fees/fines
// circulation makes, each on the i-th item of lib's second patron's set
// (the first patron borrows them; the second requests them).
func writeKinds(t *testing.T, c *harness.Cluster, lib harness.Library, librarian map[string]string) []writeKind {
	borrower, requester := lib.Patrons[0], lib.Patrons[1]
	borrowerID, requesterID := patronID(t, c, borrower), patronID(t, c, requester)
	next := 0
	item := func(t *testing.T) (barcode, id string) {
		if next == len(lib.Items[1]) {
			t.Fatalf("the write kinds took all %d items: raise itemsPerWriteKinds", next)
		}
		barcode = lib.Items[1][next]
		next++
		return barcode, c.IDOf(t, "/item-storage/items", "items", barcode)
	}
	lent := func(t *testing.T) (barcode, itemID, loanID string) {
		barcode, itemID = item(t)
		c.CheckOut(0, barcode, borrower).Want(t, http.StatusCreated)
		return barcode, itemID, openLoanID(t, c, barcode)
	}
	version := func(table, id string) func() int {
		return func() int {
			var v int
			if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT version FROM %s.%s WHERE id = $1::uuid`, c.Schema, table), id).Scan(&v); err != nil {
				t.Fatalf("version of %s %s: %v", table, id, err)
			}
			return v
		}
	}
	hold := func(t *testing.T, itemID string) map[string]any {
		return map[string]any{"requestType": schemas.RequestTypeHold, "requestDate": "2026-03-01T10:00:00.000Z", "requesterId": requesterID,
			"itemId": itemID, "fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint}
	}
	placed := func(t *testing.T, itemID string) map[string]any {
		var r map[string]any
		c.DoWith(c.Circulations[0], "POST", "/circulation/requests", hold(t, itemID), librarian).Want(t, http.StatusCreated).Decode(t, &r)
		return r
	}
	return []writeKind{
		{"check-out", harness.CheckOutWrite, http.StatusCreated, func(t *testing.T) (string, string, map[string]any, func() int) {
			barcode, itemID := item(t)
			return "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": barcode, "userBarcode": borrower,
				"servicePointId": harness.ServicePoint}, version("item", itemID)
		}},
		{"check-in", []string{"PUT /loan-storage/loans/"}, http.StatusOK, func(t *testing.T) (string, string, map[string]any, func() int) {
			barcode, _, loanID := lent(t)
			return "POST", "/circulation/check-in-by-barcode", map[string]any{"itemBarcode": barcode, "servicePointId": harness.ServicePoint},
				version("loan", loanID)
		}},
		{"renewal", []string{"PUT /loan-storage/loans/"}, http.StatusOK, func(t *testing.T) (string, string, map[string]any, func() int) {
			barcode, _, loanID := lent(t)
			return "POST", "/circulation/renew-by-barcode", map[string]any{"itemBarcode": barcode, "userBarcode": borrower},
				version("loan", loanID)
		}},
		{"claim returned", []string{"PUT /loan-storage/loans/"}, http.StatusNoContent, func(t *testing.T) (string, string, map[string]any, func() int) {
			_, _, loanID := lent(t)
			return "POST", "/circulation/loans/" + loanID + "/claim-item-returned",
				map[string]any{"itemClaimedReturnedDateTime": "2026-03-05T12:00:00.000Z", "comment": "in the book drop"}, version("loan", loanID)
		}},
		{"declare lost", []string{"PUT /loan-storage/loans/"}, http.StatusNoContent, func(t *testing.T) (string, string, map[string]any, func() int) {
			_, _, loanID := lent(t)
			return "POST", "/circulation/loans/" + loanID + "/declare-item-lost", map[string]any{"servicePointId": harness.ServicePoint},
				version("loan", loanID)
		}},
		{"request placed", []string{"POST /request-storage/requests"}, http.StatusCreated, func(t *testing.T) (string, string, map[string]any, func() int) {
			_, itemID, _ := lent(t)
			requests := func() int {
				var n int
				if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s.request WHERE item_id = $1::uuid`, c.Schema), itemID).
					Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			return "POST", "/circulation/requests", hold(t, itemID), requests
		}},
		{"request cancelled", []string{"PUT /request-storage/requests/"}, http.StatusNoContent, func(t *testing.T) (string, string, map[string]any, func() int) {
			_, itemID, _ := lent(t)
			r := placed(t, itemID)
			r["status"], r["cancellationReasonId"] = schemas.RequestCancelled, uuid.NewString()
			delete(r, "metadata")
			return "PUT", "/circulation/requests/" + r["id"].(string), r, version("request", r["id"].(string))
		}},
		{"request cancelled without _version", []string{"PUT /request-storage/requests/"}, http.StatusNoContent, func(t *testing.T) (string, string, map[string]any, func() int) {
			// As FOLIO's clients send it: applied to the request as
			// stored, in the call's write id.
			_, itemID, _ := lent(t)
			r := placed(t, itemID)
			r["status"], r["cancellationReasonId"] = schemas.RequestCancelled, uuid.NewString()
			delete(r, "metadata")
			delete(r, "_version")
			return "PUT", "/circulation/requests/" + r["id"].(string), r, version("request", r["id"].(string))
		}},
		{"request moved", []string{"PUT /request-storage/requests/"}, http.StatusOK, func(t *testing.T) (string, string, map[string]any, func() int) {
			_, from, _ := lent(t)
			_, to, _ := lent(t)
			r := placed(t, from)
			return "POST", "/circulation/requests/" + r["id"].(string) + "/move", map[string]any{"destinationItemId": to},
				version("request", r["id"].(string))
		}},
		{"fee/fine paid", []string{"POST /fee-fine-storage/actions"}, http.StatusCreated, func(t *testing.T) (string, string, map[string]any, func() int) {
			_, _, loanID := lent(t)
			c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+loanID+"/declare-item-lost", map[string]any{"servicePointId": harness.ServicePoint},
				librarian).Want(t, http.StatusNoContent)
			for _, a := range accountsOf(t, c, borrowerID) {
				if a.LoanID == loanID && a.FeeFineType == schemas.FeeFineLostItemFee {
					return "POST", "/accounts/" + a.ID + "/pay", payment("4.00"), version("fee_fine_account", a.ID)
				}
			}
			t.Fatalf("declared lost: no lost item fee charged for loan %s", loanID)
			return "", "", nil, nil
		}},
		// A kiosk's payment of the patron's balance names no fee/fine:
		// storage finds them in the write, the oldest first.
		{"fees/fines paid at a kiosk", []string{"POST /fee-fine-storage/actions"}, http.StatusCreated, func(t *testing.T) (string, string, map[string]any, func() int) {
			_, _, loanID := lent(t)
			c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+loanID+"/declare-item-lost", map[string]any{"servicePointId": harness.ServicePoint},
				librarian).Want(t, http.StatusNoContent)
			for _, a := range accountsOf(t, c, borrowerID) {
				if a.Status.Name == schemas.FeeFineOpen {
					return "POST", "/circulation/patron-fees/pay", map[string]any{"userBarcode": borrower, "amount": "1.00", "paymentMethod": "Cash",
						"servicePointId": harness.ServicePoint}, version("fee_fine_account", a.ID)
				}
			}
			t.Fatalf("declared lost: no open fee/fine of %s", borrower)
			return "", "", nil, nil
		}},
	}
}

// TestEveryWriteKnowsItself: each kind of write through circulation, its
// request to storage lost on the way (storage never saw it), its answer
// lost after storage wrote it, and its answer lost with the same call
// sent twice at once with one Idempotency-Key. Each call is answered done,
// exactly as the write did it; the record it writes moved on one version:
// written once. Nothing is read back to guess: the write sent again with
// its id is answered from the id when it landed, written then when it did
// not.
func TestEveryWriteKnowsItself(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageProxy: true})
	faults := []struct {
		name string
		// at is what the proxy does to the write's storage request.
		at    func(p *harness.Proxy, request []string)
		twice bool
	}{
		{"request lost on its way", func(p *harness.Proxy, request []string) { p.DropNext(1, request...) }, false},
		{"answer lost after the write", func(p *harness.Proxy, request []string) { p.LoseAnswers(1, request...) }, false},
		{"answer lost, the call sent twice at once", func(p *harness.Proxy, request []string) { p.LoseAnswers(1, request...) }, true},
	}
	lib := chargeFees(t, c, c.SetupLibrary(2, itemsPerWriteKinds*len(faults), 0), facultyStandard(), lostPolicy(10, 5)).Library
	renewable(t, c, lib, map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"})
	keepHolds(t, c, harness.ServicePoint, 2, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	kinds := writeKinds(t, c, lib, librarian)
	for _, f := range faults {
		for _, w := range kinds {
			t.Run(f.name+"/"+w.name, func(t *testing.T) {
				method, path, body, version := w.prepare(t)
				before := version()
				headers := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian), schemas.HeaderIdempotencyKey, uuid.NewString())
				f.at(c.StorageProxy, w.storage)
				calls := 1
				if f.twice {
					calls = 2
				}
				answers := atOnce(calls, func(int) harness.Response { return c.DoWith(c.Circulations[0], method, path, body, headers) })
				for i, a := range answers {
					if a.Status != w.ok {
						t.Fatalf("call %d answered %d %s, want %d", i, a.Status, a.Body, w.ok)
					}
					if !bytes.Equal(a.Body, answers[0].Body) {
						t.Errorf("the calls' answers differ:\n%s\n%s", answers[0].Body, a.Body)
					}
				}
				if after := version(); after != before+1 {
					t.Errorf("the record written moved from version %d to %d, want one on: written once", before, after)
				}
			})
		}
	}
}

// TestTheSameCheckOutSentAtOnceToThreeInstancesIsOneLoan: one check-out,
// its Idempotency-Key the same, sent twenty times at once to three
// circulation instances: one loan, twenty identical answers, and no lock
// left held. The key sent again with another body is refused, nothing
// written. So whether storage waits for the lock or circulation does
// (LOCK_WAIT_AT_STORAGE=false), where a call that took a lock of its own
// finds its write landed by another.
func TestTheSameCheckOutSentAtOnceToThreeInstancesIsOneLoan(t *testing.T) {
	t.Parallel()
	t.Run("storage waits", func(t *testing.T) { t.Parallel(); sameCheckOutAtOnce(t) })
	t.Run("circulation waits", func(t *testing.T) { t.Parallel(); sameCheckOutAtOnce(t, "LOCK_WAIT_AT_STORAGE=false") })
}

func sameCheckOutAtOnce(t *testing.T, env ...string) {
	c := harness.NewCluster(t, harness.Options{Circulations: 3, FeatureOn: true, CirculationEnv: env})
	lib := c.SetupLibrary(1, 3, 2)
	patron := lib.Patrons[0]
	for round, item := range lib.Items[0][:2] {
		headers := c.HeadersWith(schemas.HeaderIdempotencyKey, uuid.NewString())
		body := map[string]any{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint}
		answers := atOnce(20, func(i int) harness.Response {
			return c.DoWith(c.Circulations[i%3], "POST", "/circulation/check-out-by-barcode", body, headers)
		})
		for i, a := range answers {
			if a.Status != http.StatusCreated || !bytes.Equal(a.Body, answers[0].Body) {
				t.Fatalf("round %d: answer %d: %d %s; want 201, as the first: %s", round, i, a.Status, a.Body, answers[0].Body)
			}
		}
		if n := c.OpenLoans(t, patron); n != round+1 {
			t.Fatalf("round %d: %d open loans, want %d", round, n, round+1)
		}
		// Sent again without its key (a kiosk that lost its answer and
		// its key with it): refused, naming the patron's own loan as the
		// loan itself names it.
		var loan struct {
			ID      string `json:"id"`
			DueDate string `json:"dueDate"`
		}
		if err := json.Unmarshal(answers[0].Body, &loan); err != nil {
			t.Fatal(err)
		}
		again := c.Do(c.Circulations[round], "POST", "/circulation/check-out-by-barcode", body).Want(t, http.StatusUnprocessableEntity)
		if code, params := errorParams(t, again); code != schemas.CodeItemAlreadyCheckedOut || params["loanId"] != loan.ID || params["dueDate"] != loan.DueDate {
			t.Errorf("round %d: sent again without its key: %s, want %s naming loan %s due %s", round, again.Body, schemas.CodeItemAlreadyCheckedOut, loan.ID, loan.DueDate)
		}
		if n := liveLocks(t, c); n != 0 {
			t.Errorf("round %d: %d locks held after every answer, want none", round, n)
		}
		other := map[string]any{"itemBarcode": lib.Items[0][2], "userBarcode": patron, "servicePointId": harness.ServicePoint}
		r := c.DoWith(c.Circulations[round], "POST", "/circulation/check-out-by-barcode", other, headers).Want(t, http.StatusUnprocessableEntity)
		if code, _ := envelopeError(t, r); code != schemas.CodeIdempotencyKeyReused {
			t.Errorf("round %d: the key with another body: %s, want %s", round, r.Body, schemas.CodeIdempotencyKeyReused)
		}
		if s := itemStatus(t, c, lib.Items[0][2]); s != schemas.ItemAvailable {
			t.Errorf("round %d: the other body's item is %q, want it Available", round, s)
		}
	}
	c.CheckInvariants(t, harness.Invariants{ItemLimit: 2})
}

// TestALostClaimIsNotAnotherClaimsDone: X and Y claim one loan's item
// returned, the same date, different comments, through two circulation
// instances. X reads the loan, then its write is held on its way to
// storage while Y's is written; X's write, let go, is refused by the
// item's and the loan's versions and its answer is lost. The loan read
// back would show X's claim (the same action and date): X is not told
// done, but that the item or the loan changed, and Y's comment stays.
func TestALostClaimIsNotAnotherClaimsDone(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true, StorageProxy: true})
	lib := c.SetupLibrary(1, 1, 0)
	item := lib.Items[0][0]
	c.CheckOut(0, item, lib.Patrons[0]).Want(t, http.StatusCreated)
	loanID := openLoanID(t, c, item)
	librarian := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian))
	claim := func(circ int, comment string) harness.Response {
		return c.DoWith(c.Circulations[circ], "POST", "/circulation/loans/"+loanID+"/claim-item-returned",
			map[string]any{"itemClaimedReturnedDateTime": "2026-03-05T12:00:00.000Z", "comment": comment}, librarian)
	}
	arrived, release := c.StorageProxy.Hold("PUT /loan-storage/loans/")
	c.StorageProxy.LoseAnswers(1, "PUT /loan-storage/loans/")
	var x harness.Response
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		x = claim(0, "X: on the shelf")
	}()
	<-arrived
	claim(1, "Y: in the book drop").Want(t, http.StatusNoContent)
	release()
	wg.Wait()
	if x.Status/100 == 2 {
		t.Fatalf("X, whose write was refused and its answer lost, answered %d: done", x.Status)
	}
	// Refused for the item (its status the claim's write reads first) or
	// for the loan: nothing of X's written.
	if code, _ := envelopeError(t, x); x.Status != http.StatusConflict || (code != schemas.CodeItemChanged && code != schemas.CodeLoanChanged) {
		t.Errorf("X answered %d %s, want 409 %s or %s", x.Status, x.Body, schemas.CodeItemChanged, schemas.CodeLoanChanged)
	}
	var comment string
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT jsonb ->> 'actionComment' FROM %s.loan WHERE id = $1::uuid`, c.Schema), loanID).
		Scan(&comment); err != nil || comment != "Y: in the book drop" {
		t.Errorf("the loan's comment: %q (%v), want Y's", comment, err)
	}
}

// TestAnUnknownWriteIsLearntFromItsKey: a check-out's write lands, its
// answer is lost, and storage is then out of reach, for the write and for
// the question whether it landed, for longer than the call sends the
// write again: the call answers 503 naming its loan and its write id, its
// outcome not known then. The write id says at storage that it landed;
// the call sent again with its Idempotency-Key once storage is back is
// answered the loan it made, written once. With storage in reach for the
// question alone, the call itself learns it landed: 201.
func TestAnUnknownWriteIsLearntFromItsKey(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageProxy: true,
		CirculationEnv: []string{"WRITE_SETTLE_TIMEOUT=1s"}})
	lib := c.SetupLibrary(1, 2, 0)
	patron, item := lib.Patrons[0], lib.Items[0][0]
	write := harness.CheckOutWrite
	arrived, release := c.StorageProxy.Hold(write...)
	c.StorageProxy.LoseAnswers(1, write...)
	headers := c.HeadersWith(schemas.HeaderIdempotencyKey, uuid.NewString())
	body := map[string]any{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint}
	answered := make(chan harness.Response, 1)
	go func() {
		answered <- c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", body, headers)
	}()
	<-arrived
	// From the first write on, every write sent again, and every
	// question whether it landed, is lost on its way.
	c.StorageProxy.DropRequests(append(write, "GET /write-storage/writes/")...)
	release()
	first := (<-answered).Want(t, http.StatusServiceUnavailable)
	code, params := envelopeError(t, first)
	if code != schemas.CodeStorageUnavailable || params["loanId"] == "" || params["writeId"] == "" {
		t.Fatalf("the write never answered again: %s, want %s naming the loan and the write id", first.Body, schemas.CodeStorageUnavailable)
	}
	if n := c.OpenLoans(t, patron); n != 1 {
		t.Fatalf("%d open loans, want the one the first write made", n)
	}
	var landed struct{ Kind string }
	c.Do(c.Storage, "GET", "/write-storage/writes/"+params["writeId"], nil).Want(t, http.StatusOK).Decode(t, &landed)
	if landed.Kind != "check-out" {
		t.Errorf("the write id's row: kind %q, want check-out", landed.Kind)
	}
	c.StorageProxy.DropRequests()
	var loan struct{ ID string }
	c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", body, headers).Want(t, http.StatusCreated).Decode(t, &loan)
	if loan.ID != params["loanId"] {
		t.Errorf("the call sent again answered loan %s, want %s, the one its write made", loan.ID, params["loanId"])
	}
	if n := c.OpenLoans(t, patron); n != 1 {
		t.Errorf("%d open loans after the call sent again, want 1", n)
	}

	// The write lost again, but the question whether it landed answered:
	// the call learns its own loan, without a key.
	second := lib.Items[0][1]
	arrived, release = c.StorageProxy.Hold(write...)
	c.StorageProxy.LoseAnswers(1, write...)
	go func() {
		answered <- c.Do(c.Circulations[0], "POST", "/circulation/check-out-by-barcode",
			map[string]any{"itemBarcode": second, "userBarcode": patron, "servicePointId": harness.ServicePoint})
	}()
	<-arrived
	c.StorageProxy.DropRequests(write...)
	release()
	(<-answered).Want(t, http.StatusCreated)
	c.StorageProxy.DropRequests()
	if n := c.OpenLoans(t, patron); n != 2 {
		t.Errorf("%d open loans, want 2", n)
	}
}

// TestAnUnknownKioskPaymentIsLearntFromItsKey: a kiosk's payment of a
// patron's balance (no fee/fine named) lands, its answer is lost, and
// storage is then out of reach for longer than the call sends it again:
// the call answers 503 naming the patron and its write id, not a failure
// of its own. Sent again with its Idempotency-Key once storage is back,
// it is answered the payment it made, which paid once; and so again
// after the patron's barcode changed, which the call can no longer find.
func TestAnUnknownKioskPaymentIsLearntFromItsKey(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageProxy: true,
		CirculationEnv: []string{"WRITE_SETTLE_TIMEOUT=1s"}})
	lib := setUpFees(t, c, 1, 1, facultyStandard(), lostPolicy(10, 5))
	patron := c.IDOf(t, "/users", "users", lib.Patrons[0])
	var fee struct{ ID string }
	c.Do(c.Storage, "POST", "/accounts", map[string]any{"amount": 5, "remaining": 5, "status": map[string]string{"name": schemas.FeeFineOpen},
		"paymentStatus": map[string]string{"name": schemas.PaymentStatusOutstanding}, "userId": patron, "feeFineId": lib.OverdueType,
		"feeFineType": schemas.FeeFineOverdueFine, "ownerId": lib.Owner}).Want(t, http.StatusCreated).Decode(t, &fee)
	write := []string{"POST /fee-fine-storage/actions"}
	arrived, release := c.StorageProxy.Hold(write...)
	c.StorageProxy.LoseAnswers(1, write...)
	headers := c.HeadersWith(schemas.HeaderIdempotencyKey, uuid.NewString())
	body := map[string]any{"userBarcode": lib.Patrons[0], "amount": "2.00", "paymentMethod": "Cash", "servicePointId": harness.ServicePoint}
	answered := make(chan harness.Response, 1)
	go func() { answered <- c.DoWith(c.Circulations[0], "POST", "/circulation/patron-fees/pay", body, headers) }()
	<-arrived
	c.StorageProxy.DropRequests(append(write, "GET /write-storage/writes/")...)
	release()
	first := (<-answered).Want(t, http.StatusServiceUnavailable)
	code, params := envelopeError(t, first)
	if code != schemas.CodeStorageUnavailable || params["userId"] != patron || params["writeId"] == "" {
		t.Fatalf("the payment never answered again: %s, want %s naming the patron and the write id", first.Body, schemas.CodeStorageUnavailable)
	}
	c.StorageProxy.DropRequests()
	var paid struct{ AccountID, Amount, RemainingAmount string }
	again := c.DoWith(c.Circulations[0], "POST", "/circulation/patron-fees/pay", body, headers).Want(t, http.StatusCreated)
	again.Decode(t, &paid)
	if paid.AccountID != fee.ID || paid.Amount != "2.00" || paid.RemainingAmount != "3.00" {
		t.Errorf("the payment sent again: %+v, want 2.00 of %s paid, 3.00 remaining", paid, fee.ID)
	}
	// The patron's barcode changed since: the call sent again with its
	// key is still the payment it made, answered from its write's id,
	// not a patron no longer found.
	var user map[string]any
	c.Do(c.Storage, "GET", "/users/"+patron, nil).Want(t, http.StatusOK).Decode(t, &user)
	user["barcode"] = lib.Patrons[0] + "-new"
	c.Do(c.Storage, "PUT", "/users/"+patron, user).Want(t, http.StatusNoContent)
	if r := c.DoWith(c.Circulations[0], "POST", "/circulation/patron-fees/pay", body, headers).Want(t, http.StatusCreated); !bytes.Equal(r.Body, again.Body) {
		t.Errorf("the payment sent again after the barcode changed: %s, want %s", r.Body, again.Body)
	}
	if acts := actionsOf(t, c, fee.ID); len(acts) != 2 {
		t.Errorf("the fee/fine's actions: %+v, want the charge and one payment", acts)
	}
	moneyHolds(t, c)
}

// TestACheckOutWithThePINSentAgainIsAnsweredFromItsWrite: a kiosk's
// check-out with the patron's PIN (X-Patron-Pin) has it checked before any
// refusal is told or anything written: a wrong one is refused (422
// PIN_INVALID), counted
// at the patron the barcode names, nothing lent, whatever else would
// refuse it (an item of no barcode, a patron of none). Sent again with its
// Idempotency-Key after the patron's barcode was given to another patron,
// then to no one, the call is its write, looked up by its id before its
// PIN is checked, and the PIN is checked against the patron it lent to:
// storage not answering the lookup, it is answered so, no PIN checked;
// with the other patron's PIN it is a wrong guess at the borrower's; with
// the borrower's it is answered its loan (the borrower named only by the
// barcode the kiosk gave), lent once. The other patron is never counted a
// guess, nor lent anything. A check-out made offline, sent again, has its
// PIN checked against the patron it was recorded for.
func TestACheckOutWithThePINSentAgainIsAnsweredFromItsWrite(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageProxy: true})
	lib := c.SetupLibrary(2, 2, 0)
	borrower, other, item := lib.Patrons[0], lib.Patrons[1], lib.Items[0][0]
	borrowerID, otherID := patronID(t, c, borrower), patronID(t, c, other)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": borrowerID, "pin": "7319"}).Want(t, http.StatusCreated)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": otherID, "pin": "2468"}).Want(t, http.StatusCreated)
	body := map[string]any{"itemBarcode": item, "userBarcode": borrower, "servicePointId": harness.ServicePoint}
	writeKey := uuid.NewString()
	send := func(pin string, want int) harness.Response {
		t.Helper()
		return c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", body,
			c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck), schemas.HeaderIdempotencyKey, writeKey,
				schemas.HeaderPatronPin, pin)).Want(t, want)
	}
	loans := func(userID string) int {
		t.Helper()
		var n int
		if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s.loan WHERE user_id = $1`, c.Schema),
			userID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	type answer struct {
		ID, ItemID, UserID, DueDate string
		Borrower                    struct{ ID, Barcode string }
	}
	if code, _ := envelopeError(t, send("1111", http.StatusUnprocessableEntity)); code != schemas.CodePinInvalid || loans(borrowerID) != 0 {
		t.Fatalf("a check-out with a wrong PIN: %s (%d loans), want %s, nothing lent", code, loans(borrowerID), schemas.CodePinInvalid)
	}
	kiosk := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck), schemas.HeaderPatronPin, "1111")
	for _, b := range []map[string]any{
		{"itemBarcode": "no-such-item", "userBarcode": borrower, "servicePointId": harness.ServicePoint},
		{"itemBarcode": item, "userBarcode": "no-such-patron", "servicePointId": harness.ServicePoint},
	} {
		r := c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", b, kiosk).Want(t, http.StatusUnprocessableEntity)
		if code, _ := envelopeError(t, r); code != schemas.CodePinInvalid {
			t.Errorf("a check-out of %v with a wrong PIN: %s, want %s alone", b, r.Body, schemas.CodePinInvalid)
		}
	}
	// The three wrong PINs are refusals in circulation's check-out
	// metrics, not errors.
	refused, failed := metric(t, c, c.Circulations[0], `checkout_duration_seconds_count{outcome="refused"}`),
		metric(t, c, c.Circulations[0], `checkout_duration_seconds_count{outcome="error"}`)
	if refused != 3 || failed != 0 {
		t.Errorf("check-outs with a wrong PIN counted %v refused and %v errors, want 3 and 0", refused, failed)
	}
	var first answer
	send("7319", http.StatusCreated).Decode(t, &first)
	if first.UserID != "" || first.Borrower.ID != "" || first.Borrower.Barcode != borrower {
		t.Errorf("the kiosk's check-out answered %+v, want the borrower named by the barcode it gave alone", first)
	}
	sentAgainWithTheBarcodeGiven(t, c, "the check-out", borrower, borrowerID, otherID, "2468", send)
	answered := func(to string) {
		t.Helper()
		var again answer
		send("7319", http.StatusCreated).Decode(t, &again)
		if first.ID == "" || again != first {
			t.Errorf("the check-out sent again with the borrower's PIN, the barcode given to %s, answered %+v, want %+v", to, again, first)
		}
	}
	answered("another patron")
	setBarcode(t, c, "/users/"+otherID, other)
	answered("no one")
	if mine, theirs := guessCount(t, c, "pin:"+borrowerID), guessCount(t, c, "pin:"+otherID); mine != 3 || theirs != 0 {
		t.Errorf("PIN guesses counted: %d at the borrower's, %d at the patron the barcode named meanwhile; want 3 and 0", mine, theirs)
	}
	if mine, theirs := loans(borrowerID), loans(otherID); mine != 1 || theirs != 0 {
		t.Errorf("loans: %d of the borrower's, %d of the other patron's; want 1 and 0", mine, theirs)
	}

	// Made offline, then sent again: its PIN is checked against the
	// patron it was recorded for.
	offline := map[string]any{"itemBarcode": lib.Items[1][0], "userBarcode": other, "servicePointId": harness.ServicePoint,
		"offline": map[string]any{"transactionDate": schemas.FormatTime(time.Now().Add(-time.Minute))}}
	sendOffline := func(pin string, want int) harness.Response {
		t.Helper()
		return c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", offline,
			c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck), schemas.HeaderPatronPin, pin)).Want(t, want)
	}
	var recorded, again answer
	sendOffline("2468", http.StatusCreated).Decode(t, &recorded)
	if code, _ := envelopeError(t, sendOffline("1111", http.StatusUnprocessableEntity)); code != schemas.CodePinInvalid {
		t.Errorf("a check-out made offline sent again with a wrong PIN: %s, want %s", code, schemas.CodePinInvalid)
	}
	sendOffline("2468", http.StatusCreated).Decode(t, &again)
	if recorded.ID == "" || again.ID != recorded.ID || loans(otherID) != 1 || guessCount(t, c, "pin:"+otherID) != 1 {
		t.Errorf("a check-out made offline sent again: %+v, then %+v (%d loans, %d guesses); want its loan, one loan, one guess",
			recorded, again, loans(otherID), guessCount(t, c, "pin:"+otherID))
	}
}

// sentAgainWithTheBarcodeGiven gives the borrower's barcode to the other
// patron (whose PIN is otherPIN), then sends a kiosk's call (what) again
// with its key and the other patron's PIN: with storage dropping its
// lookup by write id, 503 STORAGE_UNAVAILABLE, no PIN checked; then 422
// PIN_INVALID, a wrong guess at the borrower's.
func sentAgainWithTheBarcodeGiven(t *testing.T, c *harness.Cluster, what, borrower, borrowerID, otherID, otherPIN string,
	send func(pin string, want int) harness.Response) {
	t.Helper()
	setBarcode(t, c, "/users/"+borrowerID, borrower+"-moved")
	setBarcode(t, c, "/users/"+otherID, borrower)
	c.StorageProxy.DropRequests("GET /write-storage/writes/")
	unknown := send(otherPIN, http.StatusServiceUnavailable)
	c.StorageProxy.DropRequests()
	if code, _ := envelopeError(t, unknown); code != schemas.CodeStorageUnavailable {
		t.Errorf("%s sent again while storage does not answer its lookup: %s, want %s", what, unknown.Body, schemas.CodeStorageUnavailable)
	}
	if code, _ := envelopeError(t, send(otherPIN, http.StatusUnprocessableEntity)); code != schemas.CodePinInvalid {
		t.Errorf("%s sent again with the PIN of the patron its barcode names now: %s, want %s", what, code, schemas.CodePinInvalid)
	}
}

// TestARenewalSentAgainIsAnsweredFromItsWrite: renewals, each answered,
// then sent again with their Idempotency-Keys after what they read by
// changed, are answered the renewal their write made, the loan as it
// landed, its item and borrower as they are now: by barcode, the item's
// barcode given to the patron's other item (whose loan the call sent
// again reads, and storage answers with the loan its write id renewed);
// by barcode, the item's barcode removed (the call sent again refused,
// then answered from its write id); at a kiosk, the patron's barcode
// changed (the borrower still named only by the barcode the kiosk gave);
// at a kiosk with the patron's PIN, the patron's barcode given to another
// patron, then to no one (looked up by its write id before its PIN is
// checked, the PIN checked against the borrower); at a kiosk with the
// patron's PIN, the item's and the patron's barcodes given to another
// patron's loan and that patron (answered with the borrower unnamed); by
// ids, the patron's barcode removed. Each loan renewed once, one event
// each, the other items' loans untouched.
func TestARenewalSentAgainIsAnsweredFromItsWrite(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageProxy: true})
	lib := c.SetupLibrary(3, 3, 0)
	renewable(t, c, lib, map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"})
	keyed := func() map[string]string {
		return c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian), schemas.HeaderIdempotencyKey, uuid.NewString())
	}
	byBarcode, other, withPIN := lib.Items[0][0], lib.Items[0][1], lib.Items[0][2]
	byID, removed, kiosk := lib.Items[1][0], lib.Items[1][1], lib.Items[1][2]
	c.CheckOut(0, byBarcode, lib.Patrons[0]).Want(t, http.StatusCreated)
	c.CheckOut(0, other, lib.Patrons[0]).Want(t, http.StatusCreated)
	c.CheckOut(0, byID, lib.Patrons[1]).Want(t, http.StatusCreated)
	c.CheckOut(0, removed, lib.Patrons[1]).Want(t, http.StatusCreated)
	c.CheckOut(0, kiosk, lib.Patrons[1]).Want(t, http.StatusCreated)
	c.CheckOut(0, withPIN, lib.Patrons[0]).Want(t, http.StatusCreated)
	renewedID, otherID := itemID(t, c, byBarcode), itemID(t, c, other)
	byIDItem, byIDPatron, removedID, kioskID := itemID(t, c, byID), patronID(t, c, lib.Patrons[1]), itemID(t, c, removed), itemID(t, c, kiosk)
	type answer struct {
		ID, ItemID, UserID string
		RenewalCount       int
		DueDate            string
		Item               struct{ Barcode string }
		Borrower           *struct {
			ID, Barcode, FirstName string
		}
		LoanPolicy struct{ Name string }
	}
	renew := func(path string, body map[string]any, headers map[string]string, want int) answer {
		t.Helper()
		var a answer
		r := c.DoWith(c.Circulations[0], "POST", path, body, headers).Want(t, want)
		if want == http.StatusOK {
			r.Decode(t, &a)
		}
		return a
	}

	// By barcode: the item's barcode then given to the patron's other item.
	key := keyed()
	body := map[string]any{"itemBarcode": byBarcode, "userBarcode": lib.Patrons[0]}
	first := renew("/circulation/renew-by-barcode", body, key, http.StatusOK)
	setBarcode(t, c, "/item-storage/items/"+renewedID, byBarcode+"-moved")
	setBarcode(t, c, "/item-storage/items/"+otherID, byBarcode)
	again := renew("/circulation/renew-by-barcode", body, key, http.StatusOK)
	if again.ID != first.ID || again.ItemID != renewedID || again.RenewalCount != 1 || again.DueDate != first.DueDate ||
		again.Item.Barcode != byBarcode+"-moved" {
		t.Errorf("the renewal sent again answered %+v, want the loan as its write left it (%+v), its item as it is now", again, first)
	}

	// By barcode: the item's barcode then removed.
	key = keyed()
	body = map[string]any{"itemBarcode": removed, "userBarcode": lib.Patrons[1]}
	first = renew("/circulation/renew-by-barcode", body, key, http.StatusOK)
	setBarcode(t, c, "/item-storage/items/"+removedID, "")
	if again := renew("/circulation/renew-by-barcode", body, key, http.StatusOK); again.ID != first.ID || again.ItemID != removedID ||
		again.RenewalCount != 1 || again.DueDate != first.DueDate || again.Item.Barcode != "" {
		t.Errorf("the renewal of an item whose barcode was removed, sent again, answered %+v, want %+v without a barcode", again, first)
	}

	// By barcode, at a kiosk (the borrower not named): the patron's
	// barcode then changed. The answer names no borrower but by the
	// barcode the kiosk gave, not the patron's new one.
	key = c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck), schemas.HeaderIdempotencyKey, uuid.NewString())
	body = map[string]any{"itemBarcode": kiosk, "userBarcode": lib.Patrons[1]}
	first = renew("/circulation/renew-by-barcode", body, key, http.StatusOK)
	setBarcode(t, c, "/users/"+byIDPatron, lib.Patrons[1]+"-new")
	again = renew("/circulation/renew-by-barcode", body, key, http.StatusOK)
	if again.ID != first.ID || again.ItemID != kioskID || again.RenewalCount != 1 || again.DueDate != first.DueDate ||
		again.Borrower == nil || *again.Borrower != *first.Borrower || again.Borrower.Barcode != lib.Patrons[1] || again.UserID != first.UserID {
		t.Errorf("the kiosk's renewal sent again after the patron's barcode changed answered %+v %+v, want %+v %+v", again, again.Borrower, first, first.Borrower)
	}

	// At a kiosk with the patron's PIN (the borrower named): the
	// patron's barcode then given to another patron, then to no one. The
	// call sent again is its write, looked up by its id before its PIN is
	// checked, and the PIN is checked against the patron it renewed for,
	// not the one the barcode names now: storage not answering the lookup,
	// it is answered so, no PIN checked; with the other patron's PIN it is
	// a wrong guess at the borrower's; with the borrower's it is answered
	// its loan, the borrower named. The other patron is never counted a
	// guess.
	withPINID, borrowerID, otherPatronID := itemID(t, c, withPIN), patronID(t, c, lib.Patrons[0]), patronID(t, c, lib.Patrons[2])
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": borrowerID, "pin": "7319"}).Want(t, http.StatusCreated)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": otherPatronID, "pin": "2468"}).Want(t, http.StatusCreated)
	writeKey := uuid.NewString()
	kioskWith := func(pin string) map[string]string {
		return c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck), schemas.HeaderIdempotencyKey, writeKey,
			schemas.HeaderPatronPin, pin)
	}
	sendAgain := func(pin string, want int) harness.Response {
		t.Helper()
		return c.DoWith(c.Circulations[0], "POST", "/circulation/renew-by-barcode", body, kioskWith(pin)).Want(t, want)
	}
	body = map[string]any{"itemBarcode": withPIN, "userBarcode": lib.Patrons[0]}
	first = renew("/circulation/renew-by-barcode", body, kioskWith("7319"), http.StatusOK)
	if first.UserID != borrowerID || first.Borrower == nil || first.Borrower.ID != borrowerID {
		t.Errorf("the kiosk's renewal with the patron's PIN answered %+v %+v, want the borrower named", first, first.Borrower)
	}
	sentAgainWithTheBarcodeGiven(t, c, "the kiosk's renewal", lib.Patrons[0], borrowerID, otherPatronID, "2468", sendAgain)
	answered := func(to string) {
		t.Helper()
		var again answer
		sendAgain("7319", http.StatusOK).Decode(t, &again)
		if again.ID != first.ID || again.ItemID != withPINID || again.RenewalCount != 1 || again.DueDate != first.DueDate ||
			again.UserID != borrowerID || again.Borrower == nil || again.Borrower.ID != borrowerID {
			t.Errorf("the kiosk's renewal sent again with the borrower's PIN, the barcode given to %s, answered %+v %+v, want %+v, the borrower named",
				to, again, again.Borrower, first)
		}
	}
	answered("another patron")
	setBarcode(t, c, "/users/"+otherPatronID, lib.Patrons[2])
	answered("no one")
	if mine, theirs := guessCount(t, c, "pin:"+borrowerID), guessCount(t, c, "pin:"+otherPatronID); mine != 1 || theirs != 0 {
		t.Errorf("PIN guesses counted: %d at the borrower's, %d at the patron the barcode named meanwhile; want 1 and 0", mine, theirs)
	}

	// At a kiosk with the patron's PIN: the item's barcode then given to
	// another patron's item, and the patron's to that patron, whose PIN
	// the kiosk gives. The call reads that patron's own loan and their
	// right PIN, and its write meets its key at storage: it is answered
	// the loan its write renewed, the borrower not named (a PIN opens only
	// its own patron's name), and the other loan is not renewed.
	mine, theirs := lib.Items[2][0], lib.Items[2][1]
	c.CheckOut(0, mine, lib.Patrons[2]).Want(t, http.StatusCreated)
	c.CheckOut(0, theirs, lib.Patrons[0]+"-moved").Want(t, http.StatusCreated)
	mineID, theirsID := itemID(t, c, mine), itemID(t, c, theirs)
	writeKey = uuid.NewString()
	body = map[string]any{"itemBarcode": mine, "userBarcode": lib.Patrons[2]}
	first = renew("/circulation/renew-by-barcode", body, kioskWith("2468"), http.StatusOK)
	setBarcode(t, c, "/item-storage/items/"+mineID, mine+"-moved")
	setBarcode(t, c, "/item-storage/items/"+theirsID, mine)
	setBarcode(t, c, "/users/"+otherPatronID, lib.Patrons[2]+"-moved")
	setBarcode(t, c, "/users/"+borrowerID, lib.Patrons[2])
	again = renew("/circulation/renew-by-barcode", body, kioskWith("7319"), http.StatusOK)
	if first.UserID != otherPatronID || again.ID != first.ID || again.ItemID != mineID || again.RenewalCount != 1 || again.UserID != "" ||
		again.Borrower == nil || again.Borrower.ID != "" || again.Borrower.Barcode != lib.Patrons[2] {
		t.Errorf("the kiosk's renewal sent again with the PIN of the patron holding the item its barcodes name now answered %+v %+v, want %+v, the borrower unnamed",
			again, again.Borrower, first)
	}

	// By ids: the patron's barcode then removed, and the rules changed
	// to lend under another policy. The answer names the policy the loan
	// was renewed under.
	key = keyed()
	body = map[string]any{"itemId": byIDItem, "userId": byIDPatron}
	first = renew("/circulation/renew-by-id", body, key, http.StatusOK)
	setBarcode(t, c, "/users/"+byIDPatron, "")
	var later struct{ ID string }
	c.Do(c.Storage, "POST", "/loan-policy-storage/loan-policies", map[string]any{"name": "later", "loanable": true, "renewable": true,
		"loansPolicy":    map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": 1, "intervalId": "Weeks"}},
		"renewalsPolicy": map[string]any{"unlimited": true}}).Want(t, http.StatusCreated).Decode(t, &later)
	c.Do(c.Storage, "PUT", "/circulation-rules-storage", map[string]any{"fallbackLoanPolicyId": later.ID,
		"rules": []map[string]any{}}).Want(t, http.StatusNoContent)
	if again := renew("/circulation/renew-by-id", body, key, http.StatusOK); again.ID != first.ID || again.RenewalCount != 1 ||
		again.DueDate != first.DueDate || first.LoanPolicy.Name != "limited" || again.LoanPolicy.Name != "limited" {
		t.Errorf("the renewal by ids sent again after the rules changed answered %+v, want %+v, the policy it was renewed under", again, first)
	}
	var counts []int
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT array_agg(coalesce((jsonb ->> 'renewalCount')::int, 0)
		ORDER BY array_position($1::text[], jsonb ->> 'itemId')) FROM %s.loan WHERE status_name = 'Open'`, c.Schema),
		[]string{renewedID, removedID, kioskID, withPINID, mineID, byIDItem, otherID, theirsID}).Scan(&counts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(counts, []int{1, 1, 1, 1, 1, 1, 0, 0}) || renewalEvents(t, c) != 6 {
		t.Errorf("open loans' renewal counts %v (the barcode moved, removed, the kiosk's, with a PIN, with a PIN again, by ids, the other items), %d events; want [1 1 1 1 1 1 0 0] and 6",
			counts, renewalEvents(t, c))
	}
}

// TestACheckOutSentAgainIsAnsweredFromItsWrite: a check-out sent again
// with its Idempotency-Key after the barcodes it named were given to other
// records is answered its own loan with the loan's own item and patron as
// they are now, read by the loan's ids, never with the records the
// barcodes name now (an item it did not lend, a patron who does not
// borrow it): whether storage meets the key in the check-out's one call
// (the lock on) or in the write after validation's read (the lock off).
// A kiosk's answer names the borrower, as it always does, by the barcode
// the kiosk gave alone. A check-out made offline, sent again (found by
// the loan id its account, barcodes and date make), is answered the same
// way.
func TestACheckOutSentAgainIsAnsweredFromItsWrite(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("lock on %v", on), func(t *testing.T) {
			t.Parallel()
			c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: on})
			lib := c.SetupLibrary(4, 2, 0)
			lent, taken, atKiosk := lib.Items[0][0], lib.Items[0][1], lib.Items[1][0]
			borrower, other, kioskPatron := lib.Patrons[0], lib.Patrons[2], lib.Patrons[1]
			lentID, takenID, atKioskID := itemID(t, c, lent), itemID(t, c, taken), itemID(t, c, atKiosk)
			borrowerID, otherID, kioskPatronID := patronID(t, c, borrower), patronID(t, c, other), patronID(t, c, kioskPatron)
			type answer struct {
				ID, ItemID, UserID string
				Item               struct {
					ID, Barcode string
					Status      struct{ Name string }
				}
				Borrower struct{ ID, Barcode, LastName string }
			}
			send := func(role string, headers []string, body map[string]any) answer {
				t.Helper()
				var a answer
				c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode", body,
					c.HeadersWith(append([]string{schemas.HeaderToken, c.Token(role)}, headers...)...)).
					Want(t, http.StatusCreated).Decode(t, &a)
				return a
			}
			checkOut := func(role string, key, item, patron string) answer {
				t.Helper()
				return send(role, []string{schemas.HeaderIdempotencyKey, key},
					map[string]any{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint})
			}

			// A librarian's, its item checked in before it is sent again:
			// the item as it is now.
			returned := lib.Items[2][0]
			key := uuid.NewString()
			first := checkOut(schemas.RoleLibrarian, key, returned, other)
			c.CheckIn(0, returned).Want(t, http.StatusOK)
			if again := checkOut(schemas.RoleLibrarian, key, returned, other); again.ID != first.ID || again.Item.ID != first.Item.ID ||
				again.Item.Status.Name != schemas.ItemAvailable {
				t.Errorf("the check-out sent again after its item was checked in answered %+v, want its loan (%+v) with the item available", again, first)
			}

			// A librarian's: the item's barcode then given to another
			// item, the patron's to another patron.
			key = uuid.NewString()
			first = checkOut(schemas.RoleLibrarian, key, lent, borrower)
			setBarcode(t, c, "/item-storage/items/"+lentID, lent+"-moved")
			setBarcode(t, c, "/item-storage/items/"+takenID, lent)
			setBarcode(t, c, "/users/"+borrowerID, borrower+"-moved")
			setBarcode(t, c, "/users/"+otherID, borrower)
			again := checkOut(schemas.RoleLibrarian, key, lent, borrower)
			if again.ID != first.ID || again.ItemID != lentID || again.UserID != borrowerID ||
				again.Item.ID != lentID || again.Item.Barcode != lent+"-moved" ||
				again.Borrower.ID != borrowerID || again.Borrower.Barcode != borrower+"-moved" || again.Borrower.LastName == "" ||
				again.Borrower.LastName != first.Borrower.LastName {
				t.Errorf("the check-out sent again answered %+v, want its own loan (%+v) with its item and borrower as they are now", again, first)
			}

			// A kiosk's: the patron's barcode then changed.
			key = uuid.NewString()
			first = checkOut(schemas.RoleSelfCheck, key, atKiosk, kioskPatron)
			setBarcode(t, c, "/users/"+kioskPatronID, kioskPatron+"-new")
			again = checkOut(schemas.RoleSelfCheck, key, atKiosk, kioskPatron)
			if again.ID != first.ID || again.ItemID != atKioskID || again.UserID != "" || again.Item.Barcode != atKiosk ||
				again.Borrower != first.Borrower || again.Borrower.Barcode != kioskPatron || again.Borrower.ID != "" {
				t.Errorf("the kiosk's check-out sent again answered %+v, want %+v: its own loan, the borrower by the barcode the kiosk gave alone", again, first)
			}

			// Made offline, a librarian's: the item's barcode then given to
			// another item, the patron's changed.
			offline, offlineTaken, offlinePatron := lib.Items[3][0], lib.Items[3][1], lib.Patrons[3]
			offlineID, offlineTakenID, offlinePatronID := itemID(t, c, offline), itemID(t, c, offlineTaken), patronID(t, c, offlinePatron)
			body := map[string]any{"itemBarcode": offline, "userBarcode": offlinePatron, "servicePointId": harness.ServicePoint,
				"offline": map[string]any{"transactionDate": schemas.FormatTime(time.Now().Add(-time.Hour))}}
			first = send(schemas.RoleLibrarian, nil, body)
			setBarcode(t, c, "/item-storage/items/"+offlineID, offline+"-moved")
			setBarcode(t, c, "/item-storage/items/"+offlineTakenID, offline)
			setBarcode(t, c, "/users/"+offlinePatronID, offlinePatron+"-moved")
			again = send(schemas.RoleLibrarian, nil, body)
			if again.ID != first.ID || again.ItemID != offlineID || again.Item.ID != offlineID || again.Item.Barcode != offline+"-moved" ||
				again.Borrower.ID != offlinePatronID || again.Borrower.Barcode != offlinePatron+"-moved" {
				t.Errorf("the offline check-out sent again answered %+v, want its own loan (%+v) with its item and borrower as they are now", again, first)
			}

			var loans []string
			if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT array_agg(jsonb ->> 'itemId' ORDER BY jsonb ->> 'itemId') FROM %s.loan`, c.Schema)).
				Scan(&loans); err != nil {
				t.Fatal(err)
			}
			want := []string{itemID(t, c, returned), lentID, atKioskID, offlineID}
			slices.Sort(want)
			for _, id := range []string{takenID, offlineTakenID} {
				var untouched struct{ Status struct{ Name string } }
				c.Do(c.Storage, "GET", "/item-storage/items/"+id, nil).Want(t, http.StatusOK).Decode(t, &untouched)
				if untouched.Status.Name != schemas.ItemAvailable {
					t.Errorf("the item given the barcode is %s, want it available", untouched.Status.Name)
				}
			}
			if !slices.Equal(loans, want) {
				t.Errorf("loans of items %v, want one loan each of %v", loans, want)
			}
		})
	}
}
