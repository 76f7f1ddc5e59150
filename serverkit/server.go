// Package serverkit is the HTTP server both services are built on, so
// that a rule of one service's request path is the other's too: the echo
// server and its one request path (request id, admission, panics, the
// answer sent before the bookkeeping, one log line), the routing that
// refuses a route missing from the permission table (schemas.Routes), the
// admission's bounds on a request and its check of the caller's token and
// permission (package auth), errors turned into FOLIO's envelope, the
// request metrics, who a client is behind the trusted proxies, and the
// net/http server's own settings and shutdown. Each service adds its
// routes, their handlers and its own middleware (the tenant's checks).
//
// The domain packages never import it; package schemas keeps the
// contract it serves (the permission table, the wire constants, the error
// kinds).
package serverkit

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/serverkit/auth"
)

// Config is what a service's configuration tells its server: who may
// call, who a client is, and the bounds on one request.
type Config struct {
	// Auth is who may call: every route but the open ones (health,
	// readiness, metrics, signing in) requires the permission the table
	// names for it.
	Auth auth.Guard
	// Clients says who a client is behind the trusted proxies.
	Clients Clients
	// MaxBodyBytes bounds a request's body; larger ones get 413.
	MaxBodyBytes int64
	// MaxHeaderBytes bounds the request's header block; larger ones get
	// 431 with the envelope (net/http's own, larger, limit answers in
	// plain text).
	MaxHeaderBytes int
	// RequestTimeout bounds the work for one request, the reading of its
	// body included.
	RequestTimeout time.Duration
}

// Service is what a service tells the kit of itself.
type Service struct {
	// Name is the service as the permission table names it
	// (schemas.ServiceCirculation, schemas.ServiceStorage), and the realm
	// its 401 answers name in WWW-Authenticate.
	Name string
	// Ready is readiness: whether the service can do its work. Its error
	// is the answer (a 503 the service chose).
	Ready func(ctx context.Context) error
	// Longer, when set, is the time a request of a route may take beyond
	// RequestTimeout (storage's acquisitions, which may wait for the lock),
	// the reading of its body excepted.
	Longer func(method, route string) time.Duration
	// Admitted, when set, adds to an admitted request's context what the
	// service's domain reads of it (who it acts for, and what its
	// headers say of that).
	Admitted func(ctx context.Context, r *Request, header http.Header) context.Context
}

// Server is a service's HTTP server: routes are added with Handle and
// Get, each in the permission table.
type Server struct {
	cfg     Config
	svc     Service
	schemas *schemas.Set
	logger  *slog.Logger
	metrics *Metrics
	echo    *echo.Echo
	// observe records each request's latency (the metrics' own, but for
	// tests of the request path).
	observe observe
}

// readyTimeout bounds readiness's check.
const readyTimeout = 2 * time.Second

// New builds the server of svc with the routes every service serves
// openly: liveness (/admin/health, naming the authentication mode and its
// warnings), readiness (/admin/ready), the metrics (/metrics) and the
// service's OpenAPI description (schemas.OpenAPIPath). Request
// bodies are validated against the JSON Schemas in sch (Body); logger is
// the service's.
func New(svc Service, cfg Config, sch *schemas.Set, metrics *Metrics, logger *slog.Logger) *Server {
	s := &Server{cfg: cfg, svc: svc, schemas: sch, logger: logger, metrics: metrics, observe: metrics.observe}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = errorHandler(logger, svc.Name, cfg.MaxBodyBytes)
	e.JSONSerializer = jsonSerializer{}
	e.Pre(middleware.RemoveTrailingSlash())
	// One middleware for everything every request needs (echo builds a
	// request's chain of middleware anew for each request, so one is
	// cheaper than several); a route's own middleware is applied once, when
	// it is routed (see Handle).
	e.Use(s.requestPath)
	s.echo = e

	s.Get("/admin/health", func(c echo.Context) error { return c.JSON(http.StatusOK, s.cfg.Auth.Health()) })
	s.Get("/admin/ready", s.ready)
	s.Get("/metrics", echo.WrapHandler(metrics.Handler()))
	openAPI := schemas.OpenAPI(svc.Name)
	s.Get(schemas.OpenAPIPath, func(c echo.Context) error { return c.JSONBlob(http.StatusOK, openAPI) })
	return s
}

// ready is readiness: the service's own check, within readyTimeout.
func (s *Server) ready(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
	defer cancel()
	if err := s.svc.Ready(ctx); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "UP"})
}

