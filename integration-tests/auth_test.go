package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// Who may do what, against the real binaries in jwt mode: every route of
// both services, as every role and as no one.

// callers are the ways to call: no token, and a token for each role.
var callers = []string{"", schemas.RoleSelfCheck, schemas.RoleLibrarian, schemas.RoleOperator, schemas.RoleTenantAdmin}

// routeRequest is a request to route, with a made-up id and an empty
// JSON object as body where the method takes one.
func routeRequest(r schemas.Route) (path string, body any) {
	path = strings.ReplaceAll(r.Path, "{id}", uuid.NewString())
	path = strings.ReplaceAll(path, "{file}", "settings.html")
	if r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH" {
		body = "{}"
	}
	return path, body
}

// envelopeError is the first error of a FOLIO envelope.
func envelopeError(t *testing.T, r harness.Response) (code string, params map[string]string) {
	t.Helper()
	var env struct {
		Errors []struct {
			Code       string `json:"code"`
			Parameters []struct{ Key, Value string }
		} `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &env); err != nil || len(env.Errors) == 0 {
		t.Fatalf("not an error envelope: %d %s", r.Status, r.Body)
	}
	params = map[string]string{}
	for _, p := range env.Errors[0].Parameters {
		params[p.Key] = p.Value
	}
	return env.Errors[0].Code, params
}

// TestEveryRouteAsEveryRole walks every route of both services × {no
// token, self-check, librarian, operator, tenant administrator}: no token
// is 401, a token without the route's permission 403 naming it, a token
// with it gets past authentication (whatever the handler then says of the
// made-up request); health, readiness and metrics are open, and so is
// signing in (refresh answers 401 SESSION_ENDED without its cookie).
func TestEveryRouteAsEveryRole(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	services := map[string]*harness.Process{schemas.ServiceStorage: c.Storage, schemas.ServiceCirculation: c.Circulations[0]}
	counts := map[string]int{}
	for _, r := range schemas.Routes {
		if r.Interface == schemas.InterfaceTenant && r.Method == "POST" {
			continue // below, with a body that changes nothing
		}
		for _, role := range callers {
			path, body := routeRequest(r)
			headers := map[string]string{schemas.HeaderTenant: c.Tenant}
			var held bool
			if role != "" {
				headers[schemas.HeaderToken] = c.Token(role)
				set, _ := schemas.PermissionSetNamed(role)
				held = slices.Contains(set.Permissions, r.Permission)
			}
			res := c.DoWith(services[r.Service], r.Method, path, body, headers)
			name := fmt.Sprintf("%s %s as %q", r.Method, r.Path, role)
			switch {
			case r.Path == "/bl-users/_self":
				// Who is signed in: any valid token, none without one.
				want := http.StatusOK
				if role == "" {
					want = http.StatusUnauthorized
				}
				if res.Status != want {
					t.Errorf("%s: %d %s, want %d", name, res.Status, res.Body, want)
				}
			case r.Permission == "" && strings.HasPrefix(r.Path, "/authn/"):
				// Signing in needs no token: the made-up body is refused
				// by the login itself, never by authentication.
				if res.Status == http.StatusUnauthorized && r.Path != "/authn/refresh" || res.Status == http.StatusForbidden || res.Status >= 500 {
					t.Errorf("%s: open route answered %d %s", name, res.Status, res.Body)
				}
			case r.Permission == "":
				if res.Status != http.StatusOK {
					t.Errorf("%s: open route answered %d", name, res.Status)
				}
			case role == "":
				if code, _ := envelopeError(t, res); res.Status != http.StatusUnauthorized || code != auth.CodeAuthRequired {
					t.Errorf("%s: %d %s, want 401 AUTH_REQUIRED", name, res.Status, code)
				}
			case !held:
				code, params := envelopeError(t, res)
				if res.Status != http.StatusForbidden || code != auth.CodeForbidden || params["permission"] != r.Permission {
					t.Errorf("%s: %d %s %v, want 403 FORBIDDEN naming %s", name, res.Status, code, params, r.Permission)
				}
			default:
				if res.Status == http.StatusUnauthorized || res.Status == http.StatusForbidden || res.Status >= 500 {
					t.Errorf("%s: %d %s, want it past authentication", name, res.Status, res.Body)
				}
			}
			counts[fmt.Sprint(res.Status)]++
		}
	}
	summary(t, len(schemas.Routes)*len(callers), 0, 0, 0, fmt.Sprintf("statuses=%v", counts))
}

// badTokens are tokens that must not hold: signed with another key,
// expired, for another tenant, unsigned ("alg": "none"), and not a token.
func badTokens(t *testing.T, c *harness.Cluster) map[string]string {
	claims, err := auth.RoleClaims(schemas.RoleTenantAdmin, c.Tenant, "")
	if err != nil {
		t.Fatal(err)
	}
	wrongKey, _ := auth.Mint(strings.Repeat("w", 40), claims, time.Hour)
	expired, _ := auth.Mint(harness.Secret(), claims, -time.Minute)
	other := harness.Token(t, "othertenant", schemas.RoleTenantAdmin)
	payload, _ := json.Marshal(map[string]any{"tenant": c.Tenant, "permissions": claims.Permissions, "exp": time.Now().Add(time.Hour).Unix()})
	enc := base64.RawURLEncoding.EncodeToString
	unsigned := enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(payload) + "."
	return map[string]string{"wrong signature": wrongKey, "expired": expired, "other tenant": other, "alg none": unsigned,
		"not a token": "let-me-in"}
}

// TestBadTokensAre401: every protected route of both services answers
// each bad token 401 with the envelope, and nothing changes.
func TestBadTokensAre401(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	c.SetupLibrary(1, 1, 3)
	before := c.Snapshot(t)
	services := map[string]*harness.Process{schemas.ServiceStorage: c.Storage, schemas.ServiceCirculation: c.Circulations[0]}
	n := 0
	for name, token := range badTokens(t, c) {
		for _, r := range schemas.Routes {
			if r.Permission == "" {
				continue
			}
			path, body := routeRequest(r)
			for _, header := range []string{schemas.HeaderToken, "Authorization"} {
				value := token
				if header == "Authorization" {
					value = "Bearer " + token
				}
				res := c.DoWith(services[r.Service], r.Method, path, body, map[string]string{schemas.HeaderTenant: c.Tenant, header: value})
				code, _ := envelopeError(t, res)
				if res.Status != http.StatusUnauthorized || code != auth.CodeInvalidToken || res.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s with a token %s (%s): %d %s, want 401 INVALID_TOKEN with WWW-Authenticate", r.Method, r.Path, name, header,
						res.Status, code)
				}
				n++
			}
		}
	}
	if after := c.Snapshot(t); after != before {
		t.Errorf("bad tokens changed the tenant's data")
	}
	summary(t, n, 0, n, 0, "all 401")
}

// TestAttacksWithoutCredentials replays what an attacker on the network
// could do before: each is now 401, and the database is unchanged.
func TestAttacksWithoutCredentials(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 5, 3)
	patron := patronID(t, c, lib.Patrons[0])
	var lock struct{ ID string }
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patron, "ttlMs": 60000}).Want(t, http.StatusCreated).Decode(t, &lock)
	before := c.Snapshot(t)
	tenantOnly := map[string]string{schemas.HeaderTenant: c.Tenant}
	newTenant := harness.TenantID()
	attacks := []struct {
		name         string
		p            *harness.Process
		method, path string
		body         any
		headers      map[string]string
	}{
		{"purge the tenant", c.Storage, "POST", "/_/tenant", `{"module_from":"mod-circulation-storage-1.0.0","purge":true}`, tenantOnly},
		{"create a tenant", c.Storage, "POST", "/_/tenant", `{"module_to":"mod-circulation-storage-1.0.0"}`,
			map[string]string{schemas.HeaderTenant: newTenant}},
		{"list the locks", c.Storage, "GET", "/check-out-lock-storage", nil, tenantOnly},
		{"release a patron's lock", c.Storage, "DELETE", "/check-out-lock-storage/" + lock.ID, nil, tenantOnly},
		{"extend a patron's lock to 600 s", c.Storage, "POST", "/check-out-lock-storage",
			fmt.Sprintf(`{"id":%q,"userId":%q,"ttlMs":600000}`, lock.ID, patron), tenantOnly},
		{"switch the lock off", c.Circulations[0], "PUT", "/circulation/settings/check-out-lock", `{"checkOutLockFeatureEnabled":false}`, tenantOnly},
		{"switch the lock off in storage", c.Storage, "POST", "/settings/entries",
			`{"scope":"mod-circulation","key":"checkoutLockFeature","value":{"checkOutLockFeatureEnabled":false}}`, tenantOnly},
		{"write a loan past the limit", c.Storage, "POST", "/loan-storage/loans",
			fmt.Sprintf(`{"userId":%q,"itemId":%q,"loanDate":"2026-01-01T00:00:00Z","action":"checkedout","status":{"name":"Open"}}`,
				patron, itemID(t, c, lib.Items[0][0])), tenantOnly},
		{"check out", c.Circulations[0], "POST", "/circulation/check-out-by-barcode",
			fmt.Sprintf(`{"itemBarcode":%q,"userBarcode":%q,"servicePointId":%q}`, lib.Items[0][1], lib.Patrons[0], harness.ServicePoint), tenantOnly},
	}
	for _, a := range attacks {
		res := a.p
		r := c.DoWith(res, a.method, a.path, a.body, a.headers)
		if code, _ := envelopeError(t, r); r.Status != http.StatusUnauthorized || code != auth.CodeAuthRequired {
			t.Errorf("%s: %d %s, want 401 AUTH_REQUIRED", a.name, r.Status, r.Body)
		}
	}
	if after := c.Snapshot(t); after != before {
		t.Errorf("an attack changed the tenant's data")
	}
	var exists bool
	if err := c.DB.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`,
		newTenant+"_mod_circulation_storage").Scan(&exists); err != nil || exists {
		t.Errorf("the attacker's tenant was created (%v)", err)
	}
	summary(t, len(attacks), 0, len(attacks), 0, "all 401, database unchanged")
}

