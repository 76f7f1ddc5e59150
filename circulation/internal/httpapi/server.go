// Package httpapi serves the circulation service over HTTP with echo:
// check-out and check-in by barcode, loans, the check-out lock settings,
// health and metrics. Handlers validate bodies against the JSON Schemas in
// package schemas and call the domain; every error becomes a FOLIO error
// envelope in one place, the server's HTTPErrorHandler.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/checkoutlock/schemas/errs"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/auth"
	"github.com/checkoutlock/schemas/reqlimit"
	"github.com/checkoutlock/schemas/serve"
)

// Config is what the HTTP layer needs from the configuration.
type Config struct {
	MaxBodyBytes int64
	// SIP2AdminURLs are the SIP2 doors' admin addresses, whose connected
	// kiosks the lock console lists.
	SIP2AdminURLs []string
	// MaxHeaderBytes bounds the request's header block; larger ones get
	// 431 with the envelope (net/http's own, larger, limit answers in
	// plain text).
	MaxHeaderBytes int
	// RequestTimeout bounds the work for one request, the reading of its
	// body included.
	RequestTimeout time.Duration
	// Auth is who may call: every route but health, readiness and metrics
	// requires its permission (schemas.Routes).
	Auth auth.Guard
	// Module signs circulation's module tokens, with which it calls
	// storage in jwt mode (nil in the other modes).
	Module *auth.ModuleSigner
	// Clients says who a client is behind the trusted proxies (the SIP2
	// door among them, naming its kiosks).
	Clients serve.Clients
	// SummaryRate is how many patron summaries a minute a caller without
	// the details permission may read, per account and client address (0:
	// no bound).
	SummaryRate int
}

// Services are the domain services the API serves.
type Services struct {
	Circulation *circulation.Service
	Settings    *circulation.Settings
	Storage     circulation.Storage
	// Console reads and releases locks for the operator's console.
	Console Console
	// Pass passes the pages' sign-in on to storage.
	Pass Passer
	// Ready reports whether circulation-storage answers.
	Ready func(ctx context.Context) error
}

// Server is the HTTP face of the circulation service.
type Server struct {
	cfg     Config
	svc     Services
	schemas *schemas.Set
	metrics *Metrics
	logger  *slog.Logger
	echo    *echo.Echo
	// summaries holds self-check machines to their rate of patron
	// summaries.
	summaries *summaryRate
}

// New builds the HTTP handler with every route and middleware.
func New(cfg Config, svc Services, sch *schemas.Set, metrics *Metrics, logger *slog.Logger) *Server {
	s := &Server{cfg: cfg, svc: svc, schemas: sch, metrics: metrics, logger: logger, summaries: newSummaryRate(cfg.SummaryRate)}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = serve.ErrorHandler(s.logger, "circulation", s.cfg.MaxBodyBytes)
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

	handle(e, http.MethodPost, "/circulation/check-out-by-barcode", s.checkOut, s.tenant)
	handle(e, http.MethodPost, "/circulation/check-in-by-barcode", s.checkIn, s.tenant)
	handle(e, http.MethodPost, "/circulation/renew-by-barcode", s.renew, s.tenant)
	get(e, "/circulation/patron-summary", s.patronSummary, s.tenant)
	handle(e, http.MethodPost, "/circulation/patron-pin/verify", s.verifyPatronPin, s.tenant)
	get(e, "/circulation/item-summary", s.itemSummary, s.tenant)
	get(e, "/circulation/loans", s.listLoans, s.tenant)
	get(e, "/circulation/loans/:id", s.getLoan, s.tenant)
	handle(e, http.MethodPost, "/circulation/loans/:id/claim-item-returned", s.claimItemReturned, s.tenant)
	handle(e, http.MethodPost, "/circulation/loans/:id/declare-item-lost", s.declareItemLost, s.tenant)
	get(e, "/circulation/settings/check-out-lock", s.getSettings, s.tenant)
	get(e, "/circulation/check-out-locks", s.listConsoleLocks, s.tenant)
	get(e, "/circulation/check-out-locks/history", s.lockHistory, s.tenant)
	handle(e, http.MethodDelete, "/circulation/check-out-locks/:id", s.releaseConsoleLock, s.tenant)
	get(e, "/circulation/kiosks", s.kiosks, s.tenant)
	s.pages(e)
	for _, p := range []string{"/authn/login-with-expiry", "/authn/refresh", "/authn/logout"} {
		handle(e, http.MethodPost, p, s.passAuthn, s.tenant)
	}
	get(e, "/bl-users/_self", s.self, s.tenant)
	handle(e, http.MethodPut, "/circulation/settings/check-out-lock", s.putSettings, s.tenant)
	handle(e, http.MethodPatch, "/circulation/settings/check-out-lock", s.patchSettings, s.tenant)
	s.echo = e
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// FOLIO's headers.
const (
	RequestIDHeader = schemas.HeaderRequestID
	TenantHeader    = schemas.HeaderTenant
	TokenHeader     = schemas.HeaderToken
)

// requestInfo is what the middleware learns of a request, in its context
// under requestKey, so that every log line written with the context names
// the request id (see LogHandler). The request path (serve.Middleware)
// makes it and admit fills it in, before the handler runs; nothing changes
// it after that but the handler's additions to the log line.
type requestInfo struct {
	serve.Request
	// claims are the verified claims of a jwt-mode request (authorize).
	claims *auth.Claims
}

type ctxKey int

const requestKey ctxKey = 0

// requestOf is the request's requestInfo; nil outside a request.
func requestOf(ctx context.Context) *requestInfo {
	r, _ := ctx.Value(requestKey).(*requestInfo)
	return r
}

// admit is the request path's admission (serve.Admit): it bounds what a
// request may make the server hold before its handler runs: its headers (in
// size, and one value for each single-valued header), its body (in size,
// and in time: the body is read here and must arrive within the request's
// deadline), and the time spent on it. Who calls is settled before anything
// is read or done for them. On success the request's context carries info
// and its deadline, and cancel releases the deadline's timer; on failure it
// carries info alone, so that the error is logged with the request id.
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
	ctx, cancel := context.WithDeadline(context.WithValue(parent, requestKey, info), deadline)
	c.SetRequest(req.WithContext(ctx))
	return &info.Request, cancel, nil
}