// Schemas are the JSON Schemas the server validates against.
func (s *Server) Schemas() *schemas.Set { return s.schemas }

// Logger is the service's logger.
func (s *Server) Logger() *slog.Logger { return s.logger }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Get routes GET and HEAD to h: net/http sends a HEAD answer's headers and
// discards its body. HEAD goes by GET's permission.
func (s *Server) Get(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	s.Handle(http.MethodGet, path, h, m...)
	s.Handle(http.MethodHead, path, h, m...)
}

// Handle routes method and path to h behind the route's middleware m,
// applied here, once (the first of m runs first): echo would apply a
// route's middleware anew on every request.
//
// A route the permission table does not name among the service's panics
// here, as the server is built: the service does not start. Were it
// routed, it would be found only at run time, and then as no permission
// at all: auth.Guard.Check lets a route the table does not know through
// (the unrouted requests, which the service answers 404 or 405), and in
// jwt mode circulation's calls to storage for it would carry no module
// permissions.
func (s *Server) Handle(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	if err := InPermissionTable(s.svc.Name, method, path); err != nil {
		panic("serverkit: " + err.Error())
	}
	for i := len(m) - 1; i >= 0; i-- {
		h = m[i](h)
	}
	s.echo.Add(method, path, h)
}

// InPermissionTable says whether the permission table names the route
// (method, and path in a router's notation or FOLIO's) among service's:
// an error naming it when it does not. HEAD is served wherever GET is, by
// GET's permission.
func InPermissionTable(service, method, path string) error {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if _, known := schemas.PermissionFor(service, method, path); !known {
		return fmt.Errorf("%s %s is served by %s but not in the permission table (schemas.Routes)", method, path, service)
	}
	return nil
}

// Route is a route served, as the start-up log lists it: method, path
// in FOLIO's notation ("/users/{id}") and the permission it requires
// ("" for an open route).
type Route struct {
	Method     string `json:"method"`
	Path       string `json:"path"`
	Permission string `json:"permission"`
}

// Routes lists the routes served; HEAD, served wherever GET is, is left
// out.
func (s *Server) Routes() []Route {
	var out []Route
	for _, r := range s.echo.Routes() {
		if r.Method == http.MethodHead || r.Method == echo.RouteNotFound {
			continue
		}
		p, _ := schemas.PermissionFor(s.svc.Name, r.Method, r.Path)
		out = append(out, Route{Method: r.Method, Path: auth.Pattern(r.Path), Permission: p})
	}
	return out
}

// CheckRoutes compares the routes a server of service serves (as Routes
// lists them) with the permission table: each must be in the table, with
// the permission the table names, and each of the service's routes in the
// table must be served. It says what differs, one line each; nothing
// when they agree.
func CheckRoutes(service string, served []Route) []string {
	var diffs []string
	seen := map[[2]string]bool{}
	for _, r := range served {
		seen[[2]string{r.Method, r.Path}] = true
		p, known := schemas.PermissionFor(service, r.Method, r.Path)
		switch {
		case !known:
			diffs = append(diffs, fmt.Sprintf("%s %s is served but not in the permission table", r.Method, r.Path))
		case p != r.Permission:
			diffs = append(diffs, fmt.Sprintf("%s %s is served requiring %q, the permission table says %q", r.Method, r.Path, r.Permission, p))
		}
	}
	for _, r := range schemas.RoutesOf(service) {
		if !seen[[2]string{r.Method, r.Path}] {
			diffs = append(diffs, fmt.Sprintf("%s %s is in the permission table but not served", r.Method, r.Path))
		}
	}
	return diffs
}

// HTTP is the net/http server of s: a request's headers must arrive within
// 5 s (its body is read on the request's deadline by the admission), an
// answer must be written within writeTimeout (the longest a request of the
// service can take, and a little more: a client that does not read its
// answer is cut off then), an idle connection is kept 2 minutes, and
// net/http's own bound on headers stays above the service's
// (Config.MaxHeaderBytes), so that the service answers oversized ones
// itself, with the envelope.
//
// It is made once every route is routed: the routes served must then be
// the service's in the permission table (CheckRoutes), or it panics, and
// the service does not start. They are logged, with their permissions.
func (s *Server) HTTP(writeTimeout time.Duration) *http.Server {
	routes := s.Routes()
	if diffs := CheckRoutes(s.svc.Name, routes); len(diffs) > 0 {
		panic("serverkit: the routes served are not the permission table's: " + strings.Join(diffs, "; "))
	}
	s.logger.Info("routes", slog.Any("routes", routes))
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    http.DefaultMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
}
