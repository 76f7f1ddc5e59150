// Package contract is circulation-storage's HTTP acceptance table: one
// row per case, each the requests that bring a tenant to the state the
// case needs (every one checked on the way), the request under test, and
// the answer it must get (status, error code and parameters, body schema,
// headers) with what it must have written or left alone. Every answer is
// also held to the rules of all of storage's answers (see check). The
// table runs against the real service, one process on a real PostgreSQL
// built from this repository, each case on a tenant of its own
// (contract_test.go). Circulation's own tests call the same real storage
// (circulation-storage/storagetest), so no second implementation of
// storage exists for the table to compare.
package contract

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/locksettings"
)

// The storage configuration the cases assume: LOCK_DEFAULT_TTL_MS,
// LOCK_MAX_TTL_MS and LOCK_MAX_WAIT_MS at their defaults. A target must run with these.
const (
	DefaultLockTTLMs = locksettings.DefaultTTLMs
	MaxLockTTLMs     = int(locksettings.MaxLockTTL / time.Millisecond)
	MaxWaitMs        = 20000
)

// Target is the running storage, ready for one case.
type Target interface {
	// URL is the base URL the API is served at.
	URL() string
	// Tenant is a tenant the target has initialised, for this case alone:
	// it holds no records but those Seed makes.
	Tenant() string
	// UninitializedTenant is a valid tenant id the target has never
	// initialised.
	UninitializedTenant() string
	// Seed creates for Tenant an active patron (with its patron group) and
	// an Available item at _version 1 (with its material and loan types),
	// failing t if it cannot, through storage's HTTP API (see SeedHTTP).
	Seed(t *testing.T) Records
	// LimitItems makes the circulation rules give the patron r names a
	// limit of n items of r's material type (a rule naming it), through
	// storage's HTTP API (see LimitItemsHTTP).
	LimitItems(t *testing.T, r Records, n int)
	// Block gives the patron r names a manual block (FOLIO's
	// /manualblocks shape: desc, patronMessage, borrowing,
	// expirationDate), through storage's HTTP API (see BlockHTTP).
	Block(t *testing.T, r Records, block map[string]any)
	// LimitChargedOut gives the patron group r names a limit of n items
	// charged out, its condition blocking borrowing with message, through
	// storage's HTTP API (see LimitChargedOutHTTP).
	LimitChargedOut(t *testing.T, r Records, n int, message string)
	// Request puts a request for r's item in its queue at position, by
	// r's patron or, with byAnother, by another patron it creates, and
	// returns the request's id, through storage's HTTP API (see
	// RequestHTTP).
	Request(t *testing.T, r Records, byAnother bool, position int) string
}

// Records are what Target.Seed created.
type Records struct {
	PatronID       string
	PatronBarcode  string
	PatronGroupID  string
	ItemID         string
	ItemBarcode    string
	MaterialTypeID string
	LoanTypeID     string
}

// Exercise runs every case against a fresh Target from newTarget, each in
// a parallel subtest of its own.
func Exercise(t *testing.T, newTarget func(t *testing.T) Target) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			target := newTarget(t)
			s := &session{t: t, target: target, http: newHTTPClient(), saved: map[string]map[string]any{}}
			req := tc.given(s)
			s.req = req
			got := s.step("request under test", req, tc.want)
			if tc.then != nil {
				tc.then(s, got)
			}
		})
	}
}

// testCase is one row of the table: given brings the target to the state
// the request needs (checking every step on the way) and returns the
// request; want is the answer it must get; then checks the answer's values
// and what the request wrote, or did not.
type testCase struct {
	name  string
	given func(s *session) request
	want  want
	then  func(s *session, got response)
}

// request is one HTTP request to the target.
type request struct {
	method, path string
	// body is nil, a string sent as it is, or a value sent as JSON.
	body any
	// headers are added to (or, with an empty value, removed from) the
	// defaults: the target's tenant, a request id and, with a body, the
	// JSON content type.
	headers map[string]string
}

