// Package httpapi serves the circulation service over HTTP, on the server
// both services are built on (serverkit): check-out and check-in by
// barcode, loans, the check-out lock settings, the pages and their
// sign-in. Handlers validate bodies against the JSON Schemas in package
// schemas and call the domain; every error becomes a FOLIO error envelope
// in one place, the kit's error handler.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"

	"github.com/checkoutlock/schemas/text"

	"github.com/labstack/echo/v4"

	"github.com/checkoutlock/circulation"
	"github.com/checkoutlock/schemas"
	"github.com/checkoutlock/schemas/errs"
	"github.com/checkoutlock/serverkit"
	"github.com/checkoutlock/serverkit/auth"
)

// Config is what the HTTP layer needs from the configuration.
type Config struct {
	// Config is the server's: who may call (every route but health,
	// readiness, metrics and the pages' sign-in requires its permission,
	// schemas.Routes), who a client is behind the trusted proxies (the
	// SIP2 door among them, naming its kiosks), and the bounds on a
	// request.
	serverkit.Config
	// SIP2AdminURLs are the SIP2 doors' admin addresses, whose connected
	// kiosks the lock console lists.
	SIP2AdminURLs []string
	// Module signs circulation's module tokens, with which it calls
	// storage in jwt mode (nil in the other modes).
	Module *auth.ModuleSigner
	// SummaryRate is how many patron summaries a minute a caller without
	// the details permission may read, per sign-in (per client address
	// for a token of none) (0: no bound); SummaryAccountSessions how many
	// sign-ins' worth one account's sign-ins read together at most.
	SummaryRate            int
	SummaryAccountSessions int
	// TraceLink is the trace viewer's address of a trace (nil: the
	// console shows trace ids without links).
	TraceLink func(traceID string) string
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
	// Presence keeps the times doors saw self-check machines on line.
	Presence Presence
	// Ready reports whether circulation-storage answers.
	Ready func(ctx context.Context) error
}

// Server is the HTTP face of the circulation service, on the server both
// services are built on (serverkit).
type Server struct {
	*serverkit.Server
	cfg     Config
	svc     Services
	metrics *Metrics
	// summaries holds self-check machines to their rate of patron
	// summaries.
	summaries *summaryRate
}

