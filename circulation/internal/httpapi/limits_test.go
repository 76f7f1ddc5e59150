package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/checkoutlock/schemas"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/circulation-storage/storagetest"
	"github.com/checkoutlock/schemas/errs/errhttp"
	"github.com/checkoutlock/schemas/locksettings"
)

// TestFOLIOSettingsFixtureIsAccepted: the values of FOLIO's own settings
// fixture (mod-circulation's check-out lock tests) are stored as they are,
// and are the settings in effect.
func TestFOLIOSettingsFixtureIsAccepted(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	var got settingsJSON
	a.send(t, "PUT", "/circulation/settings/check-out-lock",
		`{"checkOutLockFeatureEnabled":true,"lockTtl":500,"retryInterval":5,"noOfRetryAttempts":10}`).
		want(t, http.StatusOK, "checkout-lock-settings-effective.json").decode(t, &got)
	if !got.Enabled || got.LockTTL != 500 || got.NoOfRetryAttempts != 10 || len(got.RetryIntervalsMs) != 10 ||
		got.RetryIntervalsMs[0] != 5 || got.Sources.LockTTL != circulation.FromSettings || got.Sources.RetryIntervals != circulation.FromSettings {
		t.Errorf("FOLIO's fixture answered %+v, want it in effect: on, lockTtl 500, 10 waits of 5 ms", got)
	}
}

// TestPatchSettingsOverHTTP: PATCH, as application/json or as a merge
// patch, changes only what it names.
func TestPatchSettingsOverHTTP(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	a.send(t, "PUT", "/circulation/settings/check-out-lock", `{"checkOutLockFeatureEnabled":false}`).
		want(t, http.StatusOK, "checkout-lock-settings-effective.json")
	var got settingsJSON
	a.do(t, "PATCH", "/circulation/settings/check-out-lock", strings.NewReader(`{"lockTtl":5000}`),
		map[string]string{TenantHeader: a.tenant, "Content-Type": "application/merge-patch+json"}).
		want(t, http.StatusOK, "checkout-lock-settings-effective.json").decode(t, &got)
	if got.Enabled || got.Sources.Enabled != circulation.FromSettings || got.LockTTL != 5000 || got.Bounds.LockTTL.Minimum != 100 {
		t.Errorf("PATCH answered %+v, want still off and lockTtl 5000", got)
	}
	a.send(t, "PATCH", "/circulation/settings/check-out-lock", `{"checkOutLockFeatureEnabled":null}`).
		want(t, http.StatusOK, "checkout-lock-settings-effective.json").decode(t, &got)
	if !got.Enabled || got.Sources.Enabled != circulation.FromEnvironment || got.LockTTL != 5000 {
		t.Errorf("PATCH null answered %+v, want the environment's (on) and lockTtl 5000", got)
	}
	raw, _ := a.store.Setting(locksettings.Scope, locksettings.Key)
	if string(raw) != `"{\"lockTtl\":5000}"` {
		t.Errorf("stored %s, want \"{\\\"lockTtl\\\":5000}\"", raw)
	}
	for _, body := range []string{`{"lockTtl":"5000"}`, `{"lockTTL":5000}`, `{"lockTtl":99}`, `[]`} {
		res := a.send(t, "PATCH", "/circulation/settings/check-out-lock", body).want(t, http.StatusUnprocessableEntity, "errors.json")
		if codes := res.codes(t); codes[0] != schemas.CodeValidation {
			t.Errorf("PATCH %s: codes %q", body, codes)
		}
	}
	if raw2, _ := a.store.Setting(locksettings.Scope, locksettings.Key); string(raw2) != string(raw) {
		t.Errorf("refused patches changed the setting to %s", raw2)
	}
}

// TestLoansRefuseUnknownAndRepeatedParameters: a filter the call does not
// know, or one given twice, must not widen the list to every patron's loans.
func TestLoansRefuseUnknownAndRepeatedParameters(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	h := map[string]string{TenantHeader: a.tenant}
	for _, q := range []string{"userId[]=" + patronID, "userid=" + patronID, "userId=" + patronID + "&userId=" + patronID, "limit=1&limit=2"} {
		res := a.do(t, "GET", "/circulation/loans?"+q, nil, h).want(t, http.StatusUnprocessableEntity, "errors.json")
		if codes := res.codes(t); codes[0] != schemas.CodeInvalidParameter {
			t.Errorf("?%s: codes %q, want INVALID_PARAMETER", q, codes)
		}
	}
	if n := a.store.Count(storagetest.RouteLoans); n != 0 {
		t.Errorf("storage was asked for loans %d times", n)
	}
}

