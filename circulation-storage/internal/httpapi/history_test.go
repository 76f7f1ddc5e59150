package httpapi

import (
	"net/http"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/schemas"
)

// historyJSON is an answer of GET /check-out-lock-storage/history.
type historyJSON struct {
	Events []struct {
		Type     string            `json:"type"`
		UserID   string            `json:"userId"`
		LockID   string            `json:"lockId"`
		Holder   map[string]string `json:"holder"`
		By       map[string]string `json:"by"`
		WaitedMs int               `json:"waitedMs"`
	} `json:"events"`
	TotalRecords int `json:"totalRecords"`
}

func (f *fixture) history(query string) historyJSON {
	f.t.Helper()
	var h historyJSON
	f.do("GET", "/check-out-lock-storage/history?"+query, "").wantStatus(http.StatusOK).
		wantSchema("checkout-lock-history.json").decode(&h)
	return h
}

// asUser is the fixture's headers acting for another user.
func (f *fixture) asUser(user string) map[string]string {
	return map[string]string{TenantHeader: f.tenant, schemas.HeaderUserID: user}
}

// TestLockSaysWhoHoldsIt: the holder an acquisition names is stored with
// the lock, returned by every lock answer with the user it acted for, and
// named by the 503 of anyone who finds the lock held.
func TestLockSaysWhoHoldsIt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	user, sp := uuid.NewString(), uuid.NewString()
	body := `{"userId":"` + user + `","holder":{"instance":"circ-1:8080","requestId":"req-1","itemBarcode":"book-001","servicePointId":"` + sp + `"}}`
	var lock lockJSON
	f.do("POST", "/check-out-lock-storage", body).wantStatus(http.StatusCreated).wantSchema("checkout-lock.json").decode(&lock)
	want := map[string]string{"instance": "circ-1:8080", "requestId": "req-1", "itemBarcode": "book-001",
		"servicePointId": sp, "acquiredBy": testUser}
	for _, path := range []string{"/check-out-lock-storage/" + lock.ID, "/check-out-lock-storage?userId=" + user} {
		res := f.do("GET", path, "").wantStatus(http.StatusOK)
		var got struct {
			Holder        map[string]string `json:"holder"`
			CheckoutLocks []struct {
				Holder map[string]string `json:"holder"`
			} `json:"checkoutLocks"`
		}
		res.decode(&got)
		h := got.Holder
		if len(got.CheckoutLocks) == 1 {
			h = got.CheckoutLocks[0].Holder
		}
		if !reflect.DeepEqual(h, want) {
			t.Errorf("GET %s: holder %v, want %v", path, h, want)
		}
	}
	// The refusal names the holder.
	e := f.do("POST", "/check-out-lock-storage", `{"userId":"`+user+`"}`).wantError(http.StatusServiceUnavailable, "LOCK_HELD")
	p := params(e)
	if p["holderInstance"] != "circ-1:8080" || p["holderRequestId"] != "req-1" || p["holderItemBarcode"] != "book-001" ||
		p["holderServicePointId"] != sp {
		t.Errorf("503 parameters %v, want the holder", p)
	}
	// A FOLIO client sending none gets a lock without holder (but who
	// acquired it), and a refusal without holder parameters.
	other := uuid.NewString()
	res := f.do("POST", "/check-out-lock-storage", `{"userId":"`+other+`"}`).wantStatus(http.StatusCreated).wantSchema("checkout-lock.json")
	if h := res.doc()["holder"]; !reflect.DeepEqual(h, map[string]any{"acquiredBy": testUser}) {
		t.Errorf("holder of a FOLIO client's lock %v", h)
	}
	e = f.doWith("POST", "/check-out-lock-storage", `{"userId":"`+other+`"}`, map[string]string{TenantHeader: f.tenant}).
		wantError(http.StatusServiceUnavailable, "LOCK_HELD")
	if _, ok := params(e)["holderInstance"]; ok {
		t.Errorf("503 parameters %v name a holder that said nothing", params(e))
	}
	// A holder of the wrong shape is refused, naming the field.
	f.do("POST", "/check-out-lock-storage", `{"userId":"`+uuid.NewString()+`","holder":{"servicePointId":"x"}}`).
		wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	f.do("POST", "/check-out-lock-storage", `{"userId":"`+uuid.NewString()+`","holder":{"acquiredBy":"`+testUser+`"}}`).
		wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
}

