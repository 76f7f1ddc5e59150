package contract

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/checkoutlock/schemas"
)

// Requests the cases make.

func acquireReq(userID, lockID string, ttlMs int) request {
	return request{method: http.MethodPost, path: "/check-out-lock-storage",
		body: map[string]any{"userId": userID, "id": lockID, "ttlMs": ttlMs}}
}

// waitReq is an acquisition that waits up to waitMs for a held lock.
func waitReq(userID, lockID string, waitMs int) request {
	r := acquireReq(userID, lockID, lockTTL)
	r.body.(map[string]any)["waitMs"] = waitMs
	return r
}

func releaseReq(lockID string) request {
	return request{method: http.MethodDelete, path: "/check-out-lock-storage/" + lockID}
}

// loanReq is an open loan of the seeded item to the seeded patron, under a
// new id, with the given headers.
func loanReq(r Records, headers map[string]string) request {
	return request{method: http.MethodPost, path: "/loan-storage/loans", headers: headers, body: map[string]any{
		"id": newUUID(), "userId": r.PatronID, "itemId": r.ItemID, "action": schemas.LoanCheckedOut, "status": map[string]any{"name": schemas.LoanOpen},
		"loanDate": schemas.FormatTime(time.Now()), "dueDate": schemas.FormatTime(time.Now().Add(21 * 24 * time.Hour)),
	}}
}

// checkOutReq is a check-out's write: the loan, fenced by lockID, moving
// the item from itemVersion to the next.
func checkOutReq(r Records, lockID, itemVersion string) request {
	return loanReq(r, map[string]string{schemas.HeaderLockID: lockID, schemas.HeaderItemVersion: itemVersion})
}

// releasingCheckOutReq is a check-out's write that also releases its lock
// when it writes the loan.
func releasingCheckOutReq(r Records, lockID, itemVersion string) request {
	return loanReq(r, map[string]string{schemas.HeaderLockID: lockID, schemas.HeaderItemVersion: itemVersion,
		schemas.HeaderReleaseLock: "true"})
}

// The users the ownership cases act for (X-Okapi-User-Id).
const (
	holderUser = "0ddba11a-0000-4000-8000-00000000c0de"
	otherUser  = "0ddba11a-0000-4000-8000-0000000000e5"
)

// firstMessage is the first error's message.
func firstMessage(got response) string {
	var env struct {
		Errors []struct{ Message string } `json:"errors"`
	}
	_ = json.Unmarshal(got.body, &env)
	if len(env.Errors) == 0 {
		return ""
	}
	return env.Errors[0].Message
}

// checkOut checks the seeded item out to the seeded patron under a lock
// of its own, which must succeed, and returns the loan.
func (s *session) checkOut() map[string]any {
	s.t.Helper()
	r := s.rec
	return s.step("check-out", checkOutReq(r, s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string), "1"),
		want{status: http.StatusCreated, schema: "loan.json"}).decode(s.t)
}

// acquireAs takes patron's lock under lockID acting for user
// (X-Okapi-User-Id), which must be granted.
func (s *session) acquireAs(user, patron, lockID string) {
	s.t.Helper()
	req := acquireReq(patron, lockID, lockTTL)
	req.headers = map[string]string{schemas.HeaderUserID: user}
	s.step("acquire as "+user, req, want{status: http.StatusCreated, schema: "checkout-lock.json"})
}

// wantKeptLoan checks the status of the loan kept as "loan".
func (s *session) wantKeptLoan(status string) {
	s.t.Helper()
	if got := s.loanStatus(s.kept("loan")["id"].(string)); got != status {
		s.t.Errorf("loan status %v, want %s", got, status)
	}
}

// limitItems makes the target's circulation rules give the seeded patron a
// limit of n items of the seeded item's material type.
func (s *session) limitItems(n int) {
	s.t.Helper()
	s.target.LimitItems(s.t, s.rec, n)
}

// validationReq asks for everything a check-out's validation reads.
func validationReq(itemBarcode, userBarcode string) request {
	return request{method: http.MethodGet, path: "/check-out-storage/validation?" +
		url.Values{"itemBarcode": {itemBarcode}, "userBarcode": {userBarcode}}.Encode()}
}

