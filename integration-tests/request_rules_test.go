package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// storedDoc is the document of record id in the tenant's table, as
// stored, without its metadata.
func storedDoc(t *testing.T, c *harness.Cluster, table, id string) map[string]any {
	t.Helper()
	var raw []byte
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT jsonb FROM %s.%s WHERE id = $1::uuid`, c.Schema, table), id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	delete(doc, "metadata")
	return doc
}

// sameJSON reports whether the JSON document got is want's encoding, as
// values (its members in any order).
func sameJSON(t *testing.T, got []byte, want any) bool {
	t.Helper()
	raw, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal(raw, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// blockRequestsWith has the condition block requests, and nothing else,
// with message, and gives the library's patron group a limit of value for
// it.
func blockRequestsWith(t *testing.T, c *harness.Cluster, lib harness.Library, condition, message string, value int) {
	t.Helper()
	blockWith(t, c, lib, condition, message, value, false, false, true)
}

// blockWith has the condition block borrowing, renewals and requests as
// said, with message, and gives the library's patron group a limit of
// value for it.
func blockWith(t *testing.T, c *harness.Cluster, lib harness.Library, condition, message string, value any, borrowing, renewals, requests bool) {
	t.Helper()
	path := "/patron-block-conditions/" + condition
	var cond map[string]any
	c.Do(c.Storage, "GET", path, nil).Want(t, http.StatusOK).Decode(t, &cond)
	cond["blockBorrowing"], cond["blockRenewals"], cond["blockRequests"], cond["message"] = borrowing, renewals, requests, message
	delete(cond, "metadata")
	c.Do(c.Storage, "PUT", path, cond).Want(t, http.StatusNoContent)
	c.Do(c.Storage, "POST", "/patron-block-limits", map[string]any{"patronGroupId": lib.GroupID,
		"conditionId": condition, "value": value}).Want(t, http.StatusCreated)
}

// TestAutomatedBlocksStopRequestsThroughCirculation follows FOLIO's
// RequestsAPICreationTests (requestRefusedWhenAutomatedBlockExistsForPatron)
// across the real binaries: a patron over their group's limits of items
// charged out and of overdue items, both conditions blocking requests,
// is refused a recall 422 with FOLIO's USER_IS_BLOCKED_AUTOMATICALLY once
// a condition, in the condition's words (its name when it has none), and
// nothing is written: no request, the borrower's loan as it was. Back
// under the limits, the same recall is placed.
func TestAutomatedBlocksStopRequestsThroughCirculation(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(2, 3, 0)
	keepHolds(t, c, harness.ServicePoint, 1, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	owner, requester := lib.Patrons[0], lib.Patrons[1]
	book := lib.Items[0][0]
	bookID, requesterID := c.IDOf(t, "/item-storage/items", "items", book), c.IDOf(t, "/users", "users", requester)
	var loan struct{ ID string }
	c.CheckOut(0, book, owner).Want(t, http.StatusCreated).Decode(t, &loan)
	c.CheckOut(0, lib.Items[1][0], requester).Want(t, http.StatusCreated)
	var late struct{ ID string }
	c.CheckOut(0, lib.Items[1][1], requester).Want(t, http.StatusCreated).Decode(t, &late)
	if _, err := c.DB.Exec(context.Background(), fmt.Sprintf(`UPDATE %s.loan SET jsonb = jsonb_set(jsonb, '{dueDate}', to_jsonb($2::text))
		WHERE id = $1::uuid`, c.Schema), late.ID, schemas.FormatTime(time.Now().Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	blockRequestsWith(t, c, lib, schemas.ConditionItemsChargedOut, "You have reached the maximum number of items charged out", 1)
	blockRequestsWith(t, c, lib, schemas.ConditionOverdueItems, "", 0)
	loanBefore := storedDoc(t, c, "loan", loan.ID)

	recall := map[string]any{"requestType": "Recall", "requestDate": "2026-03-01T10:00:00.000Z", "requesterId": requesterID,
		"itemId": bookID, "fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint}
	r := c.DoWith(c.Circulations[0], "POST", "/circulation/requests", recall, librarian).Want(t, http.StatusUnprocessableEntity)
	want := errhttp.Envelope{Errors: []errhttp.Entry{
		{Message: "You have reached the maximum number of items charged out", Code: schemas.CodeUserBlockedAutomatically,
			Parameters: []errs.Parameter{{Key: "patronBlockConditionId", Value: schemas.ConditionItemsChargedOut}}},
		{Message: "Maximum number of overdue items", Code: schemas.CodeUserBlockedAutomatically,
			Parameters: []errs.Parameter{{Key: "patronBlockConditionId", Value: schemas.ConditionOverdueItems}}},
	}}
	if !sameJSON(t, r.Body, want) {
		t.Errorf("the blocked patron's recall: %s, want %+v", r.Body, want)
	}
	if got := requestsOf(t, c, bookID); len(got) != 0 {
		t.Errorf("a refused request was stored: %v", got)
	}
	if got := storedDoc(t, c, "loan", loan.ID); !reflect.DeepEqual(got, loanBefore) {
		t.Errorf("the borrower's loan after the refused recall: %v, want %v", got, loanBefore)
	}

	// Back under the limits: the late book returned, one item out.
	c.CheckIn(0, lib.Items[1][1]).Want(t, http.StatusOK)
	var placed struct{ ID, Status string }
	c.DoWith(c.Circulations[0], "POST", "/circulation/requests", recall, librarian).Want(t, http.StatusCreated).Decode(t, &placed)
	if got := requestsOf(t, c, bookID); got[placed.ID] != "Open - Not yet filled 1" || len(got) != 1 {
		t.Errorf("the recall under the limits: %v", got)
	}
}

// TestARecallMarksTheLoanItDoesNotShortenThroughCirculation follows
// FOLIO's LoanDueDatesAfterRecallTests
// (shouldNotExtendLoanDueDateWhenCurrentDueDateIsBeforeRecallDueDate,
// recallRequestWithMGDAndRDValuesShouldNotChangeDueDateToRD) and
// RequestsAPICreationTests (the loan's dueDateChangedByRecall): under a
// policy lending for three weeks and recalling in two months, a recall
// placed through circulation keeps the loan's due date and marks the loan
// all the same, in the recall's write: dueDateChangedByRecall, the action
// recallrequested, one version on. A hold and a second recall leave the
// loan alone.
func TestARecallMarksTheLoanItDoesNotShortenThroughCirculation(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(4, 1, 0)
	keepHolds(t, c, harness.ServicePoint, 1, "Days")
	var policy map[string]any
	c.Do(c.Storage, "GET", "/loan-policy-storage/loan-policies/"+lib.PolicyID, nil).Want(t, http.StatusOK).Decode(t, &policy)
	delete(policy, "metadata")
	policy["requestManagement"] = map[string]any{"recalls": map[string]any{"recallReturnInterval": map[string]any{"duration": 2, "intervalId": "Months"}}}
	c.Do(c.Storage, "PUT", "/loan-policy-storage/loan-policies/"+lib.PolicyID, policy).Want(t, http.StatusNoContent)
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	book := lib.Items[0][0]
	bookID := c.IDOf(t, "/item-storage/items", "items", book)
	var loan struct{ ID string }
	c.CheckOut(0, book, lib.Patrons[0]).Want(t, http.StatusCreated).Decode(t, &loan)
	before := storedDoc(t, c, "loan", loan.ID)
	place := func(kind, patron string) {
		t.Helper()
		c.DoWith(c.Circulations[0], "POST", "/circulation/requests", map[string]any{"requestType": kind, "requestDate": "2026-03-01T10:00:00.000Z",
			"requesterId": c.IDOf(t, "/users", "users", patron), "itemId": bookID, "fulfillmentPreference": "Hold Shelf",
			"pickupServicePointId": harness.ServicePoint}, librarian).Want(t, http.StatusCreated)
	}

	place("Recall", lib.Patrons[1])
	want := map[string]any{}
	for k, v := range before {
		want[k] = v
	}
	want["dueDateChangedByRecall"], want["action"], want["_version"] = true, "recallrequested", before["_version"].(float64)+1
	recalled := storedDoc(t, c, "loan", loan.ID)
	if !reflect.DeepEqual(recalled, want) {
		t.Errorf("the recalled loan:\n%v\nwant\n%v", recalled, want)
	}
	place("Hold", lib.Patrons[2])
	place("Recall", lib.Patrons[3])
	if got := storedDoc(t, c, "loan", loan.ID); !reflect.DeepEqual(got, recalled) {
		t.Errorf("the loan after a hold and a second recall:\n%v\nwant it as the first recall left it\n%v", got, recalled)
	}
}

// TestRequestsExpireThroughTheSweeper follows FOLIO's scheduled request
// expiration (mod-circulation-storage's RequestExpirationApiTest:
// canExpireAnFirstOpenUnfilledRequest, canExpireOpenUnfilledWithNoExpirationDate,
// canExpireOpenAwaitingWithNoHoldShelfExpirationDate,
// updatedDateIsUpdatedOnRequestExpiration) across the real binaries, the
// sweeper passing every 300 ms. A hold given an expiration date already
// passed (PUT through circulation) is closed "Closed - Unfilled":
// stored as it was written but for its status, no position, one version
// on; the hold behind it, with no date, moves up to 1. A page placed
// with a date already passed is closed too, and its paged book goes back
// on the shelf, Available. A hold on the hold shelf past its expiration
// date, but not its hold shelf date, stays there. The sweeper times its
// new work (checkout_lock_sweeper_work_seconds{work="request_expiry"}).
func TestRequestsExpireThroughTheSweeper(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageEnv: []string{"LOCK_SWEEP_INTERVAL=300ms"}})
	lib := c.SetupLibrary(4, 2, 0)
	keepHolds(t, c, harness.ServicePoint, 1, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	circ := c.Circulations[0]
	past := schemas.FormatTime(time.Now().Add(-time.Minute))
	future := schemas.FormatTime(time.Now().Add(time.Hour))
	place := func(kind, patron, book, expires string) string {
		t.Helper()
		body := map[string]any{"requestType": kind, "requestDate": "2026-03-01T10:00:00.000Z",
			"requesterId": c.IDOf(t, "/users", "users", patron), "itemId": c.IDOf(t, "/item-storage/items", "items", book),
			"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint}
		if expires != "" {
			body["requestExpirationDate"] = expires
		}
		var r struct{ ID string }
		c.DoWith(circ, "POST", "/circulation/requests", body, librarian).Want(t, http.StatusCreated).Decode(t, &r)
		return r.ID
	}
	expireAt := func(id, at string) {
		t.Helper()
		var doc map[string]any
		c.DoWith(circ, "GET", "/circulation/requests/"+id, nil, librarian).Want(t, http.StatusOK).Decode(t, &doc)
		doc["requestExpirationDate"] = at
		c.DoWith(circ, "PUT", "/circulation/requests/"+id, doc, librarian).Want(t, http.StatusNoContent)
	}

	// On the hold shelf, past its expiration date: it stays (set first,
	// so that the passes that close the others have seen it).
	shelved := lib.Items[3][0]
	c.CheckOut(0, shelved, lib.Patrons[3]).Want(t, http.StatusCreated)
	onShelf := place("Hold", lib.Patrons[2], shelved, future)
	c.CheckIn(0, shelved).Want(t, http.StatusOK)
	expireAt(onShelf, past)

	out, shelf := lib.Items[0][0], lib.Items[0][1]
	outID, shelfID := c.IDOf(t, "/item-storage/items", "items", out), c.IDOf(t, "/item-storage/items", "items", shelf)
	c.CheckOut(0, out, lib.Patrons[0]).Want(t, http.StatusCreated)
	first := place("Hold", lib.Patrons[1], out, future)
	second := place("Hold", lib.Patrons[2], out, "")
	before := storedDoc(t, c, "request", first)
	page := place("Page", lib.Patrons[1], shelf, past)
	expireAt(first, past)

	if !harness.Poll(30*time.Second, 50*time.Millisecond, func() bool {
		return requestsOf(t, c, outID)[first] == "Closed - Unfilled -" && requestsOf(t, c, shelfID)[page] == "Closed - Unfilled -"
	}) {
		t.Fatalf("the requests past their date after 30 s: %v, %v", requestsOf(t, c, outID), requestsOf(t, c, shelfID))
	}
	want := before
	delete(want, "position")
	want["status"], want["requestExpirationDate"], want["_version"] = schemas.RequestUnfilled, past, before["_version"].(float64)+2
	if got := storedDoc(t, c, "request", first); !reflect.DeepEqual(got, want) {
		t.Errorf("the expired hold:\n%v\nwant\n%v", got, want)
	}
	if got := requestsOf(t, c, outID)[second]; got != "Open - Not yet filled 1" {
		t.Errorf("the hold behind the expired one: %q, want Open - Not yet filled 1", got)
	}
	if status, _ := itemState(t, c, shelf); status != schemas.ItemAvailable {
		t.Errorf("the book of the expired page: %q, want Available", status)
	}
	if got := readRequest(t, c, onShelf); got.Status != schemas.RequestAwaitingPickup || got.Position != "1" {
		t.Errorf("the hold on the hold shelf: %+v, want it waiting there", got)
	}
	if status, _ := itemState(t, c, shelved); status != schemas.ItemAwaitingPickup {
		t.Errorf("the book on the hold shelf: %q, want Awaiting pickup", status)
	}
	// The passes are timed by whichever storage leads them: on a database
	// other tests' storages sweep too, this one's turn may come after the
	// requests were closed.
	waitFor(t, "this storage's passes timed (checkout_lock_sweeper_work_seconds_count{work=\"request_expiry\"})", func() bool {
		n, found := c.Metric(t, c.Storage, `checkout_lock_sweeper_work_seconds_count{work="request_expiry"}`)
		return found && n >= 1
	})
}
