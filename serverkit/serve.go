package serverkit

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
	"github.com/checkoutlock/serverkit/tracing"
)

// The request path puts every request of both services through one
// middleware: its request id is taken (or made) and echoed back; it is
// admitted (its headers, body and time bounded, its caller authorized);
// a panic in admission or the handler becomes an error; errors become
// answers through echo's error handler; the answer is sent; and only then
// is the request's deadline released, its latency recorded and its one
// log line written. A client has its answer before that bookkeeping is
// done (see send).

// Request is what the request path knows of a request: made when it
// arrives, filled in by its admission, and carried by its context
// (RequestOf) whether or not it was admitted, so that every line logged
// with the context names the request (LogHandler).
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
	// Claims are the verified claims of a jwt-mode request; nil in the
	// other modes.
	Claims *auth.Claims
	// Tenant is the request's tenant once the service has validated its
	// header; every log line then names it.
	Tenant string
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

type ctxKey int

const requestKey ctxKey = 0

// RequestOf is the request ctx belongs to; nil outside a request.
func RequestOf(ctx context.Context) *Request {
	r, _ := ctx.Value(requestKey).(*Request)
	return r
}

// Log adds attributes to the log line of c's request.
func Log(c echo.Context, attrs ...slog.Attr) { RequestOf(c.Request().Context()).Log(attrs...) }

// Caller is who the request of ctx acts for (Request.Caller), "" when
// unknown.
func Caller(ctx context.Context) string {
	if r := RequestOf(ctx); r != nil {
		return r.Caller
	}
	return ""
}

// Claims are the verified claims of the request of ctx (jwt mode), nil
// otherwise.
func Claims(ctx context.Context) *auth.Claims {
	if r := RequestOf(ctx); r != nil {
		return r.Claims
	}
	return nil
}

// observe records a request's latency by method, route and status.
type observe func(method, route string, status int, elapsed time.Duration)

// serverSpan are a request's span's start options, made once.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// requestPath is the request path before next, the routed handler.
func (s *Server) requestPath(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		req := c.Request()
		r := &Request{ID: req.Header.Get(schemas.HeaderRequestID), Logged: s.logger.Enabled(req.Context(), slog.LevelInfo)}
		if !validRequestID(r.ID) {
			r.ID = uuid.NewString()
		}
		var span trace.Span
		if tracing.On() {
			// The caller's trace, from its traceparent, continued by a
			// span of this request's.
			ctx := tracing.Extract(req.Context(), req.Header)
			ctx, span = tracing.Tracer().Start(ctx, req.Method+" "+c.Path(), serverSpan...)
			req = req.WithContext(ctx)
			c.SetRequest(req)
		}
		h := c.Response().Header()
		h.Set(schemas.HeaderRequestID, r.ID)
		// Answers carry patrons, loans and locks: no cache keeps
		// them (a page's own files say otherwise for themselves).
		h.Set("Cache-Control", "no-store")
		cancel, err := s.run(c, r, next)
		if err != nil {
			c.Error(err)
		}
		elapsed := time.Since(start)
		if res := c.Response(); res.Committed {
			send(res.Writer, res.Status)
		}
		if cancel != nil {
			cancel()
		}
		status, route := c.Response().Status, c.Path()
		if route == "" {
			route = "unmatched"
		}
		s.observe(req.Method, route, status, elapsed)
		if span != nil {
			span.SetAttributes(attribute.String("http.request.method", req.Method), attribute.String("http.route", route),
				attribute.Int("http.response.status_code", status), attribute.String("request.id", r.ID))
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			span.End()
		}
		if !r.Logged {
			return nil
		}
		attrs := append([]slog.Attr{slog.String("method", req.Method), slog.String("route", route), slog.Int("status", status),
			slog.Duration("duration", elapsed)}, r.attrs...)
		// Who did it: the user, and the module acting for them; of a
		// token refused as not valid, who it claims to be.
		callerKey, moduleKey := "caller", "module"
		if r.Claimed {
			callerKey, moduleKey = "claimed_caller", "claimed_module"
		}
		if r.Caller != "" {
			attrs = append(attrs, slog.String(callerKey, r.Caller))
		}
		if r.Module != "" {
			attrs = append(attrs, slog.String(moduleKey, r.Module))
		}
		s.logger.LogAttrs(c.Request().Context(), slog.LevelInfo, "request", attrs...)
		return nil
	}
}

// run admits the request and runs its handler h, turning a panic in
// either into an error (a 500), logged with its stack by the error
// handler. Deferred work in the handler, such as releasing a lock, has run
// by then.
func (s *Server) run(c echo.Context, r *Request, h echo.HandlerFunc) (cancel context.CancelFunc, err error) {
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	if cancel, err = s.admit(c, r); err != nil {
		return nil, err
	}
	return cancel, h(c)
}

// admit admits a request before its handler runs. It bounds what the
// request may make the server hold: its headers (in size, and one value
// for each single-valued header), its body (in size, and in time: the
// body is read here and must arrive within the request's deadline), and
// the time spent on it. Who calls is settled before anything is read or
// done for them, by the permission the table names for the route. The
// request's context carries r from the start, so that an error is logged
// with the request id; once admitted, it carries what the service adds
// (Service.Admitted) and the deadline, which cancel releases.
func (s *Server) admit(c echo.Context, r *Request) (context.CancelFunc, error) {
	ctx := context.WithValue(c.Request().Context(), requestKey, r)
	req := c.Request().WithContext(ctx)
	c.SetRequest(req)
	if err := CheckHeaders(req, s.cfg.MaxHeaderBytes); err != nil {
		return nil, err
	}
	if err := s.authorize(c, r); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	if err := ReadBody(c.Response().Writer, req, s.cfg.MaxBodyBytes, deadline); err != nil {
		return nil, err
	}
	if s.svc.Longer != nil {
		deadline = deadline.Add(s.svc.Longer(req.Method, c.Path()))
	}
	if s.svc.Admitted != nil {
		ctx = s.svc.Admitted(ctx, r, req.Header)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	c.SetRequest(req.WithContext(ctx))
	return cancel, nil
}

// authorize lets the request through if its caller may use the route, by
// the permission the table names for it (auth.Guard.Check), and records
// who the caller is: a refused request is logged with who it is, or
// claims to be, too.
func (s *Server) authorize(c echo.Context, r *Request) error {
	req := c.Request()
	who, claims, err := s.cfg.Auth.Check(req.Context(), s.svc.Name, req.Method, c.Path(), req.Header)
	r.Caller, r.Module, r.Claimed, r.Claims = who.User, who.Module, who.Unverified, claims
	return err
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

// jsonSerializer is the servers' JSON serializer: an answer is encoded
// whole, with its Content-Length, so that the request path can send it
// before the request's bookkeeping (see send).
type jsonSerializer struct{ echo.DefaultJSONSerializer }

// Serialize implements echo.JSONSerializer.
func (jsonSerializer) Serialize(c echo.Context, v any, indent string) error {
	return writeJSON(c.Response(), v, indent)
}