// want is the answer a request must get. Whatever the case, every answer
// is also held to the rules in check.
type want struct {
	status int
	// code is the error code of every entry of an error envelope; set, the
	// body must validate against errors.json.
	code string
	// schema is the JSON Schema the body of a success must validate
	// against; empty, the answer must have no body.
	schema string
	// params are parameters the (first) error must carry; an empty value
	// accepts any.
	params map[string]string
}

// response is an answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

// decode unmarshals the body into a map, failing t if it is not an object.
func (r response) decode(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return m
}

// session is one case's view of its target.
type session struct {
	t      *testing.T
	target Target
	http   *http.Client
	// rec is set by seed.
	rec Records
	// req is the request under test, once given has returned it.
	req request
	// saved are answers given keeps for then (see keep).
	saved map[string]map[string]any
}

// seed seeds the target and keeps what it created.
func (s *session) seed() Records {
	s.t.Helper()
	s.rec = s.target.Seed(s.t)
	return s.rec
}

func newHTTPClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second}
}

// send sends req and returns the answer, failing t on a transport error.
func (s *session) send(req request) response {
	s.t.Helper()
	return send(s.t, s.http, s.target.URL(), s.target.Tenant(), req)
}

func send(t *testing.T, client *http.Client, base, tenant string, req request) response {
	t.Helper()
	got, err := do(t, client, base, tenant, req)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// do sends req; it may run on a goroutine of a case's own, so it reports
// a failure to answer as an error rather than through t.
func do(t *testing.T, client *http.Client, base, tenant string, req request) (response, error) {
	var body io.Reader
	var data []byte
	switch b := req.body.(type) {
	case nil:
	case string:
		data = []byte(b)
	default:
		var err error
		if data, err = json.Marshal(b); err != nil {
			return response{}, err
		}
	}
	if req.body != nil {
		body = bytes.NewReader(data)
	}
	r, err := http.NewRequestWithContext(t.Context(), req.method, strings.TrimRight(base, "/")+req.path, body)
	if err != nil {
		return response{}, err
	}
	r.Header.Set(schemas.HeaderTenant, tenant)
	r.Header.Set(schemas.HeaderRequestID, "contract-"+randomHex(6))
	if req.body != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	for k, v := range req.headers {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	res, err := client.Do(r)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: no answer: %w", req.method, req.path, err)
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s: reading the answer: %w", req.method, req.path, err)
	}
	// The request id is checked here, where the request's own is known.
	if sent, echoed := r.Header.Get(schemas.HeaderRequestID), res.Header.Get(schemas.HeaderRequestID); echoed != sent {
		return response{}, fmt.Errorf("%s %s: %s %q in the answer, want the request's %q", req.method, req.path, schemas.HeaderRequestID, echoed, sent)
	}
	return response{status: res.StatusCode, header: res.Header, body: got}, nil
}

// step sends req and checks its answer against w; what names the step in
// failures. A step that fails ends the case.
func (s *session) step(what string, req request, w want) response {
	s.t.Helper()
	got := s.send(req)
	check(s.t, what, req, got, w)
	return got
}

// set is the contract's schemas, compiled once for every case.
var set = sync.OnceValue(schemas.MustLoad)

// check holds an answer to w and to the rules of every answer: the FOLIO
// error envelope (errors.json) on every error with one code throughout, a
// JSON body valid against its schema on every success that has one, no
// body on one that has none, Location naming the new record on every 201,
// and Retry-After in whole seconds on every 503 LOCK_HELD.
func check(t *testing.T, what string, req request, got response, w want) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s: %s %s answered %d %s\n%s", what, req.method, req.path, got.status, got.body, sprintf(format, args...))
	}
	if got.status != w.status {
		fail("want status %d", w.status)
	}
	schema := w.schema
	if w.code != "" {
		schema = "errors.json"
	}
	if schema == "" {
		if len(got.body) != 0 {
			fail("want no body")
		}
		return
	}
	if ct := got.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		fail("Content-Type %q, want application/json", ct)
	}
	if err := set().ValidateJSON(schema, got.body); err != nil {
		fail("body does not match %s: %v", schema, err)
	}
	if w.code != "" {
		var env struct {
			Errors []struct {
				Code       string `json:"code"`
				Parameters []struct {
					Key   string `json:"key"`
					Value string `json:"value"`
				} `json:"parameters"`
			} `json:"errors"`
		}
		_ = json.Unmarshal(got.body, &env)
		for _, e := range env.Errors {
			if e.Code != w.code {
				fail("error code %s, want %s", e.Code, w.code)
			}
		}
		params := map[string]string{}
		for _, p := range env.Errors[0].Parameters {
			params[p.Key] = p.Value
		}
		for k, v := range w.params {
			if got, ok := params[k]; !ok || (v != "" && got != v) {
				fail("parameter %s = %q (given: %t), want %q", k, got, ok, v)
			}
		}
		if w.code == schemas.CodeLockHeld {
			if n, err := strconv.Atoi(got.header.Get("Retry-After")); err != nil || n < 1 {
				fail("Retry-After %q, want whole seconds, at least 1", got.header.Get("Retry-After"))
			}
		}
		return
	}
	if got.status == http.StatusCreated {
		var rec struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(got.body, &rec)
		path, _, _ := strings.Cut(req.path, "?")
		if loc := got.header.Get("Location"); loc != path+"/"+rec.ID {
			fail("Location %q, want %q", loc, path+"/"+rec.ID)
		}
	}
}

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// SeedHTTP creates what Target.Seed promises through the HTTP API at base
// for tenant.
func SeedHTTP(t *testing.T, base, tenant string) Records {
	t.Helper()
	client := newHTTPClient()
	post := func(path string, body map[string]any) string {
		t.Helper()
		req := request{method: http.MethodPost, path: path, body: body}
		got := send(t, client, base, tenant, req)
		check(t, "seed", req, got, want{status: http.StatusCreated, schema: schemaOf[path]})
		var rec struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(got.body, &rec); err != nil {
			t.Fatal(err)
		}
		return rec.ID
	}
	suffix := randomHex(4)
	var r Records
	r.PatronGroupID = post("/groups", map[string]any{"group": "contract-" + suffix})
	r.MaterialTypeID = post("/material-types", map[string]any{"name": "book-" + suffix})
	r.LoanTypeID = post("/loan-types", map[string]any{"name": "Can circulate " + suffix})
	r.PatronBarcode = "P-" + suffix
	r.PatronID = post("/users", map[string]any{"barcode": r.PatronBarcode, "active": true, "patronGroup": r.PatronGroupID,
		"personal": map[string]any{"lastName": "Patron " + suffix}})
	r.ItemBarcode = "I-" + suffix
	r.ItemID = post("/item-storage/items", map[string]any{"barcode": r.ItemBarcode, "title": "Item " + suffix,
		"status": map[string]any{"name": "Available"}, "materialTypeId": r.MaterialTypeID, "permanentLoanTypeId": r.LoanTypeID})
	return r
}

