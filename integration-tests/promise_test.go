package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// The item limit holds whoever calls: circulation calls storage as itself,
// the roles reach nothing at storage, and storage keeps its own rules
// against a caller it lets in.

// kioskRoles are the roles that work through circulation only.
var kioskRoles = []string{schemas.RoleSelfCheck, schemas.RoleLibrarian, schemas.RoleOperator}

// TestEveryStorageRouteRefusesTheRoles calls every route of storage with
// each role's token (self-check, librarian, operator): every answer is 403
// naming the permission, and the database is as it was.
func TestEveryStorageRouteRefusesTheRoles(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 3, 3)
	c.CheckOut(0, lib.Items[0][0], lib.Patrons[0]).Want(t, http.StatusCreated)
	before := c.Snapshot(t)
	n := 0
	for _, r := range schemas.RoutesOf(schemas.ServiceStorage) {
		if r.Permission == "" {
			continue
		}
		for _, role := range kioskRoles {
			path, body := routeRequest(r)
			res := c.DoWith(c.Storage, r.Method, path, body, map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(role)})
			code, params := envelopeError(t, res)
			if res.Status != http.StatusForbidden || code != auth.CodeForbidden || params["permission"] != r.Permission {
				t.Errorf("%s %s as %s: %d %s %v, want 403 naming %s", r.Method, r.Path, role, res.Status, code, params, r.Permission)
			}
			n++
		}
	}
	if after := c.Snapshot(t); after != before {
		t.Errorf("a role's call to storage changed the tenant's data")
	}
	summary(t, n, 0, n, 0, "every storage route × self-check, librarian, operator: 403, database unchanged")
}

// attack is one write an attacker tries at storage.
type attack struct {
	name         string
	method, path string
	body         any
	headers      map[string]string
}

// storageAttacks are the writes that let a kiosk past the limit, onto
// other patrons' locks and into the settings before storage kept its own
// rules: for patron (at her limit with loan open, of item checkedOut),
// with item spare her next, lock someone else's live lock, setting the
// lock settings entry.
func storageAttacks(t *testing.T, c *harness.Cluster, patron, other, spare, checkedOut, openLoan, lock, setting string) []attack {
	t.Helper()
	now := schemas.FormatTime(time.Now())
	loan := func(item string) map[string]any {
		return map[string]any{"userId": patron, "itemId": item, "loanDate": now, "action": "checkedout", "status": map[string]any{"name": "Open"}}
	}
	item := func(status, loanType string) map[string]any {
		var doc map[string]any
		c.Do(c.Storage, "GET", "/item-storage/items/"+spare, nil).Want(t, http.StatusOK).Decode(t, &doc)
		doc["status"] = map[string]any{"name": status}
		if loanType != "" {
			doc["permanentLoanTypeId"] = loanType
		}
		return doc
	}
	var stored map[string]any
	c.Do(c.Storage, "GET", "/loan-storage/loans/"+openLoan, nil).Want(t, http.StatusOK).Decode(t, &stored)
	closed := map[string]any{}
	for k, v := range stored {
		closed[k] = v
	}
	closed["status"], closed["action"], closed["returnDate"] = map[string]any{"name": "Closed"}, "checkedin", now
	var checkedOutItem map[string]any
	c.Do(c.Storage, "GET", "/item-storage/items/"+checkedOut, nil).Want(t, http.StatusOK).Decode(t, &checkedOutItem)
	checkedOutItem["status"] = map[string]any{"name": "Available"}
	return []attack{
		{name: "open a loan with no headers", method: "POST", path: "/loan-storage/loans", body: loan(spare)},
		{name: "open a loan naming a forged limit", method: "POST", path: "/loan-storage/loans", body: loan(spare),
			headers: map[string]string{schemas.HeaderItemVersion: "1", "X-Check-Out-Item-Limit": "1000"}},
		{name: "open a loan under someone else's lock", method: "POST", path: "/loan-storage/loans", body: loan(spare),
			headers: map[string]string{schemas.HeaderItemVersion: "1", schemas.HeaderLockID: lock}},
		{name: "close a loan without checking its item in", method: "PUT", path: "/loan-storage/loans/" + openLoan, body: closed},
		{name: "delete an open loan", method: "DELETE", path: "/loan-storage/loans/" + openLoan},
		{name: "put a checked-out item back to Available", method: "PUT", path: "/item-storage/items/" + checkedOut, body: checkedOutItem},
		{name: "put an item Checked out", method: "PUT", path: "/item-storage/items/" + spare, body: item("Checked out", "")},
		{name: "take a 10-minute lock on another patron", method: "POST", path: "/check-out-lock-storage",
			body: map[string]any{"userId": other, "ttlMs": 600000, "holder": map[string]any{"instance": "made-up"}}},
		{name: "renew someone else's lock to 600 s", method: "POST", path: "/check-out-lock-storage",
			body: map[string]any{"id": lock, "userId": other, "ttlMs": 600000}},
		{name: "release someone else's lock by id", method: "DELETE", path: "/check-out-lock-storage/" + lock},
		{name: "switch the lock off with a one-millisecond TTL", method: "PUT", path: "/settings/entries/" + setting,
			body: map[string]any{"id": setting, "scope": "mod-circulation", "key": "checkoutLockFeature",
				"value": map[string]any{"checkOutLockFeatureEnabled": false, "lockTtl": 1}}},
	}
}

