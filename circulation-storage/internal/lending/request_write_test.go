package lending

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/circulation-storage/internal/dbtest"
	"github.com/checkoutlock/circulation-storage/internal/postgres"
	"github.com/checkoutlock/circulation-storage/internal/sample"
	"github.com/google/uuid"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// placeDoc is a request of kind by requester for item, to pick up at the
// first desk, as circulation sends it.
func placeDoc(kind, requester, item string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"requestType":%q,"requestLevel":"Item","requestDate":"2026-02-01T10:00:00.000Z",
	  "requesterId":%q,"itemId":%q,"status":"Open - Not yet filled","fulfillmentPreference":"Hold Shelf","pickupServicePointId":%q}`,
		kind, requester, item, sample.ServicePointDesk1))
}

// refusedCodes is the codes of a refusal, in order.
func refusedCodes(err error) []string {
	var out []string
	if r, ok := err.(*errs.Refusal); ok {
		for _, e := range r.Errors {
			out = append(out, e.Code)
		}
	} else if e, ok := errs.As(err); ok {
		out = append(out, e.Code)
	}
	return out
}

// TestRequestsAreJudgedAsFOLIOJudgesThem: a request written through
// circulation (storage.WithRequestRules) is refused, nothing written, for
// each rule it breaks, every reason at once in FOLIO's order (its
// RequestsAPICreationTests, RequestPolicyTests, ItemStatusRequestRules);
// one that holds is written with the writes its type calls for. The same
// write without the rules stores the request as sent.
func TestRequestsAreJudgedAsFOLIOJudgesThem(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := storage.WithRequestRules(context.Background())
	lib := newLibrary(f.DB, testPolicy)
	alice, bob, carol, erin := sample.ID("1001"), sample.ID("1002"), sample.ID("1003"), sample.ID("1005")
	available, out := sample.ID("book-101"), sample.ID("book-102")
	loan := json.RawMessage(fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T10:00:00.000Z","dueDate":"2099-01-22T10:00:00.000Z",
	  "loanPolicyId":%q,"action":"checkedout","status":{"name":"Open"}}`, alice, out, sample.PolicyStandard))
	if _, err := lib.CreateCheckOutLoan(ctx, f.Tenant, storage.CheckOutWrite{LoanID: uuid.NewString(), UserID: alice,
		Loan: loan, ItemVersion: 1}); err != nil {
		t.Fatal(err)
	}
	requests := func() int {
		return f.Count(t, postgres.TableRequest, "item_id = ANY($1::uuid[])", []string{available, out})
	}
	// A desk that does not say it is a pickup location is not one.
	unsaid := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.ServicePoints, unsaid, json.RawMessage(
		`{"name":"Circ Desk 4","code":"cd4","discoveryDisplayName":"Circulation Desk -- Attic"}`)); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		doc  json.RawMessage
		want []string
	}{
		{"a hold of an item on the shelf", placeDoc("Hold", bob, available), []string{schemas.CodeRequestingDisallowed}},
		{"a page of an item checked out", placeDoc("Page", bob, out), []string{schemas.CodeRequestingDisallowed}},
		{"a recall by the borrower, of the item they have", placeDoc("Recall", alice, out), []string{schemas.CodeItemAlreadyLoaned}},
		{"a hold by an inactive patron", placeDoc("Hold", carol, out), []string{schemas.CodeUserInactive}},
		{"a page by a patron blocked from requesting, of an item out", placeDoc("Page", erin, out),
			[]string{schemas.CodeRequestingDisallowed, schemas.CodeUserBlockedManually}},
		{"a hold to pick up nowhere", json.RawMessage(fmt.Sprintf(`{"requestType":"Hold","requestDate":"2026-02-01T10:00:00.000Z",
		  "requesterId":%q,"itemId":%q,"status":"Open - Not yet filled","fulfillmentPreference":"Hold Shelf"}`, bob, out)),
			[]string{schemas.CodeInvalidPickupServicePoint}},
		{"a hold to pick up at a desk that does not say it is a pickup location", json.RawMessage(fmt.Sprintf(`{"requestType":"Hold",
		  "requestDate":"2026-02-01T10:00:00.000Z","requesterId":%q,"itemId":%q,"status":"Open - Not yet filled",
		  "fulfillmentPreference":"Hold Shelf","pickupServicePointId":%q}`, bob, out, unsaid)),
			[]string{schemas.CodeInvalidPickupServicePoint}},
	} {
		_, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), c.doc)
		if got := refusedCodes(err); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if strings.Contains(c.name, "does not say") && !strings.Contains(err.Error(), "Service point is not a pickup location") {
			t.Errorf("%s: %v, want it named no pickup location", c.name, err)
		}
		if n := requests(); n != 0 {
			t.Fatalf("%s: %d requests stored after a refusal", c.name, n)
		}
	}

	// A page of the item on the shelf moves it to Paged, in its write.
	page := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.Requests, page, placeDoc("Page", bob, available)); err != nil {
		t.Fatalf("a page of an available item: %v", err)
	}
	if n := f.Count(t, postgres.TableItem, "id = $1 AND status_name = 'Paged' AND version = 2", available); n != 1 {
		t.Error("the paged item is not Paged at _version 2")
	}
	// The same requester again: already requested.
	_, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Hold", bob, available))
	if got := refusedCodes(err); !slices.Equal(got, []string{schemas.CodeItemAlreadyRequested}) {
		t.Errorf("Bob's second request of the item: %v", err)
	}

	// A recall shortens Alice's loan to the policy's recall return
	// interval (two days) from now, and marks it.
	recallIn := func(duration int, unit string) {
		t.Helper()
		_, err := f.DB.Pool.Exec(ctx, `UPDATE `+dbtest.View(f.Tenant, postgres.TableLoanPolicy)+`
			SET jsonb = jsonb_set(jsonb, '{requestManagement}', jsonb_build_object('recalls',
			    jsonb_build_object('recallReturnInterval', jsonb_build_object('duration', $2::int, 'intervalId', $3::text))))
			WHERE id = $1`, sample.PolicyStandard, duration, unit)
		if err != nil {
			t.Fatal(err)
		}
	}
	var recalled struct {
		DueDate  time.Time `json:"dueDate"`
		Action   string    `json:"action"`
		ByRecall bool      `json:"dueDateChangedByRecall"`
		Version  int       `json:"_version"`
	}
	readLoan := func() []byte {
		t.Helper()
		var raw []byte
		f.DB.Pool.QueryRow(ctx, `SELECT jsonb FROM `+dbtest.View(f.Tenant, postgres.TableLoan)+` WHERE item_id = $1`, out).Scan(&raw)
		if err := json.Unmarshal(raw, &recalled); err != nil {
			t.Fatal(err)
		}
		return raw
	}
	recallIn(2, "Days")
	if _, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Recall", bob, out)); err != nil {
		t.Fatalf("Bob's recall: %v", err)
	}
	raw := readLoan()
	if due := time.Until(recalled.DueDate); recalled.Action != "recallrequested" || !recalled.ByRecall || recalled.Version != 2 ||
		due < 47*time.Hour || due > 49*time.Hour {
		t.Errorf("the recalled loan: %s, want due in two days", raw)
	}
	// A second recall, under a policy now recalling in an hour, leaves
	// the due date alone: a loan is recalled once.
	recallIn(1, "Hours")
	if _, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Recall", sample.ID("1004"), out)); err != nil {
		t.Fatalf("Dave's recall: %v", err)
	}
	if raw := readLoan(); recalled.Version != 2 || time.Until(recalled.DueDate) < 47*time.Hour {
		t.Errorf("a second recall changed the loan again: %s", raw)
	}

	// A request policy that allows holds only refuses Dave's page.
	policy := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.RequestPolicies, policy,
		json.RawMessage(`{"name":"Holds only","requestTypes":["Hold"]}`)); err != nil {
		t.Fatal(err)
	}
	rules := sample.Rules
	rules.FallbackRequestPolicyID = policy
	if err := NewRules(f.DB, testPolicy).SetRules(ctx, f.Tenant, rules); err != nil {
		t.Fatal(err)
	}
	third := sample.ID("book-103")
	_, err = lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), placeDoc("Page", sample.ID("1004"), third))
	if got := refusedCodes(err); !slices.Equal(got, []string{schemas.CodeRequestingDisallowedByPolicy}) {
		t.Errorf("a page the policy does not allow: %v", err)
	}
	if n := f.Count(t, postgres.TableItem, "id = $1 AND status_name = 'Available' AND version = 1", third); n != 1 {
		t.Error("a refused page changed its item")
	}

	// Without the rules, storage stores a request as sent.
	if _, err := lib.Create(context.Background(), f.Tenant, storage.Requests, uuid.NewString(),
		placeDoc("Hold", sample.ID("1004"), third)); err != nil {
		t.Errorf("a hold of an available item without the rules: %v", err)
	}
}