// New builds the HTTP handler with every route and middleware.
func New(cfg Config, svc Services, sch *schemas.Set, metrics *Metrics, logger *slog.Logger) *Server {
	s := &Server{cfg: cfg, svc: svc, metrics: metrics, summaries: newSummaryRate(cfg.SummaryRate, cfg.SummaryAccountSessions)}
	s.Server = serverkit.New(serverkit.Service{Name: schemas.ServiceCirculation, Ready: s.ready}, cfg.Config, sch, metrics.Metrics, logger)

	s.Handle(http.MethodPost, "/circulation/check-out-by-barcode", s.keyed(s.checkOut), s.tenant)
	s.Handle(http.MethodPost, "/circulation/check-in-by-barcode", s.keyed(s.checkIn), s.tenant)
	s.Handle(http.MethodPost, "/circulation/renew-by-barcode", s.keyed(s.renew), s.tenant)
	s.Handle(http.MethodPost, "/circulation/renew-by-id", s.keyed(s.renewByID), s.tenant)
	s.Get("/circulation/patron-summary", s.patronSummary, s.tenant)
	s.Handle(http.MethodPost, "/circulation/patron-pin/verify", s.verifyPatronPin, s.tenant)
	s.Get("/circulation/item-summary", s.itemSummary, s.tenant)
	s.Get("/circulation/settings/self-check", s.selfCheckSettings, s.tenant)
	s.Get("/circulation/loans", s.listLoans, s.tenant)
	s.Get("/circulation/loans/:id", s.getLoan, s.tenant)
	s.Handle(http.MethodPut, "/circulation/loans/:id", s.keyed(s.replaceLoan), s.tenant)
	s.Handle(http.MethodPost, "/circulation/loans/:id/claim-item-returned", s.keyed(s.claimItemReturned), s.tenant)
	s.Handle(http.MethodPost, "/circulation/loans/:id/change-due-date", s.keyed(s.changeDueDate), s.tenant)
	s.Handle(http.MethodPost, "/circulation/loans/:id/add-info", s.keyed(s.addInfo), s.tenant)
	s.Handle(http.MethodPost, "/circulation/loans/:id/declare-item-lost", s.keyed(s.declareItemLost), s.tenant)
	s.Handle(http.MethodPost, "/loan-anonymization/by-user/:userId", s.anonymizePatron, s.tenant)
	s.routeFeeFineActions()
	s.Handle(http.MethodPost, "/circulation/patron-fees/pay", s.keyed(s.payPatronFees), s.tenant)
	s.Handle(http.MethodPost, "/circulation/requests", s.keyed(s.placeRequest), s.tenant)
	s.Get("/circulation/requests", s.listRequests, s.tenant)
	s.Get("/circulation/requests/queue/item/:id", s.queue, s.tenant)
	s.Handle(http.MethodPost, "/circulation/requests/queue/item/:id/reorder", s.keyed(s.reorderQueue), s.tenant)
	// A static path wins over /:id in the router, whatever the order.
	s.Get("/circulation/requests/allowed-service-points", s.allowedServicePoints, s.tenant)
	s.Get("/circulation/requests/:id", s.getRequest, s.tenant)
	s.Handle(http.MethodPut, "/circulation/requests/:id", s.keyed(s.replaceRequest), s.tenant)
	s.Handle(http.MethodPost, "/circulation/requests/:id/move", s.keyed(s.moveRequest), s.tenant)
	s.Get("/circulation/settings/check-out-lock", s.getSettings, s.tenant)
	s.Get("/circulation/check-out-locks", s.listConsoleLocks, s.tenant)
	s.Get("/circulation/check-out-locks/history", s.lockHistory, s.tenant)
	s.Get("/circulation/check-out-locks/history.csv", s.lockHistoryCSV, s.tenant)
	s.Get("/circulation/patron-loans", s.patronLoans, s.tenant)
	s.Handle(http.MethodDelete, "/circulation/check-out-locks/:id", s.releaseConsoleLock, s.tenant)
	s.Get("/circulation/kiosks", s.kiosks, s.tenant)
	s.Get("/circulation/notices/failed", s.failedNotices, s.tenant)
	s.Handle(http.MethodPut, "/circulation/kiosks/presence/:id", s.seeKioskOnLine, s.tenant)
	s.Get("/circulation/kiosks/presence", s.kioskOnLine, s.tenant)
	s.pages()
	for _, p := range []string{"/authn/login-with-expiry", "/authn/refresh", "/authn/logout"} {
		s.Handle(http.MethodPost, p, s.passAuthn, s.tenant)
	}
	s.Get("/bl-users/_self", s.self, s.tenant)
	s.Handle(http.MethodPut, "/circulation/settings/check-out-lock", s.putSettings, s.tenant)
	s.Handle(http.MethodPatch, "/circulation/settings/check-out-lock", s.patchSettings, s.tenant)
	return s
}

// FOLIO's headers.
const (
	RequestIDHeader = schemas.HeaderRequestID
	TenantHeader    = schemas.HeaderTenant
	TokenHeader     = schemas.HeaderToken
)

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
			shown := text.Echoed(t)
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidTenant,
				"Invalid tenant %q: %s", shown, schemas.TenantRule).With("tenant", shown)
		}
		userID := req.Header.Get(schemas.HeaderUserID)
		if userID != "" && !s.Schemas().ValidUUID(userID) {
			return errs.Errorf(errs.KindBadRequest, schemas.CodeInvalidHeader,
				"%s must be a UUID", schemas.HeaderUserID).With(schemas.HeaderUserID, truncate(userID))
		}
		var id, who string
		if r := serverkit.RequestOf(req.Context()); r != nil {
			id, who = r.ID, r.Caller
			r.Tenant = t
		}
		who = strings.ToLower(who)
		token, err := s.storageToken(c, t, who)
		if err != nil {
			return err
		}
		ctx := circulation.WithOkapi(req.Context(), circulation.Okapi{Tenant: t, RequestID: id, Token: token, UserID: who,
			ClientAddress: s.cfg.Clients.Address(req), Kiosk: s.cfg.Clients.Kiosk(req), KioskNamed: s.cfg.Clients.KioskNamed(req)})
		c.SetRequest(req.WithContext(ctx))
		return next(c)
	}
}

// ready is readiness: circulation-storage answers.
func (s *Server) ready(ctx context.Context) error {
	if err := s.svc.Ready(ctx); err != nil {
		return errs.Errorf(errs.KindUnavailable, schemas.CodeStorageUnavailable,
			"circulation-storage is not ready").Because(err)
	}
	return nil
}
