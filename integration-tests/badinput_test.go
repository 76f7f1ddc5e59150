package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/checkoutlock/integration-tests/harness"
	"github.com/checkoutlock/schemas"
)

// badRequest is one hostile or malformed request and the answer it must get.
type badRequest struct {
	name    string
	storage bool // to storage rather than circulation
	method  string
	path    string
	body    string
	headers map[string]string // nil: tenant and JSON content type
	status  int
	code    string
}

// TestWorkloadBadInput (workload 5) sends malformed and hostile input to
// both services through the real processes: every answer is the right 4xx
// with the FOLIO envelope, never a 500, and the database is unchanged.
func TestWorkloadBadInput(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1, FeatureOn: true})
	lib := c.SetupLibrary(1, 2, 5)
	patron, item := lib.Patrons[0], lib.Items[0][0]
	sp := harness.ServicePoint
	checkOut := func(fields string) string {
		return `{"itemBarcode":"` + item + `","userBarcode":"` + patron + `","servicePointId":"` + sp + `"` + fields + `}`
	}
	long := strings.Repeat("x", 300)
	huge := `{"itemBarcode":"` + strings.Repeat("a", 2<<20) + `"}`
	jsonOnly := map[string]string{"Content-Type": "application/json", "X-Okapi-Token": c.Token(schemas.RoleTenantAdmin)}
	// A token for the tenant named: with another tenant's token, the
	// answer would be 401 before the tenant is looked at.
	withTenant := func(tenant string) map[string]string {
		token := c.Token(schemas.RoleTenantAdmin)
		if schemas.ValidTenant(tenant) {
			token = harness.Token(t, tenant, schemas.RoleTenantAdmin)
		}
		return map[string]string{"Content-Type": "application/json", "X-Okapi-Tenant": tenant, "X-Okapi-Token": token}
	}
	cases := []badRequest{
		{name: "truncated JSON", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":`, status: 400, code: "MALFORMED_JSON"},
		{name: "trailing garbage", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut("") + "x", status: 400, code: "MALFORMED_JSON"},
		{name: "empty body", method: "POST", path: "/circulation/check-out-by-barcode", body: "", status: 400, code: "MALFORMED_JSON"},
		{name: "a member named twice", method: "POST", path: "/circulation/renew-by-barcode", body: `{"itemBarcode":"` + item + `","userBarcode":"` + patron + `","itemBarcode":"` + lib.Items[0][1] + `"}`, status: 400, code: "MALFORMED_JSON"},
		{name: "array body", method: "POST", path: "/circulation/check-out-by-barcode", body: `[]`, status: 422, code: "VALIDATION_FAILED"},
		{name: "wrong type", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":5,"userBarcode":"` + patron + `","servicePointId":"` + sp + `"}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "missing servicePointId", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":"` + item + `","userBarcode":"` + patron + `"}`, status: 422, code: "VALIDATION_FAILED"},
		// FOLIO's route ignores a member it does not name (force), not one
		// it names sent with the wrong type.
		{name: "wrong-typed field beside an unknown one", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut(`,"force":true,"overrideBlocks":"all"`), status: 422, code: "VALIDATION_FAILED"},
		{name: "invalid UUID", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":"` + item + `","userBarcode":"` + patron + `","servicePointId":"not-a-uuid"}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "bad loanDate", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut(`,"loanDate":"yesterday"`), status: 422, code: "VALIDATION_FAILED"},
		{name: "very long barcode", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":"` + long + `","userBarcode":"` + patron + `","servicePointId":"` + sp + `"}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "unicode barcodes", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":"本-🙂","userBarcode":"ユーザー","servicePointId":"` + sp + `"}`, status: 422, code: "USER_BARCODE_NOT_FOUND"},
		{name: "SQL in a barcode", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":"' OR 1=1; --","userBarcode":"` + patron + `","servicePointId":"` + sp + `"}`, status: 422, code: "ITEM_BARCODE_NOT_FOUND"},
		{name: "NUL in a barcode", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":"a\u0000b","userBarcode":"` + patron + `","servicePointId":"` + sp + `"}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "proxy check-out", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut(`,"proxyUserBarcode":"someone-else"`), status: 422, code: "VALIDATION_FAILED"},
		{name: "huge body", method: "POST", path: "/circulation/check-out-by-barcode", body: huge, status: 413, code: "BODY_TOO_LARGE"},
		{name: "text/plain", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut(""), headers: map[string]string{"Content-Type": "text/plain", "X-Okapi-Tenant": c.Tenant, "X-Okapi-Token": c.Token(schemas.RoleTenantAdmin)}, status: 415, code: "UNSUPPORTED_MEDIA_TYPE"},
		{name: "no tenant", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut(""), headers: jsonOnly, status: 400, code: "TENANT_MISSING"},
		{name: "hostile tenant", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut(""), headers: withTenant(`x"; DROP SCHEMA public; --`), status: 400, code: "INVALID_TENANT"},
		{name: "long tenant", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut(""), headers: withTenant(strings.Repeat("a", 100)), status: 400, code: "INVALID_TENANT"},
		{name: "unknown tenant", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut(""), headers: withTenant("nosuchtenant"), status: 400, code: "TENANT_NOT_INITIALIZED"},
		{name: "check-in: no item", method: "POST", path: "/circulation/check-in-by-barcode", body: `{"servicePointId":"` + sp + `"}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "check-in: unknown item", method: "POST", path: "/circulation/check-in-by-barcode", body: `{"itemBarcode":"nope","servicePointId":"` + sp + `"}`, status: 422, code: "ITEM_BARCODE_NOT_FOUND"},
		{name: "loans: bad userId", method: "GET", path: "/circulation/loans?userId=abc", status: 422, code: "INVALID_PARAMETER"},
		{name: "loans: bad limit", method: "GET", path: "/circulation/loans?limit=-1", status: 422, code: "INVALID_PARAMETER"},
		{name: "loans: bad status", method: "GET", path: "/circulation/loans?status=Lost", status: 422, code: "INVALID_PARAMETER"},
		{name: "loan: bad id", method: "GET", path: "/circulation/loans/abc", status: 400, code: "INVALID_ID"},
		{name: "settings: lockTtl 0", method: "PUT", path: "/circulation/settings/check-out-lock", body: `{"lockTtl":0}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "settings: negative wait", method: "PUT", path: "/circulation/settings/check-out-lock", body: `{"retryIntervalsMs":[100,-1]}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "settings: unknown field", method: "PUT", path: "/circulation/settings/check-out-lock", body: `{"enabled":true}`, status: 422, code: "VALIDATION_FAILED"},
		// Values circulation passes on to storage, grown past storage's
		// MAX_HEADER_BYTES by what circulation adds (a name searched for
		// is asked three times over), though within circulation's own.
		{name: "desk: patron name too long to pass on", method: "GET", path: "/circulation/patron-loans?patron=" + strings.Repeat("a", 25000), status: 431, code: "HEADERS_TOO_LARGE"},
		{name: "history: patron too long to pass on", method: "GET", path: "/circulation/check-out-locks/history?patron=" + strings.Repeat("b", 25000), status: 431, code: "HEADERS_TOO_LARGE"},
		{name: "unknown route", method: "GET", path: "/circulation/nope", status: 404, code: "ROUTE_NOT_FOUND"},
		{name: "wrong method", method: "DELETE", path: "/circulation/check-out-by-barcode", status: 405, code: "METHOD_NOT_ALLOWED"},

		{name: "storage: lock body not JSON", storage: true, method: "POST", path: "/check-out-lock-storage", body: `userId=1`, status: 400, code: "MALFORMED_JSON"},
		{name: "storage: a member named twice", storage: true, method: "POST", path: "/check-out-lock-storage", body: `{"userId":"` + sp + `","ttlMs":1000,"ttlMs":2000}`, status: 400, code: "MALFORMED_JSON"},
		{name: "storage: lock ttl 0", storage: true, method: "POST", path: "/check-out-lock-storage", body: `{"userId":"` + sp + `","ttlMs":0}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "storage: lock bad user", storage: true, method: "POST", path: "/check-out-lock-storage", body: `{"userId":"🙂"}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "storage: lock id", storage: true, method: "DELETE", path: "/check-out-lock-storage/1%27%20OR%201=1", status: 400, code: "INVALID_ID"},
		{name: "storage: hostile tenant", storage: true, method: "GET", path: "/check-out-lock-storage", headers: withTenant("a;b"), status: 400, code: "INVALID_TENANT"},
		{name: "storage: huge body", storage: true, method: "POST", path: "/users", body: huge, status: 413, code: "BODY_TOO_LARGE"},
		{name: "storage: item wrong status", storage: true, method: "POST", path: "/item-storage/items", body: `{"title":"t","status":{"name":"Stolen"},"materialTypeId":"` + sp + `","permanentLoanTypeId":"` + sp + `"}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "storage: tenant init bad", storage: true, method: "POST", path: "/_/tenant", body: `{"module_to":5}`, status: 422, code: "VALIDATION_FAILED"},
	}
	before := c.Snapshot(t)
	for _, tc := range cases {
		headers := tc.headers
		if headers == nil {
			headers = withTenant(c.Tenant)
		}
		var body any
		if tc.body != "" {
			body = tc.body
		}
		p := c.Circulations[0]
		if tc.storage {
			p = c.Storage
		}
		r := c.DoWith(p, tc.method, tc.path, body, headers)
		if r.Err != nil {
			t.Errorf("%s: no answer: %v", tc.name, r.Err)
			continue
		}
		if r.Status != tc.status {
			t.Errorf("%s: status %d, want %d: %.300s", tc.name, r.Status, tc.status, r.Body)
			continue
		}
		var env struct {
			Errors []struct {
				Message string `json:"message"`
				Code    string `json:"code"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil || len(env.Errors) == 0 || env.Errors[0].Message == "" {
			t.Errorf("%s: not an error envelope: %.300s", tc.name, r.Body)
			continue
		}
		if tc.code != "" && env.Errors[0].Code != tc.code {
			t.Errorf("%s: code %q, want %q: %.300s", tc.name, env.Errors[0].Code, tc.code, r.Body)
		}
	}
	if after := c.Snapshot(t); after != before {
		t.Errorf("bad input changed the database:\nbefore %s\nafter  %s", before, after)
	}
	// Still healthy: a good check-out works.
	c.CheckOut(0, item, patron).Want(t, http.StatusCreated)
	summary(t, len(cases)+1, 1, len(cases), 0, "server_errors=0")
}

// TestNoSecretInAnyError sends every route that takes a password or a PIN,
// at both services, bodies (and an X-Patron-Pin) that are refused with a
// secret in them: too long, too short, of the wrong type, beside another
// fault, under a field the schema does not describe. Each answer is the
// exact 4xx naming the field at fault, and no answer quotes the secret,
// in a message or a parameter. Every schema that marks a property
// writeOnly (a secret) is one of the bodies sent.
func TestNoSecretInAnyError(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, harness.Options{Circulations: 1})
	lib := c.SetupLibrary(1, 0, 0)
	patron := lib.Patrons[0]
	patronID := c.IDOf(t, "/users", "users", patron)
	const password = "correct horse battery staple"
	accountID := c.Account(t, "ada", "Ada", "Lovelace", schemas.RoleLibrarian, password)

	// The secrets: each one sent is looked for in every answer.
	const (
		secret      = "Zebra-Quill-7319"
		shortSecret = "Zq-731!" // shorter than a password may be
		shortPin    = "Q7z"     // shorter than a PIN may be
		wrongPin    = "97315531"
	)
	secrets := []string{secret, shortSecret, shortPin, wrongPin}
	long := secret + strings.Repeat("x", 300) // longer than any password or PIN may be
	tenantOnly := map[string]string{schemas.HeaderTenant: c.Tenant}
	admin := c.Headers()
	kiosk := map[string]string{schemas.HeaderTenant: c.Tenant, schemas.HeaderToken: c.Token(schemas.RoleSelfCheck)}
	kioskWithPin := func(pin string) map[string]string {
		h := maps.Clone(kiosk)
		h[schemas.HeaderPatronPin] = pin
		return h
	}
	selfCheck := []string{schemas.RoleSelfCheck}

	type secretCase struct {
		name    string
		storage bool   // to storage rather than circulation
		schema  string // the body's schema, where the secret is refused
		method  string
		path    string
		body    any
		headers map[string]string
		status  int
		code    string
		field   string // the field an error names; "" for none
	}
	cases := []secretCase{
		{"sign-in: password too long", true, "login-request.json", "POST", "/authn/login-with-expiry",
			map[string]any{"username": "ada", "password": long}, tenantOnly, 422, schemas.CodeValidation, "password"},
		{"sign-in: password not a string", true, "login-request.json", "POST", "/authn/login-with-expiry",
			map[string]any{"username": "ada", "password": []string{secret}}, tenantOnly, 422, schemas.CodeValidation, "password"},
		{"sign-in: username an object holding the password", true, "login-request.json", "POST", "/authn/login-with-expiry",
			map[string]any{"username": map[string]any{"password": secret}, "password": secret}, tenantOnly, 422, schemas.CodeValidation, "username"},
		{"sign-in: wrong password", true, "login-request.json", "POST", "/authn/login-with-expiry",
			map[string]any{"username": "ada", "password": secret}, tenantOnly, 422, schemas.CodeLoginFailed, ""},
		{"credentials: password too short", true, "credentials.json", "POST", "/authn/credentials",
			map[string]any{"userId": accountID, "password": shortSecret}, admin, 422, schemas.CodeValidation, "password"},
		{"credentials: password too long", true, "credentials.json", "POST", "/authn/credentials",
			map[string]any{"username": "ada", "password": long}, admin, 422, schemas.CodeValidation, "password"},
		{"credentials: password an object beside a bad userId", true, "credentials.json", "POST", "/authn/credentials",
			map[string]any{"userId": "not-an-id", "password": map[string]any{"value": secret}}, admin, 422, schemas.CodeValidation, "password"},
		{"accounts: a password", true, "account.json", "POST", "/sign-in-accounts",
			map[string]any{"username": "eve", "roles": selfCheck, "password": secret}, admin, 422, schemas.CodeValidation, "password"},
		{"accounts: a PIN in personal", true, "account.json", "POST", "/sign-in-accounts",
			map[string]any{"username": "eve", "roles": selfCheck, "personal": map[string]any{"firstName": "Eve", "pin": secret}}, admin, 422,
			schemas.CodeValidation, "personal.pin"},
		{"accounts: personal an array holding a secret", true, "account.json", "POST", "/sign-in-accounts",
			map[string]any{"username": "eve", "roles": selfCheck, "personal": []string{secret}}, admin, 422, schemas.CodeValidation, "personal"},
		{"accounts: a password replaced", true, "account.json", "PUT", "/sign-in-accounts/" + accountID,
			map[string]any{"id": accountID, "username": "ada", "roles": []string{schemas.RoleLibrarian}, "newPassword": secret}, admin, 422,
			schemas.CodeValidation, "newPassword"},
		{"patron PIN: too long", true, "patron-pin.json", "POST", "/patron-pin",
			map[string]any{"id": patronID, "pin": long}, admin, 422, schemas.CodeValidation, "pin"},
		{"patron PIN: too short", true, "patron-pin.json", "POST", "/patron-pin",
			map[string]any{"id": patronID, "pin": shortPin}, admin, 422, schemas.CodeValidation, "pin"},
		{"patron PIN: a password beside it", true, "patron-pin.json", "POST", "/patron-pin",
			map[string]any{"id": patronID, "pin": "1234", "password": secret}, admin, 422, schemas.CodeValidation, "password"},
		{"patron PIN verified: too long", true, "patron-pin.json", "POST", "/patron-pin/verify",
			map[string]any{"id": patronID, "pin": long}, admin, 422, schemas.CodeValidation, "pin"},
		{"patron PIN verified: not a string", true, "patron-pin.json", "POST", "/patron-pin/verify",
			map[string]any{"id": patronID, "pin": []string{secret}}, admin, 422, schemas.CodeValidation, "pin"},
		{"patron PIN verified: an old PIN beside it", true, "patron-pin.json", "POST", "/patron-pin/verify",
			map[string]any{"id": patronID, "pin": "1234", "oldPin": secret}, admin, 422, schemas.CodeValidation, "oldPin"},

		{"circulation sign-in: password too long", false, "login-request.json", "POST", "/authn/login-with-expiry",
			map[string]any{"username": "ada", "password": long}, tenantOnly, 422, schemas.CodeValidation, "password"},
		{"circulation sign-in: wrong password", false, "login-request.json", "POST", "/authn/login-with-expiry",
			map[string]any{"username": "ada", "password": secret}, tenantOnly, 422, schemas.CodeLoginFailed, ""},
		{"kiosk PIN: too long", false, "circulation-patron-pin.json", "POST", "/circulation/patron-pin/verify",
			map[string]any{"userBarcode": patron, "pin": long}, kiosk, 422, schemas.CodeValidation, "pin"},
		{"kiosk PIN: too short for storage", false, "circulation-patron-pin.json", "POST", "/circulation/patron-pin/verify",
			map[string]any{"userBarcode": patron, "pin": shortPin}, kiosk, 422, schemas.CodeValidation, "pin"},
		{"kiosk PIN: not a string", false, "circulation-patron-pin.json", "POST", "/circulation/patron-pin/verify",
			map[string]any{"userBarcode": patron, "pin": map[string]any{"pin": secret}}, kiosk, 422, schemas.CodeValidation, "pin"},
		{"kiosk PIN: a password beside it", false, "circulation-patron-pin.json", "POST", "/circulation/patron-pin/verify",
			map[string]any{"userBarcode": patron, "pin": "1234", "password": secret}, kiosk, 422, schemas.CodeValidation, "password"},
		{"kiosk PIN: wrong", false, "circulation-patron-pin.json", "POST", "/circulation/patron-pin/verify",
			map[string]any{"userBarcode": patron, "pin": wrongPin}, kiosk, 422, schemas.CodePinInvalid, ""},
		{"summary PIN: too long", false, "patron-pin.json", "GET", "/circulation/patron-summary?userBarcode=" + patron,
			nil, kioskWithPin(long), 422, schemas.CodeValidation, "pin"},
		{"summary PIN: too short", false, "patron-pin.json", "GET", "/circulation/patron-summary?userBarcode=" + patron,
			nil, kioskWithPin(shortPin), 422, schemas.CodeValidation, "pin"},
		{"summary PIN: wrong", false, "patron-pin.json", "GET", "/circulation/patron-summary?userBarcode=" + patron,
			nil, kioskWithPin(wrongPin), 422, schemas.CodePinInvalid, ""},
	}
	// A check-out's and a renewal's X-Patron-Pin, checked before either's
	// refusals are told (the item named is no item's).
	for _, path := range []string{"/circulation/check-out-by-barcode", "/circulation/renew-by-barcode"} {
		body := map[string]any{"itemBarcode": "no-such-item", "userBarcode": patron, "servicePointId": harness.ServicePoint}
		cases = append(cases,
			secretCase{path + " PIN: too long", false, "patron-pin.json", "POST", path, body, kioskWithPin(long), 422, schemas.CodeValidation, "pin"},
			secretCase{path + " PIN: too short", false, "patron-pin.json", "POST", path, body, kioskWithPin(shortPin), 422, schemas.CodeValidation, "pin"},
			secretCase{path + " PIN: wrong", false, "patron-pin.json", "POST", path, body, kioskWithPin(wrongPin), 422, schemas.CodePinInvalid, ""})
	}
	sent := map[string]bool{}
	for _, tc := range cases {
		sent[tc.schema] = true
		p := c.Circulations[0]
		if tc.storage {
			p = c.Storage
		}
		r := c.DoWith(p, tc.method, tc.path, tc.body, tc.headers)
		if r.Err != nil {
			t.Errorf("%s: no answer: %v", tc.name, r.Err)
			continue
		}
		for _, s := range secrets {
			if bytes.Contains(r.Body, []byte(s)) || strings.Contains(fmt.Sprint(r.Header), s) {
				t.Errorf("%s: the answer quotes the secret %q: %d %s", tc.name, s, r.Status, r.Body)
			}
		}
		var env struct {
			Errors []struct {
				Code       string `json:"code"`
				Parameters []struct {
					Key string `json:"key"`
				} `json:"parameters"`
			} `json:"errors"`
		}
		if err := json.Unmarshal(r.Body, &env); err != nil || len(env.Errors) == 0 {
			t.Errorf("%s: %d, not an error envelope: %.300s", tc.name, r.Status, r.Body)
			continue
		}
		if r.Status != tc.status || env.Errors[0].Code != tc.code {
			t.Errorf("%s: %d %s, want %d %s: %.300s", tc.name, r.Status, env.Errors[0].Code, tc.status, tc.code, r.Body)
		}
		named := tc.field == ""
		for _, e := range env.Errors {
			for _, p := range e.Parameters {
				named = named || p.Key == tc.field
			}
		}
		if !named {
			t.Errorf("%s: no error names %s: %.300s", tc.name, tc.field, r.Body)
		}
	}
	for _, name := range writeOnlySchemas(t) {
		if !sent[name] {
			t.Errorf("%s takes a secret (a property writeOnly), and no body of it was sent", name)
		}
	}
}

// writeOnlySchemas are the schemas that mark some property writeOnly.
func writeOnlySchemas(t *testing.T) []string {
	t.Helper()
	names, err := fs.Glob(schemas.Files(), "*.json")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range names {
		data, err := fs.ReadFile(schemas.Files(), name)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		var marks func(v any) bool
		marks = func(v any) bool {
			switch c := v.(type) {
			case map[string]any:
				if c["writeOnly"] == true {
					return true
				}
				for _, sub := range c {
					if marks(sub) {
						return true
					}
				}
			case []any:
				for _, sub := range c {
					if marks(sub) {
						return true
					}
				}
			}
			return false
		}
		if marks(doc) {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		t.Fatal("no schema marks a property writeOnly")
	}
	return out
}