// LimitItemsHTTP is Target.LimitItems through the HTTP API at base: a loan
// policy with the limit, and rules choosing it for the material type (and
// as the fallback).
func LimitItemsHTTP(t *testing.T, base, tenant string, r Records, n int) {
	t.Helper()
	client := newHTTPClient()
	req := request{method: http.MethodPost, path: "/loan-policy-storage/loan-policies", body: map[string]any{
		"name": "limit " + randomHex(4), "loanable": true,
		"loansPolicy": map[string]any{"profileId": "Rolling", "period": map[string]any{"duration": 3, "intervalId": "Weeks"}, "itemLimit": n}}}
	got := send(t, client, base, tenant, req)
	check(t, "loan policy", req, got, want{status: http.StatusCreated, schema: "loan-policy.json"})
	var policy struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(got.body, &policy); err != nil {
		t.Fatal(err)
	}
	req = request{method: http.MethodPut, path: "/circulation-rules-storage", body: map[string]any{
		"fallbackLoanPolicyId": policy.ID, "rules": []any{map[string]any{"materialTypeId": r.MaterialTypeID, "loanPolicyId": policy.ID}}}}
	check(t, "rules", req, send(t, client, base, tenant, req), want{status: http.StatusNoContent})
}

// BlockHTTP is Target.Block through the HTTP API at base.
func BlockHTTP(t *testing.T, base, tenant string, r Records, block map[string]any) {
	t.Helper()
	body := map[string]any{"userId": r.PatronID, "type": "Manual"}
	for k, v := range block {
		body[k] = v
	}
	req := request{method: http.MethodPost, path: "/manualblocks", body: body}
	check(t, "manual block", req, send(t, newHTTPClient(), base, tenant, req), want{status: http.StatusCreated, schema: "manualblock.json"})
}

