package integration

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/selfcheck"
	"github.com/checkoutlock/serverkit/auth"
)

// renewable makes the library's loan policy renew as renewalsPolicy says.
func renewable(t *testing.T, c *harness.Cluster, lib harness.Library, renewalsPolicy map[string]any) {
	t.Helper()
	changePolicy(t, c, lib, map[string]any{"renewable": true, "renewalsPolicy": renewalsPolicy})
}

// changePolicy sets the fields of change on the library's loan policy,
// through storage's API.
func changePolicy(t *testing.T, c *harness.Cluster, lib harness.Library, change map[string]any) {
	t.Helper()
	var policy map[string]any
	c.Do(c.Storage, "GET", "/loan-policy-storage/loan-policies/"+lib.PolicyID, nil).Want(t, http.StatusOK).Decode(t, &policy)
	delete(policy, "metadata")
	for k, v := range change {
		policy[k] = v
	}
	c.Do(c.Storage, "PUT", "/loan-policy-storage/loan-policies/"+lib.PolicyID, policy).Want(t, http.StatusNoContent)
}

// renewalEvents counts the tenant's RENEWED events recorded.
func renewalEvents(t *testing.T, c *harness.Cluster) int {
	t.Helper()
	var n int
	if err := c.DB.QueryRow(context.Background(), `SELECT count(*) FROM circulation_storage.outbox WHERE tenant_id = $1 AND kind = 'renewal'`,
		c.Tenant).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// setBarcode gives the record storage keeps at path (an item's, a
// patron's) barcode, or none when barcode is empty.
func setBarcode(t *testing.T, c *harness.Cluster, path, barcode string) {
	t.Helper()
	var rec map[string]any
	c.Do(c.Storage, "GET", path, nil).Want(t, http.StatusOK).Decode(t, &rec)
	if barcode == "" {
		delete(rec, "barcode")
	} else {
		rec["barcode"] = barcode
	}
	c.Do(c.Storage, "PUT", path, rec).Want(t, http.StatusNoContent)
}

// renewalCount is the item's open loan's renewalCount.
func renewalCount(t *testing.T, c *harness.Cluster, item string) int {
	t.Helper()
	var n int
	err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT coalesce((l.jsonb ->> 'renewalCount')::int, 0) FROM %s.loan l
		JOIN %s.item i ON i.id = l.item_id WHERE i.barcode = $1 AND l.status_name = 'Open'`, c.Schema, c.Schema), item).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRenewalsOverHTTPAndSIP2: FOLIO's renewal across the real binaries.
// Over HTTP a loan is renewed (200, the count and the due date moved, one
// RENEWED event) until the policy's limit, then refused with FOLIO's code
// and message; over SIP2 the same refusal reaches the kiosk in AF, a 65
// renews what it can and lists each item where it belongs (a recalled
// one among those not renewed, with FOLIO's reason); a 29 with the
// patron's PIN sent again after the patron's barcode changed is answered
// its renewal, renewed once.
func TestRenewalsOverHTTPAndSIP2(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 2, 4, 0, nil)
	renewable(t, c, lib, map[string]any{"numberAllowed": 1, "renewFromId": "CURRENT_DUE_DATE"})
	patron, items := lib.Patrons[0], lib.Items[0]
	for _, item := range items {
		c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	}
	renew := func(item string) harness.Response {
		return c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode",
			map[string]string{"itemBarcode": item, "userBarcode": patron, "servicePointId": harness.ServicePoint})
	}
	var loan struct {
		DueDate      string `json:"dueDate"`
		RenewalCount int    `json:"renewalCount"`
		Action       string `json:"action"`
		LoanPolicy   struct {
			Name string `json:"name"`
		} `json:"loanPolicy"`
	}
	var policy struct {
		Name string `json:"name"`
	}
	c.Do(c.Storage, "GET", "/loan-policy-storage/loan-policies/"+lib.PolicyID, nil).Want(t, http.StatusOK).Decode(t, &policy)
	renew(items[0]).Want(t, http.StatusOK).Decode(t, &loan)
	if loan.RenewalCount != 1 || loan.Action != "renewed" || loan.LoanPolicy.Name != policy.Name || policy.Name == "" ||
		renewalCount(t, c, items[0]) != 1 || renewalEvents(t, c) != 1 {
		t.Fatalf("renewed loan %+v (stored count %d, %d events), want count 1, renewed, one event", loan, renewalCount(t, c, items[0]),
			renewalEvents(t, c))
	}
	r := renew(items[0]).Want(t, http.StatusUnprocessableEntity)
	if !strings.Contains(string(r.Body), `"code":"LOAN_RENEWAL_LIMIT_REACHED"`) || !strings.Contains(string(r.Body), "loan at maximum renewal number") {
		t.Errorf("a renewal past the limit: %s", r.Body)
	}

	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	renewMsg := func(item string) string {
		return "29NN" + harness.SIP2Date() + harness.SIP2Date() + "AOdiku|AA" + patron + "|AB" + item + "|"
	}
	if got := k.Send(renewMsg(items[0])); !strings.HasPrefix(got, "300") || harness.SIP2Field(got, "AF") != "loan at maximum renewal number" {
		t.Errorf("29 past the limit: %q", got)
	}
	if got := k.Send(renewMsg(items[1])); !strings.HasPrefix(got, "301Y") || harness.SIP2Field(got, "AH") == "" {
		t.Errorf("29: %q, want renewed with the new due date", got)
	}

	// Renew all: items[0] and [1] at their limit, [3] recalled, [2] renews.
	other := c.IDOf(t, "/users", "users", lib.Patrons[1])
	c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": "Recall", "requestLevel": "Item",
		"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": other, "itemId": c.IDOf(t, "/item-storage/items", "items", items[3]),
		"status": "Open - Not yet filled", "position": 1, "fulfillmentPreference": "Hold Shelf"}).Want(t, http.StatusCreated)
	id := c.IDOf(t, "/users", "users", patron)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": id, "pin": "7319"}).Want(t, http.StatusCreated)
	if got := k.Send("65" + harness.SIP2Date() + "AOdiku|AA" + patron + "|"); !strings.HasPrefix(got, "660") ||
		harness.SIP2Field(got, "AF") != "Please enter your PIN" {
		t.Errorf("65 without the PIN: %q", got)
	}
	got := k.Send("65" + harness.SIP2Date() + "AOdiku|AA" + patron + "|AD7319|")
	var renewed, not []string
	for _, f := range strings.Split(got, "|") {
		switch {
		case strings.HasPrefix(f, "BM"):
			renewed = append(renewed, f[2:])
		case strings.HasPrefix(f, "BN"):
			not = append(not, f[2:])
		}
	}
	slices.Sort(not)
	if !strings.HasPrefix(got, "66100010003") || !slices.Equal(renewed, items[2:3]) ||
		!slices.Equal(not, []string{items[0], items[1], items[3]}) ||
		!strings.Contains(harness.SIP2Field(got, "AF"), items[3]+": items cannot be renewed when there is an active recall request") {
		t.Errorf("65: %q, want %s renewed, the rest not, with FOLIO's reasons", got, items[2])
	}
	// Nothing left to renew: the renew all was processed all the same
	// (ok 1, as Koha and Evergreen answer), every item listed not renewed.
	if got := k.Send("65" + harness.SIP2Date() + "AOdiku|AA" + patron + "|AD7319|"); !strings.HasPrefix(got, "66100000004") {
		t.Errorf("a 65 that could renew nothing: %q, want ok 1, none renewed, four not", got)
	}

	// A 29 with the patron's PIN, sent again (its reply lost) on a new
	// connection, where the door does not answer from its last reply,
	// after the patron's barcode changed: the door's key finds the
	// renewal it made, and the PIN is checked against the patron it
	// renewed for: renewed once, answered as the first time.
	second, lent := lib.Patrons[1], lib.Items[1][0]
	c.CheckOut(0, lent, second).Want(t, http.StatusCreated)
	secondID := c.IDOf(t, "/users", "users", second)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": secondID, "pin": "2468"}).Want(t, http.StatusCreated)
	withPIN := k.Seal("29NN" + harness.SIP2Date() + harness.SIP2Date() + "AOdiku|AA" + second + "|AB" + lent + "|AD2468|")
	first := k.Raw(withPIN)
	setBarcode(t, c, "/users/"+secondID, second+"-new")
	k2 := harness.DialSIP2(t, door.SIP2Addr)
	k2.Login("user_id", "passw0rd")
	if again := k2.Raw(withPIN); !strings.HasPrefix(first, "301Y") || !strings.HasPrefix(again, "301Y") ||
		harness.SIP2Field(again, "AH") != harness.SIP2Field(first, "AH") || renewalCount(t, c, lent) != 1 {
		t.Errorf("a 29 with the PIN sent again after the patron's barcode changed: %q, then %q (renewed %d times), want renewed once, answered alike",
			first, again, renewalCount(t, c, lent))
	}
	if n := renewalEvents(t, c); n != 4 {
		t.Errorf("%d RENEWED events, want one per renewal: 4", n)
	}
}

// TestSIP2RenewalsFollowTheTenantsPinRule: where the tenant requires
// PINs, a kiosk's renewal (29) at a listener that does not is refused
// without the patron's PIN ("Please enter your PIN") and with a wrong one,
// renewing nothing, and renews with the right one; a renew all (65)
// renews with it, each of its renewals carrying it.
func TestSIP2RenewalsFollowTheTenantsPinRule(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 1, 2, 0, nil)
	renewable(t, c, lib, map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"})
	patron, items := lib.Patrons[0], lib.Items[0]
	for _, item := range items {
		c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	}
	id := c.IDOf(t, "/users", "users", patron)
	c.Do(c.Storage, "POST", "/patron-pin", map[string]any{"id": id, "pin": "7319"}).Want(t, http.StatusCreated)
	selfCheckSettings(t, c, selfcheck.PinRequired)

	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	renew := "29NN" + harness.SIP2Date() + harness.SIP2Date() + "AOdiku|AA" + patron + "|AB" + items[0] + "|"
	for pin, want := range map[string]string{"": "Please enter your PIN", "AD0000|": "Wrong PIN"} {
		if got := k.Send(renew + pin); !strings.HasPrefix(got, "300") || harness.SIP2Field(got, "AF") != want ||
			renewalCount(t, c, items[0]) != 0 {
			t.Fatalf("29 with %q at a listener without PINs, the tenant requiring them: %q (renewal count %d), want %q",
				pin, got, renewalCount(t, c, items[0]), want)
		}
	}
	if got := k.Send(renew + "AD7319|"); !strings.HasPrefix(got, "301Y") || renewalCount(t, c, items[0]) != 1 {
		t.Fatalf("29 with the PIN: %q (renewal count %d), want renewed", got, renewalCount(t, c, items[0]))
	}
	if got := k.Send("65" + harness.SIP2Date() + "AOdiku|AA" + patron + "|AD7319|"); !strings.HasPrefix(got, "66100020000") ||
		renewalCount(t, c, items[0]) != 2 || renewalCount(t, c, items[1]) != 1 {
		t.Errorf("65 with the PIN: %q (renewal counts %d and %d), want both renewed", got,
			renewalCount(t, c, items[0]), renewalCount(t, c, items[1]))
	}
}

// TestTwoRenewalsAtOnceAcrossInstances: two circulation instances renew
// one loan at the same moment, twenty rounds: every renewal answered 200
// is one more on the loan's count and one RENEWED event, the other
// answers are the loan changed (409), never a 5xx.
func TestTwoRenewalsAtOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 2, FeatureOn: true})
	lib := c.SetupLibrary(1, 1, 0)
	renewable(t, c, lib, map[string]any{"unlimited": true, "renewFromId": "CURRENT_DUE_DATE"})
	patron, item := lib.Patrons[0], lib.Items[0][0]
	c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	renewedOK := 0
	for round := range 20 {
		var wg sync.WaitGroup
		statuses := make([]int, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses[i] = c.Do(c.Circulations[i], "POST", "/circulation/renew-by-barcode",
					map[string]string{"itemBarcode": item, "userBarcode": patron}).Status
			}()
		}
		wg.Wait()
		for _, s := range statuses {
			switch s {
			case http.StatusOK:
				renewedOK++
			case http.StatusConflict:
			default:
				t.Fatalf("round %d: answers %v", round, statuses)
			}
		}
		if statuses[0] != http.StatusOK && statuses[1] != http.StatusOK {
			t.Fatalf("round %d: answers %v, want at least one renewal", round, statuses)
		}
		if n := renewalCount(t, c, item); n != renewedOK {
			t.Fatalf("round %d: the loan's count %d, %d renewals answered 200", round, n, renewedOK)
		}
	}
	if n := renewalEvents(t, c); n != renewedOK {
		t.Errorf("%d RENEWED events, %d renewals", n, renewedOK)
	}
	t.Logf("20 rounds of two renewals at once: %d renewed, %d told the loan changed", renewedOK, 40-renewedOK)
}

// TestEachRenewalRefusalOverHTTPAndSIP2: every reason FOLIO refuses a
// renewal for, arranged through the real services, reaches an HTTP caller
// as FOLIO's code and message (422, the loan unchanged) and a kiosk as
// that message in a 30's AF with ok=0 and AH empty.
func TestEachRenewalRefusalOverHTTPAndSIP2(t *testing.T) {
	t.Parallel()
	c, lib, door := sip2Cluster(t, 1, 5, 3, 0, nil)
	renewable(t, c, lib, map[string]any{"numberAllowed": 5, "renewFromId": "CURRENT_DUE_DATE"})
	for p, patron := range lib.Patrons {
		for _, item := range lib.Items[p] {
			c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
		}
	}
	k := harness.DialSIP2(t, door.SIP2Addr)
	k.Login("user_id", "passw0rd")
	userID := func(patron string) string { return c.IDOf(t, "/users", "users", patron) }
	itemID := func(item string) string { return c.IDOf(t, "/item-storage/items", "items", item) }
	request := func(kind, item string) {
		c.Do(c.Storage, "POST", "/request-storage/requests", map[string]any{"requestType": kind, "requestLevel": "Item",
			"requestDate": "2026-01-01T10:00:00.000Z", "requesterId": userID(lib.Patrons[4]), "itemId": itemID(item),
			"status": "Open - Not yet filled", "position": 1, "fulfillmentPreference": "Hold Shelf"}).Want(t, http.StatusCreated)
	}
	setPolicy := func(change map[string]any) { changePolicy(t, c, lib, change) }
	librarian := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}
	p0, p1, p2, p3 := lib.Items[0], lib.Items[1], lib.Items[2], lib.Items[3]

	for _, tc := range []struct {
		name, patron, item string
		arrange            func()
		code, message      string
	}{
		{name: "a recall", patron: lib.Patrons[0], item: p0[0], arrange: func() { request("Recall", p0[0]) },
			code: "RENEWAL_BLOCKED_BY_RECALL", message: "items cannot be renewed when there is an active recall request"},
		{name: "a hold first", patron: lib.Patrons[0], item: p0[1], arrange: func() { request("Hold", p0[1]) },
			code:    "RENEWAL_BLOCKED_BY_HOLD_REQUEST",
			message: "Items with this loan policy cannot be renewed when there is an active, pending hold request"},
		{name: "claimed returned", patron: lib.Patrons[0], item: p0[2], arrange: func() {
			c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+openLoanID(t, c, p0[2])+"/claim-item-returned",
				map[string]any{"itemClaimedReturnedDateTime": "2026-03-05T12:00:00.000Z"}, librarian).Want(t, http.StatusNoContent)
		}, code: "ITEM_CLAIMED_RETURNED_NOT_RENEWABLE", message: "item is Claimed returned"},
		{name: "declared lost", patron: lib.Patrons[1], item: p1[0], arrange: func() {
			c.DoWith(c.Circulations[0], "POST", "/circulation/loans/"+openLoanID(t, c, p1[0])+"/declare-item-lost",
				map[string]any{"servicePointId": harness.ServicePoint}, librarian).Want(t, http.StatusNoContent)
		}, code: "ITEM_DECLARED_LOST_NOT_RENEWABLE", message: "item is Declared lost"},
		{name: "another patron's item", patron: lib.Patrons[0], item: p1[1],
			code: "ITEM_CHECKED_OUT_TO_DIFFERENT_USER", message: "Cannot renew item checked out to different user"},
		{name: "no such item", patron: lib.Patrons[0], item: "no-such-item",
			code: "ITEM_BARCODE_NOT_FOUND", message: "No item with barcode no-such-item exists"},
		{name: "blocked from renewing", patron: lib.Patrons[2], item: p2[0], arrange: func() {
			c.Do(c.Storage, "POST", "/manualblocks", map[string]any{"userId": userID(lib.Patrons[2]), "desc": "Overdue books",
				"renewals": true}).Want(t, http.StatusCreated)
		}, code: "USER_IS_BLOCKED_MANUALLY", message: "Patron blocked from renewing"},
		{name: "inactive", patron: lib.Patrons[3], item: p3[0], arrange: func() {
			var user map[string]any
			c.Do(c.Storage, "GET", "/users/"+userID(lib.Patrons[3]), nil).Want(t, http.StatusOK).Decode(t, &user)
			delete(user, "metadata")
			user["active"] = false
			c.Do(c.Storage, "PUT", "/users/"+userID(lib.Patrons[3]), user).Want(t, http.StatusNoContent)
		}, code: "USER_IS_INACTIVE_OR_EXPIRED", message: "Cannot renew loan when user is inactive or expired"},
		// What follows changes the whole library's policy and blocks.
		{name: "not renewable", patron: lib.Patrons[4], item: lib.Items[4][0], arrange: func() {
			setPolicy(map[string]any{"renewable": false})
		}, code: "LOAN_NOT_RENEWABLE", message: "loan is not renewable"},
		{name: "the due date would not move", patron: lib.Patrons[4], item: lib.Items[4][1], arrange: func() {
			setPolicy(map[string]any{"renewable": true, "renewalsPolicy": map[string]any{"numberAllowed": 5, "renewFromId": "SYSTEM_DATE",
				"differentPeriod": true, "period": map[string]any{"duration": 1, "intervalId": "Days"}}})
		}, code: "RENEWAL_WOULD_NOT_CHANGE_DUE_DATE", message: "renewal would not change the due date"},
		// The patron has three items out (one declared lost, which
		// counts), above the limit of two: FOLIO blocks renewals above
		// the limit, borrowing at it.
		{name: "blocked automatically", patron: lib.Patrons[1], item: p1[2], arrange: func() {
			setPolicy(map[string]any{"renewalsPolicy": map[string]any{"numberAllowed": 5, "renewFromId": "CURRENT_DUE_DATE"}})
			chargedOutLimit(t, c, lib, "blockRenewals", "Too many items out to renew", 2)
		}, code: "USER_IS_BLOCKED_AUTOMATICALLY", message: "Too many items out to renew"},
	} {
		if tc.arrange != nil {
			tc.arrange()
		}
		before := c.Snapshot(t)
		r := c.Do(c.Circulations[0], "POST", "/circulation/renew-by-barcode",
			map[string]string{"itemBarcode": tc.item, "userBarcode": tc.patron})
		var body struct {
			Errors []struct{ Code, Message string } `json:"errors"`
		}
		if r.Status == http.StatusUnprocessableEntity {
			r.Decode(t, &body)
		}
		if r.Status != http.StatusUnprocessableEntity || len(body.Errors) != 1 || body.Errors[0].Code != tc.code || body.Errors[0].Message != tc.message {
			t.Errorf("%s over HTTP: %d %s, want 422 %s %q", tc.name, r.Status, r.Body, tc.code, tc.message)
		}
		got := k.Send("29NN" + harness.SIP2Date() + harness.SIP2Date() + "AOdiku|AA" + tc.patron + "|AB" + tc.item + "|")
		if !strings.HasPrefix(got, "300N") || harness.SIP2Field(got, "AF") != tc.message || harness.SIP2Field(got, "AH") != "" ||
			!strings.Contains(got, "|AH|") {
			t.Errorf("%s over SIP2: %q, want 300N with AH empty and AF %q", tc.name, got, tc.message)
		}
		if c.Snapshot(t) != before {
			t.Errorf("%s: a refused renewal changed the tenant's data", tc.name)
		}
	}
	if n := renewalEvents(t, c); n != 0 {
		t.Errorf("%d RENEWED events after refusals only", n)
	}
}

// TestRenewByIDAsModPatronRenews: mod-patron renews a patron's loan by the
// item's and the patron's ids (POST /circulation/renew-by-id, the body
// mod-circulation's RenewByIdResource takes): renewed as by barcode, with
// Location and the renewal's event, the ids in any case; FOLIO's refusals
// name the ids (another patron's loan, an item with no open loan, no such
// item, no such patron, in FOLIO's order); a body without an id is
// refused naming it; a self-check machine may not call it, mod-patron
// with its one permission renews without a PIN, the tenant requiring
// kiosks' PINs, and is told the borrower; an item and a patron without
// barcodes (FOLIO's barcodes are optional) are renewed as any other, and
// an item's barcode given to another item before the renewal changes
// nothing of it.
func TestRenewByIDAsModPatronRenews(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(2, 2, 0)
	renewable(t, c, lib, map[string]any{"numberAllowed": 1, "renewFromId": "CURRENT_DUE_DATE"})
	librarian := c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleLibrarian))
	item, idle := lib.Items[0][0], lib.Items[0][1]
	c.CheckOut(0, item, lib.Patrons[0]).Want(t, http.StatusCreated)
	patronID, otherID := c.IDOf(t, "/users", "users", lib.Patrons[0]), c.IDOf(t, "/users", "users", lib.Patrons[1])
	itemID, idleID := c.IDOf(t, "/item-storage/items", "items", item), c.IDOf(t, "/item-storage/items", "items", idle)
	renew := func(body map[string]string, headers map[string]string) harness.Response {
		return c.DoWith(c.Circulations[0], "POST", "/circulation/renew-by-id", body, headers)
	}
	type refusal struct {
		Message, Code string
		Parameters    []struct{ Key, Value string }
	}
	refused := func(r harness.Response, code, message, key, value string) {
		t.Helper()
		var env struct{ Errors []refusal }
		r.Want(t, http.StatusUnprocessableEntity).Decode(t, &env)
		if len(env.Errors) != 1 || env.Errors[0].Code != code || env.Errors[0].Message != message ||
			len(env.Errors[0].Parameters) == 0 || env.Errors[0].Parameters[0].Key != key || env.Errors[0].Parameters[0].Value != value {
			t.Errorf("refused %s, want %s %q naming %s %s", r.Body, code, message, key, value)
		}
	}
	missing := uuid.NewString()
	refused(renew(map[string]string{"itemId": itemID, "userId": otherID}, librarian),
		schemas.CodeItemCheckedOutToDifferentUser, "Cannot renew item checked out to different user", "userId", otherID)
	refused(renew(map[string]string{"itemId": idleID, "userId": patronID}, librarian),
		schemas.CodeNoOpenLoan, "No open loan for item "+idleID, "itemId", idleID)
	refused(renew(map[string]string{"itemId": missing, "userId": patronID}, librarian),
		schemas.CodeItemNotFound, "No item with ID "+missing+" exists", "itemId", missing)
	// No such patron: FOLIO judges the item's open loan first, then whose
	// it is.
	refused(renew(map[string]string{"itemId": itemID, "userId": missing}, librarian),
		schemas.CodeItemCheckedOutToDifferentUser, "Cannot renew item checked out to different user", "userId", missing)
	refused(renew(map[string]string{"itemId": idleID, "userId": missing}, librarian),
		schemas.CodeNoOpenLoan, "No open loan for item "+idleID, "itemId", idleID)
	r := renew(map[string]string{"itemId": itemID}, librarian).Want(t, http.StatusUnprocessableEntity)
	if codes := r.ErrorCodes(); !slices.Equal(codes, []string{schemas.CodeValidation}) || !strings.Contains(string(r.Body), `"key":"userId"`) {
		t.Errorf("a body without userId: %s", r.Body)
	}
	renew(map[string]string{"itemId": itemID, "userId": patronID}, c.HeadersWith(schemas.HeaderToken, c.Token(schemas.RoleSelfCheck))).
		Want(t, http.StatusForbidden)
	c.CheckOut(0, idle, lib.Patrons[1]).Want(t, http.StatusCreated)
	// The item's barcode given to another item (the patron's loan is of
	// the item by its id, whatever its barcode).
	setBarcode(t, c, "/item-storage/items/"+itemID, item+"-moved")
	setBarcode(t, c, "/item-storage/items/"+idleID, item)
	idle, item = item, item+"-moved"
	if renewalCount(t, c, item) != 0 || renewalCount(t, c, idle) != 0 || renewalEvents(t, c) != 0 {
		t.Fatalf("the refusals renewed a loan: counts %d and %d, %d events", renewalCount(t, c, item), renewalCount(t, c, idle), renewalEvents(t, c))
	}

	// Renewed as mod-patron renews: its handler's one permission, no
	// PIN, though the tenant requires kiosks to give one; the answer names
	// the borrower the caller named.
	selfCheckSettings(t, c, selfcheck.PinRequired)
	modPatron, err := auth.Mint(harness.Secret(), auth.Claims{Tenant: c.Tenant, UserID: uuid.NewString(),
		Permissions: []string{"circulation.renew-by-id.post"}}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	var loan struct {
		ID, UserID, ItemID string
		RenewalCount       int
		Action             string
		Borrower           struct{ Barcode string }
	}
	r = renew(map[string]string{"itemId": strings.ToUpper(itemID), "userId": strings.ToUpper(patronID),
		"servicePointId": harness.ServicePoint}, c.HeadersWith(schemas.HeaderToken, modPatron)).Want(t, http.StatusOK)
	r.Decode(t, &loan)
	if loan.RenewalCount != 1 || loan.Action != "renewed" || loan.ItemID != itemID || loan.UserID != patronID ||
		loan.Borrower.Barcode != lib.Patrons[0] || r.Header.Get("Location") != "/circulation/loans/"+loan.ID {
		t.Errorf("renewed by id: %+v (Location %q)", loan, r.Header.Get("Location"))
	}
	if n := renewalCount(t, c, item); n != 1 || renewalEvents(t, c) != 1 {
		t.Errorf("stored renewal count %d, %d events, want 1 and 1", n, renewalEvents(t, c))
	}
	refused(renew(map[string]string{"itemId": itemID, "userId": patronID}, librarian),
		schemas.CodeLoanRenewalLimitReached, "loan at maximum renewal number", "loanPolicyId", lib.PolicyID)

	// The other patron's loan, its item and its patron without barcodes:
	// renewed by their ids, the one loan renewed, once.
	setBarcode(t, c, "/item-storage/items/"+idleID, "")
	setBarcode(t, c, "/users/"+otherID, "")
	r = renew(map[string]string{"itemId": idleID, "userId": otherID}, librarian).Want(t, http.StatusOK)
	loan = struct {
		ID, UserID, ItemID string
		RenewalCount       int
		Action             string
		Borrower           struct{ Barcode string }
	}{}
	r.Decode(t, &loan)
	if loan.RenewalCount != 1 || loan.Action != "renewed" || loan.ItemID != idleID || loan.UserID != otherID || loan.Borrower.Barcode != "" {
		t.Errorf("renewed by id without barcodes: %+v", loan)
	}
	var counts []int
	if err := c.DB.QueryRow(context.Background(), fmt.Sprintf(`SELECT array_agg(coalesce((jsonb ->> 'renewalCount')::int, 0) ORDER BY item_id = $1 DESC)
		FROM %s.loan WHERE status_name = 'Open'`, c.Schema), idleID).Scan(&counts); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(counts, []int{1, 1}) || renewalEvents(t, c) != 2 {
		t.Errorf("open loans' renewal counts %v (the barcode-less item's first), %d events; want [1 1] and 2", counts, renewalEvents(t, c))
	}
}
