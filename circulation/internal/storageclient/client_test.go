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
