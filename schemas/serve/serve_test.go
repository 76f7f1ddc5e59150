package serve

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
)

// observed is one Observe call.
type observed struct {
	method, route string
	status        int
}

// newServer serves GET /things/:id with h behind the request path, with
// an admission that refuses a request carrying "X-Refuse" and otherwise
// sets a deadline; it returns the server, the log and what was observed.
func newServer(t *testing.T, h echo.HandlerFunc) (*echo.Echo, *bytes.Buffer, *[]observed, *[]context.Context) {
	t.Helper()
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, nil))
	var obs []observed
	var deadlines []context.Context
	admit := func(c echo.Context, r Request) (*Request, context.CancelFunc, error) {
		r.Caller = "caller-1"
		if c.Request().Header.Get("X-Refuse") != "" {
			return &r, nil, echo.NewHTTPError(http.StatusForbidden, "refused")
		}
		ctx, cancel := context.WithTimeout(c.Request().Context(), time.Minute)
		deadlines = append(deadlines, ctx)
		c.SetRequest(c.Request().WithContext(ctx))
		return &r, cancel, nil
	}
	e := echo.New()
	e.JSONSerializer = JSON{}
	e.Use(Middleware(logger, admit, func(method, route string, status int, _ time.Duration) {
		obs = append(obs, observed{method, route, status})
	}))
	e.GET("/things/:id", h)
	return e, &log, &obs, &deadlines
}

func TestTheRequestPathAnswersObservesAndLogsOnce(t *testing.T) {
	e, log, obs, deadlines := newServer(t, func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"id": c.Param("id")})
	})
	req := httptest.NewRequest("GET", "/things/7", nil)
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
	if len(*obs) != 1 || (*obs)[0] != (observed{"GET", "/things/:id", 200}) {
		t.Errorf("observed %v", *obs)
	}
	if n := strings.Count(log.String(), "msg=request"); n != 1 {
		t.Errorf("%d request lines, want 1: %s", n, log)
	}
	if len(*deadlines) != 1 || (*deadlines)[0].Err() == nil {
		t.Error("the request's deadline was not released")
	}
}

func TestTheRequestPathTurnsRefusalsAndPanicsIntoAnswers(t *testing.T) {
	e, log, obs, _ := newServer(t, func(c echo.Context) error { panic("handler broke") })
	for _, c := range []struct {
		refuse bool
		status int
	}{{true, http.StatusForbidden}, {false, http.StatusInternalServerError}} {
		req := httptest.NewRequest("GET", "/things/7", nil)
		if c.refuse {
			req.Header.Set("X-Refuse", "1")
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
	if len(*obs) != 2 || (*obs)[0].status != http.StatusForbidden || (*obs)[1].status != http.StatusInternalServerError {
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
	e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/things/7", nil))
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
