package integration

import (
	"maps"
	"net/http"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// FOLIO's Karate scenarios change and cancel requests through PUT
// /circulation/requests/{id} with bodies that name no _version, since
// FOLIO's request storage keeps none (folio-integration-tests:
// mod-circulation's requests.feature and its samples, mod-inn-reach's
// inn-reach-transaction.feature). The tests here send those very bodies,
// filled in as the scenarios fill them, across the real binaries; the
// scenarios' other calls (users, items, check-outs, check-ins) are made as
// this project's tests make them.

// karateIDs are the records FOLIO's scenarios name that this project
// keeps no record of: an instance, its holdings and a cancellation reason,
// named by id in their bodies and stored as sent.
type karateIDs struct {
	instance, holdings, reason string
}

func newKarateIDs() karateIDs {
	return karateIDs{instance: uuid.NewString(), holdings: uuid.NewString(), reason: uuid.NewString()}
}

// placeBody is FOLIO's samples/request/request-entity-request.json as the
// scenarios' @PostRequest fills it in.
func (k karateIDs) placeBody(id, requestType, requesterID, itemID, pickup string) map[string]any {
	return map[string]any{"id": id, "requesterId": requesterID, "itemId": itemID, "instanceId": k.instance,
		"holdingsRecordId": k.holdings, "requestType": requestType, "requestLevel": "Item",
		"fulfillmentPreference": "Hold Shelf", "pickupServicePointId": pickup, "requestDate": "2021-10-27T15:51:02Z"}
}

// cancelBody is FOLIO's samples/cancel-request-entity-request.json as the
// scenarios "Cancel request" and "Generate hold shelf clearance report for
// a location" fill it in: no _version.
func (k karateIDs) cancelBody(requestType, requesterID, itemID, pickup string) map[string]any {
	return map[string]any{"cancellationReasonId": k.reason, "cancellationAdditionalInformation": "Patron Cancelled",
		"cancelledByUserId": requesterID, "cancelledDate": "2022-04-06T10:26:40.115Z", "fulfillmentPreference": "Hold Shelf",
		"instanceId": k.instance, "requesterId": requesterID, "requestDate": "2021-10-27T15:51:02Z", "requestLevel": "Item",
		"requestType": requestType, "holdingsRecordId": k.holdings, "pickupServicePointId": pickup, "itemId": itemID,
		"status": schemas.RequestCancelled}
}

// cancelled is the request stored before (storedDoc) as a cancellation
// without _version leaves it: closed "Closed - Cancelled" with the
// cancellation's members as sent, no position, one version on, and
// nothing else of the body written.
func cancelled(before, body map[string]any) map[string]any {
	want := maps.Clone(before)
	delete(want, "position")
	for _, name := range []string{"status", "cancellationReasonId", "cancelledByUserId", "cancelledDate", "cancellationAdditionalInformation"} {
		if v, ok := body[name]; ok {
			want[name] = v
		}
	}
	want["_version"] = before["_version"].(float64) + 1
	return want
}

// karateServicePoint is a second pickup location, as the scenarios'
// @PostServicePoint makes one.
func karateServicePoint(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	var sp struct{ ID string }
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"name": "Karate desk", "code": "karate", "discoveryDisplayName": "Karate desk",
		"pickupLocation": true, "holdShelfExpiryPeriod": map[string]any{"duration": 2, "intervalId": "Days"}}).
		Want(t, http.StatusCreated).Decode(t, &sp)
	return sp.ID
}

