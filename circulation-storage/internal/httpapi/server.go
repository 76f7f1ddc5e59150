// Package httpapi serves circulation-storage's services over HTTP with echo:
// the check-out lock API, the tenant interface, health and metrics. Handlers
// decode and validate (against the JSON Schemas in package schemas), call a
// domain service and encode; every error becomes a FOLIO error envelope in
// exactly one place, the server's HTTPErrorHandler.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
	"github.com/checkoutlock/schemas/reqlimit"
)

// Config is what the HTTP layer needs from the service's configuration.
type Config struct {
	LockDefaultTTL time.Duration
	LockMaxTTL     time.Duration
	// LockMaxWait bounds waitMs; a waiting acquisition may take that long
	// beyond RequestTimeout.
	LockMaxWait  time.Duration
	MaxBodyBytes int64
	// MaxHeaderBytes bounds the request's header block; larger ones get
	// 431 with the envelope (net/http's own, larger, limit answers in
	// plain text).
	MaxHeaderBytes int
	// MaxPageBytes bounds the records of one list answer, in bytes; a
	// larger page is refused (422 PAGE_TOO_LARGE) rather than built.
	MaxPageBytes int
	// RequestTimeout bounds the work for one request, the reading of its
	// body included.
	RequestTimeout time.Duration
	// Auth is who may call: every route but health, readiness and metrics
	// requires its permission (schemas.Routes).
	Auth auth.Guard
}

// Services are the domain services the API serves.
type Services struct {
	Locks storage.LockService
	// Waiters serves acquisitions that wait (waitMs), over Locks.
	Waiters *storage.Waiters
	Tenants storage.TenantService
	Records storage.RecordService
	Loans   storage.LoanWriter
	Rules   storage.RulesService
	Counter storage.LoanCounter
	// CheckOuts reads what a check-out's validation needs.
	CheckOuts storage.CheckOutStore
	// Ready reports whether the service can do its work (the database answers).
	Ready func(ctx context.Context) error
}

// Server is the HTTP face of circulation-storage.
type Server struct {
	cfg     Config
	svc     Services
	schemas *schemas.Set
	metrics *Metrics
	logger  *slog.Logger
	echo    *echo.Echo
}

// New builds the HTTP handler with every route and middleware.
func New(cfg Config, svc Services, sch *schemas.Set, metrics *Metrics, logger *slog.Logger) *Server {
	s := &Server{cfg: cfg, svc: svc, schemas: sch, metrics: metrics, logger: logger}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = s.handleError
	e.Pre(middleware.RemoveTrailingSlash())
	// Order matters: observe sees the final status of everything below it,
	// including panics that recoverPanic turns into errors.
	e.Use(s.requestID, s.observe, s.recoverPanic, s.limits)

	get(e, "/admin/health", s.health)
	get(e, "/admin/ready", s.ready)
	get(e, "/metrics", echo.WrapHandler(metrics.Handler()))

	// The tenant check is route middleware, not a group's: a group with
	// middleware swallows unknown paths and methods into its own 404.
	e.POST("/_/tenant", s.postTenant, s.tenant)
	get(e, "/_/tenant/:id", s.getTenantJob, s.tenant)
	e.DELETE("/_/tenant/:id", s.deleteTenantJob, s.tenant)

	e.POST(locksPath, s.postLock, s.tenant)
	get(e, locksPath, s.listLocks, s.tenant)
	get(e, locksPath+"/history", s.lockHistory, s.tenant)
	get(e, locksPath+"/:id", s.getLock, s.tenant)
	e.DELETE(locksPath+"/:id", s.deleteLock, s.tenant)

	// Static routes win over /:id, so these sit safely beside the records.
	get(e, "/loan-storage/loans/open-count", s.countOpenLoans, s.tenant)
	get(e, "/check-out-storage/validation", s.validateCheckOut, s.tenant)
	get(e, "/circulation-rules-storage", s.getRules, s.tenant)
	e.PUT("/circulation-rules-storage", s.putRules, s.tenant)
	get(e, "/circulation-rules-storage/loan-policy", s.matchLoanPolicy, s.tenant)
	for _, r := range storage.Resources {
		s.routeRecords(e, r)
	}

	s.echo = e
	return s
}

// locksPath is the check-out lock collection.
const locksPath = "/check-out-lock-storage"

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// requestInfo is what the middleware learns of a request, in its context
// under requestKey, so that every log line written with the context names
// the request id and tenant (see LogHandler). The requestID middleware puts
// it there; the middleware after it fill in the rest, before the handler
// runs, and nothing changes it after that.
type requestInfo struct {
	id     string
	tenant storage.Tenant
	// caller is who the request acts for, and claims the verified claims
	// of a jwt-mode request (see authorize).
	caller string
	claims *auth.Claims
	// logged says whether the request's line is logged (info is
	// enabled), and logAttrs are what the handler adds to it.
	logged   bool
	logAttrs []slog.Attr
}

type ctxKey int

