package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/checkoutlock/schemas"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// The bad input battery: requests a client should not have sent, each of
// which must be refused with the right status and a FOLIO error envelope,
// and none of which may change the database.

// badInputCase is one request of the battery and the refusal it must get.
type badInputCase struct {
	name   string
	method string
	path   string
	body   string
	// header is applied over the defaults (the fixture's tenant, and a JSON
	// Content-Type when there is a body); unset then removes headers.
	header map[string]string
	unset  []string
	// chunked sends the body without a Content-Length.
	chunked bool
	status  int
	code    string
}

// sendBadInput sends c's request for f's tenant, failing t (not f.t) on a
// transport error, so that it is safe to use in subtests.
func sendBadInput(t *testing.T, f *fixture, c badInputCase) response {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
		if c.chunked {
			body = io.MultiReader(body) // not a type whose length http knows
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), c.method, f.url+c.path, body)
	if err != nil {
		t.Fatalf("%s: %v", c.name, err)
	}
	req.Header.Set(TenantHeader, f.tenant)
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	for _, k := range c.unset {
		req.Header.Del(k)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{t: t, status: res.StatusCode, header: res.Header, body: b}
}

// wantRefusal checks a refusal beyond wantError: a JSON answer, an Allow
// header on a 405, and no internals leaked into the messages.
func wantRefusal(t *testing.T, res response, status int, code string) {
	t.Helper()
	e := res.wantError(status, code)
	if ct := res.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if status == http.StatusMethodNotAllowed && res.header.Get("Allow") == "" {
		t.Errorf("405 without an Allow header")
	}
	for _, m := range e.Errors {
		for _, leak := range []string{"SQLSTATE", "pgx", "panic", "goroutine", "Go struct", ".go:"} {
			if strings.Contains(m.Message, leak) {
				t.Errorf("message %q leaks %q", m.Message, leak)
			}
		}
	}
}

// badInputFixture is f for a subtest: failures are reported on t.
func badInputFixture(t *testing.T, f *fixture) *fixture {
	c := *f
	c.t = t
	return &c
}

// tenantJobsSnapshot is every row of the tenant's job table, as JSON text.
func tenantJobsSnapshot(f *fixture) string {
	f.t.Helper()
	var s string
	err := f.pool.QueryRow(context.Background(),
		`SELECT coalesce(json_agg(j ORDER BY id)::text, '[]') FROM `+
			pgx.Identifier{f.tenant + "_mod_circulation_storage", "tenant_job"}.Sanitize()+` j`).Scan(&s)
	if err != nil {
		f.t.Fatalf("tenant job snapshot: %v", err)
	}
	return s
}

// firstTenantJobID is the id of the job that initialised f's tenant.
func firstTenantJobID(f *fixture) string {
	f.t.Helper()
	var id string
	err := f.pool.QueryRow(context.Background(),
		`SELECT id::text FROM `+pgx.Identifier{f.tenant + "_mod_circulation_storage", "tenant_job"}.Sanitize()+
			` ORDER BY created_at LIMIT 1`).Scan(&id)
	if err != nil {
		f.t.Fatalf("tenant job id: %v", err)
	}
	return id
}

// seedLongLock acquires a lock that outlives the test.
func seedLongLock(f *fixture, userID string) lockJSON {
	f.t.Helper()
	var l lockJSON
	f.do("POST", "/check-out-lock-storage", fmt.Sprintf(`{"userId":%q,"ttlMs":600000}`, userID)).
		wantStatus(http.StatusCreated).decode(&l)
	return l
}

// schemaExists reports whether a schema of that name exists, ignoring case
// (an unquoted identifier would have been folded to lower case).
func schemaExists(t *testing.T, f *fixture, name string) bool {
	t.Helper()
	var exists bool
	err := f.pool.QueryRow(context.Background(),
		`SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE lower(nspname) = lower($1))`, name).Scan(&exists)
	if err != nil {
		t.Fatalf("look for schema %q: %v", name, err)
	}
	return exists
}

const okModule = "mod-circulation-storage-1.0.0"