// TestFOLIOKarateCancelsRequests: FOLIO's Karate cancels, their bodies
// without _version, are answered 204 and cancel the request, as in FOLIO
// (the scenario then reads it "Closed - Cancelled"): requests.feature's
// "Cancel request" of a page, whose book goes back on the shelf; the
// cancel in "Generate hold shelf clearance report for a location" of a
// hold waiting on the hold shelf, whose book leaves it; and
// inn-reach-transaction.feature's "Update Request" of a page on the hold
// shelf, its body (samples/patron-hold/update-request.json) the request
// as read with its summaries, metadata and position. Each request is
// stored as it was but for the cancellation: its status and the
// cancellation's members as sent, no position, one version on; what else
// the bodies say (their instance and holdings, request date, a position,
// a hold shelf date) is not written.
func TestFOLIOKarateCancelsRequests(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 3, 0)
	keepHolds(t, c, harness.ServicePoint, 3, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	circ := c.Circulations[0]
	k := newKarateIDs()
	borrower, requester := lib.Patrons[0], lib.Patrons[1]
	requesterID := c.IDOf(t, "/users", "users", requester)
	place := func(requestType, itemID string) string {
		t.Helper()
		id := uuid.NewString()
		var r struct{ ID, Status string }
		c.DoWith(circ, "POST", "/circulation/requests", k.placeBody(id, requestType, requesterID, itemID, harness.ServicePoint), librarian).
			Want(t, http.StatusCreated).Decode(t, &r)
		if r.ID != id || r.Status != schemas.RequestNotYetFilled {
			t.Fatalf("the %s placed: %+v, want %s %s", requestType, r, id, schemas.RequestNotYetFilled)
		}
		return id
	}
	cancel := func(scenario, id string, body map[string]any) {
		t.Helper()
		before := storedDoc(t, c, "request", id)
		c.DoWith(circ, "PUT", "/circulation/requests/"+id, body, librarian).Want(t, http.StatusNoContent)
		var read struct{ Status string }
		c.DoWith(circ, "GET", "/circulation/requests/"+id, nil, librarian).Want(t, http.StatusOK).Decode(t, &read)
		if read.Status != schemas.RequestCancelled {
			t.Errorf("%s: the request read after the cancel is %q, want %q", scenario, read.Status, schemas.RequestCancelled)
		}
		if got, want := storedDoc(t, c, "request", id), cancelled(before, body); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: the request stored:\n%v\nwant\n%v", scenario, got, want)
		}
	}

	// "Cancel request": a page of a book on the shelf.
	shelf := lib.Items[0][0]
	shelfID := c.IDOf(t, "/item-storage/items", "items", shelf)
	page := place(schemas.RequestTypePage, shelfID)
	cancel("Cancel request", page, k.cancelBody(schemas.RequestTypePage, requesterID, shelfID, harness.ServicePoint))
	if status, _ := itemState(t, c, shelf); status != schemas.ItemAvailable {
		t.Errorf("the book whose page was cancelled is %q, want %s", status, schemas.ItemAvailable)
	}

	// "Generate hold shelf clearance report for a location": a hold of a
	// book out, checked in where it is to be picked up, then cancelled.
	out := lib.Items[0][1]
	outID := c.IDOf(t, "/item-storage/items", "items", out)
	c.CheckOut(0, out, borrower).Want(t, http.StatusCreated)
	hold := place(schemas.RequestTypeHold, outID)
	var checkedIn struct {
		Item struct{ Status struct{ Name string } }
	}
	c.CheckIn(0, out).Want(t, http.StatusOK).Decode(t, &checkedIn)
	if checkedIn.Item.Status.Name != schemas.ItemAwaitingPickup {
		t.Fatalf("the held book checked in is %q, want %s", checkedIn.Item.Status.Name, schemas.ItemAwaitingPickup)
	}
	cancel("Generate hold shelf clearance report", hold, k.cancelBody(schemas.RequestTypeHold, requesterID, outID, harness.ServicePoint))
	if status, _ := itemState(t, c, out); status != schemas.ItemAvailable {
		t.Errorf("the book whose hold on the shelf was cancelled is %q, want %s", status, schemas.ItemAvailable)
	}

	// "Update Request" (mod-inn-reach): a page checked in to the hold
	// shelf, cancelled with the request as read.
	paged := lib.Items[0][2]
	pagedID := c.IDOf(t, "/item-storage/items", "items", paged)
	innReach := place(schemas.RequestTypePage, pagedID)
	c.CheckIn(0, paged).Want(t, http.StatusOK)
	if got := readRequest(t, c, innReach); got.Status != schemas.RequestAwaitingPickup {
		t.Fatalf("the page checked in is %+v, want it %s", got, schemas.RequestAwaitingPickup)
	}
	update := map[string]any{
		"id":               innReach,
		"requestLevel":     "Item",
		"requestType":      "Page",
		"requestDate":      "2022-10-25T05:58:50.534+00:00",
		"patronComments":   "INN-Reach request: Patron Agency - fl2g1, Pickup Location - fl2g1:fli02 Agency 1:fl2g1 Delivery Stop",
		"requesterId":      requesterID,
		"instanceId":       k.instance,
		"holdingsRecordId": k.holdings,
		"itemId":           pagedID,
		"status":           schemas.RequestCancelled,
		"position":         1,
		"instance":         map[string]any{"title": "fool moon", "contributorNames": []any{map[string]any{"name": "INN-Reach author"}}},
		"item": map[string]any{"barcode": paged, "location": map[string]any{"name": "Main Library", "libraryName": "Datalogisk Institut",
			"code": "KU/CC/DI/M"}, "status": "Awaiting pickup", "callNumber": "abcd", "callNumberComponents": map[string]any{"callNumber": "abcd"}},
		"requester": map[string]any{"lastName": "NyHFm", "firstName": "UqDkv", "barcode": requester,
			"patronGroup": map[string]any{"id": lib.GroupID, "group": "Vnnnz", "desc": "For Testing"}, "patronGroupId": lib.GroupID},
		"fulfillmentPreference":   "Hold Shelf",
		"holdShelfExpirationDate": "2022-11-15T23:59:59.000+00:00",
		"pickupServicePointId":    harness.ServicePoint,
		"metadata": map[string]any{"createdDate": "2022-10-25T05:58:50.730+00:00", "createdByUserId": "00000000-1111-5555-9999-999999999992",
			"updatedDate": "2022-10-25T05:58:53.842+00:00", "updatedByUserId": "00000000-1111-5555-9999-999999999992"},
		"pickupServicePoint": map[string]any{"name": "service point name AaxmM", "code": "fl2g1",
			"discoveryDisplayName": "service point display name", "description": nil, "shelvingLagTime": nil, "pickupLocation": true},
	}
	cancel("Update Request", innReach, update)
	if status, _ := itemState(t, c, paged); status != schemas.ItemAvailable {
		t.Errorf("the book whose page on the shelf was cancelled is %q, want %s", status, schemas.ItemAvailable)
	}
}

