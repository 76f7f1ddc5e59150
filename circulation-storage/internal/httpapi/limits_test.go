package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// TestListPagesAreCappedInBytes: a page whose records add up to more than
// MaxPageBytes is refused, naming the cap, instead of being built in
// memory; a smaller page of the same records is served.
func TestListPagesAreCappedInBytes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	big := strings.Repeat("x", 60<<10)
	for i := range 6 {
		f.post("/settings/entries", "setting.json", map[string]any{"scope": "big", "key": fmt.Sprint(i), "value": big})
	}
	e := f.do("GET", "/settings/entries?scope=big&limit=10", "").wantError(http.StatusUnprocessableEntity, "PAGE_TOO_LARGE")
	if p := params(e); p["maxPageBytes"] != "262144" || p["limit"] != "10" {
		t.Errorf("parameters %v, want maxPageBytes 262144 and limit 10", p)
	}
	if docs, total := f.list("/settings/entries", "scope=big&limit=3", "settings.json", "items"); len(docs) != 3 || total != 6 {
		t.Errorf("limit=3: %d records of %d, want 3 of 6", len(docs), total)
	}
	// FOLIO's "every match" is held to the same cap, its query ended
	// where the page passed it; the pool serves on.
	for range 3 {
		e = f.do("GET", "/settings/entries?scope=big&limit=2147483647", "").wantError(http.StatusUnprocessableEntity, "PAGE_TOO_LARGE")
		if p := params(e); p["limit"] != "2147483647" {
			t.Errorf("parameters %v, want limit 2147483647", p)
		}
		if docs, total := f.list("/settings/entries", "scope=big&limit=2", "settings.json", "items"); len(docs) != 2 || total != 6 {
			t.Errorf("limit=2 after a page too large: %d records of %d, want 2 of 6", len(docs), total)
		}
	}
}

// TestManyViolationsAreCapped: a body of a thousand unknown keys gets an
// answer listing fifty violations and how many more there were, not a
// thousand lines.
func TestManyViolationsAreCapped(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var b strings.Builder
	b.WriteString(`{"userId":"` + uuid.NewString() + `"`)
	for i := range 1000 {
		fmt.Fprintf(&b, `,"k%d":1`, i)
	}
	b.WriteString("}")
	before := f.snapshot()
	e := f.do("POST", locksPath, b.String()).wantError(http.StatusUnprocessableEntity, "VALIDATION_FAILED")
	if len(e.Errors) != 51 || e.Errors[50].Message != "… and 950 more violations (at most 50 are listed)" {
		t.Errorf("%d entries, the last %+v; want 50 and a line saying 950 more", len(e.Errors), e.Errors[len(e.Errors)-1])
	}
	if after := f.snapshot(); after != before {
		t.Errorf("locks changed: %s", after)
	}
}

// TestHeadersAreBounded: a single-valued header given twice is refused
// (which one would count?), and a header block over MaxHeaderBytes gets 431
// in the envelope.
func TestHeadersAreBounded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	before := f.snapshot()
	send := func(h http.Header) response {
		req, err := http.NewRequest("POST", f.url+locksPath, strings.NewReader(`{"userId":"`+uuid.NewString()+`"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = h
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return response{t: t, status: res.StatusCode, header: res.Header, body: body}
	}
	twoTenants := http.Header{TenantHeader: {f.tenant, "other"}}
	wantRefusal(t, send(twoTenants), http.StatusBadRequest, "INVALID_TENANT")
	twoIDs := http.Header{TenantHeader: {f.tenant}, RequestIDHeader: {"a", "b"}}
	wantRefusal(t, send(twoIDs), http.StatusBadRequest, "INVALID_HEADER")
	huge := http.Header{TenantHeader: {f.tenant}, "X-Padding": {strings.Repeat("p", 17<<10)}}
	wantRefusal(t, send(huge), http.StatusRequestHeaderFieldsTooLarge, "HEADERS_TOO_LARGE")
	if after := f.snapshot(); after != before {
		t.Errorf("locks changed: %s", after)
	}
}
