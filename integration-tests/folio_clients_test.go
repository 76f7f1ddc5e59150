package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// folioBody is one call of a FOLIO route as FOLIO's clients make it: the
// members the route reads, with what those clients add (an id, the
// summaries of a record read and sent back), and a member the route
// reads that, sent with the wrong type, must still be refused.
type folioBody struct {
	route  string // the route's method and path, as the route table names it
	path   string
	body   map[string]any
	status int
	// wrongly is a member of body the route validates, and a value of the
	// wrong type for it.
	wrongly string
	wrong   any
}

// clientExtras are what FOLIO's clients send beside what a route reads:
// the record's id (FOLIO's own samples of these bodies carry one) and the
// summaries of the record they read (FOLIO's user interface sends back
// whole records): a loan's item and borrower, a request's item,
// requester and pickup service point.
func clientExtras(route string, body map[string]any) map[string]any {
	out := maps.Clone(body)
	if out["id"] == nil {
		out["id"] = "8a6b7c52-5d1e-4f8e-9a43-1f2d3c4b5a69"
	}
	out["item"] = map[string]any{"title": "The Name of the Rose", "barcode": "read-before", "status": map[string]any{"name": "Checked out"}}
	if strings.Contains(route, "/requests") {
		out["requester"] = map[string]any{"firstName": "Ada", "lastName": "Lovelace", "barcode": "read-before"}
		out["pickupServicePoint"] = map[string]any{"name": "Circ Desk 2", "pickupLocation": true}
	} else {
		out["borrower"] = map[string]any{"firstName": "Ada", "lastName": "Lovelace", "barcode": "read-before"}
		out["metadata"] = map[string]any{"createdDate": "2026-03-01T10:00:00.000Z"}
	}
	return out
}