// heldRequest is what holdOnALentItem made: hold id of patron 1
// (requesterID) on the first of two items (itemIDs) lent to patron 0,
// placed by the librarian with FOLIO's Karate ids (k); elsewhere is a
// second pickup point.
type heldRequest struct {
	id, requesterID, elsewhere string
	itemIDs                    [2]string
	librarian                  map[string]string
	k                          karateIDs
}

// holdOnALentItem lends patron 0 the first two items of lib, has the
// librarian place patron 1's hold on the first, and keeps holds three
// days on the shelf: the request the FOLIO clients' changes start from.
func holdOnALentItem(t *testing.T, c *harness.Cluster, lib harness.Library) heldRequest {
	t.Helper()
	keepHolds(t, c, harness.ServicePoint, 3, "Days")
	h := heldRequest{id: uuid.NewString(), requesterID: c.IDOf(t, "/users", "users", lib.Patrons[1]), elsewhere: karateServicePoint(t, c),
		librarian: map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)},
		k:         newKarateIDs()}
	for i := range h.itemIDs {
		h.itemIDs[i] = c.IDOf(t, "/item-storage/items", "items", lib.Items[0][i])
		c.CheckOut(0, lib.Items[0][i], lib.Patrons[0]).Want(t, http.StatusCreated)
	}
	c.DoWith(c.Circulations[0], "POST", "/circulation/requests",
		h.k.placeBody(h.id, schemas.RequestTypeHold, h.requesterID, h.itemIDs[0], harness.ServicePoint), h.librarian).
		Want(t, http.StatusCreated)
	return h
}