// TestTheLimitHoldsWhoeverCalls brings Alice to her limit of three
// through circulation, then tries every write that once took her past it
// straight at storage: holding a self-check token every one is 403 and
// nothing changes; holding the tenant administrator's (a caller storage
// lets in) every one is refused by storage's own rules, each with its code,
// and still nothing changes. Alice ends at her limit, her lock-holding
// neighbour keeps his lock, and the lock stays on.
func TestTheLimitHoldsWhoeverCalls(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(2, 5, 3)
	alice, bob := lib.Patrons[0], lib.Patrons[1]
	for _, item := range lib.Items[0][:3] {
		c.CheckOut(0, item, alice).Want(t, http.StatusCreated)
	}
	if codes := c.CheckOut(0, lib.Items[0][3], alice).Want(t, http.StatusUnprocessableEntity).ErrorCodes(); len(codes) != 1 ||
		codes[0] != schemas.CodeItemLimitPatronGroupLoanType && codes[0] != schemas.CodeItemLimitLoanType {
		t.Fatalf("the fourth check-out: %v, want refused at the limit", codes)
	}
	aliceID, bobID := patronID(t, c, alice), patronID(t, c, bob)
	var loans struct {
		Loans []struct{ ID, ItemID string } `json:"loans"`
	}
	c.Do(c.Storage, "GET", "/loan-storage/loans?status=Open&userId="+aliceID, nil).Want(t, http.StatusOK).Decode(t, &loans)
	var setting struct{ ID string }
	c.Do(c.Storage, "POST", "/settings/entries", map[string]any{"scope": "mod-circulation", "key": "checkoutLockFeature",
		"value": map[string]any{"checkOutLockFeatureEnabled": true}}).Want(t, http.StatusCreated).Decode(t, &setting)
	var held struct{ ID string }
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": bobID, "ttlMs": 120000}).
		Want(t, http.StatusCreated).Decode(t, &held)
	attacks := storageAttacks(t, c, aliceID, bobID, itemID(t, c, lib.Items[0][3]), loans.Loans[0].ItemID, loans.Loans[0].ID, held.ID, setting.ID)

	before := c.Snapshot(t)
	for _, a := range attacks {
		h := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}
		for k, v := range a.headers {
			h[k] = v
		}
		if r := c.DoWith(c.Storage, a.method, a.path, a.body, h); r.Status != http.StatusForbidden {
			t.Errorf("self-check token: %s: %d %s, want 403", a.name, r.Status, r.Body)
		}
	}
	if c.Snapshot(t) != before {
		t.Errorf("a self-check token changed the tenant's data at storage")
	}

	// The tenant administrator holds every storage permission, and
	// signs as another user than the one who took Bob's lock: storage's
	// own rules refuse each write.
	admin, err := auth.RoleClaims(schemas.RoleTenantAdmin, c.Tenant, uuid.NewString())
	if err != nil {
		t.Fatal(err)
	}
	adminToken, err := auth.Mint(harness.Secret(), admin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		status int
		code   string
	}{
		"open a loan with no headers":                    {422, schemas.CodeCheckOutRequired},
		"open a loan naming a forged limit":              {422, schemas.CodeLockRequired},
		"open a loan under someone else's lock":          {409, schemas.CodeLockLost},
		"close a loan without checking its item in":      {422, schemas.CodeCheckInRequired},
		"delete an open loan":                            {422, schemas.CodeCheckInRequired},
		"put a checked-out item back to Available":       {422, schemas.CodeItemStatusByCirculation},
		"put an item Checked out":                        {422, schemas.CodeItemStatusByCirculation},
		"take a 10-minute lock on another patron":        {503, schemas.CodeLockHeld},
		"renew someone else's lock to 600 s":             {503, schemas.CodeLockHeld},
		"release someone else's lock by id":              {0, ""}, // the administrator may: below
		"switch the lock off with a one-millisecond TTL": {422, schemas.CodeValidation},
	}
	for _, a := range attacks {
		w := want[a.name]
		if w.status == 0 {
			continue
		}
		h := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: adminToken}
		for k, v := range a.headers {
			h[k] = v
		}
		r := c.DoWith(c.Storage, a.method, a.path, a.body, h)
		if codes := r.ErrorCodes(); r.Status != w.status || len(codes) == 0 || codes[0] != w.code {
			t.Errorf("tenant administrator: %s: %d %s, want %d %s", a.name, r.Status, r.Body, w.status, w.code)
		}
	}
	if c.Snapshot(t) != before {
		t.Errorf("a write storage refused changed the tenant's data")
	}
	if n := c.OpenLoans(t, alice); n != 3 {
		t.Errorf("Alice has %d open loans, want her limit, 3", n)
	}
	// The lock is still on: Alice's next check-out, an item checked in
	// first, goes through circulation under it.
	c.CheckIn(0, lib.Items[0][0]).Want(t, http.StatusOK)
	c.CheckOut(0, lib.Items[0][3], alice).Want(t, http.StatusCreated)
	if n := c.OpenLoans(t, alice); n != 3 {
		t.Errorf("Alice has %d open loans after one in and one out, want 3", n)
	}
	summary(t, 2*len(attacks), 0, 2*len(attacks)-1, 0, "self-check: all 403; tenant administrator: each refused by storage's rules")
}