// TestLockHistoryExplainsWaits walks each event: a takeover of a lock that
// expired while held, a late release, a release by someone else, a waiter
// that gave up. The uncontended path records nothing.
func TestLockHistoryExplainsWaits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	acquire := func(user, instance string) lockJSON {
		t.Helper()
		var l lockJSON
		f.do("POST", "/check-out-lock-storage", `{"userId":"`+user+`","holder":{"instance":"`+instance+`"}}`).
			wantStatus(http.StatusCreated).decode(&l)
		return l
	}
	// Uncontended: acquire and release by the holder, twenty times.
	quiet := uuid.NewString()
	for range 20 {
		l := acquire(quiet, "circ-1")
		f.do("DELETE", "/check-out-lock-storage/"+l.ID, "").wantStatus(http.StatusNoContent)
	}
	if h := f.history(""); h.TotalRecords != 0 {
		t.Fatalf("uncontended cycles recorded %d events: %+v", h.TotalRecords, h.Events)
	}

	// Expired while held, taken over.
	alice := uuid.NewString()
	slow := acquire(alice, "circ-slow")
	f.expire(slow.ID)
	next := acquire(alice, "circ-next")
	// Its holder releases it late: expired while held.
	bob := uuid.NewString()
	late := acquire(bob, "circ-late")
	f.expire(late.ID)
	f.do("DELETE", "/check-out-lock-storage/"+late.ID, "").wantError(http.StatusNotFound, "NOT_FOUND")
	// Released by an operator, not by the holder.
	operator := "0ddba11a-0000-4000-8000-0000000000ff"
	f.doWith("DELETE", "/check-out-lock-storage/"+next.ID, "", f.asUser(operator)).wantStatus(http.StatusNoContent)
	// A waiter gives up.
	carol := uuid.NewString()
	acquire(carol, "circ-holder")
	e := f.do("POST", "/check-out-lock-storage", `{"userId":"`+carol+`","waitMs":100,"holder":{"instance":"circ-waiter","itemBarcode":"b-9"}}`).
		wantError(http.StatusServiceUnavailable, "LOCK_HELD")
	if params(e)["holderInstance"] != "circ-holder" {
		t.Errorf("waiter's 503 %v does not name the holder", params(e))
	}

	h := f.history("limit=100")
	type row struct{ typ, user, lock, holder, by string }
	var got []row
	for _, ev := range h.Events {
		got = append(got, row{ev.Type, ev.UserID, ev.LockID, ev.Holder["instance"], ev.By["instance"] + ev.By["acquiredBy"]})
	}
	want := []row{ // newest first
		{"waiter_gave_up", carol, "", "circ-holder", "circ-waiter" + testUser},
		{"released_by_other", alice, next.ID, "circ-next", operator},
		{"expired", bob, late.ID, "circ-late", testUser},
		{"taken_over", alice, slow.ID, "circ-slow", "circ-next" + testUser},
	}
	if !reflect.DeepEqual(got, want) || h.TotalRecords != 4 {
		t.Errorf("history (%d):\n got %+v\nwant %+v", h.TotalRecords, got, want)
	}
	if h.Events[0].WaitedMs < 100 || h.Events[0].By["itemBarcode"] != "b-9" {
		t.Errorf("waiter event %+v, want waitedMs ≥ 100 and the waiter's item", h.Events[0])
	}
	// Filters: by patron, and by time.
	if h := f.history("userId=" + alice); h.TotalRecords != 2 {
		t.Errorf("alice's history: %d events, want 2", h.TotalRecords)
	}
	future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	if h := f.history("from=" + future); h.TotalRecords != 0 {
		t.Errorf("history from an hour ahead: %d events", h.TotalRecords)
	}
	if h := f.history("to=" + future + "&limit=1"); h.TotalRecords != 4 || len(h.Events) != 1 {
		t.Errorf("history to an hour ahead, one per page: %d of %d", len(h.Events), h.TotalRecords)
	}
	f.do("GET", "/check-out-lock-storage/history?from=yesterday", "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
	f.do("GET", "/check-out-lock-storage/history?userId=x", "").wantError(http.StatusUnprocessableEntity, "INVALID_PARAMETER")
	// Counted in metrics.
	for typ, n := range map[string]float64{"taken_over": 1, "expired": 1, "released_by_other": 1, "waiter_gave_up": 1} {
		if got := counterValue(t, f, `checkout_lock_events_total{type="`+typ+`"}`); got != n {
			t.Errorf("checkout_lock_events_total{type=%q} = %v, want %v", typ, got, n)
		}
	}
}