// itemID reads an item's id by barcode.
func itemID(t *testing.T, c *harness.Cluster, barcode string) string {
	t.Helper()
	var page struct {
		Items []struct{ ID string } `json:"items"`
	}
	c.Do(c.Storage, "GET", "/item-storage/items?barcode="+barcode, nil).Want(t, http.StatusOK).Decode(t, &page)
	if len(page.Items) != 1 {
		t.Fatalf("item %s not found", barcode)
	}
	return page.Items[0].ID
}

// TestRolesDoTheirWork: each role can do what it is for, end to end,
// through circulation, which calls storage as itself: the self-check
// machine checks out and in; the librarian changes the settings; the
// operator lists and releases locks in the lock console; and each is
// refused the others' work, and storage itself.
func TestRolesDoTheirWork(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 3, 3)
	circ := c.Circulations[0]
	as := func(role string) map[string]string {
		return map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(role)}
	}
	checkOut := fmt.Sprintf(`{"itemBarcode":%q,"userBarcode":%q,"servicePointId":%q}`, lib.Items[0][0], lib.Patrons[0], harness.ServicePoint)
	c.DoWith(circ, "POST", "/circulation/check-out-by-barcode", checkOut, as(schemas.RoleSelfCheck)).Want(t, http.StatusCreated)
	c.DoWith(circ, "POST", "/circulation/check-in-by-barcode",
		fmt.Sprintf(`{"itemBarcode":%q,"servicePointId":%q}`, lib.Items[0][0], harness.ServicePoint), as(schemas.RoleSelfCheck)).
		Want(t, http.StatusOK)

	// The self-check machine may not change the settings: 403 naming why.
	r := c.DoWith(circ, "PATCH", "/circulation/settings/check-out-lock", `{"lockTtl":5000}`, as(schemas.RoleSelfCheck))
	if code, params := envelopeError(t, r); r.Status != http.StatusForbidden || params["permission"] != "circulation.settings.check-out-lock.put" {
		t.Errorf("self-check PATCH of the settings: %d %s %v", r.Status, code, params)
	}
	c.DoWith(circ, "PATCH", "/circulation/settings/check-out-lock", `{"lockTtl":5000}`, as(schemas.RoleLibrarian)).Want(t, http.StatusOK)

	var lock struct{ ID string }
	c.Do(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": patronID(t, c, lib.Patrons[0]), "ttlMs": 60000}).
		Want(t, http.StatusCreated).Decode(t, &lock)
	c.DoWith(circ, "GET", "/circulation/check-out-locks", nil, as(schemas.RoleOperator)).Want(t, http.StatusOK)
	for _, role := range []string{schemas.RoleSelfCheck, schemas.RoleLibrarian} {
		if r := c.DoWith(circ, "GET", "/circulation/check-out-locks", nil, as(role)); r.Status != http.StatusForbidden {
			t.Errorf("%s listing the locks: %d, want 403", role, r.Status)
		}
	}
	for _, role := range kioskRoles {
		if r := c.DoWith(c.Storage, "GET", "/check-out-lock-storage", nil, as(role)); r.Status != http.StatusForbidden {
			t.Errorf("%s listing the locks at storage: %d, want 403", role, r.Status)
		}
	}
	// The operator releases another's lock through the console, and the
	// history names the operator.
	c.DoWith(circ, "DELETE", "/circulation/check-out-locks/"+lock.ID, nil, as(schemas.RoleOperator)).Want(t, http.StatusNoContent)
	var history struct {
		Events []struct {
			Type string
			By   map[string]string
		} `json:"events"`
	}
	c.Do(c.Storage, "GET", "/check-out-lock-storage/history", nil).Want(t, http.StatusOK).Decode(t, &history)
	if len(history.Events) != 1 || history.Events[0].Type != "released_by_other" ||
		history.Events[0].By["acquiredBy"] != harness.RoleUser(schemas.RoleOperator) || history.Events[0].By["acquiredByModule"] != "circulation" {
		t.Errorf("history after the operator's release %+v, want released_by_other by the operator through circulation", history.Events)
	}
	if r := c.DoWith(circ, "POST", "/circulation/check-out-by-barcode", checkOut, as(schemas.RoleOperator)); r.Status != http.StatusForbidden {
		t.Errorf("operator checking out: %d, want 403", r.Status)
	}
	summary(t, 11, 5, 6, 0, "each role did its work through circulation and was refused the others' and storage")
}

