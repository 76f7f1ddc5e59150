// Package httpapi serves circulation-storage's services over HTTP with echo:
// the check-out lock API, the tenant interface, health and metrics. Handlers
// decode and validate (against the JSON Schemas in package schemas), call a
// domain service and encode; every error becomes a FOLIO error envelope in
// exactly one place, the server's HTTPErrorHandler.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/checkoutlock/schemas/errs"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/login"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
	"github.com/checkoutlock/schemas/reqlimit"
	"github.com/checkoutlock/schemas/serve"
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
	// Clients says who a client is behind the trusted proxies.
	Clients serve.Clients
	// EventsWritten, when set, is told after a write of loans, items or
	// requests succeeded: it recorded events for the outbox relay.
	EventsWritten func()
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
	// Login signs people in (/authn); nil when the login is off.
	Login *login.Service
	// Pins keeps patrons' PINs (/patron-pin), whether or not the login is
	// on.
	Pins *login.Service
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
	e.HTTPErrorHandler = serve.ErrorHandler(s.logger, "circulation-storage", s.cfg.MaxBodyBytes)
	e.JSONSerializer = serve.JSON{}
	e.Pre(middleware.RemoveTrailingSlash())
	// One middleware for everything every request needs (echo builds a
	// request's chain of middleware anew for each request, so one is
	// cheaper than several); a route's own middleware is applied once, when
	// it is routed (see handle).
	e.Use(serve.Middleware(logger, s.admit, metrics.observeRequest))

	get(e, "/admin/health", s.health)
	get(e, "/admin/ready", s.ready)
	get(e, "/metrics", echo.WrapHandler(metrics.Handler()))

	// The tenant check is route middleware, not a group's: a group with
	// middleware swallows unknown paths and methods into its own 404.
	handle(e, http.MethodPost, "/_/tenant", s.postTenant, s.anyTenant)
	get(e, "/_/tenant/:id", s.getTenantJob, s.tenant)
	handle(e, http.MethodDelete, "/_/tenant/:id", s.deleteTenantJob, s.tenant)

	handle(e, http.MethodPost, locksPath, s.postLock, s.tenant)
	get(e, locksPath, s.listLocks, s.tenant)
	get(e, locksPath+"/history", s.lockHistory, s.tenant)
	get(e, locksPath+"/:id", s.getLock, s.tenant)
	handle(e, http.MethodDelete, locksPath+"/:id", s.deleteLock, s.tenant)

	// Static routes win over /:id, so these sit safely beside the records.
	get(e, "/loan-storage/loans/open-count", s.countOpenLoans, s.tenant)
	get(e, "/check-out-storage/validation", s.validateCheckOut, s.tenant)
	get(e, "/check-out-storage/patron", s.patronSummary, s.tenant)
	get(e, "/circulation-rules-storage", s.getRules, s.tenant)
	handle(e, http.MethodPut, "/circulation-rules-storage", s.putRules, s.tenant)
	get(e, "/circulation-rules-storage/loan-policy", s.matchLoanPolicy, s.tenant)
	for _, r := range storage.Resources {
		s.routeRecords(e, r)
	}
	handle(e, http.MethodPost, "/authn/login-with-expiry", s.login, s.tenant)
	handle(e, http.MethodPost, "/authn/refresh", s.refresh, s.tenant)
	handle(e, http.MethodPost, "/authn/logout", s.logout, s.tenant)
	handle(e, http.MethodPost, "/authn/credentials", s.setCredentials, s.tenant)
	get(e, "/authn/sessions/:id", s.session, s.tenant)
	handle(e, http.MethodPost, "/patron-pin", s.setPatronPin, s.tenant)
	handle(e, http.MethodPost, "/patron-pin/verify", s.verifyPatronPin, s.tenant)

	s.echo = e
	return s
}