// badInputCases is the battery against a tenant holding a lock of heldUser
// with id lockID, initialised by the job jobID.
func badInputCases(heldUser, lockID, jobID string) []badInputCase {
	const (
		badRequest  = http.StatusBadRequest
		invalid     = http.StatusUnprocessableEntity
		tooLarge    = http.StatusRequestEntityTooLarge
		unsupported = http.StatusUnsupportedMediaType
		notFound    = http.StatusNotFound
		notAllowed  = http.StatusMethodNotAllowed
	)
	fresh := uuid.NewString()
	lockBody := func(fields string) string { return `{"userId":"` + fresh + `"` + fields + `}` }
	userBody := func(userID string) string {
		b, _ := json.Marshal(map[string]string{"userId": userID})
		return string(b)
	}
	post := func(name, body string, status int, code string) badInputCase {
		return badInputCase{name: "POST lock/" + name, method: "POST", path: locksPath, body: body, status: status, code: code}
	}
	postTenant := func(name, body string, status int, code string) badInputCase {
		return badInputCase{name: "POST tenant/" + name, method: "POST", path: "/_/tenant", body: body, status: status, code: code}
	}
	jsonCT := map[string]string{"Content-Type": "application/json"}

	// 64 KiB exactly is still read; one byte more is refused unread.
	atLimit := `{"userId":"` + strings.Repeat("a", 64<<10-len(`{"userId":""}`)) + `"}`
	overLimit := `{"userId":"` + strings.Repeat("a", 64<<10+1-len(`{"userId":""}`)) + `"}`
	overLimitTenant := `{"module_to":"` + strings.Repeat("m", 64<<10) + `"}`

	cases := []badInputCase{
		// Malformed JSON.
		post("truncated", `{"userId":"`+fresh, badRequest, schemas.CodeMalformedJSON),
		post("unclosed object", `{"userId":"`+fresh+`"`, badRequest, schemas.CodeMalformedJSON),
		post("trailing garbage after {}", `{} x`, badRequest, schemas.CodeMalformedJSON),
		post("trailing garbage after a valid body", lockBody("")+` x`, badRequest, schemas.CodeMalformedJSON),
		post("two objects", lockBody("")+lockBody(""), badRequest, schemas.CodeMalformedJSON),
		post("not JSON", `userId=`+fresh, badRequest, schemas.CodeMalformedJSON),
		post("XML", `<lock userId="`+fresh+`"/>`, badRequest, schemas.CodeMalformedJSON),
		post("single quotes", `{'userId':'`+fresh+`'}`, badRequest, schemas.CodeMalformedJSON),
		post("trailing comma", lockBody(`,`), badRequest, schemas.CodeMalformedJSON),
		post("raw control character in a string", `{"userId":"`+fresh[:8]+"\t"+fresh[9:]+`"}`, badRequest, schemas.CodeMalformedJSON),
		post("invalid escape", `{"userId":"\q"}`, badRequest, schemas.CodeMalformedJSON),
		post("whitespace only", "  \n\t ", badRequest, schemas.CodeMalformedJSON),
		{name: "POST lock/empty body", method: "POST", path: locksPath, header: jsonCT, status: badRequest, code: schemas.CodeMalformedJSON},

		// Not an object.
		post("array", `[]`, invalid, "VALIDATION_FAILED"),
		post("array of a valid body", `[`+lockBody("")+`]`, invalid, "VALIDATION_FAILED"),
		post("string", `"`+fresh+`"`, invalid, "VALIDATION_FAILED"),
		post("number", `42`, invalid, "VALIDATION_FAILED"),
		post("null", `null`, invalid, "VALIDATION_FAILED"),
		post("boolean", `true`, invalid, "VALIDATION_FAILED"),

		// Wrong types.
		post("userId number", `{"userId":42}`, invalid, "VALIDATION_FAILED"),
		post("userId null", `{"userId":null}`, invalid, "VALIDATION_FAILED"),
		post("userId array", `{"userId":["`+fresh+`"]}`, invalid, "VALIDATION_FAILED"),
		post("userId object", `{"userId":{"id":"`+fresh+`"}}`, invalid, "VALIDATION_FAILED"),
		post("ttlMs string", lockBody(`,"ttlMs":"1000"`), invalid, "VALIDATION_FAILED"),
		post("ttlMs 1.5", lockBody(`,"ttlMs":1.5`), invalid, "VALIDATION_FAILED"),
		post("ttlMs null", lockBody(`,"ttlMs":null`), invalid, "VALIDATION_FAILED"),
		post("ttlMs boolean", lockBody(`,"ttlMs":true`), invalid, "VALIDATION_FAILED"),

		// Missing and unknown fields.
		post("empty object", `{}`, invalid, "VALIDATION_FAILED"),
		post("ttlMs without userId", `{"ttlMs":1000}`, invalid, "VALIDATION_FAILED"),
		post("unknown field", lockBody(`,"foo":1`), invalid, "VALIDATION_FAILED"),
		post("client-chosen id not a UUID", lockBody(`,"id":"lock-1"`), invalid, "VALIDATION_FAILED"),
		post("userId in other case", `{"UserID":"`+fresh+`"}`, invalid, "VALIDATION_FAILED"),
		post("expiresAt given", lockBody(`,"expiresAt":"2099-01-01T00:00:00Z"`), invalid, "VALIDATION_FAILED"),
		// Validation comes before the lock: a held patron's bad body is 422, not 503.
		post("unknown field for a held patron", `{"userId":"`+heldUser+`","foo":1}`, invalid, "VALIDATION_FAILED"),

		// ttlMs out of range.
		post("ttlMs 0", lockBody(`,"ttlMs":0`), invalid, "VALIDATION_FAILED"),
		post("ttlMs negative", lockBody(`,"ttlMs":-1`), invalid, "VALIDATION_FAILED"),
		post("ttlMs above the maximum", lockBody(`,"ttlMs":600001`), invalid, "VALIDATION_FAILED"),
		post("ttlMs int32 max", lockBody(`,"ttlMs":2147483647`), invalid, "VALIDATION_FAILED"),
		post("ttlMs above int32", lockBody(`,"ttlMs":2147483648`), invalid, "VALIDATION_FAILED"),
		post("ttlMs above int64", lockBody(`,"ttlMs":99999999999999999999999`), invalid, "VALIDATION_FAILED"),
		post("ttlMs 1e30", lockBody(`,"ttlMs":1e30`), invalid, "VALIDATION_FAILED"),

		// Invalid UUIDs, unicode, control characters, injection.
		post("userId empty", userBody(""), invalid, "VALIDATION_FAILED"),
		post("userId abc", userBody("abc"), invalid, "VALIDATION_FAILED"),
		post("userId too short", userBody(fresh[:35]), invalid, "VALIDATION_FAILED"),
		post("userId too long", userBody(fresh+"0"), invalid, "VALIDATION_FAILED"),
		post("userId non-hex", userBody("zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz"), invalid, "VALIDATION_FAILED"),
		post("userId without hyphens", userBody(strings.ReplaceAll(fresh, "-", "")), invalid, "VALIDATION_FAILED"),
		post("userId with braces", userBody("{"+fresh+"}"), invalid, "VALIDATION_FAILED"),
		post("userId urn:uuid:", userBody("urn:uuid:"+fresh), invalid, "VALIDATION_FAILED"),
		post("userId 1000 characters", userBody(strings.Repeat("a", 1000)), invalid, "VALIDATION_FAILED"),
		post("userId with unicode", userBody(fresh[:35]+"é"), invalid, "VALIDATION_FAILED"),
		post("userId with fullwidth digits", userBody("１２３４５６７８"+fresh[8:]), invalid, "VALIDATION_FAILED"),
		post("userId emoji", userBody("🔒"), invalid, "VALIDATION_FAILED"),
		post("userId with NUL", `{"userId":"`+fresh[:35]+`\u0000"}`, invalid, "VALIDATION_FAILED"),
		post("userId with escaped newline", `{"userId":"`+fresh+`\n"}`, invalid, "VALIDATION_FAILED"),
		post("userId with a leading space", userBody(" "+fresh), invalid, "VALIDATION_FAILED"),
		post("userId lone surrogate", `{"userId":"\ud800"}`, invalid, "VALIDATION_FAILED"),
		post("userId SQL injection", userBody("'; DROP TABLE check_out_lock; --"), invalid, "VALIDATION_FAILED"),
		post("userId SQL tautology", userBody("' OR '1'='1"), invalid, "VALIDATION_FAILED"),
		post("unknown field named like SQL", lockBody(`,"'; DROP TABLE check_out_lock; --":1`), invalid, "VALIDATION_FAILED"),
		post("unknown field with NUL", lockBody(`,"\u0000":1`), invalid, "VALIDATION_FAILED"),

		// Size.
		post("at the 64 KiB limit", atLimit, invalid, "VALIDATION_FAILED"),
		post("over the 64 KiB limit", overLimit, tooLarge, schemas.CodeBodyTooLarge),
		{name: "POST lock/over the limit, chunked", method: "POST", path: locksPath, body: overLimit, chunked: true, status: tooLarge, code: schemas.CodeBodyTooLarge},
		{name: "POST lock/at the limit, chunked", method: "POST", path: locksPath, body: atLimit, chunked: true, status: invalid, code: "VALIDATION_FAILED"},

		// Content-Type.
		{name: "POST lock/text/plain", method: "POST", path: locksPath, body: lockBody(""), header: map[string]string{"Content-Type": "text/plain"}, status: unsupported, code: schemas.CodeUnsupportedMedia},
		{name: "POST lock/no Content-Type", method: "POST", path: locksPath, body: lockBody(""), unset: []string{"Content-Type"}, status: unsupported, code: schemas.CodeUnsupportedMedia},
		{name: "POST lock/empty Content-Type", method: "POST", path: locksPath, body: lockBody(""), header: map[string]string{"Content-Type": ""}, status: unsupported, code: schemas.CodeUnsupportedMedia},
		{name: "POST lock/form", method: "POST", path: locksPath, body: "userId=" + fresh, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, status: unsupported, code: schemas.CodeUnsupportedMedia},
		{name: "POST lock/application/xml", method: "POST", path: locksPath, body: lockBody(""), header: map[string]string{"Content-Type": "application/xml"}, status: unsupported, code: schemas.CodeUnsupportedMedia},
		{name: "POST lock/json suffix type", method: "POST", path: locksPath, body: lockBody(""), header: map[string]string{"Content-Type": "application/merge-patch+json"}, status: unsupported, code: schemas.CodeUnsupportedMedia},
		{name: "POST lock/malformed Content-Type", method: "POST", path: locksPath, body: lockBody(""), header: map[string]string{"Content-Type": "application/json; charset"}, status: unsupported, code: schemas.CodeUnsupportedMedia},
		{name: "POST lock/no Content-Type, no body", method: "POST", path: locksPath, status: unsupported, code: schemas.CodeUnsupportedMedia},

		// Tenant attributes.
		postTenant("empty object", `{}`, invalid, "VALIDATION_FAILED"),
		postTenant("module_to empty", `{"module_to":""}`, invalid, "VALIDATION_FAILED"),
		postTenant("module_to number", `{"module_to":5}`, invalid, "VALIDATION_FAILED"),
		postTenant("module_to null", `{"module_to":null}`, invalid, "VALIDATION_FAILED"),
		postTenant("module_to too long", `{"module_to":"`+strings.Repeat("m", 257)+`"}`, invalid, "VALIDATION_FAILED"),
		postTenant("module_from number", `{"module_from":1}`, invalid, "VALIDATION_FAILED"),
		postTenant("purge string", `{"purge":"true"}`, invalid, "VALIDATION_FAILED"),
		postTenant("purge string with module_from", `{"module_from":"`+okModule+`","purge":"true"}`, invalid, "VALIDATION_FAILED"),
		postTenant("parameter without value", `{"module_to":"`+okModule+`","parameters":[{"key":"loadSample"}]}`, invalid, "VALIDATION_FAILED"),
		postTenant("parameter without key", `{"module_to":"`+okModule+`","parameters":[{"value":"true"}]}`, invalid, "VALIDATION_FAILED"),
		postTenant("parameter with empty key", `{"module_to":"`+okModule+`","parameters":[{"key":"","value":"true"}]}`, invalid, "VALIDATION_FAILED"),
		postTenant("parameter value number", `{"module_to":"`+okModule+`","parameters":[{"key":"loadSample","value":true}]}`, invalid, "VALIDATION_FAILED"),
		postTenant("parameter with unknown property", `{"module_to":"`+okModule+`","parameters":[{"key":"loadSample","value":"true","x":1}]}`, invalid, "VALIDATION_FAILED"),
		postTenant("parameters as an object", `{"module_to":"`+okModule+`","parameters":{"loadSample":"true"}}`, invalid, "VALIDATION_FAILED"),
		postTenant("unknown property", `{"module_to":"`+okModule+`","foo":1}`, invalid, "VALIDATION_FAILED"),
		postTenant("array", `[{"module_to":"`+okModule+`"}]`, invalid, "VALIDATION_FAILED"),
		postTenant("null", `null`, invalid, "VALIDATION_FAILED"),
		postTenant("truncated", `{"module_to":"`+okModule, badRequest, schemas.CodeMalformedJSON),
		postTenant("trailing garbage", `{"module_to":"`+okModule+`"} x`, badRequest, schemas.CodeMalformedJSON),
		postTenant("not JSON", `module_to=`+okModule, badRequest, schemas.CodeMalformedJSON),
		postTenant("over the 64 KiB limit", overLimitTenant, tooLarge, schemas.CodeBodyTooLarge),
		{name: "POST tenant/empty body", method: "POST", path: "/_/tenant", header: jsonCT, status: badRequest, code: schemas.CodeMalformedJSON},
		{name: "POST tenant/text/plain", method: "POST", path: "/_/tenant", body: `{"module_to":"` + okModule + `"}`, header: map[string]string{"Content-Type": "text/plain"}, status: unsupported, code: schemas.CodeUnsupportedMedia},
		{name: "POST tenant/no Content-Type", method: "POST", path: "/_/tenant", body: `{"module_to":"` + okModule + `"}`, unset: []string{"Content-Type"}, status: unsupported, code: schemas.CodeUnsupportedMedia},

		// Query parameters of the list.
		{name: "list/userId abc", method: "GET", path: locksPath + "?userId=abc", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/userId empty", method: "GET", path: locksPath + "?userId=", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/userId with braces", method: "GET", path: locksPath + "?userId=" + url.QueryEscape("{"+fresh+"}"), status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/userId SQL injection", method: "GET", path: locksPath + "?userId=" + url.QueryEscape("' OR 1=1; --"), status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/userId 1000 characters", method: "GET", path: locksPath + "?userId=" + strings.Repeat("a", 1000), status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/userId unicode", method: "GET", path: locksPath + "?userId=" + url.QueryEscape("ünïcødé-🔒"), status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/userId NUL", method: "GET", path: locksPath + "?userId=%00", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/offset negative", method: "GET", path: locksPath + "?offset=-1", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/offset non-numeric", method: "GET", path: locksPath + "?offset=abc", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/offset empty", method: "GET", path: locksPath + "?offset=", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/offset fraction", method: "GET", path: locksPath + "?offset=1.5", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/offset beyond int32", method: "GET", path: locksPath + "?offset=2147483648", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/offset beyond int64", method: "GET", path: locksPath + "?offset=99999999999999999999999", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/limit 1001", method: "GET", path: locksPath + "?limit=1001", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/limit -1", method: "GET", path: locksPath + "?limit=-1", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/limit non-numeric", method: "GET", path: locksPath + "?limit=ten", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/limit beyond int32", method: "GET", path: locksPath + "?limit=2147483648", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/offset twice", method: "GET", path: locksPath + "?offset=0&offset=1", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/limit twice", method: "GET", path: locksPath + "?limit=5&limit=5", status: invalid, code: "INVALID_PARAMETER"},
		{name: "list/userId twice", method: "GET", path: locksPath + "?userId=" + heldUser + "&userId=" + fresh, status: invalid, code: "INVALID_PARAMETER"},

		// Tenant job ids.
		{name: "GET tenant job/abc", method: "GET", path: "/_/tenant/abc", status: badRequest, code: "INVALID_ID"},
		{name: "DELETE tenant job/abc", method: "DELETE", path: "/_/tenant/abc", status: badRequest, code: "INVALID_ID"},
		{name: "GET tenant job/injection", method: "GET", path: "/_/tenant/%27%20OR%201=1", status: badRequest, code: "INVALID_ID"},
		{name: "DELETE tenant job/injection", method: "DELETE", path: "/_/tenant/%27%20OR%201=1", status: badRequest, code: "INVALID_ID"},
		{name: "DELETE tenant job/job id with braces", method: "DELETE", path: "/_/tenant/%7B" + jobID + "%7D", status: badRequest, code: "INVALID_ID"},
		{name: "GET tenant job/unknown", method: "GET", path: "/_/tenant/" + uuid.NewString(), status: notFound, code: "NOT_FOUND"},
		{name: "DELETE tenant job/unknown", method: "DELETE", path: "/_/tenant/" + uuid.NewString(), status: notFound, code: "NOT_FOUND"},

		// Routes and methods.
		{name: "route/unknown", method: "GET", path: "/nope", status: notFound, code: schemas.CodeRouteNotFound},
		{name: "route/plural", method: "POST", path: locksPath + "s", body: lockBody(""), status: notFound, code: schemas.CodeRouteNotFound},
		{name: "route/unknown without a tenant", method: "GET", path: "/nope", unset: []string{TenantHeader}, status: notFound, code: schemas.CodeRouteNotFound},
		{name: "route/tenant list", method: "GET", path: "/_/tenants", status: notFound, code: schemas.CodeRouteNotFound},
		{name: "method/PUT locks", method: "PUT", path: locksPath, body: lockBody(""), status: notAllowed, code: schemas.CodeMethodNotAllowed},
		{name: "method/PATCH locks", method: "PATCH", path: locksPath, body: lockBody(""), status: notAllowed, code: schemas.CodeMethodNotAllowed},
		{name: "method/DELETE locks", method: "DELETE", path: locksPath, status: notAllowed, code: schemas.CodeMethodNotAllowed},
		{name: "method/DELETE locks with a trailing slash", method: "DELETE", path: locksPath + "/", status: notAllowed, code: schemas.CodeMethodNotAllowed},
		{name: "method/PUT a lock", method: "PUT", path: locksPath + "/" + lockID, body: lockBody(`,"ttlMs":1`), status: notAllowed, code: schemas.CodeMethodNotAllowed},
		{name: "method/PATCH a lock", method: "PATCH", path: locksPath + "/" + lockID, body: `{"ttlMs":1}`, status: notAllowed, code: schemas.CodeMethodNotAllowed},
		{name: "method/POST a lock", method: "POST", path: locksPath + "/" + lockID, body: lockBody(""), status: notAllowed, code: schemas.CodeMethodNotAllowed},
		{name: "method/GET tenant", method: "GET", path: "/_/tenant", status: notAllowed, code: schemas.CodeMethodNotAllowed},
		{name: "method/DELETE tenant", method: "DELETE", path: "/_/tenant", status: notAllowed, code: schemas.CodeMethodNotAllowed},
		{name: "method/PUT tenant job", method: "PUT", path: "/_/tenant/" + jobID, body: `{}`, status: notAllowed, code: schemas.CodeMethodNotAllowed},
	}

	// Lock ids in the path, on GET and DELETE alike.
	badIDs := []struct{ name, path string }{
		{"abc", "abc"},
		{"injection", "%27%20OR%201=1"},
		{"drop table", url.PathEscape("'; DROP TABLE check_out_lock; --")},
		{"1000 characters", strings.Repeat("a", 1000)},
		{"unicode", url.PathEscape("ünïcødé-идентификатор-🔒")},
		{"unicode cut mid-rune", url.PathEscape(strings.Repeat("aé", 50))},
		{"NUL", "%00"},
		{"too short", lockID[:35]},
		{"too long", lockID + "0"},
		{"non-hex", "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz"},
		{"without hyphens", strings.ReplaceAll(lockID, "-", "")},
		{"braces", "%7B" + lockID + "%7D"},
		{"urn:uuid:", "urn:uuid:" + lockID},
		{"encoded slash", lockID[:8] + "%2F" + lockID[9:]},
	}
	for _, id := range badIDs {
		for _, m := range []string{"GET", "DELETE"} {
			cases = append(cases, badInputCase{name: m + " lock/" + id.name, method: m, path: locksPath + "/" + id.path,
				status: badRequest, code: "INVALID_ID"})
		}
	}
	for _, m := range []string{"GET", "DELETE"} {
		cases = append(cases, badInputCase{name: m + " lock/unknown", method: m, path: locksPath + "/" + uuid.NewString(),
			status: notFound, code: "NOT_FOUND"})
	}
	// Writes' ids: in the path of the question whether one landed, and
	// on a write, where it is a header.
	for _, id := range badIDs {
		cases = append(cases, badInputCase{name: "GET write/" + id.name, method: "GET", path: "/write-storage/writes/" + id.path,
			status: badRequest, code: schemas.CodeInvalidID})
	}
	cases = append(cases,
		badInputCase{name: "GET write/none landed", method: "GET", path: "/write-storage/writes/" + uuid.NewString(), status: notFound, code: schemas.CodeNotFound},
		badInputCase{name: "POST item/write id not a UUID", method: "POST", path: "/item-storage/items", body: `{"barcode":"x","status":{"name":"Available"}}`,
			header: map[string]string{schemas.HeaderWriteID: "not-a-uuid"}, status: badRequest, code: schemas.CodeInvalidHeader},
		badInputCase{name: "PUT loan/a digest without a write id", method: "PUT", path: "/loan-storage/loans/" + uuid.NewString(), body: `{}`,
			header: map[string]string{schemas.HeaderWriteDigest: "abc"}, status: badRequest, code: schemas.CodeInvalidHeader},
		badInputCase{name: "POST request/a digest too long", method: "POST", path: "/request-storage/requests", body: `{}`,
			header: map[string]string{schemas.HeaderWriteID: uuid.NewString(), schemas.HeaderWriteDigest: strings.Repeat("d", 129)},
			status: badRequest, code: schemas.CodeInvalidHeader},
	)
	return cases
}

// runBadInputBattery sends every bad input case to f's tenant, which it
// first gives two long locks, and checks each refusal and that neither the
// locks nor the tenant's jobs changed, case by case and over the battery.
func runBadInputBattery(t *testing.T, f *fixture) {
	t.Helper()
	heldUser := uuid.NewString()
	held := seedLongLock(f, heldUser)
	seedLongLock(f, uuid.NewString())
	jobID := firstTenantJobID(f)
	before, jobsBefore := f.snapshot(), tenantJobsSnapshot(f)

	for _, c := range badInputCases(heldUser, held.ID, jobID) {
		t.Run(c.name, func(t *testing.T) {
			sf := badInputFixture(t, f)
			wantRefusal(t, sendBadInput(t, sf, c), c.status, c.code)
			if after := sf.snapshot(); after != before {
				t.Errorf("locks changed:\nbefore %s\nafter  %s", before, after)
			}
			if after := tenantJobsSnapshot(sf); after != jobsBefore {
				t.Errorf("tenant jobs changed:\nbefore %s\nafter  %s", jobsBefore, after)
			}
		})
	}

	// Not refusals, but the edges of the list's parameters.
	var list locksJSON
	f.do("GET", locksPath+"?limit=0", "").wantStatus(http.StatusOK).wantSchema("checkout-locks.json").decode(&list)
	if len(list.CheckoutLocks) != 0 || list.TotalRecords != 2 {
		t.Errorf("limit=0: %d locks, total %d; want none of 2", len(list.CheckoutLocks), list.TotalRecords)
	}
	f.do("GET", locksPath+"?offset=2147483647&limit=1000", "").wantStatus(http.StatusOK).decode(&list)
	if len(list.CheckoutLocks) != 0 || list.TotalRecords != 2 {
		t.Errorf("largest offset: %d locks, total %d; want none of 2", len(list.CheckoutLocks), list.TotalRecords)
	}

	if after := f.snapshot(); after != before {
		t.Errorf("the battery changed the locks:\nbefore %s\nafter  %s", before, after)
	}
	if after := tenantJobsSnapshot(f); after != jobsBefore {
		t.Errorf("the battery changed the tenant jobs:\nbefore %s\nafter  %s", jobsBefore, after)
	}
	f.do("GET", locksPath+"/"+held.ID, "").wantStatus(http.StatusOK)
}

func TestBadInputBattery(t *testing.T) {
	t.Parallel()
	runBadInputBattery(t, setup(t))
}

// hostileTenants are X-Okapi-Tenant values that must never name a schema.
var hostileTenants = []struct {
	name, value string
	missing     bool
	code        string
}{
	{name: "missing", missing: true, code: "TENANT_MISSING"},
	{name: "empty", value: "", code: "TENANT_MISSING"},
	{name: "blank", value: "   ", code: "TENANT_MISSING"},
	{name: "semicolon", value: "x;drop table", code: "INVALID_TENANT"},
	{name: "sql", value: "x'; DROP SCHEMA public CASCADE; --", code: "INVALID_TENANT"},
	{name: "quote", value: `A"b`, code: "INVALID_TENANT"},
	{name: "quote closing an identifier", value: `x" CASCADE; --`, code: "INVALID_TENANT"},
	{name: "upper case", value: "UPPER", code: "INVALID_TENANT"},
	{name: "100 characters", value: strings.Repeat("a", 100), code: "INVALID_TENANT"},
	{name: "32 characters", value: strings.Repeat("a", 32), code: "INVALID_TENANT"},
	{name: "hyphen", value: "diku-x", code: "INVALID_TENANT"},
	{name: "dot", value: "diku.x", code: "INVALID_TENANT"},
	{name: "space inside", value: "diku x", code: "INVALID_TENANT"},
	{name: "unicode", value: "diküx", code: "INVALID_TENANT"},
	{name: "cyrillic look-alike", value: "dіku", code: "INVALID_TENANT"},
	{name: "leading digit", value: "1diku", code: "INVALID_TENANT"},
	{name: "leading underscore", value: "_diku", code: "INVALID_TENANT"},
	{name: "path traversal", value: "../diku", code: "INVALID_TENANT"},
	{name: "reserved pg_ prefix", value: "pg_x", code: "INVALID_TENANT"},
	{name: "reserved pg_ prefix, long", value: "pg_diku_library", code: "INVALID_TENANT"},
}

// TestHostileTenantHeaders sends a hostile tenant to every tenant-scoped
// endpoint, with otherwise valid requests that would change data: each is a
// 400 and nothing is created, changed or dropped.
func TestHostileTenantHeaders(t *testing.T) {
	t.Parallel()
	f := setup(t)
	lock := seedLongLock(f, uuid.NewString())
	jobID := firstTenantJobID(f)
	before, jobsBefore := f.snapshot(), tenantJobsSnapshot(f)
	requests := []badInputCase{
		{method: "POST", path: "/_/tenant", body: `{"module_to":"` + okModule + `"}`},
		{method: "POST", path: "/_/tenant", body: `{"module_to":"` + okModule + `","parameters":[{"key":"loadSample","value":"true"}]}`},
		{method: "POST", path: "/_/tenant", body: `{"module_from":"` + okModule + `","purge":true}`},
		{method: "GET", path: "/_/tenant/" + jobID},
		{method: "DELETE", path: "/_/tenant/" + jobID},
		{method: "POST", path: locksPath, body: `{"userId":"` + uuid.NewString() + `"}`},
		{method: "GET", path: locksPath},
		{method: "GET", path: locksPath + "/" + lock.ID},
		{method: "DELETE", path: locksPath + "/" + lock.ID},
		// The tenant is checked before the body and the id.
		{method: "POST", path: locksPath, body: `{} x`},
		{method: "GET", path: locksPath + "/abc"},
	}
	for _, h := range hostileTenants {
		t.Run(h.name, func(t *testing.T) {
			sf := badInputFixture(t, f)
			for _, r := range requests {
				r.name = r.method + " " + r.path
				if h.missing {
					r.unset = []string{TenantHeader}
				} else {
					r.header = map[string]string{TenantHeader: h.value}
				}
				res := sendBadInput(t, sf, r)
				if res.status != http.StatusBadRequest {
					t.Errorf("%s with tenant %q: status %d, want 400; body %s", r.name, h.value, res.status, res.body)
					continue
				}
				wantRefusal(t, res, http.StatusBadRequest, h.code)
			}
			if name := strings.TrimSpace(h.value); name != "" {
				for _, schema := range []string{name + "_mod_circulation_storage", name} {
					if schemaExists(t, sf, schema) {
						t.Errorf("tenant %q: schema %q exists", h.value, schema)
					}
				}
			}
			if after := sf.snapshot(); after != before {
				t.Errorf("locks changed:\nbefore %s\nafter  %s", before, after)
			}
			if after := tenantJobsSnapshot(sf); after != jobsBefore {
				t.Errorf("tenant jobs changed:\nbefore %s\nafter  %s", jobsBefore, after)
			}
		})
	}
	if !schemaExists(t, f, "public") || !schemaExists(t, f, f.tenant+"_mod_circulation_storage") {
		t.Error("a schema was dropped")
	}
	f.do("GET", locksPath+"/"+lock.ID, "").wantStatus(http.StatusOK)
}

// TestInjectionLookingTenantAttributesAreData: SQL in the tenant attributes
// is accepted as text, stored and given back as it came, and runs nowhere.
func TestInjectionLookingTenantAttributesAreData(t *testing.T) {
	t.Parallel()
	f := setup(t)
	seedLongLock(f, uuid.NewString())
	before := f.snapshot()
	const evil = `'; DROP TABLE check_out_lock; --`
	body := `{"module_to":"` + evil + `","module_from":"x\"); DROP SCHEMA public CASCADE; --",` +
		`"parameters":[{"key":"` + evil + `","value":"') OR 1=1; --"},{"key":"unicode ✓","value":"ünïcødé 🔒"}]}`
	res := f.do("POST", "/_/tenant", body).wantStatus(http.StatusCreated).wantSchema("tenant-job.json")
	var job tenantJobJSON
	res.decode(&job)
	var got tenantJobJSON
	f.do("GET", "/_/tenant/"+job.ID, "").wantStatus(http.StatusOK).decode(&got)
	var sent tenantJobJSON
	if err := json.Unmarshal([]byte(`{"tenantAttributes":`+body+`}`), &sent); err != nil {
		t.Fatal(err)
	}
	gotAttrs, _ := json.Marshal(got.TenantAttributes)
	sentAttrs, _ := json.Marshal(sent.TenantAttributes)
	if string(gotAttrs) != string(sentAttrs) {
		t.Errorf("stored attributes %s, want %s", gotAttrs, sentAttrs)
	}
	if after := f.snapshot(); after != before {
		t.Errorf("locks changed:\nbefore %s\nafter  %s", before, after)
	}
	if !schemaExists(t, f, "public") {
		t.Error("schema public is gone")
	}
}

// TestServiceHealthyAfterBadInputBattery: after the whole battery, bad
// tenants included, the service still serves a fresh patron.
func TestServiceHealthyAfterBadInputBattery(t *testing.T) {
	t.Parallel()
	f := setup(t)
	t.Run("battery", func(t *testing.T) { runBadInputBattery(t, badInputFixture(t, f)) })
	for _, h := range hostileTenants {
		r := badInputCase{method: "POST", path: locksPath, body: `{"userId":"` + uuid.NewString() + `"}`}
		if h.missing {
			r.unset = []string{TenantHeader}
		} else {
			r.header = map[string]string{TenantHeader: h.value}
		}
		sendBadInput(t, f, r).wantStatus(http.StatusBadRequest)
	}
	f.do("GET", "/admin/health", "").wantStatus(http.StatusOK)
	f.do("GET", "/admin/ready", "").wantStatus(http.StatusOK)
	user := uuid.NewString()
	lock := f.acquire(user)
	if lock.UserID != user {
		t.Errorf("lock for %s, want %s", lock.UserID, user)
	}
	f.do("GET", locksPath+"/"+lock.ID, "").wantStatus(http.StatusOK).wantSchema("checkout-lock.json")
	f.do("DELETE", locksPath+"/"+lock.ID, "").wantStatus(http.StatusNoContent)
}

// TestEdgeInputsFoundByTheBattery pins the answers to inputs that once got
// a wrong one: NUL characters PostgreSQL cannot store (was 500), a path
// below an id (was 400), a percent-encoded id (was refused), integers
// written as 1.0 or 1e3 (were refused with Go's words), HEAD (was 405).
func TestEdgeInputsFoundByTheBattery(t *testing.T) {
	t.Parallel()
	f := setup(t)
	before := tenantJobsSnapshot(f)
	for _, body := range []string{
		`{"module_to":"mod\u0000x"}`,
		`{"module_to":"m","parameters":[{"key":"k","value":"a\u0000"}]}`,
		`{"module_to":"m","parameters":[{"key":"k\u0000","value":"a"}]}`,
	} {
		f.do("POST", "/_/tenant", body).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	}
	if after := tenantJobsSnapshot(f); after != before {
		t.Errorf("refused tenant posts changed the jobs:\nbefore %s\nafter  %s", before, after)
	}

	lock := f.acquire(uuid.NewString())
	f.do("GET", "/check-out-lock-storage/"+lock.ID+"/holder", "").wantError(http.StatusNotFound, "ROUTE_NOT_FOUND")
	f.do("GET", "/_/tenant/"+uuid.NewString()+"/x", "").wantError(http.StatusNotFound, "ROUTE_NOT_FOUND")
	encoded := lock.ID[:len(lock.ID)-1] + fmt.Sprintf("%%%02X", lock.ID[len(lock.ID)-1])
	var got lockJSON
	f.do("GET", "/check-out-lock-storage/"+encoded, "").wantStatus(http.StatusOK).decode(&got)
	if got.ID != lock.ID {
		t.Errorf("GET by percent-encoded id = %+v, want %s", got, lock.ID)
	}

	for _, ttl := range []string{"100.0", "1e3", "2500.0"} {
		var l lockJSON
		f.do("POST", "/check-out-lock-storage", fmt.Sprintf(`{"userId":%q,"ttlMs":%s}`, uuid.NewString(), ttl)).
			wantStatus(http.StatusCreated).decode(&l)
		want, _ := strconv.ParseFloat(ttl, 64)
		if float64(l.TTLMs) != want {
			t.Errorf("ttlMs %s stored as %d", ttl, l.TTLMs)
		}
	}

	res := f.do("HEAD", "/check-out-lock-storage/"+lock.ID, "")
	if res.status != http.StatusOK || len(res.body) != 0 {
		t.Errorf("HEAD = %d with %d body bytes, want 200 and no body", res.status, len(res.body))
	}
	if res := f.do("HEAD", "/check-out-lock-storage/"+uuid.NewString(), ""); res.status != http.StatusNotFound {
		t.Errorf("HEAD of an unknown lock = %d, want 404", res.status)
	}
}

// TestCheckOutWriteHeadersAreValidated: the headers that make a loan
// creation a check-out's fenced write are checked before any statement runs;
// a version PostgreSQL's integer cannot hold is the client's mistake, not a
// 500.
func TestCheckOutWriteHeadersAreValidated(t *testing.T) {
	t.Parallel()
	f := setup(t)
	g := f.newGroup("g")
	mt, lt := f.newMaterialType("m"), f.newLoanType("l")
	patron := f.newPatron("p-1", g)
	item := f.newItem(itemDoc("i-1", mt, lt))
	body := jsonBody(loanDoc(patron, item, "Open"))
	before := f.recordsSnapshot()
	for _, c := range []badInputCase{
		{header: map[string]string{ItemVersionHeader: "2147483648"}, code: "INVALID_HEADER"},
		{header: map[string]string{ItemVersionHeader: "99999999999999999999"}, code: "INVALID_HEADER"},
		{header: map[string]string{ItemVersionHeader: "0"}, code: "INVALID_HEADER"},
		{header: map[string]string{ItemVersionHeader: "-1"}, code: "INVALID_HEADER"},
		{header: map[string]string{ItemVersionHeader: "1.0"}, code: "INVALID_HEADER"},
		{header: map[string]string{ItemVersionHeader: "one"}, code: "INVALID_HEADER"},
		{header: map[string]string{ItemVersionHeader: "1", LockIDHeader: "not-a-uuid"}, code: "INVALID_ID"},
	} {
		c.method, c.path, c.body, c.status = "POST", "/loan-storage/loans", body, http.StatusBadRequest
		c.name = fmt.Sprint(c.header)
		wantRefusal(t, sendBadInput(t, f, c), c.status, c.code)
	}
	f.wantUnchanged(before, "refused check-out writes")
}