// TestAReleasingWriteNeedsTheReleasePermission: a check-out's write that
// releases its lock (X-Check-Out-Release-Lock) releases a lock as DELETE
// does, so it needs DELETE's permission beside the loan's: without it, 403
// naming it, nothing written and the lock still held.
func TestAReleasingWriteNeedsTheReleasePermission(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	lib := c.SetupLibrary(1, 2, 3)
	user := patronID(t, c, lib.Patrons[0])
	release, _ := schemas.PermissionFor(schemas.ServiceStorage, "DELETE", "/check-out-lock-storage/{id}")
	loanPost, _ := schemas.PermissionFor(schemas.ServiceStorage, "POST", "/loan-storage/loans")
	acquire, _ := schemas.PermissionFor(schemas.ServiceStorage, "POST", "/check-out-lock-storage")
	caller := uuid.NewString() // the lock's holder, who writes under it
	token := func(permissions ...string) string {
		tok, err := auth.Mint(harness.Secret(), auth.Claims{Tenant: c.Tenant, UserID: caller, Permissions: permissions}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	var lock struct{ ID string }
	c.DoWith(c.Storage, "POST", "/check-out-lock-storage", map[string]any{"userId": user, "ttlMs": 60000},
		map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: token(acquire)}).Want(t, http.StatusCreated).Decode(t, &lock)
	write := func(item, tok string) harness.Response {
		now := time.Now().UTC()
		return c.DoWith(c.Storage, "POST", "/loan-storage/loans", map[string]any{
			"userId": user, "itemId": itemID(t, c, item), "action": "checkedout", "status": map[string]any{"name": "Open"},
			"loanDate": schemas.FormatTime(now), "dueDate": schemas.FormatTime(now.Add(time.Hour)),
		}, map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: tok, schemas.HeaderLockID: lock.ID,
			schemas.HeaderItemVersion: "1", schemas.HeaderReleaseLock: "true"})
	}
	r := write(lib.Items[0][0], token(loanPost))
	if code, params := envelopeError(t, r); r.Status != http.StatusForbidden || code != auth.CodeForbidden || params["permission"] != release {
		t.Errorf("a releasing write without %s: %d %s %v, want 403 naming it", release, r.Status, code, params)
	}
	c.Do(c.Storage, "GET", "/check-out-lock-storage/"+lock.ID, nil).Want(t, http.StatusOK)
	if n := c.OpenLoans(t, lib.Patrons[0]); n != 0 {
		t.Errorf("%d open loans after the refused write, want none", n)
	}
	r = write(lib.Items[0][1], token(loanPost, release)).Want(t, http.StatusCreated)
	if r.Header.Get(schemas.HeaderLockReleased) != "true" {
		t.Errorf("the write with both permissions did not say it released the lock")
	}
	c.Do(c.Storage, "GET", "/check-out-lock-storage/"+lock.ID, nil).Want(t, http.StatusNotFound)
}
