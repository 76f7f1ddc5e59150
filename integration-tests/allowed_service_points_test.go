package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/google/uuid"
)

// wantJSON checks that r's body is the JSON value want, member for member.
func wantJSON(t *testing.T, r harness.Response, want any) {
	t.Helper()
	var got, expected any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatalf("answer %s: %v", r.Body, err)
	}
	b, _ := json.Marshal(want)
	_ = json.Unmarshal(b, &expected)
	if !reflect.DeepEqual(got, expected) {
		t.Errorf("answer %s, want %s", r.Body, b)
	}
}

// envelope is FOLIO's error envelope of one error: message, code and
// parameters (key, value pairs).
func envelope(message, code string, params ...string) map[string]any {
	e := map[string]any{"message": message, "code": code}
	var ps []map[string]string
	for i := 0; i+1 < len(params); i += 2 {
		ps = append(ps, map[string]string{"key": params[i], "value": params[i+1]})
	}
	if len(ps) > 0 {
		e["parameters"] = ps
	}
	return map[string]any{"errors": []any{e}}
}

// TestAllowedServicePoints: where a request may be picked up, across the
// real binaries, as FOLIO's own tests expect it (AllowedServicePointsAPITests;
// RequestsAPICreationTests' itemLevelRequestIsNotPlacedWhenRequestPolicy
// DisallowsRequestedPickupServicePoint). The request policy lets pages be
// picked up at the back desk only, holds at the annex only, and recalls
// at every pickup location. GET /circulation/requests/allowed-service-points
// answers, for each type the item's status and the policy allow, those
// pickup locations by name (never the basement desk, which is none): for a
// request to be created, one to be moved (its requester, the item named)
// and one to be replaced (its own item, every type whatever the status).
// A page to pick up at the annex is refused 422 REQUEST_PICKUP_SERVICE_
// POINT_IS_NOT_ALLOWED with the point, the type and the policy, nothing
// written; at the back desk it holds. A request moved is judged there as
// placed: a recall moved as a hold to a pickup point holds do not allow
// stays where it was. Queries that are not one of FOLIO's combinations
// are refused 400 in FOLIO's words, ids that name nothing 422.
func TestAllowedServicePoints(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(4, 2, 0)
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	circ := c.Circulations[0]
	ctx := context.Background()

	// The back desk (the cluster's service point) and the annex are
	// pickup locations; the basement is not.
	back := harness.ServicePoint
	keepHolds(t, c, back, 1, "Days")
	annex, basement := uuid.NewString(), uuid.NewString()
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"id": annex, "name": "Annex", "code": "annex",
		"discoveryDisplayName": "The annex", "pickupLocation": true}).Want(t, http.StatusCreated)
	c.Do(c.Storage, "POST", "/service-points", map[string]any{"id": basement, "name": "Basement", "code": "basement",
		"discoveryDisplayName": "The basement", "pickupLocation": false}).Want(t, http.StatusCreated)
	var policy struct{ ID string }
	c.Do(c.Storage, "POST", "/request-policy-storage/request-policies", map[string]any{"name": "Pages at the back desk",
		"requestTypes":         []string{"Page", "Hold", "Recall"},
		"allowedServicePoints": map[string]any{"Page": []string{back}, "Hold": []string{annex, basement}, "Recall": nil}}).
		Want(t, http.StatusCreated).Decode(t, &policy)
	var rules map[string]any
	c.Do(c.Storage, "GET", "/circulation-rules-storage", nil).Want(t, http.StatusOK).Decode(t, &rules)
	rules["fallbackRequestPolicyId"] = policy.ID
	c.Do(c.Storage, "PUT", "/circulation-rules-storage", rules).Want(t, http.StatusNoContent)

	owner := lib.Patrons[0]
	ownerID, firstID := c.IDOf(t, "/users", "users", owner), c.IDOf(t, "/users", "users", lib.Patrons[1])
	secondID, thirdID := c.IDOf(t, "/users", "users", lib.Patrons[2]), c.IDOf(t, "/users", "users", lib.Patrons[3])
	out, shelf := lib.Items[0][0], lib.Items[0][1]
	outID, shelfID := c.IDOf(t, "/item-storage/items", "items", out), c.IDOf(t, "/item-storage/items", "items", shelf)
	c.CheckOut(0, out, owner).Want(t, http.StatusCreated)

	allowed := func(query ...string) harness.Response {
		q := url.Values{}
		for i := 0; i+1 < len(query); i += 2 {
			q.Set(query[i], query[i+1])
		}
		return c.DoWith(circ, "GET", "/circulation/requests/allowed-service-points?"+q.Encode(), nil, librarian)
	}
	backDesk := map[string]string{"id": back, "name": "Circ Desk 2", "discoveryDisplayName": "Circulation Desk -- Back Entrance"}
	annexDesk := map[string]string{"id": annex, "name": "Annex", "discoveryDisplayName": "The annex"}
	everywhere := []any{annexDesk, backDesk}

	// A request to be created: a page of the book on the shelf, at the
	// back desk; holds and recalls of the book out, holds at the annex.
	wantJSON(t, allowed("operation", "create", "requesterId", firstID, "itemId", shelfID).Want(t, http.StatusOK),
		map[string]any{"Page": []any{backDesk}})
	wantJSON(t, allowed("operation", "create", "requesterId", firstID, "itemId", outID).Want(t, http.StatusOK),
		map[string]any{"Hold": []any{annexDesk}, "Recall": everywhere})
	// FOLIO's operation is read whatever its case.
	wantJSON(t, allowed("operation", "CREATE", "requesterId", firstID, "itemId", shelfID).Want(t, http.StatusOK),
		map[string]any{"Page": []any{backDesk}})

	place := func(kind, patronID, itemID, pickup string) harness.Response {
		return c.DoWith(circ, "POST", "/circulation/requests", map[string]any{"requestType": kind, "requestDate": "2026-03-01T10:00:00.000Z",
			"requesterId": patronID, "itemId": itemID, "fulfillmentPreference": "Hold Shelf", "pickupServicePointId": pickup}, librarian)
	}
	// A page to pick up at the annex: refused, nothing written.
	refused := place("Page", firstID, shelfID, annex).Want(t, http.StatusUnprocessableEntity)
	wantJSON(t, refused, envelope("One or more Pickup locations are no longer available", schemas.CodeRequestPickupServicePointNotAllowed,
		"pickupServicePointId", annex, "requestType", "Page", "requestPolicyId", policy.ID))
	if got := requestsOf(t, c, shelfID); len(got) != 0 {
		t.Errorf("a refused page was stored: %v", got)
	}
	if status, _ := itemState(t, c, shelf); status != schemas.ItemAvailable {
		t.Errorf("the book after a refused page: %q, want Available", status)
	}
	// At the back desk it holds, and pages the book.
	var page struct{ ID string }
	place("Page", firstID, shelfID, back).Want(t, http.StatusCreated).Decode(t, &page)
	if status, _ := itemState(t, c, shelf); status != schemas.ItemPaged {
		t.Errorf("the book after its page: %q, want Paged", status)
	}
	// A hold of the book out at the annex holds; at the back desk it is
	// refused; a recall may be picked up at either.
	wantJSON(t, place("Hold", secondID, outID, back).Want(t, http.StatusUnprocessableEntity),
		envelope("One or more Pickup locations are no longer available", schemas.CodeRequestPickupServicePointNotAllowed,
			"pickupServicePointId", back, "requestType", "Hold", "requestPolicyId", policy.ID))
	var hold, recall struct{ ID string }
	place("Hold", secondID, outID, annex).Want(t, http.StatusCreated).Decode(t, &hold)
	place("Recall", thirdID, outID, back).Want(t, http.StatusCreated).Decode(t, &recall)

	// The hold, to be moved to the paged book: holds and recalls there,
	// for its requester. To be replaced: its own book, every type the
	// policy allows, whatever the book's status.
	wantJSON(t, allowed("operation", "move", "requestId", hold.ID, "itemId", shelfID).Want(t, http.StatusOK),
		map[string]any{"Hold": []any{annexDesk}, "Recall": everywhere})
	wantJSON(t, allowed("operation", "replace", "requestId", hold.ID).Want(t, http.StatusOK),
		map[string]any{"Page": []any{backDesk}, "Hold": []any{annexDesk}, "Recall": everywhere})

	// The recall, to be picked up at the back desk, moved as a hold onto
	// the paged book: holds are not picked up there. Nothing moves.
	wantJSON(t, c.DoWith(circ, "POST", "/circulation/requests/"+recall.ID+"/move",
		map[string]any{"destinationItemId": shelfID, "requestType": "Hold"}, librarian).Want(t, http.StatusUnprocessableEntity),
		envelope("One or more Pickup locations are no longer available", schemas.CodeRequestPickupServicePointNotAllowed,
			"pickupServicePointId", back, "requestType", "Hold", "requestPolicyId", policy.ID))
	var item, kind string
	if err := c.DB.QueryRow(ctx, fmt.Sprintf(`SELECT item_id::text, jsonb ->> 'requestType' FROM %s.request WHERE id = $1::uuid`, c.Schema),
		recall.ID).Scan(&item, &kind); err != nil {
		t.Fatal(err)
	}
	if item != outID || kind != "Recall" {
		t.Errorf("the refused move left the recall on %s as a %s, want %s as a Recall", item, kind, outID)
	}
	if got, want := requestsOf(t, c, shelfID), map[string]string{page.ID: "Open - Not yet filled 1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the paged book's queue after the refused move: %v, want %v", got, want)
	}

	// FOLIO's refusals of a query.
	nobody := uuid.NewString()
	for _, q := range []struct {
		query  []string
		status int
		want   map[string]any
	}{
		{nil, http.StatusBadRequest, envelope("Invalid combination of query parameters", schemas.CodeInvalidParameter)},
		{[]string{"operation", "create", "itemId", shelfID}, http.StatusBadRequest,
			envelope("Invalid combination of query parameters", schemas.CodeInvalidParameter)},
		{[]string{"operation", "replace", "requestId", hold.ID, "itemId", shelfID}, http.StatusBadRequest,
			envelope("Invalid combination of query parameters", schemas.CodeInvalidParameter)},
		{[]string{"operation", "move", "requestId", hold.ID}, http.StatusBadRequest,
			envelope("Invalid combination of query parameters", schemas.CodeInvalidParameter)},
		{[]string{"operation", "create", "requesterId", "not-a-uuid", "itemId", shelfID}, http.StatusBadRequest,
			envelope("Requester ID is not a valid UUID: not-a-uuid.", schemas.CodeInvalidParameter)},
		{[]string{"operation", "create", "itemId", "itemId", "requestId", "requestId"}, http.StatusBadRequest,
			envelope("Item ID is not a valid UUID: itemId. Request ID is not a valid UUID: requestId. Invalid combination of query parameters",
				schemas.CodeInvalidParameter)},
		{[]string{"operation", "borrow", "requesterId", firstID, "itemId", shelfID}, http.StatusBadRequest,
			envelope("Operation is not create, replace or move: borrow. Invalid combination of query parameters", schemas.CodeInvalidParameter)},
		{[]string{"operation", "create", "requesterId", nobody, "itemId", shelfID}, http.StatusUnprocessableEntity,
			envelope("User with ID "+nobody+" was not found", schemas.CodeValidation, "requesterId", nobody)},
		{[]string{"operation", "create", "requesterId", firstID, "itemId", nobody}, http.StatusUnprocessableEntity,
			envelope("Item with id="+nobody+" cannot be found", schemas.CodeValidation, "itemId", nobody)},
		{[]string{"operation", "replace", "requestId", nobody}, http.StatusUnprocessableEntity,
			envelope("Request with ID "+nobody+" was not found", schemas.CodeValidation, "requestId", nobody)},
		{[]string{"operation", "move", "requestId", hold.ID, "itemId", nobody}, http.StatusUnprocessableEntity,
			envelope("Item with id="+nobody+" cannot be found", schemas.CodeValidation, "itemId", nobody)},
		{[]string{"operation", "create", "requesterId", firstID, "itemId", shelfID, "instanceId", nobody}, http.StatusUnprocessableEntity,
			envelope("instanceId is not a parameter of this call; it takes operation, requesterId, itemId, requestId",
				schemas.CodeInvalidParameter, "instanceId", nobody)},
	} {
		wantJSON(t, allowed(q.query...).Want(t, q.status), q.want)
	}
	// A kiosk is not told.
	c.DoWith(circ, "GET", "/circulation/requests/allowed-service-points?operation=create&requesterId="+ownerID+"&itemId="+shelfID, nil,
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}).Want(t, http.StatusForbidden)
}
