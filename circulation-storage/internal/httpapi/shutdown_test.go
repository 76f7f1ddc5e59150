package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/checkoutlock/schemas"
)

// TestClosedWaitersAnswer503ShuttingDown: acquisitions waiting for a held
// lock answer at once when the waiters close, as at a shutdown: 503 in
// FOLIO's envelope with code SHUTTING_DOWN, Retry-After and how long each
// waited. The held lock stays, nothing else is written, and no
// waiter_gave_up event is recorded.
func TestClosedWaitersAnswer503ShuttingDown(t *testing.T) {
	t.Parallel()
	f := setup(t)
	user := uuid.NewString()
	// Held for a minute: the lock must outlive the test on a loaded
	// machine (the default TTL of 3 s did not, once).
	var held lockJSON
	f.do("POST", "/check-out-lock-storage", fmt.Sprintf(`{"userId":%q,"ttlMs":60000}`, user)).wantStatus(http.StatusCreated).decode(&held)
	const n = 5
	type answer struct {
		status int
		header http.Header
		body   []byte
		err    error
	}
	answers := make(chan answer, n)
	for range n {
		go func() {
			req, _ := http.NewRequest("POST", f.url+"/check-out-lock-storage",
				strings.NewReader(fmt.Sprintf(`{"userId":%q,"ttlMs":60000,"waitMs":20000}`, user)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(TenantHeader, f.tenant)
			req.Header.Set(schemas.HeaderUserID, testUser)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{err: err}
				return
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			answers <- answer{status: res.StatusCode, header: res.Header, body: body, err: err}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.waiting() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%v waiting, want %d", f.waiting(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.waiters.Close()
	for range n {
		var a answer
		select {
		case a = <-answers:
		case <-time.After(time.Second):
			t.Fatal("a waiter has not answered a second after the waiters closed")
		}
		if a.err != nil {
			t.Fatal(a.err)
		}
		r := response{t: t, status: a.status, header: a.header, body: a.body}
		e := r.wantError(http.StatusServiceUnavailable, schemas.CodeShuttingDown)
		params := map[string]string{}
		for _, p := range e.Errors[0].Parameters {
			params[p.Key] = p.Value
		}
		if ms, err := strconv.Atoi(params["waitedMs"]); params["userId"] != user || err != nil || ms < 0 || ms > 20000 {
			t.Errorf("parameters %v, want userId %s and waitedMs", params, user)
		}
		if !strings.Contains(e.Errors[0].Message, "shutting down") {
			t.Errorf("message %q does not say the service is shutting down", e.Errors[0].Message)
		}
		if a.header.Get("Retry-After") != "1" {
			t.Errorf("Retry-After %q, want 1", a.header.Get("Retry-After"))
		}
	}
	if g := f.waiting(); g != 0 {
		t.Errorf("waiters gauge %v after the waiters closed, want 0", g)
	}
	metrics := string(f.doWith("GET", "/metrics", "", nil).wantStatus(http.StatusOK).body)
	if want := fmt.Sprintf(`checkout_lock_wait_seconds_count{result="shut_down"} %d`, n); !strings.Contains(metrics, want+"\n") {
		t.Errorf("metrics do not say %s", want)
	}
	var l lockJSON
	f.do("GET", "/check-out-lock-storage/"+held.ID, "").wantStatus(http.StatusOK).decode(&l)
	if l != held {
		t.Errorf("held lock %+v after the waiters closed, want %+v", l, held)
	}
	if rows := f.rows(user); rows != 1 {
		t.Errorf("%d lock rows for the patron, want the held one", rows)
	}
	if h := f.history("userId=" + user); h.TotalRecords != 0 {
		t.Errorf("history %+v, want no event for waits ended by a shutdown", h.Events)
	}
	// Once closed, an acquisition of a held lock is answered at once.
	start := time.Now()
	f.do("POST", "/check-out-lock-storage", fmt.Sprintf(`{"userId":%q,"waitMs":20000}`, user)).
		wantError(http.StatusServiceUnavailable, schemas.CodeLockHeld)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("an acquisition after the waiters closed answered after %s, want at once", d)
	}
}

// waiting is the gauge of the requests waiting for a lock, as /metrics
// says it.
func (f *fixture) waiting() float64 {
	f.t.Helper()
	body := string(f.doWith("GET", "/metrics", "", nil).wantStatus(http.StatusOK).body)
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, "checkout_lock_waiters "); ok {
			g, err := strconv.ParseFloat(v, 64)
			if err != nil {
				f.t.Fatalf("%s: %v", line, err)
			}
			return g
		}
	}
	f.t.Fatal("no checkout_lock_waiters in /metrics")
	return 0
}
