package storageclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
)

// TestACallThatNeverLeftSaysSo: a call whose connection could not be made
// is unavailable and not sent (circulation.ErrNotSent: it may be sent
// again); one that reached storage and lost its answer is unavailable but
// was sent: it may have been done.
func TestACallThatNeverLeftSaysSo(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	_, err = New(closed, time.Second, nil).ReadForCheckOut(context.Background(), "item", "user")
	if !errs.IsKind(err, errs.KindUnavailable) || !errors.Is(err, circulation.ErrNotSent) {
		t.Errorf("a call to a closed port: %v, want unavailable and not sent", err)
	}

	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(cut.Close)
	_, err = New(cut.URL, time.Second, nil).ReadForCheckOut(context.Background(), "item", "user")
	if !errs.IsKind(err, errs.KindUnavailable) || errors.Is(err, circulation.ErrNotSent) {
		t.Errorf("a call whose answer was cut: %v, want unavailable, and sent", err)
	}
}

// TestStoragesRefusalsKeepTheirCodes: a value storage refuses is passed on
// with storage's code, words and parameters; a 422 without FOLIO's
// envelope is VALIDATION_FAILED in storage's status words.
func TestStoragesRefusalsKeepTheirCodes(t *testing.T) {
	for _, c := range []struct {
		body, code, message string
		params              []errs.Parameter
	}{
		{`{"errors":[{"message":"Check the loan in first","code":"CHECK_IN_REQUIRED","parameters":[{"key":"loanId","value":"x"}]}]}`,
			"CHECK_IN_REQUIRED", "Check the loan in first", []errs.Parameter{{Key: "loanId", Value: "x"}}},
		{`not json`, schemas.CodeValidation, "status 422", nil},
	} {
		err := fromAnswer(http.StatusUnprocessableEntity, http.Header{}, []byte(c.body), "PUT /loan-storage/loans/x")
		e, ok := errs.As(err)
		if !ok || e.Kind != errs.KindInvalid || e.Code != c.code || e.Message != c.message || !reflect.DeepEqual(e.Parameters, c.params) {
			t.Errorf("422 %s: %#v, want %s %q %v", c.body, err, c.code, c.message, c.params)
		}
	}
}