// TestFOLIOClientsChangeARequestWithoutVersion: a change of an open
// request through circulation, its body as FOLIO's clients send it
// (request-entity-request.json, without _version) with another pickup
// point and an expiration date, is 204 and writes those, one version on,
// the request otherwise as stored: the body's other members (another
// item, type, date and position, an open status of its own) are the
// request as its client read it, and not written. A closed status other
// than a cancellation is refused 422, naming it, nothing written. The
// same body naming a _version another write moved on is refused 409
// VERSION_CONFLICT, as before, nothing written.
func TestFOLIOClientsChangeARequestWithoutVersion(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(3, 2, 0)
	h := holdOnALentItem(t, c, lib)
	elsewhere, librarian, circ, k, id := h.elsewhere, h.librarian, c.Circulations[0], h.k, h.id
	requesterID := h.requesterID
	outID, otherID := h.itemIDs[0], h.itemIDs[1]
	before := storedDoc(t, c, "request", id)

	expires := schemas.FormatTime(time.Now().Add(30 * 24 * time.Hour))
	body := k.placeBody(id, schemas.RequestTypeRecall, requesterID, otherID, elsewhere)
	body["requestExpirationDate"], body["requestDate"], body["position"], body["status"] = expires, "2020-10-10T00:00:00Z", 3, schemas.RequestAwaitingPickup
	c.DoWith(circ, "PUT", "/circulation/requests/"+id, body, librarian).Want(t, http.StatusNoContent)
	want := maps.Clone(before)
	want["pickupServicePointId"], want["requestExpirationDate"], want["_version"] = elsewhere, expires, before["_version"].(float64)+1
	changed := storedDoc(t, c, "request", id)
	if !reflect.DeepEqual(changed, want) {
		t.Errorf("the request changed without _version:\n%v\nwant\n%v", changed, want)
	}

	// Another closed status: refused, nothing written.
	snapshot := c.Snapshot(t)
	body = k.placeBody(id, schemas.RequestTypeHold, requesterID, outID, harness.ServicePoint)
	body["status"] = schemas.RequestFilled
	wantRefusal(t, c.DoWith(circ, "PUT", "/circulation/requests/"+id, body, librarian),
		`status: a request is closed through this route only by cancelling it ("Closed - Cancelled"); send its _version to write "Closed - Filled"`,
		schemas.CodeValidation)
	// A stale _version: refused, as ever.
	body["status"], body["_version"] = schemas.RequestNotYetFilled, before["_version"]
	r := c.DoWith(circ, "PUT", "/circulation/requests/"+id, body, librarian).Want(t, http.StatusConflict)
	if code, params := envelopeError(t, r); code != schemas.CodeVersionConflict || params["_version"] != "2" {
		t.Errorf("a replace at the version read before the change: %s, want %s naming _version 2", r.Body, schemas.CodeVersionConflict)
	}
	if after := c.Snapshot(t); after != snapshot {
		t.Errorf("refused changes wrote:\n%s\nwas\n%s", after, snapshot)
	}
}

// TestAStaleCancelOfAFilledRequestChangesNothing: FOLIO's cancel of a
// page, without _version, is read by circulation while the page is open;
// its write is held on its way to storage while the requester checks the
// book out, which fills the page. Let go, the write is refused by the
// version it was made at, and the cancel, applied again to the request as
// read again, finds it filled: 422, a closed request is not changed, and
// the request stays exactly as the check-out left it, the book out to
// the requester.
func TestAStaleCancelOfAFilledRequestChangesNothing(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageProxy: true})
	lib := c.SetupLibrary(2, 1, 0)
	keepHolds(t, c, harness.ServicePoint, 3, "Days")
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	circ := c.Circulations[0]
	k := newKarateIDs()
	requester := lib.Patrons[1]
	requesterID := c.IDOf(t, "/users", "users", requester)
	book := lib.Items[0][0]
	bookID := c.IDOf(t, "/item-storage/items", "items", book)
	id := uuid.NewString()
	c.DoWith(circ, "POST", "/circulation/requests", k.placeBody(id, schemas.RequestTypePage, requesterID, bookID, harness.ServicePoint), librarian).
		Want(t, http.StatusCreated)

	arrived, release := c.StorageProxy.Hold("PUT /request-storage/requests/")
	defer release()
	var stale harness.Response
	var wg sync.WaitGroup
	wg.Go(func() {
		stale = c.DoWith(circ, "PUT", "/circulation/requests/"+id, k.cancelBody(schemas.RequestTypePage, requesterID, bookID, harness.ServicePoint), librarian)
	})
	<-arrived
	c.CheckOut(0, book, requester).Want(t, http.StatusCreated)
	filled := storedDoc(t, c, "request", id)
	if filled["status"] != schemas.RequestFilled {
		t.Fatalf("the page after its requester's check-out: %v, want it %s", filled, schemas.RequestFilled)
	}
	release()
	wg.Wait()
	wantRefusal(t, stale, "Request "+id+" is closed (Closed - Filled): a closed request is not changed", schemas.CodeValidation)
	if got := storedDoc(t, c, "request", id); !reflect.DeepEqual(got, filled) {
		t.Errorf("the filled page after the stale cancel:\n%v\nwant it as the check-out left it\n%v", got, filled)
	}
	if status, _ := itemState(t, c, book); status != schemas.ItemCheckedOut || c.OpenLoans(t, requester) != 1 {
		t.Errorf("the book after the stale cancel is %q, %d loans of the requester; want it checked out to them", status, c.OpenLoans(t, requester))
	}
}