// locksPath is the check-out lock collection.
const locksPath = "/check-out-lock-storage"

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// requestInfo is what the middleware learns of a request, in its context
// under requestKey, so that every log line written with the context names
// the request id and tenant (see LogHandler). The request path
// (serve.Middleware) makes it and admit fills it in, before the handler
// runs; nothing changes it after that but the tenant middleware and the
// handler's additions to the log line.
type requestInfo struct {
	serve.Request
	tenant storage.Tenant
	// claims are the verified claims of a jwt-mode request (see
	// authorize).
	claims *auth.Claims
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

// admit is the request path's admission (serve.Admit): it bounds what a
// request may make the server hold before its handler runs: its headers (in
// size, and one value for each single-valued header), its body (in size,
// and in time: the body is read here and must arrive within the request's
// deadline), and the time spent on it. Who calls is settled before anything
// is read or done for them. On success the request's context carries info,
// who it acts for (storage.WithCaller) and its deadline, and cancel
// releases the deadline's timer; on failure it carries info alone, so that
// the error is logged with the request id.
func (s *Server) admit(c echo.Context, r serve.Request) (_ *serve.Request, cancel context.CancelFunc, err error) {
	info := &requestInfo{Request: r}
	req := c.Request()
	parent := req.Context()
	defer func() {
		if err != nil {
			c.SetRequest(req.WithContext(context.WithValue(parent, requestKey, info)))
		}
	}()
	if err := reqlimit.CheckHeaders(req, s.cfg.MaxHeaderBytes); err != nil {
		return &info.Request, nil, err
	}
	if err := s.authorize(c, info); err != nil {
		return &info.Request, nil, err
	}
	deadline := time.Now().Add(s.cfg.RequestTimeout)
	if err := reqlimit.ReadBody(c.Response().Writer, req, s.cfg.MaxBodyBytes, deadline); err != nil {
		return &info.Request, nil, err
	}
	if req.Method == http.MethodPost && c.Path() == locksPath {
		// An acquisition may wait for the lock on top of its work.
		deadline = deadline.Add(s.cfg.LockMaxWait)
	}
	ctx := context.WithValue(parent, requestKey, info)
	if info.Caller != "" || info.Module != "" {
		ctx = storage.WithCaller(ctx, storage.Caller{User: info.Caller, Module: info.Module})
	}
	ctx, cancel = context.WithDeadline(ctx, deadline)
	c.SetRequest(req.WithContext(ctx))
	return &info.Request, cancel, nil
}

// tenant validates X-Okapi-Tenant for the routes that act on a tenant's
// data, and refuses a tenant that is not enabled (TENANT_NOT_INITIALIZED):
// every tenant's rows share the tables, so no statement would fail for
// it by itself.
func (s *Server) tenant(next echo.HandlerFunc) echo.HandlerFunc {
	return s.anyTenant(func(c echo.Context) error {
		t := tenantOf(c)
		enabled, err := s.svc.Tenants.Enabled(c.Request().Context(), t)
		if err != nil {
			return err
		}
		if !enabled {
			return storage.TenantNotInitialized(t)
		}
		return next(c)
	})
}

// anyTenant validates X-Okapi-Tenant, enabled or not: for the tenant
// interface, which enables tenants.
func (s *Server) anyTenant(next echo.HandlerFunc) echo.HandlerFunc {
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
		if !errors.As(err, new(*errs.Error)) {
			err = storage.Unavailable(err)
		}
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "UP"})
}

// get routes GET and HEAD to h: net/http sends a HEAD answer's headers and
// discards its body.
func get(e *echo.Echo, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	handle(e, http.MethodGet, path, h, m...)
	handle(e, http.MethodHead, path, h, m...)
}

// handle routes method and path to h behind the route's middleware m,
// applied here, once (the first of m runs first): echo would apply a
// route's middleware anew on every request.
func handle(e *echo.Echo, method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	for i := len(m) - 1; i >= 0; i-- {
		h = m[i](h)
	}
	e.Add(method, path, h)
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
	if r := requestOf(c.Request().Context()); r != nil {
		r.Log(attrs...)
	}
}