// validationByIDReq asks for what validationReq does, the item and the
// patron named by their ids.
func validationByIDReq(itemID, userID string) request {
	return request{method: http.MethodGet, path: "/check-out-storage/validation?" +
		url.Values{"itemId": {itemID}, "userId": {userID}}.Encode()}
}

// patronReq asks for what a self-check machine shows a patron.
func patronReq(userBarcode string) request {
	return request{method: http.MethodGet, path: "/check-out-storage/patron?" + url.Values{"userBarcode": {userBarcode}}.Encode()}
}

// pinReq sets (path /patron-pin) or verifies (/patron-pin/verify) a
// patron's PIN.
func pinReq(path, patronID, pin string) request {
	return request{method: http.MethodPost, path: path, body: map[string]any{"id": patronID, "pin": pin}}
}

// checkInReq is a check-in's write: the loan, closed, moving the item from
// itemVersion to the next.
func checkInReq(loan map[string]any, itemVersion string) request {
	closed := map[string]any{}
	for k, v := range loan {
		closed[k] = v
	}
	closed["status"] = map[string]any{"name": schemas.LoanClosed}
	closed["action"] = schemas.LoanCheckedIn
	closed["returnDate"] = schemas.FormatTime(time.Now())
	return request{method: http.MethodPut, path: "/loan-storage/loans/" + loan["id"].(string), body: closed,
		headers: map[string]string{schemas.HeaderCheckInItemVersion: itemVersion}}
}

// loanStatus is the status of a stored loan.
func (s *session) loanStatus(id string) any {
	s.t.Helper()
	loan := s.step("the loan", request{method: http.MethodGet, path: "/loan-storage/loans/" + id},
		want{status: http.StatusOK, schema: "loan.json"}).decode(s.t)
	status, _ := loan["status"].(map[string]any)
	return status["name"]
}

func openCountReq(userID, materialTypeID, loanTypeID string) request {
	q := url.Values{"userId": {userID}}
	if materialTypeID != "" {
		q.Set("materialTypeId", materialTypeID)
	}
	if loanTypeID != "" {
		q.Set("loanTypeId", loanTypeID)
	}
	return request{method: http.MethodGet, path: "/loan-storage/loans/open-count?" + q.Encode()}
}

func settingReq(scope, key string, value any) request {
	return request{method: http.MethodPost, path: "/settings/entries", body: map[string]any{"scope": scope, "key": key, "value": value}}
}

// param is the value of the first error's parameter key, "" when absent.
func param(got response, key string) string {
	var env struct {
		Errors []struct {
			Parameters []struct{ Key, Value string } `json:"parameters"`
		} `json:"errors"`
	}
	_ = json.Unmarshal(got.body, &env)
	if len(env.Errors) == 0 {
		return ""
	}
	for _, p := range env.Errors[0].Parameters {
		if p.Key == key {
			return p.Value
		}
	}
	return ""
}

// Steps the cases take on the way.

// acquire takes a lock, which must be granted as asked.
func (s *session) acquire(userID, lockID string, ttlMs int) map[string]any {
	s.t.Helper()
	l := s.step("acquire", acquireReq(userID, lockID, ttlMs), want{status: http.StatusCreated, schema: "checkout-lock.json"}).decode(s.t)
	if l["id"] != lockID || l["userId"] != userID {
		s.t.Fatalf("acquired %v, want id %s for user %s", l, lockID, userID)
	}
	return l
}

// meanwhile sends req after d, while the case's own request is under way,
// and keeps when it started; meanwhileDone waits for req's answer and says
// how long the case took and whether req's answer was the status expected.
func (s *session) meanwhile(d time.Duration, req request, status int) {
	done := make(chan error, 1)
	time.AfterFunc(d, func() {
		got, err := do(s.t, s.http, s.target.URL(), s.target.Tenant(), req)
		if err == nil && got.status != status {
			err = fmt.Errorf("%s %s answered %d %s, want %d", req.method, req.path, got.status, got.body, status)
		}
		done <- err
	})
	s.keep("meanwhile", map[string]any{"start": time.Now(), "done": done})
}

func (s *session) meanwhileDone() (time.Duration, error) {
	m := s.kept("meanwhile")
	err := <-m["done"].(chan error)
	return time.Since(m["start"].(time.Time)), err
}

// keep keeps a decoded answer of given for then, by name.
func (s *session) keep(name string, v map[string]any) { s.saved[name] = v }