// TestConcurrentWritesAtStorageKeepTheLimit fires a patron's check-out
// writes straight at storage, many at once, round after round, as a caller
// storage lets in with no lock (the feature off): storage counts each in
// the write, the patron's writes wait for one another, and no more are
// written than the limit the rules set.
func TestConcurrentWritesAtStorageKeepTheLimit(t *testing.T) {
	t.Parallel()
	const rounds, writers, limit = 5, 12, 3
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	lib := c.SetupLibrary(rounds, writers, limit)
	for round := range rounds {
		user := patronID(t, c, lib.Patrons[round])
		statuses := make([]int, writers)
		start := make(chan struct{})
		done := make(chan struct{})
		for i := range writers {
			item := itemID(t, c, lib.Items[round][i])
			go func() {
				defer func() { done <- struct{}{} }()
				<-start
				statuses[i] = c.DoWith(c.Storage, "POST", "/loan-storage/loans", map[string]any{
					"userId": user, "itemId": item, "action": "checkedout", "status": map[string]any{"name": "Open"},
					"loanDate": schemas.FormatTime(time.Now())}, c.HeadersWith(schemas.HeaderItemVersion, "1")).Status
			}()
		}
		close(start)
		for range writers {
			<-done
		}
		created := 0
		for _, s := range statuses {
			switch s {
			case http.StatusCreated:
				created++
			case http.StatusUnprocessableEntity:
			default:
				t.Errorf("round %d: status %d", round, s)
			}
		}
		if n := c.OpenLoans(t, lib.Patrons[round]); created != limit || n != limit {
			t.Fatalf("round %d: %d written, %d open loans; want the limit, %d", round, created, n, limit)
		}
	}
	summary(t, rounds*writers, rounds*limit, rounds*(writers-limit), 0, "each round: exactly the limit written")
}