// TestFOLIOBodiesAreTakenAsFOLIOTakesThem: every FOLIO route of
// circulation (each route the table marks Lenient: this test fails when one
// is added without a case here) takes a body as FOLIO's clients send it
// — an id, a loan's item and borrower summaries, metadata — as
// mod-circulation does, whose schemas do not close their members
// (check-out-by-barcode-request.json, request.json) and which validates no
// body against them; the members are ignored, never stored. The same
// body with a member the route reads sent with the wrong type is still
// refused 422, naming that member, and changes nothing.
func TestFOLIOBodiesAreTakenAsFOLIOTakesThem(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 6, 0)
	c.Do(c.Storage, "PUT", "/loan-policy-storage/loan-policies/"+lib.PolicyID, map[string]any{"id": lib.PolicyID, "name": "limited",
		"loanable": true, "renewable": true, "renewalsPolicy": map[string]any{"numberAllowed": 5, "renewFromId": "CURRENT_DUE_DATE"},
		"loansPolicy": map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": 3, "intervalId": "Weeks"}}}).
		Want(t, http.StatusNoContent)
	keepHolds(t, c, harness.ServicePoint, 1, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	circ := c.Circulations[0]
	borrower, requester := lib.Patrons[0], lib.Patrons[1]
	items := lib.Items[0]
	requesterID := c.IDOf(t, "/users", "users", requester)
	loanOf := func(barcode string) string {
		t.Helper()
		var id string
		if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT l.id::text FROM %[1]s.loan l JOIN %[1]s.item i ON i.id = l.item_id
			WHERE i.barcode = $1 AND l.status_name = 'Open'`, c.Schema), barcode).Scan(&id); err != nil {
			t.Fatalf("the open loan of %s: %v", barcode, err)
		}
		return id
	}
	// Loans to renew, change the due date of, claim, declare and check in,
	// and two books out to request and move a request between.
	for _, it := range items[1:6] {
		c.CheckOut(0, it, borrower).Want(t, http.StatusCreated)
	}
	elsewhere := lib.Items[2][0]
	c.CheckOut(0, elsewhere, lib.Patrons[2]).Want(t, http.StatusCreated)
	var placed struct{ ID string }
	c.DoWith(circ, "POST", "/circulation/requests", map[string]any{"requestType": "Hold", "requestDate": "2026-03-01T10:00:00.000Z",
		"requesterId": requesterID, "itemId": c.IDOf(t, "/item-storage/items", "items", items[5]), "fulfillmentPreference": "Hold Shelf",
		"pickupServicePointId": harness.ServicePoint}, librarian).Want(t, http.StatusCreated).Decode(t, &placed)
	// The request as FOLIO's Requests app read it, summaries and all.
	var read map[string]any
	c.DoWith(circ, "GET", "/circulation/requests/"+placed.ID, nil, librarian).Want(t, http.StatusOK).Decode(t, &read)
	if read["requester"] == nil || read["item"] == nil {
		t.Fatalf("the request read has no summaries: %v", read)
	}

	// A loan as FOLIO's Users app read it, its due date changed.
	var loanRead map[string]any
	c.DoWith(circ, "GET", "/circulation/loans/"+loanOf(items[5]), nil, librarian).Want(t, http.StatusOK).Decode(t, &loanRead)
	loanRead["dueDate"], loanRead["action"], loanRead["actionComment"] = "2027-03-02T23:59:00Z", schemas.LoanDueDateChanged, ""

	cases := []folioBody{
		{route: "POST /circulation/check-out-by-barcode", path: "/circulation/check-out-by-barcode",
			body:   map[string]any{"itemBarcode": items[0], "userBarcode": borrower, "servicePointId": harness.ServicePoint},
			status: http.StatusCreated, wrongly: "userBarcode", wrong: 7},
		{route: "POST /circulation/renew-by-barcode", path: "/circulation/renew-by-barcode",
			body:   map[string]any{"itemBarcode": items[1], "userBarcode": borrower, "servicePointId": harness.ServicePoint},
			status: http.StatusOK, wrongly: "itemBarcode", wrong: []string{items[1]}},
		{route: "POST /circulation/renew-by-id", path: "/circulation/renew-by-id",
			body: map[string]any{"itemId": c.IDOf(t, "/item-storage/items", "items", items[1]), "userId": c.IDOf(t, "/users", "users", borrower),
				"servicePointId": harness.ServicePoint},
			status: http.StatusOK, wrongly: "userId", wrong: 42},
		{route: "PUT /circulation/loans/{id}", path: "/circulation/loans/" + loanOf(items[5]), body: loanRead,
			status: http.StatusNoContent, wrongly: "dueDate", wrong: 12},
		{route: "POST /circulation/loans/{id}/add-info", path: "/circulation/loans/" + loanOf(items[3]) + "/add-info",
			body:   map[string]any{"action": "staffInfoAdded", "actionComment": "a torn page"},
			status: http.StatusNoContent, wrongly: "actionComment", wrong: []string{"a torn page"}},
		{route: "POST /circulation/loans/{id}/change-due-date", path: "/circulation/loans/" + loanOf(items[1]) + "/change-due-date",
			body:   map[string]any{"dueDate": "2027-03-02T10:00:00.000+01:00"},
			status: http.StatusNoContent, wrongly: "dueDate", wrong: 20270302},
		{route: "POST /circulation/loans/{id}/claim-item-returned", path: "/circulation/loans/" + loanOf(items[2]) + "/claim-item-returned",
			body:   map[string]any{"itemClaimedReturnedDateTime": "2026-03-02T10:00:00.000Z", "comment": "in the book drop"},
			status: http.StatusNoContent, wrongly: "itemClaimedReturnedDateTime", wrong: 20260302},
		{route: "POST /circulation/loans/{id}/declare-item-lost", path: "/circulation/loans/" + loanOf(items[3]) + "/declare-item-lost",
			body:   map[string]any{"declaredLostDateTime": "2026-03-02T10:00:00.000Z", "servicePointId": harness.ServicePoint, "comment": "lost"},
			status: http.StatusNoContent, wrongly: "servicePointId", wrong: true},
		{route: "POST /circulation/check-in-by-barcode", path: "/circulation/check-in-by-barcode",
			body:   map[string]any{"itemBarcode": items[4], "servicePointId": harness.ServicePoint, "checkInDate": time.Now().UTC().Format(time.RFC3339)},
			status: http.StatusOK, wrongly: "checkInDate", wrong: map[string]any{}},
		{route: "POST /circulation/requests", path: "/circulation/requests",
			body: map[string]any{"requestType": "Recall", "requestDate": "2026-03-01T10:00:00.000Z", "requesterId": requesterID,
				"itemId": c.IDOf(t, "/item-storage/items", "items", items[1]), "fulfillmentPreference": "Hold Shelf",
				"pickupServicePointId": harness.ServicePoint},
			status: http.StatusCreated, wrongly: "requestDate", wrong: 1},
		{route: "PUT /circulation/requests/{id}", path: "/circulation/requests/" + placed.ID, body: read,
			status: http.StatusNoContent, wrongly: "position", wrong: "first"},
		{route: "POST /circulation/requests/queue/item/{id}/reorder", path: "/circulation/requests/queue/item/" +
			c.IDOf(t, "/item-storage/items", "items", items[5]) + "/reorder",
			body:   map[string]any{"reorderedQueue": []map[string]any{{"id": placed.ID, "newPosition": 1}}},
			status: http.StatusOK, wrongly: "reorderedQueue", wrong: "all"},
		{route: "POST /circulation/requests/{id}/move", path: "/circulation/requests/" + placed.ID + "/move",
			body:   map[string]any{"destinationItemId": c.IDOf(t, "/item-storage/items", "items", elsewhere), "requestType": "Hold"},
			status: http.StatusOK, wrongly: "destinationItemId", wrong: 12},
	}
	var lenient, covered []string
	for _, r := range schemas.Routes {
		if r.Lenient {
			lenient = append(lenient, r.Method+" "+r.Path)
		}
	}
	for _, tc := range cases {
		covered = append(covered, tc.route)
	}
	slices.Sort(lenient)
	slices.Sort(covered)
	if !slices.Equal(lenient, covered) {
		t.Errorf("FOLIO's routes %v, covered here %v", lenient, covered)
	}
	for _, tc := range cases {
		method := strings.Fields(tc.route)[0]
		// Wrongly typed: refused, naming the member, nothing changed.
		before := c.Snapshot(t)
		bad := clientExtras(tc.route, tc.body)
		bad[tc.wrongly] = tc.wrong
		r := c.DoWith(circ, method, tc.path, bad, librarian).Want(t, http.StatusUnprocessableEntity)
		var env struct {
			Errors []struct {
				Code       string
				Parameters []struct{ Key string }
			}
		}
		r.Decode(t, &env)
		if len(env.Errors) != 1 || env.Errors[0].Code != schemas.CodeValidation || len(env.Errors[0].Parameters) == 0 ||
			env.Errors[0].Parameters[0].Key != tc.wrongly {
			t.Errorf("%s with %s wrongly typed: %s, want one %s naming it alone", tc.route, tc.wrongly, r.Body, schemas.CodeValidation)
		}
		if after := c.Snapshot(t); after != before {
			t.Errorf("%s refused changed the library:\n%s\nwas\n%s", tc.route, after, before)
		}
		// As FOLIO's clients send it: taken.
		c.DoWith(circ, method, tc.path, clientExtras(tc.route, tc.body), librarian).Want(t, tc.status)
	}
	// Nothing a client sent beside what a route reads was stored: not the
	// summaries of the request sent back, not the extras.
	var stored int
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT
		(SELECT count(*) FROM %[1]s.request WHERE jsonb ?| array['item', 'requester', 'pickupServicePoint', 'loan'])
		+ (SELECT count(*) FROM %[1]s.loan WHERE jsonb ?| array['item', 'borrower'])
		+ (SELECT count(*) FROM %[1]s.loan WHERE id = '8a6b7c52-5d1e-4f8e-9a43-1f2d3c4b5a69'::uuid)`, c.Schema)).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("%d records hold what a client sent beside what the route reads", stored)
	}
}