const requestKey ctxKey = 0

// requestOf is the request's requestInfo; nil outside a request.
func requestOf(ctx context.Context) *requestInfo {
	r, _ := ctx.Value(requestKey).(*requestInfo)
	return r
}

// RequestIDHeader is FOLIO's request id header, echoed back on every answer.
const RequestIDHeader = schemas.HeaderRequestID

// TenantHeader carries the tenant id on every tenant-scoped call.
const TenantHeader = schemas.HeaderTenant

// requestID takes the caller's request id, or makes one, and echoes it back.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		c.Response().Header().Set(RequestIDHeader, id)
		req := c.Request()
		info := &requestInfo{id: id, logged: s.logger.Enabled(req.Context(), slog.LevelInfo)}
		c.SetRequest(req.WithContext(context.WithValue(req.Context(), requestKey, info)))
		return next(c)
	}
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

// observe logs each request once, at info (method, route, status,
// duration; the request id and tenant come with the context, and handlers
// may add attributes with logAttrs), and records its latency. Errors are turned
// into responses here (c.Error) so the log and the metric see the real status.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		elapsed := time.Since(start)
		status := c.Response().Status
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		s.metrics.observeRequest(c.Request().Method, route, status, elapsed)
		ctx := c.Request().Context()
		r := requestOf(ctx)
		if r == nil || !r.logged {
			return nil
		}
		attrs := append([]slog.Attr{slog.String("method", c.Request().Method), slog.String("route", route), slog.Int("status", status),
			slog.Duration("duration", elapsed)}, r.logAttrs...)
		s.logger.LogAttrs(ctx, slog.LevelInfo, "request", attrs...)
		return nil
	}
}

// recoverPanic turns a panic in a handler into an error (a 500), logged with
// its stack by the error handler.
func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		return next(c)
	}
}

// limits bounds what a request may make the server hold: its headers (in
// size, and one value for each single-valued header), its body (in size,
// and in time: the body is read here, before the handler, and must arrive
// within the request's deadline), and the time spent on it.
func (s *Server) limits(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := reqlimit.CheckHeaders(c.Request(), s.cfg.MaxHeaderBytes); err != nil {
			return err
		}
		// Who calls is settled before anything is read or done for them.
		if err := s.authorize(c); err != nil {
			return err
		}
		deadline := time.Now().Add(s.cfg.RequestTimeout)
		if err := reqlimit.ReadBody(c.Response(), c.Request(), s.cfg.MaxBodyBytes, deadline); err != nil {
			return err
		}
		if c.Request().Method == http.MethodPost && c.Path() == locksPath {
			// An acquisition may wait for the lock on top of its work.
			deadline = deadline.Add(s.cfg.LockMaxWait)
		}
		ctx := c.Request().Context()
		if r := requestOf(ctx); r != nil && r.caller != "" {
			ctx = storage.WithUser(ctx, r.caller)
		}
		ctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		c.SetRequest(c.Request().WithContext(ctx))
		return next(c)
	}
}

// tenant validates X-Okapi-Tenant for the routes that act on a tenant's data.
func (s *Server) tenant(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		t, err := storage.ParseTenant(c.Request().Header.Get(TenantHeader))
		if err != nil {
			return err
		}
		if r := requestOf(c.Request().Context()); r != nil {
			r.tenant = t
		}
		return next(c)
	}
}

// tenantOf returns the tenant the tenant middleware validated.
func tenantOf(c echo.Context) storage.Tenant {
	if r := requestOf(c.Request().Context()); r != nil {
		return r.tenant
	}
	return ""
}

// health is liveness: the process serves HTTP. It names the
// authentication mode, and warns while it is none.
func (s *Server) health(c echo.Context) error {
	return c.JSON(http.StatusOK, s.cfg.Auth.Health())
}

// ready is readiness: the database answers.
func (s *Server) ready(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.svc.Ready(ctx); err != nil {
		if !errors.As(err, new(*storage.Error)) {
			err = storage.Unavailable(err)
		}
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "UP"})
}

// get routes GET and HEAD to h: net/http sends a HEAD answer's headers and
// discards its body.
func get(e *echo.Echo, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	e.Match([]string{http.MethodGet, http.MethodHead}, path, h, m...)
}

// Routes lists the routes served, method and path in FOLIO's notation
// ("/users/{id}"); HEAD, served wherever GET is, is left out.
func (s *Server) Routes() [][2]string {
	var out [][2]string
	for _, r := range s.echo.Routes() {
		if r.Method == http.MethodHead || r.Method == echo.RouteNotFound {
			continue
		}
		out = append(out, [2]string{r.Method, auth.Pattern(r.Path)})
	}
	return out
}

// logAttrs adds attributes to the request's log line.
func logAttrs(c echo.Context, attrs ...slog.Attr) {
	if r := requestOf(c.Request().Context()); r != nil && r.logged {
		r.logAttrs = append(r.logAttrs, attrs...)
	}
}