// moduleSigner signs circulation's module tokens with the run's module
// key, as circulation does.
func moduleSigner(t *testing.T, key string) *auth.ModuleSigner {
	t.Helper()
	s, err := auth.NewModuleSigner(schemas.ServiceCirculation, schemas.ServiceStorage, key, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestModuleTokensHoldOnlyWhatCirculationDeclared: storage accepts
// circulation's module token for one tenant, addressed to it, short-lived,
// holding only what circulation's handlers declare; a token holding more
// (a tenant administrator's permissions, minted with circulation's own
// key), an expired one, one for another tenant, one addressed elsewhere,
// one too long-lived and one signed by a key storage does not trust are
// refused, and nothing changes.
func TestModuleTokensHoldOnlyWhatCirculationDeclared(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 3)
	signer := moduleSigner(t, harness.ModuleKey())
	declared := schemas.ModulePermissionsFor(schemas.ServiceCirculation, "POST", "/circulation/check-out-by-barcode")
	good, err := signer.Token(c.Tenant, "", "check-out", declared)
	if err != nil {
		t.Fatal(err)
	}
	validation := "/check-out-storage/validation?itemBarcode=" + lib.Items[0][0] + "&userBarcode=" + lib.Patrons[0]
	call := func(method, path string, body any, token string) harness.Response {
		return c.DoWith(c.Storage, method, path, body, map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: token})
	}
	call("GET", validation, nil, good).Want(t, http.StatusOK)

	admin, _ := schemas.PermissionSetNamed(schemas.RoleTenantAdmin)
	tooMuch, _ := signer.Token(c.Tenant, "", "admin", admin.Permissions)
	other, _ := signer.Token("othertenant", "", "check-out", declared)
	keyPEM, err := os.ReadFile(harness.ModuleKey())
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwt.ParseECPrivateKeyFromPEM(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	craft := func(k *ecdsa.PrivateKey, iat, exp time.Time, audience string) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodES256, auth.Claims{Tenant: c.Tenant, Permissions: declared,
			RegisteredClaims: jwt.RegisteredClaims{Issuer: schemas.ServiceCirculation, Subject: schemas.ServiceCirculation,
				Audience: jwt.ClaimStrings{audience}, IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp)}}).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	before := c.Snapshot(t)
	for _, tc := range []struct {
		name   string
		token  string
		status int
	}{
		{"holding a tenant administrator's permissions", tooMuch, http.StatusForbidden},
		{"expired", craft(key, now.Add(-2*time.Minute), now.Add(-time.Minute), schemas.ServiceStorage), http.StatusUnauthorized},
		{"for another tenant", other, http.StatusUnauthorized},
		{"addressed to another service", craft(key, now, now.Add(time.Minute), "mod-users"), http.StatusUnauthorized},
		{"living an hour", craft(key, now, now.Add(time.Hour), schemas.ServiceStorage), http.StatusUnauthorized},
		{"signed by a key storage does not trust", craft(stranger, now, now.Add(time.Minute), schemas.ServiceStorage), http.StatusUnauthorized},
	} {
		for _, req := range []struct {
			method, path string
			body         any
		}{
			{"GET", validation, nil},
			{"POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, lib.Patrons[0]), "ttlMs": 600000}},
			{"POST", "/_/tenant", map[string]any{"module_from": "mod-circulation-storage-1.0.0", "purge": true}},
		} {
			r := call(req.method, req.path, req.body, tc.token)
			if r.Status != tc.status {
				t.Errorf("a module token %s: %s %s: %d %s, want %d", tc.name, req.method, req.path, r.Status, r.Body, tc.status)
			}
		}
	}
	if c.Snapshot(t) != before {
		t.Errorf("a refused module token changed the tenant's data")
	}
	// Even a good one holds only what its handler declared: the check-out's
	// token lists no patrons.
	if r := call("GET", "/users?limit=1000", nil, good); r.Status != http.StatusForbidden {
		t.Errorf("the check-out's module token listing patrons: %d, want 403", r.Status)
	}
}