// LimitChargedOutHTTP is Target.LimitChargedOut through the HTTP API at
// base: the condition blocks borrowing with message, and the patron
// group gets the limit.
func LimitChargedOutHTTP(t *testing.T, base, tenant string, r Records, n int, message string) {
	t.Helper()
	client := newHTTPClient()
	path := "/patron-block-conditions/" + schemas.ConditionItemsChargedOut
	got := send(t, client, base, tenant, request{method: http.MethodGet, path: path})
	var c map[string]any
	if got.status != http.StatusOK || json.Unmarshal(got.body, &c) != nil {
		t.Fatalf("the tenant's condition: %d %s", got.status, got.body)
	}
	c["blockBorrowing"], c["message"] = true, message
	delete(c, "metadata")
	req := request{method: http.MethodPut, path: path, body: c}
	check(t, "condition", req, send(t, client, base, tenant, req), want{status: http.StatusNoContent})
	req = request{method: http.MethodPost, path: "/patron-block-limits", body: map[string]any{
		"patronGroupId": r.PatronGroupID, "conditionId": schemas.ConditionItemsChargedOut, "value": n}}
	check(t, "limit", req, send(t, client, base, tenant, req), want{status: http.StatusCreated, schema: "patron-block-limit.json"})
}

// RequestHTTP is Target.Request through the HTTP API at base.
func RequestHTTP(t *testing.T, base, tenant string, r Records, byAnother bool, position int) string {
	t.Helper()
	client := newHTTPClient()
	requester := r.PatronID
	if byAnother {
		requester = newUUID()
		req := request{method: http.MethodPost, path: "/users", body: map[string]any{"id": requester, "barcode": "other-" + requester[:8],
			"active": true, "patronGroup": r.PatronGroupID, "personal": map[string]any{"lastName": "Other"}}}
		check(t, "another patron", req, send(t, client, base, tenant, req), want{status: http.StatusCreated, schema: "user.json"})
	}
	id := newUUID()
	req := request{method: http.MethodPost, path: "/request-storage/requests", body: map[string]any{"id": id, "requestType": "Hold",
		"requestLevel": "Item", "requestDate": "2026-01-01T10:00:00.000Z", "requesterId": requester, "itemId": r.ItemID,
		"status": "Open - Awaiting pickup", "position": position, "fulfillmentPreference": "Hold Shelf"}}
	check(t, "request", req, send(t, client, base, tenant, req), want{status: http.StatusCreated, schema: "request.json"})
	return id
}

// schemaOf is the schema of one record of each collection SeedHTTP writes.
var schemaOf = map[string]string{
	"/groups": "group.json", "/material-types": "material-type.json", "/loan-types": "loan-type.json",
	"/users": "user.json", "/item-storage/items": "item.json",
}

// newUUID is a random UUID, for ids a case makes up.
func newUUID() string { return uuid.NewString() }
