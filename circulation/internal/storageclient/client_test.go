package storageclient

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/checkoutlock/circulation"
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

// TestASignInWaitsForStorageAsLongAsTheRequestMay: a sign-in passed to
// storage (Pass) that storage answers after twice the timeout of a call
// is answered as storage answered it, within the request's deadline,
// rather than cut at the call's timeout as storage being unavailable;
// without a deadline of its own, the call's timeout bounds it.
func TestASignInWaitsForStorageAsLongAsTheRequestMay(t *testing.T) {
	t.Parallel()
	const callTimeout = 100 * time.Millisecond
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(2 * callTimeout):
		case <-r.Context().Done():
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"accessTokenExpiration":"2026-01-01T10:10:00.000Z"}`))
	}))
	t.Cleanup(slow.Close)
	c := New(slow.URL, callTimeout, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, _, body, err := c.Pass(ctx, http.MethodPost, "/authn/login-with-expiry", []byte(`{}`), http.Header{})
	if err != nil || status != http.StatusCreated || string(body) != `{"accessTokenExpiration":"2026-01-01T10:10:00.000Z"}` {
		t.Errorf("a sign-in storage answered after %s, within the request's deadline: %d %s, %v", 2*callTimeout, status, body, err)
	}
	if _, _, _, err := c.Pass(context.Background(), http.MethodPost, "/authn/login-with-expiry", []byte(`{}`), http.Header{}); !errs.IsKind(err, errs.KindUnavailable) {
		t.Errorf("the same sign-in without a deadline of its own: %v, want unavailable at the call's timeout", err)
	}
}
