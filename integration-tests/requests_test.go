package integration

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// requestsOf is the item's requests as stored: status and position (""
// for none) by id.
func requestsOf(t *testing.T, c *harness.Cluster, itemID string) map[string]string {
	t.Helper()
	rows, err := c.DB.Query(context.Background(), fmt.Sprintf(`SELECT id::text, status || ' ' || coalesce(jsonb ->> 'position', '-')
		FROM %s.request WHERE item_id = $1::uuid`, c.Schema), itemID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, state string
		if err := rows.Scan(&id, &state); err != nil {
			t.Fatal(err)
		}
		out[id] = state
	}
	return out
}

// wantRefusal checks that r is a 422 whose errors are codes, in order,
// the first with message.
func wantRefusal(t *testing.T, r harness.Response, message string, codes ...string) {
	t.Helper()
	var env struct {
		Errors []struct {
			Message, Code string
		} `json:"errors"`
	}
	r.Want(t, http.StatusUnprocessableEntity).Decode(t, &env)
	var got []string
	for _, e := range env.Errors {
		got = append(got, e.Code)
	}
	if fmt.Sprint(got) != fmt.Sprint(codes) || env.Errors[0].Message != message {
		t.Errorf("refusal %s, want %v with %q", r.Body, codes, message)
	}
}