// tenant validates X-Okapi-Tenant and puts the Okapi context, which storage
// calls pass on, into the request's context.
func (s *Server) tenant(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		t := req.Header.Get(TenantHeader)
		if t == "" {
			return errs.Errorf(errs.KindBadRequest, schemas.CodeTenantMissing, "X-Okapi-Tenant header is required")
		}
		// Storage's rule, checked here too so a bad header is answered
		// before any call is made.
		if !schemas.ValidTenant(t) {
			shown := t
			if len(shown) > 64 {
				shown = shown[:64] + "…"
			}
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidTenant,
				"Invalid tenant %q: %s", shown, schemas.TenantRule).With("tenant", shown)
		}
		userID := req.Header.Get(schemas.HeaderUserID)
		if userID != "" && !s.schemas.ValidUUID(userID) {
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
				"%s must be a UUID", schemas.HeaderUserID).With(schemas.HeaderUserID, truncate(userID))
		}
		var id, who string
		if r := requestOf(req.Context()); r != nil {
			id, who = r.ID, r.Caller
		}
		who = strings.ToLower(who)
		token, err := s.storageToken(c, t, who)
		if err != nil {
			return err
		}
		ctx := circulation.WithOkapi(req.Context(), circulation.Okapi{Tenant: t, RequestID: id, Token: token, UserID: who,
			ClientAddress: s.cfg.Clients.Address(req)})
		c.SetRequest(req.WithContext(ctx))
		return next(c)
	}
}

// health is liveness: the process serves HTTP. It names the
// authentication mode, and warns while it is none.
func (s *Server) health(c echo.Context) error {
	return c.JSON(http.StatusOK, s.cfg.Auth.Health())
}

// ready reports whether circulation-storage answers.
func (s *Server) ready(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.svc.Ready(ctx); err != nil {
		return errs.Errorf(errs.KindUnavailable, schemas.CodeStorageUnavailable,
			"circulation-storage is not ready").Because(err)
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "UP"})
}

// LogHandler wraps h so that every record logged with a request's context
// carries the request id and tenant.
func LogHandler(h slog.Handler) slog.Handler { return requestLogHandler{h} }

type requestLogHandler struct{ slog.Handler }

func (h requestLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if req := requestOf(ctx); req != nil {
		r.AddAttrs(slog.String("request_id", req.ID))
	}
	if t := circulation.OkapiFrom(ctx).Tenant; t != "" {
		r.AddAttrs(slog.String("tenant", t))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestLogHandler) WithGroup(name string) slog.Handler {
	return requestLogHandler{h.Handler.WithGroup(name)}
}

// get routes GET and HEAD to h: net/http sends a HEAD answer's headers and
// discards its body.
func get(e *echo.Echo, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	handle(e, http.MethodGet, path, h, m...)
	handle(e, http.MethodHead, path, h, m...)
}

// handle routes method and path to h behind the route's middleware m,
// applied here, once (the first of m runs first): echo would apply a
// route's middleware anew on every request. A route the permission table
// leaves out panics here, when the server is built.
func handle(e *echo.Echo, method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	mustBeInPermissionTable(method, path)
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