// TestSettingsAreCheckedWhereTheyAreStored: a librarian cannot reach the
// settings at storage (403); the tenant administrator's write out of
// bounds is refused naming the bound (422) and changes nothing; every
// change, at storage directly or through circulation, is in the change log
// with the caller, and circulation's names the librarian it acted for.
func TestSettingsAreCheckedWhereTheyAreStored(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	var entry struct{ ID string }
	c.Do(c.Storage, "POST", "/settings/entries", map[string]any{"scope": "mod-circulation", "key": "checkoutLockFeature",
		"value": map[string]any{"checkOutLockFeatureEnabled": true}}).Want(t, http.StatusCreated).Decode(t, &entry)
	bad := map[string]any{"id": entry.ID, "scope": "mod-circulation", "key": "checkoutLockFeature",
		"value": map[string]any{"checkOutLockFeatureEnabled": false, "lockTtl": 1}}
	before := c.Snapshot(t)
	r := c.DoWith(c.Storage, "PUT", "/settings/entries/"+entry.ID, bad,
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)})
	if code, _ := envelopeError(t, r); r.Status != http.StatusForbidden || code != auth.CodeForbidden {
		t.Errorf("a librarian's write at storage: %d %s, want 403", r.Status, code)
	}
	r = c.Do(c.Storage, "PUT", "/settings/entries/"+entry.ID, bad)
	code, params := envelopeError(t, r)
	if r.Status != http.StatusUnprocessableEntity || code != schemas.CodeValidation || params["value.lockTtl"] != "1" ||
		!strings.Contains(string(r.Body), "must be from 100 to 600000 ms, got 1") {
		t.Errorf("lockTtl 1 at storage: %d %s, want 422 naming the bound", r.Status, r.Body)
	}
	if c.Snapshot(t) != before {
		t.Errorf("a refused settings write changed the tenant's data")
	}

	c.DoWith(c.Circulations[0], "PATCH", "/circulation/settings/check-out-lock", `{"lockTtl":5000}`,
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleLibrarian)}).Want(t, http.StatusOK)
	librarian := harness.RoleUser(schemas.RoleLibrarian)
	admin := harness.RoleUser(schemas.RoleTenantAdmin)
	rows, err := c.DB.Query(t.Context(), fmt.Sprintf(`SELECT operation, coalesce(changed_by, ''), coalesce(changed_by_module, ''), value::text
		FROM %q.setting_change ORDER BY id`, c.Schema))
	if err != nil {
		t.Fatal(err)
	}
	var log []string
	for rows.Next() {
		var op, by, module, value string
		if err := rows.Scan(&op, &by, &module, &value); err != nil {
			t.Fatal(err)
		}
		log = append(log, op+" by "+by+" via "+module)
	}
	want := []string{"create by " + admin + " via ", "update by " + librarian + " via circulation"}
	if strings.Join(log, "; ") != strings.Join(want, "; ") {
		t.Errorf("change log %q, want %q", log, want)
	}
}

// TestCirculationCallsStorageAsItself: storage's request log names, for a
// check-out, the self-check machine's user and the module acting for it;
// circulation never forwards the caller's token (storage would refuse a
// self-check token, and the check-out succeeds).
func TestCirculationCallsStorageAsItself(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 3)
	c.DoWith(c.Circulations[0], "POST", "/circulation/check-out-by-barcode",
		map[string]string{"itemBarcode": lib.Items[0][0], "userBarcode": lib.Patrons[0], "servicePointId": harness.ServicePoint},
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}).Want(t, http.StatusCreated)
	kiosk := harness.RoleUser(schemas.RoleSelfCheck)
	// A request's line is written once its answer is sent: wait for it.
	found := harness.Poll(5*time.Second, 20*time.Millisecond, func() bool {
		for _, line := range strings.Split(c.Storage.Log(), "\n") {
			if strings.Contains(line, `"route":"/loan-storage/loans"`) && strings.Contains(line, `"caller":"`+kiosk+`"`) &&
				strings.Contains(line, `"module":"circulation"`) {
				return true
			}
		}
		return false
	})
	if !found {
		t.Errorf("storage's log has no line for the check-out's write naming user %s and module circulation", kiosk)
	}
	// The lock the check-out took was circulation's, for the kiosk.
	var page struct {
		Events []struct{ Type string } `json:"events"`
	}
	c.Do(c.Storage, "GET", "/check-out-lock-storage/history", nil).Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Events) != 0 {
		t.Errorf("history %+v after a plain check-out, want none", page.Events)
	}
}