// TestAPickupPointTheRequestPolicyDoesNotAllowIsRefused follows FOLIO's
// RequestsAPICreationTests (itemLevelRequestIsNotPlacedWhenRequestPolicy
// DisallowsRequestedPickupServicePoint) and AllowedServicePointsAPITests:
// a hold shelf request naming a pickup location its request policy does
// not list for its type is refused REQUEST_PICKUP_SERVICE_POINT_IS_NOT_
// ALLOWED with the pickup point, the type and the policy, nothing
// written; one at a listed point holds; a type the policy lists nothing
// for may be picked up at every pickup location; a type the policy does
// not allow is refused for that alone. The allowed service points answer
// the same set, for the types the item's status allows (every type when
// it is ignored), sorted by name, without a type whose list names no
// pickup location.
func TestAPickupPointTheRequestPolicyDoesNotAllowIsRefused(t *testing.T) {
	t.Parallel()
	f := dbtest.SetupLibrary(t, sample.LoadData)
	ctx := storage.WithRequestRules(context.Background())
	lib := newLibrary(f.DB, testPolicy)
	rules := NewRules(f.DB, testPolicy)
	bob, dave := sample.ID("1002"), sample.ID("1004")
	shelf, other := sample.ID("book-101"), sample.ID("book-102")
	desk1, desk2 := sample.ServicePointDesk1, sample.ServicePointDesk2
	// A third desk, not a pickup location.
	desk3 := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.ServicePoints, desk3, json.RawMessage(
		`{"name":"Circ Desk 3","code":"cd3","discoveryDisplayName":"Circulation Desk -- Basement","pickupLocation":false}`)); err != nil {
		t.Fatal(err)
	}
	// Pages only at Desk 2, holds anywhere, no recalls.
	policy := uuid.NewString()
	if _, err := lib.Create(ctx, f.Tenant, storage.RequestPolicies, policy, json.RawMessage(fmt.Sprintf(
		`{"name":"Pages at Desk 2","requestTypes":["Page","Hold"],"allowedServicePoints":{"Page":[%q],"Hold":null}}`,
		strings.ToUpper(desk2)))); err != nil {
		t.Fatal(err)
	}
	withPolicy := sample.Rules
	withPolicy.FallbackRequestPolicyID = policy
	if err := rules.SetRules(ctx, f.Tenant, withPolicy); err != nil {
		t.Fatal(err)
	}
	at := func(kind, requester, item, pickup string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"requestType":%q,"requestLevel":"Item","requestDate":"2026-02-01T10:00:00.000Z",
		  "requesterId":%q,"itemId":%q,"status":"Open - Not yet filled","fulfillmentPreference":"Hold Shelf","pickupServicePointId":%q}`,
			kind, requester, item, pickup))
	}
	stored := func() int {
		return f.Count(t, postgres.TableRequest, "item_id = ANY($1::uuid[])", []string{shelf, other})
	}

	// A page to pick up at Desk 1: refused, with FOLIO's parameters.
	_, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), at("Page", bob, shelf, desk1))
	r, ok := err.(*errs.Refusal)
	if !ok || len(r.Errors) != 1 {
		t.Fatalf("a page to pick up at Desk 1: %v, want one refusal", err)
	}
	want := errs.Error{Kind: errs.KindInvalid, Code: schemas.CodeRequestPickupServicePointNotAllowed,
		Message: "One or more Pickup locations are no longer available",
		Parameters: []errs.Parameter{{Key: "pickupServicePointId", Value: desk1}, {Key: "requestType", Value: "Page"},
			{Key: "requestPolicyId", Value: policy}}}
	if got := *r.Errors[0]; got.Kind != want.Kind || got.Code != want.Code || got.Message != want.Message ||
		!slices.Equal(got.Parameters, want.Parameters) {
		t.Errorf("the refusal: %+v, want %+v", got, want)
	}
	if n := stored(); n != 0 {
		t.Errorf("%d requests stored after the refusal", n)
	}
	if n := f.Count(t, postgres.TableItem, "id = $1 AND status_name = 'Available' AND version = 1", shelf); n != 1 {
		t.Error("the refused page changed its item")
	}
	// Every reason at once: a page of an item out, at Desk 1, is refused
	// for the item's status and for the pickup point.
	_, err = lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), at("Page", dave, sample.ID("book-020"), desk1))
	if got := refusedCodes(err); !slices.Equal(got, []string{schemas.CodeRequestingDisallowed, schemas.CodeRequestPickupServicePointNotAllowed}) {
		t.Errorf("a page of a book on the hold shelf, at Desk 1: %v", err)
	}
	// A recall the policy does not allow is refused for that alone: its
	// pickup point is not asked.
	_, err = lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), at("Recall", bob, shelf, desk1))
	if got := refusedCodes(err); !slices.Equal(got, []string{schemas.CodeRequestingDisallowed, schemas.CodeRequestingDisallowedByPolicy}) {
		t.Errorf("a recall the policy does not allow: %v", err)
	}
	// A desk that is no pickup location is refused as such.
	_, err = lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), at("Page", bob, shelf, desk3))
	if got := refusedCodes(err); !slices.Equal(got, []string{schemas.CodeInvalidPickupServicePoint}) {
		t.Errorf("a page to pick up at a desk that is no pickup location: %v", err)
	}
	if n := stored(); n != 0 {
		t.Errorf("%d requests stored after the refusals", n)
	}

	// What the allowed service points answer for Bob and the book on the
	// shelf: pages at Desk 2; replacing a request, whatever the status,
	// holds too, at either desk (by name), and no recalls.
	point := func(id, name, display string) storage.AllowedServicePoint {
		return storage.AllowedServicePoint{ID: id, Name: name, DiscoveryDisplayName: display}
	}
	one := point(desk1, "Circ Desk 1", "Circulation Desk -- Hallway")
	two := point(desk2, "Circ Desk 2", "Circulation Desk -- Back Entrance")
	for _, c := range []struct {
		item   string
		ignore bool
		want   storage.AllowedServicePoints
	}{
		{shelf, false, storage.AllowedServicePoints{"Page": {two}}},
		{shelf, true, storage.AllowedServicePoints{"Page": {two}, "Hold": {one, two}}},
	} {
		got, err := rules.AllowedServicePoints(ctx, f.Tenant, bob, c.item, c.ignore)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("allowed service points of %s (item status ignored: %v): %v %v, want %v", c.item, c.ignore, got, err, c.want)
		}
	}

	// A page at Desk 2 holds, and pages the book.
	if _, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), at("Page", bob, shelf, desk2)); err != nil {
		t.Fatalf("a page to pick up at Desk 2: %v", err)
	}
	if n := f.Count(t, postgres.TableItem, "id = $1 AND status_name = 'Paged' AND version = 2", shelf); n != 1 {
		t.Error("the page at Desk 2 did not page its book")
	}
	// Now Paged, the book takes holds, at either desk.
	got, err := rules.AllowedServicePoints(ctx, f.Tenant, dave, shelf, false)
	if want := (storage.AllowedServicePoints{"Hold": {one, two}}); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("allowed service points of the paged book: %v %v, want %v", got, err, want)
	}
	if _, err := lib.Create(ctx, f.Tenant, storage.Requests, uuid.NewString(), at("Hold", dave, shelf, desk1)); err != nil {
		t.Errorf("a hold to pick up at Desk 1, which the policy lists nothing against for holds: %v", err)
	}

	// A policy whose holds may be picked up only at the desk that is no
	// pickup location leaves holds no point to name: they are not
	// answered.
	if _, err := f.DB.Pool.Exec(ctx, `UPDATE `+dbtest.View(f.Tenant, postgres.TableRequestPolicy)+`
		SET jsonb = jsonb_set(jsonb, '{allowedServicePoints,Hold}', jsonb_build_array($2::text)) WHERE id = $1`, policy, desk3); err != nil {
		t.Fatal(err)
	}
	if got, err := rules.AllowedServicePoints(ctx, f.Tenant, dave, shelf, false); err != nil || len(got) != 0 {
		t.Errorf("allowed service points with holds only at a desk that is no pickup location: %v %v, want none", got, err)
	}

	// A requester or an item that does not exist, in FOLIO's words.
	nobody := uuid.NewString()
	if _, err := rules.AllowedServicePoints(ctx, f.Tenant, nobody, shelf, false); err == nil ||
		err.Error() != schemas.CodeValidation+": User with ID "+nobody+" was not found" || !errs.IsKind(err, errs.KindInvalid) {
		t.Errorf("allowed service points of nobody: %v", err)
	}
	nothing := uuid.NewString()
	if _, err := rules.AllowedServicePoints(ctx, f.Tenant, bob, nothing, false); err == nil ||
		err.Error() != schemas.CodeValidation+": Item with id="+nothing+" cannot be found" || !errs.IsKind(err, errs.KindInvalid) {
		t.Errorf("allowed service points of no item: %v", err)
	}
}