// TestAWriteThatReleasesALockSaysSoAndIsItsHoldersOnly: a check-out's
// write that releases its lock answers X-Check-Out-Lock-Released and
// records nothing; a write not asked to release says nothing of it; and a
// write by someone other than the lock's holder, naming its id, is refused
// (LOCK_LOST) and changes nothing: a lock id is not a capability.
func TestAWriteThatReleasesALockSaysSoAndIsItsHoldersOnly(t *testing.T) {
	t.Parallel()
	f := setup(t)
	group, mt, lt := f.newGroup("staff"), f.newMaterialType("book"), f.newLoanType("Can circulate")
	operator := "0ddba11a-0000-4000-8000-0000000000ff"
	write := func(user, lockID string, release bool, as string) response {
		t.Helper()
		item := f.newItem(itemDoc(uuid.NewString(), mt, lt))
		h := f.asUser(as)
		h[schemas.HeaderLockID], h[schemas.HeaderItemVersion] = lockID, "1"
		if release {
			h[schemas.HeaderReleaseLock] = "true"
		}
		return f.doWith("POST", "/loan-storage/loans", jsonBody(loanDoc(user, item, "Open")), h).wantStatus(http.StatusCreated)
	}
	alice, bob := f.newPatron("alice", group), f.newPatron("bob", group)

	own := f.acquire(alice)
	if got := write(alice, own.ID, true, testUser).header.Get(schemas.HeaderLockReleased); got != "true" {
		t.Errorf("%s = %q after a write that released its lock, want true", schemas.HeaderLockReleased, got)
	}
	f.do("GET", "/check-out-lock-storage/"+own.ID, "").wantError(http.StatusNotFound, "NOT_FOUND")

	kept := f.acquire(alice)
	if got := write(alice, kept.ID, false, testUser).header.Get(schemas.HeaderLockReleased); got != "" {
		t.Errorf("%s = %q after a write not asked to release, want none", schemas.HeaderLockReleased, got)
	}
	f.do("GET", "/check-out-lock-storage/"+kept.ID, "").wantStatus(http.StatusOK)
	if h := f.history(""); h.TotalRecords != 0 {
		t.Fatalf("the holder's own writes recorded %d events: %+v", h.TotalRecords, h.Events)
	}

	// A lock id is not a capability: a write under someone else's lock
	// is refused, and the lock stays its holder's.
	others := f.acquire(bob)
	h := f.asUser(operator)
	h[schemas.HeaderLockID], h[schemas.HeaderItemVersion], h[schemas.HeaderReleaseLock] = others.ID, "1", "true"
	item := f.newItem(itemDoc(uuid.NewString(), mt, lt))
	f.doWith("POST", "/loan-storage/loans", jsonBody(loanDoc(bob, item, "Open")), h).wantError(http.StatusConflict, "LOCK_LOST")
	f.do("GET", "/check-out-lock-storage/"+others.ID, "").wantStatus(http.StatusOK)
	if n := f.countRows("loan", "item_id = $1", item); n != 0 {
		t.Errorf("%d loans written under someone else's lock", n)
	}
	if h := f.history(""); h.TotalRecords != 0 {
		t.Errorf("a refused write recorded %+v", h.Events)
	}
}