// TestRequestsThroughCirculation: a librarian places, moves and cancels
// requests through circulation, as FOLIO's own tests expect it
// (RequestsAPICreationTests, ItemStatusRequestRulesTests, MoveRequestTests,
// RequestsAPIUpdatingTests, RecallRequestsTests): a hold of a book on
// the shelf is refused and a page of it pages it; a recall of a book out
// shortens its loan once; the borrower may not request what they hold,
// nor a patron twice; a request moved joins the end of its new item's
// queue, leaving its place in the old one; a cancelled request gives its
// place up, and a cancelled page puts its book back on the shelf; a
// kiosk may not place requests at all.
func TestRequestsThroughCirculation(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 2, 0)
	here := harness.ServicePoint
	keepHolds(t, c, here, 1, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	circ := c.Circulations[0]
	owner, first, second := lib.Patrons[0], lib.Patrons[1], lib.Patrons[2]
	out, shelf := lib.Items[0][0], lib.Items[0][1]
	outID, shelfID := c.IDOf(t, "/item-storage/items", "items", out), c.IDOf(t, "/item-storage/items", "items", shelf)
	place := func(kind, patron, itemID string, headers map[string]string) harness.Response {
		return c.DoWith(circ, "POST", "/circulation/requests", map[string]any{"requestType": kind, "requestDate": "2026-03-01T10:00:00.000Z",
			"requesterId": c.IDOf(t, "/users", "users", patron), "itemId": itemID, "fulfillmentPreference": "Hold Shelf",
			"pickupServicePointId": here}, headers)
	}
	placed := func(kind, patron, itemID string) string {
		t.Helper()
		var r struct{ ID, Status string }
		res := place(kind, patron, itemID, librarian).Want(t, http.StatusCreated)
		res.Decode(t, &r)
		if r.Status != schemas.RequestNotYetFilled || res.Header.Get("Location") != "/circulation/requests/"+r.ID {
			t.Errorf("%s placed: %s (Location %q)", kind, res.Body, res.Header.Get("Location"))
		}
		return r.ID
	}
	c.CheckOut(0, out, owner).Want(t, http.StatusCreated)
	var loan struct {
		DueDate  string `json:"dueDate"`
		Action   string `json:"action"`
		ByRecall bool   `json:"dueDateChangedByRecall"`
	}
	readLoan := func() {
		t.Helper()
		var raw []byte
		if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT jsonb FROM %s.loan WHERE item_id = $1::uuid`, c.Schema), outID).Scan(&raw); err != nil {
			t.Fatal(err)
		}
		harness.Response{Body: raw}.Decode(t, &loan)
	}
	readLoan()
	dueBefore := loan.DueDate

	// A kiosk places no request.
	place("Page", first, shelfID, map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}).
		Want(t, http.StatusForbidden)
	// A hold of a book on the shelf: refused, nothing written.
	wantRefusal(t, place("Hold", first, shelfID, librarian), "Hold requests are not allowed for this patron and item combination",
		schemas.CodeRequestingDisallowed)
	if got := requestsOf(t, c, shelfID); len(got) != 0 {
		t.Errorf("a refused request was stored: %v", got)
	}
	// A page of it pages it.
	page := placed("Page", first, shelfID)
	if status, _ := itemState(t, c, shelf); status != schemas.ItemPaged {
		t.Errorf("the paged book is %q, want Paged", status)
	}

	// A recall of the book out shortens its loan, once.
	recall := placed("Recall", first, outID)
	readLoan()
	if loan.Action != "recallrequested" || !loan.ByRecall || loan.DueDate >= dueBefore {
		t.Errorf("the recalled loan: %+v, due %s before", loan, dueBefore)
	}
	recalledDue := loan.DueDate
	hold := placed("Hold", second, outID)
	readLoan()
	if loan.DueDate != recalledDue {
		t.Errorf("a hold after the recall moved the due date again: %s, was %s", loan.DueDate, recalledDue)
	}
	wantRefusal(t, place("Hold", owner, outID, librarian), "This requester currently has this item on loan.", schemas.CodeItemAlreadyLoaned)
	wantRefusal(t, place("Hold", second, outID, librarian), "This requester already has an open request for this item",
		schemas.CodeItemAlreadyRequested)

	// The hold moves to the paged book: the end of its queue.
	var moved struct{ ItemID, Position any }
	c.DoWith(circ, "POST", "/circulation/requests/"+hold+"/move", map[string]any{"destinationItemId": shelfID}, librarian).
		Want(t, http.StatusOK).Decode(t, &moved)
	if got, want := requestsOf(t, c, shelfID), map[string]string{page: "Open - Not yet filled 1", hold: "Open - Not yet filled 2"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the paged book's queue after the move: %v, want %v", got, want)
	}
	// A page cannot move onto a book that is out, where its requester
	// has a recall already: both reasons, and nothing moves.
	wantRefusal(t, c.DoWith(circ, "POST", "/circulation/requests/"+page+"/move", map[string]any{"destinationItemId": outID}, librarian),
		"Page requests are not allowed for this patron and item combination", schemas.CodeRequestingDisallowed, schemas.CodeItemAlreadyRequested)
	if got := requestsOf(t, c, shelfID); got[page] != "Open - Not yet filled 1" {
		t.Errorf("a refused move moved the page: %v", got)
	}

	// The recall is cancelled: it gives its place up.
	var doc map[string]any
	c.DoWith(circ, "GET", "/circulation/requests/"+recall, nil, librarian).Want(t, http.StatusOK).Decode(t, &doc)
	doc["status"] = schemas.RequestCancelled
	c.DoWith(circ, "PUT", "/circulation/requests/"+recall, doc, librarian).Want(t, http.StatusNoContent)
	if got := requestsOf(t, c, outID); got[recall] != "Closed - Cancelled -" || len(got) != 1 {
		t.Errorf("the book out's requests after the cancel: %v", got)
	}
	// A closed request is not changed again.
	doc["status"] = schemas.RequestNotYetFilled
	c.DoWith(circ, "PUT", "/circulation/requests/"+recall, doc, librarian).Want(t, http.StatusUnprocessableEntity)
	// The page is cancelled: its book goes back on the shelf, and the
	// hold behind it moves up.
	c.DoWith(circ, "GET", "/circulation/requests/"+page, nil, librarian).Want(t, http.StatusOK).Decode(t, &doc)
	doc["status"] = schemas.RequestCancelled
	c.DoWith(circ, "PUT", "/circulation/requests/"+page, doc, librarian).Want(t, http.StatusNoContent)
	if status, _ := itemState(t, c, shelf); status != schemas.ItemAvailable {
		t.Errorf("the book after its page was cancelled: %q, want Available", status)
	}
	if got := requestsOf(t, c, shelfID); got[hold] != "Open - Not yet filled 1" {
		t.Errorf("the hold after the page was cancelled: %v", got)
	}
	var list struct {
		Requests     []struct{ ID string }
		TotalRecords int
	}
	c.DoWith(circ, "GET", "/circulation/requests?itemId="+shelfID, nil, librarian).Want(t, http.StatusOK).Decode(t, &list)
	if list.TotalRecords != 2 || list.Requests[0].ID != hold || list.Requests[1].ID != page {
		t.Errorf("the paged book's requests, listed: %+v", list)
	}
}

// TestAPageIsGrantedOnce: patrons page the same book on the shelf at
// once, round after round: one page holds (the book Paged at _version
// 2, one open request at position 1, each announced once), every other
// is refused 422 REQUESTING_DISALLOWED and stores and announces nothing.
func TestAPageIsGrantedOnce(t *testing.T) {
	t.Parallel()
	const patrons, rounds = 8, 4
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	lib := c.SetupLibrary(patrons, rounds, 0)
	keepHolds(t, c, harness.ServicePoint, 1, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	ids := make([]string, patrons)
	for i, p := range lib.Patrons {
		ids[i] = c.IDOf(t, "/users", "users", p)
	}
	for round := range rounds {
		book := lib.Items[0][round]
		bookID := c.IDOf(t, "/item-storage/items", "items", book)
		statuses := make([]int, patrons)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range patrons {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses[i] = c.DoWith(c.Circulations[i%2], "POST", "/circulation/requests", map[string]any{"requestType": "Page",
					"requestDate": time.Now().UTC().Format(time.RFC3339), "requesterId": ids[i], "itemId": bookID,
					"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint}, librarian).Status
			}()
		}
		close(start)
		wg.Wait()
		granted := 0
		for i, s := range statuses {
			switch s {
			case http.StatusCreated:
				granted++
			case http.StatusUnprocessableEntity:
			default:
				t.Errorf("round %d, patron %d: %d", round, i, s)
			}
		}
		got := requestsOf(t, c, bookID)
		var version int
		if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT version FROM %s.item WHERE id = $1::uuid`, c.Schema), bookID).Scan(&version); err != nil {
			t.Fatal(err)
		}
		status, _ := itemState(t, c, book)
		if granted != 1 || len(got) != 1 || status != schemas.ItemPaged || version != 2 {
			t.Errorf("round %d: %d granted, requests %v, book %q at _version %d; want one page, Paged at 2", round, granted, got, status, version)
		}
		for _, state := range got {
			if state != "Open - Not yet filled 1" {
				t.Errorf("round %d: the page %q, want Open - Not yet filled 1", round, state)
			}
		}
		// Announced as committed: the one page created, the book Paged once.
		var created, paged int
		if err := c.DB.QueryRow(context.Background(), `SELECT
		  (SELECT count(*) FROM circulation_storage.outbox WHERE tenant_id = $1 AND kind = 'request' AND type = 'CREATED' AND data #>> '{new,itemId}' = $2),
		  (SELECT count(*) FROM circulation_storage.outbox WHERE tenant_id = $1 AND kind = 'item' AND type = 'UPDATED' AND data #>> '{new,id}' = $2
		      AND data #>> '{new,status,name}' = 'Paged')`, c.Tenant, bookID).Scan(&created, &paged); err != nil {
			t.Fatal(err)
		}
		if created != 1 || paged != 1 {
			t.Errorf("round %d: %d request CREATED and %d item Paged events, want one of each", round, created, paged)
		}
	}
}