// TestSmallerPromises: two different tokens on one request are refused;
// answers carrying patron data are not cached; pages send no referrer; a
// check-out dated ahead of the clock is refused; validation hands out no
// contact details.
func TestSmallerPromises(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 3)
	circ := c.Circulations[0]
	for p, path := range map[*harness.Process]string{c.Storage: "/loan-storage/loans", circ: "/circulation/loans"} {
		r := c.DoWith(p, "GET", path, nil, map[string]string{schemas.HeaderTenant: c.Tenant,
			schemas.HeaderToken: c.Token(schemas.RoleTenantAdmin), "Authorization": "Bearer " + c.Token(schemas.RoleLibrarian)})
		if code, _ := envelopeError(t, r); r.Status != http.StatusUnauthorized || code != auth.CodeInvalidToken {
			t.Errorf("%s: two different tokens: %d %s, want 401", p.Name, r.Status, code)
		}
	}
	r := c.Do(circ, "GET", "/circulation/loans", nil).Want(t, http.StatusOK)
	if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("loans answered with Cache-Control %q, want no-store", cc)
	}
	if cc := c.Do(c.Storage, "GET", "/users", nil).Want(t, http.StatusOK).Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("users answered with Cache-Control %q, want no-store", cc)
	}
	if rp := c.Do(circ, "GET", "/ui/locks.html", nil).Want(t, http.StatusOK).Header.Get("Referrer-Policy"); rp != "no-referrer" {
		t.Errorf("the lock console page with Referrer-Policy %q, want no-referrer", rp)
	}
	ahead := schemas.FormatTime(time.Now().Add(time.Hour))
	r = c.Do(circ, "POST", "/circulation/check-out-by-barcode", map[string]string{"itemBarcode": lib.Items[0][0],
		"userBarcode": lib.Patrons[0], "servicePointId": harness.ServicePoint, "loanDate": ahead})
	if codes := r.ErrorCodes(); r.Status != http.StatusUnprocessableEntity || len(codes) != 1 || codes[0] != schemas.CodeValidation {
		t.Errorf("a check-out dated an hour ahead: %d %s, want 422", r.Status, r.Body)
	}
	if n := c.OpenLoans(t, lib.Patrons[0]); n != 0 {
		t.Errorf("%d loans after the refused check-out", n)
	}

	var user map[string]any
	c.Do(c.Storage, "GET", "/users/"+patronID(t, c, lib.Patrons[0]), nil).Want(t, http.StatusOK).Decode(t, &user)
	personal := user["personal"].(map[string]any)
	personal["email"], personal["phone"] = "alice@example.org", "+1 555 0100"
	personal["addresses"] = []any{map[string]any{"addressLine1": "1 Library Lane", "city": "Springfield"}}
	c.Do(c.Storage, "PUT", "/users/"+user["id"].(string), user).Want(t, http.StatusNoContent)
	body := string(c.Do(c.Storage, "GET", "/check-out-storage/validation?itemBarcode="+lib.Items[0][0]+"&userBarcode="+lib.Patrons[0], nil).
		Want(t, http.StatusOK).Body)
	for _, leak := range []string{"alice@example.org", "555 0100", "Library Lane"} {
		if strings.Contains(body, leak) {
			t.Errorf("validation hands out %q: %s", leak, body)
		}
	}
}
