// Package httpapi serves circulation-storage's services over HTTP, on the
// server both services are built on (serverkit): the check-out lock API,
// the records, the rules, the sign-in and the tenant interface. Handlers
// decode and validate (against the JSON Schemas in package schemas), call
// a domain service and encode; every error becomes a FOLIO error envelope
// in exactly one place, the kit's error handler.
package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	storage "github.com/checkoutlock/circulation-storage"
	"github.com/checkoutlock/circulation-storage/internal/waiting"
	"github.com/checkoutlock/circulation-storage/login"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/serverkit"
)

// Config is what the HTTP layer needs from the service's configuration.
type Config struct {
	// Config is the server's: who may call (every route but health,
	// readiness, metrics and signing in requires its permission,
	// schemas.Routes), who a client is behind the trusted proxies, and the
	// bounds on a request.
	serverkit.Config
	LockDefaultTTL time.Duration
	LockMaxTTL     time.Duration
	// LockMaxWait bounds waitMs; a waiting acquisition may take that long
	// beyond RequestTimeout.
	LockMaxWait time.Duration
	// MaxPageBytes bounds the records of one list answer, in bytes; a
	// larger page is refused (422 PAGE_TOO_LARGE) rather than built.
	MaxPageBytes int
	// LockFeatureDefault is the lock feature for a tenant that stored no
	// setting (CHECKOUT_LOCK_FEATURE_ENABLED), told to every caller of a
	// tenant route in schemas.HeaderLockDefault.
	LockFeatureDefault bool
	// EventsWritten, when set, is told after a write of loans, items or
	// requests succeeded: it recorded events for the outbox relay.
	EventsWritten func()
}

// Services are the domain services the API serves.
type Services struct {
	Locks storage.LockService
	// Waiters serves acquisitions that wait (waitMs), over Locks.
	Waiters *waiting.Waiters
	Tenants storage.TenantService
	Records storage.RecordService
	Loans   storage.LoanWriter
	Rules   storage.RulesService
	Counter storage.LoanCounter
	// CheckOuts reads what a check-out's validation needs.
	CheckOuts storage.CheckOutStore
	// Writes answers whether a write with an id landed.
	Writes storage.WriteLog
	// Presence keeps the times doors saw self-check machines on line.
	Presence storage.Presence
	// Anonymizer forgets the borrowers of closed loans asked by id.
	Anonymizer storage.LoanAnonymizer
	// Queues reorders items' request queues.
	Queues storage.QueueReorderer
	// FeeFines writes and checks the actions on fees/fines.
	FeeFines storage.FeeFineActor
	// Calendars reads service points' openings.
	Calendars storage.CalendarDays
	// Ready reports whether the service can do its work (the database answers).
	Ready func(ctx context.Context) error
	// Login signs people in (/authn); nil when the login is off.
	Login *login.Service
	// Pins keeps patrons' PINs (/patron-pin), whether or not the login is
	// on.
	Pins *login.Service
}

// Server is the HTTP face of circulation-storage, on the server both
// services are built on (serverkit).
type Server struct {
	*serverkit.Server
	cfg     Config
	svc     Services
	metrics *Metrics
}

