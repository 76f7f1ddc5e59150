package serverkit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/schemas/errs/errhttp"
)

// refused is a refusal as a client hears it: its status and code.
type refused struct {
	Status int
	Code   string
}

func refusal(t *testing.T, err error) refused {
	t.Helper()
	e, ok := errs.As(err)
	if !ok {
		t.Fatalf("error %v, want an *errs.Error", err)
	}
	return refused{Status: errhttp.Status(e.Kind), Code: e.Code}
}

func TestCheckHeaders(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set(schemas.HeaderTenant, "diku")
	if err := CheckHeaders(req, 1000); err != nil {
		t.Fatalf("one tenant: %v", err)
	}
	req.Header.Add("x-okapi-tenant", "other")
	if r := refusal(t, CheckHeaders(req, 1000)); r.Status != http.StatusBadRequest || r.Code != schemas.CodeInvalidTenant {
		t.Errorf("two tenants: %+v, want 400 %s", r, schemas.CodeInvalidTenant)
	}
	req = httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set(schemas.HeaderReleaseLock, "true")
	req.Header.Add(schemas.HeaderReleaseLock, "false")
	if r := refusal(t, CheckHeaders(req, 1000)); r.Status != http.StatusBadRequest || r.Code != schemas.CodeInvalidHeader {
		t.Errorf("two release flags: %+v, want 400 %s", r, schemas.CodeInvalidHeader)
	}
	for _, h := range []string{schemas.HeaderCheckOutOverride, schemas.HeaderPatronPin, schemas.HeaderAcquireLock,
		schemas.HeaderWriteID, schemas.HeaderWriteDigest, schemas.HeaderIdempotencyKey, schemas.HeaderKiosk,
		schemas.HeaderLoanActionServicePoint, schemas.HeaderCheckInServicePoint, schemas.HeaderRequestRules} {
		req = httptest.NewRequest(http.MethodGet, "/x", nil)
		req.Header.Set(h, "patronBlock")
		req.Header.Add(h, "itemLimitBlock")
		if r := refusal(t, CheckHeaders(req, 1000)); r.Status != http.StatusBadRequest || r.Code != schemas.CodeInvalidHeader {
			t.Errorf("%s twice: %+v, want 400 %s", h, r, schemas.CodeInvalidHeader)
		}
	}
	req = httptest.NewRequest(http.MethodGet, "/x", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 1000))
	if r := refusal(t, CheckHeaders(req, 1000)); r.Status != http.StatusRequestHeaderFieldsTooLarge || r.Code != schemas.CodeHeadersTooLarge {
		t.Errorf("large block: %+v, want 431 %s", r, schemas.CodeHeadersTooLarge)
	}
}

func TestReadBody(t *testing.T) {
	t.Parallel()
	deadline := time.Now().Add(time.Second)
	for _, tc := range []struct {
		name     string
		body     string
		length   int64 // -1: unknown (chunked)
		want     string
		status   int
		maxBytes int64
	}{
		{"small, length known", `{"a":1}`, 7, `{"a":1}`, 0, 100},
		{"length unknown", `{"a":1}`, -1, `{"a":1}`, 0, 100},
		{"announced over the limit", strings.Repeat("a", 101), 101, "", http.StatusRequestEntityTooLarge, 100},
		{"over the limit, length unknown", strings.Repeat("a", 101), -1, "", http.StatusRequestEntityTooLarge, 100},
		{"larger than one allocation", strings.Repeat("a", exactBodyBytes+1), exactBodyBytes + 1, strings.Repeat("a", exactBodyBytes+1), 0, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(tc.body))
			req.ContentLength = tc.length
			err := ReadBody(httptest.NewRecorder(), req, tc.maxBytes, deadline)
			if tc.status != 0 {
				if r := refusal(t, err); r.Status != tc.status {
					t.Errorf("status %d, want %d", r.Status, tc.status)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := Bytes(req)
			if err != nil || string(got) != tc.want {
				t.Errorf("body %q, %v; want %q", got, err, tc.want)
			}
			// The body stays readable for whoever reads req.Body.
			if again, _ := io.ReadAll(req.Body); string(again) != tc.want {
				t.Errorf("req.Body gives %q, want %q", again, tc.want)
			}
		})
	}
}
