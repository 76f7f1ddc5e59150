package serverkit

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// observed is one observe call.
type observed struct {
	method, route string
	status        int
}

// newServer serves GET /groups/:id (a route of storage's in the table)
// with h behind the request path, authentication off; it returns the
// server, the log, what was observed and the contexts the handler ran
// with.
func newServer(t *testing.T, h echo.HandlerFunc) (*Server, *bytes.Buffer, *[]observed, *[]context.Context) {
	t.Helper()
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	var obs []observed
	var contexts []context.Context
	s := New(Service{Name: schemas.ServiceStorage}, Config{Auth: auth.Guard{Mode: auth.None}, MaxBodyBytes: 1 << 20,
		MaxHeaderBytes: 1 << 16, RequestTimeout: time.Minute}, nil, NewMetrics(nil), logger)
	s.observe = func(method, route string, status int, _ time.Duration) {
		obs = append(obs, observed{method, route, status})
	}
	s.Get("/groups/:id", func(c echo.Context) error {
		contexts = append(contexts, c.Request().Context())
		return h(c)
	})
	return s, &log, &obs, &contexts
}

func TestTheRequestPathAnswersObservesAndLogsOnce(t *testing.T) {
	e, log, obs, deadlines := newServer(t, func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"id": c.Param("id")})
	})
	req := httptest.NewRequest("GET", "/groups/7", nil)
	req.Header.Set("X-Okapi-Request-Id", "123456/things")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Body.String() != "{\"id\":\"7\"}\n" {
		t.Fatalf("answer %d %q", rec.Code, rec.Body)
	}
	if got := rec.Header().Get("Content-Length"); got != "11" {
		t.Errorf("Content-Length %q, want 11", got)
	}
	if got := rec.Header().Get("X-Okapi-Request-Id"); got != "123456/things" {
		t.Errorf("request id echoed %q", got)
	}
	if len(*obs) != 1 || (*obs)[0] != (observed{"GET", "/groups/:id", 200}) {
		t.Errorf("observed %v", *obs)
	}
	if n := strings.Count(log.String(), "msg=request"); n != 1 {
		t.Errorf("%d request lines, want 1: %s", n, log)
	}
	if len(*deadlines) != 1 || (*deadlines)[0].Err() == nil || RequestOf((*deadlines)[0]).ID != "123456/things" {
		t.Error("the request's deadline was not released")
	}
}

func TestTheRequestPathTurnsRefusalsAndPanicsIntoAnswers(t *testing.T) {
	e, log, obs, _ := newServer(t, func(c echo.Context) error { panic("handler broke") })
	for _, c := range []struct {
		refuse bool
		status int
	}{{true, http.StatusBadRequest}, {false, http.StatusInternalServerError}} {
		req := httptest.NewRequest("GET", "/groups/7", nil)
		if c.refuse {
			// Two tenants: refused by the admission (400).
			req.Header.Add("X-Okapi-Tenant", "a")
			req.Header.Add("X-Okapi-Tenant", "b")
		}
		req.Header.Set("X-Okapi-Request-Id", "bad id with spaces")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code != c.status {
			t.Errorf("refuse=%v: %d, want %d", c.refuse, rec.Code, c.status)
		}
		if id := rec.Header().Get("X-Okapi-Request-Id"); len(id) != 36 {
			t.Errorf("an invalid request id was not replaced: %q", id)
		}
	}
	if len(*obs) != 2 || (*obs)[0].status != http.StatusBadRequest || (*obs)[1].status != http.StatusInternalServerError {
		t.Errorf("observed %v", *obs)
	}
	if n := strings.Count(log.String(), "msg=request"); n != 2 {
		t.Errorf("%d request lines, want 2: %s", n, log)
	}
}

func TestAnAbortedHandlerStaysAborted(t *testing.T) {
	e, _, _, _ := newServer(t, func(c echo.Context) error { panic(http.ErrAbortHandler) })
	defer func() {
		if r := recover(); r == nil || !errors.Is(r.(error), http.ErrAbortHandler) {
			t.Errorf("recovered %v, want http.ErrAbortHandler passed on to net/http", r)
		}
	}()
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/groups/7", nil))
}

func TestValidRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"123456/check-out-lock-storage": true,
		"":                              false,
		"with space":                    false,
		"tab\there":                     false,
		strings.Repeat("a", 200):        true,
		strings.Repeat("a", 201):        false,
		"é":                             false,
	} {
		if got := validRequestID(id); got != want {
			t.Errorf("validRequestID(%q) = %v, want %v", id, got, want)
		}
	}
}