// TestCirculationListsAnswerFOLIOQueriesWithSummaries: the patron's loans
// as FOLIO's Users app lists them, and an item's request queue as its
// Requests app does — a CQL query with sortBy, through storage's one
// translator — answered as mod-circulation answers them, each record with
// its summaries, compared field by field with the records they summarise
// (LoanAPITests' canSearchByUserId, canFilterByLoanStatus,
// canGetALoanById; RequestsAPIRetrievalTests' canGetARequestById). A CQL
// query storage cannot answer is a 422 naming it.
func TestCirculationListsAnswerFOLIOQueriesWithSummaries(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 3, 0)
	keepHolds(t, c, harness.ServicePoint, 1, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	circ := c.Circulations[0]
	patron, items := lib.Patrons[0], lib.Items[0]
	patronID := c.IDOf(t, "/users", "users", patron)
	checkOutOn := func(item, day string) {
		t.Helper()
		c.DoWith(circ, "POST", "/circulation/check-out-by-barcode", map[string]any{"itemBarcode": item, "userBarcode": patron,
			"servicePointId": harness.ServicePoint, "loanDate": "2026-03-" + day + "T10:00:00.000Z"}, librarian).Want(t, http.StatusCreated)
	}
	// Lent on the 5th, the 2nd and the 9th; the last returned.
	checkOutOn(items[0], "05")
	checkOutOn(items[1], "02")
	checkOutOn(items[2], "09")
	c.CheckIn(0, items[2]).Want(t, http.StatusOK)

	var page struct {
		Loans []struct {
			ID, ItemID, UserID, DueDate string
			Item                        struct {
				ID, Title, Barcode string
				Status             struct{ Name string }
			}
			Borrower struct {
				ID, Barcode, LastName, PatronGroup string
			}
			LoanPolicy            struct{ Name string }
			PatronGroupAtCheckout struct{ ID, Name string }
			CheckoutServicePoint  struct {
				Name           string
				PickupLocation bool
			}
			GroupID *string `json:"patronGroupIdAtCheckout"`
		}
		TotalRecords int
	}
	q := url.QueryEscape(fmt.Sprintf(`(userId==%s and status.name<>Closed) sortby dueDate`, patronID))
	c.DoWith(circ, "GET", "/circulation/loans?query="+q, nil, librarian).Want(t, http.StatusOK).Decode(t, &page)
	if page.TotalRecords != 2 || len(page.Loans) != 2 {
		t.Fatalf("the patron's open loans: %+v", page)
	}
	// Storage asked as mod-circulation's fetchers ask it for records by
	// their ids (MultipleRecordFetcher: exactMatchAny, and the pageable
	// maximum for "every match").
	var byID struct {
		Loans        []struct{ ID string }
		TotalRecords int
	}
	ids := url.QueryEscape(fmt.Sprintf(`id==("%s" or "%s")`, page.Loans[0].ID, page.Loans[1].ID))
	c.Do(c.Storage, "GET", "/loan-storage/loans?limit=2147483647&query="+ids, nil).Want(t, http.StatusOK).Decode(t, &byID)
	if byID.TotalRecords != 2 || len(byID.Loans) != 2 {
		t.Errorf("storage's loans by id, limit 2147483647: %+v, want the two", byID)
	}
	var spName string
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT jsonb ->> 'name' FROM %s.service_point WHERE id = $1::uuid`, c.Schema),
		harness.ServicePoint).Scan(&spName); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{items[1], items[0]} {
		l := page.Loans[i]
		itemID := c.IDOf(t, "/item-storage/items", "items", want)
		if l.ItemID != itemID || l.Item.ID != itemID || l.Item.Barcode != want || l.Item.Title != "Item "+want ||
			l.Item.Status.Name != schemas.ItemCheckedOut {
			t.Errorf("loan %d's item: %+v, want %s (%s), checked out", i, l.Item, want, itemID)
		}
		if l.UserID != patronID || l.Borrower.ID != patronID || l.Borrower.Barcode != patron || l.Borrower.LastName != "Patron "+patron ||
			l.Borrower.PatronGroup != lib.GroupID {
			t.Errorf("loan %d's borrower: %+v", i, l.Borrower)
		}
		if l.LoanPolicy.Name != "limited" || l.PatronGroupAtCheckout.ID != lib.GroupID || l.PatronGroupAtCheckout.Name != "patrons" ||
			l.GroupID != nil || l.CheckoutServicePoint.Name != spName || !l.CheckoutServicePoint.PickupLocation {
			t.Errorf("loan %d's policy, group and service point: %+v", i, l)
		}
	}
	if page.Loans[0].DueDate >= page.Loans[1].DueDate {
		t.Errorf("sorted by due date: %s, then %s", page.Loans[0].DueDate, page.Loans[1].DueDate)
	}
	// A query storage does not answer: refused, naming it.
	bad := url.QueryEscape(`userId==` + patronID + ` and (`)
	r := c.DoWith(circ, "GET", "/circulation/loans?query="+bad, nil, librarian).Want(t, http.StatusUnprocessableEntity)
	if codes := r.ErrorCodes(); !slices.Equal(codes, []string{schemas.CodeValidation}) || !strings.Contains(string(r.Body), `"key":"query"`) {
		t.Errorf("a malformed query: %s", r.Body)
	}

	// The queue of the book out, as the Requests app asks for it.
	out := c.IDOf(t, "/item-storage/items", "items", items[0])
	for _, p := range lib.Patrons[1:] {
		c.DoWith(circ, "POST", "/circulation/requests", map[string]any{"requestType": "Hold", "requestDate": "2026-03-10T10:00:00.000Z",
			"requesterId": c.IDOf(t, "/users", "users", p), "itemId": out, "fulfillmentPreference": "Hold Shelf",
			"pickupServicePointId": harness.ServicePoint}, librarian).Want(t, http.StatusCreated)
	}
	var queue struct {
		Requests []struct {
			ItemID, RequesterID string
			Position            int
			Item                struct{ Barcode, Title, Status string }
			Requester           struct {
				LastName, Barcode, PatronGroupID string
				PatronGroup                      struct{ ID, Group string }
			}
			PickupServicePoint struct{ Name string }
			Loan               struct{ DueDate string }
		}
		TotalRecords int
	}
	q = url.QueryEscape(fmt.Sprintf(`(itemId==%s and status==("Open - Not yet filled" or "Open - Awaiting pickup" or "Open - In transit")) sortby position/sort.ascending`, out))
	c.DoWith(circ, "GET", "/circulation/requests?query="+q, nil, librarian).Want(t, http.StatusOK).Decode(t, &queue)
	if queue.TotalRecords != 2 || len(queue.Requests) != 2 {
		t.Fatalf("the queue: %+v", queue)
	}
	for i, r := range queue.Requests {
		p := lib.Patrons[1+i]
		if r.Position != i+1 || r.ItemID != out || r.RequesterID != c.IDOf(t, "/users", "users", p) {
			t.Errorf("request %d: %+v", i, r)
		}
		if r.Item.Barcode != items[0] || r.Item.Title != "Item "+items[0] || r.Item.Status != schemas.ItemCheckedOut ||
			r.Requester.Barcode != p || r.Requester.LastName != "Patron "+p || r.Requester.PatronGroupID != lib.GroupID ||
			r.Requester.PatronGroup.ID != lib.GroupID || r.Requester.PatronGroup.Group != "patrons" ||
			r.PickupServicePoint.Name != spName || r.Loan.DueDate != page.Loans[1].DueDate {
			t.Errorf("request %d's summaries: %+v", i, r)
		}
	}
	// mod-patron's patron account (edge-patron's), as it asks: every
	// match, limit 2147483647, the patron's open loans and open requests.
	var account struct {
		Loans []struct {
			ItemID string
			Item   struct{ Title string }
		}
		TotalRecords int
	}
	q = url.QueryEscape(fmt.Sprintf(`(userId==%s and status.name==Open)`, patronID))
	c.DoWith(circ, "GET", "/circulation/loans?limit=2147483647&query="+q, nil, librarian).Want(t, http.StatusOK).Decode(t, &account)
	if account.TotalRecords != 2 || len(account.Loans) != 2 || account.Loans[0].Item.Title == "" {
		t.Errorf("mod-patron's loans, limit 2147483647: %+v, want the two open ones with their items", account)
	}
	var holds struct {
		Requests []struct {
			ItemID string
			Item   struct{ Barcode string }
		}
		TotalRecords int
	}
	q = url.QueryEscape(fmt.Sprintf(`(requesterId==%s and status==Open*)`, c.IDOf(t, "/users", "users", lib.Patrons[1])))
	c.DoWith(circ, "GET", "/circulation/requests?limit=2147483647&query="+q, nil, librarian).Want(t, http.StatusOK).Decode(t, &holds)
	if holds.TotalRecords != 1 || len(holds.Requests) != 1 || holds.Requests[0].ItemID != out || holds.Requests[0].Item.Barcode != items[0] {
		t.Errorf("mod-patron's requests, limit 2147483647: %+v, want the one for %s", holds, items[0])
	}
	r = c.DoWith(circ, "GET", "/circulation/loans?limit=2147483648", nil, librarian).Want(t, http.StatusUnprocessableEntity)
	if codes := r.ErrorCodes(); !slices.Equal(codes, []string{schemas.CodeInvalidParameter}) {
		t.Errorf("a limit past FOLIO's: %s", r.Body)
	}

	// A loan read by id carries the same summaries.
	var one map[string]json.RawMessage
	c.DoWith(circ, "GET", "/circulation/loans/"+page.Loans[0].ID, nil, librarian).Want(t, http.StatusOK).Decode(t, &one)
	for _, name := range []string{"item", "borrower", "loanPolicy", "patronGroupAtCheckout", "checkoutServicePoint"} {
		if one[name] == nil {
			t.Errorf("the loan read by id has no %s: %s", name, mapKeys(one))
		}
	}
}

// mapKeys is m's keys, sorted, for a message.
func mapKeys(m map[string]json.RawMessage) []string {
	return slices.Sorted(maps.Keys(m))
}

// TestARequestIsBoundedAsSent: a request keeps the members no field of
// FOLIO's describes, as sent (FOLIO's clients send their own), within
// schemas.MaxRequestBytes: one a little under it is placed and keeps
// them; one over it, placed or changed, is refused 422 RECORD_TOO_LARGE
// and nothing is stored, so no request can make its item's queue too
// large to list.
func TestARequestIsBoundedAsSent(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 1, 0)
	keepHolds(t, c, harness.ServicePoint, 1, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	circ := c.Circulations[0]
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated)
	item := c.IDOf(t, "/item-storage/items", "items", lib.Items[0][0])
	request := func(patron, note string) map[string]any {
		return map[string]any{"requestType": "Hold", "requestDate": "2026-03-01T10:00:00.000Z", "requesterId": c.IDOf(t, "/users", "users", patron),
			"itemId": item, "fulfillmentPreference": "Hold Shelf", "pickupServicePointId": harness.ServicePoint, "clientNote": note}
	}
	stored := func() (n int, notes int) {
		t.Helper()
		if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*), coalesce(sum(length(jsonb ->> 'clientNote')), 0)
			FROM %s.request`, c.Schema)).Scan(&n, &notes); err != nil {
			t.Fatal(err)
		}
		return n, notes
	}
	within := strings.Repeat("n", schemas.MaxRequestBytes-2048)
	var placed map[string]any
	c.DoWith(circ, "POST", "/circulation/requests", request(lib.Patrons[1], within), librarian).Want(t, http.StatusCreated).Decode(t, &placed)
	if n, notes := stored(); n != 1 || notes != len(within) {
		t.Fatalf("after a request within the bound: %d requests keeping %d bytes of its note, want 1 keeping %d", n, notes, len(within))
	}
	over := strings.Repeat("o", schemas.MaxRequestBytes)
	for _, call := range []struct {
		method, path string
		body         map[string]any
	}{
		{"POST", "/circulation/requests", request(lib.Patrons[2], over)},
		{"PUT", "/circulation/requests/" + placed["id"].(string), func() map[string]any { placed["clientNote"] = over; return placed }()},
	} {
		res := c.DoWith(circ, call.method, call.path, call.body, librarian).Want(t, http.StatusUnprocessableEntity)
		if codes := res.ErrorCodes(); !slices.Equal(codes, []string{schemas.CodeRecordTooLarge}) {
			t.Fatalf("%s %s over the bound: %v (%s), want %s", call.method, call.path, codes, res.Body, schemas.CodeRecordTooLarge)
		}
		if n, notes := stored(); n != 1 || notes != len(within) {
			t.Fatalf("after %s %s over the bound: %d requests keeping %d bytes of notes, want it unchanged", call.method, call.path, n, notes)
		}
	}
}

