package integration

import (
	"encoding/json"
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
		{name: "array body", method: "POST", path: "/circulation/check-out-by-barcode", body: `[]`, status: 422, code: "VALIDATION_FAILED"},
		{name: "wrong type", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":5,"userBarcode":"` + patron + `","servicePointId":"` + sp + `"}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "missing servicePointId", method: "POST", path: "/circulation/check-out-by-barcode", body: `{"itemBarcode":"` + item + `","userBarcode":"` + patron + `"}`, status: 422, code: "VALIDATION_FAILED"},
		{name: "unknown field", method: "POST", path: "/circulation/check-out-by-barcode", body: checkOut(`,"force":true`), status: 422, code: "VALIDATION_FAILED"},
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
		{name: "unknown route", method: "GET", path: "/circulation/nope", status: 404, code: "ROUTE_NOT_FOUND"},
		{name: "wrong method", method: "DELETE", path: "/circulation/check-out-by-barcode", status: 405, code: "METHOD_NOT_ALLOWED"},

		{name: "storage: lock body not JSON", storage: true, method: "POST", path: "/check-out-lock-storage", body: `userId=1`, status: 400, code: "MALFORMED_JSON"},
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
