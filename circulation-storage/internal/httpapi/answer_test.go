package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/checkoutlock/schemas"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/serverkit/auth"
)

// heldLog holds up the request's log line, written after its answer, until
// release is closed, and says on logging when it began to.
type heldLog struct {
	slog.Handler
	logging chan struct{}
	release chan struct{}
}

func (h heldLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "request" {
		h.logging <- struct{}{}
		<-h.release
	}
	return h.Handler.Handle(ctx, r)
}

// TestTheAnswerLeavesBeforeTheBookkeeping: a client has its whole answer,
// with its Content-Length, while the request's log line is still being
// written; the answers of errors and of 204 too.
func TestTheAnswerLeavesBeforeTheBookkeeping(t *testing.T) {
	t.Parallel()
	h := heldLog{Handler: slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}),
		logging: make(chan struct{}, 1), release: make(chan struct{})}
	ts := httptest.NewServer(memServer(memLocks{}, auth.Guard{Mode: auth.None}, slog.New(h)))
	defer ts.Close()
	defer close(h.release) // first: a failing test must not leave a handler held
	client := &http.Client{Timeout: 5 * time.Second}
	for _, c := range []struct {
		method, path, body string
		status             int
		bodyHas            string
	}{
		{"POST", locksPath, `{"userId":"3a40852d-49fd-4df2-a1f9-6e2641a6e91f"}`, http.StatusCreated, `"userId":"3a40852d-49fd-4df2-a1f9-6e2641a6e91f"`},
		{"POST", locksPath, `{"userId":"nope"}`, http.StatusUnprocessableEntity, `"code":"VALIDATION_FAILED"`},
		{"DELETE", locksPath + "/3a40852d-49fd-4df2-a1f9-6e2641a6e91f", "", http.StatusNoContent, ""},
	} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
		req.Header.Set(TenantHeader, "diku")
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v (the answer waited for the log line)", c.method, c.path, err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatalf("%s %s: reading the answer: %v", c.method, c.path, err)
		}
		if res.StatusCode != c.status || !strings.Contains(string(body), c.bodyHas) {
			t.Errorf("%s %s: %d %s, want %d with %s", c.method, c.path, res.StatusCode, body, c.status, c.bodyHas)
		}
		if c.status != http.StatusNoContent && (res.ContentLength != int64(len(body)) || len(res.TransferEncoding) > 0) {
			t.Errorf("%s %s: Content-Length %d, transfer encoding %v, for a body of %d bytes", c.method, c.path,
				res.ContentLength, res.TransferEncoding, len(body))
		}
		select {
		case <-h.logging:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s %s: the request was never logged", c.method, c.path)
		}
		h.release <- struct{}{}
	}
}

// panickyLocks panics on every acquisition.
type panickyLocks struct{ memLocks }

func (panickyLocks) Acquire(context.Context, storage.Tenant, string, string, time.Duration, storage.Holder) (storage.Lock, storage.AcquireOutcome, error) {
	panic("acquire broke")
}

// TestAPanicIsA500: a handler that panics answers 500 with the envelope,
// saying nothing of the panic, and the server goes on serving.
func TestAPanicIsA500(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(memServer(panickyLocks{}, auth.Guard{Mode: auth.None}, slog.New(slog.NewTextHandler(io.Discard, nil))))
	defer ts.Close()
	for range 2 {
		req, _ := http.NewRequest("POST", ts.URL+locksPath, strings.NewReader(`{"userId":"3a40852d-49fd-4df2-a1f9-6e2641a6e91f"}`))
		req.Header.Set(TenantHeader, "diku")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusInternalServerError || !strings.Contains(string(body), `"code":"`+schemas.CodeInternal+`"`) ||
			strings.Contains(string(body), "acquire broke") {
			t.Fatalf("%d %s, want 500 with %s and nothing of the panic", res.StatusCode, body, schemas.CodeInternal)
		}
	}
}
