package contract

import (
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/locksettings"
	"github.com/checkoutlock/schemas/selfcheck"
)

// lockTTL is the lifetime of the locks cases hold: long enough never to
// expire during a case, however slow the machine.
const lockTTL = 60000

// shortTTL is the lifetime of the locks cases wait out.
const shortTTL = 100

// cases is the contract, one row per request; see testCase.
var cases = []testCase{
	// The lock.
	{
		name: "acquire under the client's id",
		given: func(s *session) request {
			return acquireReq(newUUID(), newUUID(), lockTTL)
		},
		want: want{status: http.StatusCreated, schema: "checkout-lock.json"},
		then: func(s *session, got response) {
			l := got.decode(s.t)
			sent := s.sent()
			if l["id"] != sent["id"] || l["userId"] != sent["userId"] || l["ttlMs"] != float64(lockTTL) {
				s.t.Errorf("lock %v, want id %v, userId %v and ttlMs %d as sent", l, sent["id"], sent["userId"], lockTTL)
			}
			if d := timeOf(s.t, l["expiresAt"]).Sub(timeOf(s.t, l["creationDate"])); d != lockTTL*time.Millisecond {
				s.t.Errorf("expiresAt - creationDate = %s, want %d ms", d, lockTTL)
			}
		},
	},
	{
		name: "acquire without an id gets a new one and the default TTL",
		given: func(s *session) request {
			return request{method: http.MethodPost, path: "/check-out-lock-storage", body: map[string]any{"userId": newUUID()}}
		},
		want: want{status: http.StatusCreated, schema: "checkout-lock.json"},
		then: func(s *session, got response) {
			if l := got.decode(s.t); l["ttlMs"] != float64(DefaultLockTTLMs) {
				s.t.Errorf("ttlMs %v, want the default %d", l["ttlMs"], DefaultLockTTLMs)
			}
		},
	},
	{
		// The holder whose first answer was lost asks again under the
		// same id: renewed, not refused.
		name: "re-acquire under the same id while live renews the lock",
		given: func(s *session) request {
			user, id := newUUID(), newUUID()
			s.keep("first", s.acquire(user, id, lockTTL))
			return acquireReq(user, id, 2*lockTTL)
		},
		want: want{status: http.StatusCreated, schema: "checkout-lock.json"},
		then: func(s *session, got response) {
			first, l := s.kept("first"), got.decode(s.t)
			if l["id"] != first["id"] || l["creationDate"] != first["creationDate"] || l["ttlMs"] != float64(2*lockTTL) {
				s.t.Errorf("renewed lock %v, want the id and creationDate of %v and ttlMs %d", l, first, 2*lockTTL)
			}
			if !timeOf(s.t, l["expiresAt"]).After(timeOf(s.t, first["expiresAt"])) {
				s.t.Errorf("renewed expiresAt %v, want later than %v", l["expiresAt"], first["expiresAt"])
			}
		},
	},
	{
		name: "another id for a patron whose lock is live is refused with LOCK_HELD",
		given: func(s *session) request {
			user := newUUID()
			s.keep("holder", s.acquire(user, newUUID(), lockTTL))
			return acquireReq(user, newUUID(), lockTTL)
		},
		want: want{status: http.StatusServiceUnavailable, code: schemas.CodeLockHeld, params: map[string]string{"userId": ""}},
		then: func(s *session, got response) {
			holder := s.kept("holder")
			wantParams(s, got, map[string]string{"userId": holder["userId"].(string), "expiresAt": holder["expiresAt"].(string)})
			if n, _ := strconv.Atoi(got.header.Get("Retry-After")); n > lockTTL/1000 {
				s.t.Errorf("Retry-After %d s, want at most the holder's %d s", n, lockTTL/1000)
			}
			// The holder's lock is untouched.
			still := s.step("holder's lock", request{method: http.MethodGet, path: "/check-out-lock-storage/" + holder["id"].(string)},
				want{status: http.StatusOK, schema: "checkout-lock.json"}).decode(s.t)
			if still["expiresAt"] != holder["expiresAt"] {
				s.t.Errorf("holder's lock now %v, want unchanged %v", still, holder)
			}
		},
	},
	{
		name: "the holder an acquisition names is kept with the lock and named by LOCK_HELD",
		given: func(s *session) request {
			user, sp := newUUID(), newUUID()
			held := s.step("acquire naming the holder", request{method: http.MethodPost, path: "/check-out-lock-storage",
				body: map[string]any{"id": newUUID(), "userId": user, "ttlMs": lockTTL, "holder": map[string]any{
					"instance": "circ-1:8080", "requestId": "req-1", "itemBarcode": "book-1", "servicePointId": sp}}},
				want{status: http.StatusCreated, schema: "checkout-lock.json"}).decode(s.t)
			s.keep("holder", held)
			return acquireReq(user, newUUID(), lockTTL)
		},
		want: want{status: http.StatusServiceUnavailable, code: schemas.CodeLockHeld,
			params: map[string]string{"holderInstance": "circ-1:8080", "holderRequestId": "req-1", "holderItemBarcode": "book-1"}},
		then: func(s *session, got response) {
			held := s.kept("holder")
			h, _ := held["holder"].(map[string]any)
			if h["instance"] != "circ-1:8080" || h["requestId"] != "req-1" || h["itemBarcode"] != "book-1" || h["servicePointId"] == nil {
				s.t.Errorf("lock's holder %v, want what the acquisition said", h)
			}
			wantParams(s, got, map[string]string{"holderServicePointId": h["servicePointId"].(string)})
			again := s.step("the lock by id", request{method: http.MethodGet, path: "/check-out-lock-storage/" + held["id"].(string)},
				want{status: http.StatusOK, schema: "checkout-lock.json"}).decode(s.t)
			if fmt.Sprint(again["holder"]) != fmt.Sprint(held["holder"]) {
				s.t.Errorf("GET holder %v, want %v", again["holder"], held["holder"])
			}
		},
	},
	{
		name: "an id used by another patron's live lock is a conflict",
		given: func(s *session) request {
			id := newUUID()
			s.acquire(newUUID(), id, lockTTL)
			return acquireReq(newUUID(), id, lockTTL)
		},
		want: want{status: http.StatusConflict, code: schemas.CodeConflict},
	},
	{
		name: "ttlMs above the maximum is refused",
		given: func(s *session) request {
			return acquireReq(newUUID(), newUUID(), MaxLockTTLMs+1)
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeValidation,
			params: map[string]string{"ttlMs": strconv.Itoa(MaxLockTTLMs + 1)}},
	},
	{
		name: "release a live lock",
		given: func(s *session) request {
			l := s.acquire(newUUID(), newUUID(), lockTTL)
			s.keep("lock", l)
			return releaseReq(l["id"].(string))
		},
		want: want{status: http.StatusNoContent},
		then: func(s *session, _ response) {
			s.step("released lock", request{method: http.MethodGet, path: "/check-out-lock-storage/" + s.kept("lock")["id"].(string)},
				want{status: http.StatusNotFound, code: schemas.CodeNotFound})
		},
	},
	{
		name: "release again is not found",
		given: func(s *session) request {
			id := s.acquire(newUUID(), newUUID(), lockTTL)["id"].(string)
			s.step("first release", releaseReq(id), want{status: http.StatusNoContent})
			return releaseReq(id)
		},
		want: want{status: http.StatusNotFound, code: schemas.CodeNotFound},
	},
	{
		name: "release of a lock id that is not a UUID",
		given: func(s *session) request {
			return releaseReq("not-a-uuid")
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeInvalidID},
	},
	{
		name: "release of an expired lock is not found",
		given: func(s *session) request {
			id := s.acquire(newUUID(), newUUID(), shortTTL)["id"].(string)
			s.awaitExpiry(id)
			return releaseReq(id)
		},
		want: want{status: http.StatusNotFound, code: schemas.CodeNotFound},
	},
	{
		name: "another id takes over an expired lock",
		given: func(s *session) request {
			user := newUUID()
			old := s.acquire(user, newUUID(), shortTTL)
			s.keep("old", old)
			s.awaitExpiry(old["id"].(string))
			return acquireReq(user, newUUID(), lockTTL)
		},
		want: want{status: http.StatusCreated, schema: "checkout-lock.json"},
		then: func(s *session, got response) {
			old, l := s.kept("old"), got.decode(s.t)
			if l["id"] != s.sent()["id"] || !timeOf(s.t, l["creationDate"]).After(timeOf(s.t, old["creationDate"])) {
				s.t.Errorf("lock %v, want the id sent and a creationDate later than the expired lock's %v", l, old["creationDate"])
			}
		},
	},

	// The check-out's write: the loan, and the item with it, fenced by
	// the lock.
	{
		name: "check-out write under the borrower's live lock",
		given: func(s *session) request {
			r := s.seed()
			return checkOutReq(r, s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string), "1")
		},
		want: want{status: http.StatusCreated, schema: "loan.json"},
		then: func(s *session, got response) {
			loan := got.decode(s.t)
			if loan["id"] != s.sent()["id"] {
				s.t.Errorf("loan id %v, want the one sent %v", loan["id"], s.sent()["id"])
			}
			if v := got.header.Get(schemas.HeaderLockReleased); v != "" {
				s.t.Errorf("%s = %q on a write not asked to release its lock", schemas.HeaderLockReleased, v)
			}
			s.wantItem("Checked out", 2)
			s.wantLoans(1)
			s.step("the loan", request{method: http.MethodGet, path: "/loan-storage/loans/" + loan["id"].(string)},
				want{status: http.StatusOK, schema: "loan.json"})
		},
	},
	{
		name: "check-out write under a released lock is refused",
		given: func(s *session) request {
			r := s.seed()
			id := s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string)
			s.step("release", releaseReq(id), want{status: http.StatusNoContent})
			return checkOutReq(r, id, "1")
		},
		want: want{status: http.StatusConflict, code: schemas.CodeLockLost, params: map[string]string{"lockId": ""}},
		then: nothingWritten,
	},
	{
		name: "check-out write within the item limit the rules set is made",
		given: func(s *session) request {
			r := s.seed()
			s.limitItems(1)
			return checkOutReq(r, s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string), "1")
		},
		want: want{status: http.StatusCreated, schema: "loan.json"},
		then: func(s *session, _ response) {
			s.wantItem("Checked out", 2)
			s.wantLoans(1)
		},
	},
	{
		// The limit is storage's own, from the rules, whatever the
		// caller sends; it is checked after the fence and before the
		// item's version and the one open loan per item.
		name: "check-out write at the item limit the rules set is refused, and nothing is written",
		given: func(s *session) request {
			r := s.seed()
			s.limitItems(1)
			id := s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string)
			s.step("a check-out to the limit", checkOutReq(r, id, "1"), want{status: http.StatusCreated, schema: "loan.json"})
			req := checkOutReq(r, id, "2")
			req.headers["X-Check-Out-Item-Limit"] = "1000" // a caller's word on the limit counts for nothing
			return req
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeItemLimitReached,
			params: map[string]string{"itemLimit": "1", "openLoans": "1"}},
		then: func(s *session, _ response) {
			s.wantItem("Checked out", 2)
			s.wantLoans(1)
		},
	},
	{
		name: "check-out write that releases its lock writes the loan and releases the lock",
		given: func(s *session) request {
			r := s.seed()
			s.keep("lock", s.acquire(r.PatronID, newUUID(), lockTTL))
			return releasingCheckOutReq(r, s.kept("lock")["id"].(string), "1")
		},
		want: want{status: http.StatusCreated, schema: "loan.json"},
		then: func(s *session, got response) {
			if v := got.header.Get(schemas.HeaderLockReleased); v != "true" {
				s.t.Errorf("%s = %q, want true", schemas.HeaderLockReleased, v)
			}
			s.wantItem("Checked out", 2)
			s.wantLoans(1)
			s.step("the released lock", request{method: http.MethodGet, path: "/check-out-lock-storage/" + s.kept("lock")["id"].(string)},
				want{status: http.StatusNotFound, code: schemas.CodeNotFound})
			s.step("the patron's lock again", acquireReq(s.rec.PatronID, newUUID(), lockTTL), want{status: http.StatusCreated, schema: "checkout-lock.json"})
		},
	},
	{
		name: "check-out write that releases its lock but writes nothing keeps the lock",
		given: func(s *session) request {
			r := s.seed()
			s.limitItems(1)
			s.keep("lock", s.acquire(r.PatronID, newUUID(), lockTTL))
			s.step("a check-out to the limit", checkOutReq(r, s.kept("lock")["id"].(string), "1"),
				want{status: http.StatusCreated, schema: "loan.json"})
			return releasingCheckOutReq(r, s.kept("lock")["id"].(string), "2")
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeItemLimitReached,
			params: map[string]string{"itemLimit": "1", "openLoans": "1"}},
		then: func(s *session, _ response) {
			s.wantItem("Checked out", 2)
			s.wantLoans(1)
			s.step("the lock still held", request{method: http.MethodGet, path: "/check-out-lock-storage/" + s.kept("lock")["id"].(string)},
				want{status: http.StatusOK, schema: "checkout-lock.json"})
		},
	},
	{
		// The holder's write releases the lock 150 ms into the wait: the
		// waiter gets it then, not at the end of its 10 s.
		name: "a lock released by a check-out's write is granted to the waiter",
		given: func(s *session) request {
			r := s.seed()
			holder := s.acquire(r.PatronID, newUUID(), lockTTL)
			s.meanwhile(150*time.Millisecond, releasingCheckOutReq(r, holder["id"].(string), "1"), http.StatusCreated)
			return waitReq(r.PatronID, newUUID(), 10000)
		},
		want: want{status: http.StatusCreated, schema: "checkout-lock.json"},
		then: func(s *session, got response) {
			took, err := s.meanwhileDone()
			if err != nil {
				s.t.Errorf("the holder's write: %v", err)
			}
			if took > 5*time.Second {
				s.t.Errorf("granted after %s, long after the write released the lock", took)
			}
			s.wantLoans(1)
		},
	},
	{
		name: "check-out write asking to release without naming a lock is refused",
		given: func(s *session) request {
			return loanReq(s.seed(), map[string]string{schemas.HeaderItemVersion: "1", schemas.HeaderReleaseLock: "true"})
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeInvalidHeader},
		then: nothingWritten,
	},
	{
		name: "check-out write with a release flag that is not true or false is refused",
		given: func(s *session) request {
			r := s.seed()
			return loanReq(r, map[string]string{schemas.HeaderLockID: s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string),
				schemas.HeaderItemVersion: "1", schemas.HeaderReleaseLock: "yes"})
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeInvalidHeader},
		then: nothingWritten,
	},
	{
		name: "validation reads the patron, the item and its open loan in one call",
		given: func(s *session) request {
			r := s.seed()
			s.checkOut()
			return validationReq(r.ItemBarcode, r.PatronBarcode)
		},
		want: want{status: http.StatusOK, schema: "check-out-validation.json"},
		then: func(s *session, got response) {
			v := got.decode(s.t)
			user, _ := v["user"].(map[string]any)
			item, _ := v["item"].(map[string]any)
			loan, _ := v["openLoan"].(map[string]any)
			mt, _ := v["materialType"].(map[string]any)
			if name, _ := mt["name"].(string); mt["id"] != s.rec.MaterialTypeID || name == "" {
				s.t.Errorf("validation's material type %v, want the item's, named", mt)
			}
			if user["id"] != s.rec.PatronID || item["id"] != s.rec.ItemID || loan["itemId"] != s.rec.ItemID ||
				v["circulationRulesSet"] != false || v["loanPolicyMatch"] != nil || v["openLoanCount"] != nil {
				s.t.Errorf("validation answered %v", v)
			}
		},
	},
	{
		name: "the patron summary counts and lists the patron's open loans, with the item limit and the blocks",
		given: func(s *session) request {
			r := s.seed()
			s.limitItems(3)
			s.checkOut()
			s.target.Block(s.t, r, map[string]any{"desc": "Unpaid fines", "patronMessage": "Please see the desk", "borrowing": true})
			return patronReq(r.PatronBarcode)
		},
		want: want{status: http.StatusOK, schema: "patron-summary.json"},
		then: func(s *session, got response) {
			v := got.decode(s.t)
			user, _ := v["user"].(map[string]any)
			loans, _ := v["openLoans"].([]any)
			blocks, _ := v["manualBlocks"].([]any)
			var first map[string]any
			if len(loans) == 1 {
				first, _ = loans[0].(map[string]any)
			}
			limits, _ := v["itemLimits"].([]any)
			var limit map[string]any
			if len(limits) == 1 {
				limit, _ = limits[0].(map[string]any)
			}
			if user["id"] != s.rec.PatronID || v["openLoanCount"] != float64(1) || v["overdueCount"] != float64(0) ||
				first["itemBarcode"] != s.rec.ItemBarcode || first["dueDate"] == nil || len(blocks) != 1 || v["unlimited"] != false ||
				limit["itemLimit"] != float64(3) || limit["openLoans"] != float64(1) || limit["reached"] != false ||
				limit["materialTypeId"] != s.rec.MaterialTypeID || limit["materialTypeMatch"] != true {
				s.t.Errorf("patron summary %v, want the patron, one open loan of the seeded item, the material type's limit of 3 not reached and the block", v)
			}
		},
	},
	{
		name: "the patron summary of no patron counts nothing",
		given: func(s *session) request {
			s.seed()
			return patronReq("no-such-patron")
		},
		want: want{status: http.StatusOK, schema: "patron-summary.json"},
		then: func(s *session, got response) {
			if v := got.decode(s.t); len(v) != 5 || v["openLoanCount"] != float64(0) || v["overdueCount"] != float64(0) || v["unlimited"] != true ||
				v["feeFineBalance"] != "0.00" || v["feeFineCount"] != float64(0) {
				s.t.Errorf("patron summary %v, want counts of 0, no limit, nothing owed and nothing else", v)
			}
		},
	},
	{
		name: "a patron's PIN, once set, verifies; another does not",
		given: func(s *session) request {
			r := s.seed()
			s.step("set the PIN", pinReq("/patron-pin", r.PatronID, "4321"), want{status: http.StatusCreated})
			s.step("a wrong PIN", pinReq("/patron-pin/verify", r.PatronID, "1234"),
				want{status: http.StatusUnprocessableEntity, code: schemas.CodePinInvalid})
			return pinReq("/patron-pin/verify", r.PatronID, "4321")
		},
		want: want{status: http.StatusOK},
	},
	{
		name: "five wrong PINs in a row lock a patron's PIN, the right one included",
		given: func(s *session) request {
			r := s.seed()
			s.step("set the PIN", pinReq("/patron-pin", r.PatronID, "4321"), want{status: http.StatusCreated})
			for range 5 {
				s.step("a wrong PIN", pinReq("/patron-pin/verify", r.PatronID, "0000"),
					want{status: http.StatusUnprocessableEntity, code: schemas.CodePinInvalid})
			}
			return pinReq("/patron-pin/verify", r.PatronID, "4321")
		},
		want: want{status: http.StatusTooManyRequests, code: schemas.CodePinLocked},
	},
	{
		name: "a patron without a PIN does not verify",
		given: func(s *session) request {
			return pinReq("/patron-pin/verify", s.seed().PatronID, "4321")
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodePinInvalid},
	},
	{
		name: "a PIN for no patron is not set",
		given: func(s *session) request {
			s.seed()
			return pinReq("/patron-pin", newUUID(), "4321")
		},
		want: want{status: http.StatusNotFound, code: schemas.CodeNotFound},
	},
	{
		name: "the patron summary without a barcode is refused",
		given: func(s *session) request {
			return request{method: http.MethodGet, path: "/check-out-storage/patron"}
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeInvalidParameter},
	},
	{
		name: "validation names the patron's manual blocks in force for borrowing or renewals, and no others",
		given: func(s *session) request {
			r := s.seed()
			s.target.Block(s.t, r, map[string]any{"desc": "Unpaid fines", "patronMessage": "Please see the desk", "borrowing": true})
			s.target.Block(s.t, r, map[string]any{"desc": "Expired", "borrowing": true, "expirationDate": "2020-01-01T00:00:00Z"})
			s.target.Block(s.t, r, map[string]any{"desc": "Renewals only", "borrowing": false, "renewals": true})
			s.target.Block(s.t, r, map[string]any{"desc": "Requests only", "borrowing": false, "renewals": false, "requests": true})
			return validationReq(r.ItemBarcode, r.PatronBarcode)
		},
		want: want{status: http.StatusOK, schema: "check-out-validation.json"},
		then: func(s *session, got response) {
			blocks, _ := got.decode(s.t)["manualBlocks"].([]any)
			var descs []string
			for _, b := range blocks {
				m, _ := b.(map[string]any)
				if m["userId"] != s.rec.PatronID {
					s.t.Errorf("manual block %v, not the patron's", m)
				}
				desc, _ := m["desc"].(string)
				descs = append(descs, fmt.Sprintf("%s borrowing=%v renewals=%v", desc, m["borrowing"], m["renewals"]))
			}
			if want := []string{"Unpaid fines borrowing=true renewals=<nil>", "Renewals only borrowing=false renewals=true"}; !slices.Equal(descs, want) {
				s.t.Errorf("manualBlocks %q, want %q: the ones in force, each with what it blocks", descs, want)
			}
		},
	},
	{
		name: "validation reports the patron group's maximum items charged out as an automated block",
		given: func(s *session) request {
			r := s.seed()
			s.target.LimitChargedOut(s.t, r, 0, "No more loans")
			return validationReq(r.ItemBarcode, r.PatronBarcode)
		},
		want: want{status: http.StatusOK, schema: "check-out-validation.json"},
		then: func(s *session, got response) {
			blocks, _ := got.decode(s.t)["automatedPatronBlocks"].([]any)
			var b map[string]any
			if len(blocks) == 1 {
				b, _ = blocks[0].(map[string]any)
			}
			if b["patronBlockConditionId"] != schemas.ConditionItemsChargedOut || b["blockBorrowing"] != true || b["message"] != "No more loans" {
				s.t.Errorf("automatedPatronBlocks %v, want the charged-out block with its message", blocks)
			}
		},
	},
	{
		name: "a check-out write at the patron group's maximum items charged out is refused, with the condition's message",
		given: func(s *session) request {
			r := s.seed()
			s.target.LimitChargedOut(s.t, r, 0, "No more loans")
			return checkOutReq(r, "", "1")
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeUserBlockedAutomatically,
			params: map[string]string{"patronBlockConditionId": schemas.ConditionItemsChargedOut, "openLoans": "0"}},
		then: func(s *session, got response) {
			if msg := firstMessage(got); msg != "No more loans" {
				s.t.Errorf("message %q, want the condition's", msg)
			}
			nothingWritten(s, got)
		},
	},
	{
		name: "a check-out write of an item another patron requested first is refused, and the queue stays",
		given: func(s *session) request {
			r := s.seed()
			s.keep("theirs", map[string]any{"id": s.target.Request(s.t, r, true, 1)})
			s.target.Request(s.t, r, false, 2)
			return checkOutReq(r, "", "1")
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeItemRequestedByAnotherPatron},
		then: func(s *session, got response) {
			theirs := s.kept("theirs")["id"]
			if param(got, "requestId") != theirs {
				s.t.Errorf("requestId %q, want the first request %v", param(got, "requestId"), theirs)
			}
			nothingWritten(s, got)
			head, _ := s.step("validation", validationReq(s.rec.ItemBarcode, s.rec.PatronBarcode),
				want{status: http.StatusOK, schema: "check-out-validation.json"}).decode(s.t)["requestQueueHead"].(map[string]any)
			if head["id"] != theirs || head["position"] != 1.0 {
				s.t.Errorf("the queue's first request after the refused write: %v, want %v at 1", head, theirs)
			}
		},
	},
	{
		name: "the requester's check-out write fills the request and moves the queue up",
		given: func(s *session) request {
			r := s.seed()
			s.target.Request(s.t, r, false, 1)
			s.keep("next", map[string]any{"id": s.target.Request(s.t, r, true, 2)})
			return checkOutReq(r, "", "1")
		},
		want: want{status: http.StatusCreated, schema: "loan.json"},
		then: func(s *session, _ response) {
			head, _ := s.step("validation", validationReq(s.rec.ItemBarcode, s.rec.PatronBarcode),
				want{status: http.StatusOK, schema: "check-out-validation.json"}).decode(s.t)["requestQueueHead"].(map[string]any)
			if head["id"] != s.kept("next")["id"] || head["position"] != 1.0 {
				s.t.Errorf("the queue's first request after the filled one: %v, want the next request at 1", head)
			}
		},
	},
	{
		name: "a check-out write with the patron-block override passes the maximum items charged out",
		given: func(s *session) request {
			r := s.seed()
			s.target.LimitChargedOut(s.t, r, 0, "No more loans")
			req := checkOutReq(r, "", "1")
			req.headers[schemas.HeaderCheckOutOverride] = "patronBlock"
			return req
		},
		want: want{status: http.StatusCreated, schema: "loan.json"},
		then: func(s *session, _ response) {
			s.wantItem("Checked out", 2)
			s.wantLoans(1)
		},
	},
	{
		name: "a check-out write naming an override that does not exist is refused",
		given: func(s *session) request {
			r := s.seed()
			req := checkOutReq(r, "", "1")
			req.headers[schemas.HeaderCheckOutOverride] = "everything"
			return req
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeInvalidHeader},
		then: nothingWritten,
	},
	{
		name: "validation of unknown barcodes answers neither record",
		given: func(s *session) request {
			s.seed()
			return validationReq("no-such-item", "no-such-patron")
		},
		want: want{status: http.StatusOK, schema: "check-out-validation.json"},
		then: func(s *session, got response) {
			v := got.decode(s.t)
			if ls, _ := v["lockSettings"].(map[string]any); len(v) != 2 || v["circulationRulesSet"] != false || ls == nil || len(ls) != 0 {
				s.t.Errorf("validation answered %v, want only circulationRulesSet false and no lock settings entry", v)
			}
		},
	},
	{
		name: "validation carries the tenant's check-out lock settings entry as stored",
		given: func(s *session) request {
			r := s.seed()
			s.step("the lock settings", settingReq("mod-circulation", "checkoutLockFeature",
				map[string]any{"checkOutLockFeatureEnabled": false, "lockTtl": 4000}), want{status: http.StatusCreated, schema: "setting.json"})
			return validationReq(r.ItemBarcode, r.PatronBarcode)
		},
		want: want{status: http.StatusOK, schema: "check-out-validation.json"},
		then: func(s *session, got response) {
			v := got.decode(s.t)
			ls, _ := v["lockSettings"].(map[string]any)
			entry, _ := ls["entry"].(map[string]any)
			page := s.step("the entry", request{method: http.MethodGet, path: "/settings/entries?scope=mod-circulation&key=checkoutLockFeature"},
				want{status: http.StatusOK, schema: "settings.json"}).decode(s.t)
			items, _ := page["items"].([]any)
			if len(items) != 1 || !reflect.DeepEqual(entry, items[0]) {
				s.t.Errorf("validation's lock settings %v, want the entry as stored: %v", ls, items)
			}
		},
	},
	{
		name: "validation by ids reads what validation by barcodes reads",
		given: func(s *session) request {
			r := s.seed()
			s.checkOut()
			s.keep("by barcodes", s.step("validation by barcodes", validationReq(r.ItemBarcode, r.PatronBarcode),
				want{status: http.StatusOK, schema: "check-out-validation.json"}).decode(s.t))
			return validationByIDReq(strings.ToUpper(r.ItemID), r.PatronID)
		},
		want: want{status: http.StatusOK, schema: "check-out-validation.json"},
		then: func(s *session, got response) {
			v := got.decode(s.t)
			if user, _ := v["user"].(map[string]any); user["id"] != s.rec.PatronID || !reflect.DeepEqual(v, s.kept("by barcodes")) {
				s.t.Errorf("validation by ids answered %v, want what validation by barcodes answered: %v", v, s.kept("by barcodes"))
			}
		},
	},
	{
		name: "validation naming the item by id and the patron by barcode is refused",
		given: func(s *session) request {
			r := s.seed()
			return request{method: http.MethodGet, path: "/check-out-storage/validation?" +
				url.Values{"itemId": {r.ItemID}, "userBarcode": {r.PatronBarcode}}.Encode()}
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeInvalidParameter, params: map[string]string{"userBarcode": ""}},
	},
	{
		name: "validation by ids without the patron's, or by an id not a UUID, is refused",
		given: func(s *session) request {
			r := s.seed()
			s.step("validation without userId", request{method: http.MethodGet, path: "/check-out-storage/validation?itemId=" + r.ItemID},
				want{status: http.StatusUnprocessableEntity, code: schemas.CodeInvalidParameter, params: map[string]string{"userId": ""}})
			return validationByIDReq(r.ItemID, r.PatronBarcode)
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeInvalidParameter, params: map[string]string{"userId": ""}},
	},
	{
		name: "validation without a user barcode is refused",
		given: func(s *session) request {
			return request{method: http.MethodGet, path: "/check-out-storage/validation?itemBarcode=x"}
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeInvalidParameter},
	},
	{
		name: "check-in write closes the loan and makes the item available, in one transaction",
		given: func(s *session) request {
			r := s.seed()
			id := s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string)
			loan := s.step("check-out", checkOutReq(r, id, "1"), want{status: http.StatusCreated, schema: "loan.json"}).decode(s.t)
			s.keep("loan", loan)
			return checkInReq(loan, "2")
		},
		want: want{status: http.StatusOK, schema: "check-in-written.json"},
		then: func(s *session, _ response) {
			s.wantItem("Available", 3)
			s.wantKeptLoan("Closed")
		},
	},
	{
		name: "check-in write with a stale item version is refused, and nothing is written",
		given: func(s *session) request {
			r := s.seed()
			id := s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string)
			loan := s.step("check-out", checkOutReq(r, id, "1"), want{status: http.StatusCreated, schema: "loan.json"}).decode(s.t)
			s.keep("loan", loan)
			return checkInReq(loan, "1")
		},
		want: want{status: http.StatusConflict, code: schemas.CodeVersionConflict, params: map[string]string{"_version": "2"}},
		then: func(s *session, _ response) {
			s.wantItem("Checked out", 2)
			s.wantKeptLoan("Open")
		},
	},
	{
		name: "check-out write under an expired lock is refused",
		given: func(s *session) request {
			r := s.seed()
			id := s.acquire(r.PatronID, newUUID(), shortTTL)["id"].(string)
			s.awaitExpiry(id)
			return checkOutReq(r, id, "1")
		},
		want: want{status: http.StatusConflict, code: schemas.CodeLockLost},
		then: nothingWritten,
	},
	{
		// The fence's core case: the patron's lock expired while its
		// check-out stalled, and another check-out took it over. The
		// first holder's write is refused while the new lock lives (a
		// fence that let any live lock of the patron through would write
		// it), and the refused write leaves the new lock held.
		name: "check-out write under a lock another check-out took over is refused while the new lock lives",
		given: func(s *session) request {
			r := s.seed()
			first := s.acquire(r.PatronID, newUUID(), shortTTL)["id"].(string)
			s.awaitExpiry(first)
			s.keep("second", s.acquire(r.PatronID, newUUID(), lockTTL))
			return checkOutReq(r, first, "1")
		},
		want: want{status: http.StatusConflict, code: schemas.CodeLockLost},
		then: func(s *session, got response) {
			nothingWritten(s, got)
			second := s.kept("second")["id"].(string)
			s.step("the lock that took over", request{method: http.MethodGet, path: "/check-out-lock-storage/" + second},
				want{status: http.StatusOK, schema: "checkout-lock.json"})
		},
	},
	{
		name: "check-out write under another patron's lock is refused",
		given: func(s *session) request {
			r := s.seed()
			return checkOutReq(r, s.acquire(newUUID(), newUUID(), lockTTL)["id"].(string), "1")
		},
		want: want{status: http.StatusConflict, code: schemas.CodeLockLost},
		then: nothingWritten,
	},
	{
		name: "check-out write with a stale item version is refused",
		given: func(s *session) request {
			r := s.seed()
			s.bumpItem() // now at _version 2
			return checkOutReq(r, s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string), "1")
		},
		want: want{status: http.StatusConflict, code: schemas.CodeVersionConflict, params: map[string]string{"_version": "2"}},
		then: func(s *session, _ response) {
			s.wantItem("Available", 2)
			s.wantLoans(0)
		},
	},
	{
		name: "check-out write of an item with an open loan is refused",
		given: func(s *session) request {
			r := s.seed()
			id := s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string)
			s.step("first check-out", checkOutReq(r, id, "1"), want{status: http.StatusCreated, schema: "loan.json"})
			return checkOutReq(r, id, "2") // the item's current version
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeItemHasOpenLoan},
		then: func(s *session, _ response) {
			s.wantItem("Checked out", 2) // the item update is undone with the loan
			s.wantLoans(1)
		},
	},
	{
		// Storage checks the fence, then the item's version, then the one
		// open loan per item: a check-out that read the item before another
		// checked it out hears that the item changed.
		name: "check-out write with a stale version of an item with an open loan is a version conflict",
		given: func(s *session) request {
			r := s.seed()
			id := s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string)
			s.step("first check-out", checkOutReq(r, id, "1"), want{status: http.StatusCreated, schema: "loan.json"})
			return checkOutReq(r, id, "1")
		},
		want: want{status: http.StatusConflict, code: schemas.CodeVersionConflict},
		then: func(s *session, _ response) {
			s.wantItem("Checked out", 2)
			s.wantLoans(1)
		},
	},
	{
		name: "a second open loan for an item is refused",
		given: func(s *session) request {
			r := s.seed()
			s.step("first loan", loanReq(r, map[string]string{schemas.HeaderItemVersion: "1"}), want{status: http.StatusCreated, schema: "loan.json"})
			return loanReq(r, map[string]string{schemas.HeaderItemVersion: "2"})
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeItemHasOpenLoan, params: map[string]string{"itemId": ""}},
		then: func(s *session, _ response) { s.wantLoans(1) },
	},
	{
		name: "check-out write naming a lock id that is not a UUID",
		given: func(s *session) request {
			return checkOutReq(s.seed(), "not-a-uuid", "1")
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeInvalidID},
		then: nothingWritten,
	},
	{
		// The header, not the body, is at fault.
		name: "check-out write naming an item version that is not a positive integer",
		given: func(s *session) request {
			r := s.seed()
			return checkOutReq(r, s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string), "0")
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeInvalidHeader},
		then: nothingWritten,
	},
	{
		name: "open-count counts the patron's open loans by material type and loan type",
		given: func(s *session) request {
			r := s.seed()
			s.checkOut()
			return openCountReq(r.PatronID, "", "")
		},
		want: want{status: http.StatusOK, schema: "open-loan-count.json"},
		then: func(s *session, got response) {
			r := s.rec
			for _, c := range []struct {
				materialType, loanType string
				want                   float64
			}{
				{"", "", 1},
				{r.MaterialTypeID, "", 1},
				{"", r.LoanTypeID, 1},
				{r.MaterialTypeID, r.LoanTypeID, 1},
				{newUUID(), "", 0},
				{"", newUUID(), 0},
			} {
				n := s.step("open-count", openCountReq(r.PatronID, c.materialType, c.loanType),
					want{status: http.StatusOK, schema: "open-loan-count.json"}).decode(s.t)["totalRecords"]
				if n != c.want {
					s.t.Errorf("open-count materialTypeId=%q loanTypeId=%q: %v, want %v", c.materialType, c.loanType, n, c.want)
				}
			}
		},
	},

	// What storage keeps whoever calls: a loan opens only by a
	// check-out's write and closes only by a check-in's, an item's status
	// moves to and from Checked out only with them, the lock is the
	// caller's own, and the settings keep to their bounds.
	{
		name: "a loan opened without a check-out's write is refused",
		given: func(s *session) request {
			return loanReq(s.seed(), nil)
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeCheckOutRequired},
		then: nothingWritten,
	},
	{
		name: "a closed loan is kept as history, its item unchanged",
		given: func(s *session) request {
			req := loanReq(s.seed(), nil)
			req.body.(map[string]any)["status"] = map[string]any{"name": "Closed"}
			return req
		},
		want: want{status: http.StatusCreated, schema: "loan.json"},
		then: func(s *session, _ response) {
			s.wantItem("Available", 1)
			s.wantLoans(1)
		},
	},
	{
		name: "an open loan closed without a check-in is refused",
		given: func(s *session) request {
			s.seed()
			loan := s.checkOut()
			s.keep("loan", loan)
			req := checkInReq(loan, "2")
			delete(req.headers, schemas.HeaderCheckInItemVersion)
			return req
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeCheckInRequired},
		then: func(s *session, _ response) {
			s.wantItem("Checked out", 2)
			s.wantKeptLoan("Open")
		},
	},
	{
		name: "a check-in of a loan that is not open is refused",
		given: func(s *session) request {
			s.seed()
			loan := s.checkOut()
			s.step("check-in", checkInReq(loan, "2"), want{status: http.StatusOK, schema: "check-in-written.json"})
			return checkInReq(loan, "3")
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeNoOpenLoan},
		then: func(s *session, _ response) { s.wantItem("Available", 3) },
	},
	{
		name: "an item is not put Checked out but by a check-out",
		given: func(s *session) request {
			s.seed()
			req := s.itemPutReq(1)
			req.body.(map[string]any)["status"] = map[string]any{"name": "Checked out"}
			return req
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeItemStatusByCirculation},
		then: func(s *session, _ response) { s.wantItem("Available", 1) },
	},
	{
		name: "an item with an open loan leaves Checked out only by its check-in",
		given: func(s *session) request {
			s.seed()
			s.checkOut()
			req := s.itemPutReq(2)
			req.body.(map[string]any)["status"] = map[string]any{"name": "Available"}
			return req
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeItemStatusByCirculation},
		then: func(s *session, _ response) {
			s.wantItem("Checked out", 2)
			s.wantLoans(1)
		},
	},
	{
		name: "with the tenant's lock on, a check-out write without a lock is refused",
		given: func(s *session) request {
			r := s.seed()
			s.step("the lock on", settingReq("mod-circulation", "checkoutLockFeature", map[string]any{"checkOutLockFeatureEnabled": true}),
				want{status: http.StatusCreated, schema: "setting.json"})
			return loanReq(r, map[string]string{schemas.HeaderItemVersion: "1"})
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeLockRequired},
		then: nothingWritten,
	},
	{
		name: "a lock id is not a capability: another caller naming it does not renew it",
		given: func(s *session) request {
			r := s.seed()
			id := newUUID()
			s.acquireAs(holderUser, r.PatronID, id)
			again := acquireReq(r.PatronID, id, MaxLockTTLMs)
			again.headers = map[string]string{schemas.HeaderUserID: otherUser}
			return again
		},
		want: want{status: http.StatusServiceUnavailable, code: schemas.CodeLockHeld},
	},
	{
		name: "a lock id is not a capability: a write under another caller's lock is refused",
		given: func(s *session) request {
			r := s.seed()
			id := newUUID()
			s.acquireAs(holderUser, r.PatronID, id)
			req := checkOutReq(r, id, "1")
			req.headers[schemas.HeaderUserID] = otherUser
			return req
		},
		want: want{status: http.StatusConflict, code: schemas.CodeLockLost},
		then: nothingWritten,
	},
	{
		name: "a check-out write dated in the future is refused",
		given: func(s *session) request {
			r := s.seed()
			req := checkOutReq(r, s.acquire(r.PatronID, newUUID(), lockTTL)["id"].(string), "1")
			req.body.(map[string]any)["loanDate"] = "2099-01-01T00:00:00.000Z"
			return req
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeValidation, params: map[string]string{"loanDate": ""}},
		then: nothingWritten,
	},
	{
		name: "a check-out lock setting out of bounds is refused, naming the bound",
		given: func(s *session) request {
			s.seed()
			return settingReq("mod-circulation", "checkoutLockFeature", map[string]any{"checkOutLockFeatureEnabled": false, "lockTtl": 1})
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeValidation, params: map[string]string{"value.lockTtl": "1"}},
		then: func(s *session, got response) {
			if msg := firstMessage(got); !strings.Contains(msg, fmt.Sprintf("must be from %d to %d ms",
				locksettings.MinLockTTL.Milliseconds(), locksettings.MaxLockTTL.Milliseconds())) {
				s.t.Errorf("message %q does not name the bound", msg)
			}
			page := s.step("the settings", request{method: http.MethodGet, path: "/settings/entries?scope=mod-circulation"},
				want{status: http.StatusOK, schema: "settings.json"}).decode(s.t)
			if page["totalRecords"] != 0.0 {
				s.t.Errorf("a refused setting was stored: %v", page)
			}
		},
	},
	{
		name: "a self-check setting circulation's decoder cannot read is refused, naming the field",
		given: func(s *session) request {
			s.seed()
			return settingReq(selfcheck.Scope, selfcheck.Key, map[string]any{"patronPin": "sometimes"})
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeValidation, params: map[string]string{"value.patronPin": `"sometimes"`}},
		then: func(s *session, got response) {
			page := s.step("the settings", request{method: http.MethodGet, path: "/settings/entries?scope=mod-circulation"},
				want{status: http.StatusOK, schema: "settings.json"}).decode(s.t)
			if page["totalRecords"] != 0.0 {
				s.t.Errorf("a refused setting was stored: %v", page)
			}
		},
	},
	{
		name: "validation answers the item limit storage enforces",
		given: func(s *session) request {
			r := s.seed()
			s.limitItems(2)
			return validationReq(r.ItemBarcode, r.PatronBarcode)
		},
		want: want{status: http.StatusOK, schema: "check-out-validation.json"},
		then: func(s *session, got response) {
			limit, _ := got.decode(s.t)["itemLimit"].(map[string]any)
			if limit["limit"] != 2.0 || limit["openLoans"] != 0.0 || limit["materialTypeId"] != s.rec.MaterialTypeID {
				s.t.Errorf("itemLimit %v, want 2 of the item's material type, none open", limit)
			}
		},
	},

	// Records.
	{
		name: "item PUT with a stale _version is a version conflict",
		given: func(s *session) request {
			s.seed()
			s.bumpItem()
			return s.itemPutReq(1)
		},
		want: want{status: http.StatusConflict, code: schemas.CodeVersionConflict, params: map[string]string{"_version": "2"}},
		then: func(s *session, _ response) { s.wantItem("Available", 2) },
	},
	{
		name: "a loan that does not exist is not found",
		given: func(s *session) request {
			return request{method: http.MethodGet, path: "/loan-storage/loans/" + newUUID()}
		},
		want: want{status: http.StatusNotFound, code: schemas.CodeNotFound, params: map[string]string{"id": ""}},
	},
	{
		name: "a loan id that is not a UUID",
		given: func(s *session) request {
			return request{method: http.MethodGet, path: "/loan-storage/loans/not-a-uuid"}
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeInvalidID},
	},
	{
		name: "a second setting with the same scope and key already exists",
		given: func(s *session) request {
			req := settingReq("contract-"+randomHex(4), "checkoutLockFeature", map[string]any{"checkOutLockFeatureEnabled": true})
			s.step("first", req, want{status: http.StatusCreated, schema: "setting.json"})
			return req
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeAlreadyExists, params: map[string]string{"key": ""}},
		then: func(s *session, got response) {
			body := s.sent()
			page := s.step("the settings", request{method: http.MethodGet,
				path: "/settings/entries?scope=" + body["scope"].(string) + "&key=" + body["key"].(string)},
				want{status: http.StatusOK, schema: "settings.json"}).decode(s.t)
			if page["totalRecords"] != float64(1) {
				s.t.Errorf("%v entries, want 1", page["totalRecords"])
			}
		},
	},
	{
		name: "setting PUT with a stale _version is a version conflict",
		given: func(s *session) request {
			created := s.step("create", settingReq("contract-"+randomHex(4), "k", 1),
				want{status: http.StatusCreated, schema: "setting.json"}).decode(s.t)
			if created["_version"] != float64(1) {
				s.t.Fatalf("created setting %v, want _version 1", created)
			}
			put := func(v any, version int) request {
				doc := map[string]any{"id": created["id"], "scope": created["scope"], "key": created["key"], "value": v}
				if version > 0 {
					doc["_version"] = version
				}
				return request{method: http.MethodPut, path: "/settings/entries/" + created["id"].(string), body: doc}
			}
			s.step("update at version 1", put(2, 1), want{status: http.StatusNoContent})
			s.step("update naming no version", put(3, 0), want{status: http.StatusNoContent})
			return put(4, 1)
		},
		want: want{status: http.StatusConflict, code: schemas.CodeVersionConflict, params: map[string]string{"_version": "3"}},
	},

	// Tenants.
	{
		name: "a tenant never initialised",
		given: func(s *session) request {
			r := acquireReq(newUUID(), newUUID(), lockTTL)
			r.headers = map[string]string{schemas.HeaderTenant: s.target.UninitializedTenant()}
			return r
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeTenantNotInitialized, params: map[string]string{"tenant": ""}},
		then: func(s *session, got response) {
			wantParams(s, got, map[string]string{"tenant": s.target.UninitializedTenant()})
		},
	},
	{
		name: "no tenant",
		given: func(s *session) request {
			r := acquireReq(newUUID(), newUUID(), lockTTL)
			r.headers = map[string]string{schemas.HeaderTenant: ""}
			return r
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeTenantMissing},
	},
	{
		name: "a tenant id breaking the rule",
		given: func(s *session) request {
			r := acquireReq(newUUID(), newUUID(), lockTTL)
			r.headers = map[string]string{schemas.HeaderTenant: "Diku; DROP SCHEMA public"}
			return r
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeInvalidTenant},
	},
	{
		name: "a tenant id PostgreSQL reserves",
		given: func(s *session) request {
			r := request{method: http.MethodGet, path: "/loan-storage/loans/" + newUUID()}
			r.headers = map[string]string{schemas.HeaderTenant: "pg_catalog"}
			return r
		},
		want: want{status: http.StatusBadRequest, code: schemas.CodeInvalidTenant},
	},

	// Waiting for a held lock (waitMs).
	{
		name: "a held lock waited for in vain: LOCK_HELD after waitMs, naming waitedMs",
		given: func(s *session) request {
			user := newUUID()
			s.keep("holder", s.acquire(user, newUUID(), lockTTL))
			s.keep("clock", map[string]any{"start": time.Now()})
			return waitReq(user, newUUID(), 150)
		},
		want: want{status: http.StatusServiceUnavailable, code: schemas.CodeLockHeld, params: map[string]string{"waitedMs": ""}},
		then: func(s *session, got response) {
			holder := s.kept("holder")
			wantParams(s, got, map[string]string{"userId": holder["userId"].(string), "expiresAt": holder["expiresAt"].(string)})
			if waited, _ := strconv.Atoi(param(got, "waitedMs")); waited < 150 {
				s.t.Errorf("waitedMs %s, want at least the 150 asked", param(got, "waitedMs"))
			}
			if took := time.Since(s.kept("clock")["start"].(time.Time)); took < 150*time.Millisecond {
				s.t.Errorf("answered after %s, before the wait was over", took)
			}
		},
	},
	{
		// The holder works for 150 ms, then releases: the waiter gets the
		// lock then, not at the end of its 10 s.
		name: "a held lock released during the wait is granted to the waiter",
		given: func(s *session) request {
			user := newUUID()
			holder := s.acquire(user, newUUID(), lockTTL)
			s.meanwhile(150*time.Millisecond, releaseReq(holder["id"].(string)), http.StatusNoContent)
			return waitReq(user, newUUID(), 10000)
		},
		want: want{status: http.StatusCreated, schema: "checkout-lock.json"},
		then: func(s *session, got response) {
			took, err := s.meanwhileDone()
			if err != nil {
				s.t.Errorf("the holder's release: %v", err)
			}
			if l := got.decode(s.t); l["id"] != s.sent()["id"] {
				s.t.Errorf("granted lock %v, want the waiter's id %v", l["id"], s.sent()["id"])
			}
			if took > 5*time.Second {
				s.t.Errorf("granted after %s, long after the release", took)
			}
		},
	},
	{
		name: "a held lock expiring during the wait is granted to the waiter",
		given: func(s *session) request {
			user := newUUID()
			s.acquire(user, newUUID(), shortTTL)
			return waitReq(user, newUUID(), 5000)
		},
		want: want{status: http.StatusCreated, schema: "checkout-lock.json"},
	},
	{
		name: "waitMs above LOCK_MAX_WAIT_MS is refused",
		given: func(s *session) request {
			return waitReq(newUUID(), newUUID(), MaxWaitMs+1)
		},
		want: want{status: http.StatusUnprocessableEntity, code: schemas.CodeValidation, params: map[string]string{"waitMs": ""}},
		then: func(s *session, _ response) {
			s.step("the refused lock", request{method: http.MethodGet, path: "/check-out-lock-storage/" + s.sent()["id"].(string)},
				want{status: http.StatusNotFound, code: schemas.CodeNotFound})
		},
	},
	{
		name: "waitMs 0 answers at once, as without it",
		given: func(s *session) request {
			user := newUUID()
			s.acquire(user, newUUID(), lockTTL)
			return waitReq(user, newUUID(), 0)
		},
		want: want{status: http.StatusServiceUnavailable, code: schemas.CodeLockHeld},
		then: func(s *session, got response) {
			if v := param(got, "waitedMs"); v != "" {
				s.t.Errorf("waitedMs %q on an answer that did not wait", v)
			}
		},
	},
}
