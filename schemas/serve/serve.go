// Package serve is the request path both services' echo servers put every
// request through, in one middleware: its request id is taken (or made)
// and echoed back; the service admits it (bounds its headers, body and
// time, and authorizes its caller); a panic in admission or the handler
// becomes an error; errors become answers through echo's error handler;
// the answer is sent; and only then is the request's deadline released,
// its latency recorded and its one log line written. A client has its
// answer before that bookkeeping is done (see package answer).
package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/answer"
)

// Request is what the request path knows of a request. A service keeps it
// in its own record of the request, which its admission makes.
type Request struct {
	// ID is the request id, echoed back and named by every log line.
	ID string
	// Caller is who the request acts for, as admission found out, and
	// Module the module calling on the caller's behalf, if one is.
	Caller string
	Module string
	// Claimed says Caller and Module are only what a refused request's
	// token claims, its signature not checked (auth.Unverified): the line
	// names them claimed_caller and claimed_module.
	Claimed bool
	// Logged says whether the request's line is logged (info enabled).
	Logged bool
	// attrs are what the handler adds to the line (Log).
	attrs []slog.Attr
}

// Log adds attributes to the request's log line.
func (r *Request) Log(attrs ...slog.Attr) {
	if r != nil && r.Logged {
		r.attrs = append(r.attrs, attrs...)
	}
}

// Admit admits a request before its handler runs, given what the request
// path knows of it so far. It returns the request as the service records
// it (never nil), which the request's context carries whether or not it
// was admitted, so that an error is logged with the request id. On
// success, cancel releases the request's deadline.
type Admit func(c echo.Context, r Request) (recorded *Request, cancel context.CancelFunc, err error)

// Observe records a request's latency by method, route and status.
type Observe func(method, route string, status int, elapsed time.Duration)

// Middleware is the request path before next, the routed handler.
func Middleware(logger *slog.Logger, admit Admit, observe Observe) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			req := c.Request()
			r := Request{ID: req.Header.Get(schemas.HeaderRequestID), Logged: logger.Enabled(req.Context(), slog.LevelInfo)}
			if !validRequestID(r.ID) {
				r.ID = uuid.NewString()
			}
			h := c.Response().Header()
			h.Set(schemas.HeaderRequestID, r.ID)
			// Answers carry patrons, loans and locks: no cache keeps
			// them (a page's own files say otherwise for themselves).
			h.Set("Cache-Control", "no-store")
			recorded, cancel, err := run(c, r, admit, next)
			if err != nil {
				c.Error(err)
			}
			elapsed := time.Since(start)
			if res := c.Response(); res.Committed {
				answer.Send(res.Writer, res.Status)
			}
			if cancel != nil {
				cancel()
			}
			status, route := c.Response().Status, c.Path()
			if route == "" {
				route = "unmatched"
			}
			observe(req.Method, route, status, elapsed)
			if recorded == nil || !recorded.Logged {
				return nil
			}
			attrs := append([]slog.Attr{slog.String("method", req.Method), slog.String("route", route), slog.Int("status", status),
				slog.Duration("duration", elapsed)}, recorded.attrs...)
			// Who did it: the user, and the module acting for them; of a
			// token refused as not valid, who it claims to be.
			callerKey, moduleKey := "caller", "module"
			if recorded.Claimed {
				callerKey, moduleKey = "claimed_caller", "claimed_module"
			}
			if recorded.Caller != "" {
				attrs = append(attrs, slog.String(callerKey, recorded.Caller))
			}
			if recorded.Module != "" {
				attrs = append(attrs, slog.String(moduleKey, recorded.Module))
			}
			logger.LogAttrs(c.Request().Context(), slog.LevelInfo, "request", attrs...)
			return nil
		}
	}
}

// run admits the request and runs its handler h, turning a panic in
// either into an error (a 500), logged with its stack by the error
// handler. Deferred work in the handler, such as releasing a lock, has run
// by then.
func run(c echo.Context, r Request, admit Admit, h echo.HandlerFunc) (recorded *Request, cancel context.CancelFunc, err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	if recorded, cancel, err = admit(c, r); err != nil {
		return recorded, nil, err
	}
	return recorded, cancel, h(c)
}

// validRequestID accepts what Okapi sends ("123456/check-out-lock-storage")
// and keeps log lines safe: short, printable ASCII only.
func validRequestID(id string) bool {
	if id == "" || len(id) > 200 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}

// JSON is the servers' JSON serializer: an answer is encoded whole, with
// its Content-Length, so that the request path can send it before the
// request's bookkeeping (see package answer).
type JSON struct{ echo.DefaultJSONSerializer }

// Serialize implements echo.JSONSerializer.
func (JSON) Serialize(c echo.Context, v any, indent string) error {
	return answer.JSON(c.Response(), v, indent)
}