// TestAChangeWithoutVersionKeepsWhatCameBetween: changes without
// _version, as FOLIO's clients send them, each read before another write
// of the request that comes first while its own is held on its way to
// storage, never undo that write: the change is applied again to the
// request as it is then. An expiration date set while the request moves
// to another item's queue lands on the request moved (its item, type and
// place there kept); a cancel read before both, let go after another
// client's change of its pickup point, cancels the request where it is,
// the pickup point kept. Each is one version on from the write before it.
func TestAChangeWithoutVersionKeepsWhatCameBetween(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true, StorageProxy: true})
	lib := c.SetupLibrary(2, 2, 0)
	h := holdOnALentItem(t, c, lib)
	elsewhere, librarian, circ, k, id := h.elsewhere, h.librarian, c.Circulations[0], h.k, h.id
	requesterID := h.requesterID
	fromID, toID := h.itemIDs[0], h.itemIDs[1]
	// The request as its clients read it now: at the first item, picked
	// up here.
	read := k.placeBody(id, schemas.RequestTypeHold, requesterID, fromID, harness.ServicePoint)
	read["status"], read["position"] = schemas.RequestNotYetFilled, 1
	// held sends body without _version, its write held on its way to
	// storage while between writes the request, and answers it.
	held := func(body map[string]any, between func()) harness.Response {
		t.Helper()
		arrived, release := c.StorageProxy.Hold("PUT /request-storage/requests/")
		defer release()
		var r harness.Response
		var wg sync.WaitGroup
		wg.Go(func() { r = c.DoWith(circ, "PUT", "/circulation/requests/"+id, body, librarian) })
		<-arrived
		between()
		release()
		wg.Wait()
		return r
	}

	expires := schemas.FormatTime(time.Now().Add(30 * 24 * time.Hour))
	change := maps.Clone(read)
	change["requestExpirationDate"] = expires
	var moved map[string]any
	held(change, func() {
		c.DoWith(circ, "POST", "/circulation/requests/"+id+"/move", map[string]any{"destinationItemId": toID, "requestType": schemas.RequestTypeRecall}, librarian).
			Want(t, http.StatusOK)
		moved = storedDoc(t, c, "request", id)
	}).Want(t, http.StatusNoContent)
	want := maps.Clone(moved)
	want["requestExpirationDate"], want["_version"] = expires, moved["_version"].(float64)+1
	if got := storedDoc(t, c, "request", id); !reflect.DeepEqual(got, want) {
		t.Errorf("the request changed while it moved:\n%v\nwant the change on the request moved\n%v", got, want)
	}
	if want["itemId"] != toID || want["requestType"] != schemas.RequestTypeRecall || want["position"] != 1.0 {
		t.Errorf("the request moved: %v, want it the first recall of %s", want, toID)
	}

	var repicked map[string]any
	r := held(k.cancelBody(schemas.RequestTypeHold, requesterID, fromID, harness.ServicePoint), func() {
		var doc map[string]any
		c.DoWith(circ, "GET", "/circulation/requests/"+id, nil, librarian).Want(t, http.StatusOK).Decode(t, &doc)
		doc["pickupServicePointId"] = elsewhere
		c.DoWith(circ, "PUT", "/circulation/requests/"+id, doc, librarian).Want(t, http.StatusNoContent)
		repicked = storedDoc(t, c, "request", id)
	})
	r.Want(t, http.StatusNoContent)
	if repicked["pickupServicePointId"] != elsewhere {
		t.Fatalf("the pickup point changed: %v, want %s", repicked, elsewhere)
	}
	if got, want := storedDoc(t, c, "request", id), cancelled(repicked, k.cancelBody(schemas.RequestTypeHold, requesterID, fromID, harness.ServicePoint)); !reflect.DeepEqual(got, want) {
		t.Errorf("the request cancelled after its pickup point changed:\n%v\nwant\n%v", got, want)
	}
	if got := requestsOf(t, c, fromID); len(got) != 0 {
		t.Errorf("the first item's requests after the move: %v, want none", got)
	}
}