// TestHeadersAreChecked: one tenant per request, a user id that is a UUID,
// one Idempotency-Key of 1 to 255 visible characters, and headers within
// the bound, each answered with the envelope, nothing written.
func TestHeadersAreChecked(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	for _, c := range []struct {
		name   string
		header http.Header
		status int
		code   string
	}{
		{"two tenants", http.Header{TenantHeader: {a.tenant, "other"}}, http.StatusBadRequest, "INVALID_TENANT"},
		{"two request ids", http.Header{TenantHeader: {a.tenant}, RequestIDHeader: {"a", "b"}}, http.StatusBadRequest, "INVALID_HEADER"},
		{"user id not a UUID", http.Header{TenantHeader: {a.tenant}, "X-Okapi-User-Id": {"nobody"}}, http.StatusBadRequest, "INVALID_HEADER"},
		{"huge headers", http.Header{TenantHeader: {a.tenant}, "X-Padding": {strings.Repeat("p", 17<<10)}},
			http.StatusRequestHeaderFieldsTooLarge, "HEADERS_TOO_LARGE"},
		{"two idempotency keys", http.Header{TenantHeader: {a.tenant}, "Idempotency-Key": {"a", "b"}}, http.StatusBadRequest, "INVALID_HEADER"},
		{"an empty idempotency key", http.Header{TenantHeader: {a.tenant}, "Idempotency-Key": {`""`}}, http.StatusBadRequest, "INVALID_HEADER"},
		{"an idempotency key with a space", http.Header{TenantHeader: {a.tenant}, "Idempotency-Key": {"a b"}}, http.StatusBadRequest, "INVALID_HEADER"},
		{"an idempotency key of 256 characters", http.Header{TenantHeader: {a.tenant}, "Idempotency-Key": {strings.Repeat("k", 256)}},
			http.StatusBadRequest, "INVALID_HEADER"},
	} {
		req, err := http.NewRequest("POST", a.url+"/circulation/check-out-by-barcode", strings.NewReader(checkOutBody))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = c.header
		req.Header.Set("Content-Type", "application/json")
		res, err := a.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		r := response{status: res.StatusCode, header: res.Header, body: body}
		r.want(t, c.status, "errors.json")
		if codes := r.codes(t); codes[0] != c.code {
			t.Errorf("%s: codes %q, want %s", c.name, codes, c.code)
		}
	}
	if w := a.store.Writes(); len(w) != 0 {
		t.Errorf("storage writes: %+v", w)
	}
}

// TestCheckInValidatesBeforeWriting: a check-in date that cannot be written
// back is refused before the item is touched.
func TestCheckInValidatesBeforeWriting(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	a.send(t, "POST", "/circulation/check-out-by-barcode", checkOutBody).want(t, http.StatusCreated, "circulation-loan.json")
	writes := len(a.store.Writes())
	for _, date := range []string{"9999-12-31T23:59:59-23:59", "0000-01-01T00:00:00+00:01"} {
		res := a.send(t, "POST", "/circulation/check-in-by-barcode",
			`{"itemBarcode":"`+itemBarcode+`","servicePointId":"`+servicePoint+`","checkInDate":"`+date+`"}`).
			want(t, http.StatusUnprocessableEntity, "errors.json")
		if codes := res.codes(t); codes[0] != schemas.CodeValidation {
			t.Errorf("checkInDate %s: codes %q", date, codes)
		}
	}
	if w := a.store.Writes(); len(w) != writes {
		t.Errorf("storage writes: %+v", w[writes:])
	}
	if item, _ := a.store.Item(itemID); item.Status != "Checked out" || item.Version != 2 {
		t.Errorf("item %+v, want still checked out at _version 2", item)
	}
}

// TestManyViolationsAreCapped: fifty violations are listed, and how many
// more there were.
func TestManyViolationsAreCapped(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	var b strings.Builder
	// The settings, this project's own route, refuse members they do not
	// name.
	b.WriteString(`{"lockTtl":3000`)
	for i := range 200 {
		fmt.Fprintf(&b, `,"k%d":1`, i)
	}
	b.WriteString("}")
	res := a.send(t, "PUT", "/circulation/settings/check-out-lock", b.String()).want(t, http.StatusUnprocessableEntity, "errors.json")
	var env errhttp.Envelope
	res.decode(t, &env)
	if len(env.Errors) != 51 || env.Errors[50].Message != "… and 150 more violations (at most 50 are listed)" {
		t.Errorf("%d entries, the last %+v", len(env.Errors), env.Errors[len(env.Errors)-1])
	}
}

// TestInventedMethodsShareOneMetricLabel: methods HTTP does not define are
// all counted as OTHER.
func TestInventedMethodsShareOneMetricLabel(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	for i := range 100 {
		a.do(t, fmt.Sprintf("INVENTED%d", i), "/circulation/check-out-by-barcode", nil, map[string]string{TenantHeader: a.tenant})
	}
	res := a.do(t, "GET", "/metrics", nil, nil)
	if strings.Contains(string(res.body), `method="INVENTED`) || !strings.Contains(string(res.body), `method="OTHER"`) {
		t.Errorf("metrics name invented methods, or not OTHER")
	}
}

// TestSettingsOfAnUnknownTenantAre400: like every other call for a tenant
// storage does not know.
func TestSettingsOfAnUnknownTenantAre400(t *testing.T) {
	t.Parallel()
	a := newAPI(t, lockOn)
	// The test's own tenant is initialised; "nobody", a valid tenant id,
	// is no test's (storagetest names its tenants st…).
	res := a.do(t, "GET", "/circulation/settings/check-out-lock", nil, map[string]string{TenantHeader: "nobody"}).
		want(t, http.StatusBadRequest, "errors.json")
	if codes := res.codes(t); codes[0] != schemas.CodeTenantNotInitialized {
		t.Errorf("codes %q, want TENANT_NOT_INITIALIZED", codes)
	}
}