// kept returns what keep kept.
func (s *session) kept(name string) map[string]any {
	s.t.Helper()
	v, ok := s.saved[name]
	if !ok {
		s.t.Fatalf("nothing kept as %q", name)
	}
	return v
}

// sent is the body of the request under test.
func (s *session) sent() map[string]any {
	s.t.Helper()
	var m map[string]any
	b, err := json.Marshal(s.req.body)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		s.t.Fatalf("request body %v: %v", s.req.body, err)
	}
	return m
}

// awaitExpiry polls the lock until the target says it is gone, within a
// deadline: the lock's expiry is the target's to judge, by its own clock.
func (s *session) awaitExpiry(lockID string) {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	req := request{method: http.MethodGet, path: "/check-out-lock-storage/" + lockID}
	for {
		got := s.send(req)
		switch got.status {
		case http.StatusNotFound:
			check(s.t, "expired lock", req, got, want{status: http.StatusNotFound, code: schemas.CodeNotFound})
			return
		case http.StatusOK:
			check(s.t, "live lock", req, got, want{status: http.StatusOK, schema: "checkout-lock.json"})
		default:
			s.t.Fatalf("GET lock %s while waiting for it to expire: %d %s", lockID, got.status, got.body)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("lock %s still live 10 s after it was taken for %d ms", lockID, shortTTL)
		}
		select {
		case <-tick.C:
		case <-s.t.Context().Done():
			s.t.Fatal("test ended while waiting for the lock to expire")
		}
	}
}

// item reads the seeded item by its barcode.
func (s *session) item() map[string]any {
	s.t.Helper()
	page := s.step("the item", request{method: http.MethodGet, path: "/item-storage/items?barcode=" + url.QueryEscape(s.rec.ItemBarcode)},
		want{status: http.StatusOK, schema: "items.json"}).decode(s.t)
	items, _ := page["items"].([]any)
	if len(items) != 1 {
		s.t.Fatalf("items with barcode %s: %v, want the one seeded", s.rec.ItemBarcode, page)
	}
	return items[0].(map[string]any)
}

// wantItem checks the seeded item's status and _version.
func (s *session) wantItem(status string, version int) {
	s.t.Helper()
	item := s.item()
	if got, _ := item["status"].(map[string]any); got["name"] != status || item["_version"] != float64(version) {
		s.t.Errorf("item %v, want status %q at _version %d", item, status, version)
	}
}

// itemPutReq is a PUT of the seeded item as stored, naming version.
func (s *session) itemPutReq(version int) request {
	s.t.Helper()
	doc := s.item()
	doc["_version"] = version
	return request{method: http.MethodPut, path: "/item-storage/items/" + s.rec.ItemID, body: doc}
}

// bumpItem writes the seeded item back as stored, at its _version, moving
// it to the next: what any other writer of the item does.
func (s *session) bumpItem() {
	s.t.Helper()
	v, _ := s.item()["_version"].(float64)
	s.step("item update", s.itemPutReq(int(v)), want{status: http.StatusNoContent})
}

// wantLoans checks how many loans the seeded item has.
func (s *session) wantLoans(n int) {
	s.t.Helper()
	page := s.step("the item's loans", request{method: http.MethodGet, path: "/loan-storage/loans?itemId=" + s.rec.ItemID},
		want{status: http.StatusOK, schema: "loans.json"}).decode(s.t)
	if page["totalRecords"] != float64(n) {
		s.t.Errorf("the item has %v loans, want %d", page["totalRecords"], n)
	}
}

// nothingWritten checks that a refused check-out write left the seeded
// item and its loans as seeded.
func nothingWritten(s *session, _ response) {
	s.t.Helper()
	s.wantItem("Available", 1)
	s.wantLoans(0)
}

// wantParams checks the first error's parameters have these values.
func wantParams(s *session, got response, params map[string]string) {
	s.t.Helper()
	check(s.t, "parameters", s.req, got, want{status: got.status, code: firstCode(got), params: params})
}

func firstCode(got response) string {
	var env struct {
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if json.Unmarshal(got.body, &env) != nil || len(env.Errors) == 0 {
		return ""
	}
	return env.Errors[0].Code
}

// timeOf parses a time on the wire.
func timeOf(t *testing.T, v any) time.Time {
	t.Helper()
	s, _ := v.(string)
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("time %v: %v", v, err)
	}
	return tm
}