// New builds the HTTP handler with every route and middleware.
func New(cfg Config, svc Services, sch *schemas.Set, metrics *Metrics, logger *slog.Logger) *Server {
	s := &Server{cfg: cfg, svc: svc, metrics: metrics}
	s.Server = serverkit.New(serverkit.Service{Name: schemas.ServiceStorage, Ready: s.ready, Longer: s.longer, Admitted: admitted},
		cfg.Config, sch, metrics.Metrics, logger)

	// The tenant check is route middleware, not a group's: a group with
	// middleware swallows unknown paths and methods into its own 404.
	s.Handle(http.MethodPost, "/_/tenant", s.postTenant, s.anyTenant)
	s.Get("/_/tenant/:id", s.getTenantJob, s.tenant)
	s.Handle(http.MethodDelete, "/_/tenant/:id", s.deleteTenantJob, s.tenant)

	s.Handle(http.MethodPost, locksPath, s.postLock, s.tenant)
	s.Get(locksPath, s.listLocks, s.tenant)
	s.Get(locksPath+"/history", s.lockHistory, s.tenant)
	s.Get(locksPath+"/:id", s.getLock, s.tenant)
	s.Handle(http.MethodDelete, locksPath+"/:id", s.deleteLock, s.tenant)

	// Static routes win over /:id, so these sit safely beside the records.
	s.Get("/loan-storage/loans/open-count", s.countOpenLoans, s.tenant)
	s.Get("/write-storage/writes/:id", s.getWrite, s.tenant)
	s.Handle(http.MethodPut, "/kiosk-presence-storage/spans/:id", s.seeOnLine, s.tenant)
	s.Get("/kiosk-presence-storage/spans", s.onLine, s.tenant)
	s.Handle(http.MethodPost, "/anonymize-storage-loans", s.anonymizeLoans, s.tenant)
	s.Handle(http.MethodPost, "/request-storage/queues/:id/reorder", s.announcing(storage.Requests, s.withWriteID(s.reorderQueue, reorderReplayed)), s.tenant)
	s.Handle(http.MethodPost, "/fee-fine-storage/actions", s.withWriteID(s.feeFineAct, feeFineActReplayed), s.tenant)
	s.Handle(http.MethodPost, "/fee-fine-storage/checks", s.feeFineCheck, s.tenant)
	s.Get("/calendar/dates/:servicePointId/surrounding-openings", s.calendarSurrounding, s.tenant)
	s.Get("/calendar/dates/:servicePointId/all-openings", s.calendarDays, s.tenant)
	s.Get("/check-out-storage/validation", s.validateCheckOut, s.tenant)
	s.Handle(http.MethodPost, "/check-out-storage/check-outs", s.announcing(storage.Loans, s.withWriteID(s.checkOutInOne, s.checkOutInOneReplayed)), s.tenant)
	s.Get("/check-out-storage/patron", s.patronSummary, s.tenant)
	s.Get("/circulation-rules-storage", s.getRules, s.tenant)
	s.Handle(http.MethodPut, "/circulation-rules-storage", s.putRules, s.tenant)
	s.Get("/circulation-rules-storage/loan-policy", s.matchLoanPolicy, s.tenant)
	s.Get("/circulation-rules-storage/allowed-service-points", s.allowedServicePoints, s.tenant)
	for _, r := range storage.Resources {
		s.routeRecords(r)
	}
	s.Handle(http.MethodPost, "/authn/login-with-expiry", s.login, s.tenant)
	s.Handle(http.MethodPost, "/authn/refresh", s.refresh, s.tenant)
	s.Handle(http.MethodPost, "/authn/logout", s.logout, s.tenant)
	s.Handle(http.MethodPost, "/authn/credentials", s.setCredentials, s.tenant)
	s.Get("/authn/sessions/:id", s.session, s.tenant)
	s.Handle(http.MethodPost, "/patron-pin", s.setPatronPin, s.tenant)
	s.Handle(http.MethodPost, "/patron-pin/verify", s.verifyPatronPin, s.tenant)
	return s
}

// locksPath is the check-out lock collection.
const locksPath = "/check-out-lock-storage"

// RequestIDHeader is FOLIO's request id header, echoed back on every answer.
const RequestIDHeader = schemas.HeaderRequestID

// TenantHeader carries the tenant id on every tenant-scoped call.
const TenantHeader = schemas.HeaderTenant

// longer is the time a request may take beyond REQUEST_TIMEOUT: an
// acquisition may wait for the lock on top of its work.
func (s *Server) longer(method, route string) time.Duration {
	// So may a check-out's write that acquires its lock
	// (schemas.HeaderAcquireLock).
	if method == http.MethodPost && (route == locksPath || route == storage.Loans.Path) {
		return s.cfg.LockMaxWait
	}
	return 0
}

// admitted is an admitted request's context with who it acts for
// (storage.WithCaller): what it writes is recorded as theirs.
func admitted(ctx context.Context, r *serverkit.Request, header http.Header) context.Context {
	if r.Caller != "" || r.Module != "" {
		caller := storage.Caller{User: r.Caller, Module: r.Module}
		if r.Module == schemas.ServiceCirculation {
			caller.Kiosk = schemas.KioskLocation(strings.TrimSpace(header.Get(schemas.HeaderKiosk)))
			_, caller.KioskNamed = header[http.CanonicalHeaderKey(schemas.HeaderKiosk)]
		}
		ctx = storage.WithCaller(ctx, caller)
	}
	return ctx
}

// tenant validates X-Okapi-Tenant for the routes that act on a tenant's
// data, and refuses a tenant that is not enabled (TENANT_NOT_INITIALIZED):
// every tenant's rows share the tables, so no statement would fail for
// it by itself.
func (s *Server) tenant(next echo.HandlerFunc) echo.HandlerFunc {
	return s.anyTenant(func(c echo.Context) error {
		c.Response().Header().Set(schemas.HeaderLockDefault, strconv.FormatBool(s.cfg.LockFeatureDefault))
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
		if r := serverkit.RequestOf(c.Request().Context()); r != nil {
			r.Tenant = string(t)
		}
		return next(c)
	}
}

// tenantOf returns the tenant the tenant middleware validated.
func tenantOf(c echo.Context) storage.Tenant {
	if r := serverkit.RequestOf(c.Request().Context()); r != nil {
		return storage.Tenant(r.Tenant)
	}
	return ""
}

// ready is readiness: the database answers.
func (s *Server) ready(ctx context.Context) error {
	if err := s.svc.Ready(ctx); err != nil {
		if !errors.As(err, new(*errs.Error)) {
			err = storage.Unavailable(err)
		}
		return err
	}
	return nil
}