// TestALargePageOfLoansCarriesEverySummary: a page of 130 loans of 26
// patrons, asked as mod-patron asks (limit 2147483647), carries every
// loan's item and borrower summaries: the summaries' reads of related
// records, fifty ids each, several in flight at once, each land on their
// own loans.
func TestALargePageOfLoansCarriesEverySummary(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(26, 5, 0)
	itemOf := map[string]string{}
	var wg sync.WaitGroup
	for i, p := range lib.Patrons {
		wg.Go(func() {
			for _, item := range lib.Items[i] {
				c.CheckOut(0, item, p).Want(t, http.StatusCreated)
			}
		})
		for _, item := range lib.Items[i] {
			itemOf[item] = p
		}
	}
	wg.Wait()
	var page struct {
		Loans []struct {
			Item     struct{ Barcode, Title string }
			Borrower struct{ Barcode string }
		}
		TotalRecords int
	}
	librarian := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian))
	c.DoWith(c.Circulations[0], "GET", "/circulation/loans?limit=2147483647&query="+url.QueryEscape("status.name==Open"), nil, librarian).
		Want(t, http.StatusOK).Decode(t, &page)
	if page.TotalRecords != 130 || len(page.Loans) != 130 {
		t.Fatalf("%d loans listed of %d, want 130", len(page.Loans), page.TotalRecords)
	}
	seen := map[string]bool{}
	for _, l := range page.Loans {
		if p, ok := itemOf[l.Item.Barcode]; !ok || l.Item.Title != "Item "+l.Item.Barcode || l.Borrower.Barcode != p || seen[l.Item.Barcode] {
			t.Fatalf("a loan's summaries: item %+v, borrower %q", l.Item, l.Borrower.Barcode)
		}
		seen[l.Item.Barcode] = true
	}
}
